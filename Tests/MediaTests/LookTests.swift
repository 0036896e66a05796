import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport

/// Looks, adjustments and fits are parameters the renderer applies; frames show them.
@Suite struct LookTests {
    static let source: String = {
        let dir = temporaryDirectory("looks")
        try? Generate.clip(dir + "/src.mp4", width: 480, height: 640, fps: "30", seconds: 0.5, tone: 440)
        return dir + "/src.mp4"
    }()

    static func render(_ edits: Edits, fit: OutputProfile.Fit = .letterbox) throws -> String {
        let dir = temporaryDirectory("look")
        let profile = OutputProfile(path: "", width: 640, height: 360, fps: Rational(30, 1), fit: fit)
        let pipeline = Pipeline(name: "l", output: profile, items: [Item(kind: .video(source: SourceRef(source), trim: nil), edits: edits)])
        let facts = try Probe.facts(path: source)
        let t = try Planner.timeline(for: pipeline, facts: [source: facts])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: source, frameCount: t[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: t[0].frameCount, sampleCount: t[0].sampleCount, label: "l")],
                           profile: profile, to: dir + "/out.mp4")
        return dir + "/out.mp4"
    }

    @Test(arguments: [Look.mono, .silvertone, .noir])
    func blackAndWhiteLooksHaveNearZeroChroma(_ look: Look) throws {
        let plain = try averageSaturation(try Self.render(Edits()))
        let bw = try averageSaturation(try Self.render(Edits(look: look)))
        #expect(plain > 20, "the source should be colourful (saturation \(plain))")
        #expect(bw < (look == .silvertone ? 6 : 1.5), "\(look) saturation \(bw)")
    }

    @Test(arguments: Look.allCases)
    func everyLookRenders(_ look: Look) throws {
        let p = try ffprobe(try Self.render(Edits(look: look)), countFrames: true)
        #expect(p.frames == 15 && p.width == 640)
    }

    @Test func warmthShiftsRedAgainstBlue() throws {
        let neutral = try frameRGBMeans(try Self.render(Edits()), frame: 5, x0: 0.3, x1: 0.7)
        let warm = try frameRGBMeans(try Self.render(Edits(adjust: Adjust(warmth: 1))), frame: 5, x0: 0.3, x1: 0.7)
        #expect((warm.r - warm.b) > (neutral.r - neutral.b) + 10, "neutral \(neutral), warm \(warm)")
        let bright = try frameRGBMeans(try Self.render(Edits(adjust: Adjust(brightness: 0.3))), frame: 5, x0: 0.3, x1: 0.7)
        #expect(bright.g > neutral.g + 20)
    }

    /// Warm, cool and warmth are a lookup table of colortemperature's channel gains: the same
    /// pixels as the filter for every 8-bit value of each channel, at a sixth of its cost.
    @Test(arguments: [3000.0, 4500, 5250, 6500, 7750, 9000])
    func colourTemperatureTableMakesTheFiltersPixels(_ kelvin: Double) throws {
        let ramp = ["-v", "error", "-f", "lavfi", "-i", "nullsrc=s=256x256,format=gbrp,geq=r='X':g='Y':b='255-X'", "-frames:v", "1"]
        func pixels(_ filter: String) throws -> Data {
            let out = temporaryDirectory("temperature") + "/p.raw"
            let r = try run("ffmpeg", ramp + ["-vf", filter, "-f", "rawvideo", "-pix_fmt", "gbrp", "-y", out])
            #expect(r.status == 0, "\(filter): \(r.err)")
            return try Data(contentsOf: URL(fileURLWithPath: out))
        }
        let filter = try pixels(String(format: "colortemperature=temperature=%.0f", kelvin))
        let table = try pixels(EditChain.colourTemperature(kelvin))
        #expect(filter.count == 3 * 256 * 256)
        #expect(filter == table, "\(EditChain.colourTemperature(kelvin))")
    }

    @Test func blurFitFillsTheSidesWithPicture() throws {
        // A portrait source in a landscape frame: letterbox leaves black bars, blur fills them.
        let letterbox = try frameRGBMeans(try Self.render(Edits()), frame: 5, x0: 0, x1: 0.15)
        let blurred = try frameRGBMeans(try Self.render(Edits(fit: .blur)), frame: 5, x0: 0, x1: 0.15)
        #expect(letterbox.r + letterbox.g + letterbox.b < 10)
        #expect(blurred.r + blurred.g + blurred.b > 60, "blur sides \(blurred)")
        // The output's own fit applies when the item names none.
        let outputBlur = try frameRGBMeans(try Self.render(Edits(), fit: .blur), frame: 5, x0: 0, x1: 0.15)
        #expect(outputBlur.r + outputBlur.g + outputBlur.b > 60)
    }
}

