import CSupport

/// Text for a line a command redraws in place on a terminal. Such a line must take one row: one
/// wider than the terminal wraps, and the redraw (a carriage return, or the cursor moved up a
/// row per line drawn) then leaves its first rows behind on every update — a 50-column pane
/// filled with copies of the progress line.
public enum TerminalText {
    /// Columns `text` takes on a terminal: wide characters (CJK, most emoji) two, combining marks
    /// none (a character is its first scalar's width), what glibc cannot tell one.
    public static func width(_ text: String) -> Int {
        text.reduce(0) { $0 + width(of: $1) }
    }

    /// `line` cut to take one row of a terminal `columns` wide, ending in "…" where cut. The last
    /// column stays free: some terminals move to the next row on writing it. Unknown width: as is.
    public static func fit(_ line: String, columns: Int?) -> String {
        guard let columns, columns > 1 else { return line }
        let room = columns - 1
        guard width(line) > room else { return line }
        return prefix(line, within: room - 1).text + "…"
    }

    /// `text` in exactly `columns` columns, for a table's column: padded with spaces, or cut in
    /// the middle with "…" so that both its start and its end (a project's file) show.
    public static func column(_ text: String, _ columns: Int) -> String {
        let w = width(text)
        guard w > columns else { return text + String(repeating: " ", count: columns - w) }
        let head = prefix(text, within: columns - 1 - (columns - 1) / 2)
        let tail = prefix(String(text.reversed()), within: columns - 1 - head.columns)
        return head.text + "…" + String(tail.text.reversed()) + String(repeating: " ", count: columns - 1 - head.columns - tail.columns)
    }

    /// The longest start of `text` that takes at most `room` columns, and the columns it takes.
    private static func prefix(_ text: String, within room: Int) -> (text: String, columns: Int) {
        var kept = "", used = 0
        for c in text {
            let w = width(of: c)
            if used + w > room { break }
            used += w
            kept.append(c)
        }
        return (kept, used)
    }

    /// Columns of the terminal standard error is; nil when it is not one or does not say.
    public static func columns() -> Int? {
        let n = Int(tl_terminal_columns(2))
        return n > 0 ? n : nil
    }

    private static func width(of c: Character) -> Int {
        guard !c.isASCII, let s = c.unicodeScalars.first else { return 1 }
        let w = Int(tl_column_width(s.value))
        return w < 0 ? 1 : w
    }
}
