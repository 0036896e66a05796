import Foundation

/// Words in scripts whose letters change shape and order as they join: Indic scripts (Hindi's
/// Devanagari, Bengali, Tamil, …), Sinhala, Thai, Lao, Tibetan, Myanmar, Khmer. FFmpeg 5.1's
/// drawtext places one glyph per character (it has no HarfBuzz): "दिवाली" came out as "दविाली",
/// the vowel sign after its consonant. Such lettering is drawn by libass (FFmpeg's `ass` filter),
/// which shapes with HarfBuzz, from an ASS script written here; all other lettering stays with
/// drawtext, pixel for pixel as before.
public enum ShapedText {
    /// The blocks whose text needs shaping beyond what drawtext does (it reorders right-to-left
    /// text and joins Arabic through FriBidi).
    static let blocks: [ClosedRange<UInt32>] = [
        0x0900...0x0DFF,   // Devanagari, Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada, Malayalam, Sinhala
        0x0E00...0x0FFF,   // Thai, Lao, Tibetan
        0x1000...0x109F,   // Myanmar
        0x1780...0x17FF,   // Khmer
        0x19E0...0x19FF,   // Khmer symbols
        0x1CD0...0x1CFF,   // Vedic extensions
        0xA8E0...0xA8FF,   // Devanagari extended
        0xA9E0...0xA9FF,   // Myanmar extended-B
        0xAA60...0xAA7F,   // Myanmar extended-A
        0x11000...0x1107F, // Brahmi
    ]

    /// Whether `text` is drawn by libass: it has a letter of those scripts, and none of the
    /// characters an ASS line takes as commands (`{`, `}`, `\`), which stay with drawtext.
    public static func drawnByLibass(_ text: String) -> Bool {
        var complex = false
        for s in text.unicodeScalars {
            if s == "{" || s == "}" || s == "\\" { return false }
            if !complex, blocks.contains(where: { $0.contains(s.value) }) { complex = true }
        }
        return complex
    }

    /// How the lettering is placed: ASS's numpad alignment and margins, in the frame's pixels.
    public struct Placement: Sendable, Equatable {
        public var alignment: Int
        public var marginH: Int
        public var marginV: Int
        public init(alignment: Int, marginH: Int, marginV: Int) { self.alignment = alignment; self.marginH = marginH; self.marginV = marginV }

        /// A text overlay's place (5 % of the frame's height from its edges, as drawtext's are).
        public static func overlay(_ position: TextOverlay.Position, frameHeight: Int) -> Placement {
            let m = Int((Double(frameHeight) * 0.05).rounded())
            let alignment: Int
            switch position {
            case .bottomLeft: alignment = 1
            case .bottom: alignment = 2
            case .bottomRight: alignment = 3
            case .center: alignment = 5
            case .topLeft: alignment = 7
            case .top: alignment = 8
            case .topRight: alignment = 9
            }
            return Placement(alignment: alignment, marginH: m, marginV: m)
        }

        /// A title card's: centred, within the 86 % of the frame's width its lines are wrapped to.
        public static func title(frameWidth: Int) -> Placement {
            Placement(alignment: 5, marginH: Int((Double(frameWidth) * 0.07).rounded()), marginV: 0)
        }
    }

    /// An ASS script drawing `text` at `size` pixels to the em (the layout's, shrunk to fit as
    /// drawtext's is) on a
    /// `width`x`height` frame: `family` is the font's family name, `heightPerEm` how many ems
    /// tall libass takes a font size to be (its OS/2 win ascent plus descent over its units per
    /// em), `colour` "0xRRGGBB" as the frame's filters take it, `shadow` drawtext's overlay shadow
    /// (2 px, black at 60 %), `window` the seconds it shows (nil: all along). Its lines are the text's own; libass
    /// breaks them where wider than the frame between the margins, by the glyphs' real widths
    /// (the layout's estimate, made for Latin letters, falls short for joined ones), into lines
    /// of about equal width.
    public static func script(text: String, size: Int, family: String, heightPerEm: Double, colour: String, shadow: Bool,
                              placement: Placement, width: Int, height: Int, window: (from: Double, to: Double)?) -> String {
        // "0xRRGGBB" (`filterColor`, `drawColour`; their "black" for a colour they cannot read).
        let hex = colour.hasPrefix("0x") && colour.count == 8 ? String(colour.dropFirst(2)) : "000000"
        let r = hex.prefix(2), g = hex.dropFirst(2).prefix(2), b = hex.suffix(2)
        let primary = "&H00\(b)\(g)\(r)"
        let fontSize = String(format: "%.2f", Double(size) * heightPerEm)
        // Names with commas would split the style's fields.
        let name = family.replacingOccurrences(of: ",", with: " ")
        func time(_ s: Double) -> String {
            let cs = Int((max(0, s) * 100).rounded(.up))
            return String(format: "%d:%02d:%02d.%02d", cs / 360_000, cs / 6000 % 60, cs / 100 % 60, cs % 100)
        }
        let from = window.map { time($0.from) } ?? "0:00:00.00", to = window.map { time($0.to) } ?? "9:59:59.99"
        return """
            [Script Info]
            ScriptType: v4.00+
            PlayResX: \(width)
            PlayResY: \(height)
            WrapStyle: 0
            ScaledBorderAndShadow: yes

            [V4+ Styles]
            Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding
            Style: Lettering,\(name),\(fontSize),\(primary),\(primary),&H00000000,&H66000000,0,0,0,0,100,100,0,0,1,0,\(shadow ? 2 : 0),\(placement.alignment),\(placement.marginH),\(placement.marginH),\(placement.marginV),1

            [Events]
            Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text
            Dialogue: 0,\(from),\(to),Lettering,,0,0,0,,\(text.components(separatedBy: "\n").joined(separator: "\\N"))

            """
    }
}
