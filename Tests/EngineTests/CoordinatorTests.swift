import Foundation
import PropertyBased
import GRDB
import Testing
import Logging
@testable import Engine
@testable import Farm
import ThreadlineCore
@testable import Transport
import Lineage
import Media
import TestSupport

/// A task runner that does no media work: fetch "probes" a fixed fact sheet, render and concat
/// take a moment. It can fail chosen tasks and records how many run at once.
final class FakeRunner: TaskRunner, @unchecked Sendable {
    let lock = NSLock()
    var concurrent = 0
    var maxConcurrent = 0
    var calls: [String] = []
    var failures: [String: (MediaError.Class, Int)] = [:]   // task label → class, times to fail
    /// Task labels that hang, how many times: each such attempt takes `hangSeconds` and heeds no
    /// cancel (a decoder in a loop), then answers.
    var hangs: [String: Int] = [:]
    var hangSeconds = 5.0
    /// Called as each task starts, with its label (a test can kill the worker here).
    var onStart: ((String) -> Void)?
    let delay: Double
    /// A fetch's moment, when it is not `delay`.
    var fetchDelay: Double?
    /// Seconds a cache check takes (a worker hashing a large artifact).
    var checkDelay: Double = 0
    /// Fetch labels whose files have an audio track no decoder reads (as probing reports it).
    var undecodableAudio: Set<String> = []
    /// Outputs depend only on the task (as real renders do: the same bits on every host), and a
    /// forging runner answers other bytes for renders, transitions and the concat.
    var deterministic = false
    var forge = false
    var forged: Set<String> = []
    var made: Set<String> = []

    init(delay: Double = 0.05, deterministic: Bool = false, forge: Bool = false) {
        self.delay = delay; self.deterministic = deterministic || forge; self.forge = forge
    }

    /// A deterministic runner holds what it made, as a worker's store does: a check of one of
    /// those is a hit. Otherwise every check misses.
    func check(_ assignment: Assignment) -> TaskResult {
        if checkDelay > 0 { Thread.sleep(forTimeInterval: checkDelay) }
        var r = TaskResult.miss(assignment)
        lock.lock(); defer { lock.unlock() }
        if deterministic, let reuse = assignment.reuse, made.contains(reuse.sha256) {
            r.artifact = reuse
            r.cached = true
            if case .segment = assignment.task { r.segment = SegmentReport() }
        }
        return r
    }

    func run(_ assignment: Assignment, isCancelled: @Sendable () -> Bool) -> TaskResult {
        let task = assignment.task, lease = assignment.lease
        lock.lock(); concurrent += 1; maxConcurrent = max(maxConcurrent, concurrent); calls.append(task.label)
        var fail: MediaError.Class? = nil
        if let (cls, n) = failures[task.label], n > 0 { failures[task.label] = (cls, n - 1); fail = cls }
        var hang = false
        if let n = hangs[task.label], n > 0 { hangs[task.label] = n - 1; hang = true }
        let onStart = self.onStart
        lock.unlock()
        defer { lock.lock(); concurrent -= 1; lock.unlock() }
        onStart?(task.label)
        let t0 = Date().timeIntervalSince1970
        if hang { Thread.sleep(forTimeInterval: hangSeconds) }
        else if case .fetch = task, let fetchDelay { Thread.sleep(forTimeInterval: fetchDelay) } else { Thread.sleep(forTimeInterval: delay) }
        var r = TaskResult(lease: lease, error: nil, artifact: nil, facts: nil, segment: nil, startedAt: t0,
                           finishedAt: Date().timeIntervalSince1970, cpuSeconds: 0, maxRSS: 0)
        if let fail {
            r.error = WireError(stage: .decode, errorClass: fail, file: task.label, message: "injected \(fail.rawValue) failure")
            return r
        }
        var sha = SHA256Hasher.hex(task.label + (deterministic ? "" : lease))
        if forge, !task.label.hasPrefix("fetch") {
            sha = SHA256Hasher.hex(task.label + " forged")
            lock.lock(); forged.insert(sha); lock.unlock()
        }
        r.artifact = ArtifactRef(sha256: sha, path: "/dev/null", size: 1000)
        lock.lock(); made.insert(sha); lock.unlock()
        switch task {
        case .fetch:
            r.facts = MediaFacts(duration: 1, width: 16, height: 16, hasVideo: true, hasAudio: true)
            if undecodableAudio.contains(task.label) { r.facts?.hasAudio = false; r.facts?.undecodableAudio = "an unknown codec" }
        case .segment, .transition: r.segment = SegmentReport()
        case .concat: break
        }
        return r
    }
}

final class Harness {
    let dir: String
    let context = MessagingContext()
    let coordinator: Coordinator
    let lineage: LineageStore
    let endpoint: String
    var workers: [WorkerRuntime] = []
    /// Seconds of silence after which the coordinator declares a worker lost.
    let livenessTimeout: Double
    let outcomes = Locked<[Int64: RunOutcome]>([:])

    /// `runners`, if given, is one runner per worker; otherwise all share `runner`.
    /// `restarting`: the folder of another harness whose coordinator has stopped (this one is
    /// that coordinator started again, on its lineage).
    init(workers n: Int, slots: Int, runner: any TaskRunner, livenessTimeout: Double = 2, runners: [FakeRunner]? = nil, verify: Double = 0,
         stageTimeout: Double? = nil, store: ArtifactStore? = nil, restarting: String? = nil,
         configure: (inout Coordinator.Configuration) -> Void = { _ in }) throws {
        dir = restarting ?? temporaryDirectory("coord")
        self.livenessTimeout = livenessTimeout
        lineage = try LineageStore(path: dir + "/lineage.db")
        var logger = Logger(label: "test"); logger.logLevel = ProcessInfo.processInfo.environment["HARNESS_LOG"] != nil ? .debug : .critical
        var config = Coordinator.Configuration(bind: "tcp://127.0.0.1:*")
        config.livenessTimeout = livenessTimeout
        config.backoffBase = 0.01
        config.verifyFraction = verify
        config.store = store
        // The limit itself, whatever the fake renders' estimates.
        config.stageTimeout = stageTimeout
        config.stageTimeoutFactor = 0
        configure(&config)
        coordinator = Coordinator(config, lineage: lineage, logger: logger)
        coordinator.observe { [outcomes] _, run, o in if let o { outcomes.withLock { $0[run] = o } } }
        endpoint = try coordinator.start(context: context)
        for i in 0..<n { addWorker(id: "w\(i)", slots: slots, runner: runners?[i] ?? runner) }
    }

    /// A worker made by hand on a socket of its own, having said hello: the test plays it message
    /// by message (drops an assignment, lies about a result, lists leases it does not run).
    func handMadeWorker(_ id: String, slots: Int = 1, storeID: String? = nil, running: [String]? = nil, pid: Int = 1) throws -> Socket {
        let s = try Socket(context, .dealer)
        try s.setIdentity(id)
        try s.connect(endpoint)
        let hello = Hello(worker: id, host: "h", pid: pid, slots: slots, version: "test", storeID: storeID, running: running, engine: Planner.engineID)
        try s.send([Envelope(.hello(hello)).encoded()], dontWait: false)
        return s
    }

    /// What a worker sharing `store` answers `a` with: a file of its own holding `content` (with
    /// a fetch's facts, a render's report).
    static func madeInStore(_ a: Assignment, _ store: ArtifactStore, content: String) throws -> TaskResult {
        let made = store.temporaryPath()
        try Data(content.utf8).write(to: URL(fileURLWithPath: made))
        var r = TaskResult(lease: a.lease, error: nil, artifact: try store.adopt(made), facts: nil, segment: nil,
                           startedAt: 0, finishedAt: 0, cpuSeconds: 0, maxRSS: 0)
        switch a.task {
        case .fetch: r.facts = MediaFacts(duration: 1, width: 16, height: 16, hasVideo: true, hasAudio: true)
        case .segment: r.segment = SegmentReport()
        case .transition, .concat: break
        }
        return r
    }

    func addWorker(id: String, slots: Int, runner: any TaskRunner) {
        var logger = Logger(label: "test"); logger.logLevel = .critical
        // Heartbeats a quarter of the coordinator's patience apart, as a real farm's are (1 s
        // against 5). At 1 s against a 1 s timeout, an idle worker's next heartbeat came just after
        // the coordinator gave up on it now and then: a fourth worker "lost" in the poison test.
        let w = WorkerRuntime(.init(endpoint: endpoint, slots: slots, id: id, heartbeatInterval: min(1, livenessTimeout / 4)), runner: runner, logger: logger)
        workers.append(w)
        let ctx = context
        Thread { try? w.run(context: ctx) }.start()
    }

    func pipeline(_ items: Int, name: String = "p") -> Pipeline {
        Pipeline(name: name, output: OutputProfile(path: dir + "/\(name).mp4"),
                 items: (0..<items).map { Item(kind: .video(source: SourceRef("/media/\(name)-\($0).mov"), trim: nil)) })
    }

    func submit(_ p: Pipeline, priority: Int = 0) throws -> Int64 {
        let sem = DispatchSemaphore(value: 0)
        let box = Locked<Result<Int64, Error>?>(nil)
        coordinator.submit(p, priority: priority) { r in box.withLock { $0 = r }; sem.signal() }
        sem.wait()
        return try box.value!.get()
    }

    /// Waits at most `timeout` seconds for the coordinator to stop; the failure it stopped with
    /// ("" if it stopped without one, nil if it had not stopped).
    func stoppedFailure(within timeout: Double = 10) -> String? {
        guard coordinator.waitUntilStopped(timeout: timeout) else { return nil }
        return coordinator.failure.withLock { $0 } ?? ""
    }

    func wait(_ run: Int64, timeout: Double = 20) -> RunOutcome? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let o = outcomes.value[run] { return o }
            usleep(10_000)
        }
        return nil
    }

    deinit {
        for w in workers { w.stop() }
        coordinator.stop()
        usleep(100_000)
    }
}

