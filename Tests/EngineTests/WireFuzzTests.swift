import Foundation
import Testing
@testable import Engine
@testable import Farm

/// The wire decoder on the fuzzer's seeds and on every input kept from fuzzing.
@Suite struct WireFuzzTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/wire")

    static func files(_ sub: String) -> [URL] {
        let dir = root.appendingPathComponent(sub)
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
            .map { dir.appendingPathComponent($0) }
    }

    @Test func everySeedDecodesAndSurvivesReEncoding() throws {
        let seeds = Self.files("seeds")
        #expect(seeds.count == WireMessage.examples.count, "regenerate with: swift run fuzz-wire --write-seeds Tests/Fuzz/wire/seeds")
        for url in seeds {
            let e = try #require(Envelope.decode(try Data(contentsOf: url)), "\(url.lastPathComponent) no longer decodes")
            #expect(Envelope.decode(e.encoded()) != nil)
        }
    }

    /// Inputs kept from fuzzing, and hand-made malformed frames that a decoder must refuse
    /// (`reject-*`): protocol 1's JSON envelopes (a peer that was not upgraded), and protocol 2
    /// frames with no version or version 1, an unknown message, a field of the wrong wire type, no
    /// or a wrong end mark, a length past the end, and render documents of another schema or of the
    /// wrong type. Whatever does decode must survive re-encoding.
    @Test func regressionInputsDecodeOrAreRejected() throws {
        let files = Self.files("regressions")
        #expect(files.filter { $0.lastPathComponent.hasPrefix("reject-") }.count >= 14)
        for url in files {
            let decoded = Envelope.decode(try Data(contentsOf: url))
            if url.lastPathComponent.hasPrefix("reject-") {
                #expect(decoded == nil, "\(url.lastPathComponent) was accepted")
            } else if let e = decoded {
                #expect(Envelope.decode(e.encoded()) != nil, "\(url.lastPathComponent)")
            }
        }
    }

    /// Every strict prefix of every seed is refused (a decoder that accepts half a message would
    /// act on garbage), and single flipped bytes never crash it.
    @Test func truncatedAndFlippedSeedsNeverDecodeToGarbage() throws {
        for url in Self.files("seeds") {
            let data = try Data(contentsOf: url)
            for cut in stride(from: 0, to: data.count - 1, by: max(1, data.count / 40)) {
                #expect(Envelope.decode(data.prefix(cut)) == nil, "\(url.lastPathComponent) cut at \(cut) decoded")
            }
            for at in stride(from: 0, to: data.count, by: max(1, data.count / 40)) {
                var flipped = data
                flipped[flipped.startIndex + at] ^= 0x20
                if let e = Envelope.decode(flipped) { #expect(Envelope.decode(e.encoded()) != nil) }
            }
        }
    }
}
