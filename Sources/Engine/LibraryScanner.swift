import Foundation
import Synchronization
import ThreadlineCore
import Media
import Lineage
import Suggestions

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
        let fm = FileManager.default
        guard let walker = fm.enumerator(at: URL(fileURLWithPath: library),
                                         includingPropertiesForKeys: [.isRegularFileKey, .fileSizeKey, .contentModificationDateKey],
                                         options: [.skipsHiddenFiles, .skipsPackageDescendants]) else {
            throw MediaError(.fetch, .permanent, file: library, "cannot read the folder")
        }
        for case let url as URL in walker {
            guard extensions.contains(url.pathExtension.lowercased()) else { continue }
            guard let v = try? url.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey, .contentModificationDateKey]), v.isRegularFile == true else { continue }
            let path = url.path
            let size = Int64(v.fileSize ?? 0), mtime = v.contentModificationDate?.timeIntervalSince1970 ?? 0
            seen.insert(path)
            report.files += 1
            if let k = known[path], k.size == size, k.mtime == mtime { continue }
            todo.append((path, size, mtime))
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
                                       offsetMinutes: info.offsetMinutes, dateSource: info.dateSource, contentIdentifier: info.contentIdentifier, error: nil)
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
        report.unreadable = try index.entries(library: library).filter { $0.error != nil }.map { ($0.path, $0.error!) }
        report.seconds = Date().timeIntervalSince(t0)
        return report
    }

    /// The library's dated items. A still and a movie in one folder with the same Apple content
    /// identifier are one Live Photo (by the still's path); names are never used to pair.
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
                if let local = e.local ?? movie.local { items.append(.init(path: e.path, kind: .livePhoto, local: local, motion: movie.path)) }
            } else if let local = e.local {
                items.append(.init(path: e.path, kind: .photo, local: local))
            }
        }
        for e in readable where e.kind == "video" && !paired.contains(e.path) {
            if let local = e.local { items.append(.init(path: e.path, kind: .video, local: local)) }
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
