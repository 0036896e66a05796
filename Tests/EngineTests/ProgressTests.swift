import Foundation
import Testing
import Logging
@testable import Farm
import Transport
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
        // From an hour on, hours: an overnight batch read "ETA 245:13".
        #expect(progress(done: 100, total: 1_471_400, known: true, elapsed: 1).etaText == "ETA 4:05:13")
        #expect(progress(done: 1, total: 3601, known: true, elapsed: 1).etaText == "ETA 1:00:00")
        #expect(progress(done: 1, total: 3600, known: true, elapsed: 1).etaText == "ETA 59:59")
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
        #expect(TimeLeft.text(framesDone: 240, framesTotal: 240, known: true, rendered: 240, renderingFor: 20, movies: 3) == "joining the movies")
        #expect(TimeLeft.text(framesDone: 60, framesTotal: 240, known: true, rendered: 60, renderingFor: 20, movies: 3) == "ETA 1:00")
        #expect(TimeLeft.text(framesDone: 60, framesTotal: 240, known: false, rendered: 60, renderingFor: 20, movies: 3) == "ETA --:--")
    }

    /// A batch's project line: a project with nothing running while others render waits for a
    /// slot (not "ETA --:--" or a time held from its last turn); running, joining or without any
    /// worker, it says what `etaText` says.
    @Test func aProjectWithNothingRunningInABatchWaitsForASlot() {
        var idle = progress(done: 30, total: 120, known: true, elapsed: 10)
        idle.workers = 2
        #expect(idle.timeInBatch == "waiting for a slot")
        var going = idle
        going.running = ["render/2"]
        #expect(going.timeInBatch == going.etaText && going.timeInBatch == "ETA 0:30")
        var joining = progress(done: 120, total: 120, known: true, elapsed: 12)
        joining.workers = 2
        #expect(joining.timeInBatch == "joining the movie", "the concat is sent once a slot is free: \(joining.timeInBatch)")
        var alone = idle
        alone.workers = 0
        #expect(alone.timeInBatch == "waiting for a worker to join")
        // The bar: frames once every length is known, items before.
        #expect(idle.fractionDone == 0.25)
        var unknown = progress(done: 30, total: 120, known: false, elapsed: 10)
        unknown.itemsDone = 1
        #expect(unknown.fractionDone == 0.25 && progress(done: nil, total: nil, known: nil, elapsed: 1).fractionDone == 0)
    }

    /// The rate is what the run rendered since its first render: frames reused from the cache and
    /// time spent waiting behind other runs say nothing about it.
    @Test func theRateIsTheRunsOwnRenderingNotCachedFramesOrWaiting() {
        // An edit: 1,005 of 1,080 frames reused at once, the changed item's 75 still rendering.
        var edit = progress(done: 1005, total: 1080, known: true, elapsed: 0.2)
        edit.framesRendered = 0; edit.renderingFor = 0.15
        #expect(edit.eta == nil && edit.etaText == "ETA --:--", "no rate yet, not ETA 0:00: \(edit.etaText)")
        // A project of a batch that waited 24 s, then rendered 100 of its 300 frames in 0.5 s.
        var queued = progress(done: 100, total: 300, known: true, elapsed: 24.5)
        queued.framesRendered = 100; queued.renderingFor = 0.5
        #expect(queued.eta == 1, "\(queued.eta.map { "\($0)" } ?? "nil") s left, not 49")
        // Half of it reused, the other half rendering: the reused frames do not speed the rate up.
        var half = progress(done: 200, total: 300, known: true, elapsed: 2)
        half.framesRendered = 50; half.renderingFor = 1
        #expect(half.eta == 2)
        // A coordinator that does not say (an older one): the frames done over the whole time.
        #expect(progress(done: 100, total: 300, known: true, elapsed: 10).eta == 20)
    }

    /// Renders run side by side: the time left counts the renders in flight as far along as the
    /// finished ones went, and what is left as going on as many slots as the run has in flight.
    @Test func rendersInFlightOnSeveralSlotsCount() {
        // 10 items of 100 frames on 2 slots, 2 s each. The first ended at 2 s; the second, sent
        // with it, is as far along: 8 are left, 8 s on two slots. Frames over wall time: 18 s.
        var p = progress(done: 100, total: 1000, known: true, elapsed: 2)
        p.framesRendered = 100; p.renderingFor = 2
        #expect(p.eta == 18, "wall-time rule, the fallback: \(String(describing: p.eta))")
        // Its next render is out too (the coordinator tells progress after sending what a result
        // made ready): the second one 2 s along, the third just sent.
        p.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 2, inFlightFrames: 200, inFlightSeconds: 2)
        #expect(abs((p.eta ?? -1) - 8) < 1e-9, "\(String(describing: p.eta))")
        // One render in flight for a moment (the other slot between renders): the run has had
        // two slots all along, and what is left goes on two (by the one in flight, 16 s).
        p.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 1, inFlightFrames: 100, inFlightSeconds: 2)
        #expect(abs((p.eta ?? -1) - 8) < 1e-9, "\(String(describing: p.eta))")
        // A run that has had one slot (its renders' seconds are its wall time): 800 frames at 50 a second.
        var one = p
        one.renderingFor = 4
        #expect(abs((one.eta ?? -1) - 16) < 1e-9, "\(String(describing: one.eta))")
        // A render in flight longer than the rate says is not counted past its own frames.
        one.renderingFor = 7
        one.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 1, inFlightFrames: 100, inFlightSeconds: 5)
        #expect(abs((one.eta ?? -1) - 16) < 1e-9, "\(String(describing: one.eta))")
        // More in flight than on average (a worker joined): the slots in flight.
        one.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 4, inFlightFrames: 400, inFlightSeconds: 0)
        one.renderingFor = 2
        #expect(abs((one.eta ?? -1) - 4.5) < 1e-9, "\(String(describing: one.eta))")
        // Never sooner than the renders in flight can end on their own slots: one render of 100
        // frames just sent, nothing else left, on a run that had four slots: 2 s, not 0.5.
        var tail = progress(done: 900, total: 1000, known: true, elapsed: 10)
        tail.framesRendered = 900; tail.renderingFor = 4.5
        tail.slots = TimeLeft.Slots(renderSeconds: 18, inFlight: 1, inFlightFrames: 100, inFlightSeconds: 0)
        #expect(abs((tail.eta ?? -1) - 2) < 1e-9, "\(String(describing: tail.eta))")
        // Nothing in flight (waiting for a slot): one slot's speed.
        p.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0)
        #expect(abs((p.eta ?? -1) - 18) < 1e-9)
        // The last render in flight, nearly done: the time it still needs.
        var last = progress(done: 900, total: 1000, known: true, elapsed: 10)
        last.framesRendered = 900; last.renderingFor = 9
        last.slots = TimeLeft.Slots(renderSeconds: 18, inFlight: 1, inFlightFrames: 100, inFlightSeconds: 1.5)
        #expect(abs((last.eta ?? -1) - 0.5) < 1e-9, "\(String(describing: last.eta))")
        // Under a second left and all of it under way: said so, not "ETA 0:00" (which it held
        // for seconds when the last render was a heavy clip: 3 s of a 9 s batch on a farm).
        #expect(last.etaText == "finishing the last render", "\(last.etaText)")
        last.slots = TimeLeft.Slots(renderSeconds: 18, inFlight: 1, inFlightFrames: 100, inFlightSeconds: 6)
        #expect(last.eta == 0 && last.etaText == "finishing the last render", "overdue: \(last.etaText)")
        // Its slot given back, its segment coming up: still the last render, not "ETA 0:00".
        last.slots = TimeLeft.Slots(renderSeconds: 18, inFlight: 0, inFlightFrames: 100, inFlightSeconds: 6)
        #expect(last.etaText == "finishing the last render", "uploading: \(last.etaText)")
        var two = progress(done: 800, total: 1000, known: true, elapsed: 10)
        two.framesRendered = 800; two.renderingFor = 9
        two.slots = TimeLeft.Slots(renderSeconds: 16, inFlight: 2, inFlightFrames: 200, inFlightSeconds: 5)
        #expect(two.etaText == "finishing the last 2 renders", "\(two.etaText)")
        // Frames not under way yet: a time, however short.
        two.slots = TimeLeft.Slots(renderSeconds: 16, inFlight: 1, inFlightFrames: 100, inFlightSeconds: 1.9)
        #expect(two.etaText.hasPrefix("ETA 0:0"), "\(two.etaText)")
    }

    /// Between words the terminal draws the progress aged by the time since it was told: the time
    /// left counts down through a long render instead of standing still until it ends.
    @Test func theTimeLeftCountsDownBetweenWords() {
        var p = progress(done: 100, total: 1000, known: true, elapsed: 2)
        p.framesRendered = 100; p.renderingFor = 2
        p.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 2, inFlightFrames: 200, inFlightSeconds: 2)
        #expect(abs((p.eta ?? -1) - 8) < 1e-9)
        let later = p.aged(by: 1)
        #expect(abs((later.eta ?? -1) - 7) < 1e-9, "\(String(describing: later.eta))")
        #expect(later.elapsed == 3 && later.renderingFor == 3)
        #expect(p.aged(by: 0).eta == p.eta)
    }

    /// A batch's total line: a project that failed part-way counts as it stood. Its unrendered
    /// frames are not left to render and its last stages are not running, so once the other
    /// project has rendered every frame the line says its movie is being joined (before, the
    /// failed project's 200 frames kept it at an ETA, with its render counted as running).
    @Test func aFailedProjectOfABatchLeavesNothingToRender() {
        var failed = progress(done: 100, total: 300, known: true, elapsed: 3)
        failed.running = ["render/2"]; failed.itemsDone = 1
        failed.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 1, inFlightFrames: 100, inFlightSeconds: 1)
        var going = progress(done: 500, total: 500, known: true, elapsed: 5)
        going.running = ["concat"]; going.itemsDone = 4
        going.slots = TimeLeft.Slots(renderSeconds: 10, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0)
        let batch = BatchProgress(projects: 2, ended: 1, told: [(failed, true), (going, false)])
        #expect(batch.framesDone == 600 && batch.framesTotal == 600 && batch.running == 1)
        #expect(batch.slots == TimeLeft.Slots(renderSeconds: 12, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0))
        #expect(batch.going == 1 && batch.known)
        #expect(batch.text(renderingFor: 5) == "joining the movie")
        // A project not heard from yet, and not ended: its length is not known.
        #expect(!BatchProgress(projects: 3, ended: 1, told: [(failed, true), (going, false)]).known)
        #expect(BatchProgress(projects: 3, ended: 1, told: [(failed, true), (going, false)]).text(renderingFor: 5) == "ETA --:--")
    }

    /// A project of a batch whose first items came from the cache (clips another project of the
    /// batch had rendered) has no rate of its own while its one render goes: its line takes the
    /// batch's (frames a slot renders a second) rather than read "ETA --:--" until the render ends.
    @Test func aProjectWithNoRenderOfItsOwnTakesTheBatchsRate() {
        // The first project rendered 600 frames in 4 s of one slot (150 a second).
        var first = progress(done: 600, total: 600, known: true, elapsed: 5)
        first.framesRendered = 600; first.itemsDone = 4
        first.slots = TimeLeft.Slots(renderSeconds: 4, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0)
        // The second reused two items (300 frames) and renders its third, 300 frames, for 1 s.
        var second = progress(done: 300, total: 600, known: true, elapsed: 1.5)
        second.framesRendered = 0; second.renderingFor = 1; second.running = ["render/2"]; second.workers = 1
        second.slots = TimeLeft.Slots(renderSeconds: 0, inFlight: 1, inFlightFrames: 300, inFlightSeconds: 1)
        #expect(second.timeInBatch == "ETA --:--", "its own rate alone: none yet")
        let batch = BatchProgress(projects: 2, ended: 1, told: [(first, true), (second, false)])
        #expect(batch.speed == 150)
        // 150 of its 300 frames under way at that speed: 150 left, 1 s.
        #expect(second.timeInBatch(speed: batch.speed) == "ETA 0:01", "\(second.timeInBatch(speed: batch.speed))")
        // A rate of its own wins over the batch's: 300 frames in 3 s of its slot (100 a second),
        // 300 left, 3 s (the batch's speed would say 2 s).
        var own = second
        own.framesRendered = 300; own.renderingFor = 3; own.running = ["render/3"]
        own.slots = TimeLeft.Slots(renderSeconds: 3, inFlight: 1, inFlightFrames: 300, inFlightSeconds: 0)
        #expect(own.timeInBatch(speed: batch.speed) == "ETA 0:03", "\(own.timeInBatch(speed: batch.speed))")
        // A batch with nothing rendered yet has no speed to give.
        #expect(BatchProgress(projects: 1, ended: 0, told: [(second, false)]).speed == nil)
    }

    /// Two projects of a batch that thread the same clips with the same edits: each shared render
    /// is made once (the other project's is a cache hit), so the batch's total counts its frames
    /// once. Counted twice, 18 projects from one library read "ETA 0:26" with 8 s left.
    @Test func aBatchCountsTheRendersTwoProjectsShareOnce() throws {
        let runner = FakeRunner(delay: 0.1, deterministic: true)
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        let told = Locked<[Int64: [RunProgress]]>([:])
        h.coordinator.observe { p, run, _ in if let p { told.withLock { $0[run, default: []].append(p) } } }
        func shared(_ name: String) -> Pipeline {
            Pipeline(name: name, output: OutputProfile(path: h.dir + "/\(name).mp4"),
                     items: (0..<4).map { Item(kind: .video(source: SourceRef("/media/shared-\($0).mov"), trim: nil)) })
        }
        let a = try h.submit(shared("a")), b = try h.submit(shared("b"))
        for r in [a, b] { guard case .succeeded = try #require(h.wait(r)) else { Issue.record("run \(r) failed"); return } }
        #expect(runner.calls.filter { $0.hasPrefix("render") }.count == 4, "each shared render made once: \(runner.calls)")
        // While the first project renders them, the second's renders to come are all made there.
        let second = told.value[b] ?? []
        let waiting = try #require(second.first { $0.framesKnown == true && ($0.framesElsewhere ?? 0) > 0 }, "\(second.map(\.framesElsewhere))")
        #expect(waiting.framesElsewhere! <= waiting.framesTotal! - waiting.framesDone!, "\(waiting)")
        #expect(told.value[a]?.allSatisfy { ($0.framesElsewhere ?? 0) == 0 } == true, "the first makes its own")
        // The batch's total, as the two last told then: the shared frames once.
        let first = try #require(told.value[a]?.last { $0.framesKnown == true })
        let batch = BatchProgress(projects: 2, ended: 0, told: [(first, false), (waiting, false)])
        #expect(batch.framesTotal == first.framesTotal! + waiting.framesTotal! - waiting.framesElsewhere!, "\(batch)")
    }

    /// A batch whose projects differ in size: 540p projects done first, their 1080p fellows still
    /// to render. By frames alone, the rate the small ones set said the big ones' 300 frames
    /// would take 3 s; each frame of theirs costs three times as much, and the total, and the line
    /// of the big project that has rendered nothing yet, now say 9 s. (Eight such projects of
    /// 1080p and 540p on two slots read "ETA 0:02" with 6.7 s left, and 0:00 with 3 s.)
    @Test func aBatchWeighsItsProjectsByWhatTheirFramesCost() {
        var small = progress(done: 300, total: 300, known: true, elapsed: 3)
        small.framesRendered = 300; small.itemsDone = 1; small.costPerFrame = 10
        small.slots = TimeLeft.Slots(renderSeconds: 3, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0)
        var big = progress(done: 0, total: 300, known: true, elapsed: 3)
        big.framesRendered = 0; big.renderingFor = 0; big.running = ["render/0"]; big.workers = 1; big.costPerFrame = 30
        big.slots = TimeLeft.Slots(renderSeconds: 0, inFlight: 1, inFlightFrames: 300, inFlightSeconds: 0)
        let batch = BatchProgress(projects: 2, ended: 1, told: [(small, true), (big, false)])
        #expect(batch.meanCost == 20 && batch.weight(small) == 0.5 && batch.weight(big) == 1.5)
        #expect(batch.text(renderingFor: 3) == "ETA 0:09", "\(batch.text(renderingFor: 3))")
        #expect(big.timeInBatch(speed: batch.speed(for: big)) == "ETA 0:09", "\(big.timeInBatch(speed: batch.speed(for: big)))")
        // Unweighed (a coordinator that does not say): 3 s, as before.
        var old = (small, big); old.0.costPerFrame = nil; old.1.costPerFrame = nil
        let unweighed = BatchProgress(projects: 2, ended: 1, told: [(old.0, true), (old.1, false)])
        #expect(unweighed.text(renderingFor: 3) == "ETA 0:03" && unweighed.framesTotal == 600, "\(unweighed)")
        // Projects of the same cost weigh alike: the frames as they are.
        var same = (small, big); same.1.costPerFrame = 10
        let alike = BatchProgress(projects: 2, ended: 1, told: [(same.0, true), (same.1, false)])
        #expect(alike.framesTotal == 600 && alike.text(renderingFor: 3) == "ETA 0:03", "\(alike)")
    }

    /// Before any render has ended, the time left comes from what the renders should cost (a
    /// millisecond of cost is one of a slot's): a phone library's project read "ETA --:--" for
    /// the 3.7 s its first render took. 300 frames at 20 ms each, one render of all of them 1 s
    /// under way: 50 frames a second, 50 along, 5 s left. Its own rate, once it has one, wins.
    @Test func theTimeLeftBeforeAnyRenderEndsComesFromTheCosts() {
        var p = progress(done: 0, total: 300, known: true, elapsed: 1.2)
        p.framesRendered = 0; p.renderingFor = 1; p.running = ["render/0"]; p.workers = 1
        p.slots = TimeLeft.Slots(renderSeconds: 0, inFlight: 1, inFlightFrames: 300, inFlightSeconds: 1)
        #expect(p.etaText == "ETA --:--", "no cost told (an older coordinator): no rate")
        p.costPerFrame = 20
        #expect(p.etaText == "ETA 0:05", "\(p.etaText)")
        #expect(p.eta.map { abs($0 - 5) < 1e-9 } == true)
        #expect(BatchProgress(projects: 1, ended: 0, told: [(p, false)]).text(renderingFor: 1) == "ETA 0:05")
        // Its first render ended after 2 s, 300 frames: 150 a second; the next 300 frames, 1 s.
        var later = p
        later.framesDone = 300; later.framesTotal = 600; later.framesRendered = 300; later.renderingFor = 2
        later.slots = TimeLeft.Slots(renderSeconds: 2, inFlight: 1, inFlightFrames: 300, inFlightSeconds: 0)
        #expect(later.etaText == "ETA 0:02", "\(later.etaText)")
    }

    /// What the coordinator tells of a run's cost per frame: two projects of the same clips, one
    /// at 1920x1080 and one at 960x540, four times the pixels to encode a frame.
    @Test func aRunTellsWhatItsFramesCost() throws {
        let h = try Harness(workers: 1, slots: 1, runner: FakeRunner(delay: 0.01, deterministic: true))
        let told = Locked<[Int64: [RunProgress]]>([:])
        h.coordinator.observe { p, run, _ in if let p { told.withLock { $0[run, default: []].append(p) } } }
        func project(_ name: String, _ width: Int, _ height: Int) -> Pipeline {
            Pipeline(name: name, output: OutputProfile(path: h.dir + "/\(name).mp4", width: width, height: height),
                     items: (0..<2).map { Item(kind: .video(source: SourceRef("/media/\(name)-\($0).mov"), trim: nil)) })
        }
        let big = try h.submit(project("big", 1920, 1080)), small = try h.submit(project("small", 960, 540))
        for r in [big, small] { guard case .succeeded = try #require(h.wait(r)) else { Issue.record("run \(r) failed"); return } }
        let costs = try [big, small].map { run in try #require(told.value[run]?.last?.costPerFrame, "\(String(describing: told.value[run]?.last))") }
        #expect(costs[0] / costs[1] > 3.5 && costs[0] / costs[1] < 4.5, "\(costs)")
    }

    /// A run's items weigh in its frames by what their renders should cost: its costliest render
    /// (sent first) done, it is most of the way, not half (a phone library's project, its HEVC
    /// clips first and its photos last, read "ETA 0:15" with 4.8 s left). Two 1 s items, one with
    /// a silvertone look (a round trip to RGB and a colour balance, about 3.7 times the plain one's
    /// frame): 60 frames in all, about 47 of them the first's.
    @Test func aRunsItemsWeighByWhatTheirRendersCost() throws {
        let h = try Harness(workers: 1, slots: 1, runner: FakeRunner(delay: 0.3, deterministic: true))
        let told = Locked<[RunProgress]>([])
        h.coordinator.observe { p, _, _ in if let p { told.withLock { $0.append(p) } } }
        var look = Edits(); look.look = .silvertone
        let p = Pipeline(name: "mixed", output: OutputProfile(path: h.dir + "/mixed.mp4"),
                         items: [Item(kind: .video(source: SourceRef("/media/plain.mov"), trim: nil)),
                                 Item(kind: .video(source: SourceRef("/media/silver.mov"), trim: nil), edits: look)])
        guard case .succeeded = try #require(h.wait(try h.submit(p))) else { Issue.record("the run failed"); return }
        let half = try #require(told.value.first { $0.itemsDone == 1 && $0.framesKnown == true }, "\(told.value.map(\.itemsDone))")
        #expect(half.framesTotal.map { abs($0 - 60) <= 1 } == true, "\(half)")
        #expect(half.framesDone.map { $0 > 42 && $0 < 52 } == true, "the silvertone item's share: \(half)")
        #expect(told.value.last?.framesDone == told.value.last?.framesTotal)
    }

    /// The batch's total subtracts what one project's render makes for another, never below what
    /// that project has done.
    @Test func framesMadeElsewhereAreCountedOnce() {
        var a = progress(done: 300, total: 1200, known: true, elapsed: 2)
        a.framesRendered = 300; a.running = ["render/1"]
        var b = progress(done: 300, total: 1200, known: true, elapsed: 2)
        b.framesElsewhere = 900; b.running = []
        let batch = BatchProgress(projects: 2, ended: 0, told: [(a, false), (b, false)])
        #expect(batch.framesTotal == 1500 && batch.framesDone == 600, "\(batch)")
        b.framesElsewhere = 1200
        #expect(BatchProgress(projects: 2, ended: 0, told: [(a, false), (b, false)]).framesTotal == 1500, "never below its frames done")
    }

    /// A real coordinator with fake workers, 12 equal renders on 2 slots, the second slot's half a
    /// render behind the first (as renders of different lengths leave them): the first time left
    /// is near the truth. Frames over wall time counted only the finished render, not the one half
    /// done beside it, and said about twice the truth.
    @Test func theFirstTimeLeftOnTwoStaggeredSlotsIsNearTheTruth() throws {
        let runner = FakeRunner(delay: 0.15)
        runner.fetchDelay = 0.005
        let seen = Locked<[(at: Double, progress: RunProgress)]>([])
        let end = Locked<Double?>(nil)
        let started = Locked(0)
        runner.onStart = { label in
            guard label.hasPrefix("render") else { return }
            if started.withLock({ $0 += 1; return $0 }) == 2 { usleep(75_000) }
        }
        let h = try Harness(workers: 2, slots: 1, runner: runner)
        h.coordinator.observe { p, _, o in
            let now = Date().timeIntervalSince1970
            if let p { seen.withLock { $0.append((now, p)) } }
            if o != nil { end.withLock { $0 = now } }
        }
        let run = try h.submit(h.pipeline(12))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("the run failed"); return }
        let ended = try #require(end.value)
        let first = try #require(seen.value.first { $0.progress.eta != nil && !$0.progress.joining })
        let left = ended - first.at, said = first.progress.eta!
        let old = TimeLeft.seconds(framesDone: first.progress.framesDone ?? 0, framesTotal: first.progress.framesTotal ?? 0, known: true,
                                   rendered: first.progress.framesRendered ?? 0, renderingFor: first.progress.renderingFor ?? 0) ?? 0
        print(String(format: "12 renders on 2 staggered slots, first ETA: said %.2f s, %.2f s were left (frames over wall time: %.2f s)", said, left, old))
        #expect(abs(said - left) <= 0.3 * left + 0.1, "said \(said) s left, \(left) s were: \(first.progress)")
    }

    /// A run whose renders are cached checks them on the worker, beside what runs there: the
    /// checks take no slot, and are not counted running (on one slot, a coordinator restarted
    /// under a batch told "3 running" while its resumed runs checked what they had).
    @Test func cacheChecksAreNotCountedRunning() throws {
        let runner = FakeRunner(delay: 0.02, deterministic: true)
        runner.checkDelay = 0.3
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        let most = Locked<[Int64: Int]>([:])
        h.coordinator.observe { p, run, _ in if let p { most.withLock { $0[run] = max($0[run] ?? 0, p.running.count) } } }
        let first = try h.submit(h.pipeline(6))
        guard case .succeeded = try #require(h.wait(first)) else { Issue.record("the first run failed"); return }
        let again = try h.submit(h.pipeline(6))
        guard case .succeeded = try #require(h.wait(again)) else { Issue.record("the cached run failed"); return }
        #expect(runner.calls.filter { $0.hasPrefix("render") }.count == 6, "the second run rendered again: \(runner.calls)")
        #expect(most.value[first] == 1 && (most.value[again] ?? 0) <= 1, "most told running, on one slot: \(most.value)")
    }

    /// Two projects on one slot, as in a batch: the one that waits for the other renders later,
    /// and its time left is judged from its own rendering, not from the time it waited (which
    /// made its line read several times the time it had left).
    @Test func aRunThatWaitedBehindAnotherIsJudgedByItsOwnRendering() throws {
        let runner = FakeRunner(delay: 0.05)
        let seen = Locked<[Int64: [(at: Double, progress: RunProgress)]]>([:])
        let ends = Locked<[Int64: Double]>([:])
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        h.coordinator.observe { p, run, o in
            let now = Date().timeIntervalSince1970
            if let p { seen.withLock { $0[run, default: []].append((now, p)) } }
            if o != nil { ends.withLock { $0[run] = now } }
        }
        let a = try h.submit(h.pipeline(6, name: "a")), b = try h.submit(h.pipeline(6, name: "b"))
        for r in [a, b] { guard case .succeeded = try #require(h.wait(r)) else { Issue.record("run \(r) failed"); return } }
        let endA = try #require(ends.value[a]), endB = try #require(ends.value[b])
        let later = endA > endB ? a : b, end = max(endA, endB)
        // Its first word with a time left from a rate of its own (before it, the fake renders'
        // estimated costs give one, which says nothing of their speed): the predicted end
        // against the real one.
        let first = try #require(seen.value[later]?.first { ($0.progress.framesRendered ?? 0) > 0 && $0.progress.eta != nil && !$0.progress.joining })
        let left = end - first.at, said = first.progress.eta!
        #expect(first.progress.elapsed > 2 * (first.progress.renderingFor ?? 0), "the run waited before rendering: \(first.progress)")
        print(String(format: "the later run, first ETA: said %.3f s left, %.3f s were (waited %.2f s, rendering for %.3f s)", said, left, first.progress.elapsed - (first.progress.renderingFor ?? 0), first.progress.renderingFor ?? 0))
        #expect(abs(said - left) <= max(0.15, 0.5 * left), "said \(said) s left, \(left) s were: \(first.progress)")
    }

    /// A run that goes on after an item failed (its length never known) still tells its time
    /// left, from the items that will render, and names the failure.
    @Test func aRunGoingOnAfterAFailureTellsItsTimeLeftAndTheFailure() throws {
        let runner = FakeRunner(delay: 0.05)
        runner.failures["fetch p-0.mov"] = (.permanent, 1)
        let seen = Locked<[RunProgress]>([])
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        h.coordinator.observe { p, _, _ in if let p { seen.withLock { $0.append(p) } } }
        let run = try h.submit(h.pipeline(6))
        guard case .failed = try #require(h.wait(run)) else { Issue.record("the run should fail"); return }
        let after = seen.value.filter { !$0.failures.isEmpty && $0.itemsDone < 5 }
        let told = try #require(after.first { $0.eta != nil }, "no time left told after the failure: \(after.map { "\($0.itemsDone) \(String(describing: $0.framesKnown))" })")
        #expect(told.failures.count == 1 && told.failures[0].contains("p-0.mov"), "\(told.failures)")
        // Five one-second items of the same length: the failed one is not counted.
        #expect(told.framesKnown == true && (told.framesTotal ?? 0) > 0 && told.framesTotal! % 5 == 0, "\(told)")
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

    /// On one slot, a render whose worker gave the slot back (its segment still coming up from
    /// the worker's own store) and the next render sent to that slot are one render at a time,
    /// not two: the time left read half (ETA 0:04 between 0:09s on a one-slot farm) while a
    /// segment came up, and the line said "2 running". Real `coord serve` and `worker`, followed
    /// as `coord submit` does.
    @Test func aRenderWhoseSegmentComesUpRendersNothingBesideTheNext() throws {
        let dir = temporaryDirectory("one-slot-in-flight")
        let path = try ClusterTests.project(dir, items: 6, seconds: 2, size: (1280, 720), output: "1280x720")
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1, pipelines: 1)
        defer { procs.stopAll() }
        let client = try ClusterClient(endpoint: ep, context: MessagingContext(), downloads: dir + "/downloads")
        let run = try client.submit(try PipelineLoader.load(path: path))
        var most = 0, told = 0, mostRunning = 0
        let end = try client.follow(run) { p in
            guard let s = p.slots else { return }
            most = max(most, s.inFlight); told += 1
            mostRunning = max(mostRunning, p.running.count)
        }
        #expect(end.state == "succeeded", "\(end)")
        #expect(told > 3 && most == 1, "\(told) told, at most \(most) renders in flight on one slot")
        #expect(mostRunning == 1, "at most \(mostRunning) stages said running on one slot")
    }

    /// A render sent within the progress throttle of the word before (its fetch's result) is
    /// told once the throttle passes: the line said "0 running" for as long as it rendered.
    @Test func aRenderSentJustAfterAProgressIsShownRunning() throws {
        let runner = FakeRunner(delay: 0.01)
        let latest = Locked<RunProgress?>(nil)
        let seen = Locked<[Bool]>([])
        runner.onStart = { label in
            guard label.hasPrefix("render") else { return }
            func shown() -> Bool { latest.value?.running.contains { $0.hasPrefix("render/") } ?? false }
            let deadline = Date().addingTimeInterval(1)
            while !shown() && Date() < deadline { usleep(1000) }
            seen.withLock { $0.append(shown()) }
        }
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        h.coordinator.observe { p, _, _ in if let p { latest.withLock { $0 = p } } }
        let run = try h.submit(h.pipeline(1))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("the run failed"); return }
        #expect(seen.value == [true], "while the render ran, the last progress said: \(String(describing: latest.value))")
    }
}
