import Foundation
import ThreadlineCore

/// The sha256 of the files a submitter sends, remembered by what the file system says of each
/// (size, modification and change times, inode: what git's index trusts), so a submit made again,
/// or a batch whose projects share clips, reads each file once: a phone library's videos are
/// gigabytes, read at disk speed before anything could go up.
///
/// A file changed since is hashed again: its change time moves whatever a tool does to its
/// modification time. One modified in the last `settle` seconds is hashed but not remembered (it
/// may still be being written, within the clock's grain). Kept as JSON beside the submitter's
/// downloads; a file that cannot be read or written only costs the hashing.
final class FileHashes {
    /// A remembered sha256 holds while all of the file's status is the same.
    typealias Status = FileStatus

    struct Entry: Codable, Equatable {
        var status: Status
        var sha256: String
        /// When a submit last used it: the least recently used go beyond `limit`.
        var used: Double
    }

    let path: String
    let limit: Int
    let settle: Double
    /// Hashes a file, telling the closure each piece's length as it is read.
    private let hash: (String, (Int) -> Void) throws -> String
    private var entries: [String: Entry]
    private var dirty = false

    init(path: String, limit: Int = 100_000, settle: Double = 2,
         hash: @escaping (String, (Int) -> Void) throws -> String = { try SHA256Hasher.hex(fileAt: $0, read: $1) }) {
        self.path = path; self.limit = limit; self.settle = settle; self.hash = hash
        entries = (try? JSONDecoder().decode([String: Entry].self, from: Data(contentsOf: URL(fileURLWithPath: path)))) ?? [:]
    }

    /// The file's sha256 and size, read only when it is not remembered as it stands (`read` is
    /// told each piece's length as it is read, or the whole length at once when it is not read).
    func sha256(of file: String, now: Double = Date().timeIntervalSince1970, read: (Int) -> Void = { _ in }) throws -> (sha256: String, size: Int64) {
        guard let before = FileStatus.of(file) else { throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: file]) }
        if var known = entries[file], known.status == before {
            // Its time of use is written out at most hourly: a submit that reads nothing writes nothing.
            if now - known.used > 3600 { known.used = now; entries[file] = known; dirty = true }
            read(Int(clamping: known.status.size))
            return (known.sha256, known.status.size)
        }
        let sha = try hash(file, read)
        // Remembered only when the file stood still while it was read and has settled.
        if let after = FileStatus.of(file), after == before, now - after.modified > settle {
            entries[file] = Entry(status: after, sha256: sha, used: now)
            dirty = true
        }
        return (sha, before.size)
    }

    /// Writes what changed (atomically: two submits at once leave one of their files whole).
    func save() {
        guard dirty else { return }
        if entries.count > limit {
            for (k, _) in entries.sorted(by: { $0.value.used < $1.value.used }).prefix(entries.count - limit) { entries[k] = nil }
        }
        guard let data = try? JSONEncoder().encode(entries) else { return }
        if (try? data.write(to: URL(fileURLWithPath: path), options: .atomic)) != nil { dirty = false }
    }

}
