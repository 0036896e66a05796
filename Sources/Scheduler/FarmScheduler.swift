import DequeModule
import HeapModule

/// One stage of one run, as the scheduler knows it: a node of the run's graph.
public struct StageRef: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var run: Int64
    public var node: Int
    public init(run: Int64, node: Int) { self.run = run; self.node = node }
    public static func < (a: StageRef, b: StageRef) -> Bool { (a.run, a.node) < (b.run, b.node) }
    public var description: String { "run \(run) node \(node)" }
}

/// The whole farm's scheduling as a state machine, in ninja's shape: runs' graphs of ready work,
/// workers' slots, leases. It takes events and the time and returns effects; it does no I/O,
/// reads no clock and draws no random numbers, so every policy is tested with a test clock and
/// random event sequences in milliseconds. The coordinator feeds it what its sockets hear and
/// carries out what it returns (sends, lineage writes).
///
/// Leases fence attempts: each dispatch gets a new lease, `"<epoch>-<n>"`, and only the current
/// lease of a stage, reported by the worker it was given to, counts. Anything else is `.stale`.
public struct FarmScheduler: Sendable {
    public struct Configuration: Sendable {
        /// Makes this scheduler's leases differ from an earlier coordinator's.
        public var epoch: String
        /// Retry backoff: base × 2^attempts × jitter (0.8…1.2, drawn from the stage, not a clock).
        public var backoffBase: Double = 0.25
        /// A stage whose attempts lost this many workers is poison.
        public var poisonAfterLostWorkers: Int = 3
        /// Cache checks a worker holds at once (they take no slot).
        public var checksPerWorker: Int = 16
        /// A worker where this many stages failed since its last success, each of which then
        /// succeeded on another worker, is sidelined: no work for `sidelineSeconds`, doubled each
        /// time it is convicted again after one (at most 10 minutes). Never the last worker taking
        /// work. Only a success elsewhere convicts it: a stage failing everywhere (a dead URL, a
        /// bad file) says nothing about the worker. (A failing worker fails fast, so without this
        /// it would take most of the stages, each losing an attempt and a backoff there.)
        public var sidelineAfterFailures = 3
        public var sidelineSeconds: Double = 30
        public init(epoch: String) { self.epoch = epoch }
    }

    /// A run handed to the scheduler.
    public struct RunSpec: Sendable, Equatable {
        public var id: Int64
        public var priority: Int
        /// `dependencies[n]`: the nodes node n waits for (the plan's dependencies).
        public var dependencies: [[Int]]
        /// Short joining work (fetches, transitions, the concat) goes ahead of renders, its own
        /// run's and (at the same priority, within an owner's share) other runs'.
        public var short: [Bool]
        /// Tries per stage for retryable failures.
        public var maxAttempts: Int
        /// Nodes complete before anything runs (a title has nothing to fetch).
        public var done: [Int]
        /// Who submitted it: owners share the farm equally (`FairShare`); nil: the farm's own user.
        public var owner: String?
        public init(id: Int64, priority: Int = 0, dependencies: [[Int]], short: [Bool]? = nil, maxAttempts: Int = 3, done: [Int] = [],
                    owner: String? = nil) {
            self.id = id; self.priority = priority; self.dependencies = dependencies
            self.short = short ?? Array(repeating: false, count: dependencies.count)
            self.maxAttempts = maxAttempts; self.done = done; self.owner = owner
        }
    }

    public enum Event: Sendable, Equatable {
        case submit(RunSpec)
        /// The answer to `.prepare`: whether a recorded artifact should be checked first, the
        /// stage's cost (renders go costliest first), the key its output is stored under (a
        /// stage whose key another attempt is making waits for that attempt, see `parked`), and
        /// how long an attempt of it may run (`Effect.timedOut`; nil: as long as it takes).
        case prepared(StageRef, cacheCheck: Bool, cost: Double, key: String? = nil, timeLimit: Double? = nil)
        /// A worker said hello (again): its slots, and the leases it still runs (they hold slots
        /// until it reports them).
        case workerJoined(String, slots: Int, running: [String])
        /// It stops taking work; what it runs still finishes.
        case workerDraining(String)
        /// It left after draining: anything it still held goes back to the queue, not counted.
        case workerLeft(String)
        /// It died or went silent: its attempts are lost and count towards poison.
        case workerLost(String)
        /// The worker no longer runs this lease (its result is in, its artifact may still be on
        /// the way): the slot is free, the lease stays current.
        case released(lease: String, worker: String)
        case succeeded(lease: String, worker: String)
        /// A cache check found no usable artifact: the stage is rendered for real.
        case cacheMiss(lease: String, worker: String)
        /// `workersFault`: whether it counts against the worker (its retry goes elsewhere, and it
        /// may be sidelined): not when the coordinator could not store what the worker made.
        case failed(lease: String, worker: String, retryable: Bool, workersFault: Bool = true)
        /// The worker will not run it (draining): back to the queue at once, not counted.
        case handedBack(lease: String, worker: String)
        /// The assignment never reached the worker: back to the queue, not counted.
        /// `unreachableUntil`: because its connection is gone for the moment (a worker dialling
        /// again after its coordinator stalled, or one that died and is not yet known lost): it
        /// gets no work until then, and keeps what it runs (a result on its way in, a render its
        /// new connection reports); if it stays silent, the liveness timeout loses it.
        case notDelivered(lease: String, unreachableUntil: Double? = nil)
        /// The attempt's output stands, but the stage runs once more on a worker that has not
        /// made it (verification); not counted as a retry.
        case again(lease: String, worker: String)
        case cancel(run: Int64)
        /// The coordinator failed the stage itself (its output could not be recorded, or its
        /// verification failed): the run ends. The stage's own lease is not cancelled (it reported).
        case fail(StageRef)
        /// An attempt the coordinator did not see end (an earlier coordinator's, killed or
        /// stopped, of a run this one resumed; or one of a worker lost and back) may still run on
        /// `worker`: it is let finish, and stages with its output key wait
        /// for it (`parked`) instead of rendering the same output again. `until`: how long to
        /// wait for word of it (its worker is not back yet, or came back without it and its
        /// result may follow); nil: its worker runs it or its result came. Said again to change
        /// that. Refused (the lease is cancelled) when another orphan makes the key. Beside a render
        /// of this coordinator making the key (given out while the orphan's worker was away) it
        /// goes on too: whichever ends first makes the key, and the other is stopped
        /// (`Effect.superseded`, or the orphan cancelled).
        case orphaned(lease: String, key: String, worker: String, until: Double? = nil)
        /// The orphaned attempt is over: `made` when its output is stored under its key (stages
        /// waiting for it are cache hits now); otherwise they render.
        case orphanEnded(lease: String, made: Bool)
        /// Stop giving out work (a graceful coordinator stop); results still count.
        case stopDispatching
        /// Release retries whose backoff is over, and hand out work.
        case tick
    }

