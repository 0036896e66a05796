import Foundation
import GRDB
import Testing
import Lineage
@testable import Dashboard
import TestSupport

/// The dashboard, its JSON API and /metrics, checked with real clients: curl, Chromium (through
/// the DevTools protocol), Prometheus and promtool, Datasette. `scripts/test-tools` installs them;
/// under `scripts/test` a missing client fails the test instead of skipping it.
@Suite(.serialized) struct DashboardTests {
    static let venvPython = repositoryRoot + "/.build/test-venv/bin/python"
    static let required = clientsRequired
    static let haveChromium = FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") && FileManager.default.isExecutableFile(atPath: venvPython)
    static let havePrometheus = FileManager.default.isExecutableFile(atPath: "/usr/bin/prometheus") && FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool")
    static let haveDatasette = FileManager.default.isExecutableFile(atPath: repositoryRoot + "/.build/test-venv/bin/datasette")
    static let clientsNote: Comment = "needs chromium, prometheus and .build/test-venv: run scripts/test-tools"

    /// Fails under scripts/test when a client is missing; elsewhere the test is skipped.
    static func clients(_ have: Bool) -> Bool {
        if !have && required { Issue.record("a dashboard client is missing: scripts/test-tools should have installed it") }
        return have
    }

    // MARK: helpers

    struct Answer { var status: Int; var body: Data; var seconds: Double; var headers: String
        var text: String { String(decoding: body, as: UTF8.self) }
        func json() throws -> Any { try JSONSerialization.jsonObject(with: body) }
    }

    /// One request with curl (a client nobody here wrote); `path` is sent as written (--path-as-is).
    static func get(_ base: String, _ path: String, headers: [String] = [], method: String = "GET") throws -> Answer {
        let dir = temporaryDirectory("curl")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var args = ["-s", "--path-as-is", "-X", method, "-o", dir + "/body", "-D", dir + "/headers", "-w", "%{http_code} %{time_total}", "--max-time", "30"]
        for h in headers { args += ["-H", h] }
        let r = try run("curl", args + [base + path], timeout: 60)
        let parts = r.out.split(separator: " ")
        return Answer(status: Int(parts.first ?? "") ?? 0, body: (try? Data(contentsOf: URL(fileURLWithPath: dir + "/body"))) ?? Data(),
                      seconds: Double(parts.last ?? "") ?? 0, headers: (try? String(contentsOfFile: dir + "/headers", encoding: .utf8)) ?? "")
    }

