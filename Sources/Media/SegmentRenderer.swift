import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Renders one item into a segment: H.264 in the output profile (starting on a key frame)
/// plus 48 kHz stereo PCM, in a MOV. Decode → transform → encode run as one streamed pipeline;
/// frames stay in memory, and each stage's time and failures are attributed to it.
public enum SegmentRenderer {
    public static func render(_ spec: SegmentSpec, to path: String, isCancelled: () -> Bool = { false }) throws -> SegmentReport {
        if let title = spec.title { return try TitleRenderer.render(spec, title: title, to: path, isCancelled: isCancelled) }
        if spec.still == true { return try PhotoRenderer.render(spec, to: path, isCancelled: isCancelled) }
        let job = try SegmentJob(spec: spec, path: path)
        return try job.run(isCancelled: isCancelled)
    }
}

/// Throws the renderers' "cancelled" error once the stage is stopped (its run cancelled, or its
/// attempt past the stage's time limit).
func stopIfCancelled(_ isCancelled: () -> Bool, stage: StageKind, file: String) throws {
    if isCancelled() { throw MediaError.cancelled(stage, file: file) }
}

final class SegmentJob {
    let spec: SegmentSpec
    let name: String
    let input: InputFile
    let videoIndex: Int32
    let video: Decoder
    let audio: Decoder?
    let resampler: Resampler?
    /// Set when speed ≠ 1: keeps the pitch while changing tempo.
    let tempo: AudioTempo?
    var scratch: [Int16] = []
    var speed: Double { spec.edits.speed }
    let writer: SegmentWriter
    let orientation: Orientation?
    let fps: Double
    var filter: VideoFilter?
    /// For an interlaced source (`SegmentSpec.interlaced`): its fields made whole frames before
    /// they are timed and filtered.
    let deinterlacer: Deinterlacer?
    /// The colour the filter was built for (a stream may change its tags).
    var filterColour: SourceColour?
    /// Bounce: the forward pass's frames, which source frame each slot showed, where the source's
    /// key frames are, and the forward audio (to play backwards).
    let forwardCount: Int
    /// The slot decoding stops before: the forward count, or where a baked fade-out ends the segment.
    let videoEnd: Int
    let audioTarget: Int
    var slotSource: [Int64] = []
    var keyPTS: [Int64] = []
    var forwardPCM: [Int16] = []
    let overlays: OverlayFiles
    let chain: EditChain
    var report = SegmentReport()

    // Video timing state: the last decoded frame not yet placed, and the next output slot.
    var pending: Frame?
    var pendingTime = 0.0
    var nextSlot = 0
    var lastFrameTime = -Double.infinity
    /// Time of the first video packet read and whether it was a key frame.
    var firstVideoPacket: (time: Double, key: Bool)?
    let filtered = Frame()
    let packet = Packet()

    // Audio state.
    var audioSkip = 0          // samples still to drop at the start (audio began before trim start)
    var audioStarted = false
    /// Audio packets before this time are not decoded (`audioLeadIn`).
    var audioFrom = -Double.infinity
    var audioBuffer: [Int16] = []

