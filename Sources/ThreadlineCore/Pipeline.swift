import Foundation

/// One project: the items threaded into one movie, and how the movie is encoded.
public struct Pipeline: Sendable, Hashable, Codable {
    public var version: Int
    public var name: String
    public var output: OutputProfile
    public var items: [Item]
    /// The transition between items unless an item names its own.
    public var transition: Transition?
    /// `retry: { attempts: N }`: tries per stage for retryable failures (nil: the coordinator's default, 3).
    public var retryAttempts: Int?
    /// The pipeline file this came from, and its folder (relative paths resolve against it).
    public var file: String
    public var text: String
    /// Where output.path is written in the pipeline file (for errors about the movie's path).
    public var outputLocation: SourceLocation?

    public init(version: Int = 1, name: String, output: OutputProfile, items: [Item], file: String = "<memory>", text: String = "") {
        self.version = version; self.name = name; self.output = output; self.items = items
        self.file = file; self.text = text
    }
}

/// How every segment and the final movie are encoded. Identical for all segments of a project,
/// so concat can stream-copy video.
public struct OutputProfile: Sendable, Hashable, Codable {
    public enum Fit: String, Sendable, Hashable, Codable, CaseIterable {
        /// Fill the frame, cutting the overflow.
        case crop
        /// Fit inside, padding with the background colour.
        case letterbox
        /// Fit inside, over a blurred, scaled copy of the picture.
        case blur
    }

    /// Absolute path of the finished movie.
    public var path: String
    public var width: Int
    public var height: Int
    public var fps: Rational
    public var fit: Fit
    /// Letterbox colour, "#rrggbb".
    public var background: String
    public var video: VideoSettings
    public var audio: AudioSettings
    /// A cap on the movie's length.
    public var maxDuration: MaxDuration?
    /// An image on every frame of the movie.
    public var watermark: Watermark?
    /// Music mixed under (or over) the clips' own sound, at concat.
    public var soundtrack: Soundtrack?
    /// "gif" for an animated GIF (a `.gif` path); nil: an MP4 movie.
    public var container: String?
    public var isGIF: Bool { container == "gif" }
    /// The names an output may end with (lowercase): an MP4 under its usual names, or a GIF.
    public static let extensions: Set<String> = ["mp4", "m4v", "mov", "gif"]

    public init(path: String, width: Int = 1280, height: Int = 720, fps: Rational = Rational(30, 1),
                fit: Fit = .letterbox, background: String = "#000000",
                video: VideoSettings = .init(), audio: AudioSettings = .init()) {
        self.path = path; self.width = width; self.height = height; self.fps = fps; self.fit = fit
        self.background = background; self.video = video; self.audio = audio
    }

    /// The profile without what does not change a segment's content (path, length cap).
    public var segmentProfile: OutputProfile { var p = self; p.path = ""; p.maxDuration = nil; p.soundtrack = nil; return p }
    /// What the joined movie depends on besides its segments: everything but the path.
    public var movieProfile: OutputProfile { var p = self; p.path = ""; p.maxDuration = nil; return p }
}

/// A section of a song under the movie: looped or cut to fit, faded, mixed sample-exact at concat.
public struct Soundtrack: Sendable, Hashable, Codable {
    public var source: String
    /// Content hash, so a changed song re-mixes the movie.
    public var sha256: String
    /// Where the section starts and ends in the song (seconds); nil end: the song's end.
    public var from: Double = 0
    public var to: Double?
    /// Linear gain of the music.
    public var volume: Double = 1
    /// Linear gain of the clips' own sound under the music (ducking).
    public var clipAudio: Double = 1
    public var fadeIn: Double = 0
    public var fadeOut: Double = 0
    /// Repeat the section when the movie is longer than it.
    public var loop: Bool = true
    public var location: SourceLocation?
    public init(source: String, sha256: String) { self.source = source; self.sha256 = sha256 }

    /// How the music is mixed, part of the key of a movie that has some: a movie mixed before
    /// the fades followed the music as heard is mixed again, not reused.
    public static let mixing = "fades follow the music as heard; a loop crossfades 10 ms at its seam"
}

