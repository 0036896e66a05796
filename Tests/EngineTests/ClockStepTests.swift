import Foundation
import Testing
import Lineage
import TestSupport
@testable import Farm

/// The coordinator and workers time liveness, leases, backoffs, drains and durations on a clock
/// that only goes forward, not the wall clock, which NTP steps at boot on a machine without a
/// clock, an operator sets with `date -s`, and a resumed virtual machine finds hours behind.
/// libfaketime steps the wall clock of the coordinator and one worker (one host) mid-render while
/// leaving their monotonic clock alone, as such a step does.
@Suite(.serialized) struct ClockStepTests {
    static let library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
    static let available = FileManager.default.fileExists(atPath: library)
    static func have() -> Bool {
        if !available && clientsRequired { Issue.record("libfaketime is missing: scripts/test-tools should have installed it") }
        return available
    }
    static let note: Comment = "needs libfaketime (Debian's libfaketime): run scripts/test-tools"

    /// A render on `coord serve` with two workers, w1 busy on a stage, on a host whose wall clock
    /// follows the offset in `offsetFile` (read at every look at the clock). `db`: its lineage.
    /// `seconds`: each item's length (a longer one keeps w1's stage running through a kill).
    static func start(_ dir: String, seconds: Double = 2) throws -> (procs: ServiceProcesses, submit: Process, busy: [String], offsetFile: String, db: String) {
        let offsetFile = dir + "-clock"
        try "+0\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        let (procs, submit, busy) = try DrainTests.renderUntilW1IsBusy(dir, environment: steppable(offsetFile), seconds: seconds)
        #expect(!busy.isEmpty, "w1 never started a render")
        return (procs, submit, busy, offsetFile, dir + "/coord/lineage.db")
    }

    /// libfaketime for a process, its wall clock at the offset in `offsetFile`, read each time.
    static func steppable(_ offsetFile: String) -> [String: String] {
        ["LD_PRELOAD": library, "FAKETIME_TIMESTAMP_FILE": offsetFile, "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"]
    }

