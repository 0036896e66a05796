import Foundation
import GRDB
import ThreadlineCore

/// `coord doctor`: checks a state folder (lineage database, artifact store, suggestion stores)
/// and, when asked, repairs what can be repaired without losing anything a person made. Every
/// repair either rebuilds something derived (an index, a cache file rendered again when needed)
/// or moves a damaged file aside; nothing recorded is deleted.
public enum StateDoctor {
    public struct Finding: Sendable, Codable, Equatable {
        public enum Level: String, Sendable, Codable { case ok, warning, problem, repaired }
        public var level: Level
        /// What was checked: "state folder", "lineage.db", "runs", "store", "suggestions.db", ….
        public var subject: String
        public var message: String
        /// What to do about it, when the doctor did not (or could not) do it.
        public var fix: String?
    }

    public struct Options: Sendable {
        /// Carry out the safe repairs.
        public var repair = false
        /// Hash every store file (slow on a big store) instead of comparing sizes, and run SQLite's
        /// full integrity check instead of the quick one.
        public var full = false
        /// Temporary files untouched this long belong to no live attempt.
        public var temporaryGrace: Double = 3600
        public init(repair: Bool = false, full: Bool = false, temporaryGrace: Double = 3600) {
            self.repair = repair; self.full = full; self.temporaryGrace = temporaryGrace
        }
    }

    public static func examine(state: String, _ options: Options = .init(), now: Date = Date()) -> [Finding] {
        var findings: [Finding] = []
        let fm = FileManager.default
        var isDir: ObjCBool = false
        guard fm.fileExists(atPath: state, isDirectory: &isDir) else {
            return [Finding(level: .ok, subject: "state folder", message: "\(state) does not exist yet: nothing has been rendered with it")]
        }
        guard isDir.boolValue else {
            return [Finding(level: .problem, subject: "state folder", message: "\(state) is not a folder",
                            fix: "pass --state with a folder (it is made when missing)")]
        }
        if access(state, W_OK | X_OK) != 0 {
            findings.append(Finding(level: .problem, subject: "state folder", message: "\(state) is read-only for this user (uid \(getuid()))",
                                    fix: "run as the folder's owner, or make it writable (chmod u+w \(state))"))
        } else {
            findings.append(Finding(level: .ok, subject: "state folder", message: "\(state) is writable"))
        }
        let writable = access(state, W_OK) == 0
        let lineage = state + "/lineage.db"
        var lineageHealthy = false
        if fm.fileExists(atPath: lineage) {
            let f = checkDatabase(lineage, subject: "lineage.db", full: options.full, repair: options.repair && writable, stamp: now,
                                  ifDamaged: "a new one is made by the next command; the artifact store is kept and renders are found again by their keys, but the records of past runs stay in the damaged file")
            findings.append(f)
            lineageHealthy = f.level == .ok || (f.level == .repaired && fm.fileExists(atPath: lineage))
        } else {
            findings.append(Finding(level: .ok, subject: "lineage.db", message: "no lineage database yet"))
        }
        if lineageHealthy { findings += checkRuns(lineage, repair: options.repair && writable) }
        findings += checkStore(state, lineage: lineageHealthy ? lineage : nil, options, writable: writable, now: now)
        for (name, derived) in [("library-index.db", true), ("suggestions.db", false)] where fm.fileExists(atPath: state + "/" + name) {
            findings.append(checkDatabase(state + "/" + name, subject: name, full: options.full, repair: options.repair && writable, stamp: now,
                                          deleteWhenDamaged: derived,
                                          ifDamaged: derived ? "the next `coord suggest` scan rebuilds it"
                                                             : "suggestions start again from nothing: opt libraries in again, and blocks and dismissals must be made again (they stay readable in the damaged file)"))
        }
        return findings
    }

    // MARK: databases

