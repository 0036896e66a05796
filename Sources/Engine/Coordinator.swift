import Foundation
import Synchronization
import Logging
import ThreadlineCore
import Transport
import Lineage
import Media

/// What observers of a run are told.
public struct RunProgress: Sendable {
    public var runID: Int64
    public var items: Int
    public var itemsDone: Int
    public var stagesTotal: Int
    public var stagesDone: Int
    public var running: [String]
    public var elapsed: Double
}

public enum RunOutcome: Sendable {
    case succeeded(output: String, seconds: Double)
    case failed(message: String)
}

/// The coordinator: owns a ROUTER socket and all scheduling state on one thread. Other threads
/// talk to it through `submit`, `workerExited` and `stop`.
public final class Coordinator: Sendable {
    public struct Configuration: Sendable {
        public var bind: String
        public var heartbeatInterval: Double = 1
        /// A worker silent this long is dead and its stages go back to the queue.
        public var livenessTimeout: Double = 5
        /// Tries per stage for retryable failures.
        public var maxAttempts: Int = 3
        /// A stage whose attempts lost this many workers is poison.
        public var poisonAfterLostWorkers: Int = 3
        public var backoffBase: Double = 0.25
        public init(bind: String) { self.bind = bind }
    }

    enum Command {
        case submit(Pipeline, @Sendable (Result<Int64, Error>) -> Void)
        case workerExited(pid: Int32)
        case stop
    }

    let config: Configuration
    let lineage: LineageStore
    let logger: Logger
    private let inbox = Mutex<[Command]>([])
    private let observers = Mutex<[@Sendable (RunProgress?, Int64, RunOutcome?) -> Void]>([])
    private let boundEndpoint = Mutex<String?>(nil)
    private let ready = DispatchSemaphore(value: 0)
    private let startError = Mutex<Error?>(nil)

    public init(_ config: Configuration, lineage: LineageStore, logger: Logger) {
        self.config = config; self.lineage = lineage; self.logger = logger
    }

    /// Starts the coordinator thread; returns the endpoint actually bound.
    public func start(context: MessagingContext) throws -> String {
        let thread = Thread { [self] in
            do {
                let core = try CoordinatorCore(self, context: context)
                boundEndpoint.withLock { $0 = core.endpoint }
                ready.signal()
                core.loop()
            } catch {
                startError.withLock { $0 = error }
                ready.signal()
            }
        }
        thread.name = "coordinator"
        thread.start()
        ready.wait()
        if let e = startError.withLock({ $0 }) { throw e }
        return boundEndpoint.withLock { $0! }
    }

    public func submit(_ pipeline: Pipeline, reply: @escaping @Sendable (Result<Int64, Error>) -> Void) {
        inbox.withLock { $0.append(.submit(pipeline, reply)) }
    }
    public func workerExited(pid: Int32) { inbox.withLock { $0.append(.workerExited(pid: pid)) } }
    public func stop() { inbox.withLock { $0.append(.stop) } }

    /// Called on the coordinator thread for every progress change and when runs end.
    public func observe(_ f: @escaping @Sendable (RunProgress?, Int64, RunOutcome?) -> Void) { observers.withLock { $0.append(f) } }

    func takeCommands() -> [Command] { inbox.withLock { let c = $0; $0 = []; return c } }
    func notify(_ p: RunProgress?, _ run: Int64, _ o: RunOutcome?) { for f in observers.withLock({ $0 }) { f(p, run, o) } }
}

/// A dispatchable unit of work: fetch/i, render/i (decode+transform+encode of item i), concat.
struct Unit {
    enum State { case waiting, ready, running, done, failed }
    var name: String
    var item: Int?
    /// Lineage stage names this unit covers.
    var stages: [String]
    var state: State = .waiting
    var attempts = 0
    var lostWorkers = 0
    var notBefore = 0.0
    var lease: String?
    var worker: String?
    var attemptIDs: [Int64] = []
    var task: TaskSpec?
    var key: String?
    /// Lineage id of the artifact offered for reuse.
    var reuseID: Int64?
    /// The cache was asked (hit or miss); a miss is rendered for real.
    var checked = false
    var checking = false
}

