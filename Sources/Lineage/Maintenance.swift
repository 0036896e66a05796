import Foundation
import GRDB
import ThreadlineCore

/// What `coord gc` found and did.
public struct CollectionReport: Sendable, Codable {
    public var kept: Int = 0
    public var removed: Int = 0
    public var removedBytes: Int64 = 0
    public var temporaryRemoved: Int = 0
    /// Parts of uploads that were cut off, kept (a day) for a submit to go on from.
    public var partsKept: Int = 0
    public var partsKeptBytes: Int64 = 0
    /// Files that should have gone but could not be removed (a read-only store, say), and why
    /// the first one could not.
    public var notRemoved: Int = 0
    public var firstFailure: String?
}

extension LineageStore {
    /// Removes store files no run younger than `keepDays` refers to. Never touches artifacts of a
    /// running or interrupted run — also the files a remote submitter uploaded for it (its
    /// `submission_json`), which no attempt has read while the run waits in the queue —, nor files
    /// younger than `grace` seconds (they may be about to be recorded). Reads lineage read-only, so it is safe beside a live coordinator.
    public static func collectGarbage(databasePath: String, storeRoot: String, keepDays: Double, grace: Double = 3600,
                                      dryRun: Bool = false) throws -> CollectionReport {
        let cutoff = Date().timeIntervalSince1970 - keepDays * 86_400
        let keep: Set<String> = try Set(readRows(path: databasePath, """
            SELECT DISTINCT ar.sha256 FROM artifact ar
            JOIN attempt_io io ON io.artifact_id = ar.id
            JOIN attempt a ON a.id = io.attempt_id
            JOIN stage s ON s.id = a.stage_id
            JOIN run r ON r.id = s.run_id
            WHERE r.submitted_at >= ? OR r.state IN ('running', 'interrupted')
            UNION
            SELECT DISTINCT json_extract(f.value, '$.sha256') FROM run r, json_each(r.submission_json, '$.files') f
            WHERE r.submission_json IS NOT NULL AND (r.submitted_at >= ? OR r.state IN ('running', 'interrupted'))
            """, [cutoff, cutoff]).compactMap { $0["sha256"] })
        var report = CollectionReport()
        let now = Date()
        for f in StoreFiles.artifacts(in: storeRoot) {
            // A file whose time cannot be read counts as young.
            if keep.contains(f.sha256) || now.timeIntervalSince(f.modified ?? now) < grace { report.kept += 1; continue }
            if let failure = dryRun ? nil : FileChecks.remove(f.path) {
                report.notRemoved += 1
                report.firstFailure = report.firstFailure ?? failure
                continue
            }
            report.removed += 1
            report.removedBytes += f.size ?? 0
        }
        let stale = StaleTemporaries.remove(in: storeRoot + "/tmp", untouchedFor: grace, now: now, dryRun: dryRun)
        report.temporaryRemoved = stale.removed
        report.partsKept = stale.partsKept
        report.partsKeptBytes = stale.partsKeptBytes
        report.notRemoved += stale.notRemoved
        if report.firstFailure == nil { report.firstFailure = stale.firstFailure }
        return report
    }

