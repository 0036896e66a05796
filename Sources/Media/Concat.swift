import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Joins segments into the finished movie: video stream-copied, audio joined sample-exact and
/// encoded to AAC once (no priming gaps at joins), MP4 with faststart.
public enum Concat {
    /// `audioCache`: a folder where encoded audio chunks are kept by their sound (see
    /// `AudioChunks`), so the next concat of a movie that begins the same encodes only the rest.
    /// `isCancelled` is looked at before each segment and every 256 packets: a stopped concat
    /// (its run cancelled, or past its time limit) throws "cancelled".
    public static func run(_ inputs: [ConcatInput], profile: OutputProfile, to path: String, audioCache: String? = nil,
                           isCancelled: () -> Bool = { false }) throws -> ConcatReport {
        let cache = audioCache.map { AudioChunkCache(directory: $0) }
        guard profile.isGIF else { return try movie(inputs, profile: profile, to: path, cache: cache, isCancelled: isCancelled) }
        // A GIF is made from the finished movie, which is made exactly as for MP4 first.
        let movie = path + ".movie.mp4"
        defer { try? FileManager.default.removeItem(atPath: movie) }
        let t0 = now()
        var report = try self.movie(inputs, profile: profile, to: movie, isCancelled: isCancelled)
        try GIF.write(movie: movie, to: path, profile: profile, name: (profile.path as NSString).lastPathComponent)
        report.seconds = now() - t0
        return report
    }

