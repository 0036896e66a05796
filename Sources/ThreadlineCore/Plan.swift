import Foundation

/// What probing a source found out. Produced by fetch, consumed by planning.
public struct MediaFacts: Sendable, Hashable, Codable {
    /// Seconds from the container's start to its end.
    public var duration: Double
    public var width: Int
    public var height: Int
    public var hasVideo: Bool
    public var hasAudio: Bool
    public var videoCodec: String?
    public var audioCodec: String?
    /// Clockwise degrees the display matrix turns the stored picture (0, 90, 180, 270).
    public var rotation: Int
    public var mirrored: Bool
    public var frameRate: Double?
    public var container: String
    /// Indices of the streams the engine reads (first real video, first decodable audio).
    public var videoStream: Int?
    public var audioStream: Int?
    /// A single picture (JPEG, PNG, …) rather than moving video.
    public var isStill: Bool = false
    /// The codec of an audio track no decoder here can read, when the file has no readable one
    /// (nil otherwise): such a clip renders only muted, which planning can tell before rendering.
    public var undecodableAudio: String?
    /// Set when the pictures carry transparency (an animated GIF, ProRes 4444, a PNG with alpha):
    /// they render over the movie's background, and their segments' keys say so.
    public var transparent: Bool?
    /// Set when the video is stored as interlaced fields (a camcorder's 1080i, DV): it is
    /// deinterlaced before anything else, and its segments' keys say so.
    public var interlaced: Bool?

    /// Bumped when the probe reports something it did not before (2: `interlaced`; 3: a file's
    /// length as its streams say where its header claims far more): part of a fetch's key, so a
    /// source fetched by an older probe is probed again rather than its facts reused.
    public static let probeVersion = "3"

    /// Bounds far past any real file (about 30,000 years; a side of 2^20 pixels; a million
    /// frames a second), within which frame and sample counts stay well inside an Int: facts
    /// beyond them are refused, not planned with: by the probe as a broken header, and by the
    /// coordinator when a worker sends them (a broken or hostile one).
    public static let longestSeconds = 1e12
    public static let largestSide = 1 << 20
    public static let fastestFrameRate = 1e6

    /// Why these cannot be a file's facts (seconds not a number, endless, negative or past
    /// `longestSeconds`; a size below 0 or beyond any picture; a frame rate of 0), or nil.
    /// Planning with them would count frames past any integer.
    public var impossible: String? {
        if !duration.isFinite || duration < 0 || duration > Self.longestSeconds { return "a duration of \(duration) s" }
        if !(0...Self.largestSide).contains(width) || !(0...Self.largestSide).contains(height) { return "a picture of \(width)x\(height)" }
        if let fps = frameRate, !(fps.isFinite && fps > 0 && fps <= Self.fastestFrameRate) { return "a frame rate of \(fps)" }
        return nil
    }

    public init(duration: Double, width: Int, height: Int, hasVideo: Bool, hasAudio: Bool,
                videoCodec: String? = nil, audioCodec: String? = nil, rotation: Int = 0, mirrored: Bool = false,
                frameRate: Double? = nil, container: String = "") {
        self.duration = duration; self.width = width; self.height = height; self.hasVideo = hasVideo
        self.hasAudio = hasAudio; self.videoCodec = videoCodec; self.audioCodec = audioCodec
        self.rotation = rotation; self.mirrored = mirrored; self.frameRate = frameRate; self.container = container
    }
}

/// The stage names are fixed: per item fetch → decode → transform → encode, per project concat.
public enum StageKind: String, Sendable, Hashable, Codable, CaseIterable {
    case fetch, decode, transform, encode, transition, concat
}

/// One stage of a project's graph.
public struct PlannedStage: Sendable, Hashable, Codable {
    /// Unique within a run: "fetch/3", "encode/3", "concat".
    public var id: String
    public var kind: StageKind
    /// Item index, nil for concat.
    public var item: Int?
    public var dependencies: [String]

    public static func id(_ kind: StageKind, item: Int?) -> String {
        item.map { "\(kind.rawValue)/\($0)" } ?? kind.rawValue
    }
}

