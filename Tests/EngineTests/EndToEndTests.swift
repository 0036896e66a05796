import Foundation
import Testing
import Logging
@testable import Engine
@testable import Farm
import ThreadlineCore
import Media
import Lineage
import TestSupport

/// The real binaries on real (generated or corpus) files.
@Suite(.serialized) struct EndToEndTests {
    @Test(arguments: [
        ("output: { path: o.mp4\nclips: [", "invalid YAML"),
        ("output: { path: o.mp4 }\nclips:\n  - video: clip.mp4\n    trimm: { start: 1 }\n", "p.yaml:4:5: error: unknown key 'trimm'"),
        ("output: { path: o.mp4, fps: fast }\nclips:\n  - video: clip.mp4\n", "p.yaml:1:29: error: output.fps"),
        ("output: { path: o.mp4 }\nclips:\n  - video: missing.mp4\n", "p.yaml:3:12: error: file not found"),
    ])
    func malformedPipelineFailsBeforeAnyWork(_ yaml: String, _ expected: String) throws {
        let dir = temporaryDirectory("bad")
        FileManager.default.createFile(atPath: dir + "/clip.mp4", contents: Data([1]))
        try yaml.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 60)
        #expect(r.status != 0)
        #expect(r.err.contains(expected), "stderr: \(r.err)")
        #expect(r.err.contains(dir + "/p.yaml:"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/state"), "no work may start")
    }

    /// 12 clips: portrait (display matrix) and landscape, 30 and 60 fps, VFR, odd sizes, all with
    /// one continuous tone so a gap at any join would show as silence.
    static func makeTwelveClips(_ dir: String) throws -> [String] {
        var clips: [String] = []
        let specs: [(Int, Int, String, Double, Int?, Bool)] = [
            (640, 360, "30", 1.0, nil, false), (640, 360, "60", 1.2, 90, false), (360, 640, "30", 0.8, nil, false),
            (161, 121, "30", 1.0, nil, false), (640, 360, "30", 1.3, nil, true), (480, 480, "60", 0.9, 270, false),
            (320, 240, "25", 1.2, nil, false), (640, 360, "60", 1.0, 180, false), (199, 301, "30", 0.7, nil, false),
            (640, 360, "30", 1.5, nil, true), (320, 180, "24", 1.0, 90, false), (640, 360, "30", 1.0, nil, false),
        ]
        for (i, s) in specs.enumerated() {
            let path = dir + "/clip\(i).mp4"
            try Generate.clip(path, width: s.0, height: s.1, fps: s.2, seconds: s.3, tone: 440, rotation: s.4, vfr: s.5)
            clips.append("video: clip\(i).mp4" + (i == 3 ? "\n    trim: { start: 0.2, end: 0.9 }" : "") + (i == 6 ? "\n    volume: 0.8" : ""))
        }
        return clips
    }

    /// `coord plan` names every item it cannot use at once, in file order, each with its
    /// pipeline line, as a failed run does: a file that is not media, and a clip whose file
    /// opens but whose trim starts past its end. Exit 1 (a file did not open).
    @Test func planNamesEveryUnusableItemAtOnce() throws {
        let dir = temporaryDirectory("plan-errors")
        try Generate.clip(dir + "/good.mp4", width: 160, height: 90, seconds: 1)
        try "not a video".write(toFile: dir + "/notes.mp4", atomically: true, encoding: .utf8)
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", clips: [
            "video: good.mp4", "video: notes.mp4", "video: good.mp4\n    trim: { start: 5 }",
        ])
        let r = try run(coordPath, ["plan", dir + "/p.yaml"], timeout: 60)
        #expect(r.status == 1, "\(r.err)")
        let errors = r.err.split(separator: "\n").filter { $0.contains("error:") }
        #expect(errors.count == 2, "\(r.err)")
        #expect(errors.first?.contains("p.yaml:") == true && errors.first?.contains("notes.mp4") == true, "\(r.err)")
        #expect(errors.last?.contains("trim.start 5.000 s is at or past the end") == true, "\(r.err)")
    }

    @Test func twelveClipMixedProjectIsExactAndGapless() throws {
        let dir = temporaryDirectory("twelve")
        let clips = try Self.makeTwelveClips(dir)
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "640x360", fps: 30, clips: clips)
        let plan = try run(coordPath, ["plan", dir + "/p.yaml", "--json"], timeout: 60)
        #expect(plan.status == 0, "\(plan.err)")
        let planned = try JSONDecoder().decode(Plan.self, from: Data(plan.out.utf8))
        let frames = try #require(planned.totalFrames)
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 0, "stderr: \(r.err)")
        #expect(r.out.contains(dir + "/out.mp4"))
        let p = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(p.frames == frames)
        #expect(abs(p.duration - Double(frames) / 30) <= 1.0 / 30, "duration \(p.duration), planned \(Double(frames) / 30)")
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
        #expect(p.sampleRate == 48000 && p.channels == 2)
        let silence = longestSilenceMs(try decodeAudio(dir + "/out.mp4"))
        #expect(silence < 5, "longest silent run \(silence) ms")
    }

    @Test func killingAWorkerMidRenderStillCompletes() throws {
        let dir = temporaryDirectory("kill")
        var clips: [String] = []
        for i in 0..<8 {
            // Distinct clips (their tones differ): identical ones share a segment key, and all but
            // one would wait for that one render, leaving the other worker idle.
            try Generate.clip(dir + "/c\(i).mp4", width: 1280, height: 720, fps: "30", seconds: 2, tone: Double(330 + 20 * i))
            clips.append("video: c\(i).mp4")
        }
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "1280x720", clips: clips)
        let p = try startQuietly(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"])
        // Wait until a worker is busy rendering, then SIGKILL it.
        var killed: Int32? = nil
        let deadline = Date().addingTimeInterval(30)
        while killed == nil && Date() < deadline && p.isRunning {
            usleep(100_000)
            let busy = try? run("sh", ["-c", "ls \(dir)/state/tmp 2>/dev/null | grep -c mov"])
            if let busy, Int(busy.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 0,
               let worker = childProcesses(of: p.processIdentifier).first {
                kill(worker, SIGKILL)
                killed = worker
            }
        }
        #expect(killed != nil, "no worker was seen rendering")
        let end = Date().addingTimeInterval(240)
        while p.isRunning && Date() < end { usleep(50_000) }
        if p.isRunning { p.terminate() }
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        let probe = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(probe.frames == 8 * 60)
        // Lineage shows the attempt lost with the worker, and one success per stage.
        let db = try Lineage.LineageStore(path: dir + "/state/lineage.db")
        let lost = try db.rows("SELECT count(*) AS n FROM attempt WHERE state = 'lost'")
        #expect(Int(lost[0]["n"]!)! >= 1)
        let doubles = try db.rows("SELECT stage_id FROM attempt WHERE state = 'succeeded' GROUP BY stage_id HAVING count(*) > 1")
        #expect(doubles.isEmpty)
    }

    @Test(.enabled(if: sharedMedia != nil, "../shared/media is absent: broken-file test skipped"))
    func brokenFilesFailClearlyAndTheClusterStaysUp() throws {
        let dir = temporaryDirectory("broken")
        try Generate.clip(dir + "/good.mp4", width: 320, height: 240, seconds: 0.5)
        var logger = Logger(label: "test"); logger.logLevel = .critical
        let cluster = try LocalCluster(.init(stateDirectory: dir + "/state", workers: 2, pipelinesPerWorker: 1,
                                             workerExecutable: workerPath), logger: logger)
        try cluster.start()
        defer { cluster.shutdown() }
        usleep(300_000)
        let workersBefore = Set(cluster.workerPIDs)
        for entry in CorpusEntry.broken {
            let path = sharedMedia! + "/" + entry.path
            let yaml = "output: { path: \(dir)/out.mp4, size: 320x240 }\nclips:\n  - video: \(dir)/good.mp4\n  - video: \"\(path)\"\n"
            let message: String
            do {
                // An empty file is refused as the pipeline loads; the others fail in the cluster.
                let pipeline = try PipelineLoader.parse(text: yaml, file: "broken.yaml", baseDirectory: dir)
                let started = Date()
                let (_, outcome) = try cluster.render(pipeline)
                #expect(Date().timeIntervalSince(started) < 60, "\(entry.path) took too long")
                guard case .failed(let m, _) = outcome else { Issue.record("\(entry.path) rendered but is broken"); continue }
                message = m
            } catch let e as PipelineError {
                message = e.description
            }
            let name = (entry.path as NSString).lastPathComponent
            #expect(message.contains(name), "message does not name the file: \(message)")
            #expect(message.contains("broken.yaml:4:"), "message does not point into the pipeline: \(message)")
            print("broken \(entry.path): \(message)")
        }
        #expect(Set(cluster.workerPIDs) == workersBefore, "a worker died on broken input")
        // The same coordinator and workers render the next project.
        let good = try PipelineLoader.parse(text: "output: { path: \(dir)/ok.mp4, size: 320x240 }\nclips:\n  - video: \(dir)/good.mp4\n",
                                            file: "good.yaml", baseDirectory: dir)
        let (_, outcome) = try cluster.render(good)
        guard case .succeeded = outcome else { Issue.record("good project failed after broken ones: \(outcome)"); return }
    }
}