final class RunState {
    let id: Int64
    let pipeline: Pipeline
    let stageIDs: [String: Int64]
    var units: [Unit]
    var facts: [Int: MediaFacts] = [:]
    var sources: [Int: (ArtifactRef, Int64)] = [:]       // artifact + lineage artifact id
    var segments: [Int: (ArtifactRef, Int64)] = [:]
    var transitions: [Int: (ArtifactRef, Int64)] = [:]
    var frameCounts: [Int: Int] = [:]
    var timeline: [ItemTiming]?
    var finished = false
    let startedAt = Date().timeIntervalSince1970

    init(id: Int64, pipeline: Pipeline, stageIDs: [String: Int64]) {
        self.id = id; self.pipeline = pipeline; self.stageIDs = stageIDs
        var units: [Unit] = []
        for i in pipeline.items.indices {
            units.append(Unit(name: "fetch/\(i)", item: i, stages: ["fetch/\(i)"], state: .ready))
            units.append(Unit(name: "render/\(i)", item: i, stages: ["decode/\(i)", "transform/\(i)", "encode/\(i)"]))
        }
        for b in Planner.transitionBoundaries(pipeline) {
            units.append(Unit(name: "transition/\(b)", item: b, stages: ["transition/\(b)"]))
        }
        units.append(Unit(name: "concat", item: nil, stages: ["concat"]))
        self.units = units
    }

    func index(of name: String) -> Int? { units.firstIndex { $0.name == name } }
    var runningCount: Int { units.reduce(0) { $0 + ($1.state == .running ? 1 : 0) } }
}

struct WorkerInfo {
    var identity: Data
    var hello: Hello
    var running: Set<String> = []
    /// Outstanding cache checks (they take no slot).
    var checks: Set<String> = []
    var lastSeen: Double
    var lastSent: Double = 0
}

/// All coordinator state; lives on the coordinator thread only.
final class CoordinatorCore {
    let owner: Coordinator
    let socket: Socket
    let endpoint: String
    var runs: [Int64: RunState] = [:]
    var workers: [String: WorkerInfo] = [:]
    /// lease → (run, unit index): the only leases whose results count.
    var leases: [String: (Int64, Int)] = [:]
    var lastLivenessCheck = 0.0
    var lastCheckpoint = 0.0
    var log: Logger { owner.logger }
    var lineage: LineageStore { owner.lineage }
    var config: Coordinator.Configuration { owner.config }

    init(_ owner: Coordinator, context: MessagingContext) throws {
        self.owner = owner
        socket = try Socket(context, .router)
        endpoint = try socket.bind(owner.config.bind)
        let interrupted = try owner.lineage.recoverInterrupted()
        if interrupted > 0 { owner.logger.warning("found runs interrupted by a stopped coordinator", metadata: ["runs": "\(interrupted)"]) }
    }

    func loop() {
        var stopping = false
        while !stopping {
            for c in owner.takeCommands() {
                switch c {
                case .submit(let p, let reply): reply(Result { try submit(p) })
                case .workerExited(let pid):
                    if let (id, _) = workers.first(where: { $0.value.hello.pid == Int(pid) }) { lose(worker: id, reason: "process exited") }
                case .stop: stopping = true
                }
            }
            do {
                var n = 0
                while n < 1000, let frames = try socket.receive(timeoutMs: n == 0 ? 10 : 0) {
                    handle(frames); n += 1
                }
            } catch {
                log.error("receive failed: \(error)")
            }
            let now = Date().timeIntervalSince1970
            if now - lastLivenessCheck > 0.1 { checkLiveness(now); lastLivenessCheck = now }
            if now - lastCheckpoint > 2 { try? lineage.checkpoint(); lastCheckpoint = now }
            dispatch(now)
            heartbeat(now)
        }
        for (_, w) in workers { send(.shutdown, to: w.identity) }
        socket.close()
    }

    // MARK: submissions