/// Where an item sits in the finished movie.
public struct ItemTiming: Sendable, Hashable, Codable {
    public var item: Int
    public var startFrame: Int
    /// Frames the item occupies: `segmentFrames × repeats`.
    public var frameCount: Int
    /// Frames of its one rendered segment.
    public var segmentFrames: Int
    /// Times the segment plays in a row (`loop`).
    public var repeats: Int
    /// Frames shared with the previous item (its transition in) and the next (its transition out).
    public var headFrames: Int = 0
    public var tailFrames: Int = 0
    /// Whether the fade through black at its start (end) is baked into the item's own segment
    /// rather than rendered as a transition segment (see `Planner.bakesFade`).
    public var headBaked: Bool = false
    public var tailBaked: Bool = false
    public var start: Double
    public var duration: Double
    /// Exact audio samples this item occupies in the movie (48 kHz).
    public var sampleStart: Int
    public var sampleCount: Int
}

/// A project's stage graph and, once sources are probed, its frame-exact timeline.
public struct Plan: Sendable, Hashable, Codable {
    public var stages: [PlannedStage]
    public var timeline: [ItemTiming]?
    /// The movie's length: items overlap where transitions join them.
    public var totalFrames: Int? { timeline.map { $0.last.map { $0.startFrame + $0.frameCount } ?? 0 } }
}

/// One stretch of the movie as concat copies it: frames and samples of one segment.
public struct ConcatPart: Sendable, Hashable, Codable {
    public enum Source: Sendable, Hashable, Codable {
        case item(Int)
        /// The transition after item N.
        case transition(Int)
    }
    public var source: Source
    public var firstFrame: Int
    public var frames: Int
    public var firstSample: Int
    public var samples: Int
}

/// A transition stage: the last `frames` of one item's segment joined with the first `frames` of
/// the next one's, into a small segment of its own.
public struct TransitionSpec: Sendable, Hashable, Codable {
    public var kind: Transition.Kind
    public var frames: Int
    public var samples: Int
    /// Where the outgoing item's tail starts in its segment.
    public var fromFrame: Int
    public var fromSample: Int
    public var profile: OutputProfile
    public init(kind: Transition.Kind, frames: Int, samples: Int, fromFrame: Int, fromSample: Int, profile: OutputProfile) {
        self.kind = kind; self.frames = frames; self.samples = samples; self.fromFrame = fromFrame; self.fromSample = fromSample; self.profile = profile
    }
}

/// Where an item's segment starts and ends among the item's frames, and the fades through black
/// baked into it. A fade through black mixes nothing of two items: the outgoing one fades out over
/// the first half of the shared frames and the incoming one fades in over the rest, so each item
/// can render its own half, and neither renders the frames the other shows.
public struct SegmentCut: Sendable, Hashable, Codable {
    /// The first item frame the segment holds, and the item frame it stops before.
    public var first: Int
    public var end: Int
    /// Frames from `first` rising from black, and frames before `end` falling to black.
    public var fadeIn: Int
    public var fadeOut: Int
    public init(first: Int, end: Int, fadeIn: Int, fadeOut: Int) {
        self.first = first; self.end = end; self.fadeIn = fadeIn; self.fadeOut = fadeOut
    }
    /// The item's audio sample where the segment's audio starts.
    public func firstSample(fps: Rational) -> Int { Timing.samples(atFrame: first, fps: fps) }
}

/// What a worker needs to render one item's segment (decode → transform → encode).
public struct SegmentSpec: Sendable, Hashable, Codable {
    /// Local path of the fetched source.
    public var sourcePath: String
    /// How the user named the source, for messages.
    public var sourceName: String
    public var trimStart: Double
    public var frameCount: Int
    /// Samples the segment carries: enough for any timeline position (see `Timing.segmentSamples`).
    public var sampleCount: Int
    public var edits: Edits
    public var profile: OutputProfile
    /// Set for title items: frames are generated, not decoded.
    public var title: Title?
    /// Set for photo items: one picture, shown for the whole segment.
    public var still: Bool?
    /// Set when the source's pictures have transparency (`MediaFacts.transparent`): part of the
    /// key, so segments rendered before transparency showed the background render again.
    public var transparent: Bool?
    /// Set when the source is interlaced (`MediaFacts.interlaced`): its fields are made whole
    /// frames first, and the key says so.
    public var interlaced: Bool?
    /// A zoom and pan over the photo.
    public var kenBurns: KenBurns?
    /// Frames that must be key frames (where transitions cut the segment into parts).
    public var keyframes: [Int]?
    /// Set when fades through black are baked into the segment: which of the item's frames it
    /// holds (`frameCount` stays the item's whole length; frame numbers are the item's).
    public var cut: SegmentCut?

