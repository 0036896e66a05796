import Foundation
import ThreadlineCore
internal import CFFmpeg

/// The movie's audio is AAC-encoded in chunks of `frames` encoder frames, on as many threads as
/// there are cores, and the chunks are spliced at frame boundaries: each chunk's encoder starts
/// two frames before its boundary (pre-roll) and runs one frame past its end, and only the
/// packets on its own side of each boundary are kept, so the decoder's overlap-add at a boundary
/// joins two encodings of the same signal (SegmentTests proves the splices inaudible).
///
/// A chunk's packets depend on nothing but the sound it was given and the encoder's settings, so
/// they are kept in a cache under the SHA-256 of that sound: a concat whose audio begins as an
/// earlier one's did (an edit to a later item) encodes only the chunks from the edit on, and its
/// movie is the same, byte for byte, as one encoded without the cache.
enum AudioChunks {
    /// 512 frames of 1024 samples: 10.92 s at 48 kHz. FFmpeg's AAC encoder warms up: its first
    /// ~200 frames cost two to three times what later ones do (0.8 against 0.3 ms a frame here),
    /// whatever its starting lambda, so every chunk pays that start once. At 128 frames (2.73 s) a
    /// movie's audio took 2.1x the CPU of one encoder (74.5 s: 2.56 against 1.22 CPU-s) and 2.4 %
    /// more bytes; at 512, 1.2x and 0.6 %. An edit re-encodes about as much wall time either way:
    /// the warm-up of the few chunks it touches is most of it.
    static let frames = 512
    static let frameSamples = 1024

    struct Chunk {
        /// The samples given to the chunk's encoder.
        var from: Int, to: Int
        /// The packets kept, by their position in the movie (samples).
        var keep: Range<Int64>
        /// The kept range from the chunk's first sample, as its cache key names it.
        var relativeKeep: String {
            let lo = keep.lowerBound == .min ? "open" : "\(keep.lowerBound - Int64(from))"
            let hi = keep.upperBound == .max ? "open" : "\(keep.upperBound - Int64(from))"
            return "\(lo)..<\(hi)"
        }
    }

    /// The chunks of `total` samples of audio.
    static func layout(total: Int) -> [Chunk] {
        let size = frames * frameSamples
        let n = max(1, (total + size - 1) / size)
        return (0..<n).map { k in
            let first = k == 0, last = k == n - 1
            let lo = k * size, hi = (k + 1) * size
            return Chunk(from: first ? 0 : lo - 2 * frameSamples, to: last ? total : min(total, hi + frameSamples),
                         keep: (first ? Int64.min : Int64(lo))..<(last ? Int64.max : Int64(hi)))
        }
    }

    /// What besides the sound decides a chunk's packets: the encoder, its settings, and where the
    /// chunk's kept packets begin and end relative to its first sample.
    static func settings(bitrate: Int, globalHeader: Bool) -> String {
        "aac \(avcodec_version()) \(bitrate) \(globalHeader) \(frames)"
    }

    /// One chunk encoded (or found in `cache`): its kept packets in the movie's timeline.
    static func encode(_ c: Chunk, sound: UnsafeRawBufferPointer, bitrate: Int, globalHeader: Bool, name: String,
                       cache: AudioChunkCache?) throws -> (packets: [CollectedPacket], reused: Bool) {
        let key = cache?.key(sound: sound, settings: settings(bitrate: bitrate, globalHeader: globalHeader) + " " + c.relativeKeep)
        var packets: [CollectedPacket]
        var reused = false
        if let cache, let key, let stored = cache.load(key) {
            packets = stored
            reused = true
        } else {
            let aac = try AudioEncoder(bitrate: bitrate, globalHeader: globalHeader, file: name, collect: true)
            if let start = sound.baseAddress, c.to > c.from { try aac.append(start, samples: c.to - c.from, output: nil, stream: nil) }
            try aac.finish(output: nil, stream: nil)
            // Kept in the chunk's own timeline (its first sample at 0), as cached.
            packets = aac.collected.filter { c.keep.contains($0.pts + Int64(c.from)) }
            if let cache, let key { cache.store(key, packets) }
        }
        for i in packets.indices { packets[i].pts += Int64(c.from); packets[i].dts += Int64(c.from) }
        return (packets, reused)
    }
}

/// The movie's sound as the concat gathers it, segment by segment: each chunk is handed to an
/// encoder thread (at most one a core) as soon as all its samples are in, so the encoding overlaps
/// the reading of the later segments instead of waiting for the last of them. The packets are
/// the same as encoding the whole sound at the end: each chunk sees exactly the same samples.
final class AudioChunkEncoder: @unchecked Sendable {
    let total: Int
    let chunks: [AudioChunks.Chunk]
    private let pcm: UnsafeMutablePointer<Int16>
    /// Samples (stereo pairs) written so far: only the gathering thread writes, below nothing
    /// an encoder reads (a chunk starts once `filled` has passed its end).
    private(set) var filled = 0
    private var started = 0
    private let bitrate: Int, globalHeader: Bool, name: String
    private let cache: AudioChunkCache?
    private let queue = OperationQueue()
    private let outcomes: Outcomes

    /// Each chunk's outcome, set by the encoder threads under the lock.
    private final class Outcomes: @unchecked Sendable {
        private let lock = NSLock()
        private var all: [Result<(packets: [CollectedPacket], reused: Bool), Error>?]
        init(_ n: Int) { all = Array(repeating: nil, count: n) }
        func set(_ k: Int, _ r: Result<(packets: [CollectedPacket], reused: Bool), Error>) { lock.withLock { all[k] = r } }
        var results: [Result<(packets: [CollectedPacket], reused: Bool), Error>?] { lock.withLock { all } }
    }
    /// The sound's memory, handed to encoder threads that read only what is complete.
    private struct Sound: @unchecked Sendable { let base: UnsafeMutablePointer<Int16> }

