import Foundation
import Testing
import Lineage
import TestSupport

/// Ctrl-C on `coord submit`, typed into a real terminal (tmux send-keys): the local cluster stops,
/// the runs are recorded as interrupted with their in-flight attempts lost, the resume command is
/// printed, the exit status is 130, and submitting again resumes.
@Suite struct InterruptTests {
    /// Three small projects in `dir`; their pipeline files.
    static func projects(_ dir: String) throws -> [String] {
        var files: [String] = []
        for k in 1...3 {
            try Generate.clip(dir + "/c\(k).mp4", width: 640, height: 360, seconds: 4, tone: Double(300 + 60 * k))
            let y = "version: 1\nname: holiday-\(k)\noutput: { path: out/p\(k).mp4, size: 640x360, fps: 30 }\nclips:\n  - video: c\(k).mp4\n  - video: c\(k).mp4\n    trim: { start: 1 }\n"
            try y.write(toFile: dir + "/p\(k).yaml", atomically: true, encoding: .utf8)
            files.append(dir + "/p\(k).yaml")
        }
        return files
    }

    /// Waits until lineage shows a render in flight (the moment to interrupt).
    static func waitForARender(_ db: String) {
        let rendering = waitUntil(timeout: 60) {
            FileManager.default.fileExists(atPath: db)
                && ((try? LineageStore.readRows(path: db, """
                    SELECT count(*) AS n FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.kind = 'decode' AND a.state = 'running'
                    """).first?["n"]).flatMap { $0.flatMap { Int($0) } } ?? 0) > 0
        }
        #expect(rendering, "no render was seen in flight")
    }

    /// What an interrupted submit must leave: runs interrupted (or done), no attempt running, some lost.
    static func expectRecordedAsInterrupted(_ db: String) throws -> [[String: String?]] {
        let runs = try LineageStore.readRows(path: db, "SELECT id, state FROM run ORDER BY id")
        #expect(runs.count == 3 && runs.allSatisfy { $0["state"] == "interrupted" || $0["state"] == "succeeded" }, "\(runs)")
        #expect(runs.contains { $0["state"] == "interrupted" })
        let running = try LineageStore.readRows(path: db, "SELECT count(*) AS n FROM attempt WHERE state = 'running'")
        #expect(running.first?["n"] == "0", "attempts left running: \(running)")
        let lost = try LineageStore.readRows(path: db, "SELECT count(*) AS n FROM attempt WHERE state = 'lost'")
        #expect((Int(lost.first?["n"] ?? "0") ?? 0) >= 1)
        return runs
    }

