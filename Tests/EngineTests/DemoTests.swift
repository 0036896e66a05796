import Foundation
import Testing
import ThreadlineCore
import TestSupport

/// The README's first command renders pipelines/demo.yaml from media scripts/make-demo-media makes.
@Suite struct DemoTests {
    @Test func demoPipelineRendersTheExpectedMovie() throws {
        let media = temporaryDirectory("demo-media")
        let gen = try run(repositoryRoot + "/scripts/make-demo-media", [media], timeout: 300)
        #expect(gen.status == 0, "\(gen.err)")
        // The demo pipeline, pointed at the generated media and a temporary output.
        let text = try String(contentsOfFile: repositoryRoot + "/pipelines/demo.yaml", encoding: .utf8)
            .replacingOccurrences(of: "media/", with: media + "/")
            .replacingOccurrences(of: "out/demo.mp4", with: media + "/demo.mp4")
        try text.write(toFile: media + "/demo.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", media + "/demo.yaml", "--state", media + "/state", "--json"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        let result = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        #expect(result?["state"] as? String == "succeeded")
        let p = try ffprobe(media + "/demo.mp4", countFrames: true)
        #expect(p.width == 1280 && p.height == 720)
        #expect(p.frameRate == "30/1")
        #expect(p.videoCodec == "h264" && p.audioCodec == "aac")
        #expect(p.frames == 420)                            // 3 + 2.5 + 3 + 2.5 + 3 s at 30 fps
        #expect(abs(p.duration - 14.0) <= 1.0 / 30)
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
    }
}