    func submit(_ pipeline: Pipeline) throws -> Int64 {
        let stages = Planner.stages(for: pipeline)
        // An interrupted run of the same pipeline continues; its succeeded stages come back as verified cache hits.
        let (runID, ids) = try lineage.resume(pipeline) ?? lineage.createRun(pipeline, stages: stages)
        let run = RunState(id: runID, pipeline: pipeline, stageIDs: ids)
        runs[runID] = run
        // Items without a source (titles) have nothing to fetch: their frames are known now.
        let encoder = JSONEncoder(); encoder.outputFormatting = [.sortedKeys]
        for (i, item) in pipeline.items.enumerated() where item.sources.isEmpty {
            guard let fi = run.index(of: "fetch/\(i)"), let ri = run.index(of: "render/\(i)") else { continue }
            run.units[fi].state = .done
            if pipeline.output.maxDuration == nil { run.units[ri].state = .ready }
            run.frameCounts[i] = try Planner.frameCount(of: item, index: i, facts: nil, fps: pipeline.output.fps)
            try lineage.stageUpdate(ids["fetch/\(i)"]!, state: "succeeded", params: String(decoding: try encoder.encode(item.kind), as: UTF8.self),
                                    finished: Date().timeIntervalSince1970, seconds: 0)
        }
        try updateTimeline(run)
        for u in run.units where u.state == .ready { for s in u.stages { try? lineage.stageUpdate(ids[s]!, state: "ready") } }
        log.info("run submitted", metadata: ["run.id": "\(runID)", "run.name": "\(pipeline.name)", "run.items": "\(pipeline.items.count)"])
        progress(run)
        return runID
    }

    // MARK: messages

    func handle(_ frames: [Data]) {
        guard frames.count == 2, let id = String(data: frames[0], encoding: .utf8) else {
            log.warning("dropped a malformed message", metadata: ["frames": "\(frames.count)"])
            return
        }
        guard let envelope = Envelope.decode(frames[1]) else {
            log.warning("dropped an undecodable message", metadata: ["worker.id": "\(id)", "bytes": "\(frames[1].count)"])
            return
        }
        let now = Date().timeIntervalSince1970
        switch envelope.message {
        case .hello(let h):
            let known = workers[id]
            workers[id] = WorkerInfo(identity: frames[0], hello: h, running: known?.running ?? [], lastSeen: now)
            try? lineage.workerSeen(id: id, host: h.host, pid: h.pid, slots: h.slots, version: h.version)
            log.info("worker joined", metadata: ["worker.id": "\(id)", "worker.slots": "\(h.slots)", "worker.host": "\(h.host)"])
        case .heartbeat(let running):
            guard workers[id] != nil else { send(.shutdown, to: frames[0]); return }   // unknown: it re-announces with hello
            workers[id]!.lastSeen = now
            for lease in running where leases[lease] == nil { send(.cancel(lease: lease), to: frames[0]) }
        case .result(let r):
            workers[id]?.lastSeen = now
            workers[id]?.running.remove(r.lease)
            workers[id]?.checks.remove(r.lease)
            finish(r, from: id)
        case .assign, .cancel, .shutdown:
            log.warning("unexpected message from a worker", metadata: ["worker.id": "\(id)"])
        }
    }

    func send(_ m: WireMessage, to identity: Data) {
        _ = try? socket.send([identity, Envelope(m).encoded()])
    }

    func heartbeat(_ now: Double) {
        for (id, w) in workers where now - w.lastSent >= config.heartbeatInterval {
            send(.heartbeat(running: Array(w.running)), to: w.identity)
            workers[id]!.lastSent = now
        }
    }

    // MARK: liveness

    func checkLiveness(_ now: Double) {
        for (id, w) in workers where now - w.lastSeen > config.livenessTimeout {
            lose(worker: id, reason: String(format: "silent for %.1f s", now - w.lastSeen))
        }
    }

    func lose(worker id: String, reason: String) {
        guard let w = workers.removeValue(forKey: id) else { return }
        log.warning("worker lost", metadata: ["worker.id": "\(id)", "reason": "\(reason)"])
        try? lineage.workerState(id: id, state: "lost")
        for lease in w.checks {
            guard let (runID, ui) = leases.removeValue(forKey: lease), let run = runs[runID] else { continue }
            for a in run.units[ui].attemptIDs { try? lineage.attemptFinished(a, state: "lost", started: nil, finished: nil) }
            run.units[ui].state = .ready; run.units[ui].checking = false; run.units[ui].lease = nil; run.units[ui].worker = nil
        }
        for lease in w.running {
            guard let (runID, ui) = leases.removeValue(forKey: lease), let run = runs[runID] else { continue }
            var u = run.units[ui]
            for a in u.attemptIDs {
                try? lineage.attemptFinished(a, state: "lost", started: nil, finished: nil, errorClass: "retryable",
                                             errorMessage: "worker \(id) lost: \(reason)")
            }
            u.lostWorkers += 1
            u.lease = nil; u.worker = nil
            run.units[ui] = u
            if u.lostWorkers >= config.poisonAfterLostWorkers {
                failRun(run, unit: ui, message: "\(label(run, u)): poison — its attempts lost \(u.lostWorkers) workers; not retried")
            } else {
                retry(run, ui, error: "worker lost")
            }
        }
    }

