import Foundation
import Yams

/// Reads a pipeline file into a `Pipeline`, reporting every problem with file:line:column.
public enum PipelineLoader {
    public static let topLevelKeys = ["version", "name", "output", "clips", "soundtrack", "transition", "retry"]
    public static let outputKeys = ["path", "size", "aspect", "height", "fps", "fit", "background", "video", "audio", "max_duration", "watermark"]
    public static let itemKindKeys = ["video", "title", "photo", "live_photo"]
    /// Keys only some kinds take.
    static let photoKeys = ["duration", "ken_burns", "use"]
    public static let editKeys = ["trim", "rotate", "flip", "crop", "mute", "volume", "look", "adjust", "fit", "speed", "loop", "text", "transition", "bounce", "stickers"]

    /// The most items one pipeline may list, and the largest pipeline file read: far beyond any
    /// movie, small enough that planning stays quick and bounded in memory.
    public static let maxItems = 50_000
    public static let maxFileBytes = 16 << 20

    /// Loads and validates the pipeline at `path`. With `checkFiles`, local sources must exist.
    public static func load(path: String, checkFiles: Bool = true) throws -> Pipeline {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        if let problem = FileChecks.sourceProblem(url.path) {
            throw PipelineError("cannot read pipeline file: \(problem)", at: nil, hint: "pass the path of a .yaml pipeline file")
        }
        if let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue, size > maxFileBytes {
            throw PipelineError("pipeline file \(path) is \(size) bytes, over the \(maxFileBytes)-byte limit", at: nil,
                                hint: "split the movie into several pipelines")
        }
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw PipelineError("cannot read pipeline file \(path)", at: nil,
                                hint: "check that the file exists and is readable")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw notUTF8(data, file: path) }
        return try parse(text: text, file: path, baseDirectory: url.deletingLastPathComponent().path, checkFiles: checkFiles)
    }

    /// Where a file stops being UTF-8: the line and column (in characters) of its first byte that
    /// is not, so an editor can go there.
    static func notUTF8(_ data: Data, file: String) -> PipelineError {
        var parser = Unicode.UTF8.ForwardParser()
        var bytes = data.makeIterator()
        var line = 1, column = 1, offset = 0
        while case .valid(let scalar) = parser.parseScalar(from: &bytes) {
            offset += scalar.count
            if scalar.count == 1 && scalar.first == 0x0A { line += 1; column = 1 } else { column += 1 }
        }
        let byte = offset < data.count ? String(format: " (byte 0x%02X)", data[data.startIndex + offset]) : ""
        return PipelineError("pipeline file is not UTF-8 text\(byte)", at: SourceLocation(file: file, line: line, column: column),
                             hint: "save it as UTF-8 (your editor's encoding setting)")
    }

    public static func parse(text: String, file: String, baseDirectory: String, checkFiles: Bool = true) throws -> Pipeline {
        let ctx = Context(file: file, base: baseDirectory, checkFiles: checkFiles)
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw ctx.yamlError(error, text: text)
        }
        guard let root else {
            throw PipelineError("the pipeline file is empty", at: SourceLocation(file: file, line: 1, column: 1),
                                hint: "start from pipelines/demo.yaml")
        }
        let top = try ctx.map(root, "the pipeline")
        let version = try top.int("version") ?? 1
        guard version == 1 else {
            throw ctx.error("unsupported pipeline version \(version)", at: top.node("version"), hint: "this Threadline reads version: 1")
        }
        // Sections that do not depend on each other are all checked, so one pass reports every
        // item's missing file or bad value instead of one error per submit.
        var problems: [PipelineError] = []
        func checked<T>(_ body: () throws -> T) throws -> T? {
            do { return try body() } catch let e as PipelineError { problems.append(e); return nil }
        }
        let name = try checked { try top.string("name") } ?? nil
        func missing(_ key: String, hint: String) -> PipelineError {
            // A misspelt key ('clip:') is the likely reason: said first, with its suggestion.
            var all = problems
            do { try top.finish(allowed: topLevelKeys) } catch let e as PipelineError { all.append(e) } catch {}
            return PipelineError.combined(all + [ctx.error("missing required key '\(key)'", at: root, hint: hint)])
        }
        guard let outputNode = top.node("output") else { throw missing("output", hint: "add output: { path: out/movie.mp4 }") }
        let output = try checked { try parseOutput(outputNode, ctx) }
        guard let clipsNode = top.node("clips") else { throw missing("clips", hint: "list the items of the movie under clips:") }
        guard case .sequence(let seq) = clipsNode else {
            throw PipelineError.combined(problems + [ctx.error("'clips' must be a list", at: clipsNode, hint: "write each clip as '- video: file.mov'")])
        }
        guard seq.count <= maxItems else {
            throw PipelineError.combined(problems + [ctx.error("'clips' lists \(seq.count) items, over the limit of \(maxItems) per pipeline",
                                                                at: clipsNode, hint: "split the movie into several pipelines")])
        }
        if seq.isEmpty { problems.append(ctx.error("'clips' is empty: a movie needs at least one item", at: clipsNode)) }
        var items: [Item] = []
        for node in seq { if let item = try checked({ try parseItem(node, ctx) }) { items.append(item) } }
        let soundtrack = try checked { try top.node("soundtrack").map { try parseSoundtrack($0, ctx) } } ?? nil
        _ = try checked { try top.finish(allowed: topLevelKeys) }
        let transition = try checked { try top.node("transition").map { try parseTransition($0, ctx) } } ?? nil
        let retryAttempts = try checked { () throws -> Int? in
            guard let r = top.node("retry") else { return nil }
            let rm = try ctx.map(r, "retry")
            try rm.finish(allowed: ["attempts"])
            guard let n = try rm.int("attempts") else { return nil }
            guard PipelineBounds.retryAttempts.contains(n) else {
                throw ctx.error("retry.attempts must be between 1 and 20, got \(n)", at: rm.node("attempts"), hint: "the default is 3")
            }
            return n
        } ?? nil
        guard problems.isEmpty, var profile = output else { throw PipelineError.combined(problems) }
        profile.soundtrack = soundtrack
        var pipeline = Pipeline(version: version, name: name ?? URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent,
                                output: profile, items: items, file: file, text: text)
        pipeline.transition = transition
        pipeline.retryAttempts = retryAttempts
        let pathNode = try ctx.map(outputNode, "output").node("path")
        pipeline.outputLocation = ctx.location(of: pathNode)
        if ctx.checkFiles, let problem = FileChecks.outputProblem(profile.path, inputs: pipeline.files.map(\.path), stateDirectory: nil) {
            throw ctx.error("output.path: \(problem)", at: pathNode, hint: "choose another path for the movie")
        }
        // The file is an MP4 (or a GIF) whatever its name says: a name that says otherwise is a
        // file players and photo apps take for something else, or for no video at all.
        let ext = (profile.path as NSString).pathExtension.lowercased()
        if !OutputProfile.extensions.contains(ext) {
            let name = (profile.path as NSString).lastPathComponent
            let stem = ext.isEmpty ? name : String(name.dropLast(ext.count + 1))
            throw ctx.error("output.path: \(ext.isEmpty ? "'\(name)' has no extension" : "'.\(ext)' is not a format Threadline writes"): the movie is an MP4 (.mp4, .m4v or .mov) or an animated GIF (.gif)",
                            at: pathNode, hint: "name it \(stem).mp4")
        }
        // Lettering longer than the frame holds even at the smallest size (shorter text is shrunk
        // to fit, with a note: `Planner.pipelineNotes`).
        var tooLong: [PipelineError] = []
        for (i, item) in items.enumerated() {
            for (what, l, mend) in EditChain.lettering(item, profile) where !l.fits {
                tooLong.append(PipelineError("\(item.label(index: i)): \(what) does not fit the \(profile.width)x\(profile.height) frame even at size \(l.size) (\(l.lines.count) lines)",
                                             at: item.location, hint: mend))
            }
        }
        if !tooLong.isEmpty { throw PipelineError.combined(tooLong) }
        return pipeline
    }

    static func parseOutput(_ node: Node, _ ctx: Context) throws -> OutputProfile {
        if case .scalar(let path) = node {
            throw ctx.error("output must be a mapping of keys to values", at: node, hint: "output: { path: \(path.string) }")
        }
        let m = try ctx.map(node, "output")
        guard let pathNode = m.node("path"), let p = pathNode.string, !p.isEmpty else {
            throw ctx.error("output.path is required", at: node, hint: "for example path: out/movie.mp4")
        }
        var profile = OutputProfile(path: ctx.resolve(p))
        if p.lowercased().hasSuffix(".gif") {
            // An animated GIF: 15 fps unless fps says otherwise; no sound.
            profile.container = "gif"
            profile.fps = Rational(15, 1)
        }
        if let size = m.node("size") {
            guard let s = size.string, let (w, h) = parseSize(s) else {
                // "1080p" names a height: both shapes of it, rather than a guess at one.
                let named = ["480p": (854, 480), "720p": (1280, 720), "1080p": (1920, 1080), "1440p": (2560, 1440), "2160p": (3840, 2160), "4k": (3840, 2160)]
                let hint = named[(size.string ?? "").lowercased()].map { "\(size.string!) is size: \($0.0)x\($0.1) (landscape) or \($0.1)x\($0.0) (portrait)" }
                throw ctx.error("output.size must be WIDTHxHEIGHT, got '\(size.string ?? "?")'", at: size, hint: hint ?? "for example size: 1280x720")
            }
            profile.width = w; profile.height = h
            if m.node("aspect") != nil {
                throw ctx.error("give either output.size or output.aspect, not both", at: m.node("aspect"))
            }
        } else if let aspectNode = m.node("aspect") {
            let aspects = ["16:9": (16, 9), "9:16": (9, 16), "1:1": (1, 1), "4:5": (4, 5)]
            guard let a = aspectNode.string, let (aw, ah) = aspects[a] else {
                throw ctx.error("unknown output.aspect '\(aspectNode.string ?? "?")'", at: aspectNode,
                                hint: "one of 16:9, 9:16, 1:1, 4:5")
            }
            // Without a height, HD on the short side: a 9:16 story is 720x1280 (it was 406x720).
            let h = try m.int("height") ?? (aw >= ah ? 720 : 720 * ah / aw)
            guard PipelineBounds.height.contains(h) else {
                throw ctx.error("output.height must be between 16 and 4320, got \(h)", at: m.node("height"))
            }
            profile.height = h
            profile.width = Int((Double(h * aw) / Double(ah) / 2).rounded()) * 2
        }
        if !PipelineBounds.width.contains(profile.width) || !PipelineBounds.height.contains(profile.height)
            || profile.width % 2 != 0 || profile.height % 2 != 0 {
            throw ctx.error("output size \(profile.width)x\(profile.height) is not possible", at: m.node("size") ?? m.node("height") ?? node,
                            hint: "width and height must be even, between 16 and 7680x4320")
        }
        if let fpsNode = m.node("fps") {
            guard let fps = parseFPS(fpsNode), PipelineBounds.fps.contains(fps.double) else {
                throw ctx.error("output.fps must be a frame rate between 1 and 240, got '\(fpsNode.string ?? "?")'", at: fpsNode,
                                hint: "for example fps: 30, or fps: 30000/1001 (numerator and denominator at most 1000000)")
            }
            profile.fps = fps
        }
        if let fit = try m.enumValue("fit", OutputProfile.Fit.self) { profile.fit = fit }
        if let bgNode = m.node("background") {
            guard let bg = bgNode.string, parseColor(bg) != nil else {
                throw ctx.error("output.background must be a colour like \"#1c1c1e\"", at: bgNode)
            }
            profile.background = bg
        }
        if let v = m.node("video") {
            let vm = try ctx.map(v, "output.video")
            // What people also call the two codecs (h265 was answered "did you mean 'h264'?").
            let aliases = ["h265": "hevc", "h.265": "hevc", "x265": "hevc", "hvc1": "hevc", "h.264": "h264", "x264": "h264", "avc": "h264", "avc1": "h264"]
            if let alias = vm.node("codec")?.string.flatMap({ aliases[$0.lowercased()] }) {
                profile.video.codec = alias
            } else if let c = try vm.choice("codec", among: VideoSettings.codecs, error: "unsupported video codec") { profile.video.codec = c }
            if let crf = try vm.int("crf") {
                guard PipelineBounds.crf.contains(crf) else { throw ctx.error("output.video.crf must be 0…51, got \(crf)", at: vm.node("crf")) }
                profile.video.crf = crf
            }
            if let p = try vm.choice("preset", among: VideoSettings.presets, error: "unknown x264 preset") { profile.video.preset = p }
            if let k = try vm.int("keyint") {
                guard PipelineBounds.keyint.contains(k) else { throw ctx.error("output.video.keyint must be 0…1000", at: vm.node("keyint")) }
                profile.video.keyint = k
            }
            try vm.finish(allowed: ["codec", "crf", "preset", "keyint"])
        }
        if let a = m.node("audio") {
            let am = try ctx.map(a, "output.audio")
            if let codecNode = am.node("codec"), codecNode.string != "aac" {
                throw ctx.error("unsupported audio codec '\(codecNode.string ?? "?")'", at: codecNode, hint: "this version encodes aac")
            }
            if let b = am.node("bitrate") {
                guard let s = b.string, let bps = parseBitrate(s), PipelineBounds.audioBitrate.contains(bps) else {
                    throw ctx.error("output.audio.bitrate must be between 32k and 512k, got '\(b.string ?? "?")'", at: b,
                                    hint: "for example bitrate: 160k")
                }
                profile.audio.bitrate = bps
            }
            try am.finish(allowed: ["codec", "bitrate"])
        }
        if let wn = m.node("watermark") {
            let wm = try ctx.map(wn, "output.watermark")
            guard let imageNode = wm.node("image"), let image = imageNode.string else {
                throw ctx.error("output.watermark needs an image", at: wn, hint: "watermark: { image: assets/logo.png, position: bottom-left }")
            }
            let (path, sha) = try ctx.hashedFile(image, at: imageNode, what: "watermark image")
            var w = Watermark(image: path, sha256: sha)
            if let c = try wm.enumValue("position", Watermark.Corner.self) { w.position = c }
            func fraction(_ key: String, _ range: ClosedRange<Double>) throws -> Double? {
                guard let v = try wm.double(key) else { return nil }
                guard range.contains(v) else { throw ctx.error("watermark \(key) must be between \(range.lowerBound) and \(range.upperBound), got \(v)", at: wm.node(key)) }
                return v
            }
            w.opacity = try fraction("opacity", PipelineBounds.watermarkOpacity) ?? w.opacity
            w.size = try fraction("size", PipelineBounds.watermarkSize) ?? w.size
            w.margin = try fraction("margin", PipelineBounds.watermarkMargin) ?? w.margin
            try wm.finish(allowed: ["image", "position", "opacity", "size", "margin"])
            profile.watermark = w
        }
        if let md = m.node("max_duration") {
            let mm = try ctx.map(md, "output.max_duration")
            guard let seconds = try mm.time("seconds"), seconds > 0, seconds <= 86_400 else {
                throw ctx.error("output.max_duration needs seconds between 0 and 86400", at: md, hint: "max_duration: { seconds: 30, policy: fail }")
            }
            let policy = try mm.enumValue("policy", MaxDuration.Policy.self) ?? .fail
            try mm.finish(allowed: ["seconds", "policy"])
            profile.maxDuration = MaxDuration(seconds: seconds, policy: policy, location: ctx.location(of: md))
        }
        try m.finish(allowed: outputKeys)
        return profile
    }

    static func parseItem(_ node: Node, _ ctx: Context) throws -> Item {
        // `- video media/a.mov`: one word, not a key and its value.
        if case .scalar(let scalar) = node, let kind = itemKindKeys.first(where: { scalar.string.hasPrefix($0 + " ") }) {
            throw ctx.error("a clip must be a mapping of keys to values", at: node,
                            hint: "put a colon after \(kind): - \(kind): \(scalar.string.dropFirst(kind.count + 1))")
        }
        let m = try ctx.map(node, "a clip")
        let location = ctx.location(of: node)
        let kindKeys = m.keys.filter { itemKindKeys.contains($0) }
        guard kindKeys.count == 1 else {
            if kindKeys.isEmpty {
                let guess = m.keys.compactMap { suggestion(for: $0, among: itemKindKeys) }.first
                throw ctx.error("a clip needs what it shows: video:, photo:, live_photo: or title:", at: node,
                                hint: guess.map { "did you mean '\($0)'?" } ?? "for example '- video: media/IMG_0001.MOV'")
            }
            throw ctx.error("a clip has one kind, found \(kindKeys.joined(separator: " and "))", at: node)
        }
        let kindKey = kindKeys[0]
        let kindNode = m.node(kindKey)!
        let kind: Item.Kind
        if kindKey == "title" {
            kind = .title(try parseTitle(kindNode, ctx))
            if m.node("trim") != nil { throw ctx.error("trim applies to video items, not titles", at: m.keyNode("trim"), hint: "set the title's duration instead") }
        } else if kindKey == "photo" {
            var duration = 3.0
            if let d = try m.time("duration") {
                guard PipelineBounds.itemSeconds.contains(d) else { throw ctx.error("photo duration must be more than 0 and at most 600 seconds, got \(d)", at: m.node("duration")) }
                duration = d
            }
            if m.node("trim") != nil { throw ctx.error("trim applies to video items, not photos", at: m.keyNode("trim"), hint: "set the photo's duration instead") }
            var kenBurns: KenBurns?
            if let kb = m.node("ken_burns") {
                let km = try ctx.map(kb, "ken_burns")
                func framing(_ key: String) throws -> KenBurns.Framing {
                    guard let n = km.node(key) else { return KenBurns.Framing() }
                    let fm = try ctx.map(n, "ken_burns.\(key)")
                    var f = KenBurns.Framing()
                    if let z = try fm.double("zoom") {
                        guard PipelineBounds.zoom.contains(z) else { throw ctx.error("ken_burns zoom must be between 1 and 4, got \(z)", at: fm.node("zoom")) }
                        f.zoom = z
                    }
                    if let c = fm.node("center") {
                        guard case .sequence(let seq) = c, seq.count == 2, let x = seq[0].float, let y = seq[1].float,
                              PipelineBounds.fraction.contains(x), PipelineBounds.fraction.contains(y) else {
                            throw ctx.error("ken_burns center must be [x, y] with fractions 0…1", at: c, hint: "center: [0.6, 0.4]")
                        }
                        f.x = x; f.y = y
                    }
                    try fm.finish(allowed: ["zoom", "center"])
                    return f
                }
                kenBurns = KenBurns(from: try framing("from"), to: try framing("to"))
                try km.finish(allowed: ["from", "to"])
            }
            kind = .photo(source: try ctx.source(kindNode), duration: duration, kenBurns: kenBurns)
        } else if kindKey == "live_photo" {
            let use = try m.enumValue("use", LivePhotoUse.self) ?? .motion
            // Its motion plays its own length (trimmed as a video is); its still shows for a duration.
            // What applies to the other use was dropped without a word.
            if use == .still, let k = ["trim", "speed"].first(where: { m.node($0) != nil }) {
                throw ctx.error("\(k) applies to a live photo's motion, not to its still (use: still)", at: m.keyNode(k),
                                hint: "set its duration instead, or use: motion")
            }
            if use == .still, try m.bool("bounce") == true {
                throw ctx.error("bounce applies to a live photo's motion, not to its still (use: still)", at: m.keyNode("bounce"), hint: "use: bounce")
            }
            if use != .still, m.node("duration") != nil {
                throw ctx.error("duration applies to a live photo shown as its still (use: still); its motion plays its own length",
                                at: m.keyNode("duration"), hint: "trim its motion instead: trim: { start: 0.5, end: 2 }")
            }
            let duration = try m.time("duration") ?? 3
            guard PipelineBounds.itemSeconds.contains(duration) else { throw ctx.error("duration must be more than 0 and at most 600 seconds", at: m.node("duration")) }
            kind = .livePhoto(source: try ctx.source(kindNode), use: use, duration: duration)
        } else {
            kind = .video(source: try ctx.source(kindNode), trim: nil)
        }
        if kindKey != "live_photo", m.node("use") != nil {
            throw ctx.error("use applies to live_photo items", at: m.keyNode("use"))
        }
        if kindKey != "photo" && !(kindKey == "live_photo" && m.node("ken_burns") == nil),
           let k = ["duration", "ken_burns"].first(where: { m.node($0) != nil }) {
            if k == "ken_burns" { throw ctx.error("ken_burns applies to photo items", at: m.keyNode(k)) }
            throw ctx.error("duration applies to photo items", at: m.keyNode("duration"),
                            hint: kindKey == "title" ? "a title's duration goes inside it: title: { text: …, duration: 2 }" : "trim a video instead")
        }
        var trim: Trim?
        if let t = m.node("trim") {
            if case .scalar = t {
                throw ctx.error("trim must be a mapping of keys to values", at: t, hint: "trim: { start: 1, end: 3 } (seconds; either may be left out)")
            }
            let tm = try ctx.map(t, "trim")
            let start = try tm.itemTime("start", of: "trim.") ?? 0
            let end = try tm.itemTime("end", of: "trim.")
            if let end, end <= start {
                throw ctx.error("trim.end (\(end)) must be after trim.start (\(start))", at: tm.node("end"))
            }
            try tm.finish(allowed: ["start", "end"])
            trim = Trim(start: start, end: end)
        }
        var edits = Edits()
        if let r = m.node("rotate") {
            guard let deg = r.int, deg % 90 == 0 else {
                throw ctx.error("rotate must be 0, 90, 180 or 270, got '\(r.string ?? "?")'", at: r)
            }
            edits.rotate = ((deg % 360) + 360) % 360
        }
        edits.flip = try m.enumValue("flip", Edits.Flip.self)
        if let c = m.node("crop") {
            let cm = try ctx.map(c, "crop")
            let x = try cm.double("x") ?? 0, y = try cm.double("y") ?? 0
            let w = try cm.double("width") ?? (1 - x), h = try cm.double("height") ?? (1 - y)
            try cm.finish(allowed: ["x", "y", "width", "height"])
            guard x >= 0, y >= 0, w > 0, h > 0, x + w <= 1.000001, y + h <= 1.000001 else {
                throw ctx.error("crop must be a rectangle inside the picture (fractions 0…1, x+width ≤ 1, y+height ≤ 1)", at: c)
            }
            edits.crop = CropRect(x: x, y: y, width: w, height: h)
        }
        edits.mute = try m.bool("mute") ?? false
        if let v = try m.double("volume") {
            guard PipelineBounds.volume.contains(v) else { throw ctx.error("volume must be between 0 and 10, got \(v)", at: m.node("volume")) }
            edits.volume = v
        }
        if let s = try m.double("speed") {
            guard PipelineBounds.speed.contains(s) else {
                throw ctx.error("speed must be between 0.25 and 4, got \(s)", at: m.node("speed"), hint: "2 plays twice as fast, 0.5 in slow motion")
            }
            if kindKey != "video" && kindKey != "live_photo" { throw ctx.error("speed applies to video items", at: m.keyNode("speed"), hint: "set the item's duration instead") }
            edits.speed = s
        }
        if let n = try m.int("loop") {
            guard PipelineBounds.loop.contains(n) else { throw ctx.error("loop must be 1…20 (how many times the item plays), got \(n)", at: m.node("loop")) }
            edits.loop = n
        }
        if let t = m.node("text") { edits.text = try parseText(t, ctx) }
        if let st = m.node("stickers") { edits.stickers = try parseStickers(st, ctx) }
        if let b = try m.bool("bounce") {
            if b && kindKey != "video" && kindKey != "live_photo" { throw ctx.error("bounce applies to video items", at: m.keyNode("bounce")) }
            edits.bounce = b
        }
        let transition = try m.node("transition").map { try parseTransition($0, ctx) }
        edits.look = try m.enumValue("look", Look.self)
        edits.fit = try m.enumValue("fit", OutputProfile.Fit.self)
        if let a = m.node("adjust") {
            let am = try ctx.map(a, "adjust")
            var adjust = Adjust()
            func value(_ key: String, _ range: ClosedRange<Double>, _ neutral: Double) throws -> Double {
                guard let v = try am.double(key) else { return neutral }
                guard range.contains(v) else {
                    throw ctx.error("adjust.\(key) must be between \(range.lowerBound) and \(range.upperBound), got \(v)", at: am.node(key),
                                    hint: "\(neutral) leaves the picture unchanged")
                }
                return v
            }
            adjust.brightness = try value("brightness", PipelineBounds.brightness, 0)
            adjust.contrast = try value("contrast", PipelineBounds.contrast, 1)
            adjust.saturation = try value("saturation", PipelineBounds.saturation, 1)
            adjust.gamma = try value("gamma", PipelineBounds.gamma, 1)
            adjust.warmth = try value("warmth", PipelineBounds.warmth, 0)
            try am.finish(allowed: ["brightness", "contrast", "saturation", "gamma", "warmth"])
            edits.adjust = adjust
        }
        try m.finish(allowed: itemKindKeys + editKeys + photoKeys)
        var item = Item(kind: kind, edits: edits, location: location)
        switch kind {
        case .video(let source, _): item.kind = .video(source: source, trim: trim)
        case .livePhoto(let source, let use, let duration, _): item.kind = .livePhoto(source: source, use: use, duration: duration, trim: trim)
        default: break
        }
        item.transition = transition
        return item
    }

    /// `title: "Text"` or `title: { text, duration, background, color, size, font }`.
    static func parseTitle(_ node: Node, _ ctx: Context) throws -> Title {
        if case .scalar = node {
            guard let text = node.string, !text.isEmpty else { throw ctx.error("a title needs text", at: node) }
            let title = Title(text: text)
            try checkFont(title.font, at: node, ctx)
            return title
        }
        let m = try ctx.map(node, "title")
        guard let text = try m.string("text"), !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw ctx.error("a title needs text", at: node, hint: "title: { text: \"June 2026\", duration: 2 }")
        }
        var title = Title(text: text)
        if let d = try m.time("duration") {
            guard PipelineBounds.itemSeconds.contains(d) else {
                throw ctx.error("title duration must be more than 0 and at most 600 seconds, got \(d)", at: m.node("duration"))
            }
            title.duration = d
        }
        for key in ["background", "color"] {
            if let c = m.node(key) {
                guard let s = c.string, parseColor(s) != nil else { throw ctx.error("title \(key) must be a colour like \"#1c1c1e\"", at: c) }
                if key == "background" { title.background = s } else { title.color = s }
            }
        }
        if let size = try m.int("size") {
            guard PipelineBounds.textSize.contains(size) else { throw ctx.error("title size must be 8…1000 pixels, got \(size)", at: m.node("size")) }
            title.size = size
        }
        if let f = m.node("font"), let path = f.string {
            title.font = ctx.resolve(path)
            try checkFont(title.font, at: f, ctx)
        } else {
            try checkFont(title.font, at: node, ctx)
        }
        try m.finish(allowed: ["text", "duration", "background", "color", "size", "font"])
        return title
    }

    /// `transition: { type: fade | dissolve | none, duration: 0.5 }` (or just `transition: none`).
    static func parseTransition(_ node: Node, _ ctx: Context) throws -> Transition {
        if case .scalar = node {
            guard let s = node.string, let kind = Transition.Kind(rawValue: s) else {
                let all = Transition.Kind.allCases.map(\.rawValue)
                throw ctx.error("unknown transition '\(node.string ?? "?")'", at: node,
                                hint: node.string.flatMap { suggestion(for: $0, among: all) }.map { "did you mean '\($0)'?" } ?? "one of \(all.joined(separator: ", "))")
            }
            return Transition(kind: kind, location: ctx.location(of: node))
        }
        let m = try ctx.map(node, "transition")
        let kind = try m.enumValue("type", Transition.Kind.self) ?? .dissolve
        var t = Transition(kind: kind, location: ctx.location(of: node))
        if let d = try m.time("duration") {
            guard PipelineBounds.transition.contains(d) else { throw ctx.error("transition duration must be 0…10 seconds, got \(d)", at: m.node("duration")) }
            t.duration = d
        }
        try m.finish(allowed: ["type", "duration"])
        return t
    }

    /// `soundtrack: { source, from, to, volume, clip_audio, fade_in, fade_out, loop }`.
    static func parseSoundtrack(_ node: Node, _ ctx: Context) throws -> Soundtrack {
        let m = try ctx.map(node, "soundtrack")
        guard let sourceNode = m.node("source"), let source = sourceNode.string else {
            throw ctx.error("soundtrack needs a source", at: node, hint: "soundtrack: { source: music/song.mp3, volume: 0.8 }")
        }
        let (path, sha) = try ctx.hashedFile(source, at: sourceNode, what: "soundtrack")
        var s = Soundtrack(source: path, sha256: sha)
        s.location = ctx.location(of: sourceNode)
        func value(_ key: String, _ range: ClosedRange<Double>, time: Bool = false) throws -> Double? {
            guard let v = time ? try m.time(key) : try m.double(key) else { return nil }
            guard range.contains(v) else { throw ctx.error("soundtrack \(key) must be between \(range.lowerBound) and \(range.upperBound), got \(v)", at: m.node(key)) }
            return v
        }
        s.from = try value("from", PipelineBounds.soundtrackTime, time: true) ?? 0
        s.to = try value("to", PipelineBounds.soundtrackTime, time: true)
        if let to = s.to, to <= s.from { throw ctx.error("soundtrack to (\(to)) must be after from (\(s.from))", at: m.node("to")) }
        s.volume = try value("volume", PipelineBounds.soundtrackVolume) ?? 1
        s.clipAudio = try value("clip_audio", PipelineBounds.soundtrackVolume) ?? 1
        s.fadeIn = try value("fade_in", PipelineBounds.soundtrackFade, time: true) ?? 0
        s.fadeOut = try value("fade_out", PipelineBounds.soundtrackFade, time: true) ?? 0
        s.loop = try m.bool("loop") ?? true
        try m.finish(allowed: ["source", "from", "to", "volume", "clip_audio", "fade_in", "fade_out", "loop"])
        return s
    }

    /// `text: "Words"` or `text: { value, position, size, color, start, end, font }`.
    static func parseText(_ node: Node, _ ctx: Context) throws -> TextOverlay {
        if case .scalar = node {
            guard let v = node.string, !v.isEmpty else { throw ctx.error("text needs a value", at: node) }
            let t = TextOverlay(value: v)
            try checkFont(t.font, at: node, ctx)
            return t
        }
        let m = try ctx.map(node, "text")
        guard let v = try m.string("value"), !v.isEmpty else {
            throw ctx.error("text needs a value", at: node, hint: "text: { value: \"June 3, 2026\", position: bottom }")
        }
        var t = TextOverlay(value: v)
        if let p = try m.enumValue("position", TextOverlay.Position.self) { t.position = p }
        if let size = try m.int("size") {
            guard PipelineBounds.textSize.contains(size) else { throw ctx.error("text size must be 8…1000 pixels, got \(size)", at: m.node("size")) }
            t.size = size
        }
        if let c = m.node("color") {
            guard let s = c.string, parseColor(s) != nil else { throw ctx.error("text color must be a colour like \"#ffffff\"", at: c) }
            t.color = s
        }
        t.start = try m.itemTime("start", of: "text ")
        t.end = try m.itemTime("end", of: "text ")
        if let s = t.start, let e = t.end, e <= s {
            throw ctx.error("text end (\(e)) must be after its start (\(s))", at: m.node("end"))
        }
        if let f = m.node("font"), let path = f.string { t.font = ctx.resolve(path); try checkFont(t.font, at: f, ctx) }
        else { try checkFont(t.font, at: node, ctx) }
        try m.finish(allowed: ["value", "position", "size", "color", "start", "end", "font"])
        return t
    }

    /// `stickers: [ { image, x, y, size, rotate, start, end } ]`.
    static func parseStickers(_ node: Node, _ ctx: Context) throws -> [Sticker] {
        guard case .sequence(let seq) = node else {
            throw ctx.error("stickers must be a list", at: node, hint: "stickers: [ { image: star.png, x: 0.25, y: 0.25, size: 0.1 } ]")
        }
        guard seq.count <= PipelineBounds.stickers else { throw ctx.error("at most \(PipelineBounds.stickers) stickers on one item, got \(seq.count)", at: node) }
        return try seq.map { n in
            let m = try ctx.map(n, "a sticker")
            guard let imageNode = m.node("image"), let image = imageNode.string else {
                throw ctx.error("a sticker needs an image", at: n, hint: "{ image: star.png, x: 0.25, y: 0.25, size: 0.1 }")
            }
            let (path, sha) = try ctx.hashedFile(image, at: imageNode, what: "sticker image")
            var s = Sticker(image: path, sha256: sha)
            func value(_ key: String, _ range: ClosedRange<Double>, _ meaning: String) throws -> Double? {
                guard let v = try m.double(key) else { return nil }
                guard range.contains(v) else {
                    throw ctx.error("sticker \(key) must be between \(range.lowerBound) and \(range.upperBound), got \(v)", at: m.node(key), hint: meaning)
                }
                return v
            }
            s.x = try value("x", PipelineBounds.fraction, "the sticker's centre, as a fraction of the frame's width (0 left, 1 right)") ?? s.x
            s.y = try value("y", PipelineBounds.fraction, "the sticker's centre, as a fraction of the frame's height (0 top, 1 bottom)") ?? s.y
            s.size = try value("size", PipelineBounds.stickerSize, "the sticker's width as a fraction of the frame's width") ?? s.size
            s.rotate = try value("rotate", PipelineBounds.stickerRotate, "degrees clockwise") ?? s.rotate
            s.start = try m.itemTime("start", of: "sticker ")
            s.end = try m.itemTime("end", of: "sticker ")
            if let start = s.start, let end = s.end, end <= start {
                throw ctx.error("sticker end (\(end)) must be after its start (\(start))", at: m.node("end"))
            }
            try m.finish(allowed: ["image", "x", "y", "size", "rotate", "start", "end"])
            return s
        }
    }

    static func checkFont(_ path: String, at node: Node, _ ctx: Context) throws {
        guard ctx.checkFiles, let problem = FileChecks.sourceProblem(path) else { return }
        if !problem.hasPrefix("file not found") { throw ctx.error("font: \(problem)", at: node) }
        throw ctx.error("font not found: \(path)", at: node,
                        hint: path == Title.defaultFont ? "install fonts-dejavu-core (scripts/setup does), or give font: PATH" : "give the path of a .ttf or .otf file")
    }

    // MARK: value syntax

    public static func parseSize(_ s: String) -> (Int, Int)? {
        let parts = s.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]) else { return nil }
        return (w, h)
    }

    static func parseFPS(_ node: Node) -> Rational? {
        guard let s = node.string else { return nil }
        if s.contains("/") {
            let p = s.split(separator: "/")
            // Bounded terms keep every frame and sample count the planner derives from them inside Int
            // (frames × 48000 × den); 240000/1001 is the largest rate anyone writes as a fraction.
            guard p.count == 2, let n = Int(p[0]), let d = Int(p[1]), PipelineBounds.fpsTerms.contains(n), PipelineBounds.fpsTerms.contains(d) else { return nil }
            return Rational(n, d)
        }
        // Range first: a huge finite value would overflow the integer conversion.
        guard let v = Double(s), v.isFinite, v > 0, v <= 1000 else { return nil }
        return Rational.frameRate(v)
    }

    public static func parseBitrate(_ s: String) -> Int? {
        let t = s.lowercased()
        let (number, scale): (Substring, Double) = t.hasSuffix("k") ? (t.dropLast(), 1000) : t.hasSuffix("m") ? (t.dropLast(), 1_000_000) : (Substring(t), 1)
        guard let v = Double(number), v.isFinite, v >= 0, v * scale < 1e12 else { return nil }
        return Int(v * scale)
    }

    /// "#rrggbb" → (r, g, b).
    public static func parseColor(_ s: String) -> (Int, Int, Int)? {
        guard s.hasPrefix("#"), s.count == 7, let v = Int(s.dropFirst(), radix: 16) else { return nil }
        return ((v >> 16) & 255, (v >> 8) & 255, v & 255)
    }
}

