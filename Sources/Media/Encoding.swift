import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Owns the video encoder set to the project's output profile: libx264 (h264) or libx265 (hevc),
/// always BT.709 limited range in the bitstream's VUI, so players show the colours we made.
final class VideoEncoder {
    let ctx: UnsafeMutablePointer<AVCodecContext>

    init(profile: OutputProfile, globalHeader: Bool, file: String) throws {
        let hevc = profile.video.codec == "hevc"
        let encoderName = hevc ? "libx265" : "libx264"
        guard let codec = avcodec_find_encoder_by_name(encoderName) else {
            throw MediaError(.encode, .permanent, file: file, "\(encoderName) is not available in this FFmpeg build")
        }
        ctx = avcodec_alloc_context3(codec)
        ctx.pointee.width = Int32(profile.width)
        ctx.pointee.height = Int32(profile.height)
        ctx.pointee.pix_fmt = AV_PIX_FMT_YUV420P
        ctx.pointee.time_base = AVRational(num: Int32(profile.fps.den), den: Int32(profile.fps.num))
        ctx.pointee.framerate = AVRational(num: Int32(profile.fps.num), den: Int32(profile.fps.den))
        ctx.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        ctx.pointee.color_range = AVCOL_RANGE_MPEG
        ctx.pointee.color_primaries = AVCOL_PRI_BT709
        ctx.pointee.color_trc = AVCOL_TRC_BT709
        ctx.pointee.colorspace = AVCOL_SPC_BT709
        if profile.video.keyint > 0 { ctx.pointee.gop_size = Int32(profile.video.keyint) }
        if globalHeader { ctx.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        ctx.pointee.thread_count = MediaThreads.perPipeline
        av_opt_set(ctx.pointee.priv_data, "preset", profile.video.preset, 0)
        av_opt_set(ctx.pointee.priv_data, "crf", "\(profile.video.crf)", 0)
        // A forced key frame is an IDR: the segment can be cut there and stream-copied.
        av_opt_set(ctx.pointee.priv_data, "forced-idr", "1", 0)
        if !hevc, let asm = X264Assembly.capabilities { av_opt_set(ctx.pointee.priv_data, "x264-params", "asm=\(asm)", 0) }
        if hevc {
            // Closed GOPs (every cut point decodable alone); one frame thread and no pool unless
            // asked for, so every host encodes the same bits for the same stage, as with x264.
            let threads = MediaThreads.perPipeline <= 1 ? ":pools=none:frame-threads=1" : ""
            av_opt_set(ctx.pointee.priv_data, "x265-params", "log-level=error:open-gop=0\(threads)", 0)
        }
        let ret = avcodec_open2(ctx, codec, nil)
        if ret < 0 { throw MediaError(.encode, .permanent, file: file, "cannot open \(encoderName): \(avErrorString(ret))") }
    }
    deinit { var p: UnsafeMutablePointer<AVCodecContext>? = ctx; avcodec_free_context(&p) }
}

/// The instruction sets libx264 may use. Its AVX-512 functions read memory they never wrote
/// (on Debian 12's x264 0.164, at widths such as 1080): the same frames encoded to different bits
/// depending on what the heap held, that is on what a worker had rendered before, so one stage
/// key had different segments on different runs and hosts. On a CPU with AVX-512, x264 gets
/// everything it would pick but AVX-512 (AVX2 and older, whose bits are the same from run to run
/// and match an AVX2 host's); elsewhere it chooses for itself. Measured on 720p at veryfast, the
/// cap costs nothing beyond noise (3.95–4.71 against 4.07–4.52 CPU-s for 480 frames).
enum X264Assembly {
    static let capabilities: String? = (av_get_cpu_flags() & AV_CPU_FLAG_AVX512) != 0 ? "AVX2,FMA3,BMI2" : nil
}

/// Owns an output file being muxed.
final class OutputFile {
    let ctx: UnsafeMutablePointer<AVFormatContext>
    let path: String
    let file: String
    private var headerWritten = false

    init(path: String, format: String, file: String) throws {
        var c: UnsafeMutablePointer<AVFormatContext>? = nil
        let ret = avformat_alloc_output_context2(&c, nil, format, path)
        guard ret >= 0, let c else { throw MediaError(.encode, .permanent, file: file, "cannot create \(format) output: \(avErrorString(ret))") }
        ctx = c; self.path = path; self.file = file
    }
    deinit {
        if ctx.pointee.pb != nil { avio_closep(&ctx.pointee.pb) }
        avformat_free_context(ctx)
    }

    var needsGlobalHeader: Bool { (ctx.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER) != 0 }

    func addStream() -> UnsafeMutablePointer<AVStream> { avformat_new_stream(ctx, nil) }

    func open(options: [String: String] = [:]) throws {
        var ret = avio_open(&ctx.pointee.pb, path, AVIO_FLAG_WRITE)
        if ret < 0 { throw writeFailure(ret, file: file, "cannot write \(path)") }
        var dict: OpaquePointer? = nil
        for (k, v) in options { av_dict_set(&dict, k, v, 0) }
        ret = avformat_write_header(ctx, &dict)
        av_dict_free(&dict)
        if ret < 0 { throw writeFailure(ret, file: file, "cannot write the header of \(path)") }
        headerWritten = true
    }

    func write(_ pkt: UnsafeMutablePointer<AVPacket>) throws {
        let ret = av_interleaved_write_frame(ctx, pkt)
        if ret < 0 { throw writeFailure(ret, file: file, "cannot write to \(path)") }
    }

    func finish() throws {
        guard headerWritten else { return }
        var ret = av_write_trailer(ctx)
        if ret >= 0 { ret = avio_closep(&ctx.pointee.pb) }
        if ret < 0 { throw writeFailure(ret, file: file, "cannot finish \(path)") }
    }
}

/// Sets a stream's parameters to 48 kHz stereo s16 PCM.
func configurePCM(_ st: UnsafeMutablePointer<AVStream>) {
    let par = st.pointee.codecpar!
    par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
    par.pointee.codec_id = AV_CODEC_ID_PCM_S16LE
    par.pointee.sample_rate = Int32(Timing.sampleRate)
    tl_layout_stereo(&par.pointee.ch_layout)
    par.pointee.format = AV_SAMPLE_FMT_S16.rawValue
    par.pointee.bits_per_coded_sample = 16
    par.pointee.block_align = 4
    st.pointee.time_base = AVRational(num: 1, den: Int32(Timing.sampleRate))
}

/// Monotonic seconds.
@inline(__always) func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
