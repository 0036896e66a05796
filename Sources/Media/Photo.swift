import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Photo items: one decoded picture, made upright (EXIF orientation arrives from FFmpeg as the
/// frame's display matrix), fitted and coloured like any item, held for the segment, with silence.
enum PhotoRenderer {
    static func render(_ spec: SegmentSpec, to path: String) throws -> SegmentReport {
        _ = configureLogging
        let name = spec.sourceName
        var report = SegmentReport()
        let t0 = now()
        let input = try InputFile(path: spec.sourcePath, name: name, stage: .decode)
        guard let v = input.videoIndex else { throw MediaError(.decode, .permanent, file: name, "no picture in this file") }
        let decoder = try Decoder(input: input, stream: v, threads: 1)
        let picture = try firstFrame(input, decoder, stream: v, name: name)
        report.decodeSeconds = now() - t0
        report.framesDecoded = 1

        var orientation = input.displayMatrix.map { Orientation(displayMatrix: $0) }
        if let sd = av_frame_get_side_data(picture.ptr, AV_FRAME_DATA_DISPLAYMATRIX), sd.pointee.size >= 36 {
            let m = sd.pointee.data.withMemoryRebound(to: Int32.self, capacity: 9) { Array(UnsafeBufferPointer(start: $0, count: 9)) }
            orientation = Orientation(displayMatrix: m)
        }
        let textFile = OverlayTextFile(spec.edits.text)
        let watermarkFile = WatermarkFile(spec.profile.watermark)
        var sar = picture.ptr.pointee.sample_aspect_ratio
        if sar.num == 0 { sar = AVRational(num: 1, den: 1) }
        let filter = try VideoFilter(width: picture.ptr.pointee.width, height: picture.ptr.pointee.height, format: picture.ptr.pointee.format,
                                     sar: sar, timeBase: AVRational(num: Int32(spec.profile.fps.den), den: Int32(spec.profile.fps.num)),
                                     description: VideoFilter.description(orientation: orientation, sar: sar, edits: spec.edits, profile: spec.profile,
                                                                          textFile: try textFile.path(), watermarkFile: try watermarkFile.path()),
                                     file: name)
        let writer = try SegmentWriter(profile: spec.profile, sampleCount: spec.sampleCount, path: path, name: name)
        let filtered = Frame()
        let perSlot = spec.edits.text?.isWindowed == true
        for slot in 0..<spec.frameCount {
            if slot == 0 || perSlot {
                let t1 = now()
                picture.ptr.pointee.pts = Int64(slot)
                try filter.process(picture.ptr, into: filtered, file: name)
                report.transformSeconds += now() - t1
            }
            let t2 = now()
            try writer.writeVideo(filtered.ptr, slot: slot)
            report.encodeSeconds += now() - t2
            report.framesOut += 1
        }
        let t3 = now()
        try writer.finish()
        report.encodeSeconds += now() - t3
        report.samplesOut = writer.samplesWritten
        return report
    }

    /// Decodes the first picture of the file.
    static func firstFrame(_ input: InputFile, _ decoder: Decoder, stream: Int32, name: String) throws -> Frame {
        let packet = Packet(), frame = Frame()
        var sentEOF = false
        while true {
            if !sentEOF {
                let ret = av_read_frame(input.ctx, packet.ptr)
                if ret < 0 {
                    avcodec_send_packet(decoder.ctx, nil); sentEOF = true
                } else {
                    defer { packet.unref() }
                    guard packet.ptr.pointee.stream_index == stream else { continue }
                    let sent = avcodec_send_packet(decoder.ctx, packet.ptr)
                    if sent < 0 && sent != tl_averror_eagain() {
                        throw MediaError(.decode, .permanent, file: name, "the picture cannot be decoded: \(avErrorString(sent))")
                    }
                }
            }
            let ret = avcodec_receive_frame(decoder.ctx, frame.ptr)
            if ret >= 0 { return frame }
            if ret == tl_averror_eof() || (sentEOF && ret == tl_averror_eagain()) {
                throw MediaError(.decode, .permanent, file: name, "no picture could be decoded")
            }
            if ret != tl_averror_eagain() { throw MediaError(.decode, .permanent, file: name, "the picture cannot be decoded: \(avErrorString(ret))") }
        }
    }
}
