import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Posters (one frame of each item, rendered exactly as in the movie) and a contact sheet.
public enum Thumbnails {
    /// Renders `spec` (one frame) and writes it as a PNG.
    public static func poster(_ spec: SegmentSpec, to png: String) throws {
        var one = spec
        one.frameCount = 1
        one.cut = nil           // the poster is the item's frame, unfaded
        one.keyframes = nil
        one.sampleCount = Timing.segmentSamples(frames: 1, fps: spec.profile.fps)
        let tmp = Scratch.path("poster", suffix: ".mov")
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        _ = try SegmentRenderer.render(one, to: tmp)
        let input = try InputFile(path: tmp, name: spec.sourceName, stage: .encode, findStreamInfo: false)
        guard let v = input.videoIndex else { throw MediaError(.encode, .permanent, file: spec.sourceName, "poster has no picture") }
        let decoder = try Decoder(input: input, stream: v, threads: 1)
        let frame = try PhotoRenderer.firstFrame(input, decoder, stream: v, name: spec.sourceName)
        try writePNG(frame, to: png, name: spec.sourceName)
    }

    /// A poster of a rendered movie or segment: its middle frame, `width` wide, as PNG (the
    /// dashboard draws item posters from their segments in the store).
    public static func posterOfMovie(path: String, name: String, width: Int) throws -> Data {
        _ = configureLogging
        // Store paths only: nothing here may need filtergraph escaping.
        guard Scratch.needsNoEscaping(path) else {
            throw MediaError(.encode, .permanent, file: name, "cannot draw a poster of a file named \(path)")
        }
        let facts = try Probe.facts(path: path, name: name, stage: .encode)
        let at = max(0, facts.duration / 2)
        // The seek lands on the key frame before `at` (a segment's only one is its first, black
        // when it fades in): frames before `at` are decoded and dropped.
        // At most `width` wide: a small movie's poster is not blown up (the page scales it).
        let generator = try GeneratedVideo(description: String(format: "movie=filename='%@':seek_point=%.3f,select='gte(t,%.3f)',scale='min(iw,%d)':-2,setsar=1",
                                                               path, at, max(0, at - 0.001), max(16, width & ~1)),
                                           file: name)
        let frame = Frame()
        guard try generator.next(into: frame) else { throw MediaError(.encode, .permanent, file: name, "no picture came out") }
        let tmp = Scratch.path("poster", suffix: ".png")
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        try writePNG(frame, to: tmp, name: name)
        return try Data(contentsOf: URL(fileURLWithPath: tmp))
    }

    /// Tiles posters in `columns`, each captioned, into one PNG.
    public static func contactSheet(posters: [String], captions: [String], columns: Int, to png: String,
                                    font: String = Title.defaultFont) throws {
        _ = configureLogging
        guard !posters.isEmpty else { return }
        let dir = Scratch.path("sheet")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var parts: [String] = []
        var layout: [String] = []
        let font = try Scratch.graphName(font, link: dir + "/font", what: "font", file: (png as NSString).lastPathComponent)
        let cols = max(1, min(columns, posters.count))
        for (k, poster) in posters.enumerated() {
            // Copies under safe names: nothing in the graph needs escaping.
            let image = "\(dir)/p\(k).png", caption = "\(dir)/c\(k).txt"
            try FileManager.default.copyItem(atPath: poster, toPath: image)
            try captions[k].write(toFile: caption, atomically: true, encoding: .utf8)
            parts.append("movie=filename='\(image)',pad=iw+8:ih+40:4:4:color=0x1c1c1e,"
                         + "drawtext=fontfile='\(font)':textfile='\(caption)':expansion=none:fontsize=18:fontcolor=white:x=8:y=h-30,format=rgb24[p\(k)]")
            let col = k % cols, row = k / cols
            let x = col == 0 ? "0" : (0..<col).map { "w\($0)" }.joined(separator: "+")
            let y = row == 0 ? "0" : (0..<row).map { "h\($0 * cols)" }.joined(separator: "+")
            layout.append("\(x)_\(y)")
        }
        let inputs = posters.indices.map { "[p\($0)]" }.joined()
        let stack = posters.count == 1 ? "\(inputs)null" : "\(inputs)xstack=inputs=\(posters.count):layout=\(layout.joined(separator: "|")):fill=0x1c1c1e"
        let generator = try GeneratedVideo(description: parts.joined(separator: ";") + ";" + stack, file: "contact sheet")
        let frame = Frame()
        guard try generator.next(into: frame) else { throw MediaError(.encode, .permanent, file: "contact sheet", "no picture came out") }
        try writePNG(frame, to: png, name: "contact sheet")
    }

