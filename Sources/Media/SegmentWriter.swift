import Foundation
import ThreadlineCore
internal import CFFmpeg

/// The output half of every segment, whatever made its frames: H.264 in the output profile
/// (first frame a key frame) and 48 kHz stereo s16 PCM, in a MOV.
///
/// Renderers number frames and samples from the item's start. With a `SegmentCut`, the writer
/// keeps only the cut's frames and samples (so the file starts at the cut's first frame), and
/// fades them from and to black and silence, so every renderer bakes fades the same way.
///
/// The encoder and the muxer run on a thread of their own (`EncodeLane`), fed in the order the
/// renderer hands frames and sound over, so the renderer decodes and filters the next frames
/// while x264 encodes this one. libx264 still runs on one thread and sees the same frames in the
/// same order, and the muxer gets the same calls in the same order: the file is byte for byte the
/// one a single thread writes. A lone render (an edit, a run's last item) takes about the longer
/// of its two halves instead of their sum; on a busy worker the cores were full anyway.
final class SegmentWriter {
    private let lane: EncodeLane
    let videoStream: UnsafeMutablePointer<AVStream>
    let audioStream: UnsafeMutablePointer<AVStream>
    let sampleCount: Int
    let name: String
    private(set) var samplesWritten = 0

    /// Slots encoded as IDR frames, so the segment can be cut there without re-encoding.
    let keyframes: Set<Int>
    let cut: SegmentCut?
    /// The item samples the file keeps, and where their fades lie.
    let keptSamples: Range<Int>
    let fadeInSamples: Range<Int>
    let fadeOutSamples: Range<Int>
    /// Samples written to the file (with a cut, fewer than the item's `samplesWritten`).
    private var fileSamples = 0
    /// The frames the file must hold (0: not known), and those written.
    private let framesPlanned: Int
    private var framesWritten = 0

    init(profile: OutputProfile, sampleCount: Int, path: String, name: String, keyframes: [Int]? = nil,
         cut: SegmentCut? = nil, frameCount: Int = 0) throws {
        self.sampleCount = sampleCount
        self.keyframes = Set(keyframes ?? [])
        self.name = name
        self.cut = cut
        framesPlanned = frameCount > 0 ? (cut.map { min($0.end, frameCount) - $0.first } ?? frameCount) : 0
        if let cut {
            func S(_ f: Int) -> Int { Timing.samples(atFrame: f, fps: profile.fps) }
            // Where the segment runs to its item's end, it keeps all its samples; where a fade
            // cuts it, nothing after the fade (silence by then).
            let end = cut.end >= frameCount ? sampleCount : min(sampleCount, S(cut.end))
            keptSamples = S(cut.first)..<max(S(cut.first), end)
            fadeInSamples = S(cut.first)..<S(cut.first + cut.fadeIn)
            fadeOutSamples = S(cut.end - cut.fadeOut)..<S(cut.end)
        } else {
            keptSamples = 0..<sampleCount
            fadeInSamples = 0..<0
            fadeOutSamples = 0..<0
        }
        let output = try OutputFile(path: path, format: "mov", file: name)
        let encoder = try VideoEncoder(profile: profile, globalHeader: output.needsGlobalHeader, file: name)
        videoStream = output.addStream()
        avcodec_parameters_from_context(videoStream.pointee.codecpar, encoder.ctx)
        videoStream.pointee.time_base = encoder.ctx.pointee.time_base
        audioStream = output.addStream()
        configurePCM(audioStream)
        try output.open()
        lane = EncodeLane(output: output, encoder: encoder, videoStream: videoStream, name: name)
    }
    deinit { lane.abandon() }

    /// Whether the segment keeps the item's frame `slot` (renderers may skip making the others).
    func wants(_ slot: Int) -> Bool {
        guard let cut else { return true }
        return slot >= cut.first && slot < cut.end
    }

    /// Encodes `f` as the item's frame `slot` (dropped when the cut leaves it out).
    func writeVideo(_ f: UnsafeMutablePointer<AVFrame>, slot: Int) throws {
        guard wants(slot) else { return }
        let first = cut?.first ?? 0
        var faded: Frame? = nil
        if let cut {
            // ffmpeg's fade: the first frame of a fade-in is black; a fade-out's last frame is one step above.
            let k = slot - cut.first, j = slot - (cut.end - cut.fadeOut)
            let factor = k < cut.fadeIn ? k * 65536 / cut.fadeIn : j >= 0 ? (cut.fadeOut - j) * 65536 / cut.fadeOut : 65536
            if factor < 65536 { faded = try fade(f, factor: factor) }
        }
        // The lane holds its own reference: the renderer may reuse `f` (the buffers are shared,
        // never written while referenced twice).
        let frame: Frame
        if let faded { frame = faded } else {
            frame = Frame()
            guard av_frame_ref(frame.ptr, f) >= 0 else { throw MediaError(.encode, .retryable, file: name, "out of memory") }
        }
        framesWritten += 1
        frame.ptr.pointee.pts = Int64(slot - first)
        frame.ptr.pointee.pict_type = keyframes.contains(slot) ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        try lane.encode(frame)
    }