    public enum Outcome: Sendable, Equatable {
        case succeeded
        /// A stage failed for good: a permanent error, or its attempts were spent. `also`: stages
        /// that failed for good after it, while the run finished what did not depend on it.
        case failed(StageRef, attempts: Int, also: [StageRef] = [])
        /// A stage's attempts took down this many workers.
        case poison(StageRef, lostWorkers: Int, also: [StageRef] = [])
        case cancelled

        func adding(_ more: [StageRef]) -> Outcome {
            switch self {
            case .failed(let s, let n, let also): .failed(s, attempts: n, also: also + more)
            case .poison(let s, let n, let also): .poison(s, lostWorkers: n, also: also + more)
            case .succeeded, .cancelled: self
            }
        }
    }

    public enum Effect: Sendable, Equatable {
        /// The stage is ready: work out its task and answer `.prepared`.
        case prepare(StageRef)
        /// Send the stage to the worker under this lease. `attempt` numbers real attempts from 1;
        /// a cache check carries the number its hit will have.
        case dispatch(lease: String, StageRef, worker: String, attempt: Int, checkOnly: Bool, readySince: Double)
        /// Stop this attempt on its worker (its run ended, or nobody knows the lease any more).
        case cancel(lease: String, StageRef?, worker: String)
        /// An orphan made this render's output key first (`by`: its worker, lost and back with the
        /// render it had): stop this one on its worker and record it so. The stage is prepared
        /// again (a `.prepare` follows) and reuses that output. Its slot stays taken until its
        /// worker answers.
        case superseded(lease: String, StageRef, worker: String, by: String)
        /// The worker went with the attempt: record it lost. The stage goes back to the queue.
        case lost(lease: String, StageRef, worker: String, checkOnly: Bool)
        /// The attempt came back unfinished (drain): record it handed back.
        case handedBack(lease: String, StageRef, worker: String)
        /// A retry waits out its backoff.
        case retry(StageRef, notBefore: Double, attempts: Int)
        /// A result under a lease that is not current, or from a worker it was not given to: ignored.
        case stale(lease: String, worker: String)
        /// The attempt ran past its stage's time limit without an answer (a stage hung on its
        /// worker): stop it there and record it failed. The stage is retried on another worker
        /// (a `.retry` follows) or fails for good once its attempts are spent, as after any
        /// retryable failure; a cache check is rendered for real instead. The slot an attempt
        /// holds stays taken until its worker answers (the answer is stale then) or goes: it may
        /// still be running there.
        case timedOut(lease: String, StageRef, worker: String, seconds: Double, attempt: Int, checkOnly: Bool)
        /// Stages kept failing on the worker and succeeding elsewhere (`failures` of them since its
        /// last success): it gets no work until `until`.
        case sidelined(worker: String, until: Double, failures: Int)
        /// The stage failed for good (`.failed` or `.poison` of it alone); its run goes on with
        /// what does not wait for it, and ends later with a `.runEnded` naming every such stage.
        case stageFailed(Outcome)
        case runEnded(Int64, Outcome)
    }

    public enum Phase: Sendable, Equatable {
        case waiting, ready, checking, running, done, ended
    }

    struct Node {
        var phase = Phase.waiting
        var attempts = 0
        var lostWorkers = 0
        var notBefore = 0.0
        var readySince = 0.0
        var cost = 0.0
        /// Seconds an attempt may run (`Event.prepared`).
        var timeLimit: Double?
        /// Prepared, with a recorded artifact to check before rendering.
        var check = false
        var prepared = false
        /// The key its output is stored under, when the coordinator gave one, and when it was
        /// prepared (the count of preparations then).
        var key: String?
        var preparedAt: UInt64 = 0
        var lease: String?
        var worker: String?
        /// Its attempt holds a worker's slot, and so counts in its run's `running`. A worker that
        /// reports the attempt done gives the slot back before its artifact has come up (the
        /// success waits for that); from then on the run's share no longer counts it.
        var inSlot = false
        /// Verification: workers that made this stage already.
        var excluded: Set<String> = []
        /// Workers where an attempt of this stage failed (retryably): its retries go elsewhere
        /// while another worker is connected, so one worker with a full disk or a broken library
        /// does not spend every attempt (it holds the inputs, so placement alone would pick it again).
        var failedOn: [String: Double] = [:]
    }

    struct Run {
        var spec: RunSpec
        var graph: RunGraph
        var nodes: [Node]
        var checkLane = Deque<Int>()
        var slotLane = ReadyQueue<Int>()
        var delayed: [Int] = []
        var running = 0
        /// Set when a stage failed for good: how the run ends once nothing else of it can run.
        var failure: Outcome?
        /// Nodes that failed for good, and those that waited for them (they never run).
        var endedCount = 0
    }

    struct Worker {
        var slots: Int
        /// Leases holding a slot (current ones and those of ended runs not yet answered), each
        /// with the index of the slot it holds (what the lineage and the dashboard's chart show).
        var running: [String: Int] = [:]
        var checks: Set<String> = []
        var draining = false
        var joined: Int
        /// Stages that failed here and then succeeded elsewhere since its last success, and how
        /// long it gets no work (see `Configuration.sidelineAfterFailures`).
        var convictions = 0
        /// When it last made a stage: only what failed on it since counts against it.
        var succeededAt = -Double.infinity
        var sidelinedUntil = 0.0
        var sidelines = 0

        func takesWork(at now: Double) -> Bool { !draining && slots > 0 && sidelinedUntil <= now }

        /// It made a stage: what failed on it before no longer counts against it.
        mutating func succeeded(at now: Double) { convictions = 0; sidelines = 0; succeededAt = now }

