import Testing
import ThreadlineCore

/// Lines redrawn in place are cut to the terminal's width by the columns they take, not by their
/// characters: a CJK title or an emoji takes two.
@Suite struct TerminalTextTests {
    @Test func widthsAreColumnsNotCharacters() {
        #expect(TerminalText.width("holiday") == 7)
        #expect(TerminalText.width("東京 2026") == 9)
        #expect(TerminalText.width("🎉") == 2)
        #expect(TerminalText.width("Mu\u{308}ller") == 6)   // u + combining diaeresis: one column
        #expect(TerminalText.width("[███···]") == 8)
    }

    @Test func aLineWiderThanTheTerminalIsCutWithAnEllipsisLeavingTheLastColumn() {
        let line = "0/1 projects done · 2/7 items · 1 running · ETA 0:07"
        let cut = TerminalText.fit(line, columns: 40)
        #expect(cut == "0/1 projects done · 2/7 items · 1 runn…")
        #expect(TerminalText.width(cut) == 39)
        // One that fits, with the last column free, is left as it is.
        #expect(TerminalText.fit("12345", columns: 6) == "12345")
        #expect(TerminalText.fit("123456", columns: 6) == "1234…")
        // A wide character that would straddle the edge goes whole.
        #expect(TerminalText.fit("ab東京都", columns: 7) == "ab東…")
        #expect(TerminalText.width(TerminalText.fit("ab東京都", columns: 7)) <= 6)
        // No width known (not a terminal, or it does not say): as it is.
        #expect(TerminalText.fit(line, columns: nil) == line)
    }

    /// A table's column (the batch summary, a project's live line) lines up whatever script the
    /// names are in: padded and cut by columns.
    @Test func aColumnIsPaddedOrCutInTheMiddleByColumns() {
        #expect(TerminalText.column("holiday", 10) == "holiday   ")
        #expect(TerminalText.column("東京", 6) == "東京  ")
        #expect(TerminalText.column("Summer holiday with the grandparents", 24) == "Summer holid…randparents")
        let cut = TerminalText.column("東京旅行の思い出ｰ夏休み", 11)
        #expect(TerminalText.width(cut) == 11 && cut.hasPrefix("東京") && cut.contains("…"), "\(cut)")
        for name in ["a", "東京旅行2026", "🎉🎉🎉 party", "plain-ascii-project-name-that-is-long"] {
            for n in 2...30 { #expect(TerminalText.width(TerminalText.column(name, n)) == n, "\(name) in \(n)") }
        }
    }
}