/// An image at a corner of every frame.
public struct Watermark: Sendable, Hashable, Codable {
    public enum Corner: String, Sendable, Hashable, Codable, CaseIterable {
        case topLeft = "top-left", topRight = "top-right", bottomLeft = "bottom-left", bottomRight = "bottom-right"
    }
    public var image: String
    /// Content hash of the image, so a changed logo re-renders what shows it.
    public var sha256: String
    public var position: Corner = .bottomRight
    /// 0…1.
    public var opacity: Double = 0.8
    /// The image's height as a fraction of the output height.
    public var size: Double = 0.12
    /// Distance from the edges as a fraction of the output height.
    public var margin: Double = 0.03
    public init(image: String, sha256: String, position: Corner = .bottomRight, opacity: Double = 0.8, size: Double = 0.12, margin: Double = 0.03) {
        self.image = image; self.sha256 = sha256; self.position = position; self.opacity = opacity; self.size = size; self.margin = margin
    }
}

/// `max_duration`: what to do when the planned movie is longer than `seconds`.
public struct MaxDuration: Sendable, Hashable, Codable {
    public enum Policy: String, Sendable, Hashable, Codable, CaseIterable {
        /// Refuse, before any rendering, naming the planned length.
        case fail
        /// Shorten every item proportionally, never below `MaxDuration.minimumItemSeconds`.
        case fit
    }
    /// No item is fitted below this (or below its own length, if shorter).
    public static let minimumItemSeconds = 1.0
    public var seconds: Double
    public var policy: Policy
    public var location: SourceLocation?
    public init(seconds: Double, policy: Policy = .fail, location: SourceLocation? = nil) {
        self.seconds = seconds; self.policy = policy; self.location = location
    }
}

public struct VideoSettings: Sendable, Hashable, Codable {
    /// h264 (libx264) or hevc (libx265, tagged hvc1).
    public static let codecs = ["h264", "hevc"]
    public static let presets = ["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"]
    public var codec: String
    public var crf: Int
    public var preset: String
    /// Longest distance between key frames, in frames (0: x264's default).
    public var keyint: Int
    public init(codec: String = "h264", crf: Int = 23, preset: String = "veryfast", keyint: Int = 0) {
        self.codec = codec; self.crf = crf; self.preset = preset; self.keyint = keyint
    }
}

public struct AudioSettings: Sendable, Hashable, Codable {
    public var codec: String
    /// Bits per second.
    public var bitrate: Int
    public init(codec: String = "aac", bitrate: Int = 160_000) { self.codec = codec; self.bitrate = bitrate }
}

/// Where a source comes from: an absolute local path, or an http(s) URL.
public struct SourceRef: Sendable, Hashable, Codable, CustomStringConvertible {
    public var uri: String
    public init(_ uri: String) { self.uri = uri }
    public var isRemote: Bool { uri.hasPrefix("http://") || uri.hasPrefix("https://") }
    public var description: String { uri }
    /// The last path component, for messages.
    public var displayName: String { (uri as NSString).lastPathComponent }
}

/// One timeline item. Every kind can give a uniform segment of the movie; new kinds
/// (live_photo, photo, title) are further cases of `Kind`.
public struct Item: Sendable, Hashable, Codable {
    public enum Kind: Sendable, Hashable, Codable {
        /// A video file, optionally trimmed to [start, end) in its own time.
        case video(source: SourceRef, trim: Trim?)
        /// Text on a background colour.
        case title(Title)
        /// A still photo (JPEG, PNG, …) shown for `duration` seconds, upright per its EXIF orientation.
        case photo(source: SourceRef, duration: Double, kenBurns: KenBurns?)
        /// An Apple Live Photo, named by either half. Submitting resolves it into the motion
        /// (`video`, trimmed by `trim`) or the still (`photo`, shown for `duration`) it shows.
        case livePhoto(source: SourceRef, use: LivePhotoUse, duration: Double, trim: Trim? = nil)
    }

