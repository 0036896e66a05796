import Foundation
import Testing
import GRDB
import TestSupport

/// A lineage write that fails is not ignored: the coordinator logs it with what it was recording,
/// stops, and the submit fails with that reason instead of rendering on with a false record.
@Suite struct LineageFailureTests {
    @Test func aFailedLineageWriteStopsTheCoordinatorWithItsReason() throws {
        let dir = temporaryDirectory("lineage-failure")
        try Generate.clip(dir + "/c.mp4", width: 160, height: 90, seconds: 0.4, tone: nil)
        try writePipeline(dir + "/p.yaml", output: dir + "/o.mp4", size: "160x90", clips: ["video: c.mp4"])
        let first = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
        #expect(first.status == 0, "\(first.err)")
        // Every later record of a worker joining fails, as a full disk or a broken file would.
        let db = try DatabaseQueue(path: dir + "/state/lineage.db")
        try db.write { try $0.execute(sql: "CREATE TRIGGER broken BEFORE INSERT ON worker BEGIN SELECT RAISE(ABORT, 'disk on fire'); END") }
        try db.close()
        try FileManager.default.removeItem(atPath: dir + "/o.mp4")
        let t0 = Date()
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "1"], timeout: 60)
        #expect(r.status == 1)
        #expect(r.err.contains("lineage write 'workerSeen' failed") && r.err.contains("disk on fire"), "\(r.err)")
        #expect(Date().timeIntervalSince(t0) < 30)
        #expect(!FileManager.default.fileExists(atPath: dir + "/o.mp4"))
    }
}