    public init(sourcePath: String, sourceName: String, trimStart: Double, frameCount: Int, sampleCount: Int, edits: Edits, profile: OutputProfile) {
        self.sourcePath = sourcePath; self.sourceName = sourceName; self.trimStart = trimStart
        self.frameCount = frameCount; self.sampleCount = sampleCount; self.edits = edits; self.profile = profile
    }
}

/// Pure planning: a pipeline (and, for timing, its sources' facts) in, a plan out.
public enum Planner {
    /// Bumped whenever rendering changes what a stage outputs, so old cache entries stop matching.
    public static let engineVersion = "threadline-engine-3"

    /// What a worker's renders depend on that stage keys name: the engine version and the filter
    /// chains of the three fits, for clips (opaque and transparent) and for stills. Workers and coordinator built from
    /// different code tell apart by it, even when nobody bumped `engineVersion` (as
    /// `StageKey.segment`'s renderer fingerprint).
    public static let engineID: String = {
        let chains = OutputProfile.Fit.allCases.flatMap { fit -> [String] in
            var profile = OutputProfile(path: "")
            profile.fit = fit
            let clip = SegmentSpec(sourcePath: "", sourceName: "", trimStart: 0, frameCount: 1, sampleCount: 0, edits: Edits(), profile: profile)
            var transparent = clip, still = clip, interlaced = clip, shapedTitle = clip, shapedText = clip
            transparent.transparent = true
            still.still = true
            interlaced.interlaced = true
            // Lettering libass shapes (`ShapedText`): a worker drawing it with drawtext differs.
            shapedTitle.title = Title(text: "दि")
            shapedText.edits.text = TextOverlay(value: "दि")
            return [clip, transparent, still, interlaced, shapedTitle, shapedText].map(EditChain.fingerprint)
        }
        return engineVersion + "+" + SHA256Hasher.hex(chains.joined(separator: "\n")).prefix(12)
    }()

    public static func stages(for pipeline: Pipeline) -> [PlannedStage] {
        var stages: [PlannedStage] = []
        for i in pipeline.items.indices {
            let fetch = PlannedStage.id(.fetch, item: i), decode = PlannedStage.id(.decode, item: i)
            let transform = PlannedStage.id(.transform, item: i), encode = PlannedStage.id(.encode, item: i)
            stages.append(PlannedStage(id: fetch, kind: .fetch, item: i, dependencies: []))
            stages.append(PlannedStage(id: decode, kind: .decode, item: i, dependencies: [fetch]))
            stages.append(PlannedStage(id: transform, kind: .transform, item: i, dependencies: [decode]))
            stages.append(PlannedStage(id: encode, kind: .encode, item: i, dependencies: [transform]))
        }
        var concatDeps = pipeline.items.indices.map { PlannedStage.id(.encode, item: $0) }
        for b in transitionStageBoundaries(pipeline) {
            let id = PlannedStage.id(.transition, item: b)
            stages.append(PlannedStage(id: id, kind: .transition, item: b,
                                       dependencies: [PlannedStage.id(.encode, item: b), PlannedStage.id(.encode, item: b + 1)]))
            concatDeps.append(id)
        }
        stages.append(PlannedStage(id: PlannedStage.id(.concat, item: nil), kind: .concat, item: nil, dependencies: concatDeps))
        return stages
    }

    /// The transition after item `b` (its own, else the pipeline's), or nil for none.
    public static func transition(after b: Int, in pipeline: Pipeline) -> Transition? {
        guard b < pipeline.items.count - 1 else { return nil }
        let t = pipeline.items[b].transition ?? pipeline.transition
        return t.flatMap { $0.isNone ? nil : $0 }
    }

    /// Boundaries (item index before them) that have a transition.
    public static func transitionBoundaries(_ pipeline: Pipeline) -> [Int] {
        pipeline.items.indices.dropLast().filter { transition(after: $0, in: pipeline) != nil }
    }

