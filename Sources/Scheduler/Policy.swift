/// Which run gets the next free slot. Owners first: the owner (a submitter's key) whose runs hold
/// the fewest slots, so a person with one project is not starved by another's batch of a hundred
/// (ties: the owner waiting longest, by its oldest run). Then, among that owner's runs, the highest
/// priority; among equals, a run whose next stage is short joining work (a fetch, which tells the
/// run's length; a transition; the concat, which finishes a movie) before renders; then the run
/// with the fewest attempts running (fair share), then the oldest. With one owner (a farm without
/// keys), it is priority, short work, fair share and age alone.
public enum FairShare {
    public struct Candidate: Sendable, Equatable {
        public var run: Int64
        public var priority: Int
        public var running: Int
        /// Who submitted the run (nil: the farm's own user).
        public var owner: String?
        /// Slots all of the owner's runs hold, those with nothing to dispatch now included.
        public var ownerRunning: Int
        /// The run's next stage is short joining work, not a render.
        public var short: Bool
        public init(run: Int64, priority: Int, running: Int, owner: String? = nil, ownerRunning: Int = 0, short: Bool = false) {
            self.run = run; self.priority = priority; self.running = running; self.owner = owner; self.ownerRunning = ownerRunning
            self.short = short
        }
    }

    public static func pick(_ candidates: [Candidate]) -> Int64? {
        guard let first = candidates.first else { return nil }
        var pool = candidates[...]
        if candidates.contains(where: { $0.owner != first.owner }) {
            var owners: [String?: (running: Int, oldest: Int64)] = [:]
            for c in candidates { owners[c.owner] = (c.ownerRunning, min(owners[c.owner]?.oldest ?? c.run, c.run)) }
            let owner = owners.min { ($0.value.running, $0.value.oldest) < ($1.value.running, $1.value.oldest) }!.key
            pool = candidates.filter { $0.owner == owner }[...]
        }
        return pool.min { a, b in (-a.priority, a.short ? 0 : 1, a.running, a.run) < (-b.priority, b.short ? 0 : 1, b.running, b.run) }?.run
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