    /// SQLite's own check of one database file. Index-only damage is repaired by REINDEX; other
    /// damage by moving the file (and its -wal and -shm) aside, or deleting it when it is derived.
    static func checkDatabase(_ path: String, subject: String, full: Bool, repair: Bool, stamp: Date,
                              deleteWhenDamaged: Bool = false, ifDamaged: String) -> Finding {
        var problems: [String] = []
        var openError: String?
        var config = Configuration()
        config.busyMode = .timeout(5)
        config.readonly = !repair
        do {
            let db = try DatabaseQueue(path: path, configuration: config)
            problems = try db.read { db in
                try String.fetchAll(db, sql: full ? "PRAGMA integrity_check(100)" : "PRAGMA quick_check(100)")
            }.filter { $0 != "ok" }
            if problems.isEmpty { return Finding(level: .ok, subject: subject, message: "\(path): SQLite \(full ? "integrity" : "quick") check ok") }
            // Damage confined to indexes: REINDEX rebuilds them from the tables.
            let indexOnly = problems.allSatisfy { $0.contains("index") && !$0.contains("Page") && !$0.contains("page") }
            if indexOnly && repair {
                try db.writeWithoutTransaction { try $0.execute(sql: "REINDEX") }
                let after = try db.read { try String.fetchAll($0, sql: "PRAGMA integrity_check(100)") }.filter { $0 != "ok" }
                if after.isEmpty {
                    return Finding(level: .repaired, subject: subject, message: "\(path): \(problems.count) damaged index entries rebuilt (REINDEX)")
                }
                problems = after
            }
        } catch let e as DatabaseError {
            openError = "SQLite: \(e.message ?? "\(e.resultCode)")"
            if [.SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM].contains(e.resultCode.primaryResultCode) {
                return Finding(level: .problem, subject: subject, message: "\(path) cannot be opened (\(openError!))",
                               fix: "run as the state folder's owner, or make it and the database writable")
            }
        } catch {
            openError = "\(error)"
        }
        let what = openError ?? problems.prefix(3).joined(separator: "; ")
        let aside = "\(path).damaged-\(Int(stamp.timeIntervalSince1970))"
        guard repair else {
            return Finding(level: .problem, subject: subject, message: "\(path) is damaged (\(what))",
                           fix: "coord doctor --repair \(deleteWhenDamaged ? "deletes it" : "moves it aside to \((aside as NSString).lastPathComponent)"): \(ifDamaged)")
        }
        let fm = FileManager.default
        do {
            for suffix in ["", "-wal", "-shm"] where fm.fileExists(atPath: path + suffix) {
                if deleteWhenDamaged { try fm.removeItem(atPath: path + suffix) } else { try fm.moveItem(atPath: path + suffix, toPath: aside + suffix) }
            }
        } catch {
            return Finding(level: .problem, subject: subject, message: "\(path) is damaged (\(what)) and could not be moved: \(FileChecks.reason(error))",
                           fix: "move it aside by hand (mv \(path) \(aside))")
        }
        return Finding(level: .repaired, subject: subject,
                       message: "\(path) was damaged (\(what)): \(deleteWhenDamaged ? "deleted" : "moved aside to \(aside)"); \(ifDamaged)")
    }

    // MARK: runs

    /// Runs recorded as running whose coordinator is gone: the repair is what the next start of
    /// a coordinator does anyway (interrupted, in-flight attempts lost, resumable).
    static func checkRuns(_ lineage: String, repair: Bool) -> [Finding] {
        guard let rows = try? LineageStore.readRows(path: lineage, "SELECT id, coordinator, coalesce(resumed_at, submitted_at) AS since FROM run WHERE state = 'running' ORDER BY id") else {
            return [Finding(level: .warning, subject: "runs", message: "could not read the runs of \(lineage)")]
        }
        var orphans: [String] = [], elsewhere: [String] = []
        for row in rows {
            switch LineageStore.coordinatorAlive(row["coordinator"], since: row["since"].flatMap { Double($0) }) {
            case true?: continue
            case false?: orphans.append(row["id"] ?? "?")
            case nil: elsewhere.append("\(row["id"] ?? "?") (\(row["coordinator"] ?? "?"))")
            }
        }
        var findings: [Finding] = []
        if !elsewhere.isEmpty {
            findings.append(Finding(level: .warning, subject: "runs", message: "runs recorded running by a coordinator on another host: \(elsewhere.joined(separator: ", "))",
                                    fix: "check that coordinator; this host cannot tell whether it is alive"))
        }
        if orphans.isEmpty {
            let live = rows.count - elsewhere.count
            findings.append(Finding(level: .ok, subject: "runs", message: live == 0 ? "no run on this host is recorded running"
                                                                               : "the \(live) runs recorded running on this host have a live coordinator"))
        } else if repair {
            do {
                let n = try LineageStore(path: lineage).recoverInterrupted(only: Set(orphans.compactMap { Int64($0) }))
                findings.append(Finding(level: .repaired, subject: "runs",
                                        message: "\(n) runs whose coordinator is gone (\(orphans.joined(separator: ", "))) recorded interrupted; `coord submit` of the same pipeline resumes them"))
            } catch {
                findings.append(Finding(level: .problem, subject: "runs", message: "could not record runs \(orphans.joined(separator: ", ")) as interrupted: \(error)"))
            }
        } else {
            findings.append(Finding(level: .problem, subject: "runs",
                                    message: "runs \(orphans.joined(separator: ", ")) are recorded running but their coordinator is gone (dashboards show them as live)",
                                    fix: "coord doctor --repair records them interrupted (as the next coordinator start would); `coord submit` of the same pipeline then resumes them"))
        }
        return findings
    }

