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
            var g: UnsafeMutablePointer<AVFilterGraph>? = graph
            avfilter_graph_free(&g)
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

    /// The filter chain for an item: upright (display matrix), the user's rotate/flip/crop,
    /// square pixels, fit into the output size, output pixel format.
    /// With `source` (the decoded picture's size), a chain that only turns, flips and fits scales
    /// first: the turn, the colour and the text then work on output-sized pictures.
    static func description(orientation: Orientation?, sar: AVRational, edits: Edits, profile: OutputProfile,
                            textFile: String = "TEXT", watermarkFile: String = "WATERMARK", source: (width: Int, height: Int)? = nil) -> String {
        let chain = source.flatMap { scaledFirst(orientation: orientation, sar: sar, edits: edits, profile: profile, textFile: textFile, source: $0) }
            ?? body(orientation: orientation, sar: sar, edits: edits, profile: profile, textFile: textFile)
        return watermarked(chain, profile: profile, file: watermarkFile)
    }

    /// The same picture as `body`, scaling before turning and colouring — or nil when the chain
    /// does more than turn, flip and fit (a crop, non-square pixels, an odd angle, blur fit).
    static func scaledFirst(orientation: Orientation?, sar: AVRational, edits: Edits, profile: OutputProfile, textFile: String,
                            source: (width: Int, height: Int)) -> String? {
        let turns = orientation?.filters ?? []
        guard scalesFirst(edits, profile: profile),
              turns.allSatisfy({ $0.hasPrefix("transpose=") || $0 == "hflip" || $0 == "vflip" }),
              sar.num <= 0 || sar.den <= 0 || sar.num == sar.den,
              source.width > 0, source.height > 0 else { return nil }
        let fit = edits.fit ?? profile.fit
        let sideways = ((orientation?.clockwise ?? 0) + edits.rotate) % 180 == 90
        let (uw, uh) = sideways ? (source.height, source.width) : (source.width, source.height)
        // The size libavfilter's scale picks for force_original_aspect_ratio (av_rescale rounds to nearest).
        let W = profile.width, H = profile.height
        let tw = (H * uw + uh / 2) / uh, th = (W * uh + uw / 2) / uw
        var (w, h) = fit == .letterbox ? (min(tw, W), min(th, H)) : (max(tw, W), max(th, H))
        if fit == .letterbox { w = max(2, w / 2 * 2); h = max(2, h / 2 * 2) }
        var chain = ["scale=\(sideways ? h : w):\(sideways ? w : h)"] + turns
        chain += userTurns(edits)
        chain += colour(edits)
        chain.append(fit == .letterbox ? "pad=\(W):\(H):(ow-iw)/2:(oh-ih)/2:color=\(filterColor(profile.background))" : "crop=\(W):\(H)")
        return (chain + ["setsar=1"] + textOverlay(edits.text, file: textFile, profile: profile)).joined(separator: ",")
    }

    /// Ends a chain: the watermark (if any) over the finished frame, then the output pixel format.
    static func watermarked(_ body: String, profile: OutputProfile, file: String) -> String {
        guard let w = profile.watermark else { return body + ",format=yuv420p" }
        let h = max(2, Int(Double(profile.height) * w.size))
        let m = Int(Double(profile.height) * w.margin)
        let (x, y): (String, String)
        switch w.position {
        case .topLeft: (x, y) = ("\(m)", "\(m)")
        case .topRight: (x, y) = ("W-w-\(m)", "\(m)")
        case .bottomLeft: (x, y) = ("\(m)", "H-h-\(m)")
        case .bottomRight: (x, y) = ("W-w-\(m)", "H-h-\(m)")
        }
        return body + "[main];movie=filename='\(file)',format=rgba,scale=-2:\(h),colorchannelmixer=aa=\(String(format: "%.4f", w.opacity))[wm]"
            + ";[main][wm]overlay=x=\(x):y=\(y):eof_action=repeat,format=yuv420p"
    }

    /// Whether the edits allow scaling first on an upright, square-pixel source: no crop, and a
    /// letterbox or crop fit (blur fit needs the whole picture twice).
    static func scalesFirst(_ edits: Edits, profile: OutputProfile) -> Bool {
        let fit = edits.fit ?? profile.fit
        return (edits.crop == nil || edits.crop == CropRect(x: 0, y: 0, width: 1, height: 1)) && (fit == .letterbox || fit == .crop)
    }

    /// The user's rotate and flip, in that order.
    static func userTurns(_ edits: Edits) -> [String] {
        var chain: [String] = []
        switch edits.rotate {
        case 90: chain.append("transpose=clock")
        case 180: chain += ["hflip", "vflip"]
        case 270: chain.append("transpose=cclock")
        default: break
        }
        switch edits.flip {
        case .horizontal: chain.append("hflip")
        case .vertical: chain.append("vflip")
        case .both: chain += ["hflip", "vflip"]
        case nil: break
        }
        return chain
    }

    /// Everything up to the finished frame, without the final pixel format.
    static func body(orientation: Orientation?, sar: AVRational, edits: Edits, profile: OutputProfile, textFile: String) -> String {
        var chain = orientation?.filters ?? []
        chain += userTurns(edits)
        if let c = edits.crop, c != CropRect(x: 0, y: 0, width: 1, height: 1) {
            chain.append(String(format: "crop=w='max(2,iw*%.6f)':h='max(2,ih*%.6f)':x='iw*%.6f':y='ih*%.6f'", c.width, c.height, c.x, c.y))
        }
        if sar.num > 0 && sar.den > 0 && sar.num != sar.den {
            chain.append("scale=w='max(2,trunc(iw*sar/2)*2)':h=ih")
            chain.append("setsar=1")
        }
        // Colour belongs to the picture, before fitting: bars keep the background colour.
        chain += colour(edits)
        let w = profile.width, h = profile.height
        let tail = ["setsar=1"] + textOverlay(edits.text, file: textFile, profile: profile)
        switch edits.fit ?? profile.fit {
        case .letterbox:
            chain.append("scale=\(w):\(h):force_original_aspect_ratio=decrease:force_divisible_by=2")
            chain.append("pad=\(w):\(h):(ow-iw)/2:(oh-ih)/2:color=\(filterColor(profile.background))")
        case .crop:
            chain.append("scale=\(w):\(h):force_original_aspect_ratio=increase")
            chain.append("crop=\(w):\(h)")
        case .blur:
            // The picture fitted inside, over a blurred copy that fills the frame.
            let radius = max(4, min(w, h) / 30)
            let head = (chain + ["split[fg][bg]"]).joined(separator: ",")
            return head + ";[bg]scale=\(w):\(h):force_original_aspect_ratio=increase,crop=\(w):\(h),boxblur=\(radius):2[blurred]"
                + ";[fg]scale=\(w):\(h):force_original_aspect_ratio=decrease:force_divisible_by=2[inner]"
                + ";[blurred][inner]overlay=(W-w)/2:(H-h)/2," + tail.joined(separator: ",")
        }
        chain += tail
        return chain.joined(separator: ",")
    }

    /// drawtext for an overlay on the fitted frame; the text itself comes from `file`.
    static func textOverlay(_ text: TextOverlay?, file: String, profile: OutputProfile) -> [String] {
        guard let text else { return [] }
        let size = text.size ?? max(10, profile.height / 18)
        let m = "h*0.05"
        let (x, y): (String, String)
        switch text.position {
        case .top: (x, y) = ("(w-text_w)/2", m)
        case .center: (x, y) = ("(w-text_w)/2", "(h-text_h)/2")
        case .bottom: (x, y) = ("(w-text_w)/2", "h-text_h-\(m)")
        case .topLeft: (x, y) = (m, m)
        case .topRight: (x, y) = ("w-text_w-\(m)", m)
        case .bottomLeft: (x, y) = (m, "h-text_h-\(m)")
        case .bottomRight: (x, y) = ("w-text_w-\(m)", "h-text_h-\(m)")
        }
        var f = "drawtext=fontfile='\(text.font)':textfile='\(file)':expansion=none:fontsize=\(size):fontcolor=\(filterColor(text.color))"
            + ":shadowx=2:shadowy=2:shadowcolor=black@0.6:x=\(x):y=\(y)"
        if text.isWindowed {
            f += String(format: ":enable='between(t,%.6f,%.6f)'", text.start ?? 0, text.end ?? 1e9)
        }
        return [f]
    }

    /// The look, then the adjustments.
    static func colour(_ edits: Edits) -> [String] {
        var f: [String] = []
        switch edits.look {
        case .mono: f.append("hue=s=0")
        case .silvertone: f += ["hue=s=0", "colorbalance=rs=0.06:gs=0.02:bs=-0.06:rm=0.05:gm=0.01:bm=-0.05", "eq=contrast=0.9:brightness=0.02"]
        case .sepia: f.append("colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131")
        case .vivid: f.append("eq=saturation=1.5:contrast=1.1")
        case .fade: f.append("eq=contrast=0.8:brightness=0.06:saturation=0.7")
        case .noir: f += ["hue=s=0", "eq=contrast=1.4:brightness=-0.05"]
        case .warm: f.append("colortemperature=temperature=4500")
        case .cool: f.append("colortemperature=temperature=9000")
        case nil: break
        }
        if let a = edits.adjust, a != Adjust() {
            if a.brightness != 0 || a.contrast != 1 || a.saturation != 1 || a.gamma != 1 {
                f.append(String(format: "eq=brightness=%.4f:contrast=%.4f:saturation=%.4f:gamma=%.4f", a.brightness, a.contrast, a.saturation, a.gamma))
            }
            if a.warmth != 0 { f.append(String(format: "colortemperature=temperature=%.0f", 6500 - 2500 * a.warmth)) }
        }
        return f
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
