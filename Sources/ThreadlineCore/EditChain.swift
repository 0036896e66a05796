import Foundation

/// The one edit chain: how any item's picture — a video frame, a photo, a Ken Burns window, a
/// generated title — becomes a finished frame of the movie. Every renderer builds its libavfilter
/// graph here, so an edit is added once and colour is converted once, at one point:
///
///   source colour → BT.709 · upright (display matrix / EXIF) · the user's rotate, flip, crop ·
///   square pixels · look and adjustments · fit (letterbox, crop, blur) · text · stickers ·
///   watermark · yuv420p
///
/// Looks are defined on display-referred BT.709 pictures, so they come after the conversion;
/// everything drawn on top (text, stickers, watermark) is converted to BT.709 itself.
///
/// The chain is text (a libavfilter graph description) built from the plan alone, so it lives
/// here and not in Media: Media builds its graphs from it, and the coordinator fingerprints a
/// segment's render with it (`fingerprint`) without linking FFmpeg.
public struct EditChain: Sendable {
    public let edits: Edits
    public let profile: OutputProfile
    /// Where the text, watermark and sticker images are for this render (placeholders for fingerprints).
    public let files: Files

    public init(edits: Edits, profile: OutputProfile, files: Files) {
        self.edits = edits; self.profile = profile; self.files = files
    }

    /// The files a chain reads besides the picture: the text overlay's words and the watermark
    /// and sticker images, under names that need no escaping in a filter graph.
    public struct Files: Sendable {
        /// The text overlay's lines as wrapped (`EditChain.textLines`), one file each.
        public var text = ["TEXT"]
        public var watermark = "WATERMARK"
        public var stickers: [String] = []
        /// The text's font under a name a graph can hold (`Edits.text.font` when nil: placeholders
        /// keep the font's own path, so fingerprints do not change with scratch names).
        public var font: String? = nil
        /// Lettering libass draws (`ShapedText`): its ASS script, and a folder holding only its font.
        public var ass: String? = nil
        public var fonts: String? = nil
        public init(text: [String] = ["TEXT"], watermark: String = "WATERMARK", stickers: [String] = []) {
            self.text = text; self.watermark = watermark; self.stickers = stickers
        }
        /// Placeholder names, for fingerprints.
        public static func placeholders(_ edits: Edits, _ profile: OutputProfile) -> Files {
            let lines = edits.text.map { EditChain.textLines($0, profile).count } ?? 1
            return Files(text: lines == 1 ? ["TEXT"] : (0..<lines).map { "TEXT\($0)" }, stickers: edits.stickers.indices.map { "STICKER\($0)" })
        }
    }

    /// How a stored picture is made upright: its filters, in order, and the quarter turns they make.
    public struct Upright: Sendable, Equatable {
        public var filters: [String]
        public var clockwise: Int
        public init(filters: [String], clockwise: Int) { self.filters = filters; self.clockwise = clockwise }
    }

    /// A decoded picture as the chain receives it.
    public struct Source {
        public var orientation: Upright?
        /// Its sample aspect ratio (num, den); 0 or negative: unknown, taken as square.
        public var sar: (num: Int, den: Int)
        /// The filters that convert its colour to the movie's BT.709 (empty when it is already).
        public var toOutput: [String]
        /// The decoded size; with it, a chain that only turns, flips and fits scales first.
        public var size: (width: Int, height: Int)?
        /// Whether the picture is 8-bit 4:2:0 (yuv420p, what phones and cameras mostly record):
        /// scaling it first, zscale resizes it (see `resize`).
        public var yuv420p: Bool
        /// For a picture with an alpha channel (an animated GIF, ProRes 4444): the filters that
        /// make it sRGB with alpha ([] when it is already), after which its transparency shows the
        /// movie's background (see `flatten`) and `toOutput` converts sRGB. nil: opaque.
        public var transparency: [String]?
        public init(orientation: Upright?, sar: (num: Int, den: Int), toOutput: [String], size: (width: Int, height: Int)? = nil, yuv420p: Bool = false,
                    transparency: [String]? = nil) {
            self.orientation = orientation; self.sar = sar; self.toOutput = toOutput; self.size = size; self.yuv420p = yuv420p
            self.transparency = transparency
        }
    }

    /// What the renderer does to an upright, square-pixel BT.709 source for this segment: part of
    /// the segment's cache key, so a change to the chain renders again.
    public static func fingerprint(_ spec: SegmentSpec) -> String { fingerprint(FingerprintInputs(spec)) }