extension EndToEndTests {
    /// A cached run can end before every local worker has loaded its libraries and joined. Such
    /// a worker holds no work and hears nothing from the stopped coordinator, so stopping the
    /// cluster waited the whole 3 s for it to leave (a cached `coord submit` took 4.2 s instead
    /// of 0.2 s now and then), and such a worker, told to stop, waited a second more for its
    /// last message to reach nobody. Both are at once now.
    @Test func aWorkerStillStartingDoesNotHoldTheClustersStop() throws {
        let dir = temporaryDirectory("slow-start")
        try Generate.clip(dir + "/c.mp4", width: 320, height: 240, seconds: 0.5)
        let pipeline = try PipelineLoader.parse(text: "output: { path: \(dir)/out.mp4, size: 320x240 }\nclips:\n  - video: \(dir)/c.mp4\n",
                                                file: "p.yaml", baseDirectory: dir)
        let script = dir + "/worker.sh"
        // The second worker process is a real worker that never reaches the coordinator (its
        // endpoint goes nowhere), as one still loading its libraries when the run ends.
        try "#!/bin/sh\nmkdir \"\(dir)/first\" 2>/dev/null && exec \"\(workerPath)\" \"$@\"\nexec \"\(workerPath)\" \"$@\" --connect ipc://\(dir)/nobody\n"
            .write(toFile: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script)
        var logger = Logger(label: "test"); logger.logLevel = .critical
        let cluster = try LocalCluster(.init(stateDirectory: dir + "/state", workers: 2, pipelinesPerWorker: 1, workerExecutable: script), logger: logger)
        try cluster.start()
        let (_, outcome) = try cluster.render(pipeline)
        guard case .succeeded = outcome else { Issue.record("\(outcome)"); cluster.shutdown(); return }
        let t0 = Date()
        cluster.shutdown()
        let stop = Date().timeIntervalSince(t0)
        print(String(format: "slow-start: the cluster stopped in %.3f s", stop))
        #expect(stop < 0.8, "stopping the cluster took \(stop) s (3 s and more: it waited for the worker that never joined; 1 s: that worker's last message)")
        #expect(cluster.workerPIDs.allSatisfy { kill($0, 0) != 0 }, "every worker process is gone")
    }
}

/// PIDs whose parent is `pid`.
func childProcesses(of pid: Int32) -> [Int32] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    return entries.compactMap { Int32($0) }.filter { child in
        guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 2 && Int32(fields[1]) == pid
    }
}

/// Broken entries of the shared corpus manifest.
struct CorpusEntry {
    var path: String
    static let broken: [CorpusEntry] = {
        guard let dir = sharedMedia, let data = FileManager.default.contents(atPath: dir + "/manifest.json"),
              let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { return [] }
        return list.filter { $0["broken"] as? Bool == true }.map { CorpusEntry(path: $0["path"] as! String) }
    }()
}