@Suite(.serialized) struct CoordinatorTests {
    /// An assignment that never reached its worker (sent into a connection the worker had just
    /// given up on, as when the coordinator's host was suspended past the workers' timeout): the
    /// worker's heartbeats do not list it, and after asking the worker once what it runs, the
    /// coordinator gives it out again. Before, the stage stayed running until its time limit
    /// (30 minutes by default) and its run with it. Here a hand-made worker takes the run's first
    /// assignment, drops it, and says it is draining, listing nothing; a real worker then joins.
    @Test func anAssignmentTheWorkerNeverGotGoesOutAgain() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(delay: 0.05), livenessTimeout: 30)
        let deaf = try h.handMadeWorker("deaf")
        let run = try h.submit(h.pipeline(1))
        var dropped: String?, reannounced = false
        let deadline = Date().addingTimeInterval(15)
        var lastBeat = Date.distantPast
        // It beats (listing nothing) and answers a request to say hello again, until the run ends.
        while Date() < deadline, h.outcomes.value[run] == nil {
            if let frames = try deaf.receive(timeoutMs: 100), let e = frames.first.flatMap(Envelope.decode) {
                switch e.message {
                case .assign(let a) where dropped == nil:
                    dropped = a.lease
                    try deaf.send([Envelope(.draining(running: [])).encoded()], dontWait: false)
                case .reannounce:
                    reannounced = true
                    try deaf.send([Envelope(.hello(Hello(worker: "deaf", host: "h", pid: 1, slots: 1, version: "test", running: [], draining: true,
                                                         engine: Planner.engineID))).encoded()], dontWait: false)
                default: break
                }
            }
            if dropped != nil, h.workers.isEmpty { h.addWorker(id: "w0", slots: 1, runner: FakeRunner(delay: 0.05)) }
            if Date().timeIntervalSince(lastBeat) > 0.5 {
                try deaf.send([Envelope(.heartbeat(running: [])).encoded()], dontWait: false)
                lastBeat = Date()
            }
        }
        try #require(dropped != nil, "the hand-made worker got no assignment")
        #expect(reannounced, "the coordinator did not ask the worker what it runs")
        guard case .succeeded = try #require(h.wait(run, timeout: 10), "the run is stuck behind the assignment that never arrived") else {
            Issue.record("run failed"); return
        }
        let rows = try h.lineage.rows("SELECT state, error_message AS e FROM attempt WHERE worker_id = 'deaf'")
        #expect(rows.count == 1 && rows[0]["state"] == "lost" && rows[0]["e"]?.contains("never received it") == true, "\(rows)")
        deaf.close()
    }

    /// A render the last coordinator gave out whose worker never began it (its inputs were still
    /// coming when that coordinator stopped) and hands it back with its hello: the coordinator that
    /// resumed the run records it as handed back unbegun and gives it out again at once. Before,
    /// the hand-back was taken for a stale lease, the stage waited `orphanResultWait` (2 s) for a
    /// result that could not come, and the attempt stayed among the renders lost to the stop.
    @Test func aRenderHandedBackUnbegunAfterARestartGoesOutAgainAtOnce() throws {
        let store = try ArtifactStore(root: temporaryDirectory("handed-back-unbegun") + "/store")
        let configure: (inout Coordinator.Configuration) -> Void = { $0.resumeInterrupted = true; $0.drainTimeout = 0; $0.store = store }
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(), livenessTimeout: 30, store: store, configure: configure)
        /// A miss for a check, else a file of the worker's own (a fetch's the same each time, as a
        /// source's is: the render's key stays the same).
        func answer(_ a: Assignment) throws -> TaskResult {
            if a.checkOnly == true { return .miss(a) }
            let fetch = if case .fetch = a.task { true } else { false }
            return try Harness.madeInStore(a, store, content: fetch ? a.task.label : a.lease)
        }
        /// Plays a worker: answers everything until a render comes, which it keeps.
        func renderGiven(to w: Socket, within seconds: Double = 10) throws -> (assignment: Assignment, at: Date)? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                guard let frames = try w.receive(timeoutMs: 20), case .assign(let a)? = frames.first.flatMap(Envelope.decode)?.message else { continue }
                if case .segment = a.task, a.checkOnly != true { return (a, Date()) }
                try w.send([Envelope(.result(try answer(a))).encoded()], dontWait: false)
            }
            return nil
        }
        let first = try h.handMadeWorker("hw", storeID: store.id, running: [])
        // Submitted as `coord submit --coordinator` does (a run the next coordinator resumes), of a
        // source the worker fetches itself.
        let submitter = try Socket(h.context, .dealer)
        defer { submitter.close() }
        try submitter.setIdentity("submitter")
        try submitter.connect(h.endpoint)
        let pipeline = Pipeline(name: "p", output: OutputProfile(path: h.dir + "/p.mp4"),
                                items: [Item(kind: .video(source: SourceRef("http://media.test/p-0.mov"), trim: nil))])
        try submitter.send([Envelope(.submit(Submission(pipeline: pipeline, files: [], submitter: "test"))).encoded()], dontWait: false)
        let lease = try #require(try renderGiven(to: first), "no render was given out").assignment.lease
        let answered = try submitter.receive(timeoutMs: 5_000)?.first.flatMap(Envelope.decode)?.message
        guard case .accepted(let run)? = answered else { Issue.record("the submission was not accepted: \(String(describing: answered))"); return }
        h.coordinator.stop(graceful: true)
        try #require(h.coordinator.waitUntilStopped(timeout: 10), "the coordinator did not stop")
        first.close()
        // The next coordinator on the same lineage resumes the run and waits for word of the render.
        let next = try Harness(workers: 0, slots: 1, runner: FakeRunner(), livenessTimeout: 30, store: store, restarting: h.dir, configure: configure)
        let back = try next.handMadeWorker("hw", storeID: store.id, running: [])
        defer { back.close() }
        try back.send([Envelope(.handBack(lease: lease)).encoded()], dontWait: false)
        let handedBack = Date()
        let again = try #require(try renderGiven(to: back), "the render was not given out again")
        let waited = again.at.timeIntervalSince(handedBack)
        print("a render handed back unbegun after a restart went out again \(String(format: "%.3f", waited)) s later")
        #expect(again.assignment.lease != lease && waited < 1, "given out again after \(waited) s (the wait for a result is \(CoordinatorCore.orphanResultWait) s)")
        let rows = try h.lineage.rows("SELECT state, error_message AS e FROM attempt WHERE lease = ? OR lease LIKE ? ORDER BY id", [lease, lease + "#%"])
        #expect(!rows.isEmpty && rows.allSatisfy { $0["state"] == "handed_back" && $0["e"] == LineageStore.handedBackUnbegun(by: "hw") }, "\(rows)")
        // Its render delivered, the run ends well.
        try back.send([Envelope(.result(try answer(again.assignment))).encoded()], dontWait: false)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, next.outcomes.value[run] == nil {
            if let frames = try back.receive(timeoutMs: 20), case .assign(let a)? = frames.first.flatMap(Envelope.decode)?.message {
                try back.send([Envelope(.result(try answer(a))).encoded()], dontWait: false)
            }
        }
        guard case .succeeded? = next.outcomes.value[run] else { Issue.record("the resumed run did not succeed: \(String(describing: next.outcomes.value[run]))"); return }
    }

    /// A service stopping gracefully tells each worker so (`stopping`: the renders under way
    /// there go on, for the coordinator that comes next), even one whose connection is still
    /// busy taking what it was sent before. Before, the coordinator's socket closed at once and
    /// dropped what was still queued: CI saw a worker that was never told, and took the
    /// coordinator for lost 5 s later. Here a hand-made worker asks for 64 MB of a stored file
    /// and reads none of it (taking one message at a time) until the coordinator has stopped.
    @Test func aStoppingCoordinatorsLastWordsReachABusyWorker() throws {
        let outside = temporaryDirectory("last-words")
        let store = try ArtifactStore(root: outside + "/store")
        let big = outside + "/big"
        try Data(count: 16 << 20).write(to: URL(fileURLWithPath: big))
        let ref = try store.ingest(localFile: big)
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(), store: store) {
            $0.resumeInterrupted = true; $0.drainTimeout = 0
        }
        let busy = try h.handMadeWorker("busy", running: [])
        try busy.setReceiveHighWaterMark(1)
        let pulls = 16, length = 4 << 20
        for i in 0..<pulls {
            try busy.send([Envelope(.pull(sha256: ref.sha256, offset: Int64((i * length) % (16 << 20)), length: length)).encoded()], dontWait: false)
        }
        // The pulls answered (queued behind the unread connection), then the stop.
        Thread.sleep(forTimeInterval: 0.5)
        h.coordinator.stop(graceful: true)
        #expect(h.coordinator.waitUntilStopped(timeout: 10), "the coordinator did not stop")
        var chunks = 0, told = false
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !told, let frames = try busy.receive(timeoutMs: 2000) {
            switch frames.first.flatMap(Envelope.decode)?.message {
            case .chunk?: chunks += 1
            case .stopping?: told = true
            default: break
            }
        }
        #expect(chunks == pulls, "\(chunks) of \(pulls) chunks came")
        #expect(told, "the worker was not told that the coordinator stopped")
        busy.close()
    }

    /// Once a lineage write fails, nothing more goes out or is handled: the coordinator stops
    /// with that write's reason. Before, the turn went on: a worker joining while its row could
    /// not be written was given work anyway (its attempt's row failed too), and when its result
    /// came back in the same turn the coordinator crashed (CI under load: `coord submit` died
    /// with "Index out of range" instead of failing with the write's reason).
    @Test func nothingGoesOutAfterALineageWriteFails() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner())
        let run = try h.submit(h.pipeline(1))
        // Every record of a worker joining fails, as a full disk or a broken file would.
        let db = try DatabaseQueue(path: h.dir + "/lineage.db")
        try db.write { try $0.execute(sql: "CREATE TRIGGER broken BEFORE INSERT ON worker BEGIN SELECT RAISE(ABORT, 'disk on fire'); END") }
        try db.close()
        let joining = try h.handMadeWorker("joining", running: [])
        var assigned: [String] = []
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline, let frames = try joining.receive(timeoutMs: 200) {
            if case .assign(let a)? = frames.first.flatMap(Envelope.decode)?.message { assigned.append(a.task.label) }
        }
        #expect(assigned.isEmpty, "work went out after the failed write: \(assigned)")
        let failure = h.stoppedFailure() ?? "the coordinator did not stop"
        #expect(failure.contains("lineage write 'workerSeen' failed") && failure.contains("disk on fire"), "\(failure)")
        guard case .failed(let message, _)? = h.wait(run, timeout: 5) else { Issue.record("the run did not fail"); return }
        #expect(message.contains("disk on fire"), "\(message)")
        #expect(try h.lineage.rows("SELECT count(*) AS n FROM attempt").first?["n"] == "0")
        joining.close()
    }

    /// An assignment whose attempt row cannot be written never goes out, nor does any other in
    /// that turn: before, each went out with no record of it (every one of a tick's dispatches
    /// wrote, failed and sent), to be cancelled once the coordinator stopped.
    @Test func anAssignmentWhoseAttemptCannotBeRecordedNeverGoesOut() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner())
        let db = try DatabaseQueue(path: h.dir + "/lineage.db")
        try db.write { try $0.execute(sql: "CREATE TRIGGER broken BEFORE INSERT ON attempt BEGIN SELECT RAISE(ABORT, 'disk on fire'); END") }
        try db.close()
        let run = try h.submit(h.pipeline(3))
        let worker = try h.handMadeWorker("w", slots: 3, running: [])
        // Once the coordinator has stopped for the failed write (it tried to dispatch), whatever it sent has arrived.
        let failure = h.stoppedFailure() ?? "the coordinator did not stop"
        var assigned: [String] = []
        let drained = Date().addingTimeInterval(3)
        while Date() < drained, let frames = try worker.receive(timeoutMs: 500) {
            if case .assign(let a)? = frames.first.flatMap(Envelope.decode)?.message { assigned.append(a.task.label) }
        }
        #expect(assigned.isEmpty, "assignments went out with no attempt recorded: \(assigned)")
        #expect(failure.contains("lineage write 'attemptDispatched' failed") && failure.contains("disk on fire"), "\(failure)")
        guard case .failed(let message, _)? = h.wait(run, timeout: 5) else { Issue.record("the run did not fail"); return }
        #expect(message.contains("disk on fire"), "\(message)")
        worker.close()
    }

    /// Whichever lineage write fails (each table's inserts, then its updates, as a full disk or a
    /// broken file would fail them), the coordinator neither crashes nor renders on: the submit is
    /// refused or the run fails with the write's reason, and the coordinator stops saying it.
    @Test(arguments: ["run", "item", "stage", "stage_edge", "attempt", "attempt_io", "artifact", "event", "worker", "run_progress"], ["INSERT", "UPDATE"])
    func whicheverLineageWriteFailsTheCoordinatorStopsWithItsReason(table: String, operation: String) throws {
        let h = try Harness(workers: 2, slots: 1, runner: FakeRunner(delay: 0.02))
        Thread.sleep(forTimeInterval: 0.2)   // (the workers joined)
        let db = try DatabaseQueue(path: h.dir + "/lineage.db")
        try db.write { try $0.execute(sql: "CREATE TRIGGER broken BEFORE \(operation) ON \(table) BEGIN SELECT RAISE(ABORT, 'disk on fire'); END") }
        try db.close()
        let submitted = Result { try h.submit(h.pipeline(3)) }
        let why: String
        switch submitted {
        case .failure(let e):
            // Refused whole: nothing of it is recorded (the coordinator may go on, or stop if a
            // write of its own in that turn failed too).
            why = "\(e)"
        case .success(let run):
            switch h.wait(run, timeout: 20) {
            case .failed(let message, _)?: why = message
            case .succeeded?:
                // Nothing of the kind was written in a run (its rows are made once, never changed).
                print("\(operation) on \(table) refused: run succeeded (none written)")
                #expect(h.coordinator.failure.withLock { $0 } == nil)
                return
            case nil: Issue.record("the run did not end"); return
            }
        }
        #expect(why.contains("disk on fire"), "\(why)")
        print("\(operation) on \(table) refused: \((try? submitted.get()).map { "run \($0) failed" } ?? "submit refused")")
        if case .failure = submitted { return }
        let failure = h.coordinator.failure.withLock { $0 } ?? ""
        #expect(failure.contains("disk on fire"), "\(failure)")
    }

    /// A worker whose connection is gone for a moment (as when it dials again after a stall of
    /// its coordinator) while it runs a stage: an assignment that cannot reach it goes back to
    /// the queue and the worker gets no work for a moment, but it is not lost. Lost, the stage it
    /// ran was lost with it and a result of it on its way in thrown away (one render made twice
    /// after an 8 s coordinator pause). Back on a new connection, it reports what it runs.
    @Test func aWorkerOutOfReachForAMomentIsNotLost() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(delay: 0.05), livenessTimeout: 30)
        var held: String?
        func dial() throws -> Socket { try h.handMadeWorker("hop", slots: 2, running: held.map { [$0] } ?? []) }
        var hop = try dial()
        let first = try h.submit(h.pipeline(1, name: "a"))
        let deadline = Date().addingTimeInterval(5)
        while held == nil, Date() < deadline {
            if let frames = try hop.receive(timeoutMs: 100), case .assign(let a)? = frames.first.flatMap(Envelope.decode)?.message { held = a.lease }
        }
        let lease = try #require(held, "the hand-made worker got no assignment")
        // Its connection goes; an assignment for its free slot cannot reach it.
        hop.close()
        usleep(200_000)
        let second = try h.submit(h.pipeline(1, name: "b"))
        let undelivered = "SELECT count(*) AS n FROM attempt WHERE worker_id = 'hop' AND error_message LIKE 'not delivered: worker hop is unreachable%'"
        let tried = Date().addingTimeInterval(5)
        while Date() < tried, try h.lineage.rows(undelivered).first?["n"] == "0" { usleep(20_000) }
        #expect(try h.lineage.rows(undelivered).first?["n"] != "0", "no assignment was tried on the worker out of reach")
        // Back on a new connection, running the stage it held; it drains and hands that back,
        // and a worker of the harness makes both movies.
        hop = try dial()
        h.addWorker(id: "w0", slots: 1, runner: FakeRunner(delay: 0.05))
        try hop.send([Envelope(.draining(running: [lease])).encoded()], dontWait: false)
        try hop.send([Envelope(.handBack(lease: lease)).encoded()], dontWait: false)
        let end = Date().addingTimeInterval(10)
        while Date() < end, h.outcomes.value[first] == nil || h.outcomes.value[second] == nil {
            if let frames = try hop.receive(timeoutMs: 50), case .assign(let a)? = frames.first.flatMap(Envelope.decode)?.message {
                try hop.send([Envelope(.handBack(lease: a.lease)).encoded()], dontWait: false)
            }
        }
        for run in [first, second] {
            guard case .succeeded = try #require(h.outcomes.value[run], "run \(run) did not end") else { Issue.record("run \(run) failed"); continue }
        }
        let worker = try h.lineage.rows("SELECT state FROM worker WHERE id = 'hop'")
        #expect(worker.first?["state"] != "lost", "\(worker)")
        let lost = try h.lineage.rows("SELECT lease, error_message AS e FROM attempt WHERE worker_id = 'hop' AND state = 'lost' AND error_message NOT LIKE 'not delivered%'")
        #expect(lost.isEmpty, "the stage it ran was lost with it: \(lost)")
        hop.close()
    }

    /// A cancel's recorded reason names who asked as a person reads it, from the client's
    /// identity; an identity of another shape is kept as it came (cut to 64 characters).
    @Test func aRequesterIsNamedByUserHostAndProcess() {
        #expect(ClientIdentity.requester("client-ana@render-1.lan-4242-A1B2C3", key: nil) == "ana@render-1.lan (process 4242)")
        #expect(ClientIdentity.requester("client-vm-24628-27B70D", key: nil) == "vm (process 24628)")
        #expect(ClientIdentity.requester("client-ana@farm-7400-X9Y8Z7", key: "rq7&Yb!x0000000000000000000000000000000") == "ana@farm (process 7400), key rq7&Yb!x…")
        #expect(ClientIdentity.requester("w1", key: nil) == "w1")
        #expect(ClientIdentity.requester(String(repeating: "x", count: 100), key: nil).count == 64)
        // What a client makes reads back as its user, host and process.
        let mine = ClientIdentity.requester(ClientIdentity.make(), key: nil)
        #expect(mine.hasSuffix("@\(ProcessInfo.processInfo.hostName) (process \(getpid()))"), "\(mine)")
    }

    /// A run's observers hear its end once lineage has it: one that reads the database as it is
    /// told (a `coord submit` that exits, then a script that looks) finds the run ended, not
    /// `running`. Before, they were told inside the turn's transaction, before its commit.
    @Test func observersHearARunsEndOnceLineageHasIt() throws {
        let h = try Harness(workers: 1, slots: 2, runner: FakeRunner())
        let path = h.lineage.path
        let seen = Locked<[String]>([])
        h.coordinator.observe { _, run, outcome in
            guard outcome != nil else { return }
            let state = (try? LineageStore.readRows(path: path, "SELECT state FROM run WHERE id = ?", [run]))?.first?["state"] ?? "no row"
            seen.withLock { $0.append(state) }
        }
        let run = try h.submit(h.pipeline(3))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
        // (This observer is told after the harness's own, which `wait` watches.)
        #expect(waitUntil(timeout: 5) { !seen.value.isEmpty })
        #expect(seen.value == ["succeeded"])
    }

    /// A worker hears its result acknowledged once lineage has it: a draining worker exits on its
    /// last acknowledgement, and one that trims its store may drop the output then, so a result
    /// acknowledged and not recorded (the coordinator killed before the turn's commit) was a
    /// render lost. Here a hand-made worker sends a fetch's result with questions queued behind
    /// it, which keep the coordinator busy in that turn, and reads lineage as the ack comes.
    @Test func aResultIsAcknowledgedOnceLineageHasIt() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(delay: 0.05), livenessTimeout: 30)
        let quick = try h.handMadeWorker("quick")
        _ = try h.submit(h.pipeline(1))
        var acked: [String]?, sent: String?
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, acked == nil {
            guard let frames = try quick.receive(timeoutMs: 100), let e = frames.first.flatMap(Envelope.decode) else { continue }
            switch e.message {
            case .assign(let a) where sent == nil:
                sent = a.lease
                var r = TaskResult(lease: a.lease, error: nil, artifact: nil, facts: MediaFacts(duration: 1, width: 16, height: 16, hasVideo: true, hasAudio: true),
                                   segment: nil, startedAt: 0, finishedAt: 0, cpuSeconds: 0, maxRSS: 0)
                r.artifact = ArtifactRef(sha256: SHA256Hasher.hex("quick"), path: "/dev/null", size: 1000)
                try quick.send([Envelope(.result(r)).encoded()], dontWait: false)
                for _ in 0..<500 { try quick.send([Envelope(.status(run: nil, limit: 50)).encoded()], dontWait: false) }
            case .ack(let lease) where lease == sent:
                acked = try LineageStore.readRows(path: h.lineage.path, "SELECT state FROM attempt WHERE lease = ?", [lease]).map { $0["state"] ?? "" }
            default: break
            }
        }
        let states = try #require(acked, "no acknowledgement came")
        #expect(!states.isEmpty && states.allSatisfy { $0 == "succeeded" }, "acknowledged as \(states)")
        quick.close()
    }

    /// A worker that says a render is done but sends no report of its segment (another version,
    /// a broken or a hostile worker) fails that attempt, and the render is made again elsewhere.
    /// Before, the stage counted done: the concat it made ready had no segment to join, and the
    /// coordinator crashed (a force-unwrap), taking every run on the farm down with it.
    @Test func aSuccessWithoutItsSegmentIsThatWorkersFailure() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(delay: 0.05), livenessTimeout: 30)
        let broken = try h.handMadeWorker("broken")
        let run = try h.submit(h.pipeline(1))
        var lied = false
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, !lied {
            guard let frames = try broken.receive(timeoutMs: 100), let e = frames.first.flatMap(Envelope.decode), case .assign(let a) = e.message else { continue }
            var r = TaskResult(lease: a.lease, error: nil, artifact: ArtifactRef(sha256: SHA256Hasher.hex(a.lease), path: "/dev/null", size: 1000),
                               facts: nil, segment: nil, startedAt: 0, finishedAt: 0, cpuSeconds: 0, maxRSS: 0)
            if case .fetch = a.task { r.facts = MediaFacts(duration: 1, width: 16, height: 16, hasVideo: true, hasAudio: true) } else { lied = true }
            try broken.send([Envelope(.result(r)).encoded()], dontWait: false)
        }
        try #require(lied, "the hand-made worker got no render")
        // It takes no more work; a worker that renders properly joins.
        try broken.send([Envelope(.draining(running: [])).encoded()], dontWait: false)
        h.addWorker(id: "w0", slots: 1, runner: FakeRunner(delay: 0.05))
        guard case .succeeded = try #require(h.wait(run, timeout: 15), "the run did not end") else { Issue.record("run failed: \(String(describing: h.outcomes.value[run]))"); return }
        let rows = try h.lineage.rows("SELECT s.name, a.state, a.error_message AS e FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE a.worker_id = 'broken' AND s.name = 'encode/0'")
        #expect(rows.count == 1 && rows[0]["state"] == "failed" && rows[0]["e"]?.contains("said it was done but sent no report of the segment") == true, "\(rows)")
        broken.close()
    }

    /// A worker sharing the coordinator's store names its output by hash, and the coordinator
    /// reads it from the store, not from the path the worker sent. Here a hand-made worker that
    /// shares the store makes its fetch and render honestly, then says the concat made a file
    /// outside the store (the coordinator's own secret): never published as the movie, the
    /// concat fails on that worker each time and the run ends failed. Before, the coordinator
    /// copied that file to the run's output path, for its submitter to download.
    @Test func aSharedWorkersOutputIsReadFromTheStoreNotFromThePathItSent() throws {
        let outside = temporaryDirectory("shared-store")
        let store = try ArtifactStore(root: outside + "/store")
        let secret = outside + "/coordinator.key_secret"
        try Data("the coordinator's secret".utf8).write(to: URL(fileURLWithPath: secret))
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(), store: store)
        let sly = try h.handMadeWorker("sly", storeID: store.id, running: [])
        let run = try h.submit(h.pipeline(1))
        var lies = 0
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, h.outcomes.value[run] == nil {
            guard let frames = try sly.receive(timeoutMs: 100), let e = frames.first.flatMap(Envelope.decode), case .assign(let a) = e.message else { continue }
            var r = try Harness.madeInStore(a, store, content: a.lease)
            switch a.task {
            case .fetch, .segment: break
            default:
                lies += 1
                r.artifact = ArtifactRef(sha256: try SHA256Hasher.hex(fileAt: secret), path: secret, size: 24)
            }
            try sly.send([Envelope(.result(r)).encoded()], dontWait: false)
        }
        let outcome = try #require(h.wait(run, timeout: 5), "the run did not end")
        let published = try? String(contentsOfFile: h.dir + "/p.mp4", encoding: .utf8)
        #expect(published != "the coordinator's secret", "the secret was published as the movie")
        #expect(try h.lineage.rows("SELECT count(*) AS n FROM artifact WHERE uri = ?", [secret]).first?["n"] == "0")
        guard case .failed(let message, _) = outcome else { Issue.record("the run should fail: \(outcome)"); return }
        #expect(lies >= 1 && message.contains("said it was done but sent no file"), "\(message)")
        sly.close()
    }

    /// Whatever a worker answers (decodable, but of another version, broken or hostile: facts of
    /// NaN or endless seconds, negative or vast sizes, missing files and reports, errors of any
    /// kind, a stage said cached that was not asked to be), the coordinator does not crash and
    /// every run ends. A worker with a valid key must not be able to stop the farm.
    @Test func whateverAWorkerAnswersTheCoordinatorGoesOn() async throws {
        let ops = Gen.int(in: 0...9_999).array(of: 1...40)
        await propertyCheck(count: 25, input: ops) { ops in Self.answerOddly(ops) }
    }

    /// A run on a coordinator whose only worker answers each assignment as `ops` say, in turn.
    static func answerOddly(_ ops: [Int]) {
        let outside = temporaryDirectory("odd-answers")
        defer { try? FileManager.default.removeItem(atPath: outside) }
        let store = try! ArtifactStore(root: outside + "/store")
        let h = try! Harness(workers: 0, slots: 1, runner: FakeRunner(), store: store)
        let odd = try! h.handMadeWorker("odd", slots: 2, storeID: store.id, running: [])
        defer { odd.close() }
        let doubles: [Double] = [1, 0, -1, .nan, .infinity, -.infinity, 1e300, 1e-300, 2.5, 86_400 * 365]
        let ints: [Int] = [16, 0, -1, 1 << 40, Int.max, Int.min, 3, 1080]
        var next = 0
        func pick() -> Int { defer { next += 1 }; return ops[next % ops.count] }
        let run = try! h.submit(h.pipeline(2))
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, h.outcomes.value[run] == nil {
            guard let frames = try! odd.receive(timeoutMs: 50), let e = frames.first.flatMap(Envelope.decode) else { continue }
            guard case .assign(let a) = e.message else {
                if case .heartbeat = e.message { try! odd.send([Envelope(.heartbeat(running: [])).encoded()], dontWait: false) }
                continue
            }
            let op = pick()
            let made = store.temporaryPath()
            try! Data("\(a.lease) \(op)".utf8).write(to: URL(fileURLWithPath: made))
            let stored = try! store.adopt(made)
            var r = TaskResult(lease: a.lease, error: nil, artifact: stored, facts: nil, segment: nil,
                               startedAt: doubles[pick() % doubles.count], finishedAt: doubles[pick() % doubles.count],
                               cpuSeconds: doubles[pick() % doubles.count], maxRSS: Int64(truncatingIfNeeded: ints[pick() % ints.count]))
            switch op % 10 {
            case 0: r.error = WireError(stage: StageKind.allCases[pick() % 6], errorClass: op % 20 == 0 ? .permanent : .retryable,
                                        file: "odd\(op)", message: String(repeating: "x", count: pick() % 3 * 5_000))
            case 1: r.artifact = nil
            case 2: r.artifact = ArtifactRef(sha256: stored.sha256, path: stored.path, size: Int64(truncatingIfNeeded: ints[pick() % ints.count]))
            case 3: r.cached = true
            default: break
            }
            if op % 7 != 0 {
                var f = MediaFacts(duration: doubles[pick() % doubles.count], width: ints[pick() % ints.count], height: ints[pick() % ints.count],
                                   hasVideo: pick() % 4 != 0, hasAudio: pick() % 2 == 0, rotation: ints[pick() % ints.count],
                                   frameRate: pick() % 3 == 0 ? nil : doubles[pick() % doubles.count])
                f.isStill = pick() % 5 == 0
                f.videoStream = pick() % 3 == 0 ? nil : ints[pick() % ints.count]
                r.facts = f
            }
            if op % 5 != 0 {
                var s = SegmentReport()
                s.decodeSeconds = doubles[pick() % doubles.count]; s.encodeSeconds = doubles[pick() % doubles.count]
                s.framesOut = ints[pick() % ints.count]; s.samplesOut = ints[pick() % ints.count]; s.framesDecoded = ints[pick() % ints.count]
                r.segment = s
            }
            try! odd.send([Envelope(.result(r)).encoded()], dontWait: false)
            // Sent twice, under a lease nobody gave, beside heartbeats and hellos that list
            // leases it does not run.
            if op % 13 == 0 { try! odd.send([Envelope(.result(r)).encoded()], dontWait: false) }
            if op % 17 == 0 { r.lease = "l\(op)"; try! odd.send([Envelope(.result(r)).encoded()], dontWait: false) }
            if op % 11 == 0 { try! odd.send([Envelope(.heartbeat(running: [a.lease, "l\(op)"])).encoded()], dontWait: false) }
            if op % 19 == 0 {
                try! odd.send([Envelope(.hello(Hello(worker: "odd", host: "h", pid: 1 + op % 2, slots: 1 + op % 3, version: "test", storeID: store.id,
                                                     running: [a.lease, "l\(op)"], engine: Planner.engineID))).encoded()], dontWait: false)
            }
        }
        #expect(h.outcomes.value[run] != nil, "run \(run) did not end within 20 s (answers \(ops))")
        if h.outcomes.value[run] == nil {
            // What the run waits for (HARNESS_LOG=1 in the environment shows the coordinator's log too).
            print(try! h.lineage.rows("SELECT s.name, s.state, a.state AS attempt, a.lease, a.error_message FROM stage s LEFT JOIN attempt a ON a.stage_id = s.id ORDER BY s.id, a.id")
                .map { "\($0)" }.joined(separator: "\n"))
        }
    }

    /// A worker whose hello lists a lease nobody knows (a render of an ended run, or a broken
    /// worker's invention) has it cancelled; once its heartbeats stop listing it, its slot is free
    /// again even if the worker never answers the cancel. Before, the slot stayed taken for ever:
    /// with one slot, the run waiting for it never ended (found by the random answers above).
    @Test func aLeaseNobodyKnowsHoldsItsSlotOnlyWhileItsWorkerListsIt() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner(), livenessTimeout: 30)
        let w = try h.handMadeWorker("w", running: ["ghost"])
        let run = try h.submit(h.pipeline(1))
        var cancelled = false
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, h.outcomes.value[run] == nil {
            guard let frames = try w.receive(timeoutMs: 50), let e = frames.first.flatMap(Envelope.decode) else { continue }
            switch e.message {
            case .heartbeat: try w.send([Envelope(.heartbeat(running: [])).encoded()], dontWait: false)
            case .cancel(let lease): cancelled = cancelled || lease == "ghost"   // never answered
            case .assign(let a):
                var r = TaskResult(lease: a.lease, error: nil, artifact: ArtifactRef(sha256: SHA256Hasher.hex(a.lease), path: "/dev/null", size: 1000),
                                   facts: nil, segment: nil, startedAt: 0, finishedAt: 0, cpuSeconds: 0, maxRSS: 0)
                if case .fetch = a.task { r.facts = MediaFacts(duration: 1, width: 16, height: 16, hasVideo: true, hasAudio: true) } else { r.segment = SegmentReport() }
                try w.send([Envelope(.result(r)).encoded()], dontWait: false)
            default: break
            }
        }
        #expect(cancelled, "the lease nobody knows was not cancelled")
        guard case .succeeded = try #require(h.outcomes.value[run], "the run never got the worker's only slot") else { Issue.record("run failed"); return }
        w.close()
    }

    /// A worker's answer that it stopped an attempt nobody here knows (one cancelled with its run,
    /// or as the last coordinator stopped) is no result discarded: nothing is recorded. A result
    /// of an attempt nobody knows still is (`attempt.stale`). Before, every stopped attempt's
    /// answer was recorded as a stale result too: `coord cancel` of a run with two renders under
    /// way wrote two `attempt.stale` events.
    @Test func aStoppedAttemptsAnswerIsNoStaleResult() throws {
        let h = try Harness(workers: 0, slots: 1, runner: FakeRunner())
        let w = try h.handMadeWorker("w")
        defer { w.close() }
        let stopped = TaskResult(lease: "earlier-3", error: WireError(MediaError.cancelled(.decode, file: "a.mov")), artifact: nil, facts: nil, segment: nil,
                                 startedAt: 0, finishedAt: 0, cpuSeconds: 0, maxRSS: 0)
        // Then a render's result of another lease nobody knows, after which the first has been read.
        let made = TaskResult(lease: "earlier-4", error: nil, artifact: ArtifactRef(sha256: SHA256Hasher.hex("made"), path: "/dev/null", size: 4),
                              facts: nil, segment: SegmentReport(), startedAt: 0, finishedAt: 0, cpuSeconds: 0, maxRSS: 0)
        for r in [stopped, made] { try w.send([Envelope(.result(r)).encoded()], dontWait: false) }
        let events = { (try? h.lineage.rows("SELECT message FROM event WHERE kind = 'attempt.stale' ORDER BY id").compactMap { $0["message"] }) ?? [] }
        try #require(try waitUntil(timeout: 5) { !events().isEmpty }, "the result nobody asked for was not recorded")
        #expect(events() == ["discarded a result from worker w with a stale lease earlier-4"], "\(events())")
    }

    // MARK: --verify (issue 16)

    /// Every stage is rendered twice and outputs agree: the run succeeds, with each render,
    /// transition and the concat made on two different workers.
    @Test func verifyRendersEachStageOnTwoWorkers() throws {
        let runner = FakeRunner(deterministic: true)
        let h = try Harness(workers: 2, slots: 1, runner: runner, verify: 1)
        let run = try h.submit(h.pipeline(4))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
        #expect(runner.calls.filter { $0.hasPrefix("fetch") }.count == 4, "fetches are not verified")
        #expect(runner.calls.filter { $0.hasPrefix("render") }.count == 8)
        #expect(runner.calls.filter { $0 == "concat" }.count == 2)
        let matched = try h.lineage.rows("SELECT count(*) AS n FROM event WHERE kind = 'verify.matched' AND run_id = ?", [run])
        #expect(matched[0]["n"] == "5")
        let twoWorkers = try h.lineage.rows("""
            SELECT s.name, count(DISTINCT a.worker_id) AS w FROM attempt a JOIN stage s ON s.id = a.stage_id
            WHERE s.run_id = ? AND s.name LIKE 'encode/%' AND a.state = 'succeeded' GROUP BY s.name
            """, [run])
        #expect(twoWorkers.count == 4 && twoWorkers.allSatisfy { $0["w"] == "2" }, "\(twoWorkers)")
    }

    /// A worker that answers forged bytes: a third worker decides, the forger is quarantined (its
    /// later hellos refused), and no forged output enters lineage or the movie.
    @Test func verifyQuarantinesAWorkerWhoseOutputDiffers() throws {
        let honest = FakeRunner(deterministic: true), forger = FakeRunner(forge: true)
        let h = try Harness(workers: 3, slots: 1, runner: honest, runners: [honest, honest, forger], verify: 1)
        let run = try h.submit(h.pipeline(6))
        guard case .succeeded = try #require(h.wait(run, timeout: 30)) else { Issue.record("run failed"); return }
        let recorded = Set(try h.lineage.rows("SELECT sha256 FROM artifact").compactMap { $0["sha256"] })
        #expect(!forger.forged.isEmpty, "the forger was given work")
        #expect(recorded.isDisjoint(with: forger.forged), "a forged output was accepted")
        let w2 = try h.lineage.rows("SELECT state FROM worker WHERE id = 'w2'")
        #expect(w2.first?["state"] == "quarantined")
        let events = try h.lineage.rows("SELECT message FROM event WHERE kind = 'worker.quarantined'")
        #expect(events.count == 1 && events[0]["message"]?.contains("worker w2 quarantined") == true, "\(events)")
        // It comes back (a reconnect after its shutdown): it gets no more work.
        let before = forger.calls.count
        let second = try h.submit(h.pipeline(3, name: "q"))
        guard case .succeeded = try #require(h.wait(second, timeout: 30)) else { Issue.record("second run failed"); return }
        #expect(forger.calls.count == before, "a quarantined worker was given work")
    }

    /// Two workers that disagree and no third to decide: the run fails and says so; nothing of
    /// either output is recorded as the stage's output.
    @Test func verifyWithoutATieBreakerFailsTheRunClearly() throws {
        let h = try Harness(workers: 2, slots: 1, runner: FakeRunner(deterministic: true), runners: [FakeRunner(deterministic: true), FakeRunner(forge: true)], verify: 1)
        let run = try h.submit(h.pipeline(2))
        guard case .failed(let message, _) = try #require(h.wait(run, timeout: 30)) else { Issue.record("the run succeeded with disagreeing workers"); return }
        #expect(message.contains("verification failed") && message.contains("no further worker can decide"), "\(message)")
    }

    @Test func runsEveryStageOnceAndNeverExceedsSlots() throws {
        let runner = FakeRunner()
        let h = try Harness(workers: 2, slots: 2, runner: runner)
        let run = try h.submit(h.pipeline(6))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
        #expect(runner.maxConcurrent <= 4)
        #expect(runner.maxConcurrent >= 2)
        #expect(runner.calls.filter { $0.hasPrefix("fetch") }.count == 6)
        #expect(runner.calls.filter { $0.hasPrefix("render") }.count == 6)
        #expect(runner.calls.filter { $0 == "concat" }.count == 1)
        let stages = try h.lineage.rows("SELECT state, count(*) AS n FROM stage WHERE run_id = ? GROUP BY state", [run])
        #expect(stages.count == 1 && stages[0]["state"] == "succeeded" && stages[0]["n"] == "25")
        let attempts = try h.lineage.rows("SELECT count(*) AS n FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ? AND a.state = 'succeeded'", [run])
        #expect(attempts[0]["n"] == "25")
        // Lineage puts each attempt in a slot of its own worker (the dashboard charts it there):
        // attempts that overlap on one worker are in different slots, each below its slot count.
        // (A render's three stage rows share its attempt: their leases are LEASE#0, #1, #2.)
        let rows = try h.lineage.rows("""
            SELECT a.lease, a.worker_id, a.slot, a.dispatched_at, a.finished_at FROM attempt a
            JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ? AND a.slot IS NOT NULL AND a.lease NOT LIKE '%#1' AND a.lease NOT LIKE '%#2'
            """, [run])
        #expect(rows.count == 13 && rows.allSatisfy { Int($0["slot"]!)! < 2 }, "\(rows)")
        for a in rows {
            for b in rows where a["lease"]! < b["lease"]! && a["worker_id"]! == b["worker_id"]! && a["slot"]! == b["slot"]! {
                let overlap = Double(a["dispatched_at"]!)! < Double(b["finished_at"]!)! && Double(b["dispatched_at"]!)! < Double(a["finished_at"]!)!
                #expect(!overlap, "\(a) and \(b) overlap in one slot")
            }
        }
    }

    /// A stage made ready and sent in the same turn of the coordinator is written once: what
    /// made it ready (its parameters, key and cost) rides on its dispatch's update. One that
    /// waits for a slot is still recorded ready by the turn's end, and what it becomes later is
    /// not overwritten by that. (Before, every stage had a ready write of its own: the result
    /// that made it ready and the tick that sent it were two feeds.)
    @Test func aStageSentInTheTurnItWasMadeReadyIsWrittenOnce() throws {
        func countingReadyWrites(_ h: Harness, workers: Int) throws -> DatabaseQueue {
            // Every worker in before the submit: stages made ready with no worker yet would wait.
            let deadline = Date().addingTimeInterval(10)
            while try h.lineage.rows("SELECT count(*) AS n FROM worker").first?["n"] != "\(workers)" && Date() < deadline { usleep(10_000) }
            // Counted by a trigger on the coordinator's own database (another connection, before any run;
            // it waits for the coordinator's turn to commit).
            var config = GRDB.Configuration(); config.busyMode = .timeout(10)
            let q = try DatabaseQueue(path: h.dir + "/lineage.db", configuration: config)
            try q.write { db in
                try db.execute(sql: """
                    CREATE TABLE ready_write (stage_id INTEGER);
                    CREATE TRIGGER counted AFTER UPDATE OF state ON stage WHEN NEW.state = 'ready'
                        BEGIN INSERT INTO ready_write VALUES (NEW.id); END;
                    """)
            }
            return q
        }
        // Slots to spare: everything goes out in the turn it is made ready.
        do {
            let h = try Harness(workers: 2, slots: 4, runner: FakeRunner())
            let q = try countingReadyWrites(h, workers: 2)
            let run = try h.submit(h.pipeline(3))
            guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
            #expect(try q.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM ready_write") } == 0)
            // What the ready write carried went with the dispatch: every render stage has its cost.
            let renders = try h.lineage.rows("SELECT name, cost_ms, state FROM stage WHERE run_id = ? AND kind IN ('decode', 'transform', 'encode')", [run])
            #expect(renders.count == 9 && renders.allSatisfy { $0["cost_ms"] != nil && $0["state"] == "succeeded" }, "\(renders)")
        }
        // One slot: the renders wait their turn, recorded ready meanwhile, and end succeeded.
        do {
            let h = try Harness(workers: 1, slots: 1, runner: FakeRunner())
            let q = try countingReadyWrites(h, workers: 1)
            let run = try h.submit(h.pipeline(3))
            guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
            let waited = try q.read { try Int.fetchOne($0, sql: "SELECT count(DISTINCT stage_id) FROM ready_write") } ?? 0
            #expect(waited >= 2, "stages that waited for the one slot were not recorded ready: \(waited)")
            let states = try h.lineage.rows("SELECT state, count(*) AS n FROM stage WHERE run_id = ? GROUP BY state", [run])
            #expect(states.count == 1 && states[0]["state"] == "succeeded" && states[0]["n"] == "13", "\(states)")
        }
    }

    @Test func retryableFailuresAreRetriedAndRecorded() throws {
        let runner = FakeRunner()
        runner.failures["render p-2.mov"] = (.retryable, 2)
        let h = try Harness(workers: 1, slots: 2, runner: runner)
        let setbacks = Locked<[String]>([])
        h.coordinator.observe { p, _, _ in if let p { setbacks.withLock { $0 = p.setbacks } } }
        let run = try h.submit(h.pipeline(3))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
        let rows = try h.lineage.rows("""
            SELECT a.state FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ? AND s.name = 'decode/2' AND a.state != 'missed' ORDER BY a.id
            """, [run])
        #expect(rows.map { $0["state"]! } == ["failed", "failed", "succeeded"])
        // Its followers are told each try again, and why (the time left grows then).
        #expect(setbacks.value.count == 2 && setbacks.value.allSatisfy { $0.hasPrefix("clip 3 (p-2.mov): ") }, "\(setbacks.value)")
        #expect(setbacks.value.last?.hasSuffix("; trying again (attempt 3 of 3)") == true, "\(setbacks.value)")
    }

    /// Two broken files of four: the run's one failure names both (the rest of the run goes on
    /// once the first fails), not one per submit; each bad fetch's lineage row is failed with its error.
    @Test func aRunWithSeveralBrokenInputsNamesThemAll() throws {
        let runner = FakeRunner()
        runner.failures["fetch p-1.mov"] = (.permanent, 1)
        runner.failures["fetch p-3.mov"] = (.permanent, 1)
        let h = try Harness(workers: 1, slots: 4, runner: runner)
        let run = try h.submit(h.pipeline(4))
        guard case .failed(let message, _) = try #require(h.wait(run)) else { Issue.record("run should fail"); return }
        let lines = message.split(separator: "\n").map(String.init)
        #expect(lines.first == "2 items failed:", "\(message)")
        #expect(lines.dropFirst().map { $0.hasPrefix("  clip ") } == [true, true, false], "\(message)")
        // The two good items rendered while the run went on, and the error says they are kept.
        #expect(lines.last == "  (the 2 other items are rendered and kept: mend or remove the failed ones and submit again to reuse them)", "\(message)")
        #expect(lines.contains { $0.contains("p-1.mov") } && lines.contains { $0.contains("p-3.mov") }, "\(message)")
        let rows = try h.lineage.rows("SELECT name, state, error FROM stage WHERE run_id = ? AND name LIKE 'fetch/%' ORDER BY name", [run])
        #expect(rows.map { $0["state"]! } == ["succeeded", "failed", "succeeded", "failed"])
        #expect(rows[3]["error"]?.contains("p-3.mov") == true)
        #expect(try h.lineage.rows("SELECT error FROM run WHERE id = ?", [run]).first?["error"] == message)
    }

    /// A clip whose audio track cannot be decoded renders only muted: its fetch tells (probing
    /// finds the track), so the run names it with the broken files beside it and never renders
    /// it, instead of failing on it alone when its render comes. Muted, it is a good clip.
    @Test func aClipWithUndecodableAudioFailsAtItsFetchUnlessMuted() throws {
        let runner = FakeRunner()
        runner.failures["fetch p-1.mov"] = (.permanent, 1)
        runner.undecodableAudio = ["fetch p-2.mov"]
        let h = try Harness(workers: 1, slots: 4, runner: runner)
        let run = try h.submit(h.pipeline(4))
        guard case .failed(let message, _) = try #require(h.wait(run)) else { Issue.record("run should fail"); return }
        let lines = message.split(separator: "\n").map(String.init)
        #expect(lines.first == "2 items failed:", "\(message)")
        #expect(lines.contains { $0.contains("p-1.mov") }, "\(message)")
        #expect(lines.contains { $0.contains("clip 3 (p-2.mov): its audio track cannot be decoded") }, "\(message)")
        #expect(lines.contains { $0.contains("mute: true") }, "the error says what to do: \(message)")
        #expect(!runner.calls.contains("render p-2.mov"), "the clip was never rendered: \(runner.calls)")
        // The run page's failures show the refusal (it has no attempt) beside the broken file's attempt.
        let shown = try #require(try FarmReader(path: h.dir + "/lineage.db").run(run)).failures
        let refusal = shown.filter { $0.attemptNo == nil }
        #expect(refusal.count == 1 && refusal.first?.stage == "fetch/2" && refusal.first?.error?.contains("audio track cannot be decoded") == true,
                "\(shown.map { "\($0.stage) \($0.attemptNo.map(String.init) ?? "-") \($0.error ?? "")" })")
        #expect(shown.contains { $0.attemptNo == 1 && $0.stage == "fetch/1" })

        var muted = h.pipeline(4)
        muted.items[2].edits.mute = true
        runner.failures = [:]
        let again = try h.submit(muted)
        guard case .succeeded = try #require(h.wait(again)) else { Issue.record("the muted clip's run should succeed"); return }
    }

    /// A movie that cannot be written where the pipeline says (its folder cannot be made) fails
    /// the run naming the path and the system's reason, not Foundation's error dump; the concat's
    /// attempt is recorded failed rather than left running, nothing half-written is left beside
    /// the path, and the next submit with a good path succeeds.
    @Test func aMovieThatCannotBeWrittenFailsClearly() throws {
        let h = try Harness(workers: 1, slots: 2, runner: FakeRunner())
        try "not a folder".write(toFile: h.dir + "/blocker", atomically: true, encoding: .utf8)
        var p = h.pipeline(2)
        p.output.path = h.dir + "/blocker/sub/p.mp4"
        let run = try h.submit(p)
        guard case .failed(let message, _) = try #require(h.wait(run)) else { Issue.record("run should fail"); return }
        #expect(message.contains("could not write the movie to \(p.output.path): cannot make the folder \(h.dir)/blocker/sub: "), "\(message)")
        #expect(message.contains("submit again"), "the error says what to do: \(message)")
        #expect(!message.contains("Domain="), "\(message)")
        let attempts = try h.lineage.rows("SELECT a.state, a.error_message FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ? AND s.name = 'concat'", [run])
        #expect(attempts.map { $0["state"]! } == ["failed"])
        #expect(attempts.first?["error_message"]?.contains("could not write the movie") == true)

        // A copy that fails half-way leaves no temporary file beside the movie's path.
        #expect(throws: ArtifactStore.PublishError.self) {
            try ArtifactStore.publish(ArtifactRef(sha256: "x", path: h.dir + "/missing", size: 1), to: h.dir + "/out/q.mp4")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: h.dir + "/out").isEmpty)

        p.output.path = h.dir + "/out/p.mp4"
        guard case .succeeded = try #require(h.wait(try h.submit(p))) else { Issue.record("the run with a good path should succeed"); return }
        #expect(FileManager.default.fileExists(atPath: p.output.path))
    }

    /// A failure stops only what waits for it. A broken local file, a clip that fails in its
    /// render and a download that fails late are all named by the one failure; the good clip's
    /// render, under way or not yet begun when the first failure came, finishes and is recorded,
    /// so the next submit reuses it instead of rendering it again.
    @Test func aFailedRunFinishesWhatDoesNotWaitForTheFailure() throws {
        let runner = FakeRunner(deterministic: true)
        runner.failures["fetch p-0.mov"] = (.permanent, 1)
        runner.failures["render p-1.mov"] = (.permanent, 1)
        runner.failures["fetch slow.mov"] = (.permanent, 1)
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        // While the run goes on, the stage that failed is recorded failed (not left running).
        let midRun = Locked<String?>(nil)
        runner.onStart = { [lineage = h.lineage] label in
            guard label == "fetch slow.mov" else { return }
            midRun.withLock { $0 = try? lineage.rows("SELECT state FROM stage WHERE name = 'fetch/0'").first?["state"] }
            Thread.sleep(forTimeInterval: 0.5)
        }
        var p = h.pipeline(3)
        p.items.append(Item(kind: .video(source: SourceRef("https://example.invalid/slow.mov"), trim: nil)))
        let run = try h.submit(p)
        guard case .failed(let message, _) = try #require(h.wait(run)) else { Issue.record("run should fail"); return }
        let lines = message.split(separator: "\n").map(String.init)
        #expect(lines.first == "3 items failed:", "\(message)")
        #expect(midRun.value == "failed", "while the run went on, fetch/0 was \(midRun.value ?? "not recorded")")
        for name in ["p-0.mov", "p-1.mov", "slow.mov"] { #expect(lines.contains { $0.contains(name) }, "\(name) not named: \(message)") }
        let rows = try h.lineage.rows("SELECT name, state FROM stage WHERE run_id = ? ORDER BY id", [run])
        let state = Dictionary(uniqueKeysWithValues: rows.map { ($0["name"]!, $0["state"]!) })
        #expect(state["encode/2"] == "succeeded", "the good clip was not rendered: \(state)")
        #expect(state["decode/1"] == "failed" && state["fetch/0"] == "failed" && state["fetch/3"] == "failed", "\(state)")
        #expect(state["decode/0"] == "cancelled" && state["concat"] == "cancelled", "\(state)")
        #expect(!rows.contains { ["pending", "ready", "running"].contains($0["state"]!) }, "\(rows)")

        // The broken clips mended: the good clip's render is reused, not made again.
        runner.failures = [:]
        runner.onStart = nil
        guard case .succeeded = try #require(h.wait(try h.submit(p))) else { Issue.record("the mended run should succeed"); return }
        #expect(runner.calls.filter { $0 == "render p-2.mov" }.count == 1, "\(runner.calls)")
    }

    /// A stage that hangs on its worker (it heeds no cancel) is stopped there once past its time
    /// limit and tried again on the other worker: the run ends without waiting for the hung
    /// attempt, whose late answer is discarded; lineage has the timed-out attempt failed, saying
    /// why, and one success for the stage.
    @Test func aHungStageIsStoppedAndTriedOnAnotherWorker() throws {
        let runner = FakeRunner()
        runner.hangs["render p-1.mov"] = 1
        runner.hangSeconds = 6
        let h = try Harness(workers: 2, slots: 1, runner: runner, stageTimeout: 0.5)
        let t0 = Date()
        let run = try h.submit(h.pipeline(3))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
        let took = Date().timeIntervalSince(t0)
        let all = try h.lineage.rows("SELECT s.name, a.state, a.worker_id, a.dispatched_at, a.finished_at, a.error_message FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ? ORDER BY a.id", [run])
        #expect(took < 4, "the run waited \(took) s, for the hung attempt (6 s): \(all)")
        let rows = try h.lineage.rows("""
            SELECT a.state, a.worker_id, a.error_message FROM attempt a JOIN stage s ON s.id = a.stage_id
            WHERE s.run_id = ? AND s.name = 'decode/1' AND a.state != 'missed' ORDER BY a.id
            """, [run])
        #expect(rows.map { $0["state"]! } == ["failed", "succeeded"], "\(rows)")
        #expect(rows.first?["error_message"]?.contains("did not finish within 0.5 s on worker \(rows.first?["worker_id"] ?? "?")") == true, "\(rows)")
        #expect(rows.count == 2 && rows[0]["worker_id"] != rows[1]["worker_id"], "the retry went to the worker where it hung: \(rows)")
        #expect(runner.calls.filter { $0 == "render p-1.mov" }.count == 2)
    }

    /// A stage that hangs wherever it runs fails its run once its attempts are spent, saying so.
    @Test func aStageThatHangsEverywhereFailsItsRunSayingWhy() throws {
        let runner = FakeRunner()
        runner.hangs["render p-0.mov"] = 3
        runner.hangSeconds = 1.5
        let h = try Harness(workers: 2, slots: 1, runner: runner, stageTimeout: 0.3)
        let run = try h.submit(h.pipeline(2))
        guard case .failed(let message, _) = try #require(h.wait(run)) else { Issue.record("the run succeeded"); return }
        #expect(message.contains("render p-0.mov") || message.contains("clip 1"), "\(message)")
        #expect(message.contains("did not finish within") && message.contains("after 3 attempts on workers "), "\(message)")
        // Both workers named, each once (the third attempt went back to one of them).
        #expect(message.contains("w0") && message.contains("w1") && !message.contains("w0, w1, w") && !message.contains("w1, w0, w"), "\(message)")
    }

    @Test func retryableFailuresStopAfterThreeAttempts() throws {
        let runner = FakeRunner()
        runner.failures["fetch p-0.mov"] = (.retryable, 5)
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        let run = try h.submit(h.pipeline(2))
        guard case .failed(let message, _) = try #require(h.wait(run)) else { Issue.record("run should fail"); return }
        #expect(message.contains("after 3 attempts on worker w0"), "which machine to look at: \(message)")
        #expect(runner.calls.filter { $0 == "fetch p-0.mov" }.count == 3)
    }

    @Test func thePipelinesRetryAttemptsOverrideTheDefault() throws {
        let runner = FakeRunner()
        runner.failures["fetch p-0.mov"] = (.retryable, 10)
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        var p = h.pipeline(2)
        p.retryAttempts = 5
        let run = try h.submit(p)
        guard case .failed(let message, _) = try #require(h.wait(run)) else { Issue.record("run should fail"); return }
        #expect(message.contains("after 5 attempts"))
        #expect(runner.calls.filter { $0 == "fetch p-0.mov" }.count == 5)
    }

    @Test func aHigherPriorityRunGoesFirst() throws {
        let runner = FakeRunner(delay: 0.02)
        let h = try Harness(workers: 1, slots: 1, runner: runner)
        let low = try h.submit(h.pipeline(12, name: "low"))
        let high = try h.submit(h.pipeline(2, name: "high"), priority: 5)
        guard case .succeeded = try #require(h.wait(high)), case .succeeded = try #require(h.wait(low)) else { Issue.record("runs failed"); return }
        let rows = try h.lineage.rows("SELECT id, finished_at FROM run ORDER BY id")
        #expect(Double(rows[1]["finished_at"]!)! < Double(rows[0]["finished_at"]!)!, "the priority run finished first")
        // Once submitted, nothing of the low run started until the high run was done.
        let afterHigh = runner.calls.firstIndex { $0.contains("high") }.map { runner.calls[$0...].prefix(5) } ?? []
        #expect(afterHigh.count == 5 && afterHigh.allSatisfy { $0.contains("high") || $0 == "concat" }, "\(afterHigh)")
    }

    /// What the coordinator believes workers hold: a drop or a departure takes artifacts out, and
    /// each worker's share stays within its bound, the oldest forgotten first.
    @Test func holdingsForgetWhatWorkersDropAndStayBounded() {
        var h = Holdings(perWorker: 8)
        for k in 0..<6 { h.add("a\(k)", to: "w1") }
        h.add("a0", to: "w2")
        h.add("a0", to: "w1")
        #expect(h.count("w1") == 6 && h.holds("w1", "a0") && h.holds("w2", "a0"))
        h.drop(["a0", "a1", "never-held"], from: "w1")
        #expect(h.count("w1") == 4 && !h.holds("w1", "a0") && !h.holds("w1", "a1") && h.holds("w1", "a2"))
        #expect(h.holds("w2", "a0"), "another worker's copy stays")
        h.forget("w2")
        #expect(!h.holds("w2", "a0") && h.count("w2") == 0)
        h.drop(["a2", "a3", "a4", "a5"], from: "w1")
        #expect(h.isEmpty, "nothing is left once every holder gave its artifacts up")
        // Over the bound: the oldest go first, a quarter at a time.
        for k in 0..<9 { h.add("b\(k)", to: "w1") }
        #expect(h.count("w1") == 7)
        #expect(!h.holds("w1", "b0") && !h.holds("w1", "b1") && h.holds("w1", "b2") && h.holds("w1", "b8"))
    }

    @Test func aRenderGoesToTheWorkerHoldingItsSource() throws {
        let runner = FakeRunner(delay: 0.05)
        let h = try Harness(workers: 4, slots: 1, runner: runner)
        let run = try h.submit(h.pipeline(4, name: "local"))
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
        let rows = try h.lineage.rows("""
            SELECT s.item_idx AS item, group_concat(DISTINCT a.worker_id) AS workers FROM attempt a JOIN stage s ON s.id = a.stage_id
            WHERE s.run_id = ? AND s.item_idx IS NOT NULL GROUP BY s.item_idx
            """, [run])
        #expect(rows.count == 4)
        for r in rows { #expect(!(r["workers"] ?? "").contains(","), "item \(r["item"]!) moved between workers: \(r["workers"]!)") }
    }

    @Test func permanentFailureFailsThatRunAloneAndAtOnce() throws {
        let runner = FakeRunner()
        runner.failures["render bad-1.mov"] = (.permanent, 10)
        let h = try Harness(workers: 2, slots: 1, runner: runner)
        let bad = try h.submit(h.pipeline(3, name: "bad"))
        let good = try h.submit(h.pipeline(3, name: "good"))
        guard case .failed(let message, _) = try #require(h.wait(bad)) else { Issue.record("bad run should fail"); return }
        #expect(message.contains("bad-1.mov"))
        #expect(message.contains("decode failed"))
        #expect(runner.calls.filter { $0 == "render bad-1.mov" }.count == 1)
        guard case .succeeded = try #require(h.wait(good)) else { Issue.record("good run should succeed"); return }
        let state = try h.lineage.rows("SELECT state FROM run WHERE id = ?", [bad])
        #expect(state[0]["state"] == "failed")
    }

    @Test func concurrentRunsShareWorkersFairly() throws {
        let runner = FakeRunner(delay: 0.02)
        let h = try Harness(workers: 2, slots: 1, runner: runner)
        let big = try h.submit(h.pipeline(20, name: "big"))
        usleep(100_000)
        let small = try h.submit(h.pipeline(2, name: "small"))
        guard case .succeeded = try #require(h.wait(small)) else { Issue.record("small failed"); return }
        // The small run finishes while the big one still has most of its work left.
        let bigDone = try h.lineage.rows("SELECT count(*) AS n FROM stage WHERE run_id = ? AND state = 'succeeded'", [big])
        #expect(Int(bigDone[0]["n"]!)! < 60)
        guard case .succeeded = try #require(h.wait(big)) else { Issue.record("big failed"); return }
    }

    @Test func aSilentWorkerIsDeclaredLostAndItsWorkMoves() throws {
        let runner = FakeRunner(delay: 0.3)
        let h = try Harness(workers: 2, slots: 1, runner: runner, livenessTimeout: 1)
        let run = try h.submit(h.pipeline(4))
        usleep(200_000)
        h.workers[0].stop()          // goes silent: no more heartbeats or results
        guard case .succeeded = try #require(h.wait(run)) else { Issue.record("run failed"); return }
        let lost = try h.lineage.rows("SELECT state FROM worker WHERE id = 'w0'")
        #expect(lost.first?["state"] == "lost")
    }

    @Test func aStageWhoseAttemptsLoseThreeWorkersIsPoison() throws {
        // Whichever worker starts rendering p-2 goes silent at once, as if that clip crashed it.
        let runners = (0..<4).map { _ in FakeRunner(delay: 0.05) }
        let h = try Harness(workers: 4, slots: 1, runner: runners[0], livenessTimeout: 1, runners: runners)
        for (i, r) in runners.enumerated() {
            r.onStart = { [weak h] label in
                guard label == "render p-2.mov" else { return }
                h?.workers[i].stop()
                Thread.sleep(forTimeInterval: 3)     // the task never finishes while its worker lives
            }
        }
        let setbacks = Locked<[String]>([])
        h.coordinator.observe { p, _, _ in if let p { setbacks.withLock { $0 = p.setbacks } } }
        let run = try h.submit(h.pipeline(5))
        guard case .failed(let message, _) = try #require(h.wait(run, timeout: 30)) else { Issue.record("the run should fail"); return }
        #expect(message.contains("poison") && message.contains("lost 3 workers"), "\(message)")
        // Its followers were told of each lost worker; the third loss is not followed by another
        // try (before, it said "it goes to another worker" there too).
        #expect(setbacks.value.count == 3 && setbacks.value.allSatisfy { $0.hasPrefix("clip 3 (p-2.mov): worker w") }, "\(setbacks.value)")
        #expect(setbacks.value.prefix(2).allSatisfy { $0.hasSuffix("; it goes to another worker") } && setbacks.value.last?.hasSuffix("; it is not tried again") == true,
                "\(setbacks.value)")
        let lost = try h.lineage.rows("SELECT count(*) AS n FROM worker WHERE state = 'lost'")
        #expect(lost.first?["n"] == "3", "exactly three workers were taken down; the fourth was spared")
        let tries = try h.lineage.rows("SELECT count(*) AS n FROM v_attempts WHERE stage = 'decode/2' AND state = 'lost'")
        #expect(tries.first?["n"] == "3")
    }
}