    /// Whether the transition after item `b` is a fade through black that the two items' own
    /// segments carry (each fading its half), so no transition stage renders it and no frame is
    /// encoded only to be cut away. Not where an item loops (its segment repeats, fades and all),
    /// nor under a watermark (it must stay steady while the picture fades, and it is drawn into
    /// the segments' frames).
    public static func bakesFade(after b: Int, in pipeline: Pipeline) -> Bool {
        guard let t = transition(after: b, in: pipeline), t.kind == .fade else { return false }
        return pipeline.items[b].edits.loop == 1 && pipeline.items[b + 1].edits.loop == 1 && pipeline.output.watermark == nil
    }

    /// Boundaries whose transition is a stage of its own (every one but the baked fades).
    public static func transitionStageBoundaries(_ pipeline: Pipeline) -> [Int] {
        transitionBoundaries(pipeline).filter { !bakesFade(after: $0, in: pipeline) }
    }

    /// How item `index`'s segment of `frameCount` frames is cut and faded, or nil when it is whole.
    public static func cut(_ pipeline: Pipeline, index: Int, frameCount: Int) -> SegmentCut? {
        let headBaked = index > 0 && bakesFade(after: index - 1, in: pipeline)
        let tailBaked = index < pipeline.items.count - 1 && bakesFade(after: index, in: pipeline)
        guard headBaked || tailBaked else { return nil }
        let head = headBaked ? overlap(after: index - 1, in: pipeline) : 0, tail = tailBaked ? overlap(after: index, in: pipeline) : 0
        let range = bakedRange(frames: frameCount, bakedHead: head, bakedTail: tail)
        return SegmentCut(first: range.first, end: range.end, fadeIn: head - range.first, fadeOut: tail / 2)
    }

    /// The item frames a segment keeps around fades baked at its head and tail (0: none): the
    /// outgoing item fades out over the first half of the shared frames (d/2, rounded down) and
    /// ends there; the incoming one starts there and fades in over the rest.
    static func bakedRange(frames: Int, bakedHead head: Int, bakedTail tail: Int) -> (first: Int, end: Int) {
        (head / 2, frames - tail + tail / 2)
    }

    /// Overlap frames at each boundary (0 where there is no transition).
    public static func overlaps(_ pipeline: Pipeline) -> [Int] {
        pipeline.items.indices.dropLast().map { overlap(after: $0, in: pipeline) }
    }

    /// Overlap frames at boundary `b` (after item b), 0 where there is no transition.
    public static func overlap(after b: Int, in pipeline: Pipeline) -> Int {
        transition(after: b, in: pipeline).map { Timing.frames(seconds: $0.duration, fps: pipeline.output.fps) } ?? 0
    }

    /// What the pipeline asks for that the movie will not have, known from the file alone: a
    /// soundtrack on an animated GIF (a GIF has no sound), a transition on the last item.
    public static func pipelineNotes(for pipeline: Pipeline) -> [String] {
        var notes: [String] = []
        if pipeline.output.isGIF, let st = pipeline.output.soundtrack {
            notes.append(pipelineNote("soundtrack: \((pipeline.output.path as NSString).lastPathComponent) is an animated GIF, which has no sound: "
                                      + "the soundtrack is not used (name the movie .mp4 to hear it)", at: st.location))
        }
        // Lettering too long for the frame at its size is drawn smaller, so that it all shows.
        for (i, item) in pipeline.items.enumerated() {
            for (what, l, _) in EditChain.lettering(item, pipeline.output) where l.fits && l.size < l.wanted {
                notes.append(pipelineNote("\(item.label(index: i)): \(what) is too large for the \(pipeline.output.width)x\(pipeline.output.height) frame at size \(l.wanted): "
                                          + "it is drawn at size \(l.size) (\(l.lines.count) line\(l.lines.count == 1 ? "" : "s"))", at: item.location))
            }
        }
        // An item's transition goes into the next one: the last has none to go into.
        if let last = pipeline.items.indices.last, let t = pipeline.items[last].transition, t.kind != .none {
            notes.append(pipelineNote("\(pipeline.items[last].label(index: last)) is the last item: its \(t.kind.rawValue) into the next has none "
                                      + "to go into and is not used (to fade out at the end, add a title after it: - title: \"The end\")",
                                      at: t.location ?? pipeline.items[last].location))
        }
        return notes
    }

    /// What planning did that the pipeline did not say, item by item (`notes(for:index:…)`).
    public static func notes(for pipeline: Pipeline, facts: [String: MediaFacts]) -> [String] {
        pipeline.items.enumerated().flatMap { i, item in
            notes(for: item, index: i, facts: item.sources.first.flatMap { facts[$0.uri] }, fps: pipeline.output.fps)
        }
    }

