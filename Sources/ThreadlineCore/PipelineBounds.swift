import Foundation

/// The bounds of every number and name a pipeline holds: the loader refuses a file past them
/// with file:line:col, and `Pipeline.boundsProblem` refuses a pipeline that came over the wire
/// past them (a hand-made submission skips the loader). One list for both, so that what one takes
/// the other takes too.
public enum PipelineBounds {
    public static let fpsTerms = 1...1_000_000
    public static let fps = 1.0...240
    public static let width = 16...7680
    public static let height = 16...4320
    public static let crf = 0...51
    public static let keyint = 0...1000
    public static let audioBitrate = 32_000...512_000
    public static let watermarkOpacity = 0.0...1
    public static let watermarkSize = 0.02...1
    public static let watermarkMargin = 0.0...0.4
    public static let maxDuration = 0.0...86_400
    public static let retryAttempts = 1...20
    /// A title's, a photo's, a live photo's still: more than 0, at most ten minutes.
    public static let itemSeconds = 0.001...600
    /// A trim's start and end, a text's or a sticker's start and end (seconds into the item).
    public static let itemTime = 0.0...1e7
    public static let zoom = 1.0...4
    public static let fraction = 0.0...1
    public static let rotations: Set<Int> = [0, 90, 180, 270]
    public static let volume = 0.0...10
    public static let speed = 0.25...4
    public static let loop = 1...20
    public static let brightness = -1.0...1
    public static let contrast = 0.0...3
    public static let saturation = 0.0...3
    public static let gamma = 0.1...10
    public static let warmth = -1.0...1
    public static let textSize = 8...1000
    public static let transition = 0.0...10
    public static let soundtrackTime = 0.0...86_400
    public static let soundtrackVolume = 0.0...4
    public static let soundtrackFade = 0.0...60
    public static let stickers = 32
    public static let stickerSize = 0.01...1
    public static let stickerRotate = -360.0...360
}

