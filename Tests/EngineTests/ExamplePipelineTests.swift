import Foundation
import Testing
import ThreadlineCore
import TestSupport

/// The example pipelines in pipelines/ render, with the properties their features promise.
@Suite(.serialized) struct ExamplePipelineTests {
    static let media: String = {
        let dir = temporaryDirectory("examples")
        _ = try? run(repositoryRoot + "/scripts/make-demo-media", [dir + "/media"], timeout: 300)
        return dir
    }()

    /// Copies an example next to the generated media and renders it.
    static func render(_ name: String) throws -> (path: String, plan: Plan) {
        let text = try String(contentsOfFile: repositoryRoot + "/pipelines/\(name).yaml", encoding: .utf8)
        try text.write(toFile: media + "/\(name).yaml", atomically: true, encoding: .utf8)
        let plan = try run(coordPath, ["plan", media + "/\(name).yaml", "--json"], timeout: 60)
        #expect(plan.status == 0, "\(plan.err)")
        let r = try run(coordPath, ["submit", media + "/\(name).yaml", "--state", media + "/state", "--workers", "2"], timeout: 300)
        #expect(r.status == 0, "\(r.err)")
        return (media + "/out/\(name).mp4", try JSONDecoder().decode(Plan.self, from: Data(plan.out.utf8)))
    }

    @Test func looksAndTitles() throws {
        let (out, plan) = try Self.render("looks-and-titles")
        let p = try ffprobe(out, countFrames: true)
        let frames = try #require(plan.totalFrames)
        #expect(frames == 60 + 60 + 60 + 60 + 45)
        #expect(p.frames == frames && p.width == 1280 && p.height == 720 && p.frameRate == "30/1")
        #expect(abs(p.duration - Double(frames) / 30) <= 1.0 / 30)
        #expect(p.audioCodec == "aac")
        // The title's background colour (#1c1c1e) in a corner of its first second.
        let corner = try frameRGBMeans(out, frame: 15, x0: 0, x1: 0.05)
        #expect(abs(corner.r - 0x1c) < 4 && abs(corner.g - 0x1c) < 4 && abs(corner.b - 0x1e) < 4, "title corner \(corner)")
        // The closing title: #203a60.
        let end = try frameRGBMeans(out, frame: frames - 10, x0: 0, x1: 0.05)
        #expect(abs(end.r - 0x20) < 4 && abs(end.g - 0x3a) < 4 && abs(end.b - 0x60) < 4, "closing title corner \(end)")
    }
}

extension ExamplePipelineTests {
    @Test func soundtrackAndWatermark() throws {
        let (out, plan) = try Self.render("soundtrack-and-watermark")
        let p = try ffprobe(out, countFrames: true)
        #expect(plan.totalFrames == 180)                            // fitted to max_duration: 6 s
        #expect(p.frames == 180 && abs(p.duration - 6.0) <= 1.0 / 30)
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
        // The watermark at the bottom-left in the first, middle and last frames: the logo's colours
        // make that corner differ from the same spot of the watermark-free demo render.
        for frame in [0, 90, 179] {
            let corner = try frameRGBMeans(out, frame: frame, x0: 0.02, x1: 0.1)
            #expect(corner.r + corner.g + corner.b > 30, "frame \(frame): \(corner)")
        }
        // The song is faded in and out at the movie's ends, full in between.
        let pcm = try decodeAudio(out)
        func rms(_ a: Double, _ b: Double) -> Double {
            let slice = pcm[Int(a * 48000)..<min(pcm.count, Int(b * 48000))]
            return (slice.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, slice.count))).squareRoot()
        }
        let middle = rms(1.5, 4.5)
        #expect(rms(0, 0.1) < 0.6 * middle, "fade in: \(rms(0, 0.1)) vs \(middle)")
        #expect(rms(5.9, 6.0) < 0.6 * middle, "fade out: \(rms(5.9, 6.0)) vs \(middle)")
    }
}