    // MARK: store

    /// Store files against their names: a file whose size differs from the one recorded (or, with
    /// `full`, whose content no longer hashes to its name) is removed on repair: the stage that
    /// made it renders again, or the source is copied again, when next needed.
    static func checkStore(_ state: String, lineage: String?, _ options: Options, writable: Bool, now: Date) -> [Finding] {
        var sizes: [String: Int64] = [:]
        if let lineage, let rows = try? LineageStore.readRows(path: lineage, "SELECT sha256, max(size) AS size FROM artifact GROUP BY sha256") {
            for r in rows { if let s = r["sha256"], let n = r["size"].flatMap({ Int64($0) }) { sizes[s] = n } }
        }
        var files = 0, bad: [String] = [], removed = 0, failures: [String] = []
        for f in StoreFiles.artifacts(in: state) {
            files += 1
            var damaged = false
            if let recorded = sizes[f.sha256], recorded != (f.size ?? -1) { damaged = true }
            if options.full && !damaged { damaged = ((try? SHA256Hasher.hex(fileAt: f.path)) ?? "") != f.sha256 }
            guard damaged else { continue }
            bad.append(f.path)
            if options.repair && writable {
                if let failure = FileChecks.remove(f.path) { failures.append(failure) } else { removed += 1 }
            }
        }
        var findings: [Finding] = []
        let how = options.full ? "content hashed" : "sizes compared with lineage"
        if bad.isEmpty {
            findings.append(Finding(level: .ok, subject: "store", message: "\(files) artifact files, \(how)\(options.full ? "" : " (--full hashes them)")"))
        } else if removed == bad.count {
            findings.append(Finding(level: .repaired, subject: "store", message: "\(removed) damaged artifact files removed (of \(files)); each is rendered or copied again when next needed"))
        } else {
            findings.append(Finding(level: .problem, subject: "store",
                                    message: "\(bad.count) of \(files) artifact files are damaged (\(how)), e.g. \(bad[0])\(failures.isEmpty ? "" : "; could not remove \(failures[0])")",
                                    fix: failures.isEmpty ? "coord doctor --repair removes them; they are rendered or copied again when next needed"
                                                          : "remove them as the store's owner"))
        }
        // Temporary files left by attempts that died mid-write.
        let found = StaleTemporaries.remove(in: state + "/tmp", untouchedFor: options.temporaryGrace, now: now, dryRun: !(options.repair && writable))
        let stale = found.paths, staleBytes = found.bytes, leftStale = found.notRemoved
        if !stale.isEmpty {
            let mb = String(format: "%.1f MB", Double(staleBytes) / 1e6)
            if options.repair && writable && leftStale == 0 {
                findings.append(Finding(level: .repaired, subject: "temporary files", message: "\(stale.count) stale temporary files removed (\(mb))"))
            } else {
                findings.append(Finding(level: .warning, subject: "temporary files",
                                        message: "\(stale.count) temporary files untouched for over \(Int(options.temporaryGrace)) s (\(mb)), e.g. \(stale[0])",
                                        fix: "coord doctor --repair (or coord gc) removes them"))
            }
        }
        if found.partsKept > 0 {
            findings.append(Finding(level: .ok, subject: "kept uploads", message: StaleTemporaries.partsKeptText(found.partsKept, bytes: found.partsKeptBytes)))
        }
        return findings
    }
}
