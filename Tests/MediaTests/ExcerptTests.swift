import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport

/// An excerpt stands in for a long clip in a remote submit: a render of the shifted trim from it
/// must be the render of the trim from the whole file, frame for frame and sample for sample.
@Suite struct ExcerptTests {
    /// The segment a render of `trim` of `path` gives, as the bytes of its decoded frames and samples
    /// (ffmpeg's framemd5 of each: the encoder's bits for the same frames are the same too, but the
    /// file's header names its source).
    static func rendered(_ path: String, trim: Trim, edits: Edits = .init(), profile: OutputProfile, dir: String, tag: String) throws -> [String] {
        let pipeline = Pipeline(name: "t", output: profile, items: [Item(kind: .video(source: SourceRef(path), trim: trim), edits: edits)])
        let timeline = try Planner.timeline(for: pipeline, facts: [path: try Probe.facts(path: path)])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: path, frameCount: timeline[0].frameCount)
        let seg = "\(dir)/\(tag).mov"
        _ = try SegmentRenderer.render(spec, to: seg)
        let md5 = try run("ffmpeg", ["-v", "error", "-i", seg, "-map", "0", "-f", "framemd5", "-"])
        try #require(md5.status == 0, "ffmpeg: \(md5.err)")
        return md5.out.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
    }

    /// The output the excerpt-against-whole-file comparisons render to: x264's fastest preset,
    /// since two renders must match frame for frame whatever the preset.
    static func matchProfile(_ dir: String) -> OutputProfile {
        OutputProfile(path: "\(dir)/out.mp4", width: 640, height: 360, fps: Rational(30, 1), video: VideoSettings(preset: "ultrafast"))
    }

    static func make(_ dir: String, _ name: String, video: [String], audio: [String], seconds: Int = 24, rate: String = "30") throws -> String {
        let path = "\(dir)/\(name)"
        let made = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=\(rate):duration=\(seconds),noise=alls=8:allf=t",
                                      "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=\(seconds),aeval=val(0)*sin(t*7)"]
                                 + video + audio + ["-shortest", path])
        try #require(made.status == 0, "ffmpeg: \(made.err)")
        return path
    }

    @Test(arguments: [
        // A phone's H.264 with B-frames, a key frame a second, AAC at 44.1 kHz.
        ("b-frames.mp4", ["-c:v", "libx264", "-preset", "veryfast", "-g", "30", "-bf", "3", "-pix_fmt", "yuv420p"], ["-c:a", "aac"], "30"),
        // An iPhone's HEVC in a .mov, 600 ticks a second, turned by its display matrix. (x265's
        // ultrafast still reorders B-frames two deep, as its default does, and makes the clip in a
        // third of the time.)
        ("iphone.mov", ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error:keyint=30", "-tag:v", "hvc1", "-pix_fmt", "yuv420p10le",
                        "-color_primaries", "bt2020", "-color_trc", "arib-std-b67", "-colorspace", "bt2020nc",
                        "-video_track_timescale", "600", "-metadata:s:v", "rotate=90"], ["-c:a", "aac", "-ar", "48000"], "30"),
        // 29.97 frames a second, key frames 2 s apart.
        ("ntsc.mp4", ["-c:v", "libx264", "-preset", "veryfast", "-g", "60", "-pix_fmt", "yuv420p"], ["-c:a", "aac"], "30000/1001"),
    ])
    func anExcerptRendersTheSameAsTheWholeFile(name: String, video: [String], audio: [String], rate: String) throws {
        let dir = temporaryDirectory()
        let path = try Self.make(dir, name, video: video, audio: audio, rate: rate)
        let profile = Self.matchProfile(dir)
        // Trims in the middle, one near the start, and (the last three) to the clip's end: one with
        // no end, one whose end has no key frame half a second after it before the clip ends.
        let trims = [Trim(start: 9.5, end: 12.5), Trim(start: 10, end: 11.1), Trim(start: 12.345, end: 15.01), Trim(start: 0.6, end: 2.5),
                     Trim(start: 17.2), Trim(start: 20.01, end: 23.7), Trim(start: 14.5)]
        let length = try Probe.facts(path: path).duration
        for (k, trim) in trims.enumerated() {
            let excerpt = "\(dir)/ex\(k).mov"
            let made = try #require(try Excerpt.make(path: path, start: trim.start, end: trim.end, into: excerpt), "\(name) \(trim): no excerpt")
            let toEnd = trim.end.map { $0 + 0.5 >= length - 1 } ?? true
            #expect(made.from <= trim.start - 0.5 + 1e-9 && (toEnd ? abs(made.to - length) < 0.05 : made.to >= trim.end! + 0.5), "\(trim): \(made), clip \(length) s")
            let whole = (try FileManager.default.attributesOfItem(atPath: path)[.size] as! NSNumber).int64Value
            #expect(made.bytes < whole / 2, "\(name): excerpt \(made.bytes) of \(whole) bytes")
            // A trim to the end names the original's (as a remote submit sends it).
            #expect(toEnd == (made.clipEnd != nil), "\(made)")
            let shifted = Trim(start: trim.start + made.shift, end: (trim.end ?? made.clipEnd).map { $0 + made.shift })
            let (a, b) = try bothAtOnce({ try Self.rendered(path, trim: trim, profile: profile, dir: dir, tag: "whole\(k)") },
                                        { try Self.rendered(excerpt, trim: shifted, profile: profile, dir: dir, tag: "excerpt\(k)") })
            #expect(a.count > 60)
            #expect(a == b, "\(name) \(trim): the excerpt's render differs (\(zip(a, b).filter { $0 != $1 }.count) of \(a.count) frames and sample blocks)")
        }
    }

    /// Colour said only by the container (a `colr` box; the stream itself says nothing) goes
    /// with the excerpt: BT.709 on a 640x360 clip, which untagged would be taken as BT.601.
    @Test func colourTheContainerStatesGoesWithIt() throws {
        let dir = temporaryDirectory()
        let plain = try Self.make(dir, "plain.mp4", video: ["-c:v", "libx264", "-preset", "veryfast", "-g", "30", "-pix_fmt", "yuv420p"], audio: ["-c:a", "aac"])
        let path = dir + "/tagged.mp4"
        let tagged = try run("ffmpeg", ["-v", "error", "-y", "-i", plain, "-c", "copy",
                                        "-color_primaries", "bt709", "-color_trc", "bt709", "-colorspace", "bt709", path])
        try #require(tagged.status == 0, "ffmpeg: \(tagged.err)")
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 640, height: 360, fps: Rational(30, 1))
        let trim = Trim(start: 10.2, end: 11.5)
        let made = try #require(try Excerpt.make(path: path, start: trim.start, end: trim.end!, into: "\(dir)/ex.mov"))
        let shifted = Trim(start: trim.start + made.shift, end: trim.end! + made.shift)
        let a = try Self.rendered(path, trim: trim, profile: profile, dir: dir, tag: "w")
        #expect(a != (try Self.rendered(plain, trim: trim, profile: profile, dir: dir, tag: "p")), "the tag changes nothing: this proves nothing")
        #expect(a == (try Self.rendered("\(dir)/ex.mov", trim: shifted, profile: profile, dir: dir, tag: "e")), "the excerpt lost the container's colour")
    }

    /// Slowed down, and bounced (forward then back), a render reads the same stretch.
    @Test func speedAndReverseReadOnlyTheExcerpt() throws {
        let dir = temporaryDirectory()
        let path = try Self.make(dir, "a.mp4", video: ["-c:v", "libx264", "-preset", "veryfast", "-g", "30", "-pix_fmt", "yuv420p"], audio: ["-c:a", "aac"])
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 640, height: 360, fps: Rational(30, 1))
        let trim = Trim(start: 8.2, end: 10.2)
        let made = try #require(try Excerpt.make(path: path, start: trim.start, end: trim.end!, into: "\(dir)/ex.mov"))
        let shifted = Trim(start: trim.start + made.shift, end: trim.end! + made.shift)
        var bounce = Edits()
        bounce.bounce = true
        for (k, edits) in [Edits(speed: 0.5), bounce].enumerated() {
            let (a, b) = try bothAtOnce({ try Self.rendered(path, trim: trim, edits: edits, profile: profile, dir: dir, tag: "w\(k)") },
                                        { try Self.rendered("\(dir)/ex.mov", trim: shifted, edits: edits, profile: profile, dir: dir, tag: "e\(k)") })
            #expect(a == b, "\(edits): the excerpt's render differs")
        }
    }

    /// What cannot be cut exactly is not cut: a trim too near the start or past the end, a file with one key
    /// frame (but whole), a container without an index, and to the end, a file whose end an excerpt would
    /// move (a second audio track that runs on after the picture and the first).
    @Test func noExcerptWhereItCannotBeExact() throws {
        let dir = temporaryDirectory()
        let path = try Self.make(dir, "a.mp4", video: ["-c:v", "libx264", "-preset", "veryfast", "-g", "30", "-pix_fmt", "yuv420p"], audio: ["-c:a", "aac"])
        #expect(try Excerpt.make(path: path, start: 0.4, end: 5, into: "\(dir)/x1.mov") == nil)
        // A trim past the clip's end: its note names the clip's length.
        #expect(try Excerpt.make(path: path, start: 16, end: 30, into: "\(dir)/x6.mov") == nil)
        let longer = dir + "/longer.mp4"
        let made = try run("ffmpeg", ["-v", "error", "-y", "-i", path, "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=44100:duration=27",
                                      "-map", "0:v", "-map", "0:a", "-map", "1:a", "-c:v", "copy", "-c:a", "aac", longer])
        try #require(made.status == 0, "ffmpeg: \(made.err)")
        #expect(try Excerpt.make(path: longer, start: 16, end: nil, into: "\(dir)/x2.mov") == nil)
        #expect(try Excerpt.make(path: longer, start: 10, end: 12, into: "\(dir)/x5.mov") != nil, "the second track is not what refused it")
        let oneKey = try Self.make(dir, "one.mp4", video: ["-c:v", "libx264", "-preset", "veryfast", "-g", "1000", "-sc_threshold", "0", "-pix_fmt", "yuv420p"], audio: ["-c:a", "aac"])
        // (From its one key frame to its end: all of it, which a remote submit sends as it is.)
        let all = try Excerpt.make(path: oneKey, start: 10, end: 12, into: "\(dir)/x7.mov")
        let size = (try FileManager.default.attributesOfItem(atPath: oneKey)[.size] as! NSNumber).int64Value
        #expect(all.map { $0.from == 0 && $0.clipEnd != nil && $0.bytes > size * 9 / 10 } ?? true, "\(String(describing: all))")
        let ts = try Self.make(dir, "a.ts", video: ["-c:v", "libx264", "-preset", "veryfast", "-g", "30", "-pix_fmt", "yuv420p"], audio: ["-c:a", "aac"])
        #expect(try Excerpt.make(path: ts, start: 10, end: 12, into: "\(dir)/x4.mov") == nil)
        for k in [1, 2, 4, 6] { #expect(!FileManager.default.fileExists(atPath: "\(dir)/x\(k).mov")) }
    }
}