    @Test func ctrlCRecordsInterruptedRunsAndResubmitResumes() throws {
        let dir = temporaryDirectory("ctrl-c")
        let files = try Self.projects(dir)
        let command = ([coordPath, "submit"] + files + ["--state", dir + "/state", "--workers", "2"]).joined(separator: " ")
        guard let terminal = try TerminalSession(command) else {
            print("skipped: tmux is not installed (scripts/setup installs it)"); return
        }
        let db = dir + "/state/lineage.db"
        // Interrupt while a render is in flight.
        Self.waitForARender(db)
        try terminal.sendKeys("C-c")
        let (ended, pane) = terminal.waitForExit(timeout: 30)
        #expect(ended, "coord submit did not stop: \(pane)")
        #expect(pane.contains("EXIT=130"), "\(pane)")
        #expect(pane.contains("interrupted") && pane.contains("resume with: coord submit"), "\(pane)")
        let runs = try Self.expectRecordedAsInterrupted(db)

        // Submitting again resumes the same runs.
        let again = try run(coordPath, ["submit"] + files + ["--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(again.status == 0, "\(again.err)")
        let after = try LineageStore.readRows(path: db, "SELECT id, state FROM run ORDER BY id")
        #expect(after.map { $0["id"] } == runs.map { $0["id"] } && after.allSatisfy { $0["state"] == "succeeded" }, "\(after)")
        let twice = try LineageStore.readRows(path: db, "SELECT stage_id FROM attempt WHERE state = 'succeeded' GROUP BY stage_id HAVING count(*) > 1")
        #expect(twice.isEmpty, "stages executed twice: \(twice)")
    }

    /// A hang-up (the terminal closed, an SSH session dropped: the kernel sends SIGHUP) is an
    /// interrupt too. Before, SIGHUP killed coord outright, and lineage kept the runs and their
    /// attempts `running` until the next submit on that state folder.
    @Test func aHangUpRecordsTheRunsAsInterrupted() throws {
        let dir = temporaryDirectory("hang-up")
        let files = try Self.projects(dir)
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        let submit = try procs.start("submit", coordPath, ["submit"] + files + ["--state", dir + "/state", "--workers", "2"])
        Self.waitForARender(dir + "/state/lineage.db")
        kill(submit.processIdentifier, SIGHUP)
        submit.waitUntilExit()
        let said = (try? String(contentsOfFile: procs.log("submit"), encoding: .utf8)) ?? ""
        #expect(submit.terminationStatus == 130, "\(said)")
        #expect(said.contains("recorded as interrupted") && said.contains("resume with: coord submit"), "\(said)")
        let runs = try Self.expectRecordedAsInterrupted(dir + "/state/lineage.db")
        // The resume line names the files of the projects not written, not those whose movies are.
        let resume = try #require(said.split(separator: "\n").first { $0.hasPrefix("resume with: ") }.map(String.init))
        let names = try LineageStore.readRows(path: dir + "/state/lineage.db", "SELECT name, state FROM run ORDER BY id")
        for r in names {
            guard let name = r["name"], let k = name.split(separator: "-").last else { continue }
            let named = resume.contains("/p\(k).yaml")
            #expect(named == (r["state"] != "succeeded"), "\(name) \(r["state"] ?? ""): \(resume)")
        }
        // `coord status` of one of them (one with an attempt the interrupt stopped) says how it
        // goes on, not where its movie would be.
        let stopped = try LineageStore.readRows(path: dir + "/state/lineage.db", """
            SELECT s.run_id AS id FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE a.state = 'lost' ORDER BY a.id LIMIT 1
            """).first?["id"] ?? nil
        let id = try #require(stopped, "no attempt was lost")
        #expect(runs.first { $0["id"] == id }?["state"] == "interrupted", "\(runs)")
        let status = try run(coordPath, ["status", id, "--state", dir + "/state"], timeout: 30)
        let lines = status.out.split(separator: "\n").map(String.init)
        #expect(lines.first?.contains(": interrupted, ") == true && lines.first?.contains("(no movie written to ") == true, "\(status.out)\(status.err)")
        #expect(lines.count > 1 && lines[1].hasPrefix("resume with: coord submit ") && lines[1].hasSuffix(" --state \(dir)/state"), "\(status.out)")
        // The attempts the interrupt stopped are no failure of their stages: they go out again
        // on resume. (Before: "✗ … lost — the submit was interrupted; …".)
        #expect(lines.contains { $0.hasPrefix("  ↩ ") && $0.contains(" attempt 1 on ")
                                 && $0.hasSuffix(": the submit was interrupted; submitting the pipeline again resumes the run (not a failure)") },
                "\(status.out)")
        #expect(!lines.contains { $0.hasPrefix("  ✗ ") }, "\(status.out)")
        // Nor does the dashboard list them among the run's failures or the farm's.
        let reader = try FarmReader(path: dir + "/state/lineage.db")
        let runID = try #require(Int64(id))
        let listed = try #require(try reader.run(runID)).failures, recent = try reader.recentFailures()
        #expect(listed.isEmpty && recent.isEmpty, "\(listed) \(recent)")
        // And its chart draws them as stopped, not as lost (amber, a worker's loss).
        let attempts = try reader.attempts(run: runID)
        #expect(attempts.contains { $0.state == "lost" } && attempts.allSatisfy { ($0.state == "lost") == $0.stopped },
                "\(attempts.map { "\($0.stage) \($0.state) stopped: \($0.stopped)" })")
        // Its lost attempts say how it goes on here (not that a coordinator starting resumes it,
        // as a farm's `coord serve` does).
        let lost = try LineageStore.readRows(path: dir + "/state/lineage.db", "SELECT DISTINCT error_message AS m FROM attempt WHERE state = 'lost'")
        #expect(lost.map { $0["m"] } == ["the submit was interrupted; submitting the pipeline again resumes the run"], "\(lost)")
    }

    /// A worker executable that cannot start (here: a library it needs is missing) stops the
    /// submit at once with the worker's own words, the runs recorded as interrupted; before, it
    /// was started again for ever, printing its error hundreds of times a second. With a worker
    /// that runs, submitting again resumes.
    @Test func aWorkerThatCannotStartStopsTheSubmitWithItsReason() throws {
        let dir = temporaryDirectory("worker-cannot-start")
        let files = try Self.projects(dir)
        // coord finds its worker beside its own executable: a linked coord with a broken worker.
        try FileManager.default.createDirectory(atPath: dir + "/bin", withIntermediateDirectories: true)
        if link(coordPath, dir + "/bin/coord") != 0 { try FileManager.default.copyItem(atPath: coordPath, toPath: dir + "/bin/coord") }
        let broken = "#!/bin/sh\necho 'worker: error while loading shared libraries: libavcodec.so.59: cannot open shared object file' >&2\nexit 127\n"
        try broken.write(toFile: dir + "/bin/worker", atomically: true, encoding: .utf8)
        chmod(dir + "/bin/worker", 0o755)
        let started = Date()
        let r = try run(dir + "/bin/coord", ["submit"] + files + ["--state", dir + "/state", "--workers", "2"], timeout: 60)
        #expect(r.status == 1, "\(r.err)")
        #expect(Date().timeIntervalSince(started) < 20, "it gave up at once")
        let lines = r.err.split(separator: "\n").map(String.init)
        #expect(lines.contains("error: the worker process (\(dir)/bin/worker) exited with status 127 before it could join: worker: error while loading shared libraries: libavcodec.so.59: cannot open shared object file"), "\(r.err)")
        #expect(lines.filter { $0.hasPrefix("worker: error while loading") }.count <= 2 + 3, "\(r.err)")
        #expect(r.err.contains("3 of 3 projects did not finish and are recorded as interrupted"), "\(r.err)")
        let runs = try LineageStore.readRows(path: dir + "/state/lineage.db", "SELECT state FROM run")
        #expect(runs.count == 3 && runs.allSatisfy { $0["state"] == "interrupted" }, "\(runs)")

        try FileManager.default.removeItem(atPath: dir + "/bin/worker")
        try FileManager.default.createSymbolicLink(atPath: dir + "/bin/worker", withDestinationPath: workerPath)
        let again = try run(dir + "/bin/coord", ["submit"] + files + ["--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(again.status == 0, "\(again.err)")
        let after = try LineageStore.readRows(path: dir + "/state/lineage.db", "SELECT state FROM run ORDER BY id")
        #expect(after.count == 3 && after.allSatisfy { $0["state"] == "succeeded" }, "resumed, not submitted anew: \(after)")
    }
}
