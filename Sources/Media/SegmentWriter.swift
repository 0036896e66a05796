import Foundation
import ThreadlineCore
internal import CFFmpeg

/// The output half of every segment, whatever made its frames: H.264 in the output profile
/// (first frame a key frame) and 48 kHz stereo s16 PCM, in a MOV.
///
/// Renderers number frames and samples from the item's start. With a `SegmentCut`, the writer
/// keeps only the cut's frames and samples (so the file starts at the cut's first frame), and
/// fades them from and to black and silence, so every renderer bakes fades the same way.
final class SegmentWriter {
    let output: OutputFile
    let encoder: VideoEncoder
    let videoStream: UnsafeMutablePointer<AVStream>
    let audioStream: UnsafeMutablePointer<AVStream>
    let packet = Packet()
    let sampleCount: Int
    let name: String
    private(set) var samplesWritten = 0
    private(set) var framesWritten = 0

    /// Slots encoded as IDR frames, so the segment can be cut there without re-encoding.
    let keyframes: Set<Int>
    let cut: SegmentCut?
    /// The item samples the file keeps, and where their fades lie.
    let keptSamples: Range<Int>
    let fadeInSamples: Range<Int>
    let fadeOutSamples: Range<Int>
    /// Samples written to the file (with a cut, fewer than the item's `samplesWritten`).
    private var fileSamples = 0

    init(profile: OutputProfile, sampleCount: Int, path: String, name: String, keyframes: [Int]? = nil,
         cut: SegmentCut? = nil, frameCount: Int = 0) throws {
        self.sampleCount = sampleCount
        self.keyframes = Set(keyframes ?? [])
        self.name = name
        self.cut = cut
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
        output = try OutputFile(path: path, format: "mov", file: name)
        encoder = try VideoEncoder(profile: profile, globalHeader: output.needsGlobalHeader, file: name)
        videoStream = output.addStream()
        avcodec_parameters_from_context(videoStream.pointee.codecpar, encoder.ctx)
        videoStream.pointee.time_base = encoder.ctx.pointee.time_base
        audioStream = output.addStream()
        configurePCM(audioStream)
        try output.open()
    }

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
        let frame = faded?.ptr ?? f
        frame.pointee.pts = Int64(slot - first)
        frame.pointee.pict_type = keyframes.contains(slot) ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        try encode(frame)
        framesWritten += 1
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

    private func encode(_ f: UnsafeMutablePointer<AVFrame>?) throws {
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
            av_packet_rescale_ts(packet.ptr, encoder.ctx.pointee.time_base, videoStream.pointee.time_base)
            defer { packet.unref() }
            try output.write(packet.ptr)
        }
    }

    /// Appends the item's next `count` interleaved stereo samples (never past the segment's sample
    /// count); with a cut, only those it keeps reach the file, faded where its fades lie.
    func writePCM(_ samples: [Int16], count: Int) throws {
        let n = min(count, sampleCount - samplesWritten)
        guard n > 0 else { return }
        let from = max(samplesWritten, keptSamples.lowerBound), to = min(samplesWritten + n, keptSamples.upperBound)
        if to > from {
            let bytes = Int32((to - from) * 4)
            guard av_new_packet(packet.ptr, bytes) >= 0 else { throw MediaError(.encode, .retryable, file: name, "out of memory") }
            defer { packet.unref() }
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
            try output.write(packet.ptr)
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
        try encode(nil)
        try writeSilence(upTo: sampleCount)
        try output.finish()
    }

    /// Encodes `f` at `slot`, counting it and its time in `report`.
    func write(_ f: UnsafeMutablePointer<AVFrame>, slot: Int, report: inout SegmentReport) throws {
        guard wants(slot) else { return }
        let t0 = now()
        try writeVideo(f, slot: slot)
        report.encodeSeconds += now() - t0
        report.framesOut += 1
    }

    /// Finishes the segment, counting the time and the samples written in `report`.
    func finish(report: inout SegmentReport) throws {
        let t0 = now()
        try finish()
        report.encodeSeconds += now() - t0
        report.samplesOut = fileSamples
    }
}
