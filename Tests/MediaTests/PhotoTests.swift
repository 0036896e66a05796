import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport

struct PhotoEntry: Sendable, CustomTestStringConvertible {
    var path: String
    var orientation: Int
    var testDescription: String { "\(path) (EXIF \(orientation))" }
    static let all: [PhotoEntry] = {
        guard let dir = sharedMedia, let data = FileManager.default.contents(atPath: dir + "/manifest.json"),
              let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { return [] }
        return list.filter { ($0["kind"] as? String) == "image" && ($0["broken"] as? Bool) != true && ($0["vcodec"] as? String) != "hevc (HEIF image items)" }
            .map { PhotoEntry(path: $0["path"] as! String, orientation: $0["exif_orientation"] as? Int ?? 1) }
    }()
    /// The EXIF transform to upright, as ffmpeg filters (orientation 0 is invalid: shown as stored).
    var reference: String {
        switch orientation {
        case 2: return "hflip"
        case 3: return "hflip,vflip"
        case 4: return "vflip"
        case 5: return "transpose=cclock_flip"
        case 6: return "transpose=clock"
        case 7: return "transpose=clock_flip"
        case 8: return "transpose=cclock"
        default: return "null"
        }
    }
}

@Suite(.enabled(if: sharedMedia != nil, "../shared/media is absent: photo corpus tests skipped"))
struct PhotoTests {
    @Test(arguments: PhotoEntry.all)
    func photosRenderUprightPerTheirEXIFOrientation(_ entry: PhotoEntry) throws {
        let dir = temporaryDirectory("photo")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let src = sharedMedia! + "/" + entry.path
        let profile = OutputProfile(path: "", width: 1280, height: 720, fps: Rational(30, 1), fit: .letterbox)
        let pipeline = Pipeline(name: "p", output: profile, items: [Item(kind: .photo(source: SourceRef(src), duration: 1))])
        let t = try Planner.timeline(for: pipeline, facts: [src: try Probe.facts(path: src)])
        #expect(t[0].frameCount == 30)
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: src, frameCount: t[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: 30, sampleCount: t[0].sampleCount, label: "p")],
                           profile: profile, to: dir + "/out.mp4")
        let p = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(p.frames == 30 && p.width == 1280 && p.audioCodec == "aac")
        try extractFrame(dir + "/out.mp4", at: 0, to: dir + "/ours.png", filter: "select='eq(n\\,15)'", seek: false)
        let fit = "scale=1280:720:force_original_aspect_ratio=decrease,pad=1280:720:(ow-iw)/2:(oh-ih)/2,format=yuv420p"
        try extractFrame(src, at: 0, to: dir + "/ref.png", filter: entry.reference + "," + fit, seek: false, inputOptions: ["-noautorotate"])
        try extractFrame(src, at: 0, to: dir + "/stored.png", filter: fit, seek: false, inputOptions: ["-noautorotate"])
        let score = try ssim(dir + "/ours.png", dir + "/ref.png")
        let stored = try ssim(dir + "/ours.png", dir + "/stored.png")
        print("photo \(entry.path) EXIF \(entry.orientation): ssim \(score) (as stored \(stored))")
        #expect(score >= 0.9, "SSIM \(score)")
        if entry.orientation > 1 { #expect(stored < score - 0.05, "the picture was left as stored") }
    }
}
