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

@Suite struct TitleTests {
    @Test func wrapKeepsWordsAndNewlines() {
        #expect(TitleRenderer.wrap("one two three four", maxCharacters: 9) == ["one two", "three", "four"])
        #expect(TitleRenderer.wrap("a\nb c", maxCharacters: 20) == ["a", "b c"])
        #expect(TitleRenderer.wrap("unbreakablewordthatislong", maxCharacters: 5) == ["unbreakablewordthatislong"])
    }
}
