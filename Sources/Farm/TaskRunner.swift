import Foundation
import ThreadlineCore

/// Runs one task in a worker slot. The real one uses Media; tests may use a fake.
public protocol TaskRunner: Sendable {
    func run(_ assignment: Assignment, isCancelled: @Sendable () -> Bool) -> TaskResult
    /// Verifies the artifact offered for reuse: a cached result, or a miss (no artifact, no error).
    func check(_ assignment: Assignment) -> TaskResult
}

extension TaskResult {
    public static func miss(_ a: Assignment) -> TaskResult {
        let now = Date().timeIntervalSince1970
        return TaskResult(lease: a.lease, error: nil, artifact: nil, facts: nil, segment: nil, startedAt: now, finishedAt: now,
                          cpuSeconds: 0, maxRSS: 0, cached: false)
    }
}
