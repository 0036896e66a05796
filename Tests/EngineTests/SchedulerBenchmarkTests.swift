import Foundation
import Testing
@testable import Farm
import Lineage

/// `coord bench-scheduler` at a small size: the figures it prints come from a run that really
/// dispatched and recorded every attempt, and the ceilings beside them (the transport alone, the
/// scheduling core alone) are measured.
@Suite struct SchedulerBenchmarkTests {
    @Test func smallRunRecordsEveryAttemptAndMeasuresTheTransportCeiling() throws {
        let dir = NSTemporaryDirectory() + "threadline-bench-test-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let f = try SchedulerBenchmark.run(workers: 4, items: 40, queued: 200, directory: dir) { _ in }
        // Each item is a fetch and a render; the run ends with one concat.
        #expect(f.attempts == 81)
        let recorded = try LineageStore.readRows(path: dir + "/throughput/lineage.db", """
            SELECT count(DISTINCT a.lease) AS n FROM attempt a JOIN stage s ON s.id = a.stage_id
            WHERE s.run_id = 1 AND a.state = 'succeeded' AND s.kind IN ('fetch', 'decode', 'concat')
            """)
        #expect(recorded.first?["n"] == "81")
        #expect(f.attemptsPerSecond > 0 && f.transportFloorAttemptsPerSecond > 0)
        // The memory figure's run: 200 stages queued (100 items) with no worker.
        #expect(f.queuedStages == 200)
        // The coordinator's hold is part of each sample's ready→started wait, so of its median too.
        #expect(f.lightLoadHeldMedianMs > 0 && f.lightLoadHeldMedianMs <= f.lightLoadLatencyMedianMs)
        #expect(f.transportFloorAttemptsPerSecond > f.attemptsPerSecond, "the transport alone carries more than the whole farm")
        #expect(f.schedulerFloorAttemptsPerSecond > f.attemptsPerSecond, "the scheduling core alone runs faster than the whole farm")
    }

    /// The scheduling core's ceiling comes from the whole run: every fetch, render and the concat
    /// dispatched once, on as many one-slot workers as the farm has.
    @Test func theSchedulingCoreAloneRunsTheWholeRun() {
        let core = SchedulerBenchmark.schedulerFloor(workers: 4, items: 40)
        #expect(core.attempts == 81)
        #expect(core.perSecond > 0)
        // One worker: the stages go one at a time and the run still ends.
        #expect(SchedulerBenchmark.schedulerFloor(workers: 1, items: 5).attempts == 11)
    }
}
