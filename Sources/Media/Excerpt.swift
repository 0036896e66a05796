import Foundation
import ThreadlineCore
internal import CFFmpeg

/// A stretch of a long phone video copied out of it without re-encoding: what a farm needs to
/// render a short trim of it, so that a remote submit sends megabytes, not the whole recording.
///
/// The excerpt holds the packets of the video and audio streams a render reads (`InputFile`'s
/// choice), byte for byte, from the video key frame at least `margin` seconds before the trim
/// to the first key frame at least `margin` seconds after it; stream parameters and side data
/// (display matrix, HDR metadata) go with them. A render of the shifted trim from the excerpt
/// decodes the same frames and samples as one of the trim from the whole file: it seeks to the
/// same key frame and the same audio packet, and each packet's time differs from the original's
/// by one constant, `shift`. That is checked, not assumed: the written excerpt is read back and
/// every packet's time and size compared with the original's, and a render's seek is made in
/// both (the same key frame, the same first audio packet); any difference, and there is no
/// excerpt (the whole file goes, as before).
public enum Excerpt {
    public struct Made: Sendable, Equatable, Codable {
        /// Seconds to add to a time of the original to get the same moment in the excerpt.
        public var shift: Double
        /// The stretch of the original the excerpt holds, in its seconds.
        public var from: Double, to: Double
        public var bytes: Int64
        /// An excerpt that runs to the file's end: where the original ends, in its seconds (the
        /// length a render of a trim with no end reckons with), which a trim from the excerpt
        /// names as its end. Nil for an excerpt that stops before the end.
        public var clipEnd: Double? = nil
    }

    /// Containers whose index lets a render seek straight to a key frame (phones' and cameras' MOV/MP4).
    static let seekable = "mov,mp4,m4a,3gp,3g2,mj2"