    /// One item's notes, once its source's facts are known (the coordinator tells them when the
    /// source is fetched, a title's at the start): a `trim.end` past the clip's end plays to its
    /// end (the movie is shorter than the pipeline reads); text or a sticker whose `start` is at
    /// or past the item's end is never shown.
    public static func notes(for item: Item, index i: Int, facts f: MediaFacts?, fps: Rational) -> [String] {
        var notes: [String] = []
        if case .video(_, let trim) = item.kind, let end = trim?.end, let f, end > f.duration + 0.5 / fps.double {
            notes.append(pipelineNote(String(format: "%@: trim.end %.3f s is past the clip's end (%.3f s): it plays to its end",
                                             item.label(index: i), end, f.duration), at: item.location))
        }
        // Windows are in the item's own time, one pass of a loop.
        guard let frames = try? frameCount(of: item, index: i, facts: f, fps: fps) else { return notes }
        let length = Timing.seconds(frames: frames, fps: fps)
        func unseen(_ what: String, _ start: Double?) {
            guard let start, start >= length - 0.5 / fps.double else { return }
            notes.append(pipelineNote(String(format: "%@: %@ starts at %.3f s, at or after the item's end (%.3f s): it is never shown",
                                             item.label(index: i), what, start, length), at: item.location))
        }
        if let text = item.edits.text { unseen("its text \(Item.quoted(text.value))", text.start) }
        for (k, sticker) in item.edits.stickers.enumerated() {
            unseen("sticker \(k + 1) (\((sticker.image as NSString).lastPathComponent))", sticker.start)
        }
        return notes
    }

    /// Frames an item lasts in the output, given its source's facts.
    public static func frameCount(of item: Item, index: Int, facts: MediaFacts?, fps: Rational) throws -> Int {
        switch item.kind {
        case .title(let t):
            return Timing.frames(seconds: t.duration, fps: fps)
        case .livePhoto:
            throw PipelineError("\(item.label(index: index)) was not resolved to its motion or still", at: item.location)
        case .photo(_, let duration, _):
            guard let facts, facts.hasVideo else {
                throw PipelineError("\(item.label(index: index)) is not a picture FFmpeg can read", at: item.location,
                                    hint: "use a JPEG, PNG or HEIC picture")
            }
            return Timing.frames(seconds: duration, fps: fps)
        case .video(_, let trim):
            guard let facts else {
                throw PipelineError("\(item.label(index: index)) has not been probed", at: item.location)
            }
            let start = trim?.start ?? 0
            guard facts.hasVideo else {
                throw PipelineError("\(item.label(index: index)) has no video stream", at: item.location,
                                    hint: facts.hasAudio ? "use a video file; music goes under the movie as its soundtrack: { source: \(item.sources.first?.displayName ?? "FILE") }"
                                        : "FFmpeg reads no picture in it (an animated WebP, for one): use a video file (MP4, MOV, WebM, GIF, …)")
            }
            guard !facts.isStill else {
                throw PipelineError("\(item.label(index: index)) is a still image (\(facts.videoCodec ?? facts.container)), not a video",
                                    at: item.location, hint: "show it as a photo: - photo: \(item.sources.first?.displayName ?? "FILE")")
            }
            if let codec = facts.undecodableAudio, !item.edits.mute {
                throw PipelineError("\(item.label(index: index)): its audio track cannot be decoded (no decoder for \(codec))",
                                    at: item.location, hint: "add `mute: true` to the clip to use its picture without sound")
            }
            guard start < facts.duration else {
                throw PipelineError(String(format: "%@: trim.start %.3f s is at or past the end of the clip (%.3f s)",
                                           item.label(index: index), start, facts.duration), at: item.location)
            }
            let end = min(trim?.end ?? facts.duration, facts.duration)
            let forward = Timing.frames(seconds: (end - start) / item.edits.speed, fps: fps)
            // Bounce: forward, then back to the first frame (the turning frame shows once).
            return item.edits.bounce ? 2 * forward - 1 : forward
        }
    }

