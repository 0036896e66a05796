import Foundation
import Testing
import ThreadlineCore
import TestSupport
@testable import Farm

/// A worker's scratch files (a sticker's copy, the text a drawtext reads) go in its store's tmp,
/// which it tidies: what a killed stage leaves is removed an hour later. Before, they went to
/// /tmp and stayed there until the next boot, one set per killed stage.
@Suite(.serialized) struct ScratchTests {
    @Test func aKilledStagesScratchFilesAreInTheStoreAndTidied() throws {
        let dir = temporaryDirectory("scratch-killed")
        let systemTmp = dir + "/system-tmp"
        try FileManager.default.createDirectory(atPath: systemTmp, withIntermediateDirectories: true)
        try Generate.clip(dir + "/long.mp4", width: 1280, height: 720, seconds: 12, tone: 440)
        _ = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=red:s=64x64", "-frames:v", "1", dir + "/star.png"])
        try """
            version: 1
            name: scratch
            output: { path: out/s.mp4, size: 1280x720, fps: 30 }
            clips:
              - video: long.mp4
                text: { value: "June", position: bottom }
                stickers:
                  - { image: star.png, x: 0.5, y: 0.5, size: 0.1 }
            """.write(toFile: dir + "/s.yaml", atomically: true, encoding: .utf8)
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:*", "--state", dir + "/coord"])
        let ep = try procs.endpoint(of: "coord")
        let store = dir + "/w1"
        try procs.start("w1", workerPath, ["--connect", ep, "--store", store, "--id", "w1"], environment: ["TMPDIR": systemTmp])
        try procs.start("submit", coordPath, ["submit", dir + "/s.yaml", "--coordinator", ep])
        func scratch(_ folder: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasPrefix("threadline-") }.sorted()
        }
        // The render has begun once its sticker is copied: killed there, as the OOM killer would.
        let rendering = waitUntil(timeout: 30, poll: 0.005) { scratch(store + "/tmp").contains { $0.hasPrefix("threadline-img-") } }
        procs.signal("w1")
        #expect(rendering, "no sticker copy appeared in the store's tmp; the system's temporary folder holds \(scratch(systemTmp))")
        #expect(scratch(systemTmp).isEmpty, "left in the system's temporary folder: \(scratch(systemTmp))")
        let left = scratch(store + "/tmp")
        #expect(left.contains { $0.hasPrefix("threadline-text-") }, "\(left)")
        // The worker's store trim (every few minutes) removes them once untouched an hour.
        let artifacts = try ArtifactStore(root: store)
        #expect(artifacts.trim(toBytes: .max, keep: [], grace: 0, now: Date()).temporaryRemoved == 0, "removed while fresh")
        let report = artifacts.trim(toBytes: .max, keep: [], grace: 0, now: Date().addingTimeInterval(3700))
        #expect(report.temporaryRemoved >= left.count && scratch(store + "/tmp").isEmpty, "\(report) \(scratch(store + "/tmp"))")
    }
}
