import Foundation
import PropertyBased
import Testing
@testable import ThreadlineCore

/// `Pipeline.boundsProblem` is the loader's bounds, checked on a pipeline that came over the
/// wire (a hand-made submission skips the loader, and a worker renders what it says).
@Suite struct PipelineBoundsTests {
    /// The loader tests' folder: media/a.mov and media/b.mp4 (the loader reads neither; it hashes them).
    let dir = try! PipelineLoaderTests().dir

    /// A pipeline with every number the loader bounds, `values` (key → YAML text) in place of
    /// the defaults.
    func yaml(_ values: [String: String] = [:]) -> String {
        let v = { (key: String, normal: String) in values[key] ?? normal }
        return """
        output:
          path: o.mp4
          size: \(v("size", "640x360"))
          fps: \(v("fps", "30"))
          video: { crf: \(v("crf", "23")), keyint: \(v("keyint", "0")) }
          audio: { bitrate: \(v("bitrate", "160k")) }
          watermark: { image: media/b.mp4, opacity: \(v("opacity", "0.8")), size: \(v("wsize", "0.12")), margin: \(v("margin", "0.03")) }
          max_duration: { seconds: \(v("max", "60")) }
        soundtrack: { source: media/b.mp4, from: \(v("from", "0")), to: \(v("to", "30")), volume: \(v("svolume", "1")), clip_audio: \(v("clip", "1")), fade_in: \(v("fadein", "1")), fade_out: \(v("fadeout", "1")) }
        retry: { attempts: \(v("attempts", "3")) }
        transition: { type: fade, duration: \(v("transition", "0.5")) }
        clips:
          - video: media/a.mov
            trim: { start: \(v("tstart", "1")), end: \(v("tend", "3")) }
            speed: \(v("speed", "1"))
            loop: \(v("loop", "1"))
            volume: \(v("volume", "1"))
            rotate: \(v("rotate", "0"))
            crop: { x: \(v("cx", "0.1")), y: \(v("cy", "0.1")), width: \(v("cw", "0.5")), height: \(v("ch", "0.5")) }
            adjust: { brightness: \(v("brightness", "0")), contrast: \(v("contrast", "1")), saturation: \(v("saturation", "1")), gamma: \(v("gamma", "1")), warmth: \(v("warmth", "0")) }
            text: { value: Hi, size: \(v("textsize", "20")), start: \(v("textstart", "0")), end: \(v("textend", "1")) }
            stickers: [ { image: media/b.mp4, x: \(v("sx", "0.5")), y: \(v("sy", "0.5")), size: \(v("ssize", "0.1")), rotate: \(v("srotate", "0")), start: \(v("sstart", "0")), end: \(v("send", "1")) } ]
          - title: { text: T, duration: \(v("tduration", "2")), size: \(v("tsize", "40")) }
          - photo: media/b.mp4
            duration: \(v("pduration", "3"))
            ken_burns: { from: { zoom: \(v("zoom", "1.2")), center: [\(v("kx", "0.5")), \(v("ky", "0.5"))] }, to: { zoom: 1 } }
        """
    }

    func load(_ values: [String: String] = [:]) -> Pipeline? {
        try? PipelineLoader.parse(text: yaml(values), file: "p.yaml", baseDirectory: dir)
    }

    /// Values at, inside and past each bound, and ones no bound takes.
    static let odd = ["0", "-1", "0.001", "0.01", "0.02", "0.25", "0.4", "1", "1.000001", "3", "4", "10", "20", "21", "51", "52", "100", "240",
                      "360", "600", "601", "1000", "1001", "86400", "86401", "10000000", "10000001", "1e300", "-1e300", "-360", "-361",
                      "4320", "7680", "31k", "512k", "513k", ".nan", ".inf", "1280x720", "7682x4320", "90", "45", "30000/1001"]

