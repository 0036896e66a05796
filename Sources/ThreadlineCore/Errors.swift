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

/// An error in a pipeline file: where, what, and what to do about it.
public struct PipelineError: Error, Sendable, CustomStringConvertible, Equatable {
    public var location: SourceLocation?
    public var message: String
    public var hint: String?

    public init(_ message: String, at location: SourceLocation?, hint: String? = nil) {
        self.message = message; self.location = location; self.hint = hint
    }

    public var description: String {
        var s = location.map { "\($0): error: " } ?? "error: "
        s += message
        if let hint { s += "\n  hint: \(hint)" }
        return s
    }
}

/// Several pipeline errors found in one pass, reported together.
public struct PipelineErrors: Error, Sendable, CustomStringConvertible {
    public var errors: [PipelineError]
    public init(_ errors: [PipelineError]) { self.errors = errors }
    public var description: String { errors.map(\.description).joined(separator: "\n") }
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