    public var kind: Kind
    public var edits: Edits
    /// The transition into the next item (overrides the pipeline's default).
    public var transition: Transition?
    /// Where the item is written in the pipeline file.
    public var location: SourceLocation?
    /// For a photo item whose source is a movie (a Live Photo's still taken from its motion):
    /// the time of the frame it shows.
    public var frameAt: Double?
    /// For an item a Live Photo became (its motion or its still): the file the pipeline named,
    /// so messages, lineage and posters call it the live photo the person wrote, not a clip.
    public var livePhoto: SourceRef?

    public init(kind: Kind, edits: Edits = .init(), location: SourceLocation? = nil) {
        self.kind = kind; self.edits = edits; self.location = location
    }

    /// The sources this item reads.
    public var sources: [SourceRef] {
        switch kind {
        case .video(let s, _), .photo(let s, _, _), .livePhoto(let s, _, _, _): return [s]
        case .title: return []
        }
    }
    /// A short label for messages and progress ("clip 3 (IMG_0001.MOV)").
    public func label(index: Int) -> String {
        if let named = livePhoto { return "live photo \(index + 1) (\(named.displayName))" }
        switch kind {
        case .video(let s, _): return "clip \(index + 1) (\(s.displayName))"
        case .livePhoto(let s, _, _, _): return "live photo \(index + 1) (\(s.displayName))"
        case .photo(let s, _, _): return "photo \(index + 1) (\(s.displayName))"
        case .title(let t): return "title \(index + 1) (\(Self.quoted(t.text)))"
        }
    }

    /// Text quoted on one line, as the pipeline writes it (a message naming it is one line), cut at 24 characters.
    public static func quoted(_ text: String) -> String {
        let line = text.replacingOccurrences(of: "\n", with: "\\n")
        return "\"\(line.count > 24 ? line.prefix(23) + "…" : Substring(line))\""
    }
    /// The kind's name as written in pipeline files.
    public var kindName: String {
        if livePhoto != nil { return "live_photo" }
        switch kind { case .video: return "video"; case .title: return "title"; case .photo: return "photo"; case .livePhoto: return "live_photo" }
    }
}

/// What a Live Photo item shows.
public enum LivePhotoUse: String, Sendable, Hashable, Codable, CaseIterable {
    /// Its movie (the default).
    case motion
    /// Its photo, for `duration`.
    case still
    /// Its movie, twice in a row.
    case loop
    /// Its movie forward, then backwards.
    case bounce
}

/// A title card: centred text, wrapped to fit, on a background colour.
public struct Title: Sendable, Hashable, Codable {
    public static let defaultFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    public var text: String
    public var duration: Double
    /// "#rrggbb".
    public var background: String
    public var color: String
    /// Font size in pixels; nil: a tenth of the output height.
    public var size: Int?
    /// A TrueType/OpenType font file.
    public var font: String
    public init(text: String, duration: Double = 2, background: String = "#000000", color: String = "#ffffff",
                size: Int? = nil, font: String = Title.defaultFont) {
        self.text = text; self.duration = duration; self.background = background; self.color = color; self.size = size; self.font = font
    }
}

/// How one item gives way to the next. Both kinds overlap the two items by `duration`: the
/// movie gets shorter by it.
public struct Transition: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case none
        /// Through black: out, then in.
        case fade
        /// A cross-dissolve.
        case dissolve
    }
    public var kind: Kind
    public var duration: Double
    public var location: SourceLocation?
    public init(kind: Kind, duration: Double = 0.5, location: SourceLocation? = nil) {
        self.kind = kind; self.duration = duration; self.location = location
    }
    public var isNone: Bool { kind == .none || duration <= 0 }
}

public struct Trim: Sendable, Hashable, Codable {
    public var start: Double
    public var end: Double?
    public init(start: Double = 0, end: Double? = nil) { self.start = start; self.end = end }
}

/// A normalised rectangle: fractions of the upright picture.
public struct CropRect: Sendable, Hashable, Codable {
    public var x: Double, y: Double, width: Double, height: Double
    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x; self.y = y; self.width = width; self.height = height
    }
}