    /// `total`: the movie's samples, known before gathering (the segments' sample counts).
    init(total: Int, bitrate: Int, globalHeader: Bool, name: String, cache: AudioChunkCache?) {
        self.total = total
        chunks = AudioChunks.layout(total: total)
        pcm = .allocate(capacity: max(1, total * 2))
        self.bitrate = bitrate; self.globalHeader = globalHeader; self.name = name; self.cache = cache
        outcomes = Outcomes(chunks.count)
        queue.maxConcurrentOperationCount = Cores.available
    }

    deinit {
        // A concat that failed half-way: chunks not begun are dropped, running ones finish before
        // the sound they read goes away (the encoder threads hold no reference to this object, so
        // this runs on the gathering thread as soon as the concat lets go of it).
        queue.cancelAllOperations()
        queue.waitUntilAllOperationsAreFinished()
        pcm.deallocate()
    }

    /// Appends `n` interleaved stereo samples and starts every chunk they complete.
    func append(_ samples: UnsafePointer<Int16>, count n: Int) throws {
        guard n > 0 else { return }
        guard filled + n <= total else { throw MediaError(.concat, .permanent, file: name, "the segments hold more sound than planned (\(filled + n) samples, \(total) expected)") }
        (pcm + filled * 2).update(from: samples, count: n * 2)
        filled += n
        startReady()
    }

    private func startReady() {
        while started < chunks.count && chunks[started].to <= filled {
            let k = started, c = chunks[k]
            started += 1
            let pcm = Sound(base: pcm), outcomes = outcomes, bitrate = bitrate, globalHeader = globalHeader, name = name, cache = cache
            queue.addOperation {
                let sound = UnsafeRawBufferPointer(start: UnsafeRawPointer(pcm.base + c.from * 2), count: (c.to - c.from) * 4)
                outcomes.set(k, Result { try AudioChunks.encode(c, sound: sound, bitrate: bitrate, globalHeader: globalHeader, name: name, cache: cache) })
            }
        }
    }

    /// Waits for every chunk and returns the packets in order, with how many chunks there were and
    /// how many came from the cache.
    func finish() throws -> (packets: [CollectedPacket], chunks: Int, reused: Int) {
        guard filled == total else { throw MediaError(.concat, .permanent, file: name, "the segments hold \(filled) samples of sound, \(total) planned") }
        startReady()
        queue.waitUntilAllOperationsAreFinished()
        let done = try outcomes.results.map { try $0!.get() }
        cache?.trim()
        return (Array(done.map(\.packets).joined()), chunks.count, done.filter(\.reused).count)
    }
}

/// Encoded audio chunks on disk, one file each, named by the SHA-256 of their sound and
/// settings. A file is written whole (a temporary file renamed into place), so concats on workers
/// sharing the folder never read half of one; one that cannot be read is a miss. Past `limit`
/// files the least recently used are removed (a hit renews a file's time).
struct AudioChunkCache: Sendable {
    let directory: String
    let limit: Int

    init(directory: String, limit: Int = 4096) {
        self.directory = directory; self.limit = limit
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    func key(sound: UnsafeRawBufferPointer, settings: String) -> String {
        var h = SHA256Hasher()
        h.update(settings + "\n")
        h.update(sound)
        return h.finalize()
    }

    func path(_ key: String) -> String { directory + "/" + key }

    func load(_ key: String) -> [CollectedPacket]? {
        guard let data = FileManager.default.contents(atPath: path(key)) else { return nil }
        var packets: [CollectedPacket] = []
        var at = 0
        func int64() -> Int64? {
            guard at + 8 <= data.count else { return nil }
            defer { at += 8 }
            return data.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: Int64.self)) }
        }
        while at < data.count {
            guard let pts = int64(), let dts = int64(), let duration = int64(), let flags = int64(), let size = int64(),
                  size >= 0, at + Int(size) <= data.count else { return nil }
            packets.append(CollectedPacket(data: data.subdata(in: at..<(at + Int(size))), pts: pts, dts: dts, duration: duration, flags: Int32(truncatingIfNeeded: flags)))
            at += Int(size)
        }
        utimes(path(key), nil)
        return packets
    }

    func store(_ key: String, _ packets: [CollectedPacket]) {
        var data = Data()
        for p in packets {
            for v in [p.pts, p.dts, p.duration, Int64(p.flags), Int64(p.data.count)] { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
            data.append(p.data)
        }
        let tmp = path(key) + ".tmp-\(UUID().uuidString.prefix(8))"
        guard FileManager.default.createFile(atPath: tmp, contents: data) else { return }
        if rename(tmp, path(key)) != 0 { unlink(tmp) }
    }

    /// Removes the least recently used files once there are more than `limit`, down to 3/4 of it.
    func trim() {
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: directory), names.count > limit else { return }
        let dated = names.map { name -> (String, Date) in
            (name, ((try? fm.attributesOfItem(atPath: directory + "/" + name))?[.modificationDate] as? Date) ?? .distantPast)
        }
        for (name, _) in dated.sorted(by: { $0.1 < $1.1 }).prefix(names.count - limit * 3 / 4) {
            try? fm.removeItem(atPath: directory + "/" + name)
        }
    }
}
