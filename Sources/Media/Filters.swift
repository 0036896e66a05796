import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Owns a libavfilter graph: named buffer sources, one sink, and `description` between them.
/// Every graph in Media is built here (video, generated, tempo, two-input).
final class FilterGraph {
    let graph: UnsafeMutablePointer<AVFilterGraph>
    private(set) var sources: [UnsafeMutablePointer<AVFilterContext>] = []
    private(set) var sink: UnsafeMutablePointer<AVFilterContext>!

    /// `sources`: (label, filter name — "buffer"/"abuffer" —, its arguments); `sink`: "buffersink"/"abuffersink".
    init(sources specs: [(label: String, filter: String, args: String)], sink sinkFilter: String, description: String,
         stage: StageKind, file: String, what: String) throws {
        graph = avfilter_graph_alloc()
        var ret: Int32 = 0
        var outputs: UnsafeMutablePointer<AVFilterInOut>? = nil
        for spec in specs.reversed() where ret >= 0 {
            var ctx: UnsafeMutablePointer<AVFilterContext>? = nil
            ret = avfilter_graph_create_filter(&ctx, avfilter_get_by_name(spec.filter), spec.label, spec.args, nil, graph)
            guard ret >= 0, let ctx else { break }
            sources.insert(ctx, at: 0)
            let io = avfilter_inout_alloc()!
            io.pointee.name = av_strdup(spec.label); io.pointee.filter_ctx = ctx; io.pointee.pad_idx = 0; io.pointee.next = outputs
            outputs = io
        }
        var sinkCtx: UnsafeMutablePointer<AVFilterContext>? = nil
        if ret >= 0 { ret = avfilter_graph_create_filter(&sinkCtx, avfilter_get_by_name(sinkFilter), "out", nil, nil, graph) }
        if ret >= 0 {
            var inputs = avfilter_inout_alloc()
            inputs!.pointee.name = av_strdup("out"); inputs!.pointee.filter_ctx = sinkCtx; inputs!.pointee.pad_idx = 0; inputs!.pointee.next = nil
            ret = avfilter_graph_parse_ptr(graph, description, &inputs, &outputs, nil)
            avfilter_inout_free(&inputs)
        }
        avfilter_inout_free(&outputs)
        if ret >= 0 { ret = avfilter_graph_config(graph, nil) }
        if ret < 0 {
            // Every stored property is set, so deinit runs after this throw and frees the graph.
            throw MediaError(stage, .permanent, file: file, "cannot build \(what) '\(description)': \(avErrorString(ret))")
        }
        sink = sinkCtx
    }
    deinit { var g: UnsafeMutablePointer<AVFilterGraph>? = graph; avfilter_graph_free(&g) }
}

/// Owns a video filter graph: buffer → description → buffersink.
final class VideoFilter {
    private let graph: FilterGraph
    let width: Int32, height: Int32, format: Int32

    /// Frames pushed carry their output slot as pts in `timeBase` (1/fps), so `t` in filter
    /// expressions is the item's output time.
    init(width: Int32, height: Int32, format: Int32, sar: AVRational, timeBase: AVRational, description: String, file: String) throws {
        self.width = width; self.height = height; self.format = format
        let sarText = sar.num > 0 && sar.den > 0 ? "\(sar.num)/\(sar.den)" : "1/1"
        let args = "video_size=\(width)x\(height):pix_fmt=\(format):time_base=\(timeBase.num)/\(timeBase.den):pixel_aspect=\(sarText)"
        graph = try FilterGraph(sources: [("in", "buffer", args)], sink: "buffersink", description: description,
                                stage: .transform, file: file, what: "the filter graph")
    }

    func matches(_ f: UnsafeMutablePointer<AVFrame>) -> Bool {
        f.pointee.width == width && f.pointee.height == height && f.pointee.format == format
    }

    /// Pushes one frame and pulls the one it becomes.
    func process(_ input: UnsafeMutablePointer<AVFrame>, into output: Frame, file: String) throws {
        var ret = av_buffersrc_add_frame_flags(graph.sources[0], input, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
        if ret >= 0 { output.unref(); ret = av_buffersink_get_frame(graph.sink, output.ptr) }
        if ret < 0 { throw MediaError(.transform, .permanent, file: file, "filtering failed: \(avErrorString(ret))") }
    }
}

/// Makes an interlaced source's fields whole frames before the edit chain sees them: bwdif,
/// which fills each field's missing lines from the field itself and from its neighbours in time,
/// so motion is neither combed nor doubled. A frame per stored frame, or a frame per field
/// (twice the rate) when the movie shows more frames a second than the source stores. Frames
/// flagged progressive pass untouched. Like every temporal deinterlacer it holds a frame back:
/// `push` hands on what is ready, `flush` the rest once the decoder is drained. Frames come out
/// with their times in the stream's time base, as the decoder gave them.
final class Deinterlacer {
    private var graph: FilterGraph?
    private var width: Int32 = 0, height: Int32 = 0, format: Int32 = -1
    private let timeBase: AVRational
    private let perField: Bool
    private let file: String
    private let out = Frame()

