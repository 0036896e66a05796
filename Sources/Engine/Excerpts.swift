import Foundation
import ThreadlineCore
import Media

/// What a remote submit sends of a long clip it trims: an excerpt (`Excerpt`), not the whole
/// recording. A 3 s highlight of a 7 GB concert video goes as a few megabytes; over a home
/// uplink that is seconds instead of most of an hour.
///
/// The item then names the excerpt as `PATH#t=FROM,TO` (a W3C media fragment: seconds FROM to TO
/// of the file at PATH) with its trim moved into the excerpt's time; its render is the same frame
/// for frame and sample for sample (`Excerpt` checks each one it writes). Only where it pays: a
/// clip of at least `minimumBytes` whose excerpts together are under half of it; otherwise, and
/// for every other file, the file itself goes.
public enum RemoteExcerpts {
    public static let minimumBytes: Int64 = 16 << 20

    /// Where excerpts are kept: the person's cache folder, on disk (a temporary folder may be
    /// memory, and an excerpt of a long trim hundreds of megabytes).
    public static var folder: String { Home.cacheFolder("threadline/excerpts") }

    public struct Prepared: Sendable {
        /// The pipeline as sent: excerpted items name their excerpt.
        public var pipeline: Pipeline
        /// The local file read for each excerpt's name in `pipeline`.
        public var stand: [String: String] = [:]
        /// Bytes of the clips excerpted, and of their excerpts.
        public var wholeBytes: Int64 = 0, excerptBytes: Int64 = 0
        public var excerpts: Int { stand.count }
        public init(pipeline: Pipeline) { self.pipeline = pipeline }
    }

    /// A trim: `end` nil plays to the clip's end.
    struct Key: Hashable { var start: Double; var end: Double? }

    /// `pipeline` with its long trimmed clips' items naming excerpts written under `folder`
    /// (reused while the clip is unchanged, kept until a day after their last use). A clip that
    /// cannot be excerpted exactly goes whole; so does any clip when making excerpts fails.
    /// `cutting` is told each clip before its excerpts are made (its name).
    public static func prepare(_ pipeline: Pipeline, folder: String, cutting: (String) -> Void = { _ in }) -> Prepared {
        var out = Prepared(pipeline: pipeline)
        // The trims of each long clip.
        var trims: [String: [Key]] = [:], trimmed = Set<Int>()
        for (k, item) in pipeline.items.enumerated() {
            guard case .video(let source, let trim?) = item.kind, !source.isRemote, trim.end.map({ $0 > trim.start }) ?? (trim.start > 0) else { continue }
            trims[source.uri, default: []].append(Key(start: trim.start, end: trim.end))
            trimmed.insert(k)
        }
        // A clip another item shows whole (or the soundtrack plays) goes whole anyway.
        for f in pipeline.files where !(f.role == .source && f.item.map(trimmed.contains) == true) { trims[f.path] = nil }
        guard !trims.isEmpty, (try? FileChecks.makePrivateFolder(folder)) != nil else { return out }
        Home.prune(folder, unusedFor: 1)
        var made: [String: [Key: (file: String, made: Excerpt.Made)]] = [:]
        for (path, keys) in trims {
            guard let attrs = try? FileManager.default.attributesOfItem(atPath: path),
                  let size = (attrs[.size] as? NSNumber)?.int64Value, size >= minimumBytes,
                  let mtime = (attrs[.modificationDate] as? Date)?.timeIntervalSince1970 else { continue }
            cutting((path as NSString).lastPathComponent)
            var these: [Key: (file: String, made: Excerpt.Made)] = [:]
            var bytes: Int64 = 0
            for key in Set(keys) {
                guard let (file, m) = excerpt(of: path, size: size, mtime: mtime, key, folder: folder) else { these = [:]; break }
                these[key] = (file, m)
                bytes += m.bytes
            }
            guard !these.isEmpty, bytes < size / 2 else { continue }
            made[path] = these
            out.wholeBytes += size
            out.excerptBytes += bytes
        }
        guard !made.isEmpty else { return out }
        out.pipeline.items = pipeline.items.map { item in
            // A trim to the clip's end names the original's end (`Excerpt.Made.clipEnd`).
            guard case .video(let source, let trim?) = item.kind,
                  let (file, m) = made[source.uri]?[Key(start: trim.start, end: trim.end)], let end = trim.end ?? m.clipEnd else { return item }
            let name = source.uri + String(format: "#t=%.3f,%.3f", m.from, m.to)
            out.stand[name] = file
            var moved = item
            moved.kind = .video(source: SourceRef(name), trim: Trim(start: trim.start + m.shift, end: end + m.shift))
            return moved
        }
        return out
    }

    /// The excerpt of `path` for one trim: one made before for the same clip (path, size and
    /// modification time) and trim, or a new one.
    static func excerpt(of path: String, size: Int64, mtime: Double, _ key: Key, folder: String) -> (String, Excerpt.Made)? {
        let id = SHA256Hasher.hex("excerpt 1\u{0}\(path)\u{0}\(size)\u{0}\(mtime)\u{0}\(key.start)\u{0}\(key.end.map { "\($0)" } ?? "end")")
        let file = "\(folder)/\(id).mov", facts = "\(folder)/\(id).json"
        if FileManager.default.fileExists(atPath: file), let data = FileManager.default.contents(atPath: facts),
           let m = try? JSONDecoder().decode(Excerpt.Made.self, from: data) {
            // Used again: kept another day from now (`Home.prune` goes by modification time).
            for f in [file, facts] { try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: f) }
            return (file, m)
        }
        let part = "\(folder)/\(id).part.mov"
        guard let m = (try? Excerpt.make(path: path, start: key.start, end: key.end, into: part)) ?? nil,
              let data = try? JSONEncoder().encode(m), FileManager.default.createFile(atPath: facts, contents: data),
              rename(part, file) == 0 else {
            try? FileManager.default.removeItem(atPath: part)
            return nil
        }
        return (file, m)
    }
}
