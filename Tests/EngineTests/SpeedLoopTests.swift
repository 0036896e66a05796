import Foundation
import Testing
import ThreadlineCore
import Lineage
import TestSupport
@testable import Media

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

    /// A looped item's transitions each take from one pass (the first or the last): longer than
    /// a pass is refused, and the error says it is one pass, not the item (whose plan says
    /// three times as long); within a pass, in and out together may be longer than a pass.
    @Test func aLoopedItemsTransitionsAreMeasuredAgainstOnePass() throws {
        func pipeline(_ name: String, _ seconds: Double) throws -> String {
            let path = Self.dir + "/\(name).yaml"
            try """
            version: 1
            output: { path: \(name).mp4, size: 320x240, video: { preset: ultrafast } }
            transition: { type: dissolve, duration: \(seconds) }
            clips:
              - video: tone.mp4
              - video: tone.mp4
                loop: 3
                trim: { start: 0, end: 0.4 }
              - video: tone.mp4
            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let long = try run(coordPath, ["plan", try pipeline("loop-long", 0.5)], timeout: 60)
        #expect(long.status == 2)
        #expect(long.err.contains("loop-long.yaml:3:13: error: the transitions around clip 2 (tone.mp4) (0.500 s in, 0.500 s out) are longer than one pass of the item (0.400 s; loop: 3 plays it 3 times, 1.200 s)"), "\(long.err)")
        #expect(long.err.contains("hint: shorten the transition or lengthen the item's trim"), "\(long.err)")
        let within = try run(coordPath, ["submit", try pipeline("loop-within", 0.3), "--state", Self.dir + "/state", "--workers", "2"], timeout: 120)
        #expect(within.status == 0, "\(within.err)")
        let p = try ffprobe(Self.dir + "/loop-within.mp4", countFrames: true)
        #expect(p.frames == 60 + 36 + 60 - 2 * 9, "\(p)")
    }

    @Test func speedZeroIsALocatedError() throws {
        try writePipeline(Self.dir + "/zero.yaml", output: Self.dir + "/zero.mp4", clips: ["video: tone.mp4\n    speed: 0"])
        let r = try run(coordPath, ["submit", Self.dir + "/zero.yaml", "--state", Self.dir + "/state"], timeout: 60)
        #expect(r.status == 2)
        #expect(r.err.contains("zero.yaml:10:12: error: speed must be between 0.25 and 4"), "\(r.err)")
    }
}

@Suite(.serialized) struct MaxDurationEndToEndTests {
    static func pipeline(_ policy: String, _ dir: String) throws {
        for i in 0..<3 { try Generate.clip(dir + "/c\(i).mp4", width: 320, height: 240, seconds: 2, tone: 300 + Double(i) * 100) }
        let text = """
        version: 1
        output:
          path: \(dir)/out.mp4
          size: 320x240
          max_duration: { seconds: 3, policy: \(policy) }
          video: { preset: ultrafast }
        clips:
          - video: c0.mp4
          - video: c1.mp4
          - video: c2.mp4
        """
        try text.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
    }

    @Test func failStopsBeforeAnyRendering() throws {
        let dir = temporaryDirectory("maxfail")
        try Self.pipeline("fail", dir)
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 1)
        #expect(r.err.contains("p.yaml:5:17: error: the movie is planned at 6.000 s, over max_duration 3.000 s"), "\(r.err)")
        let renders = try Lineage.LineageStore.readRows(path: dir + "/state/lineage.db",
            "SELECT count(*) AS n FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.kind IN ('decode', 'transform', 'encode', 'concat')")
        #expect(renders[0]["n"] == "0")
        let plan = try run(coordPath, ["plan", dir + "/p.yaml"], timeout: 60)
        #expect(plan.status == 2 && plan.err.contains("over max_duration"))
    }

    @Test func fitRendersExactlyTheCap() throws {
        let dir = temporaryDirectory("maxfit")
        try Self.pipeline("fit", dir)
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        let p = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(p.frames == 90)
        #expect(abs(p.duration - 3.0) <= 1.0 / 30)
    }
}

@Suite(.serialized) struct WatermarkTests {
    @Test func theWatermarkIsOnFirstMiddleAndLastFrames() throws {
        let dir = temporaryDirectory("watermark")
        var r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=120x60", "-frames:v", "1", dir + "/logo.png"])
        #expect(r.status == 0)
        r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=black:s=640x360:r=30:d=1", "-c:v", "libx264",
                               "-preset", "ultrafast", "-pix_fmt", "yuv420p", dir + "/black.mp4"])
        #expect(r.status == 0)
        let text = """
        version: 1
        output:
          path: \(dir)/out.mp4
          size: 640x360
          video: { preset: ultrafast }
          watermark: { image: logo.png, position: bottom-right, opacity: 1.0, size: 0.2, margin: 0.02 }
        clips:
          - video: black.mp4
          - title: { text: ".", duration: 1, background: "#000000" }
        """
        try text.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(s.status == 0, "\(s.err)")
        for frame in [0, 30, 59] {
            let corner = try frameRGBMeans(dir + "/out.mp4", frame: frame, x0: 0.85, x1: 0.95)
            let opposite = try frameRGBMeans(dir + "/out.mp4", frame: frame, x0: 0.02, x1: 0.12)
            // The logo fills rows 78–98 % of the right corner: the column band's mean is clearly red.
            #expect(corner.r > 25 && corner.g < 15, "frame \(frame) corner \(corner)")
            #expect(opposite.r < 5, "frame \(frame) opposite corner \(opposite)")
        }
        // A missing image is a located error.
        try text.replacingOccurrences(of: "logo.png", with: "nope.png").write(toFile: dir + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try run(coordPath, ["submit", dir + "/bad.yaml", "--state", dir + "/state"], timeout: 60)
        #expect(bad.status == 2 && bad.err.contains("bad.yaml:6:") && bad.err.contains("watermark image not found"), "\(bad.err)")
    }
}

@Suite(.serialized) struct SoundtrackTests {
    static func project(_ dir: String, soundtrack: String) throws {
        for i in 0..<3 { try Generate.clip(dir + "/c\(i).mp4", width: 320, height: 240, seconds: 1, tone: nil) }
        let text = """
        version: 1
        output: { path: \(dir)/out.mp4, size: 320x240, video: { preset: ultrafast } }
        soundtrack: \(soundtrack)
        clips:
          - video: c0.mp4
          - video: c1.mp4
          - video: c2.mp4
        """
        try text.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
    }

    @Test func aShortSongSectionLoopsUnderSilentClipsWithFades() throws {
        let dir = temporaryDirectory("soundtrack")
        // A 5 s 660 Hz song; the section 1–2 s (1 s long) must loop three times under 3 s of silent clips.
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=44100:duration=5", "-c:a", "libmp3lame", "-b:a", "128k", dir + "/song.mp3"])
        #expect(r.status == 0)
        try Self.project(dir, soundtrack: "{ source: song.mp3, from: 1, to: 2, volume: 1.0, fade_in: 0.5, fade_out: 0.5 }")
        let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(s.status == 0, "\(s.err)")
        let p = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(p.frames == 90)
        #expect(abs((p.audioDuration ?? 0) - 3.0) <= 1.0 / 30)
        let pcm = try decodeAudio(dir + "/out.mp4")
        func rms(_ a: Double, _ b: Double) -> Double {
            let slice = pcm[Int(a * 48000)..<Int(b * 48000)]
            return (slice.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(slice.count)).squareRoot()
        }
        // Music through the middle (looped, no dropouts), faded at both ends.
        #expect(abs(toneFrequency(pcm[48000..<96000]) - 660) < 15)
        #expect(longestSilenceMs(pcm, edge: 0.6) < 5)
        #expect(rms(0.0, 0.1) < 0.4 * rms(1.4, 1.6), "no fade in")
        #expect(rms(2.9, 2.98) < 0.4 * rms(1.4, 1.6), "no fade out")
    }

    /// The fades follow the music as it is heard. A section that does not loop and ends before
    /// the movie fades out at its own end (it was cut off at full volume, the fade-out spent on
    /// the silence after it); a fade-out longer than the movie starts at full volume (a 30 s one
    /// under 3 s began 27 s before the movie: the music was never heard at its volume).
    @Test func theFadesFollowTheMusicAsHeard() throws {
        let dir = temporaryDirectory("soundtrack-fades")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000:duration=5", "-c:a", "aac", dir + "/song.m4a"])
        #expect(r.status == 0, "\(r.err)")
        func render(_ soundtrack: String) throws -> (Double, Double) -> Double {
            try Self.project(dir, soundtrack: soundtrack)
            let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
            #expect(s.status == 0, "\(s.err)")
            let pcm = try decodeAudio(dir + "/out.mp4")
            return { a, b in
                let slice = pcm[Int(a * 48000)..<Int(b * 48000)]
                return (slice.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(slice.count)).squareRoot()
            }
        }
        let plain = try render("{ source: song.m4a, volume: 1.0 }")
        let full = plain(0.2, 0.4)
        #expect(full > 1000, "\(full)")
        let ends = try render("{ source: song.m4a, from: 1, to: 2, loop: false, volume: 1.0, fade_out: 0.5 }")
        #expect(ends(0.2, 0.4) > 0.9 * full, "full volume before its fade: \(ends(0.2, 0.4)) of \(full)")
        #expect(ends(0.9, 0.98) < 0.3 * full, "faded out at its own end: \(ends(0.9, 0.98)) of \(full)")
        #expect(ends(1.1, 2.9) < 10, "silence after it")
        let long = try render("{ source: song.m4a, volume: 1.0, fade_out: 30 }")
        #expect(long(0.0, 0.1) > 0.9 * full, "a fade longer than the music starts at full volume: \(long(0.0, 0.1)) of \(full)")
        #expect(long(2.85, 2.95) < 0.1 * full && long(1.4, 1.6) < 0.6 * full && long(1.4, 1.6) > 0.4 * full,
                "and falls to nothing: \(long(1.4, 1.6)), \(long(2.85, 2.95)) of \(full)")
    }

    /// A looped section's end crossfades into its start: cut there, a section that is not a
    /// whole number of the song's cycles made the largest step in the waveform at every repeat
    /// (a click; on real music, 801 where the loudest step in the song is 784).
    @Test func aLoopedSectionHasNoClickAtItsSeams() throws {
        let dir = temporaryDirectory("soundtrack-seams")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=5", "-c:a", "aac", "-b:a", "256k", dir + "/song.m4a"])
        #expect(r.status == 0, "\(r.err)")
        // 0.3013 s is 132.57 cycles of 440 Hz: the seam jumps by half the wave's height.
        try Self.project(dir, soundtrack: "{ source: song.m4a, from: 1, to: 1.3013, volume: 1.0 }")
        let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(s.status == 0, "\(s.err)")
        let pcm = try decodeAudio(dir + "/out.mp4")
        func steepest(_ a: Double, _ b: Double) -> Int {
            (Int(a * 48000)..<Int(b * 48000)).reduce(0) { max($0, abs(Int(pcm[$1 + 1]) - Int(pcm[$1]))) }
        }
        let wave = steepest(0.05, 0.25)     // the first pass, before any seam
        #expect(wave > 100, "\(wave)")
        #expect(steepest(0.05, 2.95) <= wave * 3 / 2, "the steepest step over nine seams \(steepest(0.05, 2.95)) against the wave's own \(wave)")
        #expect(abs(toneFrequency(pcm[48000..<96000]) - 440) < 15)
    }

    /// Only as much of the song as the movie needs is decoded: the music under a 3 s movie is the
    /// song's first 3 s to the end (440 Hz, then 880 Hz from 2.5 s), not cut short.
    @Test func aLongSongUnderAShortMovieIsItsFirstSeconds() throws {
        let dir = temporaryDirectory("longsong")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=2.5",
                                   "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000:duration=37.5",
                                   "-filter_complex", "[0:a][1:a]concat=n=2:v=0:a=1", "-c:a", "aac", "-b:a", "128k", dir + "/song.m4a"])
        #expect(r.status == 0, "\(r.err)")
        try Self.project(dir, soundtrack: "{ source: song.m4a, volume: 1.0 }")
        let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(s.status == 0, "\(s.err)")
        let pcm = try decodeAudio(dir + "/out.mp4")
        #expect(abs(Double(pcm.count) / 48000 - 3.0) <= 1.0 / 30)
        #expect(abs(toneFrequency(pcm[48000..<96000]) - 440) < 15)
        #expect(abs(toneFrequency(pcm[Int(2.6 * 48000)..<Int(2.95 * 48000)]) - 880) < 15)
        #expect(longestSilenceMs(pcm, edge: 0.1) < 5)
    }

    @Test func anUnreadableSoundtrackIsALocatedErrorAtSubmit() throws {
        let dir = temporaryDirectory("badsong")
        try "not music".write(toFile: dir + "/song.mp3", atomically: true, encoding: .utf8)
        try Self.project(dir, soundtrack: "{ source: song.mp3 }")
        let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 60)
        #expect(s.status == 2)
        #expect(s.err.contains("p.yaml:3:23: error: cannot read the soundtrack"), "\(s.err)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/state"))
    }

    /// A section that starts past the song's end is refused at submit, at the soundtrack's line;
    /// the mix itself (a coordinator given such a pipeline) fails saying so. Before, the movie
    /// came out with no music and nothing said why (the resampler's last few samples of silence
    /// passed for the section).
    @Test func aSectionPastTheSongsEndIsALocatedErrorAtSubmit() throws {
        let dir = temporaryDirectory("song-from-past-end")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=300:duration=5", "-c:a", "aac", dir + "/song.m4a"])
        #expect(r.status == 0, "\(r.err)")
        try Self.project(dir, soundtrack: "{ source: song.m4a, from: 100 }")
        let s = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 60)
        #expect(s.status == 2)
        #expect(s.err.contains("p.yaml:3:23: error: soundtrack.from 100.000 s is at or past the end of song.m4a (5.0"), "\(s.err)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/out.mp4"))
        var song = Soundtrack(source: dir + "/song.m4a", sha256: "")
        song.from = 100
        #expect { _ = try SoundtrackReader(song, needed: 48000) } throws: { error in
            "\(error)".contains("the soundtrack's section from 100.000 s is empty: the song is 5.0")
        }
        song.from = 4.5
        #expect(try SoundtrackReader(song, needed: 48000).section.count / 2 > 20000)
        // A section that covers the movie is heard whole, to its last sample: it never repeats,
        // so nothing is crossfaded (its last 10 ms were mixed with its start).
        song.from = 1
        let covering = try SoundtrackReader(song, needed: 48000)
        #expect(covering.section.count == 2 * 48000)
        #expect(covering.read(48000) == covering.section)
        // One that does not loops, crossfading its last 10 ms into its first.
        song.to = 1.5
        let short = try SoundtrackReader(song, needed: 48000)
        let heard = short.read(48000), n = short.section.count / 2
        // The first pass up to its seam, the seam, then the section from 10 ms on up to its next seam.
        #expect(n == 24000 && heard[..<(2 * (n - 480))] == short.section[..<(2 * (n - 480))]
                && heard[(2 * n)..<(2 * (2 * n - 960))] == short.section[(2 * 480)..<(2 * (n - 480))])
        // A section ending past the song's end renders, and says so (it was silently cut).
        try Self.project(dir, soundtrack: "{ source: song.m4a, from: 1, to: 500 }")
        for command in [["plan"], ["submit", "--state", dir + "/state"]] {
            let told = try run(coordPath, [command[0], dir + "/p.yaml"] + command.dropFirst(), timeout: 60)
            #expect(told.status == 0, "\(command): \(told.err)")
            #expect(told.err.contains("p.yaml:3:23: note: soundtrack.to 500.000 s is past the end of song.m4a (5.0"), "\(command): \(told.err)")
        }
    }
}

@Suite(.serialized) struct BounceTests {
    @Test func bounceGoesForwardThenBackAndEndsOnTheFirstFrame() throws {
        let dir = temporaryDirectory("bounce")
        try Generate.clip(dir + "/c.mp4", width: 640, height: 360, fps: "30", seconds: 2, tone: 440)
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "640x360", clips: ["video: c.mp4\n    bounce: true"])
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        let p = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(p.frames == 119)                              // 60 forward, 59 back
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
        // Frame 60 + k shows forward frame 58 − k, and the last shows the first: each output frame
        // is closer to its expected forward frame than to that frame's neighbours.
        func png(_ n: Int) throws -> String {
            let path = dir + "/f\(n).png"
            if !FileManager.default.fileExists(atPath: path) {
                try extractFrame(dir + "/out.mp4", at: 0, to: path, filter: "select='eq(n\\,\(n))'", seek: false)
            }
            return path
        }
        for (out, forward) in [(118, 0), (60, 58), (89, 29)] {
            let match = try ssim(try png(out), try png(forward))
            for other in [forward - 1, forward + 1] where other >= 0 {
                let neighbour = try ssim(try png(out), try png(other))
                #expect(match > neighbour, "frame \(out): forward \(forward) \(match), forward \(other) \(neighbour)")
            }
            #expect(match > 0.9)
        }
    }

    /// An open-GOP source (HEVC as iPhones and x265 make it): each group's last frames come after
    /// the next key frame in the file and are decoded from it. The way back stopped reading at
    /// that key frame, so those frames were never decoded again: the segment repeated a
    /// neighbour in their place, or (at the way back's first frame) left the slot out, and every
    /// concat using it failed ("segment has 21 frames, expected 23"), the short segment cached.
    /// Every frame of the way back is now its forward frame, and a segment short of frames fails
    /// its own stage.
    @Test func anOpenGOPSourceBouncesWithEveryFrameItsOwn() throws {
        let dir = temporaryDirectory("bounce-open-gop")
        let made = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30:duration=1.5",
                                      "-c:v", "libx265", "-x265-params", "keyint=12:min-keyint=12:scenecut=0:open-gop=1:bframes=3:log-level=error",
                                      "-pix_fmt", "yuv420p", dir + "/og.mp4"])
        try #require(made.status == 0, "ffmpeg: \(made.err)")
        // The source really is open: a frame shown before a key frame comes after it in the file.
        let packets = try run("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts,flags", "-of", "csv=p=0", dir + "/og.mp4"]).out
            .split(separator: "\n").map { $0.split(separator: ",") }.compactMap { p in Int(p[0]).map { ($0, p[1].hasPrefix("K")) } }
        let secondKey = try #require(packets.dropFirst().firstIndex { $0.1 })
        #expect(packets[(secondKey + 1)...].contains { $0.0 < packets[secondKey].0 }, "\(packets)")

        for (name, trim, forward) in [("whole", "", 45), ("to-a-key", "\n    trim: { start: 0, end: 0.4 }", 12)] {
            try writePipeline(dir + "/\(name).yaml", output: dir + "/\(name).mp4", size: "320x240", clips: ["video: og.mp4\n    bounce: true" + trim])
            let r = try run(coordPath, ["submit", dir + "/\(name).yaml", "--state", dir + "/state", "--workers", "1"], timeout: 120)
            #expect(r.status == 0, "\(name): \(r.err)")
            guard r.status == 0 else { continue }
            // Every frame, small and grey: the way back's frame 2n-2-k is forward frame k,
            // nearer to it than to k's neighbours (testsrc2 moves every frame).
            let gray = try run("ffmpeg", ["-v", "error", "-y", "-i", dir + "/\(name).mp4", "-vf", "scale=80:60,format=gray", "-f", "rawvideo", dir + "/\(name).gray"])
            try #require(gray.status == 0, "\(gray.err)")
            let raw = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/\(name).gray")))
            let size = 80 * 60
            let frames = stride(from: 0, to: raw.count - size + 1, by: size).map { Array(raw[$0..<($0 + size)]) }
            #expect(frames.count == 2 * forward - 1, "\(name): \(frames.count) frames")
            guard frames.count == 2 * forward - 1 else { continue }
            func distance(_ a: [UInt8], _ b: [UInt8]) -> Int { zip(a, b).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) } }
            var wrong: [Int] = []
            for k in 0..<(forward - 1) {
                let back = frames[2 * forward - 2 - k]
                let own = distance(back, frames[k])
                if [k - 1, k + 1].contains(where: { $0 >= 0 && $0 < forward && distance(back, frames[$0]) <= own }) { wrong.append(k) }
            }
            #expect(wrong.isEmpty, "\(name): the way back does not show forward frames \(wrong)")
        }
    }

}