    /// A key removed from the allow-lists loses its roles within seconds after the coordinator's
    /// clock stepped back an hour; before, the lists were read again once their last reading was
    /// 2 s old by the wall clock, which then took an hour (and a dashboard token replaced in its
    /// file went on working as long, for the same reason).
    @Test(.enabled(if: have(), note))
    func aWallClockStepBackKeepsNoRemovedKeysRoles() throws {
        let dir = temporaryDirectory("clock-revoked")
        let offsetFile = dir + "-clock"
        try "+0\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        try TrustTests.removedKeyStopsItsFollower(dir, environment: Self.steppable(offsetFile)) {
            try "-1h\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
            usleep(300_000)
        }
    }

    /// A dashboard token replaced in its file stops working within seconds after the clock
    /// stepped back an hour (the file is looked at every 2 s, which the wall clock made an hour).
    @Test(.enabled(if: have(), note))
    func aWallClockStepBackKeepsNoReplacedDashboardToken() throws {
        let dir = temporaryDirectory("clock-token")
        let state = dir + "/state"
        try #require(try DashboardTests.embeddedRender(try ClusterTests.project(dir, items: 1), state: state).status == 0)
        let offsetFile = dir + "-clock"
        try "+0\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        let (old, new) = ("s3cret-" + UUID().uuidString, "r0tated-" + UUID().uuidString)
        try old.write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("dashboard", coordPath, ["dashboard", "--state", state, "--http", "0.0.0.0:0", "--token-file", dir + "/token"],
                        environment: Self.steppable(offsetFile))
        let base = try DashboardTests.dashboardURL(procs, "dashboard").replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
        let status = { (token: String) in (try? DashboardTests.get(base, "/api/runs", headers: ["Authorization: Bearer \(token)"]).status) ?? 0 }
        #expect(status(old) == 200)
        try "-1h\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        usleep(300_000)
        try new.write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        #expect(waitUntil(timeout: 8) { status(new) == 200 }, "the new token does not work")
        #expect(status(old) == 401, "the replaced token still works")
    }

    static func count(_ db: String, _ sql: String) throws -> Int {
        Int(try LineageStore.readRows(path: db, sql).first?["n"] ?? "") ?? -1
    }

    @Test(.enabled(if: have(), note))
    func aWallClockStepForwardLosesNoWorkerAndNoWork() throws {
        let (procs, submit, _, offsetFile, db) = try Self.start(temporaryDirectory("clock-forward"))
        defer { procs.stopAll() }
        let t0 = Date()
        try "+1h\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        try #require(waitUntil(timeout: 180) { !submit.isRunning }, "the run did not end")
        let seconds = Date().timeIntervalSince(t0)
        #expect(submit.terminationStatus == 0)
        // Before: "worker lost, silent for 3600.7 s", its stages in flight thrown away and redone.
        #expect(try Self.count(db, "SELECT count(*) AS n FROM attempt WHERE state = 'lost'") == 0)
        try ClusterTests.expectOneSuccessPerStage(db, run: 1)
        let serve = try String(contentsOfFile: procs.log("coord"), encoding: .utf8)
        #expect(!serve.contains("worker lost"), "\(serve.suffix(2000))")
        let w1 = try String(contentsOfFile: procs.log("w1"), encoding: .utf8)
        #expect(!w1.contains("lost the coordinator"), "\(w1.suffix(2000))")
        // The submitter is told how long the run took, not the step (3,600 s more, before).
        let report = try String(contentsOfFile: procs.out("submit"), encoding: .utf8)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(report.utf8)) as? [String: Any], "\(report)")
        let told = try #require(json["seconds"] as? Double, "\(report)")
        #expect(told < seconds + 60, "the run took \(told) s by the coordinator's account, \(seconds) s from here")
        // Lineage keeps the wall clock's times: the run ended after the step, by the calendar.
        let run = try #require(try LineageStore.readRows(path: db, "SELECT submitted_at, finished_at FROM run WHERE id = 1").first)
        let recorded = Double(run["finished_at"] ?? "")! - Double(run["submitted_at"] ?? "")!
        #expect(recorded > 3600, "lineage's times are the wall clock's: \(run)")
    }

    @Test(.enabled(if: have(), note))
    func aWallClockStepBackStillFindsAKilledWorkerLost() throws {
        // Items of 6 s: w1's stage is still rendering when it is killed 0.3 s after the step (of
        // 2 s, it sometimes finished first on a fast machine, and the check below failed).
        let (procs, submit, busy, offsetFile, db) = try Self.start(temporaryDirectory("clock-back"), seconds: 6)
        defer { procs.stopAll() }
        try "-1h\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        usleep(300_000)
        procs.signal("w1", SIGKILL)
        // Before: w1 was last heard "an hour from now" and counted as alive for that hour, its
        // stage never given to w2 (liveness is 5 s).
        try #require(waitUntil(timeout: 120) { !submit.isRunning }, "the run did not end: a killed worker was not found lost")
        #expect(submit.terminationStatus == 0)
        for id in busy {
            let row = try LineageStore.readRows(path: db, "SELECT state FROM attempt WHERE id = ?", [Int64(id)!])
            #expect(row.first?["state"] == "lost", "attempt \(id) on the killed w1: \(row)")
        }
        try ClusterTests.expectOneSuccessPerStage(db, run: 1)
    }
}