    // MARK: dispatch

    static let checksPerWorker = 4

    func dispatch(_ now: Double) {
        dispatchCacheChecks(now)
        // Credit-based: a worker never holds more tasks than its slots.
        var free = workers.filter { $0.value.running.count < $0.value.hello.slots }.map(\.key).sorted()
        guard !free.isEmpty else { return }
        while !free.isEmpty {
            // Fair share: the run with the fewest running units goes first, then the oldest.
            // Only units the cache has answered for (miss, or nothing recorded) take a slot.
            let dispatchable = { (u: Unit) in u.state == .ready && u.checked && u.notBefore <= now }
            let candidates = runs.values.filter { !$0.finished && $0.units.contains(where: dispatchable) }
            guard let run = candidates.min(by: { ($0.runningCount, $0.id) < ($1.runningCount, $1.id) }) else { return }
            guard let ui = run.units.firstIndex(where: dispatchable) else { return }
            let wid = free.removeFirst()
            assign(run, ui, to: wid, now: now)
            if let w = workers[wid], w.running.count < w.hello.slots { free.append(wid) }
        }
    }

    /// Units whose key has a recorded artifact are first offered as cache checks, beside the slots.
    func dispatchCacheChecks(_ now: Double) {
        for run in runs.values.sorted(by: { $0.id < $1.id }) where !run.finished {
            for ui in run.units.indices where run.units[ui].state == .ready && !run.units[ui].checked {
                guard let task = makeTask(run, ui), let key = stageKey(run, task),
                      let candidate = try? lineage.cachedArtifact(key: key) else { run.units[ui].checked = true; continue }
                guard let wid = workers.filter({ $0.value.checks.count < Self.checksPerWorker })
                        .min(by: { ($0.value.checks.count, $0.key) < ($1.value.checks.count, $1.key) })?.key else { return }
                var u = run.units[ui]
                let lease = UUID().uuidString
                u.lease = lease; u.worker = wid; u.state = .running; u.checking = true; u.task = task; u.key = key; u.reuseID = candidate.id
                u.attemptIDs = (try? lineage.attemptDispatched(stageIDs: u.stages.map { run.stageIDs[$0]! }, attemptNo: u.attempts + 1,
                                                                 worker: wid, slot: nil, lease: lease)) ?? []
                run.units[ui] = u
                leases[lease] = (run.id, ui)
                workers[wid]!.checks.insert(lease)
                let reuse = ArtifactRef(sha256: candidate.sha256, path: candidate.path, size: candidate.size)
                send(.assign(Assignment(lease: lease, task: task, key: key, reuse: reuse, checkOnly: true)), to: workers[wid]!.identity)
            }
        }
    }

    func assign(_ run: RunState, _ ui: Int, to wid: String, now: Double) {
        guard let task = makeTask(run, ui) else { return }
        var u = run.units[ui]
        u.attempts += 1
        let lease = UUID().uuidString
        let key = stageKey(run, task)
        u.lease = lease; u.worker = wid; u.state = .running; u.task = task; u.key = key; u.reuseID = nil
        let stageIDs = u.stages.map { run.stageIDs[$0]! }
        u.attemptIDs = (try? lineage.attemptDispatched(stageIDs: stageIDs, attemptNo: u.attempts, worker: wid,
                                                         slot: workers[wid]!.running.count, lease: lease)) ?? []
        run.units[ui] = u
        leases[lease] = (run.id, ui)
        workers[wid]!.running.insert(lease)
        var assignment = Assignment(lease: lease, task: task, key: key)
        if case .segment = task, let i = u.item, let src = run.sources[i] {
            assignment.source = src.0
            assignment.origin = run.pipeline.items[i].sources.first?.uri
        }
        guard (try? socket.send([workers[wid]!.identity, Envelope(.assign(assignment)).encoded()])) == true else {
            lose(worker: wid, reason: "unreachable")
            return
        }
        workers[wid]!.lastSent = now
        log.debug("dispatched", metadata: ["run.id": "\(run.id)", "stage.id": "\(u.name)", "worker.id": "\(wid)"])
        progress(run)
    }

