import Foundation
import Testing
import ThreadlineCore
import Lineage
import TestSupport
import GRDB
import PropertyBased

/// The lineage database as users read it: documented views and queries, and `coord lineage`.
@Suite(.serialized) struct LineageTests {
    static let render: String = {
        let dir = temporaryDirectory("lineage")
        try? Generate.clip(dir + "/a.mp4", width: 320, height: 240, seconds: 1, tone: 440)
        try? Generate.clip(dir + "/b.mp4", width: 240, height: 320, seconds: 1, tone: 550, rotation: 90)
        try? writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "320x240",
                           clips: ["video: a.mp4\n    trim: { start: 0.2 }", "video: b.mp4\n    volume: 0.5"])
        _ = try? run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        // A failed run too, so failure views have rows.
        try? "not a video".write(toFile: dir + "/garbage.mp4", atomically: true, encoding: .utf8)
        try? writePipeline(dir + "/bad.yaml", output: dir + "/bad.mp4", clips: ["video: garbage.mp4"])
        _ = try? run(coordPath, ["submit", dir + "/bad.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        return dir
    }()

    /// `coord runs` lists the most recent runs (of the key's own, for a submitter), oldest of them
    /// first, and says how many there are: a farm's thousands of runs are not sent whole.
    @Test func theRunListIsTheMostRecentAndCountsTheRest() throws {
        let dir = temporaryDirectory("run-list")
        let lineage = try LineageStore(path: dir + "/l.db")
        let p = Pipeline(name: "r", output: OutputProfile(path: dir + "/out.mp4"), items: [Item(kind: .video(source: SourceRef(dir + "/a.mov"), trim: nil))])
        for k in 1...7 { _ = try lineage.createRun(p, stages: Planner.stages(for: p), ownerKey: k % 2 == 0 ? "bob" : nil) }
        let ids = { (l: (runs: [[String: String]], total: Int)) in l.runs.compactMap { $0["id"] }.joined(separator: " ") + " of \(l.total)" }
        #expect(ids(try LineageStore.runList(limit: 3, owner: nil, rows: lineage.rows)) == "5 6 7 of 7")
        #expect(ids(try LineageStore.runList(limit: 0, owner: nil, rows: lineage.rows)) == "1 2 3 4 5 6 7 of 7")
        #expect(ids(try LineageStore.runList(limit: 2, owner: "bob", rows: lineage.rows)) == "4 6 of 3")
        #expect(ids(try LineageStore.runList(limit: 9, owner: "alice", rows: lineage.rows)) == " of 0")
        // The same through a read-only connection beside the writer, as `coord runs --state` reads it.
        #expect(ids(try LineageStore.runList(limit: 3, owner: nil, rows: { try LineageStore.readRows(path: dir + "/l.db", $0, $1) })) == "5 6 7 of 7")
    }

    /// The dashboard's time left comes from planned frames, as `coord submit`'s lines do: a run
    /// whose one long item is rendered is nearly done, however many short items are left. A looped
    /// item's segment counts once, as it is rendered once.
    @Test func theDashboardsTimeLeftComesFromFramesNotItems() throws {
        let dir = temporaryDirectory("eta")
        let lineage = try LineageStore(path: dir + "/l.db")
        let uris = ["long", "short1", "short2"].map { dir + "/\($0).mov" }
        var looped = Edits(); looped.loop = 3
        let p = Pipeline(name: "eta", output: OutputProfile(path: dir + "/out.mp4"),
                         items: uris.enumerated().map { Item(kind: .video(source: SourceRef($1), trim: nil), edits: $0 == 2 ? looped : Edits()) })
        let (runID, ids) = try lineage.createRun(p, stages: Planner.stages(for: p))
        let reader = try FarmReader(path: dir + "/l.db")
        let started = try #require(try reader.runs(id: runID).first).started
        func seen() throws -> FarmReader.Run { try #require(try reader.runs(id: runID, now: started + 10).first) }
        // The lengths are not known until every source is fetched: no frames and no ETA yet.
        var r = try seen()
        #expect(r.state == "running" && r.framesTotal == nil && r.etaS == nil && !r.joining, "\(r)")
        let facts = Dictionary(uniqueKeysWithValues: zip(uris, [10.0, 1, 1]).map {
            ($0, MediaFacts(duration: $1, width: 320, height: 240, hasVideo: true, hasAudio: false))
        })
        let timeline = try Planner.timeline(for: p, facts: facts)
        #expect(timeline.map(\.frameCount) == [300, 30, 90], "the looped item plays three times: \(timeline.map(\.frameCount))")
        try lineage.setItemTiming(runID: runID, timeline: timeline)
        // The long item's render was sent 2 s after the submit (the run waited for a slot) and is
        // done, its attempt timed by the worker from 2 s to 10 s.
        try lineage.workerSeen(id: "w", host: "test", pid: 1, slots: 1, version: "test")
        let render = try lineage.attemptDispatched(stageIDs: ["decode/0", "transform/0", "encode/0"].map { ids[$0]! }, attemptNo: 1, worker: "w", slot: 0, lease: "l0")
        for a in render { try lineage.attemptFinished(a, state: .succeeded, started: started + 2, finished: started + 10) }
        try lineage.stageUpdate(ids["decode/0"]!, state: .succeeded, started: started + 2)
        try lineage.stageUpdate(ids["encode/0"]!, state: .succeeded)
        r = try seen()
        #expect(r.itemsDone == 1 && r.framesDone == 300 && r.framesTotal == 360, "\(r)")
        // 300 frames in the 8 s since the render was sent: the 60 left take 1.6 s (by items, 2
        // left after 1 in 10 s, it said 20 s; by frames over the whole 10 s, 2 s).
        #expect(abs((r.etaS ?? -1) - 1.6) < 0.01, "\(r)")
        // The next item is reused from the cache: its frames are done, but say nothing of the rate.
        try lineage.stageCached(ids["encode/1"]!)
        try lineage.stageUpdate(ids["encode/1"]!, state: .succeeded)
        r = try seen()
        #expect(r.framesDone == 330 && abs((r.etaS ?? -1) - 0.8) < 0.01, "\(r)")
        try lineage.stageUpdate(ids["encode/2"]!, state: .succeeded)
        r = try seen()
        #expect(r.joining && r.etaS == nil && r.framesDone == 360, "every frame rendered, the concat to go: \(r)")
        try lineage.runFinished(runID, state: .succeeded)
        r = try seen()
        #expect(!r.joining && r.etaS == nil && r.framesDone == 360, "\(r)")
    }

    /// The dashboard counts renders in flight as the terminal does (`TimeLeft.Slots`): from the
    /// seconds the finished renders' stages took, the attempts still running, and the slots the
    /// run has had on average since its first render was sent.
    @Test func theDashboardCountsRendersInFlight() throws {
        let dir = temporaryDirectory("eta-slots")
        let lineage = try LineageStore(path: dir + "/l.db")
        let uris = ["a", "b", "c", "d"].map { dir + "/\($0).mov" }
        let p = Pipeline(name: "slots", output: OutputProfile(path: dir + "/out.mp4"),
                         items: uris.map { Item(kind: .video(source: SourceRef($0), trim: nil)) })
        let (runID, ids) = try lineage.createRun(p, stages: Planner.stages(for: p))
        let facts = Dictionary(uniqueKeysWithValues: uris.map { ($0, MediaFacts(duration: 10, width: 320, height: 240, hasVideo: true, hasAudio: false)) })
        try lineage.setItemTiming(runID: runID, timeline: try Planner.timeline(for: p, facts: facts))
        try lineage.workerSeen(id: "w", host: "test", pid: 1, slots: 2, version: "test")
        // Items 0 and 1 sent together; item 0 rendered its 300 frames in 2 s (its attempt's time).
        let zero = try lineage.attemptDispatched(stageIDs: ["decode/0", "transform/0", "encode/0"].map { ids[$0]! }, attemptNo: 1, worker: "w", slot: 0, lease: "l0")
        _ = try lineage.attemptDispatched(stageIDs: ["decode/1", "transform/1", "encode/1"].map { ids[$0]! }, attemptNo: 1, worker: "w", slot: 1, lease: "l1")
        let sent: Double = try #require(LineageStore.readRows(path: dir + "/l.db", "SELECT dispatched_at FROM attempt WHERE id = \(zero[0])")
            .first?["dispatched_at"].flatMap(Double.init))
        for (k, stage) in ["decode/0", "transform/0", "encode/0"].enumerated() {
            try lineage.attemptFinished(zero[k], state: .succeeded, started: sent + 0.05, finished: sent + 2.05)
            try lineage.stageUpdate(ids[stage]!, state: .succeeded, finished: sent + 2, seconds: 1.5)   // overlapping stage times
        }
        let r = try #require(try FarmReader(path: dir + "/l.db").runs(id: runID, now: sent + 2).first)
        // 150 frames a second on a slot; item 1 is as far along as item 0 went (done), so items 2
        // and 3 are left: 600 frames on the two slots the run has had since its first render
        // (4 s of renders in 2 s), 2 s; as `coord submit` reads it. By the one render in flight
        // at this instant, 4 s: the dashboard's time left doubled whenever a slot was between
        // renders. Frames over wall time: 6 s.
        #expect(r.framesDone == 300 && abs((r.etaS ?? -1) - 2) < 0.01, "\(r)")
        let terminal = TimeLeft.seconds(framesDone: 300, framesTotal: 1200, known: true, rendered: 300, renderingFor: 2,
                                        slots: TimeLeft.Slots(renderSeconds: 2, inFlight: 1, inFlightFrames: 300, inFlightSeconds: 2))
        #expect(terminal.map { abs($0 - (r.etaS ?? -1)) < 0.01 } == true, "the terminal's rule: \(String(describing: terminal))")
    }

    /// A cache check lost with its worker (it takes no slot, and is checked again elsewhere in
    /// milliseconds) is no failure and no setback: not on the dashboard's failure lists, not a
    /// line of `coord status`; a render lost with it is both. Before, a worker paused for 8 s
    /// under a batch left a run page listing decode/0, transform/0 and encode/0 as lost, with no
    /// error, and `coord status` a "✗ … lost — " line, for a check.
    @Test func aLostCacheCheckIsNoFailure() throws {
        let dir = temporaryDirectory("lost-check")
        let lineage = try LineageStore(path: dir + "/l.db")
        let uris = ["a", "b"].map { dir + "/\($0).mov" }
        let p = Pipeline(name: "checks", output: OutputProfile(path: dir + "/out.mp4"), items: uris.map { Item(kind: .video(source: SourceRef($0), trim: nil)) })
        let (runID, ids) = try lineage.createRun(p, stages: Planner.stages(for: p))
        try lineage.workerSeen(id: "w", host: "test", pid: 1, slots: 1, version: "test")
        let check = try lineage.attemptDispatched(stageIDs: ["decode/0", "transform/0", "encode/0"].map { ids[$0]! }, attemptNo: 1, worker: "w", slot: nil, lease: "l0")
        let render = try lineage.attemptDispatched(stageIDs: ["decode/1", "transform/1", "encode/1"].map { ids[$0]! }, attemptNo: 1, worker: "w", slot: 0, lease: "l1")
        for a in check + render {
            try lineage.attemptFinished(a, state: .lost, started: nil, finished: nil, errorClass: "retryable", errorMessage: "worker w lost: silent for 5.1 s")
        }
        let reader = try FarmReader(path: dir + "/l.db")
        let listed = try #require(try reader.run(runID)).failures.map(\.stage), recent = try reader.recentFailures().map(\.stage)
        #expect(listed.sorted() == ["decode/1", "encode/1", "transform/1"], "\(listed)")
        #expect(recent.sorted() == ["run \(runID): decode/1", "run \(runID): encode/1", "run \(runID): transform/1"], "\(recent)")
        let setbacks = try LineageStore.readRows(path: dir + "/l.db", LineageStore.setbacksSQL, [runID]).map { $0["stage"] ?? "" }
        #expect(setbacks.sorted() == ["decode/1", "encode/1", "transform/1"], "\(setbacks)")
    }

    /// A run that has rendered nothing of its own yet (its first item came from the cache: a clip
    /// another project had rendered) takes the farm's speed, from the other running runs' renders,
    /// as a batch's project lines do; in the run list and on its own page alike. Its ETA was blank
    /// until its own last render ended.
    ///
    /// `costs`: what the coordinator recorded each run's frames should cost (`stage.cost_ms`), the
    /// second's `costs.1` ms a frame against the first's 10: a second run three times as costly a
    /// frame (1080p behind 540p) goes at a third of the first's frames a second (it read 1 s left
    /// for 5 s). None recorded (an older coordinator's lineage): frames alike.
    @Test(arguments: [nil, 10.0, 30.0])
    func aRunWithNoRenderOfItsOwnTakesTheFarmsSpeed(secondCost: Double?) throws {
        let dir = temporaryDirectory("eta-speed")
        let lineage = try LineageStore(path: dir + "/l.db")
        try lineage.workerSeen(id: "w", host: "test", pid: 1, slots: 2, version: "test")
        var runs: [(Int64, [String: Int64])] = []
        for name in ["first", "second"] {
            let uris = ["a", "b"].map { dir + "/\(name)-\($0).mov" }
            let p = Pipeline(name: name, output: OutputProfile(path: dir + "/\(name).mp4"), items: uris.map { Item(kind: .video(source: SourceRef($0), trim: nil)) })
            let (runID, ids) = try lineage.createRun(p, stages: Planner.stages(for: p))
            let facts = Dictionary(uniqueKeysWithValues: uris.map { ($0, MediaFacts(duration: 10, width: 320, height: 240, hasVideo: true, hasAudio: false)) })
            try lineage.setItemTiming(runID: runID, timeline: try Planner.timeline(for: p, facts: facts))
            runs.append((runID, ids))
        }
        let (first, one) = runs[0], (second, two) = runs[1]
        // The first run rendered item 0's 300 frames in 2 s (150 a second on a slot).
        let costs = secondCost.map { (LineageStore.StageParameters(params: nil, key: nil, cost: 300 * 10),
                                      LineageStore.StageParameters(params: nil, key: nil, cost: 300 * $0)) }
        let zero = try lineage.attemptDispatched(stageIDs: ["decode/0", "transform/0", "encode/0"].map { one[$0]! }, attemptNo: 1, worker: "w", slot: 0, lease: "l0",
                                                 ready: costs?.0)
        let sent: Double = try #require(LineageStore.readRows(path: dir + "/l.db", "SELECT dispatched_at FROM attempt WHERE id = \(zero[0])")
            .first?["dispatched_at"].flatMap(Double.init))
        for (k, stage) in ["decode/0", "transform/0", "encode/0"].enumerated() {
            try lineage.attemptFinished(zero[k], state: .succeeded, started: sent, finished: sent + 2)
            try lineage.stageUpdate(one[stage]!, state: .succeeded, finished: sent + 2)
        }
        // The second reused its item 0 (the same clip) and renders item 1, sent at the same time.
        try lineage.stageCached(two["encode/0"]!)
        try lineage.stageUpdate(two["encode/0"]!, state: .succeeded)
        _ = try lineage.attemptDispatched(stageIDs: ["decode/1", "transform/1", "encode/1"].map { two[$0]! }, attemptNo: 1, worker: "w", slot: 1, lease: "l1",
                                          ready: costs?.1)
        try lineage.stageUpdate(two["decode/1"]!, state: .running)
        let reader = try FarmReader(path: dir + "/l.db")
        // At sent + 1: item 1 is 150 frames along at 150 a second; 150 left, 1 s. Three times as
        // costly a frame: 50 a second, 50 along, 250 left, 5 s.
        let expected = secondCost == 30 ? 5.0 : 1.0
        let listed = try reader.runs(now: sent + 1).first { $0.id == second }
        let alone = try reader.runs(id: second, now: sent + 1).first
        #expect(listed?.framesDone == 300 && abs((listed?.etaS ?? -1) - expected) < 0.05, "\(String(describing: listed))")
        #expect(alone?.etaS != nil && abs((alone?.etaS ?? -1) - (listed?.etaS ?? -2)) < 1e-9, "its own page: \(String(describing: alone))")
        // Its own rate wins once it has one: the first run still goes by its own.
        #expect(try reader.runs(id: first, now: sent + 2).first?.etaS.map { abs($0 - 2) < 0.05 } == true)
    }

