import Foundation
import Testing
import ThreadlineCore
@testable import Media

/// What a font can draw (`Fonts`), asked with FreeType before anything renders.
struct FontsTests {
    /// DejaVu Sans (the default) has Latin with its accents, dashes and fractions, but no
    /// Chinese or Japanese and few emoji: those are named, each once, in order.
    @Test func charactersTheFontLacksAreNamedOnceInOrder() throws {
        let missing = try Fonts.missing(in: "Zoë — ½ 日本 🏖️ 日 a", font: Title.defaultFont)
        #expect(missing == ["日", "本", "🏖️"])
        #expect(try Fonts.missing(in: "June 3, 2026 — Zoë & José", font: Title.defaultFont) == [])
    }

    /// White space, line breaks, joiners and variation selectors are never drawn as glyphs of
    /// their own, so a font without them is not said to lack anything.
    @Test func invisibleCharactersAreNotAskedAbout() throws {
        for s in ["\n", " ", "\t", "\u{200D}", "\u{FE0F}", "\u{FE0E}", "\u{2028}"] {
            #expect(Fonts.isInvisible(s.unicodeScalars.first!), "\(s.unicodeScalars.first!.value)")
        }
        #expect(!Fonts.isInvisible("a") && !Fonts.isInvisible("日"))
        #expect(try Fonts.missing(in: "a\u{200D}b\u{FE0F}\n c\u{2028}d", font: Title.defaultFont) == [])
    }

    /// A file that is not a font is an error naming it, as drawtext would fail on it.
    @Test func aFileThatIsNotAFontIsRefused() throws {
        let path = NSTemporaryDirectory() + "not-a-font-\(UUID().uuidString).ttf"
        try "hello".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: Fonts.Unreadable.self) { try Fonts.missing(in: "a", font: path) }
        do { _ = try Fonts.missing(in: "a", font: path) } catch {
            #expect(error.description == "\(path) is not a font FreeType can read (not a font format it knows): give a .ttf, .otf or .ttc file")
        }
    }
}