        /// The lowest slot index no running lease holds.
        var freeSlot: Int {
            let taken = Set(running.values)
            return (0...).first { !taken.contains($0) }!
        }
    }

    struct LeaseInfo {
        var stage: StageRef
        var worker: String
        var checkOnly: Bool
    }

    public let config: Configuration
    var runs: [Int64: Run] = [:]
    var workers: [String: Worker] = [:]
    var leases: [String: LeaseInfo] = [:]
    var nextLease: UInt64 = 0
    var joinOrder = 0
    /// Output key → the lease of the attempt making it (entries of ended leases are purged now
    /// and then, see `purgeMaking`). Two projects of a batch that share a clip with the same
    /// edits share its segment's key: the second waits instead of rendering it again.
    var making: [String: String] = [:]
    /// When attempts with a time limit run out of it, soonest first (entries of leases that
    /// ended before are skipped when they come up, and purged now and then).
    var deadlines = Heap<Deadline>()
    struct Deadline: Comparable {
        var at: Double, since: Double, lease: String
        static func < (a: Deadline, b: Deadline) -> Bool { (a.at, a.lease) < (b.at, b.lease) }
    }
    /// Stages waiting for another attempt with their key, by key. When that attempt's lease ends
    /// they are prepared again: after a success the coordinator finds its artifact and they are
    /// cache hits; after anything else they render themselves.
    var parked: [String: [StageRef]] = [:]
    /// Output key → the count of preparations when an attempt last made it. A stage prepared
    /// before that, still waiting for a slot, is prepared again (its artifact now exists) instead
    /// of rendering the same output a second time.
    var made: [String: UInt64] = [:]
    var preparations: UInt64 = 0
    /// Output key → stages queued for a slot under it (`wake`): when an attempt makes the key,
    /// they are prepared again at once. Entries go when the stage is sent, the key is made or the
    /// run ends.
    var queuedByKey: [String: Set<StageRef>] = [:]
    /// Orphaned attempts let finish (`Event.orphaned`): lease → its output key and worker, and
    /// key → lease.
    var orphans: [String: (key: String, worker: String, until: Double?)] = [:]
    var orphanMaking: [String: String] = [:]
    public private(set) var dispatching = true

    public init(_ config: Configuration) { self.config = config }

    // MARK: queries (pure reads for the coordinator's pages, progress and heartbeats)

    public var hasRuns: Bool { !runs.isEmpty }
    /// Whether a `tick` could dispatch something now: dispatching, and a stage waits in a lane.
    /// Cheap (one look per run), so the coordinator can tick after every message it handles.
    public var hasQueuedWork: Bool {
        dispatching && (!parked.isEmpty || runs.values.contains { !$0.slotLane.isEmpty || !$0.checkLane.isEmpty || !$0.delayed.isEmpty })
    }
    public var liveLeaseCount: Int { leases.count }
    public func isLive(_ lease: String) -> Bool { leases[lease] != nil }
    /// Whether `lease` is an orphaned attempt let finish (`Event.orphaned`).
    public func isOrphan(_ lease: String) -> Bool { orphans[lease] != nil }
    /// The stage `lease` runs, if it is current and was given to `worker`: the only results that count.
    public func current(_ lease: String, from worker: String) -> StageRef? {
        guard let info = leases[lease], info.worker == worker, runs[info.stage.run]?.nodes[info.stage.node].lease == lease else { return nil }
        return info.stage
    }
    /// Whether the success of the stage `lease` runs would make another stage of its run ready
    /// (a run's last render, which its concat waits for).
    public func successReadies(_ lease: String) -> Bool {
        guard let s = leases[lease]?.stage, let run = runs[s.run] else { return false }
        return run.graph.completingReadies(s.node)
    }
    /// The stage a current lease runs.
    public func stage(of lease: String) -> StageRef? { leases[lease]?.stage }
    public func holder(of lease: String) -> String? { leases[lease]?.worker }
    /// Whether a current lease is a cache check (no slot, no render).
    public func isCheck(_ lease: String) -> Bool { leases[lease]?.checkOnly ?? false }
    public func phase(_ s: StageRef) -> Phase { runs[s.run].map { $0.nodes.indices.contains(s.node) ? $0.nodes[s.node].phase : .ended } ?? .ended }
    /// Every node's phase in one run, by node (empty when the run has ended): one lookup for a
    /// progress report instead of one per node.
    public func phases(ofRun id: Int64) -> [Phase] { runs[id]?.nodes.map(\.phase) ?? [] }
    /// Whether the stage's attempt holds a worker's slot now: a running render whose worker gave
    /// its slot back (its segment still coming up) does not.
    public func inSlot(_ s: StageRef) -> Bool { runs[s.run].map { $0.nodes.indices.contains(s.node) && $0.nodes[s.node].inSlot } ?? false }
    public func attempts(_ s: StageRef) -> Int { runs[s.run]?.nodes[s.node].attempts ?? 0 }
    public func excluded(_ s: StageRef) -> Set<String> { runs[s.run]?.nodes[s.node].excluded ?? [] }
    public func isDraining(_ worker: String) -> Bool { workers[worker]?.draining ?? false }
    /// Seconds the worker still gets no work for (`Effect.sidelined`), nil when it takes work.
    public func sidelined(_ worker: String, now: Double) -> Double? {
        workers[worker].flatMap { $0.sidelinedUntil > now ? $0.sidelinedUntil - now : nil }
    }
    /// Leases holding a worker's slots (cache checks not included).
    public func running(on worker: String) -> [String] { workers[worker].map { Array($0.running.keys) } ?? [] }
    /// Every current lease and the worker it was given to.
    public var liveLeases: [(lease: String, worker: String)] { leases.map { ($0.key, $0.value.worker) } }
    /// Which of its worker's slots a lease holds (0-based), while it holds one.
    public func slot(of lease: String, on worker: String) -> Int? { workers[worker]?.running[lease] }
    /// Workers taking work, other than those in `except`.
    public func takingWork(except: Set<String> = []) -> Int { workers.filter { !$0.value.draining && !except.contains($0.key) }.count }
    /// Slots free now on the workers that take work.
    public func freeSlots(now: Double) -> Int {
        workers.values.reduce(0) { $0 + ($1.takesWork(at: now) ? max(0, $1.slots - $1.running.count) : 0) }
    }
    /// Stages prepared and waiting for a slot, in every run.
    public var waitingForSlots: Int { runs.values.reduce(0) { $0 + $1.slotLane.count } }
    /// Stages ready and waiting for a slot or a check.
    public var queueDepth: Int { runs.values.reduce(0) { n, run in n + run.nodes.reduce(0) { $0 + ($1.phase == .ready ? 1 : 0) } } }

