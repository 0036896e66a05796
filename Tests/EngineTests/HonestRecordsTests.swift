import Foundation
import Testing
import TestSupport

/// Records that do not lie (issue 16, finding 9): gc says what it could not remove, `coord
/// lineage FILE` goes by the file's content, and a damaged or read-only state folder gets a plain
/// message with the fix instead of SQLite's code or an INSERT statement.
@Suite(.serialized) struct HonestRecordsTests {
    /// Runs coord as an unprivileged user when the tests run as root (root ignores file modes).
    func coordAsOtherUser(_ args: [String]) throws -> (status: Int32, out: String, err: String) {
        if getuid() == 0 { return try run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", coordPath] + args, timeout: 60) }
        return try run(coordPath, args, timeout: 60)
    }

    func rendered(_ label: String) throws -> String {
        let dir = temporaryDirectory(label)
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try "output: { path: out/m.mp4, size: 160x90 }\nclips: [ { video: a.mp4 } ]\n".write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/st"], timeout: 60)
        #expect(r.status == 0, "\(r.err)")
        // Others may read the state (so an unprivileged user can try); only the owner writes.
        _ = try run("chmod", ["-R", "a+rX,go-w", dir], timeout: 10)
        if getuid() != 0 { _ = try run("chmod", ["-R", "a-w", dir + "/st"], timeout: 10) }
        return dir
    }

    @Test func gcSaysWhatItCouldNotRemove() throws {
        let dir = try rendered("gc-readonly")
        // The lineage database is the other user's to write (whether or not the coordinator left
        // its WAL behind, SQLite then opens it); only the artifacts are not.
        if getuid() == 0 { _ = try run("chmod", ["o+w", dir + "/st"] + ((try? FileManager.default.contentsOfDirectory(atPath: dir + "/st")) ?? [])
            .filter { $0.hasPrefix("lineage.db") }.map { dir + "/st/" + $0 }, timeout: 10) }
        let before = try run("find", [dir + "/st/artifacts", "-type", "f"], timeout: 10).out.split(separator: "\n").count
        let r = try coordAsOtherUser(["gc", "--state", dir + "/st", "--keep-days", "0", "--min-age", "0"])
        let after = try run("find", [dir + "/st/artifacts", "-type", "f"], timeout: 10).out.split(separator: "\n").count
        #expect(after == before, "files were removed after all")
        #expect(r.status == 1, "\(r.out) \(r.err)")
        #expect(r.out.contains("0 artifacts removed"), "\(r.out)")
        #expect(r.err.contains("\(before) files could not be removed"), "\(r.err)")
        if getuid() != 0 { _ = try run("chmod", ["-R", "u+w", dir + "/st"], timeout: 10) }
    }

    @Test func lineageOfAFileGoesByWhatItHolds() throws {
        let dir = try rendered("lineage-by-content")
        let ok = try run(coordPath, ["lineage", dir + "/out/m.mp4", "--state", dir + "/st"], timeout: 30)
        #expect(ok.status == 0 && ok.out.contains("run 1 of"), "\(ok.err)")
        #expect(!ok.out.contains("is a source"), "\(ok.out)")
        // A source is found too, and said to be one: the run read it, it did not make it.
        let source = try run(coordPath, ["lineage", dir + "/a.mp4", "--state", dir + "/st"], timeout: 30)
        #expect(source.status == 0 && source.out.hasPrefix("\(dir)/a.mp4 is a source, not a movie: run 1 read it"), "\(source.out) \(source.err)")
        try Data("not the movie".utf8).write(to: URL(fileURLWithPath: dir + "/out/m.mp4"))
        let replaced = try run(coordPath, ["lineage", dir + "/out/m.mp4", "--state", dir + "/st"], timeout: 30)
        #expect(replaced.status == 1, "\(replaced.out)")
        #expect(replaced.err.contains("is not recorded") && replaced.err.contains("replaced or changed since"), "\(replaced.err)")
        if getuid() != 0 { _ = try run("chmod", ["-R", "u+w", dir + "/st"], timeout: 10) }
    }

    /// Two projects alike but for their names make the same bytes. `coord lineage` of the
    /// second one's movie told the run that made those bytes first ("run 1 of a.yaml"): on a farm
    /// for every such movie, here for all but the last written. It tells the run that wrote the
    /// movie where the file is.
    @Test func lineageOfAMovieTellsTheRunThatWroteItThere() throws {
        let dir = temporaryDirectory("lineage-same-bytes")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        func pipeline(_ name: String, folder: String) throws {
            try "output: { path: \(folder)/\(name).mp4, size: 160x90 }\nclips: [ { video: a.mp4 } ]\n"
                .write(toFile: dir + "/\(name).yaml", atomically: true, encoding: .utf8)
        }
        // Here, one after the other (the second is the first's movie, from the cache).
        for name in ["a", "b"] {
            try pipeline(name, folder: "out")
            let r = try run(coordPath, ["submit", dir + "/\(name).yaml", "--state", dir + "/st"], timeout: 60)
            try #require(r.status == 0, "\(r.err)")
        }
        #expect(FileManager.default.contentsEqual(atPath: dir + "/out/a.mp4", andPath: dir + "/out/b.mp4"))
        for (name, id) in [("a", 1), ("b", 2)] {
            let r = try run(coordPath, ["lineage", dir + "/out/\(name).mp4", "--state", dir + "/st"], timeout: 30)
            #expect(r.status == 0 && r.out.contains("run \(id) of \(dir)/\(name).yaml"), "\(r.out) \(r.err)")
        }
        // On a farm, whose movies their submitter writes.
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1)
        defer { procs.stopAll() }
        for name in ["fa", "fb"] { try pipeline(name, folder: "farm") }
        let r = try run(coordPath, ["submit", dir + "/fa.yaml", dir + "/fb.yaml", "--coordinator", ep], timeout: 120)
        try #require(r.status == 0, "\(r.err)")
        #expect(FileManager.default.contentsEqual(atPath: dir + "/farm/fa.mp4", andPath: dir + "/farm/fb.mp4"))
        for (name, id) in [("fa", 1), ("fb", 2)] {
            let r = try run(coordPath, ["lineage", dir + "/farm/\(name).mp4", "--state", dir + "/coord"], timeout: 30)
            #expect(r.status == 0 && r.out.contains("run \(id) of ") && r.out.contains("\(name).yaml"), "\(r.out) \(r.err)")
        }
    }