    /// All that a segment's fingerprint depends on: equal inputs, equal fingerprints. The
    /// coordinator remembers fingerprints by them (keyed by the edits and the output alone, a
    /// clip's was remembered for the title before it, whose own says it is lettered).
    public struct FingerprintInputs: Hashable, Sendable {
        public var edits: Edits
        public var profile: OutputProfile
        public var kenBurns: Bool, still: Bool, transparent: Bool, title: Bool, interlaced: Bool
        /// A title or text in a script libass draws (`ShapedText`).
        public var shaped: Bool
        public init(_ spec: SegmentSpec) {
            edits = spec.edits; profile = spec.profile
            kenBurns = spec.kenBurns != nil; still = spec.still == true; transparent = spec.transparent == true; title = spec.title != nil
            interlaced = spec.interlaced == true
            shaped = (spec.title.map { ShapedText.drawnByLibass($0.text) } ?? false) || (spec.edits.text.map { ShapedText.drawnByLibass($0.value) } ?? false)
        }
    }

    public static func fingerprint(_ f: FingerprintInputs) -> String {
        let chain = EditChain(edits: f.edits, profile: f.profile, files: .placeholders(f.edits, f.profile))
        return chain.description(for: Source(orientation: nil, sar: (1, 1), toOutput: [], transparency: f.transparent ? [] : nil))
            + (chain.scalesFirst ? scaledFirstMark : "")
            + (f.kenBurns ? " (Ken Burns over a 4:2:0 base)" : "")
            + (f.still ? " (still: transparency over the background)" : "")
            + (f.interlaced ? deinterlaceMark : "")
            // Bounced segments of open-GOP sources made before the way back read through to the
            // next key frame lack frames or repeat them: such segments render again.
            + (f.edits.bounce ? " (bounce, open groups read whole)" : "")
            // Watermark and sticker images were drawn as stored before (a phone's JPEG on its
            // side, HEIC refused): segments showing one render again.
            + (f.edits.stickers.isEmpty && f.profile.watermark == nil ? "" : overlayImagesMark)
            // Words wider than a line (and wide characters) were not broken before, lines of
            // several sat on their tallest letters, text longer than the frame ran off it, and
            // lines of capitals were counted as small letters: lettered segments render again.
            + (f.edits.text == nil && !f.title ? "" : wrapMark)
            // Its words were drawn a glyph per character, vowel signs out of place ("दविाली"):
            // lettering in such a script renders again, and again when libass's script changes.
            + (f.shaped ? shapedMark : "")
    }

    /// What the fingerprint adds for lettering libass draws (`ShapedText`): the ASS script itself
    /// is not in the chain (a placeholder stands for its file), so what it holds is said here.
    public static let shapedMark = " (lettering shaped and broken into lines by libass)"

    /// What the fingerprint adds for a segment with lettering (a title, a text over an item).
    public static let wrapMark = " (text wrapped by each character's width, long words broken, lines on baselines, shrunk to fit the frame)"

    /// What the fingerprint adds for an interlaced source: its fields are made whole frames
    /// (Media's `Deinterlacer`) before the chain sees them.
    public static let deinterlaceMark = " (interlaced: deinterlaced by bwdif, a frame per field when the output shows over 1.1x the source's frames)"

    /// What the fingerprint adds for a chain that draws watermark or sticker images.
    public static let overlayImagesMark = " (overlay images upright, sRGB)"

    /// Whether the picture depends on the output slot (a windowed text or sticker): renderers
    /// that reuse one filtered picture must filter per slot then.
    public var variesPerSlot: Bool { edits.text?.isWindowed == true || edits.stickers.contains { $0.isWindowed } }

    // MARK: whole chains

    /// The chain for a decoded picture, from the buffer source to the finished frame.
    public func description(for source: Source) -> String {
        let body = scaledFirst(source) ?? self.body(source)
        return finish(body)
    }

    /// The head of every chain for a picture with transparency: made sRGB with alpha, then
    /// composited over the background (`flatten`); nothing for an opaque one.
    func composited(_ source: Source) -> [String] { source.transparency.map { $0 + [flatten] } ?? [] }