    func makeTask(_ run: RunState, _ ui: Int) -> TaskSpec? {
        let u = run.units[ui]
        let p = run.pipeline
        if u.name.hasPrefix("fetch/"), let i = u.item {
            let src = p.items[i].sources[0]
            return .fetch(uri: src.uri, name: src.displayName)
        }
        if u.name.hasPrefix("render/"), let i = u.item, let n = run.frameCounts[i], run.sources[i] != nil || p.items[i].sources.isEmpty {
            let spec = Planner.segmentSpec(p, index: i, sourcePath: run.sources[i]?.0.path ?? "", frameCount: n)
            return .segment(spec)
        }
        if u.name.hasPrefix("transition/"), let b = u.item, let timeline = run.timeline,
           let from = run.segments[b], let to = run.segments[b + 1], let spec = Planner.transitionSpec(p, after: b, timeline: timeline) {
            return .transition(spec, from: from.0.path, to: to.0.path, index: b)
        }
        if u.name == "concat", let timeline = run.timeline {
            var inputs: [ConcatInput] = []
            for part in Planner.concatParts(timeline, fps: p.output.fps) {
                switch part.source {
                case .item(let i):
                    inputs.append(ConcatInput(path: run.segments[i]!.0.path, frameCount: part.frames, sampleCount: part.samples,
                                              label: p.items[i].label(index: i), firstFrame: part.firstFrame, firstSample: part.firstSample))
                case .transition(let b):
                    inputs.append(ConcatInput(path: run.transitions[b]!.0.path, frameCount: part.frames, sampleCount: part.samples,
                                              label: "transition \(b + 1)→\(b + 2)"))
                }
            }
            return .concat(inputs, profile: p.output)
        }
        return nil
    }

    /// The output key of a unit's task: what its output depends on, and nothing else.
    func stageKey(_ run: RunState, _ task: TaskSpec) -> String? {
        switch task {
        case .fetch(let uri, _):
            // Local sources: keyed by path, size and modification time; the reused copy is still
            // verified by hash. Remote sources are always fetched.
            guard uri.hasPrefix("/"), let a = try? FileManager.default.attributesOfItem(atPath: uri),
                  let size = (a[.size] as? NSNumber)?.int64Value, let mtime = (a[.modificationDate] as? Date)?.timeIntervalSince1970 else { return nil }
            return StageKey.compute(kind: .fetch, inputs: [], parameters: ["uri": uri, "size": "\(size)", "mtime": "\(mtime)"])
        case .segment(let spec):
            if spec.title != nil { return segmentKey(spec, sourceSHA256: "") }   // the title is all in the spec
            guard let i = run.sources.first(where: { $0.value.0.path == spec.sourcePath })?.value.0 else { return nil }
            return segmentKey(spec, sourceSHA256: i.sha256)
        case .transition(let spec, let from, let to, _):
            let shas = [from, to].map { path in run.segments.values.first { $0.0.path == path }?.0.sha256 ?? path }
            return StageKey.compute(kind: .transition, inputs: shas, parameters: spec)
        case .concat(let inputs, let profile):
            let all = Array(run.segments.values) + Array(run.transitions.values)
            let shas = inputs.map { input in all.first { $0.0.path == input.path }?.0.sha256 ?? input.path }
            var normalised = inputs
            for k in normalised.indices { normalised[k].path = ""; normalised[k].label = "" }
            return StageKey.compute(kind: .concat, inputs: shas, parameters: ConcatKey(inputs: normalised, profile: profile.movieProfile))
        }
    }

    func segmentKey(_ spec: SegmentSpec, sourceSHA256: String) -> String {
        StageKey.segment(spec, sourceSHA256: sourceSHA256, renderer: SegmentRenderer.fingerprint(spec))
    }

    struct ConcatKey: Codable { var inputs: [ConcatInput]; var profile: OutputProfile }

