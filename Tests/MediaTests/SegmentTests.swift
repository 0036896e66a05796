import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport
internal import CFFmpeg

/// Renders clips straight through the media engine (no coordinator) and checks the result.
@Suite struct SegmentTests {
    static func render(_ sources: [(String, Item)], profile: OutputProfile, dir: String) throws -> (String, [ItemTiming]) {
        let pipeline = Pipeline(name: "t", output: profile, items: sources.map(\.1))
        var facts: [String: MediaFacts] = [:]
        for (path, _) in sources { facts[path] = try Probe.facts(path: path) }
        let timeline = try Planner.timeline(for: pipeline, facts: facts)
        var inputs: [ConcatInput] = []
        for (i, t) in timeline.enumerated() {
            let spec = Planner.segmentSpec(pipeline, index: i, sourcePath: sources[i].0, frameCount: t.frameCount)
            let seg = "\(dir)/seg\(i).mov"
            let report = try SegmentRenderer.render(spec, to: seg)
            #expect(report.framesOut == t.frameCount)
            #expect(report.samplesOut == spec.sampleCount)
            inputs.append(ConcatInput(path: seg, frameCount: t.frameCount, sampleCount: t.sampleCount, label: "clip \(i)"))
        }
        let out = "\(dir)/out.mp4"
        _ = try Concat.run(inputs, profile: profile, to: out)
        return (out, timeline)
    }

    static func video(_ path: String, trim: Trim? = nil, edits: Edits = .init()) -> (String, Item) {
        (path, Item(kind: .video(source: SourceRef(path), trim: trim), edits: edits))
    }

