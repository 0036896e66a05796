import Foundation
import Synchronization
import ThreadlineCore
import Media
import Lineage
import Suggestions
import CSupport

/// Walks a photo library, reads capture facts of new or changed files (metadata only; no pixels)
/// into the index, and turns the index into suggestion items (Live Photos paired by Apple's
/// content identifier only).
public enum LibraryScanner {
    public struct Report: Sendable {
        public var files = 0
        /// Files read this time (new or changed).
        public var read = 0
        public var removed = 0
        /// Files that could not be read, with why (skipped, never fatal).
        public var unreadable: [(path: String, why: String)] = []
        public var seconds = 0.0
    }

    public static let extensions = CaptureMetadata.photoExtensions.union(CaptureMetadata.movieExtensions)

    /// Scans `library` (an absolute, resolved folder) into `index`.
    public static func scan(library: String, index: LibraryIndex, threads: Int = Cores.available) throws -> Report {
        let t0 = Date()
        var report = Report()
        let known = try index.known(library: library)
        var seen = Set<String>()
        var todo: [(path: String, size: Int64, mtime: Double)] = []
        let walked = try walk(library)
        for f in walked.files {
            seen.insert(f.path)
            report.files += 1
            if let k = known[f.path], k.size == f.size, k.mtime == f.mtime { continue }
            todo.append(f)
        }
        // Metadata reads, in parallel (each opens its own libavformat/libheif/libexif context).
        let work = todo
        let results = Mutex<[LibraryIndex.Entry?]>(Array(repeating: nil, count: work.count))
        let workers = max(1, min(threads, work.count))
        DispatchQueue.concurrentPerform(iterations: workers) { w in
            var k = w
            while k < work.count {
                let f = work[k]
                let entry: LibraryIndex.Entry
                do {
                    let info = try CaptureMetadata.read(f.path)
                    entry = .init(path: f.path, size: f.size, mtime: f.mtime, kind: info.kind.rawValue, local: info.local,
                                       offsetMinutes: info.offsetMinutes, dateSource: info.dateSource, contentIdentifier: info.contentIdentifier, error: nil,
                                       seconds: info.seconds)
                } catch {
                    let why = (error as? MediaError)?.message ?? "\(error)"
                    entry = .init(path: f.path, size: f.size, mtime: f.mtime, kind: nil, local: nil, offsetMinutes: nil, dateSource: nil,
                                       contentIdentifier: nil, error: why)
                }
                results.withLock { $0[k] = entry }
                k += workers
            }
        }
        let upserts = results.withLock { $0.compactMap { $0 } }
        let gone = known.keys.filter { !seen.contains($0) }
        try index.update(library: library, upsert: upserts, remove: gone)
        report.read = upserts.count
        report.removed = gone.count
        // Every unreadable file is reported on every scan, not only when first read.
        report.unreadable = try index.entries(library: library).filter { $0.error != nil }.map { ($0.path, $0.error!) } + walked.problems
        report.seconds = Date().timeIntervalSince(t0)
        return report
    }

