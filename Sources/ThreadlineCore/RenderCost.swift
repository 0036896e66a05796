import Foundation

/// How long a render takes relative to the run's other renders: the scheduler sends a run's
/// costliest renders first, so the run does not end on one long render while the other cores idle.
/// Only the order matters; the unit is milliseconds of one core of the 2-core EPYC of
/// docs/BENCHMARKS.md, from the small bench (`scripts/bench small`) on 2026-11-24:
///
/// - each output frame: x264 8.9 ms for a full 1280x720 picture (the encode floor: 20.0 CPU-s for
///   2236 frames), in proportion to the output's pixels; letterbox bars cost about a third of
///   picture (portrait clips rendered at 12.3-13.4 ms a frame against 14.1-15.6 for landscape);
///   scaling and filters about 1.5 ms (what a landscape render leaves after decoding and x264);
/// - each source frame decoded: 4.8 ms at 1080p H.264 (the decode floor: 15.6 CPU-s for 3240
///   frames), in proportion to its pixels; HEVC 1.3x (1.07-1.4x on the bench's clips,
///   `ffmpeg -threads 1 -i clip -f null -`); the frames a faster source has between the shown ones
///   (60 fps shown at 30) count half, because the renderer skips the ones nothing refers to (the
///   bench's 60 fps clips rendered no slower a frame than its 30 fps ones);
/// - a still moved over (Ken Burns): 5.4 ms a frame for resampling the large picture (its renders
///   took 14.4 ms a frame); a still that does not move is one picture encoded again and again,
///   which x264 finds a copy of the last: 0.37 of a moving frame's encode (a phone library's
///   project at 1080p on 2026-11-29: six such photos rendered at 7.4-9.1 ms a frame against 21 for
///   a 1080p HEVC clip, on a machine 0.72 times these figures). The time left weighs frames by
///   these estimates (`RunProgress.framesDone`), so they are to scale, not only in order;
/// - looks and adjustments drawn in RGB, per 1280x720 frame (`ffmpeg -threads 1 -filter_threads 1`
///   over 120 frames, less the same without the filter): the BT.709 round trip to planar RGB
///   4.2 ms, `colorbalance` 16.7 ms, `colorchannelmixer` 2.4 ms, `lutrgb` (colour temperature) 0.9 ms;
///   `eq` and `hue` cost next to nothing.
public enum RenderCost {
    public static func estimate(_ f: MediaFacts, spec: SegmentSpec) -> Double {
        let p = spec.profile
        let outputPixels = Double(max(1, p.width * p.height))
        let outputScale = outputPixels / 921_600
        let frames = Double(spec.frameCount)
        // The share of a moving frame's encode this one's takes.
        let encode = f.isStill && spec.kenBurns == nil ? Self.stillEncodeShare : 0.35 + 0.65 * pictureShare(f, spec: spec)
        let perFrame = 1.5 * outputScale + 8.9 * outputScale * encode + lookCost(spec) * outputScale
        if f.isStill { return frames * (perFrame + (spec.kenBurns != nil ? 5.4 * outputScale : 0)) }
        let sourcePixels = Double(max(1, f.width * f.height)) / 2_073_600
        let codec = ["hevc", "h265"].contains(f.videoCodec?.lowercased() ?? "") ? 1.3 : 1.0
        // Source frames per output frame: shown ones in full, the ones between at half.
        let rate = max(0.01, (f.frameRate ?? p.fps.double) * max(0.01, spec.edits.speed) / p.fps.double)
        let decoded = rate <= 1 ? rate : 1 + (rate - 1) * 0.5
        return frames * (perFrame + 4.8 * sourcePixels * codec * decoded)
    }

    /// What x264 spends on a frame of a still that does not move, against a moving frame.
    static let stillEncodeShare = 0.37

    /// Milliseconds a 1280x720 frame that the edit chain's look and adjustments take.
    static func lookCost(_ spec: SegmentSpec) -> Double {
        guard spec.edits.look != nil || spec.edits.adjust != nil else { return 0 }
        let filters = EditChain(edits: spec.edits, profile: spec.profile, files: .placeholders(spec.edits, spec.profile)).look
        return filters.reduce(0) { sum, f in
            if f == "format=gbrp" { return sum + 4.2 }
            if f.hasPrefix("colorbalance") { return sum + 16.7 }
            if f.hasPrefix("lutrgb") { return sum + 0.9 }
            if f.hasPrefix("colorchannelmixer") { return sum + 2.4 }
            return sum
        }
    }

    /// The share of the output frame the picture covers once fitted: 1 unless letterboxed, then
    /// the fitted picture's area over the frame's (a portrait clip in a landscape movie: about a third).
    public static func pictureShare(_ f: MediaFacts, spec: SegmentSpec) -> Double {
        let fit = spec.edits.fit ?? spec.profile.fit
        guard fit == .letterbox, f.width > 0, f.height > 0, spec.profile.width > 0, spec.profile.height > 0 else { return 1 }
        let turns = ((f.rotation + spec.edits.rotate) % 180 + 180) % 180 == 90
        var w = Double(turns ? f.height : f.width), h = Double(turns ? f.width : f.height)
        if let c = spec.edits.crop, c.width > 0, c.height > 0 {
            // The crop's fractions are of the upright picture.
            w *= min(1, c.width); h *= min(1, c.height)
        }
        let W = Double(spec.profile.width), H = Double(spec.profile.height)
        let scale = min(W / w, H / h)
        return min(1, (w * scale) * (h * scale) / (W * H))
    }
}
