import Foundation
import Testing
@testable import ThreadlineCore

@Suite struct PipelineLoaderTests {
    let dir: String
    init() throws {
        dir = NSTemporaryDirectory() + "loader-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir + "/media", withIntermediateDirectories: true)
        for f in ["a.mov", "b.mp4"] { FileManager.default.createFile(atPath: "\(dir)/media/\(f)", contents: Data([0])) }
    }

    func parse(_ yaml: String) throws -> Pipeline {
        try PipelineLoader.parse(text: yaml, file: "p.yaml", baseDirectory: dir)
    }

    func error(_ yaml: String) -> PipelineError? {
        do { _ = try parse(yaml); return nil } catch let e as PipelineError { return e } catch { return nil }
    }

    /// A title or caption longer than the frame holds at its size is drawn smaller so all of it
    /// shows (it ran off the frame's top and bottom), with a note; one that does not fit even at
    /// the smallest size is a located error.
    @Test func textLongerThanTheFrameIsShrunkOrRefused() throws {
        func words(_ n: Int) -> String { (0..<n).map { "word\($0)" }.joined(separator: " ") }
        let p = try parse("""
        output: { path: o.mp4, size: 640x360 }
        clips:
          - title: { text: "\(words(120))" }
          - title: { text: "June 2026", size: 40 }
          - video: media/a.mov
            text: { value: "\(words(120))" }
        """)
        let title = EditChain.titleLayout(try #require({ if case .title(let t) = p.items[0].kind { t } else { nil } }()), p.output)
        #expect(title.fits && title.wanted == 36 && title.size < 36 && Double(Int((Double(title.size) * 1.3).rounded()) * title.lines.count) <= 0.9 * 360, "\(title)")
        let short = EditChain.titleLayout(try #require({ if case .title(let t) = p.items[1].kind { t } else { nil } }()), p.output)
        #expect(short == EditChain.TextLayout(size: 40, lines: ["June 2026"], fits: true, wanted: 40), "short text keeps its size")
        let caption = EditChain.textLayout(try #require(p.items[2].edits.text), p.output)
        #expect(caption.fits && caption.size < caption.wanted && caption.lines.joined(separator: " ") == words(120), "\(caption)")
        let notes = Planner.pipelineNotes(for: p)
        #expect(notes.contains { $0.hasPrefix("p.yaml:3:5: note: title 1 (\"word0 word1 word2 word3…\"): its text is too large for the 640x360 frame at size 36: it is drawn at size \(title.size)") }, "\(notes)")
        #expect(notes.contains { $0.hasPrefix("p.yaml:5:5: note: clip 3 (a.mov): its text overlay is too large for the 640x360 frame at size 20: it is drawn at size \(caption.size)") }, "\(notes)")
        #expect(notes.count == 2, "\(notes)")
        // One line too tall at the size it asks for is drawn smaller too.
        let big = try parse("output: { path: o.mp4, size: 320x180 }\nclips:\n  - title: { text: Hi, size: 1000 }\n")
        #expect(Planner.pipelineNotes(for: big).first?.hasSuffix("title 1 (\"Hi\"): its text is too large for the 320x180 frame at size 1000: it is drawn at size 121 (1 line)") == true,
                "\(Planner.pipelineNotes(for: big))")
        let e = try #require(error("""
        output: { path: o.mp4, size: 640x360 }
        clips:
          - title: { text: "\(words(3000))" }
          - video: media/a.mov
            text: { value: "\(words(3000))" }
        """))
        #expect(e.description.hasPrefix("p.yaml:3:5: error: title 1 (\"word0 word1 word2 word3…\"): its text does not fit the 640x360 frame even at size 8 ("), "\(e)")
        #expect(e.more.first?.description.hasPrefix("p.yaml:4:5: error: clip 2 (a.mov): its text overlay does not fit the 640x360 frame even at size 8 (") == true, "\(e)")
    }

    @Test func fullPipelineParses() throws {
        let p = try parse("""
        version: 1
        name: june
        output:
          path: out/june.mp4
          size: 1280x720
          fps: 29.97
          fit: crop
          video: { codec: h264, crf: 20, preset: fast }
          audio: { codec: aac, bitrate: 192k }
        clips:
          - video: media/a.mov
            trim: { start: 0.5, end: "00:00:02.800" }
            rotate: 90
            flip: horizontal
            crop: { x: 0.1, y: 0, width: 0.8, height: 1 }
            mute: true
          - video: media/b.mp4
            volume: 0.5
        """)
        #expect(p.name == "june")
        #expect(p.output.path == dir + "/out/june.mp4")
        #expect(p.output.fps == Rational(30000, 1001))
        #expect(p.output.fit == .crop)
        #expect(p.output.video.crf == 20 && p.output.video.preset == "fast")
        #expect(p.output.audio.bitrate == 192_000)
        #expect(p.items.count == 2)
        guard case .video(let src, let trim) = p.items[0].kind else { Issue.record("kind"); return }
        #expect(src.uri == dir + "/media/a.mov")
        #expect(trim == Trim(start: 0.5, end: 2.8))
        #expect(p.items[0].edits == Edits(rotate: 90, flip: .horizontal, crop: CropRect(x: 0.1, y: 0, width: 0.8, height: 1), mute: true))
        #expect(p.items[1].edits.volume == 0.5)
        #expect(p.items[1].location == SourceLocation(file: "p.yaml", line: 17, column: 5))
    }

    @Test func aspectAndHeightGiveSize() throws {
        let p = try parse("output: { path: o.mp4, aspect: \"9:16\", height: 1280 }\nclips: [ { video: media/a.mov } ]")
        #expect(p.output.width == 720 && p.output.height == 1280)
        // Without a height, 720 on the short side (a 9:16 story was 406x720).
        for (aspect, w, h) in [("16:9", 1280, 720), ("9:16", 720, 1280), ("1:1", 720, 720), ("4:5", 720, 900)] {
            let o = try parse("output: { path: o.mp4, aspect: \"\(aspect)\" }\nclips: [ { video: media/a.mov } ]").output
            #expect(o.width == w && o.height == h, "\(aspect): \(o.width)x\(o.height)")
        }
    }

    @Test func retryAttemptsAreReadAndBounded() throws {
        #expect(try parse("output: { path: o.mp4 }\nclips: [ { video: media/a.mov } ]").retryAttempts == nil)
        #expect(try parse("retry: { attempts: 5 }\noutput: { path: o.mp4 }\nclips: [ { video: media/a.mov } ]").retryAttempts == 5)
        let e = try #require(error("retry: { attempts: 0 }\noutput: { path: o.mp4 }\nclips: [ { video: media/a.mov } ]"))
        #expect(e.location?.line == 1 && e.message.contains("retry.attempts"))
    }

    @Test func unknownKeySuggestsTheRightOne() throws {
        let e = try #require(error("""
        output: { path: o.mp4 }
        clips:
          - video: media/a.mov
            trimm: { start: 1 }
        """))
        #expect(e.location == SourceLocation(file: "p.yaml", line: 4, column: 5))
        #expect(e.message.contains("unknown key 'trimm'"))
        #expect(e.hint == "did you mean 'trim'?")
        #expect(e.description.hasPrefix("p.yaml:4:5: error:"))
    }

    @Test func wrongTypeNamesThePlace() throws {
        let e = try #require(error("output:\n  path: o.mp4\n  video: { crf: high }\nclips: [ { video: media/a.mov } ]"))
        #expect(e.location?.line == 3)
        #expect(e.message.contains("crf"))
        #expect(e.message.contains("whole number"))
    }

    @Test func missingFileIsAnErrorAtItsPath() throws {
        let e = try #require(error("output: { path: o.mp4 }\nclips:\n  - video: media/nope.mov\n"))
        #expect(e.location == SourceLocation(file: "p.yaml", line: 3, column: 12))
        #expect(e.message.contains("file not found"))
        #expect(e.message.contains("nope.mov"))
    }

    /// A 0-byte source (a download that did not finish, a library's placeholder for a file still
    /// in the cloud) is refused at its line with what to do, not probed into "Invalid data".
    @Test func anEmptyFileIsAnErrorAtItsPath() throws {
        FileManager.default.createFile(atPath: "\(dir)/media/empty.mov", contents: Data())
        let e = try #require(error("output: { path: o.mp4 }\nclips:\n  - video: media/a.mov\n  - video: media/empty.mov\n"))
        #expect(e.location == SourceLocation(file: "p.yaml", line: 4, column: 12))
        #expect(e.message == "\(dir)/media/empty.mov is empty (0 bytes)")
        #expect(e.hint?.contains("copy it again, or remove the item") == true, "\(e)")
    }

    /// One pass reports every item's problem (and the other sections'), in file order, so a
    /// library's three missing files take one edit, not three submits.
    @Test func everyItemsProblemIsReportedInOnePass() throws {
        let e = try #require(error("""
            output: { path: o.mp4, fps: fast }
            clips:
              - video: media/gone1.mov
              - video: media/a.mov
              - video: media/gone2.mov
              - title: { text: Hi, duration: 0 }
            retry: { attempts: 99 }
            """))
        let all = [e] + e.more
        #expect(all.map { $0.location?.line } == [1, 3, 5, 6, 7], "\(e)")
        #expect(all[1].message.contains("gone1.mov") && all[2].message.contains("gone2.mov"))
        #expect(e.description.components(separatedBy: "p.yaml:").count - 1 == 5, "every error is printed with its place:\n\(e)")
        // A hundred missing files: twenty are listed, then how many more.
        let many = try #require(error("output: { path: o.mp4 }\nclips:\n" + (0..<100).map { "  - video: media/gone\($0).mov\n" }.joined()))
        #expect(many.more.count == 99)
        #expect(many.description.components(separatedBy: "file not found").count - 1 == PipelineError.reportLimit)
        #expect(many.description.hasSuffix("error: 80 more errors in p.yaml not shown"), "\(many.description.suffix(200))")
    }

    /// A soundtrack on an animated GIF was dropped without a word (a GIF has no sound): planning
    /// notes it, with the soundtrack's place; the same soundtrack on an MP4 is no note.
    @Test func aSoundtrackOnAGIFIsNoted() throws {
        let song = "soundtrack: { source: media/a.mov }\nclips:\n  - video: media/b.mp4\n"
        let gif = try parse("output: { path: out/m.gif }\n" + song)
        #expect(Planner.pipelineNotes(for: gif)
                == ["p.yaml:2:23: note: soundtrack: m.gif is an animated GIF, which has no sound: the soundtrack is not used (name the movie .mp4 to hear it)"])
        #expect(Planner.pipelineNotes(for: try parse("output: { path: out/m.mp4 }\n" + song)) == [])
        #expect(Planner.pipelineNotes(for: try parse("output: { path: out/m.gif }\nclips:\n  - video: media/b.mp4\n")) == [])
    }

    /// A transition on the last item has no next item to go into: said, not silently dropped.
    @Test func aTransitionOnTheLastItemIsNoted() throws {
        let last = try parse("output: { path: out/m.mp4 }\nclips:\n  - video: media/b.mp4\n    transition: { type: fade, duration: 1 }\n  - video: media/b.mp4\n    transition: { type: fade, duration: 1 }\n")
        #expect(Planner.pipelineNotes(for: last) == ["p.yaml:6:17: note: clip 2 (b.mp4) is the last item: its fade into the next has none to go into and is not used (to fade out at the end, add a title after it: - title: \"The end\")"])
        let none = try parse("output: { path: out/m.mp4 }\nclips:\n  - video: media/b.mp4\n    transition: { type: none }\n")
        #expect(Planner.pipelineNotes(for: none) == [])
        let inner = try parse("output: { path: out/m.mp4 }\nclips:\n  - video: media/b.mp4\n    transition: { type: fade, duration: 1 }\n  - video: media/b.mp4\n")
        #expect(Planner.pipelineNotes(for: inner) == [])
    }

    /// Files copied from a Mac keep their names decomposed ("E" + U+0301); a pipeline typed here
    /// composes them ("\u{C9}"). The bytes differ, the text is the same: the file is found, and a
    /// movie goes into the folder as it is spelled on disk. Names that are not the same text are
    /// still not found; one that differs only by case (a phone's IMG_0001.JPG) is named in the hint.
    @Test func aNameTypedInAnotherUnicodeFormFindsItsFile() throws {
        let folder = dir + "/E\u{301}te\u{301}"           // "Été", decomposed
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: folder + "/Cafe\u{301}.mp4", contents: Data([0]))
        try "output: { path: \u{C9}t\u{E9}/film.mp4 }\nclips:\n  - video: \u{C9}t\u{E9}/Caf\u{E9}.mp4\n"
            .write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let p = try PipelineLoader.load(path: dir + "/p.yaml")
        #expect(Array(p.items[0].sources[0].uri.utf8) == Array((folder + "/Cafe\u{301}.mp4").utf8))
        #expect(Array(p.output.path.utf8) == Array((folder + "/film.mp4").utf8))
        try "output: { path: o.mp4 }\nclips:\n  - video: \u{C9}t\u{E9}/Cafe.mp4\n".write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        #expect(throws: PipelineError.self) { _ = try PipelineLoader.load(path: dir + "/p.yaml") }
        // Names that differ by case are other files here: not taken, but named in the hint.
        try "output: { path: o.mp4 }\nclips:\n  - video: media/B.MP4\n".write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let e = try #require(#expect(throws: PipelineError.self) { _ = try PipelineLoader.load(path: dir + "/p.yaml") })
        #expect(e.message.hasPrefix("file not found") && e.hint == "its folder has b.mp4: names differ by case on Linux; write it as it is", "\(e)")
    }

    /// A file saved in Latin-1: the error points at the first byte that is not UTF-8.
    @Test func textThatIsNotUTF8IsAnErrorAtItsFirstBadByte() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/threadline-utf8-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var bytes = Data("version: 1\nname: Ça va, ".utf8)
        bytes += Data([0xE9]) + Data("t\u{E9}\noutput: { path: o.mp4 }\n".utf8)
        try bytes.write(to: URL(fileURLWithPath: dir + "/p.yaml"))
        #expect {
            _ = try PipelineLoader.load(path: dir + "/p.yaml", checkFiles: false)
        } throws: { error in
            guard let e = error as? PipelineError else { return false }
            // "name: Ça va, " is 13 characters (Ç is two bytes): the bad byte is the 14th.
            return e.location == SourceLocation(file: dir + "/p.yaml", line: 2, column: 14) && e.message.contains("0xE9") && e.hint?.contains("UTF-8") == true
        }
    }

    @Test func badYAMLHasALocation() throws {
        let e = try #require(error("output: { path: o.mp4\nclips:\n  - video: [unclosed\n"))
        #expect(e.location != nil)
        #expect(e.message.contains("invalid YAML"))
    }

    /// Two slips that read as riddles get a hint in the user's words: an indent made with a tab,
    /// and a clip's kind without its colon.
    @Test func aTabIndentAndAMissingColonSaySo() throws {
        let tab = try #require(error("output: { path: o.mp4 }\nclips:\n\t- video: media/a.mov\n"))
        #expect(tab.location?.line == 3 && tab.hint == "line 3 is indented with a tab: YAML indents with spaces only", "\(tab)")
        let colon = try #require(error("output: { path: o.mp4 }\nclips:\n  - video media/a.mov\n"))
        #expect(colon.location?.line == 3 && colon.hint == "put a colon after video: - video: media/a.mov", "\(colon)")
        // An output given as a path, a misspelt required key, a size named as a height.
        let output = try #require(error("output: out/m.mp4\nclips:\n  - video: media/a.mov\n"))
        #expect(output.location?.line == 1 && output.hint == "output: { path: out/m.mp4 }", "\(output)")
        let clip = try #require(error("output: { path: o.mp4 }\nclip:\n  - video: media/a.mov\n"))
        #expect(clip.description.contains("p.yaml:2:1: error: unknown key 'clip'\n  hint: did you mean 'clips'?"), "\(clip)")
        #expect(clip.description.contains("missing required key 'clips'"), "\(clip)")
        let size = try #require(error("output: { path: o.mp4, size: 1080p }\nclips:\n  - video: media/a.mov\n"))
        #expect(size.hint == "1080p is size: 1920x1080 (landscape) or 1080x1920 (portrait)", "\(size)")
        let trim = try #require(error("output: { path: o.mp4 }\nclips:\n  - video: media/a.mov\n    trim: 1-3\n"))
        #expect(trim.hint == "trim: { start: 1, end: 3 } (seconds; either may be left out)", "\(trim)")
        // What people also call the codecs is read as the codec.
        for (name, codec) in [("h265", "hevc"), ("H.265", "hevc"), ("x264", "h264"), ("hevc", "hevc")] {
            #expect(try parse("output: { path: o.mp4, video: { codec: \(name) } }\nclips:\n  - video: media/a.mov\n").output.video.codec == codec, "\(name)")
        }
        // Other YAML errors keep the general hint.
        #expect(error("output: { path: o.mp4\nclips:\n  - video: [unclosed\n")?.hint == "check indentation and quoting near this place")
    }

    @Test(arguments: [
        ("output: { path: o.mp4, size: 1281x720 }", "not possible"),
        ("output: { path: o.mp4, fps: 0 }", "fps"),
        ("output: { path: o.mp4, fit: stretch }", "unknown fit"),
        ("output: { path: o.mp4, video: { preset: veryfas } }", "preset"),
        ("output: { path: o.mp4, video: { crf: 60 } }", "crf"),
        ("output: { path: o.mp4, video: { codec: vp9 } }", "codec"),
    ])
    func impossibleOutputValues(_ output: String, _ fragment: String) throws {
        let e = try #require(error(output + "\nclips: [ { video: media/a.mov } ]"))
        #expect(e.description.contains(fragment), "\(e)")
        #expect(e.location?.line == 1)
    }

    /// The movie is an MP4 or a GIF whatever its name: a name that says another format (or none)
    /// is refused with the name to use. Before, `out/x.mkv` was an MP4 named .mkv.
    @Test func anOutputNamedForAnotherFormatIsRefused() throws {
        for (path, message, hint) in [("out/x.mkv", "output.path: '.mkv' is not a format Threadline writes: the movie is an MP4 (.mp4, .m4v or .mov) or an animated GIF (.gif)", "name it x.mp4"),
                                      ("out/x.webm", "'.webm' is not a format Threadline writes", "name it x.mp4"),
                                      ("out/movie", "output.path: 'movie' has no extension", "name it movie.mp4")] {
            let e = try #require(error("output: { path: \(path) }\nclips: [ { video: media/a.mov } ]"), "\(path)")
            #expect(e.description.contains(message) && e.hint == hint, "\(e) \(e.hint ?? "")")
            #expect(e.location?.line == 1 && e.location?.column == 17, "\(String(describing: e.location))")
        }
        for path in ["o.mp4", "o.MP4", "o.m4v", "o.mov", "o.MOV", "o.gif"] {
            #expect(try parse("output: { path: \(path) }\nclips: [ { video: media/a.mov } ]").output.path.hasSuffix(path))
        }
    }

    @Test(arguments: [
        ("rotate: 45", "rotate"),
        ("trim: { start: 3, end: 2 }", "trim.end"),
        ("trim: { start: -1 }", "negative"),
        ("crop: { x: 0.5, width: 0.8 }", "crop"),
        ("volume: -1", "volume"),
        ("mute: maybe", "true or false"),
        ("flip: sideways", "unknown flip"),
        ("trim: { start: soon }", "must be a time"),
    ])
    func impossibleItemValues(_ edit: String, _ fragment: String) throws {
        let e = try #require(error("output: { path: o.mp4 }\nclips:\n  - video: media/a.mov\n    \(edit)\n"))
        #expect(e.description.contains(fragment), "\(e)")
        #expect((e.location?.line ?? 0) >= 3)
    }

    @Test func livePhotosParseWithWhatTheyShow() throws {
        let p = try parse("output: { path: o.mp4 }\nclips:\n  - live_photo: media/a.mov\n  - live_photo: media/a.mov\n    use: still\n    duration: 2\n")
        #expect(p.items[0].kind == .livePhoto(source: SourceRef(dir + "/media/a.mov"), use: .motion, duration: 3))
        #expect(p.items[1].kind == .livePhoto(source: SourceRef(dir + "/media/a.mov"), use: .still, duration: 2))
        #expect(error("output: { path: o.mp4 }\nclips:\n  - live_photo: media/a.mov\n    use: boomerang\n")?.hint == nil ? false : true)
    }

    /// A live photo's motion is a video: it takes trim and speed (kept, where trim was dropped
    /// without a word and speed refused); its still takes a duration. What belongs to the
    /// other use is a located error, not ignored (a duration on the motion was).
    @Test func aLivePhotosMotionTakesTrimAndSpeedAndItsStillADuration() throws {
        let p = try parse("output: { path: o.mp4 }\nclips:\n  - live_photo: media/a.mov\n    trim: { start: 0.5, end: 1.5 }\n    speed: 0.5\n  - live_photo: media/a.mov\n    use: bounce\n    trim: { end: 1 }\n")
        #expect(p.items[0].kind == .livePhoto(source: SourceRef(dir + "/media/a.mov"), use: .motion, duration: 3, trim: Trim(start: 0.5, end: 1.5)))
        #expect(p.items[0].edits.speed == 0.5)
        #expect(p.items[1].kind == .livePhoto(source: SourceRef(dir + "/media/a.mov"), use: .bounce, duration: 3, trim: Trim(start: 0, end: 1)))
        for (edit, line, column, message) in [
            ("duration: 2", 4, 5, "duration applies to a live photo shown as its still (use: still); its motion plays its own length"),
            ("use: loop\n    duration: 2", 5, 5, "duration applies to a live photo shown as its still"),
            ("use: still\n    trim: { start: 1 }", 5, 5, "trim applies to a live photo's motion, not to its still (use: still)"),
            ("use: still\n    speed: 2", 5, 5, "speed applies to a live photo's motion, not to its still (use: still)"),
            ("use: still\n    bounce: true", 5, 5, "bounce applies to a live photo's motion, not to its still (use: still)"),
        ] {
            let e = try #require(error("output: { path: o.mp4 }\nclips:\n  - live_photo: media/a.mov\n    \(edit)\n"), "\(edit)")
            #expect(e.description.contains(message), "\(edit): \(e)")
            #expect(e.location?.line == line && e.location?.column == column, "\(edit): \(e)")
        }
    }

    @Test func misspeltKindSuggestsVideo() throws {
        let e = try #require(error("output: { path: o.mp4 }\nclips:\n  - vidoe: media/a.mov\n"))
        #expect(e.hint == "did you mean 'video'?")
    }

    @Test func timesAcceptThreeSpellings() {
        #expect(parseTime("2.5") == 2.5)
        #expect(parseTime("2.5s") == 2.5)
        #expect(parseTime("00:00:02.500") == 2.5)
        #expect(parseTime("1:02.5") == 62.5)
        #expect(parseTime("abc") == nil)
        #expect(parseTime("1:-2") == nil)
    }
}

@Suite struct PlannerTests {
    func pipeline(_ n: Int, fps: Rational = Rational(30, 1)) -> Pipeline {
        Pipeline(name: "p", output: OutputProfile(path: "/o.mp4", fps: fps),
                 items: (0..<n).map { Item(kind: .video(source: SourceRef("/m/\($0).mov"), trim: $0 == 1 ? Trim(start: 0.5, end: 1.7) : nil)) })
    }

    @Test func stageGraphHasFourStagesPerItemAndAConcat() {
        let stages = Planner.stages(for: pipeline(3))
        #expect(stages.count == 13)
        #expect(stages.map(\.kind).filter { $0 == .concat }.count == 1)
        let concat = stages.first { $0.kind == .concat }!
        #expect(concat.dependencies == ["encode/0", "encode/1", "encode/2"])
        #expect(stages.first { $0.id == "transform/2" }!.dependencies == ["decode/2"])
    }

    @Test func timelineIsFrameAndSampleExact() throws {
        let p = pipeline(3, fps: Rational(30000, 1001))
        var facts: [String: MediaFacts] = [:]
        for i in 0..<3 { facts["/m/\(i).mov"] = MediaFacts(duration: 2.0 + Double(i) * 0.37, width: 10, height: 10, hasVideo: true, hasAudio: true) }
        let t = try Planner.timeline(for: p, facts: facts)
        #expect(t[0].frameCount == 60)               // 2.0 s at 29.97
        #expect(t[1].frameCount == 36)               // trimmed 1.2 s
        #expect(t[1].startFrame == 60)
        #expect(t[2].startFrame == 96)
        // Sample shares tile the timeline with no gap or overlap and no drift.
        #expect(t[1].sampleStart == t[0].sampleStart + t[0].sampleCount)
        let totalFrames = t.reduce(0) { $0 + $1.frameCount }
        #expect(t.reduce(0) { $0 + $1.sampleCount } == Timing.samples(atFrame: totalFrames, fps: p.output.fps))
        // Each segment carries at least its share wherever it lands.
        for x in t { #expect(Timing.segmentSamples(frames: x.frameCount, fps: p.output.fps) >= x.sampleCount) }
    }

    @Test func trimPastTheEndIsAnError() {
        let p = Pipeline(name: "p", output: OutputProfile(path: "/o.mp4"),
                         items: [Item(kind: .video(source: SourceRef("/a.mov"), trim: Trim(start: 5)))])
        #expect(throws: PipelineError.self) {
            _ = try Planner.timeline(for: p, facts: ["/a.mov": MediaFacts(duration: 3, width: 1, height: 1, hasVideo: true, hasAudio: false)])
        }
    }

    @Test func segmentKeyIgnoresWhereTheSourceLies() {
        let p = pipeline(1)
        let a = Planner.segmentSpec(p, index: 0, sourcePath: "/store/x", frameCount: 30)
        let b = Planner.segmentSpec(p, index: 0, sourcePath: "/elsewhere/y", frameCount: 30)
        #expect(StageKey.segment(a, sourceSHA256: "abc") == StageKey.segment(b, sourceSHA256: "abc"))
        #expect(StageKey.segment(a, sourceSHA256: "abc") != StageKey.segment(a, sourceSHA256: "abd"))
        var c = a; c.edits.volume = 0.5
        #expect(StageKey.segment(a, sourceSHA256: "abc") != StageKey.segment(c, sourceSHA256: "abc"))
    }

    @Test func sha256MatchesKnownVectors() {
        #expect(SHA256Hasher.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256Hasher.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let million = String(repeating: "a", count: 1_000_000)
        #expect(SHA256Hasher.hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func suggestionsFindNearMisses() {
        #expect(suggestion(for: "trimm", among: PipelineLoader.editKeys) == "trim")
        #expect(suggestion(for: "volme", among: PipelineLoader.editKeys) == "volume")
        #expect(suggestion(for: "zzzzzz", among: PipelineLoader.editKeys) == nil)
    }
}

@Suite struct EditingSetLoaderTests {
    let dir: String
    init() throws {
        dir = NSTemporaryDirectory() + "edits-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/a.mov", contents: Data([0]))
    }
    func parse(_ item: String, output: String = "output: { path: o.mp4 }") throws -> Pipeline {
        try PipelineLoader.parse(text: "\(output)\nclips:\n  - video: a.mov\n    \(item)\n", file: "p.yaml", baseDirectory: dir)
    }

    @Test func looksAdjustmentsAndFitParse() throws {
        let p = try parse("look: silvertone\n    adjust: { brightness: 0.1, warmth: -0.5 }\n    fit: blur", output: "output: { path: o.mp4, fit: blur }")
        #expect(p.output.fit == .blur)
        #expect(p.items[0].edits.look == .silvertone)
        #expect(p.items[0].edits.adjust == Adjust(brightness: 0.1, warmth: -0.5))
        #expect(p.items[0].edits.fit == .blur)
    }

    @Test func unknownLookSuggestsTheNearestAndSaysWhere() throws {
        do { _ = try parse("look: silvertones"); Issue.record("accepted an unknown look") } catch let e as PipelineError {
            #expect(e.location == SourceLocation(file: "p.yaml", line: 4, column: 11))
            #expect(e.hint == "did you mean 'silvertone'?")
        }
    }

    @Test func adjustmentsOutOfRangeAreErrors() throws {
        #expect(throws: PipelineError.self) { try parse("adjust: { contrast: 9 }") }
        #expect(throws: PipelineError.self) { try parse("adjust: { sharpness: 1 }") }
    }
}

extension EditingSetLoaderTests {
    @Test func titlesParseAsScalarOrMapping() throws {
        let p = try PipelineLoader.parse(text: """
        output: { path: o.mp4 }
        clips:
          - title: "Hello"
          - title: { text: "June", duration: "1.5s", background: "#102030", color: "#ffffff", size: 48 }
            look: sepia
        """, file: "p.yaml", baseDirectory: dir, checkFiles: false)
        guard case .title(let a) = p.items[0].kind, case .title(let b) = p.items[1].kind else { Issue.record("kinds"); return }
        #expect(a == Title(text: "Hello"))
        #expect(b == Title(text: "June", duration: 1.5, background: "#102030", color: "#ffffff", size: 48))
        #expect(p.items[1].edits.look == .sepia)
        #expect(Planner.stages(for: p).count == 9)
    }

    @Test(arguments: [
        ("title: { text: x, duration: -1 }", "duration"),
        ("title: { duration: 2 }", "needs text"),
        ("title: { text: x, font: missing.ttf }", "font not found"),
        ("title: { text: x, background: blue }", "colour"),
        ("title: x\n    trim: { start: 1 }", "trim applies to video"),
    ])
    func badTitlesAreLocatedErrors(_ yaml: String, _ fragment: String) throws {
        do {
            _ = try PipelineLoader.parse(text: "output: { path: o.mp4 }\nclips:\n  - \(yaml)\n", file: "p.yaml", baseDirectory: dir)
            Issue.record("accepted \(yaml)")
        } catch let e as PipelineError {
            #expect(e.description.contains(fragment), "\(e)")
            #expect((e.location?.line ?? 0) >= 3)
        }
    }
}

extension EditingSetLoaderTests {
    @Test func textOverlaysParse() throws {
        let p = try parse("text: { value: \"June 3\", position: top-right, size: 30, color: \"#ffee00\", start: 0.5, end: \"2s\" }")
        #expect(p.items[0].edits.text == TextOverlay(value: "June 3", position: .topRight, size: 30, color: "#ffee00", start: 0.5, end: 2))
        #expect(try parse("text: \"Hello\"").items[0].edits.text?.value == "Hello")
    }

    @Test func badTextIsALocatedError() throws {
        #expect(throws: PipelineError.self) { try parse("text: { value: x, position: middle }") }
        #expect(throws: PipelineError.self) { try parse("text: { value: x, start: 2, end: 1 }") }
        #expect(throws: PipelineError.self) { try parse("text: { position: top }") }
    }
}

@Suite struct MaxDurationTests {
    func pipeline(_ seconds: [Double], cap: MaxDuration) -> (Pipeline, [String: MediaFacts]) {
        var facts: [String: MediaFacts] = [:]
        var items: [Item] = []
        for (i, s) in seconds.enumerated() {
            items.append(Item(kind: .video(source: SourceRef("/m/\(i).mov"), trim: nil)))
            facts["/m/\(i).mov"] = MediaFacts(duration: s, width: 16, height: 16, hasVideo: true, hasAudio: true)
        }
        var out = OutputProfile(path: "/o.mp4")
        out.maxDuration = cap
        return (Pipeline(name: "p", output: out, items: items), facts)
    }

    @Test func fitShortensProportionallyToTheExactCap() throws {
        let (p, facts) = pipeline([10, 10, 0.5, 20], cap: MaxDuration(seconds: 15, policy: .fit))
        let t = try Planner.timeline(for: p, facts: facts)
        #expect(t.reduce(0) { $0 + $1.frameCount } == 450)
        #expect(t[2].frameCount == 15)                        // shorter than the floor: kept whole
        #expect(abs(Double(t[3].frameCount) / Double(t[0].frameCount) - 2) < 0.1)   // proportions kept
        #expect(t.allSatisfy { $0.frameCount >= min(30, $0.segmentFrames) })
    }

    @Test func failNamesThePlannedLength() {
        let (p, facts) = pipeline([10, 10], cap: MaxDuration(seconds: 15, policy: .fail, location: SourceLocation(file: "p.yaml", line: 6, column: 17)))
        do { _ = try Planner.timeline(for: p, facts: facts); Issue.record("no error") } catch let e as PipelineError {
            #expect(e.description.hasPrefix("p.yaml:6:17: error: the movie is planned at 20.000 s, over max_duration 15.000 s"))
        } catch { Issue.record("\(error)") }
    }

    @Test func fitBelowTheFloorsIsAnError() {
        let (p, facts) = pipeline([10, 10, 10], cap: MaxDuration(seconds: 2, policy: .fit))
        #expect(throws: PipelineError.self) { _ = try Planner.timeline(for: p, facts: facts) }
    }
}

@Suite struct TransitionPlanTests {
    func pipeline(_ seconds: [Double], default t: Transition?, overrides: [Int: Transition] = [:], loops: [Int: Int] = [:]) -> (Pipeline, [String: MediaFacts]) {
        var facts: [String: MediaFacts] = [:]
        var items: [Item] = []
        for (i, s) in seconds.enumerated() {
            var item = Item(kind: .video(source: SourceRef("/m/\(i).mov"), trim: nil))
            item.transition = overrides[i]
            item.edits.loop = loops[i] ?? 1
            items.append(item)
            facts["/m/\(i).mov"] = MediaFacts(duration: s, width: 16, height: 16, hasVideo: true, hasAudio: true)
        }
        var p = Pipeline(name: "p", output: OutputProfile(path: "/o.mp4", fps: Rational(30000, 1001)), items: items)
        p.transition = t
        return (p, facts)
    }

    @Test func overlapsShortenTheMovieAndPartsTileItExactly() throws {
        let (p, facts) = pipeline([2, 3, 2.5, 1], default: Transition(kind: .dissolve, duration: 0.5),
                                  overrides: [1: Transition(kind: .fade, duration: 1), 2: Transition(kind: .none)], loops: [3: 2])
        let t = try Planner.timeline(for: p, facts: facts)
        let plan = try Planner.plan(p, facts: facts)
        let frames = t.map(\.frameCount)                     // 60, 90, 75, 30×2 at 29.97
        let overlaps = Planner.overlaps(p)                   // 15, 30, 0
        #expect(overlaps == [15, 30, 0])
        #expect(plan.totalFrames == frames.reduce(0, +) - overlaps.reduce(0, +))
        // The dissolve is a stage; the fade through black (1 → 2) is baked into the two segments.
        #expect(plan.stages.filter { $0.kind == .transition }.map(\.id) == ["transition/0"])
        let parts = Planner.concatParts(t, fps: p.output.fps)
        #expect(parts.reduce(0) { $0 + $1.frames } == plan.totalFrames)
        #expect(parts.reduce(0) { $0 + $1.samples } == Timing.samples(atFrame: plan.totalFrames!, fps: p.output.fps))
        // Bodies start where the incoming overlap ends; transitions take the shared frames.
        #expect(parts[0] == ConcatPart(source: .item(0), firstFrame: 0, frames: 45, firstSample: 0, samples: Timing.samples(atFrame: 45, fps: p.output.fps)))
        #expect(parts[1].source == .transition(0) && parts[1].frames == 15)
        // Item 1 runs to the fade's middle (15 of its 30 shared frames), item 2's segment starts there.
        #expect(parts[2].source == .item(1) && parts[2].firstFrame == 15 && parts[2].frames == 90 - 15 - 30 + 15)
        #expect(parts[3].source == .item(2) && parts[3].firstFrame == 0 && parts[3].frames == 75 - 15)
        #expect(parts.count == 6)     // item 3 plays twice
        // Key frames where a transition segment cuts the segment; the fade cuts it short instead.
        let spec = Planner.segmentSpec(p, index: 1, sourcePath: "/x", frameCount: 90)
        #expect(spec.keyframes == [15])
        #expect(spec.cut == SegmentCut(first: 0, end: 75, fadeIn: 0, fadeOut: 15))
        let next = Planner.segmentSpec(p, index: 2, sourcePath: "/x", frameCount: 75)
        #expect(next.keyframes == nil && next.cut == SegmentCut(first: 15, end: 75, fadeIn: 15, fadeOut: 0))
        let ts = try #require(Planner.transitionSpec(p, after: 0, timeline: t))
        #expect(ts.kind == .dissolve && ts.frames == 15 && ts.fromFrame == 45)
    }

    @Test func bakedFadesTileTheMovieAndStayStagesWhereTheyCannotBake() throws {
        // Fades everywhere; item 2 loops, so the fades around it stay transition stages.
        let (p, facts) = pipeline([2, 3, 1, 2.5], default: Transition(kind: .fade, duration: 0.25), loops: [2: 2])
        let t = try Planner.timeline(for: p, facts: facts)
        let plan = try Planner.plan(p, facts: facts)
        #expect(plan.stages.filter { $0.kind == .transition }.map(\.id) == ["transition/1", "transition/2"])
        #expect(t.map(\.headBaked) == [false, true, false, false] && t.map(\.tailBaked) == [true, false, false, false])
        let parts = Planner.concatParts(t, fps: p.output.fps)
        #expect(parts.reduce(0) { $0 + $1.frames } == plan.totalFrames)
        #expect(parts.reduce(0) { $0 + $1.samples } == Timing.samples(atFrame: plan.totalFrames!, fps: p.output.fps))
        // 0.25 s at 29.97 is 7 frames: item 0 shows 3 of them fading out, item 1 the other 4 fading in.
        #expect(Planner.overlaps(p) == [7, 7, 7])
        #expect(parts[0] == ConcatPart(source: .item(0), firstFrame: 0, frames: 60 - 7 + 3, firstSample: 0,
                                       samples: Timing.samples(atFrame: 56, fps: p.output.fps)))
        #expect(parts[1].source == .item(1) && parts[1].firstFrame == 0 && parts[1].frames == 90 - 3 - 7)
        #expect(parts[2].source == .transition(1))
        // Item 1's file starts at its frame 3, so its transition out reads from its frame 83 there.
        let ts = try #require(Planner.transitionSpec(p, after: 1, timeline: t))
        #expect(ts.fromFrame == 90 - 7 - 3)
        #expect(Planner.segmentSpec(p, index: 1, sourcePath: "/x", frameCount: 90).keyframes == [83])
        // A watermark must stay steady through the fade: no fade is baked under one.
        var marked = p
        marked.output.watermark = Watermark(image: "/logo.png", sha256: "")
        #expect(Planner.transitionStageBoundaries(marked) == [0, 1, 2])
        #expect(Planner.segmentSpec(marked, index: 1, sourcePath: "/x", frameCount: 90).cut == nil)
    }

    @Test func aTransitionLongerThanItsItemIsALocatedError() {
        let (p, facts) = pipeline([2, 0.4, 2], default: Transition(kind: .dissolve, duration: 0.3, location: SourceLocation(file: "p.yaml", line: 3, column: 13)))
        do { _ = try Planner.timeline(for: p, facts: facts); Issue.record("no error") } catch let e as PipelineError {
            #expect(e.description.hasPrefix("p.yaml:3:13: error: the transitions around clip 2"), "\(e)")
        } catch { Issue.record("\(error)") }
        // Every item it does not fit, at once (a year's pipeline took a round of planning for each).
        let (many, manyFacts) = pipeline([2, 0.4, 2, 0.1, 2, 0.3], default: Transition(kind: .fade, duration: 0.3, location: SourceLocation(file: "p.yaml", line: 3, column: 13)))
        do { _ = try Planner.timeline(for: many, facts: manyFacts); Issue.record("no error") } catch let e as PipelineError {
            #expect([e.message] + e.more.map(\.message) == ["the transitions around clip 2 (1.mov) (0.300 s in, 0.300 s out) are longer than the item (0.400 s)",
                                                            "the transitions around clip 4 (3.mov) (0.300 s in, 0.300 s out) are longer than the item (0.100 s)"], "\(e)")
            // The coordinator asks the same of each item as its length becomes known.
            #expect(Planner.transitionsDoNotFit(many, index: 3, segmentFrames: 3)?.message == e.more.first?.message)
            #expect(Planner.transitionsDoNotFit(many, index: 5, segmentFrames: 9) == nil, "the last item has a transition in only")
        } catch { Issue.record("\(error)") }
    }

    @Test func transitionsParse() throws {
        let dir = NSTemporaryDirectory() + "tr-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/a.mov", contents: Data([0]))
        let p = try PipelineLoader.parse(text: "output: { path: o.mp4 }\ntransition: { type: fade, duration: 0.3 }\nclips:\n  - video: a.mov\n    transition: none\n  - video: a.mov\n",
                                         file: "p.yaml", baseDirectory: dir)
        #expect(p.transition?.kind == .fade && p.transition?.duration == 0.3)
        #expect(p.items[0].transition?.kind == Transition.Kind.none)
        do {
            _ = try PipelineLoader.parse(text: "output: { path: o.mp4 }\ntransition: disolve\nclips:\n  - video: a.mov\n", file: "p.yaml", baseDirectory: dir)
            Issue.record("accepted a misspelt transition")
        } catch let e as PipelineError {
            #expect(e.hint == "did you mean 'dissolve'?")
            #expect(e.location?.line == 2)
        }
    }

    /// A trim.end past the clip's end plays to its end, and planning says so with the item's
    /// place in the pipeline (before, the movie came out shorter without a word). Within half a
    /// frame of the end (a length rounded by hand) it says nothing.
    @Test func aTrimEndPastTheClipsEndIsNoted() throws {
        let p = try PipelineLoaderTests().parse("output: { path: o.mp4, fps: 30 }\nclips:\n  - video: media/a.mov\n    trim: { start: 0.5, end: 13.5 }\n"
                          + "  - video: media/b.mp4\n    trim: { end: 4.01 }\n  - video: media/b.mp4\n")
        let facts = [p.items[0].sources[0].uri: MediaFacts(duration: 4, width: 320, height: 240, hasVideo: true, hasAudio: false),
                     p.items[1].sources[0].uri: MediaFacts(duration: 4, width: 320, height: 240, hasVideo: true, hasAudio: false)]
        let notes = Planner.notes(for: p, facts: facts)
        #expect(notes == ["p.yaml:3:5: note: clip 1 (a.mov): trim.end 13.500 s is past the clip's end (4.000 s): it plays to its end"], "\(notes)")
    }

    /// A file of the wrong kind for its item says which item kind (or soundtrack) takes it.
    @Test func aFileOfTheWrongKindSaysWhatTakesIt() throws {
        let p = try PipelineLoaderTests().parse("output: { path: o.mp4 }\nclips:\n  - video: media/a.mov\n  - photo: media/b.mp4\n")
        func hint(_ i: Int, _ facts: MediaFacts) -> String? {
            do { _ = try Planner.frameCount(of: p.items[i], index: i, facts: facts, fps: Rational(30, 1)); return nil } catch let e as PipelineError { return e.hint } catch { return nil }
        }
        #expect(hint(0, MediaFacts(duration: 3, width: 0, height: 0, hasVideo: false, hasAudio: true))
                == "use a video file; music goes under the movie as its soundtrack: { source: a.mov }")
        #expect(hint(0, MediaFacts(duration: 3, width: 0, height: 0, hasVideo: false, hasAudio: false))
                == "FFmpeg reads no picture in it (an animated WebP, for one): use a video file (MP4, MOV, WebM, GIF, …)")
        var still = MediaFacts(duration: 0, width: 320, height: 240, hasVideo: true, hasAudio: false)
        still.isStill = true
        #expect(hint(0, still) == "show it as a photo: - photo: a.mov")
        #expect(hint(1, MediaFacts(duration: 3, width: 0, height: 0, hasVideo: false, hasAudio: true)) == "use a JPEG, PNG or HEIC picture")
    }

    /// Text or a sticker that starts at or after its item's end (one pass of it, after speed) is
    /// never shown: noted, for clips, photos and titles. One that starts within it is not.
    @Test func textOrAStickerStartingAfterTheItemsEndIsNoted() throws {
        let star = "{ image: media/b.mp4, start: %@ }"
        let p = try PipelineLoaderTests().parse("output: { path: o.mp4, fps: 30 }\nclips:\n"
            + "  - video: media/a.mov\n    speed: 2\n    loop: 3\n    text: { value: \"Late\\nnight\", start: 2 }\n    stickers: [ \(star.replacingOccurrences(of: "%@", with: "1.9")), \(star.replacingOccurrences(of: "%@", with: "2.5")) ]\n"
            + "  - title: { text: \"Hi\", duration: 1 }\n    text: { value: \"Soon\", start: 0.5 }\n"
            + "  - photo: media/b.mp4\n    duration: 2\n    text: { value: \"Gone\", start: 2, end: 3 }\n")
        let facts = [p.items[0].sources[0].uri: MediaFacts(duration: 4, width: 320, height: 240, hasVideo: true, hasAudio: false),
                     p.items[2].sources[0].uri: MediaFacts(duration: 0, width: 320, height: 240, hasVideo: true, hasAudio: false)]
        #expect(Planner.notes(for: p, facts: facts) == [
            "p.yaml:3:5: note: clip 1 (a.mov): its text \"Late\\nnight\" starts at 2.000 s, at or after the item's end (2.000 s): it is never shown",
            "p.yaml:3:5: note: clip 1 (a.mov): sticker 2 (b.mp4) starts at 2.500 s, at or after the item's end (2.000 s): it is never shown",
            "p.yaml:10:5: note: photo 3 (b.mp4): its text \"Gone\" starts at 2.000 s, at or after the item's end (2.000 s): it is never shown",
        ])
    }
}