@Suite struct ThumbnailTests {
    @Test func postersAndAContactSheet() throws {
        let dir = temporaryDirectory("thumbs")
        try Generate.clip(dir + "/a.mp4", width: 640, height: 360, seconds: 1)
        let text = """
        version: 1
        output: { path: \(dir)/out.mp4, size: 1280x720 }
        clips:
          - title: { text: "Hello", duration: 1, background: "#203a60" }
          - video: a.mp4
            look: mono
          - video: a.mp4
        """
        try text.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        // With a temporary folder whose name a filter graph cannot hold as it is (a quote, a
        // space): before, every title and poster failed ("Option not found").
        let tmp = dir + "/bob's tmp"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        let r = try run(coordPath, ["thumbnails", dir + "/p.yaml", "--out", dir + "/t", "--width", "320", "--columns", "2"], timeout: 120,
                        environment: ["TMPDIR": tmp])
        #expect(r.status == 0, "\(r.err)")
        for k in 1...3 {
            let p = try ffprobe(dir + "/t/item-0\(k).png")
            #expect(p.width == 320 && p.height == 180)
        }
        let sheet = try ffprobe(dir + "/t/contact-sheet.png")
        #expect(sheet.width == 2 * (320 + 8) && sheet.height == 2 * (180 + 40))
        let title = try frameRGBMeans(dir + "/t/item-01.png", frame: 0, x0: 0, x1: 0.1)
        #expect(abs(title.r - 0x20) < 4 && abs(title.b - 0x60) < 4, "title poster \(title)")
        let mono = try frameRGBMeans(dir + "/t/item-02.png", frame: 0, x0: 0.2, x1: 0.8)
        #expect(abs(mono.r - mono.g) < 3 && abs(mono.g - mono.b) < 3, "mono poster \(mono)")
    }

