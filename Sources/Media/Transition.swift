import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Renders a transition: the tail of one item's segment and the head of the next, joined by
/// libavfilter (xfade for a dissolve; fade out, then in, for a fade through black), with their audio
/// crossfaded the same way, into a small segment that concat stream-copies.
///
/// `isCancelled` (its run cancelled, its attempt past its time limit, its worker stopping) is
/// asked between the steps and every frame written: a long dissolve of 4K clips held its slot to
/// the end whatever happened to its run.
public enum TransitionRenderer {
    public static func render(_ spec: TransitionSpec, from a: String, to b: String, to path: String,
                              isCancelled: () -> Bool = { false }) throws -> SegmentReport {
        _ = configureLogging
        let name = "transition"
        var report = SegmentReport()
        let t0 = now()
        try stopIfCancelled(isCancelled, stage: .transition, file: name)
        let (framesA, pcmA) = try read(a, firstFrame: spec.fromFrame, frames: spec.frames, firstSample: spec.fromSample,
                                       samples: spec.samples, fps: spec.profile.fps)
        try stopIfCancelled(isCancelled, stage: .transition, file: name)
        let (framesB, pcmB) = try read(b, firstFrame: 0, frames: spec.frames, firstSample: 0, samples: spec.samples, fps: spec.profile.fps)
        report.decodeSeconds = now() - t0
        try stopIfCancelled(isCancelled, stage: .transition, file: name)
        report.framesDecoded = framesA.count + framesB.count

        let t1 = now()
        let fps = spec.profile.fps
        let seconds = Double(spec.frames) * Double(fps.den) / Double(fps.num)
        let description: String
        if spec.kind == .fade {
            // Out to black over the first half, in from black over the second: black at the boundary.
            let h = spec.frames / 2, rest = spec.frames - h
            description = h > 0
                ? "[a]trim=end_frame=\(h),fade=t=out:start_frame=0:nb_frames=\(h)[a1];"
                  + "[b]trim=start_frame=\(h),setpts=PTS-STARTPTS,fade=t=in:start_frame=0:nb_frames=\(rest)[b1];"
                  + "[a1][b1]concat=n=2:v=1:a=0,format=yuv420p"
                : "[a]nullsink;[b]fade=t=in:start_frame=0:nb_frames=\(rest),format=yuv420p"
        } else {
            description = String(format: "[a][b]xfade=transition=fade:duration=%.6f:offset=0,format=yuv420p", seconds)
        }
        let graph = try TwoInputFilter(width: framesA[0].ptr.pointee.width, height: framesA[0].ptr.pointee.height,
                                       timeBase: AVRational(num: Int32(fps.den), den: Int32(fps.num)),
                                       description: description, file: name)
        var out = try graph.run(framesA, framesB, count: spec.frames)
        // Through black the segments' own watermark fades too: put it back on top, so it stays steady.
        if spec.kind == .fade, spec.profile.watermark != nil {
            let files = try OverlayFiles(edits: Edits(), profile: spec.profile, name: name)
            let tb = AVRational(num: Int32(fps.den), den: Int32(fps.num))
            let overlay = try VideoFilter(width: out[0].ptr.pointee.width, height: out[0].ptr.pointee.height, format: AV_PIX_FMT_YUV420P.rawValue,
                                          sar: AVRational(num: 1, den: 1), timeBase: tb,
                                          description: EditChain(edits: Edits(), profile: spec.profile, files: files.paths).finish("setsar=1"), file: name)
            out = try out.enumerated().map { k, f in
                let o = Frame()
                f.ptr.pointee.pts = Int64(k)
                try overlay.process(f.ptr, into: o, file: name)
                return o
            }
        }
        report.transformSeconds = now() - t1

        let writer = try SegmentWriter(profile: spec.profile, sampleCount: spec.samples, path: path, name: name)
        for (slot, f) in out.enumerated() {
            try stopIfCancelled(isCancelled, stage: .transition, file: name)
            try writer.write(f.ptr, slot: slot, report: &report)
        }
        try writer.writePCM(crossfade(pcmA, pcmB, samples: spec.samples, throughSilence: spec.kind == .fade), count: spec.samples)
        try writer.finish(report: &report)
        return report
    }

    /// Linear crossfade (dissolve), or out to silence and back in (fade).
    static func crossfade(_ a: [Int16], _ b: [Int16], samples n: Int, throughSilence: Bool) -> [Int16] {
        var out = [Int16](repeating: 0, count: n * 2)
        for i in 0..<n {
            let x = (Double(i) + 0.5) / Double(n)
            let (ga, gb) = throughSilence ? (max(0, 1 - 2 * x), max(0, 2 * x - 1)) : (1 - x, x)
            for c in 0..<2 {
                let k = 2 * i + c
                let va = k < a.count ? Double(a[k]) : 0, vb = k < b.count ? Double(b[k]) : 0
                out[k] = Int16(clamping: Int((va * ga + vb * gb).rounded()))
            }
        }
        return out
    }

    /// Decodes frames [firstFrame, +frames) and samples [firstSample, +samples) of a segment.
    /// A segment has a key frame where a transition begins (the planner asks for one there), so
    /// the read seeks to it rather than decoding the whole segment; should the audio after the
    /// seek begin late, it reads again from the start.
    static func read(_ path: String, firstFrame: Int, frames: Int, firstSample: Int, samples: Int, fps: Rational) throws -> ([Frame], [Int16]) {
        if firstFrame > 0, let r = try read(path, firstFrame: firstFrame, frames: frames, firstSample: firstSample, samples: samples, fps: fps, seek: true) {
            return r
        }
        return try read(path, firstFrame: firstFrame, frames: frames, firstSample: firstSample, samples: samples, fps: fps, seek: false)!
    }

