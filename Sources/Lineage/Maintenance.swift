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

    /// Moves everything a run recorded `seconds` into the past: its times, its attempts' and
    /// events', the artifact rows its attempts made and its workers' (tests of forgetting).
    public func age(runID: Int64, by seconds: Double) throws {
        try write { db in
            let attempts = "SELECT a.id FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = :run"
            for sql in ["UPDATE run SET submitted_at = submitted_at - :s, finished_at = finished_at - :s WHERE id = :run",
                        "UPDATE stage SET started_at = started_at - :s, finished_at = finished_at - :s WHERE run_id = :run",
                        "UPDATE event SET at = at - :s WHERE run_id = :run",
                        "UPDATE artifact SET created_at = created_at - :s WHERE attempt_id IN (\(attempts))",
                        "UPDATE worker SET first_seen = first_seen - :s, last_seen = last_seen - :s WHERE id IN (SELECT worker_id FROM attempt WHERE id IN (\(attempts)))",
                        "UPDATE attempt SET dispatched_at = dispatched_at - :s, started_at = started_at - :s, finished_at = finished_at - :s WHERE id IN (\(attempts))"] {
                try db.execute(sql: sql, arguments: ["s": seconds, "run": runID])
            }
        }
    }
}

/// What forgetting old runs removed from lineage.
public struct ForgetReport: Sendable, Codable, Equatable {
    public var runs = 0
    public var artifacts = 0
    public var workers = 0
    /// Whether runs old enough are left (one call forgets at most its `limit`).
    public var more = false
    public init() {}
    /// Adds the figures of the next call (whose `more` then holds).
    public mutating func add(_ next: ForgetReport) {
        runs += next.runs; artifacts += next.artifacts; workers += next.workers; more = next.more
    }
}

extension LineageStore {
    /// Forgets runs that ended (succeeded, failed or cancelled) and were submitted before
    /// `cutoff` (seconds since 1970): their rows and everything recorded under them (items,
    /// stages, attempts, their links and events), the artifact rows no other run refers to, and
    /// workers gone since before `cutoff` that no attempt left names. A farm recording every
    /// submit for ever grows its database by about 6 KB per item rendered; the space freed is
    /// used again by new rows (the file does not shrink). Running and interrupted runs are never
    /// forgotten, nor artifact rows in `held` (those a live run has read but not yet linked), nor
    /// rows recorded since `cutoff`. Each call is one transaction over at most `limit` runs.
    public func forgetRuns(submittedBefore cutoff: Double, held: Set<Int64> = [], limit: Int = 500) throws -> ForgetReport {
        try writeWhole { db in
            var report = ForgetReport()
            let ids = try Int64.fetchAll(db, sql: "SELECT id FROM run WHERE submitted_at < ? AND state IN (\(RunStatus.endedSQL)) ORDER BY id LIMIT ?",
                                         arguments: [cutoff, limit + 1])
            report.more = ids.count > limit
            let runs = Array(ids.prefix(limit))
            guard !runs.isEmpty else { return report }
            try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS forget_run (id INTEGER PRIMARY KEY)")
            try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS forget_artifact (id INTEGER PRIMARY KEY)")
            try db.execute(sql: "DELETE FROM forget_run; DELETE FROM forget_artifact")
            for id in runs { try db.execute(sql: "INSERT INTO forget_run (id) VALUES (?)", arguments: [id]) }
            // The artifacts these runs made or read: candidates, once the runs' links are gone.
            try db.execute(sql: """
                INSERT OR IGNORE INTO forget_artifact (id)
                SELECT io.artifact_id FROM attempt_io io JOIN attempt a ON a.id = io.attempt_id JOIN stage s ON s.id = a.stage_id
                WHERE s.run_id IN (SELECT id FROM forget_run)
                """)
            try db.execute(sql: """
                INSERT OR IGNORE INTO forget_artifact (id)
                SELECT ar.id FROM artifact ar JOIN attempt a ON a.id = ar.attempt_id JOIN stage s ON s.id = a.stage_id
                WHERE s.run_id IN (SELECT id FROM forget_run)
                """)
            // An artifact row a kept run still links to stays, made (for `coord lineage`) by the
            // first kept attempt that produced or reused it; without one, by none.
            try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS forget_attempt (id INTEGER PRIMARY KEY)")
            try db.execute(sql: """
                DELETE FROM forget_attempt;
                INSERT INTO forget_attempt (id)
                SELECT a.id FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id IN (SELECT id FROM forget_run);
                UPDATE artifact SET attempt_id = (SELECT min(io.attempt_id) FROM attempt_io io WHERE io.artifact_id = artifact.id
                                                  AND io.direction = 'out' AND io.attempt_id NOT IN (SELECT id FROM forget_attempt))
                WHERE attempt_id IN (SELECT id FROM forget_attempt);
                """)
            try db.execute(sql: "DELETE FROM event WHERE run_id IN (SELECT id FROM forget_run)")
            // Items, stages, their edges, attempts and the attempts' links go with their run.
            try db.execute(sql: "DELETE FROM run WHERE id IN (SELECT id FROM forget_run)")
            report.runs = db.changesCount
            for id in held { try db.execute(sql: "DELETE FROM forget_artifact WHERE id = ?", arguments: [id]) }
            try db.execute(sql: """
                DELETE FROM artifact WHERE id IN (SELECT id FROM forget_artifact) AND created_at < ?
                    AND attempt_id IS NULL AND NOT EXISTS (SELECT 1 FROM attempt_io io WHERE io.artifact_id = artifact.id)
                """, arguments: [cutoff])
            report.artifacts = db.changesCount
            try db.execute(sql: """
                DELETE FROM worker WHERE state IN ('\(WorkerStatus.gone.rawValue)', '\(WorkerStatus.lost.rawValue)') AND last_seen < ?
                    AND id NOT IN (SELECT DISTINCT worker_id FROM attempt WHERE worker_id IS NOT NULL)
                """, arguments: [cutoff])
            report.workers = db.changesCount
            try db.execute(sql: "DELETE FROM forget_run; DELETE FROM forget_artifact; DELETE FROM forget_attempt")
            return report
        }
    }
}

