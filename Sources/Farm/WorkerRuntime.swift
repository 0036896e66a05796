import Foundation
import Synchronization
import Logging
import ThreadlineCore
import Transport
import CSupport

/// A worker: connects a DEALER to the coordinator, announces its slots, runs at most that many
/// tasks at once (each on its own thread), and reports results with their lease tokens.
///
/// Inputs it does not hold are pulled from the coordinator in chunks before a task starts (the
/// task keeps its slot meanwhile); its outputs stay in its store and are served to whoever pulls
/// them. After losing the coordinator it keeps running, reconnects with backoff, says hello
/// again and re-sends the results the coordinator has not acknowledged.
public final class WorkerRuntime: Sendable {
    public struct Configuration: Sendable {
        public var endpoint: String
        public var slots: Int
        public var id: String
        public var heartbeatInterval: Double
        /// Re-announce when the coordinator has been silent this long.
        public var coordinatorTimeout: Double
        /// When set, the worker stops as soon as its parent process is no longer this one.
        public var parentPID: Int32?
        /// The id was given (`--id`), not made unique by default: a second worker may share it.
        public var idGiven = false
        /// This worker's artifact store; inputs it lacks are pulled into it. Nil: use paths as given.
        public var store: ArtifactStore?
        /// Folders this worker reads directly (shared with the submitter or coordinator) instead of
        /// copying: an input under one of them is used where it is, if its content matches.
        public var sharedDirectories: [String] = []
        /// CURVE: this worker's keys and the coordinator's public key.
        public var curve: (keys: CurveKeyPair, serverPublicKey: String)?
        /// Keeps `store` within this size (see `ArtifactStore.trim`). Nil: it grows without bound.
        public var storeLimit: StoreLimit?
        /// Seconds without work after which the memory renders left in the heap goes back to the
        /// system (once per idle spell).
        public var idleTrimAfter: Double = WorkerRuntime.defaultIdleTrimAfter
        public init(endpoint: String, slots: Int = 1, id: String = WorkerRuntime.defaultID(),
                    heartbeatInterval: Double = 1, coordinatorTimeout: Double = 5) {
            self.endpoint = endpoint; self.slots = slots; self.id = id
            self.heartbeatInterval = heartbeatInterval; self.coordinatorTimeout = coordinatorTimeout
        }
    }

    /// A bound on the worker's own store: its artifacts are copies of the coordinator's, pulled
    /// again when needed, so the least recently used go once the store is over `maxBytes`.
    public struct StoreLimit: Sendable {
        public var maxBytes: Int64
        /// Files used this recently stay (another worker sharing the folder may be about to read them).
        public var grace: Double
        /// Trims at most this often, after work has come or gone.
        public var interval: Double = 5
        /// Free space kept on the store's disk: when other files leave less, the store gives up
        /// more than `maxBytes` asks (in use or not, but never what attempts read or deliver).
        public var keepFree: Int64 = 0
        public init(maxBytes: Int64, grace: Double) { self.maxBytes = maxBytes; self.grace = grace }

        /// Bytes the store's disk lacks of `keepFree` now.
        func shortfall(_ root: String) -> Int64 {
            guard keepFree > 0, let free = FileChecks.freeBytes(root) else { return 0 }
            return max(0, keepFree - free)
        }
    }

    public static let version = "0.4.0"
    public static func defaultID() -> String { "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(6))" }

    let config: Configuration
    let runner: any TaskRunner
    let logger: Logger
    let stopped = Mutex(false)
    private let finished = Mutex<[TaskResult]>([])
    /// Rings when a task thread finishes, so its result goes out at once.
    private let wakeup = Wakeup()
    private let cancelled = Mutex<Set<String>>([])
    /// An input taken from a shared folder, and what came of it (nil: not taken).
    struct Taken: Sendable { var ref: ArtifactRef; var got: ArtifactRef? }
    /// Takes from shared folders done off the loop (hashing and copying a large file takes
    /// seconds, in which the loop would hear nothing: not a cancel, not a drain), and the inputs
    /// (by sha256) whose takes are still wanted: a take stops once no assignment here waits for
    /// it (cancelled, handed back, drained, or the input came another way).
    private let taken = Mutex<[Taken]>([])
    private let takesWanted = Mutex<Set<String>>([])