    /// Whatever the loader takes, the wire check takes too: a pipeline a person wrote is never
    /// refused by the coordinator it is submitted to. Random values for every bounded key.
    @Test func whatTheLoaderTakesTheWireCheckTakes() async throws {
        let normal = try #require(load(), "the template loads")
        #expect(normal.boundsProblem == nil, "\(normal.boundsProblem ?? "")")
        // A text or sticker with an end and no start: an end of 0 is taken by both.
        let endsOnly = try PipelineLoader.parse(text: "output: { path: o.mp4 }\nclips:\n  - video: media/a.mov\n    text: { value: Hi, end: 0 }\n"
                                                    + "    stickers: [ { image: media/b.mp4, end: 0 } ]\n", file: "p.yaml", baseDirectory: dir)
        #expect(endsOnly.boundsProblem == nil, "\(endsOnly.boundsProblem ?? "")")
        let keys = ["size", "fps", "crf", "keyint", "bitrate", "opacity", "wsize", "margin", "max", "from", "to", "svolume", "clip", "fadein",
                    "fadeout", "attempts", "transition", "tstart", "tend", "speed", "loop", "volume", "rotate", "cx", "cy", "cw", "ch",
                    "brightness", "contrast", "saturation", "gamma", "warmth", "textsize", "textstart", "textend", "sx", "sy", "ssize",
                    "srotate", "sstart", "send", "tduration", "tsize", "pduration", "zoom", "kx", "ky"]
        // Every key with every value, one at a time: the same pipelines each run, so the count
        // of those the loader takes is a fact of the bounds, not of luck.
        var takenAlone = 0
        for key in keys {
            for value in Self.odd {
                guard let p = load([key: value]) else { continue }
                takenAlone += 1
                #expect(p.boundsProblem == nil, "the loader took \(key): \(value) and the wire check refuses it: \(p.boundsProblem ?? "")")
            }
        }
        #expect(takenAlone > 300, "too few pipelines loaded to say anything (\(takenAlone) of \(keys.count * Self.odd.count))")
        // Then two or three odd values at once, at random: bounds that depend on each other
        // (a trim's end past its start, a text's end past its start).
        let picks = Gen.int(in: 0...(keys.count * Self.odd.count - 1)).array(of: 2...3)
        await propertyCheck(count: 300, input: picks) { picks in
            var values: [String: String] = [:]
            for p in picks { values[keys[p % keys.count]] = Self.odd[p / keys.count] }
            guard let p = load(values) else { return }
            #expect(p.boundsProblem == nil, "the loader took \(values) and the wire check refuses it: \(p.boundsProblem ?? "")")
        }
    }

    /// A hand-made pipeline past any bound is refused, with what is wrong. Before, only its
    /// frame rate, size, durations, speed and loop were checked.
    @Test func aHandMadePipelinePastAnyBoundIsRefused() throws {
        let normal = try #require(load())
        let cases: [(String, (inout Pipeline) -> Void)] = [
            ("crf", { $0.output.video.crf = 99 }),
            ("codec", { $0.output.video.codec = "rm -rf" }),
            ("preset", { $0.output.video.preset = "placebo2" }),
            ("bitrate", { $0.output.audio.bitrate = -1 }),
            ("background", { $0.output.background = "not a colour" }),
            ("watermark", { $0.output.watermark!.size = .nan }),
            ("soundtrack", { $0.output.soundtrack!.volume = .infinity }),
            ("soundtrack to", { $0.output.soundtrack!.to = -5 }),
            ("retry", { $0.retryAttempts = 1_000_000 }),
            ("rotate", { $0.items[0].edits.rotate = 45 }),
            ("volume", { $0.items[0].edits.volume = 1e300 }),
            ("crop", { $0.items[0].edits.crop!.width = 5 }),
            ("adjust", { $0.items[0].edits.adjust!.gamma = 0 }),
            ("text start", { $0.items[0].edits.text!.start = 1e300 }),
            ("text colour", { $0.items[0].edits.text!.color = "#zzzzzz" }),
            ("text size", { $0.items[0].edits.text!.size = Int.max }),
            ("sticker size", { $0.items[0].edits.stickers[0].size = .nan }),
            ("sticker end", { $0.items[0].edits.stickers[0].end = -1 }),
            ("stickers", { $0.items[0].edits.stickers = Array(repeating: $0.items[0].edits.stickers[0], count: 33) }),
            ("loop", { $0.items[0].edits.loop = 100 }),
            ("trim", { if case .video(let s, _) = $0.items[0].kind { $0.items[0].kind = .video(source: s, trim: Trim(start: 0, end: .infinity)) } }),
            ("title size", { if case .title(var t) = $0.items[1].kind { t.size = 0; $0.items[1].kind = .title(t) } }),
            ("title colour", { if case .title(var t) = $0.items[1].kind { t.background = ""; $0.items[1].kind = .title(t) } }),
            ("ken burns", { if case .photo(let s, let d, var k) = $0.items[2].kind { k!.from.zoom = 1e9; $0.items[2].kind = .photo(source: s, duration: d, kenBurns: k) } }),
            ("live photo trim", { $0.items[2].kind = .livePhoto(source: SourceRef("/m/a.mov"), use: .motion, duration: 3, trim: Trim(start: -.infinity, end: nil)) }),
        ]
        for (name, mutate) in cases {
            var p = normal
            mutate(&p)
            #expect(p != normal, "\(name): the case changes nothing")
            #expect(p.boundsProblem != nil, "\(name) out of bounds is taken")
        }
        // Each says what is wrong, and where.
        var p = normal
        p.items[0].edits.stickers[0].size = .nan
        #expect(p.boundsProblem == "clip 1 (a.mov): a sticker's place, size, turn or time is out of range")
    }
}
