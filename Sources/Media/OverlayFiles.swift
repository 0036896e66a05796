import Foundation
import Synchronization
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
            // Read as a photo is: a phone's JPEG turned by its EXIF orientation, HEIC (which
            // FFmpeg's movie source cannot open), a Display P3 profile. Those are drawn from an
            // upright sRGB PNG made here; any other image is used as it is (an animated one moves).
            let png = Scratch.path("img", suffix: ".png")
            made.append(png)
            if try OverlayImage.upright(image, what: what, maxSide: max(profile.width, profile.height), to: png) { return png }
            let ext = (image as NSString).pathExtension
            let p = Scratch.path("img", suffix: "." + (ext.isEmpty ? "png" : ext))
            made.append(p)
            let name = (image as NSString).lastPathComponent
            do { try FileManager.default.copyItem(atPath: image, toPath: p) } catch {
                unlink(p)   // half a copy (a full disk)
                throw MediaError(.transform, .permanent, file: name, "cannot read the \(what): \(FileChecks.reason(error))")
            }
            return p
        }
        do {
            if let text = edits.text, ShapedText.drawnByLibass(text.value) {
                // Words that join and reorder: libass draws them from its script (`ShapedText`).
                let folder = Scratch.path("lettering")
                made.append(folder)
                let chain = EditChain(edits: edits, profile: profile, files: .init())
                (paths.ass, paths.fonts) = try Fonts.shapedLettering(
                    font: text.font, text: text.value, size: EditChain.textSize(text, profile), colour: drawColour(text.color),
                    shadow: true, placement: .overlay(text.position, frameHeight: profile.height), profile: profile,
                    window: chain.windowEdges(text.start, text.end), folder: folder, file: name)
            } else if let text = edits.text {
                // Wrapped to the frame (drawtext draws one line, past both edges of a portrait
                // frame), a file per line, each placed on its own.
                paths.text = []
                for line in EditChain.textLines(text, profile) {
                    let p = Scratch.path("text", suffix: ".txt")
                    made.append(p)
                    try line.write(toFile: p, atomically: true, encoding: .utf8)
                    paths.text.append(p)
                }
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

/// A watermark or sticker image that the edit chain's movie source would draw other than a photo
/// item shows it.
public enum OverlayImage {
    /// What is said of a watermark or sticker image that is no picture, at submit and at render.
    public static func notAPicture(_ what: String, _ name: String, because reason: String) -> String {
        "the \(what) \(name) is not a picture that can be read (\(reason)): give a PNG, WebP, JPEG or HEIC image"
    }


    /// Writes `image` upright, in sRGB and at most `maxSide` pixels on its longer side to `png`
    /// (an RGBA PNG) when it is HEIC, turned or mirrored by its metadata, or carries a colour
    /// profile other than sRGB, and says so; false when it can be drawn as it is. An image that
    /// cannot be read as a picture is an error naming it.
    static func upright(_ image: String, what: String, maxSide: Int, to png: String) throws -> Bool {
        // A worker draws one watermark on every segment, and a phone's 12-megapixel JPEG takes
        // about 65 ms to decode: what was decided is remembered by the file's path, size and time.
        let attributes = try? FileManager.default.attributesOfItem(atPath: image)
        let key = Key(path: image, size: (attributes?[.size] as? NSNumber)?.int64Value ?? -1,
                      modified: (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0, maxSide: maxSide)
        if let known = decided.withLock({ $0[key] }) {
            guard let data = known else { return false }
            do { try data.write(to: URL(fileURLWithPath: png)) } catch {
                throw MediaError(.transform, .retryable, file: (image as NSString).lastPathComponent, "cannot write \(png): \(FileChecks.reason(error))", writing: error)
            }
            return true
        }
        let made = try make(image, what: what, maxSide: maxSide, to: png)
        let data = made ? try? Data(contentsOf: URL(fileURLWithPath: png)) : nil
        if !made || data != nil {
            decided.withLock { if $0.count >= 32 { $0.removeAll() }; $0[key] = .some(data) }
        }
        return made
    }

    struct Key: Hashable { var path: String; var size: Int64; var modified: Double; var maxSide: Int }
    private static let decided = Mutex<[Key: Data?]>([:])

    private static func make(_ image: String, what: String, maxSide: Int, to png: String) throws -> Bool {
        let name = (image as NSString).lastPathComponent
        let heif = Heif.isHeif(image)
        let still: (picture: Frame, orientation: Orientation?, converted: Bool)
        do { still = try PhotoRenderer.still(image, name: name) } catch let e as MediaError {
            throw MediaError(.transform, .permanent, file: name, notAPicture(what, name, because: e.message))
        }
        let turned = !(still.orientation?.filters.isEmpty ?? true)
        guard heif || turned || still.converted else { return false }
        let f = still.picture.ptr
        let chain = SourceColour(frame: f).toRGBA + (still.orientation?.filters ?? [])
            + ["scale=w='min(iw,\(maxSide))':h='min(ih,\(maxSide))':force_original_aspect_ratio=decrease:flags=lanczos", "format=rgba"]
        let filter = try VideoFilter(width: f.pointee.width, height: f.pointee.height, format: f.pointee.format, sar: AVRational(num: 1, den: 1),
                                     timeBase: AVRational(num: 1, den: 1), description: chain.joined(separator: ","), file: name)
        let upright = Frame()
        try filter.process(f, into: upright, file: name)
        try Thumbnails.writePNG(upright, to: png, name: name, alpha: true)
        return true
    }
}
