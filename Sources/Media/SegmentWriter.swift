import Foundation
import ThreadlineCore
internal import CFFmpeg

/// The output half of every segment, whatever made its frames: H.264 in the output profile
/// (first frame a key frame) and 48 kHz stereo s16 PCM, in a MOV.
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

    init(profile: OutputProfile, sampleCount: Int, path: String, name: String, keyframes: [Int]? = nil) throws {
        self.sampleCount = sampleCount
        self.keyframes = Set(keyframes ?? [])
        self.name = name
        output = try OutputFile(path: path, format: "mov", file: name)
        encoder = try VideoEncoder(profile: profile, globalHeader: output.needsGlobalHeader, file: name)
        videoStream = output.addStream()
        avcodec_parameters_from_context(videoStream.pointee.codecpar, encoder.ctx)
        videoStream.pointee.time_base = encoder.ctx.pointee.time_base
        audioStream = output.addStream()
        configurePCM(audioStream)
        try output.open()
    }

    /// Encodes `f` as the frame at output slot `slot`.
    func writeVideo(_ f: UnsafeMutablePointer<AVFrame>, slot: Int) throws {
        f.pointee.pts = Int64(slot)
        f.pointee.pict_type = keyframes.contains(slot) ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        try encode(f)
        framesWritten += 1
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

    /// Appends `n` interleaved stereo samples (never past the segment's sample count).
    func writePCM(_ samples: [Int16], count: Int) throws {
        let n = min(count, sampleCount - samplesWritten)
        guard n > 0 else { return }
        let bytes = Int32(n * 4)
        guard av_new_packet(packet.ptr, bytes) >= 0 else { throw MediaError(.encode, .retryable, file: name, "out of memory") }
        defer { packet.unref() }
        samples.withUnsafeBytes { raw in
            packet.ptr.pointee.data.update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: Int(bytes))
        }
        packet.ptr.pointee.pts = Int64(samplesWritten)
        packet.ptr.pointee.dts = Int64(samplesWritten)
        packet.ptr.pointee.duration = Int64(n)
        packet.ptr.pointee.stream_index = audioStream.pointee.index
        packet.ptr.pointee.flags |= AV_PKT_FLAG_KEY
        av_packet_rescale_ts(packet.ptr, AVRational(num: 1, den: Int32(Timing.sampleRate)), audioStream.pointee.time_base)
        try output.write(packet.ptr)
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
        report.samplesOut = samplesWritten
    }
}