    // MARK: events

    /// Applies one event at time `now`; returns what to do, in order. `affinity(stage, worker)`
    /// scores how much of the stage's input a worker already holds (the free worker with the
    /// highest score gets it).
    public mutating func handle(_ event: Event, now: Double, affinity: ((StageRef, String) -> Int64)? = nil) -> [Effect] {
        var out: [Effect] = []
        switch event {
        case .submit(let spec):
            guard runs[spec.id] == nil else { break }
            let n = spec.dependencies.count
            var run = Run(spec: spec, graph: RunGraph(dependencies: spec.dependencies), nodes: Array(repeating: Node(), count: n))
            var ready = Set(run.graph.initiallyReady)
            for d in spec.done where run.nodes.indices.contains(d) && run.nodes[d].phase != .done {
                run.nodes[d].phase = .done
                ready.remove(d)
                for k in run.graph.complete(d) { ready.insert(k) }
            }
            runs[spec.id] = run
            for k in ready.sorted() where runs[spec.id]!.nodes[k].phase == .waiting { makeReady(StageRef(run: spec.id, node: k), now: now, &out) }
            endIfSettled(spec.id, &out)

        case .prepared(let s, let check, let cost, let key, let timeLimit):
            guard runs[s.run].map({ $0.nodes.indices.contains(s.node) && $0.nodes[s.node].phase == .ready && !$0.nodes[s.node].prepared }) == true
            else { break }
            var run = take(s.run)
            run.nodes[s.node].prepared = true
            run.nodes[s.node].check = check
            run.nodes[s.node].cost = cost
            run.nodes[s.node].key = key
            run.nodes[s.node].timeLimit = timeLimit
            preparations += 1
            run.nodes[s.node].preparedAt = preparations
            if check { run.checkLane.append(s.node) } else {
                run.slotLane.push(s.node, short: run.spec.short[s.node], cost: cost)
                if let key { queuedByKey[key, default: []].insert(s) }
            }
            runs[s.run] = run

        case .workerJoined(let id, let slots, let running):
            var w = workers[id] ?? Worker(slots: slots, joined: joinOrder)
            if workers[id] == nil { joinOrder += 1 }
            w.slots = max(0, slots)
            for lease in running {
                if w.running[lease] == nil { w.running[lease] = w.freeSlot }
                // A lease nobody knows (an earlier coordinator's not let finish, or an ended
                // run's) is stopped.
                if !isLive(lease) && orphans[lease]?.worker != id { out.append(.cancel(lease: lease, nil, worker: id)) }
            }
            workers[id] = w

        case .workerDraining(let id):
            workers[id]?.draining = true

        case .workerLeft(let id):
            endOrphans(of: id)
            guard let w = workers.removeValue(forKey: id) else { break }
            for lease in w.checks.union(w.running.keys).sorted() { handBack(lease, from: id, now: now, &out) }

        case .workerLost(let id):
            endOrphans(of: id)
            guard let w = workers.removeValue(forKey: id) else { break }
            for lease in w.checks.union(w.running.keys).sorted() { lose(lease, worker: id, now: now, &out) }

        case .orphaned(let lease, let key, let worker, let until):
            if orphans[lease] != nil { orphans[lease]!.until = until; break }
            // Not when this coordinator gave the lease out, or another orphan makes the key. A
            // render of this coordinator's making it (the stage went out again while the orphan's
            // worker was away) races it: the orphan started first, so it usually ends first.
            // Before, the orphan was cancelled and the stage's render began again from nothing.
            guard leases[lease] == nil, orphanMaking[key] == nil else {
                if leases[lease] == nil { out.append(.cancel(lease: lease, nil, worker: worker)) }
                break
            }
            orphans[lease] = (key, worker, until)
            orphanMaking[key] = lease

        case .orphanEnded(let lease, let made):
            guard let o = forget(orphan: lease) else { break }
            free(lease, on: o.worker)
            if made {
                self.made[o.key] = preparations
                // The render racing it stops; its stage reuses the orphan's output.
                if let rival = making[o.key], let info = leases[rival], runs[info.stage.run]?.nodes[info.stage.node].lease == rival {
                    out.append(.superseded(lease: rival, info.stage, worker: info.worker, by: o.worker))
                    detach(info.stage)
                    makeReady(info.stage, now: now, &out)
                }
                wake(o.key, now: now, &out)
            }

        case .released(let lease, let worker):
            free(lease, on: worker)
            if let s = leases[lease]?.stage, leases[lease]?.worker == worker, runs[s.run]?.nodes[s.node].lease == lease {
                Self.leaveSlot(&runs[s.run]!, s.node)
            }

        case .succeeded(let lease, let worker):
            free(lease, on: worker)
            guard let s = current(lease, from: worker, &out) else { break }
            workers[worker]?.succeeded(at: now)
            leases[lease] = nil
            let newly: [Int], failedOn: [String: Double]
            var madeKey: String?
            do {
                var run = take(s.run)
                if run.nodes[s.node].phase == .checking {
                    run.nodes[s.node].attempts += 1
                } else {
                    Self.leaveSlot(&run, s.node)
                    if let key = run.nodes[s.node].key { made[key] = preparations; madeKey = key }
                }
                run.nodes[s.node].phase = .done
                run.nodes[s.node].lease = nil
                run.nodes[s.node].worker = nil
                run.nodes[s.node].excluded = []
                failedOn = run.nodes[s.node].failedOn
                run.nodes[s.node].failedOn = [:]
                newly = run.graph.complete(s.node)
                runs[s.run] = run
            }
            // Where it failed before, the worker, not the stage, was at fault.
            for (w, at) in failedOn.sorted(by: { $0.key < $1.key }) where w != worker && at >= workers[w]?.succeededAt ?? .infinity {
                convict(w, now: now, &out)
            }
            for k in newly where runs[s.run]!.nodes[k].phase == .waiting { makeReady(StageRef(run: s.run, node: k), now: now, &out) }
            if let madeKey {
                // An orphan racing it (`Event.orphaned`) is of no use now.
                if let o = orphanMaking[madeKey], let worker = forget(orphan: o)?.worker { out.append(.cancel(lease: o, nil, worker: worker)) }
                wake(madeKey, now: now, &out)
            }
            endIfSettled(s.run, &out)

        case .cacheMiss(let lease, let worker):
            free(lease, on: worker)
            guard let s = current(lease, from: worker, &out) else { break }
            renderForReal(s, now: now)

        case .failed(let lease, let worker, let retryable, let workersFault):
            free(lease, on: worker)
            guard let s = current(lease, from: worker, &out) else { break }
            attemptFailed(s, on: worker, retryable: retryable, workersFault: workersFault, now: now, &out)

        case .handedBack(let lease, let worker):
            free(lease, on: worker)
            // One this scheduler does not hold for that worker (the last coordinator gave it out:
            // a worker hands back what it had not begun when that one stopped) is nothing more.
            // Before, it was recorded as a stale result, which it is not.
            guard current(lease, from: worker) != nil else { break }
            handBack(lease, from: worker, now: now, &out)

        case .notDelivered(let lease, let until):
            guard let info = leases[lease] else { break }
            if let until, var w = workers[info.worker] { w.sidelinedUntil = max(w.sidelinedUntil, until); workers[info.worker] = w }
            free(lease, on: info.worker)
            handBack(lease, from: info.worker, now: now, &out, record: false)

        case .again(let lease, let worker):
            free(lease, on: worker)
            guard let s = current(lease, from: worker, &out) else { break }
            leases[lease] = nil
            var run = take(s.run)
            Self.leaveSlot(&run, s.node)
            var node = run.nodes[s.node]
            node.excluded.insert(worker)
            node.attempts = max(0, node.attempts - 1)
            node.lease = nil; node.worker = nil
            node.phase = .ready; node.readySince = now; node.check = false
            run.nodes[s.node] = node
            run.slotLane.push(s.node, short: run.spec.short[s.node], cost: node.cost)
            runs[s.run] = run

        case .cancel(let id):
            guard runs[id] != nil else { break }
            end(id, .cancelled, &out)

        case .fail(let s):
            guard let node = runs[s.run]?.nodes[safe: s.node], node.phase != .ended, node.phase != .done else { break }
            detach(s)
            stageFailed(s, .failed(s, attempts: node.attempts), &out)

        case .stopDispatching:
            dispatching = false

        case .tick:
            guard dispatching else { break }
            expire(now, &out)
            // Orphans nobody has word of by now: the stages waiting for them render.
            for (lease, o) in orphans where o.until.map({ $0 <= now }) == true { forget(orphan: lease) }
            unpark(now, &out)
            release(now)
            dispatchChecks(now, &out)
            dispatchSlots(now, affinity, &out)
        }
        return out
    }

