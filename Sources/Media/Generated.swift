import Foundation
import ThreadlineCore
internal import CFFmpeg

/// A filter graph that makes frames from nothing (a `color` source and what follows it).
final class GeneratedVideo {
    private let graph: FilterGraph

    init(description: String, file: String) throws {
        graph = try FilterGraph(sources: [], sink: "buffersink", description: description, stage: .decode, file: file, what: "the generator")
    }

    /// The next frame, or false at the end.
    func next(into frame: Frame) throws -> Bool {
        frame.unref()
        let ret = av_buffersink_get_frame(graph.sink, frame.ptr)
        if ret == tl_averror_eof() { return false }
        if ret < 0 { throw MediaError(.transform, .permanent, file: "", "generating frames failed: \(avErrorString(ret))") }
        return true
    }
}

/// Title cards: centred text, wrapped to the frame, on a background colour, with silence.
enum TitleRenderer {
    static func render(_ spec: SegmentSpec, title: Title, to path: String) throws -> SegmentReport {
        _ = configureLogging
        let name = spec.sourceName
        let p = spec.profile
        let size = title.size ?? max(12, p.height / 10)
        let dir = NSTemporaryDirectory() + "threadline-title-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // One drawtext per line, each centred; text goes through files so no escaping can go wrong.
        let lines = wrap(title.text, maxCharacters: max(6, Int(0.86 * Double(p.width) / (0.55 * Double(size)))))
        let lineHeight = Int((Double(size) * 1.3).rounded())
        let top = (p.height - lineHeight * lines.count) / 2
        var chain = ["color=c=\(filterColor(title.background)):s=\(p.width)x\(p.height):r=\(p.fps.num)/\(p.fps.den)"]
        for (k, line) in lines.enumerated() {
            let file = "\(dir)/line\(k).txt"
            try line.write(toFile: file, atomically: true, encoding: .utf8)
            chain.append("drawtext=fontfile='\(title.font)':textfile='\(file)':expansion=none:fontsize=\(size)"
                         + ":fontcolor=\(filterColor(title.color)):x=(w-text_w)/2:y=\(top + k * lineHeight)")
        }
        let overlay = OverlayTextFile(spec.edits.text)
        chain += VideoFilter.colour(spec.edits) + VideoFilter.textOverlay(spec.edits.text, file: try overlay.path(), profile: p)
        let watermark = WatermarkFile(p.watermark)
        let description = VideoFilter.watermarked(chain.joined(separator: ","), profile: p, file: try watermark.path())
        let t0 = now()
        let generator = try GeneratedVideo(description: description, file: name)
        let writer = try SegmentWriter(profile: p, sampleCount: spec.sampleCount, path: path, name: name, keyframes: spec.keyframes,
                                   cut: spec.cut, frameCount: spec.frameCount)
        var report = SegmentReport()
        let frame = Frame()
        report.decodeSeconds = now() - t0
        for slot in 0..<spec.frameCount {
            let t1 = now()
            guard try generator.next(into: frame) else { throw MediaError(.decode, .permanent, file: name, "the title generator stopped early") }
            report.transformSeconds += now() - t1
            try writer.write(frame.ptr, slot: slot, report: &report)
        }
        try writer.finish(report: &report)
        return report
    }

    /// Greedy word wrap; explicit newlines are kept.
    static func wrap(_ text: String, maxCharacters: Int) -> [String] {
        var lines: [String] = []
        for paragraph in text.components(separatedBy: "\n") {
            var line = ""
            for word in paragraph.split(separator: " ", omittingEmptySubsequences: true) {
                if line.isEmpty { line = String(word) }
                else if line.count + 1 + word.count <= maxCharacters { line += " " + word }
                else { lines.append(line); line = String(word) }
            }
            lines.append(line)
        }
        return lines
    }
}

/// A text overlay's words in a temporary file for drawtext (removed with this object).
final class OverlayTextFile {
    let text: TextOverlay?
    private var written: String?
    init(_ text: TextOverlay?) { self.text = text }
    func path() throws -> String {
        guard let text else { return "" }
        if let written { return written }
        let p = NSTemporaryDirectory() + "threadline-text-\(UUID().uuidString).txt"
        try text.value.write(toFile: p, atomically: true, encoding: .utf8)
        written = p
        return p
    }
    deinit { if let written { try? FileManager.default.removeItem(atPath: written) } }
}

/// The watermark image under a name that needs no escaping in a filter graph (removed with this object).
final class WatermarkFile {
    let watermark: Watermark?
    private var copied: String?
    init(_ watermark: Watermark?) { self.watermark = watermark }
    func path() throws -> String {
        guard let watermark else { return "" }
        if let copied { return copied }
        let ext = (watermark.image as NSString).pathExtension
        let p = NSTemporaryDirectory() + "threadline-wm-\(UUID().uuidString).\(ext.isEmpty ? "png" : ext)"
        do { try FileManager.default.copyItem(atPath: watermark.image, toPath: p) } catch {
            throw MediaError(.transform, .permanent, file: (watermark.image as NSString).lastPathComponent, "cannot read the watermark image: \(error.localizedDescription)")
        }
        copied = p
        return p
    }
    deinit { if let copied { try? FileManager.default.removeItem(atPath: copied) } }
}
