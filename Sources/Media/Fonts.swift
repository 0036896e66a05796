import Foundation
import CFreeType
import CFontconfig
import ThreadlineCore

/// What a font can draw, asked before rendering. FFmpeg's drawtext draws every character with
/// the one font it is given, with no fallback: a character the font lacks is drawn as an empty
/// box ("日本" and most emoji in DejaVu Sans), and the movie shows boxes where the words were.
public enum Fonts {
    /// A font file FreeType (and so drawtext) cannot open.
    public struct Unreadable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The characters of `text` that `font` has no glyph for, each once, in order of appearance.
    /// Spaces, line breaks and the invisible joiners and selectors inside emoji are not drawn, so
    /// they are not asked about.
    public static func missing(in text: String, font: String) throws(Unreadable) -> [Character] {
        try Face(font).missing(in: text)
    }

    /// A font installed on this machine that draws every character of `text`: fontconfig's
    /// choices for those characters (as a browser falls back for a page's words), outline fonts
    /// only (drawtext draws no colour emoji), the first face of its file (the one drawtext opens),
    /// checked with FreeType as drawtext will read it. Nil when none draws them all.
    public static func fallback(covering text: String) -> String? {
        let visible = text.unicodeScalars.filter { !isInvisible($0) }
        guard !visible.isEmpty, FcInit() != 0, let config = FcConfigGetCurrent(),
              let wanted = FcCharSetCreate(), let pattern = FcPatternCreate() else { return nil }
        defer { FcCharSetDestroy(wanted); FcPatternDestroy(pattern) }
        for s in visible { FcCharSetAddChar(wanted, s.value) }
        FcPatternAddCharSet(pattern, FC_CHARSET, wanted)
        FcPatternAddBool(pattern, FC_OUTLINE, FcBool(FcTrue))
        _ = "sans-serif".withCString { FcPatternAddString(pattern, FC_FAMILY, UnsafeRawPointer($0).assumingMemoryBound(to: FcChar8.self)) }
        FcConfigSubstitute(config, pattern, FcMatchPattern)
        FcDefaultSubstitute(pattern)
        var result = FcResultNoMatch
        guard let sorted = FcFontSort(config, pattern, FcBool(FcFalse), nil, &result) else { return nil }
        defer { FcFontSetDestroy(sorted) }
        for k in 0..<Int(sorted.pointee.nfont) {
            guard let font = sorted.pointee.fonts[k] else { continue }
            var file: UnsafeMutablePointer<FcChar8>?, index: Int32 = 0, colour: FcBool = FcBool(FcFalse), outline: FcBool = FcBool(FcTrue)
            var has: OpaquePointer?
            guard FcPatternGetString(font, FC_FILE, 0, &file) == FcResultMatch, let file,
                  FcPatternGetCharSet(font, FC_CHARSET, 0, &has) == FcResultMatch, let has, FcCharSetIsSubset(wanted, has) != 0 else { continue }
            _ = FcPatternGetInteger(font, FC_INDEX, 0, &index)
            _ = FcPatternGetBool(font, FC_COLOR, 0, &colour)
            _ = FcPatternGetBool(font, FC_OUTLINE, 0, &outline)
            guard index == 0, colour == FcBool(FcFalse), outline != FcBool(FcFalse) else { continue }
            let path = String(cString: UnsafeRawPointer(file).assumingMemoryBound(to: CChar.self))
            if let face = try? Face(path), face.missing(in: text).isEmpty { return path }
        }
        return nil
    }

    /// One font file, open.
    final class Face {
        private let library: FT_Library
        private let face: FT_Face
        init(_ path: String) throws(Unreadable) {
            var library: FT_Library?
            guard FT_Init_FreeType(&library) == 0, let library else { throw Unreadable(description: "FreeType could not start") }
            var face: FT_Face?
            let error = FT_New_Face(library, path, 0, &face)
            guard error == 0, let face else {
                FT_Done_FreeType(library)
                let why = [1: "cannot open it", 2: "not a font format it knows", 3: "the file is damaged"][Int(error)] ?? "FreeType error \(error)"
                throw Unreadable(description: "\(path) is not a font FreeType can read (\(why)): give a .ttf, .otf or .ttc file")
            }
            self.library = library; self.face = face
        }
        deinit { FT_Done_Face(face); FT_Done_FreeType(library) }

        /// Its family name ("Lohit Devanagari"), as libass looks fonts up.
        var family: String { face.pointee.family_name.map { String(cString: $0) } ?? "" }

        /// How many ems tall libass takes a font size of this font to be: libass (as VSFilter)
        /// sizes a font so that its OS/2 win ascent plus descent is the size, or its hhea
        /// ascender less descender without an OS/2 table.
        var heightPerEm: Double {
            let em = Double(face.pointee.units_per_EM)
            guard em > 0 else { return 1 }
            if let os2 = FT_Get_Sfnt_Table(face, FT_SFNT_OS2)?.assumingMemoryBound(to: TT_OS2.self),
               case let h = Double(os2.pointee.usWinAscent) + Double(os2.pointee.usWinDescent), h > 0 {
                return h / em
            }
            let h = Double(face.pointee.ascender) - Double(face.pointee.descender)
            return h > 0 ? h / em : 1
        }

