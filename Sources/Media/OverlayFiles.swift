import Foundation
import ThreadlineCore
internal import CFFmpeg

extension EditChain.Source {
    /// A decoded picture: its orientation, sample aspect ratio and colour as FFmpeg reports them.
    /// `format`: the decoded pixel format, when its transparency should show the background.
    init(orientation: Orientation?, sar: AVRational, colour: SourceColour, size: (width: Int, height: Int)? = nil, format: Int32? = nil) {
        let transparency = format.flatMap { colour.transparency(format: $0) }
        let picture = transparency == nil ? colour : .sRGB    // what the chain sees after compositing
        self.init(orientation: orientation.map { EditChain.Upright(filters: $0.filters, clockwise: $0.clockwise) },
                  sar: (Int(sar.num), Int(sar.den)), toOutput: picture.toOutput, size: size, yuv420p: picture.yuv420p, transparency: transparency)
    }
}

/// The files a chain reads besides the picture: the text overlay's words and the watermark and
/// sticker images, copied under names that need no escaping in a filter graph (removed with this object).
final class OverlayFiles {
    typealias Paths = EditChain.Files
    let paths: Paths
    private let made: [String]

    init(edits: Edits, profile: OutputProfile, name: String) throws {
        var paths = Paths()
        var made: [String] = []
        func copy(_ image: String, what: String) throws -> String {
            let ext = (image as NSString).pathExtension
            let p = Scratch.path("img", suffix: "." + (ext.isEmpty ? "png" : ext))
            do { try FileManager.default.copyItem(atPath: image, toPath: p) } catch {
                unlink(p)   // half a copy (a full disk)
                throw MediaError(.transform, .permanent, file: (image as NSString).lastPathComponent,
                                 "cannot read the \(what): \(FileChecks.reason(error))")
            }
            made.append(p)
            return p
        }
        do {
            if let text = edits.text {
                let p = Scratch.path("text", suffix: ".txt")
                // Wrapped to the frame: drawtext draws one line, past both edges of a portrait frame.
                let lines = TitleRenderer.wrap(text.value, maxCharacters: EditChain.textLineCharacters(text, profile))
                try lines.joined(separator: "\n").write(toFile: p, atomically: true, encoding: .utf8)
                made.append(p); paths.text = p
                paths.font = try Scratch.graphName(text.font, link: Scratch.path("font"), what: "font", file: name)
                if paths.font != text.font { made.append(paths.font!) }
            }
            if let w = profile.watermark { paths.watermark = try copy(w.image, what: "watermark image") }
            paths.stickers = try edits.stickers.map { try copy($0.image, what: "sticker image") }
        } catch {
            for p in made { try? FileManager.default.removeItem(atPath: p) }
            throw error
        }
        self.paths = paths
        self.made = made
    }
    deinit { for p in made { try? FileManager.default.removeItem(atPath: p) } }
}