    static func movie(_ inputs: [ConcatInput], profile: OutputProfile, to path: String, cache: AudioChunkCache? = nil,
                      isCancelled: () -> Bool = { false }) throws -> ConcatReport {
        _ = configureLogging
        let t0 = now()
        let name = (profile.path as NSString).lastPathComponent
        guard let first = inputs.first else { throw MediaError(.concat, .permanent, file: name, "no segments") }
        let output = try OutputFile(path: path, format: "mp4", file: name)
        let firstInput = try InputFile(path: first.path, name: first.label, stage: .concat, findStreamInfo: false)
        guard let fv = firstInput.videoIndex else { throw MediaError(.concat, .permanent, file: first.label, "segment has no video") }
        let vOut = output.addStream()
        avcodec_parameters_copy(vOut.pointee.codecpar, firstInput.stream(fv).pointee.codecpar)
        // hvc1 (parameter sets in the sample description, as Apple's players require); 0 lets
        // the muxer pick avc1 for H.264.
        vOut.pointee.codecpar.pointee.codec_tag = vOut.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_HEVC ? fourCC("hvc1") : 0
        let fpsTB = AVRational(num: Int32(profile.fps.den), den: Int32(profile.fps.num))
        vOut.pointee.time_base = fpsTB
        vOut.pointee.avg_frame_rate = AVRational(num: Int32(profile.fps.num), den: Int32(profile.fps.den))
        let reference = extradata(firstInput.stream(fv))

        // A GIF has no sound: its intermediate movie skips mixing and encoding the audio.
        var aOut: UnsafeMutablePointer<AVStream>? = nil
        if !profile.isGIF {
            let aac = try AudioEncoder(bitrate: profile.audio.bitrate, globalHeader: output.needsGlobalHeader, file: name)
            aOut = output.addStream()
            avcodec_parameters_from_context(aOut!.pointee.codecpar, aac.ctx)
            aOut!.pointee.time_base = aac.ctx.pointee.time_base
        }
        try output.open(options: ["movflags": "+faststart"])

        var report = ConcatReport()
        let pkt = Packet()
        let mixer = profile.isGIF ? nil : try profile.soundtrack.map { try SoundtrackMixer($0, totalSamples: inputs.reduce(0) { $0 + $1.sampleCount }) }
        /// The movie's audio (through the soundtrack mix, when there is one), encoded chunk by chunk
        /// while the later segments are read.
        let audio = aOut == nil ? nil : AudioChunkEncoder(total: inputs.reduce(0) { $0 + $1.sampleCount }, bitrate: profile.audio.bitrate,
                                                          globalHeader: output.needsGlobalHeader, name: name, cache: cache)
        func feed(_ data: UnsafeRawPointer, _ n: Int) throws {
            guard let audio else { return }
            if let mixer {
                try mixer.mix(data, samples: n).withUnsafeBufferPointer { try audio.append($0.baseAddress!, count: n) }
            } else {
                try audio.append(data.assumingMemoryBound(to: Int16.self), count: n)
            }
        }
        var lastDTS = Int64.min, packets = 0
        for (n, seg) in inputs.enumerated() {
            try stopIfCancelled(isCancelled, stage: .concat, file: name)
            // The same segment may appear twice (the same clip used twice): open it afresh each time.
            let input = n == 0 ? firstInput : try InputFile(path: seg.path, name: seg.label, stage: .concat, findStreamInfo: false)
            guard let v = input.videoIndex else { throw MediaError(.concat, .permanent, file: seg.label, "segment has no video") }
            guard extradata(input.stream(v)) == reference else {
                throw MediaError(.concat, .permanent, file: seg.label, "segment was encoded with different settings; cannot stream-copy")
            }
            let vTB = input.stream(v).pointee.time_base
            let offset = Int64(report.frames)
            var taken = 0            // samples taken from this part
            var skipped = 0          // samples passed over before it
            var framesSeen = 0
            let lastFrame = seg.firstFrame + seg.frameCount
            while true {
                packets += 1
                if packets % 256 == 0 { try stopIfCancelled(isCancelled, stage: .concat, file: name) }
                let ret = av_read_frame(input.ctx, pkt.ptr)
                if ret == tl_averror_eof() { break }
                if ret < 0 { throw MediaError(.concat, classify(ret), file: seg.label, "cannot read segment: \(avErrorString(ret))") }
                defer { pkt.unref() }
                if pkt.ptr.pointee.stream_index == v {
                    av_packet_rescale_ts(pkt.ptr, vTB, fpsTB)     // timestamps in frames now
                    let index = Int(pkt.ptr.pointee.pts)
                    // The part starts on an IDR frame and ends before one: its packets are contiguous.
                    guard index >= seg.firstFrame && index < lastFrame else { continue }
                    framesSeen += 1
                    pkt.ptr.pointee.pts += offset - Int64(seg.firstFrame)
                    pkt.ptr.pointee.dts += offset - Int64(seg.firstFrame)
                    if pkt.ptr.pointee.dts <= lastDTS { pkt.ptr.pointee.dts = lastDTS + 1 }
                    if pkt.ptr.pointee.pts < pkt.ptr.pointee.dts { pkt.ptr.pointee.pts = pkt.ptr.pointee.dts }
                    lastDTS = pkt.ptr.pointee.dts
                    pkt.ptr.pointee.duration = 1
                    pkt.ptr.pointee.stream_index = vOut.pointee.index
                    av_packet_rescale_ts(pkt.ptr, fpsTB, vOut.pointee.time_base)
                    pkt.ptr.pointee.pos = -1
                    try output.write(pkt.ptr)
                } else if pkt.ptr.pointee.stream_index == input.audioIndex {
                    let count = Int(pkt.ptr.pointee.size) / 4
                    let skip = min(count, max(0, seg.firstSample - skipped))
                    skipped += skip
                    let n = min(count - skip, seg.sampleCount - taken)
                    if n > 0 {
                        try feed(UnsafeRawPointer(pkt.ptr.pointee.data!).advanced(by: skip * 4), n)
                        taken += n
                    }
                }
            }
            guard framesSeen == seg.frameCount else {
                throw MediaError(.concat, .permanent, file: seg.label, "segment has \(framesSeen) frames, expected \(seg.frameCount)")
            }
            if taken < seg.sampleCount {
                let silence = [Int16](repeating: 0, count: (seg.sampleCount - taken) * 2)
                try silence.withUnsafeBytes { try feed($0.baseAddress!, seg.sampleCount - taken) }
            }
            report.frames += seg.frameCount
            report.samples += seg.sampleCount
        }
        if let aOut, let audio = try audio?.finish() {
            report.audioChunks = audio.chunks
            report.audioChunksReused = audio.reused
            let pkt = Packet()
            for p in audio.packets {
                guard av_new_packet(pkt.ptr, Int32(p.data.count)) >= 0 else { throw MediaError(.concat, .retryable, file: name, "out of memory") }
                p.data.withUnsafeBytes { pkt.ptr.pointee.data.update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: p.data.count) }
                pkt.ptr.pointee.pts = p.pts; pkt.ptr.pointee.dts = p.dts; pkt.ptr.pointee.duration = p.duration
                pkt.ptr.pointee.flags = p.flags
                pkt.ptr.pointee.stream_index = aOut.pointee.index
                av_packet_rescale_ts(pkt.ptr, AVRational(num: 1, den: Int32(Timing.sampleRate)), aOut.pointee.time_base)
                defer { pkt.unref() }
                try output.write(pkt.ptr)
            }
        }
        try output.finish()
        report.seconds = now() - t0
        return report
    }

    static func extradata(_ st: UnsafeMutablePointer<AVStream>) -> [UInt8] {
        let par = st.pointee.codecpar.pointee
        guard let d = par.extradata, par.extradata_size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: d, count: Int(par.extradata_size)))
    }
}

