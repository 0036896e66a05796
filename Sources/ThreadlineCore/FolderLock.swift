import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An exclusive lock on a folder, held while this process lives (the kernel lets go when it
/// exits, however it ends): `coord serve` takes its state folder's, so a second coordinator
/// serving the same lineage is refused instead of fighting the first for SQLite's one writer.
/// The holder writes who it is into the lock file, for the refusal to name.
public final class FolderLock: Sendable {
    public let path: String
    private let fd: Int32

    public struct Held: Error, CustomStringConvertible {
        /// What the holder wrote ("pid 41 on render-1, serving tcp://0.0.0.0:7400"); empty if nothing.
        public let holder: String
        public let path: String
        public var description: String { "\(path) is locked by \(holder.isEmpty ? "another process" : holder)" }
    }

    /// Takes the lock on `folder/name` or throws `Held` (naming the holder), or `FileChecks.FolderError`
    /// when the lock file cannot be made.
    public init(_ folder: String, name: String, holder: String) throws {
        path = folder + "/" + name
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileChecks.FolderError(description: "cannot open the lock file \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let why = errno
            var buffer = [UInt8](repeating: 0, count: 512)
            let n = pread(fd, &buffer, buffer.count, 0)
            close(fd)
            guard why == EWOULDBLOCK else {
                throw FileChecks.FolderError(description: "cannot lock \(path): \(String(cString: strerror(why)))")
            }
            let text = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
            throw Held(holder: text.trimmingCharacters(in: .whitespacesAndNewlines), path: path)
        }
        let line = Array((holder + "\n").utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, line, line.count, 0)
    }

    deinit { close(fd) }
}
