import CSupport
import Foundation

/// SHA-256, hex encoded. Used for stage keys and content addresses.
public struct SHA256Hasher: ~Copyable {
    private var ctx = tl_sha256_ctx()
    public init() { tl_sha256_init(&ctx) }
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        tl_sha256_update(&ctx, base, bytes.count)
    }
    public mutating func update(_ data: Data) { data.withUnsafeBytes { update($0) } }
    public mutating func update(_ string: String) { update(Data(string.utf8)) }
    public consuming func finalize() -> String {
        var out = [UInt8](repeating: 0, count: 32)
        tl_sha256_final(&ctx, &out)
        let digits = Array("0123456789abcdef".utf8)
        var hex = [UInt8](repeating: 0, count: out.count * 2)
        for (i, b) in out.enumerated() { hex[2 * i] = digits[Int(b >> 4)]; hex[2 * i + 1] = digits[Int(b & 15)] }
        return String(decoding: hex, as: UTF8.self)
    }

    /// Whether the CPU's SHA extensions do the hashing here (x86 SHA-NI), else portable C.
    public static var accelerated: Bool { tl_sha256_accelerated() != 0 }

    /// Uses the CPU's SHA extensions where it has them (the default), or the portable code only;
    /// returns whether they are in use now. The digests are the same either way.
    @discardableResult
    public static func useAcceleration(_ on: Bool) -> Bool { tl_sha256_use_acceleration(on ? 1 : 0) != 0 }

    public static func hex(_ data: Data) -> String { var h = SHA256Hasher(); h.update(data); return h.finalize() }
    public static func hex(_ string: String) -> String { hex(Data(string.utf8)) }

    /// Hashes a file in 1 MiB chunks.
    public static func hex(fileAt path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        defer { try? handle.close() }
        var h = SHA256Hasher()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { h.update(chunk) }
        return h.finalize()
    }
}