    /// A size the pipeline gives in pixels scales with the poster: a title of size 120 fits a
    /// 1280x720 frame in two lines, and its 320-wide poster the same way (it was drawn at 120 px
    /// on a 180-px poster, off the top and bottom).
    @Test func aTitlesSizeScalesWithItsPoster() throws {
        let dir = temporaryDirectory("thumbs-size")
        try """
        version: 1
        output: { path: \(dir)/out.mp4, size: 1280x720 }
        clips:
          - title: { text: "Summer in the hills", duration: 1, size: 120 }
        """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        let r = try run(coordPath, ["thumbnails", dir + "/p.yaml", "--out", dir + "/t", "--width", "320"], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        let top = try frameRGBMeans(dir + "/t/item-01.png", frame: 0, y0: 0, y1: 0.15)
        let bottom = try frameRGBMeans(dir + "/t/item-01.png", frame: 0, y0: 0.85, y1: 1)
        let middle = try frameRGBMeans(dir + "/t/item-01.png", frame: 0, x0: 0.1, x1: 0.9, y0: 0.3, y1: 0.7)
        #expect(top.r < 3 && bottom.r < 3, "the title runs off the poster: \(top), \(bottom)")
        #expect(middle.r > 20, "no title: \(middle)")
    }

    /// A poster is the item's middle frame with its edits as they are then: a caption shown from
    /// 0.5 s of a 2 s clip was missing from its poster (rendered as one frame at time 0), and one
    /// that ends at 0.5 s must not be on it; a sticker likewise.
    @Test func aPosterShowsWhatTheMiddleFrameShows() throws {
        let dir = temporaryDirectory("thumbs-window")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func ffmpeg(_ args: [String]) throws {
            let r = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i"] + args)
            #expect(r.status == 0, "\(r.err)")
        }
        /// `coord thumbnails` of a pipeline of `clips` with a `size` output, into `dir/name`.
        func thumbnails(_ name: String, size: String, clips: String) throws {
            try "version: 1\noutput: { path: \(dir)/\(name).mp4, size: \(size) }\nclips:\n\(clips)".write(toFile: "\(dir)/\(name).yaml", atomically: true, encoding: .utf8)
            let r = try run(coordPath, ["thumbnails", "\(dir)/\(name).yaml", "--out", "\(dir)/\(name)", "--width", "320"], timeout: 120)
            #expect(r.status == 0, "\(r.err)")
        }
        try ffmpeg(["color=c=black:s=320x180:r=30:d=2", "-c:v", "libx264", "-pix_fmt", "yuv420p", dir + "/black.mp4"])
        try ffmpeg(["color=c=white:s=64x64", "-frames:v", "1", dir + "/white.png"])
        try thumbnails("t", size: "320x180", clips: """
              - video: black.mp4
                text: { value: "LATER", position: center, size: 40, start: 0.5 }
              - video: black.mp4
                text: { value: "EARLIER", position: center, size: 40, end: 0.5 }
              - video: black.mp4
                stickers: [{ image: white.png, x: 0.5, y: 0.5, size: 0.3, start: 0.5 }]

            """)
        let middle = { (k: Int) in try frameRGBMeans(dir + "/t/item-0\(k).png", frame: 0, x0: 0.3, x1: 0.7, y0: 0.35, y1: 0.65).g }
        #expect(try middle(1) > 20, "the caption shown from 0.5 s is missing")
        #expect(try middle(2) < 3, "the caption that ended at 0.5 s is there")
        #expect(try middle(3) > 100, "the sticker shown from 0.5 s is missing")

        // A Ken Burns photo's poster is its view at the middle frame: a box a fifth of the
        // picture wide, zoomed 1 to 2, is √2 times a fifth wide there (a fifth: its first frame).
        try ffmpeg(["color=c=black:s=1280x720,drawbox=x=512:y=288:w=256:h=144:color=white:t=fill", "-frames:v", "1", dir + "/box.png"])
        try thumbnails("kb", size: "1280x720", clips: """
              - photo: box.png
                duration: 2
                ken_burns: { from: { zoom: 1 }, to: { zoom: 2 } }

            """)
        let (w, h, rgb) = try playerFrame(dir + "/kb/item-01.png", frame: 0)
        let white = (0..<w).filter { rgb[((h / 2) * w + $0) * 3 + 1] > 128 }.count
        #expect(abs(Double(white) / Double(w) - 0.2 * 2.0.squareRoot()) < 0.02, "the box is \(white) of \(w) px wide")
    }
}

extension ExamplePipelineTests {
    @Test func transitions() throws {
        let (out, plan) = try Self.render("transitions")
        let p = try ffprobe(out, countFrames: true)
        let frames = try #require(plan.totalFrames)
        #expect(frames == 60 + 60 + 75 + 45 - 15 - 30)
        #expect(p.frames == frames && abs(p.duration - Double(frames) / 30) <= 1.0 / 30)
        #expect(abs((p.videoDuration ?? 0) - (p.audioDuration ?? 0)) <= 1.0 / 30)
        let timeline = try #require(plan.timeline)
        // The fade (item 2 → 3) reaches black at its boundary: the middle of the shared second.
        let boundary = timeline[2].startFrame + 15
        let mid = try frameRGBMeans(out, frame: boundary, x0: 0.2, x1: 0.8)
        #expect(mid.r + mid.g + mid.b < 15, "not black at the fade's boundary: \(mid)")
        // The watermark stays through it (top-right corner, opaque logo).
        let corner = try frameRGBMeans(out, frame: boundary, x0: 0.9, x1: 0.98)
        #expect(corner.r + corner.g + corner.b > 30, "watermark gone in the fade: \(corner)")
        // Through the dissolve (item 1 → 2) the tones cross without a gap.
        let pcm = try decodeAudio(out)
        let a = (timeline[1].startFrame - 5) * 1600, b = (timeline[1].startFrame + 20) * 1600
        #expect(longestSilenceMs(Array(pcm[a..<b]), edge: 0) < 5)
    }
}

extension ExamplePipelineTests {
    /// Every example renders to the length its plan says, in its size and rate, with sound.
    static func checkBasics(_ name: String, width: Int, height: Int, fps: Int = 30) throws -> (String, Plan) {
        let (out, plan) = try Self.render(name)
        let p = try ffprobe(out, countFrames: true)
        let frames = try #require(plan.totalFrames)
        #expect(p.frames == frames, "\(name)")
        #expect(abs(p.duration - Double(frames) / Double(fps)) <= 1.0 / Double(fps) + 0.001, "\(name) duration \(p.duration)")
        #expect(p.frameRate == "\(fps)/1", "\(name) rate")
        #expect(p.width == width && p.height == height, "\(name) size")
        #expect(p.audioCodec == "aac" && p.sampleRate == 48000, "\(name) audio")
        return (out, plan)
    }

