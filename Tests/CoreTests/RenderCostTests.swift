import Foundation
import Testing
import ThreadlineCore

/// The scheduler sends a run's costliest renders first; these pin the order the estimate gives
/// the kinds of clip a phone library mixes (see RenderCost for where the figures come from).
@Suite struct RenderCostTests {
    static let profile = OutputProfile(path: "movie.mp4")   // 1280x720, letterbox

    static func spec(frames: Int = 90, speed: Double = 1, fit: OutputProfile.Fit? = nil, kenBurns: Bool = false) -> SegmentSpec {
        let edits = Edits(fit: fit, speed: speed)
        var s = SegmentSpec(sourcePath: "", sourceName: "clip", trimStart: 0, frameCount: frames, sampleCount: 0, edits: edits, profile: profile)
        if kenBurns { s.still = true; s.kenBurns = KenBurns(from: .init(), to: .init(zoom: 1.2)) }
        return s
    }

    static func clip(_ w: Int = 1920, _ h: Int = 1080, codec: String = "h264", fps: Double = 30, rotation: Int = 0) -> MediaFacts {
        MediaFacts(duration: 3, width: w, height: h, hasVideo: true, hasAudio: true, videoCodec: codec, rotation: rotation, frameRate: fps)
    }

    @Test func aPortraitClipInALandscapeMovieCostsLessThanALandscapeOne() {
        let landscape = RenderCost.estimate(Self.clip(), spec: Self.spec())
        let portrait = RenderCost.estimate(Self.clip(rotation: 90), spec: Self.spec())
        #expect(portrait < landscape)
        // Fitted 405x720 of 1280x720: a third of the frame is picture.
        #expect(abs(RenderCost.pictureShare(Self.clip(rotation: 90), spec: Self.spec()) - 405.0 / 1280.0) < 0.01)
        // Cropped to fill, the picture is the whole frame again.
        #expect(RenderCost.pictureShare(Self.clip(rotation: 90), spec: Self.spec(fit: .crop)) == 1)
        #expect(RenderCost.estimate(Self.clip(rotation: 90), spec: Self.spec(fit: .crop)) == landscape)
    }

    @Test func decodingCostsFollowCodecPixelsAndFrameRate() {
        let h264 = RenderCost.estimate(Self.clip(), spec: Self.spec())
        #expect(RenderCost.estimate(Self.clip(codec: "hevc"), spec: Self.spec()) > h264)
        #expect(RenderCost.estimate(Self.clip(3840, 2160), spec: Self.spec()) > 1.5 * h264)
        // 60 fps shown at 30: the frames between cost, but less than shown ones.
        let sixty = RenderCost.estimate(Self.clip(fps: 60), spec: Self.spec())
        #expect(sixty > h264 && sixty < 2 * h264)
        // Half speed: each source frame is shown twice and decoded once.
        #expect(RenderCost.estimate(Self.clip(fps: 60), spec: Self.spec(speed: 0.5)) == h264)
        // Cost grows with the frames rendered.
        #expect(RenderCost.estimate(Self.clip(), spec: Self.spec(frames: 285)) > 3 * h264)
    }

    @Test func aKenBurnsStillCostsAboutAsMuchAsAClipOfItsLength() {
        let photo = MediaFacts(duration: 0, width: 4032, height: 3024, hasVideo: true, hasAudio: false, videoCodec: "mjpeg")
        var still = photo; still.isStill = true
        let moving = RenderCost.estimate(still, spec: Self.spec(kenBurns: true))
        let clip = RenderCost.estimate(Self.clip(), spec: Self.spec())
        #expect(moving > 0.8 * clip && moving < 1.2 * clip)
        // Without the move it is one picture encoded again and again, which x264 finds a copy of
        // the last: about a third of a 1080p clip's frame (1080p photos rendered at 7.4-9.1 ms a
        // frame against 21 for an HEVC clip; estimated at 0.65 of it, a phone library's project
        // read "ETA 0:15" with 4.8 s left).
        let still1 = RenderCost.estimate(still, spec: Self.spec())
        #expect(still1 < 0.45 * clip && still1 > 0.25 * clip, "\(still1 / clip)")
    }

    @Test func looksDrawnInRGBCostTheirFilters() {
        let plain = RenderCost.estimate(Self.clip(), spec: Self.spec())
        func with(_ look: Look?, warmth: Double = 0) -> Double {
            var s = Self.spec()
            s.edits.look = look
            if warmth != 0 { var a = Adjust(); a.warmth = warmth; s.edits.adjust = a }
            return RenderCost.estimate(Self.clip(), spec: s)
        }
        // eq and hue are next to free; a warm look or warmth is a round trip to RGB and a lookup
        // table; sepia's channel mixer costs more, silvertone's colorbalance the most.
        #expect(with(.vivid) == plain)
        #expect(with(.warm) > plain * 1.25)
        #expect(with(nil, warmth: 0.5) == with(.warm))
        #expect(with(.sepia) > with(.warm))
        #expect(with(.silvertone) > with(.sepia))
    }
}
