import Foundation
import Testing
import GRDB
import TestSupport

/// A lineage write that fails is not ignored: the coordinator logs it with what it was recording,
/// stops, and the submit fails with that reason instead of rendering on with a false record.
@Suite struct LineageFailureTests {
    @Test func aFailedLineageWriteStopsTheCoordinatorWithItsReason() throws {
        let dir = temporaryDirectory("lineage-failure")
        try Generate.clip(dir + "/c.mp4", width: 160, height: 90, seconds: 0.4, tone: nil)
        try writePipeline(dir + "/p.yaml", output: dir + "/o.mp4", size: "160x90", clips: ["video: c.mp4"])
        let first = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        #expect(first.status == 0, "\(first.err)")
        // Every later record of a worker joining fails, as a full disk or a broken file would.
        let db = try DatabaseQueue(path: dir + "/state/lineage.db")
        try db.write { try $0.execute(sql: "CREATE TRIGGER broken BEFORE INSERT ON worker BEGIN SELECT RAISE(ABORT, 'disk on fire'); END") }
        try db.close()
        try FileManager.default.removeItem(atPath: dir + "/o.mp4")
        let t0 = Date()
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 60)
        #expect(r.status == 1)
        #expect(r.err.contains("lineage write 'workerSeen' failed") && r.err.contains("disk on fire"), "\(r.err)")
        #expect(Date().timeIntervalSince(t0) < 30)
        #expect(!FileManager.default.fileExists(atPath: dir + "/o.mp4"))
    }

    /// A project of a batch whose movie is written but whose run's end cannot be recorded: the
    /// batch fails saying so and how long it took (before: 0.0 s, read from a record never
    /// written), and submitting again renders nothing of it again.
    @Test func aProjectWhoseEndCannotBeRecordedSaysSoAndResumesWithoutRendering() throws {
        let dir = temporaryDirectory("lineage-failure-end")
        try Generate.clip(dir + "/c.mp4", width: 160, height: 90, seconds: 0.4, tone: nil)
        try writePipeline(dir + "/a.yaml", output: dir + "/a.mp4", size: "160x90", clips: ["video: c.mp4"])
        try writePipeline(dir + "/b.yaml", output: dir + "/b.mp4", size: "160x90", clips: ["video: c.mp4", "title: { text: b, duration: 0.5 }"])
        #expect(try run(coordPath, ["submit", dir + "/a.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120).status == 0)
        // Recording b's good end fails, as a full disk or a broken file would fail it.
        let db = try DatabaseQueue(path: dir + "/state/lineage.db")
        try db.write {
            try $0.execute(sql: "CREATE TRIGGER broken BEFORE UPDATE OF state ON run WHEN NEW.state = 'succeeded' AND OLD.output_path LIKE '%/b.mp4' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
        }
        let r = try run(coordPath, ["submit", dir + "/a.yaml", dir + "/b.yaml", "--state", dir + "/state", "--workers", "1", "--json"], timeout: 120)
        #expect(r.status == 1, "\(r.err)")
        let objects = r.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let b = try #require(objects.first { $0["file"] as? String == dir + "/b.yaml" }, "\(r.out)")
        let error = b["error"] as? String ?? ""
        #expect(b["state"] as? String == "failed")
        #expect(error.contains("the movie was written to \(dir)/b.mp4, but its run could not be recorded") && error.contains("disk on fire")
                && error.hasSuffix("then submit again: nothing is rendered again"), "\(error)")
        #expect((b["seconds"] as? Double ?? 0) > 0, "\(b)")
        #expect(FileManager.default.fileExists(atPath: dir + "/b.mp4"))
        let runID = try #require(b["run"] as? Int)
        let rendered = "SELECT count(*) FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ? AND a.state = 'succeeded'"
        let before = try db.read { try Int.fetchOne($0, sql: rendered, arguments: [runID]) }
        try db.write { try $0.execute(sql: "DROP TRIGGER broken") }
        try db.close()
        let again = try run(coordPath, ["submit", dir + "/a.yaml", dir + "/b.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        #expect(again.status == 0, "\(again.err)")
        let after = try DatabaseQueue(path: dir + "/state/lineage.db")
        #expect(try after.read { try String.fetchOne($0, sql: "SELECT state FROM run WHERE id = ?", arguments: [runID]) } == "succeeded")
        #expect(try after.read { try Int.fetchOne($0, sql: rendered, arguments: [runID]) } == before, "b's run rendered again")
        try after.close()
    }

    /// A submission whose run cannot be recorded (the run's rows refused: a full disk, a broken
    /// file, a submission too big for SQLite) is refused alone, in plain words: what failed, on
    /// which database, what to do; no SQL, no "error: error:", no "run ?". The rest of the batch
    /// renders, and `coord serve` goes on serving (the rows were one savepoint: nothing is left).
    @Test func aSubmissionWhoseRunCannotBeRecordedIsRefusedInPlainWords() throws {
        let dir = temporaryDirectory("lineage-failure-submit")
        try Generate.clip(dir + "/c.mp4", width: 160, height: 90, seconds: 0.4, tone: nil)
        try writePipeline(dir + "/a.yaml", output: dir + "/a.mp4", size: "160x90", clips: ["video: c.mp4"])
        try writePipeline(dir + "/b.yaml", output: dir + "/b.mp4", size: "160x90", clips: ["video: c.mp4", "title: { text: b, duration: 0.5 }"])
        let refuseB = "CREATE TRIGGER broken BEFORE INSERT ON run WHEN NEW.output_path LIKE '%/b.mp4' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
        let plain = { (text: String) in
            text.contains("the run could not be recorded in the lineage database") && text.contains("SQLite error 19: disk on fire")
                && text.contains("check that database and its disk, then submit again")
                && !text.contains("while executing") && !text.contains("error: error") && !text.contains(": error:") && !text.contains("run ?")
        }
        // Local: a renders, b is refused.
        #expect(try run(coordPath, ["submit", dir + "/a.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120).status == 0)
        try FileManager.default.removeItem(atPath: dir + "/a.mp4")
        #expect(try run("sqlite3", [dir + "/state/lineage.db", refuseB], timeout: 30).status == 0)
        let batch = try run(coordPath, ["submit", dir + "/a.yaml", dir + "/b.yaml", "--state", dir + "/state", "--workers", "1", "--json"], timeout: 120)
        #expect(batch.status == 1, "\(batch.err)")
        let objects = batch.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let a = objects.first { $0["file"] as? String == dir + "/a.yaml" }, b = objects.first { $0["file"] as? String == dir + "/b.yaml" }
        #expect(a?["state"] as? String == "succeeded" && FileManager.default.fileExists(atPath: dir + "/a.mp4"), "\(batch.out)")
        #expect(b?["state"] as? String == "refused" && plain(b?["error"] as? String ?? ""), "\(batch.out)")
        // Its progress says so when it happens, and the batch's count reaches 2/2.
        let told = batch.err.split(separator: "\n").first { $0.contains(": refused: ") }.map(String.init) ?? ""
        #expect(told.contains("b.yaml") && plain(told), "\(batch.err)")
        #expect(batch.err.contains("[2/2] "), "\(batch.err)")
        let one = try run(coordPath, ["submit", dir + "/b.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        let said = one.err.split(separator: "\n").filter { !$0.hasPrefix("20") }.joined(separator: "\n")  // (its log lines keep the SQL)
        #expect(one.status == 1 && said.contains("error: test was refused: the run could not be recorded") && plain(said), "\(one.err)")
        // On a terminal, the batch's total line counts it as refused, not failed.
        let command = [coordPath, "submit", dir + "/a.yaml", dir + "/b.yaml", "--state", dir + "/state", "--workers", "1"].joined(separator: " ")
        let tty = try run("/usr/bin/script", ["-q", "-e", "-c", command, "/dev/null"], timeout: 120)
        #expect(tty.status == 1 && tty.out.contains("2/2 projects done (1 refused)") && !tty.out.contains("failed)"), "\(tty.out)")

        // Remote: refused, and the farm goes on.
        let farm = temporaryDirectory("lineage-failure-farm")
        let (procs, ep) = try ClusterTests.loopbackCluster(farm, workers: 1)
        defer { procs.stopAll() }
        #expect(try run("sqlite3", [farm + "/coord/lineage.db", refuseB], timeout: 30).status == 0)
        let remote = try run(coordPath, ["submit", dir + "/b.yaml", "--coordinator", ep], timeout: 120)
        #expect(remote.status == 1 && remote.err.contains("the coordinator refused: the run could not be recorded") && plain(remote.err), "\(remote.err)")
        #expect(procs.process("coord")?.isRunning == true, "coord serve stopped")
        // A batch: a renders; b is refused, and the summary counts it apart from the failed ones.
        try FileManager.default.removeItem(atPath: dir + "/a.mp4")
        let next = try run(coordPath, ["submit", dir + "/a.yaml", dir + "/b.yaml", "--coordinator", ep], timeout: 120)
        #expect(next.status == 1 && FileManager.default.fileExists(atPath: dir + "/a.mp4"), "\(next.err)")
        let row = next.out.split(separator: "\n").first { $0.contains("b.yaml") }.map(String.init) ?? ""
        #expect(row.contains("  refused  ") && plain(row), "\(next.out)")
        #expect(next.out.contains(": 1 succeeded, 0 failed, 1 refused"), "\(next.out)")
    }
}
