import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport

struct PhotoEntry: Sendable, CustomTestStringConvertible {
    var path: String
    var orientation: Int
    var testDescription: String { "\(path) (EXIF \(orientation))" }
    static let all: [PhotoEntry] = {
        guard let dir = sharedMedia, let data = FileManager.default.contents(atPath: dir + "/manifest.json"),
              let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { return [] }
        return list.filter { ($0["kind"] as? String) == "image" && ($0["broken"] as? Bool) != true && ($0["vcodec"] as? String) != "hevc (HEIF image items)" }
            .map { PhotoEntry(path: $0["path"] as! String, orientation: $0["exif_orientation"] as? Int ?? 1) }
    }()
    /// The EXIF transform to upright, as ffmpeg filters (orientation 0 is invalid: shown as stored).
    var reference: String {
        switch orientation {
        case 2: return "hflip"
        case 3: return "hflip,vflip"
        case 4: return "vflip"
        case 5: return "transpose=cclock_flip"
        case 6: return "transpose=clock"
        case 7: return "transpose=clock_flip"
        case 8: return "transpose=cclock"
        default: return "null"
        }
    }
}

@Suite(.enabled(if: sharedMedia != nil, "../shared/media is absent: photo corpus tests skipped"))
struct PhotoTests {
    @Test(arguments: PhotoEntry.all)
    func photosRenderUprightPerTheirEXIFOrientation(_ entry: PhotoEntry) throws {
        let dir = temporaryDirectory("photo")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let src = sharedMedia! + "/" + entry.path
        let profile = OutputProfile(path: "", width: 1280, height: 720, fps: Rational(30, 1), fit: .letterbox)
        let pipeline = Pipeline(name: "p", output: profile, items: [Item(kind: .photo(source: SourceRef(src), duration: 1, kenBurns: nil))])
        let t = try Planner.timeline(for: pipeline, facts: [src: try Probe.facts(path: src)])
        #expect(t[0].frameCount == 30)
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: src, frameCount: t[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: 30, sampleCount: t[0].sampleCount, label: "p")],
                           profile: profile, to: dir + "/out.mp4")
        let p = try ffprobe(dir + "/out.mp4", countFrames: true)
        #expect(p.frames == 30 && p.width == 1280 && p.audioCodec == "aac")
        try extractFrame(dir + "/out.mp4", at: 0, to: dir + "/ours.png", filter: "select='eq(n\\,15)'", seek: false)
        let fit = "scale=1280:720:force_original_aspect_ratio=decrease,pad=1280:720:(ow-iw)/2:(oh-ih)/2,format=yuv420p"
        try extractFrame(src, at: 0, to: dir + "/ref.png", filter: entry.reference + "," + fit, seek: false, inputOptions: ["-noautorotate"])
        try extractFrame(src, at: 0, to: dir + "/stored.png", filter: fit, seek: false, inputOptions: ["-noautorotate"])
        let score = try ssim(dir + "/ours.png", dir + "/ref.png")
        let stored = try ssim(dir + "/ours.png", dir + "/stored.png")
        print("photo \(entry.path) EXIF \(entry.orientation): ssim \(score) (as stored \(stored))")
        #expect(score >= 0.9, "SSIM \(score)")
        if entry.orientation > 1 { #expect(stored < score - 0.05, "the picture was left as stored") }
    }
}