    init(spec: SegmentSpec, path: String) throws {
        self.spec = spec
        name = spec.sourceName
        let input = try InputFile(path: spec.sourcePath, name: spec.sourceName, stage: .decode)
        self.input = input
        let format = String(cString: input.ctx.pointee.iformat.pointee.name)
        if format.hasPrefix("image2") || format.hasSuffix("_pipe") {
            throw MediaError(.decode, .permanent, file: name, "this is a still image (\(format)), not a video")
        }
        guard let v = input.videoIndex else {
            throw MediaError(.decode, .permanent, file: name, "no decodable video stream")
        }
        videoIndex = v
        video = try Decoder(input: input, stream: v)
        if spec.edits.mute {
            audio = nil
        } else if let a = input.audioIndex {
            audio = try Decoder(input: input, stream: a)
        } else if let codec = input.undecodableAudio {
            throw MediaError(.decode, .permanent, file: name, "its audio track cannot be decoded (no decoder for \(codec))")
        } else {
            audio = nil
        }
        let fileName = spec.sourceName
        resampler = try audio.map { try Resampler(decoder: $0, file: fileName) }
        tempo = audio != nil && spec.edits.speed != 1 ? try AudioTempo(speed: spec.edits.speed, file: fileName) : nil
        orientation = input.displayMatrix.map { Orientation(displayMatrix: $0) }
        fps = spec.profile.fps.double
        deinterlacer = spec.interlaced == true ? Self.deinterlacer(spec, stream: input.stream(v), timeBase: video.timeBase) : nil
        forwardCount = spec.edits.bounce ? (spec.frameCount + 1) / 2 : spec.frameCount
        if !spec.edits.bounce, let cut = spec.cut, cut.end < spec.frameCount {
            videoEnd = cut.end
            audioTarget = min(spec.sampleCount, Timing.samples(atFrame: cut.end, fps: spec.profile.fps))
        } else {
            videoEnd = forwardCount
            audioTarget = spec.edits.bounce ? Timing.samples(atFrame: forwardCount, fps: spec.profile.fps) : spec.sampleCount
        }
        overlays = try OverlayFiles(edits: spec.edits, profile: spec.profile, name: spec.sourceName)
        chain = EditChain(edits: spec.edits, profile: spec.profile, files: overlays.paths)

        writer = try SegmentWriter(profile: spec.profile, sampleCount: spec.sampleCount, path: path, name: spec.sourceName, keyframes: spec.keyframes,
                                   cut: spec.cut, frameCount: spec.frameCount)
    }

    /// Seeks to the key frame at or before the trim start (`seekToTrimStart(_:…)`), and starts
    /// the audio `audioLeadIn` before that key frame.
    func seekToTrimStart() {
        if let key = Self.seekToTrimStart(input, videoIndex: videoIndex, trimStart: spec.trimStart, fps: fps) {
            audioFrom = key - Self.audioLeadIn
        }
    }

    /// Whether an audio packet goes to the decoder: every one once decoding has begun; before,
    /// none earlier than `audioFrom`.
    func decodesAudio(_ pkt: UnsafeMutablePointer<AVPacket>, timeBase: AVRational, origin: Double) -> Bool {
        guard audioFrom > -.infinity else { return true }
        if pkt.pointee.pts != tl_nopts_value(), Double(pkt.pointee.pts) * av_q2d(timeBase) - origin < audioFrom - 1e-9 { return false }
        audioFrom = -.infinity
        return true
    }

    /// Audio is decoded from the first packet at or after this long before the key frame a
    /// trimmed render starts from, whichever packet the container's seek put the audio on: how
    /// far before the key frame that is depends on the container's edit lists (an iPhone's,
    /// with its encoder's 2112 samples of priming, puts it a packet earlier than a plain MP4 of
    /// the same packets), and an AAC decoder's output depends on where it started (its noise
    /// substitution draws from one random sequence). So the same packets give the same samples
    /// in any container (an excerpt, `Excerpt`, included).
    static let audioLeadIn = 0.1

    /// Seeks to the key frame at or before the trim start, and returns its time; nil when the
    /// file is read from its beginning. A container without an index (MPEG-TS:
    /// a camcorder's .MTS) is sought by bisecting its bytes and may land past the key frame the
    /// start needs (a clip with one key frame, at its start: nothing after the seek decoded, and
    /// the render failed with "no video frame could be decoded"). The first video key frame after
    /// the seek is looked at without decoding; when it lies past the start, or there is none,
    /// the file is read from its beginning and what precedes the start dropped.
    static func seekToTrimStart(_ input: InputFile, videoIndex: Int32, trimStart: Double, fps: Double) -> Double? {
        let origin = input.origin
        func fromTheBeginning() -> Double? { input.seekToBeginning(); return nil }
        guard input.seek(to: trimStart) else { return fromTheBeginning() }
        let packet = Packet()
        var key: Double? = nil
        while av_read_frame(input.ctx, packet.ptr) >= 0 {
            defer { packet.unref() }
            let p = packet.ptr.pointee
            guard p.stream_index == videoIndex, (p.flags & AV_PKT_FLAG_KEY) != 0 else { continue }
            let pts = p.pts != tl_nopts_value() ? p.pts : p.dts
            key = pts == tl_nopts_value() ? nil : Double(pts) * av_q2d(input.stream(videoIndex).pointee.time_base) - origin
            break
        }
        if let key, key <= trimStart + 0.5 / fps, input.seek(to: trimStart) { return key }
        return fromTheBeginning()
    }

