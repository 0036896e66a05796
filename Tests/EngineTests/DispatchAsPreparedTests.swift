import Foundation
import Testing
import TestSupport
@testable import Farm

/// A run's fetches all become ready at its submit. With a free slot for each, each goes out as
/// soon as it is prepared (before, the first waited for every other's stage key and cache
/// look-up); with fewer free slots than stages they all wait to be prepared, so that the scheduler
/// still chooses among them (the costliest render first, fair share between runs).
@Suite(.serialized) struct DispatchAsPreparedTests {
    @Test(arguments: [(workers: 8, sentEarly: 7), (workers: 2, sentEarly: 0)])
    func aSubmitsStagesGoOutAsTheyArePreparedWhenSlotsTakeThemAll(workers: Int, sentEarly: Int) throws {
        let dir = temporaryDirectory("dispatch-as-prepared")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let c = try SchedulerBenchmark.Cluster(dir: dir, workers: workers)
        defer { c.stop() }
        try #require(c.awaitWorkers(within: 30), "the \(workers) simulated workers did not join within 30 s")
        let run = c.submit(SchedulerBenchmark.pipeline(items: 8, name: "eight"))
        try #require(run > 0)
        let outcome = try #require(c.wait(run, within: 60), "the run did not end within 60 s")
        guard case .succeeded = outcome else { Issue.record("the run failed: \(outcome)"); return }
        let stats = c.coordinator.stats.withLock { $0 }
        // 8 fetches, 8 renders and the concat.
        #expect(stats.dispatched == 17)
        // Each fetch but the last went out while others were still to be prepared, or none did.
        #expect(stats.sentWhilePreparing == sentEarly)
    }
}