    // MARK: transitions

    /// Takes a run out of the table to change it: a copy left in the table would make the first
    /// change copy all the run's nodes. Put it back with `runs[id] = run`.
    mutating func take(_ id: Int64) -> Run { runs.removeValue(forKey: id)! }

    /// The stage's lease if it is current and `worker` holds it; otherwise a `.stale` effect.
    func current(_ lease: String, from worker: String, _ out: inout [Effect]) -> StageRef? {
        guard let s = current(lease, from: worker) else {
            out.append(.stale(lease: lease, worker: worker))
            return nil
        }
        return s
    }

    /// The stage's attempt is over: its lease no longer counts and it no longer runs (its phase
    /// is for the caller to set).
    mutating func detach(_ s: StageRef) {
        let node = runs[s.run]!.nodes[s.node]
        if let lease = node.lease { leases[lease] = nil }
        Self.leaveSlot(&runs[s.run]!, s.node)
        runs[s.run]!.nodes[s.node].lease = nil
        runs[s.run]!.nodes[s.node].worker = nil
    }

    /// The stage's attempt failed on `worker`: retried after a backoff (elsewhere, when it was the
    /// worker's fault and another worker takes work), or failed for good once its attempts are
    /// spent or the failure is permanent.
    mutating func attemptFailed(_ s: StageRef, on worker: String, retryable: Bool, workersFault: Bool, now: Double, _ out: inout [Effect]) {
        let attempts = runs[s.run]!.nodes[s.node].attempts
        detach(s)
        let decision = RetryPolicy.decide(retryable: retryable, attempts: attempts, maxAttempts: runs[s.run]!.spec.maxAttempts, now: now,
                                          base: config.backoffBase, jitter: jitter(s, attempts))
        switch decision {
        case .retry(let notBefore):
            if workersFault { runs[s.run]!.nodes[s.node].failedOn[worker] = now }
            delay(s, until: notBefore, now: now, &out)
        case .fail: stageFailed(s, .failed(s, attempts: attempts), &out)
        }
    }

    /// A cache check came back without a usable artifact (or not at all): the stage takes a slot
    /// and renders.
    mutating func renderForReal(_ s: StageRef, now: Double) {
        let node = runs[s.run]!.nodes[s.node]
        if let lease = node.lease { leases[lease] = nil }
        var run = take(s.run)
        Self.leaveSlot(&run, s.node)
        run.nodes[s.node].lease = nil
        run.nodes[s.node].worker = nil
        run.nodes[s.node].check = false
        run.nodes[s.node].phase = .ready
        run.nodes[s.node].readySince = now
        run.slotLane.push(s.node, short: run.spec.short[s.node], cost: node.cost)
        if let key = node.key { queuedByKey[key, default: []].insert(s) }
        runs[s.run] = run
    }

    /// The stage no longer waits for a slot under `key` (sent, or its run ended).
    mutating func unqueue(_ s: StageRef, key: String) {
        // In place (a copy of the set would be copied again on removal).
        guard queuedByKey[key]?.remove(s) != nil, queuedByKey[key]!.isEmpty else { return }
        queuedByKey[key] = nil
    }

