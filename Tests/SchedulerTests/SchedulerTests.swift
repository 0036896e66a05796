import Testing
import PropertyBased
@testable import Scheduler

/// Property tests of the pure scheduling pieces the coordinator uses. They run in milliseconds:
/// no processes, sockets, files or clock.
@Suite struct RunGraphProperties {
    /// Any DAG, completed in any order the graph allows (duplicate completions included): every
    /// node becomes ready exactly once, never before all its dependencies are complete, and the
    /// run always ends.
    @Test func everyNodeBecomesReadyOnceAfterItsDependenciesAndTheRunEnds() async {
        let dag = Gen.int(in: 0...1000).array(of: 0...4).array(of: 1...40)
        let choices = Gen.int(in: 0...1000).array(of: 80)
        await propertyCheck(count: 300, input: dag, choices) { raw, picks in
            // Node i depends on earlier nodes only (a DAG).
            let deps: [[Int]] = raw.enumerated().map { i, r in i == 0 ? [] : r.map { $0 % i } }
            var graph = RunGraph(dependencies: deps)
            var ready = graph.initiallyReady
            var becameReady = Set(ready)
            var completed = Set<Int>()
            var step = 0
            #expect(ready.allSatisfy { deps[$0].isEmpty })
            while !ready.isEmpty {
                let k = picks[step % picks.count] % ready.count
                step += 1
                let node = ready.remove(at: k)
                #expect(Set(deps[node]).isSubset(of: completed), "node \(node) ran before its dependencies")
                completed.insert(node)
                let newly = graph.complete(node)
                #expect(graph.complete(node).isEmpty, "a duplicate completion changed something")
                for n in newly {
                    #expect(!becameReady.contains(n), "node \(n) became ready twice")
                    #expect(Set(deps[n]).isSubset(of: completed))
                    becameReady.insert(n)
                }
                ready += newly
            }
            #expect(graph.isComplete, "the run did not end: \(graph.completedCount) of \(deps.count)")
            #expect(becameReady.count == deps.count)
        }
    }

    /// What the coordinator asks before freeing a slot whose result is still coming: whether its
    /// success would make another node ready (only the last of a node's dependencies does).
    @Test func onlyTheLastDependencyCompletingMakesANodeReady() {
        var g = RunGraph(dependencies: [[], [], [0, 1], [2]])
        #expect(!g.completingReadies(0) && !g.completingReadies(1) && !g.completingReadies(3), "node 2 waits for both; nothing waits for 3")
        g.complete(0)
        #expect(g.completingReadies(1) && !g.completingReadies(0), "a node completed makes nothing ready again")
        g.complete(1)
        #expect(g.completingReadies(2) && !g.completingReadies(3) && !g.completingReadies(9))
    }

    @Test func aCycleNeverBecomesReady() {
        var g = RunGraph(dependencies: [[], [2], [1], [0]])
        #expect(g.initiallyReady == [0])
        #expect(g.complete(0) == [3])
        #expect(!g.isReady(1) && !g.isReady(2))
        #expect(g.complete(7).isEmpty)
    }
}

@Suite struct ReadyQueueProperties {
    @Test func shortWorkGoesFirstThenTheCostliestRender() {
        var q = ReadyQueue<Int>()
        let costs: [Double] = [3, 9, 1, 9, 0, 5, 2, 7, 7, 4]
        for (i, c) in costs.enumerated() { q.push(i, short: false, cost: c) }
        q.push(100, short: true, cost: 0)
        q.push(101, short: true, cost: 50)
        #expect(q.first == 100)
        var order: [Int] = []
        while let i = q.pop() { order.append(i) }
        // Short work in arrival order, then renders by falling cost, equal costs by index.
        #expect(order == [100, 101, 1, 3, 7, 8, 5, 9, 0, 6, 2, 4])
        #expect(q.isEmpty && q.first == nil)
    }

    /// Against a plain reference model: short work first in arrival order; then renders costliest
    /// first, equal costs in arrival order; nothing lost or duplicated.
    @Test func popsInPolicyOrder() async {
        let ops = Gen.int(in: 0...30).array(of: 1...200)
        await propertyCheck(count: 300, input: ops) { ops in
            var q = ReadyQueue<Int>()
            var short: [Int] = []
            var long: [(cost: Int, seq: Int)] = []
            var seq = 0
            for op in ops {
                if op < 8, !(short.isEmpty && long.isEmpty) {
                    // pop
                    let expected: Int
                    if !short.isEmpty { expected = short.removeFirst() } else {
                        let best = long.indices.max { a, b in long[a].cost != long[b].cost ? long[a].cost < long[b].cost : long[a].seq > long[b].seq }!
                        expected = long.remove(at: best).seq
                    }
                    #expect(q.first == expected)
                    #expect(q.pop() == expected)
                } else if op < 16 {
                    q.push(seq, short: true); short.append(seq); seq += 1
                } else {
                    let cost = op % 5
                    q.push(seq, short: false, cost: Double(cost)); long.append((cost, seq)); seq += 1
                }
                #expect(q.count == short.count + long.count)
            }
        }
    }
}