extension LookTests {
    @Test func looksLeaveTheLetterboxBarsInTheBackgroundColour() throws {
        for look in Look.allCases {
            let bars = try frameRGBMeans(try Self.render(Edits(look: look)), frame: 5, x0: 0, x1: 0.15)
            #expect(bars.r + bars.g + bars.b < 10, "\(look) tinted the bars: \(bars)")
        }
    }
}

/// The lines of white lettering in frame `index` (the shadow is dark): each band of rows with
/// lit pixels (an i's dot joins its line), with its left and right ends, and the frame's width.
func letteringBands(_ video: String, frame index: Int) throws -> (bands: [(top: Int, bottom: Int, left: Int, right: Int)], width: Int) {
    let f = try playerFrame(video, frame: index)
    var bands: [(top: Int, bottom: Int, left: Int, right: Int)] = []
    for y in 0..<f.height {
        let lit = (0..<f.width).filter { f.rgb[(y * f.width + $0) * 3] > 160 }
        guard let l = lit.first, let r = lit.last else { continue }
        if let last = bands.last, last.bottom >= y - 8 {
            bands[bands.count - 1] = (last.top, y, min(last.left, l), max(last.right, r))
        } else {
            bands.append((y, y, l, r))
        }
    }
    return (bands, f.width)
}

@Suite struct TitleTests {
    /// The lettering bands of frame 2 of a 640x360 title card of `text`, rendered through the
    /// media engine.
    static func titleBands(_ text: String, label: String) throws -> [(top: Int, bottom: Int, left: Int, right: Int)] {
        let dir = temporaryDirectory(label)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let profile = OutputProfile(path: "", width: 640, height: 360, fps: Rational(30, 1))
        let pipeline = Pipeline(name: "t", output: profile, items: [Item(kind: .title(Title(text: text, duration: 0.2)))])
        let t = try Planner.timeline(for: pipeline, facts: [:])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: "", frameCount: t[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: t[0].frameCount, sampleCount: t[0].sampleCount, label: "t")],
                           profile: profile, to: dir + "/out.mp4")
        return try letteringBands(dir + "/out.mp4", frame: 2).bands
    }

    /// A title of several lines sits on even baselines: a line of small letters ("ace") was
    /// drawn with its tops where capitals' tops go, so it sat higher, closer to the line above.
    @Test func aTitlesLinesSitOnEvenBaselines() throws {
        let bands = try Self.titleBands("ACE\nace\nACE\nace", label: "title-baselines")
        // No descenders: each band's last row is its line's baseline.
        let baselines = bands.map(\.bottom), steps = zip(baselines.dropFirst(), baselines).map { $0 - $1 }
        #expect(bands.count == 4 && (steps.max() ?? 0) - (steps.min() ?? 0) <= 1, "baselines \(baselines): steps \(steps)")
    }

    /// A title longer than the frame holds at its size is drawn smaller, all of it inside the
    /// frame: it ran off the top and bottom (lettering in the first and last rows).
    @Test func aLongTitleIsShrunkToFitTheFrame() throws {
        let bands = try Self.titleBands((0..<120).map { "word\($0)" }.joined(separator: " "), label: "title-long")
        let top = bands.first?.top ?? 0, bottom = bands.last?.bottom ?? 360
        #expect(top >= 9 && bottom <= 351 && bottom - top > 180, "lettering from row \(top) to \(bottom) of 360")
    }

    @Test func wrapKeepsWordsAndNewlines() {
        #expect(EditChain.wrap("one two three four", maxWidth: 5) == ["one two", "three four"])
        #expect(EditChain.wrap("a\nb c", maxWidth: 20) == ["a", "b c"])
        // Capitals take more room than small letters (counted alike, a line of capitals ran off
        // both edges of the frame).
        #expect(EditChain.wrap("wonderful moments with grandma", maxWidth: 10.5) == ["wonderful moments", "with grandma"])
        #expect(EditChain.wrap("WONDERFUL MOMENTS WITH GRANDMA", maxWidth: 10.5) == ["WONDERFUL", "MOMENTS WITH", "GRANDMA"])
        // A word wider than a line is broken between characters (it ran off both edges); wide
        // characters take two columns, and Japanese, without spaces, is broken between them.
        #expect(EditChain.wrap("unbreakablewordthatislong", maxWidth: 5.5) == ["unbreakab", "lewordthat", "islong"])
        #expect(EditChain.wrap("see https://example.com/a/b ok", maxWidth: 5.5) == ["see", "https://exa", "mple.com/", "a/b ok"])
        #expect(EditChain.wrap("東京で夏休みを過ごしました", maxWidth: 5) == ["東京で夏休", "みを過ごし", "ました"])
    }
}