    /// Frame brightness (R+G+B means over the middle of the picture) at `frame`.
    static func brightness(_ out: String, _ frame: Int) throws -> Double {
        let m = try frameRGBMeans(out, frame: frame, x0: 0.2, x1: 0.8)
        return m.r + m.g + m.b
    }

    @Test func photosExample() throws {
        let (out, plan) = try Self.checkBasics("photos", width: 1080, height: 1350)
        // Two 0.5 s fades through black, baked into the items' segments: no transition stage.
        #expect(plan.totalFrames == 90 + 45 + 45 - 15 - 15)
        #expect(plan.stages.filter { $0.kind == .transition }.isEmpty)
        let timeline = try #require(plan.timeline)
        for t in timeline.dropFirst() {
            // Black where the incoming item starts to show (the fade's middle), bright either side.
            let middle = t.startFrame + t.headFrames / 2
            #expect(try Self.brightness(out, middle) < 15, "item \(t.item + 1): not black at the fade's middle")
            #expect(try Self.brightness(out, middle - 3) > 50 && (try Self.brightness(out, middle + 3)) > 50,
                    "item \(t.item + 1): the fade is not half out, half in")
            #expect(try Self.brightness(out, t.startFrame + t.headFrames + 2) > 100, "item \(t.item + 1): dim after its fade")
        }
    }

    @Test func motionExample() throws {
        let (out, plan) = try Self.checkBasics("motion", width: 1080, height: 1080)
        // speed 2 halves beach (4 s → 60 frames), speed 0.5 doubles 1 s of life, loop 2 of 1 s, bounce of 1.5 s;
        // a 0.5 s fade joins the first two.
        #expect(plan.totalFrames == 60 + 60 + 60 + (2 * 45 - 1) - 15)
        // The fade's sound: out to silence at its middle and back, with no gap outside it.
        let timeline = try #require(plan.timeline)
        let middle = (timeline[1].startFrame + 7) * 1600
        let pcm = try decodeAudio(out)
        func rms(_ r: Range<Int>) -> Double {
            (pcm[r].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(r.count)).squareRoot()
        }
        let quiet = rms((middle - 240)..<(middle + 240)), before = rms((middle - 19200)..<(middle - 9600)), after = rms((middle + 9600)..<(middle + 19200))
        #expect(quiet < 0.15 * min(before, after), "fade middle \(quiet), before \(before), after \(after)")
        #expect(longestSilenceMs(Array(pcm[(middle - 19200)..<(middle - 1600)]), edge: 0) < 5)
        // Bounce ends on the first frame of its forward pass.
        let total = try #require(plan.totalFrames)
        try extractFrame(out, at: 0, to: Self.media + "/m-last.png", filter: "select='eq(n\\,\(total - 1))'", seek: false)
        try extractFrame(out, at: 0, to: Self.media + "/m-first.png", filter: "select='eq(n\\,\(total - 89))'", seek: false)
        #expect(try ssim(Self.media + "/m-last.png", Self.media + "/m-first.png") > 0.9)
    }

    @Test func aspectExamples() throws {
        _ = try Self.checkBasics("vertical-story", width: 720, height: 1280)
        _ = try Self.checkBasics("square-recap", width: 1080, height: 1080, fps: 25)
    }
}
