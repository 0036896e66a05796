import CoreMetrics
import Foundation

/// What the lineage records, counted as it is recorded, and the bytes the farm moves (swift-metrics;
/// `coord serve --http` exports them for Prometheus, other processes leave the no-op backend in
/// place). Counting where the rows change keeps `threadline_stages_total` equal to lineage's own counts.
public enum FarmMetrics {
    public static let stagesTotal = "threadline_stages_total"
    public static let stageDuration = "threadline_stage_duration_seconds"
    public static let cacheHitsTotal = "threadline_cache_hits_total"
    public static let lineageWriteSeconds = "threadline_lineage_write_seconds"
    public static let transferBytesTotal = "threadline_transfer_bytes_total"
    public static let transferKeptBytesTotal = "threadline_transfer_kept_bytes_total"

    /// Artifact bytes that came in (`received`: uploads, workers' results) or went out (inputs to
    /// workers, movies to submitters).
    public static func transferred(bytes: Int, received: Bool) {
        guard bytes > 0 else { return }
        Counter(label: transferBytesTotal, dimensions: [("direction", received ? "received" : "sent")]).increment(by: Int64(bytes))
    }

    /// Bytes a transfer did not ask for again: kept from one that was cut off.
    public static func transferKept(bytes: Int64) {
        guard bytes > 0 else { return }
        Counter(label: transferKeptBytesTotal).increment(by: bytes)
    }

    /// Stage states that end a stage.
    public static let endStates: Set<String> = Set(StageStatus.allCases.filter(\.isEnd).map(\.rawValue))

    /// The outcome label of an ended stage: succeeded, cached, failed or cancelled.
    public static func outcome(state: String, cached: Bool) -> String { state == "succeeded" && cached ? "cached" : state }

    static func stageEnded(kind: String, state: String, cached: Bool, seconds: Double?) {
        Counter(label: stagesTotal, dimensions: [("kind", kind), ("outcome", outcome(state: state, cached: cached))]).increment()
        // (Past about 292 years, nanoseconds overflow an Int64: no stage takes that long.)
        if let seconds, seconds >= 0, seconds < 9e9, state == "succeeded", !cached {
            Timer(label: stageDuration, dimensions: [("kind", kind)]).recordNanoseconds(Int64(seconds * 1e9))
        }
    }

    static func stagesCancelled(kind: String, count: Int) {
        guard count > 0 else { return }
        Counter(label: stagesTotal, dimensions: [("kind", kind), ("outcome", "cancelled")]).increment(by: Int64(count))
    }

    static func cacheHit() { Counter(label: cacheHitsTotal).increment() }

    static func lineageWrite(nanoseconds: UInt64) {
        Timer(label: lineageWriteSeconds).recordNanoseconds(Int64(clamping: nanoseconds))
    }
}
