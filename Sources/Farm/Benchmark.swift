import Foundation
import Logging
import ThreadlineCore
import Transport
import Lineage
import Scheduler
import DequeModule

/// A runner that does no media work, for measuring the scheduler alone: fetch reports fixed
/// facts, everything else an empty artifact, at once.
public struct NoopTaskRunner: TaskRunner {
    public init() {}
    public func check(_ a: Assignment) -> TaskResult { .miss(a) }
    public func run(_ a: Assignment, isCancelled: @Sendable () -> Bool) -> TaskResult {
        let now = Date().timeIntervalSince1970
        var r = TaskResult(lease: a.lease, error: nil, artifact: ArtifactRef(sha256: SHA256Hasher.hex(a.lease), path: "/dev/null", size: 0),
                           facts: nil, segment: nil, startedAt: now, finishedAt: now, cpuSeconds: 0, maxRSS: 0)
        switch a.task {
        case .fetch: r.facts = MediaFacts(duration: 1, width: 16, height: 16, hasVideo: true, hasAudio: true)
        case .segment, .transition: r.segment = SegmentReport()
        case .concat: break
        }
        return r
    }
}

/// Scheduler figures: dispatch throughput with simulated workers over real ZeroMQ on loopback,
/// ready→started latency, and coordinator memory with many queued stages.
public enum SchedulerBenchmark {
    public struct Figures: Codable, Sendable {
        public var workers: Int
        public var items: Int
        public var attempts: Int
        public var seconds: Double
        public var attemptsPerSecond: Double
        public var lineageStagesPerSecond: Double
        public var lightLoadLatencyMedianMs: Double
        public var lightLoadLatencyP99Ms: Double
        /// The part of that latency the coordinator held a ready stage before sending it.
        public var lightLoadHeldMedianMs: Double
        public var lightLoadHeldP99Ms: Double
        public var queuedStages: Int
        public var rssBeforeMB: Double
        public var rssQueuedMB: Double
        public var submitSeconds: Double
        /// The same transport with nothing else: one ROUTER, the same number of DEALER threads,
        /// an assignment, a result and an acknowledgement per attempt, each the size of the real
        /// frame; no scheduling, recording or bookkeeping. The ceiling for `attemptsPerSecond`.
        public var transportFloorAttemptsPerSecond: Double
        /// The scheduling core alone (`FarmScheduler`), on the same run and the same number of
        /// one-slot workers, each attempt a success as soon as it is dispatched: the events the
        /// coordinator feeds it (submit, prepared, succeeded, tick) and nothing else: no socket,
        /// no lineage, no keys or specs, no placement by what workers hold. The ceiling for the
        /// coordinator's thread however the rest of its work per attempt is done.
        public var schedulerFloorAttemptsPerSecond: Double
    }

    static func rssMB() -> Double {
        guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = s.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
        return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
    }

    static func pipeline(items: Int, name: String) -> Pipeline {
        Pipeline(name: name, output: OutputProfile(path: "/dev/null"),
                 items: (0..<items).map { Item(kind: .video(source: SourceRef("/bench/\(name)-\($0).mov"), trim: nil)) })
    }