/// Edits any item can carry. They are parameters: sources are never changed.
public struct Edits: Sendable, Hashable, Codable {
    public enum Flip: String, Sendable, Hashable, Codable, CaseIterable { case horizontal, vertical, both }
    /// Extra clockwise rotation on top of the file's own display matrix (0, 90, 180, 270).
    public var rotate: Int
    public var flip: Flip?
    public var crop: CropRect?
    public var mute: Bool
    /// Linear gain for the item's own audio.
    public var volume: Double
    /// A named colour look.
    public var look: Look?
    public var adjust: Adjust?
    /// Overrides the output's fit for this item.
    public var fit: OutputProfile.Fit?
    /// Playback speed, 0.25…4; audio keeps its pitch.
    public var speed: Double = 1
    /// How many times the item plays in a row (its segment is rendered once).
    public var loop: Int = 1
    /// Text drawn over the item.
    public var text: TextOverlay?
    /// Play forward, then backwards, ending on the first frame.
    public var bounce: Bool = false
    /// Images (with alpha) placed over the item, each optionally only part of the time.
    public var stickers: [Sticker] = []
    public init(rotate: Int = 0, flip: Flip? = nil, crop: CropRect? = nil, mute: Bool = false, volume: Double = 1,
                look: Look? = nil, adjust: Adjust? = nil, fit: OutputProfile.Fit? = nil, speed: Double = 1, loop: Int = 1) {
        self.rotate = rotate; self.flip = flip; self.crop = crop; self.mute = mute; self.volume = volume
        self.look = look; self.adjust = adjust; self.fit = fit; self.speed = speed; self.loop = loop
    }
}

/// Text over an item, optionally only between `start` and `end` (seconds of the item).
public struct TextOverlay: Sendable, Hashable, Codable {
    public enum Position: String, Sendable, Hashable, Codable, CaseIterable {
        case top, center, bottom
        case topLeft = "top-left", topRight = "top-right", bottomLeft = "bottom-left", bottomRight = "bottom-right"
    }
    public var value: String
    public var position: Position = .bottom
    /// Pixels; nil: an eighteenth of the output height.
    public var size: Int?
    public var color: String = "#ffffff"
    public var start: Double?
    public var end: Double?
    public var font: String = Title.defaultFont
    public init(value: String, position: Position = .bottom, size: Int? = nil, color: String = "#ffffff",
                start: Double? = nil, end: Double? = nil, font: String = Title.defaultFont) {
        self.value = value; self.position = position; self.size = size; self.color = color
        self.start = start; self.end = end; self.font = font
    }
    /// True when the text shows only part of the time.
    public var isWindowed: Bool { start != nil || end != nil }
}

/// An image with alpha over an item: centred at (`x`, `y`) (fractions of the output frame),
/// `size` its width as a fraction of the output width, turned `rotate` degrees clockwise, shown
/// from `start` to `end` (seconds of the item; nil: from the beginning, to the end).
public struct Sticker: Sendable, Hashable, Codable {
    public var image: String
    /// Content hash, so a changed image re-renders what shows it.
    public var sha256: String
    public var x: Double = 0.5
    public var y: Double = 0.5
    public var size: Double = 0.15
    public var rotate: Double = 0
    public var start: Double?
    public var end: Double?
    public init(image: String, sha256: String, x: Double = 0.5, y: Double = 0.5, size: Double = 0.15, rotate: Double = 0,
                start: Double? = nil, end: Double? = nil) {
        self.image = image; self.sha256 = sha256; self.x = x; self.y = y; self.size = size; self.rotate = rotate
        self.start = start; self.end = end
    }
    /// True when the sticker shows only part of the time.
    public var isWindowed: Bool { start != nil || end != nil }
}

/// A slow zoom and pan over a photo, from one framing to another; it fills the frame.
public struct KenBurns: Sendable, Hashable, Codable {
    public struct Framing: Sendable, Hashable, Codable {
        /// 1 shows the whole frame-filling picture; 2 shows half its width.
        public var zoom: Double
        /// Centre of the view, as fractions of the upright picture.
        public var x: Double
        public var y: Double
        public init(zoom: Double = 1, x: Double = 0.5, y: Double = 0.5) { self.zoom = zoom; self.x = x; self.y = y }
    }
    public var from: Framing
    public var to: Framing
    public init(from: Framing, to: Framing) { self.from = from; self.to = to }

