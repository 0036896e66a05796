import Foundation
import Testing
import Engine
import Lineage
import TestSupport

/// `coord suggest` on libraries built here: JPEGs dated by exiftool, a HEIC and a real Live
/// Photo pair from ../shared/media, MOVs dated by ffmpeg's metadata options, undated and broken
/// files, nested folders. Each rule of the issue, through the real binary.
@Suite(.serialized) struct SuggestTests {
    static let haveExiftool = (try? run("exiftool", ["-ver"]).status) == 0
    static let shared = repositoryRoot + "/../shared/media"
    static let haveShared = FileManager.default.fileExists(atPath: shared + "/lychee/train.jpg")
    static let note: Comment = "needs exiftool (libimage-exiftool-perl, scripts/test-tools) and ../shared/media"
    static let today = "2026-06-20"

    static func tools(_ have: Bool) -> Bool {
        if !have && DashboardTests.required { Issue.record("exiftool or ../shared/media is missing: scripts/test-tools installs exiftool") }
        return have
    }

    struct Library { var root: String; var state: String; var out: String }

    /// The library (today is 2026-06-20):
    ///   recent/a/p1.jpg, p2.jpg, deeper/h1.heic   14 June (EXIF, HEIC's EXIF)
    ///   recent/a/m1.mov, p3.jpg                   15 June (QuickTime creationdate, EXIF)
    ///   recent/b/train.jpg + train.mov            a Live Photo (matching content identifiers), 15 June
    ///   decoy/train.jpg + train.mov               same names, different identifiers: a photo (15 June) and a 2021 video
    ///   lone.jpg 1 June · undated.jpg (file time only) · old/2019/o1-4.jpg 19–21 June 2019 · broken.jpg, broken.mov
    static func makeLibrary() throws -> Library {
        let dir = temporaryDirectory("suggest")
        let root = dir + "/Pictures"
        let fm = FileManager.default
        for f in ["recent/a/deeper", "recent/b", "decoy", "old/2019"] { try fm.createDirectory(atPath: "\(root)/\(f)", withIntermediateDirectories: true) }
        func jpeg(_ path: String, _ colour: String) throws {
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=\(colour):s=320x240", "-frames:v", "1", "\(root)/\(path)"])
            guard r.status == 0 else { throw GenerateError(message: r.err) }
        }
        try jpeg("recent/a/p1.jpg", "red"); try jpeg("recent/a/p2.jpg", "green"); try jpeg("recent/a/p3.jpg", "blue")
        try jpeg("lone.jpg", "gray"); try jpeg("undated.jpg", "white")
        for k in 1...4 { try jpeg("old/2019/o\(k).jpg", ["orange", "purple", "yellow", "cyan"][k - 1]) }
        try fm.copyItem(atPath: shared + "/photoprism/iphone_7.heic", toPath: root + "/recent/a/deeper/h1.heic")
        for f in ["train.jpg", "train.mov"] {
            try fm.copyItem(atPath: shared + "/lychee/" + f, toPath: root + "/recent/b/" + f)
            try fm.copyItem(atPath: shared + "/lychee/" + f, toPath: root + "/decoy/" + f)
        }
        let m = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                                   "-movflags", "use_metadata_tags", "-metadata", "com.apple.quicktime.creationdate=2026-06-15T09:00:00+0200", root + "/recent/a/m1.mov"])
        #expect(m.status == 0, "\(m.err)")
        // Dates, in one exiftool run.
        var args: [String] = []
        func date(_ path: String, _ value: String, offset: String = "+02:00", extra: [String] = []) {
            args += ["-overwrite_original", "-DateTimeOriginal=\(value)", "-OffsetTimeOriginal=\(offset)"] + extra + ["\(root)/\(path)", "-execute"]
        }
        date("recent/a/p1.jpg", "2026:06:14 09:00:00", extra: ["-SubSecTimeOriginal=250"])
        date("recent/a/p2.jpg", "2026:06:14 11:00:00")
        date("recent/a/deeper/h1.heic", "2026:06:14 18:00:00")
        date("recent/a/p3.jpg", "2026:06:15 10:30:00")
        date("recent/b/train.jpg", "2026:06:15 12:00:00")
        date("decoy/train.jpg", "2026:06:15 13:00:00", extra: ["-Apple:MediaGroupUUID=00000000-DECO-Y000-0000-000000000000"])
        date("lone.jpg", "2026:06:01 08:00:00")
        for k in 1...4 { date("old/2019/o\(k).jpg", "2019:06:\(18 + min(k, 3)) 1\(k):00:00", offset: "-04:00") }
        try args.joined(separator: "\n").write(toFile: dir + "/exif.args", atomically: true, encoding: .utf8)
        let e = try run("exiftool", ["-q", "-@", dir + "/exif.args"], timeout: 120)
        #expect(e.status == 0, "exiftool: \(e.err)")
        // Dated only by its file time (inside the recent window): never suggested.
        try fm.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_781_424_000)], ofItemAtPath: root + "/undated.jpg")   // 2026-06-14
        try Data("not a JPEG at all".utf8).write(to: URL(fileURLWithPath: root + "/broken.jpg"))
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: root + "/recent/broken.mov"))
        return Library(root: root, state: dir + "/state", out: dir + "/drafts")
    }

    static func coord(_ args: [String], _ lib: Library) throws -> (status: Int32, out: String, err: String) {
        try run(coordPath, ["suggest"] + args + ["--state", lib.state], timeout: 600)
    }

    static func list(_ lib: Library, _ extra: [String] = []) throws -> (json: [[String: Any]], raw: String, err: String) {
        let r = try coord(["list", lib.root, "--today", today, "--out", lib.out, "--json"] + extra, lib)
        #expect(r.status == 0, "\(r.err)")
        let json = (try? JSONSerialization.jsonObject(with: Data(r.out.utf8))) as? [[String: Any]] ?? []
        return (json, r.out, r.err)
    }

    @Test(.enabled(if: tools(haveExiftool && haveShared), note))
    func nothingBeforeOptInThenDatedDraftsThatRender() throws {
        let lib = try Self.makeLibrary()
        defer { try? FileManager.default.removeItem(atPath: (lib.root as NSString).deletingLastPathComponent) }

        // Not opted in: nothing is scanned or written, and it says how to opt in.
        let before = try Self.list(lib)
        #expect(before.raw.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        #expect(before.err.contains("coord suggest enable"))
        #expect(!FileManager.default.fileExists(atPath: lib.out), "nothing written before opt-in")
        let indexed = FileManager.default.fileExists(atPath: lib.state + "/library-index.db")
            ? try LibraryIndex(path: lib.state + "/library-index.db").entries(library: lib.root).count : 0
        #expect(indexed == 0, "nothing scanned before opt-in")

        // Recent only.
        #expect(try Self.coord(["enable", lib.root], lib).status == 0)
        let recent = try Self.list(lib)
        #expect(recent.err.contains("2 files could not be read"), "\(recent.err)")
        #expect(recent.json.count == 1, "\(recent.raw)")
        let s = try #require(recent.json.first)
        #expect(s["kind"] as? String == "recent")
        #expect(s["title"] as? String == "14–15 June 2026")
        #expect(s["from"] as? String == "2026-06-14" && s["to"] as? String == "2026-06-15")
        let items = (s["items"] as? [String] ?? []).map { $0.replacingOccurrences(of: lib.root + "/", with: "") }
        #expect(items == ["recent/a/p1.jpg", "recent/a/p2.jpg", "recent/a/deeper/h1.heic", "recent/a/m1.mov", "recent/a/p3.jpg",
                          "recent/b/train.jpg", "decoy/train.jpg"], "capture order, the Live Photo once, never undated.jpg: \(items)")
        let draftPath = try #require(s["pipeline"] as? String)
        let draft = try String(contentsOfFile: draftPath, encoding: .utf8)
        #expect(draft.contains("live_photo: \"\(lib.root)/recent/b/train.jpg\""), "paired by content identifier")
        #expect(draft.contains("photo: \"\(lib.root)/decoy/train.jpg\"") && !draft.contains("live_photo: \"\(lib.root)/decoy/"),
                "same names with different identifiers are not a Live Photo")
        #expect(draft.contains("text: \"14–15 June 2026\""), "a date title card")
        let sheet = (draftPath as NSString).deletingPathExtension + ".png"
        let png = try Data(contentsOf: URL(fileURLWithPath: sheet))
        #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), "a contact sheet PNG")
        #expect(try Self.list(lib).raw == recent.raw, "deterministic")

        // A day with nothing to suggest says why, in the library's own figures.
        let later = try Self.coord(["list", lib.root, "--today", "2027-03-01", "--out", lib.out, "--json"], lib)
        #expect(later.status == 0 && later.out.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
        #expect(later.err.contains("\(lib.root): no suggestion for 2027-03-01:"), "\(later.err)")
        #expect(later.err.contains("none is from the last 30 days (since 2027-01-31); the newest before then is from 2026-06-15"), "\(later.err)")
        #expect(later.err.contains("memories from earlier years are off (to add them: coord suggest enable \(lib.root) --memories)"), "\(later.err)")
        #expect(!recent.err.contains("no suggestion for"), "said only when there is none: \(recent.err)")

        // Memories, only once asked for.
        #expect(!recent.raw.contains("on_this_day"))
        #expect(try Self.coord(["enable", lib.root, "--memories"], lib).status == 0)
        let both = try Self.list(lib)
        let memory = try #require(both.json.first { $0["kind"] as? String == "on_this_day" })
        #expect(memory["title"] as? String == "19–21 June 2019")
        #expect((memory["items"] as? [String])?.count == 4)

        // The person edits a draft: listing again never overwrites it.
        let movie = try #require(memory["pipeline"] as? String)
        let mine = try String(contentsOfFile: movie, encoding: .utf8).replacingOccurrences(of: "fps: 30", with: "fps: 25")
        try mine.write(toFile: movie, atomically: true, encoding: .utf8)
        let again = try Self.list(lib)
        let kept = try #require(again.json.first { $0["kind"] as? String == "on_this_day" })
        #expect(try String(contentsOfFile: movie, encoding: .utf8) == mine, "an edited draft is kept as it is")
        #expect(kept["pipeline"] as? String == movie && kept["edited"] as? Bool == true)
        let fresh = try #require(kept["suggested_pipeline"] as? String)
        #expect(try String(contentsOfFile: fresh, encoding: .utf8).contains("fps: 30"), "the suggestion as it stands goes beside it")
        #expect(again.err.contains("was edited"), "\(again.err)")
        let untouched = try #require(again.json.first { $0["kind"] as? String == "recent" })
        #expect(untouched["edited"] == nil)
        // Saved by an editor in Latin-1 (not UTF-8), the edit is still the person's: kept too.
        let latin1 = Data(mine.utf8) + Data("# caf".utf8) + Data([0xE9, 0x0A])
        try latin1.write(to: URL(fileURLWithPath: movie))
        _ = try Self.list(lib)
        #expect(try Data(contentsOf: URL(fileURLWithPath: movie)) == latin1, "a draft edited in another encoding is kept as it is")
        try mine.write(toFile: movie, atomically: true, encoding: .utf8)

        // The person renders their draft.
        let submit = try run(coordPath, ["submit", movie, "--state", lib.state + "-render"], timeout: 600)
        #expect(submit.status == 0, "coord submit the memory draft: \(submit.err)")
        let output = (movie as NSString).deletingPathExtension + ".mp4"
        let facts = try ffprobe(output)
        #expect(facts.duration > 10, "title card + 4 photos: \(facts.duration) s")
        #expect(facts.frameRate == "25/1", "their edit (fps 25) is what renders: \(facts.frameRate ?? "?")")
    }

    /// The flow the README shows: list (drafts in the state folder's `suggestions`, the default),
    /// then `coord submit` the draft with the same state folder. The movie goes beside its draft;
    /// before, the submit refused it ("is inside the state folder") and no suggestion could be
    /// rendered without `--out` or another state folder.
    @Test(.enabled(if: tools(haveExiftool && haveShared), note))
    func aDraftInTheDefaultFolderRendersWithTheSameStateFolder() throws {
        let lib = try Self.makeLibrary()
        defer { try? FileManager.default.removeItem(atPath: (lib.root as NSString).deletingLastPathComponent) }
        #expect(try Self.coord(["enable", lib.root], lib).status == 0)
        let r = try Self.coord(["list", lib.root, "--today", Self.today, "--json", "--no-contact-sheets"], lib)
        let listed = (try? JSONSerialization.jsonObject(with: Data(r.out.utf8))) as? [[String: Any]] ?? []
        let draft = try #require(listed.first?["pipeline"] as? String, "\(r.out) \(r.err)")
        #expect(draft.hasPrefix(lib.state + "/suggestions/"), "\(draft)")
        let submit = try run(coordPath, ["submit", draft, "--state", lib.state], timeout: 600)
        #expect(submit.status == 0, "\(submit.err)")
        let movie = (draft as NSString).deletingPathExtension + ".mp4"
        #expect(try ffprobe(movie).duration > 5, "title card and photos")
        // Nothing else in the state folder is the movie's to write.
        try writePipeline(lib.state + "/p.yaml", output: lib.state + "/movie.mp4", clips: ["title: hi"])
        let refused = try run(coordPath, ["submit", lib.state + "/p.yaml", "--state", lib.state], timeout: 60)
        #expect(refused.status == 2 && refused.err.contains("is inside the state folder"), "\(refused.err)")
    }

    @Test(.enabled(if: tools(haveExiftool && haveShared), note))
    func blocksAndDismissalsHideUntilUndone() throws {
        let lib = try Self.makeLibrary()
        defer { try? FileManager.default.removeItem(atPath: (lib.root as NSString).deletingLastPathComponent) }
        #expect(try Self.coord(["enable", lib.root, "--memories"], lib).status == 0)
        func titles() throws -> [String] { try Self.list(lib, ["--no-contact-sheets"]).json.compactMap { $0["title"] as? String } }
        #expect(try titles() == ["14–15 June 2026", "19–21 June 2019"])

        #expect(try Self.coord(["block", lib.root, "--date", "2026-06-14"], lib).status == 0)
        #expect(try titles() == ["15 June 2026", "19–21 June 2019"])
        #expect(try Self.coord(["unblock", lib.root, "--date", "2026-06-14"], lib).status == 0)
        #expect(try titles() == ["14–15 June 2026", "19–21 June 2019"])

        #expect(try Self.coord(["block", lib.root, "--from", "2019-01-01", "--to", "2019-12-31"], lib).status == 0)
        #expect(try titles() == ["14–15 June 2026"])
        #expect(try Self.coord(["unblock", lib.root, "--from", "2019-01-01", "--to", "2019-12-31"], lib).status == 0)

        #expect(try Self.coord(["block", lib.root, "--folder", lib.root + "/old"], lib).status == 0)
        #expect(try titles() == ["14–15 June 2026"])
        #expect(try Self.coord(["unblock", lib.root, "--folder", lib.root + "/old"], lib).status == 0)

        // The movie half hides the whole Live Photo.
        #expect(try Self.coord(["block", lib.root, "--asset", lib.root + "/recent/b/train.mov"], lib).status == 0)
        let listedNow = try Self.list(lib, ["--no-contact-sheets"]).json
        let noLive = listedNow.first { $0["kind"] as? String == "recent" }
        let remaining = (noLive?["items"] as? [String]) ?? []
        let stillShown = remaining.contains(lib.root + "/recent/b/train.jpg")
        #expect(!remaining.isEmpty && !stillShown, "blocking train.mov hides the Live Photo: \(remaining)")
        #expect(try Self.coord(["unblock", lib.root, "--asset", lib.root + "/recent/b/train.mov"], lib).status == 0)

        // A dismissal sticks across rescans until the items change.
        let id = try #require(try Self.list(lib, ["--no-contact-sheets"]).json.first?["id"] as? String)
        #expect(try Self.coord(["dismiss", id], lib).status == 0)
        #expect(try titles() == ["19–21 June 2019"])
        #expect(try titles() == ["19–21 June 2019"], "still dismissed on a rescan")
        try FileManager.default.copyItem(atPath: lib.root + "/recent/a/p3.jpg", toPath: lib.root + "/recent/a/p4.jpg")
        _ = try run("exiftool", ["-q", "-overwrite_original", "-DateTimeOriginal=2026:06:15 16:00:00", lib.root + "/recent/a/p4.jpg"])
        #expect(try titles() == ["14–15 June 2026", "19–21 June 2019"], "new items bring it back")
        let rewritten = try #require(try Self.list(lib, ["--no-contact-sheets"]).json.first?["pipeline"] as? String)
        #expect(try String(contentsOfFile: rewritten, encoding: .utf8).contains("/recent/a/p4.jpg"), "an unedited draft follows its suggestion")
        #expect(!FileManager.default.fileExists(atPath: (rewritten as NSString).deletingPathExtension + ".suggested.yaml"))
        #expect(try Self.coord(["dismiss", "no-such-id"], lib).status != 0)

        // Paused and disabled libraries say so and write nothing.
        #expect(try Self.coord(["pause"], lib).status == 0)
        let paused = try Self.list(lib, ["--no-contact-sheets"])
        #expect(paused.raw.trimmingCharacters(in: .whitespacesAndNewlines) == "[]" && paused.err.contains("paused"))
        #expect(try Self.coord(["resume"], lib).status == 0)
        #expect(try Self.coord(["disable", lib.root], lib).status == 0)
        #expect(try Self.list(lib, ["--no-contact-sheets"]).raw.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
    }

    /// A library that links in a folder from another disk and a file from elsewhere, as people do
    /// with a phone's folder on a NAS: both are scanned; a file reached by two paths is one item; a
    /// link back to the library is not walked for ever; a link to nothing is reported by name.
    @Test func linkedFoldersAndFilesAreScannedOnce() throws {
        let dir = temporaryDirectory("suggest-links")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fm = FileManager.default
        let root = dir + "/Pictures", disk = dir + "/other-disk"
        for f in [root + "/own", disk + "/2026", dir + "/hidden-elsewhere"] { try fm.createDirectory(atPath: f, withIntermediateDirectories: true) }
        func movie(_ path: String, _ date: String) throws {
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=30", "-t", "0.2", "-c:v", "libx264",
                                       "-movflags", "use_metadata_tags", "-metadata", "com.apple.quicktime.creationdate=\(date)", path])
            #expect(r.status == 0, "\(r.err)")
        }
        try movie(root + "/own/m2.mov", "2026-06-15T10:00:00+0200")
        try movie(disk + "/2026/m1.mov", "2026-06-14T10:00:00+0200")
        try movie(dir + "/hidden-elsewhere/h.mov", "2026-06-14T11:00:00+0200")
        try fm.createSymbolicLink(atPath: root + "/phone", withDestinationPath: disk)                         // a folder on another disk
        try fm.createSymbolicLink(atPath: root + "/own/m1-again.mov", withDestinationPath: disk + "/2026/m1.mov")   // the same file twice
        try fm.createSymbolicLink(atPath: root + "/own/loop", withDestinationPath: root)                      // back to the library
        try fm.createSymbolicLink(atPath: root + "/own/gone.mov", withDestinationPath: dir + "/unplugged/g.mov")   // to nothing
        try fm.createSymbolicLink(atPath: root + "/.hidden", withDestinationPath: dir + "/hidden-elsewhere")    // hidden: skipped
        let index = try LibraryIndex(path: dir + "/library-index.db")
        let first = try LibraryScanner.scan(library: root, index: index)
        #expect(first.files == 2 && first.read == 2, "files \(first.files), read \(first.read)")
        #expect(first.unreadable.map(\.path) == [root + "/own/gone.mov"])
        #expect(first.unreadable.first?.why.contains("a link to a file that is not there (\(dir)/unplugged/g.mov)") == true, "\(first.unreadable)")
        let items = LibraryScanner.items(try index.entries(library: root))
        #expect(items.map(\.path) == [root + "/own/m1-again.mov", root + "/own/m2.mov"], "one item per file, by its first path")
        let again = try LibraryScanner.scan(library: root, index: index)
        #expect(again.files == 2 && again.read == 0, "a rescan with nothing changed reads nothing (read \(again.read))")
    }

    /// A phone's DCIM holds screen captures beside the camera's clips: a dated screen recording
    /// (a chat, a bank's app) was drafted into the day's movie like any clip. Screenshots and
    /// screen recordings are skipped by the names phones and computers give them; a clip whose
    /// name merely starts with "screen" is not.
    @Test func screenCapturesAreNotMemories() throws {
        let dir = temporaryDirectory("suggest-screens")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let root = dir + "/Phone"
        let camera = root + "/DCIM/Camera"
        for f in [camera, root + "/DCIM/Screen recordings", root + "/Pictures/Screenshots", root + "/Movies"] {
            try FileManager.default.createDirectory(atPath: f, withIntermediateDirectories: true)
        }
        var minute = 0
        func movie(_ path: String) throws {
            minute += 1
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=30", "-t", "0.5", "-c:v", "libx264",
                                       "-movflags", "use_metadata_tags", "-metadata", "com.apple.quicktime.creationdate=2026-06-15T10:\(String(format: "%02d", minute)):00+0200", path])
            #expect(r.status == 0, "\(r.err)")
        }
        let kept = [camera + "/VID_20260615_100000.mp4", camera + "/screenplay-rehearsal.mov"]
        for p in kept { try movie(p) }
        for p in [root + "/DCIM/Screen recordings/VID_20260615_101500.mp4", camera + "/Screen_Recording_20260615-101600_Chrome.mp4",
                  root + "/Movies/screen-20260615-102000.mp4", camera + "/RPReplay_Final1781510400.MP4",
                  root + "/Pictures/Screenshots/clip.mov", root + "/Movies/Screen Recording 2026-06-15 at 10.30.00.mov"] {
            try movie(p)
        }
        let index = try LibraryIndex(path: dir + "/library-index.db")
        let scan = try LibraryScanner.scan(library: root, index: index)
        #expect(scan.files == 2 && scan.unreadable.isEmpty, "files \(scan.files), unreadable \(scan.unreadable)")
        #expect(LibraryScanner.items(try index.entries(library: root)).map(\.path).sorted() == kept.sorted())
    }

    /// A day with a tap-length clip (0.15 s, like the corpus's iPhone clip) between two longer
    /// ones: its draft gave that clip the default half-second fades on both sides, so the draft
    /// failed to load and `coord suggest` listed nothing but that error. The draft now cuts
    /// around it, and `coord plan` of the draft succeeds.
    @Test func aTapLengthClipDoesNotSpoilItsDaysDraft() throws {
        let dir = temporaryDirectory("suggest-short")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let root = dir + "/Pictures"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for (name, seconds, hour) in [("a.mov", "2", "09"), ("b.mov", "0.15", "10"), ("c.mov", "1", "11")] {
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=30", "-t", seconds, "-c:v", "libx264",
                                       "-movflags", "use_metadata_tags", "-metadata", "com.apple.quicktime.creationdate=2026-06-15T\(hour):00:00+0200",
                                       root + "/" + name])
            #expect(r.status == 0, "\(r.err)")
        }
        let lib = Library(root: root, state: dir + "/state", out: dir + "/drafts")
        #expect(try Self.coord(["enable", root], lib).status == 0)
        let listed = try Self.list(lib, ["--no-contact-sheets"])
        let draft = try #require(listed.json.first?["pipeline"] as? String, "\(listed.err)")
        let text = try String(contentsOfFile: draft, encoding: .utf8)
        #expect(text.contains("a.mov\"\n    transition: none\n  - video: \"\(root)/b.mov\"\n    transition: none\n"), "\(text)")
        #expect(text.contains("c.mov\"") && !text.contains("c.mov\"\n    transition"), "the last item has none: \(text)")
        let plan = try run(coordPath, ["plan", draft], timeout: 120)
        #expect(plan.status == 0, "\(plan.err)")
    }

    /// A Pixel's day: every photo a motion photo (its movie inside the JPEG), one with the motion
    /// turned off (Camera:MotionPhoto 0, a movie still appended). The scan listed them all as
    /// photos, so the draft showed stills where the phone shows motion. A motion photo is now a
    /// `live_photo:` item, its fades fitted to its movie's length; the draft renders that movie.
    @Test(.enabled(if: tools(haveExiftool), "needs exiftool (libimage-exiftool-perl, scripts/test-tools)"))
    func anAndroidMotionPhotoIsSuggestedWithItsMovie() throws {
        let dir = temporaryDirectory("suggest-motion")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let root = dir + "/Pictures"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for (k, colour) in ["red", "green", "blue"].enumerated() {
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=\(colour):s=320x240", "-frames:v", "1", "\(dir)/still\(k).jpg"])
            #expect(r.status == 0, "\(r.err)")
        }
        let e = try run("exiftool", ["-q", "-overwrite_original", "-DateTimeOriginal=2026:06:15 10:00:00", "-OffsetTimeOriginal=+02:00",
                                     dir + "/still0.jpg", dir + "/still1.jpg", dir + "/still2.jpg"])
        #expect(e.status == 0, "exiftool: \(e.err)")
        try Generate.clip(dir + "/motion.mp4", seconds: 0.8, tone: 500)
        try Generate.motionPhoto(root + "/PXL_20260615_080000001.MP.jpg", still: dir + "/still0.jpg", movie: dir + "/motion.mp4")
        try Generate.motionPhoto(root + "/PXL_20260615_080000002.MP.jpg", still: dir + "/still1.jpg", movie: dir + "/motion.mp4", flag: 0)
        try FileManager.default.copyItem(atPath: dir + "/still2.jpg", toPath: root + "/PXL_20260615_080000003.jpg")
        let lib = Library(root: root, state: dir + "/state", out: dir + "/drafts")
        #expect(try Self.coord(["enable", root], lib).status == 0)
        let listed = try Self.list(lib)
        let draft = try #require(listed.json.first?["pipeline"] as? String, "\(listed.err)")
        let text = try String(contentsOfFile: draft, encoding: .utf8)
        // The 0.8 s movie gives each side at most 0.4 s less a frame: 0.36 s fades around it.
        #expect(text.contains("""
              - live_photo: "\(root)/PXL_20260615_080000001.MP.jpg"
                transition: { type: fade, duration: 0.36 }
              - photo: "\(root)/PXL_20260615_080000002.MP.jpg"
            """), "\(text)")
        #expect(text.contains("- photo: \"\(root)/PXL_20260615_080000003.jpg\""), "\(text)")
        #expect(text.contains("transition: { type: fade, duration: 0.36 }\n  - live_photo:"), "the fade into it too: \(text)")
        let plan = try run(coordPath, ["plan", draft, "--json"], timeout: 120)
        #expect(plan.status == 0, "\(plan.err)")
        // The motion photo's item plays its 0.8 s movie (24 frames), not a 3 s still.
        let timeline = ((try? JSONSerialization.jsonObject(with: Data(plan.out.utf8))) as? [String: Any])?["timeline"] as? [[String: Any]]
        #expect(timeline?.map { $0["frameCount"] as? Int ?? -1 } == [75, 24, 90, 90], "\(plan.out.suffix(1500))")
    }

    /// "On this day" from a 2000s family library: an old phone's .3gp and a compact camera's
    /// .avi (dated by its IDIT chunk) were never scanned (MOV/MP4 only), so those years had no
    /// memories. Both are read now, by the dates their containers carry.
    @Test func oldPhonesAndCamerasMoviesAreRemembered() throws {
        let dir = temporaryDirectory("suggest-old")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let root = dir + "/Pictures/2009"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        func movie(_ name: String, _ codecs: [String], metadata: [String]) throws {
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=176x144:rate=15", "-f", "lavfi", "-i", "sine=sample_rate=8000",
                                       "-t", "1"] + codecs + metadata + [root + "/" + name])
            #expect(r.status == 0, "\(r.err)")
        }
        try movie("VID00012.3gp", ["-c:v", "h263", "-c:a", "aac", "-ac", "1"], metadata: ["-metadata", "creation_time=2009-06-19T14:00:00Z"])
        try movie("MVI_0042.MOV", ["-c:v", "libx264", "-c:a", "aac"], metadata: ["-metadata", "creation_time=2009-06-19T15:00:00Z"])
        // A camera's AVI: MJPEG and PCM, its date in an IDIT chunk of the header list (ffmpeg
        // writes none; Canon and Nikon compacts did).
        try movie("plain.avi", ["-c:v", "mjpeg", "-c:a", "pcm_u8", "-ac", "1"], metadata: [])
        var avi = try Data(contentsOf: URL(fileURLWithPath: root + "/plain.avi"))
        try FileManager.default.removeItem(atPath: root + "/plain.avi")
        func u32(_ at: Int) -> Int { Int(avi[at]) | Int(avi[at + 1]) << 8 | Int(avi[at + 2]) << 16 | Int(avi[at + 3]) << 24 }
        func le(_ v: Int) -> Data { Data([UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24 & 0xFF)]) }
        let list = try #require(avi.range(of: Data("LIST".utf8), in: 12..<avi.count)?.lowerBound)
        #expect(avi[(list + 8)..<(list + 12)] == Data("hdrl".utf8))
        let value = Data("FRI JUN 19 16:00:00 2009\n\u{0}".utf8), chunk = Data("IDIT".utf8) + le(value.count) + value
        let listSize = u32(list + 4), riffSize = u32(4)
        avi.insert(contentsOf: chunk, at: list + 8 + listSize)
        avi.replaceSubrange((list + 4)..<(list + 8), with: le(listSize + chunk.count))
        avi.replaceSubrange(4..<8, with: le(riffSize + chunk.count))
        try avi.write(to: URL(fileURLWithPath: root + "/MVI_0043.AVI"))

        let lib = Library(root: dir + "/Pictures", state: dir + "/state", out: dir + "/drafts")
        #expect(try Self.coord(["enable", lib.root, "--memories"], lib).status == 0)
        let listed = try Self.list(lib, ["--no-contact-sheets"])
        let memory = try #require(listed.json.first { $0["kind"] as? String == "on_this_day" }, "\(listed.raw) \(listed.err)")
        #expect(memory["title"] as? String == "19 June 2009")
        #expect(memory["items"] as? [String] == ["VID00012.3gp", "MVI_0042.MOV", "MVI_0043.AVI"].map { root + "/" + $0 }, "\(memory)")
        let plan = try run(coordPath, ["plan", try #require(memory["pipeline"] as? String)], timeout: 120)
        #expect(plan.status == 0, "\(plan.err)")
    }

    /// 10,000 files (dated JPEGs and MOVs in 100 folders): the first scan reads metadata only;
    /// a rescan with nothing changed reads nothing.
    @Test func tenThousandFilesScanOnceAndRescanQuickly() throws {
        let dir = temporaryDirectory("suggest-scale")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let jpg = dir + "/t.jpg", mov = dir + "/t.mov"
        #expect(try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=64x48", "-frames:v", "1", jpg]).status == 0)
        if Self.haveExiftool {
            #expect(try run("exiftool", ["-q", "-overwrite_original", "-DateTimeOriginal=2026:06:14 10:00:00", jpg]).status == 0)
        }
        #expect(try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=30", "-t", "0.2", "-c:v", "libx264",
                                   "-movflags", "use_metadata_tags", "-metadata", "com.apple.quicktime.creationdate=2026-06-14T10:00:00+0200", mov]).status == 0)
        let root = dir + "/lib"
        for f in 0..<100 {
            let folder = "\(root)/\(f)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for k in 0..<100 { try FileManager.default.copyItem(atPath: k % 5 == 0 ? mov : jpg, toPath: "\(folder)/\(k).\(k % 5 == 0 ? "mov" : "jpg")") }
        }
        let index = try LibraryIndex(path: dir + "/library-index.db")
        let first = try LibraryScanner.scan(library: root, index: index)
        let again = try LibraryScanner.scan(library: root, index: index)
        print(String(format: "suggest scan: 10,000 files, first scan %.1f s (%d read), rescan %.2f s (%d read)", first.seconds, first.read, again.seconds, again.read))
        #expect(first.files == 10_000 && first.read == 10_000 && first.unreadable.isEmpty)
        #expect(again.read == 0)
        #expect(first.seconds <= 60, "first scan \(first.seconds) s")
        #expect(again.seconds <= 2, "rescan \(again.seconds) s")
        let items = LibraryScanner.items(try index.entries(library: root))
        #expect(items.count == (Self.haveExiftool ? 10_000 : 2_000), "every dated file is an item")
    }
}