    /// The frame-exact timeline; `facts` is keyed by source URI. Applies `max_duration`. Every
    /// item that does not fit is said at once (a year's pipeline with four tap-length clips under
    /// one fade took four rounds of fixing one and planning again).
    public static func timeline(for pipeline: Pipeline, facts: [String: MediaFacts]) throws -> [ItemTiming] {
        var out: [ItemTiming] = []
        var frame = 0
        let fps = pipeline.output.fps
        var natural: [Int] = []
        var errors: [PipelineError] = []
        for (i, item) in pipeline.items.enumerated() {
            do { natural.append(try frameCount(of: item, index: i, facts: item.sources.first.flatMap { facts[$0.uri] }, fps: fps)) } catch let e as PipelineError {
                errors.append(e)
                natural.append(0)
            }
        }
        if !errors.isEmpty { throw PipelineError.combined(errors) }
        let overlap = overlaps(pipeline)
        let segments = try applyMaxDuration(pipeline, natural: natural, overlap: overlap.reduce(0, +))
        for (i, item) in pipeline.items.enumerated() {
            let segment = segments[i]
            let n = segment * item.edits.loop
            let head = i > 0 ? overlap[i - 1] : 0, tail = i < overlap.count ? overlap[i] : 0
            if let e = transitionsDoNotFit(pipeline, index: i, segmentFrames: segment) {
                errors.append(e)
                continue
            }
            let s0 = Timing.samples(atFrame: frame, fps: fps), s1 = Timing.samples(atFrame: frame + n, fps: fps)
            var timing = ItemTiming(item: i, startFrame: frame, frameCount: n, segmentFrames: segment, repeats: item.edits.loop,
                                    start: Timing.seconds(frames: frame, fps: fps),
                                    duration: Timing.seconds(frames: n, fps: fps), sampleStart: s0, sampleCount: s1 - s0)
            timing.headFrames = head
            timing.tailFrames = tail
            timing.headBaked = i > 0 && bakesFade(after: i - 1, in: pipeline)
            timing.tailBaked = i < overlap.count && bakesFade(after: i, in: pipeline)
            out.append(timing)
            frame += n - tail
        }
        if !errors.isEmpty { throw PipelineError.combined(errors) }
        return out
    }

    /// Why item `i`'s transitions do not fit in it (`segmentFrames`: one pass of it), or nil. Its
    /// natural length already tells (`max_duration` only shortens): the coordinator asks as soon as
    /// an item's length is known, so no render of it is sent (a worker was sent one of minus three
    /// frames, and said "rendered 0 frames of the -3 planned").
    public static func transitionsDoNotFit(_ pipeline: Pipeline, index i: Int, segmentFrames segment: Int) -> PipelineError? {
        let fps = pipeline.output.fps
        let item = pipeline.items[i]
        let head = i > 0 ? overlap(after: i - 1, in: pipeline) : 0, tail = i < pipeline.items.count - 1 ? overlap(after: i, in: pipeline) : 0
        guard head > segment || tail > segment || (item.edits.loop == 1 && head + tail > segment) else { return nil }
        let t = (tail > 0 ? transition(after: i, in: pipeline) : transition(after: i - 1, in: pipeline))
        // A looped item's transitions each take from one pass (the first or the last).
        let loop = item.edits.loop
        let what = loop == 1 ? String(format: "the item (%.3f s)", Timing.seconds(frames: segment, fps: fps))
            : String(format: "one pass of the item (%.3f s; loop: %d plays it %d times, %.3f s)", Timing.seconds(frames: segment, fps: fps),
                     loop, loop, Timing.seconds(frames: segment * loop, fps: fps))
        return PipelineError(String(format: "the transitions around %@ (%.3f s in, %.3f s out) are longer than %@",
                                    item.label(index: i), Timing.seconds(frames: head, fps: fps), Timing.seconds(frames: tail, fps: fps), what),
                             at: t?.location ?? item.location,
                             hint: loop == 1 ? "shorten the transition or lengthen the item" : "shorten the transition or lengthen the item's trim")
    }