/// What `LineageStore.compact` did with the database file.
public enum Compaction: Sendable, Equatable {
    /// Rewritten without its free pages: the file's bytes before and after.
    case compacted(before: Int64, after: Int64)
    /// Free pages under the threshold: left as it is (later records reuse them).
    case notWorthIt(free: Int64, size: Int64)
    /// Too little free disk for the copy a rewrite makes: left as it is.
    case tooLittleDisk(needed: Int64, free: Int64)
}

extension LineageStore {
    /// The database's pages: all of them and those free, in bytes.
    func pageBytes() throws -> (size: Int64, free: Int64) {
        try db.read { db in
            let size = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
            return (size * (try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0), size * (try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0))
        }
    }

    /// Gives disk space back after old runs were forgotten (`forgetRuns`): SQLite keeps the pages
    /// their records held for later records, so the file never shrinks by itself. Where free pages
    /// are at least `fraction` of the file (or 64 MiB), the database is rewritten without them
    /// (VACUUM). Needs the state folder to itself, and free disk beside the database for twice
    /// what is kept: the rewrite builds a copy there (not in a temporary folder that may be
    /// memory), then writes it back through the WAL.
    public func compact(ifFreeAtLeast fraction: Double = 0.25) throws -> Compaction {
        let (size, free) = try pageBytes()
        guard free > 0, Double(free) >= fraction * Double(size) || free >= 64 << 20 else { return .notWorthIt(free: free, size: size) }
        let folder = (path as NSString).deletingLastPathComponent
        let needed = 2 * (size - free) + (16 << 20)
        if let available = FileChecks.freeBytes(folder), available < needed { return .tooLittleDisk(needed: needed, free: available) }
        do {
            try db.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA temp_store_directory = '\(folder.replacingOccurrences(of: "'", with: "''"))'")
                defer { try? db.execute(sql: "PRAGMA temp_store_directory = ''") }
                try db.execute(sql: "VACUUM")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch { throw Self.explain(error, path: path) }
        return .compacted(before: size, after: try pageBytes().size)
    }
}