    /// OpenLineage-style run events (JSON lines): a START and a COMPLETE/FAIL per stage, with the
    /// artifacts it read and wrote as datasets, under a parent event for the run.
    public static func openLineageEvents(databasePath: String, runID: Int64) throws -> [String] {
        guard let run = try readRows(path: databasePath, "SELECT * FROM run WHERE id = ?", [runID]).first else { return [] }
        let job = run["name"] ?? "run"
        let runUUID = uuid("run-\(runID)-\(run["pipeline_sha256"] ?? "")")
        let producer = "https://threadline.invalid/coord"
        let schema = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
        func time(_ s: String?) -> String? {
            guard let s, let t = Double(s) else { return nil }
            let f = ISO8601DateFormatter(); f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return f.string(from: Date(timeIntervalSince1970: t))
        }
        func line(_ obj: [String: Any]) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self)
        }
        var lines: [String] = []
        let runFacets: [String: Any] = ["threadline_pipeline": ["_producer": producer, "_schemaURL": schema,
                                                                 "path": run["pipeline_path"] ?? "", "sha256": run["pipeline_sha256"] ?? ""]]
        if let start = time(run["submitted_at"]) {
            lines.append(try line(["eventType": "START", "eventTime": start, "producer": producer, "schemaURL": schema,
                                   "run": ["runId": runUUID, "facets": runFacets], "job": ["namespace": "threadline", "name": job]]))
        }
        let stages = try readRows(path: databasePath, "SELECT id, name, kind, state, params_json, key, started_at, finished_at, error FROM stage WHERE run_id = ? ORDER BY id", [runID])
        for st in stages {
            let io = try readRows(path: databasePath, """
                SELECT DISTINCT io.direction, ar.uri, ar.sha256, ar.size, ar.kind FROM attempt a
                JOIN attempt_io io ON io.attempt_id = a.id JOIN artifact ar ON ar.id = io.artifact_id
                WHERE a.stage_id = ? AND a.state IN ('succeeded', 'cached')
                """, [Int64(st["id"]!)!])
            func datasets(_ dir: String) -> [[String: Any]] {
                io.filter { $0["direction"] == dir }.map {
                    ["namespace": "file", "name": $0["uri"] ?? "",
                     "facets": ["threadline_artifact": ["_producer": producer, "_schemaURL": schema,
                                                        "sha256": $0["sha256"] ?? "", "size": Int($0["size"] ?? "") ?? 0, "kind": $0["kind"] ?? ""]]]
                }
            }
            let stageRun: [String: Any] = [
                "runId": uuid("stage-\(st["id"]!)"),
                "facets": ["parent": ["_producer": producer, "_schemaURL": schema,
                                      "run": ["runId": runUUID], "job": ["namespace": "threadline", "name": job]],
                           "threadline_stage": ["_producer": producer, "_schemaURL": schema, "kind": st["kind"] ?? "",
                                                "parameters": st["params_json"] ?? "", "key": st["key"] ?? ""]]]
            let stageJob: [String: Any] = ["namespace": "threadline", "name": "\(job).\(st["name"]!)"]
            // A stage the coordinator ended without a worker (a title's fetch: nothing to fetch)
            // has no start of its own: it starts as it ends, so no COMPLETE comes without a START.
            if let start = time(st["started_at"]) ?? time(st["finished_at"]) {
                lines.append(try line(["eventType": "START", "eventTime": start, "producer": producer, "schemaURL": schema,
                                       "run": stageRun, "job": stageJob, "inputs": datasets("in"), "outputs": [Any]()]))
            }
            if let end = time(st["finished_at"]) {
                let type = st["state"] == "succeeded" ? "COMPLETE" : st["state"] == "failed" ? "FAIL" : "ABORT"
                lines.append(try line(["eventType": type, "eventTime": end, "producer": producer, "schemaURL": schema,
                                       "run": stageRun, "job": stageJob, "inputs": datasets("in"), "outputs": datasets("out")]))
            }
        }
        if let end = time(run["finished_at"]) {
            let type = run["state"] == "succeeded" ? "COMPLETE" : run["state"] == "failed" ? "FAIL" : "ABORT"
            lines.append(try line(["eventType": type, "eventTime": end, "producer": producer, "schemaURL": schema,
                                   "run": ["runId": runUUID, "facets": runFacets], "job": ["namespace": "threadline", "name": job]]))
        }
        return lines
    }

    /// A stable UUID-shaped identifier derived from a string.
    static func uuid(_ seed: String) -> String {
        let h = Array(SHA256Hasher.hex(seed).prefix(32))
        let s = String(h)
        func part(_ a: Int, _ b: Int) -> String { String(s[s.index(s.startIndex, offsetBy: a)..<s.index(s.startIndex, offsetBy: b)]) }
        return "\(part(0, 8))-\(part(8, 12))-5\(part(13, 16))-a\(part(17, 20))-\(part(20, 32))"
    }
}

extension LineageStore {
    /// Moves a run's submission time (tests of retention, simulations).
    public func rewriteSubmittedAt(runID: Int64, to time: Double) throws {
        try write { db in try db.execute(sql: "UPDATE run SET submitted_at = ? WHERE id = ?", arguments: [time, runID]) }
    }
}
