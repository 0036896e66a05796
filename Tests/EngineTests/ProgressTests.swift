import Foundation
import Testing
import Logging
@testable import Farm
import ThreadlineCore
import TestSupport

/// The progress line's time left: from planned frames rendered (not stage counts), and "joining
/// the movie" once every frame is rendered and only the concat is left.
@Suite struct ProgressTests {
    func progress(done: Int?, total: Int?, known: Bool?, elapsed: Double) -> RunProgress {
        var p = RunProgress(runID: 1, items: 4, itemsDone: 0, stagesTotal: 17, stagesDone: 0, running: [], elapsed: elapsed)
        p.framesDone = done; p.framesTotal = total; p.framesKnown = known
        return p
    }

    @Test func etaComesFromFramesRenderedAndTheirRate() {
        // 30 of 120 frames in 10 s: 90 more at the same rate take 30 s.
        let p = progress(done: 30, total: 120, known: true, elapsed: 10)
        #expect(p.eta == 30)
        #expect(p.etaText == "ETA 0:30")
        #expect(!p.joining)
        #expect(progress(done: 100, total: 7300, known: true, elapsed: 1).etaText == "ETA 1:12")
        // Not known yet: no frames rendered, or an item's length still unmeasured.
        #expect(progress(done: 0, total: 120, known: true, elapsed: 3).eta == nil)
        #expect(progress(done: 30, total: 120, known: false, elapsed: 3).etaText == "ETA --:--")
        #expect(progress(done: nil, total: nil, known: nil, elapsed: 3).etaText == "ETA --:--")
    }

    @Test func everyFrameRenderedMeansJoiningNotZeroSecondsLeft() {
        let p = progress(done: 120, total: 120, known: true, elapsed: 12)
        #expect(p.joining)
        #expect(p.etaText == "joining the movie")
        #expect(!progress(done: 120, total: 120, known: false, elapsed: 12).joining, "lengths unknown: not the end yet")
        #expect(!progress(done: 0, total: 0, known: true, elapsed: 1).joining)
        // Several runs summed, as the batch's total line does.
        #expect(TimeLeft.text(framesDone: 240, framesTotal: 240, known: true, elapsed: 20, movies: 3) == "joining the movies")
        #expect(TimeLeft.text(framesDone: 60, framesTotal: 240, known: true, elapsed: 20, movies: 3) == "ETA 1:00")
        #expect(TimeLeft.text(framesDone: 60, framesTotal: 240, known: false, elapsed: 20, movies: 3) == "ETA --:--")
    }

    /// A real coordinator with fake workers: while the concat runs, the last progress the
    /// observer was given says joining, even when the last segment lands within the progress
    /// throttle of the one before it; never while a render still runs.
    @Test func theConcatPhaseIsShownAsJoining() throws {
        let runner = FakeRunner(delay: 0.01)
        let seenDuringConcat = Locked<[Bool]>([])
        let latest = Locked<RunProgress?>(nil)
        let early = Locked<[String]>([])
        runner.onStart = { label in
            guard label.hasPrefix("concat") else { return }
            // The coordinator sends the concat, then the progress it made ready: allow it 1 s.
            let deadline = Date().addingTimeInterval(1)
            while latest.value?.joining != true && Date() < deadline { usleep(1000) }
            seenDuringConcat.withLock { $0.append(latest.value?.joining ?? false) }
        }
        let h = try Harness(workers: 2, slots: 2, runner: runner)
        h.coordinator.observe { p, _, _ in
            guard let p else { return }
            latest.withLock { $0 = p }
            if p.joining && p.running.contains(where: { $0.hasPrefix("render/") }) { early.withLock { $0.append("\(p)") } }
        }
        let run = try h.submit(h.pipeline(6))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("the run failed"); return }
        #expect(seenDuringConcat.value == [true], "progress seen when the concat started: \(seenDuringConcat.value)")
        #expect(early.value.isEmpty, "joining while a render still ran: \(early.value)")
    }
}
