import Foundation
import Testing
import ThreadlineCore
import TestSupport

/// The README's first command renders pipelines/demo.yaml from media scripts/make-demo-media makes:
/// a date title, a landscape clip, a portrait clip stored sideways with a display matrix, an HDR
/// (HLG) clip with a sticker, a Ken Burns still, a Live Photo, a look and text, fades and a song.
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
        let plan = try run(coordPath, ["plan", media + "/demo.yaml", "--json"], timeout: 60)
        #expect(plan.status == 0, "\(plan.err)")
        let frames = try #require(try JSONDecoder().decode(Plan.self, from: Data(plan.out.utf8)).totalFrames)
        #expect(frames == 480)                              // 2.5+3+3+3+3+1.5+3 s less six 0.5 s fades, at 30 fps
        let r = try run(coordPath, ["submit", media + "/demo.yaml", "--state", media + "/state", "--json"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        let result = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        #expect(result?["state"] as? String == "succeeded")
        let out = media + "/demo.mp4"
        let p = try ffprobe(out, countFrames: true)
        #expect(p.width == 1280 && p.height == 720)
        #expect(p.frameRate == "30/1")
        #expect(p.videoCodec == "h264" && p.audioCodec == "aac")
        #expect(p.frames == frames)
        #expect(abs(p.duration - 16.0) <= 1.0 / 30)
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
        #expect(try colourTags(out).isBT709Limited)
        // The HDR clip (frames 210–300) is tone-mapped, not grey: its mean saturation is well above
        // what the same picture shows read as SDR (about 40 here).
        let hdr = try saturationAndLuma(out, filter: "select='between(n\\,215\\,245)'")
        #expect(hdr.saturation > 60, "HDR clip saturation \(hdr.saturation)")
        // The star sticker at (0.85, 0.22) from 0.5 s into that clip: yellow, not the bars beneath.
        let star = try frameRGBMeans(out, frame: 240, x0: 0.845, x1: 0.855, y0: 0.21, y1: 0.23)
        #expect(star.r > 200 && star.g > 170 && star.b < 80, "sticker \(star)")
    }
}
