import Testing
import PropertyBased
@testable import Scheduler

typealias Effect = FarmScheduler.Effect
typealias Event = FarmScheduler.Event

/// A farm around the scheduler, modelled independently of it: what each worker really holds,
/// which leases can no longer count, which stages succeeded. Every effect the scheduler returns is
/// checked against that model.
struct Farm {
    var scheduler: FarmScheduler
    var now = 1_000.0
    var toPrepare: [StageRef] = []
    /// Leases a worker runs and will answer: lease → (stage, worker, check only, released).
    var outstanding: [String: (stage: StageRef, worker: String, checkOnly: Bool)] = [:]
    /// Slot-holding leases per worker, by the model.
    var held: [String: Set<String>] = [:]
    var slots: [String: Int] = [:]
    var draining: Set<String> = []
    /// Workers sidelined, until when.
    var sidelined: [String: Double] = [:]
    /// Leases whose result is in but whose artifact is still being copied: the coordinator answers
    /// them (the copy succeeds or fails) even when their worker is gone.
    var released: Set<String> = []
    /// Leases that can no longer succeed: answered, lost, handed back, cancelled.
    var dead: Set<String> = []
    /// Leases whose result was delivered (to resend as duplicates).
    var answered: [String] = []
    var deps: [Int64: [[Int]]] = [:]
    var succeeded: [Int64: Set<Int>] = [:]
    var preDone: [Int64: Set<Int>] = [:]
    var ended: [Int64: FarmScheduler.Outcome] = [:]
    /// Stages told failed for good (`.stageFailed`), by run, in order.
    var failed: [Int64: [StageRef]] = [:]
    /// The output key each slot attempt makes (as the scheduler had it when it dispatched).
    var leaseKeys: [String: String] = [:]
    /// Stages' time limits as prepared.
    var timeLimits: [StageRef: Double] = [:]
    var nextRun: Int64 = 1
    var nextWorker = 1
    var problems: [String] = []

    init(poison: Int = 3) {
        var c = FarmScheduler.Configuration(epoch: "t")
        c.poisonAfterLostWorkers = poison
        scheduler = FarmScheduler(c)
    }

    @discardableResult
    mutating func send(_ e: Event) -> [Effect] {
        let fx = scheduler.handle(e, now: now)
        for f in fx { take(f) }
        return fx
    }

    mutating func take(_ f: Effect) {
        switch f {
        case .prepare(let s):
            toPrepare.append(s)
        case .dispatch(let lease, let s, let w, _, let checkOnly, _):
            if slots[w] == nil { problems.append("dispatched \(lease) to unknown or lost worker \(w)") }
            if draining.contains(w) { problems.append("dispatched \(lease) to draining worker \(w)") }
            if let until = sidelined[w], until > now { problems.append("dispatched \(lease) to \(w), sidelined until \(until) (now \(now))") }
            if ended[s.run] != nil { problems.append("dispatched a stage of ended run \(s.run)") }
            let done = succeeded[s.run, default: []].union(preDone[s.run, default: []])
            if let d = deps[s.run], !Set(d[s.node]).isSubset(of: done) { problems.append("\(s) dispatched before its dependencies") }
            if done.contains(s.node) { problems.append("\(s) dispatched after it succeeded") }
            if !checkOnly, let key = scheduler.runs[s.run]?.nodes[s.node].key {
                if let other = outstanding.first(where: { !$0.value.checkOnly && !dead.contains($0.key) && leaseKeys[$0.key] == key }) {
                    problems.append("\(s) dispatched with key \(key) while \(other.value.stage) makes it under \(other.key)")
                }
                if let orphan = scheduler.orphanMaking[key] { problems.append("\(s) dispatched with key \(key) while orphan \(orphan) makes it") }
                leaseKeys[lease] = key
            }
            outstanding[lease] = (s, w, checkOnly)
            if !checkOnly {
                held[w, default: []].insert(lease)
                if held[w]!.count > slots[w] ?? 0 { problems.append("worker \(w) holds \(held[w]!.count) attempts, has \(slots[w] ?? 0) slots") }
                // Each attempt in a slot of its own: the lineage and the dashboard's chart show it there.
                let slot = scheduler.slot(of: lease, on: w)
                if slot == nil || !(0..<(slots[w] ?? 0)).contains(slot!) { problems.append("\(lease) on \(w) holds slot \(String(describing: slot)) of \(slots[w] ?? 0)") }
                if let shared = held[w]!.first(where: { $0 != lease && scheduler.slot(of: $0, on: w) == slot }) {
                    problems.append("\(lease) and \(shared) both hold slot \(slot!) of \(w)")
                }
            }
        case .superseded(let lease, let s, let w, _):
            if outstanding[lease]?.worker != w || outstanding[lease]?.stage != s { problems.append("\(lease) superseded on \(w), which does not run it") }
            if dead.contains(lease) { problems.append("\(lease) superseded after it ended") }
            dead.insert(lease)
        case .cancel(let lease, _, _), .lost(let lease, _, _, _), .handedBack(let lease, _, _):
            dead.insert(lease)
        case .timedOut(let lease, let s, let w, let seconds, _, _):
            // Stopped on its worker, which still holds it until it answers.
            if outstanding[lease]?.worker != w || outstanding[lease]?.stage != s { problems.append("\(lease) timed out on \(w), which does not run it") }
            if dead.contains(lease) { problems.append("\(lease) timed out after it ended") }
            if let limit = timeLimits[s], seconds < limit - 1e-9 { problems.append("\(lease) timed out after \(seconds) s, its limit \(limit) s") }
            dead.insert(lease)
        case .retry, .stale:
            break
        case .sidelined(let w, let until, _):
            if until <= now { problems.append("\(w) sidelined until \(until), not after now (\(now))") }
            if !slots.keys.contains(where: { $0 != w && !draining.contains($0) && (sidelined[$0] ?? 0) <= now }) {
                problems.append("\(w), the last worker taking work, was sidelined")
            }
            sidelined[w] = until
        case .stageFailed(let o):
            guard case .failed(let s, _, let also) = o.asFailed, also.isEmpty else { problems.append("stageFailed names no one stage: \(o)"); break }
            if ended[s.run] != nil { problems.append("\(s) failed after its run ended") }
            if succeeded[s.run, default: []].contains(s.node) { problems.append("\(s) failed after it succeeded") }
            if failed[s.run, default: []].contains(s) { problems.append("\(s) failed twice") }
            failed[s.run, default: []].append(s)
        case .runEnded(let id, let o):
            if ended[id] != nil { problems.append("run \(id) ended twice") }
            ended[id] = o
            switch o {
            case .failed(let first, _, let also), .poison(let first, _, let also):
                if Set(also + [first]).count != also.count + 1 { problems.append("run \(id) names a failed stage twice: \(first), \(also)") }
                if [first] + also != failed[id, default: []] { problems.append("run \(id) ended naming \([first] + also), told \(failed[id, default: []])") }
            case .succeeded, .cancelled: break
            }
        }
    }

    mutating func submit(_ raw: [[Int]], priority: Int = 0, done: [Int] = [], owner: String? = nil) -> Int64 {
        let id = nextRun; nextRun += 1
        // Node i depends on earlier nodes only (a DAG).
        let d: [[Int]] = raw.enumerated().map { i, r in i == 0 ? [] : r.map { $0 % i } }
        deps[id] = d
        let pre = done.filter { d.indices.contains($0) && d[$0].isEmpty }
        preDone[id] = Set(pre)
        send(.submit(.init(id: id, priority: priority, dependencies: d, short: d.indices.map { $0 % 3 == 0 }, maxAttempts: 3, done: pre, owner: owner)))
        return id
    }

    /// The worker gives the lease's slot back while its artifact is still being copied; its
    /// result follows (`answer`).
    @discardableResult
    mutating func release(_ lease: String) -> [Effect] {
        guard let o = outstanding[lease] else { return [] }
        held[o.worker]?.remove(lease)
        released.insert(lease)
        return send(.released(lease: lease, worker: o.worker))
    }

    /// A resumed run of one stage (its output key "same"), and `worker` back with `slots`, still
    /// running `lease`, the last coordinator's render of that key: the run, and what the hello did.
    mutating func resumedWithOrphan(_ lease: String, worker: String = "w9", slots n: Int) -> (run: Int64, joined: [Effect]) {
        let id = submit([[]])
        prepareAll(key: { _ in "same" })
        slots[worker] = n
        send(.orphaned(lease: lease, key: "same", worker: worker))
        return (id, send(.workerJoined(worker, slots: n, running: [lease])))
    }