// MARK: - Reading YAML nodes with locations

struct Context {
    let file: String
    let base: String
    let checkFiles: Bool

    func location(of node: Node?) -> SourceLocation? {
        guard let mark = node?.mark else { return nil }
        return SourceLocation(file: file, line: mark.line, column: mark.column)
    }

    func error(_ message: String, at node: Node?, hint: String? = nil) -> PipelineError {
        PipelineError(message, at: location(of: node) ?? SourceLocation(file: file, line: 1, column: 1), hint: hint)
    }

    func yamlError(_ error: YamlError, text: String) -> PipelineError {
        switch error {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _), let .composer(context, problem, mark, _):
            let detail = context.map { "\($0.text) " } ?? ""
            // A tab where YAML wants spaces (an editor's indent) reads as a scanner's riddle.
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            let line = mark.line >= 1 && mark.line <= lines.count ? lines[mark.line - 1] : ""
            let tab = line.prefix { $0 == " " || $0 == "\t" }.contains("\t")
            return PipelineError("invalid YAML: \(detail)\(problem)", at: SourceLocation(file: file, line: mark.line, column: mark.column),
                                 hint: tab ? "line \(mark.line) is indented with a tab: YAML indents with spaces only"
                                           : "check indentation and quoting near this place")
        case let .duplicatedKeysInMapping(duplicates, context):
            return PipelineError("duplicate key \(duplicates.joined(separator: ", "))",
                                 at: SourceLocation(file: file, line: context.mark.line, column: context.mark.column))
        default:
            return PipelineError("invalid YAML: \(error)", at: SourceLocation(file: file, line: 1, column: 1))
        }
    }

    func map(_ node: Node, _ what: String) throws -> MapReader {
        guard case .mapping(let mapping) = node else {
            throw error("\(what) must be a mapping of keys to values", at: node)
        }
        return MapReader(mapping: mapping, node: node, ctx: self)
    }

    func resolve(_ path: String) -> String {
        if path.hasPrefix("http://") || path.hasPrefix("https://") { return path }
        var p = path
        if p.hasPrefix("file://") { p = String(p.dropFirst(7)) }
        if p.hasPrefix("~/") { p = Home.directory + p.dropFirst(1) }
        let url = p.hasPrefix("/") ? URL(fileURLWithPath: p) : URL(fileURLWithPath: base).appendingPathComponent(p)
        return FileChecks.spelledOnDisk(url.standardizedFileURL.path)
    }

    /// A local file the movie depends on (watermark, soundtrack): resolved, checked readable and
    /// hashed, so a changed file changes the keys of what it went into.
    func hashedFile(_ value: String, at node: Node, what: String) throws -> (path: String, sha256: String) {
        let path = resolve(value)
        guard checkFiles else { return (path, "") }
        if let problem = FileChecks.sourceProblem(path), !problem.hasPrefix("file not found") {
            throw error("\(what): \(problem)", at: node)
        }
        guard FileManager.default.isReadableFile(atPath: path), let sha = try? SHA256Hasher.hex(fileAt: path) else {
            throw error("\(what) not found: \(path)", at: node, hint: FileChecks.notFoundHint(base: base, path: path))
        }
        return (path, sha)
    }

    func source(_ node: Node) throws -> SourceRef {
        guard case .scalar = node, let s = node.string, !s.isEmpty else {
            throw error("a source must be a file path or an http(s) URL", at: node)
        }
        let resolved = resolve(s)
        let ref = SourceRef(resolved)
        if checkFiles && !ref.isRemote {
            if let problem = FileChecks.sourceProblem(resolved) {
                throw error(problem, at: node, hint: FileChecks.sourceHint(problem, base: base, path: resolved))
            }
        }
        return ref
    }
}

