/// A place in a pipeline file.
public struct SourceLocation: Sendable, Hashable, Codable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int
    public init(file: String, line: Int, column: Int) {
        self.file = file; self.line = line; self.column = column
    }
    public var description: String { "\(file):\(line):\(column)" }
}

/// An error in a pipeline file: where, what, and what to do about it; with the other errors
/// found in the same pass (another item's missing file), which it reports after itself.
public struct PipelineError: Error, Sendable, CustomStringConvertible, Equatable {
    public var location: SourceLocation?
    public var message: String
    public var hint: String?
    public var more: [PipelineError] = []

    /// The most errors one report lists; past it, a count of the rest.
    public static let reportLimit = 20

    public init(_ message: String, at location: SourceLocation?, hint: String? = nil) {
        self.message = message; self.location = location; self.hint = hint
    }

    /// The first of `errors`, carrying the rest (at least one error).
    public static func combined(_ errors: [PipelineError]) -> PipelineError {
        var first = errors[0]
        first.more = Array(errors.dropFirst())
        return first
    }

    /// The error on one line, as a report's column or a coordinator's refusal carries it: its
    /// place, its message and its hint after a semicolon, without the leading "error: " the line
    /// it goes into says already (a refused submit printed "the coordinator refused: error: …").
    public var line: String {
        (location.map { "\($0): " } ?? "") + message + (hint.map { "; \($0)" } ?? "")
    }

    /// `error` on one line: a pipeline error's `line`, any other error as it describes itself.
    public static func line(_ error: any Error) -> String { (error as? PipelineError)?.line ?? "\(error)" }

    public var description: String {
        var s = location.map { "\($0): error: " } ?? "error: "
        s += message
        if let hint { s += "\n  hint: \(hint)" }
        for e in more.prefix(Self.reportLimit - 1) { s += "\n" + e.description }
        if more.count >= Self.reportLimit { s += "\nerror: \(more.count + 1 - Self.reportLimit) more errors in \(location?.file ?? "the pipeline") not shown" }
        return s
    }
}

/// A note about a pipeline (what it asks for that the movie will not have; the render goes on),
/// written as an error is: "file:line:col: note: message".
public func pipelineNote(_ message: String, at location: SourceLocation?) -> String {
    (location.map { "\($0): " } ?? "") + "note: " + message
}

/// Edit distance, for "did you mean" suggestions.
func levenshtein(_ a: String, _ b: String) -> Int {
    let a = Array(a.lowercased()), b = Array(b.lowercased())
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var prev = Array(0...b.count)
    var cur = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        cur[0] = i
        for j in 1...b.count {
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&prev, &cur)
    }
    return prev[b.count]
}

/// The closest candidate to `word`, if it is close enough to be a likely misspelling.
public func suggestion(for word: String, among candidates: [String]) -> String? {
    let scored = candidates.map { ($0, levenshtein(word, $0)) }.sorted { $0.1 < $1.1 }
    guard let best = scored.first else { return nil }
    let limit = max(2, word.count / 3)
    return best.1 <= limit ? best.0 : nil
}
