/// Which run gets the next free slot: the highest priority; among equals, the run with the fewest
/// attempts running (fair share), then the oldest.
public enum FairShare {
    public struct Candidate: Sendable, Equatable {
        public var run: Int64
        public var priority: Int
        public var running: Int
        public init(run: Int64, priority: Int, running: Int) { self.run = run; self.priority = priority; self.running = running }
    }

    public static func pick(_ candidates: [Candidate]) -> Int64? {
        candidates.min { a, b in (-a.priority, a.running, a.run) < (-b.priority, b.running, b.run) }?.run
    }
}

/// What happens after a failed attempt: retried after an exponential backoff, or the end of the run.
public enum RetryPolicy {
    public enum Decision: Sendable, Equatable {
        case retry(notBefore: Double)
        case fail
    }

    /// `attempts`: tries so far, this one included. `jitter` (0.8…1.2 in production, fixed in tests)
    /// spreads retries of stages that failed together.
    public static func decide(retryable: Bool, attempts: Int, maxAttempts: Int, now: Double, base: Double, jitter: Double) -> Decision {
        guard retryable && attempts < maxAttempts else { return .fail }
        return .retry(notBefore: now + delay(attempts: attempts, base: base, jitter: jitter))
    }

    /// base × 2^attempts (capped at 2^6) × jitter.
    public static func delay(attempts: Int, base: Double, jitter: Double) -> Double {
        base * Double(1 << min(max(attempts, 0), 6)) * jitter
    }

    /// A stage whose attempts took down this many workers is poison: not tried again.
    public static func isPoison(lostWorkers: Int, limit: Int) -> Bool { lostWorkers >= limit }
}