struct MapReader {
    let mapping: Node.Mapping
    let node: Node
    let ctx: Context

    var keys: [String] { mapping.compactMap { $0.key.string } }

    func node(_ key: String) -> Node? {
        for (k, v) in mapping where k.string == key { return v }
        return nil
    }
    func keyNode(_ key: String) -> Node? {
        for (k, _) in mapping where k.string == key { return k }
        return nil
    }

    /// Rejects keys outside `allowed`, suggesting the nearest allowed key.
    func finish(allowed: [String]) throws {
        for (k, _) in mapping {
            guard let key = k.string else { throw ctx.error("keys must be plain names", at: k) }
            if !allowed.contains(key) {
                let hint = suggestion(for: key, among: allowed).map { "did you mean '\($0)'?" }
                    ?? "allowed here: \(allowed.joined(separator: ", "))"
                throw ctx.error("unknown key '\(key)'", at: k, hint: hint)
            }
        }
    }

    private func scalar(_ key: String, _ expected: String) throws -> Node? {
        guard let v = node(key) else { return nil }
        guard case .scalar = v else { throw ctx.error("'\(key)' must be \(expected)", at: v) }
        if v.null != nil { return nil }
        return v
    }

    func string(_ key: String) throws -> String? { try scalar(key, "text")?.string }