    /// Composites an sRGB picture with alpha over the background colour, in RGB (no Y'CbCr
    /// matrix involved), ahead of the rest of the chain; left to libswscale, the alpha was dropped
    /// and transparent pixels showed whatever colour they hide (white in most GIFs). The plate is
    /// the picture itself with every pixel set to the colour (lutrgb: drawbox on RGBA crashes
    /// FFmpeg 5.1), so it keeps each frame's size and time.
    var flatten: String {
        let (r, g, b) = PipelineLoader.parseColor(profile.background) ?? (0, 0, 0)
        return "split[tl_fg][tl_bg];[tl_bg]lutrgb=r=\(r):g=\(g):b=\(b):a=255[tl_plate];[tl_plate][tl_fg]overlay=format=rgb:eof_action=pass,format=rgb24"
    }

    /// The same picture as `body`, scaling before turning and colouring — or nil when the chain
    /// does more than turn, flip and fit (a crop, non-square pixels, an odd angle, blur fit).
    public func scaledFirst(_ source: Source) -> String? {
        let turns = source.orientation?.filters ?? []
        guard let size = source.size, scalesFirst,
              turns.allSatisfy({ $0.hasPrefix("transpose=") || $0 == "hflip" || $0 == "vflip" }),
              source.sar.num <= 0 || source.sar.den <= 0 || source.sar.num == source.sar.den,
              size.width > 0, size.height > 0 else { return nil }
        let fit = edits.fit ?? profile.fit
        let sideways = ((source.orientation?.clockwise ?? 0) + edits.rotate) % 180 == 90
        let (uw, uh) = sideways ? (size.height, size.width) : (size.width, size.height)
        // The size libavfilter's scale picks for force_original_aspect_ratio (av_rescale rounds to nearest).
        let W = profile.width, H = profile.height
        let tw = (H * uw + uh / 2) / uh, th = (W * uh + uw / 2) / uw
        var (w, h) = fit == .letterbox ? (min(tw, W), min(th, H)) : (max(tw, W), max(th, H))
        // Even sizes, as 4:2:0 needs: the colour conversion after the resize (a full-range or
        // BT.601 source) refuses an odd one, so a GoPro's 848x480 cropped to fill 1280x720
        // (1280x725 before the crop) failed. A letterbox rounds down (the pad adds the rest),
        // a crop up (the crop trims it).
        if fit == .letterbox { w = max(2, w / 2 * 2); h = max(2, h / 2 * 2) } else { w = (w + 1) / 2 * 2; h = (h + 1) / 2 * 2 }
        var chain = composited(source) + [Self.resize(width: sideways ? h : w, height: sideways ? w : h, from: source)] + source.toOutput + turns
        chain += Self.userTurns(edits)
        chain += look
        chain.append(fit == .letterbox ? "pad=\(W):\(H):(ow-iw)/2:(oh-ih)/2:color=\(drawColour(profile.background))" : "crop=\(W):\(H)")
        return (chain + ["setsar=1"]).joined(separator: ",")
    }

    /// What the fingerprint adds for a chain that scales first on upright sources: how it resizes.
    public static let scaledFirstMark = " (scaled first; 4:2:0 by zscale bicubic b=0 c=0.6)"

    /// The first resize of a chain that scales first. An 8-bit 4:2:0 picture of even size to an
    /// even size goes through zscale (zimg) with swscale's own bicubic kernel (B = 0, C = 0.6):
    /// the same luma (70.6 dB PSNR against swscale on a 1080p frame to 720p, `ResizeTests`), chroma
    /// sited as the frame says, and 0.9 instead of 1.6 ms a 1080p frame to 720p on one core
    /// (`ffmpeg -threads 1 -filter_threads 1`, 300 frames). Other pictures (10-bit, `yuvj*`, odd
    /// sizes, which zimg does not subsample) keep libswscale.
    static func resize(width: Int, height: Int, from source: Source) -> String {
        guard source.yuv420p, let size = source.size, size.width % 2 == 0, size.height % 2 == 0, width % 2 == 0, height % 2 == 0 else {
            return "scale=\(width):\(height)"
        }
        return "zscale=w=\(width):h=\(height):filter=bicubic:param_a=0:param_b=0.6"
    }

    /// Whether the edits allow scaling first on an upright, square-pixel source: no crop, and a
    /// letterbox or crop fit (blur fit needs the whole picture twice).
    public var scalesFirst: Bool {
        let fit = edits.fit ?? profile.fit
        return (edits.crop == nil || edits.crop == CropRect(x: 0, y: 0, width: 1, height: 1)) && (fit == .letterbox || fit == .crop)
    }

