import Foundation

/// An exact rational number, for frame rates and time bases.
public struct Rational: Sendable, Hashable, Codable, CustomStringConvertible {
    public var num: Int
    public var den: Int
    public init(_ num: Int, _ den: Int) {
        precondition(den != 0)
        let g = Rational.gcd(abs(num), abs(den))
        let sign = den < 0 ? -1 : 1
        self.num = sign * num / max(g, 1); self.den = sign * den / max(g, 1)
    }
    public var double: Double { Double(num) / Double(den) }
    public var description: String { den == 1 ? "\(num)" : "\(num)/\(den)" }
    static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    /// Common frame rates written as decimals (29.97) become their exact NTSC fractions.
    public static func frameRate(_ value: Double) -> Rational {
        for base in [24, 30, 60, 120] {
            let ntsc = Double(base) * 1000 / 1001
            if abs(value - ntsc) < 0.005 { return Rational(base * 1000, 1001) }
        }
        if value == value.rounded() { return Rational(Int(value), 1) }
        return Rational(Int((value * 1000).rounded()), 1000)
    }
}

/// Exact timeline arithmetic: frames at a rate, and the audio samples they span.
public enum Timing {
    public static let sampleRate = 48_000

    /// Number of output frames for a span of seconds (nearest whole frame, at least 1).
    public static func frames(seconds: Double, fps: Rational) -> Int {
        max(1, Int((seconds * Double(fps.num) / Double(fps.den)).rounded()))
    }
    /// Seconds at which frame `n` starts.
    public static func seconds(frames n: Int, fps: Rational) -> Double {
        Double(n) * Double(fps.den) / Double(fps.num)
    }
    /// Audio sample index at which frame `n` starts (exact floor; no drift over a timeline).
    public static func samples(atFrame n: Int, fps: Rational) -> Int {
        (n * sampleRate * fps.den) / fps.num
    }
    /// Samples a segment of `frames` frames must carry so that any timeline position can take its
    /// exact share: the ceiling of frames × 48000 / fps.
    public static func segmentSamples(frames: Int, fps: Rational) -> Int {
        let n = frames * sampleRate * fps.den
        return (n + fps.num - 1) / fps.num
    }
}

/// Parses "2.5", "2.5s", "00:00:02.500", "1:02.5" into seconds.
public func parseTime(_ text: String) -> Double? {
    var s = text.trimmingCharacters(in: .whitespaces)
    if s.hasSuffix("s") { s.removeLast() ; return Double(s).flatMap { $0.isFinite ? $0 : nil } }
    let parts = s.split(separator: ":", omittingEmptySubsequences: false)
    guard (1...3).contains(parts.count) else { return nil }
    var total = 0.0
    for (i, p) in parts.enumerated() {
        guard let v = Double(p), v.isFinite, v >= 0 || parts.count == 1 else { return nil }
        if i < parts.count - 1 && (v != v.rounded() || v < 0) { return nil }
        total = total * 60 + v
    }
    return total
}
