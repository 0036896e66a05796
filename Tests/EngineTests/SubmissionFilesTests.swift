import Foundation
import Testing
import ThreadlineCore
import Engine
import Media
@testable import Farm
import TestSupport

/// A remote submit uploads the files the items and the movie use, found by their typed fields —
/// never a file whose path merely appears as text (a title reading "/home/me/notes.txt" used to
/// send that file to the coordinator).
@Suite struct SubmissionFilesTests {
    func pipeline(_ dir: String, secret: String) throws -> Pipeline {
        try Generate.clip(dir + "/c.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try """
            version: 1
            name: notes
            output: { path: \(dir)/out.mp4, size: 160x90, fps: 30, video: { preset: ultrafast } }
            clips:
              - title: { text: "\(secret)", duration: 0.5 }
              - video: c.mp4
                text: "\(secret)"
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        return try PipelineLoader.load(path: dir + "/p.yaml")
    }

    @Test func textThatLooksLikeAPathIsNotAFile() throws {
        let dir = temporaryDirectory("typed-files")
        let secret = dir + "/notes.txt"
        try "my private notes".write(toFile: secret, atomically: true, encoding: .utf8)
        let p = try pipeline(dir, secret: secret)
        let files = p.files
        #expect(files.contains { $0.role == .source && $0.path == dir + "/c.mp4" && $0.item == 1 })
        #expect(files.contains { $0.role == .font && $0.item == 0 })
        #expect(!files.contains { $0.path == secret }, "\(files)")
        let refs = try ClusterClient.files(of: p)
        #expect(Set(refs.map(\.path)) == Set(files.map(\.path)))
        // What is read is told as it goes (a first remote submit of gigabytes reads at disk
        // speed, and said nothing), and a file remembered counts as read at once.
        let total = refs.reduce(Int64(0)) { $0 + $1.size }
        let hashes = FileHashes(path: dir + "/hashes.json", settle: -1)
        for round in 1...2 {
            var told: [Int] = []
            #expect(try ClusterClient.files(of: p, hashes: hashes) { told.append($0) } == refs)
            #expect(Int64(told.reduce(0, +)) == total && (round == 1 || told.count == refs.count), "round \(round): \(told)")
        }
    }

    /// `~/` in a pipeline and the default state folder follow `$HOME`, as the shell's `~` does.
    /// Foundation on Linux reads the password database instead: with HOME pointing elsewhere (a
    /// service's, a test harness's), `~/c.mp4` was looked for in /root and the lineage went there.
    @Test func tildeAndTheDefaultStateFolderFollowHOME() throws {
        let dir = temporaryDirectory("home")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let home = dir + "/me"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try Generate.clip(home + "/c.mp4", width: 160, height: 90, seconds: 0.3, tone: 440)
        try """
            version: 1
            name: home
            output: { path: ~/out.mp4, size: 160x90, fps: 30, video: { preset: ultrafast } }
            clips:
              - video: ~/c.mp4
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--workers", "1"], timeout: 300,
                        environment: ["HOME": home, "XDG_DATA_HOME": ""])
        #expect(r.status == 0, "\(r.err)")
        #expect(FileManager.default.fileExists(atPath: home + "/out.mp4"), "\(r.err)")
        #expect(FileManager.default.fileExists(atPath: home + "/.local/share/threadline/lineage.db"), "the default state folder is under $HOME")
    }

    /// End to end: after the render, the coordinator's store holds the clip but not the file the
    /// title names.
    @Test func remoteSubmitUploadsOnlyTheFilesItemsUse() throws {
        let dir = temporaryDirectory("typed-files-remote")
        let secret = dir + "/notes.txt"
        try "my private notes \(UUID())".write(toFile: secret, atomically: true, encoding: .utf8)
        _ = try pipeline(dir, secret: secret)
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1)
        defer { procs.stopAll() }
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--coordinator", ep], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        let store = dir + "/coord/artifacts/sha256"
        func held(_ path: String) throws -> Bool {
            let sha = try SHA256Hasher.hex(fileAt: path)
            return FileManager.default.fileExists(atPath: "\(store)/\(sha.prefix(2))/\(sha)")
        }
        #expect(try held(dir + "/c.mp4"), "the clip should have been uploaded")
        #expect(try !held(secret), "the file named only by the title's text was uploaded")
    }

    /// A submitter reads a file to hash it once while it stays as it is: a submit made again (after
    /// an interrupted upload, or a batch whose projects share clips) does not read gigabytes of
    /// phone video before anything can go up. A changed file is read again, even one whose
    /// modification time a tool put back; one still being written is not remembered.
    @Test func aFileIsHashedOnceWhileItStaysAsItIs() throws {
        let dir = temporaryDirectory("file-hashes")
        let file = dir + "/clip.mov", memo = dir + "/file-hashes.json"
        try Data("first take".utf8).write(to: URL(fileURLWithPath: file))
        let old = Date().addingTimeInterval(-60)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file)
        var reads = 0
        let counting = { (p: String, read: (Int) -> Void) throws -> String in reads += 1; return try SHA256Hasher.hex(fileAt: p, read: read) }
        let first = FileHashes(path: memo, hash: counting)
        #expect(try first.sha256(of: file) == (SHA256Hasher.hex("first take"), 10))
        #expect(try first.sha256(of: file).sha256 == SHA256Hasher.hex("first take") && reads == 1)
        first.save()
        // Another submit (another process) remembers it.
        #expect(try FileHashes(path: memo, hash: counting).sha256(of: file).sha256 == SHA256Hasher.hex("first take") && reads == 1)
        // The same size, the modification time put back: read again all the same (its change time moved).
        usleep(20_000)
        try Data("other take".utf8).write(to: URL(fileURLWithPath: file))
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file)
        let second = FileHashes(path: memo, hash: counting)
        #expect(try second.sha256(of: file).sha256 == SHA256Hasher.hex("other take") && reads == 2)
        second.save()
        // Modified just now: hashed, not remembered.
        try Data("third take".utf8).write(to: URL(fileURLWithPath: file))
        let third = FileHashes(path: memo, hash: counting)
        #expect(try third.sha256(of: file).sha256 == SHA256Hasher.hex("third take") && reads == 3)
        #expect(try third.sha256(of: file).sha256 == SHA256Hasher.hex("third take") && reads == 4)
        // A missing file is an error, not an old answer.
        try FileManager.default.removeItem(atPath: file)
        #expect(throws: (any Error).self) { try third.sha256(of: file) }
        // Beyond the limit the least recently used are forgotten.
        let small = FileHashes(path: dir + "/small.json", limit: 2, hash: counting)
        for k in 0..<3 {
            try Data("clip \(k)".utf8).write(to: URL(fileURLWithPath: dir + "/c\(k)"))
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: dir + "/c\(k)")
            _ = try small.sha256(of: dir + "/c\(k)", now: Date().timeIntervalSince1970 + Double(k) * 4000)
        }
        small.save()
        let kept = try JSONDecoder().decode([String: FileHashes.Entry].self, from: Data(contentsOf: URL(fileURLWithPath: dir + "/small.json")))
        #expect(Set(kept.keys) == [dir + "/c1", dir + "/c2"])
    }

    /// A font whose path holds a quote, a colon or a comma (a folder named "Bob's fonts", a file
    /// named "Bold: one,two.ttf") letters the title and the caption. Before, the filter graph
    /// could not be built ("Invalid argument") and both items failed.
    @Test func aFontNamedWithAQuoteAColonAndACommaIsUsed() throws {
        let dir = temporaryDirectory("odd-font")
        try FileManager.default.createDirectory(atPath: dir + "/Bob's fonts", withIntermediateDirectories: true)
        let font = dir + "/Bob's fonts/Bold: one,two.ttf"
        try FileManager.default.copyItem(atPath: Title.defaultFont, toPath: font)
        try Generate.clip(dir + "/c.mp4", width: 320, height: 180, seconds: 1, tone: 440)
        try """
            version: 1
            output: { path: out.mp4, size: 320x180, fps: 30 }
            transition: { type: none }
            clips:
              - title: { text: "MMMM", duration: 1, size: 60, font: "Bob's fonts/Bold: one,two.ttf" }
              - video: c.mp4
                text: { value: "caption", font: "Bob's fonts/Bold: one,two.ttf" }
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        // White letters on the title's black: the middle band is far from black.
        let middle = try frameRGBMeans(dir + "/out.mp4", frame: 15, x0: 0.2, x1: 0.8, y0: 0.35, y1: 0.65)
        #expect(middle.r > 40 && middle.g > 40 && middle.b > 40, "\(middle)")
        // The links made for the graph are gone, the font itself stays.
        let left = ((try? FileManager.default.contentsOfDirectory(atPath: dir + "/state/tmp")) ?? []).filter { $0.hasPrefix("threadline-") }
        #expect(left.isEmpty && FileManager.default.fileExists(atPath: font), "\(left)")
    }

    /// Words a font cannot draw ("日本" and most emoji in DejaVu Sans) came out as empty boxes
    /// without a word. `coord plan` and `coord submit` now say which, where, and what to do, and
    /// the render goes on; a file that is not a font stops the submit before anything renders
    /// (before, every item using it failed on the workers).
    @Test func whatTheMovieWillNotHaveIsToldBeforeRendering() throws {
        let dir = temporaryDirectory("font-coverage")
        try Generate.clip(dir + "/c.mp4", width: 320, height: 180, seconds: 1, tone: 440)
        try """
            version: 1
            output: { path: out.mp4, size: 320x180, fps: 30 }
            clips:
              - title: { text: "Tokyo 日本 🏖️\\n日", duration: 1 }
              - video: c.mp4
                text: "Zoë — ½ price"
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let note = "p.yaml:4:5: note: title 1 (\"Tokyo 日本 🏖️\\n日\"): the font DejaVuSans.ttf has no 日 本 🏖️: they are drawn as empty boxes; "
            + "give the title a font that has them (font: PATH), or install one (none here has them all)"
        for args in [["plan", dir + "/p.yaml"], ["submit", dir + "/p.yaml", "--state", dir + "/state"]] {
            let r = try run(coordPath, args, timeout: 120)
            #expect(r.status == 0, "\(args[0]): \(r.err)")
            let notes = r.err.split(separator: "\n").filter { $0.contains("note:") }
            #expect(notes.count == 1 && notes.first?.hasSuffix(note) == true, "\(args[0]): \(r.err)")
        }
        #expect(FileManager.default.fileExists(atPath: dir + "/out.mp4"))
        // --json: the project's object lists it.
        let json = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--json"], timeout: 120)
        let object = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any]
        let listed = object?["notes"] as? [String]
        #expect(listed?.count == 1 && listed?.first?.hasSuffix(note) == true, "\(json.out)")

        try "version: 1\noutput: { path: bad.mp4, size: 320x180 }\nclips:\n  - video: c.mp4\n    text: { value: hi, font: p.yaml }\n"
            .write(toFile: dir + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try run(coordPath, ["submit", dir + "/bad.yaml", "--state", dir + "/state"], timeout: 120)
        #expect(bad.status == 2, "\(bad.err)")
        #expect(bad.err.contains("bad.yaml:4:5: error: clip 1 (c.mp4): font: \(dir)/p.yaml is not a font FreeType can read (not a font format it knows)"),
                "\(bad.err)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/bad.mp4"))

        // A soundtrack on a GIF is noted at submit too (planning's notes that need no media).
        try "version: 1\noutput: { path: g.gif, size: 320x180 }\nsoundtrack: { source: c.mp4 }\nclips:\n  - video: c.mp4\n"
            .write(toFile: dir + "/g.yaml", atomically: true, encoding: .utf8)
        let gif = try run(coordPath, ["submit", dir + "/g.yaml", "--state", dir + "/state"], timeout: 120)
        #expect(gif.status == 0 && gif.err.contains("g.yaml:3:23: note: soundtrack: g.gif is an animated GIF, which has no sound"), "\(gif.err)")
    }

    /// A title in Chinese came out as empty boxes with the note "give the title a font that has
    /// them", though a Chinese font was installed: the default font was the only one asked. Words
    /// the default font cannot draw are now drawn with an installed font that has them all (as a
    /// browser falls back), said in a note; a font the pipeline names is left as it is.
    @Test(.enabled(if: !installedFonts(lang: "zh").isEmpty || required("Chinese font", package: "fonts-wqy-microhei"), "no Chinese font installed (scripts/test-tools installs fonts-wqy-microhei)"))
    func aTitleInChineseIsDrawnWithAnInstalledFontThatHasIt() throws {
        let dir = temporaryDirectory("font-fallback")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let installed = Self.installedFonts(lang: "zh")
        func render(_ name: String, font: String?) throws -> (notes: [String], frames: [String]) {
            let title = "{ text: \"夏天 2026 海边\", duration: 0.5\(font.map { ", font: \"\($0)\"" } ?? "") }"
            try "version: 1\noutput: { path: \(name).mp4, size: 320x180, fps: 30 }\nclips:\n  - title: \(title)\n"
                .write(toFile: "\(dir)/\(name).yaml", atomically: true, encoding: .utf8)
            let r = try run(coordPath, ["submit", "\(dir)/\(name).yaml", "--state", dir + "/state"], timeout: 120)
            #expect(r.status == 0, "\(r.err)")
            return (r.err.split(separator: "\n").filter { $0.contains("note:") }.map(String.init), try frameMD5s("\(dir)/\(name).mp4"))
        }
        let fallback = try render("fallback", font: nil)
        let said = "\(dir)/fallback.yaml:4:5: note: title 1 (\"夏天 2026 海边\"): the default font DejaVuSans.ttf has no 夏 天 海 边: the title is drawn with "
        let font = try #require(installed.first { fallback.notes == [said + "\($0), installed here, which has them (font: PATH chooses another)"] },
                                "one of \(installed): \(fallback.notes)")
        let named = try render("named", font: font)
        #expect(named.notes.isEmpty && named.frames == fallback.frames, "the same pixels as naming that font")
        let dejavu = try render("dejavu", font: "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
        #expect(dejavu.notes.first?.contains("drawn as empty boxes") == true && dejavu.frames != fallback.frames, "\(dejavu.notes)")
    }

    /// A title or caption in Hindi came out misspelt: FFmpeg 5.1's drawtext sets one glyph per
    /// character, so the vowel sign of "दि" stood after its consonant ("दविाली" for "दिवाली").
    /// Lettering in such scripts is now drawn by libass, which shapes with HarfBuzz: the sign's
    /// loop, the highest ink, is left of the middle, and the two glyphs overlap as one syllable
    /// (set apart, they are 1.5 times as wide). A caption's window holds as drawtext's does, and
    /// a long one is broken into lines that stay inside the frame.
    @Test(.enabled(if: !installedFonts(lang: "hi").isEmpty || required("Devanagari font", package: "fonts-lohit-deva"), "no Devanagari font installed (scripts/test-tools installs fonts-lohit-deva)"))
    func hindiLetteringIsShaped() throws {
        let dir = temporaryDirectory("shaped")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let font = try #require(Self.installedFonts(lang: "hi").first)
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=black:s=640x360:r=30:d=1", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                                   dir + "/black.mp4"])
        #expect(r.status == 0, "\(r.err)")
        try """
            version: 1
            output: { path: out.mp4, size: 640x360, fps: 30 }
            clips:
              - title: { text: "दि", duration: 1, size: 200, font: "\(font)" }
              - video: black.mp4
                text: { value: "दि", size: 200, position: center, start: 0.5, font: "\(font)" }
              - video: black.mp4
                text: { value: "दिवाली की रात, हम सब साथ में थे और आसमान में रोशनी थी", size: 30, position: top-right, font: "\(font)" }
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let submit = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 120)
        #expect(submit.status == 0, "\(submit.err)")
        /// The ink (luma over half) of a frame: its columns, and the mean column of its top 4 rows.
        func ink(_ frame: Int) throws -> (x0: Int, x1: Int, topX: Double)? {
            let (w, h, rgb) = try playerFrame(dir + "/out.mp4", frame: frame)
            var points: [(x: Int, y: Int)] = []
            for y in 0..<h { for x in 0..<w where rgb[(y * w + x) * 3 + 1] > 128 { points.append((x, y)) } }
            guard let top = points.map(\.y).min(), let x0 = points.map(\.x).min(), let x1 = points.map(\.x).max() else { return nil }
            let high = points.filter { $0.y <= top + 3 }.map { Double($0.x) }
            return (x0, x1, high.reduce(0, +) / Double(high.count))
        }
        for (what, frame) in [("title", 15), ("caption", 54)] {
            let i = try #require(try ink(frame), "\(what): no lettering")
            #expect(i.topX < Double(i.x0 + i.x1) / 2, "\(what): the vowel sign's loop is right of the middle (\(i)): drawn after its consonant")
            #expect(i.x1 - i.x0 < 200, "\(what): \(i.x1 - i.x0) px wide: two glyphs side by side")
        }
        #expect(try ink(36) == nil, "the caption shows from 0.5 s only")
        // A long caption is broken into lines by the glyphs' real widths: it stays inside the
        // frame (laid out by the estimate made for Latin letters, its first line ran off the left).
        let long = try #require(try ink(75), "no long caption")
        #expect(long.x0 >= 8 && long.x1 <= 632, "the caption runs off the frame: columns \(long.x0)–\(long.x1) of 640")
    }