/// The corpus's phone and camera clips long enough to trim 2 s from their middle with margins
/// (a GoPro's HEVC with its data tracks, an HEVC test clip, a variable-rate one, one with an edit list).
@Suite(.enabled(if: sharedMedia != nil, "../shared/media is absent: corpus excerpt tests skipped"))
struct CorpusExcerptTests {
    @Test(arguments: ["gpmf-parser/max-heromode.mp4", "mediabunny/video-h265.mp4", "mediabunny/cursed-vfr.mp4", "mediabunny/edts.mp4"])
    func anExcerptOfARealClipRendersTheSame(file: String) throws {
        let dir = temporaryDirectory()
        let path = sharedMedia! + "/" + file
        let profile = ExcerptTests.matchProfile(dir)
        let trim = Trim(start: 3, end: 5)
        let made = try #require(try Excerpt.make(path: path, start: trim.start, end: trim.end!, into: "\(dir)/ex.mov"), "\(file): no excerpt")
        let (a, b) = try bothAtOnce({ try ExcerptTests.rendered(path, trim: trim, profile: profile, dir: dir, tag: "whole") },
                                    { try ExcerptTests.rendered("\(dir)/ex.mov", trim: Trim(start: trim.start + made.shift, end: trim.end! + made.shift),
                                                                profile: profile, dir: dir, tag: "excerpt") })
        #expect(a.count >= 60 && a == b, "\(file): the excerpt's render differs (\(zip(a, b).filter { $0 != $1 }.count) of \(a.count)): \(zip(a, b).filter { $0 != $1 }.prefix(3))")
        // To the clip's end.
        let toEnd = Trim(start: 3)
        let end = try #require(try Excerpt.make(path: path, start: toEnd.start, end: nil, into: "\(dir)/end.mov"), "\(file): no excerpt to its end")
        let shifted = Trim(start: toEnd.start + end.shift, end: try #require(end.clipEnd) + end.shift)
        let (c, d) = try bothAtOnce({ Result { try ExcerptTests.rendered(path, trim: toEnd, profile: profile, dir: dir, tag: "whole-end") } },
                                    { Result { try ExcerptTests.rendered("\(dir)/end.mov", trim: shifted, profile: profile, dir: dir, tag: "excerpt-end") } })
        switch (c, d) {
        case let (.success(c), .success(d)):
            #expect(c.count >= 30 && c == d, "\(file) to its end: the excerpt's render differs (\(c.count) against \(d.count); \(zip(c, d).filter { $0 != $1 }.count) differ): \(zip(c, d).filter { $0 != $1 }.prefix(3))")
        case let (.failure(a), .failure(b)):
            // cursed-vfr.mp4 claims more video than it holds: a render to its end fails, from either.
            print("\(file) to its end: fails from the whole file (\(a)) and from the excerpt (\(b))")
            #expect("\(a)".contains("truncated") && "\(b)".contains("truncated"), "\(file): \(a) / \(b)")
        default:
            Issue.record("\(file) to its end: the whole file's render \(c.map { "gives \($0.count) frames and sample blocks" }), the excerpt's \(d.map { "gives \($0.count)" })")
        }
    }
}