    /// Everything up to the fitted frame: the picture (`picture`), then the fit.
    public func body(_ source: Source) -> String {
        var chain = picture(source)
        let w = profile.width, h = profile.height
        switch edits.fit ?? profile.fit {
        case .letterbox:
            chain.append("scale=\(w):\(h):force_original_aspect_ratio=decrease:force_divisible_by=2")
            chain.append("pad=\(w):\(h):(ow-iw)/2:(oh-ih)/2:color=\(drawColour(profile.background))")
        case .crop:
            chain.append("scale=\(w):\(h):force_original_aspect_ratio=increase")
            chain.append("crop=\(w):\(h)")
        case .blur:
            // The picture fitted inside, over a blurred copy that fills the frame.
            let radius = max(4, min(w, h) / 30)
            let head = (chain + ["split[fg][bg]"]).joined(separator: ",")
            return head + ";[bg]scale=\(w):\(h):force_original_aspect_ratio=increase,crop=\(w):\(h),boxblur=\(radius):2[blurred]"
                + ";[fg]scale=\(w):\(h):force_original_aspect_ratio=decrease:force_divisible_by=2[inner]"
                + ";[blurred][inner]overlay=(W-w)/2:(H-h)/2,setsar=1"
        }
        return (chain + ["setsar=1"]).joined(separator: ",")
    }

    /// The picture before fitting: in BT.709, upright, turned, cropped, square pixels, coloured.
    /// Ken Burns builds its oversampled base from this.
    public func picture(_ source: Source) -> [String] {
        var chain = composited(source) + source.toOutput
        chain += source.orientation?.filters ?? []
        chain += Self.userTurns(edits)
        // At least 2x2 (4:2:0 needs it); a picture narrower or shorter than that (the 1x1 clips
        // test corpora hold) keeps what it has.
        if let c = edits.crop, c != CropRect(x: 0, y: 0, width: 1, height: 1), min(source.size?.width ?? 2, source.size?.height ?? 2) >= 2 {
            chain.append(String(format: "crop=w='max(2,iw*%.6f)':h='max(2,ih*%.6f)':x='iw*%.6f':y='ih*%.6f'", c.width, c.height, c.x, c.y))
        }
        if source.sar.num > 0 && source.sar.den > 0 && source.sar.num != source.sar.den {
            chain.append("scale=w='max(2,trunc(iw*sar/2)*2)':h=ih")
            chain.append("setsar=1")
        }
        // Colour belongs to the picture, before fitting: bars keep the background colour.
        return chain + look
    }

    /// Ends a chain whose frames are output-sized BT.709: text, stickers, watermark, yuv420p.
    public func finish(_ body: String) -> String {
        var graph = ([body] + textOverlay).joined(separator: ",")
        var label = 0
        func overlay(_ source: String, x: String, y: String, enable: String?) {
            let main = "v\(label)", layer = "o\(label)"
            label += 1
            graph += "[\(main)];\(source)[\(layer)];[\(main)][\(layer)]overlay=x=\(x):y=\(y):eof_action=repeat"
                + (enable.map { ":enable='\($0)'" } ?? "")
        }
        for (k, s) in edits.stickers.enumerated() {
            let w = max(2, Int((Double(profile.width) * s.size).rounded()))
            var image = "movie=filename='\(files.stickers[k])',format=rgba,scale=\(w):-1:flags=lanczos"
            if s.rotate != 0 {
                let a = String(format: "%.6f*PI/180", s.rotate)
                image += ",rotate=\(a):c=none:ow=rotw(\(a)):oh=roth(\(a))"
            }
            image += "," + Self.overlayImageToOutput
            overlay(image, x: String(format: "%.6f*W-w/2", s.x), y: String(format: "%.6f*H-h/2", s.y), enable: window(s.start, s.end))
        }
        if let w = profile.watermark {
            let h = max(2, Int(Double(profile.height) * w.size))
            let m = Int(Double(profile.height) * w.margin)
            let (x, y): (String, String)
            switch w.position {
            case .topLeft: (x, y) = ("\(m)", "\(m)")
            case .topRight: (x, y) = ("W-w-\(m)", "\(m)")
            case .bottomLeft: (x, y) = ("\(m)", "H-h-\(m)")
            case .bottomRight: (x, y) = ("W-w-\(m)", "H-h-\(m)")
            }
            overlay("movie=filename='\(files.watermark)',format=rgba,scale=-2:\(h),colorchannelmixer=aa=\(String(format: "%.4f", w.opacity)),"
                    + Self.overlayImageToOutput, x: x, y: y, enable: nil)
        }
        return graph + ",format=yuv420p"
    }

