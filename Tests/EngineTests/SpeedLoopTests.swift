import Foundation
import Testing
import ThreadlineCore
import TestSupport

/// speed and loop through the real binaries.
@Suite(.serialized) struct SpeedLoopTests {
    static let dir: String = {
        let dir = temporaryDirectory("speed")
        try? Generate.clip(dir + "/tone.mp4", width: 320, height: 240, fps: "30", seconds: 2, tone: 440)
        return dir
    }()

    static func render(_ edit: String, name: String) throws -> ProbeResult {
        try writePipeline(dir + "/\(name).yaml", output: dir + "/\(name).mp4", size: "320x240", clips: ["video: tone.mp4\n    \(edit)"])
        let r = try run(coordPath, ["submit", dir + "/\(name).yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        return try ffprobe(dir + "/\(name).mp4", countFrames: true)
    }

    @Test func speedTwoHalvesTheDurationAndKeepsThePitch() throws {
        let p = try Self.render("speed: 2", name: "fast")
        #expect(p.frames == 30)
        #expect(abs(p.duration - 1.0) <= 1.0 / 30)
        let pcm = try decodeAudio(Self.dir + "/fast.mp4")
        let f = toneFrequency(pcm[4800..<(pcm.count - 4800)])
        #expect(abs(f - 440) < 15, "pitch \(f) Hz")
        #expect(longestSilenceMs(pcm) < 5)
    }

    @Test func slowMotionDoublesTheDuration() throws {
        let p = try Self.render("speed: 0.5", name: "slow")
        #expect(p.frames == 120)
        #expect(abs(p.duration - 4.0) <= 1.0 / 30)
        let pcm = try decodeAudio(Self.dir + "/slow.mp4")
        #expect(abs(toneFrequency(pcm[4800..<(pcm.count - 4800)]) - 440) < 15)
    }

    @Test func loopRepeatsTheSegmentWithoutGaps() throws {
        let p = try Self.render("loop: 3\n    trim: { start: 0.5, end: 1.5 }", name: "loop")
        #expect(p.frames == 90)
        #expect(abs(p.duration - 3.0) <= 1.0 / 30)
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
        #expect(longestSilenceMs(try decodeAudio(Self.dir + "/loop.mp4")) < 5)
    }

    @Test func speedZeroIsALocatedError() throws {
        try writePipeline(Self.dir + "/zero.yaml", output: Self.dir + "/zero.mp4", clips: ["video: tone.mp4\n    speed: 0"])
        let r = try run(coordPath, ["submit", Self.dir + "/zero.yaml", "--state", Self.dir + "/state"], timeout: 60)
        #expect(r.status == 2)
        #expect(r.err.contains("zero.yaml:10:12: error: speed must be between 0.25 and 4"), "\(r.err)")
    }
}
