import Foundation
import Testing
@testable import Media
import ThreadlineCore
internal import CFFmpeg

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
            let chain = EditChain(edits: spec.edits, profile: spec.profile, files: .placeholders(spec.edits))
            let rendered = chain.description(for: EditChain.Source(orientation: nil, sar: AVRational(num: 1, den: 1), colour: .output))
            let fingerprint = EditChain.fingerprint(spec)
            #expect(fingerprint == rendered + (chain.scalesFirst ? " (scaled first)" : ""), "\(spec.edits)")
        }
    }

    @Test func everyEditChangesTheFingerprint() {
        let prints = Self.variants.map(EditChain.fingerprint)
        #expect(Set(prints).count == prints.count, "two different edits rendered the same chain: \(prints)")
    }
}