/// AAC encoder fed with interleaved s16 stereo. Conversion (libswresample) and buffering to
/// whole encoder frames (AVAudioFifo) stay in C: no per-sample work in Swift.
final class AudioEncoder {
    let ctx: UnsafeMutablePointer<AVCodecContext>
    let frame = Frame()
    let planar = Frame()
    let pkt = Packet()
    private var swr: OpaquePointer?
    private let fifo: OpaquePointer
    var pts: Int64 = 0
    let file: String
    /// With `collect`, packets are kept here (pts in samples) instead of being written.
    let collect: Bool
    var collected: [CollectedPacket] = []

    init(bitrate: Int, globalHeader: Bool, file: String, collect: Bool = false) throws {
        self.file = file
        self.collect = collect
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_AAC) else {
            throw MediaError(.concat, .permanent, file: file, "no AAC encoder in this FFmpeg build")
        }
        ctx = avcodec_alloc_context3(codec)
        ctx.pointee.sample_rate = Int32(Timing.sampleRate)
        tl_layout_stereo(&ctx.pointee.ch_layout)
        ctx.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
        ctx.pointee.bit_rate = Int64(bitrate)
        ctx.pointee.time_base = AVRational(num: 1, den: Int32(Timing.sampleRate))
        if globalHeader { ctx.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        fifo = av_audio_fifo_alloc(AV_SAMPLE_FMT_FLTP, 2, 8192)
        var ret = avcodec_open2(ctx, codec, nil)
        if ret >= 0 {
            var outLayout = AVChannelLayout(), inLayout = AVChannelLayout()
            tl_layout_stereo(&outLayout); tl_layout_stereo(&inLayout)
            ret = swr_alloc_set_opts2(&swr, &outLayout, AV_SAMPLE_FMT_FLTP, Int32(Timing.sampleRate),
                                      &inLayout, AV_SAMPLE_FMT_S16, Int32(Timing.sampleRate), 0, nil)
            av_channel_layout_uninit(&outLayout); av_channel_layout_uninit(&inLayout)
            if ret >= 0 { ret = swr_init(swr) }
        }
        if ret < 0 { throw MediaError(.concat, .permanent, file: file, "cannot open the AAC encoder: \(avErrorString(ret))") }
    }
    deinit {
        var p: UnsafeMutablePointer<AVCodecContext>? = ctx
        avcodec_free_context(&p)
        swr_free(&swr)
        av_audio_fifo_free(fifo)
    }