@Suite struct KenBurnsTests {
    /// Horizontal shift between consecutive frames (output pixels), from the cross-correlation of
    /// column-mean profiles with a parabolic sub-pixel peak.
    static func shifts(_ video: String, width: Int, height: Int) throws -> [Double] {
        let dir = temporaryDirectory("kb")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-i", video, "-f", "rawvideo", "-pix_fmt", "gray", dir + "/all.gray"])
        guard r.status == 0, let data = FileManager.default.contents(atPath: dir + "/all.gray") else { throw GenerateError(message: r.err) }
        let frameSize = width * height
        let frames = data.count / frameSize
        var profiles: [[Double]] = []
        data.withUnsafeBytes { (p: UnsafeRawBufferPointer) in
            for f in 0..<frames {
                var col = [Double](repeating: 0, count: width)
                for y in stride(from: height / 4, to: 3 * height / 4, by: 1) {
                    let row = f * frameSize + y * width
                    for x in 0..<width { col[x] += Double(p[row + x]) }
                }
                let mean = col.reduce(0, +) / Double(width)
                profiles.append(col.map { $0 - mean })
            }
        }
        var out: [Double] = []
        for f in 1..<profiles.count {
            let a = profiles[f - 1], b = profiles[f]
            var scores: [Double] = []
            for s in -12...12 {
                var sum = 0.0
                for x in 40..<(width - 40) { sum += a[x] * b[x - s] }
                scores.append(sum)
            }
            let k = scores.indices.max { scores[$0] < scores[$1] }!
            guard k > 0 && k < scores.count - 1 else { out.append(Double(k - 12)); continue }
            let (l, c, r2) = (scores[k - 1], scores[k], scores[k + 1])
            let delta = 0.5 * (l - r2) / (l - 2 * c + r2)
            out.append(Double(k - 12) + delta)
        }
        return out
    }

    @Test func aPanMovesAtASteadySpeed() throws {
        let dir = temporaryDirectory("kenburns")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1600x1200:rate=1", "-frames:v", "1", dir + "/photo.png"])
        #expect(r.status == 0)
        let src = dir + "/photo.png"
        let profile = OutputProfile(path: "", width: 640, height: 360, fps: Rational(30, 1))
        // The window (1/1.6 of the frame-filling view) stays inside the picture all the way.
        let kb = KenBurns(from: .init(zoom: 1.6, x: 0.35, y: 0.5), to: .init(zoom: 1.6, x: 0.65, y: 0.5))
        let pipeline = Pipeline(name: "kb", output: profile, items: [Item(kind: .photo(source: SourceRef(src), duration: 2, kenBurns: kb))])
        let t = try Planner.timeline(for: pipeline, facts: [src: try Probe.facts(path: src)])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: src, frameCount: t[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: 60, sampleCount: t[0].sampleCount, label: "kb")],
                           profile: profile, to: dir + "/out.mp4")
        let s = try Self.shifts(dir + "/out.mp4", width: 640, height: 360)
        let mean = s.reduce(0, +) / Double(s.count)
        let sd = (s.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(s.count)).squareRoot()
        print("ken burns shifts:", s.map { String(format: "%.2f", $0) }.joined(separator: " "))
        print(String(format: "ken burns: mean shift %.3f px/frame, sd %.3f px (min %.3f, max %.3f)", mean, sd, s.min()!, s.max()!))
        // The centre moves 0.3 of the picture's width over 59 frames; the window is 1/1.6 of it:
        // 0.3 × 1.6 × 640 / 59 ≈ 5.21 output px per frame.
        #expect(abs(abs(mean) - 5.21) < 0.3, "mean shift \(mean)")
        #expect(sd < 0.15, "jittery: sd \(sd)")
    }
}

@Suite(.enabled(if: sharedMedia != nil, "../shared/media is absent: HEIC test skipped"))
struct HeicTests {
    @Test func anIPhoneHEICRendersUprightAndAJPEGNamedHEICIsStillAJPEG() throws {
        let dir = temporaryDirectory("heic")
        let src = sharedMedia! + "/photoprism/iphone_7.heic"
        let facts = try Probe.facts(path: src)
        #expect(facts.isStill && facts.width == 4032 && facts.height == 3024)
        let profile = OutputProfile(path: "", width: 640, height: 360, fps: Rational(30, 1), fit: .letterbox)
        let pipeline = Pipeline(name: "h", output: profile, items: [Item(kind: .photo(source: SourceRef(src), duration: 1, kenBurns: nil))])
        let t = try Planner.timeline(for: pipeline, facts: [src: facts])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: src, frameCount: t[0].frameCount)
        _ = try SegmentRenderer.render(spec, to: dir + "/seg.mov")
        _ = try Concat.run([ConcatInput(path: dir + "/seg.mov", frameCount: 30, sampleCount: t[0].sampleCount, label: "h")], profile: profile, to: dir + "/out.mp4")
        // Stored 4032x3024 with a 90° rotation: upright it is portrait, so a 16:9 frame gets side bars.
        let bars = try frameRGBMeans(dir + "/out.mp4", frame: 15, x0: 0, x1: 0.15)
        let middle = try frameRGBMeans(dir + "/out.mp4", frame: 15, x0: 0.4, x1: 0.6)
        #expect(bars.r + bars.g + bars.b < 10, "no side bars: the picture was not turned upright (\(bars))")
        #expect(middle.r + middle.g + middle.b > 60)
        // Detected by content, not by name.
        let wrong = try Probe.facts(path: sharedMedia! + "/photoprism/wrong.heic")
        #expect(wrong.container != "heif" && wrong.videoCodec == "mjpeg")
    }
}