    /// Every file under `library` with one of the scanned extensions, in name order. Symbolic
    /// links are followed, to files and to folders (a library often links in a folder from another
    /// disk), yet each folder and each file is visited once: fts(3) reports a link back to a folder
    /// above it as a cycle, and a file reached by two paths is listed by the first. Hidden files and
    /// folders are skipped, and so are screen captures (`isScreenCapture`). A folder that cannot
    /// be read, or a link to nothing, is a problem to report, not a reason to stop.
    static func walk(_ library: String) throws -> (files: [(path: String, size: Int64, mtime: Double)], problems: [(path: String, why: String)]) {
        var root: [UnsafeMutablePointer<CChar>?] = [strdup(library), nil]
        defer { free(root[0]) }
        let byName: @convention(c) (UnsafeMutablePointer<UnsafePointer<FTSENT>?>?, UnsafeMutablePointer<UnsafePointer<FTSENT>?>?) -> Int32 = { a, b in
            strcmp(a!.pointee!.pointee.fts_path, b!.pointee!.pointee.fts_path)
        }
        guard let fts = fts_open(&root, FTS_LOGICAL | FTS_NOCHDIR, byName) else {
            throw MediaError(.fetch, .permanent, file: library, "cannot read the folder: \(String(cString: strerror(errno)))")
        }
        defer { fts_close(fts) }
        var files: [(path: String, size: Int64, mtime: Double)] = []
        var problems: [(path: String, why: String)] = []
        struct FileID: Hashable { var device: UInt64, inode: UInt64 }
        var visited = Set<FileID>()
        func why(_ code: Int32) -> String { String(cString: strerror(code)) }
        func scanned(_ path: String) -> Bool { extensions.contains(URL(fileURLWithPath: path).pathExtension.lowercased()) }
        while let entry = fts_read(fts) {
            let e = entry.pointee
            let path = String(cString: e.fts_path)
            let skipped = e.fts_level > 0 && (e.fts_name == CChar(UInt8(ascii: ".")) || isScreenCapture((path as NSString).lastPathComponent))
            switch Int32(e.fts_info) {
            case Int32(FTS_D):
                if skipped { fts_set(fts, entry, FTS_SKIP) }
            case Int32(FTS_F):
                guard !skipped, scanned(path), let st = e.fts_statp?.pointee else { continue }
                guard visited.insert(FileID(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))).inserted else { continue }
                files.append((path, Int64(st.st_size), Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9))
            case Int32(FTS_DNR):
                if e.fts_level == 0 { throw MediaError(.fetch, .permanent, file: library, "cannot read the folder: \(why(e.fts_errno))") }
                problems.append((path, "cannot read the folder: \(why(e.fts_errno)) (skipped with everything in it)"))
            case Int32(FTS_SLNONE):
                if !skipped && scanned(path) {
                    let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)).map { " (\($0))" } ?? ""
                    problems.append((path, "a link to a file that is not there\(target)"))
                }
            case Int32(FTS_ERR), Int32(FTS_NS):
                if e.fts_level == 0 { throw MediaError(.fetch, .permanent, file: library, "cannot read the folder: \(why(e.fts_errno))") }
                if !skipped { problems.append((path, why(e.fts_errno))) }
            default:
                break   // FTS_DP (a folder again, after its contents), FTS_DC (a link back to a folder above), others
            }
        }
        return (files, problems)
    }

    /// Whether a file or folder holds screen captures, by the names phones and computers give
    /// them: Android's `Screenshots` and `Screen recordings` folders and `Screenshot_…`,
    /// `Screen_Recording_…` files, a Pixel's `screen-20261120-101500.mp4`, an iPhone's exported
    /// `RPReplay_Final….MP4`, a Mac's `Screen Shot …`/`Screen Recording …`. A dated screen
    /// recording (a chat, a bank's app) was drafted into a day's movie like a clip from the
    /// camera; no photo app's memories show them.
    static func isScreenCapture(_ name: String) -> Bool {
        let n = name.lowercased()
        for prefix in ["screenshot", "screen shot", "screen_shot", "screen recording", "screen_recording", "screen-recording",
                       "screenrecord", "screencast", "rpreplay"] where n.hasPrefix(prefix) { return true }
        return n.hasPrefix("screen-") && n.dropFirst(7).first?.isNumber == true
    }

    /// The library's dated items. A still and a movie in one folder with the same Apple content
    /// identifier are one Live Photo (by the still's path); names are never used to pair. An
    /// Android motion photo is one too, on its own.
    public static func items(_ entries: [LibraryIndex.Entry]) -> [Suggestions.Item] {
        let readable = entries.filter { $0.kind != nil }
        var movieFor: [String: LibraryIndex.Entry] = [:]   // folder + identifier → movie
        for e in readable where e.kind == "video" {
            if let id = e.contentIdentifier, movieFor[key(e.path, id)] == nil { movieFor[key(e.path, id)] = e }
        }
        var paired = Set<String>()
        var items: [Suggestions.Item] = []
        for e in readable where e.kind == "photo" {
            if let id = e.contentIdentifier, let movie = movieFor[key(e.path, id)], !paired.contains(movie.path) {
                paired.insert(movie.path)
                if let local = e.local ?? movie.local {
                    items.append(.init(path: e.path, kind: .livePhoto, local: local, motion: movie.path, seconds: movie.seconds))
                }
            } else if let local = e.local {
                items.append(.init(path: e.path, kind: .photo, local: local))
            }
        }
        for e in readable where e.kind == CaptureInfo.Kind.motionPhoto.rawValue {
            if let local = e.local { items.append(.init(path: e.path, kind: .motionPhoto, local: local, seconds: e.seconds)) }
        }
        for e in readable where e.kind == "video" && !paired.contains(e.path) {
            if let local = e.local { items.append(.init(path: e.path, kind: .video, local: local, seconds: e.seconds)) }
        }
        return items.sorted { ($0.local, $0.path) < ($1.local, $1.path) }
    }

    static func key(_ path: String, _ id: String) -> String { (path as NSString).deletingLastPathComponent + "\u{0}" + id }

    /// The content hash of a suggestion's items (what a dismissal is keyed by), from the index's
    /// cached file hashes (`cached`: the library's entries by path), hashing files on first need.
    public static func itemsHash(_ items: [Suggestions.Item], cached: [String: LibraryIndex.Entry], index: LibraryIndex) throws -> String {
        var h = SHA256Hasher()
        for item in items {
            for path in [item.path] + (item.motion.map { [$0] } ?? []) {
                let sha: String
                if let s = cached[path]?.sha256 { sha = s } else {
                    sha = try SHA256Hasher.hex(fileAt: path)
                    try index.setHash(path: path, sha256: sha)
                }
                h.update(sha + "\n")
            }
        }
        return h.finalize()
    }
}