    /// An RGBA image (sRGB) to Y'CbCr with alpha in the movie's BT.709, for overlay. Left to
    /// libavfilter, the conversion would use BT.601 and shift every logo's colours.
    public static let overlayImageToOutput = "scale=out_color_matrix=bt709:out_range=tv,format=yuva420p"

    /// A timeline expression true for the output slots whose time lies in [start, end): frames
    /// are pushed with their slot as pts in 1/fps, and the bounds sit half a frame early so
    /// rounding cannot move them.
    public func window(_ start: Double?, _ end: Double?) -> String? {
        guard start != nil || end != nil else { return nil }
        var terms: [String] = []
        if let start { terms.append("gte(t,\(String(format: "%.9f", edge(start))))") }
        if let end { terms.append("lt(t,\(String(format: "%.9f", edge(end))))") }
        return terms.joined(separator: "*")
    }

    /// Half a slot before the first slot at or after `seconds`: where a window opens or closes.
    public func edge(_ seconds: Double) -> Double {
        let fps = profile.fps.double
        let frame = (seconds * fps - 1e-9).rounded(.up)          // the first slot at or after `seconds`
        return (frame - 0.5) / fps
    }

    /// The edits as they stand at `seconds` into the item, for a picture of that one moment (a
    /// poster, rendered as a segment of one frame whose time is 0): a windowed text or sticker
    /// showing then shows all along, one not showing then is left out.
    public func at(_ seconds: Double) -> Edits {
        var e = edits
        let slot = (seconds * profile.fps.double).rounded() / profile.fps.double
        func shown(_ start: Double?, _ end: Double?) -> Bool { (start.map { slot >= edge($0) } ?? true) && (end.map { slot < edge($0) } ?? true) }
        if let t = e.text, t.isWindowed {
            e.text = shown(t.start, t.end) ? { var all = t; all.start = nil; all.end = nil; return all }() : nil
        }
        e.stickers = e.stickers.compactMap { s in
            guard s.isWindowed else { return s }
            guard shown(s.start, s.end) else { return nil }
            var all = s; all.start = nil; all.end = nil
            return all
        }
        return e
    }

    /// The seconds lettering shows, as `window` opens and closes it (nil: all along).
    public func windowEdges(_ start: Double?, _ end: Double?) -> (from: Double, to: Double)? {
        guard start != nil || end != nil else { return nil }
        return (start.map(edge) ?? 0, end.map(edge) ?? 36_000)
    }

    /// FFmpeg's `ass` filter drawing `script` with the fonts in `fonts` only, shaped by HarfBuzz.
    public static func assFilter(script: String?, fonts: String?) -> String {
        "ass=filename='\(script ?? "ASS")':fontsdir='\(fonts ?? "FONTS")':shaping=complex"
    }

    // MARK: pieces

    /// The user's rotate and flip, in that order.
    public static func userTurns(_ edits: Edits) -> [String] {
        var chain: [String] = []
        switch edits.rotate {
        case 90: chain.append("transpose=clock")
        case 180: chain += ["hflip", "vflip"]
        case 270: chain.append("transpose=cclock")
        default: break
        }
        switch edits.flip {
        case .horizontal: chain.append("hflip")
        case .vertical: chain.append("vflip")
        case .both: chain += ["hflip", "vflip"]
        case nil: break
        }
        return chain
    }

    /// Lettering laid out: its font size and its lines, and whether they fit the frame.
    public struct TextLayout: Sendable, Equatable {
        public var size: Int
        public var lines: [String]
        public var fits: Bool
        /// The size asked for (written, or the default): more than `size` where it was shrunk.
        public var wanted: Int
    }

    /// The smallest size lettering is shrunk to; text that does not fit even so is an error.
    public static let smallestTextSize = 8

    /// `text` wrapped to `width` pixels (`wrap`, at least 3.3 ems) at `wanted`, or at the largest
    /// smaller size whose lines (`height(size, lines)` tall) fit `room` pixels: a long caption or
    /// title was drawn at its size and ran off the top and bottom of the frame.
    public static func fit(_ text: String, wanted: Int, width: Double, room: Double, height: (Int, Int) -> Int) -> TextLayout {
        var size = wanted
        while true {
            let lines = wrap(text, maxWidth: max(3.3, width / Double(size)))
            let fits = Double(height(size, lines.count)) <= room
            if fits || size <= smallestTextSize { return TextLayout(size: size, lines: lines, fits: fits, wanted: wanted) }
            size = max(smallestTextSize, min(size - 1, Int(Double(size) * 0.95)))
        }
    }