    /// One stage key, one segment: the bits may not depend on what the worker's memory held.
    /// A worker keeps freed buffers in its heap (`MediaMemory`), so each stage's encoder gets
    /// memory an earlier stage wrote; here the heap is filled with three different patterns
    /// before three renders of the same 1080x1080 segment. libx264's AVX-512 functions read
    /// memory they never wrote, and on a CPU with AVX-512 the three files differed until x264
    /// was kept to AVX2 (`X264Assembly`); elsewhere x264 does not use them.
    @Test func aSegmentsBitsDoNotDependOnWhatTheMemoryHeld() throws {
        let dir = temporaryDirectory()
        // A picture with detail everywhere (testsrc2 alone is too plain to show it).
        let made = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30:duration=3,noise=alls=30:allf=t",
                                      "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "\(dir)/a.mp4"])
        try #require(made.status == 0, "ffmpeg: \(made.err)")
        MediaMemory.keepFreedBuffers()
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 1080, height: 1080, fps: Rational(25, 1))
        let pipeline = Pipeline(name: "t", output: profile, items: [Self.video("\(dir)/a.mp4", trim: Trim(start: 1)).1])
        let facts = try Probe.facts(path: "\(dir)/a.mp4")
        let timeline = try Planner.timeline(for: pipeline, facts: ["\(dir)/a.mp4": facts])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: "\(dir)/a.mp4", frameCount: timeline[0].frameCount)
        var files: [Data] = []
        for pattern: Int32 in [0x00, 0x55, 0xAA] {
            // Dirty the heap: blocks of the sizes frames and x264's planes take, written and freed.
            let blocks = (0..<16).map { _ in malloc(3 << 20)! }
            for b in blocks { memset(b, pattern, 3 << 20) }
            for b in blocks { free(b) }
            let seg = "\(dir)/seg\(pattern).mov"
            _ = try SegmentRenderer.render(spec, to: seg)
            files.append(try Data(contentsOf: URL(fileURLWithPath: seg)))
        }
        #expect(files[0] == files[1] && files[1] == files[2],
                "the same segment rendered after different heap contents: \(files.map(\.count)) bytes, equal: \(files[0] == files[1]), \(files[1] == files[2])")
    }

    /// A full-range source (a GoPro's 848x480 yuvj420p) cropped to fill 1280x720: scaled first,
    /// it was 1280x725, and the colour conversion after the resize refuses an odd 4:2:0 size, so
    /// the stage failed ("cannot build the filter graph … Not yet implemented"), turned or not.
    @Test func aFullRangeSourceCroppedToFillAnOddScaledSizeRenders() throws {
        let dir = temporaryDirectory()
        var profile = OutputProfile(path: "\(dir)/out.mp4", width: 1280, height: 720, fps: Rational(30, 1))
        profile.fit = .crop
        for rotate in [0, 90] {
            var edits = Edits()
            edits.rotate = rotate
            let (probe, frames) = try Self.renderMade(["-i", "testsrc2=size=848x480:rate=30:duration=0.5", "-pix_fmt", "yuvj420p", "-color_range", "pc"],
                                                     edits: edits, profile: profile, dir: dir)
            #expect(probe.width == 1280 && probe.height == 720 && probe.frames == frames, "rotate \(rotate): \(probe)")
        }
    }

    /// A crop edit on a picture narrower or shorter than 2 pixels (the corpus has a 1x1 clip):
    /// the crop's 2-pixel floor asked for more than the picture has, and the stage failed with
    /// the whole filter graph in its error. Such a picture is not cropped.
    @Test func aCropEditOnAOnePixelSourceRenders() throws {
        let dir = temporaryDirectory()
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 180, fps: Rational(30, 1))
        var edits = Edits()
        edits.crop = CropRect(x: 0.1, y: 0, width: 0.8, height: 1)
        let (probe, frames) = try Self.renderMade(["-i", "testsrc2=size=64x64:rate=30:duration=0.3", "-vf", "scale=1:1", "-pix_fmt", "yuv444p"],
                                                 edits: edits, profile: profile, dir: dir)
        #expect(probe.width == 320 && probe.height == 180 && probe.frames == frames, "\(probe)")
    }

    /// A clip ffmpeg makes from a lavfi source (`made`: its input and output options), rendered
    /// with `edits` into `profile`: the movie's probe and the frames the plan gives it.
    static func renderMade(_ made: [String], edits: Edits, profile: OutputProfile, dir: String) throws -> (ProbeResult, Int) {
        let source = "\(dir)/made.mp4"
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi"] + made + ["-c:v", "libx264", "-preset", "ultrafast", source])
        try #require(r.status == 0, "ffmpeg: \(r.err)")
        let (out, timeline) = try render([(source, Item(kind: .video(source: SourceRef(source), trim: nil), edits: edits))], profile: profile, dir: dir)
        return (try ffprobe(out, countFrames: true), timeline[0].frameCount)
    }

    /// An HEVC segment of one or two frames (a very short trim, a poster): libx265 sets such a
    /// segment's dts from a field it fills only once it has seen more frames than its B-frame
    /// delay, so the dts was whatever the memory held. The muxer then refused the packet
    /// ("pts/dts pair unsupported": the stage failed, permanently) or wrote a made-up timeline.
    /// Every such segment, rendered after other encoders have used and freed the memory, has
    /// each frame's dts equal to its pts.
    @Test func anHEVCSegmentOfOneOrTwoFramesHasSaneTimestamps() throws {
        let dir = temporaryDirectory()
        try Generate.clip("\(dir)/a.mp4", width: 320, height: 240, seconds: 1, tone: 440)
        var profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 568, fps: Rational(30, 1))
        profile.video.codec = "hevc"
        profile.fit = .blur
        let facts = try Probe.facts(path: "\(dir)/a.mp4")
        var bad: [String] = []
        for k in 0..<60 {
            let frames = 1 + k % 2
            var edits = Edits(look: .noir)
            edits.text = TextOverlay(value: "June \(k)")
            let item = k % 3 == 0 ? Item(kind: .title(Title(text: "Title \(k)", duration: Double(frames) / 30)))
                : Item(kind: .video(source: SourceRef("\(dir)/a.mp4"), trim: Trim(start: Double(k % 10) / 30, end: Double(k % 10 + frames) / 30)), edits: edits)
            let pipeline = Pipeline(name: "t", output: profile, items: [item])
            let timeline = try Planner.timeline(for: pipeline, facts: ["\(dir)/a.mp4": facts])
            #expect(timeline[0].frameCount == frames)
            let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: k % 3 == 0 ? "" : "\(dir)/a.mp4", frameCount: frames)
            let seg = "\(dir)/seg\(k).mov"
            do { _ = try SegmentRenderer.render(spec, to: seg) } catch { bad.append("\(k) (\(frames) frames): \(error)"); continue }
            let packets = try run("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts,dts", "-of", "csv=p=0", seg]).out
            let pairs = packets.split(separator: "\n").map { $0.split(separator: ",").map(String.init) }
            if pairs.count != frames || pairs.contains(where: { $0.count != 2 || $0[0] != $0[1] }) { bad.append("\(k) (\(frames) frames): \(pairs)") }
        }
        #expect(bad.isEmpty, "\(bad.count) of 60 segments: \(bad.joined(separator: "; "))")
    }

    /// The encoder and the muxer run on the segment's encode lane, behind the renderer. A file
    /// that cannot be written fails at once (its header, on the renderer's thread); a write that
    /// fails later fails on the lane, and must still reach the renderer as the stage's error
    /// rather than leave a broken file behind a success. Here the muxer refuses a frame handed
    /// over twice (the same time twice in the stream).
    @Test func aFailureOnTheEncodeLaneReachesTheRenderer() throws {
        let dir = temporaryDirectory()
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 240, fps: Rational(30, 1))
        let full = #expect(throws: MediaError.self) {
            _ = try SegmentWriter(profile: profile, sampleCount: 48000, path: "/dev/full", name: "full")
        }
        #expect(full.map { "\($0)" }?.contains("No space left") == true, "\(String(describing: full))")
        #expect(full.map { "\($0)" }?.contains("free space on that disk") == true, "a full disk says what to do: \(String(describing: full))")

        let writer = try SegmentWriter(profile: profile, sampleCount: 48000, path: "\(dir)/seg.mov", name: "twice")
        let frame = try Self.greyFrame()
        let error = #expect(throws: MediaError.self) {
            for slot in [0, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9] + Array(10..<60) { try writer.writeVideo(frame.ptr, slot: slot) }
            try writer.finish()
        }
        #expect(error.map { "\($0)" }?.contains("seg.mov") == true, "the lane's error names the file: \(String(describing: error))")
    }

    /// A mid-grey 320x240 yuv420p frame, for handing to a segment writer directly.
    static func greyFrame() throws -> Frame {
        let frame = Frame()
        frame.ptr.pointee.width = 320; frame.ptr.pointee.height = 240; frame.ptr.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        try #require(av_frame_get_buffer(frame.ptr, 0) >= 0)
        let f = frame.ptr.pointee
        for (plane, bytes) in [(f.data.0, Int(f.linesize.0) * 240), (f.data.1, Int(f.linesize.1) * 120), (f.data.2, Int(f.linesize.2) * 120)] {
            memset(plane!, 128, bytes)
        }
        return frame
    }

    /// A segment that did not get every planned frame fails its own stage, naming the counts,
    /// rather than being kept as rendered and failing every concat that uses it.
    @Test func aSegmentShortOfItsPlannedFramesFails() throws {
        let dir = temporaryDirectory()
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 240, fps: Rational(30, 1))
        let frame = try Self.greyFrame()
        for (written, planned) in [(29, 30), (30, 30)] {
            let writer = try SegmentWriter(profile: profile, sampleCount: 48000, path: "\(dir)/seg\(written).mov", name: "short", frameCount: planned)
            var report = SegmentReport()
            for slot in 0..<written { try writer.write(frame.ptr, slot: slot, report: &report) }
            if written == planned {
                try writer.finish(report: &report)
            } else {
                let error = #expect(throws: MediaError.self) { try writer.finish(report: &report) }
                #expect(error.map { "\($0)" }?.contains("rendered 29 frames of the 30 planned") == true, "\(String(describing: error))")
            }
        }
    }

    /// A movie's audio is AAC-encoded in chunks of 10.92 s on as many threads as there are cores,
    /// spliced at AAC frame boundaries (`AudioChunks`). No splice may be heard: around each one
    /// the decoded movie follows its source as closely as it does anywhere else.
    @Test func longAudioIsSplicedWithoutAClick() throws {
        let dir = temporaryDirectory()
        try Generate.clip("\(dir)/a.mp4", width: 160, height: 90, fps: "30", seconds: 36, tone: 440)
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 160, height: 90, fps: Rational(30, 1))
        let (out, timeline) = try Self.render([Self.video("\(dir)/a.mp4")], profile: profile, dir: dir)
        let total = timeline.reduce(0) { $0 + $1.sampleCount }
        let splices = AudioChunks.layout(total: total).dropFirst().map { Int($0.keep.lowerBound) }
        #expect(splices.count == 3, "36 s of audio is four chunks: \(splices)")
        let movie = try decodeAudio(out), source = try decodeAudio("\(dir)/a.mp4")
        #expect(abs(movie.count - source.count) <= 1024)
        // The generated source is mono; the movie is stereo with it at -3 dB in each channel
        // (FFmpeg's centre mix level), so it is compared at its own level.
        let n = min(movie.count, source.count)
        var cross = 0.0, power = 0.0
        for k in 0..<n {
            let a = Double(movie[k]), b = Double(source[k])
            cross += a * b
            power += b * b
        }
        let gain = cross / power
        #expect(gain > 0.6 && gain < 1.1, "the movie's level against its source: \(gain)")
        func worstError(around c: Int) -> Int {
            var worst = 0.0
            for k in c - 2048..<c + 2048 { worst = max(worst, abs(Double(movie[k]) - gain * Double(source[k]))) }
            return Int(worst.rounded())
        }
        // Halfway between splices, and a little after those places.
        var between: [Int] = []
        for (a, b) in zip([0] + splices, splices) { between += [(a + b) / 2, (a + b) / 2 + 5000] }
        let elsewhere = between.map(worstError).max()!
        // The tone is 1/8 of full scale (4096): a dropped, doubled or misaligned AAC frame is
        // an error of thousands; two encodings of the same signal agree to a few dozen.
        #expect(elsewhere < 400, "the movie follows its source away from the splices (worst error \(elsewhere))")
        for m in splices {
            let atSplice = worstError(around: m)
            #expect(atSplice <= max(2 * elsewhere, 100), "worst error at the splice at sample \(m): \(atSplice), elsewhere \(elsewhere)")
        }
    }

    /// Two rendered segments of tones (440 and 660 Hz) at 160x90, `first` and `second` seconds
    /// long, with the concat inputs the plan gives them.
    static func twoToneSegments(seconds first: Double, _ second: Double) throws -> (String, OutputProfile, [ConcatInput]) {
        let dir = temporaryDirectory()
        try Generate.clip("\(dir)/a.mp4", width: 160, height: 90, fps: "30", seconds: first, tone: 440)
        try Generate.clip("\(dir)/b.mp4", width: 160, height: 90, fps: "30", seconds: second, tone: 660)
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 160, height: 90, fps: Rational(30, 1))
        let pipeline = Pipeline(name: "t", output: profile, items: [Self.video("\(dir)/a.mp4").1, Self.video("\(dir)/b.mp4").1])
        let timeline = try Planner.timeline(for: pipeline, facts: ["\(dir)/a.mp4": try Probe.facts(path: "\(dir)/a.mp4"),
                                                                   "\(dir)/b.mp4": try Probe.facts(path: "\(dir)/b.mp4")])
        var inputs: [ConcatInput] = []
        for (i, t) in timeline.enumerated() {
            let spec = Planner.segmentSpec(pipeline, index: i, sourcePath: "\(dir)/\(i == 0 ? "a" : "b").mp4", frameCount: t.frameCount)
            _ = try SegmentRenderer.render(spec, to: "\(dir)/seg\(i).mov")
            inputs.append(ConcatInput(path: "\(dir)/seg\(i).mov", frameCount: t.frameCount, sampleCount: t.sampleCount, label: "clip \(i)"))
        }
        return (dir, profile, inputs)
    }

    /// Encoded audio chunks are kept by their sound: a concat whose audio begins as an earlier
    /// one's did encodes only the chunks from the first difference on, and its movie is the same,
    /// byte for byte, as one made without the cache.
    @Test func aLaterEditReencodesOnlyTheAudioAfterIt() throws {
        let (dir, profile, inputs) = try Self.twoToneSegments(seconds: 24, 12)
        // The edit: the second item ends a second earlier.
        var edited = inputs
        edited[1].frameCount -= 30; edited[1].sampleCount -= 48_000
        let cache = "\(dir)/chunks"
        let first = try Concat.run(inputs, profile: profile, to: "\(dir)/first.mp4", audioCache: cache)
        #expect(first.audioChunks == 4 && first.audioChunksReused == 0)
        let again = try Concat.run(inputs, profile: profile, to: "\(dir)/again.mp4", audioCache: cache)
        #expect(again.audioChunksReused == again.audioChunks, "the same movie again takes every chunk from the cache")
        let edit = try Concat.run(edited, profile: profile, to: "\(dir)/edit.mp4", audioCache: cache)
        // The movie's first 35 s are unchanged: chunks 0-2 (to 32.77 s, plus a frame) are reused
        // and only the last one, now 32.73-35 s, is encoded.
        #expect(edit.audioChunks == 4 && edit.audioChunksReused == 3, "\(edit)")
        let fresh = try Concat.run(edited, profile: profile, to: "\(dir)/fresh.mp4")
        #expect(fresh.audioChunksReused == 0)
        let bytes = { (name: String) in FileManager.default.contents(atPath: "\(dir)/\(name).mp4") }
        #expect(bytes("again") == bytes("first"))
        #expect(bytes("edit") == bytes("fresh"), "a movie made with reused chunks is the one made without them")
        #expect(bytes("edit") != bytes("first"))
        // A damaged cache file is a miss, not a broken movie.
        for name in try FileManager.default.contentsOfDirectory(atPath: cache) {
            try Data([1, 2, 3]).write(to: URL(fileURLWithPath: "\(cache)/\(name)"))
        }
        let damaged = try Concat.run(edited, profile: profile, to: "\(dir)/damaged.mp4", audioCache: cache)
        #expect(damaged.audioChunksReused == 0)
        #expect(bytes("damaged") == bytes("fresh"))
    }

    /// A concat that fails after some audio chunks have begun encoding (the second segment is
    /// shorter than planned) reports that segment, and does so again each time it is run.
    @Test func aConcatThatFailsHalfWayReportsTheSegment() throws {
        let (dir, profile, planned) = try Self.twoToneSegments(seconds: 24, 2)
        var inputs = planned
        // The plan says the second segment is 30 frames longer than it is: the first's 24 s of
        // sound have started two chunks by the time that is found.
        inputs[1].frameCount += 30; inputs[1].sampleCount += 48_000
        for _ in 0..<3 {
            #expect {
                _ = try Concat.run(inputs, profile: profile, to: "\(dir)/out.mp4", audioCache: "\(dir)/chunks")
            } throws: { error in
                "\(error)".contains("clip 1") && "\(error)".contains("expected \(inputs[1].frameCount)")
            }
        }
    }

    /// A clip whose sound runs on after its picture (the container 3 s, the video stream 1 s) is
    /// played as players play it: three seconds, the last frame held under the sound. It is not a
    /// truncated file: its video ends where its own stream says it does. A file cut off mid-way
    /// still fails.
    @Test func aClipWhoseAudioOutlastsItsVideoHoldsItsLastFrame() throws {
        let dir = temporaryDirectory()
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30:duration=1",
                                   "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3",
                                   "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "\(dir)/long.mp4"])
        #expect(r.status == 0, "\(r.err)")
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 240, fps: Rational(30, 1))
        let (out, timeline) = try Self.render([Self.video("\(dir)/long.mp4")], profile: profile, dir: dir)
        #expect(timeline.map(\.frameCount) == [90])
        let p = try ffprobe(out, countFrames: true)
        #expect(p.frames == 90)
        #expect(longestSilenceMs(try decodeAudio(out)) < 5)
        // The picture stops moving where the video ends: the last frame is the one at 1 s.
        let held = try playerFrame(out, frame: 45), last = try playerFrame(out, frame: 89), moving = try playerFrame(out, frame: 15)
        #expect(held.rgb == last.rgb)
        #expect(moving.rgb != last.rgb)

        // The same picture cut off at its 40th frame, its index still claiming 4 s: truncated.
        try Generate.clip("\(dir)/full.mp4", seconds: 4, tone: nil)
        let positions = try run("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pos", "-of", "csv=p=0", "\(dir)/full.mp4"])
        let cut = Int(positions.out.split(separator: "\n")[39].trimmingCharacters(in: .whitespaces))!
        try FileManager.default.contents(atPath: "\(dir)/full.mp4")!.prefix(cut).write(to: URL(fileURLWithPath: "\(dir)/cut.mp4"))
        let error = #expect(throws: MediaError.self) {
            _ = try Self.render([Self.video("\(dir)/cut.mp4")], profile: profile, dir: dir)
        }
        #expect("\(String(describing: error))".contains("the file is truncated: its video ends at 1.267 s but it claims 4.000 s"), "\(String(describing: error))")
    }

    /// A header that claims far more than the file holds. A QuickTime movie header rewritten to
    /// say 136 years over streams of 2 s was planned as 136 years of its last frame (and `coord
    /// plan` printed its frame count as -400): a player plays the streams, so the clip is as long
    /// as its streams say. A Matroska header claiming 5·10^12 s is refused when probed, as the
    /// file's fault, not a worker's; one claiming 10^7 s over streams that say nothing fails its
    /// render at once as truncated, not after hours of a held frame.
    @Test func aHeaderClaimingCenturiesIsNotPlannedAsCenturies() throws {
        let dir = temporaryDirectory()
        for ext in ["mov", "mkv"] {
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=2",
                                       "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=2",
                                       "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "\(dir)/a.\(ext)"])
            #expect(r.status == 0, "\(r.err)")
        }
        // The movie header (mvhd, version 0): a timescale of 1 and a duration of 2^32 - 16.
        var mov = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/a.mov"))
        let mvhd = try #require(mov.range(of: Data("mvhd".utf8))).lowerBound
        #expect(mov[mvhd + 4] == 0)
        mov.replaceSubrange(mvhd + 16..<mvhd + 24, with: [0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xF0])
        try mov.write(to: URL(fileURLWithPath: "\(dir)/centuries.mov"))
        let claimed = try run("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", "\(dir)/centuries.mov"])
        #expect(claimed.out.hasPrefix("4294967280"), "the header is not what the test means: \(claimed.out)")
        let facts = try Probe.facts(path: "\(dir)/centuries.mov")
        #expect(facts.duration > 1.9 && facts.duration < 2.2, "\(facts.duration)")
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 240, fps: Rational(25, 1))
        let (out, timeline) = try Self.render([Self.video("\(dir)/centuries.mov")], profile: profile, dir: dir)
        #expect(timeline.map(\.frameCount) == [Timing.frames(seconds: facts.duration, fps: Rational(25, 1))])
        #expect(try ffprobe(out, countFrames: true).frames == timeline[0].frameCount)

        // Matroska's segment duration (0x4489, an 8-byte float of milliseconds).
        let mkv = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/a.mkv"))
        let at = try #require(mkv.range(of: Data([0x44, 0x89, 0x88]))).upperBound
        for (name, ms) in [("aeons", 5e15), ("years", 1e10)] {
            var patched = mkv
            withUnsafeBytes(of: ms.bitPattern.bigEndian) { patched.replaceSubrange(at..<at + 8, with: $0) }
            try patched.write(to: URL(fileURLWithPath: "\(dir)/\(name).mkv"))
        }
        let aeons = #expect(throws: MediaError.self) { _ = try Probe.facts(path: "\(dir)/aeons.mkv") }
        #expect(aeons?.message == "the file's header is broken: it reports a duration of 5000000000000.0 s", "\(String(describing: aeons))")
        #expect(aeons?.errorClass == .permanent)
        let years = try Probe.facts(path: "\(dir)/years.mkv")
        #expect(years.duration == 1e7)
        let started = Date()
        let truncated = #expect(throws: MediaError.self) {
            _ = try Self.render([Self.video("\(dir)/years.mkv", trim: Trim(start: 0, end: 600))], profile: profile, dir: dir)
        }
        #expect("\(String(describing: truncated))".contains("the file is truncated"), "\(String(describing: truncated))")
        #expect(Date().timeIntervalSince(started) < 30)
    }

    /// A camcorder's interlaced clip (1080i, DV) stores two fields a frame, a 60th of a second
    /// apart: scaled as it is, a moving edge shows twice, combed. It is deinterlaced before
    /// anything else (bwdif), a frame per field when the movie is faster than its frames, and on
    /// a bounce's way back too. Judged against the same motion stored as whole frames, rendered
    /// the same way: the deinterlaced render is closer to it than the interlaced picture taken as
    /// it is (34.4 against 30.0 dB; at 60 fps a frame per frame would be 29.3; 50i PAL in a 30 fps
    /// movie, 34.3 against 29.4, and 28.7 a frame per frame). Its key says so.
    @Test func anInterlacedClipIsDeinterlaced() throws {
        let dir = temporaryDirectory()
        var r: (status: Int32, out: String, err: String)
        // Fields at 59.94 a second (1080i60's rate) and at 50 (PAL), and the same motion in frames.
        for (name, rate) in [("60", "60000/1001"), ("50", "50")] {
            let motion = "testsrc2=size=640x480:rate=\(rate):duration=2"
            r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", motion, "-vf", "tinterlace=mode=interleave_top,setfield=tff",
                                   "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0", "-flags", "+ildct+ilme", "-x264opts", "tff=1",
                                   "-pix_fmt", "yuv420p", "\(dir)/fields\(name).mp4"])
            #expect(r.status == 0, "\(r.err)")
            r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", motion, "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0",
                                   "-pix_fmt", "yuv420p", "\(dir)/frames\(name).mp4"])
            #expect(r.status == 0, "\(r.err)")
        }
        let fields = try Probe.facts(path: "\(dir)/fields60.mp4"), frames = try Probe.facts(path: "\(dir)/frames60.mp4")
        #expect(fields.interlaced == true)
        #expect(frames.interlaced == nil)
        // DV stores fields, though its streams name no field order.
        r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=720x480:rate=30000/1001:duration=0.2",
                               "-c:v", "dvvideo", "-pix_fmt", "yuv411p", "\(dir)/tape.avi"])
        #expect(r.status == 0, "\(r.err)")
        #expect(try Probe.facts(path: "\(dir)/tape.avi").interlaced == true)
        for (rate, fps, bounce) in [("60", 30, false), ("60", 60, false), ("60", 30, true), ("50", 30, false)] {
            let profile = OutputProfile(path: "\(dir)/out.mp4", width: 640, height: 480, fps: Rational(fps, 1))
            func render(_ name: String, facts: MediaFacts, deinterlace: Bool = true) throws -> (String, SegmentSpec) {
                var edits = Edits()
                edits.bounce = bounce
                let pipeline = Pipeline(name: "t", output: profile, items: [Self.video("\(dir)/\(name).mp4", edits: edits).1])
                let frameCount = try Planner.frameCount(of: pipeline.items[0], index: 0, facts: facts, fps: profile.fps)
                var spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: "\(dir)/\(name).mp4", frameCount: frameCount, facts: facts)
                if !deinterlace { spec.interlaced = nil }
                let out = "\(dir)/\(name)-\(fps)-\(bounce)-\(deinterlace).mov"
                _ = try SegmentRenderer.render(spec, to: out)
                return (out, spec)
            }
            let fields = try Probe.facts(path: "\(dir)/fields\(rate).mp4"), frames = try Probe.facts(path: "\(dir)/frames\(rate).mp4")
            let (deinterlaced, spec) = try render("fields\(rate)", facts: fields)
            let (combed, _) = try render("fields\(rate)", facts: fields, deinterlace: false)
            let (reference, progressive) = try render("frames\(rate)", facts: frames)
            #expect(spec.interlaced == true && progressive.interlaced == nil)
            #expect(EditChain.fingerprint(spec) != EditChain.fingerprint(progressive))
            let good = try psnr(deinterlaced, reference), bad = try psnr(combed, reference)
            #expect(good > bad + 3, "\(rate) fields a second, \(fps) fps\(bounce ? ", bounce" : ""): PSNR \(good) dB deinterlaced, \(bad) dB as stored")
        }
    }

    /// An MPEG-TS (a camcorder's .MTS) has no index: seeking bisects its bytes and landed past
    /// the only key frame of a clip that has one, so a trim that starts later decoded nothing
    /// ("no video frame could be decoded"). Trimmed, it renders the very frames its MP4 remux
    /// (the same stream, with an index) does.
    @Test func aTrimmedTransportStreamWithOneKeyFrameRenders() throws {
        let dir = temporaryDirectory()
        var r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30:duration=3",
                                   "-f", "lavfi", "-i", "sine=frequency=440:duration=3", "-c:v", "libx264", "-preset", "ultrafast",
                                   "-pix_fmt", "yuv420p", "-c:a", "aac", "-f", "mpegts", "\(dir)/clip.mts"])
        #expect(r.status == 0, "\(r.err)")
        r = try run("ffmpeg", ["-v", "error", "-y", "-i", "\(dir)/clip.mts", "-c", "copy", "\(dir)/clip.mp4"])
        #expect(r.status == 0, "\(r.err)")
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 240, fps: Rational(30, 1))
        var pictures: [String] = []
        for name in ["clip.mts", "clip.mp4"] {
            let pipeline = Pipeline(name: "t", output: profile, items: [Self.video("\(dir)/\(name)", trim: Trim(start: 1.0, end: 2.0)).1])
            let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: "\(dir)/\(name)", frameCount: 30)
            let report = try SegmentRenderer.render(spec, to: "\(dir)/\(name).mov")
            #expect(report.framesOut == 30)
            pictures.append(try run("ffmpeg", ["-v", "error", "-i", "\(dir)/\(name).mov", "-an", "-f", "framemd5", "-"]).out
                .split(separator: "\n").filter { !$0.hasPrefix("#") }.map { String($0.split(separator: ",").last!) }.joined(separator: " "))
        }
        #expect(pictures[0] == pictures[1], "the .mts and its remux show other frames")
    }

    @Test func twoClipsJoinExactly() throws {
        let dir = temporaryDirectory()
        try Generate.clip("\(dir)/a.mp4", fps: "30", seconds: 1.0)
        try Generate.clip("\(dir)/b.mp4", width: 240, height: 320, fps: "60", seconds: 1.5, tone: 660)
        let profile = OutputProfile(path: "\(dir)/out.mp4", width: 320, height: 180, fps: Rational(30, 1))
        let (out, timeline) = try Self.render([Self.video("\(dir)/a.mp4"), Self.video("\(dir)/b.mp4", trim: Trim(start: 0.25))], profile: profile, dir: dir)
        let frames = timeline.reduce(0) { $0 + $1.frameCount }
        #expect(frames == 30 + 38)
        let p = try ffprobe(out, countFrames: true)
        #expect(p.videoCodec == "h264")
        #expect(p.audioCodec == "aac")
        #expect(p.width == 320 && p.height == 180)
        #expect(p.frameRate == "30/1")
        #expect(p.frames == frames)
        let expected = Double(frames) / 30
        #expect(abs(p.duration - expected) <= 1.0 / 30, "duration \(p.duration) vs \(expected)")
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
        // A continuous tone through the join: no silent run longer than 5 ms.
        let pcm = try decodeAudio(out)
        #expect(longestSilenceMs(pcm) < 5)
    }
}
