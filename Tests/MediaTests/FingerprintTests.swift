import Foundation
import Testing
@testable import Media
import ThreadlineCore
internal import CFFmpeg
import TestSupport

/// The coordinator keys a segment by `EditChain.fingerprint` (ThreadlineCore, no FFmpeg). It must
/// be the chain the renderer really builds, or a change to the chain would reuse stale segments.
@Suite struct FingerprintTests {
    static func spec(_ edits: Edits, fit: OutputProfile.Fit = .letterbox) -> SegmentSpec {
        let profile = OutputProfile(path: "/tmp/f.mp4", width: 640, height: 360, fps: Rational(30, 1), fit: fit)
        let p = Pipeline(name: "f", output: profile, items: [Item(kind: .video(source: SourceRef("/media/a.mov"), trim: nil), edits: edits)])
        return Planner.segmentSpec(p, index: 0, sourcePath: "/media/a.mov", frameCount: 30)
    }

    static let variants: [SegmentSpec] = {
        var text = Edits(look: .sepia); text.text = TextOverlay(value: "Hello", position: .bottomLeft, color: "#00c000", start: 0.5)
        var sticker = Edits(rotate: 90); sticker.stickers = [Sticker(image: "/s/star.png", sha256: "00", x: 0.25, y: 0.25, size: 0.1, rotate: 15, start: 0.5, end: 1.5)]
        return [spec(Edits()), spec(Edits(look: .mono)), spec(Edits(adjust: Adjust(contrast: 1.1, warmth: 0.3))),
                spec(Edits(crop: CropRect(x: 0.1, y: 0.1, width: 0.5, height: 0.5))), spec(Edits(fit: .blur)), spec(Edits(), fit: .crop),
                spec(text), spec(sticker)]
    }()

    @Test func theFingerprintIsTheChainTheRendererBuildsForAnUprightBT709Source() {
        // The renderer's own view of a BT.709 limited-range SDR source: no colour conversion.
        #expect(SourceColour.output.toOutput.isEmpty)
        for spec in Self.variants {
            let chain = EditChain(edits: spec.edits, profile: spec.profile, files: .placeholders(spec.edits, spec.profile))
            let rendered = chain.description(for: EditChain.Source(orientation: nil, sar: AVRational(num: 1, den: 1), colour: .output))
            let fingerprint = EditChain.fingerprint(spec)
            let overlays = spec.edits.stickers.isEmpty && spec.profile.watermark == nil ? "" : EditChain.overlayImagesMark
            let lettering = spec.edits.text == nil && spec.title == nil ? "" : EditChain.wrapMark
            #expect(fingerprint == rendered + (chain.scalesFirst ? EditChain.scaledFirstMark : "") + overlays + lettering, "\(spec.edits)")
        }
    }