    @Test func aDamagedOrReadOnlyStateFolderGetsAPlainMessage() throws {
        let dir = try rendered("damaged-state")
        // Read-only for this user: no SQL, what to do instead. (The movie's folder is writable, so
        // the state folder is what stops it.)
        _ = try run("chmod", ["a+w", dir + "/out"], timeout: 10)
        let ro = try coordAsOtherUser(["submit", dir + "/p.yaml", "--state", dir + "/st"])
        #expect(ro.status != 0)
        #expect(ro.err.contains("read-only for this user") && !ro.err.contains("INSERT"), "\(ro.err)")
        if getuid() != 0 { _ = try run("chmod", ["-R", "u+w", dir + "/st"], timeout: 10) }
        // Truncated: damaged, with the command that moves it aside.
        let db = dir + "/st/lineage.db"
        let data = try Data(contentsOf: URL(fileURLWithPath: db))
        try data.prefix(5000).write(to: URL(fileURLWithPath: db))
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: db + suffix) }
        let runs = try run(coordPath, ["runs", "--state", dir + "/st"], timeout: 30)
        #expect(runs.status != 0)
        #expect(runs.err.contains("is damaged") && runs.err.contains("mv \(db) \(db).damaged") && !runs.err.contains("SQLite error 11"), "\(runs.err)")
        // The fix it names works: move it aside and the same submit renders again (from the store).
        _ = try run("mv", [db, db + ".damaged"], timeout: 10)
        let again = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/st"], timeout: 60)
        #expect(again.status == 0, "\(again.err)")
    }

    /// `coord doctor` finds each kind of damage, `--repair` mends it without deleting a record,
    /// and the state folder works again afterwards.
    @Test func doctorChecksAndRepairsAStateFolder() throws {
        let dir = try rendered("doctor")
        let state = dir + "/st"
        func doctor(_ extra: [String] = []) throws -> (status: Int32, out: String, err: String) {
            try run(coordPath, ["doctor", "--state", state] + extra, timeout: 60)
        }
        let healthy = try doctor(["--full"])
        #expect(healthy.status == 0 && healthy.out.contains("no problems"), "\(healthy.out)\(healthy.err)")

        // A run left `running` by a coordinator that is gone, a store file damaged in place (same
        // size, so only --full sees it), a stale temporary file.
        _ = try run("sqlite3", [state + "/lineage.db", "UPDATE run SET state = 'running', coordinator = '\(ProcessInfo.processInfo.hostName):999999' WHERE id = 1"], timeout: 10)
        let artifacts = try run("find", [state + "/artifacts", "-type", "f"], timeout: 10).out.split(separator: "\n").map(String.init).sorted()
        let victim = try #require(artifacts.first)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: victim))
        bytes[bytes.count / 2] ^= 0xff
        try bytes.write(to: URL(fileURLWithPath: victim))
        FileManager.default.createFile(atPath: state + "/tmp/left-behind", contents: Data(count: 1000))
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-7200)], ofItemAtPath: state + "/tmp/left-behind")
        // An upload cut off two hours ago: kept (a day) for a submit to go on from, and said so
        // (it was disk no command accounted for).
        let kept = state + "/tmp/" + String(repeating: "d", count: 64) + ".partial"
        FileManager.default.createFile(atPath: kept, contents: Data(count: 3 << 20))
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-7200)], ofItemAtPath: kept)

        let quick = try doctor()
        #expect(quick.status == 1 && quick.out.contains("runs 1 are recorded running but their coordinator is gone"), "\(quick.out)")
        #expect(quick.out.contains("1 temporary files untouched"), "\(quick.out)")
        #expect(quick.out.contains("kept uploads: 1 part of uploads that were cut off (3.0 MiB), kept for a submit to go on from"), "\(quick.out)")
        let gc = try run(coordPath, ["gc", "--state", state, "--dry-run"], timeout: 60)
        #expect(gc.out.contains("1 part of uploads that were cut off (3.0 MiB), kept for a submit to go on from"), "\(gc.out)")
        let full = try doctor(["--full", "--json"])
        let findings = (try JSONSerialization.jsonObject(with: Data(full.out.utf8)) as? [[String: Any]]) ?? []
        #expect(findings.contains { $0["subject"] as? String == "store" && $0["level"] as? String == "problem" }, "\(full.out)")
        #expect(FileManager.default.fileExists(atPath: victim), "nothing changes without --repair")

        let repaired = try doctor(["--full", "--repair"])
        #expect(repaired.status == 0, "\(repaired.out)")
        #expect(repaired.out.contains("recorded interrupted") && repaired.out.contains("1 damaged artifact files removed")
                && repaired.out.contains("stale temporary files removed"), "\(repaired.out)")
        #expect(!FileManager.default.fileExists(atPath: victim) && !FileManager.default.fileExists(atPath: state + "/tmp/left-behind"))
        #expect(FileManager.default.fileExists(atPath: kept), "a kept part stays its day")
        let runState = try run("sqlite3", [state + "/lineage.db", "SELECT state FROM run WHERE id = 1"], timeout: 10).out
        #expect(runState.trimmingCharacters(in: .whitespacesAndNewlines) == "interrupted")
        #expect(try doctor(["--full"]).status == 0)

        // A truncated database: found, moved aside (kept), and the folder renders again.
        let db = state + "/lineage.db"
        let data = try Data(contentsOf: URL(fileURLWithPath: db))
        try data.prefix(5000).write(to: URL(fileURLWithPath: db))
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: db + suffix) }
        let damaged = try doctor()
        #expect(damaged.status == 1 && damaged.out.contains("lineage.db is damaged") && damaged.out.contains("--repair moves it aside"), "\(damaged.out)")
        let moved = try doctor(["--repair"])
        #expect(moved.status == 0 && moved.out.contains("moved aside to"), "\(moved.out)")
        let aside = try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.hasPrefix("lineage.db.damaged-") }
        #expect(aside.count == 1, "the damaged file is kept: \(aside)")
        let again = try run(coordPath, ["submit", dir + "/p.yaml", "--state", state], timeout: 60)
        #expect(again.status == 0, "\(again.err)")
        #expect(try doctor(["--full"]).status == 0)
    }

    /// A finished `coord submit` leaves no worker recorded up: its coordinator records the workers
    /// it knew as gone when it stops. Before, every submit's workers stayed up in lineage for
    /// ever, and the state folder's dashboard listed them all as idle workers of the farm.
    @Test func aStoppedClustersWorkersAreNotRecordedUp() throws {
        let dir = try rendered("workers-gone")
        let again = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/st"], timeout: 60)
        #expect(again.status == 0, "\(again.err)")
        let rows = try run("sqlite3", [dir + "/st/lineage.db", "SELECT state FROM worker"], timeout: 10).out
            .split(separator: "\n").map(String.init)
        // Two submits of two workers each (a worker still starting when a cached run ends never joins).
        #expect((2...4).contains(rows.count) && rows.allSatisfy { $0 == "gone" }, "\(rows)")

        // A coordinator killed before it could say so left its workers up: the next one records
        // those of this host whose process has ended as gone, and leaves a live one (this test's
        // process, standing in for a worker of another coordinator on the same folder) up.
        let db = dir + "/st/lineage.db"
        let host = ProcessInfo.processInfo.hostName
        _ = try run("sqlite3", [db, """
            UPDATE worker SET state = 'up';
            INSERT INTO worker (id, host, pid, slots, version, first_seen, last_seen, state)
                VALUES ('live', '\(host)', \(getpid()), 1, 'x', \(Date().timeIntervalSince1970), 0, 'up'),
                       ('elsewhere', 'another-host', 1, 1, 'x', 0, 0, 'up');
            """], timeout: 10)
        let third = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/st"], timeout: 60)
        #expect(third.status == 0, "\(third.err)")
        let after = try run("sqlite3", [db, "SELECT id, state FROM worker WHERE state != 'gone' ORDER BY id"], timeout: 10).out
        #expect(after == "elsewhere|up\nlive|up\n", "\(after)")
    }
}