    /// The text overlay laid out on the frame: as written (else an 18th of the frame's height),
    /// wrapped to 90 % of the frame's width, shrunk until its lines (1.2 sizes apart) fit inside
    /// the margins (5 % of the height each side).
    public static func textLayout(_ text: TextOverlay, _ profile: OutputProfile) -> TextLayout {
        fit(text.value, wanted: text.size ?? max(10, profile.height / 18), width: 0.9 * Double(profile.width), room: 0.9 * Double(profile.height)) { size, n in
            (n - 1) * textLineAdvance(size) + size
        }
    }

    /// A title card laid out: as written (else a tenth of the frame's height), wrapped to 86 % of
    /// the frame's width, shrunk until its lines (1.3 sizes each) fit 90 % of its height.
    public static func titleLayout(_ title: Title, _ profile: OutputProfile) -> TextLayout {
        fit(title.text, wanted: title.size ?? max(12, profile.height / 10), width: 0.86 * Double(profile.width), room: 0.9 * Double(profile.height)) { size, n in
            titleLineHeight(size) * n
        }
    }

    /// How far apart a text overlay's lines are at `size`: 1.2 sizes.
    public static func textLineAdvance(_ size: Int) -> Int { size + size / 5 }

    /// How tall a title's line is at `size`: 1.3 sizes.
    public static func titleLineHeight(_ size: Int) -> Int { Int((Double(size) * 1.3).rounded()) }

    /// An item's lettering as laid out: its title's ("its text") and its text overlay's ("its
    /// text overlay"), and what to do where one does not fit.
    public static func lettering(_ item: Item, _ profile: OutputProfile) -> [(what: String, layout: TextLayout, mend: String)] {
        var laid: [(what: String, layout: TextLayout, mend: String)] = []
        if case .title(let t) = item.kind { laid.append(("its text", titleLayout(t, profile), "shorten it, or spread it over several titles")) }
        if let text = item.edits.text { laid.append(("its text overlay", textLayout(text, profile), "shorten it")) }
        return laid
    }

    /// The text overlay's font size (`textLayout`).
    public static func textSize(_ text: TextOverlay, _ profile: OutputProfile) -> Int { textLayout(text, profile).size }

    /// The text overlay's lines (`textLayout`).
    public static func textLines(_ text: TextOverlay, _ profile: OutputProfile) -> [String] { textLayout(text, profile).lines }

    /// One drawtext per line (`files.text`), each line placed on its own: a centred caption's
    /// lines are each centred, a right one's each flush right (drawtext in FFmpeg 5.1 aligns the
    /// lines of one text on the left). Lines are 1.2 sizes apart, on baselines (`capitals`).
    public var textOverlay: [String] {
        guard let text = edits.text else { return [] }
        if ShapedText.drawnByLibass(text.value) { return [Self.assFilter(script: files.ass, fonts: files.fonts)] }
        let size = Self.textSize(text, profile)
        let m = "h*0.05"
        let n = files.text.count, advance = Self.textLineAdvance(size), ascent = Self.capitals(size)
        let block = (n - 1) * advance   // from the first line's top to the last one's
        let x: String
        switch text.position {
        case .top, .center, .bottom: x = "(w-text_w)/2"
        case .topLeft, .bottomLeft: x = m
        case .topRight, .bottomRight: x = "w-text_w-\(m)"
        }
        return files.text.enumerated().map { k, file in
            let below = (n - 1 - k) * advance, above = k * advance
            let y: String
            switch (text.position, n) {
            case (.top, 1), (.topLeft, 1), (.topRight, 1): y = m
            case (.center, 1): y = "(h-text_h)/2"
            case (.bottom, 1), (.bottomLeft, 1), (.bottomRight, 1): y = "h-text_h-\(m)"
            case (.top, _), (.topLeft, _), (.topRight, _): y = "\(m)+\(above + ascent)-max_glyph_a"
            case (.center, _): y = "(h-\(block + size))/2+\(above + ascent)-max_glyph_a"
            case (.bottom, _), (.bottomLeft, _), (.bottomRight, _): y = "h-\(m)-\(size + below - ascent)-max_glyph_a"
            }
            var f = "drawtext=fontfile='\(files.font ?? text.font)':textfile='\(file)':expansion=none:fontsize=\(size):fontcolor=\(drawColour(text.color))"
                + ":shadowx=2:shadowy=2:shadowcolor=black@0.6:x=\(x):y=\(y)"
            if let w = window(text.start, text.end) { f += ":enable='\(w)'" }
            return f
        }
    }

