import CoreMetrics
import Foundation
import Lineage
import Prometheus

/// Prometheus exposition of the farm: the counters and histograms lineage records through
/// swift-metrics, plus gauges taken at scrape time from the coordinator's live figures.
/// Labels stay low-cardinality (kind, outcome, state): no run ids, no paths.
public final class FarmExporter: Sendable {
    public let registry = PrometheusCollectorRegistry()

    static let help: [String: String] = [
        FarmMetrics.stagesTotal: "Stages that reached an end, by stage kind and outcome (succeeded, cached, failed, cancelled).",
        FarmMetrics.stageDuration: "Seconds a stage took on a worker (rendered stages; cache hits excluded).",
        FarmMetrics.cacheHitsTotal: "Stages whose artifact was reused from the content-addressed cache.",
        FarmMetrics.lineageWriteSeconds: "Seconds each lineage database transaction took.",
        "threadline_queue_depth": "Units of work ready and waiting for a worker slot.",
        "threadline_slots": "Worker pipeline slots, by state (busy, free).",
        "threadline_workers": "Workers connected to the coordinator.",
        "threadline_runs": "Runs recorded in lineage, by state.",
        "threadline_lineage_up": "1 if this scrape read lineage's run counts, 0 if the read failed (threadline_runs then keeps its last values; the dashboard's log says why).",
    ]

    /// Seconds: stages run from milliseconds (cache checks) to many minutes (long renders).
    static let stageBuckets: [Duration] = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800].map { .milliseconds(Int64($0 * 1000)) }
    /// Seconds: a lineage transaction should take well under 100 ms.
    static let writeBuckets: [Duration] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1].map { .microseconds(Int64($0 * 1_000_000)) }

    let queueDepth: Prometheus.Gauge
    let slotsBusy: Prometheus.Gauge
    let slotsFree: Prometheus.Gauge
    let workers: Prometheus.Gauge
    static let runStates = ["running", "succeeded", "failed", "cancelled", "interrupted"]
    let runs: [String: Prometheus.Gauge]
    let lineageUp: Prometheus.Gauge

    public init() {
        queueDepth = registry.makeGauge(descriptor: Self.descriptor("threadline_queue_depth"))
        slotsBusy = registry.makeGauge(descriptor: Self.descriptor("threadline_slots"), labels: [("state", "busy")])
        slotsFree = registry.makeGauge(descriptor: Self.descriptor("threadline_slots"), labels: [("state", "free")])
        workers = registry.makeGauge(descriptor: Self.descriptor("threadline_workers"))
        var runs: [String: Prometheus.Gauge] = [:]
        for s in Self.runStates { runs[s] = registry.makeGauge(descriptor: Self.descriptor("threadline_runs"), labels: [("state", s)]) }
        self.runs = runs
        lineageUp = registry.makeGauge(descriptor: Self.descriptor("threadline_lineage_up"))
        // Families exist (with HELP) before the first stage ends, so dashboards see zeros, not gaps.
        _ = registry.makeCounter(descriptor: Self.descriptor(FarmMetrics.cacheHitsTotal))
        _ = registry.makeDurationHistogram(descriptor: Self.descriptor(FarmMetrics.lineageWriteSeconds), buckets: Self.writeBuckets)
    }

    static func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help[name] ?? name)
    }

    /// Makes swift-metrics in this process report into this exporter (once per process).
    public func bootstrap() {
        MetricsSystem.bootstrap(Factory(exporter: self))
    }

    /// The exposition text, with gauges set from `live` and lineage's run counts. Counts that
    /// could not be read leave the run gauges as they were and set `threadline_lineage_up` to 0:
    /// zeros would tell the operator every run had gone.
    public func scrape(live: LiveFigures?, runs counts: Result<[String: Int], any Error>) -> [UInt8] {
        if let live {
            queueDepth.set(Double(live.queueDepth))
            slotsBusy.set(Double(live.slotsBusy))
            slotsFree.set(Double(max(0, live.slotsTotal - live.slotsBusy)))
            workers.set(Double(live.workers.count))
        }
        if let counts = try? counts.get() {
            for (state, gauge) in runs { gauge.set(Double(counts[state] ?? 0)) }
            lineageUp.set(1.0)
        } else {
            lineageUp.set(0.0)
        }
        return registry.emitToBuffer()
    }

    /// swift-metrics → this registry, with each family's HELP text and buckets.
    struct Factory: MetricsFactory {
        let exporter: FarmExporter
        var registry: PrometheusCollectorRegistry { exporter.registry }

        func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
            registry.makeCounter(descriptor: FarmExporter.descriptor(label), labels: dimensions)
        }
        func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
            registry.makeCounter(descriptor: FarmExporter.descriptor(label), labels: dimensions)
        }
        func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
            aggregate ? registry.makeValueHistogram(descriptor: FarmExporter.descriptor(label), labels: dimensions, buckets: [0.001, 0.01, 0.1, 1, 10, 100])
                : registry.makeGauge(descriptor: FarmExporter.descriptor(label), labels: dimensions)
        }
        func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
            registry.makeGauge(descriptor: FarmExporter.descriptor(label), labels: dimensions)
        }
        func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
            let buckets = label == FarmMetrics.lineageWriteSeconds ? FarmExporter.writeBuckets : FarmExporter.stageBuckets
            return registry.makeDurationHistogram(descriptor: FarmExporter.descriptor(label), labels: dimensions, buckets: buckets)
        }
        func destroyCounter(_ handler: any CounterHandler) {}
        func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {}
        func destroyRecorder(_ handler: any RecorderHandler) {}
        func destroyMeter(_ handler: any MeterHandler) {}
        func destroyTimer(_ handler: any TimerHandler) {}
    }
}