    /// The framing `u` of the way along (0: `from`, 1: `to`): the zoom at a constant perceived
    /// speed (geometric), the centre moving evenly.
    public func framing(at u: Double) -> Framing {
        Framing(zoom: from.zoom * pow(to.zoom / from.zoom, u), x: from.x + (to.x - from.x) * u, y: from.y + (to.y - from.y) * u)
    }
}

/// Named looks, as casual movie apps offer them.
public enum Look: String, Sendable, Hashable, Codable, CaseIterable {
    /// Plain black and white.
    case mono
    /// A warm, soft black and white.
    case silvertone
    case sepia
    /// Stronger colour and contrast.
    case vivid
    /// Washed out, lifted blacks.
    case fade
    /// Hard black and white with deep shadows.
    case noir
    /// Golden-hour warmth.
    case warm
    /// Blue-hour coolness.
    case cool
}

/// Colour adjustments; every field's neutral value leaves the picture unchanged.
public struct Adjust: Sendable, Hashable, Codable {
    /// -1…1, 0 neutral.
    public var brightness: Double = 0
    /// 0…3, 1 neutral.
    public var contrast: Double = 1
    /// 0…3, 1 neutral.
    public var saturation: Double = 1
    /// 0.1…10, 1 neutral.
    public var gamma: Double = 1
    /// -1 (cool) … 1 (warm), 0 neutral.
    public var warmth: Double = 0
    public init(brightness: Double = 0, contrast: Double = 1, saturation: Double = 1, gamma: Double = 1, warmth: Double = 0) {
        self.brightness = brightness; self.contrast = contrast; self.saturation = saturation; self.gamma = gamma; self.warmth = warmth
    }
}

/// A local file a pipeline uses, by what it is for. Remote submits upload exactly these; text
/// (titles, captions) is never taken for a file, whatever it reads.
public struct PipelineFile: Sendable, Hashable, Codable {
    public enum Role: String, Sendable, Hashable, Codable { case source, font, sticker, watermark, soundtrack }
    public var role: Role
    public var path: String
    /// The item that uses it; nil for the movie's own files (watermark, soundtrack).
    public var item: Int?
    public init(role: Role, path: String, item: Int?) { self.role = role; self.path = path; self.item = item }
}

extension Item {
    /// The local files this item's render reads: its source, fonts and sticker images.
    public func files(index: Int) -> [PipelineFile] {
        var files: [PipelineFile] = sources.filter { !$0.isRemote }.map { PipelineFile(role: .source, path: $0.uri, item: index) }
        if case .title(let t) = kind { files.append(PipelineFile(role: .font, path: t.font, item: index)) }
        if let text = edits.text { files.append(PipelineFile(role: .font, path: text.font, item: index)) }
        for s in edits.stickers { files.append(PipelineFile(role: .sticker, path: s.image, item: index)) }
        return files
    }
}

extension Pipeline {
    /// Every local file the movie is made from: the items' files, the watermark and the soundtrack.
    public var files: [PipelineFile] {
        items.enumerated().flatMap { $1.files(index: $0) } + [watermarkFile, soundtrackFile].compactMap { $0 }
    }

    /// The files besides its source that item `item`'s render reads (its fonts and stickers, the
    /// watermark), or with `item` nil, those the concat reads (the soundtrack). The item's own,
    /// not a filter of `files`: that is every item's, for each of thousands of items.
    public func otherFiles(read item: Int?) -> [PipelineFile] {
        guard let i = item else { return [soundtrackFile].compactMap { $0 } }
        return items[i].files(index: i).filter { $0.role != .source } + [watermarkFile].compactMap { $0 }
    }

    /// The watermark image, which every segment draws.
    public var watermarkFile: PipelineFile? { output.watermark.map { PipelineFile(role: .watermark, path: $0.image, item: nil) } }
    /// The soundtrack, which the concat mixes in.
    public var soundtrackFile: PipelineFile? { output.soundtrack.map { PipelineFile(role: .soundtrack, path: $0.source, item: nil) } }
}
