import Foundation
import Glibc

/// What the file system says of a file: size, modification and change times, inode (what git's
/// index trusts). Something learnt of a file's content (its sha256, its media facts) holds while
/// all of it is the same: a tool that sets the modification time back still moves the change time.
public struct FileStatus: Codable, Equatable, Sendable {
    public var size: Int64, modified: Double, changed: Double, inode: UInt64

    public init(size: Int64, modified: Double, changed: Double, inode: UInt64) {
        self.size = size; self.modified = modified; self.changed = changed; self.inode = inode
    }

    /// The file's status now, nil when it cannot be asked (missing, unreadable folder).
    public static func of(_ path: String) -> FileStatus? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        func seconds(_ t: timespec) -> Double { Double(t.tv_sec) + Double(t.tv_nsec) / 1e9 }
        return FileStatus(size: Int64(st.st_size), modified: seconds(st.st_mtim), changed: seconds(st.st_ctim), inode: UInt64(st.st_ino))
    }
}

/// What a pipeline may name as a file, checked before any work starts: sources are regular files
/// (a FIFO would hang a reader, /dev/zero would be hashed for ever), and the movie goes where it
/// can be written without destroying an input or the state folder.
public enum FileChecks {
    /// Bytes free for this user on the disk holding `path` (statvfs), nil when it cannot be asked.
    public static func freeBytes(_ path: String) -> Int64? {
        var fs = statvfs()
        return statvfs(path, &fs) == 0 ? Int64(fs.f_bavail) * Int64(fs.f_frsize) : nil
    }

    /// A file's size in bytes (stat, following links), nil when it cannot be read.
    public static func size(of path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }

    /// The longest file name in a folder (ext4, xfs, btrfs, tmpfs).
    static let nameMax = 255
    /// What renders append to the movie's name while it is written (`.part-XXXXXXXX`).
    public static let temporarySuffixLength = 14

    /// Why `path` cannot be read as a source, or nil when it is a readable regular file.
    public static func sourceProblem(_ path: String) -> String? {
        var st = stat()
        if stat(path, &st) != 0 {
            switch errno {
            case ENOENT: return "file not found: \(path)"
            case ELOOP: return "\(path) is a symbolic link loop (too many levels of links)"
            case EACCES: return "cannot read \(path): permission denied (on it or a folder above it)"
            case ENOTDIR: return "file not found: \(path) (a part of the path is not a folder)"
            default: return "cannot read \(path): \(String(cString: strerror(errno)))"
            }
        }
        if let kind = special(st.st_mode) { return "\(path) is \(kind), not a regular file" }
        if access(path, R_OK) != 0 { return "cannot read \(path): permission denied" }
        if st.st_size == 0 { return "\(path) \(emptyFile)" }
        return nil
    }

    static let emptyFile = "is empty (0 bytes)"

    /// What to do about a file a pipeline names that is not there: the one in its folder that
    /// differs only by case, when there is one, else where relative paths start.
    public static func notFoundHint(base: String, path: String?) -> String {
        if let path, let other = sameButCase(path) { return "its folder has \(other): names differ by case on Linux; write it as it is" }
        return "paths are relative to the pipeline file's folder (\(base))"
    }

    /// The one entry of `folder` whose name `matches`, when exactly one does.
    static func onlyEntry(of folder: String, _ matches: (String) -> Bool) -> String? {
        let found = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter(matches)
        return found.count == 1 ? found[0] : nil
    }

    /// The entry of `path`'s folder whose name differs from its own only in case, when there is one.
    static func sameButCase(_ path: String) -> String? {
        let name = (path as NSString).lastPathComponent.lowercased()
        return onlyEntry(of: (path as NSString).deletingLastPathComponent) { $0.lowercased() == name }
    }