    /// Lineage attempt state and artifact id for a result: cache hits reuse the recorded artifact.
    func recordOutput(_ run: RunState, _ u: Unit, _ r: TaskResult, kind: String, facts: String?, inputs: [Int64]) throws -> Int64 {
        let art = r.artifact!
        if r.cached == true, let id = u.reuseID {
            for a in u.attemptIDs { try lineage.linkArtifact(attemptID: a, artifactID: id, inputs: inputs) }
            for s in u.stages { try lineage.stageCached(run.stageIDs[s]!) }
            try lineage.event("stage.cached", "\(u.name) reused artifact \(art.sha256.prefix(12))", runID: run.id, stageID: run.stageIDs[u.stages[0]])
            return id
        }
        return try lineage.recordArtifact(sha256: art.sha256, uri: art.path, size: art.size, kind: kind, facts: facts,
                                          key: u.key, attemptID: u.attemptIDs.last, inputs: inputs)
    }

    func attemptState(_ r: TaskResult) -> String { r.cached == true ? "cached" : "succeeded" }

    // MARK: results

    func finish(_ r: TaskResult, from wid: String) {
        guard let (runID, ui) = leases.removeValue(forKey: r.lease), let run = runs[runID], run.units[ui].lease == r.lease else {
            // A stale lease: the stage was reassigned or its run ended. Never counted.
            try? lineage.event("attempt.stale", "discarded a result from worker \(wid) with a stale lease \(r.lease)")
            return
        }
        var u = run.units[ui]
        u.lease = nil
        if u.checking {
            u.checking = false
            u.checked = true
            if r.cached != true {
                // A miss (missing or altered artifact): render it for real.
                for a in u.attemptIDs { try? lineage.attemptFinished(a, state: "missed", started: r.startedAt, finished: r.finishedAt) }
                u.state = .ready
                u.reuseID = nil
                run.units[ui] = u
                return
            }
            u.attempts += 1
        }
        run.units[ui] = u
        if let e = r.error {
            for (k, a) in u.attemptIDs.enumerated() {
                let failedHere = u.stages[k].hasPrefix(e.stage.rawValue) || u.stages.count == 1
                try? lineage.attemptFinished(a, state: failedHere ? "failed" : "cancelled", started: r.startedAt, finished: r.finishedAt,
                                             errorClass: e.errorClass.rawValue, errorMessage: e.message, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
            }
            guard !run.finished else { return }
            if e.errorClass == .retryable && u.attempts < config.maxAttempts {
                log.warning("attempt failed, retrying", metadata: ["stage.id": "\(u.name)", "error": "\(e)"])
                retry(run, ui, error: e.description)
            } else {
                let tries = e.errorClass == .retryable ? " after \(u.attempts) attempts" : ""
                failRun(run, unit: ui, message: "\(label(run, u)): \(e.description)\(tries)", failedStage: e.stage)
            }
            return
        }
        guard !run.finished else { return }
        do {
            try succeed(run, ui, r)
        } catch let e as PipelineError {
            failRun(run, unit: ui, message: e.description)
        } catch {
            failRun(run, unit: ui, message: "\(label(run, u)): \(error)")
        }
    }

    func succeed(_ run: RunState, _ ui: Int, _ r: TaskResult) throws {
        var u = run.units[ui]
        u.state = .done
        run.units[ui] = u
        let p = run.pipeline
        let encoder = JSONEncoder(); encoder.outputFormatting = [.sortedKeys]
        let done = Date().timeIntervalSince1970
        if u.name.hasPrefix("fetch/"), let i = u.item, let art = r.artifact,
           let facts = try r.facts ?? u.reuseID.flatMap({ try lineage.artifactFacts($0) }) {
            let factsJSON = String(decoding: try encoder.encode(facts), as: UTF8.self)
            let aid = try recordOutput(run, u, r, kind: "source", facts: factsJSON, inputs: [])
            try lineage.attemptFinished(u.attemptIDs[0], state: attemptState(r), started: r.startedAt, finished: r.finishedAt, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
            try lineage.stageUpdate(run.stageIDs[u.stages[0]]!, state: "succeeded",
                                    params: "{\"uri\":\"\(p.items[i].sources[0].uri)\"}", key: u.key ?? art.sha256,
                                    finished: done, seconds: r.finishedAt - r.startedAt)
            run.sources[i] = (art, aid)
            run.facts[i] = facts
            run.frameCounts[i] = try Planner.frameCount(of: p.items[i], index: i, facts: facts, fps: p.output.fps)
            if let ri = run.index(of: "render/\(i)"), p.output.maxDuration == nil {
                run.units[ri].state = .ready
                let spec = Planner.segmentSpec(p, index: i, sourcePath: art.path, frameCount: run.frameCounts[i]!)
                let params = String(decoding: try encoder.encode(spec.edits), as: UTF8.self)
                for s in run.units[ri].stages {
                    try lineage.stageUpdate(run.stageIDs[s]!, state: "ready", params: params, key: segmentKey(spec, sourceSHA256: art.sha256))
                }
            }
            try updateTimeline(run)
        } else if u.name.hasPrefix("render/"), let i = u.item, let art = r.artifact, let report = r.segment {
            let aid = try recordOutput(run, u, r, kind: "segment", facts: nil, inputs: run.sources[i].map { [$0.1] } ?? [])
            let seconds = [report.decodeSeconds, report.transformSeconds, report.encodeSeconds]
            for (k, s) in u.stages.enumerated() {
                try lineage.attemptFinished(u.attemptIDs[k], state: attemptState(r), started: r.startedAt, finished: r.finishedAt,
                                            cpu: k == 0 ? r.cpuSeconds : nil, maxRSS: r.maxRSS)
                try lineage.stageUpdate(run.stageIDs[s]!, state: "succeeded", finished: done, seconds: seconds[k])
            }
            run.segments[i] = (art, aid)
            try refreshReadiness(run)
        } else if u.name.hasPrefix("transition/"), let b = u.item, let art = r.artifact {
            let inputs = [run.segments[b]?.1, run.segments[b + 1]?.1].compactMap { $0 }
            let aid = try recordOutput(run, u, r, kind: "transition", facts: nil, inputs: inputs)
            try lineage.attemptFinished(u.attemptIDs[0], state: attemptState(r), started: r.startedAt, finished: r.finishedAt, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
            let params: String? = { if case .transition(let spec, _, _, _) = u.task {
                    return (try? encoder.encode(spec)).map { String(decoding: $0, as: UTF8.self) } }
                return nil }()
            try lineage.stageUpdate(run.stageIDs[u.stages[0]]!, state: "succeeded", params: params, key: u.key, finished: done,
                                    seconds: r.finishedAt - r.startedAt)
            run.transitions[b] = (art, aid)
            try refreshReadiness(run)
        } else if u.name == "concat", let art = r.artifact {
            let out = p.output.path
            try FileManager.default.createDirectory(atPath: (out as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let tmp = out + ".part-\(UUID().uuidString.prefix(8))"
            try? FileManager.default.removeItem(atPath: tmp)
            try FileManager.default.copyItem(atPath: art.path, toPath: tmp)
            guard rename(tmp, out) == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: out]) }
            let aid = try recordOutput(run, u, r, kind: "movie", facts: nil, inputs: run.segments.values.map(\.1))
            // The file at the user's path is the movie's copy: produced by concat from the segments.
            try lineage.recordArtifact(sha256: art.sha256, uri: out, size: art.size, kind: "output", facts: nil, key: nil,
                                       attemptID: u.attemptIDs.first, inputs: run.segments.values.map(\.1))
            _ = aid
            try lineage.attemptFinished(u.attemptIDs[0], state: attemptState(r), started: r.startedAt, finished: r.finishedAt, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
            let concatParams: String? = { if case .concat(let inputs, let profile) = u.task {
                    var n = inputs; for k in n.indices { n[k].path = "" }
                    return (try? encoder.encode(ConcatKey(inputs: n, profile: profile))).map { String(decoding: $0, as: UTF8.self) } }
                return nil }()
            try lineage.stageUpdate(run.stageIDs["concat"]!, state: "succeeded", params: concatParams, key: u.key ?? art.sha256,
                                    finished: done, seconds: r.finishedAt - r.startedAt)
            run.finished = true
            try lineage.runFinished(run.id, state: "succeeded")
            log.info("run succeeded", metadata: ["run.id": "\(run.id)", "output": "\(out)"])
            progress(run)
            owner.notify(nil, run.id, .succeeded(output: out, seconds: done - run.startedAt))
            runs[run.id] = nil
            return
        }
        progress(run)
    }

    /// Transitions wait for both neighbouring segments and the timeline; concat for everything.
    func refreshReadiness(_ run: RunState) throws {
        for k in run.units.indices where run.units[k].state == .waiting {
            let u = run.units[k]
            let ready: Bool
            if u.name.hasPrefix("transition/"), let b = u.item {
                ready = run.timeline != nil && run.segments[b] != nil && run.segments[b + 1] != nil
            } else if u.name == "concat" {
                ready = run.timeline != nil && run.segments.count == run.pipeline.items.count
                    && run.units.allSatisfy { !$0.name.hasPrefix("transition/") || $0.state == .done }
            } else {
                continue
            }
            if ready {
                run.units[k].state = .ready
                for s in u.stages { try lineage.stageUpdate(run.stageIDs[s]!, state: "ready") }
            }
        }
    }

    /// Once every item's length is known, the frame-exact timeline.
    func updateTimeline(_ run: RunState) throws {
        let p = run.pipeline
        guard run.timeline == nil, run.frameCounts.count == p.items.count else { return }
        var byURI: [String: MediaFacts] = [:]
        for (i, f) in run.facts { byURI[p.items[i].sources[0].uri] = f }
        let timeline = try Planner.timeline(for: p, facts: byURI)
        run.timeline = timeline
        try lineage.setItemTiming(runID: run.id, timeline: timeline)
        defer { try? refreshReadiness(run) }
        // With a length cap, renders wait for the whole timeline: now they may start, fitted.
        if p.output.maxDuration != nil {
            for t in timeline {
                run.frameCounts[t.item] = t.segmentFrames
                if let ri = run.index(of: "render/\(t.item)"), run.units[ri].state == .waiting {
                    run.units[ri].state = .ready
                    for s in run.units[ri].stages { try lineage.stageUpdate(run.stageIDs[s]!, state: "ready") }
                }
            }
        }
    }

    func retry(_ run: RunState, _ ui: Int, error: String) {
        var u = run.units[ui]
        u.state = .ready
        let jitter = Double.random(in: 0.8...1.2)
        u.notBefore = Date().timeIntervalSince1970 + config.backoffBase * Double(1 << min(u.attempts, 6)) * jitter
        run.units[ui] = u
        for s in u.stages { try? lineage.stageUpdate(run.stageIDs[s]!, state: "ready", error: error) }
        progress(run)
    }

    func failRun(_ run: RunState, unit ui: Int, message: String, failedStage: StageKind? = nil) {
        guard !run.finished else { return }
        run.finished = true
        run.units[ui].state = .failed
        for s in run.units[ui].stages {
            let failed = failedStage.map { s.hasPrefix($0.rawValue) } ?? true
            try? lineage.stageUpdate(run.stageIDs[s]!, state: failed ? "failed" : "cancelled", error: failed ? message : nil,
                                     finished: Date().timeIntervalSince1970)
        }
        // Stop the run's other attempts; their slots free when the workers answer.
        for (k, u) in run.units.enumerated() where u.state == .running {
            if let lease = u.lease, let w = u.worker, let info = workers[w] {
                send(.cancel(lease: lease), to: info.identity)
                leases[lease] = nil
                for a in u.attemptIDs { try? lineage.attemptFinished(a, state: "cancelled", started: nil, finished: nil) }
            }
            run.units[k].state = .failed
        }
        try? lineage.runFinished(run.id, state: "failed", error: message)
        log.error("run failed", metadata: ["run.id": "\(run.id)", "error": "\(message)"])
        owner.notify(nil, run.id, .failed(message: message))
        runs[run.id] = nil
    }

    func label(_ run: RunState, _ u: Unit) -> String {
        guard let i = u.item else { return "\(run.pipeline.name) (concat)" }
        let item = run.pipeline.items[i]
        let loc = item.location.map { " [\($0)]" } ?? ""
        return "\(item.label(index: i))\(loc)"
    }

    func progress(_ run: RunState) {
        let items = run.pipeline.items.count
        let itemsDone = run.segments.count
        let done = run.units.filter { $0.state == .done }.reduce(0) { $0 + $1.stages.count }
        let total = run.units.reduce(0) { $0 + $1.stages.count }
        let running = run.units.filter { $0.state == .running }.map(\.name)
        owner.notify(RunProgress(runID: run.id, items: items, itemsDone: itemsDone, stagesTotal: total, stagesDone: done,
                                 running: running, elapsed: Date().timeIntervalSince1970 - run.startedAt), run.id, nil)
    }
}
