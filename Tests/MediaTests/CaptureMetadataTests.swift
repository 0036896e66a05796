import Foundation
import Testing
import Media
import TestSupport

/// Capture dates from metadata only, read by libraries; never from file times.
@Suite struct CaptureMetadataTests {
    static func file(_ name: String, _ args: [String]) throws -> String {
        let dir = temporaryDirectory("capture")
        let path = dir + "/" + name
        let r = try run("ffmpeg", ["-v", "error", "-y"] + args + [path])
        #expect(r.status == 0, "\(r.err)")
        return path
    }

    @Test func aJPEGWithoutEXIFHasNoDateEvenThoughLibexifCouldInventOne() throws {
        let jpg = try Self.file("plain.jpg", ["-f", "lavfi", "-i", "color=c=red:s=64x48", "-frames:v", "1"])
        let info = try CaptureMetadata.read(jpg)
        #expect(info.kind == .photo && info.local == nil && info.dateSource == nil)
    }

    @Test func quickTimeCreationDateKeepsItsZoneAndCreationTimeIsUTC() throws {
        let apple = try Self.file("a.mov", ["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=30", "-t", "0.2", "-c:v", "libx264",
                                            "-movflags", "use_metadata_tags", "-metadata", "com.apple.quicktime.creationdate=2019-06-14T23:30:12+0200",
                                            "-metadata", "creation_time=2019-06-14T21:30:12Z"])
        let a = try CaptureMetadata.read(apple)
        #expect(a.local == "2019-06-14T23:30:12" && a.offsetMinutes == 120 && a.dateSource == "quicktime.creationdate")
        let plain = try Self.file("p.mp4", ["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=30", "-t", "0.2", "-c:v", "libx264",
                                            "-metadata", "creation_time=2019-06-14T21:30:12Z"])   // mvhd keeps whole seconds
        let p = try CaptureMetadata.read(plain)
        #expect(p.local == "2019-06-14T21:30:12.000" && p.offsetMinutes == 0 && p.dateSource == "creation_time")
        let none = try Self.file("n.mp4", ["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=30", "-t", "0.2", "-c:v", "libx264"])
        #expect(try CaptureMetadata.read(none).local == nil, "no date: never one from the file's time")
    }

    @Test func theLivePhotoPairCarriesOneIdentifierInBothHalves() throws {
        let lychee = repositoryRoot + "/../shared/media/lychee"
        guard FileManager.default.fileExists(atPath: lychee + "/train.jpg") else {
            print("skipped: ../shared/media is absent"); return
        }
        let still = try CaptureMetadata.read(lychee + "/train.jpg")
        let movie = try CaptureMetadata.read(lychee + "/train.mov")
        #expect(still.contentIdentifier == "E905E6C6-C747-4805-942F-9904A0281F02")
        #expect(movie.contentIdentifier == still.contentIdentifier)
        #expect(still.local == "2021-04-10T11:44:00.814" && still.offsetMinutes == 60 && still.dateSource == "exif")
        #expect(movie.local == "2021-04-10T11:43:59" && movie.offsetMinutes == 60)
        let heic = try CaptureMetadata.read(repositoryRoot + "/../shared/media/photoprism/iphone_7.heic")
        #expect(heic.local == "2018-09-10T12:16:13.023", "the EXIF block libheif hands out")
    }

    @Test func brokenFilesAreErrorsNotDates() throws {
        let dir = temporaryDirectory("capture-broken")
        try Data("nope".utf8).write(to: URL(fileURLWithPath: dir + "/x.jpg"))
        try Data(repeating: 7, count: 2048).write(to: URL(fileURLWithPath: dir + "/x.mov"))
        try Data(repeating: 7, count: 2048).write(to: URL(fileURLWithPath: dir + "/x.heic"))
        for f in ["x.jpg", "x.mov", "x.heic"] {
            #expect(throws: (any Error).self) { try CaptureMetadata.read(dir + "/" + f) }
        }
    }
}