    /// Waits for a process started by `procs` to print "dashboard on http://…/".
    static func dashboardURL(_ procs: ServiceProcesses, _ name: String, timeout: Double = 30) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: procs.out(name), encoding: .utf8),
               let line = text.split(separator: "\n").first(where: { $0.hasPrefix("dashboard on ") }) {
                return String(line.dropFirst("dashboard on ".count)).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            }
            if let p = procs.process(name), !p.isRunning {
                throw GenerateError(message: "\(name) exited (\(p.terminationStatus)): \((try? String(contentsOfFile: procs.log(name), encoding: .utf8)) ?? "")")
            }
            usleep(50_000)
        }
        throw GenerateError(message: "\(name) did not start serving within \(timeout) s")
    }

    static func embeddedRender(_ pipeline: String, state: String, workers: Int = 2) throws -> (status: Int32, out: String, err: String) {
        try run(coordPath, ["submit", pipeline, "--state", state, "--workers", "\(workers)", "--json"], timeout: 600)
    }

    static func sha256(_ path: String) throws -> String {
        let r = try run("sha256sum", [path])
        return String(r.out.prefix(64))
    }

    // MARK: API and files

    @Test func apiAnswersServesRecordedFilesOnlyAndChangesNothing() throws {
        let dir = temporaryDirectory("dashboard-api")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pipeline = try ClusterTests.project(dir, items: 3)
        let state = dir + "/state"
        let render = try Self.embeddedRender(pipeline, state: state)
        try #require(render.status == 0, "render: \(render.err)")
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("dashboard", coordPath, ["dashboard", "--state", state, "--http", "127.0.0.1:0"])
        let base = try Self.dashboardURL(procs, "dashboard")

        let runs = try #require(try Self.get(base, "/api/runs").json() as? [[String: Any]])
        #expect(runs.count == 1)
        let run = try #require(runs.first)
        for key in ["id", "name", "state", "items", "items_done", "started", "finished"] { #expect(run[key] != nil, "/api/runs has \(key)") }
        #expect(run["state"] as? String == "succeeded")
        #expect(run["items"] as? Int == 3 && run["items_done"] as? Int == 3)

        let detail = try #require(try Self.get(base, "/api/runs/1").json() as? [String: Any])
        let movie = try #require(detail["movie"] as? [String: Any])
        let sha = try #require(movie["sha256"] as? String)
        #expect(sha == (try Self.sha256(dir + "/out.mp4")), "the run's movie is the published one")
        #expect(((detail["lineage"] as? [[String: Any]]) ?? []).contains { $0["kind"] as? String == "source" }, "lineage reaches the sources")
        let attempts = try #require(try Self.get(base, "/api/runs/1/attempts").json() as? [[String: Any]])
        #expect(attempts.count >= 7, "fetch, render and concat attempts: \(attempts.count)")
        #expect(try Self.get(base, "/api/workers").json() is [Any])
        #expect(try Self.get(base, "/api/runs/99").status == 404)

        // The movie, whole and by range (a <video> element seeks with ranges).
        let whole = try Self.get(base, "/artifacts/\(sha)")
        #expect(whole.status == 200 && whole.headers.lowercased().contains("content-type: video/mp4"))
        #expect(whole.body == (try Data(contentsOf: URL(fileURLWithPath: dir + "/out.mp4"))))
        let part = try Self.get(base, "/artifacts/\(sha)", headers: ["Range: bytes=100-199"])
        #expect(part.status == 206 && part.body.count == 100)
        let items = try #require(detail["items"] as? [[String: Any]])
        let poster = try Self.get(base, "/api/runs/1/items/0/poster.png")
        #expect(poster.status == 200 && poster.body.starts(with: [0x89, 0x50, 0x4E, 0x47]), "item 0 has a poster: \(items.first ?? [:])")
        // The movie's poster (its player shows it until played): a frame from its middle, at the
        // movie's own size (320x180: never blown up), by its sha256. A source has none.
        let moviePoster = try Self.get(base, "/artifacts/\(sha)/poster.png")
        #expect(moviePoster.status == 200 && moviePoster.headers.lowercased().contains("content-type: image/png"), "\(moviePoster.status)")
        let posterFile = dir + "/movie-poster.png"
        try moviePoster.body.write(to: URL(fileURLWithPath: posterFile))
        let drawn = try playerFrame(posterFile, frame: 0)
        #expect(drawn.width == 320 && drawn.height == 180, "the movie's poster is \(drawn.width)x\(drawn.height)")
        let middle = try playerFrame(dir + "/out.mp4", frame: try #require(try ffprobe(dir + "/out.mp4").frames) / 2)
        let (p, m) = (rgbMeans(drawn), rgbMeans(middle))
        #expect(abs(p.r - m.r) + abs(p.g - m.g) + abs(p.b - m.b) < 15, "the poster \(p) is the movie's middle frame \(m)")
        let source = try #require((detail["lineage"] as? [[String: Any]])?.first { $0["kind"] as? String == "source" }?["sha256"] as? String)
        #expect(try Self.get(base, "/artifacts/\(source)").status == 200 && (try Self.get(base, "/artifacts/\(source)/poster.png").status) == 404,
                "a source is served, but has no poster")

        // Anything else is 404: traversal plain, encoded and double-encoded; store files never recorded.
        let lineageSHA = try Self.sha256(state + "/lineage.db")
        for path in ["/artifacts/../lineage.db", "/artifacts/%2e%2e/lineage.db", "/artifacts/%2e%2e%2flineage.db", "/artifacts/%252e%252e%252flineage.db",
                     "/assets/../../lineage.db", "/assets/..%2f..%2fetc%2fpasswd", "/runs/1/../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
                     "//etc/passwd", "/etc/passwd", "/artifacts/\(lineageSHA)", "/artifacts/\(sha.prefix(12))", "/artifacts/\(sha)%00",
                     "/api/runs/1/items/..%2f..%2f/poster.png", "/state/lineage.db", "/lineage.db"] {
            let a = try Self.get(base, path)
            #expect(a.status == 404, "\(path) → \(a.status)")
            #expect(!a.text.contains("root:x:0:0") && !a.text.hasPrefix("SQLite format"), "\(path) leaked a file")
        }
        // Read-only: nothing answers a write.
        let before = try Self.sha256(state + "/lineage.db")
        for (method, path) in [("POST", "/api/runs"), ("DELETE", "/api/runs/1"), ("PUT", "/api/runs/1"), ("POST", "/api/runs/1/cancel"), ("PATCH", "/api/workers")] {
            let a = try Self.get(base, path, method: method)
            #expect(a.status == 404 || a.status == 405, "\(method) \(path) → \(a.status)")
        }
        #expect(try Self.sha256(state + "/lineage.db") == before, "the dashboard wrote nothing")
        // The answers match docs/openapi.yaml (itself checked by openapi-spec-validator).
        if Self.clients(FileManager.default.isExecutableFile(atPath: Self.venvPython)) {
            let checked = try TestSupport.run(Self.venvPython, [repositoryRoot + "/Tests/Clients/openapi_check.py", repositoryRoot + "/docs/openapi.yaml", base, "1"], timeout: 120)
            let report = try JSONSerialization.jsonObject(with: Data(checked.out.utf8)) as? [String: Any]
            #expect(report?["checked"] as? Int == 5 && (report?["problems"] as? [String])?.isEmpty == true, "\(checked.out) \(checked.err)")
        }
        #expect(try Self.get(base, "/").text.contains("/assets/app.js"))
        #expect(try Self.get(base, "/assets/app.js").status == 200)
    }

    @Test func offLoopbackNeedsATokenAndEveryRequestCarriesIt() throws {
        let dir = temporaryDirectory("dashboard-token")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pipeline = try ClusterTests.project(dir, items: 1)
        let state = dir + "/state"
        try #require(try Self.embeddedRender(pipeline, state: state).status == 0)

        let refused = try run(coordPath, ["dashboard", "--state", state, "--http", "0.0.0.0:0"], timeout: 30)
        #expect(refused.status != 0)
        #expect(refused.err.contains("--token-file"), "says how: \(refused.err)")
        let serveRefused = try run(coordPath, ["serve", "--state", state, "--http", "0.0.0.0:0"], timeout: 30)
        #expect(serveRefused.status != 0 && serveRefused.err.contains("--token-file"), "\(serveRefused.err)")

        let token = "s3cret-" + UUID().uuidString
        try token.write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("dashboard", coordPath, ["dashboard", "--state", state, "--http", "0.0.0.0:0", "--token-file", dir + "/token"])
        let base = try Self.dashboardURL(procs, "dashboard").replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
        #expect(try Self.get(base, "/api/runs").status == 401)
        #expect(try Self.get(base, "/").status == 401)
        #expect(try Self.get(base, "/api/runs", headers: ["Authorization: Bearer wrong"]).status == 401)
        #expect(try Self.get(base, "/api/runs", headers: ["Authorization: Bearer \(token)x"]).status == 401)
        #expect(try Self.get(base, "/api/runs", headers: ["Authorization: Bearer \(token)"]).status == 200)
        #expect(try Self.get(base, "/api/runs?token=\(token)").status == 200, "pages pass it as ?token= where headers cannot go")
        #expect(try Self.get(base, "/artifacts/../lineage.db", headers: ["Authorization: Bearer \(token)"]).status == 404)
        #expect(try Self.get(base, "/healthz").status == 200, "liveness probes carry no token")
        // Rotated by writing the file (as an operator does): the new token works and the old one
        // stops within seconds, without a restart.
        let rotated = "r0tated-" + UUID().uuidString
        try rotated.write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        #expect(waitUntil(timeout: 8) { (try? Self.get(base, "/api/runs", headers: ["Authorization: Bearer \(rotated)"]).status) == 200 })
        #expect(try Self.get(base, "/api/runs", headers: ["Authorization: Bearer \(token)"]).status == 401, "the old token still works")
        // A file that goes bad (too short, or gone) keeps the token in force: never an open dashboard.
        try "short".write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        let log = { (try? String(contentsOfFile: procs.log("dashboard"), encoding: .utf8)) ?? "" }
        // (The file is looked at when requests come, at most every 2 s.)
        #expect(waitUntil(timeout: 8) { _ = try? Self.get(base, "/api/runs"); return log().contains("the dashboard keeps its previous token") }, "\(log())")
        #expect(try Self.get(base, "/api/runs").status == 401)
        #expect(try Self.get(base, "/api/runs", headers: ["Authorization: Bearer \(rotated)"]).status == 200)

        // A Kubernetes Secret: the file is a link through `..data`, which an update points at a new
        // folder (the link itself stays as it was).
        let secret = dir + "/secret"
        func version(_ name: String, _ token: String) throws {
            try FileManager.default.createDirectory(atPath: secret + "/" + name, withIntermediateDirectories: true)
            try token.write(toFile: secret + "/\(name)/dashboard.token", atomically: false, encoding: .utf8)
            try? FileManager.default.removeItem(atPath: secret + "/..data_tmp")
            try FileManager.default.createSymbolicLink(atPath: secret + "/..data_tmp", withDestinationPath: name)
            #expect(rename(secret + "/..data_tmp", secret + "/..data") == 0)
        }
        let first = "k8s-first-" + UUID().uuidString, second = "k8s-second-" + UUID().uuidString
        try version("..v1", first)
        try FileManager.default.createSymbolicLink(atPath: secret + "/dashboard.token", withDestinationPath: "..data/dashboard.token")
        try procs.start("mounted", coordPath, ["dashboard", "--state", state, "--http", "0.0.0.0:0", "--token-file", secret + "/dashboard.token"])
        let mounted = try Self.dashboardURL(procs, "mounted").replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
        #expect(try Self.get(mounted, "/api/runs", headers: ["Authorization: Bearer \(first)"]).status == 200)
        try version("..v2", second)
        #expect(waitUntil(timeout: 8) { (try? Self.get(mounted, "/api/runs", headers: ["Authorization: Bearer \(second)"]).status) == 200 },
                "the Secret's new token is taken")
        #expect(try Self.get(mounted, "/api/runs", headers: ["Authorization: Bearer \(first)"]).status == 401)
        #expect(SecurityMiddleware.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        #expect(!SecurityMiddleware.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        #expect(!SecurityMiddleware.constantTimeEqual(Array("abc".utf8), Array("abcd".utf8)))
    }

    // MARK: a real render, watched

    /// A viewer whose clock is minutes off the coordinator's (a laptop without NTP) sees the
    /// running attempts' bars where they are, on the coordinator's clock. Before, a browser five
    /// minutes behind drew no running bar, and one ahead stretched the chart five minutes past now,
    /// squeezing every bar into its first pixels.
    @Test(.enabled(if: clients(haveChromium), clientsNote), arguments: [-300, 300])
    func runningBarsAreDrawnOnTheCoordinatorsClock(offset: Int) throws {
        let dir = temporaryDirectory("skewed-viewer")
        let pipeline = try ClusterTests.project(dir, items: 6, seconds: 2, output: "640x360", preset: "medium")
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:0", "--state", dir + "/state", "--http", "127.0.0.1:0"])
        let endpoint = try procs.endpoint(of: "coord")
        let base = try Self.dashboardURL(procs, "coord")
        try #require(try run(coordPath, ["submit", pipeline, "--coordinator", endpoint, "--detach"], timeout: 60).status == 0)
        // The page opens on the waiting run; the worker comes once the browser is up.
        let page = try procs.start("browser", Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "running-bars", base, "1", dir, "\(offset)"])
        usleep(2_000_000)
        try procs.start("w1", workerPath, ["--connect", endpoint, "--pipelines", "1", "--store", dir + "/w1"])
        try #require(waitUntil(timeout: 150) { !page.isRunning }, "the browser did not finish")
        let out = try String(contentsOfFile: procs.out("browser"), encoding: .utf8)
        let seen = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "\(out) \((try? String(contentsOfFile: procs.log("browser"), encoding: .utf8)) ?? "")")
        let samples = seen["samples"] as? Int ?? 0, missing = seen["missing"] as? Int ?? -1, over = seen["axis_over"] as? Double ?? .infinity
        #expect(samples >= 5, "the browser saw too little of the render: \(out)")
        #expect(missing == 0, "running attempts without a bar: \(out)")
        #expect(over < 3, "the chart ran \(over) s past now: \(out)")
    }

    /// A run resumed 40 minutes after its farm stopped (overnight, a restart): each side's bars are
    /// drawn on one scale, wide enough to read, and the stretch between is narrow and says how long
    /// it lasted. Before, the chart spanned the 42 minutes evenly: 5 s bars were 2 px slivers at
    /// its two ends. A drag across the later bars zooms to them.
    @Test(.enabled(if: clients(haveChromium), clientsNote))
    func aResumedRunsChartSkipsTheTimeNothingRan() throws {
        let dir = temporaryDirectory("dashboard-resumed")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        _ = try LineageStore(path: state + "/lineage.db")
        let db = try DatabaseQueue(path: state + "/lineage.db")
        let t0 = Date().timeIntervalSince1970 - 3600
        try db.write { db in
            try db.execute(sql: "INSERT INTO worker (id, host, pid, slots, version, first_seen, last_seen, state) VALUES ('w0', 'host0', 1, 2, 'x', ?, ?, 'gone')", arguments: [t0, t0])
            try db.execute(sql: """
                INSERT INTO run (id, name, pipeline_path, pipeline_sha256, pipeline_text, output_path, submitted_at, finished_at, state)
                VALUES (1, 'resumed', '/p.yaml', 'x', '', '/out.mp4', ?, ?, 'running')
                """, arguments: [t0, t0 + 2520])
            // Twelve items of one 5 s fetch each on two slots: six in the first minute, six 40 minutes later.
            for i in 0..<12 {
                try db.execute(sql: "INSERT INTO item (run_id, idx, kind, label, params_json) VALUES (1, ?, 'video', ?, '{}')", arguments: [i, "clip \(i)"])
                let start = t0 + (i < 6 ? 0 : 2460) + Double(i % 6 / 2) * 20
                try db.execute(sql: "INSERT INTO stage (run_id, item_idx, name, kind, state, cached, started_at, finished_at, seconds) VALUES (1, ?, ?, 'fetch', 'succeeded', 0, ?, ?, 5)",
                               arguments: [i, "fetch/\(i)", start, start + 5])
                try db.execute(sql: """
                    INSERT INTO attempt (stage_id, attempt_no, worker_id, slot, lease, dispatched_at, started_at, finished_at, state)
                    VALUES (last_insert_rowid(), 1, 'w0', ?, ?, ?, ?, ?, 'succeeded')
                    """, arguments: [i % 2, "lease-\(i)", start, start, start + 5])
            }
            try db.execute(sql: "UPDATE run SET state = 'succeeded' WHERE id = 1")
        }
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("dashboard", coordPath, ["dashboard", "--state", state, "--http", "127.0.0.1:0"])
        let base = try Self.dashboardURL(procs, "dashboard")
        let shots = dir + "/screenshots"
        try FileManager.default.createDirectory(atPath: shots, withIntermediateDirectories: true)
        let r = try run(Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "resumed-gantt", base, "1", shots], timeout: 120)
        let seen = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "browser: \(r.err)")
        #expect(seen["bars"] as? Int == 12, "\(seen)")
        #expect(((seen["narrowest"] as? NSNumber)?.doubleValue ?? 0) > 20, "each 5 s bar is drawn wide enough to read: \(seen)")
        #expect(seen["gaps"] as? [String] == ["40 min 15 s idle"], "from the first six's end at 45 s to 2,460 s: \(seen)")
        // Ticks on either side of the stretch, none inside it.
        let ticks = (seen["ticks"] as? [String] ?? []).compactMap { Double($0.dropLast(2)) }
        #expect(ticks.contains { $0 < 65 } && ticks.contains { $0 >= 2460 } && !ticks.contains { $0 > 65 && $0 < 2460 }, "\(seen)")
        let zoomed = (seen["zoomed"] as? [NSNumber])?.map(\.doubleValue) ?? []
        #expect(zoomed.count == 2 && zoomed[0] >= 2455 && zoomed[0] < 2465 && zoomed[1] > 2500 && zoomed[1] <= 2525, "the drag zoomed to \(zoomed)")
        Self.keepScreenshots(shots)
    }

    /// The pointer resting on a running bar while its attempt ends: once the page draws the chart
    /// again, the tooltip tells of the ended attempt, not of the running bar drawn before. (The
    /// browser gives the new bar under a resting pointer its mouseover; the page's handler must
    /// then find that bar's attempt among the redrawn ones. Earlier notes guessed the old text
    /// stayed until the pointer moved; against the page as it was, this test passes too.)
    @Test(.enabled(if: clients(haveChromium), clientsNote))
    func aBarsTooltipFollowsALiveRedraw() throws {
        let dir = temporaryDirectory("dashboard-tooltip")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        _ = try LineageStore(path: state + "/lineage.db")
        let db = try DatabaseQueue(path: state + "/lineage.db")
        let now = Date().timeIntervalSince1970
        try db.write { db in
            try db.execute(sql: "INSERT INTO worker (id, host, pid, slots, version, first_seen, last_seen, state) VALUES ('w0', 'host0', 1, 2, 'x', ?, ?, 'gone')", arguments: [now - 10, now])
            try db.execute(sql: """
                INSERT INTO run (id, name, pipeline_path, pipeline_sha256, pipeline_text, output_path, submitted_at, state)
                VALUES (1, 'live', '/p.yaml', 'x', '', '/out.mp4', ?, 'running')
                """, arguments: [now - 10])
            // Item 0's fetch under way for 2 s on slot 0, item 1's done on slot 1.
            for i in 0..<2 {
                let start = now - (i == 0 ? 2 : 10)
                try db.execute(sql: "INSERT INTO item (run_id, idx, kind, label, params_json) VALUES (1, ?, 'video', ?, '{}')", arguments: [i, "clip \(i)"])
                try db.execute(sql: "INSERT INTO stage (run_id, item_idx, name, kind, state, cached, started_at, finished_at, seconds) VALUES (1, ?, ?, 'fetch', ?, 0, ?, ?, ?)",
                               arguments: [i, "fetch/\(i)", i == 0 ? "running" : "succeeded", start, i == 0 ? nil : start + 3, i == 0 ? nil : 3])
                try db.execute(sql: """
                    INSERT INTO attempt (stage_id, attempt_no, worker_id, slot, lease, dispatched_at, started_at, finished_at, state)
                    VALUES (last_insert_rowid(), 1, 'w0', ?, ?, ?, ?, ?, ?)
                    """, arguments: [i, "lease-\(i)", start, start, i == 0 ? nil : start + 3, i == 0 ? "running" : "succeeded"])
            }
        }
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("dashboard", coordPath, ["dashboard", "--state", state, "--http", "127.0.0.1:0"])
        let base = try Self.dashboardURL(procs, "dashboard")
        let shots = dir + "/screenshots"
        try FileManager.default.createDirectory(atPath: shots, withIntermediateDirectories: true)
        let r = try run(Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "live-tooltip", base, "1", shots, state + "/lineage.db"], timeout: 120)
        let seen = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "browser: \(r.err)")
        #expect((seen["before"] as? String ?? "").hasPrefix("fetch/0 · attempt 1 · running · "), "\(seen)")
        #expect(seen["redrawn"] as? Bool == true, "the chart was not drawn again once the attempt ended: \(seen)")
        #expect(seen["after"] as? String == "fetch/0 · attempt 1 · succeeded · 4.0 s", "\(seen)")
        Self.keepScreenshots(shots)
    }

    /// Two runs sharing one slot, as a batch's projects do: on the farm page the run whose turn
    /// it is shows its time left and the other says it waits for a slot (its ETA column was
    /// blank, as if it were stuck).
    @Test(.enabled(if: clients(haveChromium), clientsNote))
    func aRunWaitingItsTurnSaysSoOnTheFarmPage() throws {
        let dir = temporaryDirectory("farm-turns")
        let pipelines = try ["a", "b"].map { name -> String in
            try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
            // Renders of a second or more each: the page, read a second or two after each run has
            // made one, finds both under way (at 640x360 this machine made every render first).
            return try ClusterTests.project(dir + "/" + name, items: 6, seconds: 2, size: (1280, 720), output: "1280x720", preset: "medium")
        }
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:0", "--state", dir + "/state", "--http", "127.0.0.1:0"])
        let endpoint = try procs.endpoint(of: "coord")
        let base = try Self.dashboardURL(procs, "coord")
        try #require(try run(coordPath, ["submit"] + pipelines + ["--coordinator", endpoint, "--detach"], timeout: 60).status == 0)
        try procs.start("w1", workerPath, ["--connect", endpoint, "--pipelines", "1", "--store", dir + "/w1"])
        // Once a render of each has been made, both runs have a rate; the slot takes turns.
        let db = dir + "/state/lineage.db"
        try #require(waitUntil(timeout: 120) {
            ((try? LineageStore.readRows(path: db, "SELECT count(DISTINCT run_id) AS n FROM stage WHERE kind = 'encode' AND state = 'succeeded'"))?
                .first?["n"]) == "2"
        }, "each run rendered an item")
        let farm = try run(Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "farm", base, dir], timeout: 120)
        let page = try #require(try JSONSerialization.jsonObject(with: Data(farm.out.utf8)) as? [String: Any], "browser: \(farm.err)")
        let runs = page["runs"] as? [[String: Any]] ?? []
        let etas = runs.filter { $0["state"] as? String == "running" }.map { $0["eta"] as? String ?? "" }
        // Both still running (six renders each on one slot): one renders, the other waits its turn.
        #expect(etas.count == 2, "\(page)")
        #expect(etas.contains("waiting for a slot") && etas.contains { $0.hasSuffix(" s") || $0.hasPrefix("finishing the last") || $0 == "joining the movie" },
                "\(etas)")
    }

    /// A farm page left open while its coordinator restarts (an upgrade, a reboot): it says in words
    /// that the coordinator does not answer (before: the browser's "Failed to fetch"), and comes
    /// back by itself, without a reload, once the coordinator is up again. With a run running,
    /// and with none (the coordinator killed): the page used to notice the outage only when a
    /// running run's tick (or an event just before the stop) fetched and failed, so with nothing
    /// running it kept its last words under a grey dot, and CI once saw the same when the stop's
    /// own event was drawn before the server went; and back, it showed what changed meanwhile
    /// (the run resumed as the coordinator started) only at the next event.
    @Test(.enabled(if: clients(haveChromium), clientsNote), arguments: [false, true])
    func theFarmPageRidesOutACoordinatorRestart(nothingRunning: Bool) throws {
        let dir = temporaryDirectory("page-restart")
        let pipeline = try ClusterTests.project(dir, items: 2, seconds: 0.5, size: (160, 120), output: "320x180")
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        let (fd, port) = ClusterTests.loopbackPort(listening: false)
        close(fd)
        let serve = ["serve", "--bind", "tcp://127.0.0.1:0", "--state", dir + "/state", "--http", "127.0.0.1:\(port)"]
        let first = try procs.start("coord", coordPath, serve)
        let base = try Self.dashboardURL(procs, "coord")
        let endpoint = try procs.endpoint(of: "coord")
        try #require(try run(coordPath, ["submit", pipeline, "--coordinator", endpoint, "--detach"], timeout: 60).status == 0)
        if nothingRunning {
            try #require(try run(coordPath, ["cancel", "1", "--coordinator", endpoint], timeout: 60).status == 0)
        }
        let page = try procs.start("browser", Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "restart", base, dir])
        try #require(waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: dir + "/page-open") }, "the page did not open")
        // The page's first draws done (its stream's first event redraws it once more, 0.1 s on):
        // what it notices next is the outage's own doing.
        Thread.sleep(forTimeInterval: 1)
        // Stopped for an upgrade (SIGTERM: its last events reach the page, and a running run's
        // tick finds it gone), or, with nothing running, killed (a crash: no last word at all).
        kill(first.processIdentifier, nothingRunning ? SIGKILL : SIGTERM)
        try #require(waitUntil(timeout: 30) { !first.isRunning }, "the coordinator did not stop")
        #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: dir + "/outage") }, "the page never showed the outage")
        try procs.start("coord-again", coordPath, serve)
        try #require(waitUntil(timeout: 60) { !page.isRunning }, "the browser did not finish")
        let out = try String(contentsOfFile: procs.out("browser"), encoding: .utf8)
        let seen = try #require(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], "\(out) \((try? String(contentsOfFile: procs.log("browser"), encoding: .utf8)) ?? "")")
        let outage = seen["outage"] as? [String: Any], back = seen["back"] as? [String: Any]
        #expect((outage?["status"] as? String)?.hasPrefix("no answer from 127.0.0.1:\(port): the coordinator is stopped or restarting") == true, "\(out)")
        #expect(back != nil && (back?["runs"] as? Int ?? 0) >= 1, "the page did not come back by itself: \(out)")
        #expect((back?["status"] as? String)?.contains(nothingRunning ? "0 running runs" : "1 running run") == true, "\(out)")
    }

    /// `coord serve --http` + a worker (joining once the page says the run waits for one) render a
    /// 12-item project while Chromium watches the run page
    /// and Prometheus scrapes /metrics every second; then a broken project fails on the page.
    @Test(.enabled(if: clients(haveChromium && havePrometheus), clientsNote))
    func chromiumWatchesALiveRenderAndPrometheusCountsItsStages() throws {
        let dir = temporaryDirectory("dashboard-live")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pipeline = try ClusterTests.project(dir, items: 12, seconds: 3, output: "640x360", preset: "veryfast")
        // One clip named as an Android phone names it: a word longer than its card is wide.
        let phoneName = "VID_20260614_101500123_HDR10PLUS.mp4"
        try FileManager.default.moveItem(atPath: dir + "/c1.mp4", toPath: dir + "/" + phoneName)
        try String(contentsOfFile: pipeline, encoding: .utf8).replacingOccurrences(of: "video: c1.mp4", with: "video: " + phoneName)
            .write(toFile: pipeline, atomically: true, encoding: .utf8)
        let state = dir + "/state"
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:0", "--state", state, "--http", "127.0.0.1:0"])
        let endpoint = try procs.endpoint(of: "coord")
        let base = try Self.dashboardURL(procs, "coord")
        #expect(try Self.get(base, "/healthz").status == 200)
        #expect(waitUntil(timeout: 10) { (try? Self.get(base, "/readyz").status) == 200 }, "ready once bound")

        // Prometheus, scraping every second.
        let port = base.split(separator: ":").last!
        try """
            global: { scrape_interval: 1s, evaluation_interval: 1s }
            scrape_configs:
              - job_name: threadline
                static_configs: [{ targets: ["127.0.0.1:\(port)"] }]
            """.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        let promPort = 19090 + Int.random(in: 0..<800)
        try procs.start("prometheus", "/usr/bin/prometheus", ["--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/tsdb",
                                                               "--web.listen-address=127.0.0.1:\(promPort)", "--log.level=warn"])
        let prom = "http://127.0.0.1:\(promPort)"

        // The run page is open (one page load) before the run exists; it watches the whole render.
        let shots = dir + "/screenshots"
        try FileManager.default.createDirectory(atPath: shots, withIntermediateDirectories: true)
        try procs.start("browser", Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "live-run", base, "1", shots])
        #expect(waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: shots + "/page-open") }, "the browser opened the page")
        let submit = try startQuietly(coordPath, ["submit", pipeline, "--coordinator", endpoint, "--json"])
        // No worker yet: the page says the run waits for one (as `coord submit` does); then one joins.
        #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: shots + "/waiting") }, "the run page said it waits for a worker")
        try procs.start("worker", workerPath, ["--connect", endpoint, "--pipelines", "2", "--threads", "1", "--store", dir + "/worker-store"])
        submit.waitUntilExit()
        procs.process("browser")?.waitUntilExit()
        let watched = (out: (try? String(contentsOfFile: procs.out("browser"), encoding: .utf8)) ?? "",
                       err: (try? String(contentsOfFile: procs.log("browser"), encoding: .utf8)) ?? "")
        #expect(submit.terminationStatus == 0)
        let seen = try #require(try JSONSerialization.jsonObject(with: Data(watched.out.utf8)) as? [String: Any], "browser: \(watched.err)")
        let states = seen["states"] as? [String] ?? []
        #expect(states.first == "running" && states.last == "succeeded", "states seen on one page load: \(states)")
        #expect((seen["progress"] as? [String] ?? []).count >= 3, "progress advanced without reload: \(seen["progress"] ?? "")")
        #expect(seen["reloaded"] as? Bool == false)
        let etas = seen["etas"] as? [String] ?? []
        #expect(etas.first == "waiting for a worker to join" && etas.count >= 2, "the time left said it waited, then counted down: \(etas)")
        #expect(seen["gantt_waiting"] as? String == "No attempt has started yet.", "the chart while it waited (once an empty 0–0.001 s axis): \(seen)")
        #expect((seen["gantt_rows"] as? Int ?? 0) >= 2, "bars per worker slot: \(seen)")
        #expect((seen["gantt_bars"] as? Int ?? 0) >= 12 * 2 + 1, "a bar per fetch and render, and the concat")
        // Bars are painted at their own length (a page style once capped every one at 220 px).
        #expect(((seen["gantt_widest"] as? NSNumber)?.doubleValue ?? 0) > 300, "zoomed in, some bar is wide: \(seen)")
        #expect((seen["gantt_misdrawn"] as? [Any])?.isEmpty == true, "bars painted at another width than given: \(seen)")
        #expect(seen["posters"] as? Int == 12, "every item's poster loaded: \(seen)")
        #expect(seen["posters_kept"] as? String == "12/12", "a live redraw made the posters anew (black until decoded again): \(seen["posters_kept"] ?? "")")
        #expect(seen["movie_kept"] as? Bool == true, "a live redraw made the movie anew (its playback lost): \(seen["movie_kept"] ?? "")")
        // The ended run's page is not drawn again when nothing on it changed: a selection stays.
        let selected = seen["selected"] as? [String: String] ?? [:]
        #expect(selected["before"] == dir + "/out.mp4" && selected["after"] == selected["before"],
                "the output path selected on the page, then a refresh with nothing new: \(selected)")
        // Until played, the player shows the movie's poster, not black (with preload="metadata",
        // Chromium painted no frame): looked at in the screenshot, inside the controls' margin.
        #expect(seen["movie_poster"] as? String == "640x360", "the movie's poster: \(seen["movie_poster"] ?? "")")
        if let box = (seen["movie_box"] as? [NSNumber])?.map(\.doubleValue), box.count == 4, box[2] > 0, box[3] > 0 {
            let shot = try playerFrame(shots + "/run-finished.png", frame: 0)
            let (w, h) = (Double(shot.width), Double(shot.height))
            let player = rgbMeans(shot, x0: (box[0] + box[2] * 0.1) / w, x1: (box[0] + box[2] * 0.9) / w,
                                  y0: (box[1] + box[3] * 0.1) / h, y1: (box[1] + box[3] * 0.7) / h)
            #expect(max(player.r, player.g, player.b) > 40, "the player is black until played: \(player) in \(box)")
        } else {
            Issue.record("the movie's player is not on the page: \(seen["movie_box"] ?? "")")
        }
        #expect((seen["captions_cut"] as? [Any])?.isEmpty == true, "item captions cut off at their card's edge: \(seen["captions_cut"] ?? "")")
        let movie = try ffprobe(dir + "/out.mp4")
        let videoDuration = seen["video_duration"] as? Double ?? 0
        #expect(abs(videoDuration - movie.duration) < 0.05, "<video> duration \(videoDuration) vs the movie's \(movie.duration)")
        #expect((seen["lineage_items"] as? Int ?? 0) >= 12 + 12 + 1, "lineage from the movie to segments and sources")
        // Drawn as a tree: each source right under its item's segment (it was drawn by depth, every
        // source under the last segment).
        let tree = (seen["lineage_tree"] as? [String] ?? []).map { line in (indent: Double(line.prefix { $0 != " " }) ?? -1, text: String(line.drop { $0 != " " }.dropFirst())) }
        let sources = tree.indices.filter { tree[$0].text.hasPrefix("source of item ") }
        #expect(sources.count == 12, "\(tree)")
        for k in sources {
            let parent = tree[..<k].last { $0.indent < tree[k].indent }
            #expect(parent?.text == tree[k].text.replacingOccurrences(of: "source", with: "segment"), "\(tree[k].text) is drawn under \(parent?.text ?? "nothing"): \(tree)")
        }

        // A project with two broken files: its error names each with the pipeline's file:line, and
        // is not headed by one of the two as if it were the only one. One file's name is long and
        // has no space: the page wraps it rather than grow wider than the window.
        let long = String(repeating: "IMG_20260614_", count: 14) + "broken2.mp4"
        try Data("not a movie at all".utf8).write(to: URL(fileURLWithPath: dir + "/broken.mp4"))
        try Data("nor is this one".utf8).write(to: URL(fileURLWithPath: dir + "/" + long))
        try writePipeline(dir + "/bad.yaml", output: dir + "/bad.mp4", clips: ["video: c0.mp4", "video: broken.mp4", "video: " + long])
        let bad = try run(coordPath, ["submit", dir + "/bad.yaml", "--coordinator", endpoint], timeout: 120)
        #expect(bad.status != 0)
        let failed = try run(Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "failed-run", base, "2", shots], timeout: 120)
        let page = try #require(try JSONSerialization.jsonObject(with: Data(failed.out.utf8)) as? [String: Any], "browser: \(failed.err)")
        let error = page["error"] as? String ?? ""
        #expect(page["state"] as? String == "failed")
        #expect(error.hasPrefix("2 items failed:"), "\(error)")
        #expect(error.contains("broken.mp4") && error.contains("bad.yaml:10:"), "the page names the file and the pipeline line: \(error)")
        #expect(error.contains("broken2.mp4") && error.contains("bad.yaml:11:"), "the page names the file and the pipeline line: \(error)")
        #expect(page["overflow"] as? Int == 0, "the page is wider than the window by \(page["overflow"] ?? "?") px")
        // An item card shows its place in the pipeline in the error's colour only when the item
        // failed; the rendered one's is muted (every card's was red).
        let cards = (page["item_locations"] as? [[String]]) ?? []
        #expect(cards.count == 3 && cards.filter { $0[0] == "failed" }.count == 2, "\(cards)")
        #expect(cards.allSatisfy { $0[1] == ($0[0] == "failed" ? "rgb(255, 161, 152)" : "rgb(139, 148, 161)") }, "\(cards)")
        let farm = try run(Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "farm", base, shots], timeout: 120)
        let farmPage = try #require(try JSONSerialization.jsonObject(with: Data(farm.out.utf8)) as? [String: Any], "browser: \(farm.err)")
        #expect((farmPage["runs"] as? [Any])?.count == 2 && farmPage["workers"] as? Int == 1, "\(farmPage)")
        #expect((farmPage["status"] as? String ?? "").contains("1 worker"), "\(farmPage)")
        #expect((farmPage["failures"] as? Int ?? 0) >= 1)
        // On a phone (390 px): no page is wider than the window (a table scrolls on its own, a
        // sha256 breaks), and the runs table shows each run's state, items, duration and time
        // left without scrolling. Before, the farm page was 776 px wide and the run page 554.
        let phone = try run(Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "narrow", base, shots, "1", "2"], timeout: 120)
        let phonePages = try #require(try JSONSerialization.jsonObject(with: Data(phone.out.utf8)) as? [String: [String: Any]], "browser: \(phone.err)")
        #expect(phonePages.count == 3 && phonePages.values.allSatisfy { $0["overflow"] as? Int == 0 }, "\(phonePages)")
        #expect(phonePages["/"]?["headings"] as? [String] == ["Run", "State", "Items", "Duration", "ETA"], "\(phonePages)")

        // Prometheus's view equals lineage's counts.
        let outcomes = try FarmReader(path: state + "/lineage.db").stageOutcomes()
        var fromPrometheus: [String: Int] = [:]
        let matched = waitUntil(timeout: 15) {
            guard let a = try? Self.get(prom, "/api/v1/query?query=threadline_stages_total"),
                  let j = try? a.json() as? [String: Any], let data = j["data"] as? [String: Any], let result = data["result"] as? [[String: Any]] else { return false }
            fromPrometheus = [:]
            for r in result {
                let m = r["metric"] as? [String: String] ?? [:]
                let v = Int(((r["value"] as? [Any])?.last as? String) ?? "") ?? -1
                fromPrometheus["\(m["kind"] ?? "")/\(m["outcome"] ?? "")"] = v
            }
            return fromPrometheus == outcomes
        }
        #expect(matched, "Prometheus \(fromPrometheus) vs lineage \(outcomes)")
        let metrics = try Self.get(base, "/metrics")
        for family in ["threadline_stages_total", "threadline_stage_duration_seconds_bucket", "threadline_queue_depth", "threadline_slots{state=\"busy\"}",
                       "threadline_slots{state=\"free\"}", "threadline_workers", "threadline_runs{state=\"succeeded\"}", "threadline_cache_hits_total",
                       "threadline_lineage_write_seconds_bucket", "threadline_lineage_up 1"] {
            #expect(metrics.text.contains(family), "/metrics has \(family)")
        }
        // The bytes the farm moved: the project's clips up from the submitter and out to the
        // worker (its own store), the segments back, the movie down.
        let clips = try (0..<12).reduce(Int64(0)) { sum, i in
            sum + ((try FileManager.default.attributesOfItem(atPath: dir + (i == 1 ? "/" + phoneName : "/c\(i).mp4"))[.size] as? NSNumber)?.int64Value ?? 0)
        }
        for direction in ["received", "sent"] {
            let line = metrics.text.split(separator: "\n").first { $0.hasPrefix("threadline_transfer_bytes_total{direction=\"\(direction)\"}") }
            let bytes = line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) } ?? 0
            #expect(bytes >= Double(clips), "\(direction): \(line ?? "none") against \(clips) bytes of clips")
        }
        try metrics.body.write(to: URL(fileURLWithPath: dir + "/metrics.txt"))
        let lint = try run("/bin/sh", ["-c", "promtool check metrics < '\(dir)/metrics.txt'"])
        #expect(lint.status == 0 && lint.out.isEmpty && lint.err.isEmpty, "promtool: \(lint.out) \(lint.err)")
        Self.keepScreenshots(shots)
    }

    /// Leaves screenshots where a person can look at them after the run (.build/dashboard-screenshots).
    static func keepScreenshots(_ dir: String) {
        let keep = repositoryRoot + "/.build/dashboard-screenshots"
        try? FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
        for f in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            try? FileManager.default.removeItem(atPath: keep + "/" + f)
            try? FileManager.default.copyItem(atPath: dir + "/" + f, toPath: keep + "/" + f)
        }
    }
}