    init(timeBase: AVRational, perField: Bool, file: String) {
        self.timeBase = timeBase; self.perField = perField; self.file = file
    }

    /// Pushes a decoded frame and hands each whole frame that is ready to `take`, until it says
    /// done (returns true then).
    func push(_ frame: UnsafeMutablePointer<AVFrame>, take: (Frame) throws -> Bool) throws -> Bool {
        if graph != nil && (frame.pointee.width != width || frame.pointee.height != height || frame.pointee.format != format) {
            if try flush(take: take) { return true }
        }
        if graph == nil {
            width = frame.pointee.width; height = frame.pointee.height; format = frame.pointee.format
            let sar = frame.pointee.sample_aspect_ratio
            let args = "video_size=\(width)x\(height):pix_fmt=\(format):time_base=\(timeBase.num)/\(timeBase.den)"
                + ":pixel_aspect=\(sar.num > 0 && sar.den > 0 ? "\(sar.num)/\(sar.den)" : "1/1")"
            graph = try FilterGraph(sources: [("in", "buffer", args)], sink: "buffersink",
                                    description: "bwdif=mode=\(perField ? "send_field" : "send_frame"):parity=auto:deint=interlaced",
                                    stage: .decode, file: file, what: "the deinterlacer")
        }
        frame.pointee.pts = frame.pointee.best_effort_timestamp
        let ret = av_buffersrc_add_frame_flags(graph!.sources[0], frame, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
        if ret < 0 { throw MediaError(.decode, .permanent, file: file, "deinterlacing failed: \(avErrorString(ret))") }
        return try drain(take: take)
    }

    /// Hands on the frames held back (the last one, or two fields' worth); the next push starts afresh.
    func flush(take: (Frame) throws -> Bool) throws -> Bool {
        guard let graph else { return false }
        let ret = av_buffersrc_add_frame_flags(graph.sources[0], nil, 0)
        if ret < 0 { throw MediaError(.decode, .permanent, file: file, "deinterlacing failed: \(avErrorString(ret))") }
        defer { self.graph = nil }
        return try drain(take: take)
    }

    private func drain(take: (Frame) throws -> Bool) throws -> Bool {
        guard let graph else { return false }
        let sinkBase = av_buffersink_get_time_base(graph.sink)
        while true {
            out.unref()
            let ret = av_buffersink_get_frame(graph.sink, out.ptr)
            if ret == tl_averror_eagain() || ret == tl_averror_eof() { return false }
            if ret < 0 { throw MediaError(.decode, .permanent, file: file, "deinterlacing failed: \(avErrorString(ret))") }
            if out.ptr.pointee.pts != tl_nopts_value() {
                out.ptr.pointee.pts = av_rescale_q(out.ptr.pointee.pts, sinkBase, timeBase)
            }
            out.ptr.pointee.best_effort_timestamp = out.ptr.pointee.pts
            if try take(out) { return true }
        }
    }
}

/// Converts decoded audio to 48 kHz interleaved stereo s16.
final class Resampler {
    private var swr: OpaquePointer?
    init(decoder: Decoder, file: String) throws {
        var inLayout = AVChannelLayout()
        if decoder.ctx.pointee.ch_layout.order == AV_CHANNEL_ORDER_UNSPEC || decoder.ctx.pointee.ch_layout.nb_channels == 0 {
            av_channel_layout_default(&inLayout, max(1, decoder.ctx.pointee.ch_layout.nb_channels))
        } else {
            av_channel_layout_copy(&inLayout, &decoder.ctx.pointee.ch_layout)
        }
        defer { av_channel_layout_uninit(&inLayout) }
        var outLayout = AVChannelLayout()
        tl_layout_stereo(&outLayout)
        defer { av_channel_layout_uninit(&outLayout) }
        var ret = swr_alloc_set_opts2(&swr, &outLayout, AV_SAMPLE_FMT_S16, Int32(Timing.sampleRate),
                                      &inLayout, decoder.ctx.pointee.sample_fmt, decoder.ctx.pointee.sample_rate, 0, nil)
        if ret >= 0 { ret = swr_init(swr) }
        if ret < 0 { throw MediaError(.transform, .permanent, file: file, "cannot set up audio resampling: \(avErrorString(ret))") }
    }
    deinit { swr_free(&swr) }

