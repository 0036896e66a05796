import Foundation
import ThreadlineCore
internal import CFFmpeg
internal import CSupport

/// Quiet libav's console output once per process (errors still come back as codes).
let configureLogging: Void = {
    tl_set_log_level(ProcessInfo.processInfo.environment["THREADLINE_AV_LOG"] != nil ? AV_LOG_INFO : AV_LOG_QUIET)
}()

/// Owns an AVFrame.
final class Frame {
    let ptr: UnsafeMutablePointer<AVFrame>
    init() { ptr = av_frame_alloc() }
    deinit { var p: UnsafeMutablePointer<AVFrame>? = ptr; av_frame_free(&p) }
    func unref() { av_frame_unref(ptr) }
}

/// Owns an AVPacket.
final class Packet {
    let ptr: UnsafeMutablePointer<AVPacket>
    init() { ptr = av_packet_alloc() }
    deinit { var p: UnsafeMutablePointer<AVPacket>? = ptr; av_packet_free(&p) }
    func unref() { av_packet_unref(ptr) }
}

/// An opened input file with its chosen streams: the first video and the first audio stream.
final class InputFile {
    let ctx: UnsafeMutablePointer<AVFormatContext>
    let name: String
    let videoIndex: Int32?
    let audioIndex: Int32?

    /// `findStreamInfo: false` trusts the container header (our own segments), skipping the
    /// decoding that stream-info probing does.
    init(path: String, name: String, stage: StageKind, findStreamInfo: Bool = true) throws {
        _ = configureLogging
        self.name = name
        var ctx: UnsafeMutablePointer<AVFormatContext>? = nil
        var ret = openLocalInput(&ctx, path)
        guard ret >= 0, let opened = ctx else {
            throw MediaError(stage, classify(ret) == .retryable && FileManager.default.fileExists(atPath: path) ? .retryable : .permanent,
                             file: name, "cannot open as media: \(avErrorString(ret))")
        }
        self.ctx = opened
        ret = findStreamInfo ? avformat_find_stream_info(opened, nil) : 0
        if ret < 0 {
            var p: UnsafeMutablePointer<AVFormatContext>? = opened
            avformat_close_input(&p)
            throw MediaError(stage, .permanent, file: name, "cannot read stream information: \(avErrorString(ret))")
        }
        // The first real video stream: attached pictures and one-frame poster streams lose to a
        // stream that moves, but stand in when nothing else exists.
        var v: Int32? = nil, still: Int32? = nil, a: Int32? = nil
        for i in 0..<Int32(opened.pointee.nb_streams) {
            let st = opened.pointee.streams[Int(i)]!
            let par = st.pointee.codecpar.pointee
            if par.codec_type == AVMEDIA_TYPE_VIDEO, par.codec_id != AV_CODEC_ID_NONE, par.width > 0, par.height > 0 {
                let isStill = (st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC) != 0 || st.pointee.nb_frames == 1
                    || (st.pointee.duration == 0 && st.pointee.avg_frame_rate.num == 0)
                if isStill { if still == nil { still = i } } else if v == nil { v = i }
            } else if a == nil, par.codec_type == AVMEDIA_TYPE_AUDIO, par.codec_id != AV_CODEC_ID_NONE,
                      avcodec_find_decoder(par.codec_id) != nil {
                a = i
            }
        }
        if v == nil { v = still }
        videoIndex = v
        audioIndex = a
        // Data tracks (iPhone mebx, timecode) and extra streams are never read.
        for i in 0..<Int32(opened.pointee.nb_streams) where i != v && i != a {
            opened.pointee.streams[Int(i)]!.pointee.discard = AVDISCARD_ALL
        }
    }

    deinit { var p: UnsafeMutablePointer<AVFormatContext>? = ctx; avformat_close_input(&p) }

    func stream(_ index: Int32) -> UnsafeMutablePointer<AVStream> { ctx.pointee.streams[Int(index)]! }