    private static func read(_ path: String, firstFrame: Int, frames: Int, firstSample: Int, samples: Int, fps: Rational,
                             seek: Bool) throws -> ([Frame], [Int16])? {
        let name = (path as NSString).lastPathComponent
        let input = try InputFile(path: path, name: name, stage: .transition, findStreamInfo: false)
        guard let v = input.videoIndex else { throw MediaError(.transition, .permanent, file: name, "segment has no video") }
        let decoder = try Decoder(input: input, stream: v, threads: 1)
        let vTB = input.stream(v).pointee.time_base
        if seek {
            let ts = av_rescale_q(Int64(firstFrame), AVRational(num: Int32(fps.den), den: Int32(fps.num)), vTB)
            guard av_seek_frame(input.ctx, v, ts, AVSEEK_FLAG_BACKWARD) >= 0 else { return nil }
        }
        let aTB = input.audioIndex.map { input.stream($0).pointee.time_base } ?? AVRational(num: 1, den: Int32(Timing.sampleRate))
        var pictures: [Frame] = []
        var pcm: [Int16] = []
        var nextSample = 0          // where the next audio packet starts, when it has no timestamp
        let packet = Packet()
        var frame = Frame()
        func take() {
            while avcodec_receive_frame(decoder.ctx, frame.ptr) >= 0 {
                let ts = frame.ptr.pointee.best_effort_timestamp
                let index = Int((Double(ts) * av_q2d(vTB) * fps.double).rounded())
                if index >= firstFrame && index < firstFrame + frames && pictures.count < frames {
                    pictures.append(frame)
                    frame = Frame()
                } else {
                    frame.unref()
                }
            }
        }
        while pictures.count < frames || pcm.count < samples * 2 {
            let ret = av_read_frame(input.ctx, packet.ptr)
            if ret < 0 { avcodec_send_packet(decoder.ctx, nil); take(); break }
            defer { packet.unref() }
            if packet.ptr.pointee.stream_index == v {
                if pictures.count < frames, avcodec_send_packet(decoder.ctx, packet.ptr) >= 0 { take() }
            } else if packet.ptr.pointee.stream_index == input.audioIndex {
                let count = Int(packet.ptr.pointee.size) / 4
                let pts = packet.ptr.pointee.pts
                let start = pts == tl_nopts_value() ? nextSample : Int((Double(pts) * av_q2d(aTB) * Double(Timing.sampleRate)).rounded())
                nextSample = start + count
                let want = firstSample + pcm.count / 2           // the next sample we need
                if start > want && pcm.count / 2 < samples {
                    if seek { return nil }                       // the seek overshot the audio
                    pcm.append(contentsOf: repeatElement(0, count: 2 * min(start - want, samples - pcm.count / 2)))
                }
                let skip = min(count, max(0, firstSample + pcm.count / 2 - start))
                let n = min(count - skip, samples - pcm.count / 2)
                if n > 0 {
                    let data = UnsafeRawPointer(packet.ptr.pointee.data!).advanced(by: skip * 4).assumingMemoryBound(to: Int16.self)
                    pcm.append(contentsOf: UnsafeBufferPointer(start: data, count: n * 2))
                }
            }
        }
        guard !pictures.isEmpty else { throw MediaError(.transition, .permanent, file: name, "no frames in the transition's range") }
        while pictures.count < frames { pictures.append(pictures.last!) }   // never short: hold the last frame
        return (pictures, pcm)
    }
}

/// A filter graph with two video inputs ("a", "b") and one output.
final class TwoInputFilter {
    private let graph: FilterGraph
    let file: String

    init(width: Int32, height: Int32, timeBase: AVRational, description: String, file: String) throws {
        self.file = file
        let args = "video_size=\(width)x\(height):pix_fmt=\(AV_PIX_FMT_YUV420P.rawValue):time_base=\(timeBase.num)/\(timeBase.den):pixel_aspect=1/1:frame_rate=\(timeBase.den)/\(timeBase.num)"
        graph = try FilterGraph(sources: [("a", "buffer", args), ("b", "buffer", args)], sink: "buffersink", description: description,
                                stage: .transition, file: file, what: "the transition")
    }

    /// Feeds both inputs (pts 0…), closes them, and returns `count` output frames.
    func run(_ first: [Frame], _ second: [Frame], count: Int) throws -> [Frame] {
        for (src, frames) in [(graph.sources[0], first), (graph.sources[1], second)] {
            for (k, f) in frames.enumerated() {
                f.ptr.pointee.pts = Int64(k)
                f.ptr.pointee.pict_type = AV_PICTURE_TYPE_NONE
                let ret = av_buffersrc_add_frame_flags(src, f.ptr, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
                if ret < 0 { throw MediaError(.transition, .permanent, file: file, "the transition filter refused a frame: \(avErrorString(ret))") }
            }
            _ = av_buffersrc_add_frame(src, nil)     // end of stream
        }
        var out: [Frame] = []
        while out.count < count {
            let f = Frame()
            let ret = av_buffersink_get_frame(graph.sink, f.ptr)
            if ret < 0 { break }
            out.append(f)
        }
        guard !out.isEmpty else { throw MediaError(.transition, .permanent, file: file, "the transition filter gave no frames") }
        while out.count < count { out.append(out.last!) }
        return out
    }
}
