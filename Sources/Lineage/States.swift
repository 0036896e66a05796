/// The states lineage records — the only values its `state` columns take. Queries and dashboards
/// read these strings (`rawValue`); the coordinator writes them only through these types.
public enum RunStatus: String, Sendable, CaseIterable {
    case running, succeeded, failed, cancelled
    /// Its coordinator stopped before it ended; submitting it again resumes it.
    case interrupted

    /// The states a run ends in, as an SQL list (`'succeeded', 'failed', 'cancelled'`): an
    /// interrupted run is resumed. (Migrations spell it out: they stay as they were written.)
    static let endedSQL = [RunStatus.succeeded, .failed, .cancelled].map { "'\($0.rawValue)'" }.joined(separator: ", ")
    /// States a run does not leave (an interrupted run is resumed).
    public var isEnd: Bool { self == .succeeded || self == .failed || self == .cancelled }
}

public enum StageStatus: String, Sendable, CaseIterable {
    case pending, ready, running, succeeded, failed, cancelled
    /// States a stage does not leave.
    public var isEnd: Bool { self == .succeeded || self == .failed || self == .cancelled }
}

public enum AttemptStatus: String, Sendable, CaseIterable {
    case running, succeeded
    /// A verified artifact from an earlier attempt was reused.
    case cached
    /// A cache check found the recorded artifact missing or altered; the stage renders for real.
    case missed
    case failed, cancelled
    /// Its worker died or could not be reached; the stage is queued again.
    case lost
    /// Its worker gave it back unstarted or unfinished (a drain); not a failure.
    case handedBack = "handed_back"
}

public enum WorkerStatus: String, Sendable, CaseIterable {
    case up, draining
    /// Left on its own, every result delivered.
    case gone
    /// Silent past the liveness timeout.
    case lost
    /// Its results did not verify: it gets no more work.
    case quarantined
}
