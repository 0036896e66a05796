import CSupport
import Foundation
import ThreadlineCore

/// Content-addressed files: artifacts/sha256/ab/abcdef…, written atomically (temp file, then
/// rename), so a reader never sees a half-written artifact.
public struct ArtifactStore: Sendable {
    public let root: String
    /// Names this store: two processes with the same id share one folder and copy nothing.
    public let id: String
    /// `root` may be relative (`worker --store ./store`): it is made absolute here, because
    /// artifacts travel by path and a path not starting with "/" reads as a URL to fetch.
    public init(root: String) throws {
        self.root = URL(fileURLWithPath: root).standardizedFileURL.path
        for sub in ["artifacts/sha256", "tmp"] { try FileChecks.makeFolder("\(self.root)/\(sub)") }
        let idFile = "\(self.root)/store-id"
        if let existing = try? String(contentsOfFile: idFile, encoding: .utf8), !existing.isEmpty {
            id = existing.trimmingCharacters(in: .whitespacesAndNewlines)
        } else {
            let fresh = UUID().uuidString
            let tmp = "\(self.root)/tmp/\(UUID().uuidString)"
            try Data(fresh.utf8).write(to: URL(fileURLWithPath: tmp))
            // link, not rename: of two processes creating the store at once, the first id wins.
            if link(tmp, idFile) != 0 { usleep(1000) }
            unlink(tmp)
            id = ((try? String(contentsOfFile: idFile, encoding: .utf8)) ?? fresh).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// The artifact as this store holds it (same content, this store's path).
    public func local(_ ref: ArtifactRef) -> ArtifactRef { ArtifactRef(sha256: ref.sha256, path: path(sha256: ref.sha256), size: ref.size) }

    public func path(sha256: String) -> String {
        "\(root)/artifacts/sha256/\(sha256.prefix(2))/\(sha256)"
    }

    /// A fresh path for writing; pass it to `adopt` when complete.
    public func temporaryPath(suffix: String = "") -> String {
        "\(root)/tmp/\(UUID().uuidString)\(suffix)"
    }

    /// Where a transfer of `sha256` that was cut off keeps what it received, for the next one
    /// (`StaleTemporaries` keeps such a file a day).
    public func partialPath(sha256: String) -> String {
        "\(root)/tmp/\(sha256)\(StaleTemporaries.partialSuffix)"
    }

    /// Hashes a finished temporary file and moves it into the store (or drops it when the
    /// content is already there). `sha256`: what the caller has just hashed it to (a transfer
    /// hashes its chunks as they come), so it is not read again.
    public func adopt(_ tempPath: String, sha256 known: String? = nil) throws -> ArtifactRef {
        let sha = try known ?? SHA256Hasher.hex(fileAt: tempPath)
        let size = (try FileManager.default.attributesOfItem(atPath: tempPath)[.size] as? NSNumber)?.int64Value ?? 0
        let dest = path(sha256: sha)
        try FileManager.default.createDirectory(atPath: (dest as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        if FileManager.default.fileExists(atPath: dest) {
            try? FileManager.default.removeItem(atPath: tempPath)
            touch(dest)
        } else if rename(tempPath, dest) != 0 {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: dest])
        } else {
            Self.stamp(dest, sha256: sha)
        }
        return ArtifactRef(sha256: sha, path: dest, size: size)
    }

    /// True when the artifact's file is present and its content still hashes to its address.
    /// A file hashed here before and not changed since (its stamp: the sha256 with the size and
    /// modification time it had then, kept in an extended attribute) is not read again: a
    /// source of several GB was hashed whole before every render of it (a second and a half per
    /// 2.3 GB here, ten times for ten highlights of one concert video). Damage that leaves the
    /// file's times alone (a failing disk) is found by `coord doctor --full`, which hashes every
    /// file. Where the file system keeps no extended attributes every check hashes, as before.
    public func verify(_ ref: ArtifactRef) -> Bool {
        var st = stat()
        guard stat(ref.path, &st) == 0, Int64(st.st_size) == ref.size else { return false }
        if Self.stampValue(ref.sha256, st) == Self.readStamp(ref.path) { return true }
        guard (try? SHA256Hasher.hex(fileAt: ref.path)) == ref.sha256 else { return false }
        Self.stamp(ref.path, sha256: ref.sha256, as: st)
        return true
    }

    static let stampName = "user.threadline.verified"

    /// "sha256 size mtime": what the file was when it was hashed.
    static func stampValue(_ sha256: String, _ st: stat) -> String {
        "\(sha256) \(st.st_size) " + String(format: "%ld.%09ld", st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
    }

    static func readStamp(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 160)
        return tl_get_note(path, stampName, &buffer, Int32(buffer.count)) > 0 ? String(cString: buffer) : nil
    }

    /// Records that `path` hashed to `sha256` while it was `st` (by default, as it is now).
    static func stamp(_ path: String, sha256: String, as st: stat? = nil) {
        var now = stat()
        guard let st = st ?? (stat(path, &now) == 0 ? now : nil) else { return }
        _ = tl_set_note(path, stampName, stampValue(sha256, st))
    }

    /// Cheap presence check: the file exists with the recorded size.
    public func isPresent(_ ref: ArtifactRef) -> Bool {
        (try? FileManager.default.attributesOfItem(atPath: ref.path)[.size] as? NSNumber)?.int64Value == ref.size
    }

    /// Makes sure a stored source is intact before it is used: verified by hash, and restored from
    /// `origin` when damaged (only if the original still has the recorded content).
    public func ensureIntact(_ ref: ArtifactRef, origin: String?) throws -> Bool {
        if verify(ref) { return true }
        guard let origin, origin.hasPrefix("/"), (try? SHA256Hasher.hex(fileAt: origin)) == ref.sha256 else { return false }
        let tmp = try copyIn(origin)
        try? FileManager.default.removeItem(atPath: ref.path)
        guard rename(tmp, ref.path) == 0 else { unlink(tmp); return false }
        return verify(ref)
    }

    /// Copies a file to a fresh temporary path in the store and returns that path. A copy that
    /// fails (a full disk) is removed at once: left, it kept the room freed for the next try
    /// until tmp was tidied an hour later. The error says how big the file is and how much is free.
    /// Asked every 64 MiB, `isCancelled` stops the copy (`PublishError.cancelled`).
    func copyIn(_ path: String, isCancelled: () -> Bool = { false }) throws(PublishError) -> String {
        let tmp = temporaryPath()
        if let error = Self.copy(path, to: tmp, isCancelled: isCancelled) {
            if error.code == .ECANCELED { throw PublishError(description: "stopped copying \(path) into the artifact store", cancelled: true) }
            let what = "cannot copy \(path) into the artifact store \(root): \(FileChecks.reason(error))"
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            if let free = FileChecks.freeBytes(root + "/tmp"), free < size {
                throw PublishError(description: what + " (the file is \(ByteSize.text(size)), the disk has \(ByteSize.text(free)) free: "
                                   + "free space there and submit again)", noSpace: true)
            }
            throw PublishError(description: what)
        }
        return tmp
    }

    /// Why writing a file failed, in the system's words ("No such file or directory"), not
    /// Foundation's error dump.
    public struct PublishError: Error, CustomStringConvertible {
        public let description: String
        /// The disk holding the output's folder has less free space than the movie needs.
        public var noSpace = false
        /// The copy was stopped by its caller.
        public var cancelled = false
    }

    /// Writes a copy of `ref` at the user's `path` (its folders made as needed): the copy goes to
    /// a temporary name beside it and is renamed into place, so `path` never holds half a movie,
    /// and nothing is left behind when the copy fails (a full disk, a folder that cannot be made).
    /// A clone where the file system can (btrfs, XFS: the movie takes no second copy's room).
    public static func publish(_ ref: ArtifactRef, to path: String) throws(PublishError) {
        try makeFolder(of: path)
        let tmp = temporaryName(beside: path)
        if let error = copy(ref.path, to: tmp) {
            if let free = FileChecks.freeBytes((tmp as NSString).deletingLastPathComponent), free < ref.size {
                throw PublishError(description: "cannot write \(tmp): \(FileChecks.reason(error)) (the movie is \(ByteSize.text(ref.size)), "
                                   + "the disk has \(ByteSize.text(free)) free)", noSpace: true)
            }
            throw PublishError(description: "cannot write \(tmp): \(FileChecks.reason(error))")
        }
        guard rename(tmp, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(tmp)
            throw PublishError(description: "cannot rename \(tmp) to \(path): \(why)")
        }
    }

    /// Copies `from` to the new file `to`: a clone where the file system can (btrfs, XFS), else
    /// copy_file_range. Nil, or why it failed (`to` is not left behind); ECANCELED when
    /// `isCancelled`, asked every 64 MiB, said to stop.
    static func copy(_ from: String, to: String, isCancelled: () -> Bool = { false }) -> POSIXError? {
        let done = withoutActuallyEscaping(isCancelled) { isCancelled in
            var ask = isCancelled
            return withUnsafeMutablePointer(to: &ask) { context in
                tl_copy_file_checked(from, to, { context in
                    context!.assumingMemoryBound(to: (() -> Bool).self).pointee() ? 0 : 1
                }, context)
            }
        }
        return done == 0 ? nil : POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }

    /// Whether `publish` can write at `path`, asked before anything renders: makes its folders,
    /// creates a temporary file beside it and removes it again. Throws what `publish` would.
    public static func checkWritable(_ path: String) throws(PublishError) {
        try makeFolder(of: path)
        let tmp = temporaryName(beside: path)
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { throw PublishError(description: "cannot write \(tmp): \(String(cString: strerror(errno)))") }
        close(fd)
        unlink(tmp)
    }

    /// Where a movie is written before it is renamed into place (`FileChecks.temporarySuffixLength` long).
    private static func temporaryName(beside path: String) -> String { path + ".part-\(UUID().uuidString.prefix(8))" }

    private static func makeFolder(of path: String) throws(PublishError) {
        let folder = (path as NSString).deletingLastPathComponent
        do { try FileChecks.makeFolder(folder.isEmpty ? "." : folder) } catch { throw PublishError(description: error.description) }
    }

    // MARK: a bounded store

    /// A coordinator's state folder (its lineage database beside the artifacts) is the truth that
    /// lineage refers to: only `coord gc` removes from it, never a worker sharing the folder.
    public var isStateFolder: Bool { FileManager.default.fileExists(atPath: root + "/lineage.db") }

    /// Marks an artifact used now (the least recently used go first); its stamp, if it still
    /// held, is brought up to the new time.
    public func touch(_ path: String) {
        var st = stat()
        let stamped = stat(path, &st) == 0 ? Self.readStamp(path).flatMap { stamp in
            stamp.split(separator: " ").first.map(String.init).flatMap { Self.stampValue($0, st) == stamp ? $0 : nil }
        } : nil
        _ = utimensat(AT_FDCWD, path, nil, 0)
        if let stamped { Self.stamp(path, sha256: stamped) }
    }

    /// What `trim` found and did.
    public struct TrimReport: Sendable, Equatable {
        public var removed = 0
        public var removedBytes: Int64 = 0
        /// The artifacts removed, by sha256 (the coordinator is told: it places work by them).
        public var removedSHA256: [String] = []
        /// The artifacts' bytes left in the store (with its audio chunks').
        public var bytes: Int64 = 0
        /// Of those, what could not go: in use, used within the grace period, or not removable.
        public var heldBytes: Int64 = 0
        public var firstFailure: String?
        /// Half-written files of writers that died, removed from `tmp`.
        public var temporaryRemoved = 0
    }

    /// Keeps the store's artifacts within `maxBytes`, removing the least recently used first (a
    /// use renews a file's time: `touch`). The concat's audio chunks count and go alike (before,
    /// up to 4,096 of them, about 0.7 GB, sat beside a store kept to its --store-max). Never
    /// removes a file named in `keep` (what attempts in flight read or have not yet delivered)
    /// nor one used in the last `grace` seconds (another worker sharing this folder may be about
    /// to open it). Every artifact is a copy of what the coordinator holds, so a removed one is
    /// pulled again when next needed.
    ///
    /// `freeing`: bytes the disk lacks beyond that (other files filled it): that much more goes,
    /// used recently or not, since a full disk fails every attempt here. `keepSince`: files
    /// written or used since then always stay, whatever `grace` and `freeing` say (an attempt in
    /// flight since then may have just written its output, not yet named in `keep`).
    public func trim(toBytes maxBytes: Int64, keep: Set<String>, grace: Double, freeing: Int64 = 0, keepSince: Date? = nil,
                     now: Date = Date()) -> TrimReport {
        let listed = StoreFiles.artifacts(in: root).map { ($0, false) } + StoreFiles.audioChunks(in: root).map { ($0, true) }
        let files = listed.compactMap { f, chunk in f.size.map { (path: f.path, sha: f.sha256, size: $0, used: f.modified ?? now, chunk: chunk) } }
        var report = TrimReport()
        // What a killed writer left half-written goes whatever the size (an hour untouched at least:
        // a live one touches its file all the time).
        report.temporaryRemoved = StaleTemporaries.remove(in: root + "/tmp", untouchedFor: max(grace, 3600), now: now).removed
        report.bytes = files.reduce(0) { $0 + $1.size }
        let target = min(maxBytes, report.bytes - max(0, freeing))
        guard report.bytes > target else { return report }
        for f in files.sorted(by: { $0.used < $1.used }) where report.bytes > target {
            if (!f.chunk && keep.contains(f.sha)) || keepSince.map({ f.used >= $0 }) == true || (freeing <= 0 && now.timeIntervalSince(f.used) < grace) {
                report.heldBytes += f.size
                continue
            }
            if let failure = FileChecks.remove(f.path) {
                report.firstFailure = report.firstFailure ?? failure
                report.heldBytes += f.size
                continue
            }
            report.removed += 1
            report.removedBytes += f.size
            if !f.chunk { report.removedSHA256.append(f.sha) }
            report.bytes -= f.size
        }
        return report
    }

    /// Brings a local file into the store. A file of this store (an upload) is checked, by its
    /// stamp where it has one. Any other is hashed and, unless the store has its content, copied
    /// in (cloned where the file system can: no bytes written on btrfs or XFS); the copy is taken
    /// for what was hashed when the file did not change meanwhile, else hashed itself. (Before,
    /// the copy was always hashed again, and the render hashed it a third time: three passes over
    /// a phone's 7 GB recording.) `isCancelled`, asked every MiB hashed and every 64 MiB copied,
    /// stops it with `CancellationError`, nothing left behind.
    public func ingest(localFile path: String, isCancelled: () -> Bool = { false }) throws -> ArtifactRef {
        let name = (path as NSString).lastPathComponent
        if path == self.path(sha256: name), name.count == 64, name.allSatisfy(\.isHexDigit) {
            let ref = ArtifactRef(sha256: name, path: path, size: FileChecks.size(of: path) ?? -1)
            if verify(ref) { return ref }
        }
        var before = stat(), after = stat()
        guard stat(path, &before) == 0 else { throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path]) }
        let sha = try SHA256Hasher.hex(fileAt: path, read: { _ in if isCancelled() { throw CancellationError() } })
        let dest = self.path(sha256: sha)
        if FileManager.default.fileExists(atPath: dest) {
            touch(dest)
            return ArtifactRef(sha256: sha, path: dest, size: Int64(before.st_size))
        }
        let tmp: String
        do { tmp = try copyIn(path, isCancelled: isCancelled) } catch {
            if error.cancelled { throw CancellationError() }
            throw error
        }
        let unchanged = stat(path, &after) == 0 && after.st_ino == before.st_ino && after.st_size == before.st_size
            && after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec
            && after.st_ctim.tv_sec == before.st_ctim.tv_sec && after.st_ctim.tv_nsec == before.st_ctim.tv_nsec
        do { return try adopt(tmp, sha256: unchanged ? sha : nil) } catch { unlink(tmp); throw error }
    }
}
