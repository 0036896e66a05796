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
    static func render(_ spec: SegmentSpec, title: Title, to path: String, isCancelled: () -> Bool = { false }) throws -> SegmentReport {
        _ = configureLogging
        let name = spec.sourceName
        let p = spec.profile
        // Wrapped to the frame, and shrunk where its lines would not fit it (`titleLayout`).
        let layout = EditChain.titleLayout(title, p)
        let size = layout.size, lines = layout.lines
        let dir = Scratch.path("title")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // One drawtext per line, each centred; text goes through files so no escaping can go wrong.
        let lineHeight = EditChain.titleLineHeight(size)
        let top = (p.height - lineHeight * lines.count) / 2
        // Generated and lettered in RGB (the colours the user wrote), then converted to BT.709 once
        // by the edit chain like any RGB picture; drawing on Y'CbCr would use BT.601's matrix.
        var chain = ["color=c=\(filterColor(title.background)):s=\(p.width)x\(p.height):r=\(p.fps.num)/\(p.fps.den)", "format=rgb24"]
        if ShapedText.drawnByLibass(title.text) {
            // Words that join and reorder (`ShapedText`): libass shapes them, centred as drawtext's are.
            let (script, fonts) = try Fonts.shapedLettering(font: title.font, text: title.text, size: size, colour: filterColor(title.color), shadow: false,
                                                           placement: .title(frameWidth: p.width), profile: p, window: nil, folder: dir + "/lettering", file: name)
            chain.append(EditChain.assFilter(script: script, fonts: fonts))
        } else {
            // A font named with a quote, a colon or a comma is linked under a plain name.
            let font = try Scratch.graphName(title.font, link: dir + "/font", what: "font", file: name)
            for (k, line) in lines.enumerated() {
                let file = "\(dir)/line\(k).txt"
                try line.write(toFile: file, atomically: true, encoding: .utf8)
                // One line as it always was; several on baselines (`EditChain.capitals`).
                let y = lines.count == 1 ? "\(top)" : "\(top + k * lineHeight + EditChain.capitals(size))-max_glyph_a"
                chain.append("drawtext=fontfile='\(font)':textfile='\(file)':expansion=none:fontsize=\(size)"
                             + ":fontcolor=\(filterColor(title.color)):x=(w-text_w)/2:y=\(y)")
            }
        }
        let files = try OverlayFiles(edits: spec.edits, profile: p, name: name)
        let edit = EditChain(edits: spec.edits, profile: p, files: files.paths)
        chain += SourceColour.sRGB.toOutput + edit.look + ["setsar=1"]
        let description = edit.finish(chain.joined(separator: ","))
        let t0 = now()
        let generator = try GeneratedVideo(description: description, file: name)
        let writer = try SegmentWriter(profile: p, sampleCount: spec.sampleCount, path: path, name: name, keyframes: spec.keyframes,
                                   cut: spec.cut, frameCount: spec.frameCount)
        var report = SegmentReport()
        let frame = Frame()
        report.decodeSeconds = now() - t0
        // A card that does not change is made once and encoded for every slot.
        let perSlot = edit.variesPerSlot
        for slot in 0..<spec.frameCount where writer.wants(slot) || perSlot {
            if slot % 16 == 0 { try stopIfCancelled(isCancelled, stage: .transform, file: name) }
            if perSlot || report.framesOut == 0 {
                let t1 = now()
                guard try generator.next(into: frame) else { throw MediaError(.decode, .permanent, file: name, "the title generator stopped early") }
                report.transformSeconds += now() - t1
            }
            try writer.write(frame.ptr, slot: slot, report: &report)
        }
        try writer.finish(report: &report)
        return report
    }
}