extension DashboardTests {
    // MARK: Datasette and Grafana's SQL

    /// Datasette serves the live lineage.db during a render: every documented view and canned
    /// query answers, never "database is locked", and the coordinator's longest write stays small.
    @Test(.enabled(if: clients(haveDatasette), clientsNote))
    func datasetteReadsTheLiveLineageWhileItIsWritten() throws {
        let dir = temporaryDirectory("dashboard-datasette")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pipeline = try ClusterTests.project(dir, items: 12, seconds: 3, output: "1280x720", preset: "veryfast")
        let state = dir + "/state"
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("render", coordPath, ["submit", pipeline, "--state", state, "--workers", "2"])
        #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: state + "/lineage.db") })
        let port = 18001 + Int.random(in: 0..<900)
        try procs.start("datasette", repositoryRoot + "/.build/test-venv/bin/datasette",
                        ["serve", state + "/lineage.db", "--port", "\(port)", "--host", "127.0.0.1",
                         "--metadata", repositoryRoot + "/docker/datasette/metadata.yaml", "--setting", "sql_time_limit_ms", "5000"])
        let base = "http://127.0.0.1:\(port)"
        #expect(waitUntil(timeout: 30) { (try? Self.get(base, "/-/versions.json").status) == 200 }, "datasette starts")
        let views = ["v_runs", "v_stages", "v_attempts", "v_workers", "v_worker_slots", "v_failures", "v_artifact_inputs", "v_lineage"]
        let queries = ["running_runs", "recent_runs", "failures", "slowest_stages", "cache_hit_rate", "workers", "movie_lineage?output_id=1"]
        var asked = 0, duringRender = 0
        var problems: [String] = []
        repeat {
            let rendering = procs.process("render")?.isRunning == true
            for v in views.map({ "/lineage/\($0).json?_shape=array&_size=100" }) + queries.map({ "/lineage/\($0.contains("?") ? $0.replacingOccurrences(of: "?", with: ".json?") : $0 + ".json")" }) {
                let a = try Self.get(base, v)
                asked += 1
                if rendering { duringRender += 1 }
                if a.status != 200 || a.text.contains("database is locked") { problems.append("\(v) → \(a.status) \(a.text.prefix(200))") }
            }
        } while procs.process("render")?.isRunning == true
        procs.process("render")?.waitUntilExit()
        #expect(procs.process("render")?.terminationStatus == 0)
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        #expect(duringRender >= views.count, "queries ran during the render: \(duringRender) of \(asked)")
        let writes = try LineageStore.readRows(path: state + "/lineage.db", "SELECT message FROM event WHERE kind = 'lineage.writes' ORDER BY id DESC LIMIT 1")
        let message = writes.first?["message"] ?? ""
        let maxMs = Double(message.split(separator: "=").last ?? "") ?? 1e9
        #expect(maxMs <= 100, "the coordinator's longest lineage write: \(message)")

        // Every Grafana panel's SQL runs against this real lineage.db.
        let dashboard = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: repositoryRoot + "/docker/grafana/dashboards/threadline.json"))) as? [String: Any]
        let panels = try #require(dashboard?["panels"] as? [[String: Any]])
        #expect(panels.count >= 4)
        for panel in panels {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                let sql = try #require(target["rawQueryText"] as? String)
                do {
                    let rows = try LineageStore.readRows(path: state + "/lineage.db", sql)
                    // A render that succeeded has no failures to show; every other panel has rows.
                    #expect(!rows.isEmpty || sql.contains("v_failures"), "panel \(panel["title"] ?? "") returns rows after a render")
                } catch { Issue.record("panel \(panel["title"] ?? ""): \(error)") }
            }
        }
    }

    // MARK: cost and scale

    /// A page polling the API at 10 Hz beside a 24-item render costs the machine at most a tenth
    /// of what the render costs, and the WAL stays small. (With 12 items, alone the figures were
    /// those of 24, but inside the whole suite the polled renders ran 10-13 % slower than the
    /// undisturbed ones against 2 % with 24: too near the bound of 25 %. The 24 items encode with
    /// x264's ultrafast preset: the renders take half as long and still keep both cores busy, so
    /// a polled render is expected to be slower by about the share, 6-7 %; in two runs of the
    /// whole suite the pair ratios' medians were 1.09 and 1.11.)
    @Test(.enabled(if: clients(haveChromium), clientsNote))
    func pollingAtTenHertzBarelySlowsARender() throws {
        let dir = temporaryDirectory("dashboard-poll")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try ClusterTests.project(dir, items: 24, seconds: 2, output: "1280x720", preset: "ultrafast")
        // Pairs of renders, one undisturbed and one polled, in alternating order. Both renders of
        // a pair have a dashboard serving the state folder, started before the render as a farm's
        // is; only the page polling it differs. On two cores the render uses the whole machine, so
        // what the dashboard and the page spend is taken from it: that CPU time, against the
        // render's own (its processes and workers), is the figure. Wall times move by ±15 % from
        // one render to the next here, polled or not: their ratio is shown, and bounded only
        // against a gross slowdown (a reader holding the writer up would show there).
        var undisturbed: [Double] = [], polled: [Double] = [], ratios: [Double] = [], shares: [Double] = [], maxWAL: Int64 = 0
        for pair in 0..<3 {
            var times: [Bool: Double] = [:]
            for poll in pair % 2 == 0 ? [false, true] : [true, false] {
                let round = pair * 2 + (poll ? 1 : 0)
                let state = dir + "/state-\(round)"
                let procs = ServiceProcesses(directory: dir + "/r\(round)")
                try FileManager.default.createDirectory(atPath: procs.directory, withIntermediateDirectories: true)
                defer { procs.stopAll() }
                try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
                _ = try LineageStore(path: state + "/lineage.db")
                try procs.start("dashboard", coordPath, ["dashboard", "--state", state, "--http", "127.0.0.1:0"])
                let base = try Self.dashboardURL(procs, "dashboard")
                if poll {
                    try procs.start("poller", Self.venvPython, [repositoryRoot + "/Tests/Clients/poll.py", base, "10"])
                    // Measured from its first round on: Python starting up (0.03-0.04 CPU-s here)
                    // is not polling's cost.
                    try #require(waitUntil(timeout: 20) { ((try? String(contentsOfFile: procs.out("poller"), encoding: .utf8)) ?? "").contains("polling") },
                                 "the poller did not start: \((try? String(contentsOfFile: procs.log("poller"), encoding: .utf8)) ?? "")")
                }
                let served = { ["dashboard", "poller"].compactMap { procs.process($0).map { Self.cpuSeconds($0.processIdentifier) } }.reduce(0, +) }
                let served0 = served(), render0 = Self.childrenCPUSeconds()
                let t0 = Date()
                try procs.start("render", coordPath, ["submit", dir + "/p.yaml", "--state", state, "--workers", "2"])
                while procs.process("render")?.isRunning == true {
                    let wal = ((try? FileManager.default.attributesOfItem(atPath: state + "/lineage.db-wal"))?[.size] as? NSNumber)?.int64Value ?? 0
                    maxWAL = max(maxWAL, wal)
                    usleep(50_000)
                }
                let seconds = Date().timeIntervalSince(t0)
                // The render and its workers are reaped: their CPU time is in this process's children's.
                let renderCPU = Self.childrenCPUSeconds() - render0
                #expect(procs.process("render")?.terminationStatus == 0)
                times[poll] = seconds
                if poll {
                    // Both still serving and polling, and each measured: a share of 0 would say nothing.
                    let servedCPU = served() - served0
                    #expect(procs.process("poller")?.isRunning == true && servedCPU > 0 && renderCPU > seconds / 2,
                            "dashboard and page \(servedCPU) s, render \(renderCPU) s of CPU in \(seconds) s")
                    polled.append(seconds)
                    shares.append(servedCPU / renderCPU)
                } else { undisturbed.append(seconds) }
            }
            ratios.append(times[true]! / times[false]!)
        }
        let ratio = ratios.sorted()[ratios.count / 2], share = shares.sorted()[shares.count / 2]
        func list(_ v: [Double]) -> String { v.map { String(format: "%.3f", $0) }.joined(separator: "/") }
        print(String(format: "polling at 10 Hz: dashboard and page CPU / render CPU %@, median %.3f; render wall undisturbed %@ s, polled %@ s, pair ratios %@, median %.3f, largest WAL %.1f MB",
                     list(shares), share, list(undisturbed), list(polled), list(ratios), ratio, Double(maxWAL) / 1e6))
        #expect(share <= 0.1, "the dashboard and its page took \(list(shares)) of the render's CPU time")
        #expect(ratio <= 1.25, "polled \(polled) vs undisturbed \(undisturbed)")
        #expect(maxWAL <= 64 << 20)
    }

    /// User and system CPU seconds a live process has used (/proc/PID/stat), 0 when it is gone.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        // After the command's name: state is field 3, utime 14 and stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU seconds of this process's children that have ended and been waited for, theirs included.
    static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// A scrape whose lineage read fails says so (`threadline_lineage_up 0`) and keeps the last
    /// run counts; it used to report zero runs in every state.
    @Test func aScrapeThatCannotReadLineageSaysSoInsteadOfReportingNoRuns() throws {
        struct Locked: Error {}
        let exporter = FarmExporter()
        let read = String(decoding: exporter.scrape(live: nil, runs: .success(["running": 2, "succeeded": 5])), as: UTF8.self)
        #expect(read.contains("threadline_lineage_up 1"))
        #expect(read.contains("threadline_runs{state=\"running\"} 2"))
        let failed = String(decoding: exporter.scrape(live: nil, runs: .failure(Locked())), as: UTF8.self)
        #expect(failed.contains("threadline_lineage_up 0"))
        #expect(failed.contains("threadline_runs{state=\"running\"} 2") && failed.contains("threadline_runs{state=\"succeeded\"} 5"), "\(failed)")
    }

    /// 1,000 runs / 100,000 stages: the run list in < 100 ms, a 5,000-attempt run's attempts in
    /// < 200 ms, and Chromium draws that run's Gantt in < 1 s, opened from the farm page.
    @Test func aThousandRunsAnswerQuickly() throws {
        let dir = temporaryDirectory("dashboard-scale")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        _ = try LineageStore(path: state + "/lineage.db")
        try Self.synthesize(state + "/lineage.db", runs: 1000, stagesPerRun: 100, bigRunAttempts: 5000)
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("dashboard", coordPath, ["dashboard", "--state", state, "--http", "127.0.0.1:0"])
        let base = try Self.dashboardURL(procs, "dashboard")
        _ = try Self.get(base, "/api/runs")   // warm
        let list = (0..<5).map { _ in (try? Self.get(base, "/api/runs")) }.compactMap { $0 }
        let attempts = (0..<5).map { _ in (try? Self.get(base, "/api/runs/1000/attempts")) }.compactMap { $0 }
        let listRuns = (try? list.first?.json() as? [Any])?.count ?? 0
        let attemptCount = (try? attempts.first?.json() as? [Any])?.count ?? 0
        #expect(listRuns == 1000 && attemptCount == 5000)
        let listMedian = list.map(\.seconds).sorted()[2], attemptsMedian = attempts.map(\.seconds).sorted()[2]
        print(String(format: "1,000 runs / 100,000 stages: /api/runs median %.1f ms, 5,000 attempts median %.1f ms", listMedian * 1000, attemptsMedian * 1000))
        #expect(listMedian < 0.1)
        #expect(attemptsMedian < 0.2)
        if Self.clients(Self.haveChromium) {
            let shots = dir + "/screenshots"
            try FileManager.default.createDirectory(atPath: shots, withIntermediateDirectories: true)
            let r = try run(Self.venvPython, [repositoryRoot + "/Tests/Clients/cdp.py", "gantt-time", base, "1000", shots], timeout: 120)
            let seen = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "browser: \(r.err)")
            print("Chromium drew the 5,000-attempt Gantt in \(seen["seconds"] ?? "?") s from the farm page, \(seen["cold_seconds"] ?? "?") s as a fresh browser's first page")
            #expect(seen["bars"] as? Int == 5000)
            // A bar's tooltip is filled in as the pointer comes over it and hidden off the bars;
            // no bar carries a <title> of its own (5,000 of them slowed the drawing).
            #expect(seen["tooltip_before_hover"] as? String == "" && seen["tooltip_after_leaving"] as? String == "" && seen["titles"] as? Int == 0, "\(seen)")
            #expect(seen["tooltip"] as? String == "fetch/0 · attempt 1 · failed · 0.4 s", "\(seen)")
            #expect((seen["seconds"] as? Double ?? 99) < 1.0)
            // A just-started browser also starts its renderer and compiles the script: a bound
            // that catches the page getting far slower, not a goal (0.7 s here, 1.2 s once on CI).
            #expect((seen["cold_seconds"] as? Double ?? 99) < 2.0)
            Self.keepScreenshots(shots)
        }
    }

    /// Fills a lineage database with `runs` runs of `stagesPerRun` stages; the last run has
    /// `bigRunAttempts` attempts across 8 workers × 4 slots.
    static func synthesize(_ path: String, runs: Int, stagesPerRun: Int, bigRunAttempts: Int) throws {
        let db = try DatabaseQueue(path: path)
        try db.write { db in
            let t0 = Date().timeIntervalSince1970 - Double(runs) * 60
            let kinds = ["fetch", "decode", "transform", "encode", "concat"]
            for w in 0..<8 {
                try db.execute(sql: "INSERT INTO worker (id, host, pid, slots, version, first_seen, last_seen, state) VALUES (?, ?, 1, 4, 'x', ?, ?, 'gone')",
                               arguments: ["w\(w)", "host\(w)", t0, t0])
            }
            for r in 1...runs {
                let start = t0 + Double(r) * 60
                let items = stagesPerRun / 5
                try db.execute(sql: """
                    INSERT INTO run (id, name, pipeline_path, pipeline_sha256, pipeline_text, output_path, submitted_at, finished_at, state)
                    VALUES (?, ?, '/p.yaml', 'x', '', '/out.mp4', ?, ?, 'running')
                    """, arguments: [r, "project \(r)", start, r == runs ? nil : start + 50])
                for i in 0..<items {
                    try db.execute(sql: "INSERT INTO item (run_id, idx, kind, label, params_json) VALUES (?, ?, 'video', ?, '{}')", arguments: [r, i, "clip \(i)"])
                }
                for s in 0..<stagesPerRun {
                    let kind = kinds[s % 5]
                    try db.execute(sql: "INSERT INTO stage (run_id, item_idx, name, kind, state, cached, started_at, finished_at, seconds) VALUES (?, ?, ?, ?, 'succeeded', ?, ?, ?, 1)",
                                   arguments: [r, s / 5, "\(kind)/\(s / 5)", kind, s % 3 == 0 ? 1 : 0, start, start + 1])
                }
                // Ended once its stages are, as a coordinator records it.
                if r < runs { try db.execute(sql: "UPDATE run SET state = ? WHERE id = ?", arguments: [r % 17 == 0 ? "failed" : "succeeded", r]) }
            }
            let big = Int64(runs)
            let stageIDs = try Int64.fetchAll(db, sql: "SELECT id FROM stage WHERE run_id = ?", arguments: [big])
            let start = t0 + Double(runs) * 60
            for a in 0..<bigRunAttempts {
                let w = a % 8, slot = (a / 8) % 4
                let d = start + Double(a / 32) * 0.5
                try db.execute(sql: """
                    INSERT INTO attempt (stage_id, attempt_no, worker_id, slot, lease, dispatched_at, started_at, finished_at, state)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [stageIDs[a % stageIDs.count], a / stageIDs.count + 1, "w\(w)", slot, "lease-\(a)", d, d + 0.01, d + 0.45, a % 50 == 0 ? "failed" : (a % 7 == 0 ? "cached" : "succeeded")])
            }
        }
    }
}