    /// An attempt made `key`: stages of other runs queued for a slot under the same key (two
    /// projects of a batch thread the same clip with the same edits) are prepared again now. Their
    /// artifact exists, so each goes out as a cache check beside the slots. Before, each waited
    /// until its run's turn for a slot came to find that out: in a batch of six projects sharing
    /// two items, a project whose own render was done waited 4–7 s behind other projects' renders
    /// before its items were checked and its 0.07 s concat could go.
    mutating func wake(_ key: String, now: Double, _ out: inout [Effect]) {
        guard let queued = queuedByKey.removeValue(forKey: key), let at = made[key] else { return }
        for s in queued.sorted() {
            guard let n = runs[s.run]?.nodes[s.node], n.phase == .ready, n.prepared, !n.check, n.lease == nil, n.key == key,
                  n.preparedAt <= at else { continue }
            makeReady(s, now: now, &out)
        }
    }

    /// Attempts past their stage's time limit (`Effect.timedOut`). A few comparisons a tick when
    /// none is due.
    mutating func expire(_ now: Double, _ out: inout [Effect]) {
        while let first = deadlines.min, first.at <= now {
            _ = deadlines.popMin()
            guard let info = leases[first.lease], runs[info.stage.run]?.nodes[info.stage.node].lease == first.lease else { continue }
            let s = info.stage
            out.append(.timedOut(lease: first.lease, s, worker: info.worker, seconds: now - first.since, attempt: runs[s.run]!.nodes[s.node].attempts,
                                 checkOnly: info.checkOnly))
            if info.checkOnly {
                workers[info.worker]?.checks.remove(first.lease)
                renderForReal(s, now: now)
            } else {
                attemptFailed(s, on: info.worker, retryable: true, workersFault: true, now: now, &out)
            }
        }
        if deadlines.count > 2 * leases.count + 1024 { deadlines = Heap(deadlines.unordered.filter { leases[$0.lease] != nil }) }
    }

    /// An attempt just given out gets its stage's time limit, if it has one.
    mutating func startClock(_ lease: String, _ node: Node, now: Double) {
        if let limit = node.timeLimit { deadlines.insert(Deadline(at: now + limit, since: now, lease: lease)) }
    }

    /// The node's attempt no longer holds a slot: its run's share counts one fewer.
    static func leaveSlot(_ run: inout Run, _ k: Int) {
        if run.nodes[k].inSlot { run.nodes[k].inSlot = false; run.running -= 1 }
    }

    mutating func free(_ lease: String, on worker: String) {
        workers[worker]?.running[lease] = nil
        workers[worker]?.checks.remove(lease)
    }

    mutating func makeReady(_ s: StageRef, now: Double, _ out: inout [Effect]) {
        runs[s.run]!.nodes[s.node].phase = .ready
        runs[s.run]!.nodes[s.node].readySince = now
        runs[s.run]!.nodes[s.node].prepared = false
        out.append(.prepare(s))
    }

    /// Back to its lane at once (a hand-back or an undelivered assignment): the attempt does not count.
    mutating func handBack(_ lease: String, from worker: String, now: Double, _ out: inout [Effect], record: Bool = true) {
        guard let info = leases.removeValue(forKey: lease), runs[info.stage.run]?.nodes[info.stage.node].lease == lease else { return }
        let k = info.stage.node
        var run = take(info.stage.run)
        if record { out.append(.handedBack(lease: lease, info.stage, worker: worker)) }
        requeue(&run, k, countedAttempt: !info.checkOnly, now: now)
        runs[info.stage.run] = run
    }

    mutating func requeue(_ run: inout Run, _ k: Int, countedAttempt: Bool, now: Double) {
        Self.leaveSlot(&run, k)
        if countedAttempt { run.nodes[k].attempts = max(0, run.nodes[k].attempts - 1) }
        run.nodes[k].lease = nil
        run.nodes[k].worker = nil
        run.nodes[k].phase = .ready
        run.nodes[k].readySince = now
        if run.nodes[k].check { run.checkLane.append(k) } else { run.slotLane.push(k, short: run.spec.short[k], cost: run.nodes[k].cost) }
    }

    /// Its worker went. A cache check just goes back; an attempt counts towards poison and retries.
    mutating func lose(_ lease: String, worker: String, now: Double, _ out: inout [Effect]) {
        guard let info = leases.removeValue(forKey: lease), runs[info.stage.run]?.nodes[info.stage.node].lease == lease else { return }
        let s = info.stage
        out.append(.lost(lease: lease, s, worker: worker, checkOnly: info.checkOnly))
        if info.checkOnly {
            var run = take(s.run)
            requeue(&run, s.node, countedAttempt: false, now: now)
            runs[s.run] = run
            return
        }
        detach(s)
        runs[s.run]!.nodes[s.node].lostWorkers += 1
        let lost = runs[s.run]!.nodes[s.node].lostWorkers
        let attempts = runs[s.run]!.nodes[s.node].attempts
        if RetryPolicy.isPoison(lostWorkers: lost, limit: config.poisonAfterLostWorkers) {
            stageFailed(s, .poison(s, lostWorkers: lost), &out)
        } else {
            delay(s, until: now + RetryPolicy.delay(attempts: attempts, base: config.backoffBase, jitter: jitter(s, attempts)), now: now, &out)
        }
    }

    mutating func delay(_ s: StageRef, until notBefore: Double, now: Double, _ out: inout [Effect]) {
        runs[s.run]!.nodes[s.node].phase = .ready
        runs[s.run]!.nodes[s.node].readySince = notBefore
        runs[s.run]!.nodes[s.node].notBefore = notBefore
        runs[s.run]!.nodes[s.node].check = false
        runs[s.run]!.delayed.append(s.node)
        out.append(.retry(s, notBefore: notBefore, attempts: runs[s.run]!.nodes[s.node].attempts))
    }

    /// Ends the run once all its stages are done, or, after a failure, once nothing else of it can run.
    mutating func endIfSettled(_ id: Int64, _ out: inout [Effect]) {
        guard let run = runs[id] else { return }
        if let failure = run.failure {
            if run.graph.completedCount + run.endedCount == run.nodes.count { end(id, failure, &out) }
        } else if run.graph.isComplete {
            end(id, .succeeded, &out)
        }
    }