    /// A frame per field when the movie shows more frames of the source a second than it stores
    /// (a 1080i clip of 29.97 frames in a 60 fps movie, 50i PAL in a 30 fps one, or slowed down):
    /// each slot then shows the field nearest its time. Else (29.97i at 30) a frame per frame.
    static func deinterlacer(_ spec: SegmentSpec, stream: UnsafeMutablePointer<AVStream>, timeBase: AVRational) -> Deinterlacer {
        let rate = stream.pointee.avg_frame_rate
        let stored = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 25
        return Deinterlacer(timeBase: timeBase, perField: spec.profile.fps.double / spec.edits.speed > 1.1 * stored, file: spec.sourceName)
    }

    /// A decoded frame, made whole first when the source is interlaced, to `takeVideo`.
    func takeDecoded(_ frame: Frame, origin: Double) throws -> Bool {
        guard let deinterlacer else { return try takeVideo(frame, origin: origin) }
        return try deinterlacer.push(frame.ptr) { try self.takeVideo($0, origin: origin) }
    }

    /// Checked every 64 packets read; a title's or a photo's renderer checks every 16 frames
    /// (`stopIfCancelled`): a stopped stage (its run cancelled, or past its time limit) frees its
    /// worker's slot within a fraction of a second.
    func run(isCancelled: () -> Bool) throws -> SegmentReport {
        let origin = input.origin
        if spec.trimStart > 0 { seekToTrimStart() }
        let frame = Frame()
        var videoDone = false
        var audioDone = audio == nil
        var readCount = 0
        while !(videoDone && audioDone) {
            readCount += 1
            if readCount % 64 == 0 && isCancelled() {
                throw MediaError.cancelled(.decode, file: name)
            }
            let t0 = now()
            let ret = av_read_frame(input.ctx, packet.ptr)
            if ret == tl_averror_eof() { report.decodeSeconds += now() - t0; break }
            if ret < 0 {
                throw MediaError(.decode, classify(ret), file: name, "cannot read the file: \(avErrorString(ret))")
            }
            defer { packet.unref() }
            let idx = packet.ptr.pointee.stream_index
            if idx == videoIndex && firstVideoPacket == nil {
                let pts = packet.ptr.pointee.pts != tl_nopts_value() ? packet.ptr.pointee.pts : packet.ptr.pointee.dts
                firstVideoPacket = (pts == tl_nopts_value() ? 0 : Double(pts) * av_q2d(video.timeBase) - origin,
                                    (packet.ptr.pointee.flags & AV_PKT_FLAG_KEY) != 0)
            }
            if spec.edits.bounce, idx == videoIndex, (packet.ptr.pointee.flags & AV_PKT_FLAG_KEY) != 0, packet.ptr.pointee.pts != tl_nopts_value() {
                keyPTS.append(packet.ptr.pointee.pts)
            }
            if idx == videoIndex && !videoDone {
                // A frame the movie will not show needs decoding only if others refer to it.
                video.ctx.pointee.skip_frame = mayShow(packet.ptr, origin: origin) ? AVDISCARD_DEFAULT : AVDISCARD_NONREF
                try send(packet.ptr, to: video, frame: frame, started: t0) { videoDone = try self.takeDecoded(frame, origin: origin) }
            } else if let audio, idx == input.audioIndex, !audioDone, decodesAudio(packet.ptr, timeBase: audio.timeBase, origin: origin) {
                try send(packet.ptr, to: audio, frame: frame, started: t0) { audioDone = try self.takeAudio(frame, origin: origin) }
            } else {
                report.decodeSeconds += now() - t0
            }
        }
        // Drain the decoders.
        if !videoDone { try send(nil, to: video, frame: frame, started: now()) { videoDone = try self.takeDecoded(frame, origin: origin) } }
        if !videoDone, let deinterlacer { videoDone = try deinterlacer.flush { try self.takeVideo($0, origin: origin) } }
        if !audioDone, let audio { try send(nil, to: audio, frame: frame, started: now()) { audioDone = try self.takeAudio(frame, origin: origin) } }
        try finishVideo()
        try finishAudio()
        if spec.edits.bounce { try reversePass() }
        try writer.finish(report: &report)
        return report
    }

