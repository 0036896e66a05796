import Foundation
import Testing
import ThreadlineCore
import TestSupport
import Lineage

/// `coord submit a.yaml b.yaml …`: every project on one local cluster at once, one summary.
@Suite(.serialized) struct BatchTests {
    /// a.mp4 (1 s, 440 Hz) and b.mp4 (0.5 s, 660 Hz), 160x90, in `dir`.
    static func clips(_ dir: String) throws {
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 1, tone: 440)
        try Generate.clip(dir + "/b.mp4", width: 160, height: 90, seconds: 0.5, tone: 660)
    }

    static func project(_ dir: String, _ k: Int, clips: [String] = ["video: a.mp4", "video: b.mp4"]) throws -> String {
        let path = dir + "/p\(k).yaml"
        var y = "version: 1\nname: project-\(k)\noutput: { path: out/p\(k).mp4, size: 160x90, fps: 30, video: { preset: ultrafast } }\nclips:\n"
        for c in clips { y += "  - \(c)\n" }
        try y.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// 200 two-clip projects whose stages are all cached: all 200 movies in one submit, in the time
    /// of a few single-project submits (before batches: 41.8 s, a coordinator and workers started
    /// per file, one project at a time, 200 times one submit; 1.4-1.8 s on a 2-core machine now).
    @Test func twoHundredCachedProjectsInOneSubmit() throws {
        let dir = temporaryDirectory("batch-200")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try Generate.clip(dir + "/b.mp4", width: 160, height: 90, seconds: 0.5, tone: 660)
        let files = try (1...200).map { try Self.project(dir, $0) }
        let first = try run(coordPath, ["submit"] + files + ["--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(first.status == 0, "\(first.err.suffix(2000))")
        for k in 1...200 { try FileManager.default.removeItem(atPath: dir + "/out/p\(k).mp4") }

        // One cached project on its own, measured in this same run: what every file cost before.
        let t1 = Date()
        #expect(try run(coordPath, ["submit", files[0], "--state", dir + "/state", "--workers", "2"], timeout: 60).status == 0)
        let single = Date().timeIntervalSince(t1)
        try FileManager.default.removeItem(atPath: dir + "/out/p1.mp4")

        let t0 = Date()
        let again = try run(coordPath, ["submit"] + files + ["--state", dir + "/state", "--workers", "2", "--json"], timeout: 300)
        let seconds = Date().timeIntervalSince(t0)
        #expect(again.status == 0, "\(again.err.suffix(2000))")
        let lines = again.out.split(separator: "\n")
        #expect(lines.count == 200)
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == 200)
        #expect(objects.allSatisfy { $0["state"] as? String == "succeeded" })
        #expect(Set(objects.compactMap { $0["name"] as? String }).count == 200)
        for k in 1...200 { #expect(FileManager.default.fileExists(atPath: dir + "/out/p\(k).mp4"), "p\(k).mp4 missing") }
        // One at a time would take 200 × single; sharing one cluster must do far better than that.
        #expect(seconds <= 25 * single, "200 cached projects took \(seconds) s; one alone takes \(single) s")
        print("200 cached projects: \(String(format: "%.2f", seconds)) s; one cached project alone: \(String(format: "%.2f", single)) s (\(String(format: "%.1f", seconds / single))×)")
    }

    /// Four projects of one batch thread the same clips with the same edits (four movies from one
    /// library): their segments share keys, so each is rendered once and the other projects wait
    /// for it and reuse it; before, all four rendered every segment at the same time.
    @Test func projectsSharingASegmentRenderItOnce() throws {
        let dir = temporaryDirectory("batch-shared")
        let clips = ["a", "b", "c", "d"]
        for (i, c) in clips.enumerated() { try Generate.clip(dir + "/\(c).mp4", width: 160, height: 90, seconds: 0.5, tone: Double(300 + 100 * i)) }
        let files = try (1...4).map { try Self.project(dir, $0, clips: clips.map { "video: \($0).mp4" }) }
        let r = try run(coordPath, ["submit"] + files + ["--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 0, "\(r.err.suffix(2000))")
        let rendered = try run("sqlite3", [dir + "/state/lineage.db", """
            SELECT s.item_idx, count(*) FROM attempt a JOIN stage s ON s.id = a.stage_id
            WHERE s.kind = 'encode' AND a.state = 'succeeded' GROUP BY s.item_idx ORDER BY s.item_idx
            """], timeout: 30)
        #expect(rendered.out == "0|1\n1|1\n2|1\n3|1\n", "renders per item:\n\(rendered.out)\(rendered.err)")
        let movies = try (1...4).map { try Data(contentsOf: URL(fileURLWithPath: dir + "/out/p\($0).mp4")) }
        #expect(Set(movies).count == 1 && movies[0].count > 1000, "the four movies are the same")
    }

    /// A project that fails does not stop the others; the table names each of its broken files
    /// with its pipeline line (both, not the first only), and the exit status is 1.
    @Test func oneFailureIsReportedAndTheRestRender() throws {
        let dir = temporaryDirectory("batch-fail")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try Generate.clip(dir + "/b.mp4", width: 160, height: 90, seconds: 0.5, tone: 660)
        try Data(repeating: 0x42, count: 4096).write(to: URL(fileURLWithPath: dir + "/broken.mp4"))
        try Data(repeating: 0x17, count: 2048).write(to: URL(fileURLWithPath: dir + "/broken2.mp4"))
        let good1 = try Self.project(dir, 1)
        let bad = try Self.project(dir, 2, clips: ["video: a.mp4", "video: broken.mp4", "video: broken2.mp4"])
        let good3 = try Self.project(dir, 3)
        let r = try run(coordPath, ["submit", good1, bad, good3, "--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 1)
        #expect(FileManager.default.fileExists(atPath: dir + "/out/p1.mp4"))
        #expect(FileManager.default.fileExists(atPath: dir + "/out/p3.mp4"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/out/p2.mp4"))
        let table = r.out.split(separator: "\n").map(String.init)
        let k = try #require(table.firstIndex { $0.hasPrefix("project-2") })
        let column = try #require(table[0].range(of: "output or error")).lowerBound.utf16Offset(in: table[0])
        #expect(table[k].contains("failed") && table[k].hasSuffix("2 items failed:"), "\(r.out)")
        // Each broken file on a line of its own, kept to the error column.
        let lines = table[(k + 1)...].prefix(2)
        #expect(lines.allSatisfy { $0.prefix(column).allSatisfy { $0 == " " } }, "\(r.out)")
        #expect(lines.first?.contains("broken.mp4") == true && lines.first?.contains("p2.yaml:6") == true, "\(r.out)")
        #expect(lines.last?.contains("broken2.mp4") == true && lines.last?.contains("p2.yaml:7") == true, "\(r.out)")
        #expect(table.contains { $0.hasPrefix("project-1") && $0.contains("succeeded") })
        #expect(r.out.contains("3 projects in") && r.out.contains("2 succeeded, 1 failed"))
        // `coord status` of the failed run: its time to the hundredth, then its error, one file a line.
        let id = try run("sqlite3", [dir + "/state/lineage.db", "SELECT id FROM run WHERE name = 'project-2'"], timeout: 30).out
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let status = try run(coordPath, ["status", id, "--state", dir + "/state"], timeout: 30)
        let head = status.out.split(separator: "\n").prefix(4).map(String.init)
        #expect(head.count == 4 && head[0].range(of: #"^run \d+ project-2: failed, \d+/\d+ stages, \d+\.\d\d s \(no movie written to .*/out/p2\.mp4\)$"#, options: .regularExpression) != nil,
                "\(status.out)\(status.err)")
        #expect(head.count == 4 && head[1] == "error: 2 items failed:" && head[2].contains("broken.mp4") && head[3].contains("broken2.mp4"), "\(status.out)")
    }

    /// `coord status` of a run of many stages counts them by state and lists only those not
    /// succeeded (a 500-item project printed 2,000 lines); `--json` still has every one.
    @Test func theStatusOfALongRunCountsItsStages() throws {
        let dir = temporaryDirectory("status-long")
        let pipeline = try ClusterTests.project(dir, items: 11, seconds: 0.5, size: (160, 120))
        let r = try run(coordPath, ["submit", pipeline, "--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        let status = try run(coordPath, ["status", "1", "--state", dir + "/state"], timeout: 30)
        let lines = status.out.split(separator: "\n").map(String.init)
        // Fetch, decode, transform and encode of each of the 11 items, and the concat.
        #expect(lines.count == 3 && lines[1] == "  45 stages: 45 succeeded" && lines[2] == "  (--json lists every stage)", "\(status.out)")
        let json = try run(coordPath, ["status", "1", "--state", dir + "/state", "--json"], timeout: 30)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any], "\(json.err)")
        #expect((object["stages"] as? [Any])?.count == 45)
    }

    /// Pipelines copied to render variants keep their name: the table and the progress lines
    /// tell them apart by file (its name, or its path where the names are the same too).
    @Test func projectsSharingANameAreToldApartByTheirFiles() throws {
        let dir = temporaryDirectory("batch-same-name")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try Generate.clip(dir + "/b.mp4", width: 160, height: 90, seconds: 0.5, tone: 660)
        let first = try Self.project(dir, 1)
        let second = try Self.project(dir, 2)
        try String(contentsOfFile: second, encoding: .utf8).replacingOccurrences(of: "name: project-2", with: "name: project-1")
            .write(toFile: second, atomically: true, encoding: .utf8)
        // The same file name in two folders: the folder tells them apart.
        let third = try Self.project(dir, 3)
        let copies = try ["once", "again"].map { folder in
            try FileManager.default.createDirectory(atPath: dir + "/" + folder, withIntermediateDirectories: true)
            let path = dir + "/" + folder + "/p3.yaml"
            try String(contentsOfFile: third, encoding: .utf8).replacingOccurrences(of: "- video: ", with: "- video: ../")
                .write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let r = try run(coordPath, ["submit", first, second] + copies + ["--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 0, "\(r.out)\(r.err)")
        let rows = r.out.split(separator: "\n").map(String.init)
        for label in ["project-1 (p1.yaml)", "project-1 (p2.yaml)", "project-3 (once/p3.yaml)", "project-3 (again/p3.yaml)"] {
            #expect(rows.contains { $0.hasPrefix(label + " ") && $0.contains("succeeded") }, "\(label) in:\n\(r.out)")
        }
        #expect(r.err.contains("project-1 (p2.yaml): succeeded"), "\(r.err)")
    }

    /// One project's error is printed once, whole (every broken file a line), not also on its
    /// progress line.
    @Test func aSingleProjectsErrorIsPrintedOnce() throws {
        let dir = temporaryDirectory("batch-one-error")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try Data(repeating: 0x42, count: 4096).write(to: URL(fileURLWithPath: dir + "/broken.mp4"))
        try Data(repeating: 0x17, count: 2048).write(to: URL(fileURLWithPath: dir + "/broken2.mp4"))
        let bad = try Self.project(dir, 1, clips: ["video: a.mp4", "video: broken.mp4", "video: broken2.mp4"])
        let r = try run(coordPath, ["submit", bad, "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 1)
        let lines = r.err.split(separator: "\n").map(String.init)
        #expect(lines.contains("[1/1] project-1: failed"), "\(r.err)")
        #expect(lines.contains("error: run 1 failed: 2 items failed:"), "\(r.err)")
        #expect(lines.filter { $0.contains("broken.mp4") }.count == 1 && lines.filter { $0.contains("broken2.mp4") }.count == 1, "\(r.err)")
    }

    /// On a terminal the batch's total line counts every project's items from the start, also
    /// those of a project that failed before it sent any progress (a lone failing project's line
    /// read "0/0 items").
    @Test func theTerminalsTotalLineCountsEveryProjectsItems() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            print("skipped: script (util-linux) is not installed; scripts/test-tools installs it"); return
        }
        let dir = temporaryDirectory("batch-tty")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try Generate.clip(dir + "/b.mp4", width: 160, height: 90, seconds: 0.5, tone: 660)
        try Data(repeating: 0x42, count: 4096).write(to: URL(fileURLWithPath: dir + "/broken.mp4"))
        let good = try Self.project(dir, 1)
        let bad = try Self.project(dir, 2, clips: ["video: broken.mp4"])
        let command = [coordPath, "submit", good, bad, "--state", dir + "/state", "--workers", "2"].joined(separator: " ")
        let r = try run("/usr/bin/script", ["-q", "-e", "-c", command, "/dev/null"], timeout: 120)
        #expect(r.status == 1, "\(r.out)\(r.err)")
        // The last drawing of the total line (the terminal's transcript, redraws and all).
        let drawn = r.out.components(separatedBy: "projects done").last ?? ""
        #expect(r.out.contains("2/2 projects done (1 failed)") && drawn.contains("/3 items"), "\(r.out)")
    }

    /// Nothing renders when any file is invalid or two projects would write the same movie.
    @Test func invalidOrClashingFilesStopTheWholeBatch() throws {
        let dir = temporaryDirectory("batch-invalid")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try Generate.clip(dir + "/b.mp4", width: 160, height: 90, seconds: 0.5, tone: 660)
        let good = try Self.project(dir, 1)
        try "version: 1\nname: x\noutput: { path: out/x.mp4 }\nclips:\n  - video: missing.mp4\n".write(toFile: dir + "/bad.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", good, dir + "/bad.yaml", "--state", dir + "/state"], timeout: 120)
        #expect(r.status == 2)
        #expect(r.err.contains("bad.yaml:5"), "\(r.err)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/out/p1.mp4"))
        // --json: one object per file still, for a script reading the batch (before: nothing on
        // standard output).
        func objects(_ out: String) throws -> [[String: Any]] {
            try out.split(separator: "\n").map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\(out)") }
        }
        let j = try run(coordPath, ["submit", good, dir + "/bad.yaml", "--state", dir + "/state", "--json"], timeout: 120)
        #expect(j.status == 2)
        let told = try objects(j.out)
        #expect(told.count == 2, "\(j.out)")
        #expect(told.first?["file"] as? String == good && told.first?["state"] as? String == "not_rendered" && told.first?["name"] as? String == "project-1", "\(j.out)")
        #expect(told.last?["file"] as? String == dir + "/bad.yaml" && told.last?["state"] as? String == "invalid", "\(j.out)")
        #expect((told.last?["errors"] as? [String])?.contains { $0.contains("bad.yaml:5") } == true, "\(j.out)")

        let twin = dir + "/twin.yaml"
        try String(contentsOfFile: good, encoding: .utf8).replacingOccurrences(of: "project-1", with: "twin").write(toFile: twin, atomically: true, encoding: .utf8)
        let c = try run(coordPath, ["submit", good, twin, "--state", dir + "/state"], timeout: 120)
        #expect(c.status == 2)
        #expect(c.err.contains("both write") && c.err.contains("p1.mp4"), "\(c.err)")
        #expect(c.err.components(separatedBy: "both write").count == 2, "said once: \(c.err)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/out/p1.mp4"))
        // Both files write the movie: both objects say so.
        let cj = try objects(try run(coordPath, ["submit", good, twin, "--state", dir + "/state", "--json"], timeout: 120).out)
        #expect(cj.count == 2 && cj.allSatisfy { $0["state"] as? String == "invalid" && ($0["error"] as? String)?.contains("both write") == true }, "\(cj)")
        // One file named twice (a glob and a name) is said so, not as two files writing one movie.
        let twice = try run(coordPath, ["submit", good, dir + "/./p1.yaml", "--state", dir + "/state"], timeout: 120)
        #expect(twice.status == 2)
        #expect(twice.err.contains("p1.yaml is named 2 times (\(good), \(dir)/./p1.yaml); name each pipeline file once") && !twice.err.contains("both write"), "\(twice.err)")
        // Named three times: said once, with every name.
        let thrice = try run(coordPath, ["submit", good, dir + "/./p1.yaml", good, "--state", dir + "/state"], timeout: 120)
        #expect(thrice.status == 2)
        #expect(thrice.err.components(separatedBy: "is named 3 times").count == 2 && !thrice.err.contains("both write"), "\(thrice.err)")

        // A movie that could not be written is found before anything renders, at its output.path
        // (before: after every item of the project had rendered). The folder passes the loader's
        // look (its parent is a folder the user may write, even as root) but cannot be made.
        let blocked = dir + "/blocked.yaml"
        try String(contentsOfFile: good, encoding: .utf8).replacingOccurrences(of: "out/p1.mp4", with: "/proc/threadline-nope/p.mp4")
            .write(toFile: blocked, atomically: true, encoding: .utf8)
        let w = try run(coordPath, ["submit", good, blocked, "--state", dir + "/state"], timeout: 120)
        #expect(w.status == 2, "\(w.err)")
        #expect(w.err.contains("blocked.yaml:3:") && w.err.contains("cannot write the movie to /proc/threadline-nope/p.mp4: cannot make the folder"), "\(w.err)")
        #expect(w.err.contains("nothing was rendered"), "\(w.err)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/out/p1.mp4"), "the batch rendered")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).allSatisfy { !$0.contains(".part-") })
    }

    /// A state folder or a worker's store that cannot be made is a clear error naming the
    /// option, not Foundation's error dump.
    @Test func aStateFolderOrStoreThatCannotBeMadeIsAClearError() throws {
        let dir = temporaryDirectory("batch-state")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try Generate.clip(dir + "/b.mp4", width: 160, height: 90, seconds: 0.5, tone: 660)
        let good = try Self.project(dir, 1)
        let s = try run(coordPath, ["submit", good, "--state", "/proc/threadline-nope"], timeout: 60)
        #expect(s.status == 1 && s.err.contains("error: cannot use /proc/threadline-nope as the state folder: cannot make the folder /proc/threadline-nope: "), "\(s.err)")
        #expect(!s.err.contains("Domain="), "\(s.err)")
        let f = try run(coordPath, ["submit", good, "--state", good], timeout: 60)
        #expect(f.status == 1 && f.err.contains("\(good) is a file, not a folder"), "\(f.err)")
        let w = try run(workerPath, ["--connect", "tcp://127.0.0.1:1", "--store", "/proc/threadline-nope"], timeout: 60)
        #expect(w.status != 0 && w.err.contains("cannot use /proc/threadline-nope as the worker's store (--store): cannot make the folder"), "\(w.err)")
        #expect(!w.err.contains("Domain="), "\(w.err)")
    }

    /// A trim.end past a clip's end is said by `coord submit` too (not only `coord plan`), with
    /// the pipeline's file:line:col, once: local and remote, one project and a batch. Before,
    /// the clip was clamped without a word and the movie was shorter than the pipeline read.
    @Test func aTrimPastTheClipsEndIsToldBySubmit() throws {
        let dir = temporaryDirectory("batch-trim-note")
        try Self.clips(dir)
        let long = try Self.project(dir, 1, clips: ["video: a.mp4\n    trim: { end: 7.5 }", "video: b.mp4"])
        let plain = try Self.project(dir, 2)
        let note = "p1.yaml:5:5: note: clip 1 (a.mp4): trim.end 7.500 s is past the clip's end (1.000 s): it plays to its end"
        func told(_ r: (status: Int32, out: String, err: String), _ what: String, json: Bool = false) throws {
            #expect(r.status == 0, "\(what): \(r.err.suffix(2000))")
            let lines = r.err.split(separator: "\n").filter { $0.contains("note:") }
            #expect(lines.count == 1 && lines[0].hasSuffix(note), "\(what): \(r.err)")
            guard json else { return }
            // --json: the project's object lists it; the other project's has no notes.
            let objects = try r.out.split(separator: "\n").map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
            let notes = Dictionary(uniqueKeysWithValues: objects.map { ($0["name"] as? String ?? "?", $0["notes"] as? [String]) })
            #expect(notes.count == objects.count && notes["project-1"]??.count == 1 && notes["project-1"]??.first?.hasSuffix(note) == true,
                    "\(what): \(r.out)")
            #expect(notes.filter { $0.key != "project-1" }.allSatisfy { $0.value == nil }, "\(what): \(r.out)")
        }
        try told(try run(coordPath, ["submit", long, "--state", dir + "/state", "--workers", "1"], timeout: 120), "local")
        try told(try run(coordPath, ["submit", plain, long, "--state", dir + "/state", "--workers", "1", "--json"], timeout: 120),
                 "local batch, cached", json: true)
        try FileManager.default.createDirectory(atPath: dir + "/remote", withIntermediateDirectories: true)
        let (procs, ep) = try ClusterTests.loopbackCluster(dir + "/remote", workers: 1)
        defer { procs.stopAll() }
        try told(try run(coordPath, ["submit", long, "--coordinator", ep, "--json"], timeout: 120), "remote", json: true)
        try told(try run(coordPath, ["submit", long, plain, "--coordinator", ep], timeout: 120), "remote batch")
        let none = try run(coordPath, ["submit", plain, "--coordinator", ep], timeout: 120)
        #expect(none.status == 0 && !none.err.contains("note:"), "\(none.err)")
        // Followed after it ended (a cached run ends in milliseconds, before its submitter's watch
        // comes: the note was lost so, now and then, above): its end carries the note. Runs 1 and 2
        // are the note's project, 3 the plain one's.
        let out = dir + "/again.mp4"
        try told(try run(coordPath, ["wait", "1", "--coordinator", ep, "--output", out, "--json"], timeout: 120), "wait, ended", json: true)
        try told(try run(coordPath, ["wait", "2-3", "--coordinator", ep, "--json"], timeout: 120), "wait for a batch, ended", json: true)
        // The run page lists it too (from lineage), once, and only for the run it belongs to.
        for db in [dir + "/state/lineage.db", dir + "/remote/coord/lineage.db"] {
            let reader = try FarmReader(path: db)
            let notes = try #require(try reader.run(1)).notes
            #expect(notes.count == 1 && notes[0].hasSuffix(note), "\(db): \(notes)")
            let plainRun = try reader.runs(limit: 50).first { $0.name == "project-2" }
            #expect(try plainRun.flatMap { try reader.run($0.id) }?.notes == [], "\(db)")
        }
    }

    /// Tap-length clips under a fade: each one's error, located, and no render of them sent (a
    /// worker was sent a segment of minus three frames: "rendered 0 frames of the -3 planned");
    /// the other items are rendered and kept.
    @Test func itemsTheirTransitionsDoNotFitFailBeforeAnyRender() throws {
        let dir = temporaryDirectory("batch-tap")
        try Self.clips(dir)
        try Generate.clip(dir + "/tap.mp4", width: 160, height: 90, seconds: 0.1, tone: 880)
        var y = "version: 1\nname: taps\noutput: { path: out/taps.mp4, size: 160x90, fps: 30, video: { preset: ultrafast } }\n"
        y += "transition: { type: fade, duration: 0.2 }\nclips:\n"
        for c in ["a.mp4", "tap.mp4", "b.mp4", "tap.mp4", "a.mp4"] { y += "  - video: \(c)\n" }
        try y.write(toFile: dir + "/taps.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", dir + "/taps.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 1)
        for clip in [2, 4] {
            #expect(r.err.contains("taps.yaml:4:13: error: the transitions around clip \(clip) (tap.mp4) (0.200 s in, 0.200 s out) are longer than the item (0.100 s)"), "\(r.err)")
        }
        #expect(r.err.contains("2 items failed") && !r.err.contains("planned"), "\(r.err)")
        let renders = try LineageStore.readRows(path: dir + "/state/lineage.db", """
            SELECT s.item_idx, count(a.id) AS n FROM stage s LEFT JOIN attempt a ON a.stage_id = s.id WHERE s.kind = 'encode' GROUP BY s.item_idx ORDER BY s.item_idx
            """).map { "\($0["item_idx"] ?? "?"): \($0["n"] ?? "?")" }
        #expect(renders == ["0: 1", "1: 0", "2: 1", "3: 0", "4: 1"], "renders sent per item: \(renders)")
        // To a farm: said before any file goes up (it was said once the files were up).
        try FileManager.default.createDirectory(atPath: dir + "/farm", withIntermediateDirectories: true)
        let (procs, ep) = try ClusterTests.loopbackCluster(dir + "/farm", workers: 0)
        defer { procs.stopAll() }
        let remote = try run(coordPath, ["submit", dir + "/taps.yaml", "--coordinator", ep], timeout: 120)
        #expect(remote.status == 2, "\(remote.err)")
        for clip in [2, 4] {
            #expect(remote.err.contains("taps.yaml:4:13: error: the transitions around clip \(clip) (tap.mp4)"), "\(remote.err)")
        }
        #expect(StoreFiles.artifacts(in: dir + "/farm/coord").isEmpty, "files went up")
    }

    /// A trim that starts past its clip's end, submitted to a coordinator: the submit refuses it
    /// before sending anything, with the pipeline's line, as `coord plan` does (exit 2). Before,
    /// every file went up first and the run failed on the coordinator at once.
    @Test func aTrimPastTheClipsEndIsRefusedBeforeAnythingIsSent() throws {
        let dir = temporaryDirectory("batch-trim-refused")
        try Self.clips(dir)
        let bad = try Self.project(dir, 1, clips: ["video: b.mp4", "video: a.mp4\n    trim: { start: 3, end: 4 }"])
        let plain = try Self.project(dir, 2)
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1)
        defer { procs.stopAll() }
        let error = "p1.yaml:6:5: error: clip 2 (a.mp4): trim.start 3.000 s is at or past the end of the clip (1.000 s)"
        for files in [[bad], [plain, bad]] {
            let r = try run(coordPath, ["submit"] + files + ["--coordinator", ep], timeout: 120)
            #expect(r.status == 2, "\(files): \(r.err)")
            #expect(r.err.split(separator: "\n").contains { $0.hasSuffix(error) }, "\(files): \(r.err)")
            #expect(!r.err.contains("sent") && !r.err.contains("submitted"), "\(files): \(r.err)")
        }
        let runs = try run(coordPath, ["runs", "--coordinator", ep, "--json"], timeout: 30)
        #expect(runs.status == 0 && runs.out.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(runs.out) \(runs.err)")
        // Mended, it renders.
        let good = try Self.project(dir, 1, clips: ["video: b.mp4", "video: a.mp4\n    trim: { start: 0.5, end: 1 }"])
        let r = try run(coordPath, ["submit", good, "--coordinator", ep], timeout: 120)
        #expect(r.status == 0 && FileManager.default.fileExists(atPath: dir + "/out/p1.mp4"), "\(r.err)")
    }


    /// A note (a trim past its clip's end) is told by a run that fails at once: submitted again,
    /// every stage cached and another clip's trim refused, the run failed within the turn that
    /// made the note, and the submit said nothing of it (not on stderr, not in --json), though
    /// the run page listed it.
    @Test func aRunThatFailsAtOnceStillTellsItsNotes() throws {
        let dir = temporaryDirectory("batch-note-fail")
        try Self.clips(dir)
        let file = try Self.project(dir, 1, clips: ["video: a.mp4\n    trim: { end: 7.5 }", "video: b.mp4\n    trim: { start: 2, end: 3 }"])
        let note = "p1.yaml:5:5: note: clip 1 (a.mp4): trim.end 7.500 s is past the clip's end (1.000 s): it plays to its end"
        for round in 1...3 {
            let r = try run(coordPath, ["submit", file, "--state", dir + "/state", "--workers", "1", "--json"], timeout: 120)
            #expect(r.status == 1 && r.err.contains("trim.start 2.000 s is at or past the end"), "round \(round): \(r.err)")
            #expect(r.err.split(separator: "\n").filter { $0.hasSuffix(note) }.count == 1, "round \(round): \(r.err)")
            let object = try #require(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "round \(round): \(r.out)")
            #expect((object["notes"] as? [String])?.map { $0.hasSuffix(note) } == [true], "round \(round): \(r.out)")
        }
        // A title's note (text starting at its end) is told from the run's start: it has no fetch.
        let title = try Self.project(dir, 2, clips: ["title: { text: \"Hi\", duration: 0.5 }\n    text: { value: \"Never\", start: 0.5 }"])
        let r = try run(coordPath, ["submit", title, "--state", dir + "/state", "--workers", "1", "--json"], timeout: 120)
        let told = dir + "/p2.yaml:5:5: note: title 1 (\"Hi\"): its text \"Never\" starts at 0.500 s, at or after the item's end (0.500 s): it is never shown"
        #expect(r.status == 0 && r.err.split(separator: "\n").filter { $0 == told }.count == 1, "\(r.err)")
        let object = try #require(JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "\(r.out)")
        #expect(object["notes"] as? [String] == [told], "\(r.out)")
    }

}
