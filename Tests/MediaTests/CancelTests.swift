import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport

/// A stopped stage (its run cancelled, or its attempt past the stage's time limit) stops
/// rendering within a few frames, whatever the item: titles and photos (still or moved over) as
/// well as clips, and the concat and transitions between segments. Title and photo renders never looked, so a stopped one held its worker's slot
/// to its last frame (a 2-minute 1080p title card: about 20 s).
@Suite struct CancelTests {
    @Test func aStoppedRenderStopsWithinAFewFrames() throws {
        let dir = temporaryDirectory("cancel")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clip = dir + "/clip.mp4", photo = dir + "/photo.jpg"
        try Generate.clip(clip, width: 320, height: 240, seconds: 20, tone: 440)
        let made = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=800x600", "-frames:v", "1", photo], timeout: 60)
        try #require(made.status == 0, "\(made.err)")
        let profile = OutputProfile(path: "", width: 640, height: 360, fps: Rational(30, 1))
        let items: [(what: String, item: Item, source: String?)] = [
            ("title", Item(kind: .title(Title(text: "A long card", duration: 60))), nil),
            ("photo", Item(kind: .photo(source: SourceRef(photo), duration: 60, kenBurns: nil)), photo),
            ("moving photo", Item(kind: .photo(source: SourceRef(photo), duration: 60,
                                                kenBurns: KenBurns(from: .init(zoom: 1), to: .init(zoom: 1.5)))), photo),
            ("clip", Item(kind: .video(source: SourceRef(clip), trim: nil)), clip),
        ]
        for (what, item, source) in items {
            let pipeline = Pipeline(name: "p", output: profile, items: [item])
            let facts = try source.map { [$0: try Probe.facts(path: $0)] } ?? [:]
            let t = try Planner.timeline(for: pipeline, facts: facts)
            let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: source ?? "", frameCount: t[0].frameCount, facts: source.flatMap { facts[$0] })
            // Stopped from the fourth look on: well into the render, far from its end.
            var looks = 0
            do {
                _ = try SegmentRenderer.render(spec, to: "\(dir)/\(what).mov", isCancelled: { looks += 1; return looks > 3 })
                Issue.record("\(what): all \(t[0].frameCount) frames rendered though it was stopped (looked \(looks) times)")
            } catch let e as MediaError {
                #expect(e.message == "cancelled" && e.errorClass == .retryable, "\(what): \(e)")
            }
            #expect(looks == 4, "\(what): looked \(looks) times")
        }
        // The concat looks before each segment (and every 256 packets).
        let pipeline = Pipeline(name: "p", output: profile, items: [Item(kind: .title(Title(text: "A short card", duration: 1)))])
        let t = try Planner.timeline(for: pipeline, facts: [:])
        let segment = dir + "/card.mov"
        _ = try SegmentRenderer.render(Planner.segmentSpec(pipeline, index: 0, sourcePath: "", frameCount: t[0].frameCount), to: segment)
        let inputs = (0..<3).map { ConcatInput(path: segment, frameCount: t[0].frameCount, sampleCount: t[0].sampleCount, label: "card \($0 + 1)") }
        _ = try Concat.run(inputs, profile: profile, to: dir + "/whole.mp4")
        var looks = 0
        do {
            _ = try Concat.run(inputs, profile: profile, to: dir + "/stopped.mp4", isCancelled: { looks += 1; return looks > 1 })
            Issue.record("the concat ran to its end though it was stopped")
        } catch let e as MediaError {
            #expect(e.stage == .concat && e.message == "cancelled" && e.errorClass == .retryable, "\(e)")
        }
        #expect(looks == 2, "the concat looked \(looks) times")
        // A transition looks between its reads and before each frame it writes. It never looked:
        // a stopped dissolve held its slot to the end.
        let spec = TransitionSpec(kind: .dissolve, frames: 15, samples: 24_000, fromFrame: t[0].frameCount - 15,
                                  fromSample: t[0].sampleCount - 24_000, profile: profile)
        var asked = 0
        _ = try TransitionRenderer.render(spec, from: segment, to: segment, to: dir + "/dissolve.mov", isCancelled: { asked += 1; return false })
        #expect(asked == 3 + spec.frames, "a whole transition looked \(asked) times")
        looks = 0
        do {
            _ = try TransitionRenderer.render(spec, from: segment, to: segment, to: dir + "/stopped.mov", isCancelled: { looks += 1; return looks > 5 })
            Issue.record("the transition ran to its end though it was stopped")
        } catch let e as MediaError {
            #expect(e.stage == .transition && e.message == "cancelled" && e.errorClass == .retryable, "\(e)")
        }
        #expect(looks == 6, "the transition looked \(looks) times")
    }
}
