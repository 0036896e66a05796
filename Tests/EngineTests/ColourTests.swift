import Foundation
import Testing
import ThreadlineCore
import TestSupport

/// Colour as people see it: every frame here is decoded the way a player decodes it (the file's
/// own tags; untagged HD as BT.709), never with ffmpeg's default BT.601 conversion.
@Suite(.serialized) struct ColourTests {
    static let dir: String = {
        let d = temporaryDirectory("colour")
        // SMPTE colour bars as an RGB PNG, and the same bars as a BT.601-tagged clip and an
        // untagged SD clip (players take untagged SD as BT.601).
        _ = try? run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "smptebars=size=1280x720", "-frames:v", "1", "-pix_fmt", "rgb24", d + "/bars.png"])
        _ = try? run("ffmpeg", ["-v", "error", "-y", "-loop", "1", "-i", d + "/bars.png", "-t", "1", "-r", "30",
                                "-vf", "scale=out_color_matrix=bt601:out_range=tv,format=yuv420p", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "10",
                                "-colorspace", "smpte170m", "-color_primaries", "smpte170m", "-color_trc", "smpte170m", "-color_range", "tv", d + "/bars601.mp4"])
        _ = try? run("ffmpeg", ["-v", "error", "-y", "-loop", "1", "-i", d + "/bars.png", "-t", "1", "-r", "30",
                                "-vf", "scale=640:360:out_color_matrix=bt601:out_range=tv,format=yuv420p", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "10",
                                d + "/bars-sd-untagged.mp4"])
        // The bars as an odd-sized JPEG (BT.601 full range; the colorspace filter refuses odd 4:2:0 sizes).
        _ = try? run("ffmpeg", ["-v", "error", "-y", "-i", d + "/bars.png", "-vf", "scale=501:281", "-q:v", "1", d + "/bars-odd.jpg"])
        // A grey clip for overlays, a solid logo and a sticker (an opaque red square in a transparent border).
        _ = try? run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x808080:s=640x360:r=30:d=2", "-c:v", "libx264", "-preset", "ultrafast",
                                "-pix_fmt", "yuv420p", d + "/grey.mp4"])
        _ = try? run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x2060d0:s=200x100", "-frames:v", "1", "-pix_fmt", "rgb24", d + "/logo.png"])
        _ = try? run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0xff0000:s=160x160", "-vf", "format=rgba,pad=200:200:20:20:color=0x00000000",
                                "-frames:v", "1", d + "/sticker.png"])
        return d
    }()

    /// Renders a pipeline body (what follows `output:`'s path) with the real `coord submit`.
    static func render(_ name: String, output: String = "{ size: 1280x720, fps: 30, video: { preset: ultrafast, crf: 12 } }", _ body: String) throws -> String {
        let out = dir + "/\(name).mp4"
        var outputMap = output
        outputMap.insert(contentsOf: " path: \(name).mp4,", at: outputMap.index(after: outputMap.startIndex))
        try "version: 1\nname: \(name)\noutput: \(outputMap)\n\(body)".write(toFile: dir + "/\(name).yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["submit", dir + "/\(name).yaml", "--state", dir + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        return out
    }

    static func close(_ a: (r: Double, g: Double, b: Double), _ b: (r: Double, g: Double, b: Double), within d: Double = 6) -> Bool {
        abs(a.r - b.r) <= d && abs(a.g - b.g) <= d && abs(a.b - b.b) <= d
    }

    /// The seven top bars' centres, as fractions of the width.
    static let barCentres = (0..<7).map { (Double($0) + 0.5) / 7 }

    @Test func titlesBarsAndBT601ClipsShowTheirIntendedColours() throws {
        let out = try Self.render("colours", """
        clips:
          - title: { text: ".", duration: 1, background: "#ff0000" }
          - title: { text: ".", duration: 1, background: "#00c000" }
          - title: { text: ".", duration: 1, background: "#2060d0" }
          - photo: bars.png
            duration: 1
          - video: bars601.mp4
          - video: bars-sd-untagged.mp4
          - photo: bars-odd.jpg
            duration: 1
        """)
        let tags = try colourTags(out)
        #expect(tags.isBT709Limited, "output tags \(tags)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)).range(of: Data("colrnclx".utf8)) != nil, "no nclx colr atom")
        for (k, hex) in [(0, (255.0, 0.0, 0.0)), (1, (0.0, 192.0, 0.0)), (2, (32.0, 96.0, 208.0))] {
            let c = try frameRGBMeans(out, frame: 30 * k + 15, x0: 0.05, x1: 0.3, y0: 0.1, y1: 0.3)
            #expect(Self.close(c, (hex.0, hex.1, hex.2)), "title \(k): \(c), want \(hex)")
        }
        // The bars as the PNG holds them, against the photo, the BT.601 clip and the untagged SD clip
        // (each frame decoded once, its seven bars measured from it).
        let png = try playerFrame(Self.dir + "/bars.png", frame: 0)
        for (item, name) in [(3, "PNG of bars"), (4, "BT.601-tagged bars"), (5, "untagged SD bars"), (6, "odd-sized JPEG of bars")] {
            let frame = try playerFrame(out, frame: 30 * item + 15)
            for x in Self.barCentres {
                let want = rgbMeans(png, x0: x - 0.03, x1: x + 0.03, y0: 0.1, y1: 0.5)
                let got = rgbMeans(frame, x0: x - 0.03, x1: x + 0.03, y0: 0.1, y1: 0.5)
                #expect(Self.close(got, want), "\(name), bar at \(x): \(got), want \(want)")
            }
        }
    }

    @Test func textBackgroundAndWatermarkColoursAreBT709() throws {
        // drawtext and pad draw with BT.601 coefficients in FFmpeg 5.1: their colours are converted.
        // U+2588 (a full block) gives a solid patch of the text's colour.
        let out = try Self.render("drawn", output: "{ size: 1280x720, fps: 30, background: \"#2060d0\", video: { preset: ultrafast, crf: 12 }, watermark: { image: logo.png, position: top-right, size: 0.2, opacity: 1 } }", """
        clips:
          - video: grey.mp4
            text: { value: "\u{2588}\u{2588}", size: 300, color: "#00c000", position: center }
        """)
        let text = try frameRGBMeans(out, frame: 15, x0: 0.46, x1: 0.54, y0: 0.45, y1: 0.55)
        #expect(Self.close(text, (0, 192, 0)), "text \(text)")
        let logo = try frameRGBMeans(out, frame: 10, x0: 0.88, x1: 0.95, y0: 0.06, y1: 0.16)
        #expect(Self.close(logo, (32, 96, 208)), "watermark \(logo)")

        let boxed = try Self.render("letterboxed", output: "{ size: 1280x720, fps: 30, background: \"#2060d0\", video: { preset: ultrafast, crf: 12 } }", """
        clips:
          - photo: logo.png
            duration: 0.5
        """)
        // A 2:1 logo in a 16:9 frame: bars above and below in the background colour.
        let bar = try frameRGBMeans(boxed, frame: 5, x0: 0.3, x1: 0.7, y0: 0, y1: 0.08)
        #expect(Self.close(bar, (32, 96, 208)), "letterbox bars \(bar)")
    }

    @Test func stickersAppearAtTheirPlaceOnlyBetweenStartAndEnd() throws {
        let out = try Self.render("stickers", """
        clips:
          - video: grey.mp4
            stickers:
              - { image: sticker.png, x: 0.25, y: 0.25, size: 0.1, start: 0.5, end: 1.5 }
              - { image: sticker.png, x: 0.75, y: 0.75, size: 0.2, rotate: 45 }
        """)
        func at(_ frame: Int, _ x: Double, _ y: Double) throws -> (r: Double, g: Double, b: Double) {
            try frameRGBMeans(out, frame: frame, x0: x - 0.01, x1: x + 0.01, y0: y - 0.015, y1: y + 0.015)
        }
        let grey = (128.0, 128.0, 128.0), red = (255.0, 0.0, 0.0)
        // Frame 15 is the first at 0.5 s, frame 44 the last before 1.5 s.
        for (frame, shown) in [(0, false), (14, false), (15, true), (30, true), (44, true), (45, false), (59, false)] {
            let c = try at(frame, 0.25, 0.25)
            #expect(Self.close(c, shown ? red : grey, within: 10), "frame \(frame): \(c), sticker \(shown ? "shown" : "hidden")")
        }
        // Away from its place there is no sticker; the second (turned 45°) shows all the time, its
        // corners cut by the turn (the frame's grey where the square's corner would be unturned).
        #expect(Self.close(try at(30, 0.40, 0.25), grey, within: 10))
        #expect(Self.close(try at(0, 0.75, 0.75), red, within: 10))
        #expect(Self.close(try at(59, 0.75, 0.75), red, within: 10))
        // (85 px right and up of its centre: inside the square unturned, outside the diamond it makes turned.)
        let corner = try frameRGBMeans(out, frame: 30, x0: 0.75 + 0.062, x1: 0.75 + 0.070, y0: 0.75 - 0.124, y1: 0.75 - 0.112)
        #expect(Self.close(corner, grey, within: 12), "the turned sticker's corner \(corner)")
    }

    @Test func badStickerValuesAreLocatedErrors() throws {
        for (yaml, expected, position) in [
            ("{ image: sticker.png, x: 1.5 }", "sticker x must be between 0.0 and 1.0", "p.yaml:6:42"),
            ("{ image: sticker.png, size: 0 }", "sticker size must be between 0.01 and 1.0", "p.yaml:6:45"),
            ("{ image: sticker.png, y: -1 }", "sticker y must be between 0.0 and 1.0", "p.yaml:6:42"),
            ("{ image: sticker.png, sise: 0.2 }", "did you mean 'size'?", "p.yaml:6:39"),
            ("{ image: missing.png }", "sticker image not found", "p.yaml:6:26"),
        ] {
            let d = temporaryDirectory("sticker-err")
            try FileManager.default.copyItem(atPath: Self.dir + "/sticker.png", toPath: d + "/sticker.png")
            try FileManager.default.copyItem(atPath: Self.dir + "/grey.mp4", toPath: d + "/grey.mp4")
            try "version: 1\nname: s\noutput: { path: o.mp4 }\nclips:\n  - video: grey.mp4\n    stickers: [ \(yaml) ]\n".write(toFile: d + "/p.yaml", atomically: true, encoding: .utf8)
            let r = try run(coordPath, ["plan", d + "/p.yaml"], timeout: 60)
            #expect(r.status == 2, "\(yaml): exit \(r.status)")
            #expect(r.err.contains(position) && r.err.contains(expected), "\(yaml): \(r.err)")
        }
    }

    /// HDR → SDR: the movie is tagged BT.709 and looks like `reference` (the SDR picture an HDR
    /// clip was made from), or by default a standard tone map of the same frames (ffmpeg's zscale +
    /// tonemap=reinhard, a different operator from ours) — not grey. The saturation may be a
    /// quarter under the reference's: the same build gives the PQ clip 0.84× its SDR truth on one
    /// machine and 0.78× on another (an AMD EPYC without AVX-512; a source encoded at a far lower
    /// CRF gives the same there, so it is the render's arithmetic on that CPU, not the source); the
    /// picture before the tone map was 0.22×.
    static func checkToneMapped(_ source: String, name: String, reference: String? = nil) throws {
        let out = try render(name, "clips:\n  - video: \(source)\n")
        let tags = try colourTags(out)
        #expect(tags.isBT709Limited, "\(name): output tags \(tags)")
        let ref = reference ?? dir + "/\(name)-ref.mp4"
        if reference == nil {
        let fit = "scale=1280:720:force_original_aspect_ratio=decrease:force_divisible_by=2,pad=1280:720:(ow-iw)/2:(oh-ih)/2,setsar=1"
        let r = try run("ffmpeg", ["-v", "error", "-y", "-i", source, "-an", "-vf",
                                   "zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=bt709,tonemap=tonemap=reinhard:desat=0,zscale=t=bt709:m=bt709:r=tv,format=yuv420p," + fit,
                                   "-c:v", "libx264", "-crf", "10", "-preset", "ultrafast", "-colorspace", "bt709", "-color_primaries", "bt709",
                                   "-color_trc", "bt709", "-color_range", "tv", ref])
        #expect(r.status == 0, "\(r.err)")
        }
        let ours = try saturationAndLuma(out), theirs = try saturationAndLuma(ref)
        print("tone map \(name): ours saturation \(ours.saturation) luma \(ours.luma); reference \(theirs.saturation) / \(theirs.luma)")
        #expect(ours.saturation >= 0.75 * theirs.saturation, "\(name): saturation \(ours.saturation) vs \(theirs.saturation)")
        #expect(abs(ours.luma - theirs.luma) <= 0.15 * theirs.luma, "\(name): luma \(ours.luma) vs \(theirs.luma)")
    }

    @Test func generatedPQClipIsToneMappedToSDR() throws {
        // A BT.709 test picture (the truth), and the same picture as HDR10: PQ, BT.2020, 10-bit.
        let sdr = Self.dir + "/pq-truth.mp4", pq = Self.dir + "/pq.mp4"
        let t = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=0.5", "-c:v", "libx264",
                                   "-crf", "10", "-preset", "ultrafast", "-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", sdr])
        #expect(t.status == 0, "\(t.err)")
        let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=0.5", "-vf",
                                   "zscale=tin=709:min=709:pin=709:rin=limited:t=smpte2084:p=2020:m=2020_ncl:r=limited:npl=100,format=yuv420p10le",
                                   "-c:v", "libx265", "-x265-params", "log-level=error:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc", pq])
        #expect(r.status == 0, "\(r.err)")
        try Self.checkToneMapped(pq, name: "pq-rendered", reference: sdr)   // not "pq": the movie must not replace its source
    }

    @Test(.enabled(if: sharedMedia != nil, "../shared/media is absent: HLG corpus files skipped"),
          arguments: ["androidx-media/dolbyVision-hdr.MOV", "mediabunny/no-correct-videoframe-format.mov"])
    func corpusHLGClipsAreToneMappedToSDR(_ path: String) throws {
        try Self.checkToneMapped(sharedMedia! + "/" + path, name: (path as NSString).lastPathComponent.replacingOccurrences(of: ".", with: "-"))
    }

    /// The iPhone HEIC carries a Display P3 profile: against the same picture converted to sRGB by
    /// LittleCMS's own jpgicc (from libheif's heif-convert output, which keeps the profile).
    @Test(.enabled(if: sharedMedia != nil, "../shared/media is absent: the P3 HEIC test is skipped"))
    func displayP3HeicMatchesLittleCMS() throws {
        let heic = sharedMedia! + "/photoprism/iphone_7.heic"
        let out = try Self.render("p3", "clips:\n  - photo: \(heic)\n    duration: 0.2\n")
        let jpg = Self.dir + "/p3.jpg", srgb = Self.dir + "/p3-srgb.jpg", ref = Self.dir + "/p3-ref.png"
        var r = try run("heif-convert", ["-q", "100", heic, jpg])
        #expect(r.status == 0, "heif-convert: \(r.err)")
        r = try run("jpgicc", ["-t", "1", "-q", "100", jpg, srgb])
        #expect(r.status == 0, "jpgicc: \(r.err)")
        // jpgicc drops the EXIF orientation (6: turn clockwise); fit as the movie does.
        r = try run("ffmpeg", ["-v", "error", "-y", "-i", srgb, "-vf", "scale=in_color_matrix=bt601:in_range=pc,transpose=clock,scale=-2:720,pad=1280:720:(ow-iw)/2:0,format=rgb24",
                               "-frames:v", "1", ref])
        #expect(r.status == 0, "\(r.err)")
        // Five patches across the picture: sky, wall, shadow, brick, light.
        for (x, y) in [(0.31, 0.14), (0.5, 0.5), (0.55, 0.83), (0.39, 0.69), (0.62, 0.28)] {
            let ours = try frameRGBMeans(out, frame: 2, x0: x, x1: x + 0.03, y0: y, y1: y + 0.05)
            let theirs = try frameRGBMeans(ref, frame: 0, x0: x, x1: x + 0.03, y0: y, y1: y + 0.05)
            #expect(Self.close(ours, theirs), "patch at (\(x), \(y)): ours \(ours), LittleCMS \(theirs)")
        }
    }
}