    /// Writes the excerpt of `path` that a render of [start, end) needs to `out` (a MOV file), or
    /// returns nil, writing nothing, when it cannot be made exact (not MOV/MP4, no moving video,
    /// no key frame `margin` before the start, the read-back differs).
    ///
    /// With no `end` (a trim to the clip's end), or no key frame `margin` past it, the excerpt runs
    /// to the file's end. A render then reads to the end as well, and where the clip ends decides
    /// its length: the excerpt's container says it ends later than the original's (by where the
    /// excerpt's first packet lies past its start), so the trim sent names its end, the original's
    /// (`Made.clipEnd`); and where its streams end must decide nothing differently (`sameEnd`).
    ///
    /// The margin is for safety, not need: a render of [start, end) seeks to the key frame at or
    /// before start and reads to the first frame past end, and pictures decoded after a key frame
    /// that show before it (an open GOP's) lie within a few frames of it.
    public static func make(path: String, start: Double, end: Double?, margin: Double = 0.5, into out: String) throws -> Made? {
        let name = (path as NSString).lastPathComponent
        let input = try InputFile(path: path, name: name, stage: .fetch)
        guard String(cString: input.ctx.pointee.iformat.pointee.name) == seekable, let v = input.videoIndex,
              input.stream(v).pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { return nil }
        let streams = [v] + (input.audioIndex.map { [$0] } ?? [])
        // Whole-second shifts are exact in every stream's time base (1/600, 1/48000, …).
        guard streams.allSatisfy({ input.stream($0).pointee.time_base.num == 1 && input.stream($0).pointee.time_base.den > 0 }) else { return nil }

        // The key frame at or before start - margin.
        let from = start - margin
        // A trim past the clip's end is clamped to it with a note that names the clip's length
        // (`Planner.notes`), which an excerpt would change.
        guard from > 0, from < input.videoClaimedEnd, end.map({ $0 <= input.duration }) ?? true else { return nil }
        guard let key = SegmentJob.seekToTrimStart(input, videoIndex: v, trimStart: from, fps: 1000), key <= from + 1e-9 else { return nil }

        // Written with the stretch moved to start near 0, by whole seconds.
        let whole = max(0, floor(key - audioLead))
        let output = try OutputFile(path: out, format: "mov", file: name)
        var outIndex: [Int32: Int32] = [:]
        var scale: Int64 = 1
        for s in streams {
            let inSt = input.stream(s)
            let st = output.addStream()
            avcodec_parameters_copy(st.pointee.codecpar, inSt.pointee.codecpar)
            st.pointee.codecpar.pointee.codec_tag = 0
            st.pointee.time_base = inSt.pointee.time_base
            for k in 0..<Int(inSt.pointee.nb_side_data) {
                let sd = inSt.pointee.side_data[k]
                if let dst = av_stream_new_side_data(st, sd.type, Int(sd.size)) { dst.update(from: sd.data, count: Int(sd.size)) }
            }
            outIndex[s] = st.pointee.index
            scale = lcm(scale, Int64(inSt.pointee.time_base.den))
        }
        // Each track keeps its time base, and the movie's time scale is a multiple of them all,
        // so where each track starts (its edit list) is exact too.
        guard scale <= Int64(Int32.max) else { return nil }
        let video = input.stream(v).pointee.time_base.den
        let stop: Double?
        // What was copied, to compare with what the excerpt holds.
        var mine: [Seen] = []
        do {
            try output.open(options: ["movie_timescale": "\(scale)", "video_track_timescale": "\(video)"])
            stop = try stretch(input, streams: streams, key: key, stopFrom: end.map { $0 + margin } ?? .infinity) { k, pkt, t in
                mine.append(Seen(input, streams, k, pkt.pointee, t))
                let moved = Int64(whole) * Int64(input.stream(streams[k]).pointee.time_base.den)
                pkt.pointee.stream_index = outIndex[streams[k]]!
                pkt.pointee.pts -= moved
                if pkt.pointee.dts != tl_nopts_value() { pkt.pointee.dts -= moved }
                pkt.pointee.pos = -1
                try output.write(pkt)
            }
            if stop != nil { try output.finish() }
        } catch {
            try? FileManager.default.removeItem(atPath: out)
            throw error
        }
        guard let stop else {
            try? FileManager.default.removeItem(atPath: out)
            return nil
        }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? NSNumber)?.int64Value ?? 0
        let excerpt = try InputFile(path: out, name: name, stage: .fetch)
        // To the end: up to where the last packet copied ends.
        let toEnd = stop.isInfinite, to = toEnd ? mine.map { $0.t + $0.duration }.max() ?? key : stop
        guard let shift = readBack(excerpt, copied: mine, streams: streams),
              sameStart(input, excerpt, streams: streams, start: start, shift: shift),
              !toEnd || sameEnd(input, excerpt, shift: shift, copied: to, lastPicture: mine.filter { $0.stream == 0 }.map(\.t).max() ?? key) else {
            try? FileManager.default.removeItem(atPath: out)
            return nil
        }
        return Made(shift: shift, from: key, to: to, bytes: bytes, clipEnd: toEnd ? input.duration : nil)
    }

    /// A packet as the read-back compares it: its stream's place among those copied, its time
    /// (from its file's origin, as a render reckons it) and duration in seconds, size, key flag.
    struct Seen {
        var stream: Int, t: Double, duration: Double, size: Int32, key: Bool
        init(_ file: InputFile, _ ids: [Int32], _ k: Int, _ p: AVPacket, _ t: Double) {
            stream = k; self.t = t; duration = Double(p.duration) * av_q2d(file.stream(ids[k]).pointee.time_base)
            size = p.size; key = p.flags & AV_PKT_FLAG_KEY != 0
        }
    }

    /// Reads the excerpt's packets back and compares them with those `copied` from the original:
    /// the same streams, sizes, flags and durations, and each packet's time moved by one
    /// constant, to well under a sample. Returns that constant, or nil.
    static func readBack(_ excerpt: InputFile, copied: [Seen], streams: [Int32]) -> Double? {
        guard excerpt.videoIndex == 0, excerpt.audioIndex == (streams.count > 1 ? 1 : nil) else { return nil }
        var theirs: [Seen] = []
        let packet = Packet(), ids = streams.indices.map { Int32($0) }
        while av_read_frame(excerpt.ctx, packet.ptr) >= 0 {
            defer { packet.unref() }
            let p = packet.ptr.pointee
            guard let k = ids.firstIndex(of: p.stream_index), p.pts != tl_nopts_value() else { continue }
            theirs.append(Seen(excerpt, ids, k, p, Double(p.pts) * av_q2d(excerpt.stream(p.stream_index).pointee.time_base) - excerpt.origin))
        }
        // By stream, then in decode order.
        func ordered(_ list: [Seen]) -> [Seen] { list.enumerated().sorted { ($0.1.stream, $0.0) < ($1.1.stream, $1.0) }.map(\.1) }
        let a = ordered(copied), b = ordered(theirs)
        guard let first = a.first, a.count == b.count else { return nil }
        let shift = b[0].t - first.t
        for (k, (x, y)) in zip(a, b).enumerated() {
            // A stream's last packet may be cut to where the movie ends (its edit list): a margin
            // past anything a render reads, or at the file's end, past the clip's end (`clipEnd`),
            // where a render stops.
            let last = k + 1 == a.count || a[k + 1].stream != x.stream
            guard x.stream == y.stream, x.size == y.size, x.key == y.key, abs(y.t - x.t - shift) < 1e-7,
                  last || abs(x.duration - y.duration) < 1e-7 else { return nil }
        }
        return shift
    }

    /// Whether a render of the trim from `start` begins the same in the original and in the
    /// excerpt: its seek (`SegmentJob.seekToTrimStart`) lands on the same key frame, and
    /// the first audio packet it decodes is the same.
    static func sameStart(_ original: InputFile, _ excerpt: InputFile, streams: [Int32], start: Double, shift: Double) -> Bool {
        func begins(_ file: InputFile, _ ids: [Int32], trimStart: Double) -> (key: Double, audio: Double?, size: Int32)? {
            // A high rate: only a key frame at or before the start counts (a render at its own
            // rate may take one a half-frame past it; then both files are read from their first
            // packet, which differ, and there is no excerpt).
            guard let key = SegmentJob.seekToTrimStart(file, videoIndex: ids[0], trimStart: trimStart, fps: 1000) else { return nil }
            guard ids.count > 1 else { return (key, nil, 0) }
            let from = key - SegmentJob.audioLeadIn, packet = Packet()
            while av_read_frame(file.ctx, packet.ptr) >= 0 {
                defer { packet.unref() }
                let p = packet.ptr.pointee
                guard p.stream_index == ids[1], p.pts != tl_nopts_value() else { continue }
                let t = Double(p.pts) * av_q2d(file.stream(ids[1]).pointee.time_base) - file.origin
                if t >= from - 1e-9 { return (key, t, p.size) }
            }
            return nil
        }
        guard let a = begins(original, streams, trimStart: start),
              let b = begins(excerpt, streams.indices.map { Int32($0) }, trimStart: start + shift) else { return false }
        guard abs(b.key - a.key - shift) < 1e-7, a.size == b.size else { return false }
        switch (a.audio, b.audio) {
        case (nil, nil): return true
        case let (x?, y?): return abs(y - x - shift) < 1e-7
        default: return false
        }
    }

    /// Whether a render to the end of an excerpt that runs to the file's end ends as one of the
    /// original does, `shift` later. The original's end (`clipEnd`, named as the trim's end) must
    /// be within the excerpt's, and within what was copied: a track not copied (a second audio
    /// track, a phone's metadata track) that runs on past the picture and the sound puts it past
    /// them, and there is no excerpt. (A movie's length is kept in its own time scale, often
    /// milliseconds, rounded up: it may end that much later.) Where the video stream says it
    /// ends may differ by the last packet's duration (an edit list may cut it): a render reads
    /// that end only to decide that frames near it may show (an earlier end lets no frame be
    /// skipped that the original shows), and whether a picture that stops a second before it is
    /// a truncated file, which must be decided alike.
    /// `copied`: where the packets copied end; `lastPicture`: the last picture's time; both in the
    /// original's seconds.
    static func sameEnd(_ original: InputFile, _ excerpt: InputFile, shift: Double, copied: Double, lastPicture: Double) -> Bool {
        let claimed = original.videoClaimedEnd, claimedHere = excerpt.videoClaimedEnd - shift
        return claimedHere <= claimed + 1e-6 && (claimed - lastPicture > 1.0) == (claimedHere - lastPicture > 1.0)
            && original.duration <= copied + 0.005 && original.duration + shift <= excerpt.duration + 1e-6
    }

    /// Audio kept before the key frame: the packet a render's seek lands on (the one holding the
    /// key frame's time, or a file's first, its encoder's priming) and, with it, a second of lead-in.
    static let audioLead = 1.0

    /// Hands `take` the packets an excerpt holds, in the file's order (each with its stream's
    /// place in `streams` and its time): video in decode order from the key frame at `key` to the
    /// first key frame at or past `stopFrom` (excluded; so are pictures decoded after `key` that
    /// show before it, which belong to the group before), audio from `audioLead` before `key` to
    /// that key frame. Returns that key frame's time, infinity when the file ends before one (all
    /// of it to the end is handed then); nil when there is no key frame at `key`.
    static func stretch(_ file: InputFile, streams: [Int32], key: Double, stopFrom: Double,
                        take: (Int, UnsafeMutablePointer<AVPacket>, Double) throws -> Void) throws -> Double? {
        let from = key - audioLead - 0.5
        guard from > 0 ? file.seek(to: from) : file.seekToBeginning() else { return nil }
        var started = false, stop: Double? = nil
        // Audio at or past `stopFrom`, held until the stop is known.
        var held: [(Packet, Double)] = []
        let packet = Packet(), origin = file.origin
        reading: while av_read_frame(file.ctx, packet.ptr) >= 0 {
            defer { packet.unref() }
            let p = packet.ptr.pointee
            guard let s = streams.firstIndex(of: p.stream_index) else { continue }
            guard p.pts != tl_nopts_value() else { if s == 0 { return nil } else { continue } }   // no time to place it by
            let t = Double(p.pts) * av_q2d(file.stream(p.stream_index).pointee.time_base) - origin
            if s == 0 {
                let isKey = p.flags & AV_PKT_FLAG_KEY != 0
                if !started {
                    guard isKey, abs(t - key) < 1e-6 else { continue }
                    started = true
                }
                if stop == nil, isKey, t >= stopFrom - 1e-9 {
                    stop = t
                    for (audio, at) in held where at < t - 1e-9 { try take(1, audio.ptr, at) }
                    held = []
                }
                if stop != nil { if streams.count == 1 { break reading } else { continue } }
                guard t >= key - 1e-9 else { continue }
            } else {
                if let stop, t >= stop - 1e-9 { break reading }
                guard t >= key - audioLead - 1e-9 else { continue }
                if stop == nil, t >= stopFrom - 1e-9 {
                    let copy = Packet()
                    av_packet_ref(copy.ptr, packet.ptr)
                    held.append((copy, t))
                    continue
                }
            }
            try take(s, packet.ptr, t)
        }
        guard started else { return nil }
        if stop == nil { for (audio, at) in held { try take(1, audio.ptr, at) } }
        return stop ?? .infinity
    }

    static func lcm(_ a: Int64, _ b: Int64) -> Int64 {
        func gcd(_ x: Int64, _ y: Int64) -> Int64 { y == 0 ? x : gcd(y, x % y) }
        return a / gcd(a, b) * b
    }
}
