import Crypto
import Foundation

/// SHA-256, hex encoded. Used for stage keys and content addresses. swift-crypto computes it
/// (BoringSSL's code, which uses the CPU's SHA extensions where it has them).
public struct SHA256Hasher: ~Copyable {
    private var hash = SHA256()
    public init() {}
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        hash.update(bufferPointer: bytes)
    }
    public mutating func update(_ data: Data) { hash.update(data: data) }
    public mutating func update(_ string: String) { update(Data(string.utf8)) }
    public consuming func finalize() -> String {
        let digits = Array("0123456789abcdef".utf8)
        var hex = [UInt8](repeating: 0, count: SHA256.byteCount * 2)
        for (i, b) in hash.finalize().enumerated() { hex[2 * i] = digits[Int(b >> 4)]; hex[2 * i + 1] = digits[Int(b & 15)] }
        return String(decoding: hex, as: UTF8.self)
    }

    public static func hex(_ data: Data) -> String { var h = SHA256Hasher(); h.update(data); return h.finalize() }
    public static func hex(_ string: String) -> String { hex(Data(string.utf8)) }

    /// A hash being fed as its bytes arrive (a transfer's chunks), kept in a value that can be
    /// stored and handed to another thread to finish.
    public struct Running: Sendable {
        private var hash = SHA256()
        /// Bytes fed so far.
        public private(set) var count: Int64 = 0
        public init() {}
        public mutating func update(_ data: Data) { hash.update(data: data); count += Int64(data.count) }
        /// Feeds the rest of the file at `path`, from `count` on, in 1 MiB chunks (`read` is told
        /// each one's length, and may throw to stop), and returns the hex digest.
        public func finish(fileAt path: String, read: (Int) throws -> Void = { _ in }) throws -> String {
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
            }
            defer { try? handle.close() }
            var h = self
            if count > 0 { try handle.seek(toOffset: UInt64(count)) }
            while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { h.update(chunk); try read(chunk.count) }
            return h.hex()
        }
        public func hex() -> String {
            var h = SHA256Hasher(); h.hash = hash
            return h.finalize()
        }
    }

    /// Hashes a file in 1 MiB chunks; `read` is told each chunk's length (and may throw to stop).
    public static func hex(fileAt path: String, read: (Int) throws -> Void = { _ in }) throws -> String {
        try Running().finish(fileAt: path, read: read)
    }
}