    func append(_ data: UnsafeRawPointer, samples n: Int, output: OutputFile?, stream: UnsafeMutablePointer<AVStream>?) throws {
        let p = planar.ptr
        planar.unref()
        p.pointee.nb_samples = Int32(n)
        p.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
        p.pointee.sample_rate = Int32(Timing.sampleRate)
        tl_layout_stereo(&p.pointee.ch_layout)
        guard av_frame_get_buffer(p, 0) >= 0 else { throw MediaError(.concat, .retryable, file: file, "out of memory") }
        var src: UnsafePointer<UInt8>? = data.assumingMemoryBound(to: UInt8.self)
        let converted = withUnsafeMutablePointer(to: &src) { srcPtr in
            swr_convert(swr, p.pointee.extended_data, Int32(n), srcPtr, Int32(n))
        }
        guard converted >= 0 else { throw MediaError(.concat, .permanent, file: file, "audio conversion failed: \(avErrorString(converted))") }
        let raw = UnsafeMutableRawPointer(p.pointee.extended_data).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
        guard av_audio_fifo_write(fifo, raw, converted) == converted else {
            throw MediaError(.concat, .retryable, file: file, "out of memory buffering audio")
        }
        let size = ctx.pointee.frame_size
        while av_audio_fifo_size(fifo) >= size { try encodeFrame(count: size, output: output, stream: stream) }
    }

    func finish(output: OutputFile?, stream: UnsafeMutablePointer<AVStream>?) throws {
        let left = av_audio_fifo_size(fifo)
        if left > 0 { try encodeFrame(count: left, output: output, stream: stream) }
        try send(nil, output: output, stream: stream)
    }

    private func encodeFrame(count: Int32, output: OutputFile?, stream: UnsafeMutablePointer<AVStream>?) throws {
        let f = frame.ptr
        frame.unref()
        f.pointee.nb_samples = count
        f.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
        f.pointee.sample_rate = Int32(Timing.sampleRate)
        tl_layout_stereo(&f.pointee.ch_layout)
        guard av_frame_get_buffer(f, 0) >= 0 else { throw MediaError(.concat, .retryable, file: file, "out of memory") }
        let raw = UnsafeMutableRawPointer(f.pointee.extended_data).assumingMemoryBound(to: UnsafeMutableRawPointer?.self)
        guard av_audio_fifo_read(fifo, raw, count) == count else { throw MediaError(.concat, .permanent, file: file, "audio buffer underrun") }
        f.pointee.pts = pts
        pts += Int64(count)
        try send(f, output: output, stream: stream)
    }

    private func send(_ f: UnsafeMutablePointer<AVFrame>?, output: OutputFile?, stream: UnsafeMutablePointer<AVStream>?) throws {
        var ret = avcodec_send_frame(ctx, f)
        if ret < 0 && ret != tl_averror_eof() { throw MediaError(.concat, .permanent, file: file, "AAC encoding failed: \(avErrorString(ret))") }
        while true {
            ret = avcodec_receive_packet(ctx, pkt.ptr)
            if ret == tl_averror_eagain() || ret == tl_averror_eof() { return }
            if ret < 0 { throw MediaError(.concat, .permanent, file: file, "AAC encoding failed: \(avErrorString(ret))") }
            defer { pkt.unref() }
            if collect {
                collected.append(CollectedPacket(data: Data(bytes: pkt.ptr.pointee.data, count: Int(pkt.ptr.pointee.size)),
                                                 pts: pkt.ptr.pointee.pts, dts: pkt.ptr.pointee.dts,
                                                 duration: pkt.ptr.pointee.duration, flags: pkt.ptr.pointee.flags))
                continue
            }
            guard let output, let stream else { return }
            pkt.ptr.pointee.stream_index = stream.pointee.index
            av_packet_rescale_ts(pkt.ptr, ctx.pointee.time_base, stream.pointee.time_base)
            try output.write(pkt.ptr)
        }
    }
}

/// An encoded packet held in memory (timestamps in samples).
struct CollectedPacket: Sendable {
    var data: Data
    var pts: Int64
    var dts: Int64
    var duration: Int64
    var flags: Int32
}

/// A four-character code as libavformat stores it (MKTAG does not import into Swift).
func fourCC(_ s: String) -> UInt32 {
    s.utf8.prefix(4).enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
}