/// Log messages, kept for a test to read.
struct RecordingLogHandler: LogHandler {
    let messages: Locked<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? { get { metadata[key] } set { metadata[key] = newValue } }
    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
        messages.withLock { $0.append("\(level): \(message)") }
    }
}

@Suite struct WorkerRefusalTests {
    /// A worker the coordinator refuses (another engine, a removed key) says so once, then keeps
    /// trying quietly: the coordinator answers its heartbeats with "say hello again", and each such
    /// answer made it log the refusal anew, once a second for as long as it ran.
    @Test func aRefusedWorkerSaysSoOnce() throws {
        let context = MessagingContext()
        let router = try Socket(context, .router)
        let endpoint = try router.bind("tcp://127.0.0.1:*")
        let messages = Locked<[String]>([])
        let logger = Logger(label: "refused") { _ in RecordingLogHandler(messages: messages) }
        let worker = WorkerRuntime(.init(endpoint: endpoint, slots: 1, id: "refused-1", heartbeatInterval: 0.2), runner: FakeRunner(), logger: logger)
        Thread { try? worker.run(context: context) }.start()
        // As the coordinator does: a hello is refused, a heartbeat of a worker it does not hold is asked to say hello again.
        var hellos = 0, heartbeats = 0
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline {
            guard let frames = try router.receive(timeoutMs: 50), frames.count >= 2, let e = Envelope.decode(frames[1]) else { continue }
            switch e.message {
            case .hello: hellos += 1; _ = try router.send([frames[0], Envelope(.rejected(message: "this worker renders differently (a test)")).encoded()])
            case .heartbeat: heartbeats += 1; _ = try router.send([frames[0], Envelope(.reannounce).encoded()])
            default: break
            }
        }
        worker.stop()
        let said = messages.value.filter { $0.contains("the coordinator refused this worker") }
        #expect(hellos >= 3 && heartbeats >= 3, "hellos \(hellos), heartbeats \(heartbeats)")
        #expect(said.count == 1, "\(said.count) times: \(messages.value)")
        router.close()
    }
}