/// Output formats beside H.264 MP4: HEVC (Apple-playable hvc1) and animated GIF.
@Suite(.serialized) struct OutputFormatTests {
    static let body = """
    transition: { type: fade, duration: 0.4 }
    clips:
      - title: { text: "June 2026", duration: 1, background: "#1c1c1e" }
      - video: clip.mp4
        trim: { start: 0.2, end: 1.7 }
      - photo: bars.png
        duration: 1
    """

    static func render(_ output: String) throws -> (path: String, plannedFrames: Int) {
        let d = temporaryDirectory("formats")
        try Generate.clip(d + "/clip.mp4", width: 640, height: 360, fps: "25", seconds: 2)
        try FileManager.default.copyItem(atPath: ColourTests.dir + "/bars.png", toPath: d + "/bars.png")
        try "version: 1\nname: f\noutput: \(output)\n\(body)\n".write(toFile: d + "/p.yaml", atomically: true, encoding: .utf8)
        let plan = try run(coordPath, ["plan", d + "/p.yaml", "--json"], timeout: 60)
        #expect(plan.status == 0, "\(plan.err)")
        let frames = try #require(try JSONDecoder().decode(Plan.self, from: Data(plan.out.utf8)).totalFrames)
        let r = try run(coordPath, ["submit", d + "/p.yaml", "--state", d + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        let path = try #require(r.out.split(separator: "\n").last.flatMap { $0.components(separatedBy: "→ ").last?.components(separatedBy: " (").first })
        return (path, frames)
    }

    @Test func hevcIsHvc1WithExactFramesAndNoDrift() throws {
        let (out, frames) = try Self.render("{ path: movie.mp4, size: 640x360, fps: 30, video: { codec: hevc, preset: ultrafast } }")
        let p = try ffprobe(out, countFrames: true)
        #expect(p.videoCodec == "hevc" && p.frames == frames, "codec \(p.videoCodec ?? "-"), \(p.frames ?? -1) frames, planned \(frames)")
        let tag = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_tag_string", "-of", "csv=p=0", out])
        #expect(tag.out.trimmingCharacters(in: .whitespacesAndNewlines) == "hvc1")
        #expect(abs((p.videoDuration ?? 0) - Double(frames) / 30) <= 1.0 / 30)
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30, "video \(p.videoDuration ?? 0) s, audio \(p.audioDuration ?? 0) s")
        #expect(try colourTags(out).isBT709Limited)
        // Every frame decodes (segments joined by stream copy at IDR frames).
        let decode = try run("ffmpeg", ["-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.err.isEmpty, "\(decode.err)")
    }

    @Test func gifHasThePlannedFramesAtFifteenFPS() throws {
        let (out, frames) = try Self.render("{ path: movie.gif, size: 320x180 }")
        #expect(out.hasSuffix("movie.gif"))
        let p = try ffprobe(out, countFrames: true)
        // 1 + 1.5 + 1 s at 15 fps, less two 0.4 s fades.
        #expect(frames == 15 + 23 + 15 - 6 - 6 || frames == 15 + 22 + 15 - 6 - 6, "planned \(frames)")
        #expect(p.videoCodec == "gif" && p.frames == frames && p.audioCodec == nil, "\(p)")
        #expect(abs(p.duration - Double(frames) / 15) <= 0.02, "duration \(p.duration) for \(frames) frames")
        // One palette: the title's dark background keeps its colour through the movie's frames.
        let title = try frameRGBMeans(out, frame: 3, x0: 0, x1: 0.1)
        #expect(ColourTests.close(title, (0x1c, 0x1c, 0x1e)), "title \(title)")
    }
}
