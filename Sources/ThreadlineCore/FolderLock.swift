import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A lock on a folder, held while this process lives (the kernel lets go when it exits, however
/// it ends). `coord serve` takes its state folder's exclusively, so a second coordinator serving
/// the same lineage is refused instead of fighting the first for SQLite's one writer; a local
/// `coord submit` takes it shared (several may render on one folder, not beside a `coord serve`).
/// The exclusive holder writes who it is into the lock file, for a refusal to name.
public final class FolderLock: Sendable {
    public let path: String
    private let fd: Int32
    private let exclusive: Bool

    public struct Held: Error, CustomStringConvertible {
        /// What the exclusive holder wrote ("coord serve, pid 41 on render-1, …"); empty when the
        /// folder is held shared (by processes that write nothing).
        public let holder: String
        public let path: String
        public var description: String { "\(path) is locked by \(holder.isEmpty ? "another process" : holder)" }
    }

    /// Takes the lock on `folder/name`: exclusive, writing `holder` into it, or shared. Throws
    /// `Held` when another process holds it against this one, or `FileChecks.FolderError` when
    /// the lock file cannot be made.
    public init(_ folder: String, name: String, holder: String, shared: Bool = false) throws {
        path = folder + "/" + name
        exclusive = !shared
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileChecks.FolderError(description: "cannot open the lock file \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) == 0 else {
            let why = errno
            defer { close(fd) }
            guard why == EWOULDBLOCK else { throw FileChecks.FolderError(description: "cannot lock \(path): \(String(cString: strerror(why)))") }
            // Held exclusively (a shared lock is refused too), the file names the holder; held
            // shared only, what it holds is an earlier holder's, no longer true.
            var named = ""
            if shared || flock(fd, LOCK_SH | LOCK_NB) != 0 {
                var buffer = [UInt8](repeating: 0, count: 512)
                let n = pread(fd, &buffer, buffer.count, 0)
                named = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : ""
            }
            throw Held(holder: named, path: path)
        }
        guard !shared else { return }
        write(holder)
    }

    deinit { close(fd) }

    /// Writes a new `holder` into a lock held exclusively (what a refusal names; `coord serve`
    /// says the address it bound once it has one). A shared lock writes nothing.
    public func rewrite(holder: String) {
        if exclusive { write(holder) }
    }

    private func write(_ holder: String) {
        let line = Array((holder + "\n").utf8)
        _ = ftruncate(fd, 0)
        _ = pwrite(fd, line, line.count, 0)
    }

    /// The lock of a state folder (`STATE/coordinator.lock`): exclusive for `coord serve`, shared
    /// for local submits. Nil when the lock file cannot be made (a read-only state folder, which
    /// opening lineage then explains); throws `Held` when another process holds it against this one.
    public static func stateFolder(_ folder: String, holder: String = "", shared: Bool) throws -> FolderLock? {
        do { return try FolderLock(folder, name: "coordinator.lock", holder: holder, shared: shared) } catch let held as Held {
            throw held
        } catch {
            return nil
        }
    }
}

/// What `coord serve` writes into its state folder's lock ("coord serve, pid 41 on render-1, bound
/// to tcp://0.0.0.0:7400, with CURVE keys"), read back when a local submit is refused there, to
/// say where to submit instead (`Reachability.address(ofListener:on:from:)`).
public struct ServeHolder: Sendable, Equatable {
    public var pid: Int32
    public var host: String
    /// The address it bound (the port resolved once listening).
    public var endpoint: String
    public var curve: Bool

    public init(pid: Int32, host: String, endpoint: String, curve: Bool) {
        self.pid = pid; self.host = host; self.endpoint = endpoint; self.curve = curve
    }

    public var line: String { "coord serve, pid \(pid) on \(host), bound to \(endpoint)\(curve ? ", with CURVE keys" : "")" }

    /// Nil for what another program wrote (`coord gc`'s lock, an older coordinator's line).
    public init?(line: String) {
        let prefix = "coord serve, pid ", keys = ", with CURVE keys"
        guard line.hasPrefix(prefix), let on = line.range(of: " on "), let bound = line.range(of: ", bound to ", range: on.upperBound..<line.endIndex),
              let pid = Int32(line[line.index(line.startIndex, offsetBy: prefix.count)..<on.lowerBound]) else { return nil }
        var endpoint = String(line[bound.upperBound...])
        curve = endpoint.hasSuffix(keys)
        if curve { endpoint.removeLast(keys.count) }
        self.pid = pid; host = String(line[on.upperBound..<bound.lowerBound]); self.endpoint = endpoint
    }
}