    /// A stage failed for good (its lease already cleared). The stages that wait for it, directly
    /// or through others, will never run; everything else of the run goes on, as `ninja -k 0`
    /// does: renders already under way are not thrown away (their segments are cached for the
    /// next submit), and one submit names every bad input instead of one per submit. A later
    /// failure joins the first's outcome. The run ends when nothing else of it can run.
    mutating func stageFailed(_ s: StageRef, _ outcome: Outcome, _ out: inout [Effect]) {
        guard runs[s.run] != nil else { return }
        out.append(.stageFailed(outcome))
        var run = take(s.run)
        run.failure = run.failure.map { $0.adding([s]) } ?? outcome
        var blocked = [s.node]
        while let k = blocked.popLast() {
            // A stage that waits for an unfinished one has never been given out.
            guard run.nodes[k].phase != .ended, run.nodes[k].phase != .done else { continue }
            run.nodes[k].phase = .ended
            run.endedCount += 1
            blocked += run.graph.dependents(of: k)
        }
        runs[s.run] = run
        endIfSettled(s.run, &out)
    }

    /// The run is over: its attempts still out are cancelled (their slots free as workers answer).
    mutating func end(_ id: Int64, _ outcome: Outcome, _ out: inout [Effect]) {
        guard let run = runs.removeValue(forKey: id) else { return }
        if !queuedByKey.isEmpty {
            for (k, node) in run.nodes.enumerated() where node.phase != .done {
                if let key = node.key { unqueue(StageRef(run: id, node: k), key: key) }
            }
        }
        for (k, node) in run.nodes.enumerated() {
            guard let lease = node.lease, let worker = node.worker else { continue }
            leases[lease] = nil
            out.append(.cancel(lease: lease, StageRef(run: id, node: k), worker: worker))
        }
        out.append(.runEnded(id, outcome))
    }

    /// Spreads retries of stages that failed together: 0.8…1.2, a hash of the stage and attempt.
    func jitter(_ s: StageRef, _ attempts: Int) -> Double {
        var x = UInt64(bitPattern: s.run) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(s.node) &* 0xBF58_476D_1CE4_E5B9 ^ UInt64(attempts) &* 0x94D0_49BB_1331_11EB
        x ^= x >> 31; x &*= 0xD6E8_FEB8_6659_FD93; x ^= x >> 32
        return 0.8 + 0.4 * Double(x % 10_000) / 10_000
    }

    // MARK: dispatch

    mutating func release(_ now: Double) {
        for id in Array(runs.keys) where !runs[id]!.delayed.isEmpty {
            var run = take(id)
            var still: [Int] = []
            for k in run.delayed {
                guard run.nodes[k].phase == .ready, run.nodes[k].lease == nil else { continue }
                if run.nodes[k].notBefore <= now {
                    run.nodes[k].readySince = now
                    run.slotLane.push(k, short: run.spec.short[k], cost: run.nodes[k].cost)
                } else { still.append(k) }
            }
            run.delayed = still
            runs[id] = run
        }
    }

    /// Whether a stage leaving its lane must not render because of its output key: another
    /// attempt is making the key (parked until that attempt's lease ends), or one made it since
    /// the stage was prepared (prepared again: it is a cache hit now).
    mutating func holdBack(_ s: StageRef, key: String, now: Double, _ out: inout [Effect]) -> Bool {
        if orphanMaking[key] != nil || making[key].flatMap({ leases[$0] }).map({ $0.stage != s }) == true {
            parked[key, default: []].append(s)
            return true
        }
        if let at = made[key], runs[s.run]!.nodes[s.node].preparedAt <= at {
            makeReady(s, now: now, &out)
            return true
        }
        return false
    }

    /// Stages parked behind an attempt whose lease has ended are prepared again.
    mutating func unpark(_ now: Double, _ out: inout [Effect]) {
        guard !parked.isEmpty else { return }
        for (key, stages) in parked where making[key].flatMap({ leases[$0] }) == nil && orphanMaking[key] == nil {
            parked[key] = nil
            making[key] = nil
            for s in stages {
                // One prepared again with its key's success (`wake`) and now to be checked is not
                // prepared a second time.
                guard let n = runs[s.run]?.nodes[s.node], n.phase == .ready, n.lease == nil, n.prepared, !n.check else { continue }
                makeReady(s, now: now, &out)
            }
        }
    }

    /// Forgets the keys of ended leases once they outnumber the live ones, so `making` stays about
    /// the size of the farm's attempts in flight; and keys made more than `madeMemory`
    /// preparations ago (a stage still waiting from before then renders its output again).
    mutating func purgeMaking() {
        if making.count > 2 * leases.count + 64 {
            making = making.filter { leases[$0.value] != nil || parked[$0.key] != nil }
        }
        if made.count > 2 * Self.madeMemory {
            made = made.filter { $0.value + Self.madeMemory > preparations }
            if made.count > Self.madeMemory { made.removeAll() }
        }
    }
    static let madeMemory: UInt64 = 8192

    /// Its worker went: its orphaned attempts with it (stages waiting for them render).
    mutating func endOrphans(of worker: String) {
        for (lease, o) in orphans where o.worker == worker { forget(orphan: lease) }
    }

    /// The orphan no longer makes its key: stages parked behind it are let go at the next tick.
    @discardableResult
    mutating func forget(orphan lease: String) -> (key: String, worker: String, until: Double?)? {
        guard let o = orphans.removeValue(forKey: lease) else { return nil }
        orphanMaking[o.key] = nil
        return o
    }

    mutating func newLease() -> String {
        nextLease += 1
        return "\(config.epoch)-\(nextLease)"
    }

    /// Stages with a recorded artifact are checked first, beside the slots: a few per worker.
    mutating func dispatchChecks(_ now: Double, _ out: inout [Effect]) {
        for id in runs.keys.sorted() where !runs[id]!.checkLane.isEmpty {
            var run = take(id)
            defer { runs[id] = run }
            while let k = run.checkLane.first {
                guard run.nodes[k].phase == .ready, run.nodes[k].check, run.nodes[k].lease == nil else { _ = run.checkLane.popFirst(); continue }
                guard let wid = workers.filter({ $0.value.takesWork(at: now) && $0.value.checks.count < config.checksPerWorker })
                        .min(by: { ($0.value.checks.count, $0.value.joined) < ($1.value.checks.count, $1.value.joined) })?.key else { return }
                _ = run.checkLane.popFirst()
                let lease = newLease()
                run.nodes[k].phase = .checking
                run.nodes[k].lease = lease
                run.nodes[k].worker = wid
                leases[lease] = LeaseInfo(stage: StageRef(run: id, node: k), worker: wid, checkOnly: true)
                workers[wid]!.checks.insert(lease)
                startClock(lease, run.nodes[k], now: now)
                out.append(.dispatch(lease: lease, StageRef(run: id, node: k), worker: wid, attempt: run.nodes[k].attempts + 1, checkOnly: true,
                                     readySince: run.nodes[k].readySince))
            }
        }
    }