extension Pipeline {
    /// What the loader would have refused in this pipeline, checked again on one that arrived
    /// over the wire: every number within `PipelineBounds` (so the planner's and the renderer's
    /// arithmetic stays inside Int and every count small enough to plan quickly), every colour a
    /// colour, every codec and preset one this version has. Nil when it is within bounds.
    /// Before, only its frame rate, size, durations, speed and loop were checked: a sticker's size
    /// or a text's start of 1e300 reached the workers' renders.
    public var boundsProblem: String? {
        typealias B = PipelineBounds
        func finite(_ v: Double, _ range: ClosedRange<Double>) -> Bool { v.isFinite && range.contains(v) }
        func colour(_ s: String) -> Bool { PipelineLoader.parseColor(s) != nil }
        let o = output
        guard B.fpsTerms.contains(o.fps.num), B.fpsTerms.contains(o.fps.den), finite(o.fps.double, B.fps) else {
            return "output.fps must be a frame rate between 1 and 240 with terms at most 1000000, got \(o.fps)"
        }
        guard B.width.contains(o.width), B.height.contains(o.height), o.width % 2 == 0, o.height % 2 == 0 else {
            return "output size \(o.width)x\(o.height) is not possible"
        }
        guard colour(o.background) else { return "output.background \(o.background) is not a colour" }
        guard VideoSettings.codecs.contains(o.video.codec), VideoSettings.presets.contains(o.video.preset) else {
            return "output.video: codec \(o.video.codec) with preset \(o.video.preset) is not one this version encodes"
        }
        guard B.crf.contains(o.video.crf), B.keyint.contains(o.video.keyint) else { return "output.video: crf \(o.video.crf) or keyint \(o.video.keyint) out of range" }
        guard o.audio.codec == "aac", B.audioBitrate.contains(o.audio.bitrate) else { return "output.audio: \(o.audio.codec) at \(o.audio.bitrate) bit/s is not possible" }
        if let m = o.maxDuration, !finite(m.seconds, B.maxDuration) { return "output.max_duration must be 0…86400 seconds" }
        if let w = o.watermark, !finite(w.opacity, B.watermarkOpacity) || !finite(w.size, B.watermarkSize) || !finite(w.margin, B.watermarkMargin) {
            return "output.watermark: opacity, size or margin out of range"
        }
        if let s = o.soundtrack {
            guard finite(s.from, B.soundtrackTime), s.to.map({ finite($0, B.soundtrackTime) && $0 > s.from }) ?? true,
                  finite(s.volume, B.soundtrackVolume), finite(s.clipAudio, B.soundtrackVolume),
                  finite(s.fadeIn, B.soundtrackFade), finite(s.fadeOut, B.soundtrackFade) else { return "soundtrack: a time, volume or fade out of range" }
        }
        if let n = retryAttempts, !B.retryAttempts.contains(n) { return "retry.attempts must be between 1 and 20" }
        guard !items.isEmpty, items.count <= PipelineLoader.maxItems else { return "a pipeline has 1…\(PipelineLoader.maxItems) items, this one \(items.count)" }
        // (An end without a start may be 0, as the loader takes it.)
        func window(_ start: Double?, _ end: Double?) -> Bool {
            (start.map { finite($0, B.itemTime) } ?? true) && (end.map { e in finite(e, B.itemTime) && start.map { e > $0 } ?? true } ?? true)
        }
        for (i, item) in items.enumerated() {
            let label = item.label(index: i)
            var trim: Trim?
            switch item.kind {
            case .video(_, let t): trim = t
            case .title(let t):
                if !finite(t.duration, B.itemSeconds) { return "\(label): duration must be more than 0 and at most 600 seconds" }
                if !colour(t.background) || !colour(t.color) || !(t.size.map(B.textSize.contains) ?? true) { return "\(label): its colours or size are not possible" }
            case .photo(_, let d, let kb):
                if !finite(d, B.itemSeconds) { return "\(label): duration must be more than 0 and at most 600 seconds" }
                if let kb, ![kb.from, kb.to].allSatisfy({ finite($0.zoom, B.zoom) && finite($0.x, B.fraction) && finite($0.y, B.fraction) }) {
                    return "\(label): ken_burns zoom must be 1…4 and its centre fractions 0…1"
                }
            case .livePhoto(_, _, let d, let t):
                if !finite(d, B.itemSeconds) { return "\(label): duration must be more than 0 and at most 600 seconds" }
                trim = t
            }
            if let t = trim, !window(t.start, t.end) { return "\(label): trim is out of range" }
            let e = item.edits
            if !finite(e.speed, B.speed) { return "\(label): speed must be between 0.25 and 4" }
            if !B.loop.contains(e.loop) { return "\(label): loop must be 1…20" }
            if !B.rotations.contains(e.rotate) { return "\(label): rotate must be 0, 90, 180 or 270" }
            if !finite(e.volume, B.volume) { return "\(label): volume must be between 0 and 10" }
            if let c = e.crop, !(finite(c.x, B.fraction) && finite(c.y, B.fraction) && c.width.isFinite && c.height.isFinite
                                 && c.width > 0 && c.height > 0 && c.x + c.width <= 1.000001 && c.y + c.height <= 1.000001) {
                return "\(label): crop must be a rectangle inside the picture"
            }
            if let a = e.adjust, !(finite(a.brightness, B.brightness) && finite(a.contrast, B.contrast) && finite(a.saturation, B.saturation)
                                   && finite(a.gamma, B.gamma) && finite(a.warmth, B.warmth)) {
                return "\(label): an adjust value is out of range"
            }
            if let t = e.text, t.value.isEmpty || !colour(t.color) || !(t.size.map(B.textSize.contains) ?? true) || !window(t.start, t.end) {
                return "\(label): its text has no value, or a colour, size or time out of range"
            }
            if e.stickers.count > B.stickers { return "\(label): at most \(B.stickers) stickers on one item" }
            for s in e.stickers where !(finite(s.x, B.fraction) && finite(s.y, B.fraction) && finite(s.size, B.stickerSize)
                                        && finite(s.rotate, B.stickerRotate) && window(s.start, s.end)) {
                return "\(label): a sticker's place, size, turn or time is out of range"
            }
            if let t = item.transition, !finite(t.duration, B.transition) { return "\(label): transition duration out of range" }
        }
        if let t = transition, !finite(t.duration, B.transition) { return "transition duration out of range" }
        return nil
    }
}