/// A worker whose clock is minutes off the coordinator's (a host without NTP): its attempts are
/// recorded on the coordinator's clock. Before, they started before they were sent and ended
/// before their run began, and the run page's chart of attempts was empty.
@Suite(.serialized) struct WorkerClockSkewTests {
    @Test(.enabled(if: ClockStepTests.have(), ClockStepTests.note), arguments: ["-5m", "+5m"])
    func aWorkersAttemptsAreRecordedOnTheCoordinatorsClock(skew: String) throws {
        let dir = temporaryDirectory("clock-skew")
        let pipeline = try ClusterTests.project(dir, items: 3, seconds: 1)
        let offsetFile = dir + "-clock"
        try "\(skew)\n".write(toFile: offsetFile, atomically: true, encoding: .utf8)
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:*", "--state", dir + "/coord", "--http", "127.0.0.1:0"])
        let ep = try procs.endpoint(of: "coord")
        let base = try DashboardTests.dashboardURL(procs, "coord")
        try procs.start("w1", workerPath, ["--connect", ep, "--pipelines", "1", "--store", dir + "/w1", "--id", "w1"],
                        environment: ClockStepTests.steppable(offsetFile))
        let r = try run(coordPath, ["submit", pipeline, "--coordinator", ep], timeout: 180)
        #expect(r.status == 0, "\(r.err)")
        let db = dir + "/coord/lineage.db"
        let row = try #require(try LineageStore.readRows(path: db, "SELECT submitted_at, finished_at FROM run WHERE id = 1").first)
        let (submitted, ended) = (Double(row["submitted_at"] ?? "")!, Double(row["finished_at"] ?? "")!)
        let attempts = try LineageStore.readRows(path: db, """
            SELECT s.name, a.dispatched_at, a.started_at, a.finished_at FROM attempt a JOIN stage s ON s.id = a.stage_id
            WHERE a.worker_id = 'w1'
            """)
        #expect(attempts.count >= 7, "\(attempts)")
        for a in attempts {
            let (sent, started, finished) = (Double(a["dispatched_at"] ?? "")!, Double(a["started_at"] ?? "")!, Double(a["finished_at"] ?? "")!)
            // Within the run, after it was sent, in order (to the quickest trip over loopback).
            #expect(started >= sent - 0.05 && finished >= started && finished <= ended + 0.05 && started >= submitted - 0.05,
                    "\(a["name"]!): sent \(sent), started \(started), finished \(finished); run \(submitted)–\(ended)")
        }
        // The coordinator's log says how far off, which way, and what to do.
        let log = try String(contentsOfFile: procs.log("coord"), encoding: .utf8)
        let side = skew.hasPrefix("-") ? "behind" : "ahead of"
        let said = try #require(log.split(separator: "\n").first { $0.contains("clock is") }, "\(log.suffix(2000))")
        #expect(said.contains("s \(side) the coordinator's") && said.contains("NTP") && said.contains("worker.id=w1"), "\(said)")
        let seconds = Double(said.components(separatedBy: "clock is ")[1].prefix { $0 != " " }) ?? 0
        #expect(abs(seconds - 300) < 1, "\(said)")
        // The farm's API and page say it too, where an operator looks.
        let workers = try JSONSerialization.jsonObject(with: DashboardTests.get(base, "/api/workers").body) as? [[String: Any]]
        let w1 = workers?.first { $0["id"] as? String == "w1" }
        let offset = try #require(w1?["clock_offset_s"] as? Double, "\(String(describing: workers))")
        #expect(abs(offset - (skew.hasPrefix("-") ? 300 : -300)) < 1, "\(offset)")
        if DashboardTests.haveChromium {
            let page = try run(DashboardTests.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "farm", base, dir], timeout: 120)
            #expect(page.out.contains("clock 5 min 0 s \(skew.hasPrefix("-") ? "behind" : "ahead")"), "\(page.out) \(page.err)")
        }
    }

    /// The least of `received − sent` is the offset to within the quickest trip; late and re-sent
    /// messages do not move it; small offsets (a synchronised farm) leave times as measured.
    @Test func theOffsetIsTheQuickestTripsAndFollowsAStep() {
        var c = WorkerClock()
        #expect(c.offset == nil && c.onCoordinatorsClock(100) == 100)
        // 300 s behind; trips of 1–40 ms; one message re-sent 20 s late.
        for (k, trip) in [0.004, 0.001, 0.040, 20.0, 0.002].enumerated() { c.observe(sent: 1000 + Double(k), received: 1300 + Double(k) + trip) }
        #expect(abs(c.offset! - 300.001) < 1e-9)
        #expect(abs(c.onCoordinatorsClock(1010) - 1310.001) < 1e-9)
        #expect(c.shouldTell() != nil && c.shouldTell() == nil, "said once")
        // Its clock then steps back 300 s (NTP found it): after a window of messages, in sync.
        for k in 0..<WorkerClock.window { c.observe(sent: 1400 + Double(k), received: 1400 + Double(k) + 0.001) }
        #expect(abs(c.offset! - 0.001) < 1e-9)
        #expect(c.onCoordinatorsClock(1500) == 1500, "a millisecond is a synchronised farm's: times as measured")
        // Nonsense stamps are not measures.
        c.observe(sent: .nan, received: 1); c.observe(sent: 0, received: 1)
        #expect(abs(c.offset! - 0.001) < 1e-9)
    }
}
