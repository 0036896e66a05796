import Foundation
import Testing
@testable import Media
import TestSupport

/// The dashboard's poster of a segment is its middle frame.
@Suite struct PosterTests {
    /// A segment that fades in from black, one key frame at its start (as rendered segments are):
    /// seeking to the middle lands on that key frame, and the poster was the black first frame.
    @Test func aSegmentsPosterIsItsMiddleNotTheKeyFrameBeforeIt() throws {
        let dir = temporaryDirectory("poster")
        let segment = dir + "/segment.mp4"
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0xd0d0d0:size=320x180:rate=30:duration=3,fade=in:0:30",
                                   "-c:v", "libx264", "-g", "250", "-pix_fmt", "yuv420p", segment], timeout: 60)
        #expect(r.status == 0, "\(r.err)")
        let png = dir + "/poster.png"
        try Thumbnails.posterOfMovie(path: segment, name: "segment", width: 160).write(to: URL(fileURLWithPath: png))
        let mean = try frameRGBMeans(png, frame: 0)
        #expect(mean.r > 150 && mean.g > 150 && mean.b > 150, "the poster is the faded-in middle, not black: \(mean)")
    }
}