    /// How far capitals reach above the baseline, in pixels, at `size` (DejaVu Sans's 0.73 em).
    /// Lines of several are placed on baselines: drawtext puts a line's tallest glyph at its y,
    /// so `y = top + capitals - max_glyph_a` sets a line's capitals' tops at `top`, and a line of
    /// small letters ("ace") on the same baseline as one with capitals, not higher.
    public static func capitals(_ size: Int) -> Int { Int((Double(size) * 0.73).rounded()) }

    /// Greedy word wrap to `maxWidth` ems (`advance`: a capital is wider than a small letter, an
    /// "i" narrower; a line of capitals counted as small letters ran off both edges); explicit
    /// newlines are kept. A word wider than a line (a long URL, or a Japanese sentence, which has
    /// no spaces) is broken between characters: it ran off both edges of the frame.
    public static func wrap(_ text: String, maxWidth: Double) -> [String] {
        var lines: [String] = []
        let space = advance(" ")
        for paragraph in text.components(separatedBy: "\n") {
            var line = "", used = 0.0
            for word in paragraph.split(separator: " ", omittingEmptySubsequences: true) {
                let width = word.reduce(0) { $0 + advance($1) }
                if !line.isEmpty && used + space + width <= maxWidth { line += " " + word; used += space + width; continue }
                if !line.isEmpty { lines.append(line); line = ""; used = 0 }
                for c in word {
                    let w = advance(c)
                    if !line.isEmpty && used + w > maxWidth { lines.append(line); line = ""; used = 0 }
                    line.append(c); used += w
                }
            }
            lines.append(line)
        }
        return lines
    }

    /// How far a character advances the pen, in ems: DejaVu Sans's own advances for ASCII (the
    /// default font; others are close enough for wrapping), a wide character (Chinese, Japanese,
    /// Korean) a whole em, other capitals, letters and digits as their ASCII kin.
    public static func advance(_ c: Character) -> Double {
        if let a = c.asciiValue, (32..<127).contains(a) { return asciiAdvance[Int(a) - 32] }
        if TerminalText.width(String(c)) > 1 { return 1.0 }
        if c.isUppercase { return 0.72 }
        if c.isNumber { return 0.636 }
        return 0.62
    }

    /// DejaVu Sans's advance widths (of 2,048 units to the em) for the printable ASCII characters, space to tilde.
    static let asciiAdvance: [Double] = {
        let units = [651, 821, 748, 1716, 1303, 1946, 1597, 450, 799, 799, 1024, 1716, 651, 739, 651, 690,   // space … /
                     1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303, 1303,                            // 0 … 9
                     690, 690, 1716, 1716, 1716, 1087, 2048,                                                // : … @
                     1401, 1405, 1430, 1577, 1294, 1178, 1587, 1540, 604, 604, 1343, 1141, 1767,            // A … M
                     1532, 1612, 1235, 1612, 1423, 1300, 1251, 1499, 1401, 2025, 1403, 1251, 1403,          // N … Z
                     799, 690, 799, 1716, 1024, 1024,                                                       // [ \ ] ^ _ `
                     1255, 1300, 1126, 1300, 1260, 721, 1300, 1298, 569, 569, 1186, 569, 1995,              // a … m
                     1298, 1253, 1300, 1300, 842, 1067, 803, 1298, 1212, 1675, 1212, 1212, 1075,            // n … z
                     1303, 690, 1303, 1716]                                                                 // { | } ~
        return units.map { Double($0) / 2048 }
    }()