    /// Waits until `count` workers are recorded in the lineage database at `path`; false after `seconds`.
    static func awaitWorkers(_ count: Int, lineage path: String, within seconds: Double = .infinity) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while (try? LineageStore.readRows(path: path, "SELECT count(*) AS n FROM worker"))?.first?["n"] != "\(count)" {
            if Date() >= deadline { return false }
            usleep(10_000)
        }
        return true
    }

    final class Cluster {
        let context = MessagingContext()
        let coordinator: Coordinator
        var workers: [WorkerRuntime] = []
        let outcomes = Locked<[Int64: RunOutcome]>([:])
        let dir: String
        init(dir: String, workers n: Int) throws {
            self.dir = dir
            var logger = Logger(label: "bench"); logger.logLevel = .critical
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let lineage = try LineageStore(path: dir + "/lineage.db")
            var config = Coordinator.Configuration(bind: "tcp://127.0.0.1:*")
            config.publishOutputs = false
            config.livenessTimeout = 30
            coordinator = Coordinator(config, lineage: lineage, logger: logger)
            coordinator.observe { [outcomes] _, run, o in if let o { outcomes.withLock { $0[run] = o } } }
            let ep = try coordinator.start(context: context)
            for i in 0..<n {
                let w = WorkerRuntime(.init(endpoint: ep, slots: 1, id: "sim\(i)"), runner: NoopTaskRunner(), logger: logger)
                workers.append(w)
                let ctx = context
                let t = Thread { try? w.run(context: ctx) }
                t.stackSize = 1 << 20
                t.start()
            }
        }
        func submit(_ p: Pipeline) -> Int64 {
            let sem = DispatchSemaphore(value: 0)
            let box = Locked<Int64>(0)
            coordinator.submit(p) { r in box.withLock { $0 = (try? r.get()) ?? -1 }; sem.signal() }
            sem.wait()
            return box.value
        }
        /// Waits until every simulated worker is recorded in lineage; false after `seconds`.
        func awaitWorkers(within seconds: Double = .infinity) -> Bool {
            SchedulerBenchmark.awaitWorkers(workers.count, lineage: dir + "/lineage.db", within: seconds)
        }
        /// Waits for the run's end; nil after `seconds`.
        @discardableResult
        func wait(_ run: Int64, within seconds: Double = .infinity) -> RunOutcome? {
            let deadline = Date().addingTimeInterval(seconds)
            while outcomes.value[run] == nil && Date() < deadline { usleep(1000) }
            return outcomes.value[run]
        }
        func stop() {
            for w in workers { w.stop() }
            coordinator.stop()
            coordinator.waitUntilStopped()
        }
    }

    /// Sizes of the real frames of a render attempt: its assignment, its result, the acknowledgement.
    static func frameSizes() -> (assign: Int, result: Int, ack: Int) {
        let p = pipeline(items: 1, name: "floor")
        let spec = Planner.segmentSpec(p, index: 0, sourcePath: "/bench/store/\(String(repeating: "0", count: 64))", frameCount: 30)
        let lease = UUID().uuidString
        var a = Assignment(lease: lease, task: .segment(spec), key: String(repeating: "f", count: 64))
        a.inputs = [ArtifactRef(sha256: String(repeating: "0", count: 64), path: spec.sourcePath, size: 1 << 20)]
        let r = NoopTaskRunner().run(a, isCancelled: { false })
        return (Envelope(.assign(a)).encoded().count, Envelope(.result(r)).encoded().count, Envelope(.ack(lease: lease)).encoded().count)
    }

    /// Attempts per second through the transport alone (see `Figures.transportFloorAttemptsPerSecond`).
    static func transportFloor(workers: Int, attempts: Int, sizes: (assign: Int, result: Int, ack: Int)) throws -> Double {
        let context = MessagingContext()
        let router = try Socket(context, .router)
        let endpoint = try router.bind("tcp://127.0.0.1:*")
        // A frame of `size` bytes whose first byte says what it is.
        func frame(_ tag: Unicode.Scalar, _ size: Int) -> Data { Data([UInt8(ascii: tag)] + [UInt8](repeating: 0x2a, count: max(0, size - 1))) }
        let assign = frame("A", sizes.assign), result = frame("R", sizes.result), ack = frame("K", sizes.ack), stop = frame("S", 1)
        for i in 0..<workers {
            let t = Thread {
                guard let s = try? Socket(context, .dealer) else { return }
                defer { s.close(lingerMs: 0) }
                try? s.setIdentity("floor\(i)")
                try? s.connect(endpoint)
                _ = try? s.send([Data("hello".utf8)])
                // As a worker does: wait for the socket, read, answer an assignment with a result.
                while let frames = try? s.receive(timeoutMs: -1), let first = frames.first?.first {
                    if first == UInt8(ascii: "S") { return }
                    if first == UInt8(ascii: "A") { _ = try? s.send([result]) }
                }
            }
            t.stackSize = 1 << 20
            t.start()
        }
        var sent = 0, done = 0
        var t0 = Date()
        var peers: [Data] = []
        // The clock starts once every worker has said hello; then each gets work as it becomes free.
        while done < attempts {
            guard let frames = try router.receive(timeoutMs: -1), frames.count == 2 else { continue }
            let (peer, body) = (frames[0], frames[1])
            if body.first == UInt8(ascii: "R") {
                done += 1
                _ = try router.send([peer, ack])
                if sent < attempts { _ = try router.send([peer, assign]); sent += 1 }
            } else {
                peers.append(peer)
                guard peers.count == workers else { continue }
                t0 = Date()
                for p in peers where sent < attempts { _ = try router.send([p, assign]); sent += 1 }
            }
        }
        let seconds = Date().timeIntervalSince(t0)
        for p in peers { _ = try router.send([p, stop]) }
        usleep(100_000)
        router.close(lingerMs: 0)
        return Double(done) / seconds
    }

    /// Attempts per second through the scheduling core alone (see `Figures.schedulerFloorAttemptsPerSecond`).
    /// The run is the throughput run's pipeline, its graph as the coordinator builds it (`RunState`).
    static func schedulerFloor(workers: Int, items n: Int) -> (attempts: Int, perSecond: Double) {
        let p = pipeline(items: n, name: "floor")
        let stageIDs = Dictionary(uniqueKeysWithValues: Planner.stages(for: p).enumerated().map { ($1.id, Int64($0 + 1)) })
        let run = RunState(id: 1, pipeline: p, stageIDs: stageIDs)
        var scheduler = FarmScheduler(.init(epoch: "floor"))
        var events = Deque<FarmScheduler.Event>()
        var running = Deque<(lease: String, worker: String)>()
        var dispatched = 0, ended = false
        func feed() {
            while let e = events.popFirst() {
                for effect in scheduler.handle(e, now: Clocks.steady) {
                    switch effect {
                    case .prepare(let s):
                        // As in the throughput run: renders carry a cost, renders and the concat an output
                        // key (its fetches have none: their paths do not exist, so nothing keys them).
                        let kind = run.units[s.node].kind
                        events.append(.prepared(s, cacheCheck: false, cost: kind == .render ? 1 : 0, key: kind == .fetch ? nil : "key-\(s.node)"))
                    case .dispatch(let lease, _, let worker, _, _, _):
                        running.append((lease, worker)); dispatched += 1
                    case .runEnded: ended = true
                    default: break
                    }
                }
            }
        }
        for w in 0..<workers { events.append(.workerJoined("sim\(w)", slots: 1, running: [])) }
        feed()
        let t0 = Clocks.steady
        events.append(.submit(run.schedulerSpec(maxAttempts: Coordinator.Configuration(bind: "").maxAttempts, done: [])))
        feed()
        // Prepared stages go out at the next tick, as in the coordinator's turn.
        events.append(.tick)
        feed()
        // As the coordinator does: a result, then a tick when work is queued.
        while !ended, let r = running.popFirst() {
            events.append(.succeeded(lease: r.lease, worker: r.worker))
            feed()
            if scheduler.hasQueuedWork { events.append(.tick); feed() }
        }
        return (dispatched, Double(dispatched) / (Clocks.steady - t0))
    }

    public static func run(workers: Int, items: Int, queued: Int, directory: String, log: (String) -> Void) throws -> Figures {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // 1. Throughput: one run of `items` items (a fetch and a render each, then a concat).
        let c = try Cluster(dir: directory + "/throughput", workers: workers)
        _ = c.awaitWorkers()
        log("\(workers) simulated workers connected; dispatching \(items * 2 + 1) no-op attempts")
        let t0 = Date()
        let run = c.submit(pipeline(items: items, name: "throughput"))
        c.wait(run)
        let seconds = Date().timeIntervalSince(t0)
        let attempts = c.coordinator.stats.withLock { $0.dispatched }
        // 2. Latency at light load: small runs one after another, so slots are free when stages become ready.
        c.coordinator.stats.withLock { $0.readyToStarted = []; $0.readyToSent = [] }
        for k in 0..<40 {
            let r = c.submit(pipeline(items: 8, name: "light\(k)"))
            c.wait(r)
        }
        let lat = c.coordinator.stats.withLock { $0.readyToStarted }.sorted()
        let held = c.coordinator.stats.withLock { $0.readyToSent }.sorted()
        c.stop()
        log(String(format: "throughput: %d attempts in %.2f s; light-load latency over %d attempts", attempts, seconds, lat.count))
        // 3. Memory: a coordinator with `queued` stages waiting and no workers.
        let rss0 = rssMB()
        let q = try Cluster(dir: directory + "/queued", workers: 0)
        let itemsQueued = queued / 2
        let t1 = Date()
        _ = q.submit(pipeline(items: itemsQueued, name: "queued"))
        let submitSeconds = Date().timeIntervalSince(t1)
        usleep(500_000)
        let rss1 = rssMB()
        q.stop()
        // 4. The transport's own ceiling, with the same number of workers and as many attempts.
        let sizes = frameSizes()
        let floor = try transportFloor(workers: workers, attempts: attempts, sizes: sizes)
        log(String(format: "transport alone: %.0f attempts/s (frames of %d, %d and %d bytes)", floor, sizes.assign, sizes.result, sizes.ack))
        // 5. The scheduling core's own ceiling, on a run of the same shape.
        let core = schedulerFloor(workers: workers, items: items)
        log(String(format: "scheduling core alone: %.0f attempts/s (%d attempts)", core.perSecond, core.attempts))
        func pct(_ p: Double, of sorted: [Double]) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000 }
        return Figures(workers: workers, items: items, attempts: attempts, seconds: seconds, attemptsPerSecond: Double(attempts) / seconds,
                       lineageStagesPerSecond: Double(items * 4 + 1) / seconds, lightLoadLatencyMedianMs: pct(0.5, of: lat), lightLoadLatencyP99Ms: pct(0.99, of: lat),
                       lightLoadHeldMedianMs: pct(0.5, of: held), lightLoadHeldP99Ms: pct(0.99, of: held),
                       queuedStages: itemsQueued * 2, rssBeforeMB: rss0, rssQueuedMB: rss1, submitSeconds: submitSeconds,
                       transportFloorAttemptsPerSecond: floor, schedulerFloorAttemptsPerSecond: core.perSecond)
    }
}
