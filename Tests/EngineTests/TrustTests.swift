import Foundation
import Logging
import Testing
import ThreadlineCore
@testable import Transport
import Lineage
@testable import Engine
@testable import Farm
import Media
import TestSupport

/// Trust boundaries (issue 16): who may do what on a farm, what a submission may touch, and what
/// the CLI refuses before it renders. Each test reproduces a finding with the real binaries, or
/// speaks the wire protocol directly to play a hostile submitter or worker.
@Suite(.serialized) struct TrustTests {
    static func publicKey(_ file: String) throws -> String { try CurveKeyPair.load(file).publicKey }

    /// A farm with keys: `coord keygen` for the coordinator and each name in `lists`, each name's
    /// .pub in its role's allow-list folder (`workers`, `submitters`, `admins`: `--allow-<folder>`),
    /// and `coord serve` started with them. `as(who)` gives a client's flags for that key.
    struct KeyedFarm {
        let dir: String, keys: String, procs: ServiceProcesses, ep: String
        var db: String { dir + "/coord/lineage.db" }

        init(_ dir: String, _ lists: [(folder: String, names: [String])], serveArgs: [String] = [], environment: [String: String] = [:]) throws {
            self.dir = dir; keys = dir + "/keys"
            var made: Set<String> = []   // a key may be in several lists (an operator who also submits)
            for name in ["coordinator"] + lists.flatMap(\.names) where made.insert(name).inserted {
                #expect(try run(coordPath, ["keygen", name, "--dir", dir + "/keys"]).status == 0)
            }
            var allow: [String] = []
            for (folder, names) in lists {
                try FileManager.default.createDirectory(atPath: "\(dir)/\(folder)", withIntermediateDirectories: true)
                for n in names { try FileManager.default.copyItem(atPath: "\(dir)/keys/\(n).pub", toPath: "\(dir)/\(folder)/\(n).pub") }
                allow += ["--allow-\(folder)", "\(dir)/\(folder)"]
            }
            procs = ServiceProcesses(directory: dir)
            try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:*", "--state", dir + "/coord",
                                                 "--curve-secret-key", dir + "/keys/coordinator.key"] + allow + serveArgs,
                             environment: environment)
            ep = try procs.endpoint(of: "coord")
        }

        func `as`(_ who: String) -> [String] {
            ["--coordinator", ep, "--curve-secret-key", "\(keys)/\(who).key", "--coordinator-key", keys + "/coordinator.pub"]
        }

        /// A worker's flags with `who`'s key and its own store.
        func worker(_ who: String, id: String? = nil) -> [String] {
            ["--connect", ep, "--store", dir + "/\(who)-store", "--id", id ?? who, "--curve-secret-key", "\(keys)/\(who).key",
             "--coordinator-key", keys + "/coordinator.pub"]
        }
    }

    // MARK: roles and owners

    /// A worker key cannot submit and a submitter key cannot register as a worker (it gets no
    /// work); runs belong to the key that submitted them: another submitter's status, wait
    /// --output and cancel are refused and `coord runs` lists only your own; an admin sees all.
    @Test func rolesKeepWorkersSubmittersAndOwnersApart() throws {
        let dir = temporaryDirectory("roles")
        let farm = try KeyedFarm(dir, [("workers", ["worker"]), ("submitters", ["alice", "bob"]), ("admins", ["operator"])])
        let (keys, procs, ep, db) = (farm.keys, farm.procs, farm.ep, farm.db)
        defer { procs.stopAll() }
        let pipeline = try ClusterTests.project(dir, items: 2, seconds: 0.5, size: (160, 120), output: "320x180")
        func key(_ who: String) -> [String] { farm.as(who) + ["--timeout", "5"] }

        // Alice's key as a worker: refused at hello, so it never holds a slot.
        try procs.start("impostor", workerPath, ["--connect", ep, "--store", dir + "/wi", "--id", "impostor",
                                                 "--curve-secret-key", keys + "/alice.key", "--coordinator-key", keys + "/coordinator.pub"])
        // The worker key cannot submit.
        let w = try run(coordPath, ["submit", pipeline] + key("worker"), timeout: 60)
        #expect(w.status != 0 && w.err.contains("may not submit"), "\(w.err)")

        let a = try run(coordPath, ["submit", pipeline, "--detach"] + key("alice"), timeout: 60)
        #expect(a.status == 0, "\(a.err)")
        Thread.sleep(forTimeInterval: 2)
        #expect(try ClusterTests.rows(db, "SELECT count(*) AS n FROM worker").first?["n"] == "0", "a submitter's key registered as a worker")
        #expect(try ClusterTests.rows(db, "SELECT count(*) AS n FROM attempt").first?["n"] == "0", "the impostor got work")
        let impostorLog = (try? String(contentsOfFile: procs.log("impostor"), encoding: .utf8)) ?? ""
        #expect(impostorLog.contains("refused this worker"), "\(impostorLog.suffix(500))")
        #expect(try ClusterTests.rows(db, "SELECT owner_key FROM run WHERE id = 1").first?["owner_key"] == Self.publicKey(keys + "/alice.pub"))

        // Bob may not see, download or cancel Alice's run, and does not see it listed.
        let status = try run(coordPath, ["status", "1"] + key("bob"), timeout: 30)
        #expect(status.status != 0 && status.err.contains("no run 1 of yours"), "\(status.err)")
        let steal = try run(coordPath, ["wait", "1", "--output", dir + "/stolen.mp4"] + key("bob"), timeout: 30)
        #expect(steal.status != 0 && !FileManager.default.fileExists(atPath: dir + "/stolen.mp4"), "\(steal.err)")
        let cancel = try run(coordPath, ["cancel", "1"] + key("bob"), timeout: 30)
        #expect(cancel.status != 0 && cancel.err.contains("no run 1 of yours"), "\(cancel.err)")
        let bobRuns = try run(coordPath, ["runs"] + key("bob"), timeout: 30)
        #expect(bobRuns.status == 0 && !bobRuns.out.contains("queued") && !bobRuns.out.contains("running") && bobRuns.out.isEmpty, "\(bobRuns.out)")
        // Nothing printed says why, on standard error (standard output stays the runs alone).
        // (With the key flags: this farm refuses a submit without them.)
        #expect(bobRuns.err.contains("no runs to list on \(ep): coord submit pipeline.yaml \(farm.as("bob").joined(separator: " ")) renders one"), "\(bobRuns.err)")
        // Alice's, waiting for a worker, has no seconds yet: "-" (it said " s").
        let waiting = try run(coordPath, ["runs"] + key("alice"), timeout: 30)
        let fields = waiting.out.split(separator: "\t", omittingEmptySubsequences: false)
        #expect(waiting.status == 0 && fields.count == 6 && fields[0] == "1" && fields[3] == "-", "\(waiting.out)")

        // A real worker renders it; Alice downloads her movie; the operator sees every run.
        try procs.start("worker", workerPath, ["--connect", ep, "--store", dir + "/ww", "--id", "w1",
                                               "--curve-secret-key", keys + "/worker.key", "--coordinator-key", keys + "/coordinator.pub"])
        let mine = try run(coordPath, ["wait", "1", "--output", dir + "/alice.mp4"] + key("alice"), timeout: 120)
        #expect(mine.status == 0 && FileManager.default.fileExists(atPath: dir + "/alice.mp4"), "\(mine.err)")
        let opRuns = try run(coordPath, ["runs"] + key("operator"), timeout: 30)
        #expect(opRuns.out.contains("1\tsucceeded"), "\(opRuns.out)")
        let aliceRuns = try run(coordPath, ["runs"] + key("alice"), timeout: 30)
        #expect(aliceRuns.out.contains("1\tsucceeded"), "\(aliceRuns.out)")
        // A long list is cut to the most recent runs, counting only those the key may see.
        for _ in 0..<2 { #expect(try run(coordPath, ["submit", pipeline, "--detach"] + key("bob"), timeout: 60).status == 0) }
        let bobLast = try run(coordPath, ["runs", "--limit", "1"] + key("bob"), timeout: 30)
        #expect(bobLast.out.hasPrefix("3\t") && bobLast.out.split(separator: "\n").count == 1, "\(bobLast.out)")
        #expect(bobLast.err.contains("(the 1 most recent of 2 runs; --limit 0 lists every run)"), "\(bobLast.err)")
        let opLast = try run(coordPath, ["runs", "--limit", "2"] + key("operator"), timeout: 30)
        #expect(opLast.out.split(separator: "\n").map { $0.prefix(2) } == ["2\t", "3\t"] && opLast.err.contains("most recent of 3 runs"),
                "\(opLast.out)\(opLast.err)")
        let opAll = try run(coordPath, ["runs", "--limit", "0"] + key("operator"), timeout: 30)
        #expect(opAll.out.split(separator: "\n").count == 3 && opAll.err.isEmpty, "\(opAll.out)\(opAll.err)")
        #expect(try ClusterTests.rows(db, "SELECT id FROM worker").compactMap { $0["id"] } == ["w1"])
        #expect(procs.process("coord")?.isRunning == true)
    }

    /// An operator removes a worker's key from the allow-list (a host retired, a laptop lost)
    /// while that worker is connected: it gets no more work at once, though ZeroMQ checks keys only
    /// at the handshake, and its log says why. (Before, it kept its session and took every stage
    /// until it happened to reconnect.)
    @Test func aWorkerWhoseKeyIsRemovedWhileConnectedGetsNoMoreWork() throws {
        let dir = temporaryDirectory("revoke")
        let farm = try KeyedFarm(dir, [("workers", ["retired", "w2"]), ("submitters", ["alice"])])
        let (procs, db) = (farm.procs, farm.db)
        defer { procs.stopAll() }
        let pipeline = try ClusterTests.project(dir, items: 2, seconds: 0.5, size: (160, 120), output: "320x180")
        let worker = { (name: String) in farm.worker(name) }
        let coordLog = { (try? String(contentsOfFile: procs.log("coord"), encoding: .utf8)) ?? "" }
        try procs.start("retired", workerPath, worker("retired"))
        try #require(waitUntil(timeout: 20) { coordLog().contains("worker joined") }, "\(coordLog())")

        try FileManager.default.removeItem(atPath: dir + "/workers/retired.pub")
        let removed = Date()
        let retiredLog = { (try? String(contentsOfFile: procs.log("retired"), encoding: .utf8)) ?? "" }
        #expect(waitUntil(timeout: 10) { retiredLog().contains("this worker's key was removed from the coordinator's allow-list") }, "\(retiredLog())")
        #expect(coordLog().components(separatedBy: "a connected key was removed from the allow-lists: its messages as worker are refused").count == 2,
                "said once: \(coordLog())")
        // (Recorded in the turn's commit, which may follow the word to the worker by a moment.)
        #expect(waitUntil(timeout: 5) { (try? ClusterTests.rows(db, "SELECT state FROM worker WHERE id = 'retired'").first?["state"]) == "lost" })

        // A run submitted now waits for a worker rather than going to the retired one, and renders
        // once another joins.
        let submitted = try run(coordPath, ["submit", pipeline, "--detach"] + farm.as("alice"), timeout: 60)
        #expect(submitted.status == 0, "\(submitted.err)")
        Thread.sleep(forTimeInterval: 2)
        #expect(try ClusterTests.rows(db, "SELECT count(*) AS n FROM attempt").first?["n"] == "0", "the retired worker got work")
        try procs.start("w2", workerPath, worker("w2"))
        let waited = try run(coordPath, ["wait", "1", "--output", dir + "/out.mp4"] + farm.as("alice"), timeout: 120)
        #expect(waited.status == 0, "\(waited.err)")
        #expect(try ClusterTests.rows(db, "SELECT DISTINCT worker_id AS w FROM attempt").compactMap { $0["w"] } == ["w2"])
        #expect(procs.process("retired")?.isRunning == true, "the retired worker is told, not crashed")
        // Its hellos go on (its key may come back) but are refused quietly: said once, not as a
        // coordinator lost and found every few seconds.
        // (It says hello again after 5 s of the coordinator's silence: wait for two of those.)
        Thread.sleep(forTimeInterval: max(0, 11 - Date().timeIntervalSince(removed)))
        let said = retiredLog()
        #expect(said.components(separatedBy: "the coordinator refused this worker").count == 2 && !said.contains("lost the coordinator"), "\(said)")
    }

    /// Two people on one farm: Alice submits three projects, then Bob one. The worker's slots go
    /// half to Bob from the start, since each key's runs together get an equal share (before,
    /// shared per run, none of the first eight stages was Bob's: Alice's older runs came first).
    @Test func eachSubmitterGetsAnEqualShareWhateverTheirNumberOfRuns() throws {
        let dir = temporaryDirectory("owners")
        let farm = try KeyedFarm(dir, [("workers", ["worker"]), ("submitters", ["alice", "bob"])], serveArgs: ["--http", "127.0.0.1:0"])
        let (keys, procs) = (farm.keys, farm.procs)
        defer { procs.stopAll() }
        let key = { (who: String) in farm.as(who) }
        // Four projects of distinct clips (nothing shared between them to cache or wait for).
        for (k, (who, name)) in [("alice", "a1"), ("alice", "a2"), ("alice", "a3"), ("bob", "b")].enumerated() {
            try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
            let pipeline = try ClusterTests.project(dir + "/" + name, items: 4, seconds: 0.5, size: (160 + 32 * k, 120), output: "320x180")
            let r = try run(coordPath, ["submit", pipeline, "--detach"] + key(who), timeout: 60)
            #expect(r.status == 0, "\(r.err)")
        }
        try procs.start("worker", workerPath, farm.worker("worker", id: "w1") + ["--pipelines", "2"])
        for (id, who) in [(1, "alice"), (2, "alice"), (3, "alice"), (4, "bob")] {
            let r = try run(coordPath, ["wait", "\(id)", "--output", dir + "/out\(id).mp4"] + key(who), timeout: 120)
            #expect(r.status == 0, "\(r.err)")
        }
        let order = try ClusterTests.rows(farm.db, """
            SELECT s.run_id AS run FROM attempt a JOIN stage s ON s.id = a.stage_id
            WHERE s.kind IN ('fetch', 'encode') ORDER BY a.dispatched_at, a.id LIMIT 8
            """).compactMap { $0["run"] }
        #expect(order.filter { $0 == "4" }.count >= 4, "Bob's share of the first eight stages: \(order)")
        // The dashboard says whose runs they are: the key each came with (the name is the client's word).
        let dashboard = try DashboardTests.dashboardURL(procs, "coord")
        let listed = try #require(try JSONSerialization.jsonObject(with: DashboardTests.get(dashboard, "/api/runs").body) as? [[String: Any]])
        let owners = Dictionary(uniqueKeysWithValues: listed.compactMap { r in (r["id"] as? Int).map { ($0, r["owner_key"] as? String) } })
        let (alice, bob) = (String(try Self.publicKey(keys + "/alice.pub").prefix(8)), String(try Self.publicKey(keys + "/bob.pub").prefix(8)))
        #expect(owners == [1: alice, 2: alice, 3: alice, 4: bob], "\(listed)")
        #expect(listed.allSatisfy { ($0["submitter"] as? String)?.contains("@") == true }, "\(listed)")
    }

    /// One submitter's flood (a script gone wrong submitting the same folder a thousand times)
    /// cannot take the coordinator's memory from everyone: past `--max-stages-per-key` of stages in
    /// unfinished runs its submissions are refused before anything is uploaded, saying why and what
    /// to do; another person still submits, and once a run ends the first may submit again.
    @Test func aSubmitterCannotQueueMoreThanItsShareOfStages() throws {
        let dir = temporaryDirectory("stage-quota")
        let farm = try KeyedFarm(dir, [("submitters", ["alice", "bob", "operator"]), ("admins", ["operator"])], serveArgs: ["--max-stages-per-key", "8"])
        defer { farm.procs.stopAll() }
        // One item: a fetch, a decode, a transform, an encode and the concat, 5 stages. No worker: runs stay unfinished.
        let pipeline = try ClusterTests.project(dir, items: 1, seconds: 0.5, size: (160, 120), output: "320x180")
        let submit = { (who: String) in try run(coordPath, ["submit", pipeline, "--detach"] + farm.as(who) + ["--timeout", "5"], timeout: 60) }
        let first = try submit("alice")
        #expect(first.status == 0, "\(first.err)")
        let second = try submit("alice")
        #expect(second.status == 1 && second.err.contains("this coordinator takes at most 8 stages of unfinished runs a submitter; yours hold 5 and test needs 5")
                && !second.err.contains(": sent "), "\(second.out)\(second.err)")
        #expect(try submit("bob").status == 0, "another submitter is not held back")
        #expect(try submit("operator").status == 0 && submit("operator").status == 0, "an operator (admin) is not limited")
        #expect(try ClusterTests.rows(farm.db, "SELECT count(*) AS n FROM run").first?["n"] == "4")
        // Alice's run cancelled: she may submit again.
        #expect(try run(coordPath, ["cancel", "1"] + farm.as("alice"), timeout: 30).status == 0)
        let again = try submit("alice")
        #expect(again.status == 0, "\(again.err)")
    }

    /// A batch whose submitter reaches its share part-way goes on with the rest: the refused
    /// projects are in the summary with why, the others are followed and their movies written.
    /// Before, the refusal ended the command: the runs already accepted went on at the coordinator
    /// unfollowed and unmentioned, and the projects after it were never submitted.
    @Test func aBatchGoesOnPastAProjectRefusedForItsShare() throws {
        let dir = temporaryDirectory("quota-batch")
        let farm = try KeyedFarm(dir, [("workers", ["worker"]), ("submitters", ["alice"])], serveArgs: ["--max-stages-per-key", "12"])
        defer { farm.procs.stopAll() }
        // Three projects of one item, 5 stages each: the third would make 15.
        var files: [String] = []
        for name in ["a", "b", "c"] {
            try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
            files.append(try ClusterTests.project(dir + "/" + name, items: 1, seconds: 0.5, size: (160, 120), output: "320x180"))
        }
        let submit = try farm.procs.start("submit", coordPath, ["submit"] + files + farm.as("alice") + ["--json"])
        let said = { (try? String(contentsOfFile: farm.procs.log("submit"), encoding: .utf8)) ?? "" }
        // No worker until the batch is in: nothing ends before the third is asked for.
        try #require(waitUntil(timeout: 60) { said().contains("the coordinator refused it") || !submit.isRunning }, "\(said())")
        try farm.procs.start("worker", workerPath, farm.worker("worker"))
        try #require(waitUntil(timeout: 120) { !submit.isRunning }, "\(said())")
        #expect(submit.terminationStatus == 1, "\(said())")
        #expect(said().contains("test (c/p.yaml): the coordinator refused it: this coordinator takes at most 12 stages"), "\(said())")
        let lines = try String(contentsOfFile: farm.procs.out("submit"), encoding: .utf8).split(separator: "\n")
        let objects = try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(objects.map { $0["state"] as? String } == ["succeeded", "succeeded", "refused"], "\(lines)")
        #expect((objects.last?["error"] as? String)?.contains("at most 12 stages") == true, "\(lines)")
        #expect(FileManager.default.fileExists(atPath: dir + "/a/out.mp4") && FileManager.default.fileExists(atPath: dir + "/b/out.mp4"))
    }

    /// A submitter whose key is removed while it follows a run (a laptop lost) stops being told
    /// the run's progress within seconds and is told why; before, a follower sent nothing the
    /// per-message check could refuse, and went on hearing its runs for as long as it liked.
    @Test func aFollowerWhoseKeyIsRemovedIsToldNoMore() throws {
        try Self.removedKeyStopsItsFollower(temporaryDirectory("revoked-follower"))
    }

    /// The test above on a coordinator given `environment`; `beforeRemoving` runs just before the
    /// key is removed.
    static func removedKeyStopsItsFollower(_ dir: String, environment: [String: String] = [:], beforeRemoving: () throws -> Void = {}) throws {
        let farm = try KeyedFarm(dir, [("submitters", ["alice"])], environment: environment)
        defer { farm.procs.stopAll() }
        let pipeline = try ClusterTests.project(dir, items: 1, seconds: 0.5, size: (160, 120), output: "320x180")
        #expect(try run(coordPath, ["submit", pipeline, "--detach"] + farm.as("alice"), timeout: 60).status == 0)
        let follower = try farm.procs.start("wait", coordPath, ["wait", "1"] + farm.as("alice"))
        #expect(waitUntil(timeout: 20) { ((try? String(contentsOfFile: farm.procs.log("wait"), encoding: .utf8)) ?? "").contains("waiting for a worker") })
        try beforeRemoving()
        try FileManager.default.removeItem(atPath: dir + "/submitters/alice.pub")
        let removed = Date()
        try #require(waitUntil(timeout: 10) { !follower.isRunning }, "the follower was still told after 10 s")
        let said = (try? String(contentsOfFile: farm.procs.log("wait"), encoding: .utf8)) ?? ""
        #expect(follower.terminationStatus == 1 && said.contains("this key was removed from the coordinator's allow-list: it may no longer follow runs"), "\(said)")
        #expect(Date().timeIntervalSince(removed) < 6)
    }

    /// The allow-lists are read on the ZAP handler's own thread, never on its callers': a farm of
    /// a thousand keys takes tens of milliseconds to read them (30 ms measured), which every
    /// handshake spent (a thousand workers reconnecting after a restart: 30 s, one after another)
    /// and the coordinator's own thread every 2 s. Handshakes of known keys and the coordinator's
    /// per-message check use the last reading; a removal still takes effect within `maxAge`, a
    /// key just added at once, and a stranger's handshakes cannot keep the folders being read.
    @Test func theAllowListsAreReadOnTheHandlersThreadNotPerHandshake() throws {
        let dir = temporaryDirectory("zap-reading")
        for name in ["a", "b", "stranger"] { #expect(try run(coordPath, ["keygen", name, "--dir", dir + "/keys"]).status == 0) }
        try FileManager.default.createDirectory(atPath: dir + "/workers", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: dir + "/keys/a.pub", toPath: dir + "/workers/a.pub")
        let (a, b, stranger) = (try Self.publicKey(dir + "/keys/a.pub"), try Self.publicKey(dir + "/keys/b.pub"), try Self.publicKey(dir + "/keys/stranger.pub"))
        let context = MessagingContext()
        let zap = try ZapHandler(context: context, domain: "threadline", allow: [.worker: dir + "/workers"], maxAge: 1, unknownKeyReread: 0.5)
        defer { zap.stop() }
        func handshake(_ key: String) -> String {
            String(decoding: zap.answer([Data("1.0".utf8), Data("1".utf8), Data("threadline".utf8), Data("127.0.0.1".utf8), Data(),
                                          Data("CURVE".utf8), Data(CurveKeyPair.decode(key)!)])[2], as: UTF8.self)
        }
        let read = { zap.readings.withLock { $0 } }
        let start = read()
        // Fifty handshakes and a thousand checks of a known key: no reading (one, at most, is the
        // handler's own every second).
        #expect((0..<50).allSatisfy { _ in handshake(a) == "200" })
        #expect((0..<1000).allSatisfy { _ in zap.roles(of: a) == [.worker] })
        #expect(read() - start <= 1, "read \(read() - start) times")
        // Fifty handshakes of a stranger: refused, the lists read again once (and the handler's own).
        let before = read()
        #expect((0..<50).allSatisfy { _ in handshake(stranger) == "400" })
        #expect(read() - before <= 2, "read \(read() - before) times")
        // A key just added works at its handshake (once the last reading is half a second old).
        try FileManager.default.copyItem(atPath: dir + "/keys/b.pub", toPath: dir + "/workers/b.pub")
        Thread.sleep(forTimeInterval: 0.6)
        #expect(handshake(b) == "200")
        // A key removed loses its roles within maxAge: the handler's thread read the lists again.
        try FileManager.default.removeItem(atPath: dir + "/workers/a.pub")
        #expect(waitUntil(timeout: 3, poll: 0.05) { zap.roles(of: a).isEmpty }, "a kept its roles")
        #expect(handshake(a) == "400")
    }

    // MARK: hostile submissions over the wire

    /// Plays a hostile submitter and worker against `coord serve`: a pipeline naming a file on the
    /// coordinator's hosts that it did not upload, a source URL of another protocol, an fps that
    /// overflows the planner, a hello with 300,000 leases or 10⁹ slots. Each is refused with a
    /// reason, nothing of the private file reaches a store, and the coordinator stays up and
    /// renders a normal submission afterwards.
    @Test func hostileSubmissionsAreRefusedAndTheCoordinatorStaysUp() throws {
        let dir = temporaryDirectory("hostile")
        let secret = dir + "/private.mp4"
        try Generate.clip(secret, width: 160, height: 90, seconds: 0.5, tone: 300)
        let pipeline = try ClusterTests.project(dir, items: 1, seconds: 0.5, size: (160, 120), output: "320x180")
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1)
        defer { procs.stopAll() }
        let context = MessagingContext()
        let client = try ClusterClient(endpoint: ep, context: context)
        client.silenceTimeout = 10

        func refusal(_ s: Submission) -> String {
            client.send(.submit(s))
            do {
                let run: Int64 = try client.pump(until: { m in if case .accepted(let r) = m { return r }; return nil })
                return "accepted as run \(run)"
            } catch { return "\(error)" }
        }
        func movie(_ items: [Item], fps: Rational = Rational(30, 1)) -> Pipeline {
            var out = OutputProfile(path: dir + "/evil.mp4", width: 320, height: 180)
            out.fps = fps
            return Pipeline(name: "evil", output: out, items: items)
        }
        let notUploaded = refusal(Submission(pipeline: movie([Item(kind: .video(source: SourceRef(secret), trim: nil))]), files: [], submitter: "m"))
        #expect(notUploaded.contains("neither an uploaded file nor an http(s) URL"), "\(notUploaded)")
        let otherProtocol = refusal(Submission(pipeline: movie([Item(kind: .video(source: SourceRef("concat:\(secret)|\(secret)"), trim: nil))]), files: [], submitter: "m"))
        #expect(otherProtocol.contains("neither an uploaded file"), "\(otherProtocol)")
        let overflow = refusal(Submission(pipeline: movie([Item(kind: .title(Title(text: "x", duration: 1)))], fps: Rational(Int.max, Int.max - 1)), files: [], submitter: "m"))
        #expect(overflow.contains("output.fps"), "\(overflow)")

        // Hostile hellos (without CURVE every peer has every role; the caps still hold).
        for (hello, why) in [(Hello(worker: "h1", host: "h", pid: 1, slots: 1_000_000_000, version: "x"), "slots must be"),
                             (Hello(worker: "h2", host: "h", pid: 1, slots: 1, version: "x", running: (0..<300_000).map { "L\($0)" }), "at most"),
                             // Another build's engine, and a worker older than the engine field.
                             (Hello(worker: "h3", host: "h", pid: 1, slots: 1, version: "0.9.0", engine: "threadline-engine-9+abc"),
                              "renders differently from this coordinator's engine \(Planner.engineID): run the same Threadline version"),
                             (Hello(worker: "h4", host: "h", pid: 1, slots: 1, version: "0.3.0"), "engine unnamed: older than 0.4")] {
            let worker = try Socket(context, .dealer)
            try worker.setIdentity(hello.worker)
            try worker.connect(ep)
            try worker.send([Envelope(.hello(hello)).encoded()], dontWait: false)
            var replies: [WireMessage] = []
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline, replies.isEmpty {
                if let frames = try worker.receive(timeoutMs: 100), let e = frames.first.flatMap(Envelope.decode) { replies.append(e.message) }
            }
            guard case .rejected(let message)? = replies.first else { Issue.record("no refusal for \(hello.worker): \(replies)"); continue }
            #expect(message.contains(why), "\(message)")
            worker.close()
        }

        // Nothing of the private file reached the coordinator's store; it still renders.
        let sha = try SHA256Hasher.hex(fileAt: secret)
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/coord/artifacts/sha256/\(sha.prefix(2))/\(sha)"))
        #expect(procs.process("coord")?.isRunning == true)
        let ok = try run(coordPath, ["submit", pipeline, "--coordinator", ep], timeout: 120)
        #expect(ok.status == 0, "\(ok.err)")
    }

    /// A farm's worker does not read its own host's files for an assignment; the embedded
    /// default's workers (--local-files) read the user's files.
    @Test func farmWorkersReadNoHostFiles() throws {
        let dir = temporaryDirectory("host-files")
        try Generate.clip(dir + "/private.mp4", width: 160, height: 90, seconds: 0.5, tone: 300)
        let assignment = Assignment(lease: "L", task: .fetch(uri: dir + "/private.mp4", name: "private.mp4"))
        let farm = MediaTaskRunner(store: try ArtifactStore(root: dir + "/farm"), localFiles: false).run(assignment, isCancelled: { false })
        #expect(farm.artifact == nil)
        #expect(farm.error?.errorClass == .permanent)
        #expect(farm.error?.message.contains("reads only files the coordinator sends it") == true, "\(String(describing: farm.error))")
        let local = MediaTaskRunner(store: try ArtifactStore(root: dir + "/local"), localFiles: true).run(assignment, isCancelled: { false })
        #expect(local.error == nil && local.artifact != nil)
    }

    // MARK: the embedded default

    /// While a plain `coord submit` renders, its coordinator listens on no TCP port: a Unix
    /// socket in a folder only its user can enter.
    @Test func anEmbeddedRenderExposesNoTCPPort() throws {
        let dir = temporaryDirectory("private-socket")
        let pipeline = try ClusterTests.project(dir, items: 4, seconds: 2, size: (640, 360), output: "640x360", preset: "medium")
        let p = try startQuietly(coordPath, ["submit", pipeline, "--state", dir + "/state", "--workers", "1"])
        var samples = 0, unixSockets = 0
        while p.isRunning {
            let tcp = try run("ss", ["-ltnpH"], timeout: 10).out
            let unix = try run("ss", ["-lxpH"], timeout: 10).out
            guard p.isRunning else { break }
            samples += 1
            #expect(!tcp.contains("pid=\(p.processIdentifier),"), "the embedded coordinator listens on TCP:\n\(tcp)")
            for line in unix.split(separator: "\n") where line.contains("pid=\(p.processIdentifier),") {
                unixSockets += 1
                if let path = line.split(separator: " ").first(where: { $0.hasPrefix("/tmp/threadline-") }) {
                    let folder = (String(path) as NSString).deletingLastPathComponent
                    let mode = (try FileManager.default.attributesOfItem(atPath: folder)[.posixPermissions] as? NSNumber)?.intValue
                    #expect(mode == 0o700, "\(folder) has mode \(String(mode ?? 0, radix: 8))")
                }
            }
            usleep(200_000)
        }
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(samples >= 2, "the render ended before the sockets could be looked at")
        #expect(unixSockets >= 1, "no Unix socket seen for the embedded coordinator")
    }

    /// A `coord submit` killed outright (SIGKILL, the OOM killer) cannot remove its socket's
    /// folder; the next embedded render removes it. Before, each killed submit left a
    /// /tmp/threadline-XXXXXX folder for ever (three per run of this suite, from the chaos tests).
    @Test func aKilledSubmitsSocketFolderIsRemovedByTheNextSubmit() throws {
        let dir = temporaryDirectory("abandoned-socket")
        let pipeline = try ClusterTests.project(dir, items: 4, seconds: 2, size: (640, 360), output: "640x360", preset: "medium")
        let p = try startQuietly(coordPath, ["submit", pipeline, "--state", dir + "/state", "--workers", "1"])
        let mine = "threadline-\(p.processIdentifier)-"
        var folder: String?
        // Its folder, once the socket is in it (on a slow machine the folder is seen first).
        for _ in 0..<200 where folder == nil {
            folder = try FileManager.default.contentsOfDirectory(atPath: "/tmp").first { $0.hasPrefix(mine) }.map { "/tmp/" + $0 }
                .flatMap { FileManager.default.fileExists(atPath: $0 + "/coordinator") ? $0 : nil }
            if folder == nil { usleep(50_000) }
        }
        let killed = try #require(folder, "no socket folder named \(mine)… in /tmp")
        #expect(FileManager.default.fileExists(atPath: killed + "/coordinator"))
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: killed), "the killed submit's folder is there until the next")
        let again = try run(coordPath, ["submit", pipeline, "--state", dir + "/state", "--workers", "1"], timeout: 300)
        #expect(again.status == 0, "\(again.err.suffix(2000))")
        #expect(!FileManager.default.fileExists(atPath: killed), "\(killed) is still there after the next submit")
    }

    /// What the next submit removes: only a folder of this user's holding nothing but a socket
    /// nobody listens on, or nothing at all when the submit in its name is gone (killed before it
    /// made its socket). One a live coordinator listens on, one holding anything else, an empty
    /// one of a live submit, and a plain file named like the socket are left alone.
    @Test func onlyAbandonedSocketFoldersAreRemoved() throws {
        let parent = temporaryDirectory("socket-folders")
        let fm = FileManager.default
        func folder(_ name: String) throws -> String {
            let f = parent + "/threadline-" + name
            try fm.createDirectory(atPath: f, withIntermediateDirectories: false)
            return f
        }
        // A socket bound by a process that has exited, one a live process listens on.
        let stale = try folder("1-stale0"), live = try folder("2-live00"), busy = try folder("3-busy00"), file = try folder("4-file00")
        let bind = "import socket, sys\ns = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])\n"
        for f in [stale, busy] { #expect(try run("/usr/bin/python3", ["-c", bind, f + "/coordinator"], timeout: 30).status == 0) }
        try "kept".write(toFile: busy + "/notes.txt", atomically: true, encoding: .utf8)
        try "not a socket".write(toFile: file + "/coordinator", atomically: true, encoding: .utf8)
        let listener = try startQuietly("/usr/bin/python3", ["-c", bind + "s.listen(1)\nimport time\ntime.sleep(60)\n", live + "/coordinator"])
        defer { listener.terminate() }
        for _ in 0..<100 where !fm.fileExists(atPath: live + "/coordinator") { usleep(50_000) }
        let emptyOfTheGone = try folder("2147483000-empty0"), emptyOfThisProcess = try folder("\(getpid())-empty1")
        LocalCluster.removeAbandonedSocketFolders(in: parent, logger: Logger(label: "test"))
        #expect(!fm.fileExists(atPath: stale), "the abandoned folder is still there")
        #expect(!fm.fileExists(atPath: emptyOfTheGone), "the empty folder of a gone submit is still there")
        #expect(fm.fileExists(atPath: emptyOfThisProcess), "the empty folder of a live submit was removed")
        for kept in [live, busy, file] { #expect(fm.fileExists(atPath: kept + "/coordinator"), "\(kept) was removed") }
    }

    // MARK: refused before rendering

    /// Each refused with exit 2 and the pipeline's file:line:col, before any work.
    @Test(arguments: [
        ("fps", "output: { path: o.mp4, fps: 9223372036854775807/9223372036854775806 }\nclips: [ { video: a.mp4 } ]", "p.yaml:1:29: error: output.fps"),
        ("own input", "output: { path: a.mp4 }\nclips: [ { video: a.mp4 } ]", "p.yaml:1:17: error: output.path: the movie would overwrite its own input"),
        ("device", "output: { path: /dev/null }\nclips: [ { video: a.mp4 } ]", "is a character device; the movie must go to a regular file"),
        ("folder", "output: { path: out }\nclips: [ { video: a.mp4 } ]", "is a folder; the movie must go"),
        ("long name", "output: { path: \(String(repeating: "x", count: 240)).mp4 }\nclips: [ { video: a.mp4 } ]", "with the 14-byte suffix"),
        ("fifo", "output: { path: o.mp4 }\nclips: [ { video: fifo.mp4 } ]", "fifo.mp4 is a FIFO (named pipe), not a regular file"),
        ("zero", "output: { path: o.mp4 }\nclips: [ { video: /dev/zero } ]", "/dev/zero is a character device, not a regular file"),
        ("loop", "output: { path: o.mp4 }\nclips: [ { video: loop1 } ]", "is a symbolic link loop"),
    ])
    func refusedBeforeRendering(_ name: String, _ yaml: String, _ expected: String) throws {
        let dir = temporaryDirectory("refuse-\(name.replacingOccurrences(of: " ", with: "-"))")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try FileManager.default.createDirectory(atPath: dir + "/out", withIntermediateDirectories: true)
        #expect(mkfifo(dir + "/fifo.mp4", 0o600) == 0)
        try FileManager.default.createSymbolicLink(atPath: dir + "/loop1", withDestinationPath: dir + "/loop2")
        try FileManager.default.createSymbolicLink(atPath: dir + "/loop2", withDestinationPath: dir + "/loop1")
        try yaml.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let plan = try run(coordPath, ["plan", dir + "/p.yaml"], timeout: 20)
        #expect(plan.status == 2, "\(plan.err)")
        #expect(plan.err.contains(expected), "\(plan.err)")
        // The same from a remote submit: the file is checked before anything is sent.
        let remote = try run(coordPath, ["submit", dir + "/p.yaml", "--coordinator", "tcp://127.0.0.1:9", "--timeout", "2"], timeout: 20)
        #expect(remote.status == 2 && remote.err.contains(expected), "\(remote.err)")
        var st = stat()
        #expect(stat("/dev/null", &st) == 0 && (st.st_mode & S_IFMT) == S_IFCHR, "/dev/null is no longer a device")
    }

    /// The movie may not go into the state folder: lineage.db stays a database. (A path named
    /// lineage.db is refused for its name before that: the movie is an MP4 or a GIF.)
    @Test func theMovieCannotOverwriteTheStateFolder() throws {
        let dir = temporaryDirectory("refuse-state")
        try Generate.clip(dir + "/a.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        for name in ["lineage.db", "movie.mp4"] {
            try "output: { path: st/\(name) }\nclips: [ { video: a.mp4 } ]\n".write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
            let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/st"], timeout: 60)
            let why = name == "movie.mp4" ? "\(dir)/st/movie.mp4 is inside the state folder" : "'.db' is not a format Threadline writes"
            #expect(r.status == 2 && r.err.contains("p.yaml:1:17: error: output.path: \(why)"), "\(r.err)")
        }
        let runs = try run(coordPath, ["runs", "--state", dir + "/st"], timeout: 20)
        #expect(!runs.err.contains("not a database"), "\(runs.err)")
    }

    /// 50,001 clips are refused at once, at the clips list (a 2.38 M-clip file took `plan` 152 s).
    @Test func aPipelineOverTheItemCapIsRefusedAtOnce() throws {
        let dir = temporaryDirectory("refuse-items")
        let text = "output: { path: o.mp4 }\nclips:\n" + String(repeating: "  - title: x\n", count: PipelineLoader.maxItems + 1)
        try text.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let t0 = Date()
        let r = try run(coordPath, ["plan", dir + "/p.yaml"], timeout: 60)
        #expect(r.status == 2 && r.err.contains("p.yaml:3:3: error: 'clips' lists 50001 items, over the limit of 50000"), "\(r.err)")
        print("50,001-item pipeline refused in \(String(format: "%.2f", Date().timeIntervalSince(t0))) s")
    }

    // MARK: quarantine

    /// A coordinator on `lineage` at ipc://DIR/c, started (resuming interrupted runs when asked),
    /// and how to stop it.
    static func coordinator(_ dir: String, _ lineage: LineageStore, resume: Bool = false) throws -> (MessagingContext, Coordinator, stop: () -> Void) {
        var config = Coordinator.Configuration(bind: "ipc://\(dir)/c")
        config.store = try ArtifactStore(root: dir)
        config.resumeInterrupted = resume
        let coordinator = Coordinator(config, lineage: lineage, logger: .init(label: "test"))
        let context = MessagingContext()
        _ = try coordinator.start(context: context)
        return (context, coordinator, { coordinator.stop(); #expect(coordinator.waitUntilStopped(timeout: 10), "the coordinator did not stop"); withExtendedLifetime(context) {} })
    }

    /// A run's state and error once a coordinator that resumes interrupted runs has started.
    static func afterAStart(_ dir: String, _ lineage: LineageStore, run: Int64) throws -> [String: String]? {
        let (_, _, stop) = try coordinator(dir, lineage, resume: true)
        defer { stop() }
        return try lineage.rows("SELECT state, error FROM run WHERE id = ?", [run]).first
    }

    /// A run whose resume planning stopped the last coordinator is not resumed again (it would
    /// stop this one too): it is recorded failed, quarantined, with what to do.
    @Test func aRunWhosePlanningStoppedTheCoordinatorIsQuarantined() throws {
        let dir = temporaryDirectory("quarantine")
        let lineage = try LineageStore(path: dir + "/lineage.db")
        let p = Pipeline(name: "q", output: OutputProfile(path: dir + "/q.mp4", width: 320, height: 180),
                         items: [Item(kind: .title(Title(text: "x", duration: 1)))])
        let s = Submission(pipeline: p, files: [], submitter: "t")
        let json = String(decoding: try JSONEncoder().encode(s), as: UTF8.self)
        let (runID, _) = try lineage.createRun(p, stages: Planner.stages(for: p), submission: json)
        try lineage.interruptRun(runID, reason: "test")
        try lineage.setPlanning(runID, true)

        let row = try Self.afterAStart(dir, lineage, run: runID)
        #expect(row?["state"] == "failed")
        #expect(row?["error"]?.contains("quarantined") == true, "\(String(describing: row))")
    }

    /// A resumed run whose "planning done" cannot be recorded stops the coordinator with that
    /// write named: left marked as planning, the next start would quarantine a run that planned
    /// fine (the write was a `try?`).
    @Test func aResumeWhosePlanningEndCannotBeRecordedStopsTheCoordinator() throws {
        let dir = temporaryDirectory("planning-done")
        let lineage = try LineageStore(path: dir + "/lineage.db")
        let p = Pipeline(name: "r", output: OutputProfile(path: dir + "/r.mp4", width: 320, height: 180),
                         items: [Item(kind: .title(Title(text: "x", duration: 1)))])
        let json = String(decoding: try JSONEncoder().encode(Submission(pipeline: p, files: [], submitter: "t")), as: UTF8.self)
        let (runID, _) = try lineage.createRun(p, stages: Planner.stages(for: p), submission: json)
        try lineage.interruptRun(runID, reason: "test")
        _ = try run("sqlite3", [dir + "/lineage.db", "CREATE TRIGGER stuck BEFORE UPDATE OF planning ON run WHEN NEW.planning = 0 BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"], timeout: 30)

        let (_, coordinator, stop) = try Self.coordinator(dir, lineage, resume: true)
        defer { stop() }
        let deadline = Date().addingTimeInterval(10)
        while coordinator.failure.withLock({ $0 }) == nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        let failure = coordinator.failure.withLock { $0 } ?? "none"
        #expect(failure.contains("lineage write 'planningDone' failed") && failure.contains("disk on fire"), "\(failure)")
    }

    /// An interrupted run whose stored submission cannot be read (damaged, or written by another
    /// version) is recorded failed with what to do, not skipped in silence at every start.
    @Test func aRunWhoseStoredSubmissionCannotBeReadIsFailedWithAReason() throws {
        let dir = temporaryDirectory("unreadable")
        let lineage = try LineageStore(path: dir + "/lineage.db")
        let p = Pipeline(name: "u", output: OutputProfile(path: dir + "/u.mp4", width: 320, height: 180),
                         items: [Item(kind: .title(Title(text: "x", duration: 1)))])
        let (runID, _) = try lineage.createRun(p, stages: Planner.stages(for: p), submission: "{\"pipeline\": 7}")
        try lineage.interruptRun(runID, reason: "test")

        let row = try Self.afterAStart(dir, lineage, run: runID)
        #expect(row?["state"] == "failed", "\(String(describing: row))")
        #expect(row?["error"]?.contains("cannot be read") == true && row?["error"]?.contains("submit the pipeline again") == true, "\(String(describing: row))")
    }

    /// A status request the lineage database cannot answer is refused with the reason, not
    /// answered as if the run had no stages.
    @Test func aStatusTheLineageCannotAnswerIsRefusedWithTheReason() throws {
        let dir = temporaryDirectory("status-unreadable")
        let lineage = try LineageStore(path: dir + "/lineage.db")
        let p = Pipeline(name: "s", output: OutputProfile(path: dir + "/s.mp4", width: 320, height: 180),
                         items: [Item(kind: .title(Title(text: "x", duration: 1)))])
        let (runID, _) = try lineage.createRun(p, stages: Planner.stages(for: p))
        try lineage.runFinished(runID, state: .succeeded)
        let (context, _, stop) = try Self.coordinator(dir, lineage)
        defer { stop() }
        let client = try ClusterClient(endpoint: "ipc://\(dir)/c", context: context, downloads: dir + "/downloads")
        client.silenceTimeout = 10
        #expect(try client.status(runID).stages.count == Planner.stages(for: p).count)
        // The view the answer reads is gone (a damaged or hand-edited database).
        _ = try run("sqlite3", [dir + "/lineage.db", "DROP VIEW v_stages"], timeout: 30)
        do {
            let reply = try client.status(runID)
            Issue.record("answered without the view: \(reply)")
        } catch {
            #expect("\(error)".contains("cannot read the lineage database") && "\(error)".contains("v_stages"), "\(error)")
        }
    }

    /// What a submitter keeps in the shared temporary folder (the movies it downloads, the
    /// hashes of its files) is in a folder only its user may enter. Before, /tmp/threadline-client-UID
    /// was made 0755, so any user of the host could watch the movies coming down; and one another
    /// user made first (or a link they put there) was used as it was: they could read everything
    /// and plant hashes that make a submit send the wrong file.
    @Test func theSubmittersFolderIsItsUsersAlone() throws {
        let dir = temporaryDirectory("private-folder")
        let context = MessagingContext()
        let mode = { (path: String) in ((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? NSNumber)?.intValue }
        // Made fresh: 0700.
        _ = try ClusterClient(endpoint: "ipc://\(dir)/c", context: context, downloads: dir + "/fresh")
        #expect(try mode(dir + "/fresh") == 0o700)
        // One of this user's, left open (made before this change): closed.
        try FileManager.default.createDirectory(atPath: dir + "/open", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        _ = try ClusterClient(endpoint: "ipc://\(dir)/c", context: context, downloads: dir + "/open")
        #expect(try mode(dir + "/open") == 0o700)
        // A link someone put there: refused, nothing written where it points.
        try FileManager.default.createDirectory(atPath: dir + "/theirs", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/theirs")
        #expect(throws: ClusterClient.Failure.self) { _ = try ClusterClient(endpoint: "ipc://\(dir)/c", context: context, downloads: dir + "/link") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/theirs").isEmpty)
        // The command says what is wrong and what to do.
        let tmp = dir + "/tmp"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: tmp + "/threadline-client-\(getuid())", withDestinationPath: dir + "/theirs")
        let r = try run("/usr/bin/env", ["TMPDIR=\(tmp)", coordPath, "runs", "--coordinator", "tcp://127.0.0.1:9"], timeout: 30)
        #expect(r.status == 1 && r.err.contains("error: \(tmp)/threadline-client-\(getuid()) is not a folder but a link or a file")
                && r.err.contains("set TMPDIR to a folder of your own"), "\(r.err)")
        // Another user's folder (needs root to make one).
        guard getuid() == 0 else { print("skipped the other user's folder: needs root"); return }
        try FileManager.default.createDirectory(atPath: dir + "/nobody", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
        #expect(chown(dir + "/nobody", 65534, 65534) == 0)
        do {
            _ = try ClusterClient(endpoint: "ipc://\(dir)/c", context: context, downloads: dir + "/nobody")
            Issue.record("used another user's folder")
        } catch {
            #expect("\(error)".contains("belongs to another user (uid 65534)"), "\(error)")
        }
    }
}