    /// The codec of an audio track no decoder reads, when the file has no readable one (probing
    /// reports it so planning can ask for `mute`; the renderer refuses such a clip unmuted).
    var undecodableAudio: String? {
        guard audioIndex == nil else { return nil }
        let audio = (0..<Int32(ctx.pointee.nb_streams)).first { stream($0).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO }
        guard let audio else { return nil }
        let id = stream(audio).pointee.codecpar.pointee.codec_id
        return id == AV_CODEC_ID_NONE ? "an unknown codec" : String(cString: avcodec_get_name(id))
    }

    /// The container's start, in seconds: the zero of the file's own timeline.
    var origin: Double {
        let st = ctx.pointee.start_time
        return st == tl_nopts_value() ? 0 : Double(st) / Double(AV_TIME_BASE)
    }

    /// Seeks every stream to the key frame at or before `seconds` on the file's timeline (from `origin`).
    @discardableResult func seek(to seconds: Double) -> Bool {
        av_seek_frame(ctx, -1, Int64(((origin + seconds) * Double(AV_TIME_BASE)).rounded(.down)), AVSEEK_FLAG_BACKWARD) >= 0
    }

    /// Seeks every stream back to the file's beginning.
    @discardableResult func seekToBeginning() -> Bool { av_seek_frame(ctx, -1, Int64.min, AVSEEK_FLAG_BACKWARD) >= 0 }

    /// Seconds from the container's start to its end. A container that claims more than a second
    /// past where every one of its streams says it ends (a broken or rewritten header: a 2 s clip
    /// whose movie header says 136 years) has nothing there: the streams' end is the file's, as a
    /// player plays it.
    var duration: Double {
        if ctx.pointee.duration != tl_nopts_value() && ctx.pointee.duration > 0 {
            let container = Double(ctx.pointee.duration) / Double(AV_TIME_BASE)
            if let streams = streamsClaimedEnd, streams > 0, container > streams + 1 { return streams }
            return container
        }
        var end = 0.0
        for idx in [videoIndex, audioIndex].compactMap({ $0 }) {
            let st = stream(idx).pointee
            if st.duration != tl_nopts_value() { end = max(end, Double(st.duration) * av_q2d(st.time_base)) }
        }
        return end
    }

    /// Where stream `idx` says it ends, in seconds from the container's start (`origin`); nil
    /// when it does not say.
    func claimedEnd(of idx: Int32) -> Double? {
        let st = stream(idx).pointee
        guard st.duration != tl_nopts_value(), st.duration > 0 else { return nil }
        let start = st.start_time == tl_nopts_value() ? 0 : Double(st.start_time) * av_q2d(st.time_base) - origin
        return start + Double(st.duration) * av_q2d(st.time_base)
    }

    /// Where the last of the file's streams (of any kind: a second sound track, a timecode or
    /// metadata track) says it ends; nil when one of them does not say.
    var streamsClaimedEnd: Double? {
        var end = 0.0
        for idx in 0..<Int32(ctx.pointee.nb_streams) {
            guard let e = claimedEnd(of: idx) else { return nil }
            end = max(end, e)
        }
        return end
    }

    /// Where the video stream says it ends, or the container's end when the stream does not say.
    /// A file whose audio runs on after its picture claims more in `duration` than its video does.
    var videoClaimedEnd: Double { videoIndex.flatMap(claimedEnd(of:)) ?? duration }

    /// Clockwise rotation and mirroring from the video stream's display matrix.
    var displayMatrix: [Int32]? {
        guard let v = videoIndex else { return nil }
        var size: Int = 0
        guard let raw = av_stream_get_side_data(stream(v), AV_PKT_DATA_DISPLAYMATRIX, &size), size >= 36 else { return nil }
        return raw.withMemoryRebound(to: Int32.self, capacity: 9) { Array(UnsafeBufferPointer(start: $0, count: 9)) }
    }
}

/// Threads each media pipeline uses in libavcodec and libx264. One by default: libx264's output
/// depends on its thread count, so with one thread (and x264 kept off AVX-512, `X264Assembly`)
/// every host encodes the same bits for the same stage key (a cluster's segments match a single
/// machine's), and one pipeline per core spends the least CPU on each frame. The encoder still
/// runs beside the decoder (`SegmentWriter`'s lane), which changes no bit. 0 lets the codecs
/// choose (about one per core).
public enum MediaThreads {
    nonisolated(unsafe) public static var perPipeline: Int32 = 1
}