    /// Sends a packet (nil: flush) and hands each decoded frame to `take` until it says done.
    func send(_ pkt: UnsafeMutablePointer<AVPacket>?, to decoder: Decoder, frame: Frame, started: Double, take: () throws -> Void) throws {
        var t0 = started
        var ret = avcodec_send_packet(decoder.ctx, pkt)
        if ret < 0 && ret != tl_averror_eof() {
            throw decodeError(ret, decoder: decoder, pkt: pkt)
        }
        while true {
            ret = avcodec_receive_frame(decoder.ctx, frame.ptr)
            if ret == tl_averror_eagain() || ret == tl_averror_eof() { break }
            if ret < 0 { throw decodeError(ret, decoder: decoder, pkt: pkt) }
            report.decodeSeconds += now() - t0
            try take()
            frame.unref()
            t0 = now()
        }
        report.decodeSeconds += now() - t0
    }

    func decodeError(_ ret: Int32, decoder: Decoder, pkt: UnsafeMutablePointer<AVPacket>?) -> MediaError {
        var at = ""
        if let pkt, pkt.pointee.pts != tl_nopts_value() {
            at = String(format: " at %.3f s", Double(pkt.pointee.pts) * av_q2d(decoder.timeBase) - input.origin)
        }
        let kind = decoder.ctx.pointee.codec_type == AVMEDIA_TYPE_VIDEO ? "video" : "audio"
        return MediaError(.decode, .permanent, file: name, "corrupt \(kind) data\(at): \(avErrorString(ret))")
    }

    // MARK: video

    /// For a constant-rate source decoded on one thread, each packet's own time and the next
    /// frame's (its pts plus its duration) tell whether the frame will fill any output slot: the
    /// same arithmetic as `takeVideo`, which shows a frame for the slots from its own first slot
    /// to the next frame's. Frames that fill none (60 fps shown at 30, what precedes the trim)
    /// may be skipped when nothing refers to them — x264's non-reference B-frames, typically —
    /// and the movie is the same. Anything uncertain counts as shown.
    lazy var constantRate: Bool = {
        let st = input.stream(videoIndex).pointee
        let r = st.r_frame_rate, a = st.avg_frame_rate
        guard !spec.edits.bounce, video.ctx.pointee.thread_count <= 1, r.num > 0, r.den > 0, a.num > 0, a.den > 0 else { return false }
        return abs(av_q2d(r) / av_q2d(a) - 1) < 0.001
    }()

    /// Where the video stream says it ends (`InputFile.videoClaimedEnd`), read once.
    lazy var videoClaimedEnd: Double = input.videoClaimedEnd

    func mayShow(_ pkt: UnsafeMutablePointer<AVPacket>, origin: Double) -> Bool {
        // A deinterlacer reads each frame's neighbours: none is skipped.
        guard deinterlacer == nil, constantRate, pkt.pointee.pts != tl_nopts_value(), pkt.pointee.duration > 0 else { return true }
        let tb = av_q2d(video.timeBase)
        let t = Double(pkt.pointee.pts) * tb - origin
        let next = Double(pkt.pointee.pts + pkt.pointee.duration) * tb - origin
        // Near the end of the video the last frame may fill the remaining slots.
        guard next + 2 * Double(pkt.pointee.duration) * tb < videoClaimedEnd else { return true }
        return firstSlot(next) > firstSlot(t) && firstSlot(t) < videoEnd
    }

    /// The first output slot a frame at source time `t` is nearest to (as `takeVideo` decides).
    /// A frame exactly halfway between two slots (every other frame of 60 fps shown at 30) is a
    /// tie the earlier frame wins; the tolerance keeps rounding noise in `t` from deciding it.
    func firstSlot(_ t: Double) -> Int { max(0, Int(((t - spec.trimStart) / speed * fps - 0.5 + 1e-6).rounded(.down)) + 1) }

