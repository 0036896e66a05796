import Foundation
import Testing
import ThreadlineCore
import Media
import Lineage
import TestSupport

@Suite(.serialized) struct LivePhotoTests {
    @Test(.enabled(if: sharedMedia != nil, "../shared/media is absent: Live Photo corpus pairing skipped"))
    func theCorpusPairMatchesByIdentifierBothWays() throws {
        let jpg = sharedMedia! + "/lychee/train.jpg", mov = sharedMedia! + "/lychee/train.mov"
        #expect(LivePhotoPairing.photoIdentifier(jpg) == "E905E6C6-C747-4805-942F-9904A0281F02")
        #expect(LivePhotoPairing.movieIdentifier(mov) == "E905E6C6-C747-4805-942F-9904A0281F02")
        let a = LivePhotoPairing.pair(for: jpg), b = LivePhotoPairing.pair(for: mov)
        #expect(a.movie == mov && a.matchedBy == "identifier")
        #expect(b.photo == jpg && b.matchedBy == "identifier")
        // The identifier wins over names that say otherwise.
        let dir = temporaryDirectory("pair")
        try FileManager.default.copyItem(atPath: jpg, toPath: dir + "/holiday.jpg")
        try FileManager.default.copyItem(atPath: mov, toPath: dir + "/IMG_9999.mov")
        FileManager.default.createFile(atPath: dir + "/holiday.mov", contents: Data("decoy".utf8))
        let c = LivePhotoPairing.pair(for: dir + "/holiday.jpg")
        #expect(c.movie == dir + "/IMG_9999.mov" && c.matchedBy == "identifier")
    }

    @Test func withoutIdentifiersTheSameBasenamePairs() throws {
        let dir = temporaryDirectory("basename")
        try Generate.clip(dir + "/IMG_0001.mov", seconds: 0.5)
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240", "-frames:v", "1", dir + "/IMG_0001.jpg"])
        #expect(r.status == 0)
        let p = LivePhotoPairing.pair(for: dir + "/IMG_0001.jpg")
        #expect(p.movie == dir + "/IMG_0001.mov" && p.matchedBy == "basename" && p.identifier == nil)
    }