    /// Encodes one frame as PNG (converted to RGB24, or RGBA when `alpha`).
    static func writePNG(_ frame: Frame, to path: String, name: String, alpha: Bool = false) throws {
        let f = frame.ptr
        let w = f.pointee.width, h = f.pointee.height
        let format = alpha ? AV_PIX_FMT_RGBA : AV_PIX_FMT_RGB24
        let rgb = Frame()
        rgb.ptr.pointee.width = w; rgb.ptr.pointee.height = h; rgb.ptr.pointee.format = format.rawValue
        guard av_frame_get_buffer(rgb.ptr, 0) >= 0 else { throw MediaError(.encode, .retryable, file: name, "out of memory") }
        let sws = sws_getContext(w, h, AVPixelFormat(rawValue: f.pointee.format), w, h, format, SWS_BICUBIC, nil, nil, nil)
        defer { sws_freeContext(sws) }
        // Our frames are BT.709 (swscale would read Y'CbCr as BT.601); RGB sources need no matrix.
        let isYUV = (av_pix_fmt_desc_get(AVPixelFormat(rawValue: f.pointee.format))?.pointee.flags ?? 0) & UInt64(AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL) == 0
        if isYUV {
            let bt709 = sws_getCoefficients(SWS_CS_ITU709)
            sws_setColorspaceDetails(sws, bt709, f.pointee.color_range == AVCOL_RANGE_JPEG ? 1 : 0, bt709, 1, 0, 1 << 16, 1 << 16)
        }
        let srcData = UnsafeRawPointer(f).advanced(by: MemoryLayout<AVFrame>.offset(of: \AVFrame.data)!)
            .assumingMemoryBound(to: UnsafePointer<UInt8>?.self)
        let srcStride = UnsafeRawPointer(f).advanced(by: MemoryLayout<AVFrame>.offset(of: \AVFrame.linesize)!).assumingMemoryBound(to: Int32.self)
        let dstData = UnsafeMutableRawPointer(rgb.ptr).advanced(by: MemoryLayout<AVFrame>.offset(of: \AVFrame.data)!)
            .assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
        let dstStride = UnsafeRawPointer(rgb.ptr).advanced(by: MemoryLayout<AVFrame>.offset(of: \AVFrame.linesize)!).assumingMemoryBound(to: Int32.self)
        sws_scale(sws, srcData, srcStride, 0, h, dstData, dstStride)
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_PNG) else { throw MediaError(.encode, .permanent, file: name, "no PNG encoder") }
        var ctx: UnsafeMutablePointer<AVCodecContext>? = avcodec_alloc_context3(codec)
        defer { avcodec_free_context(&ctx) }
        ctx!.pointee.width = w; ctx!.pointee.height = h; ctx!.pointee.pix_fmt = format
        ctx!.pointee.time_base = AVRational(num: 1, den: 1)
        var ret = avcodec_open2(ctx, codec, nil)
        if ret >= 0 { ret = avcodec_send_frame(ctx, rgb.ptr) }
        if ret >= 0 { ret = avcodec_send_frame(ctx, nil) }
        let pkt = Packet()
        if ret >= 0 { ret = avcodec_receive_packet(ctx, pkt.ptr) }
        guard ret >= 0 else { throw MediaError(.encode, .permanent, file: name, "PNG encoding failed: \(avErrorString(ret))") }
        let data = Data(bytes: pkt.ptr.pointee.data, count: Int(pkt.ptr.pointee.size))
        do { try data.write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            throw MediaError(.encode, .retryable, file: name, "cannot write \(path): \(FileChecks.reason(error))", writing: error)
        }
    }
}