    /// Places a decoded frame on the output's constant-rate grid. Returns true once all slots are filled.
    func takeVideo(_ frame: Frame, origin: Double) throws -> Bool {
        report.framesDecoded += 1
        let ts = frame.ptr.pointee.best_effort_timestamp
        var t = ts == tl_nopts_value() ? lastFrameTime + 1 / fps : Double(ts) * av_q2d(video.timeBase) - origin
        if report.framesDecoded == 1, let first = firstVideoPacket, !first.key, t - first.time > 0.1, spec.trimStart < t {
            // The decoder skipped what it could not decode: the file was cut mid-GOP.
            throw MediaError(.decode, .permanent, file: name,
                             String(format: "the video does not start on a key frame: %.3f s to %.3f s cannot be decoded", first.time, t))
        }
        if t <= lastFrameTime { t = lastFrameTime + 1e-6 }   // keep time moving forward
        lastFrameTime = t
        let r = (t - spec.trimStart) / speed
        // The first slot this frame is nearest to: round(r × fps) ≤ slot.
        let first = firstSlot(t)
        if let pending {
            let end = min(first, videoEnd)
            if end > nextSlot { try emit(pending, slots: nextSlot..<end); nextSlot = end }
        } else if first > 0 && nextSlot == 0 && r >= 0 {
            // The first frame comes after the trim start: it fills the slots before it.
            try emit(frame, slots: 0..<min(first, videoEnd))
            nextSlot = min(first, videoEnd)
        }
        if nextSlot >= videoEnd { return true }
        let keep = pending ?? Frame()
        keep.unref()
        av_frame_ref(keep.ptr, frame.ptr)
        pending = keep
        pendingTime = t
        return false
    }

    func finishVideo() throws {
        if nextSlot < videoEnd {
            guard let pending else {
                throw MediaError(.decode, .permanent, file: name, "no video frame could be decoded")
            }
            // A file whose video stops far before the time asked of it, and before the end its video
            // stream claims, is truncated, not just short. Video that ends where its stream says while
            // the audio runs on holds its last frame, as players show it.
            let wanted = spec.trimStart + Double(videoEnd) / fps * speed
            let claimed = videoClaimedEnd
            if wanted - pendingTime > max(1.0, 0.25 * (wanted - spec.trimStart)) && claimed - pendingTime > 1.0 {
                throw MediaError(.decode, .permanent, file: name,
                                 String(format: "the file is truncated: its video ends at %.3f s but it claims %.3f s", pendingTime, claimed))
            }
            try emit(pending, slots: nextSlot..<videoEnd)
            nextSlot = videoEnd
        }
    }

    /// Filters `frame` once and encodes it for each slot.
    /// Filters `frame` and encodes it for each slot: once for all of them, or once per slot when
    /// a text overlay's time window makes the picture depend on the slot.
    func emit(_ frame: Frame, slots: Range<Int>) throws {
        guard !slots.isEmpty else { return }
        let f = frame.ptr
        let colour = SourceColour(frame: f)
        if filter == nil || !filter!.matches(f) || colour != filterColour {
            filterColour = colour
            var sar = f.pointee.sample_aspect_ratio
            if sar.num == 0 { sar = input.stream(videoIndex).pointee.codecpar.pointee.sample_aspect_ratio }
            let desc = chain.description(for: .init(orientation: orientation, sar: sar, colour: colour,
                                                    size: (Int(f.pointee.width), Int(f.pointee.height)), format: f.pointee.format))
            filter = try VideoFilter(width: f.pointee.width, height: f.pointee.height, format: f.pointee.format, sar: sar,
                                     timeBase: AVRational(num: Int32(spec.profile.fps.den), den: Int32(spec.profile.fps.num)),
                                     description: desc, file: name)
        }
        let perSlot = chain.variesPerSlot
        if spec.edits.bounce { slotSource += Array(repeating: f.pointee.best_effort_timestamp, count: slots.count) }
        var filteredOnce = false
        for slot in slots {
            // Frames a baked fade cuts away are neither filtered nor encoded.
            guard writer.wants(slot) else {
                if audio == nil { try writer.writeSilence(upTo: Timing.samples(atFrame: slot + 1, fps: spec.profile.fps)) }
                continue
            }
            if !filteredOnce || perSlot {
                filteredOnce = true
                let t0 = now()
                f.pointee.pts = Int64(slot)
                try filter!.process(f, into: filtered, file: name)
                report.transformSeconds += now() - t0
            }
            try writer.write(filtered.ptr, slot: slot, report: &report)
            if audio == nil { try writer.writeSilence(upTo: Timing.samples(atFrame: slot + 1, fps: spec.profile.fps)) }
        }
    }