@Suite struct TextOverlayTests {
    /// Mean brightness of the bottom band where bottom text sits (rows 80 %…95 %), on black.
    static func bottomBand(_ video: String, frame: Int) throws -> Double {
        let dir = temporaryDirectory("band")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-i", video, "-vf", "select='eq(n\\,\(frame))',crop=iw*0.4:ih*0.15:iw*0.3:ih*0.8",
                                   "-frames:v", "1", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "gray", dir + "/g.raw"])
        guard r.status == 0, let d = FileManager.default.contents(atPath: dir + "/g.raw") else { throw GenerateError(message: r.err) }
        return Double(d.reduce(0) { $0 + Int($1) }) / Double(d.count)
    }

    /// `text` over a black clip (so white text is all that is bright) of `seconds`, rendered
    /// through the media engine into a movie of `width`x`height`; the movie's path.
    static func textOnBlack(_ text: TextOverlay, width: Int, height: Int, seconds: Double, label: String) throws -> String {
        let dir = temporaryDirectory(label)
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=black:s=\(width)x\(height):r=30:d=\(seconds)", "-c:v", "libx264",
                                   "-preset", "ultrafast", "-pix_fmt", "yuv420p", dir + "/black.mp4"])
        try #require(r.status == 0, "\(r.err)")
        let src = dir + "/black.mp4"
        let profile = OutputProfile(path: "", width: width, height: height, fps: Rational(30, 1))
        var edits = Edits()
        edits.text = text
        let pipeline = Pipeline(name: "t", output: profile, items: [Item(kind: .video(source: SourceRef(src), trim: nil), edits: edits)])
        let t = try Planner.timeline(for: pipeline, facts: [src: try Probe.facts(path: src)])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: src, frameCount: t[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: t[0].frameCount, sampleCount: t[0].sampleCount, label: "t")],
                           profile: profile, to: dir + "/out.mp4")
        return dir + "/out.mp4"
    }

    @Test func textShowsInsideItsWindowOnly() throws {
        let out = try Self.textOnBlack(TextOverlay(value: "June 3, 2026", position: .bottom, size: 40, start: 0.5, end: 1.5),
                                       width: 640, height: 360, seconds: 2, label: "text")
        let before = try Self.bottomBand(out, frame: 10)     // 0.33 s
        let during = try Self.bottomBand(out, frame: 30)     // 1.0 s
        let after = try Self.bottomBand(out, frame: 50)      // 1.67 s
        #expect(before < 20 && after < 20, "text outside its window: \(before), \(after)")
        #expect(during > before + 15, "no text inside its window: \(during)")
        let top = try frameRGBMeans(out, frame: 30, x0: 0.3, x1: 0.7)
        #expect(top.r < 40, "text should sit at the bottom")
    }

    /// A caption longer than the frame is wide is wrapped inside it: on a portrait frame it was
    /// drawn on one line, cut off at both edges.
    @Test func aLongCaptionIsWrappedInsideTheFrame() throws {
        let out = try Self.textOnBlack(TextOverlay(value: "Photo 1 with a caption long enough to need wrapping", position: .bottom),
                                       width: 360, height: 640, seconds: 0.5, label: "text-wrap")
        // The lower third: text in the middle, none at the edges; several lines high.
        try Self.expectTextInsideTheLowerThird(out)
        let rows = try (0..<8).map { k in try frameRGBMeans(out, frame: 5, x0: 0.03, x1: 0.97, y0: 0.6 + Double(k) * 0.045, y1: 0.6 + Double(k + 1) * 0.045).r }
        #expect(rows.filter { $0 > 8 }.count >= 4, "not several lines: \(rows)")
    }

    /// A wrapped caption at the bottom: each line is centred on its own (drawtext drew the lines
    /// of one text left-aligned in a centred block, so a short last line sat at the block's left),
    /// and the lines are evenly spaced.
    @Test func aWrappedCaptionsLinesAreEachCentred() throws {
        let out = try Self.textOnBlack(TextOverlay(value: "Photo 1 with a caption long enough to need wrapping, ace Ace", position: .bottom),
                                       width: 360, height: 640, seconds: 0.5, label: "text-centred")
        let (bands, width) = try letteringBands(out, frame: 5)
        #expect(bands.count >= 4, "several lines: \(bands)")
        for b in bands {
            let leftGap = b.left, rightGap = width - 1 - b.right
            #expect(abs(leftGap - rightGap) <= 4, "a line not centred (\(leftGap) px left, \(rightGap) px right): \(bands)")
        }
        // Even lines: the same step from each line's top to the next's (42 or 43 px measured).
        let tops = bands.map(\.top), steps = zip(tops.dropFirst(), tops).map { $0 - $1 }
        #expect((steps.max() ?? 0) - (steps.min() ?? 0) <= 3, "uneven lines: \(steps)")
    }

    /// A caption that is one long word (a link) ran off both edges of a portrait frame; it is
    /// broken between characters now and stays inside.
    @Test func aCaptionOfOneLongWordStaysInsideTheFrame() throws {
        let out = try Self.textOnBlack(TextOverlay(value: "https://example.com/summer/2026/june/beach-day-photos", position: .bottom),
                                       width: 360, height: 640, seconds: 0.5, label: "text-long-word")
        try Self.expectTextInsideTheLowerThird(out)
    }

    /// A caption in capitals wraps inside the frame: wrapping counted a capital as a small
    /// letter, and its first line ran off both edges.
    @Test func aCaptionInCapitalsStaysInsideTheFrame() throws {
        let out = try Self.textOnBlack(TextOverlay(value: "WONDERFUL MOMENTS WITH GRANDMA AND GRANDPA AT THE MOUNTAIN WATERFALL MEADOW", position: .bottom),
                                       width: 640, height: 360, seconds: 0.5, label: "text-capitals")
        try Self.expectTextInsideTheLowerThird(out)
    }

    /// A caption longer than the frame holds at its size is drawn smaller, all of it inside the
    /// frame's margins: its first lines were above the frame's top.
    @Test func aLongCaptionIsShrunkToFitTheFrame() throws {
        let text = (0..<120).map { "word\($0)" }.joined(separator: " ")
        let out = try Self.textOnBlack(TextOverlay(value: text, position: .bottom), width: 640, height: 360, seconds: 0.5, label: "text-long")
        let bands = try letteringBands(out, frame: 5).bands
        let top = bands.first?.top ?? 0, bottom = bands.last?.bottom ?? 360
        #expect(top >= 9 && bottom <= 351 && bottom - top > 180, "lettering from row \(top) to \(bottom) of 360")
    }

    /// Text in the middle of the lower third of frame 5, none at its left and right edges.
    static func expectTextInsideTheLowerThird(_ out: String) throws {
        let middle = try frameRGBMeans(out, frame: 5, x0: 0.2, x1: 0.8, y0: 0.6, y1: 0.97)
        let left = try frameRGBMeans(out, frame: 5, x0: 0, x1: 0.03, y0: 0.6, y1: 0.97)
        let right = try frameRGBMeans(out, frame: 5, x0: 0.97, x1: 1, y0: 0.6, y1: 0.97)
        #expect(middle.r > 15, "no text: \(middle)")
        #expect(left.r < 3 && right.r < 3, "text past the frame's edges: \(left), \(right)")
    }
}