    @Test(.enabled(if: sharedMedia != nil, "../shared/media is absent: Live Photo render skipped"))
    func aLivePhotoRendersItsMotionOrItsStill() throws {
        let dir = temporaryDirectory("live")
        let jpg = sharedMedia! + "/lychee/train.jpg"
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "640x360",
                          clips: ["live_photo: \(jpg)", "live_photo: \(jpg)\n    use: still\n    duration: 1"])
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        let p = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(p.frames == 37 + 30)          // the motion (1.233 s at 30 fps), then the still for 1 s
        // Lineage (and posters, and messages) call each the live photo the pipeline names (they said "clip 1
        // (train.mov)" and "video", a file the person never wrote).
        let items = try LineageStore(path: dir + "/state/lineage.db").rows("SELECT kind, label FROM item ORDER BY idx")
        #expect(items == [["kind": "live_photo", "label": "live photo 1 (train.jpg)"], ["kind": "live_photo", "label": "live photo 2 (train.jpg)"]],
                "\(items)")
        // Its motion trimmed and slowed: 0.2…0.8 s at half speed is 1.2 s (before, the trim
        // was dropped without a word and speed refused).
        try writePipeline(dir + "/slow.yaml", output: dir + "/slow.mp4", size: "640x360",
                          clips: ["live_photo: \(jpg)\n    trim: { start: 0.2, end: 0.8 }\n    speed: 0.5"])
        let slow = try run(coordPath, ["submit", dir + "/slow.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(slow.status == 0, "\(slow.err)")
        #expect(try ffprobe(dir + "/slow.mp4", countFrames: true).frames == 36)
    }

    /// An Android phone keeps a motion photo as one file: the JPEG with its movie appended, the
    /// XMP saying where (Google's Motion Photo format, its MicroVideo predecessor), or Samsung's
    /// marker before it. `live_photo:` shows that movie, written out once into the person's cache
    /// (by content); `use: still` the photo. A photo whose XMP says it is no motion photo, or
    /// whose "movie" is not one, has none.
    @Test func anAndroidMotionPhotoShowsTheMovieInside() throws {
        let dir = temporaryDirectory("android")
        var r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240", "-frames:v", "1", dir + "/still.jpg"])
        #expect(r.status == 0)
        try Generate.clip(dir + "/motion.mp4", seconds: 1.5, tone: 500)
        let movie = try Data(contentsOf: URL(fileURLWithPath: dir + "/motion.mp4"))
        func photo(_ name: String, xmp: String?, marker: Data = Data(), trailer: Data = Data()) throws {
            try Generate.appendMovie(dir + "/" + name, still: dir + "/still.jpg", movie: dir + "/motion.mp4", xmp: xmp.map { Data($0.utf8) },
                                     marker: marker, trailer: trailer)
        }
        try Generate.motionPhoto(dir + "/PXL_20260614_101500123.MP.jpg", still: dir + "/still.jpg", movie: dir + "/motion.mp4")
        let rdf = #"<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">"#
        try photo("MVIMG_20190101_120000.jpg", xmp: rdf + #"<rdf:Description rdf:about="" xmlns:GCamera="http://ns.google.com/photos/1.0/camera/" GCamera:MicroVideo="1" GCamera:MicroVideoVersion="1" GCamera:MicroVideoOffset="\#(movie.count)"/></rdf:RDF></x:xmpmeta>"#)
        try photo("20230501_101010.jpg", xmp: nil, marker: Data("MotionPhoto_Data".utf8), trailer: Data("\u{0}\u{0}\u{0}\u{0}SEFHxxxxxxxxSEFT".utf8))
        try Generate.motionPhoto(dir + "/PXL_not_motion.MP.jpg", still: dir + "/still.jpg", movie: dir + "/motion.mp4", flag: 0)
        for name in ["PXL_20260614_101500123.MP.jpg", "MVIMG_20190101_120000.jpg", "20230501_101010.jpg"] {
            let range = try #require(MotionPhoto.embeddedMovie(in: dir + "/" + name), "\(name)")
            #expect(range.count == movie.count, "\(name): \(range)")
        }
        #expect(MotionPhoto.embeddedMovie(in: dir + "/PXL_not_motion.MP.jpg") == nil)
        #expect(MotionPhoto.embeddedMovie(in: dir + "/still.jpg") == nil)
        // A library scan's cheaper look (segment headers, the XMP, the last bytes) finds the same
        // three, also with the XMP behind a 60 KB EXIF block as cameras write it, and nothing in
        // a plain photo or one whose XMP says it is none.
        let still = try Data(contentsOf: URL(fileURLWithPath: dir + "/still.jpg"))
        func segment(_ marker: UInt8, _ payload: Data) -> Data { Data([0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)]) + payload }
        let xmp = Data("http://ns.adobe.com/xap/1.0/\u{0}".utf8) + Data(Generate.motionPhotoXMP(flag: 1, movieLength: movie.count).utf8)
        try (still.prefix(2) + segment(0xE1, Data("Exif\u{0}\u{0}".utf8) + Data(repeating: 0x20, count: 60_000)) + segment(0xE1, xmp)
             + still.dropFirst(2) + movie).write(to: URL(fileURLWithPath: dir + "/PXL_exif_first.MP.jpg"))
        for name in ["PXL_20260614_101500123.MP.jpg", "MVIMG_20190101_120000.jpg", "20230501_101010.jpg", "PXL_exif_first.MP.jpg"] {
            #expect(MotionPhoto.markedMovie(in: dir + "/" + name)?.count == movie.count, "\(name)")
        }
        #expect(MotionPhoto.markedMovie(in: dir + "/PXL_not_motion.MP.jpg") == nil && MotionPhoto.markedMovie(in: dir + "/still.jpg") == nil)

        let cache = dir + "/cache"
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "320x240",
                          clips: ["live_photo: PXL_20260614_101500123.MP.jpg", "live_photo: MVIMG_20190101_120000.jpg", "live_photo: 20230501_101010.jpg",
                                  "live_photo: PXL_20260614_101500123.MP.jpg\n    use: still\n    duration: 1"])
        r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 120, environment: ["XDG_CACHE_HOME": cache])
        #expect(r.status == 0, "\(r.err)")
        #expect(try ffprobe(dir + "/out.mp4", countFrames: true).frames == 3 * 45 + 30)
        // Written out once, byte for byte the movie (the three files hold the same one).
        let written = try FileManager.default.subpathsOfDirectory(atPath: cache + "/threadline/motion-photos").filter { $0.hasSuffix(".mp4") }
        #expect(written.count == 3 && Set(written.map { ($0 as NSString).deletingLastPathComponent }).count == 1, "\(written)")
        for w in written { #expect(try Data(contentsOf: URL(fileURLWithPath: cache + "/threadline/motion-photos/" + w)) == movie) }
        // Lineage names the photo the pipeline names.
        let items = try LineageStore(path: dir + "/state/lineage.db").rows("SELECT label FROM item ORDER BY idx").map { $0["label"] ?? "" }
        #expect(items.first == "live photo 1 (PXL_20260614_101500123.MP.jpg)", "\(items)")

        // Movies unused for 30 days are removed (the next submit writes them out again); used ones stay.
        let folder = cache + "/threadline/motion-photos"
        let kept = try #require(written.first.map { folder + "/" + ($0 as NSString).deletingLastPathComponent })
        try FileManager.default.createDirectory(atPath: folder + "/old", withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -31 * 86_400)], ofItemAtPath: folder + "/old")
        Home.prune(folder, unusedFor: 30)
        #expect(!FileManager.default.fileExists(atPath: folder + "/old"))
        #expect(FileManager.default.fileExists(atPath: kept))
        Home.prune(folder, unusedFor: 30, now: Date(timeIntervalSinceNow: 31 * 86_400))
        #expect(!FileManager.default.fileExists(atPath: kept))

        try writePipeline(dir + "/no.yaml", output: dir + "/no.mp4", clips: ["live_photo: PXL_not_motion.MP.jpg"])
        let none = try run(coordPath, ["submit", dir + "/no.yaml", "--state", dir + "/state"], timeout: 60, environment: ["XDG_CACHE_HOME": cache])
        #expect(none.status == 2)
        #expect(none.err.contains("cannot find the Live Photo's motion") && none.err.contains("Android motion photo"), "\(none.err)")
    }

    @Test func aLonePhotoIsALocatedErrorUnlessUsedAsAStill() throws {
        let dir = temporaryDirectory("lone")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240", "-frames:v", "1", dir + "/lonely.jpg"])
        #expect(r.status == 0)
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", clips: ["live_photo: lonely.jpg"])
        let bad = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 60)
        #expect(bad.status == 2)
        #expect(bad.err.contains("p.yaml:9:5: error: live photo 1 (lonely.jpg): cannot find the Live Photo's motion"), "\(bad.err)")
        #expect(bad.err.contains("use: still"))
        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", clips: ["live_photo: lonely.jpg\n    use: still"])
        let ok = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state"], timeout: 60)
        #expect(ok.status == 0, "\(ok.err)")
        #expect(try ffprobe(dir + "/out.mp4", countFrames: true).frames == 90)
    }

    /// `use: still` shows the frame at the movie's still-image-time (the one Photos shows).
    @Test(.enabled(if: sharedMedia != nil, "../shared/media is absent: Live Photo still-image-time skipped"))
    func theStillIsTheMoviesFrameAtItsStillImageTime() throws {
        let mov = sharedMedia! + "/lychee/train.mov"
        // The iPhone 6s movie marks its still at 288/600 s in its own timed-metadata track.
        let t = try #require(LivePhotoPairing.stillImageTime(mov))
        #expect(abs(t - 0.48) < 0.001, "still-image-time \(t)")
        // A movie without that track has none (ours have no metadata tracks).
        let dir = temporaryDirectory("still-time")
        try Generate.clip(dir + "/plain.mov", seconds: 0.5)
        #expect(LivePhotoPairing.stillImageTime(dir + "/plain.mov") == nil)

        try writePipeline(dir + "/p.yaml", output: dir + "/out.mp4", size: "640x360",
                          clips: ["live_photo: \(sharedMedia! + "/lychee/train.jpg")\n    use: still\n    duration: 1"])
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--state", dir + "/state", "--workers", "2"], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        try extractFrame(dir + "/out.mp4", at: 0, to: dir + "/ours.png", seek: false)
        var scores: [Double: Double] = [:]
        for at in [0.0, 0.48, 1.0] {
            try extractFrame(mov, at: at, to: dir + "/ref.png",
                             filter: "scale=640:360:force_original_aspect_ratio=decrease,pad=640:360:(ow-iw)/2:(oh-ih)/2")
            scores[at] = try ssim(dir + "/ours.png", dir + "/ref.png")
        }
        #expect(scores[0.48]! > 0.95 && scores[0.48]! > scores[0.0]! + 0.1 && scores[0.48]! > scores[1.0]! + 0.1, "SSIM by time: \(scores)")
    }
}