    // MARK: audio

    func takeAudio(_ frame: Frame, origin: Double) throws -> Bool {
        guard let resampler else { return true }
        let t0 = now()
        if !audioStarted {
            audioStarted = true
            let ts = frame.ptr.pointee.best_effort_timestamp
            let t = ts == tl_nopts_value() ? spec.trimStart : Double(ts) * av_q2d(audio!.timeBase) - origin
            let offset = Int(((t - spec.trimStart) / speed * Double(Timing.sampleRate)).rounded())
            if offset > 0 { audioBuffer.append(contentsOf: repeatElement(0, count: min(offset, audioTarget) * 2)) }
            else { audioSkip = -offset }
        }
        do {
            if let tempo {
                scratch.removeAll(keepingCapacity: true)
                try resampler.convert(frame.ptr, into: &scratch)
                try tempo.process(scratch, into: &audioBuffer)
            } else {
                try resampler.convert(frame.ptr, into: &audioBuffer)
            }
        } catch var e as MediaError { e.file = name; throw e }
        report.transformSeconds += now() - t0
        return try drainAudio(final: false)
    }

    func finishAudio() throws {
        if let resampler, audioStarted, writer.samplesWritten < audioTarget {
            if let tempo {
                scratch.removeAll(keepingCapacity: true)
                try resampler.convert(nil, into: &scratch)
                try tempo.process(scratch, into: &audioBuffer)
                try tempo.process(nil, into: &audioBuffer)
            } else {
                try resampler.convert(nil, into: &audioBuffer)
            }
        }
        _ = try drainAudio(final: true)
    }

    /// Applies skip and volume, and writes whole buffered samples up to the segment's length.
    func drainAudio(final: Bool) throws -> Bool {
        if audioSkip > 0 {
            let drop = min(audioSkip, audioBuffer.count / 2)
            audioBuffer.removeFirst(drop * 2)
            audioSkip -= drop
        }
        let available = audioBuffer.count / 2
        guard available >= 4096 || (final && available > 0) else { return writer.samplesWritten >= audioTarget }
        let n = min(available, audioTarget - writer.samplesWritten)
        if n > 0 {
            if spec.edits.volume != 1 {
                let gain = spec.edits.volume
                for i in 0..<(n * 2) {
                    audioBuffer[i] = Int16(clamping: Int((Double(audioBuffer[i]) * gain).rounded()))
                }
            }
            try writer.writePCM(audioBuffer, count: n)
            if spec.edits.bounce { forwardPCM.append(contentsOf: audioBuffer[0..<(n * 2)]) }
        }
        audioBuffer.removeAll(keepingCapacity: true)
        return writer.samplesWritten >= audioTarget
    }

    // MARK: bounce