    /// `path` as it is spelled on disk, where a part of it is spelled in another Unicode form: a
    /// file copied from a Mac keeps its name decomposed ("Cafe" + U+0301), a pipeline typed here
    /// composes it ("Caf" + U+00E9); Linux compares bytes, so the same name was "file not found".
    /// Each part missing as written is replaced by the one entry of its folder that is the same
    /// text (canonically equivalent, as Swift compares strings); from the first part with no such
    /// entry on (a movie not written yet), the rest as written.
    public static func spelledOnDisk(_ path: String) -> String {
        guard path.hasPrefix("/"), access(path, F_OK) != 0, errno == ENOENT else { return path }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var found = ""
        for (k, part) in parts.enumerated() {
            let literal = found + "/" + part
            if access(literal, F_OK) == 0 { found = literal; continue }
            guard let twin = onlyEntry(of: found.isEmpty ? "/" : found, { $0 == part }) else { return ([found] + parts[k...]).joined(separator: "/") }
            found += "/" + twin
        }
        return found
    }

    /// Removes `path`; nil when done, else the path and why not, in the system's words.
    public static func remove(_ path: String) -> String? {
        do { try FileManager.default.removeItem(atPath: path); return nil } catch { return "\(path) (\(reason(error)))" }
    }

    /// A folder that could not be made, in the system's words.
    public struct FolderError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Makes `path` and the folders above it, as needed (a state folder, a store, a movie's
    /// folder). The error names the folder and the reason: a file standing there, a folder that
    /// cannot be made, not Foundation's error dump.
    public static func makeFolder(_ path: String) throws(FolderError) {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue {
            throw FolderError(description: "\(path) is a file, not a folder")
        }
        do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
            throw FolderError(description: "cannot make the folder \(path): \(reason(error))")
        }
    }

    /// A folder only this user may enter (0700), made if missing: for what a submitter keeps in a
    /// shared temporary folder — the movies it downloads, the hashes of its files. One already
    /// there must be this user's own folder, not a link and not another user's (who could read
    /// the movies, or plant hashes that make a submit send the wrong file); one of this user's
    /// left open to others is closed.
    public static func makePrivateFolder(_ path: String) throws(FolderError) {
        try makeFolder((path as NSString).deletingLastPathComponent)
        let fix = "remove it, or set TMPDIR to a folder of your own"
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw FolderError(description: "cannot make the folder \(path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { throw FolderError(description: "cannot read \(path): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw FolderError(description: "\(path) is not a folder but a link or a file, which another user may have put there: \(fix)")
        }
        guard st.st_uid == getuid() else {
            throw FolderError(description: "\(path) belongs to another user (uid \(st.st_uid)), who could read the movies downloaded there: \(fix)")
        }
        if st.st_mode & 0o077 != 0 && chmod(path, 0o700) != 0 {
            throw FolderError(description: "cannot close \(path) to other users: \(String(cString: strerror(errno)))")
        }
    }

    /// What to do about a source that `sourceProblem` refused, when there is something to say.
    /// `path`: the file, to name one in its folder that differs only in case (`IMG_0001.JPG`
    /// from a phone, typed `IMG_0001.jpg`: other files on Linux).
    public static func sourceHint(_ problem: String, base: String, path: String? = nil) -> String? {
        if problem.hasPrefix("file not found") { return notFoundHint(base: base, path: path) }
        if problem.hasSuffix(emptyFile) {
            return "a copy or download that did not finish leaves such a file, and photo libraries keep one for a file still in the cloud: copy it again, or remove the item"
        }
        return nil
    }