    /// A copy of 8-bit YUV `f` faded towards black by `factor` / 65536 (the renderer may show `f` again).
    private func fade(_ f: UnsafeMutablePointer<AVFrame>, factor: Int) throws -> Frame {
        let out = Frame()
        guard av_frame_ref(out.ptr, f) >= 0, av_frame_make_writable(out.ptr) >= 0 else {
            throw MediaError(.encode, .retryable, file: name, "out of memory")
        }
        let p = out.ptr.pointee
        let black = p.color_range == AVCOL_RANGE_JPEG ? 0 : 16
        let chromaH = (Int(p.height) + 1) / 2, chromaW = (Int(p.width) + 1) / 2
        let planes: [(UnsafeMutablePointer<UInt8>?, Int32, Int, Int, Int)] = [
            (p.data.0, p.linesize.0, Int(p.width), Int(p.height), black),
            (p.data.1, p.linesize.1, chromaW, chromaH, 128),
            (p.data.2, p.linesize.2, chromaW, chromaH, 128),
        ]
        for (data, stride, w, h, level) in planes {
            guard let data else { continue }
            for y in 0..<h {
                let row = data + y * Int(stride)
                for x in 0..<w {
                    let v = (Int(row[x]) - level) * factor + (level << 16) + 32768
                    row[x] = UInt8(clamping: v >> 16)
                }
            }
        }
        return out
    }

    /// Appends the item's next `count` interleaved stereo samples (never past the segment's sample
    /// count); with a cut, only those it keeps reach the file, faded where its fades lie.
    func writePCM(_ samples: [Int16], count: Int) throws {
        let n = min(count, sampleCount - samplesWritten)
        guard n > 0 else { return }
        let from = max(samplesWritten, keptSamples.lowerBound), to = min(samplesWritten + n, keptSamples.upperBound)
        if to > from {
            let bytes = Int32((to - from) * 4)
            let packet = Packet()
            guard av_new_packet(packet.ptr, bytes) >= 0 else { throw MediaError(.encode, .retryable, file: name, "out of memory") }
            let skip = from - samplesWritten
            samples.withUnsafeBytes { raw in
                packet.ptr.pointee.data.update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + skip * 4, count: Int(bytes))
            }
            if fadeInSamples.overlaps(from..<to) || fadeOutSamples.overlaps(from..<to) {
                let pcm = UnsafeMutableRawPointer(packet.ptr.pointee.data!).assumingMemoryBound(to: Int16.self)
                for s in from..<to {
                    let gain: Double
                    if fadeInSamples.contains(s) {
                        gain = (Double(s - fadeInSamples.lowerBound) + 0.5) / Double(fadeInSamples.count)
                    } else if fadeOutSamples.contains(s) {
                        gain = 1 - (Double(s - fadeOutSamples.lowerBound) + 0.5) / Double(fadeOutSamples.count)
                    } else { continue }
                    let k = 2 * (s - from)
                    pcm[k] = Int16(clamping: Int((Double(pcm[k]) * gain).rounded()))
                    pcm[k + 1] = Int16(clamping: Int((Double(pcm[k + 1]) * gain).rounded()))
                }
            }
            packet.ptr.pointee.pts = Int64(fileSamples)
            packet.ptr.pointee.dts = Int64(fileSamples)
            packet.ptr.pointee.duration = Int64(to - from)
            packet.ptr.pointee.stream_index = audioStream.pointee.index
            packet.ptr.pointee.flags |= AV_PKT_FLAG_KEY
            av_packet_rescale_ts(packet.ptr, AVRational(num: 1, den: Int32(Timing.sampleRate)), audioStream.pointee.time_base)
            try lane.write(packet)
            fileSamples += to - from
        }
        samplesWritten += n
    }

    /// Pads the audio with silence up to `target` samples.
    func writeSilence(upTo target: Int) throws {
        let t = min(target, sampleCount)
        while samplesWritten < t {
            let n = min(t - samplesWritten, 4800)
            try writePCM([Int16](repeating: 0, count: n * 2), count: n)
        }
    }

    /// Flushes the encoder, completes the audio and closes the file.
    func finish() throws {
        try lane.flush()
        try writeSilence(upTo: sampleCount)
        try lane.close()
    }

    /// Encodes `f` at `slot`, counting it in `report` (the encoder's time is counted at `finish`).
    func write(_ f: UnsafeMutablePointer<AVFrame>, slot: Int, report: inout SegmentReport) throws {
        guard wants(slot) else { return }
        try writeVideo(f, slot: slot)
        report.framesOut += 1
    }

    /// Finishes the segment, counting the encoder's busy time and the samples written in `report`.
    func finish(report: inout SegmentReport) throws {
        // A segment short of frames would be kept as rendered and fail every concat that used it.
        guard framesPlanned == 0 || framesWritten == framesPlanned else {
            throw MediaError(.encode, .permanent, file: name, "rendered \(framesWritten) frames of the \(framesPlanned) planned")
        }
        try finish()
        report.encodeSeconds += lane.busySeconds
        report.samplesOut = fileSamples
    }
}