    /// Plays the forward slots back to the first, GOP by GOP from the end of the source: seek to a
    /// key frame, decode that group, keep (filtered, at output size) only the frames the slots
    /// showed, emit them backwards. Memory stays at 32 output frames, whatever the source's GOPs.
    func reversePass() throws {
        let n = forwardCount
        guard n > 1, slotSource.count >= n - 1, let filter else { return }
        let keys = Array(Set(keyPTS)).sorted()
        func group(_ ts: Int64) -> Int { (keys.lastIndex { $0 <= ts }) ?? 0 }
        var slotsByGroup: [Int: [Int]] = [:]
        for s in 0..<(n - 1) { slotsByGroup[group(slotSource[s]), default: []].append(s) }
        let raw = Frame()
        var last: Frame? = nil
        // At most `chunk` output frames are held at once: a long group is decoded once per chunk.
        let chunk = 32
        for g in slotsByGroup.keys.sorted(by: >) {
          let all = slotsByGroup[g]!.sorted(by: >)
          for c in stride(from: 0, to: all.count, by: chunk) {
            let t0 = now()
            let slots = Array(all[c..<min(c + chunk, all.count)])
            let needed = Set(slots.map { slotSource[$0] })
            var kept: [Int64: Frame] = [:]
            av_seek_frame(input.ctx, videoIndex, keys.isEmpty ? Int64.min : keys[g], AVSEEK_FLAG_BACKWARD)
            avcodec_flush_buffers(video.ctx)
            let nextKey = g + 1 < keys.count ? keys[g + 1] : Int64.max
            var sawNextKey = false
            // The forward pass's frames were made whole by the deinterlacer: so are these, by one
            // of the group's own.
            let fields = deinterlacer == nil ? nil : Self.deinterlacer(spec, stream: input.stream(videoIndex), timeBase: video.timeBase)
            func keep(_ frame: Frame) throws -> Bool {
                let ts = frame.ptr.pointee.best_effort_timestamp
                if needed.contains(ts) && kept[ts] == nil {
                    let out = Frame()
                    frame.ptr.pointee.pts = Int64(2 * n - 2 - (slots.first { slotSource[$0] == ts } ?? 0))
                    try filter.process(frame.ptr, into: out, file: name)
                    kept[ts] = out
                }
                return false
            }
            func take() throws {
                while avcodec_receive_frame(video.ctx, raw.ptr) >= 0 {
                    if let fields { _ = try fields.push(raw.ptr, take: keep) } else { _ = try keep(raw) }
                    raw.unref()
                }
            }
            while kept.count < needed.count {
                let ret = av_read_frame(input.ctx, packet.ptr)
                if ret < 0 { break }
                defer { packet.unref() }
                guard packet.ptr.pointee.stream_index == videoIndex else { continue }
                // A group ends where the next key frame begins; an open one (HEVC from iPhones,
                // x265's default) shows its last frames after that key in the file, decoded from
                // it: read on through them, and stop at the first frame of the next group.
                let pts = packet.ptr.pointee.pts
                if pts != tl_nopts_value() && pts >= nextKey {
                    if sawNextKey || (packet.ptr.pointee.flags & AV_PKT_FLAG_KEY) == 0 { break }
                    sawNextKey = true
                }
                if avcodec_send_packet(video.ctx, packet.ptr) >= 0 { try take() }
            }
            avcodec_send_packet(video.ctx, nil)
            try take()
            _ = try fields?.flush(take: keep)
            report.decodeSeconds += now() - t0
            for s in slots {
                // A frame that did not decode again shows its nearest neighbour: every slot is written.
                let ts = slotSource[s]
                guard let f = kept[ts] ?? last ?? kept.min(by: { abs($0.key - ts) < abs($1.key - ts) })?.value else {
                    throw MediaError(.decode, .permanent, file: name,
                                     String(format: "bounce: no frame near %.3f s decodes again for the way back", Double(ts) * av_q2d(video.timeBase)))
                }
                try writer.write(f.ptr, slot: 2 * n - 2 - s, report: &report)
                last = f
            }
          }
        }
        // The forward audio, backwards, for as long as the reverse frames last.
        if audio != nil {
            let count = spec.sampleCount - writer.samplesWritten
            let start = min(forwardPCM.count / 2, Timing.samples(atFrame: n - 1, fps: spec.profile.fps))
            var reversed = [Int16](repeating: 0, count: count * 2)
            for k in 0..<min(count, start) {
                let src = start - 1 - k
                reversed[2 * k] = forwardPCM[2 * src]; reversed[2 * k + 1] = forwardPCM[2 * src + 1]
            }
            try writer.writePCM(reversed, count: count)
        }
        forwardPCM = []
    }
}
