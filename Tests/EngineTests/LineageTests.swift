import Foundation
import Testing
import ThreadlineCore
import Lineage
import TestSupport

/// The lineage database as users read it: documented views and queries, and `coord lineage`.
@Suite(.serialized) struct LineageTests {
    static let render: String = {
        let dir = temporaryDirectory("lineage")
        try? Generate.clip(dir + "/a.mp4", width: 320, height: 240, seconds: 1, tone: 440)
        try? Generate.clip(dir + "/b.mp4", width: 240, height: 320, seconds: 1, tone: 550, rotation: 90)
        try? writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "320x240",
                           clips: ["video: a.mp4\n    trim: { start: 0.2 }", "video: b.mp4\n    volume: 0.5"])
        _ = try? run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        // A failed run too, so failure views have rows.
        try? "not a video".write(toFile: dir + "/garbage.mp4", atomically: true, encoding: .utf8)
        try? writePipeline(dir + "/bad.yaml", output: dir + "/bad.mp4", clips: ["video: garbage.mp4"])
        _ = try? run(coordPath, ["submit", dir + "/bad.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        return dir
    }()

    @Test func migrationsFromEmptyGiveTheDocumentedViews() throws {
        let dir = temporaryDirectory("schema")
        _ = try LineageStore(path: dir + "/l.db")
        let names = try LineageStore.readRows(path: dir + "/l.db", "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')")
            .map { $0["name"]! }
        for v in ["v_runs", "v_stages", "v_attempts", "v_workers", "v_failures", "v_artifact_inputs", "v_lineage",
                  "run", "item", "stage", "stage_edge", "attempt", "artifact", "attempt_io", "worker", "event"] {
            #expect(names.contains(v), "missing \(v)")
        }
    }

    @Test func everyDocumentedQueryRunsOnARealRender() throws {
        let db = Self.render + "/state/lineage.db"
        let doc = try String(contentsOfFile: repositoryRoot + "/docs/LINEAGE.md", encoding: .utf8)
        let blocks = doc.components(separatedBy: "```sql\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        #expect(blocks.count >= 6)
        for sql in blocks {
            let rows = try LineageStore.readRows(path: db, sql)
            #expect(!rows.isEmpty, "no rows from: \(sql)")
        }
    }

    @Test func lineageJSONListsSourcesWithHashesAndEveryStagesParameters() throws {
        let dir = Self.render
        let r = try run(coordPath, ["lineage", dir + "/out.mp4", "--state", dir + "/state", "--json"], timeout: 60)
        #expect(r.status == 0, "\(r.err)")
        let l = try JSONDecoder().decode(OutputLineage.self, from: Data(r.out.utf8))
        #expect(l.sources.map(\.uri) == [dir + "/a.mp4", dir + "/b.mp4"])
        for s in l.sources {
            #expect(s.sha256 == (try SHA256Hasher.hex(fileAt: s.uri)))
            #expect(s.facts?.hasVideo == true)
        }
        #expect(l.stages.count == 9)
        #expect(l.stages.allSatisfy { $0.parameters?.isEmpty == false && $0.state == "succeeded" })
        #expect(l.stages.first { $0.name == "decode/1" }?.parameters?.contains("\"volume\":0.5") == true)
        #expect(l.stages.first { $0.name == "concat" }?.parameters?.contains("\"sampleCount\"") == true)
        // The tree walks output ← segments ← sources.
        #expect(l.tree.first?.kind == "output")
        #expect(l.tree.filter { $0.kind == "segment" }.allSatisfy { $0.depth == 1 })
        #expect(Set(l.tree.filter { $0.kind == "source" }.map(\.sha256)) == Set(l.sources.map(\.sha256)))
    }
}