    func int(_ key: String) throws -> Int? {
        guard let v = try scalar(key, "a whole number") else { return nil }
        guard let i = v.int else { throw ctx.error("'\(key)' must be a whole number, got '\(v.string ?? "?")'", at: v) }
        return i
    }

    func double(_ key: String) throws -> Double? {
        guard let v = try scalar(key, "a number") else { return nil }
        guard let d = v.float, d.isFinite else { throw ctx.error("'\(key)' must be a number, got '\(v.string ?? "?")'", at: v) }
        return d
    }

    func bool(_ key: String) throws -> Bool? {
        guard let v = try scalar(key, "true or false") else { return nil }
        guard let b = v.bool else { throw ctx.error("'\(key)' must be true or false, got '\(v.string ?? "?")'", at: v) }
        return b
    }

    func time(_ key: String) throws -> Double? {
        guard let v = try scalar(key, "a time") else { return nil }
        guard let s = v.string, let t = parseTime(s) else {
            throw ctx.error("'\(key)' must be a time (2.5, \"2.5s\" or \"00:00:02.500\"), got '\(v.string ?? "?")'", at: v)
        }
        return t
    }

    /// A time into its item (a trim's, a text's or a sticker's start or end), within
    /// `PipelineBounds.itemTime`; `what` starts the error ("trim.", "text ").
    func itemTime(_ key: String, of what: String) throws -> Double? {
        guard let t = try time(key) else { return nil }
        guard t >= 0 else { throw ctx.error("\(what)\(key) must not be negative, got \(t)", at: node(key)) }
        guard PipelineBounds.itemTime.contains(t) else {
            throw ctx.error("\(what)\(key) must be at most \(Int(PipelineBounds.itemTime.upperBound)) seconds into its item, got \(t)", at: node(key))
        }
        return t
    }

    /// A name from `allowed`; anything else is `error 'value'` with a did-you-mean or the list.
    func choice(_ key: String, among allowed: [String], error message: String) throws -> String? {
        guard let v = try scalar(key, "a name") else { return nil }
        guard let s = v.string, allowed.contains(s) else {
            let hint = v.string.flatMap { suggestion(for: $0, among: allowed) }.map { "did you mean '\($0)'?" }
                ?? "one of \(allowed.joined(separator: ", "))"
            throw ctx.error("\(message) '\(v.string ?? "?")'", at: v, hint: hint)
        }
        return s
    }

    func enumValue<E: RawRepresentable & CaseIterable>(_ key: String, _ type: E.Type) throws -> E? where E.RawValue == String {
        try choice(key, among: E.allCases.map(\.rawValue), error: "unknown \(key)").flatMap(E.init(rawValue:))
    }
}
