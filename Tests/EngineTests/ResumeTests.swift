import Foundation
import Testing
import ThreadlineCore
import Lineage
import TestSupport

/// A coordinator killed with SIGKILL at any point: the same `coord submit` continues the run.
@Suite(.serialized) struct ResumeTests {
    static let media: String = {
        let dir = temporaryDirectory("resume-media")
        for i in 0..<8 { try? Generate.clip(dir + "/c\(i).mp4", width: 1280, height: 720, fps: "30", seconds: 2, tone: 250 + Double(i) * 40) }
        return dir
    }()

    static func project(_ dir: String) throws {
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "1280x720", clips: (0..<8).map { "video: \(media)/c\($0).mp4" })
    }

    static func md5(_ file: String, _ stream: String) throws -> String {
        let r = try run("ffmpeg", ["-v", "error", "-i", file, "-map", "0:\(stream)", "-f", "md5", "-"])
        return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static let reference: (video: String, audio: String) = {
        let dir = temporaryDirectory("resume-ref")
        try? project(dir)
        _ = try? run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 300)
        return ((try? md5(dir + "/out.mp4", "v")) ?? "", (try? md5(dir + "/out.mp4", "a")) ?? "")
    }()

    @Test(arguments: ["fetch", "encode", "concat"])
    func killedCoordinatorResumesWithoutRedoingWork(_ point: String) throws {
        let dir = temporaryDirectory("resume-\(point)")
        try Self.project(dir)
        let db = dir + "/state/lineage.db"
        let condition: String
        switch point {
        case "fetch": condition = "SELECT count(*) AS n FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.kind = 'fetch'"
        case "encode": condition = "SELECT count(*) AS n FROM stage WHERE kind = 'encode' AND state = 'succeeded' HAVING count(*) >= 3"
        default: condition = "SELECT count(*) AS n FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.kind = 'concat' AND a.state = 'running'"
        }
        let p = try startQuietly(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"])
        var killed = false
        var workers: [Int32] = []
        let deadline = Date().addingTimeInterval(120)
        while p.isRunning && Date() < deadline {
            if FileManager.default.fileExists(atPath: db),
               let n = try? LineageStore.readRows(path: db, condition).first?["n"], (Int(n) ?? 0) > 0 {
                workers = childProcesses(of: p.processIdentifier)
                kill(p.processIdentifier, SIGKILL)
                killed = true
                break
            }
            usleep(5_000)
        }
        p.waitUntilExit()
        #expect(killed, "the render finished before reaching \(point)")
        // The workers follow their coordinator down (no orphans left polling). A worker killed
        // while still loading its libraries gets there only once loaded, seconds on a loaded
        // machine; and one that has exited may stay a zombie until its new parent reaps it.
        let alive = { (pid: Int32) -> Bool in
            kill(pid, 0) == 0 && !(((try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? "").split(separator: ")").last?
                .trimmingCharacters(in: .whitespaces).hasPrefix("Z") ?? false)
        }
        let gone = Date().addingTimeInterval(10)
        while workers.contains(where: alive) && Date() < gone { usleep(20_000) }
        #expect(!workers.isEmpty && !workers.contains(where: alive), "orphaned workers: \(workers.filter(alive))")
        // Submitting the same pipeline again continues the interrupted run.
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2", "--json"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        let runs = try LineageStore.readRows(path: db, "SELECT id, state, duration_s FROM v_runs")
        #expect(runs.count == 1 && runs[0]["state"] == "succeeded", "\(runs)")
        // The seconds it reports are the run's whole duration, as lineage counts it (the time
        // before the kill too), not only what it took after the resume.
        let reported = (try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])?["seconds"] as? Double
        let recorded = runs.first?["duration_s"].flatMap(Double.init)
        #expect(reported != nil && recorded != nil && abs(reported! - recorded!) < 0.25, "reported \(String(describing: reported)) s, lineage \(String(describing: recorded)) s")
        let twice = try LineageStore.readRows(path: db, "SELECT stage_id FROM attempt WHERE state = 'succeeded' GROUP BY stage_id HAVING count(*) > 1")
        #expect(twice.isEmpty, "stages executed twice: \(twice)")
        if killed && point != "fetch" {
            let lost = try LineageStore.readRows(path: db, "SELECT count(*) AS n FROM attempt WHERE state = 'lost'")
            #expect(Int(lost[0]["n"]!)! >= 1)
        }
        #expect(try Self.md5(dir + "/out.mp4", "v") == Self.reference.video)
        #expect(try Self.md5(dir + "/out.mp4", "a") == Self.reference.audio)
    }
}
