import Foundation
import Testing
import ThreadlineCore
import Lineage
import TestSupport

/// `THREADLINE_SCALE=1 swift test --filter LineageScaleBenchmark`: 1,000 simulated 24-item runs
/// recorded through the coordinator's own lineage calls; prints size and lineage-query time.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["THREADLINE_SCALE"] != nil, "set THREADLINE_SCALE=1 to run the lineage scale benchmark"))
struct LineageScaleBenchmark {
    @Test func thousandRunsOfTwentyFourItems() throws {
        let dir = temporaryDirectory("scale")
        let store = try LineageStore(path: dir + "/lineage.db")
        let runs = Int(ProcessInfo.processInfo.environment["THREADLINE_SCALE_RUNS"] ?? "") ?? 1000
        try store.workerSeen(id: "w", host: "h", pid: 1, slots: 2, version: "sim")
        let t0 = Date()
        var lastOutput = ""
        for r in 0..<runs {
            let items = (0..<24).map { Item(kind: .video(source: SourceRef("/media/run\(r)/clip\($0).mov"), trim: nil)) }
            let p = Pipeline(name: "sim-\(r)", output: OutputProfile(path: "/out/sim-\(r).mp4"), items: items, file: "/p/sim-\(r).yaml", text: "run \(r)")
            let stages = Planner.stages(for: p)
            let (runID, ids) = try store.createRun(p, stages: stages)
            var segments: [Int64] = []
            for i in 0..<24 {
                let f = try store.attemptDispatched(stageIDs: [ids["fetch/\(i)"]!], attemptNo: 1, worker: "w", slot: 0, lease: UUID().uuidString)
                try store.attemptFinished(f[0], state: .succeeded, started: 1, finished: 2, cpu: 0.1, maxRSS: 1)
                let src = try store.recordArtifact(sha256: SHA256Hasher.hex("src\(r)-\(i)"), uri: "/store/src\(r)-\(i)", size: 1 << 20, kind: "source",
                                                   facts: "{\"duration\":3}", key: SHA256Hasher.hex("fk\(r)-\(i)"), attemptID: f[0])
                try store.stageUpdate(ids["fetch/\(i)"]!, state: .succeeded, params: "{\"uri\":\"x\"}", key: "k", finished: 2, seconds: 1)
                let names = ["decode/\(i)", "transform/\(i)", "encode/\(i)"]
                let a = try store.attemptDispatched(stageIDs: names.map { ids[$0]! }, attemptNo: 1, worker: "w", slot: 0, lease: UUID().uuidString)
                let seg = try store.recordArtifact(sha256: SHA256Hasher.hex("seg\(r)-\(i)"), uri: "/store/seg\(r)-\(i)", size: 1 << 19, kind: "segment",
                                                   facts: nil, key: SHA256Hasher.hex("sk\(r)-\(i)"), attemptID: a.last, inputs: [src])
                for (k, n) in names.enumerated() {
                    try store.attemptFinished(a[k], state: .succeeded, started: 2, finished: 3, cpu: 0.5, maxRSS: 1)
                    try store.stageUpdate(ids[n]!, state: .succeeded, params: "{\"volume\":1}", key: "k", finished: 3, seconds: 0.3)
                }
                segments.append(seg)
            }
            let c = try store.attemptDispatched(stageIDs: [ids["concat"]!], attemptNo: 1, worker: "w", slot: 0, lease: UUID().uuidString)
            let movie = try store.recordArtifact(sha256: SHA256Hasher.hex("movie\(r)"), uri: "/store/movie\(r)", size: 1 << 24, kind: "movie",
                                                 facts: nil, key: "ck\(r)", attemptID: c[0], inputs: segments)
            _ = movie
            try store.recordArtifact(sha256: SHA256Hasher.hex("movie\(r)"), uri: p.output.path, size: 1 << 24, kind: "output",
                                     facts: nil, key: nil, attemptID: c[0], inputs: segments)
            try store.attemptFinished(c[0], state: .succeeded, started: 3, finished: 4)
            try store.stageUpdate(ids["concat"]!, state: .succeeded, finished: 4, seconds: 1)
            try store.runFinished(runID, state: .succeeded)
            lastOutput = p.output.path
        }
        let writeSeconds = Date().timeIntervalSince(t0)
        try store.checkpoint()
        let size = (try FileManager.default.attributesOfItem(atPath: dir + "/lineage.db")[.size] as? NSNumber)?.int64Value ?? 0
        let q0 = Date()
        let lineage = try #require(try LineageStore.lineage(path: dir + "/lineage.db", of: lastOutput))
        let queryMs = Date().timeIntervalSince(q0) * 1000
        #expect(lineage.sources.count == 24 && lineage.stages.count == 97)
        let v0 = Date()
        let viewRows = try LineageStore.readRows(path: dir + "/lineage.db", "SELECT * FROM v_lineage WHERE output_id = (SELECT max(id) FROM artifact WHERE kind = 'output')")
        let viewMs = Date().timeIntervalSince(v0) * 1000
        print(String(format: "scale: %d runs × 24 items written in %.1f s; database %.1f MB; coord lineage query %.1f ms; v_lineage for one output %.1f ms (%d rows)",
                     runs, writeSeconds, Double(size) / 1e6, queryMs, viewMs, viewRows.count))
    }
}