        func missing(in text: String) -> [Character] {
            var seen = Set<Character>(), missing: [Character] = []
            for c in text where seen.insert(c).inserted {
                if c.unicodeScalars.contains(where: { !isInvisible($0) && FT_Get_Char_Index(face, FT_ULong($0.value)) == 0 }) { missing.append(c) }
            }
            return missing
        }
    }

    /// Not drawn as a glyph of its own: white space and line breaks, format characters (the zero
    /// width joiner of 👨‍👩‍👧) and variation selectors (the emoji style of ❤️).
    static func isInvisible(_ s: Unicode.Scalar) -> Bool {
        if s.properties.isWhitespace { return true }
        switch s.properties.generalCategory {
        case .format, .control, .lineSeparator, .paragraphSeparator: return true
        default: break
        }
        return (0xFE00...0xFE0F).contains(s.value) || (0xE0100...0xE01EF).contains(s.value)
    }

    /// Characters a font lacks, as a note lists them: the first eight, and how many more.
    static func listed(_ lacking: [Character]) -> String {
        lacking.prefix(8).map(String.init).joined(separator: " ") + (lacking.count > 8 ? " and \(lacking.count - 8) more" : "")
    }

    /// Writes what libass needs to draw `text` in `font` (`ShapedText`): the ASS script and a
    /// folder holding only the font (a link to it), both under `folder`. Returns their paths.
    static func shapedLettering(font: String, text: String, size: Int, colour: String, shadow: Bool, placement: ShapedText.Placement,
                                profile: OutputProfile, window: (from: Double, to: Double)?, folder: String, file: String) throws -> (script: String, fonts: String) {
        let face: Face
        do throws(Unreadable) { face = try Face(font) } catch { throw MediaError(.transform, .permanent, file: file, "font: \(error.description)") }
        let fonts = folder + "/fonts"
        let script = folder + "/lettering.ass"
        do {
            try FileManager.default.createDirectory(atPath: fonts, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: fonts + "/" + "font", withDestinationPath: font)
            try ShapedText.script(text: text, size: size, family: face.family, heightPerEm: face.heightPerEm, colour: colour, shadow: shadow,
                                  placement: placement, width: profile.width, height: profile.height, window: window)
                .write(toFile: script, atomically: true, encoding: .utf8)
        } catch {
            throw MediaError(.transform, .retryable, file: file, "cannot write the lettering's files under \(folder): \(FileChecks.reason(error))", writing: error)
        }
        return (script, fonts)
    }

    /// The pipeline's words (titles and text over items) against their fonts, before rendering.
    /// Words the default font cannot draw get a font installed here that can (`fallback(covering:)`),
    /// as a browser would, which then is one of the pipeline's files (a remote submit sends it);
    /// words in another font the pipeline names are left in it. Returns the notes `coord plan`
    /// and `coord submit` print, with each item's file:line:col: which font draws them now, or
    /// which characters will be empty boxes; throws for a font that cannot be read at all
    /// (drawtext would fail on every worker).
    public static func lettering(_ pipeline: inout Pipeline) throws -> [String] {
        var notes: [String] = []
        var faces: [String: Face] = [:], chosen: [String: String?] = [:]
        let defaultName = (Title.defaultFont as NSString).lastPathComponent
        for i in pipeline.items.indices {
            let item = pipeline.items[i]
            var words: [(what: String, its: String, text: String, font: String)] = []
            if case .title(let t) = item.kind { words.append(("the title", "the title", t.text, t.font)) }
            if let t = item.edits.text { words.append(("text", "its text", t.value, t.font)) }
            for w in words {
                let lacking: [Character]
                do throws(Unreadable) {
                    if faces[w.font] == nil { faces[w.font] = try Face(w.font) }
                    lacking = faces[w.font]!.missing(in: w.text)
                } catch {
                    throw PipelineError("\(item.label(index: i)): font: \(error.description)", at: item.location)
                }
                guard !lacking.isEmpty else { continue }
                let one = lacking.count == 1
                if w.font == Title.defaultFont {
                    if chosen[w.text] == nil { chosen[w.text] = fallback(covering: w.text) }
                    if let font = chosen[w.text]! {
                        if case .title(var t) = pipeline.items[i].kind, w.what == "the title" {
                            t.font = font
                            pipeline.items[i].kind = .title(t)
                        } else {
                            pipeline.items[i].edits.text?.font = font
                        }
                        notes.append(pipelineNote("\(item.label(index: i)): the default font \(defaultName) has no \(listed(lacking)): "
                            + "\(w.its) is drawn with \(font), installed here, which has \(one ? "it" : "them") (font: PATH chooses another)", at: item.location))
                        continue
                    }
                }
                notes.append(pipelineNote("\(item.label(index: i)): the font \((w.font as NSString).lastPathComponent) has no \(listed(lacking)): "
                    + "\(one ? "it is" : "they are") drawn as \(one ? "an empty box" : "empty boxes"); give \(w.what) a font that has \(one ? "it" : "them") (font: PATH)"
                    + (w.font == Title.defaultFont ? ", or install one (none here has \(one ? "it" : "them all"))" : ""), at: item.location))
            }
        }
        return notes
    }
}