    /// Segment frames per item after `max_duration`: unchanged, fitted, or an error.
    static func applyMaxDuration(_ pipeline: Pipeline, natural: [Int], overlap: Int = 0) throws -> [Int] {
        guard let cap = pipeline.output.maxDuration else { return natural }
        let fps = pipeline.output.fps
        let loops = pipeline.items.map(\.edits.loop)
        // Transitions overlap items: the items may add up to the cap plus the overlaps.
        let total = zip(natural, loops).reduce(0) { $0 + $1.0 * $1.1 } - overlap
        let limit = Int((cap.seconds * fps.double).rounded(.down)) + overlap
        let planned = Timing.seconds(frames: total, fps: fps)
        guard total + overlap > limit else { return natural }
        switch cap.policy {
        case .fail:
            throw PipelineError(String(format: "the movie is planned at %.3f s, over max_duration %.3f s", planned, cap.seconds),
                                at: cap.location, hint: "shorten trims, remove items, or use policy: fit")
        case .fit:
            // Proportional shortening; no item below its floor (1 s, or its own length if shorter).
            let floors = natural.map { min($0, Timing.frames(seconds: MaxDuration.minimumItemSeconds, fps: fps)) }
            let floorTotal = zip(floors, loops).reduce(0) { $0 + $1.0 * $1.1 }
            guard floorTotal <= limit else {
                throw PipelineError(String(format: "max_duration %.3f s cannot fit %d items of at least %.1f s each (%.3f s)", cap.seconds,
                                           natural.count, MaxDuration.minimumItemSeconds, Timing.seconds(frames: floorTotal, fps: fps)),
                                    at: cap.location, hint: "raise max_duration or remove items")
            }
            // Water-filling: items that would fall below their floor stay at it, and the rest
            // share what is left in proportion to their length.
            var pinned = Set<Int>()
            var k = 1.0
            while true {
                let room = limit - pinned.reduce(0) { $0 + floors[$1] * loops[$1] }
                let flexible = natural.indices.filter { !pinned.contains($0) }.reduce(0) { $0 + natural[$1] * loops[$1] }
                k = flexible > 0 ? Double(room) / Double(flexible) : 0
                let below = natural.indices.filter { !pinned.contains($0) && Int((Double(natural[$0]) * k).rounded(.down)) < floors[$0] }
                if below.isEmpty { break }
                pinned.formUnion(below)
            }
            var fitted = natural.indices.map { pinned.contains($0) ? floors[$0] : Int((Double(natural[$0]) * k).rounded(.down)) }
            // Hand out what rounding left, one frame at a time, to items that can still grow.
            var left = limit - zip(fitted, loops).reduce(0) { $0 + $1.0 * $1.1 }
            var i = 0
            while left > 0 && i < 10 * fitted.count {
                let j = i % fitted.count
                if fitted[j] < natural[j] && loops[j] <= left { fitted[j] += 1; left -= loops[j] }
                i += 1
            }
            return fitted
        }
    }

    /// Item frames [first, end) of `t`'s segment file: where its baked fades cut it.
    static func segmentRange(_ t: ItemTiming) -> (first: Int, end: Int) {
        bakedRange(frames: t.segmentFrames, bakedHead: t.headBaked ? t.headFrames : 0, bakedTail: t.tailBaked ? t.tailFrames : 0)
    }

    /// What concat joins, in order: each item's body (its segment without the frames it shares with
    /// its neighbours, once per repetition) and each transition segment, with exact frames and samples.
    /// Where a fade is baked, the outgoing item's body runs to the fade's middle and the incoming
    /// one's starts there, and no transition segment lies between them.
    public static func concatParts(_ timeline: [ItemTiming], fps: Rational) -> [ConcatPart] {
        var parts: [ConcatPart] = []
        func A(_ f: Int) -> Int { Timing.samples(atFrame: f, fps: fps) }
        for t in timeline {
            let n = t.segmentFrames
            let range = segmentRange(t)
            // The segment file starts at item frame `range.first`, its audio at that frame's sample.
            let skew = A(range.first)
            for k in 0..<t.repeats {
                let a = k == 0 ? (t.headBaked ? range.first : t.headFrames) : 0
                let b = k == t.repeats - 1 ? (t.tailBaked ? range.end : n - t.tailFrames) : n
                let base = t.startFrame + k * n
                if b > a {
                    parts.append(ConcatPart(source: .item(t.item), firstFrame: a - range.first, frames: b - a,
                                            firstSample: max(0, A(base + a) - A(base) - skew), samples: A(base + b) - A(base + a)))
                }
            }
            if t.tailFrames > 0 && !t.tailBaked {
                let end = t.startFrame + t.frameCount
                parts.append(ConcatPart(source: .transition(t.item), firstFrame: 0, frames: t.tailFrames,
                                        firstSample: 0, samples: A(end) - A(end - t.tailFrames)))
            }
        }
        return parts
    }