    /// What kind of special file a mode describes, or nil for a regular file.
    static func special(_ mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "a folder"
        case S_IFIFO: return "a FIFO (named pipe)"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "a special file"
        }
    }

    /// The folder in a state folder where `coord suggest` writes its drafts (and their movies go).
    public static let suggestionsFolder = "suggestions"

    /// Why the movie cannot be written to `path`, or nil. `inputs` are the local files the movie
    /// is made from (it must not replace one), `stateDirectory` the folder of lineage.db and the
    /// artifact store (nothing there is the user's to overwrite, but for suggested movies).
    public static func outputProblem(_ path: String, inputs: [String], stateDirectory: String?) -> String? {
        let name = (path as NSString).lastPathComponent
        if name.utf8.count + temporarySuffixLength > nameMax {
            return "the movie's file name is \(name.utf8.count) bytes; with the \(temporarySuffixLength)-byte suffix used while it is written it must fit in \(nameMax)"
        }
        var st = stat()
        let exists = stat(path, &st) == 0
        if exists, let kind = special(st.st_mode) {
            return "\(path) is \(kind); the movie must go to a regular file or a new path"
        }
        if !exists && errno == ELOOP { return "\(path) is a symbolic link loop" }
        for input in inputs {
            if input == path { return "the movie would overwrite its own input \(input)" }
            var ist = stat()
            if exists && stat(input, &ist) == 0 && ist.st_dev == st.st_dev && ist.st_ino == st.st_ino {
                return "the movie would overwrite its own input \(input) (the same file as \(path))"
            }
        }
        if let state = stateDirectory.map(Self.real) {
            let real = Self.real((path as NSString).deletingLastPathComponent) + "/" + name
            // A suggested movie goes beside its draft, in the state folder's suggestions folder
            // unless `coord suggest --out` says otherwise: nothing of lineage or the store is there.
            if real == state || (real.hasPrefix(state + "/") && !real.hasPrefix(state + "/" + suggestionsFolder + "/")) {
                return "\(path) is inside the state folder \(state) (lineage.db and the artifact store live there)"
            }
        }
        // The nearest folder that exists must let us create the movie (and any folders below it).
        var folder = (path as NSString).deletingLastPathComponent
        while !folder.isEmpty && folder != "/" && !FileManager.default.fileExists(atPath: folder) {
            folder = (folder as NSString).deletingLastPathComponent
        }
        if folder.isEmpty { folder = "." }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: folder, isDirectory: &isDir), !isDir.boolValue {
            return "\(folder) is a file, so the movie's folder cannot be made there"
        }
        if access(folder, W_OK | X_OK) != 0 {
            return "cannot write into \(folder): \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// Why a file operation failed in the system's words ("No such file or directory"): the POSIX
    /// reason inside a Foundation file error, not its whole dump.
    public static func reason(_ error: Error) -> String {
        posixCode(error).map { String(cString: strerror($0)) } ?? (error as NSError).localizedDescription
    }

    /// Whether a file operation failed for want of room: the disk is full (ENOSPC) or the
    /// user's quota is (EDQUOT).
    public static func isNoSpace(_ error: Error) -> Bool {
        posixCode(error).map { $0 == ENOSPC || $0 == EDQUOT } ?? false
    }

    /// The POSIX error inside a Foundation file error.
    static func posixCode(_ error: Error) -> Int32? {
        let ns = error as NSError
        if ns.domain == NSPOSIXErrorDomain { return Int32(ns.code) }
        // On Linux the underlying error is held as a Swift Error, so bridge it rather than cast.
        if let under = ns.userInfo[NSUnderlyingErrorKey].flatMap({ $0 as? Error }).map({ $0 as NSError }),
           under.domain == NSPOSIXErrorDomain {
            return Int32(under.code)
        }
        return nil
    }

    /// `path` with symbolic links resolved, as far as it exists.
    static func real(_ path: String) -> String {
        guard let r = realpath(path, nil) else { return URL(fileURLWithPath: path).standardizedFileURL.path }
        defer { free(r) }
        return String(cString: r)
    }
}

/// A size as people write it on a command line: bytes, or with a K, M, G or T suffix (1024-based,
/// as `du -h` and `df -h` print them; an "iB" or "B" after it is accepted).
public enum ByteSize {
    public static func parse(_ text: String) -> Int64? {
        var s = text.trimmingCharacters(in: .whitespaces).uppercased()
        for tail in ["IB", "B"] where s.hasSuffix(tail) && s.count > tail.count { s.removeLast(tail.count); break }
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var factor: Int64 = 1
        if let last = s.last, let f = units[last] { factor = f; s.removeLast() }
        guard let value = Double(s), value.isFinite, value >= 0, !s.isEmpty, s.allSatisfy({ $0.isNumber || $0 == "." }) else { return nil }
        let bytes = value * Double(factor)
        return bytes < 9e18 ? Int64(bytes) : nil
    }

    /// `bytes` as `df -h` would say it, with the unit spelled out: "16.0 GiB", "512.0 KiB".
    public static func text(_ bytes: Int64) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes), unit = "bytes"
        for u in units where value >= 1024 { value /= 1024; unit = u }
        return unit == "bytes" ? "\(bytes) bytes" : String(format: "%.1f %@", value, unit)
    }
}

