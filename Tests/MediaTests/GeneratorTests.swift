import Foundation
import Testing
@testable import Media
import TestSupport

/// The test media generator must make what it claims, or other tests prove nothing.
@Suite struct GeneratorTests {
    @Test(arguments: [90, 180, 270])
    func portraitClipsCarryADisplayMatrix(_ degrees: Int) throws {
        let dir = temporaryDirectory()
        try Generate.clip(dir + "/r.mp4", width: 320, height: 240, seconds: 0.5, rotation: degrees)
        let facts = try Probe.facts(path: dir + "/r.mp4")
        #expect(facts.rotation == degrees)
        let r = try run("ffprobe", ["-v", "error", "-show_entries", "stream_side_data=rotation", "-of", "csv=p=0", dir + "/r.mp4"])
        #expect(r.out.contains(degrees == 180 ? "180" : degrees == 90 ? "-90" : "90"), "ffprobe says \(r.out)")
    }
}