    mutating func join(slots n: Int) -> String {
        let w = "w\(nextWorker)"; nextWorker += 1
        slots[w] = n
        send(.workerJoined(w, slots: n, running: []))
        return w
    }

    mutating func prepareAll(check: (StageRef) -> Bool = { _ in false }, key: (StageRef) -> String? = { _ in nil },
                             timeLimit: (StageRef) -> Double? = { _ in nil }) {
        let list = toPrepare; toPrepare = []
        for s in list {
            let limit = timeLimit(s)
            timeLimits[s] = limit
            send(.prepared(s, cacheCheck: check(s), cost: Double(s.node % 4), key: key(s), timeLimit: limit))
        }
    }

    /// The worker answers `lease`: frees its slot in the model, then sends `event`.
    mutating func answer(_ lease: String, _ make: (String, String) -> Event) -> [Effect] {
        guard let o = outstanding.removeValue(forKey: lease) else { return [] }
        held[o.worker]?.remove(lease)
        let wasDead = dead.contains(lease)
        let event = make(lease, o.worker)
        let fx = send(event)
        answered.append(lease)
        let stale = fx.contains(.stale(lease: lease, worker: o.worker))
        if case .succeeded = event {
            if wasDead && !stale { problems.append("stale lease \(lease) succeeded") }
            if !stale {
                if succeeded[o.stage.run, default: []].contains(o.stage.node) { problems.append("\(o.stage) succeeded twice") }
                succeeded[o.stage.run, default: []].insert(o.stage.node)
            }
        }
        dead.insert(lease)
        // The success that ended a run is counted above, after the scheduler answered.
        for case .runEnded(let id, .succeeded) in fx where succeeded[id, default: []].union(preDone[id, default: []]).count != deps[id]?.count {
            problems.append("run \(id) succeeded with stages missing")
        }
        return fx
    }

    /// A failed run finished all it could: every stage that did not wait, directly or through
    /// others, for a stage that failed for good succeeded (a cancelled run owes nothing).
    func failedRunsFinishedWhatTheyCould() -> [String] {
        ended.sorted { $0.key < $1.key }.compactMap { id, outcome in
            let failed: [StageRef]
            switch outcome {
            case .failed(let first, _, let also), .poison(let first, _, let also): failed = [first] + also
            case .succeeded, .cancelled: return nil
            }
            let d = deps[id]!
            var blocked = Set(failed.map(\.node))
            for n in d.indices where d[n].contains(where: blocked.contains) { blocked.insert(n) }  // dependencies come first
            let done = succeeded[id, default: []].union(preDone[id, default: []])
            let missing = d.indices.filter { !blocked.contains($0) && !done.contains($0) }
            return missing.isEmpty ? nil : "run \(id) failed on \(failed) and left \(missing) unfinished, which did not wait for it"
        }
    }

    mutating func lose(_ w: String) {
        for (l, o) in outstanding where o.worker == w && !released.contains(l) { outstanding[l] = nil; dead.insert(l) }
        held[w] = nil; slots[w] = nil; draining.remove(w); sidelined[w] = nil
        send(.workerLost(w))
    }

    mutating func leave(_ w: String) {
        for (l, o) in outstanding where o.worker == w && !released.contains(l) { outstanding[l] = nil }
        held[w] = nil; slots[w] = nil; draining.remove(w); sidelined[w] = nil
        send(.workerLeft(w))
    }
}

@Suite struct FarmSchedulerProperties {
    /// Random farms: runs submitted and cancelled, workers joining, draining, leaving, dying and
    /// reconnecting; results that succeed, fail, miss the cache, come back handed back or for
    /// verification, never reach their worker (out of reach for a moment), arrive twice, arrive from the wrong worker, or arrive after their lease ended;
    /// stages that share output keys; attempts that outlive their stage's time limit; renders of
    /// an earlier coordinator let finish (orphans), waited for, confirmed, ended or forgotten.
    /// Throughout: never two successes for one stage, never more
    /// attempts on a worker than its slots, nothing dispatched before its dependencies or to a
    /// draining worker, never two live attempts making one key (nor one beside an orphan making
    /// it), and a stale lease never succeeds.
    /// Then, with one healthy worker, every run ends, and a failed one only after finishing every
    /// stage that did not wait for a failed one.
    @Test func randomFarmsKeepTheirPromisesAndEveryRunEnds() async {
        let gen = Gen.int(in: 0...9_999).array(of: 20...300)
        await propertyCheck(count: 400, input: gen) { choices in
            var farm = Farm()
            var c = 0
            func next(_ n: Int) -> Int { defer { c += 1 }; return n <= 0 ? 0 : choices[c % choices.count] % n }
            var orphans: [String] = []
            for _ in 0..<choices.count {
                let workers = farm.slots.keys.sorted()
                let live = farm.outstanding.keys.sorted()
                switch next(18) {
                case 0, 1:
                    let n = 1 + next(8)
                    _ = farm.submit((0..<n).map { _ in (0..<next(3)).map { _ in next(100) } }, priority: next(4) == 0 ? 1 : 0,
                                    done: next(3) == 0 ? [0] : [])
                case 2:
                    _ = farm.join(slots: 1 + next(3))
                case 3:
                    if let w = workers.randomPick(next) { farm.lose(w) }
                case 4:
                    if let w = workers.randomPick(next) { farm.draining.insert(w); farm.send(.workerDraining(w)) }
                case 5:
                    if let w = workers.randomPick(next) { farm.leave(w) }
                case 6, 7, 8:
                    guard let l = live.randomPick(next) else { break }
                    let check = farm.outstanding[l]!.checkOnly
                    let unreachableUntil = next(2) == 0 ? farm.now + Double(next(3)) : nil
                    switch next(11) {
                    case 0...4: _ = farm.answer(l) { .succeeded(lease: $0, worker: $1) }
                    case 5: _ = farm.answer(l) { check ? .cacheMiss(lease: $0, worker: $1) : .failed(lease: $0, worker: $1, retryable: true) }
                    case 6: _ = farm.answer(l) { .failed(lease: $0, worker: $1, retryable: next(4) != 0) }
                    case 7: _ = farm.answer(l) { .handedBack(lease: $0, worker: $1) }
                    case 8: _ = farm.answer(l) { .again(lease: $0, worker: $1) }
                    case 9:
                        // It never reached the worker (whose connection may be gone for a moment).
                        _ = farm.answer(l) { lease, _ in .notDelivered(lease: lease, unreachableUntil: unreachableUntil) }
                    default:
                        // The slot frees first (the artifact is still being copied); the result follows.
                        farm.release(l)
                    }
                case 9:
                    // A duplicate of a result already delivered.
                    if let l = farm.answered.randomPick(next) {
                        let holder = farm.scheduler.holder(of: l) ?? "w1"
                        let fx = farm.send(.succeeded(lease: l, worker: holder))
                        if !fx.contains(.stale(lease: l, worker: holder)) { farm.problems.append("a duplicate result for \(l) counted") }
                    }
                case 10:
                    // A result from a worker the lease was not given to.
                    if let l = live.randomPick(next), let w = workers.randomPick(next), w != farm.outstanding[l]!.worker {
                        let fx = farm.send(.succeeded(lease: l, worker: w))
                        if !fx.contains(.stale(lease: l, worker: w)) { farm.problems.append("\(w) succeeded \(l), given to another worker") }
                    }
                case 11:
                    if next(2) == 0 {
                        if let id = farm.deps.keys.sorted().randomPick(next) { farm.send(.cancel(run: id)) }
                    } else if let l = live.filter({ !farm.dead.contains($0) }).randomPick(next) {
                        // The coordinator fails the stage itself (its output could not be recorded):
                        // its attempt has reported, so its lease can no longer count. (Only a current
                        // attempt's result gets that far: not one stopped past its time limit, whose
                        // stage may have another attempt out by now.)
                        farm.dead.insert(l)
                        farm.send(.fail(farm.outstanding[l]!.stage))
                    }
                case 12:
                    // A worker reconnects and says hello with what it runs.
                    if let w = workers.randomPick(next) {
                        let running = farm.outstanding.filter { $0.value.worker == w && !farm.released.contains($0.key) }.map(\.key)
                        farm.send(.workerJoined(w, slots: farm.slots[w]!, running: running))
                    }
                case 13:
                    // Some stages share output keys, across runs too (two projects with the same clip);
                    // some have time limits (attempts that outlive them are stopped and retried).
                    farm.prepareAll(check: { _ in next(3) == 0 }, key: { _ in next(2) == 0 ? "k\(next(3))" : nil },
                                    timeLimit: { _ in next(3) == 0 ? Double(1 + next(5)) : nil })
                case 14:
                    // A render of an earlier coordinator: waited for, or told of by its worker
                    // (a hello listing it: it holds a slot there), or said again to confirm it.
                    let lease = orphans.randomPick(next).flatMap { next(2) == 0 ? $0 : nil } ?? "old-\(c)"
                    let worker = workers.randomPick(next) ?? "w-gone"
                    farm.send(.orphaned(lease: lease, key: "k\(next(3))", worker: worker, until: next(2) == 0 ? nil : farm.now + Double(next(5))))
                    if farm.scheduler.isOrphan(lease) && !orphans.contains(lease) { orphans.append(lease) }
                    if next(2) == 0, let slots = farm.slots[worker] {
                        let running = farm.outstanding.filter { $0.value.worker == worker && !farm.released.contains($0.key) }.map(\.key)
                        farm.send(.workerJoined(worker, slots: slots, running: running + [lease]))
                    }
                case 15:
                    // Its result came (and its output was stored, or not).
                    if let lease = orphans.randomPick(next) {
                        farm.send(.orphanEnded(lease: lease, made: next(2) == 0))
                        orphans.removeAll { $0 == lease }
                    }
                default:
                    farm.now += Double(next(300)) / 100
                    farm.send(.tick)
                }
                if !farm.problems.isEmpty { break }
            }
            #expect(farm.problems.isEmpty, "\(farm.problems.prefix(3))")

            // Liveness: one healthy worker, every attempt answered, every orphan's result in, time
            // moving on: every run ends.
            for lease in orphans { farm.send(.orphanEnded(lease: lease, made: false)) }
            _ = farm.join(slots: 2)
            var rounds = 0
            while farm.ended.count < farm.deps.count && rounds < 2_000 {
                rounds += 1
                farm.prepareAll(key: { "k\($0.node % 2)" })
                for l in farm.outstanding.keys.sorted() { _ = farm.answer(l) { .succeeded(lease: $0, worker: $1) } }
                farm.now += 100
                farm.send(.tick)
            }
            #expect(farm.problems.isEmpty, "\(farm.problems.prefix(3))")
            #expect(farm.ended.count == farm.deps.count, "runs that never ended: \(farm.deps.keys.filter { farm.ended[$0] == nil }.sorted())")
            let unfinished = farm.failedRunsFinishedWhatTheyCould()
            #expect(unfinished.isEmpty, "\(unfinished.prefix(3))")
            #expect(!farm.scheduler.hasRuns && farm.scheduler.liveLeaseCount == 0)
        }
    }
}

