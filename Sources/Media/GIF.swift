import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Animated GIF output: the finished movie (made as for MP4) turned into a GIF with one palette
/// for the whole movie — a first pass collects it (palettegen), a second maps every frame to it
/// (paletteuse) — so colours do not flicker from frame to frame. No audio; every frame kept at
/// the profile's rate (15 fps unless the pipeline says otherwise).
enum GIF {
    static func write(movie: String, to path: String, profile: OutputProfile, name: String) throws {
        let dir = Scratch.path("gif")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let source = dir + "/movie.mp4", palette = dir + "/palette.png"
        // Under a name that needs no escaping in a filter graph: a hard link, or a copy across filesystems.
        do { try FileManager.default.linkItem(atPath: movie, toPath: source) } catch {
            do { try FileManager.default.copyItem(atPath: movie, toPath: source) } catch {
                throw MediaError(.concat, .retryable, file: name, "cannot stage the movie for GIF encoding: \(FileChecks.reason(error))")
            }
        }
        // The movie is BT.709: say so to the RGB conversion (libavfilter's default is BT.601).
        let rgb = "scale=in_color_matrix=bt709:in_range=tv,format=rgb24"

        // Pass 1: the palette, from every frame.
        let first = try GeneratedVideo(description: "movie=filename='\(source)',\(rgb),palettegen=stats_mode=full:max_colors=256", file: name)
        let frame = Frame()
        guard try first.next(into: frame) else { throw MediaError(.concat, .permanent, file: name, "no palette could be made") }
        try Thumbnails.writePNG(frame, to: palette, name: name)

        // Pass 2: every frame through the palette, encoded as GIF.
        let second = try GeneratedVideo(description: "movie=filename='\(source)',\(rgb)[v];movie=filename='\(palette)'[p];"
                                                   + "[v][p]paletteuse=dither=sierra2_4a", file: name)
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_GIF) else { throw MediaError(.concat, .permanent, file: name, "no GIF encoder in this FFmpeg build") }
        let output = try OutputFile(path: path, format: "gif", file: name)
        guard let ctx = avcodec_alloc_context3(codec) else { throw MediaError(.concat, .retryable, file: name, "out of memory") }
        var ctxRef: UnsafeMutablePointer<AVCodecContext>? = ctx
        defer { avcodec_free_context(&ctxRef) }
        ctx.pointee.width = Int32(profile.width)
        ctx.pointee.height = Int32(profile.height)
        ctx.pointee.pix_fmt = AV_PIX_FMT_PAL8
        ctx.pointee.time_base = AVRational(num: Int32(profile.fps.den), den: Int32(profile.fps.num))
        var ret = avcodec_open2(ctx, codec, nil)
        if ret < 0 { throw MediaError(.concat, .permanent, file: name, "cannot open the GIF encoder: \(avErrorString(ret))") }
        let stream = output.addStream()
        avcodec_parameters_from_context(stream.pointee.codecpar, ctx)
        stream.pointee.time_base = ctx.pointee.time_base
        try output.open()
        let packet = Packet()
        var index: Int64 = 0
        func drain() throws {
            while true {
                ret = avcodec_receive_packet(ctx, packet.ptr)
                if ret == tl_averror_eagain() || ret == tl_averror_eof() { return }
                if ret < 0 { throw MediaError(.concat, .permanent, file: name, "GIF encoding failed: \(avErrorString(ret))") }
                packet.ptr.pointee.stream_index = stream.pointee.index
                packet.ptr.pointee.duration = 1
                av_packet_rescale_ts(packet.ptr, ctx.pointee.time_base, stream.pointee.time_base)
                defer { packet.unref() }
                try output.write(packet.ptr)
            }
        }
        while try second.next(into: frame) {
            frame.ptr.pointee.pts = index
            index += 1
            ret = avcodec_send_frame(ctx, frame.ptr)
            if ret < 0 { throw MediaError(.concat, .permanent, file: name, "GIF encoding failed: \(avErrorString(ret))") }
            try drain()
        }
        avcodec_send_frame(ctx, nil)
        try drain()
        try output.finish()
    }
}