    /// The run page's time left weighs a run's items by what their renders should cost, as
    /// `coord submit`'s line does, and shows its frames as they are. Two items of 300 frames, the
    /// first three times as costly a frame (rendered first, in 3 s) and the second in flight for
    /// 0.5 s: it should take 1 s, 0.5 s left. Counted alike, its frames read 2.5 s.
    @Test func theRunPageWeighsItsItemsByWhatTheyCost() throws {
        let dir = temporaryDirectory("eta-weighed")
        let lineage = try LineageStore(path: dir + "/l.db")
        try lineage.workerSeen(id: "w", host: "test", pid: 1, slots: 1, version: "test")
        let uris = ["a", "b"].map { dir + "/\($0).mov" }
        let p = Pipeline(name: "mixed", output: OutputProfile(path: dir + "/mixed.mp4"), items: uris.map { Item(kind: .video(source: SourceRef($0), trim: nil)) })
        let (runID, ids) = try lineage.createRun(p, stages: Planner.stages(for: p))
        let facts = Dictionary(uniqueKeysWithValues: uris.map { ($0, MediaFacts(duration: 10, width: 320, height: 240, hasVideo: true, hasAudio: false)) })
        try lineage.setItemTiming(runID: runID, timeline: try Planner.timeline(for: p, facts: facts))
        func stages(_ i: Int) -> [Int64] { ["decode/\(i)", "transform/\(i)", "encode/\(i)"].map { ids[$0]! } }
        let first = try lineage.attemptDispatched(stageIDs: stages(0), attemptNo: 1, worker: "w", slot: 0, lease: "l0",
                                                  ready: LineageStore.StageParameters(params: nil, key: nil, cost: 300 * 30))
        let sent: Double = try #require(LineageStore.readRows(path: dir + "/l.db", "SELECT dispatched_at FROM attempt WHERE id = \(first[0])")
            .first?["dispatched_at"].flatMap(Double.init))
        for (k, id) in stages(0).enumerated() {
            try lineage.attemptFinished(first[k], state: .succeeded, started: sent, finished: sent + 3)
            try lineage.stageUpdate(id, state: .succeeded, finished: sent + 3)
        }
        _ = try lineage.attemptDispatched(stageIDs: stages(1), attemptNo: 1, worker: "w", slot: 0, lease: "l1",
                                          ready: LineageStore.StageParameters(params: nil, key: nil, cost: 300 * 10))
        try lineage.stageUpdate(stages(1)[0], state: .running)
        try DatabaseQueue(path: dir + "/l.db").write { try $0.execute(sql: "UPDATE attempt SET dispatched_at = ? WHERE lease LIKE 'l1%'", arguments: [sent + 3]) }
        let r = try #require(try FarmReader(path: dir + "/l.db").runs(id: runID, now: sent + 3.5).first)
        #expect(r.framesDone == 300 && r.framesTotal == 600, "its frames as they are: \(r)")
        #expect(abs((r.etaS ?? -1) - 0.5) < 0.05, "\(r)")
        // Under a second left, all of it in its one render, and later overdue: the page says it
        // is finishing, as `coord submit`'s line does, rather than "ETA 0.5 s" and "ETA 0.0 s".
        #expect(r.finishingRenders == 1)
        let late = try #require(try FarmReader(path: dir + "/l.db").runs(id: runID, now: sent + 5).first)
        #expect(late.etaS == 0 && late.finishingRenders == 1, "\(late)")
        let early = try #require(try FarmReader(path: dir + "/l.db").runs(id: runID, now: sent + 3).first)
        #expect(early.finishingRenders == nil, "a second left: \(early)")
    }

    /// A resumed run's time left comes from what it renders after the resume: the hour it lay
    /// interrupted was not rendering time (counted, the ETA read half an hour for two seconds).
    @Test func aResumedRunIsJudgedByWhatItRendersAfterTheResume() throws {
        let dir = temporaryDirectory("eta-resume")
        let lineage = try LineageStore(path: dir + "/l.db")
        let uris = ["a", "b", "c"].map { dir + "/\($0).mov" }
        let p = Pipeline(name: "resumed", output: OutputProfile(path: dir + "/out.mp4"),
                         items: uris.map { Item(kind: .video(source: SourceRef($0), trim: nil)) })
        let (runID, ids) = try lineage.createRun(p, stages: Planner.stages(for: p))
        let facts = Dictionary(uniqueKeysWithValues: uris.map { ($0, MediaFacts(duration: 10, width: 320, height: 240, hasVideo: true, hasAudio: false)) })
        try lineage.setItemTiming(runID: runID, timeline: try Planner.timeline(for: p, facts: facts))
        let reader = try FarmReader(path: dir + "/l.db")
        let started = try #require(try reader.runs(id: runID).first).started
        // An hour ago, item 0 rendered in 10 s, and item 1's render was sent when the run was interrupted.
        try lineage.stageUpdate(ids["decode/0"]!, state: .succeeded, started: started - 3600)
        try lineage.stageUpdate(ids["encode/0"]!, state: .succeeded, finished: started - 3590)
        try lineage.stageUpdate(ids["decode/1"]!, state: .running, started: started - 3590)
        try lineage.interruptRun(runID, reason: "test: interrupted")
        #expect(try lineage.resume(runID: runID) != nil)
        // Resumed: item 1's render is sent again (its stage keeps its first start) and takes 2 s.
        let render = ["decode/1", "transform/1", "encode/1"].map { ids[$0]! }
        try lineage.workerSeen(id: "w", host: "test", pid: 1, slots: 1, version: "test")
        let attempt = try lineage.attemptDispatched(stageIDs: render, attemptNo: 2, worker: "w", slot: 0, lease: "l-resumed")
        let sent: Double = try #require(LineageStore.readRows(path: dir + "/l.db", "SELECT dispatched_at FROM attempt WHERE id = \(attempt[0])")
            .first?["dispatched_at"].flatMap(Double.init))
        var r = try #require(try reader.runs(id: runID, now: sent + 1).first)
        #expect(r.state == "running" && r.framesDone == 300 && r.etaS == nil, "nothing rendered since the resume, no rate yet: \(r)")
        for a in attempt { try lineage.attemptFinished(a, state: .succeeded, started: sent, finished: sent + 2) }
        try lineage.stageUpdate(ids["encode/1"]!, state: .succeeded, finished: sent + 2)
        r = try #require(try reader.runs(id: runID, now: sent + 2).first)
        // 300 frames in the 2 s since the resumed render was sent: the last 300 take 2 s.
        #expect(r.framesDone == 600 && abs((r.etaS ?? -1) - 2) < 0.01, "\(r)")
    }

    /// A run's duration is the time it was worked on: ten minutes before an interruption and five
    /// after the resume three hours later is fifteen minutes, in `v_runs` (`coord status`, `coord
    /// runs`, the batch table), the dashboard and `coord wait`, and does not grow while the run lies
    /// interrupted. Before, it counted the night. A coordinator that died is taken to have stopped
    /// where its run's attempts were last heard of, not when the next process found it.
    @Test func aRunsDurationLeavesOutTheTimeItLayInterrupted() throws {
        let dir = temporaryDirectory("paused")
        let db = dir + "/l.db"
        let lineage = try LineageStore(path: db)
        let p = Pipeline(name: "paused", output: OutputProfile(path: dir + "/out.mp4"),
                         items: [Item(kind: .video(source: SourceRef(dir + "/a.mov"), trim: nil))])
        let sql = { (q: String) throws -> String in
            let r = try run("sqlite3", [db, q], timeout: 30)
            try #require(r.status == 0, "\(r.err)")
            return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let reader = try FarmReader(path: db)
        func durations(_ id: Int64) throws -> [Double] {
            [try #require(Double(try sql("SELECT duration_s FROM v_runs WHERE id = \(id)"))),
             try #require(try reader.runs(id: id).first).durationS,
             try #require(try lineage.runRecord(id)).seconds]
        }
        // Stopped by its coordinator (Ctrl-C, a drain) after ten minutes' work, three hours ago.
        let (first, _) = try lineage.createRun(p, stages: Planner.stages(for: p))
        try lineage.interruptRun(first, reason: "test: interrupted")
        let now = Date().timeIntervalSince1970
        _ = try sql("UPDATE run SET submitted_at = \(now - 3 * 3600 - 600), interrupted_at = \(now - 3 * 3600) WHERE id = \(first)")
        for d in try durations(first) { #expect(abs(d - 600) < 1, "lying interrupted: \(d) s") }
        // Resumed now, done five minutes later.
        // What the resuming coordinator counts its seconds on from (the whole run's, not the resume's).
        let resumedFirst = try #require(try lineage.resume(runID: first))
        #expect(abs(resumedFirst.secondsBefore - 600) < 1)
        try lineage.runFinished(first, state: .succeeded)
        _ = try sql("UPDATE run SET finished_at = finished_at + 300 WHERE id = \(first)")
        for d in try durations(first) { #expect(abs(d - 900) < 2, "finished: \(d) s") }
        // Its coordinator died (an unused pid on this host) after an attempt last heard of two
        // hours ago; this process finds the run now and it is resumed.
        let (second, ids) = try lineage.createRun(p, stages: Planner.stages(for: p))
        try lineage.workerSeen(id: "w", host: "test", pid: 1, slots: 1, version: "test")
        let attempt = try lineage.attemptDispatched(stageIDs: [ids["fetch/0"]!], attemptNo: 1, worker: "w", slot: 0, lease: "l")
        _ = try sql("""
            UPDATE run SET submitted_at = \(now - 7200 - 60), coordinator = '\(ProcessInfo.processInfo.hostName):2147483000' WHERE id = \(second);
            UPDATE attempt SET dispatched_at = \(now - 7200 - 30), started_at = \(now - 7200) WHERE id = \(attempt[0]);
            """)
        #expect(try lineage.recoverInterrupted(only: [second]) == 1)
        for d in try durations(second) { #expect(abs(d - 60) < 1, "found interrupted: \(d) s") }
        let resumedSecond = try #require(try lineage.resume(runID: second))
        #expect(abs(resumedSecond.secondsBefore - 60) < 1)
        try lineage.runFinished(second, state: .failed, error: "test")
        for d in try durations(second) { #expect(d >= 60 && d < 62, "failed after the resume: \(d) s") }
    }

    @Test func migrationsFromEmptyGiveTheDocumentedViews() throws {
        let dir = temporaryDirectory("schema")
        _ = try LineageStore(path: dir + "/l.db")
        let names = try LineageStore.readRows(path: dir + "/l.db", "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')")
            .map { $0["name"]! }
        for v in ["v_runs", "v_stages", "v_attempts", "v_workers", "v_failures", "v_artifact_inputs", "v_lineage",
                  "run", "item", "stage", "stage_edge", "attempt", "artifact", "attempt_io", "worker", "event", "run_progress"] {
            #expect(names.contains(v), "missing \(v)")
        }
    }

    /// The coordinator records a submit inside its turn's transaction: a run whose rows fail half-way
    /// leaves no run behind, and the turn's other writes still land.
    @Test func aRunThatCannotBeRecordedWholeLeavesNothingInsideABatch() throws {
        let dir = temporaryDirectory("whole")
        let lineage = try LineageStore(path: dir + "/l.db")
        let p = Pipeline(name: "half", output: OutputProfile(path: dir + "/out.mp4"),
                         items: [Item(kind: .video(source: SourceRef(dir + "/a.mov"), trim: nil))])
        let stages = Planner.stages(for: p)
        // A stage twice: the second insert breaks UNIQUE (run_id, name) after the run row went in.
        try lineage.batch {
            #expect(throws: (any Error).self) { _ = try lineage.createRun(p, stages: stages + [stages[0]]) }
            try lineage.event("test.kept", "written in the same batch")
            _ = try lineage.createRun(p, stages: stages)
        }
        let runs = try LineageStore.readRows(path: dir + "/l.db", "SELECT count(*) AS n FROM run")
        let stageRows = try LineageStore.readRows(path: dir + "/l.db", "SELECT count(*) AS n FROM stage")
        let kept = try LineageStore.readRows(path: dir + "/l.db", "SELECT count(*) AS n FROM event WHERE kind = 'test.kept'")
        #expect(runs.first?["n"] == "1" && stageRows.first?["n"] == "\(stages.count)", "\(runs) \(stageRows)")
        #expect(kept.first?["n"] == "1")
    }

    @Test func everyDocumentedQueryRunsOnARealRender() throws {
        let db = Self.render + "/state/lineage.db"
        let doc = try String(contentsOfFile: repositoryRoot + "/docs/LINEAGE.md", encoding: .utf8)
        let blocks = doc.components(separatedBy: "```sql\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        #expect(blocks.count >= 6)
        for sql in blocks {
            let rows = try LineageStore.readRows(path: db, sql)
            #expect(!rows.isEmpty, "no rows from: \(sql)")
        }
    }

    @Test func lineageJSONListsSourcesWithHashesAndEveryStagesParameters() throws {
        let dir = Self.render
        let r = try run(coordPath, ["lineage", dir + "/out.mp4", "--state", dir + "/state", "--json"], timeout: 60)
        #expect(r.status == 0, "\(r.err)")
        let l = try JSONDecoder().decode(OutputLineage.self, from: Data(r.out.utf8))
        #expect(l.sources.map(\.uri) == [dir + "/a.mp4", dir + "/b.mp4"])
        for s in l.sources {
            #expect(s.sha256 == (try SHA256Hasher.hex(fileAt: s.uri)))
            #expect(s.facts?.hasVideo == true)
        }
        #expect(l.stages.count == 9)
        #expect(l.stages.allSatisfy { $0.parameters?.isEmpty == false && $0.state == "succeeded" })
        #expect(l.stages.first { $0.name == "decode/1" }?.parameters?.contains("\"volume\":0.5") == true)
        #expect(l.stages.first { $0.name == "concat" }?.parameters?.contains("\"sampleCount\"") == true)
        // The tree walks output ← segments ← sources.
        #expect(l.tree.first?.kind == "output")
        #expect(l.tree.filter { $0.kind == "segment" }.allSatisfy { $0.depth == 1 })
        #expect(Set(l.tree.filter { $0.kind == "source" }.map(\.sha256)) == Set(l.sources.map(\.sha256)))
    }

    /// A movie's lineage names every file it was made from: the fonts of its title and caption,
    /// its sticker and watermark images, and its soundtrack, each by the sha256 of what was read,
    /// for a local and a remote submit (before: only the clips' sources; "which song is in this
    /// movie?" had no answer). And export-lineage starts every stage it ends (a title's fetch,
    /// which no worker runs, was a COMPLETE without a START).
    @Test func aMoviesLineageNamesItsFontsImagesAndSoundtrack() throws {
        let dir = temporaryDirectory("lineage-files")
        try Generate.clip(dir + "/a.mp4", width: 320, height: 240, seconds: 1, tone: 440)
        for (file, args) in [("logo.png", ["-f", "lavfi", "-i", "color=red:s=64x64", "-frames:v", "1"]),
                             ("song.m4a", ["-f", "lavfi", "-i", "sine=f=300:d=3", "-c:a", "aac"])] {
            let made = try run("ffmpeg", ["-v", "error", "-y"] + args + [dir + "/" + file])
            try #require(made.status == 0, "\(made.err)")
        }
        let font = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"
        try """
            version: 1
            name: files
            output: { path: out.mp4, size: 320x240, fps: 30, video: { preset: ultrafast }, watermark: { image: logo.png } }
            soundtrack: { source: song.m4a }
            clips:
              - title: { text: "Hello", duration: 1, font: \(font) }
              - video: a.mp4
                text: { value: "caption" }
                stickers: [{ image: logo.png }]
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let sha = try Dictionary(uniqueKeysWithValues: [("font", font), ("caption font", Title.defaultFont),
                                                        ("logo", dir + "/logo.png"), ("song", dir + "/song.m4a"), ("a", dir + "/a.mp4")]
            .map { ($0.0, try SHA256Hasher.hex(fileAt: $0.1)) })
        func check(_ state: String, _ how: String) throws {
            let r = try run(coordPath, ["lineage", dir + "/out.mp4", "--state", state, "--json"], timeout: 60)
            try #require(r.status == 0, "\(how): \(r.err)")
            let l = try JSONDecoder().decode(OutputLineage.self, from: Data(r.out.utf8))
            let files = Set(l.tree.filter { !["output", "movie", "segment", "transition", "source"].contains($0.kind) }.map { "\($0.kind) \($0.sha256)" })
            #expect(files == ["font \(sha["font"]!)", "font \(sha["caption font"]!)", "sticker \(sha["logo"]!)",
                              "watermark \(sha["logo"]!)", "soundtrack \(sha["song"]!)"], "\(how): \(l.tree.map { "\($0.depth) \($0.kind) \($0.uri)" })")
            // The soundtrack is read by the concat (the movie's input); the images and fonts by segments.
            #expect(l.tree.filter { $0.kind == "soundtrack" }.allSatisfy { $0.depth == 1 } && l.tree.filter { $0.kind == "sticker" }.allSatisfy { $0.depth == 2 },
                    "\(how): \(l.tree.map { "\($0.depth) \($0.kind)" })")
            // As a person reads it: what each artifact was made from under it, in the movie's order.
            let text = try run(coordPath, ["lineage", dir + "/out.mp4", "--state", state], timeout: 60)
            let drawn = text.out.split(separator: "\n").filter { $0.contains("← ") }.map { line in
                line.prefix { $0 == " " }.count.description + " " + line.drop { $0 == " " }.dropFirst(2).split(separator: " ").prefix { !$0.hasSuffix("…") }.joined(separator: " ")
            }
            #expect(drawn == ["2 segment of item 1", "4 font", "4 watermark", "2 segment of item 2", "4 source of item 2", "4 font", "4 sticker", "4 watermark", "2 soundtrack"],
                    "\(how): \(text.out)")
            #expect(text.out.contains("← source of item 2 \(sha["a"]!.prefix(12))… \(dir)/a.mp4\n"), "\(how): \(text.out)")
            let events = try run(coordPath, ["export-lineage", "\(l.run)", "--state", state], timeout: 60)
            var started: Set<String> = []
            for line in events.out.split(separator: "\n") {
                let e = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let run = (e["run"] as? [String: Any])?["runId"] as? String ?? ""
                if e["eventType"] as? String == "START" { started.insert(run) } else { #expect(started.contains(run), "\(how): \(line)") }
            }
            #expect(started.count == 10, "\(how): a run and 9 stages: \(events.out)")
        }
        let local = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        try #require(local.status == 0, "\(local.err)")
        try check(dir + "/state", "local")
        // Asked of the song itself: the run that read it.
        let song = try run(coordPath, ["lineage", dir + "/song.m4a", "--state", dir + "/state"], timeout: 60)
        #expect(song.status == 0 && song.out.hasPrefix("\(dir)/song.m4a is a soundtrack, not a movie: run 1 read it"), "\(song.out)\(song.err)")
        try FileManager.default.removeItem(atPath: dir + "/out.mp4")
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1)
        defer { procs.stopAll() }
        let remote = try run(coordPath, ["submit", dir + "/p.yaml", "--coordinator", ep], timeout: 120)
        try #require(remote.status == 0, "\(remote.err)")
        try check(dir + "/coord", "remote")
    }

    /// A title's fetch records the title as {"title":{…}}, as a source's records {"uri":…}
    /// (it read {"title":{"_0":{…}}}, the item kind's own encoding).
    @Test func aTitlesParametersNameItsTitle() throws {
        let dir = temporaryDirectory("lineage-title")
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "160x90", clips: ["title: { text: \"Hello\", duration: 0.5 }"])
        let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 60)
        #expect(s.status == 0, "\(s.err)")
        let r = try run(coordPath, ["lineage", dir + "/out.mp4", "--state", dir + "/state", "--json"], timeout: 60)
        let l = try JSONDecoder().decode(OutputLineage.self, from: Data(r.out.utf8))
        let fetch = try #require(l.stages.first { $0.name == "fetch/0" }?.parameters)
        let object = try #require(JSONSerialization.jsonObject(with: Data(fetch.utf8)) as? [String: [String: Any]], "\(fetch)")
        #expect(object["title"]?["text"] as? String == "Hello" && object["title"]?["duration"] as? Double == 0.5, "\(fetch)")
    }
}

@Suite(.serialized) struct MaintenanceTests {
    @Test func gcRemovesOnlyArtifactsOfOldRuns() throws {
        let dir = temporaryDirectory("gc")
        try Generate.clip(dir + "/old.mp4", width: 320, height: 240, seconds: 1, tone: 300)
        try Generate.clip(dir + "/new.mp4", width: 320, height: 240, seconds: 1, tone: 600)
        try writePipeline(dir + "/old.yaml", output: dir + "/old-out.mp4", size: "320x240", clips: ["video: old.mp4"])
        try writePipeline(dir + "/new.yaml", output: dir + "/new-out.mp4", size: "320x240", clips: ["video: new.mp4"])
        for p in ["old", "new"] {
            let r = try run(coordPath, ["submit", dir + "/\(p).yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
            #expect(r.status == 0, "\(r.err)")
        }
        let db = dir + "/state/lineage.db"
        do {   // the first run was a month ago
            let store = try LineageStore(path: db)
            try store.rewriteSubmittedAt(runID: 1, to: Date().timeIntervalSince1970 - 30 * 86_400)
        }
        let files = { (run: Int) in try LineageStore.readRows(path: db, """
            SELECT DISTINCT ar.uri FROM artifact ar JOIN attempt_io io ON io.artifact_id = ar.id JOIN attempt a ON a.id = io.attempt_id
            JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ? AND ar.kind != 'output'
            """, [run]).map { $0["uri"]! } }
        let oldFiles = try files(1), newFiles = try files(2)
        #expect(oldFiles.count == 3 && newFiles.count == 3)
        let r = try run(coordPath, ["gc", "--keep-days", "7", "--min-age", "0", "--state", dir + "/state"], timeout: 60)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("3 artifacts removed"), "\(r.out)")
        #expect(oldFiles.allSatisfy { !FileManager.default.fileExists(atPath: $0) })
        #expect(newFiles.allSatisfy { FileManager.default.fileExists(atPath: $0) })
        // What was collected is rendered again when asked for, never used missing.
        let again = try run(coordPath, ["submit", dir + "/old.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        #expect(again.status == 0, "\(again.err)")
        #expect(try ffprobe(dir + "/old-out.mp4", countFrames: true).frames == 30)
    }

    /// A local `coord submit` kept a copy of every source, segment and movie in the state folder
    /// for ever: a person rendering a month of phone footage a month grew ~/.local/share by that
    /// much each time, unseen (only `coord serve` collected). After a local render, at most every
    /// 6 hours, the artifacts of runs older than --gc-keep-days go, and the submit says so.
    @Test func aLocalSubmitCollectsOldRunsArtifactsAtMostEverySixHours() throws {
        let dir = temporaryDirectory("gc-local")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Generate.clip(dir + "/old.mp4", width: 320, height: 240, seconds: 1, tone: 300)
        try Generate.clip(dir + "/new.mp4", width: 320, height: 240, seconds: 1, tone: 600)
        try writePipeline(dir + "/old.yaml", output: dir + "/old-out.mp4", size: "320x240", clips: ["video: old.mp4"])
        try writePipeline(dir + "/new.yaml", output: dir + "/new-out.mp4", size: "320x240", clips: ["video: new.mp4"])
        func submit(_ p: String, _ extra: [String] = []) throws -> String {
            let r = try run(coordPath, ["submit", dir + "/\(p).yaml", "--state", dir + "/state", "--workers", "1"] + extra, timeout: 120)
            #expect(r.status == 0, "\(r.err)")
            return r.err
        }
        _ = try submit("old")
        let db = dir + "/state/lineage.db"
        // The first run was a month ago, and its files were written more than an hour ago.
        try LineageStore(path: db).rewriteSubmittedAt(runID: 1, to: Date().timeIntervalSince1970 - 30 * 86_400)
        let oldFiles = try LineageStore.readRows(path: db, """
            SELECT DISTINCT ar.uri FROM artifact ar JOIN attempt_io io ON io.artifact_id = ar.id JOIN attempt a ON a.id = io.attempt_id
            JOIN stage s ON s.id = a.stage_id WHERE s.run_id = 1 AND ar.kind != 'output'
            """).map { $0["uri"]! }
        #expect(oldFiles.count == 3)
        let hoursAgo = { (h: Double) in [FileAttributeKey.modificationDate: Date(timeIntervalSinceNow: -h * 3600)] }
        for f in oldFiles { try FileManager.default.setAttributes(hoursAgo(2), ofItemAtPath: f) }
        // Collected within the last 6 hours (the first submit did): nothing goes, nothing said.
        var said = try submit("new")
        #expect(!said.contains("removed") && oldFiles.allSatisfy { FileManager.default.fileExists(atPath: $0) }, "\(said)")
        // 0: never.
        try FileManager.default.setAttributes(hoursAgo(7), ofItemAtPath: dir + "/state/gc.stamp")
        said = try submit("new", ["--gc-keep-days", "0"])
        #expect(!said.contains("removed") && oldFiles.allSatisfy { FileManager.default.fileExists(atPath: $0) }, "\(said)")
        // Past 6 hours: the old run's files go, the new run's and both movies stay.
        said = try submit("new")
        #expect(said.contains("state folder \(dir)/state: removed 3 artifacts") && said.contains("of runs older than 14 days"), "\(said)")
        #expect(oldFiles.allSatisfy { !FileManager.default.fileExists(atPath: $0) })
        #expect(FileManager.default.fileExists(atPath: dir + "/old-out.mp4") && FileManager.default.fileExists(atPath: dir + "/new-out.mp4"))
        let doctor = try run(coordPath, ["doctor", "--state", dir + "/state"], timeout: 60)
        #expect(doctor.status == 0, "\(doctor.out)\(doctor.err)")
    }

    /// A farm recording every run for ever grows its lineage database by about 6 KB per item
    /// rendered (2,200 one-title runs: 14 MB), tens of GB a year for an overnight farm, and
    /// nothing took any of it back. `coord gc --lineage-keep-days` (and `coord serve
    /// --lineage-keep-days`, with its collections) forgets runs that ended longer ago: their
    /// stages, attempts, links and events, the artifact rows and workers nothing else names.
    /// A newer run that reused their segments keeps its whole lineage, and nothing is forgotten
    /// unless asked, nor while another process holds the state folder.
    @Test func gcForgetsTheRecordsOfOldRunsWhenAsked() throws {
        let dir = temporaryDirectory("gc-forget")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for i in 0..<2 { try Generate.clip(dir + "/c\(i).mp4", width: 320, height: 240, seconds: 1, tone: 300 + Double(i) * 200) }
        for p in ["old", "new"] {
            try writePipeline(dir + "/\(p).yaml", output: dir + "/\(p)-out.mp4", size: "320x240", clips: ["video: c0.mp4", "video: c1.mp4"])
            let r = try run(coordPath, ["submit", dir + "/\(p).yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
            #expect(r.status == 0, "\(r.err)")
        }
        let db = dir + "/state/lineage.db"
        // The old run as a farm's long run would be: 20,000 events, some 10 MB of records.
        do {
            let store = try LineageStore(path: db)
            try store.batch { for k in 0..<20_000 { try store.event("test.filler", "event \(k) " + String(repeating: "x", count: 400), runID: 1) } }
            try store.age(runID: 1, by: 40 * 86_400)
        }
        func fileSize() throws -> Int64 { (try FileManager.default.attributesOfItem(atPath: db)[.size] as! NSNumber).int64Value }
        let fat = try fileSize()
        func count(_ sql: String) throws -> Int { Int(try LineageStore.readRows(path: db, sql).first?["n"] ?? "") ?? -1 }
        func recorded(run: Int) throws -> [Int] {
            try ["SELECT count(*) AS n FROM run WHERE id = \(run)", "SELECT count(*) AS n FROM item WHERE run_id = \(run)",
                 "SELECT count(*) AS n FROM stage WHERE run_id = \(run)", "SELECT count(*) AS n FROM stage_edge WHERE run_id = \(run)",
                 "SELECT count(*) AS n FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = \(run)",
                 "SELECT count(*) AS n FROM event WHERE run_id = \(run)"].map(count)
        }
        let before = try recorded(run: 1)
        #expect(before.allSatisfy { $0 > 0 }, "\(before)")
        let artifacts = try count("SELECT count(*) AS n FROM artifact")
        // Not asked: every record stays.
        var r = try run(coordPath, ["gc", "--keep-days", "14", "--min-age", "0", "--state", dir + "/state"], timeout: 60)
        let kept = try recorded(run: 1)
        #expect(r.status == 0 && !r.out.contains("forgotten") && kept == before, "\(r.out)\(r.err)")
        // A record never goes before its run's artifacts would.
        r = try run(coordPath, ["gc", "--keep-days", "14", "--lineage-keep-days", "7", "--state", dir + "/state"], timeout: 60)
        #expect(r.status != 0 && r.err.contains("--lineage-keep-days must be at least --keep-days (14)"), "\(r.err)")
        r = try run(coordPath, ["gc", "--keep-days", "0", "--lineage-keep-days", "0", "--state", dir + "/state"], timeout: 60)
        #expect(r.status != 0 && r.err.contains("--lineage-keep-days must be more than 0 days"), "\(r.err)")
        // Another process on the folder (a local submit holds it shared): refused, nothing forgotten.
        do {
            let held = try FolderLock.stateFolder(dir + "/state", shared: true)
            r = try run(coordPath, ["gc", "--lineage-keep-days", "30", "--state", dir + "/state"], timeout: 60)
            // Refused before anything else: no artifact collected either.
            #expect(r.status == 1 && r.err.contains("forgotten only with the state folder to itself") && r.err.contains("Nothing was removed")
                    && !r.out.contains("artifacts removed"), "\(r.out)\(r.err)")
            #expect(try recorded(run: 1) == before)
            withExtendedLifetime(held) {}
        }
        r = try run(coordPath, ["gc", "--lineage-keep-days", "30", "--state", dir + "/state"], timeout: 60)
        #expect(r.status == 0 && r.out.contains("1 run older than 30 days forgotten"), "\(r.out)\(r.err)")
        #expect(try recorded(run: 1) == [0, 0, 0, 0, 0, 0])
        // And the file gives their space back to the disk.
        let lean = try fileSize()
        #expect(fat > 8 << 20 && lean < fat / 4 && r.out.contains("lineage database compacted: \(ByteSize.text(fat)) → \(ByteSize.text(lean))"),
                "\(fat) → \(lean) bytes: \(r.out)")
        #expect(try recorded(run: 2).allSatisfy { $0 > 0 })
        #expect(try count("SELECT count(*) AS n FROM artifact") < artifacts)
        #expect(try LineageStore.readRows(path: db, "PRAGMA foreign_key_check").isEmpty)
        // The newer run reused the old run's segments: its movie's lineage still reaches both sources.
        let lineage = try run(coordPath, ["lineage", dir + "/new-out.mp4", "--state", dir + "/state"], timeout: 60)
        #expect(lineage.status == 0 && lineage.out.contains("run 2 of") && lineage.out.contains(dir + "/c0.mp4")
                && lineage.out.contains(dir + "/c1.mp4"), "\(lineage.out)\(lineage.err)")
        let doctor = try run(coordPath, ["doctor", "--state", dir + "/state"], timeout: 60)
        #expect(doctor.status == 0, "\(doctor.out)\(doctor.err)")
        // And the old project renders again from what is left.
        let again = try run(coordPath, ["submit", dir + "/old.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        #expect(again.status == 0, "\(again.err)")
        // A farm forgets with its collections: the new run aged too, `coord serve` takes it.
        try LineageStore(path: db).age(runID: 2, by: 40 * 86_400)
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:*", "--state", dir + "/state", "--lineage-keep-days", "30"])
        _ = try procs.endpoint(of: "coord")
        #expect(waitUntil(timeout: 20) { (try? String(contentsOfFile: procs.log("coord"), encoding: .utf8))?.contains("forgot the records") == true },
                "\((try? String(contentsOfFile: procs.log("coord"), encoding: .utf8)) ?? "")")
        #expect(try recorded(run: 2) == [0, 0, 0, 0, 0, 0])
        #expect(try recorded(run: 3).allSatisfy { $0 > 0 })
    }

    /// The run list's stage counts, kept for ended runs (`run_progress`) and counted for the others:
    /// after any sequence of what coordinators write (plans, stage state changes and cache hits
    /// while a run is live, ends that cancel what is left, interruptions and resumes, old runs
    /// forgotten) they are what a count of the stages says, and the items done those whose encode
    /// succeeded.
    @Test func theRunListsStageCountsFollowEveryWrite() async throws {
        let ops = Gen.int(in: 0...9_999).array(of: 1...60)
        await propertyCheck(count: 40, input: ops) { ops in
            let dir = temporaryDirectory("progress")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let lineage = try! LineageStore(path: dir + "/l.db")
            var runs: [(id: Int64, stages: [Int64])] = []
            // A coordinator writes the stages of the runs it has live: an ended one it forgot.
            func live() -> (id: Int64, stages: [Int64])? {
                let states = Dictionary(uniqueKeysWithValues: try! lineage.rows("SELECT id, state FROM run").map { (Int64($0["id"]!)!, $0["state"]!) })
                return runs.filter { states[$0.id] == "running" }.randomElement()
            }
            for op in ops {
                let pick = op / 8
                switch op % 8 {
                case 0, 1:
                    let items = (0...(pick % 3)).map { Item(kind: .video(source: SourceRef(dir + "/\($0).mov"), trim: nil)) }
                    let p = Pipeline(name: "p", output: OutputProfile(path: dir + "/out.mp4"), items: items)
                    let (id, ids) = try! lineage.createRun(p, stages: Planner.stages(for: p))
                    runs.append((id, ids.values.sorted()))
                case 2, 3:
                    guard let run = live(), !run.stages.isEmpty else { continue }
                    let state = StageStatus.allCases[pick % StageStatus.allCases.count]
                    try! lineage.stageUpdate(run.stages[pick % run.stages.count], state: state)
                case 4:
                    guard let run = live(), !run.stages.isEmpty else { continue }
                    try! lineage.stageCached(run.stages[pick % run.stages.count])
                case 5:
                    guard let run = live() else { continue }
                    try! lineage.runFinished(run.id, state: [.succeeded, .failed, .cancelled][pick % 3])
                case 6:
                    guard let run = live() else { continue }
                    try! lineage.interruptRun(run.id, reason: "test")
                    if pick % 2 == 0 { _ = try! lineage.resume(runID: run.id) }
                default:
                    guard let run = runs.randomElement() else { continue }
                    try! lineage.age(runID: run.id, by: 86_400)
                    _ = try! lineage.forgetRuns(submittedBefore: lineage.now() - 3_600)
                    let kept = Set(try! lineage.rows("SELECT id FROM run").compactMap { Int64($0["id"] ?? "") })
                    runs.removeAll { !kept.contains($0.id) }
                }
            }
            var truth: [Int64: FarmReader.StageCounts] = [:], done: [Int64: Int] = [:]
            for r in try! lineage.rows("SELECT run_id, state, cached, kind, count(*) AS n FROM stage GROUP BY run_id, state, cached, kind") {
                let run = Int64(r["run_id"]!)!, n = Int(r["n"]!)!
                var c = truth[run] ?? FarmReader.StageCounts()
                switch (r["state"]!, r["cached"] == "1") {
                case ("succeeded", true): c.cached += n
                case ("succeeded", false): c.succeeded += n
                case ("running", _): c.running += n
                case ("ready", _): c.ready += n
                case ("failed", _): c.failed += n
                case ("cancelled", _): c.cancelled += n
                default: c.pending += n
                }
                truth[run] = c
                if r["state"] == "succeeded" && r["kind"] == "encode" { done[run, default: 0] += n }
            }
            let seen = try! FarmReader(path: dir + "/l.db").runs(limit: 100_000)
            #expect(Set(seen.map(\.id)) == Set(runs.map(\.id)))
            for r in seen {
                #expect(r.stages == truth[r.id] ?? FarmReader.StageCounts(), "run \(r.id) after \(ops.map { $0 % 8 })")
                #expect(r.itemsDone == done[r.id] ?? 0, "run \(r.id)")
            }
            // A forgotten run's counts went with it.
            let orphans = try! lineage.rows("SELECT count(*) AS n FROM run_progress WHERE run_id NOT IN (SELECT id FROM run)")
            #expect(orphans.first?["n"] == "0")
        }
    }

    /// A database an older version wrote (before the kept stage counts) is brought up to date
    /// when a reader opens it, its counts made from its stages: `coord dashboard` and `coord runs`
    /// on an old state folder answer instead of failing on a table they do not find.
    @Test func anOlderDatabaseIsBroughtUpToDateByItsReader() throws {
        let dir = temporaryDirectory("old-lineage")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/lineage.db"
        let p = Pipeline(name: "old", output: OutputProfile(path: dir + "/out.mp4"),
                         items: (0..<3).map { Item(kind: .video(source: SourceRef(dir + "/\($0).mov"), trim: nil)) })
        let planned = Planner.stages(for: p)
        do {
            let lineage = try LineageStore(path: path)
            let (id, ids) = try lineage.createRun(p, stages: planned)
            for name in ["fetch/0", "decode/0", "encode/0", "fetch/1"] { try lineage.stageUpdate(try #require(ids[name], "\(ids.keys)"), state: .succeeded) }
            try lineage.stageCached(ids["encode/0"]!)
            try lineage.runFinished(id, state: .failed, error: "x")
        }
        // As version 12 left it: no kept counts.
        let db = try DatabaseQueue(path: path)
        try db.write { db in
            try db.execute(sql: """
                DROP TRIGGER run_ended; DROP TRIGGER run_resumed; DROP TABLE run_progress;
                DELETE FROM grdb_migrations WHERE identifier LIKE 'v13:%';
                """)
        }
        try db.close()
        let listed = try run(coordPath, ["runs", "--state", dir], timeout: 60)
        #expect(listed.status == 0 && listed.out.contains("failed"), "\(listed.out)\(listed.err)")
        let seen = try #require(try FarmReader(path: path).runs().first)
        var expected = FarmReader.StageCounts()
        expected.succeeded = 3; expected.cached = 1; expected.cancelled = planned.count - 4
        #expect(seen.stages == expected && seen.itemsDone == 1, "\(seen)")
    }

    @Test func exportLineageEmitsOpenLineageRunEvents() throws {
        let dir = LineageTests.render
        let r = try run(coordPath, ["export-lineage", "1", "--state", dir + "/state"], timeout: 60)
        #expect(r.status == 0, "\(r.err)")
        let events = try r.out.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        #expect(events.count == 2 + 2 * 9)
        for e in events {
            #expect(["START", "COMPLETE", "FAIL", "ABORT"].contains(e["eventType"] as? String ?? ""))
            #expect((e["eventTime"] as? String)?.hasSuffix("Z") == true)
            let runID = (e["run"] as? [String: Any])?["runId"] as? String ?? ""
            #expect(UUID(uuidString: runID) != nil, "runId \(runID) is not a UUID")
            #expect(((e["job"] as? [String: Any])?["namespace"] as? String) == "threadline")
        }
        let encodes = events.filter { ($0["eventType"] as? String) == "COMPLETE" && (($0["job"] as? [String: Any])?["name"] as? String ?? "").hasSuffix("encode/0") }
        let outputs = encodes.first?["outputs"] as? [[String: Any]] ?? []
        #expect(outputs.count == 1)
    }
}
