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
    /// content is already there).
    public func adopt(_ tempPath: String) throws -> ArtifactRef {
        let sha = try SHA256Hasher.hex(fileAt: tempPath)
        let size = (try FileManager.default.attributesOfItem(atPath: tempPath)[.size] as? NSNumber)?.int64Value ?? 0
        let dest = path(sha256: sha)
        try FileManager.default.createDirectory(atPath: (dest as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        if FileManager.default.fileExists(atPath: dest) {
            try? FileManager.default.removeItem(atPath: tempPath)
            touch(dest)
        } else if rename(tempPath, dest) != 0 {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: dest])
        }
        return ArtifactRef(sha256: sha, path: dest, size: size)
    }

    /// True when the artifact's file is present and its content still hashes to its address.
    public func verify(_ ref: ArtifactRef) -> Bool {
        guard let attrs = try? FileManager.default.attributesOfItem(atPath: ref.path),
              (attrs[.size] as? NSNumber)?.int64Value == ref.size else { return false }
        return (try? SHA256Hasher.hex(fileAt: ref.path)) == ref.sha256
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
    func copyIn(_ path: String) throws(PublishError) -> String {
        let tmp = temporaryPath()
        do { try FileManager.default.copyItem(atPath: path, toPath: tmp) } catch {
            unlink(tmp)
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
    }

    /// Writes a copy of `ref` at the user's `path` (its folders made as needed): the copy goes to
    /// a temporary name beside it and is renamed into place, so `path` never holds half a movie,
    /// and nothing is left behind when the copy fails (a full disk, a folder that cannot be made).
    public static func publish(_ ref: ArtifactRef, to path: String) throws(PublishError) {
        try makeFolder(of: path)
        let tmp = temporaryName(beside: path)
        do { try FileManager.default.copyItem(atPath: ref.path, toPath: tmp) } catch {
            unlink(tmp)
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

    /// Marks a stored file as just used: `trim` removes the least recently used first.
    public func touch(_ path: String) { _ = utimensat(AT_FDCWD, path, nil, 0) }

    /// What `trim` found and did.
    public struct TrimReport: Sendable, Equatable {
        public var removed = 0
        public var removedBytes: Int64 = 0
        /// The artifacts removed, by sha256 (the coordinator is told: it places work by them).
        public var removedSHA256: [String] = []
        /// The artifacts' bytes left in the store.
        public var bytes: Int64 = 0
        /// Of those, what could not go: in use, used within the grace period, or not removable.
        public var heldBytes: Int64 = 0
        public var firstFailure: String?
        /// Half-written files of writers that died, removed from `tmp`.
        public var temporaryRemoved = 0
    }

    /// Keeps the store's artifacts within `maxBytes`, removing the least recently used first (a
    /// use renews a file's time: `touch`). Never removes a file named in `keep` (what attempts in
    /// flight read or have not yet delivered) nor one used in the last `grace` seconds (another
    /// worker sharing this folder may be about to open it). Every artifact is a copy of what the
    /// coordinator holds, so a removed one is pulled again when next needed.
    ///
    /// `freeing`: bytes the disk lacks beyond that (other files filled it): that much more goes,
    /// used recently or not, since a full disk fails every attempt here. `keepSince`: files
    /// written or used since then always stay, whatever `grace` and `freeing` say (an attempt in
    /// flight since then may have just written its output, not yet named in `keep`).
    public func trim(toBytes maxBytes: Int64, keep: Set<String>, grace: Double, freeing: Int64 = 0, keepSince: Date? = nil,
                     now: Date = Date()) -> TrimReport {
        let files = StoreFiles.artifacts(in: root).compactMap { f in f.size.map { (path: f.path, sha: f.sha256, size: $0, used: f.modified ?? now) } }
        var report = TrimReport()
        // What a killed writer left half-written goes whatever the size (an hour untouched at least:
        // a live one touches its file all the time).
        report.temporaryRemoved = StaleTemporaries.remove(in: root + "/tmp", untouchedFor: max(grace, 3600), now: now).removed
        report.bytes = files.reduce(0) { $0 + $1.size }
        let target = min(maxBytes, report.bytes - max(0, freeing))
        guard report.bytes > target else { return report }
        for f in files.sorted(by: { $0.used < $1.used }) where report.bytes > target {
            if keep.contains(f.sha) || keepSince.map({ f.used >= $0 }) == true || (freeing <= 0 && now.timeIntervalSince(f.used) < grace) {
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
            report.removedSHA256.append(f.sha)
            report.bytes -= f.size
        }
        return report
    }

    /// Brings a local file into the store without copying when its content is already there.
    public func ingest(localFile path: String) throws -> ArtifactRef {
        let sha = try SHA256Hasher.hex(fileAt: path)
        let dest = self.path(sha256: sha)
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
        if !FileManager.default.fileExists(atPath: dest) {
            let tmp = try copyIn(path)
            do { return try adopt(tmp) } catch { unlink(tmp); throw error }
        }
        return ArtifactRef(sha256: sha, path: dest, size: size)
    }
}