    /// Credit-based: a worker never holds more attempts than its slots. Which run: `FairShare`
    /// (owners, priority, short joining work before renders, fewest attempts running, the oldest);
    /// within a run its ready queue's order. The free worker holding most of the stage's input gets it.
    mutating func dispatchSlots(_ now: Double, _ affinity: ((StageRef, String) -> Int64)?, _ out: inout [Effect]) {
        var free = workers.filter { $0.value.takesWork(at: now) && $0.value.running.count < $0.value.slots }
            .sorted { $0.value.joined < $1.value.joined }.map(\.key)
        guard !free.isEmpty else { return }
        var active = Array(runs.keys).filter { hasDispatchable($0) }
        var skipped: [(Int64, Int)] = []
        defer {
            for (id, k) in skipped {
                guard runs[id] != nil else { continue }
                var run = take(id)
                run.slotLane.push(k, short: run.spec.short[k], cost: run.nodes[k].cost)
                runs[id] = run
            }
        }
        // Slots each owner's runs hold, counted only when more than one owner has runs here.
        var ownerRunning: [String?: Int] = [:]
        let someOwner = runs.first?.value.spec.owner
        if runs.values.contains(where: { $0.spec.owner != someOwner }) {
            for run in runs.values { ownerRunning[run.spec.owner, default: 0] += run.running }
        }
        while !free.isEmpty && !active.isEmpty {
            guard let id = FairShare.pick(active.map {
                      FairShare.Candidate(run: $0, priority: runs[$0]!.spec.priority, running: runs[$0]!.running,
                                          owner: runs[$0]!.spec.owner, ownerRunning: ownerRunning[runs[$0]!.spec.owner] ?? 0,
                                          short: runs[$0]!.slotLane.firstIsShort)
                  }),
                  let k = runs[id]!.slotLane.pop() else { break }
            let s = StageRef(run: id, node: k)
            if let key = runs[id]!.nodes[k].key, holdBack(s, key: key, now: now, &out) {
                if !hasDispatchable(id) { active.removeAll { $0 == id } }
                continue
            }
            let excluded = avoided(runs[id]!.nodes[k], now: now)
            let eligible = excluded.isEmpty ? free : free.filter { !excluded.contains($0) }
            if eligible.isEmpty {
                skipped.append((id, k))
            } else {
                let wid = affinity.map { score in
                    eligible.enumerated().max { a, b in
                        (score(s, a.element), -(workers[a.element]!.running.count), -a.offset) < (score(s, b.element), -(workers[b.element]!.running.count), -b.offset)
                    }!.element
                } ?? eligible.min { workers[$0]!.running.count < workers[$1]!.running.count }!
                let lease = newLease()
                runs[id]!.nodes[k].attempts += 1
                runs[id]!.nodes[k].phase = .running
                runs[id]!.nodes[k].inSlot = true
                runs[id]!.nodes[k].lease = lease
                runs[id]!.nodes[k].worker = wid
                runs[id]!.running += 1
                if !ownerRunning.isEmpty { ownerRunning[runs[id]!.spec.owner, default: 0] += 1 }
                leases[lease] = LeaseInfo(stage: s, worker: wid, checkOnly: false)
                if let key = runs[id]!.nodes[k].key { purgeMaking(); making[key] = lease; unqueue(s, key: key) }
                workers[wid]!.running[lease] = workers[wid]!.freeSlot
                startClock(lease, runs[id]!.nodes[k], now: now)
                out.append(.dispatch(lease: lease, s, worker: wid, attempt: runs[id]!.nodes[k].attempts, checkOnly: false,
                                     readySince: runs[id]!.nodes[k].readySince))
                if workers[wid]!.running.count >= workers[wid]!.slots { free.removeAll { $0 == wid } }
            }
            if !hasDispatchable(id) { active.removeAll { $0 == id } }
        }
    }

    /// The workers a stage must not go to now: those that made it already (verification), and
    /// those where it failed, while a worker outside both, not draining, is connected (it waits
    /// for that one's slot rather than fail again where it failed; with none, it tries anywhere).
    func avoided(_ node: Node, now: Double) -> Set<String> {
        guard !node.failedOn.isEmpty else { return node.excluded }
        let both = node.excluded.union(node.failedOn.keys)
        return workers.contains { !both.contains($0.key) && $0.value.takesWork(at: now) } ? both : node.excluded
    }

    /// A stage that failed on `id` succeeded elsewhere: sidelines it once `sidelineAfterFailures`
    /// such stages came without a success of its own, while another worker takes work.
    mutating func convict(_ id: String, now: Double, _ out: inout [Effect]) {
        guard var w = workers[id] else { return }
        w.convictions += 1
        if w.convictions >= config.sidelineAfterFailures, w.sidelinedUntil <= now,
           workers.contains(where: { $0.key != id && $0.value.takesWork(at: now) }) {
            w.sidelinedUntil = now + min(600, config.sidelineSeconds * Double(1 << min(w.sidelines, 10)))
            w.sidelines += 1
            out.append(.sidelined(worker: id, until: w.sidelinedUntil, failures: w.convictions))
        }
        workers[id] = w
    }

    /// Drops stale heads of the run's slot lane; true when a stage can go now.
    mutating func hasDispatchable(_ id: Int64) -> Bool {
        guard runs[id] != nil else { return false }
        var run = take(id)
        defer { runs[id] = run }
        while let k = run.slotLane.first {
            let n = run.nodes[k]
            if n.phase != .ready || n.check || n.lease != nil || !n.prepared { _ = run.slotLane.pop(); continue }
            return true
        }
        return false
    }
}

extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