extension FarmScheduler.Outcome {
    /// A poison outcome as a failure of the same stage, to compare the stages either names.
    var asFailed: FarmScheduler.Outcome {
        if case .poison(let s, _, let also) = self { return .failed(s, attempts: 0, also: also) }
        return self
    }
}

extension Array {
    func randomPick(_ next: (Int) -> Int) -> Element? { isEmpty ? nil : self[next(count)] }
}

/// Every policy, with a test clock.
@Suite struct FarmSchedulerPolicies {
    func dispatches(_ fx: [Effect]) -> [(lease: String, stage: StageRef, worker: String, attempt: Int, check: Bool)] {
        fx.compactMap { if case .dispatch(let l, let s, let w, let a, let c, _) = $0 { return (l, s, w, a, c) }; return nil }
    }

    /// What the coordinator asks before it sends a submission's stages one by one as it prepares
    /// them: the free slots of the workers taking work, and the prepared stages waiting for one.
    @Test func freeSlotsAndTheStagesWaitingForThem() {
        var farm = Farm()
        let two = farm.join(slots: 2), one = farm.join(slots: 1)
        #expect(farm.scheduler.freeSlots(now: farm.now) == 3 && farm.scheduler.waitingForSlots == 0)
        _ = farm.submit([[], [], [], [], []])
        #expect(farm.scheduler.waitingForSlots == 0, "ready, not prepared yet")
        farm.prepareAll()
        #expect(farm.scheduler.waitingForSlots == 5)
        let sent = dispatches(farm.send(.tick))
        #expect(sent.count == 3)
        #expect(farm.scheduler.freeSlots(now: farm.now) == 0 && farm.scheduler.waitingForSlots == 2)
        // A draining worker's slot is not free for new work once its attempt is done.
        _ = farm.send(.workerDraining(one))
        _ = farm.answer(sent.first { $0.worker == one }!.lease) { .succeeded(lease: $0, worker: $1) }
        #expect(farm.scheduler.freeSlots(now: farm.now) == 0)
        _ = farm.answer(sent.first { $0.worker == two }!.lease) { .succeeded(lease: $0, worker: $1) }
        #expect(farm.scheduler.freeSlots(now: farm.now) == 1 && farm.scheduler.waitingForSlots == 2)
        #expect(dispatches(farm.send(.tick)).map(\.worker) == [two])
        #expect(farm.scheduler.freeSlots(now: farm.now) == 0 && farm.scheduler.waitingForSlots == 1)
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    @Test func dependenciesOrderTheWorkAndTheRunSucceeds() {
        var farm = Farm()
        let w = farm.join(slots: 4)
        let run = farm.submit([[], [0], [0], [1, 2]])
        farm.prepareAll()
        var d = dispatches(farm.send(.tick))
        #expect(d.map(\.stage.node) == [0] && d[0].worker == w && d[0].attempt == 1)
        _ = farm.answer(d[0].lease) { .succeeded(lease: $0, worker: $1) }
        farm.prepareAll()
        d = dispatches(farm.send(.tick))
        #expect(Set(d.map(\.stage.node)) == [1, 2])
        for x in d { _ = farm.answer(x.lease) { .succeeded(lease: $0, worker: $1) } }
        farm.prepareAll()
        d = dispatches(farm.send(.tick))
        let fx = farm.answer(d[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(fx.last == .runEnded(run, .succeeded))
        #expect(farm.problems.isEmpty)
    }

    /// An assignment that could not reach its worker (its connection gone for a moment) goes
    /// back to the queue uncounted; the worker gets nothing until the moment is over, and what it
    /// already runs stays its own (the coordinator once lost the worker, and that with it).
    @Test func aWorkerOutOfReachGetsNoWorkForAMomentAndKeepsItsOwn() {
        var farm = Farm()
        let w = farm.join(slots: 2)
        _ = farm.submit([[], [], []])
        farm.prepareAll()
        let first = dispatches(farm.send(.tick))
        #expect(first.count == 2 && first.allSatisfy { $0.worker == w })
        let until = farm.now + 1
        _ = farm.answer(first[1].lease) { lease, _ in .notDelivered(lease: lease, unreachableUntil: until) }
        #expect(dispatches(farm.send(.tick)).isEmpty, "sent again at once to the worker out of reach")
        farm.now += 0.5
        #expect(dispatches(farm.send(.tick)).isEmpty)
        farm.now += 0.6
        let again = dispatches(farm.send(.tick))
        #expect(again.map(\.stage) == [first[1].stage] && again.first?.attempt == 1, "not counted as a try: \(again)")
        let fx = farm.answer(first[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(!fx.contains(.stale(lease: first[0].lease, worker: w)), "the worker's own attempt went on")
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// Two projects in one batch with the same clip and edits: their segments share a key. The
    /// second waits for the first's attempt, with a slot free, and is then prepared again (a cache
    /// check, since the artifact is recorded) instead of rendering the same segment twice.
    @Test func aStageWhoseKeyIsBeingMadeWaitsForThatAttempt() throws {
        var farm = Farm()
        _ = farm.join(slots: 2)
        let a = farm.submit([[]]), b = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        let first = dispatches(farm.send(.tick))
        #expect(first.map(\.stage) == [StageRef(run: a, node: 0)], "only one attempt makes the key: \(first)")
        #expect(dispatches(farm.send(.tick)).isEmpty && farm.toPrepare.isEmpty, "the other waits, prepared, while the slot is free")
        #expect(farm.scheduler.hasQueuedWork)
        _ = farm.answer(first[0].lease) { .succeeded(lease: $0, worker: $1) }
        // Prepared again with the success (`wake`), once: the tick's unparking leaves it be,
        // also once the coordinator has answered that it is to be checked.
        #expect(farm.toPrepare == [StageRef(run: b, node: 0)])
        _ = farm.send(.tick)
        try expectReusedAfterACheck(&farm, run: b)
        farm = Farm()
        _ = farm.join(slots: 2)
        let c = farm.submit([[]]), e = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        let made = dispatches(farm.send(.tick))
        #expect(made.map(\.stage) == [StageRef(run: c, node: 0)])
        #expect(dispatches(farm.send(.tick)).isEmpty && farm.scheduler.parked["same"] != nil, "parked behind the attempt")
        _ = farm.answer(made[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(farm.toPrepare == [StageRef(run: e, node: 0)])
        farm.prepareAll(check: { _ in true }, key: { _ in "same" })
        let check = dispatches(farm.send(.tick))
        #expect(farm.toPrepare.isEmpty, "not prepared twice: \(farm.toPrepare)")
        #expect(check.map(\.stage) == [StageRef(run: e, node: 0)] && check.map(\.check) == [true])
        #expect(farm.answer(check[0].lease) { .succeeded(lease: $0, worker: $1) }.last == .runEnded(e, .succeeded))
        #expect(farm.problems.isEmpty)
    }

    /// A render an earlier coordinator gave out (it was killed; this one resumed the run) still
    /// runs on a worker that joins: it is let finish, holding its slot, and the resumed stage with
    /// its key waits for it; once its output is stored the stage is prepared again (a cache
    /// check) instead of rendered a second time. Had the orphan failed, or its worker gone, the
    /// stage renders.
    @Test func aRenderOfTheLastCoordinatorIsLetFinish() throws {
        var farm = Farm()
        // The worker's hello lists the old lease; it is not cancelled, and it holds the slot.
        let (a, joined) = farm.resumedWithOrphan("old-7", slots: 2)
        #expect(!joined.contains(.cancel(lease: "old-7", nil, worker: "w9")), "\(joined)")
        #expect(farm.scheduler.isOrphan("old-7") && farm.scheduler.slot(of: "old-7", on: "w9") == 0)
        #expect(dispatches(farm.send(.tick)).isEmpty && farm.scheduler.parked["same"] == [StageRef(run: a, node: 0)],
                "the resumed stage waits, a slot free")
        // Its result comes (the slot is free), then its output is stored.
        _ = farm.send(.released(lease: "old-7", worker: "w9"))
        _ = farm.send(.orphanEnded(lease: "old-7", made: true))
        #expect(!farm.scheduler.isOrphan("old-7") && farm.scheduler.running(on: "w9").isEmpty)
        try expectReusedAfterACheck(&farm, run: a)

        // It failed there: the stage renders.
        farm = Farm()
        let b = farm.resumedWithOrphan("old-8", slots: 2).run
        #expect(dispatches(farm.send(.tick)).isEmpty)
        _ = farm.send(.released(lease: "old-8", worker: "w9"))
        _ = farm.send(.orphanEnded(lease: "old-8", made: false))
        _ = farm.send(.tick)
        #expect(farm.toPrepare == [StageRef(run: b, node: 0)])
        farm.prepareAll(key: { _ in "same" })
        #expect(dispatches(farm.send(.tick)).map(\.check) == [false], "rendered")

        // Its worker went: the stage renders elsewhere.
        farm = Farm()
        let c = farm.resumedWithOrphan("old-9", slots: 1).run
        let w2 = farm.join(slots: 1)
        #expect(dispatches(farm.send(.tick)).isEmpty, "w2 is free, but the orphan makes the key")
        farm.lose("w9")
        #expect(!farm.scheduler.isOrphan("old-9"))
        _ = farm.send(.tick)
        #expect(farm.toPrepare == [StageRef(run: c, node: 0)])
        farm.prepareAll(key: { _ in "same" })
        let sent = dispatches(farm.send(.tick))
        #expect(sent.map(\.worker) == [w2] && sent.map(\.check) == [false])
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// At resume an orphan is waited for a while before its worker is back: another worker that
    /// came back first does not render its stage; with no word of it by then, the stage renders.
    @Test func anOrphanIsWaitedForUntilItsWorkerIsBack() {
        var farm = Farm()
        let a = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        farm.send(.orphaned(lease: "old-1", key: "same", worker: "w9", until: farm.now + 10))
        _ = farm.join(slots: 1)   // another worker, back first
        #expect(dispatches(farm.send(.tick)).isEmpty && farm.scheduler.parked["same"] == [StageRef(run: a, node: 0)], "waits for w9")
        // w9 back, running it: waited for as long as it runs.
        farm.slots["w9"] = 1
        farm.send(.orphaned(lease: "old-1", key: "same", worker: "w9"))
        farm.send(.workerJoined("w9", slots: 1, running: ["old-1"]))
        farm.now += 60
        #expect(dispatches(farm.send(.tick)).isEmpty && farm.scheduler.isOrphan("old-1"))

        // No word by the deadline: rendered on the worker that is there.
        farm = Farm()
        let b = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        farm.send(.orphaned(lease: "old-2", key: "same", worker: "w9", until: farm.now + 10))
        let w2 = farm.join(slots: 1)
        #expect(dispatches(farm.send(.tick)).isEmpty)
        farm.now += 9
        #expect(dispatches(farm.send(.tick)).isEmpty && farm.toPrepare.isEmpty)
        farm.now += 1
        _ = farm.send(.tick)
        #expect(!farm.scheduler.isOrphan("old-2") && farm.toPrepare == [StageRef(run: b, node: 0)])
        farm.prepareAll(key: { _ in "same" })
        #expect(dispatches(farm.send(.tick)).map(\.worker) == [w2])
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// A worker lost mid-render comes back still rendering, its stage already given out again to
    /// another worker: both go on. The orphan (it started first) ends first: the other render is
    /// stopped (`superseded`, its slot taken until its worker answers, which is stale then) and
    /// the stage is prepared again, a cache check of the orphan's output. Before, the orphan was
    /// cancelled as it came back and the stage rendered again from nothing (a link cut for 8 s
    /// under a 12 s 1080p render: the movie 20.4 s after submit instead of 12.5).
    @Test func aLostWorkersRenderBackRacesTheOneGivenOutAgain() throws {
        var farm = Farm()
        let w = farm.join(slots: 1)
        let a = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        let sent = dispatches(farm.send(.tick))
        #expect(sent.count == 1 && sent[0].worker == w)
        farm.slots["w9"] = 1
        #expect(farm.send(.orphaned(lease: "old-1", key: "same", worker: "w9")).isEmpty && farm.scheduler.isOrphan("old-1"))
        farm.send(.workerJoined("w9", slots: 1, running: ["old-1"]))
        #expect(farm.scheduler.slot(of: "old-1", on: "w9") == 0, "the orphan holds its worker's slot")
        _ = farm.send(.released(lease: "old-1", worker: "w9"))
        let ended = farm.send(.orphanEnded(lease: "old-1", made: true))
        #expect(ended == [.superseded(lease: sent[0].lease, StageRef(run: a, node: 0), worker: w, by: "w9"), .prepare(StageRef(run: a, node: 0))],
                "\(ended)")
        #expect(farm.scheduler.slot(of: sent[0].lease, on: w) != nil, "taken until w answers")
        #expect(dispatches(farm.send(.tick)).isEmpty, "no slot free on w yet: only a check could go, and the stage is not prepared")
        // w's render answers late: stale, and its slot is free.
        #expect(farm.answer(sent[0].lease) { .succeeded(lease: $0, worker: $1) }.contains(.stale(lease: sent[0].lease, worker: w)))
        try expectReusedAfterACheck(&farm, run: a)

        // The render given out again ends first: the orphan is stopped on its worker.
        farm = Farm()
        let w2 = farm.join(slots: 1)
        let b = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        let again = dispatches(farm.send(.tick))
        farm.slots["w9"] = 1
        farm.send(.orphaned(lease: "old-2", key: "same", worker: "w9"))
        farm.send(.workerJoined("w9", slots: 1, running: ["old-2"]))
        let done = farm.answer(again[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(done.contains(.cancel(lease: "old-2", nil, worker: "w9")) && done.last == .runEnded(b, .succeeded), "\(done)")
        #expect(!farm.scheduler.isOrphan("old-2") && farm.scheduler.slot(of: "old-2", on: "w9") != nil, "taken until w9 answers")
        _ = farm.send(.released(lease: "old-2", worker: "w9"))
        #expect(farm.send(.orphanEnded(lease: "old-2", made: true)).isEmpty, "over already")
        _ = w2

        // Another orphan making the key is still refused, and so is a lease of this coordinator's own.
        farm = Farm()
        let w3 = farm.join(slots: 1)
        _ = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        let mine = dispatches(farm.send(.tick))
        farm.send(.orphaned(lease: "old-3", key: "same", worker: "w9"))
        #expect(farm.send(.orphaned(lease: "old-4", key: "same", worker: "w8")) == [.cancel(lease: "old-4", nil, worker: "w8")])
        #expect(farm.send(.orphaned(lease: mine[0].lease, key: "other", worker: w3)).isEmpty && !farm.scheduler.isOrphan(mine[0].lease))
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// The waiting stage of `run` (its only one) is prepared again; the artifact is recorded now,
    /// so it goes out as a cache check, whose hit ends the run.
    func expectReusedAfterACheck(_ farm: inout Farm, run: Int64) throws {
        #expect(farm.toPrepare == [StageRef(run: run, node: 0)], "prepared again once the key was made")
        farm.prepareAll(check: { _ in true }, key: { _ in "same" })
        let check = try #require(dispatches(farm.send(.tick)).first)
        #expect(check.check, "a cache check of the artifact just made")
        #expect(farm.answer(check.lease) { .succeeded(lease: $0, worker: $1) }.last == .runEnded(run, .succeeded))
        #expect(farm.problems.isEmpty)
    }

    /// A stage already waiting for a slot when another attempt made its key is prepared again
    /// when its turn comes (its artifact exists now), instead of rendering the same output: in a
    /// batch of two identical projects, 6 of 12 segments were still rendered twice this way.
    @Test func aStagePreparedBeforeItsKeyWasMadeIsPreparedAgain() throws {
        var farm = Farm()
        let w = farm.join(slots: 1)
        let a = farm.submit([[]]), b = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        let first = dispatches(farm.send(.tick))
        #expect(first.map(\.stage) == [StageRef(run: a, node: 0)] && first[0].worker == w)
        // b's stage waits in its lane (no slot), not parked: the one slot is taken.
        #expect(farm.scheduler.parked.isEmpty)
        _ = farm.answer(first[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(dispatches(farm.send(.tick)).isEmpty, "not rendered again")
        try expectReusedAfterACheck(&farm, run: b)
    }

    /// A stage queued for a slot under a key another project's attempt has just made is prepared
    /// again at once and checked beside the slots, while the slot goes on rendering a third
    /// project. Before, it waited for its own turn at a slot (the render behind it) to find out it
    /// was a cache hit, and its project's movie waited with it.
    @Test func aStageQueuedUnderAKeyJustMadeIsCheckedWithoutWaitingForASlot() throws {
        var farm = Farm()
        _ = farm.join(slots: 1)
        let a = farm.submit([[]]), c = farm.submit([[]]), b = farm.submit([[]])
        farm.prepareAll(key: { $0.run == c ? "long" : "same" })
        let first = dispatches(farm.send(.tick))
        #expect(first.map(\.stage) == [StageRef(run: a, node: 0)])
        _ = farm.answer(first[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(farm.toPrepare == [StageRef(run: b, node: 0)], "prepared again when the key was made: \(farm.toPrepare)")
        farm.prepareAll(check: { $0.run == b }, key: { $0.run == c ? "long" : "same" })
        let next = dispatches(farm.send(.tick))
        #expect(Set(next.map(\.stage)) == [StageRef(run: c, node: 0), StageRef(run: b, node: 0)], "\(next)")
        let check = try #require(next.first { $0.stage.run == b })
        #expect(check.check)
        #expect(farm.answer(check.lease) { .succeeded(lease: $0, worker: $1) }.last == .runEnded(b, .succeeded), "b ends while c renders")
        #expect(farm.ended[c] == nil)
        #expect(farm.scheduler.queuedByKey.isEmpty, "a stage sent leaves its key's queue: \(farm.scheduler.queuedByKey)")
        #expect(farm.problems.isEmpty)
    }

    /// Stages queued under a key whose run ends (cancelled here) leave no entry behind.
    @Test func queuedKeysOfEndedRunsAreForgotten() {
        var farm = Farm()
        _ = farm.join(slots: 1)
        let a = farm.submit([[]]), b = farm.submit([[], [0]])
        farm.prepareAll(key: { "k\($0.run)-\($0.node)" })
        _ = dispatches(farm.send(.tick))
        #expect(!farm.scheduler.queuedByKey.isEmpty)
        _ = farm.send(.cancel(run: a))
        _ = farm.send(.cancel(run: b))
        #expect(farm.scheduler.queuedByKey.isEmpty, "\(farm.scheduler.queuedByKey)")
    }

    /// The attempt it waited for failed for good (its run ended): the waiting stage renders itself.
    @Test func aStageWaitingOnAFailedAttemptRendersItself() {
        var farm = Farm()
        _ = farm.join(slots: 2)
        let a = farm.submit([[]]), b = farm.submit([[]])
        farm.prepareAll(key: { _ in "same" })
        let first = dispatches(farm.send(.tick))
        #expect(first.map(\.stage.run) == [a])
        let fx = farm.answer(first[0].lease) { .failed(lease: $0, worker: $1, retryable: false) }
        #expect(fx.last == .runEnded(a, .failed(StageRef(run: a, node: 0), attempts: 1)))
        _ = farm.send(.tick)
        farm.prepareAll(key: { _ in "same" })
        let own = dispatches(farm.send(.tick))
        #expect(own.map(\.stage) == [StageRef(run: b, node: 0)] && own.map(\.check) == [false])
        #expect(farm.problems.isEmpty)
    }

    /// `making` stays the size of the attempts in flight on a long-lived coordinator.
    @Test func keysOfEndedAttemptsAreForgotten() {
        var farm = Farm()
        _ = farm.join(slots: 1)
        for i in 0..<500 {
            _ = farm.submit([[]])
            farm.prepareAll(key: { _ in "k\(i)" })
            for d in dispatches(farm.send(.tick)) { _ = farm.answer(d.lease) { .succeeded(lease: $0, worker: $1) } }
        }
        #expect(farm.ended.count == 500)
        #expect(farm.scheduler.making.count <= 65, "\(farm.scheduler.making.count) keys kept")
    }

    @Test func aRetryWaitsOutItsBackoffThenFailsAfterMaxAttempts() {
        var farm = Farm()
        _ = farm.join(slots: 1)
        let run = farm.submit([[]])
        farm.prepareAll()
        var d = dispatches(farm.send(.tick))
        let fx = farm.answer(d[0].lease) { .failed(lease: $0, worker: $1, retryable: true) }
        guard case .retry(_, let notBefore, 1) = fx.first else { Issue.record("no retry: \(fx)"); return }
        // base 0.25 × 2^1 × jitter 0.8…1.2
        #expect(notBefore - farm.now >= 0.4 && notBefore - farm.now <= 0.6)
        farm.now = notBefore - 0.01
        #expect(dispatches(farm.send(.tick)).isEmpty, "dispatched during the backoff")
        farm.now = notBefore
        d = dispatches(farm.send(.tick))
        #expect(d.first?.attempt == 2)
        _ = farm.answer(d[0].lease) { .failed(lease: $0, worker: $1, retryable: true) }
        farm.now += 10
        d = dispatches(farm.send(.tick))
        #expect(d.first?.attempt == 3)
        let last = farm.answer(d[0].lease) { .failed(lease: $0, worker: $1, retryable: true) }
        #expect(last.last == .runEnded(run, .failed(StageRef(run: run, node: 0), attempts: 3)))
    }

    /// A stage that fails for good stops only what waits for it: the run's other attempts go on
    /// (a render under way is not thrown away; its segment is cached for the next submit), what
    /// they make ready runs, and the run ends failed once nothing else of it can run.
    @Test func aFailureStopsOnlyWhatWaitsForIt() {
        var farm = Farm()
        _ = farm.join(slots: 2)
        // Fetches 0 and 1, a render after each, a concat after both renders.
        let run = farm.submit([[], [], [0], [1], [2, 3]])
        farm.prepareAll()
        let fetches = dispatches(farm.send(.tick)).sorted { $0.stage < $1.stage }
        #expect(fetches.map(\.stage.node) == [0, 1])
        var fx = farm.answer(fetches[0].lease) { .failed(lease: $0, worker: $1, retryable: false) }
        #expect(!fx.contains { if case .cancel = $0 { true } else { false } }, "cancelled: \(fx)")
        #expect(farm.ended[run] == nil)
        fx = farm.answer(fetches[1].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(fx == [.prepare(StageRef(run: run, node: 3))], "render 2 waits for the failed fetch; render 3 does not")
        farm.prepareAll()
        let render = dispatches(farm.send(.tick))
        #expect(render.map(\.stage.node) == [3])
        fx = farm.answer(render[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(fx == [.runEnded(run, .failed(StageRef(run: run, node: 0), attempts: 1))], "the concat waits for render 2: the run is over")
        #expect(farm.failedRunsFinishedWhatTheyCould().isEmpty && farm.problems.isEmpty, "\(farm.problems)")
        #expect(!farm.scheduler.hasRuns && farm.scheduler.liveLeaseCount == 0)
    }

    /// A project with several broken files names them all in one failure instead of one per
    /// submit: later failures, retries spent included, join the first.
    @Test func aFailedRunNamesEveryStageThatFailed() {
        var farm = Farm()
        _ = farm.join(slots: 4)
        // Three fetches; a render after each.
        let run = farm.submit([[], [], [], [0], [1], [2]])
        farm.prepareAll()
        let fetches = dispatches(farm.send(.tick)).sorted { $0.stage < $1.stage }
        #expect(fetches.map(\.stage.node) == [0, 1, 2])
        _ = farm.answer(fetches[0].lease) { .succeeded(lease: $0, worker: $1) }
        farm.prepareAll()
        let render = dispatches(farm.send(.tick))
        #expect(render.map(\.stage.node) == [3])

        // Fetch 1 fails for good: render 3 goes on, so does fetch 2.
        var fx = farm.answer(fetches[1].lease) { .failed(lease: $0, worker: $1, retryable: false) }
        #expect(fx == [.stageFailed(.failed(fetches[1].stage, attempts: 1))], "\(fx)")
        // Render 3 fails first retryably: it is retried, then fails for good and joins the failure.
        fx = farm.answer(render[0].lease) { .failed(lease: $0, worker: $1, retryable: true) }
        guard case .retry(render[0].stage, _, 1) = fx.first else { Issue.record("no retry: \(fx)"); return }
        farm.now += 10
        let again = dispatches(farm.send(.tick))
        #expect(again.map(\.stage.node) == [3] && again.first?.attempt == 2)
        fx = farm.answer(again[0].lease) { .failed(lease: $0, worker: $1, retryable: false) }
        #expect(farm.ended[run] == nil, "fetch 2 is still out")
        fx = farm.answer(fetches[2].lease) { .failed(lease: $0, worker: $1, retryable: false) }
        #expect(fx.last == .runEnded(run, .failed(StageRef(run: run, node: 1), attempts: 1,
                                                  also: [StageRef(run: run, node: 3), StageRef(run: run, node: 2)])))
        #expect(farm.problems.isEmpty, "\(farm.problems)")
        #expect(!farm.scheduler.hasRuns && farm.scheduler.liveLeaseCount == 0)
    }

    /// A run cancelled while it finishes after a failure stops at once.
    @Test func aFailingRunCanStillBeCancelled() {
        var farm = Farm()
        _ = farm.join(slots: 2)
        let run = farm.submit([[], []])
        farm.prepareAll()
        let d = dispatches(farm.send(.tick))
        _ = farm.answer(d[0].lease) { .failed(lease: $0, worker: $1, retryable: false) }
        let fx = farm.send(.cancel(run: run))
        #expect(fx == [.cancel(lease: d[1].lease, d[1].stage, worker: d[1].worker), .runEnded(run, .cancelled)])
        // The cancelled attempt still holds its slot until its worker answers; then it is stale.
        #expect(farm.scheduler.running(on: d[1].worker).count == 1)
        let late = farm.answer(d[1].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(late == [.stale(lease: d[1].lease, worker: d[1].worker)])
        #expect(farm.scheduler.running(on: d[1].worker).count == 0)
    }

    @Test func attemptsThatLoseThreeWorkersArePoison() {
        var farm = Farm()
        let run = farm.submit([[]])
        farm.prepareAll()
        for k in 1...3 {
            let w = farm.join(slots: 1)
            farm.now += 100
            let d = dispatches(farm.send(.tick))
            #expect(d.first?.worker == w)
            let before = farm.ended[run]
            farm.lose(w)
            #expect(before == nil)
            if k == 3 { #expect(farm.ended[run] == .poison(StageRef(run: run, node: 0), lostWorkers: 3)) }
        }
        #expect(farm.problems.isEmpty)
    }

    /// A hand-back goes straight back and is not counted. One of a lease this scheduler never gave
    /// out (what the last coordinator gave a worker, not begun when that one stopped) is nothing:
    /// before, it came out as a stale result, and lineage said a result was discarded.
    @Test func aHandBackGoesStraightBackAndIsNotCounted() {
        var farm = Farm()
        let a = farm.join(slots: 1)
        _ = farm.submit([[]])
        farm.prepareAll()
        var d = dispatches(farm.send(.tick))
        #expect(farm.send(.handedBack(lease: "earlier-7", worker: a)).isEmpty)
        farm.draining.insert(a)
        farm.send(.workerDraining(a))
        let fx = farm.answer(d[0].lease) { .handedBack(lease: $0, worker: $1) }
        #expect(fx == [.handedBack(lease: d[0].lease, d[0].stage, worker: a)])
        #expect(dispatches(farm.send(.tick)).isEmpty, "a draining worker got work")
        let b = farm.join(slots: 1)
        d = dispatches(farm.send(.tick))
        #expect(d.first?.worker == b && d.first?.attempt == 1)
    }

    @Test func cacheChecksTakeNoSlotAndAMissRendersForReal() {
        var farm = Farm()
        let w = farm.join(slots: 1)
        let run = farm.submit([[], [], []])
        farm.prepareAll { $0.node != 2 }
        let d = dispatches(farm.send(.tick))
        // Two checks beside the slot, and node 2 in the one slot.
        #expect(d.filter(\.check).map(\.stage.node) == [0, 1] && d.filter { !$0.check }.map(\.stage.node) == [2])
        #expect(d.allSatisfy { $0.worker == w } && farm.scheduler.running(on: w).count == 1)
        _ = farm.answer(d[0].lease) { .succeeded(lease: $0, worker: $1) }      // a hit
        _ = farm.answer(d[1].lease) { .cacheMiss(lease: $0, worker: $1) }      // a miss
        _ = farm.answer(d[2].lease) { .succeeded(lease: $0, worker: $1) }
        let again = dispatches(farm.send(.tick))
        #expect(again.count == 1 && again[0].stage.node == 1 && !again[0].check && again[0].attempt == 1)
        let fx = farm.answer(again[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(fx.last == .runEnded(run, .succeeded))
    }

    /// An attempt that outlives its stage's time limit (a stage hung on its worker) is stopped
    /// there and counted as a failed try: retried on another worker after the backoff, while the
    /// hung worker's slot stays taken until it answers; the run fails once the attempts are spent.
    /// A cache check that hangs is rendered for real. Stages without a limit run as long as they take.
    @Test func anAttemptPastItsTimeLimitIsStoppedAndTriedElsewhere() {
        var farm = Farm()
        let a = farm.join(slots: 1)
        let run = farm.submit([[], []])
        farm.prepareAll(timeLimit: { $0.node == 0 ? 10 : nil })
        var d = dispatches(farm.send(.tick))
        let hung = d.first { $0.stage.node == 0 }!
        #expect(d.count == 1 && hung.worker == a)
        let b = farm.join(slots: 1)
        d = dispatches(farm.send(.tick))
        let long = d.first!
        #expect(d.count == 1 && long.stage.node == 1 && long.worker == b)
        farm.now += 9.99
        #expect(!farm.send(.tick).contains { if case .timedOut = $0 { true } else { false } }, "timed out before its limit")
        farm.now += 0.01
        let fx = farm.send(.tick)
        #expect(fx.first == .timedOut(lease: hung.lease, StageRef(run: run, node: 0), worker: a, seconds: 10, attempt: 1, checkOnly: false), "\(fx)")
        guard case .retry(_, let notBefore, 1)? = fx.dropFirst().first else { Issue.record("no retry: \(fx)"); return }
        // a still runs it as far as anyone knows: its one slot stays taken.
        #expect(farm.scheduler.running(on: a) == [hung.lease])
        farm.now = notBefore + 1_000
        #expect(dispatches(farm.send(.tick)).isEmpty, "dispatched while both slots are taken")
        // The stage without a limit has run 1,010 s and goes on; when b is free, the retry goes there.
        _ = farm.answer(long.lease) { .succeeded(lease: $0, worker: $1) }
        d = dispatches(farm.send(.tick))
        #expect(d.map(\.worker) == [b] && d.first?.attempt == 2 && d.first?.stage.node == 0, "\(d)")
        // The hung attempt finally answers: stale, and a's slot is free again.
        let late = farm.answer(hung.lease) { .succeeded(lease: $0, worker: $1) }
        #expect(late.contains(.stale(lease: hung.lease, worker: a)))
        #expect(farm.scheduler.running(on: a).isEmpty)
        // The retry hangs too, and the third attempt (back on a, b's slot being taken): spent.
        farm.now += 10
        guard case .retry(_, let again, 2)? = farm.send(.tick).dropFirst().first else { Issue.record("no second retry"); return }
        farm.now = again
        d = dispatches(farm.send(.tick))
        #expect(d.map(\.worker) == [a] && d.first?.attempt == 3, "\(d)")
        farm.now += 10
        let last = farm.send(.tick)
        #expect(last.last == .runEnded(run, .failed(StageRef(run: run, node: 0), attempts: 3)), "\(last)")
        #expect(farm.problems.isEmpty, "\(farm.problems)")

        // A cache check that hangs: the stage renders for real, in a slot.
        var other = Farm()
        let w = other.join(slots: 1)
        let checked = other.submit([[]])
        other.prepareAll(check: { _ in true }, timeLimit: { _ in 5 })
        let check = dispatches(other.send(.tick))
        #expect(check.count == 1 && check[0].check)
        other.now += 5
        let fx2 = other.send(.tick)
        #expect(fx2.first == .timedOut(lease: check[0].lease, StageRef(run: checked, node: 0), worker: w, seconds: 5, attempt: 0, checkOnly: true))
        let real = dispatches(fx2)
        #expect(real.count == 1 && !real[0].check && real[0].attempt == 1 && real[0].worker == w, "\(fx2)")
        #expect(other.answer(real[0].lease) { .succeeded(lease: $0, worker: $1) }.last == .runEnded(checked, .succeeded))
        #expect(other.problems.isEmpty, "\(other.problems)")
    }

    @Test func priorityThenFairShareBetweenRuns() {
        var farm = Farm()
        let low = farm.submit(Array(repeating: [], count: 4))
        let other = farm.submit(Array(repeating: [], count: 4))
        let high = farm.submit(Array(repeating: [], count: 2), priority: 5)
        farm.prepareAll()
        _ = farm.join(slots: 6)
        let d = dispatches(farm.send(.tick))
        let perRun = Dictionary(grouping: d, by: \.stage.run).mapValues(\.count)
        // The high-priority run's two first, then the other four slots shared evenly.
        #expect(d.prefix(2).allSatisfy { $0.stage.run == high })
        #expect(perRun[low] == 2 && perRun[other] == 2 && perRun[high] == 2)
    }

    /// A batch on fewer slots than projects: every project's fetches (which tell its length, so
    /// the batch's ETA) and a finished project's concat go before the next render. Before, a free
    /// slot went to the oldest run with work, so the youngest project's fetches waited for every
    /// older project's renders, and the batch's progress line said "ETA --:--" for 12 of its 15 s.
    @Test func shortWorkOfEveryRunGoesBeforeTheNextRender() {
        var farm = Farm()
        // Node 0 (short, a fetch) before two renders (1, 2), then node 3 (short, the concat).
        let runs = (0..<3).map { _ in farm.submit([[], [0], [0], [1, 2]]) }
        farm.prepareAll()
        _ = farm.join(slots: 1)
        var order: [StageRef] = []
        var fx = farm.send(.tick)
        while let d = dispatches(fx).first {
            order.append(d.stage)
            fx = farm.answer(d.lease) { .succeeded(lease: $0, worker: $1) }
            farm.prepareAll()
            fx += farm.send(.tick)
        }
        let (a, b, c) = (runs[0], runs[1], runs[2])
        #expect(order.map { "\($0.run)/\($0.node)" } == [
            "\(a)/0", "\(b)/0", "\(c)/0",            // every fetch first
            "\(a)/2", "\(a)/1", "\(a)/3",            // then the oldest run's renders (costliest first), its concat at once
            "\(b)/2", "\(b)/1", "\(b)/3", "\(c)/2", "\(c)/1", "\(c)/3",
        ], "\(order)")
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// A worker reports a render done and gives its slot back while the segment still comes up
    /// from its store (the success waits for that). That run holds no slot then: the freed slot
    /// goes to it, not to an older run that holds as many as it did (before, the uploading render
    /// still counted, and the tie went to the older run).
    @Test func aRenderWhoseSlotIsGivenBackNoLongerCountsInItsRunsShare() {
        var farm = Farm()
        let older = farm.submit(Array(repeating: [], count: 4))
        let newer = farm.submit(Array(repeating: [], count: 4))
        farm.prepareAll()
        let w = farm.join(slots: 2)
        let d = dispatches(farm.send(.tick))
        #expect(Set(d.map(\.stage.run)) == [older, newer], "\(d)")
        let uploading = d.first { $0.stage.run == newer }!
        #expect(farm.outstanding[uploading.lease]?.worker == w)
        farm.release(uploading.lease)
        let next = dispatches(farm.send(.tick))
        #expect(next.map(\.stage.run) == [newer], "the newer run holds no slot now, the older one: \(next)")
        // Its success then takes nothing off the share twice: each run has one render out, so a
        // new worker's slot goes to the older run (ties go to the oldest).
        _ = farm.answer(uploading.lease) { .succeeded(lease: $0, worker: $1) }
        _ = farm.join(slots: 1)
        #expect(dispatches(farm.send(.tick)).map(\.stage.run) == [older])
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// A farm for many people: Alice's batch of ten projects and Bob's one share the slots
    /// equally between Alice and Bob (before, equally between the eleven runs: Bob got one slot
    /// in eleven). Priority orders an owner's own runs and never takes another owner's share.
    @Test func ownersShareTheFarmWhateverTheirNumberOfRuns() {
        var farm = Farm()
        let alice = (0..<10).map { k in farm.submit(Array(repeating: [], count: 4), priority: k == 9 ? 5 : 0, owner: "alice") }
        let bob = farm.submit(Array(repeating: [], count: 8), owner: "bob")
        farm.prepareAll()
        _ = farm.join(slots: 8)
        let d = dispatches(farm.send(.tick))
        #expect(d.count == 8)
        #expect(d.filter { $0.stage.run == bob }.count == 4, "\(d.map(\.stage.run))")
        let alices = d.filter { $0.stage.run != bob }
        #expect(alices.count == 4 && alices.allSatisfy { $0.stage.run == alice[9] }, "her high-priority run takes her share: \(alices.map(\.stage.run))")
        // A freed slot of Bob's goes back to Bob while he has less than Alice.
        _ = farm.answer(d.first { $0.stage.run == bob }!.lease) { .succeeded(lease: $0, worker: $1) }
        #expect(dispatches(farm.send(.tick)).map(\.stage.run) == [bob])
    }

    /// The farm's own user (runs without a key, as ones resumed from before the farm had keys) is
    /// one owner among the others, whichever run the scheduler happens to look at first.
    @Test(arguments: 0..<8) func runsWithoutAKeyAreOneOwner(_ seed: Int) {
        var farm = Farm()
        let mine = (0..<(3 + seed % 3)).map { _ in farm.submit(Array(repeating: [], count: 4), owner: nil) }
        let bob = farm.submit(Array(repeating: [], count: 8), owner: "bob")
        farm.prepareAll()
        _ = farm.join(slots: 8)
        let d = dispatches(farm.send(.tick))
        #expect(d.filter { $0.stage.run == bob }.count == 4 && d.count == 8, "\(d.map(\.stage.run)) of \(mine)")
    }

    @Test func theFreeWorkerHoldingTheInputGetsTheStage() {
        var farm = Farm()
        let a = farm.join(slots: 1), b = farm.join(slots: 1)
        _ = farm.submit([[]])
        farm.prepareAll()
        let fx = farm.scheduler.handle(.tick, now: farm.now) { _, w in w == b ? 1_000 : 0 }
        #expect(dispatches(fx).first?.worker == b)
        _ = a
    }

    /// A retry goes to another worker than the one where the stage failed, even one busy at
    /// the time, though placement favours the first (it holds the inputs): one worker with a
    /// full disk no longer spends all of a stage's attempts. With no other worker, it tries there.
    @Test func aRetryGoesToAnotherWorkerThanTheOneWhereItFailed() {
        var farm = Farm()
        let a = farm.join(slots: 1), b = farm.join(slots: 1)
        // Placement favours a, as if it held the inputs (it pulled them for the failed attempt).
        func tick() -> [(lease: String, stage: StageRef, worker: String, attempt: Int, check: Bool)] {
            let fx = farm.scheduler.handle(.tick, now: farm.now) { _, w in w == a ? 1_000 : 0 }
            fx.forEach { farm.take($0) }
            return dispatches(fx)
        }
        _ = farm.submit([[], []])
        farm.prepareAll()
        var d = tick()
        #expect(Set(d.map(\.worker)) == [a, b])
        let onA = d.first { $0.worker == a }!, onB = d.first { $0.worker == b }!
        _ = farm.answer(onA.lease) { .failed(lease: $0, worker: $1, retryable: true) }
        farm.now += 10
        // b is still busy: the retry waits for it rather than go back to a.
        #expect(tick().isEmpty, "the retry went back to the worker where it failed")
        _ = farm.answer(onB.lease) { .succeeded(lease: $0, worker: $1) }
        d = tick()
        #expect(d.map(\.worker) == [b] && d.first?.attempt == 2, "\(d)")
        // It fails on b too, and b leaves: a is the only worker, so the last attempt goes there.
        _ = farm.answer(d[0].lease) { .failed(lease: $0, worker: $1, retryable: true) }
        farm.send(.workerLeft(b))
        farm.slots[b] = nil
        farm.now += 10
        d = tick()
        #expect(d.map(\.worker) == [a] && d.first?.attempt == 3, "\(d)")
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// A worker where stages fail that then succeed on another worker (a full disk: it fails fast,
    /// so it would take most of the stages) gets no work for 30 s once three did, then 60 s after
    /// one more; a success of its own starts the count afresh. Stages that fail everywhere (a dead
    /// URL) convict nobody, and the last worker taking work is never sidelined.
    @Test func aWorkerWhereStagesFailThatSucceedElsewhereIsSidelinedForAWhile() throws {
        var farm = Farm()
        let a = farm.join(slots: 1)
        _ = farm.submit(Array(repeating: [], count: 40))
        farm.prepareAll()
        var sidelined: [Effect] = []
        /// One round: every stage given out is answered, failing on the workers in `failing`.
        func round(failing: Set<String>) -> [String] {
            let fx = farm.send(.tick)
            let given = dispatches(fx)
            for d in given {
                let out = farm.answer(d.lease) { failing.contains($1) ? .failed(lease: $0, worker: $1, retryable: true) : .succeeded(lease: $0, worker: $1) }
                sidelined += out.filter { if case .sidelined = $0 { true } else { false } }
            }
            return given.map(\.worker)
        }
        // Alone, its failures convict it of nothing: no other worker made those stages.
        for _ in 0..<3 { #expect(round(failing: [a]) == [a]) }
        let b = farm.join(slots: 1)
        // Both fail everything (as with a dead URL): nobody is convicted.
        for _ in 0..<4 { farm.now += 10; _ = round(failing: [a, b]) }
        #expect(sidelined.isEmpty, "\(sidelined)")
        // Now b renders what fails on a: three such stages, and a is sidelined.
        var rounds = 0
        while sidelined.isEmpty && rounds < 30 { rounds += 1; farm.now += 10; _ = round(failing: [a]) }
        #expect(sidelined == [.sidelined(worker: a, until: farm.now + 30, failures: 3)], "\(sidelined)")
        farm.now += 29
        #expect(!round(failing: [a]).contains(a), "a got work while sidelined")
        // Back after 30 s; one more stage that fails there and succeeds on b: twice as long.
        sidelined = []
        rounds = 0
        while sidelined.isEmpty && rounds < 30 { rounds += 1; farm.now += 1; _ = round(failing: [a]) }
        // (Stages that failed on it before it was sidelined and succeeded on b meanwhile count too.)
        guard case .sidelined(a, farm.now + 60, let n)? = sidelined.first, sidelined.count == 1, n >= 4 else { Issue.record("\(sidelined)"); return }
        #expect(farm.scheduler.sidelined(a, now: farm.now) == 60)
        // A success of its own starts afresh: it is not sidelined at the next conviction.
        farm.now += 60
        sidelined = []
        #expect(round(failing: []).contains(a))
        for _ in 0..<2 { farm.now += 10; _ = round(failing: [a]) }
        #expect(sidelined.isEmpty, "\(sidelined)")
        #expect(farm.problems.isEmpty, "\(farm.problems)")
    }

    /// A failure that is not the worker's (the coordinator could not store what it made) neither
    /// sends the retry elsewhere nor counts towards sidelining it.
    @Test func aFailureThatIsNotTheWorkersIsNotHeldAgainstIt() {
        var farm = Farm()
        let a = farm.join(slots: 1), b = farm.join(slots: 2)
        _ = farm.submit(Array(repeating: [], count: 6))
        farm.prepareAll()
        for _ in 0..<4 {
            let fx = farm.scheduler.handle(.tick, now: farm.now) { _, w in w == a ? 1_000 : 0 }
            fx.forEach { farm.take($0) }
            guard let onA = dispatches(fx).first(where: { $0.worker == a }) else { Issue.record("nothing went to a, though it holds the inputs"); return }
            let out = farm.answer(onA.lease) { .failed(lease: $0, worker: $1, retryable: true, workersFault: false) }
            #expect(!out.contains { if case .sidelined = $0 { true } else { false } }, "\(out)")
            farm.now += 10
        }
        #expect(farm.scheduler.sidelined(a, now: farm.now) == nil)
        #expect(farm.problems.isEmpty, "\(farm.problems)")
        _ = b
    }

    @Test func verificationRunsTheStageAgainOnAnotherWorker() {
        var farm = Farm()
        let a = farm.join(slots: 1)
        _ = farm.submit([[]])
        farm.prepareAll()
        var d = dispatches(farm.send(.tick))
        #expect(d.first?.worker == a)
        _ = farm.answer(d[0].lease) { .again(lease: $0, worker: $1) }
        #expect(dispatches(farm.send(.tick)).isEmpty, "the same worker verified its own output")
        let b = farm.join(slots: 1)
        d = dispatches(farm.send(.tick))
        #expect(d.first?.worker == b && d.first?.attempt == 1)
    }

    @Test func aLeaseFromAnEarlierCoordinatorIsCancelledAtHello() {
        var farm = Farm()
        farm.slots["old"] = 1
        let fx = farm.send(.workerJoined("old", slots: 1, running: ["x-7"]))
        #expect(fx == [.cancel(lease: "x-7", nil, worker: "old")])
        // It holds the slot until the worker reports it.
        #expect(farm.scheduler.running(on: "old").count == 1)
        #expect(farm.send(.failed(lease: "x-7", worker: "old", retryable: true)) == [.stale(lease: "x-7", worker: "old")])
        #expect(farm.scheduler.running(on: "old").count == 0)
    }

    @Test func stopDispatchingGivesOutNothingButResultsStillCount() {
        var farm = Farm()
        _ = farm.join(slots: 1)
        let run = farm.submit([[], []])
        farm.prepareAll()
        let d = dispatches(farm.send(.tick))
        farm.send(.stopDispatching)
        let fx = farm.answer(d[0].lease) { .succeeded(lease: $0, worker: $1) }
        #expect(!fx.contains(.stale(lease: d[0].lease, worker: d[0].worker)))
        #expect(dispatches(farm.send(.tick)).isEmpty)
        #expect(farm.ended[run] == nil)
    }
}
