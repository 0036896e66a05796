import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport

/// The manifest entries of ../shared/media, when it is present.
struct CorpusEntry: Sendable, CustomTestStringConvertible {
    var path: String
    var kind: String
    var broken: Bool
    var duration: Double?
    var rotation: Int?
    var testDescription: String { path }

    static let all: [CorpusEntry] = {
        guard let dir = sharedMedia, let data = FileManager.default.contents(atPath: dir + "/manifest.json"),
              let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { return [] }
        return list.map { CorpusEntry(path: $0["path"] as! String, kind: $0["kind"] as? String ?? "", broken: $0["broken"] as? Bool ?? false,
                                      duration: $0["duration_s"] as? Double, rotation: $0["rotation"] as? Int) }
    }()
    static let videos = all.filter { $0.kind == "video" && !$0.broken }
    static let broken = all.filter { $0.broken }
    var fullPath: String { sharedMedia! + "/" + path }
}

@Suite(.enabled(if: sharedMedia != nil, "../shared/media is absent: corpus tests skipped"))
struct CorpusTests {
    /// x264's fastest preset: what these tests check (upright, length, picture) does not depend on
    /// how hard the encoder works, and the 25 clips then take about 60 % of the time.
    static let profile = OutputProfile(path: "", width: 1280, height: 720, fps: Rational(30, 1), fit: .letterbox,
                                       video: VideoSettings(preset: "ultrafast"))

    /// Probing tells of an audio track no decoder here reads (this file's track has no sample
    /// description), so planning can ask for `mute: true` before the clip is rendered; a clip
    /// with ordinary sound reports none.
    @Test func probingTellsOfAnAudioTrackNoDecoderReads() throws {
        let facts = try Probe.facts(path: sharedMedia! + "/androidx-media/sample_missing_stsd.mp4")
        #expect(facts.hasVideo && !facts.hasAudio && facts.undecodableAudio == "an unknown codec", "\(facts)")
        let dir = temporaryDirectory("corpus")
        try Generate.clip(dir + "/tone.mp4", seconds: 0.5)
        let tone = try Probe.facts(path: dir + "/tone.mp4")
        #expect(tone.hasAudio && tone.undecodableAudio == nil, "\(tone)")
    }

    @Test(arguments: CorpusEntry.videos)
    func rendersUprightWithTheRightDuration(_ entry: CorpusEntry) throws {
        let dir = temporaryDirectory("corpus")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let src = entry.fullPath
        let item = Item(kind: .video(source: SourceRef(src), trim: nil))
        let pipeline = Pipeline(name: "one", output: Self.profile, items: [item])
        let facts = try Probe.facts(path: src)
        let timeline = try Planner.timeline(for: pipeline, facts: [src: facts])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: src, frameCount: timeline[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: timeline[0].frameCount, sampleCount: timeline[0].sampleCount, label: entry.path)],
                           profile: Self.profile, to: dir + "/out.mp4")
        let probe = try ffprobe(dir + "/out.mp4")
        #expect(probe.width == 1280 && probe.height == 720)
        #expect(probe.videoCodec == "h264" && probe.audioCodec == "aac")
        // Duration: the manifest's, to the nearest output frame.
        if let d = entry.duration {
            #expect(abs(probe.duration - d) <= 1.5 / 30 + 0.001, "output \(probe.duration) s vs manifest \(d) s")
        }
        // Upright: the middle frame matches the same frame of the ffmpeg command line's
        // autorotated decode, converted to 30 fps by its fps filter (nearest-frame choice).
        let k = timeline[0].frameCount / 2
        let pick = "select='eq(n\\,\(k))'"
        try extractFrame(dir + "/out.mp4", at: 0, to: dir + "/ours.png", filter: pick, seek: false)
        // HDR sources are tone-mapped in the movie: the reference is too (the same standard chain).
        let hdr = ["arib-std-b67", "smpte2084"].contains(try colourTags(src).transfer)
        let toneMap = hdr ? "zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=bt709,tonemap=tonemap=mobius:desat=0,zscale=t=bt709:m=bt709:r=tv," : ""
        let fit = toneMap + "scale='trunc(iw*max(1,sar))':'trunc(ih*max(1,1/sar))',setsar=1,scale=1280:720:force_original_aspect_ratio=decrease,pad=1280:720:(ow-iw)/2:(oh-ih)/2,format=yuv420p"
        // The reference, the same upside down (the check must tell them apart) and the source's
        // own frame, from one decode of the source.
        try extractFrames(src, stream: facts.videoStream, common: "fps=30", branches: [
            (fit + "," + pick, dir + "/ref.png"), ("vflip," + fit + "," + pick, dir + "/wrong.png"), (pick, dir + "/source.png"),
        ])
        let score = try ssim(dir + "/ours.png", dir + "/ref.png")
        let wrongScore = try ssim(dir + "/ours.png", dir + "/wrong.png")
        print("corpus \(entry.path): ssim \(score) (flipped \(wrongScore)), duration \(probe.duration) vs \(entry.duration ?? -1)")
        #expect(score >= 0.9, "SSIM \(score) for \(entry.path)")
        // Upright must beat upside down, except where the picture is uniform (three corpus clips are
        // black test patterns, whose flipped picture is the same picture).
        if try lumaSpread(dir + "/source.png") >= 3 {
            #expect(score > wrongScore, "\(entry.path): upright SSIM \(score) does not beat flipped \(wrongScore)")
        } else {
            print("corpus \(entry.path): uniform picture, upright vs flipped not compared")
        }
    }
}

/// The standard deviation of an image's luma (0…255): near 0 for a uniform picture.
func lumaSpread(_ image: String) throws -> Double {
    let raw = temporaryDirectory("luma") + "/y.raw"
    let r = try run("ffmpeg", ["-v", "error", "-y", "-i", image, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "gray", raw])
    let bytes = [UInt8](FileManager.default.contents(atPath: raw) ?? Data())
    guard !bytes.isEmpty else { throw GenerateError(message: "cannot read \(image): \(r.err)") }
    let mean = bytes.reduce(0.0) { $0 + Double($1) } / Double(bytes.count)
    return (bytes.reduce(0.0) { $0 + (Double($1) - mean) * (Double($1) - mean) } / Double(bytes.count)).squareRoot()
}