    /// The transition after item `b`: which frames and samples of the two segments it joins.
    public static func transitionSpec(_ pipeline: Pipeline, after b: Int, timeline: [ItemTiming]) -> TransitionSpec? {
        guard let t = transition(after: b, in: pipeline), b + 1 < timeline.count else { return nil }
        let from = timeline[b], fps = pipeline.output.fps
        let d = from.tailFrames
        let end = from.startFrame + from.frameCount
        let lastRep = from.startFrame + (from.repeats - 1) * from.segmentFrames
        // The outgoing segment file may start after its item's first frame (a fade baked at its head).
        let first = segmentRange(from).first
        return TransitionSpec(kind: t.kind, frames: d,
                              samples: Timing.samples(atFrame: end, fps: fps) - Timing.samples(atFrame: end - d, fps: fps),
                              fromFrame: from.segmentFrames - d - first,
                              fromSample: max(0, Timing.samples(atFrame: end - d, fps: fps) - Timing.samples(atFrame: lastRep, fps: fps)
                                                 - Timing.samples(atFrame: first, fps: fps)),
                              profile: pipeline.output.segmentProfile)
    }

    public static func plan(_ pipeline: Pipeline, facts: [String: MediaFacts]? = nil) throws -> Plan {
        Plan(stages: stages(for: pipeline), timeline: try facts.map { try timeline(for: pipeline, facts: $0) })
    }

    /// The segment a worker renders for item `index`.
    /// `facts`: the source's, when known (a transparent source's key differs).
    public static func segmentSpec(_ pipeline: Pipeline, index: Int, sourcePath: String, frameCount: Int, facts: MediaFacts? = nil) -> SegmentSpec {
        let item = pipeline.items[index]
        var spec = SegmentSpec(sourcePath: sourcePath, sourceName: item.sources.first?.displayName ?? item.label(index: index),
                               trimStart: 0, frameCount: frameCount,
                               sampleCount: Timing.segmentSamples(frames: frameCount, fps: pipeline.output.fps),
                               edits: item.edits, profile: pipeline.output.segmentProfile)
        // Key frames where transition segments cut the segment: after the shared head, before the
        // shared tail. A baked fade cuts nothing: the segment ends (or starts) there instead.
        let head = index > 0 && !bakesFade(after: index - 1, in: pipeline) ? overlap(after: index - 1, in: pipeline) : 0
        let tail = index < pipeline.items.count - 1 && !bakesFade(after: index, in: pipeline) ? overlap(after: index, in: pipeline) : 0
        let cuts = Set([head, frameCount - tail]).filter { $0 > 0 && $0 < frameCount }.sorted()
        spec.keyframes = cuts.isEmpty ? nil : cuts
        spec.cut = cut(pipeline, index: index, frameCount: frameCount)
        if facts?.transparent == true { spec.transparent = true }
        if facts?.interlaced == true, case .video = item.kind { spec.interlaced = true }
        switch item.kind {
        case .video(_, let trim): spec.trimStart = trim?.start ?? 0
        case .title(let t): spec.title = t
        case .photo(_, _, let kb): spec.still = true; spec.kenBurns = kb; spec.trimStart = item.frameAt ?? 0
        case .livePhoto: break
        }
        return spec
    }
}

/// Output keys: hash(stage kind, input content hashes, normalised parameters, engine version).
/// Equal keys mean equal output, which is what makes reuse safe.
public enum StageKey {
    public static func compute<P: Encodable>(kind: StageKind, inputs: [String], parameters: P) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let params = (try? encoder.encode(parameters)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return SHA256Hasher.hex([kind.rawValue, inputs.joined(separator: ","), params, Planner.engineVersion].joined(separator: "\n"))
    }

    /// The segment key leaves out where the source lies on disk: only its content counts.
    /// `renderer` fingerprints how the engine renders (its filter chain), so a change there
    /// invalidates old segments even when nobody remembers to bump `Planner.engineVersion`.
    public static func segment(_ spec: SegmentSpec, sourceSHA256: String, renderer: String = "") -> String {
        var normalised = spec
        normalised.sourcePath = ""
        normalised.sourceName = ""
        normalised.edits.loop = 1      // repetitions happen at concat; the segment is the same
        return compute(kind: .encode, inputs: [sourceSHA256, SHA256Hasher.hex(renderer)], parameters: normalised)
    }
}