@Suite struct PolicyTests {
    @Test func priorityThenFairShareThenAge() {
        typealias C = FairShare.Candidate
        #expect(FairShare.pick([]) == nil)
        #expect(FairShare.pick([C(run: 1, priority: 0, running: 0), C(run: 2, priority: 5, running: 9)]) == 2)
        #expect(FairShare.pick([C(run: 1, priority: 0, running: 3), C(run: 2, priority: 0, running: 1)]) == 2)
        #expect(FairShare.pick([C(run: 7, priority: 0, running: 1), C(run: 3, priority: 0, running: 1)]) == 3)
        // Owners first: the one holding fewer slots, whatever the priority of the other's runs.
        #expect(FairShare.pick([C(run: 1, priority: 9, running: 0, owner: "a", ownerRunning: 5),
                                C(run: 2, priority: 0, running: 2, owner: "b", ownerRunning: 2)]) == 2)
        // Equal owners: the one waiting longest (its oldest run); within it, priority.
        #expect(FairShare.pick([C(run: 4, priority: 0, running: 0, owner: "a", ownerRunning: 1),
                                C(run: 2, priority: 0, running: 0, owner: "b", ownerRunning: 1),
                                C(run: 6, priority: 3, running: 1, owner: "b", ownerRunning: 1)]) == 6)
        // Short joining work before renders, whatever the runs hold and their age; not before
        // priority, nor across owners.
        #expect(FairShare.pick([C(run: 1, priority: 0, running: 0), C(run: 2, priority: 0, running: 3, short: true)]) == 2)
        #expect(FairShare.pick([C(run: 1, priority: 0, running: 0, short: true), C(run: 2, priority: 0, running: 0, short: true)]) == 1)
        #expect(FairShare.pick([C(run: 1, priority: 1, running: 0), C(run: 2, priority: 0, running: 0, short: true)]) == 1)
        #expect(FairShare.pick([C(run: 1, priority: 0, running: 0, owner: "a", ownerRunning: 0),
                                C(run: 2, priority: 0, running: 1, owner: "b", ownerRunning: 1, short: true)]) == 1)
    }

    /// Equal runs get equal slots: handing out slots one at a time to the picked run spreads them evenly.
    @Test func fairShareSpreadsSlotsEvenly() async {
        await propertyCheck(count: 200, input: Gen.int(in: 1...12), Gen.int(in: 1...64)) { runs, slots in
            var running = Array(repeating: 0, count: runs)
            for _ in 0..<slots {
                let pick = FairShare.pick(running.enumerated().map { FairShare.Candidate(run: Int64($0), priority: 0, running: $1) })!
                running[Int(pick)] += 1
            }
            #expect(running.max()! - running.min()! <= 1, "\(running)")
        }
    }

    /// With a test clock: backoff doubles per attempt from the base, capped at 2^6, scaled by jitter;
    /// permanent errors and spent attempts end the run; lost workers make poison at the limit.
    @Test func retriesBackOffAndStop() {
        let now = 1_000.0
        #expect(RetryPolicy.decide(retryable: true, attempts: 1, maxAttempts: 3, now: now, base: 0.25, jitter: 1) == .retry(notBefore: 1_000.5))
        #expect(RetryPolicy.decide(retryable: true, attempts: 2, maxAttempts: 3, now: now, base: 0.25, jitter: 1.2) == .retry(notBefore: now + 1.2))
        #expect(RetryPolicy.decide(retryable: true, attempts: 3, maxAttempts: 3, now: now, base: 0.25, jitter: 1) == .fail)
        #expect(RetryPolicy.decide(retryable: false, attempts: 1, maxAttempts: 3, now: now, base: 0.25, jitter: 1) == .fail)
        #expect(RetryPolicy.delay(attempts: 20, base: 1, jitter: 1) == 64)
        #expect(!RetryPolicy.isPoison(lostWorkers: 2, limit: 3))
        #expect(RetryPolicy.isPoison(lostWorkers: 3, limit: 3))
    }
}