    /// The look, then the adjustments, on BT.709 Y'CbCr. Filters that work on RGB get explicit
    /// BT.709 conversions around them (libavfilter's own would use BT.601).
    public var look: [String] {
        var f: [String] = []
        switch edits.look {
        case .mono: f.append("hue=s=0")
        case .silvertone: f += ["hue=s=0"] + Self.inRGB(["colorbalance=rs=0.06:gs=0.02:bs=-0.06:rm=0.05:gm=0.01:bm=-0.05"]) + ["eq=contrast=0.9:brightness=0.02"]
        case .sepia: f += Self.inRGB(["colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131"])
        case .vivid: f.append("eq=saturation=1.5:contrast=1.1")
        case .fade: f.append("eq=contrast=0.8:brightness=0.06:saturation=0.7")
        case .noir: f += ["hue=s=0", "eq=contrast=1.4:brightness=-0.05"]
        case .warm: f += Self.inRGB([Self.colourTemperature(4500)])
        case .cool: f += Self.inRGB([Self.colourTemperature(9000)])
        case nil: break
        }
        if let a = edits.adjust, a != Adjust() {
            if a.brightness != 0 || a.contrast != 1 || a.saturation != 1 || a.gamma != 1 {
                f.append(String(format: "eq=brightness=%.4f:contrast=%.4f:saturation=%.4f:gamma=%.4f", a.brightness, a.contrast, a.saturation, a.gamma))
            }
            if a.warmth != 0 { f += Self.inRGB([Self.colourTemperature((6500 - 2500 * a.warmth).rounded())]) }
        }
        return f
    }

    /// Light of `kelvin` as libavfilter's `colortemperature` gives it at its defaults (full mix, no
    /// lightness kept): a gain on each RGB channel. As a `lutrgb` of those gains it makes the same
    /// pixels (every 8-bit value of each channel compared, at 3000-9000 K) in a sixth of the time:
    /// 0.9 against 5.6 ms a 1280x720 frame. The gains are the black-body fit that filter uses
    /// (Tanner Helland's, scaled to 0…1).
    public static func colourTemperature(_ kelvin: Double) -> String {
        let k = kelvin / 100
        let clip = { (v: Double) in min(1, max(0, v)) }
        var r = 1.0, g: Double, b: Double
        if k <= 66 {
            g = clip(0.39008157876901960784 * log(k) - 0.63184144378862745098)
        } else {
            let t = max(k - 60, 0)
            r = clip(1.29293618606274509804 * pow(t, -0.1332047592))
            g = clip(1.12989086089529411765 * pow(t, -0.0755148492))
        }
        if k >= 66 { b = 1 } else if k <= 19 { b = 0 } else { b = clip(0.54320678911019607843 * log(k - 10) - 1.19625408914) }
        return String(format: "lutrgb=r=val*%.9f:g=val*%.9f:b=val*%.9f", r, g, b)
    }

    /// RGB-only filters between explicit BT.709 conversions.
    public static func inRGB(_ filters: [String]) -> [String] {
        ["scale=in_color_matrix=bt709:in_range=tv", "format=gbrp"] + filters + ["scale=out_color_matrix=bt709:out_range=tv", "format=yuv420p"]
    }
}

/// Colours for filters that draw straight onto the movie's BT.709 Y'CbCr pictures (drawtext, pad).
/// FFmpeg 5.1's drawing code converts RGB to Y'CbCr with BT.601's coefficients whatever the
/// picture is, so a `#00c000` text would show as (0,160,0). This gives the RGB that BT.601 turns
/// into the Y'CbCr BT.709 gives the intended colour; exact for colours inside both gamuts
/// (white, black and greys are the same either way), clamped otherwise.
public func drawColour(_ hex: String) -> String {
    guard let (r8, g8, b8) = PipelineLoader.parseColor(hex), r8 != g8 || g8 != b8 else { return filterColor(hex) }
    // Y'CbCr (Y in 0…1, Cb/Cr in -0.5…0.5) by BT.709, then back to RGB by BT.601.
    let r = Double(r8) / 255, g = Double(g8) / 255, b = Double(b8) / 255
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    let cb = (b - y) / 1.8556, cr = (r - y) / 1.5748
    let r2 = y + 1.402 * cr, g2 = y - 0.344136 * cb - 0.714136 * cr, b2 = y + 1.772 * cb
    func byte(_ v: Double) -> Int { Int((min(1, max(0, v)) * 255).rounded()) }
    return String(format: "0x%02X%02X%02X", byte(r2), byte(g2), byte(b2))
}

/// Converts "#rrggbb" to libavfilter's "0xRRGGBB".
public func filterColor(_ hex: String) -> String {
    guard let (r, g, b) = PipelineLoader.parseColor(hex) else { return "black" }
    return String(format: "0x%02X%02X%02X", r, g, b)
}
