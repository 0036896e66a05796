import Foundation
import Testing
import ThreadlineCore

/// SHA-256 keys every artifact and stage: it must be the standard function however the input is
/// split into updates (swift-crypto computes it; these pin what the keys and addresses mean).
@Suite(.serialized) struct HashTests {
    @Test func standardVectors() {
        #expect(SHA256Hasher.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Hasher.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Hasher.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // One million 'a's (FIPS 180-2's long vector): many whole blocks in one update.
        #expect(SHA256Hasher.hex(Data(repeating: UInt8(ascii: "a"), count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func anySplitOfTheInputGivesTheSameDigest() throws {
        var rng = SystemRandomNumberGenerator()
        let data = Data((0..<200_003).map { _ in UInt8.random(in: 0...255, using: &rng) })
        let whole = SHA256Hasher.hex(data)
        for seed in 1...5 {
            var h = SHA256Hasher()
            var at = 0, step = seed
            while at < data.count {
                let n = min(step, data.count - at)
                h.update(data.subdata(in: at..<(at + n)))
                at += n
                step = (step * 7 + seed) % 4099 + 1      // 1 byte to 4 KiB: partial blocks, many blocks
            }
            #expect(h.finalize() == whole, "split \(seed)")
        }
        // The same bytes through the system's sha256sum, when there is one.
        let file = NSTemporaryDirectory() + "threadline-hash-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: file) }
        _ = FileManager.default.createFile(atPath: file, contents: data)
        #expect(try SHA256Hasher.hex(fileAt: file) == whole)
        if let sum = try? shell("/usr/bin/sha256sum", [file]) {
            #expect(sum.prefix(64) == whole)
        }
    }

    func shell(_ tool: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: out, as: UTF8.self)
    }
}