    /// Converts `frame` (or flushes with nil) and appends interleaved samples to `out`.
    func convert(_ frame: UnsafeMutablePointer<AVFrame>?, into out: inout [Int16]) throws {
        let inCount = frame.map { $0.pointee.nb_samples } ?? 0
        let capacity = swr_get_out_samples(swr, inCount) + 32
        guard capacity > 0 else { return }
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: Int(capacity) * 2))
        let produced: Int32 = out.withUnsafeMutableBufferPointer { buf in
            var dst: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(buf.baseAddress! + start).assumingMemoryBound(to: UInt8.self)
            return withUnsafeMutablePointer(to: &dst) { dstPtr in
                if let frame {
                    let src = UnsafeMutableRawPointer(frame.pointee.extended_data).assumingMemoryBound(to: UnsafePointer<UInt8>?.self)
                    return swr_convert(swr, dstPtr, capacity, src, inCount)
                }
                return swr_convert(swr, dstPtr, capacity, nil, 0)
            }
        }
        guard produced >= 0 else {
            out.removeLast(Int(capacity) * 2)
            throw MediaError(.transform, .permanent, file: "", "audio resampling failed: \(avErrorString(produced))")
        }
        out.removeLast(Int(capacity - produced) * 2)
    }
}

/// Changes audio tempo without changing pitch (libavfilter atempo), on 48 kHz stereo s16.
final class AudioTempo {
    private let graph: FilterGraph
    private let frame = Frame()
    private var pts: Int64 = 0

    /// atempo takes 0.5…100 per instance: chain two for slower than half speed.
    static func filters(speed: Double) -> String {
        speed < 0.5 ? String(format: "atempo=0.5,atempo=%.6f", speed / 0.5) : String(format: "atempo=%.6f", speed)
    }

    init(speed: Double, file: String) throws {
        let args = "time_base=1/\(Timing.sampleRate):sample_rate=\(Timing.sampleRate):sample_fmt=s16:channel_layout=stereo"
        let desc = Self.filters(speed: speed) + ",aformat=sample_fmts=s16:sample_rates=\(Timing.sampleRate):channel_layouts=stereo"
        graph = try FilterGraph(sources: [("in", "abuffer", args)], sink: "abuffersink", description: desc,
                                stage: .transform, file: file, what: "the tempo filter")
    }

    /// Feeds interleaved samples (or nil to flush) and appends what comes out to `out`.
    func process(_ samples: [Int16]?, into out: inout [Int16]) throws {
        if let samples {
            let n = samples.count / 2
            guard n > 0 else { return }
            let f = frame.ptr
            frame.unref()
            f.pointee.nb_samples = Int32(n)
            f.pointee.format = AV_SAMPLE_FMT_S16.rawValue
            f.pointee.sample_rate = Int32(Timing.sampleRate)
            tl_layout_stereo(&f.pointee.ch_layout)
            f.pointee.pts = pts
            pts += Int64(n)
            guard av_frame_get_buffer(f, 0) >= 0 else { throw MediaError(.transform, .retryable, file: "", "out of memory") }
            samples.withUnsafeBytes { raw in f.pointee.data.0!.update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: n * 4) }
            guard av_buffersrc_add_frame(graph.sources[0], f) >= 0 else { throw MediaError(.transform, .permanent, file: "", "tempo filter rejected audio") }
        } else {
            _ = av_buffersrc_add_frame(graph.sources[0], nil)      // end of stream; errors surface when pulling
        }
        while true {
            frame.unref()
            let ret = av_buffersink_get_frame(graph.sink, frame.ptr)
            if ret == tl_averror_eagain() || ret == tl_averror_eof() { return }
            if ret < 0 { throw MediaError(.transform, .permanent, file: "", "tempo filter failed: \(avErrorString(ret))") }
            let count = Int(frame.ptr.pointee.nb_samples) * 2
            let data = UnsafeRawPointer(frame.ptr.pointee.data.0!).assumingMemoryBound(to: Int16.self)
            out.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
    }
}