/// How a process that renders one stage after another keeps its memory.
public enum MediaMemory {
    /// Every stage opens its own decoder, filter graph and x264 encoder, whose frame buffers (0.3 to
    /// 12 MB each) glibc's malloc gives from fresh mmaps and returns to the kernel when the stage
    /// ends, so the next stage faults in and zeroes the same pages again. With buffers up to 32 MiB
    /// taken from the heap and up to 64 MiB of freed heap kept, a worker reuses them: the 40-project
    /// batch bench took 795,000 page faults and 3.3 s of system time before, 72,000 and 1.5 s
    /// after; a worker's peak RSS on the small bench grew from 251 to 269 MB. An operator's own
    /// `GLIBC_TUNABLES` for malloc is left alone.
    public static func keepFreedBuffers() {
        if let tunables = ProcessInfo.processInfo.environment["GLIBC_TUNABLES"], tunables.contains("glibc.malloc.") { return }
        _ = tl_malloc_keep(32 << 20, 64 << 20)
    }
}

/// Owns a decoder for one stream.
final class Decoder {
    let ctx: UnsafeMutablePointer<AVCodecContext>
    let timeBase: AVRational

    init(input: InputFile, stream index: Int32, threads: Int32 = MediaThreads.perPipeline) throws {
        let st = input.stream(index)
        let par = st.pointee.codecpar!
        guard let codec = avcodec_find_decoder(par.pointee.codec_id) else {
            throw MediaError(.decode, .permanent, file: input.name,
                             "no decoder for codec \(String(cString: avcodec_get_name(par.pointee.codec_id)))")
        }
        guard let c = avcodec_alloc_context3(codec) else { throw MediaError(.decode, .retryable, file: input.name, "out of memory") }
        ctx = c
        timeBase = st.pointee.time_base
        var ret = avcodec_parameters_to_context(c, par)
        if ret >= 0 {
            c.pointee.pkt_timebase = st.pointee.time_base
            c.pointee.thread_count = threads
            ret = avcodec_open2(c, codec, nil)
        }
        if ret < 0 {
            throw MediaError(.decode, .permanent, file: input.name, "cannot open the \(String(cString: codec.pointee.name)) decoder: \(avErrorString(ret))")
        }
    }
    deinit { var p: UnsafeMutablePointer<AVCodecContext>? = ctx; avcodec_free_context(&p) }
}

/// Opens a local media file for demuxing with libavformat's protocols limited to `file`: a path
/// that is really a URL (`http:`, `tcp:`, `concat:`, …) or a playlist naming other files cannot
/// make the decoder reach anything but the file it was given.
func openLocalInput(_ ctx: inout UnsafeMutablePointer<AVFormatContext>?, _ path: String) -> Int32 {
    var opts: OpaquePointer? = nil
    av_dict_set(&opts, "protocol_whitelist", "file", 0)
    defer { av_dict_free(&opts) }
    let url = path.hasPrefix("/") ? "file:" + path : path
    return avformat_open_input(&ctx, url, nil, &opts)
}

/// How long an opened input plays, as its header says (no packets read); nil when it does not say.
func headerSeconds(_ c: UnsafeMutablePointer<AVFormatContext>) -> Double? {
    guard c.pointee.duration != tl_nopts_value(), c.pointee.duration > 0 else { return nil }
    return Double(c.pointee.duration) / Double(AV_TIME_BASE)
}

/// Opens bytes `range` of the local file at `path` (absolute) as a file of its own, through
/// FFmpeg's subfile protocol: the movie inside an Android motion photo.
func openLocalInput(_ ctx: inout UnsafeMutablePointer<AVFormatContext>?, _ path: String, range: Range<Int>) -> Int32 {
    var opts: OpaquePointer? = nil
    av_dict_set(&opts, "protocol_whitelist", "subfile,file", 0)
    defer { av_dict_free(&opts) }
    return avformat_open_input(&ctx, "subfile,,start,\(range.lowerBound),end,\(range.upperBound),,:file:" + path, nil, &opts)
}