    public init(_ config: Configuration, runner: any TaskRunner, logger: Logger) {
        self.config = config; self.runner = runner; self.logger = logger
    }

    public func stop() { stopped.withLock { $0 = true } }
    /// Seconds without work after which the heap's free memory is given back, unless
    /// `Configuration.idleTrimAfter` says otherwise (`worker --idle-trim-after`).
    public static let defaultIdleTrimAfter = 10.0

    /// When a drain was asked for: the deadline for in-flight attempts.
    private let drainDeadline = Mutex<Double?>(nil)

    /// This process among others under the same id (`Hello.incarnation`).
    let incarnation = UUID().uuidString

    /// Graceful stop (SIGTERM): take no more work, let in-flight attempts finish within `timeout`
    /// seconds and deliver their results, hand back the rest, then return from `run`.
    public func drain(timeout: Double) {
        drainDeadline.withLock { if $0 == nil { $0 = Clocks.steady + max(0, timeout) } }
        wakeup.signal()
    }

    /// An assignment waiting for inputs to arrive.
    struct Preparing {
        var assignment: Assignment
        var waiting: Set<String>
        var paths: [String: String]
    }

    /// Runs until stopped or told to shut down.
    public func run(context: MessagingContext) throws {
        let socket = try Socket(context, .dealer)
        try socket.setIdentity(config.id)
        // At most 2 s between dials: a coordinator restarted after a long stop waited up to 5 s
        // for its workers. (A dial to a port nobody listens on costs the coordinator's host nothing.)
        try socket.setReconnect(initialMs: 100, maximumMs: 2000)
        try socket.setHeartbeat(intervalMs: Int32(config.heartbeatInterval * 1000), timeoutMs: Int32(config.coordinatorTimeout * 1000))
        if let curve = config.curve { try socket.makeCurveClient(keys: curve.keys, serverPublicKey: curve.serverPublicKey) }
        try socket.connect(config.endpoint)
        var running: Set<String> = []
        var preparing: [String: Preparing] = [:]
        /// Inputs being taken from a shared folder (one take each, whoever waits for it).
        var taking: Set<String> = []
        var unacked: [String: TaskResult] = [:]
        /// The stored inputs each accepted assignment reads (kept from `trim` until its result goes).
        var reading: [String: [String]] = [:]
        /// When each accepted assignment came: what the store holds from then on stays (an
        /// attempt's output is in the store before its result names it).
        var acceptedAt: [String: Double] = [:]
        var draining = false
        /// Assignments given up unbegun when their coordinator stopped (their inputs were still
        /// coming from it): handed back to the next coordinator with the first hello, so that it
        /// gives them out again at once and records them as never begun, not as renders lost.
        var givenUp: Set<String> = []
        func hello() -> Hello {
            var h = Hello(worker: config.id, host: ProcessInfo.processInfo.hostName, pid: Int(getpid()), slots: config.slots,
                          version: Self.version, storeID: config.store?.id, running: Array(running))
            if draining { h.draining = true }
            h.engine = Planner.engineID
            h.incarnation = incarnation
            h.clock = Clocks.wall
            return h
        }
        @discardableResult
        func send(_ m: WireMessage, _ payload: Data? = nil) -> Bool {
            (try? socket.send(payload.map { [Envelope(m).encoded(), $0] } ?? [Envelope(m).encoded()])) == true
        }
        let transfers = config.store.map { Transfers(store: $0, send: { _, m, p in send(m, p) }) }
        func announce() {
            send(.hello(hello()))
            for r in unacked.values { send(.result(r)) }
            for lease in givenUp.sorted() { send(.handBack(lease: lease)) }
            givenUp = []
        }
        send(.hello(hello()))
        var lastSent = Clocks.steady
        var lastHeard = lastSent
        var coordinatorLost = false
        /// The coordinator said it stopped (`stopping`) and none has answered since: a drain has
        /// nobody to deliver to and leaves at once.
        var coordinatorStopped = false
        /// Whether the coordinator ever answered: one that never did is not "lost" but unreachable,
        /// or refusing this worker's key (CURVE refusals are silent on the wire).
        var heardFromCoordinator = false
        /// The log was told this worker got in (the coordinator's first answer other than a refusal).
        var joined = false
        /// The coordinator refuses this worker (its key, its version): why, and when that was last
        /// logged. Its hellos go on (the key may be allowed again) but are said once in 10 minutes,
        /// not as a lost and found coordinator every few seconds.
        var refused: (why: String, loggedAt: Double)?
        var idleSince: Double?, trimmedWhileIdle = false
        logger.info("worker started", metadata: ["worker.id": "\(config.id)", "worker.slots": "\(config.slots)", "endpoint": "\(config.endpoint)"])

        func report(_ r: TaskResult) {
            running.remove(r.lease)
            reading[r.lease] = nil
            acceptedAt[r.lease] = nil
            // An attempt the coordinator cancelled (or that was handed back) is not wanted: its
            // result goes once and is not kept for an acknowledgement. A draining worker whose
            // coordinator stopped (and cancelled what it ran) waited its whole --drain-timeout for one.
            let unwanted = cancelled.withLock { $0.remove(r.lease) != nil }
            if !unwanted { unacked[r.lease] = r }
            send(.result(r))
            lastSent = Clocks.steady
        }
        /// An assignment still waiting for its inputs given up (handed back as the worker drains,
        /// dropped as its coordinator stops): nothing of it stays held. (Its inputs stayed marked
        /// as read, kept from the store's trim for as long as the worker ran.)
        func dropPreparing(_ lease: String) {
            preparing[lease] = nil
            running.remove(lease)
            reading[lease] = nil
            acceptedAt[lease] = nil
        }
        func launch(_ a: Assignment) {
            if a.checkOnly == true {
                // Cache checks are not media pipelines: they run beside the slots.
                let runner = self.runner
                Thread { [self] in let r = runner.check(a); finished.withLock { $0.append(r) }; wakeup.signal() }.start()
            } else {
                start(a)
            }
        }
        func failed(_ a: Assignment, _ why: String) -> TaskResult {
            let now = Clocks.wall
            var r = TaskResult(lease: a.lease, error: nil, artifact: nil, facts: nil, segment: nil, startedAt: now, finishedAt: now,
                               cpuSeconds: 0, maxRSS: 0)
            if a.checkOnly == true { r.cached = false } else {
                let stage: StageKind = { switch a.task { case .fetch: .fetch; case .segment: .decode; case .transition: .transition; case .concat: .concat } }()
                r.error = WireError(stage: stage, errorClass: .retryable, file: a.task.label, message: why)
            }
            return r
        }
        /// Makes sure every input is here; starts the task at once or once the pulls complete.
        func accept(_ a: Assignment) {
            guard let store = config.store, let transfers, let inputs = a.inputs, !inputs.isEmpty else { launch(a); return }
            var p = Preparing(assignment: a, waiting: [], paths: [:])
            reading[a.lease] = inputs.map(\.sha256)
            for ref in inputs {
                let local = store.local(ref)
                if store.isPresent(local) { store.touch(local.path); p.paths[ref.path] = local.path; continue }
                p.paths[ref.path] = local.path
                p.waiting.insert(ref.sha256)
                // A file in a configured shared folder: taken where it is (on a thread), only if its
                // content matches; otherwise pulled from the coordinator.
                let attrs = config.sharedDirectories.contains(where: { ref.path.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") })
                    ? try? FileManager.default.attributesOfItem(atPath: ref.path) : nil
                if (attrs?[.size] as? NSNumber)?.int64Value == ref.size {
                    // Wanted again, a take already going on (one no longer wanted stops only at
                    // its next check) goes on for this assignment instead of a second take.
                    takesWanted.withLock { _ = $0.insert(ref.sha256) }
                    guard taking.insert(ref.sha256).inserted else { continue }
                    Thread { [self] in
                        let got = try? store.ingest(localFile: ref.path, isCancelled: { [self] in
                            !takesWanted.withLock { $0.contains(ref.sha256) } || stopped.withLock { $0 }
                        })
                        taken.withLock { $0.append(Taken(ref: ref, got: got)) }
                        wakeup.signal()
                    }.start()
                } else {
                    transfers.fetch(ref, from: Data())
                }
            }
            if p.waiting.isEmpty { launch(Self.rewrite(a, p.paths)) } else { preparing[a.lease] = p }
        }

        var storeCheck = Every(config.storeLimit?.interval ?? 0)
        /// Set when files came (pulls, outputs) or were let go (acknowledged results).
        var trimWanted = true
        var warnedFull = Every(600), warnedDisk = Every(600)
        func trimmed(_ t: ArtifactStore.TrimReport, _ limit: StoreLimit, short: Int64, now: Double) {
            if t.removed > 0 || t.temporaryRemoved > 0 {
                logger.info("store trimmed: least recently used artifacts removed",
                            metadata: ["files": "\(t.removed)", "removed": "\(ByteSize.text(t.removedBytes))", "store": "\(ByteSize.text(t.bytes))",
                                       "stale_temporaries": "\(t.temporaryRemoved)"])
            }
            if t.bytes > limit.maxBytes, warnedFull.due(now) {
                logger.warning("store over its limit: what is left is in use or was used in the last \(Int(limit.grace)) s",
                               metadata: ["store": "\(ByteSize.text(t.bytes))", "limit": "\(ByteSize.text(limit.maxBytes))",
                                          "first_failure": "\(t.firstFailure ?? "none")"])
            }
            if t.removedBytes < short, warnedDisk.due(now) {
                logger.warning("the store's disk is nearly full and the store has nothing more it may give up: free space on that disk, or attempts here fail",
                               metadata: ["short": "\(ByteSize.text(short - t.removedBytes))", "keep_free": "\(ByteSize.text(limit.keepFree))",
                                          "store": "\(ByteSize.text(t.bytes))"])
            }
        }

        /// Trims the store, keeping what attempts read, deliver or made, and tells the coordinator
        /// what is gone (it sends work where its inputs are).
        func trimStore(_ store: ArtifactStore, _ limit: StoreLimit, freeing: Int64) -> ArtifactStore.TrimReport {
            let keep = Set(reading.values.joined()).union(unacked.values.compactMap { $0.artifact?.sha256 })
            // (A second's margin for file systems that keep coarse times.)
            let since = running.compactMap { acceptedAt[$0] }.min().map { Date(timeIntervalSince1970: $0 - 1) }
            let t = store.trim(toBytes: limit.maxBytes, keep: keep, grace: limit.grace, freeing: freeing, keepSince: since)
            for k in stride(from: 0, to: t.removedSHA256.count, by: WireMessage.droppedPerMessage) {
                send(.dropped(sha256: Array(t.removedSHA256[k..<min(k + WireMessage.droppedPerMessage, t.removedSHA256.count)])))
            }
            return t
        }
        /// An attempt or a pull here failed for want of room on the disk: the store gives up at
        /// once every artifact it may (all but what attempts read, deliver or made), so that the
        /// retry, a fraction of a second later and here when this is the only worker, finds room.
        /// (Before, the store looked at its disk every few seconds: the three attempts of a
        /// stage failed between two looks, and the project with them.)
        func makeRoom(after why: String) {
            guard let limit = config.storeLimit, let store = config.store, !store.isStateFolder else { return }
            let t = trimStore(store, limit, freeing: .max)
            if t.removedBytes > 0 {
                logger.warning("the store's disk is full: gave up its least recently used artifacts for the retry",
                               metadata: ["files": "\(t.removed)", "removed": "\(ByteSize.text(t.removedBytes))", "store": "\(ByteSize.text(t.bytes))",
                                          "failure": "\(why)"])
            } else {
                logger.warning("the store's disk is full and the store has nothing more it may give up: free space on that disk, or attempts here fail",
                               metadata: ["store": "\(ByteSize.text(t.bytes))", "failure": "\(why)"])
            }
        }

        var leavingSince: Double?
        while !stopped.withLock({ $0 }) {
            if let deadline = drainDeadline.withLock({ $0 }) {
                let now = Clocks.steady
                if !draining {
                    draining = true
                    logger.info("draining: taking no more work", metadata: ["in_flight": "\(running.count)", "deadline_s": "\(Int(deadline - now))"])
                    send(.draining(running: Array(running)))
                    // Not started yet (still fetching inputs): handed back now, not after the deadline.
                    for (lease, p) in preparing {
                        dropPreparing(lease)
                        send(.handBack(lease: p.assignment.lease))
                    }
                }
                if coordinatorStopped {
                    // Stopped together (`docker compose down`): what runs here could reach no
                    // coordinator, and the next one resumes its runs without it.
                    logger.info("the coordinator stopped too: leaving without finishing; their runs resume when it starts again",
                                metadata: ["attempts": "\(running.count)"])
                    for lease in running { cancelled.withLock { _ = $0.insert(lease) } }
                    running.removeAll()
                    break
                }
                if now >= deadline && !running.isEmpty {
                    logger.warning("drain timeout: handing back unfinished attempts", metadata: ["attempts": "\(running.count)"])
                    for lease in running {
                        cancelled.withLock { _ = $0.insert(lease) }
                        send(.handBack(lease: lease))
                    }
                    running.removeAll()
                }
                if running.isEmpty {
                    // Leave once every result is acknowledged: the coordinator acknowledges a result
                    // after copying its artifact from here. A silent coordinator is given until the
                    // deadline (and at least 5 s).
                    if leavingSince == nil { leavingSince = now }
                    if unacked.isEmpty || (now >= deadline && now - leavingSince! > 5) {
                        send(.leaving)
                        logger.info("drained; leaving")
                        break
                    }
                }
            }
            let waiting = try socket.wait(timeoutMs: 50, wakeup: wakeup)
            if waiting, let frames = try socket.receive() {
                lastHeard = Clocks.steady
                coordinatorStopped = false
                if coordinatorLost {
                    coordinatorLost = false
                    if refused == nil { logger.info(heardFromCoordinator ? "coordinator is back" : "the coordinator answered") }
                    announce()
                }
                heardFromCoordinator = true
                guard let data = frames.first, let envelope = Envelope.decode(data) else {
                    logger.warning("dropped an undecodable message", metadata: ["bytes": "\(frames.first?.count ?? 0)",
                                                                            "reason": "\(frames.first.flatMap(Envelope.refusal).map(String.init(describing:)) ?? "empty")"])
                    continue
                }
                // Accepted once the coordinator answers with anything but a refusal or a request
                // to say hello again (what it answers a refused worker's heartbeats with).
                switch envelope.message {
                case .rejected, .reannounce: break
                default:
                    refused = nil
                    // Said once: an operator scaling workers sees each one get in (before, a
                    // worker's log said nothing between "worker started" and its first problem).
                    if !joined {
                        joined = true
                        logger.info("joined the coordinator; taking work", metadata: ["endpoint": "\(config.endpoint)", "worker.slots": "\(config.slots)"])
                    }
                }
                switch envelope.message {
                case .assign(let a) where draining:
                    send(.handBack(lease: a.lease))
                case .assign(let a) where a.checkOnly == true:
                    accept(a)
                case .assign(let a):
                    if running.count >= config.slots {
                        report(failed(a, "worker has no free slot"))
                        continue
                    }
                    running.insert(a.lease)
                    acceptedAt[a.lease] = Clocks.wall
                    accept(a)
                case .cancel(let lease):
                    guard running.contains(lease) || preparing[lease] != nil else { break }   // (ended here already, or never here)
                    cancelled.withLock { _ = $0.insert(lease) }
                    if let p = preparing.removeValue(forKey: lease) { report(failed(p.assignment, MediaError.cancelledMessage)) }
                case .ack(let lease):
                    unacked[lease] = nil
                    trimWanted = true
                case .reannounce:
                    announce()
                case .pull(let sha, let offset, let length):
                    transfers?.serve(sha256: sha, offset: offset, length: length, to: Data())
                case .chunk(let c):
                    transfers?.received(c, payload: frames.count > 1 ? frames[1] : nil)
                case .shutdown:
                    logger.info("coordinator asked this worker to shut down")
                    stop()
                case .notice(let message):
                    logger.warning("the coordinator: \(message)")
                case .stopping(let keep):
                    // Its renders here go on, their results kept for the coordinator that comes
                    // next (its first answer is met with a hello, as after a lost coordinator).
                    // One whose inputs were still coming from it cannot start: given up, and
                    // handed back to the next coordinator, which gives it out again at once.
                    coordinatorStopped = true
                    coordinatorLost = true
                    let notStarted = preparing.count
                    givenUp.formUnion(preparing.keys)
                    for lease in preparing.keys { dropPreparing(lease) }
                    let going = running.intersection(keep)
                    logger.info("the coordinator is stopping; renders under way here go on and are delivered to the coordinator that comes next",
                                metadata: ["renders": "\(going.count)", "not_started": "\(notStarted)"])
                case .rejected(let why):
                    let now = Clocks.steady
                    if refused?.why != why || now - refused!.loggedAt > 600 {
                        logger.error("the coordinator refused this worker: \(why)")
                        refused = (why, now)
                    }
                default:
                    break
                }
            }
            if let transfers {
                transfers.tick()
                for (sha, outcome) in transfers.takeCompleted() {
                    for (lease, var p) in preparing where p.waiting.contains(sha) {
                        switch outcome {
                        case .success:
                            p.waiting.remove(sha)
                            if p.waiting.isEmpty { preparing[lease] = nil; launch(Self.rewrite(p.assignment, p.paths)) } else { preparing[lease] = p }
                        case .failure(let e):
                            if e.noSpace { makeRoom(after: e.description) }
                            preparing[lease] = nil
                            report(failed(p.assignment, "could not get input \(sha.prefix(12))… from the coordinator: \(e)"))
                        }
                    }
                }
            }
            for t in taken.withLock({ let t = $0; $0 = []; return t }) {
                let sha = t.ref.sha256
                taking.remove(sha)
                takesWanted.withLock { _ = $0.remove(sha) }
                // (No one waits for it any more: cancelled, handed back, or it came another way.)
                let waiters = preparing.filter { $0.value.waiting.contains(sha) }
                if waiters.isEmpty { continue }
                if let got = t.got, got.sha256 == sha {
                    // In the store where each waiter's paths already point (`store.local`).
                    logger.info("input taken from a shared folder", metadata: ["path": "\(t.ref.path)", "sha256": "\(sha.prefix(12))"])
                    for (lease, var p) in waiters {
                        p.waiting.remove(sha)
                        if p.waiting.isEmpty { preparing[lease] = nil; launch(Self.rewrite(p.assignment, p.paths)) } else { preparing[lease] = p }
                    }
                } else {
                    // Changed since it was submitted, unreadable here, or its take stopped before
                    // this assignment came for it: pulled from the coordinator.
                    logger.info("input in a shared folder could not be taken (changed since it was submitted, unreadable, or its take was stopped); pulling it from the coordinator",
                                metadata: ["path": "\(t.ref.path)", "sha256": "\(sha.prefix(12))"])
                    transfers?.fetch(t.ref, from: Data())
                }
            }
            if !taking.isEmpty {
                let waited = Set(preparing.values.flatMap(\.waiting))
                takesWanted.withLock { $0.formIntersection(waited) }
            }
            for r in finished.withLock({ let r = $0; $0 = []; return r }) {
                if let e = r.error, e.noSpace { makeRoom(after: e.description) }
                report(r)
            }
            let now = Clocks.steady
            if let limit = config.storeLimit, let store = config.store, !store.isStateFolder, storeCheck.due(now) {
                // Other files may fill the disk whether work comes or not: its free space is looked at each time.
                let short = limit.shortfall(store.root)
                if trimWanted || short > 0 {
                    trimWanted = false
                    let t = trimStore(store, limit, freeing: short)
                    trimmed(t, limit, short: short, now: now)
                    // Still over: try again as files age out of the grace period or are let go.
                    if t.bytes > limit.maxBytes { trimWanted = true }
                }
            }
            if now - lastHeard > config.coordinatorTimeout {
                // Lost the coordinator: keep working, announce again; libzmq reconnects underneath with backoff.
                if coordinatorLost || refused != nil {
                    // Silent for a whole timeout more: dial again. A connection made while the
                    // coordinator was stalled (its host suspended) can stay open and unread for
                    // ever (`Socket.redial`): the worker never heard from it again.
                    if coordinatorLost && refused == nil && heardFromCoordinator { try? socket.redial(config.endpoint) }
                } else if heardFromCoordinator {
                    logger.warning("lost the coordinator; reconnecting")
                } else if let finding = Reachability.probe(config.endpoint)?.unlessListening {
                    logger.warning("no answer from the coordinator at \(config.endpoint) for \(Int(config.coordinatorTimeout)) s; still trying. \(finding)")
                } else {
                    logger.warning("""
                        no answer from the coordinator at \(config.endpoint) for \(Int(config.coordinatorTimeout)) s; still trying. \
                        Is 'coord serve' running there\(config.curve == nil
                            ? ", and without CURVE keys (with them, give this worker --curve-secret-key and --coordinator-key)?"
                            : ", and does it know this worker's key (its .pub in the coordinator's --allow-workers folder), and is --coordinator-key the coordinator's .pub?")\
                        \(config.idGiven ? " Or is another worker connected there with the id '\(config.id)'? (ZeroMQ ignores a second connection under one id: give each worker its own --id.)" : "")
                        """)
                }
                coordinatorLost = true
                send(.hello(hello()))
                lastHeard = now
                lastSent = now
            } else if now - lastSent >= config.heartbeatInterval {
                if let parent = config.parentPID, getppid() != parent {
                    logger.error("the parent process is gone; stopping")
                    stop()
                }
                send(.heartbeat(running: Array(running), clock: Clocks.wall))
                lastSent = now
            }
            // Idle for a while: the memory renders left in the heap (kept while working, for
            // speed: `tl_malloc_keep`) goes back to the system, once per idle spell.
            if running.isEmpty && preparing.isEmpty {
                if idleSince == nil { idleSince = now }
                if !trimmedWhileIdle, now - idleSince! >= config.idleTrimAfter { _ = tl_malloc_trim(); trimmedWhileIdle = true }
            } else {
                idleSince = nil; trimmedWhileIdle = false
            }
        }
        // Let the last messages (results, leaving) go out before the socket closes — when a
        // coordinator is there to take them: with none (never heard from, or gone silent), the
        // wait only held the exit for the whole second.
        socket.close(lingerMs: heardFromCoordinator && !coordinatorLost ? 1000 : 0)
    }

    /// The assignment with every input path replaced by where this worker holds that input: the
    /// task's typed file fields only (see `Assignment.mappingFiles`), never text that happens to
    /// read like one of those paths.
    static func rewrite(_ a: Assignment, _ paths: [String: String]) -> Assignment {
        paths.allSatisfy({ $0.key == $0.value }) ? a : a.mappingFiles { paths[$0] ?? $0 }
    }

    private func start(_ a: Assignment) {
        let runner = self.runner
        let lease = a.lease
        let thread = Thread { [self] in
            let result = runner.run(a, isCancelled: { [self] in
                self.cancelled.withLock { $0.contains(lease) } || self.stopped.withLock { $0 }
            })
            finished.withLock { $0.append(result) }
            wakeup.signal()
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