/// Photos with transparency and palettes, generated here (no shared media needed).
struct TransparentPhotoTests {
    /// Renders one photo item (1 s) into a movie over `background`.
    static func movie(of src: String, background: String, in dir: String) throws -> String {
        var profile = OutputProfile(path: "", width: 320, height: 240, fps: Rational(30, 1))
        profile.background = background
        let pipeline = Pipeline(name: "p", output: profile, items: [Item(kind: .photo(source: SourceRef(src), duration: 1, kenBurns: nil))])
        let t = try Planner.timeline(for: pipeline, facts: [src: try Probe.facts(path: src)])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: src, frameCount: t[0].frameCount)
        let segment = dir + "/" + (src as NSString).lastPathComponent + ".mov", out = segment + ".mp4"
        _ = try SegmentRenderer.render(spec, to: segment)
        _ = try Concat.run([ConcatInput(path: segment, frameCount: t[0].frameCount, sampleCount: t[0].sampleCount, label: "p")], profile: profile, to: out)
        return out
    }

    /// Stickers and the watermark are read as photos are. A phone's JPEG turned by its EXIF
    /// orientation (5 and 6 here) was drawn as stored, on its side; an iPhone HEIC failed the
    /// render with the whole filter graph (FFmpeg's movie source cannot open HEIC); a file that is
    /// no picture failed the same way. Now the JPEGs are upright (each region compared with the
    /// file turned by ffmpeg), the HEIC is drawn, and the non-picture fails naming itself.
    @Test(.enabled(if: sharedMedia != nil, "../shared/media is absent: overlay orientation test skipped"))
    func stickersAndTheWatermarkAreDrawnUprightAsPhotosAre() throws {
        let dir = temporaryDirectory("overlay-upright")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let base = dir + "/grey.png"
        let g = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x404040:s=640x360", "-frames:v", "1", base], timeout: 60)
        try #require(g.status == 0, "\(g.err)")
        let five = sharedMedia! + "/exif-orientation-examples/Portrait_5.jpg", six = sharedMedia! + "/immich-test-assets/portrait-orientation-6.jpg"
        let heic = sharedMedia! + "/photoprism/iphone_7.heic"
        func render(stickers: [String], watermark: String?) throws -> String {
            var profile = OutputProfile(path: "", width: 640, height: 360, fps: Rational(30, 1))
            profile.watermark = watermark.map { Watermark(image: $0, sha256: "", opacity: 1, size: 0.3) }
            var edits = Edits()
            edits.stickers = stickers.enumerated().map { Sticker(image: $1, sha256: "", x: $0 == 0 ? 0.25 : 0.75, y: 0.5, size: 0.3) }
            let pipeline = Pipeline(name: "p", output: profile, items: [Item(kind: .photo(source: SourceRef(base), duration: 1, kenBurns: nil), edits: edits)])
            let t = try Planner.timeline(for: pipeline, facts: [base: try Probe.facts(path: base)])
            let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: base, frameCount: t[0].frameCount)
            let segment = dir + "/seg.mov", out = dir + "/out.mp4"
            _ = try SegmentRenderer.render(spec, to: segment)
            _ = try Concat.run([ConcatInput(path: segment, frameCount: t[0].frameCount, sampleCount: t[0].sampleCount, label: "p")], profile: profile, to: out)
            return out
        }
        let out = try render(stickers: [five, heic], watermark: six)
        // The region each image covers, against the file turned upright by ffmpeg and as stored.
        func compare(_ src: String, upright: String, size: String, at place: (Int, Int) -> (Int, Int), label: String) throws {
            try extractFrame(src, at: 0, to: dir + "/\(label)-ref.png", filter: upright + "," + size, seek: false, inputOptions: ["-noautorotate"])
            let ref = try ffprobe(dir + "/\(label)-ref.png")
            let (w, h) = (ref.width, ref.height)
            let (x, y) = place(w, h)
            try extractFrame(src, at: 0, to: dir + "/\(label)-stored.png", filter: "scale=\(w):\(h)", seek: false, inputOptions: ["-noautorotate"])
            try extractFrame(out, at: 0, to: dir + "/\(label)-ours.png", filter: "select='eq(n\\,15)',crop=\(w):\(h):\(x):\(y)", seek: false)
            let score = try ssim(dir + "/\(label)-ours.png", dir + "/\(label)-ref.png")
            let stored = try ssim(dir + "/\(label)-ours.png", dir + "/\(label)-stored.png")
            print("\(label): ssim \(score) upright, \(stored) as stored")
            #expect(score >= 0.8 && stored < score - 0.1, "\(label): ssim \(score) upright, \(stored) as stored")
        }
        try compare(five, upright: "transpose=cclock_flip", size: "scale=192:-1", at: { w, h in (160 - w / 2, 180 - h / 2) }, label: "sticker (EXIF 5)")
        try compare(six, upright: "transpose=clock", size: "scale=-2:108", at: { w, h in (640 - w - 10, 360 - h - 10) }, label: "watermark (EXIF 6)")
        let drawn = try frameRGBMeans(out, frame: 15, x0: 0.7, x1: 0.8, y0: 0.4, y1: 0.6)
        #expect(abs(drawn.r - 64) + abs(drawn.g - 64) + abs(drawn.b - 64) > 30, "the HEIC sticker is drawn over the grey: \(drawn)")

        let notes = dir + "/notes.txt"
        try "not a picture".write(toFile: notes, atomically: true, encoding: .utf8)
        #expect { _ = try render(stickers: [], watermark: notes) } throws: { error in
            let message = (error as? MediaError)?.message ?? "\(error)"
            return message.contains("the watermark image notes.txt is not a picture that can be read") && message.contains("PNG, WebP, JPEG or HEIC")
        }
    }

    /// A logo or sticker: its transparent half is the movie's background colour, its half-transparent
    /// half is red blended over it. Before, transparency was dropped: the colour hidden under the
    /// transparent pixels (white here, as many editors leave it) showed, and the red was solid.
    @Test func transparencyShowsTheMoviesBackground() throws {
        let dir = temporaryDirectory("alpha-photo")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let png = dir + "/logo.png"
        let g = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=s=320x240,format=rgba",
                                   "-vf", "geq=r='255':g='255*lt(X,160)':b='255*lt(X,160)':a='if(lt(X,160),0,128)'", "-frames:v", "1", png], timeout: 60)
        try #require(g.status == 0, "\(g.err)")
        let out = try Self.movie(of: png, background: "#203040", in: dir)
        let clear = try frameRGBMeans(out, frame: 15, x0: 0.1, x1: 0.4, y0: 0.2, y1: 0.8)
        let half = try frameRGBMeans(out, frame: 15, x0: 0.6, x1: 0.9, y0: 0.2, y1: 0.8)
        print(String(format: "transparent: %.0f %.0f %.0f (background 32 48 64); half-transparent red: %.0f %.0f %.0f (expected 144 24 32)",
                     clear.r, clear.g, clear.b, half.r, half.g, half.b))
        #expect(abs(clear.r - 32) < 4 && abs(clear.g - 48) < 4 && abs(clear.b - 64) < 4, "\(clear)")
        #expect(abs(half.r - 144) < 5 && abs(half.g - 24) < 5 && abs(half.b - 32) < 5, "\(half)")
    }

    /// Clips with transparency — an animated GIF (a sticker saved from a chat; RGB with alpha)
    /// and ProRes 4444 (a motion-graphics export; Y'CbCr with alpha) — show the movie's
    /// background where they are transparent, not the colour their transparent pixels hide
    /// (libswscale dropped the alpha: white for the GIF, black for the ProRes). The probe says
    /// so, and so the segment's key and the renderer's fingerprint differ from an opaque clip's
    /// (segments rendered before are not reused).
    @Test(arguments: [
        ("sticker.gif", ["-filter_complex", "[0][1]hstack,split[a][b];[a]palettegen=reserve_transparent=1[p];[b][p]paletteuse=alpha_threshold=128", "-r", "15"]),
        ("graphics.mov", ["-filter_complex", "[0][1]hstack,format=yuva444p10le", "-c:v", "prores_ks", "-profile:v", "4444"]),
    ])
    func aClipsTransparencyShowsTheMoviesBackground(_ name: String, _ encode: [String]) throws {
        let dir = temporaryDirectory("alpha-clip")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clip = dir + "/" + name
        let g = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=white@0:s=160x240:d=1,format=rgba",
                                   "-f", "lavfi", "-i", "color=c=yellow:s=160x240:d=1,format=rgba"] + encode + [clip], timeout: 60)
        try #require(g.status == 0, "\(g.err)")
        let facts = try Probe.facts(path: clip)
        #expect(facts.transparent == true && !facts.isStill, "\(facts)")
        var profile = OutputProfile(path: "", width: 320, height: 240, fps: Rational(30, 1))
        profile.background = "#203040"
        let pipeline = Pipeline(name: "p", output: profile, items: [Item(kind: .video(source: SourceRef(clip), trim: nil))])
        let t = try Planner.timeline(for: pipeline, facts: [clip: facts])
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: clip, frameCount: t[0].frameCount, facts: facts)
        let opaque = Planner.segmentSpec(pipeline, index: 0, sourcePath: clip, frameCount: t[0].frameCount)
        #expect(StageKey.segment(spec, sourceSHA256: "s", renderer: EditChain.fingerprint(spec))
                != StageKey.segment(opaque, sourceSHA256: "s", renderer: EditChain.fingerprint(opaque)))
        #expect(EditChain.fingerprint(spec).contains("lutrgb=r=32:g=48:b=64"))
        let segment = dir + "/s.mov", out = dir + "/s.mp4"
        _ = try SegmentRenderer.render(spec, to: segment)
        _ = try Concat.run([ConcatInput(path: segment, frameCount: t[0].frameCount, sampleCount: t[0].sampleCount, label: "p")], profile: profile, to: out)
        let clear = try frameRGBMeans(out, frame: 15, x0: 0.1, x1: 0.4, y0: 0.2, y1: 0.8)
        let yellow = try frameRGBMeans(out, frame: 15, x0: 0.6, x1: 0.9, y0: 0.2, y1: 0.8)
        print(String(format: "%@: transparent %.0f %.0f %.0f (background 32 48 64), yellow %.0f %.0f %.0f", name, clear.r, clear.g, clear.b, yellow.r, yellow.g, yellow.b))
        #expect(abs(clear.r - 32) < 4 && abs(clear.g - 48) < 4 && abs(clear.b - 64) < 4, "\(clear)")
        #expect(yellow.r > 245 && yellow.g > 245 && yellow.b < 10, "\(yellow)")
    }

    /// A palette PNG (GIF-like, 256 colours) keeps its colours. Before, its pure red came out
    /// 255,23,0 and its pure green 0,204,0.
    @Test func aPalettePNGKeepsItsColours() throws {
        let dir = temporaryDirectory("palette-photo")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let png = dir + "/palette.png"
        let g = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=160x240:d=0.1", "-f", "lavfi", "-i", "color=c=0x00FF00:s=160x240:d=0.1",
                                   "-filter_complex", "[0][1]hstack,split[a][b];[a]palettegen[p];[b][p]paletteuse", "-frames:v", "1", png], timeout: 60)
        try #require(g.status == 0, "\(g.err)")
        #expect(try colourTags(png).pixelFormat == "pal8")
        let out = try Self.movie(of: png, background: "#000000", in: dir)
        let red = try frameRGBMeans(out, frame: 15, x0: 0.1, x1: 0.4, y0: 0.2, y1: 0.8)
        let green = try frameRGBMeans(out, frame: 15, x0: 0.6, x1: 0.9, y0: 0.2, y1: 0.8)
        print(String(format: "palette PNG: red %.0f %.0f %.0f, green %.0f %.0f %.0f", red.r, red.g, red.b, green.r, green.g, green.b))
        #expect(red.r > 245 && red.g < 8 && red.b < 8, "\(red)")
        #expect(green.r < 8 && green.g > 245 && green.b < 8, "\(green)")
    }
}