@Suite struct WorkerAfterAStopTests {
    /// A coordinator stopping while a worker still waits for an assignment's inputs from it (here
    /// a hand-played coordinator never answers the pull): the worker gives that assignment up,
    /// and hands it back to the coordinator that comes next with its first hello, while a render
    /// under way goes on and is listed running. Before, the worker said nothing of it: the next
    /// coordinator waited for a result that could not come, then gave the stage out again, and
    /// lineage counted the attempt among the renders the stop had cost (CI: "8 given out").
    @Test func anAssignmentStillWaitingForItsInputsIsHandedBackToTheNextCoordinator() throws {
        let context = MessagingContext()
        let router = try Socket(context, .router)
        let endpoint = try router.bind("tcp://127.0.0.1:*")
        let store = try ArtifactStore(root: temporaryDirectory("given-up") + "/store")
        var config = WorkerRuntime.Configuration(endpoint: endpoint, slots: 2, id: "w-given-up", heartbeatInterval: 0.1)
        config.store = store
        var logger = Logger(label: "given-up"); logger.logLevel = .critical
        let worker = WorkerRuntime(config, runner: FakeRunner(delay: 30), logger: logger)
        Thread { try? worker.run(context: context) }.start()
        defer { worker.stop(); router.close() }
        func next(_ wanted: (WireMessage) -> Bool, within seconds: Double = 5) throws -> (Data, WireMessage)? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                guard let frames = try router.receive(timeoutMs: 50), frames.count >= 2, let e = Envelope.decode(frames[1]) else { continue }
                if wanted(e.message) { return (frames[0], e.message) }
            }
            return nil
        }
        let (peer, _) = try #require(try next { if case .hello = $0 { true } else { false } }, "no hello")
        // One render that needs nothing from the coordinator, and one whose input is not here yet.
        _ = try router.send([peer, Envelope(.assign(Assignment(lease: "1-1", task: .fetch(uri: "/in/a.mov", name: "a.mov")))).encoded()])
        var waiting = Assignment(lease: "1-2", task: .fetch(uri: "/in/b.mov", name: "b.mov"))
        waiting.inputs = [ArtifactRef(sha256: String(repeating: "ab", count: 32), path: "/in/b.mov", size: 1 << 20)]
        _ = try router.send([peer, Envelope(.assign(waiting)).encoded()])
        try #require(try next { if case .pull(let sha, _, _) = $0 { sha.hasPrefix("abab") } else { false } } != nil, "the worker did not ask for the input")
        _ = try router.send([peer, Envelope(.stopping(keep: ["1-1", "1-2"])).encoded()])
        // The next coordinator: it answers what the worker sends next with "say hello again".
        let (again, _) = try #require(try next { if case .heartbeat = $0 { true } else { false } }, "no heartbeat after the stop")
        _ = try router.send([again, Envelope(.reannounce).encoded()])
        var hellos: [[String]] = [], handedBack: [String] = [], order: [String] = []
        let deadline = Date().addingTimeInterval(2)
        while Date() < deadline {
            guard let (_, m) = try next({ _ in true }, within: 0.2) else { continue }
            switch m {
            case .hello(let h): hellos.append((h.running ?? []).sorted()); order.append("hello")
            case .handBack(let lease): handedBack.append(lease); order.append("handBack")
            default: break
            }
        }
        #expect(handedBack == ["1-2"], "handed back: \(handedBack)")
        #expect(order.first == "hello" && !hellos.isEmpty && hellos.allSatisfy { $0 == ["1-1"] }, "\(order) \(hellos)")
    }
}