    /// The coordinator remembers fingerprints by `EditChain.FingerprintInputs`. Keyed by the
    /// edits and the output alone (as it was), a clip's fingerprint was remembered for a title
    /// with the same edits, or the title's for the clip: whichever came first. Equal inputs must
    /// give equal fingerprints, and a title, a clip, a still and a Ken Burns photo with the same
    /// edits differ in both.
    @Test func theInputsTheCoordinatorRemembersFingerprintsByAreAllTheyDependOn() {
        let profile = OutputProfile(path: "/tmp/f.mp4", width: 640, height: 360, fps: Rational(30, 1))
        let items = [Item(kind: .title(Title(text: "June"))), Item(kind: .video(source: SourceRef("/media/a.mov"), trim: nil)),
                     Item(kind: .photo(source: SourceRef("/media/p.jpg"), duration: 1, kenBurns: nil)),
                     Item(kind: .photo(source: SourceRef("/media/p.jpg"), duration: 1, kenBurns: KenBurns(from: .init(zoom: 1), to: .init(zoom: 1.2))))]
        let specs = items.map { Planner.segmentSpec(Pipeline(name: "f", output: profile, items: [$0]), index: 0, sourcePath: "/media/x", frameCount: 30) }
            + Self.variants
        let inputs = specs.map(EditChain.FingerprintInputs.init), prints = specs.map(EditChain.fingerprint)
        #expect(Set(inputs.prefix(4)).count == 4 && Set(prints.prefix(4)).count == 4, "\(prints.prefix(4))")
        for a in specs.indices { for b in specs.indices where inputs[a] == inputs[b] { #expect(prints[a] == prints[b]) } }
    }

    @Test func everyEditChangesTheFingerprint() {
        let prints = Self.variants.map(EditChain.fingerprint)
        #expect(Set(prints).count == prints.count, "two different edits rendered the same chain: \(prints)")
    }
}

/// The first resize of a chain that scales first: zscale for 8-bit 4:2:0 pictures of even size
/// (0.9 instead of 1.6 ms a 1080p frame), libswscale for anything else, the same bicubic either way.
@Suite struct ResizeTests {
    static func chain(_ size: (Int, Int), yuv420p: Bool, sideways: Bool = false, fit: OutputProfile.Fit = .letterbox) -> String {
        let profile = OutputProfile(path: "/tmp/r.mp4", width: 1280, height: 720, fps: Rational(30, 1), fit: fit)
        let chain = EditChain(edits: Edits(), profile: profile, files: .placeholders(Edits(), profile))
        let upright = sideways ? EditChain.Upright(filters: ["transpose=clock"], clockwise: 90) : nil
        return chain.description(for: EditChain.Source(orientation: upright, sar: (1, 1), toOutput: [], size: size, yuv420p: yuv420p))
    }

    @Test func evenEightBitPicturesAreResizedByZscaleOthersBySwscale() {
        #expect(Self.chain((1920, 1080), yuv420p: true).hasPrefix("zscale=w=1280:h=720:filter=bicubic:param_a=0:param_b=0.6,"))
        // A portrait phone clip (stored landscape, turned by its display matrix): scaled, then turned.
        #expect(Self.chain((1920, 1080), yuv420p: true, sideways: true).hasPrefix("zscale=w=720:h=404:filter=bicubic:param_a=0:param_b=0.6,transpose=clock,"))
        #expect(Self.chain((1920, 1080), yuv420p: false).hasPrefix("scale=1280:720,"), "10-bit or full-range pictures keep libswscale")
        #expect(Self.chain((1919, 1080), yuv420p: true).hasPrefix("scale="), "zimg does not subsample odd sizes")
        // A crop fit of a 4:3 picture to 16:9 scales to 1280x960: even, so zscale.
        #expect(Self.chain((1440, 1080), yuv420p: true, fit: .crop).hasPrefix("zscale=w=1280:h=960:"))
        // 1442x1080 cropped to 16:9 would scale to 1280x959: rounded up to an even height (the
        // crop trims the extra row), so zscale too.
        #expect(Self.chain((1442, 1080), yuv420p: true, fit: .crop).hasPrefix("zscale=w=1280:h=960:"))
    }

    @Test func zscaleResizesWithSwscalesKernel() throws {
        // A detailed 1080p picture to 720p, by the chain's resize and by libswscale's bicubic: the
        // luma must be the same resize. Measured 70.6 dB; zimg's own bicubic (B = C = 1/3) gives
        // 65.2, spline36 59.4, libswscale's bilinear about 50.
        let zscale = String(Self.chain((1920, 1080), yuv420p: true).prefix { $0 != "," })
        let source = ["-v", "info", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=1,format=yuv420p", "-frames:v", "1"]
        let r = try run("ffmpeg", source + ["-filter_complex", "split[a][b];[a]scale=1280:720[s];[b]\(zscale)[z];[s][z]psnr", "-f", "null", "-"])
        #expect(r.status == 0, "\(r.err)")
        let y = r.err.components(separatedBy: "PSNR y:").last.flatMap { Double($0.prefix { $0 != " " }) } ?? 0
        #expect(y >= 68, "luma PSNR of \(zscale) against libswscale: \(y) dB\n\(r.err.suffix(400))")
    }
}