    /// The outline fonts (first faces) for `lang` fontconfig lists, by path: fc-list, not the
    /// code under test.
    static func installedFonts(lang: String) -> [String] {
        guard let r = try? run("fc-list", ["--format", "%{file}\n", ":lang=\(lang):outline=true:index=0"]), r.status == 0 else { return [] }
        return r.out.split(separator: "\n").map(String.init).sorted()
    }

    /// False, and a failure where the suite must run every client test (CI): `what` is missing.
    static func required(_ what: String, package: String) -> Bool {
        if clientsRequired { Issue.record("no \(what) installed: scripts/test-tools installs \(package)") }
        return false
    }

    /// A sticker or watermark that is no picture (a typo naming the pipeline, a notes file)
    /// failed every render showing it, each with the whole filter graph. `coord plan` and
    /// `coord submit` (local, and remote before uploading) now refuse it with its place, once
    /// per use, and nothing renders.
    @Test func aStickerOrWatermarkThatIsNoPictureIsRefusedBeforeRendering() throws {
        let dir = temporaryDirectory("overlay-not-a-picture")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Generate.clip(dir + "/c.mp4", width: 320, height: 180, seconds: 0.5, tone: 440)
        try "my notes".write(toFile: dir + "/notes.txt", atomically: true, encoding: .utf8)
        try """
            version: 1
            output: { path: out.mp4, size: 320x180, fps: 30, watermark: { image: p.yaml } }
            clips:
              - video: c.mp4
                stickers:
                  - { image: notes.txt }
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let expected = ["p.yaml:2:17: error: output.watermark: the watermark image p.yaml is not a picture that can be read",
                        "p.yaml:4:5: error: clip 1 (c.mp4): the sticker image notes.txt is not a picture that can be read"]
        for args in [["plan", dir + "/p.yaml"], ["submit", dir + "/p.yaml", "--state", dir + "/state"],
                     ["submit", dir + "/p.yaml", "--coordinator", "tcp://127.0.0.1:9"]] {
            let r = try run(coordPath, args, timeout: 120)
            #expect(r.status == 2, "\(args): \(r.err)")
            for line in expected { #expect(r.err.contains(line), "\(args): \(r.err)") }
            #expect(r.err.contains("give a PNG, WebP, JPEG or HEIC image"), "\(r.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/out.mp4"))
    }
}

/// A remote submit of short trims of a long clip sends excerpts (`RemoteExcerpts`), and the
/// movie is the one a local render of the whole clip makes, bit for bit.
@Suite struct ExcerptSubmitTests {
    @Test func aLongClipGoesAsExcerptsOfItsTrims() throws {
        let dir = temporaryDirectory("excerpts")
        // 40 s of a 1 s key-frame interval at a phone's bit rate: 25 MB, over the 16 MiB at
        // which clips are excerpted.
        let made = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30:duration=40,noise=alls=12:allf=t",
                                      "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=40",
                                      "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "5M", "-g", "30", "-pix_fmt", "yuv420p",
                                      "-c:a", "aac", "-shortest", dir + "/concert.mp4"])
        try #require(made.status == 0, "ffmpeg: \(made.err)")
        let whole = (try FileManager.default.attributesOfItem(atPath: dir + "/concert.mp4")[.size] as! NSNumber).int64Value
        try #require(whole >= RemoteExcerpts.minimumBytes, "the clip is \(whole) bytes")
        for (name, out) in [("remote.yaml", "remote.mp4"), ("local.yaml", "local.mp4")] {
            try """
                version: 1
                name: concert
                output: { path: \(dir)/\(out), size: 640x360, fps: 30, video: { preset: ultrafast, crf: 40 } }
                transition: { type: dissolve, duration: 0.5 }
                clips:
                  - title: { text: "Concert", duration: 1 }
                  - video: concert.mp4
                    trim: { start: 20, end: 22.5 }
                  - video: concert.mp4
                    trim: { start: 31.27, end: 32.4 }
                    speed: 0.5
                  - video: concert.mp4
                    trim: { start: 37.2 }
                """.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
        }
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1)
        defer { procs.stopAll() }
        let cache = ["XDG_CACHE_HOME": dir + "/cache"]
        let r = try run(coordPath, ["submit", dir + "/remote.yaml", "--coordinator", ep], timeout: 300, environment: cache)
        #expect(r.status == 0, "\(r.err)")
        // Kept in the person's cache folder (on disk; a temporary folder may be memory).
        let kept = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/cache/threadline/excerpts")) ?? []
        #expect(kept.filter { $0.hasSuffix(".mov") }.count == 3, "\(kept)")
        #expect(r.err.contains("concert: sends 3 excerpts of ") && r.err.contains("in place of clips of \(ByteSize.text(whole))"), "\(r.err)")
        // The coordinator holds excerpts, not the clip.
        let store = dir + "/coord/artifacts/sha256"
        let held = try FileManager.default.subpathsOfDirectory(atPath: store).filter { $0.count > 3 }
        let bytes = try held.reduce(Int64(0)) { $0 + (try FileManager.default.attributesOfItem(atPath: store + "/" + $1)[.size] as! NSNumber).int64Value }
        let sha = try SHA256Hasher.hex(fileAt: dir + "/concert.mp4")
        #expect(!held.contains { $0.hasSuffix(sha) }, "the whole clip was uploaded")
        #expect(bytes < whole / 2, "the coordinator holds \(bytes) bytes (its segments and movie too) for a clip of \(whole)")
        // The same movie as a render of the whole clip here.
        let l = try run(coordPath, ["submit", dir + "/local.yaml", "--workers", "1", "--state", dir + "/local-state"], timeout: 300)
        #expect(l.status == 0, "\(l.err)")
        #expect(try SHA256Hasher.hex(fileAt: dir + "/remote.mp4") == SHA256Hasher.hex(fileAt: dir + "/local.mp4"),
                "the movie rendered from excerpts differs from the one rendered from the whole clip")
        // A clip another item also shows whole goes whole: its excerpts would only add bytes.
        var p = try PipelineLoader.load(path: dir + "/remote.yaml")
        let folder = dir + "/excerpts"
        let cut = RemoteExcerpts.prepare(p, folder: folder)
        #expect(cut.excerpts == 3 && cut.stand.keys.allSatisfy { $0.hasPrefix(dir + "/concert.mp4#t=") }, "\(cut.stand)")
        if case .video(let source, let trim?) = cut.pipeline.items[1].kind {
            #expect(source.uri.hasPrefix(dir + "/concert.mp4#t=") && trim.start < 20 && trim.end! - trim.start == 2.5, "\(source) \(trim)")
        } else { Issue.record("item 2 is \(cut.pipeline.items[1].kind)") }
        // A trim to the clip's end names its end, moved into the excerpt's time (the excerpt's
        // container says it ends later).
        let length = try Probe.facts(path: dir + "/concert.mp4").duration
        if case .video(let source, let trim?) = cut.pipeline.items[3].kind {
            #expect(source.uri.hasPrefix(dir + "/concert.mp4#t=") && trim.start < 37.2 && abs(trim.end! - trim.start - (length - 37.2)) < 1e-6, "\(source) \(trim)")
        } else { Issue.record("item 4 is \(cut.pipeline.items[3].kind)") }
        // Used again, excerpts are kept a day from their last use, not from when they were made:
        // made 20 hours ago and used now, they are still there in 10 hours.
        let files = try FileManager.default.contentsOfDirectory(atPath: folder)
        for f in files { try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -20 * 3600)], ofItemAtPath: folder + "/" + f) }
        #expect(RemoteExcerpts.prepare(p, folder: folder).excerpts == 3)
        Home.prune(folder, unusedFor: 1, now: Date(timeIntervalSinceNow: 10 * 3600))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == files.sorted(), "excerpts used an hour ago were pruned")
        p.items.append(Item(kind: .video(source: SourceRef(dir + "/concert.mp4"), trim: nil)))
        #expect(RemoteExcerpts.prepare(p, folder: folder).excerpts == 0)
        // Asked for, the clip goes whole.
        let w = try run(coordPath, ["submit", dir + "/remote.yaml", "--coordinator", ep, "--whole-files"], timeout: 300, environment: cache)
        #expect(w.status == 0 && !w.err.contains("excerpt"), "\(w.err)")
        #expect(FileManager.default.fileExists(atPath: "\(store)/\(sha.prefix(2))/\(sha)"), "--whole-files did not send the clip")
    }
}