/// Leftovers of writes that died half-way (a killed worker, a crashed coordinator): a file being
/// written is touched all the time, so one untouched for `untouchedFor` seconds belongs to no live
/// writer. Used by `coord gc` on a state folder and by a worker on its own store. The part of a
/// transfer that was cut off, kept for the next (`*.partial`), stays at least `partialKeep`.
public enum StaleTemporaries {
    public static let partialSuffix = ".partial"
    /// A day: an upload broken in the evening goes on when it is submitted again the next morning.
    public static let partialKeep: Double = 86_400

    public struct Report: Sendable, Equatable {
        /// Removed (or, in a dry run, found); of those, their paths and bytes.
        public var removed = 0
        public var paths: [String] = []
        public var bytes: Int64 = 0
        public var notRemoved = 0
        public var firstFailure: String?
        /// Parts of cut-off transfers still within their day (left for a submit to go on from).
        public var partsKept = 0
        public var partsKeptBytes: Int64 = 0
    }

    /// What `coord doctor` and `coord gc` say of the parts they leave.
    public static func partsKeptText(_ count: Int, bytes: Int64) -> String {
        "\(count) part\(count == 1 ? "" : "s") of uploads that were cut off (\(ByteSize.text(bytes))), kept for a submit to go on from; each goes a day after it stopped"
    }

    public static func remove(in folder: String, untouchedFor grace: Double, now: Date = Date(), dryRun: Bool = false) -> Report {
        let fm = FileManager.default
        var report = Report()
        for name in (try? fm.contentsOfDirectory(atPath: folder)) ?? [] {
            let path = folder + "/" + name
            let attrs = try? fm.attributesOfItem(atPath: path)
            let partial = name.hasSuffix(partialSuffix)
            guard now.timeIntervalSince((attrs?[.modificationDate] as? Date) ?? now) > (partial ? max(grace, partialKeep) : grace) else {
                if partial { report.partsKept += 1; report.partsKeptBytes += (attrs?[.size] as? NSNumber)?.int64Value ?? 0 }
                continue
            }
            report.paths.append(path)
            report.bytes += (attrs?[.size] as? NSNumber)?.int64Value ?? 0
            if let failure = dryRun ? nil : FileChecks.remove(path) {
                report.notRemoved += 1
                report.firstFailure = report.firstFailure ?? failure
                continue
            }
            report.removed += 1
        }
        return report
    }
}

/// The files of a content-addressed store (`ROOT/artifacts/sha256/ab/abcdef…`): what `coord gc`,
/// `coord doctor` and a worker's bounded store walk. Size and time are nil where the file could
/// not be read (each caller decides what that means).
public enum StoreFiles {
    public struct File: Sendable {
        public let path: String
        public let sha256: String
        public let size: Int64?
        public let modified: Date?
    }

    public static func artifacts(in root: String) -> [File] {
        let fm = FileManager.default
        let base = root + "/artifacts/sha256"
        var files: [File] = []
        for prefix in (try? fm.contentsOfDirectory(atPath: base)) ?? [] {
            for name in (try? fm.contentsOfDirectory(atPath: base + "/" + prefix)) ?? [] {
                files.append(file(base + "/" + prefix + "/" + name, named: name))
            }
        }
        return files
    }

    /// Where in a store a concat keeps the movie audio it encoded, by chunk (see `AudioChunks`):
    /// a cache like the artifacts, counted and trimmed with them.
    public static let audioChunks = "audio-chunks"

    /// The audio chunks kept in a store (their `sha256` is the chunk's key, not the content's;
    /// files being written are left out).
    public static func audioChunks(in root: String) -> [File] {
        let base = root + "/" + audioChunks
        return ((try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []).filter { !$0.contains(".tmp-") }.map { file(base + "/" + $0, named: $0) }
    }

    /// A store's file as listed: its size and time, as far as they can be read.
    static func file(_ path: String, named name: String) -> File {
        let attrs = try? FileManager.default.attributesOfItem(atPath: path)
        return File(path: path, sha256: name, size: (attrs?[.size] as? NSNumber)?.int64Value, modified: attrs?[.modificationDate] as? Date)
    }
}
