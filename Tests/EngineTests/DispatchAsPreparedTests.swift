import Foundation
import Testing
import TestSupport
@testable import Farm
import ThreadlineCore
import Transport

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

/// The same for a remote submission (`coord submit --coordinator`): started as its message is
/// handled, because the coordinator's store holds every file it names, its fetches go out as they
/// are prepared. One whose files are still to be uploaded starts when the last upload ends, with
/// other uploads that may end in the same turn, and waits for the tick.
@Suite(.serialized) struct RemoteDispatchAsPreparedTests {
    @Test(arguments: [(storedFirst: true, sentEarly: 7), (storedFirst: false, sentEarly: 0)])
    func aRemoteSubmissionsStagesGoOutAsTheyArePreparedWhenItsFilesAreHeld(storedFirst: Bool, sentEarly: Int) throws {
        let dir = temporaryDirectory("remote-dispatch-as-prepared")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try ArtifactStore(root: dir + "/store")
        let h = try Harness(workers: 8, slots: 1, runner: SharedStoreRunner(store: store, delay: 0.2), store: store)
        try #require(SchedulerBenchmark.awaitWorkers(8, lineage: h.dir + "/lineage.db", within: 30), "the 8 workers did not join within 30 s")
        var items: [Item] = []
        for i in 0..<8 {
            let path = dir + "/clip-\(i).mov"
            try Data("clip \(i) of the remote submission".utf8).write(to: URL(fileURLWithPath: path))
            if storedFirst { _ = try store.ingest(localFile: path) }
            items.append(Item(kind: .video(source: SourceRef(path), trim: nil)))
        }
        let pipeline = Pipeline(name: "remote", output: OutputProfile(path: dir + "/remote.mp4"), items: items)
        let client = try ClusterClient(endpoint: h.endpoint, context: h.context, downloads: dir + "/downloads")
        client.silenceTimeout = 30
        let run = try client.submit(pipeline)
        guard case .succeeded = try #require(h.wait(run, timeout: 60), "the run did not end within 60 s") else {
            Issue.record("the run failed: \(String(describing: h.outcomes.value[run]))"); return
        }
        let stats = h.coordinator.stats.withLock { $0 }
        #expect(stats.dispatched == 17, "8 fetches, 8 renders and the concat")
        #expect(stats.sentWhilePreparing == sentEarly, storedFirst ? "its files were all held" : "its files were uploaded first")
    }
}

/// A worker sharing the coordinator's store: each task's file written there, after `delay`.
private struct SharedStoreRunner: TaskRunner {
    let store: ArtifactStore
    let delay: Double
    func run(_ assignment: Assignment, isCancelled: @Sendable () -> Bool) -> TaskResult {
        Thread.sleep(forTimeInterval: delay)
        do { return try Harness.madeInStore(assignment, store, content: assignment.task.label) } catch {
            var r = TaskResult.miss(assignment)
            r.error = WireError(stage: .decode, errorClass: .retryable, file: assignment.task.label, message: "\(error)")
            return r
        }
    }
    func check(_ assignment: Assignment) -> TaskResult { .miss(assignment) }
}