/// The encoder and the muxer of one segment, on a serial queue of their own: work runs in the
/// order it was handed over, at most `depth` items ahead of the renderer. The first failure is
/// kept and thrown to the renderer at its next hand-over; what is queued after it is skipped. A
/// lane let go of early (the renderer failed) skips what is queued and is waited for, so nothing
/// touches the file once the writer is gone.
private final class EncodeLane: @unchecked Sendable {
    private let output: OutputFile
    private let encoder: VideoEncoder
    private let videoStream: UnsafeMutablePointer<AVStream>
    private let name: String
    private let packet = Packet()
    private let queue = DispatchQueue(label: "threadline.segment-encoder")
    private let room: DispatchSemaphore
    /// The first failure, or a cancellation; set on the queue, read by the renderer.
    private let lock = NSLock()
    private var failure: Error?
    /// Seconds the queue spent working (read after `close`, which waits for it).
    private(set) var busySeconds = 0.0

    /// Hands a frame or packet to the queue: the lane then owns it alone.
    private struct Handed<T>: @unchecked Sendable { let value: T }

    init(output: OutputFile, encoder: VideoEncoder, videoStream: UnsafeMutablePointer<AVStream>, name: String, depth: Int = 2) {
        self.output = output; self.encoder = encoder; self.videoStream = videoStream; self.name = name
        room = DispatchSemaphore(value: depth)
    }

    /// Queues a frame for the encoder.
    func encode(_ frame: Frame) throws {
        let f = Handed(value: frame)
        try run { try $0.send(f.value.ptr) }
    }

    /// Queues a packet for the muxer, after the frames queued before it.
    func write(_ packet: Packet) throws {
        let p = Handed(value: packet)
        try run { try $0.output.write(p.value.ptr) }
    }

    /// Queues the encoder's flush (its last packets go to the muxer).
    func flush() throws { try run { try $0.send(nil) } }

    /// Writes the file's trailer and waits for everything queued; throws the first failure.
    func close() throws {
        try run { try $0.output.finish() }
        queue.sync {}
        if let failed = lock.withLock({ failure }) { throw failed }
    }

    /// Skips whatever is still queued and waits for the work in flight.
    func abandon() {
        lock.withLock { if failure == nil { failure = CancellationError() } }
        queue.sync {}
    }

    private func run(_ work: @escaping @Sendable (EncodeLane) throws -> Void) throws {
        if let failed = lock.withLock({ failure }) { throw failed }
        room.wait()
        queue.async { [self] in
            defer { room.signal() }
            guard lock.withLock({ failure == nil }) else { return }
            let t0 = now()
            do { try work(self) } catch { lock.withLock { if failure == nil { failure = error } } }
            busySeconds += now() - t0
        }
    }

    /// Frames handed to the encoder so far.
    private var framesSent = 0

    private func send(_ f: UnsafeMutablePointer<AVFrame>?) throws {
        if f != nil { framesSent += 1 }
        var ret = avcodec_send_frame(encoder.ctx, f)
        if ret < 0 && ret != tl_averror_eof() {
            throw MediaError(.encode, .permanent, file: name, "encoding failed: \(avErrorString(ret))")
        }
        while true {
            ret = avcodec_receive_packet(encoder.ctx, packet.ptr)
            if ret == tl_averror_eagain() || ret == tl_averror_eof() { return }
            if ret < 0 { throw MediaError(.encode, .permanent, file: name, "encoding failed: \(avErrorString(ret))") }
            packet.ptr.pointee.stream_index = videoStream.pointee.index
            packet.ptr.pointee.duration = 1   // libx264 on 5.1 leaves it 0
            // libx265 (3.5) gives a segment of one or two frames (fewer than its B-frame delay)
            // a dts read from memory it never set: the muxer refused it ("pts/dts pair
            // unsupported", the stage failed) or made a timeline up. So few frames are never
            // reordered: each is decoded at its own time.
            if f == nil && framesSent <= 2 && encoder.ctx.pointee.codec_id == AV_CODEC_ID_HEVC { packet.ptr.pointee.dts = packet.ptr.pointee.pts }
            av_packet_rescale_ts(packet.ptr, encoder.ctx.pointee.time_base, videoStream.pointee.time_base)
            defer { packet.unref() }
            try output.write(packet.ptr)
        }
    }
}
