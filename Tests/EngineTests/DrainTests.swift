import Foundation
import Testing
import Lineage
import TestSupport

/// A worker told to stop (SIGTERM: Compose, Kubernetes and systemd on scale-in) under
/// `coord serve` finishes what it runs, delivers the results, takes no new work and exits 0;
/// past `--drain-timeout` it hands the rest back at once. Nothing is lost either way.
@Suite(.serialized) struct DrainTests {
    /// Starts a project on a two-worker cluster and waits until worker w1 is rendering.
    /// Returns the processes, the submit, and the lineage attempt ids w1 was running.
    /// `environment`: added to the coordinator's and w1's (a host both run on).
    /// `sourceCopied`: also wait until w1 holds the stage's source (see below).
    static func renderUntilW1IsBusy(_ dir: String, w1Args: [String] = [], serveArgs: [String] = [],
                                    environment: [String: String] = [:], sourceCopied: Bool = false,
                                    seconds: Double = 2) throws -> (ServiceProcesses, Process, [String]) {
        let pipeline = try ClusterTests.project(dir, items: 6, seconds: seconds, output: "640x360", preset: "medium")
        let procs = ServiceProcesses(directory: dir)
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:*", "--state", dir + "/coord"] + serveArgs,
                        environment: environment)
        let ep = try procs.endpoint(of: "coord")
        try procs.start("w1", workerPath, ["--connect", ep, "--pipelines", "1", "--store", dir + "/w1", "--id", "w1"] + w1Args,
                        environment: environment)
        try procs.start("w2", workerPath, ["--connect", ep, "--pipelines", "1", "--store", dir + "/w2", "--id", "w2"])
        let submit = try procs.start("submit", coordPath, ["submit", pipeline, "--coordinator", ep, "--json"])
        let db = dir + "/coord/lineage.db"
        var busy: [String] = []
        _ = waitUntil(timeout: 120) {
            busy = ((try? LineageStore.readRows(path: db, """
                SELECT a.id FROM attempt a JOIN stage s ON s.id = a.stage_id
                WHERE a.worker_id = 'w1' AND a.state = 'running' AND s.kind = 'decode'
                """)) ?? []).compactMap { $0["id"] }
            return !busy.isEmpty
        }
        // Lineage says "running" when the stage is sent; w1 may still be copying its source in
        // (a stop signal then hands it back, rightly, before it starts). Rendering once the
        // source is in w1's store.
        if sourceCopied, let id = busy.first.flatMap({ Int64($0) }), let sha = try LineageStore.readRows(path: db, """
            SELECT ar.sha256 FROM attempt a JOIN stage s ON s.id = a.stage_id
            JOIN stage f ON f.run_id = s.run_id AND f.item_idx = s.item_idx AND f.kind = 'fetch'
            JOIN artifact ar ON ar.key = f.key AND ar.kind = 'source' WHERE a.id = ? LIMIT 1
            """, [id]).first?["sha256"] {
            _ = waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: dir + "/w1/artifacts/sha256/\(sha.prefix(2))/\(sha)") }
            usleep(50_000)
        }
        return (procs, submit, busy)
    }

    /// SIGHUP too: a worker started from a terminal or an SSH session that closes drains, as on
    /// scale-in, rather than dying with its stages.
    @Test(arguments: [SIGTERM, SIGHUP])
    func aStopSignalFinishesTheStageInFlightAndExitsZero(signal: Int32) throws {
        let dir = temporaryDirectory("drain")
        let (procs, submit, busy) = try Self.renderUntilW1IsBusy(dir, w1Args: [], sourceCopied: true)
        defer { procs.stopAll() }
        #expect(!busy.isEmpty, "w1 never started a render")
        let w1 = try #require(procs.process("w1"))
        let db = dir + "/coord/lineage.db"
        let t0 = Date()
        kill(w1.processIdentifier, signal)
        // Attempts dispatched from here on (give the drain message 0.3 s to arrive) must not go to w1.
        usleep(300_000)
        let lastBefore = try LineageStore.readRows(path: db, "SELECT coalesce(max(id), 0) AS id FROM attempt").first?["id"] ?? "0"
        w1.waitUntilExit()
        #expect(w1.terminationReason == .exit && w1.terminationStatus == 0, "w1 ended with \(w1.terminationStatus)")
        print("drain: w1 exited \(String(format: "%.1f", Date().timeIntervalSince(t0))) s after signal \(signal)")
        submit.waitUntilExit()
        #expect(submit.terminationStatus == 0)
        // The render w1 had in flight finished there and counted.
        for id in busy {
            let row = try LineageStore.readRows(path: db, "SELECT state FROM attempt WHERE id = ?", [Int64(id)!])
            #expect(row.first?["state"] == "succeeded", "attempt \(id) on w1: \(row)")
        }
        // After SIGTERM w1 took no new work.
        let later = try LineageStore.readRows(path: db, "SELECT count(*) AS n FROM attempt WHERE worker_id = 'w1' AND id > ?", [Int64(lastBefore)!])
        #expect(later.first?["n"] == "0", "w1 was given work while draining")
        let lost = try LineageStore.readRows(path: db, "SELECT count(*) AS n FROM attempt WHERE state = 'lost'")
        #expect(lost.first?["n"] == "0", "a drained worker's attempts must not be lost")
        try ClusterTests.expectOneSuccessPerStage(db, run: 1)
        let worker = try LineageStore.readRows(path: db, "SELECT state FROM worker WHERE id = 'w1'")
        #expect(worker.first?["state"] == "gone", "\(worker)")
        #expect(try String(contentsOfFile: procs.log("w1"), encoding: .utf8).contains("draining"))
    }

    @Test func pastTheDrainTimeoutUnfinishedStagesAreHandedBackAtOnce() throws {
        let dir = temporaryDirectory("drain-timeout")
        let (procs, submit, busy) = try Self.renderUntilW1IsBusy(dir, w1Args: ["--drain-timeout", "0"])
        defer { procs.stopAll() }
        #expect(!busy.isEmpty, "w1 never started a render")
        let w1 = try #require(procs.process("w1"))
        let t0 = Date()
        kill(w1.processIdentifier, SIGTERM)
        w1.waitUntilExit()
        let seconds = Date().timeIntervalSince(t0)
        #expect(w1.terminationReason == .exit && w1.terminationStatus == 0)
        // Handed back, not left for the coordinator's liveness timeout (5 s) to notice.
        #expect(seconds < 4, "w1 took \(seconds) s to leave")
        submit.waitUntilExit()
        #expect(submit.terminationStatus == 0)
        let db = dir + "/coord/lineage.db"
        for id in busy {
            let row = try LineageStore.readRows(path: db, "SELECT state FROM attempt WHERE id = ?", [Int64(id)!])
            #expect(row.first?["state"] == "handed_back", "attempt \(id) on w1: \(row)")
        }
        let lost = try LineageStore.readRows(path: db, "SELECT count(*) AS n FROM attempt WHERE state = 'lost'")
        #expect(lost.first?["n"] == "0")
        try ClusterTests.expectOneSuccessPerStage(db, run: 1)
        // `coord status` says why those stages took a second attempt (it listed failed and lost
        // attempts only), from the coordinator and from its state folder alike.
        for from in [["--coordinator", try procs.endpoint(of: "coord")], ["--state", dir + "/coord"]] {
            let status = try run(coordPath, ["status", "1"] + from, timeout: 30)
            #expect(status.status == 0 && status.out.contains("attempt 1 on w1: handed back by its worker, which was leaving (not a failure)"),
                    "\(from[0]): \(status.out)\(status.err)")
            #expect(!status.out.contains("✗"), "nothing failed: \(status.out)")
        }
    }

    /// A coordinator stopped while a dashboard page is open (its live event stream) drains at once,
    /// the dashboard answering /readyz 503 meanwhile, and the stream ends when it leaves. Before,
    /// the open stream held the service group's stop: the coordinator began its drain 25 s after
    /// SIGTERM, dispatching work and saying ready all that time.
    @Test func anOpenDashboardDoesNotHoldTheCoordinatorsStop() throws {
        let dir = temporaryDirectory("drain-dashboard")
        let (procs, submit, busy) = try Self.renderUntilW1IsBusy(dir, serveArgs: ["--http", "127.0.0.1:0"])
        defer { procs.stopAll() }
        #expect(!busy.isEmpty, "w1 never started a render")
        let base = try DashboardTests.dashboardURL(procs, "coord")
        let events = try procs.start("events", "/usr/bin/curl", ["-s", "-N", base + "/api/events"])
        let streamed = { (try? String(contentsOfFile: procs.out("events"), encoding: .utf8)) ?? "" }
        try #require(waitUntil(timeout: 10) { streamed().contains("event: change") }, "the event stream never opened: \(streamed())")
        let coord = try #require(procs.process("coord"))
        let said = { (try? String(contentsOfFile: procs.log("coord"), encoding: .utf8)) ?? "" }
        let t0 = Date()
        kill(coord.processIdentifier, SIGTERM)
        let began = waitUntil(timeout: 3) { said().contains("stopping: no new work") }
        #expect(began, "the drain did not begin within 3 s: \(said())")
        if began { print("coordinator drain began \(String(format: "%.2f", Date().timeIntervalSince(t0))) s after SIGTERM, a dashboard stream open") }
        var ready: DashboardTests.Answer?
        #expect(waitUntil(timeout: 3) { ready = try? DashboardTests.get(base, "/readyz"); return ready?.status == 503 },
                "while draining: \(ready?.status ?? 0) \(ready.map { String(decoding: $0.body, as: UTF8.self) } ?? "")")
        #expect(ready.map { String(decoding: $0.body, as: UTF8.self) }?.contains("draining") == true)
        try #require(waitUntil(timeout: 90) { !coord.isRunning }, "the coordinator did not stop")
        #expect(coord.terminationStatus == 0, "\(said())")
        #expect(waitUntil(timeout: 5) { !events.isRunning }, "the event stream outlived the server")
        _ = submit
    }

    /// The whole farm stopped at once (`docker compose down`, a host shutting down): the
    /// coordinator hands back what runs; a draining worker then has nothing to deliver and leaves
    /// with it. Before, it waited its whole --drain-timeout (60 s) for the acknowledgement of a
    /// cancelled attempt's result, and the stop took a minute. Or the worker is stopped a moment
    /// after the coordinator, whose renders it was told to go on with (`stopping`): it leaves at
    /// once too, the coordinator being gone.
    @Test(arguments: [0.0, 1.0])
    func aWorkerStoppedWithItsCoordinatorLeavesWithIt(after: Double) throws {
        let dir = temporaryDirectory("drain-together")
        let (procs, submit, busy) = try Self.renderUntilW1IsBusy(dir, serveArgs: ["--drain-timeout", "0"])
        defer { procs.stopAll() }
        #expect(!busy.isEmpty, "w1 never started a render")
        let coord = try #require(procs.process("coord")), w1 = try #require(procs.process("w1"))
        kill(coord.processIdentifier, SIGTERM)
        if after > 0 { coord.waitUntilExit(); Thread.sleep(forTimeInterval: after) }
        let t0 = Date()
        kill(w1.processIdentifier, SIGTERM)
        coord.waitUntilExit()
        // (Required: a process still running has no exit status to read, and reading one ends the test process.)
        try #require(waitUntil(timeout: 30) { !w1.isRunning }, "w1 still waits for a coordinator that stopped")
        let seconds = Date().timeIntervalSince(t0)
        print("stopped together: the coordinator and w1 gone \(String(format: "%.1f", seconds)) s after SIGTERM")
        #expect(seconds < 10, "w1 took \(seconds) s to leave (its drain timeout is 60 s)")
        #expect(w1.terminationReason == .exit && w1.terminationStatus == 0)
        // The run is interrupted, not failed: it resumes when a coordinator starts on the folder again.
        let run = try LineageStore.readRows(path: dir + "/coord/lineage.db", "SELECT state FROM run WHERE id = 1")
        #expect(run.first?["state"] == "interrupted", "\(run)")
        _ = submit
    }
}
