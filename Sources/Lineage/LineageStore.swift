import Foundation
import GRDB
import Synchronization
import ThreadlineCore

/// A lineage database problem, said plainly with what to do.
public struct LineageError: Error, CustomStringConvertible, LocalizedError {
    public var description: String
    public var errorDescription: String? { description }
}

/// The lineage database: runs, items, stages, attempts, artifacts, workers and events.
/// One writer connection (SQLite 3.40.1 sits in the WAL-reset bug range); readers open read-only.
public final class LineageStore: Sendable {
    public let path: String
    let db: DatabaseQueue
    private let writes = Mutex<(count: Int, maxSeconds: Double)>((0, 0))
    /// The transaction `batch` holds open, per thread (a pthread key per store: every write looks
    /// it up, and a Foundation thread dictionary with a string key cost 3 % of a busy coordinator).
    private let batchKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "out of thread-specific keys")
        return key
    }()
    deinit { pthread_key_delete(batchKey) }

    public init(path: String) throws {
        self.path = path
        var config = Configuration()
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            // After a checkpoint resets it, the WAL file shrinks back to at most this size.
            try db.execute(sql: "PRAGMA journal_size_limit = 16777216")
        }
        // Processes that open a new state folder at the same moment (two `coord submit`s) would
        // each see no migrations applied and race to create the tables: they migrate one at a time,
        // under an advisory lock beside the database.
        let lock = open(path + ".lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
        if lock >= 0 { _ = flock(lock, LOCK_EX) }
        defer { if lock >= 0 { _ = flock(lock, LOCK_UN); close(lock) } }
        do {
            db = try DatabaseQueue(path: path, configuration: config)
            try Self.migrator.migrate(db)
        } catch { throw Self.explain(error, path: path) }
    }

    /// What went wrong with the database, in words with the fix, for the errors a person can act
    /// on (damaged, read-only, full); other errors pass through.
    public static func explain(_ error: Error, path: String) -> Error {
        guard let e = error as? DatabaseError else { return error }
        let folder = (path as NSString).deletingLastPathComponent
        switch e.resultCode.primaryResultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return LineageError(description: """
                the lineage database \(path) is damaged (SQLite: \(e.message ?? "\(e.resultCode)")). Move it aside (coord doctor --repair --state \((path as NSString).deletingLastPathComponent), or mv \(path) \(path).damaged) and run again: a new one is made, the artifact store is kept and renders are found again by their keys, but the records of past runs stay in the damaged file
                """)
        case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH:
            return LineageError(description: """
                cannot write the lineage database in \(folder): it or its folder is read-only for this user (SQLite: \(e.message ?? "\(e.resultCode)")). Run as the folder's owner, or pass --state with a writable folder
                """)
        case .SQLITE_FULL, .SQLITE_IOERR:
            return LineageError(description: "cannot write the lineage database \(path): \(e.message ?? "\(e.resultCode)") (is the disk full?); free space and run again")
        default:
            return error
        }
    }

    /// Opens a database read-only, as dashboards and `coord runs` do. One an older Threadline
    /// wrote is first brought up to this version's schema (the readers' queries name its newest
    /// tables and columns), as a writer would: migrating needs write access, once.
    public static func reader(path: String, busyTimeout: TimeInterval = 5) throws -> DatabaseQueue {
        var config = Configuration()
        config.readonly = true
        config.busyMode = .timeout(busyTimeout)
        do {
            let db = try DatabaseQueue(path: path, configuration: config)
            // (A database another process is making this moment can fail the look: its tables
            // appear between the query and GRDB's check. Making the store waits for that process.)
            if (try? db.read({ try migrator.hasCompletedMigrations($0) })) == true { return db }
            do { _ = try LineageStore(path: path) } catch {
                throw LineageError(description: """
                    the lineage database \(path) is not at this version's schema (an older Threadline wrote it) and bringing it up to \
                    date, once, needs write access (\(error)). Run `coord runs --state \((path as NSString).deletingLastPathComponent)` once as its owner
                    """)
            }
            try db.close()
            return try DatabaseQueue(path: path, configuration: config)
        } catch let error as LineageError { throw error } catch { throw explain(error, path: path) }
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
            CREATE TABLE run (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                name TEXT NOT NULL,
                pipeline_path TEXT NOT NULL,
                pipeline_sha256 TEXT NOT NULL,
                pipeline_text TEXT NOT NULL,
                output_path TEXT NOT NULL,
                submitter TEXT,
                submitted_at REAL NOT NULL,
                finished_at REAL,
                state TEXT NOT NULL,          -- queued | running | succeeded | failed | cancelled
                error TEXT
            );
            CREATE TABLE item (
                run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
                idx INTEGER NOT NULL,
                kind TEXT NOT NULL,
                label TEXT NOT NULL,
                source_uri TEXT,
                params_json TEXT NOT NULL,
                start_frame INTEGER,
                frame_count INTEGER,
                PRIMARY KEY (run_id, idx)
            );
            CREATE TABLE stage (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
                item_idx INTEGER,
                name TEXT NOT NULL,
                kind TEXT NOT NULL,           -- fetch | decode | transform | encode | concat
                params_json TEXT,
                params_sha256 TEXT,
                key TEXT,
                state TEXT NOT NULL,          -- pending | ready | running | succeeded | failed | cancelled
                attempts INTEGER NOT NULL DEFAULT 0,
                started_at REAL,
                finished_at REAL,
                seconds REAL,
                error TEXT,
                UNIQUE (run_id, name)
            );
            CREATE INDEX stage_run ON stage(run_id, state);
            CREATE TABLE stage_edge (
                run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
                from_stage INTEGER NOT NULL REFERENCES stage(id) ON DELETE CASCADE,
                to_stage INTEGER NOT NULL REFERENCES stage(id) ON DELETE CASCADE,
                PRIMARY KEY (from_stage, to_stage)
            );
            CREATE TABLE worker (
                id TEXT PRIMARY KEY,
                host TEXT NOT NULL,
                pid INTEGER,
                slots INTEGER NOT NULL,
                version TEXT NOT NULL,
                first_seen REAL NOT NULL,
                last_seen REAL NOT NULL,
                state TEXT NOT NULL           -- up | lost | gone
            );
            CREATE TABLE attempt (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                stage_id INTEGER NOT NULL REFERENCES stage(id) ON DELETE CASCADE,
                attempt_no INTEGER NOT NULL,
                worker_id TEXT REFERENCES worker(id),
                slot INTEGER,
                lease TEXT NOT NULL UNIQUE,
                dispatched_at REAL NOT NULL,
                started_at REAL,
                finished_at REAL,
                state TEXT NOT NULL,          -- running | succeeded | failed | lost | cancelled | stale
                error_class TEXT,
                error_message TEXT,
                cpu_s REAL,
                max_rss INTEGER
            );
            CREATE INDEX attempt_stage ON attempt(stage_id);
            CREATE TABLE artifact (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                sha256 TEXT NOT NULL,
                uri TEXT NOT NULL,
                size INTEGER NOT NULL,
                kind TEXT NOT NULL,           -- source | segment | output
                facts_json TEXT,
                key TEXT,
                attempt_id INTEGER REFERENCES attempt(id),
                created_at REAL NOT NULL
            );
            CREATE INDEX artifact_sha ON artifact(sha256);
            CREATE INDEX artifact_key ON artifact(key);
            CREATE TABLE attempt_io (
                attempt_id INTEGER NOT NULL REFERENCES attempt(id) ON DELETE CASCADE,
                artifact_id INTEGER NOT NULL REFERENCES artifact(id) ON DELETE CASCADE,
                direction TEXT NOT NULL,      -- in | out
                PRIMARY KEY (attempt_id, artifact_id, direction)
            );
            CREATE TABLE event (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                at REAL NOT NULL,
                run_id INTEGER,
                stage_id INTEGER,
                kind TEXT NOT NULL,
                message TEXT NOT NULL
            );
            CREATE VIEW v_runs AS
                SELECT r.id, r.name, r.state, r.submitted_at, r.finished_at,
                       r.finished_at - r.submitted_at AS duration_s,
                       (SELECT count(*) FROM stage s WHERE s.run_id = r.id) AS stages,
                       (SELECT count(*) FROM stage s WHERE s.run_id = r.id AND s.state = 'succeeded') AS stages_done,
                       r.output_path, r.error
                FROM run r;
            CREATE VIEW v_stages AS
                SELECT s.id, s.run_id, s.item_idx, s.name, s.kind, s.state, s.attempts, s.key,
                       s.started_at, s.finished_at, s.seconds, s.error
                FROM stage s;
            CREATE VIEW v_attempts AS
                SELECT a.id, s.run_id, s.name AS stage, a.attempt_no, a.worker_id, a.lease, a.state,
                       a.dispatched_at, a.started_at, a.finished_at,
                       a.started_at - a.dispatched_at AS queue_wait_s,
                       a.finished_at - a.started_at AS run_s,
                       a.error_class, a.error_message, a.cpu_s, a.max_rss
                FROM attempt a JOIN stage s ON s.id = a.stage_id;
            CREATE VIEW v_workers AS
                SELECT w.id, w.host, w.pid, w.slots, w.version, w.state, w.first_seen, w.last_seen,
                       (SELECT count(*) FROM attempt a WHERE a.worker_id = w.id AND a.state = 'running') AS running
                FROM worker w;
            """)
        }
        m.registerMigration("v2: cache hits, failures and lineage views") { db in
            try db.execute(sql: """
            ALTER TABLE stage ADD COLUMN cached INTEGER NOT NULL DEFAULT 0;
            DROP VIEW v_stages;
            CREATE VIEW v_stages AS
                SELECT s.id, s.run_id, s.item_idx, s.name, s.kind, s.state, s.cached, s.attempts, s.key,
                       s.started_at, s.finished_at, s.seconds, s.error
                FROM stage s;
            CREATE VIEW v_failures AS
                SELECT a.id AS attempt_id, s.run_id, r.name AS run_name, s.item_idx, s.name AS stage, a.attempt_no,
                       a.worker_id, a.state, a.error_class, a.error_message, a.finished_at
                FROM attempt a JOIN stage s ON s.id = a.stage_id JOIN run r ON r.id = s.run_id
                WHERE a.state IN ('failed', 'lost');
            """)
        }
        m.registerMigration("v3: run ownership for resume") { db in
            try db.execute(sql: "ALTER TABLE run ADD COLUMN coordinator TEXT")
        }
        m.registerMigration("v4: lineage views") { db in
            try db.execute(sql: """
            CREATE INDEX attempt_io_artifact ON attempt_io(artifact_id, direction);
            CREATE VIEW v_artifact_inputs AS
                SELECT o.artifact_id AS artifact_id, i.artifact_id AS input_id, a.id AS attempt_id,
                       s.run_id, s.name AS stage, s.kind AS stage_kind, s.params_json
                FROM attempt_io o
                JOIN attempt_io i ON i.attempt_id = o.attempt_id AND i.direction = 'in'
                JOIN attempt a ON a.id = o.attempt_id
                JOIN stage s ON s.id = a.stage_id
                WHERE o.direction = 'out';
            CREATE VIEW v_lineage AS
                WITH RECURSIVE walk(output_id, artifact_id, depth) AS (
                    SELECT id, id, 0 FROM artifact WHERE kind = 'output'
                    UNION
                    SELECT w.output_id, e.input_id, w.depth + 1 FROM walk w JOIN v_artifact_inputs e ON e.artifact_id = w.artifact_id
                )
                SELECT w.output_id, w.depth, a.id AS artifact_id, a.kind, a.sha256, a.uri, a.size, a.key, a.facts_json
                FROM walk w JOIN artifact a ON a.id = w.artifact_id;
            """)
        }
        m.registerMigration("v5: worker slot utilisation") { db in
            try db.execute(sql: """
            CREATE VIEW v_worker_slots AS
                SELECT a.dispatched_at AS time, a.worker_id, w.slots,
                       (SELECT count(*) FROM attempt b JOIN stage sb ON sb.id = b.stage_id
                         WHERE b.worker_id = a.worker_id AND b.state NOT IN ('cached', 'missed')
                           AND sb.kind IN ('fetch', 'encode', 'concat')
                           AND b.dispatched_at <= a.dispatched_at AND coalesce(b.finished_at, 1e18) > a.dispatched_at) AS busy_slots
                FROM attempt a JOIN stage s ON s.id = a.stage_id JOIN worker w ON w.id = a.worker_id
                WHERE s.kind IN ('fetch', 'encode', 'concat') AND a.state NOT IN ('cached', 'missed');
            """)
        }
        m.registerMigration("v6: transitions take slots too") { db in
            try db.execute(sql: """
            DROP VIEW v_worker_slots;
            CREATE VIEW v_worker_slots AS
                SELECT a.dispatched_at AS time, a.worker_id, w.slots,
                       (SELECT count(*) FROM attempt b JOIN stage sb ON sb.id = b.stage_id
                         WHERE b.worker_id = a.worker_id AND b.state NOT IN ('cached', 'missed')
                           AND sb.kind IN ('fetch', 'encode', 'transition', 'concat')
                           AND b.dispatched_at <= a.dispatched_at AND coalesce(b.finished_at, 1e18) > a.dispatched_at) AS busy_slots
                FROM attempt a JOIN stage s ON s.id = a.stage_id JOIN worker w ON w.id = a.worker_id
                WHERE s.kind IN ('fetch', 'encode', 'transition', 'concat') AND a.state NOT IN ('cached', 'missed');
            """)
        }
        m.registerMigration("v7: cluster submissions") { db in
            try db.execute(sql: """
                ALTER TABLE run ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE run ADD COLUMN submission_json TEXT;
                """)
        }
        m.registerMigration("v8: run owners, quarantine") { db in
            try db.execute(sql: """
                ALTER TABLE run ADD COLUMN owner_key TEXT;   -- the submitter's CURVE public key (NULL: local)
                ALTER TABLE run ADD COLUMN planning INTEGER NOT NULL DEFAULT 0;   -- 1 while a resume plans it
                CREATE INDEX run_owner ON run(owner_key);
                """)
        }
        m.registerMigration("v9: dashboard progress index") { db in
            // Stage counts by state for the dashboard's run list, answered from the index alone.
            try db.execute(sql: "CREATE INDEX stage_progress ON stage(run_id, state, cached, kind)")
        }
        m.registerMigration("v10: when a run was last resumed") { db in
            // The dashboard's time left judges a resumed run by what it renders after the resume,
            // as `coord submit`'s lines do. Runs resumed before this column: from their events.
            try db.execute(sql: """
                ALTER TABLE run ADD COLUMN resumed_at REAL;
                UPDATE run SET resumed_at = (SELECT max(e.at) FROM event e WHERE e.run_id = run.id AND e.kind = 'run.resumed');
                """)
        }
        m.registerMigration("v11: forgetting old runs") { db in
            // Deleting a run looks for the rows that name it, its stages and attempts: without
            // these indexes each deleted stage scanned every edge, each attempt every artifact.
            try db.execute(sql: """
                CREATE INDEX stage_edge_run ON stage_edge(run_id);
                CREATE INDEX stage_edge_to ON stage_edge(to_stage);
                CREATE INDEX artifact_attempt ON artifact(attempt_id);
                CREATE INDEX event_run ON event(run_id);
                """)
        }
        m.registerMigration("v12: time a run lay interrupted") { db in
            // A run's duration is the time it was worked on: a run interrupted in the evening and
            // resumed in the morning took minutes, not the night. `interrupted_at`: when its work
            // stopped, while it lies interrupted; `paused_s`: the seconds it lay so, summed over
            // its resumes. Runs resumed before these columns: from their events.
            try db.execute(sql: """
                ALTER TABLE run ADD COLUMN interrupted_at REAL;
                ALTER TABLE run ADD COLUMN paused_s REAL NOT NULL DEFAULT 0;
                UPDATE run SET interrupted_at = (SELECT max(e.at) FROM event e WHERE e.run_id = run.id AND e.kind = 'run.interrupted')
                    WHERE state = 'interrupted';
                UPDATE run SET paused_s = coalesce((
                    SELECT sum(max(0, e.at - (SELECT max(i.at) FROM event i WHERE i.run_id = e.run_id AND i.kind = 'run.interrupted' AND i.at <= e.at)))
                    FROM event e WHERE e.run_id = run.id AND e.kind = 'run.resumed'), 0)
                    WHERE resumed_at IS NOT NULL;
                DROP VIEW v_runs;
                CREATE VIEW v_runs AS
                    SELECT r.id, r.name, r.state, r.submitted_at, r.finished_at,
                           coalesce(r.finished_at, r.interrupted_at) - r.submitted_at - r.paused_s AS duration_s,
                           (SELECT count(*) FROM stage s WHERE s.run_id = r.id) AS stages,
                           (SELECT count(*) FROM stage s WHERE s.run_id = r.id AND s.state = 'succeeded') AS stages_done,
                           r.output_path, r.error
                    FROM run r;
                """)
        }
        m.registerMigration("v13: stage counts of ended runs") { db in
            // The dashboard's run list shows each run's stages by state: counting them anew on
            // every refresh read every stage of the runs shown (100,000 for 1,000 runs, 30-40 ms
            // of SQLite alone on a slow machine), though an ended run's stages no longer change:
            // its coordinator forgets it (`runEnded`), and what comes for it later finds nothing
            // to update. A run keeps its counts here from the moment its state becomes an end
            // state (a trigger, in that write's transaction) until it leaves one. Keeping every
            // run's counts current with triggers on `stage` cost the coordinator a fifth of its
            // throughput (a trigger that only watched for a change to an ended run's stages, a
            // tenth): each stage write runs every trigger on the table.
            try db.execute(sql: """
                CREATE TABLE run_progress (
                    run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
                    state TEXT NOT NULL,
                    cached INTEGER NOT NULL,
                    stages INTEGER NOT NULL,    -- the run's stages in this state
                    encodes INTEGER NOT NULL,   -- of which encode stages (an item's last: succeeded ones are the items done)
                    PRIMARY KEY (run_id, state, cached)
                ) WITHOUT ROWID;
                INSERT INTO run_progress (run_id, state, cached, stages, encodes)
                    SELECT s.run_id, s.state, s.cached, count(*), sum(s.kind = 'encode') FROM stage s JOIN run r ON r.id = s.run_id
                    WHERE r.state IN ('succeeded', 'failed', 'cancelled') GROUP BY s.run_id, s.state, s.cached;
                CREATE TRIGGER run_ended AFTER UPDATE OF state ON run
                    WHEN new.state IN ('succeeded', 'failed', 'cancelled') BEGIN
                    DELETE FROM run_progress WHERE run_id = new.id;
                    INSERT INTO run_progress (run_id, state, cached, stages, encodes)
                        SELECT run_id, state, cached, count(*), sum(kind = 'encode') FROM stage WHERE run_id = new.id GROUP BY state, cached;
                END;
                CREATE TRIGGER run_resumed AFTER UPDATE OF state ON run
                    WHEN new.state NOT IN ('succeeded', 'failed', 'cancelled') BEGIN
                    DELETE FROM run_progress WHERE run_id = new.id;
                END;
                """)
        }
        m.registerMigration("v14: what a render should cost") { db in
            // The coordinator's estimate of a render (`RenderCost`, milliseconds), on each of its
            // stages: the dashboard weighs a run's frames by it where it takes the farm's rate
            // (a 1080p run behind 540p ones read as quick as those).
            try db.execute(sql: "ALTER TABLE stage ADD COLUMN cost_ms REAL")
        }
        m.registerMigration("v15: a submission's own name") { db in
            // A submitter's name for its submission, found in the submission the run keeps: one
            // sent again after its coordinator restarted is answered with the run it made (`submittedRun`).
            try db.execute(sql: "CREATE INDEX run_submission_id ON run(json_extract(submission_json, '$.id')) WHERE submission_json IS NOT NULL")
        }
        return m
    }

    /// "host:pid" of this process: who owns the runs it starts.
    public static let owner = "\(ProcessInfo.processInfo.hostName):\(getpid())"

    /// Every write goes through here: one writer connection, each write timed.
    /// The transaction `batch` holds open on this thread, if any.
    private var openBatch: Database? {
        pthread_getspecific(batchKey).map { Unmanaged<Database>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Runs `body` as one transaction: every write it makes (on this thread) joins it, so a burst
    /// of small writes costs one commit. Readers see all of it or none of it. The transaction
    /// begins with the first write: a body that writes nothing (an idle coordinator's turn, 200
    /// a second) costs no BEGIN and COMMIT, and is not counted as a lineage write.
    public func batch<T>(_ body: () throws -> T) throws -> T {
        if openBatch != nil { return try body() }
        do {
            return try db.writeWithoutTransaction { db in
                pthread_setspecific(batchKey, Unmanaged.passUnretained(db).toOpaque())
                defer { pthread_setspecific(batchKey, nil) }
                do {
                    let result = try body()
                    if db.isInsideTransaction {
                        try db.commit()
                        wrote(since: batchBegan.withLock { $0 })
                    }
                    return result
                } catch {
                    if db.isInsideTransaction { try? db.rollback() }
                    throw error
                }
            }
        } catch { throw Self.explain(error, path: path) }
    }

    /// When the open batch's transaction began (it begins with the batch's first write).
    private let batchBegan = Mutex<UInt64>(0)

    /// The open batch, its transaction begun.
    private func batchTransaction(_ open: Database) throws -> Database {
        if !open.isInsideTransaction {
            try open.beginTransaction(.immediate)
            batchBegan.withLock { $0 = DispatchTime.now().uptimeNanoseconds }
        }
        return open
    }

    /// A lineage database error as a person reads it: SQLite's code and message, without the
    /// statement GRDB adds (the coordinator's log keeps that); nil when `error` is not one. Told
    /// whole, a submitter read three lines of SQL in the middle of "run 2 failed: …".
    public static func brief(_ error: any Error) -> String? {
        guard let e = error as? DatabaseError else { return nil }
        return "SQLite error \(e.resultCode.rawValue): \(e.message ?? "\(e.resultCode)")"
    }

    /// A write that lands whole or not at all, also inside a batch (as a savepoint there): a run
    /// and its stage rows, say, where the batch's other writes must not be lost with it.
    func writeWhole<T>(_ body: (Database) throws -> T) throws -> T {
        guard let open = openBatch else { return try write(body) }
        var result: T?
        do {
            let db = try batchTransaction(open)
            try db.inSavepoint { result = try body(db); return .commit }
        } catch { throw Self.explain(error, path: path) }
        return result!
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        if let open = openBatch { return try body(open) }
        return try db.read(body)
    }

    func write<T>(_ body: (Database) throws -> T) throws -> T {
        if let open = openBatch { return try body(try batchTransaction(open)) }
        let t0 = DispatchTime.now().uptimeNanoseconds
        do {
            let result = try db.write(body)
            wrote(since: t0)
            return result
        } catch {
            wrote(since: t0, metric: false)
            throw Self.explain(error, path: path)
        }
    }

    /// Counts one transaction that began at `t0` (and, when it committed, times it for /metrics).
    private func wrote(since t0: UInt64, metric: Bool = true) {
        let ns = DispatchTime.now().uptimeNanoseconds - t0
        writes.withLock { $0.count += 1; $0.maxSeconds = max($0.maxSeconds, Double(ns) / 1e9) }
        if metric { FarmMetrics.lineageWrite(nanoseconds: ns) }
    }

    /// Writes so far and the longest one took (seconds), for `lineage.writes` events.
    public var writeStatistics: (count: Int, maxSeconds: Double) { writes.withLock { $0 } }

    /// Copies WAL frames into the database (PASSIVE: never waits for readers), so the WAL stays small.
    public func checkpoint() throws {
        try db.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
    }

    // MARK: resume

    /// Whether a run's coordinator ("host:pid", as runs record it) is alive: nil when it is on
    /// another host (this host cannot tell); false when it is gone or the record is unreadable.
    /// `since`: when it took the run (submitted or resumed, epoch seconds); a process of that pid
    /// started later is another one that was given the number again.
    public static func coordinatorAlive(_ owner: String?, since: Double? = nil) -> Bool? {
        let parts = owner?.split(separator: ":") ?? []
        guard parts.count == 2, let pid = Int32(parts[1]) else { return false }
        guard String(parts[0]) == ProcessInfo.processInfo.hostName else { return nil }
        return processAlive(pid, since: since)
    }

    /// Whether process `pid` on this host runs and is the one that was there at `since` (not a
    /// later process under a reused pid). A process that has ended but whose parent has not
    /// collected it yet (a zombie: a killed `coord serve` whose parent is a container's first
    /// process that reaps late) does not run: a coordinator started on its folder then took its
    /// runs for live and left them unresumed, each `coord wait` of them reading "running".
    static func processAlive(_ pid: Int32, since: Double?) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        if let state = processState(pid), state == "Z" || state == "X" { return false }
        if let since, let started = processStart(pid), started > since + 2 { return false }
        return true
    }

    /// The state letter of process `pid` (`/proc/PID/stat`, field 3: R, S, D, Z for a zombie…).
    static func processState(_ pid: Int32) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].first { $0 != " " }
    }

    /// Workers recorded up or draining on this host whose process is gone — left so by a
    /// coordinator that was killed before it could record them gone — recorded gone. Workers on
    /// other hosts are left as they are (they say hello again when they reconnect). Returns how many.
    @discardableResult
    public func recoverWorkers() throws -> Int {
        let host = ProcessInfo.processInfo.hostName
        let rows = try read { db in
            try Row.fetchAll(db, sql: "SELECT id, pid, first_seen FROM worker WHERE state IN ('up', 'draining') AND host = ?", arguments: [host])
        }
        let gone = rows.filter { row in
            guard let pid: Int32 = row["pid"] else { return false }
            return !Self.processAlive(pid, since: row["first_seen"])
        }.map { $0["id"] as String }
        if !gone.isEmpty { try workersGone(gone) }
        return gone.count
    }

    /// When process `pid` started (epoch seconds), from /proc: its start in clock ticks after boot
    /// (`/proc/PID/stat`, field 22) and the boot time (`btime` in `/proc/stat`).
    static func processStart(_ pid: Int32) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces): state is field 3, starttime 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]),
              let boot = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8))?
                .split(separator: "\n").first(where: { $0.hasPrefix("btime ") })?.split(separator: " ").last.flatMap({ Double($0) })
        else { return nil }
        return boot + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Runs still rendering on this host under another process (a `coord submit` or `coord
    /// serve` on the same state folder) that write one of `outputs`.
    public static func liveRuns(writing outputs: [String], path: String) throws -> [(run: Int64, output: String, owner: String)] {
        guard !outputs.isEmpty, FileManager.default.fileExists(atPath: path),
              // Another process may be making the database this moment: no runs in it yet.
              try readRows(path: path, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run'").count == 1
        else { return [] }
        let marks = Array(repeating: "?", count: outputs.count).joined(separator: ", ")
        // Every column (`*`): a database a release before `resumed_at` made has none.
        return try readRows(path: path, "SELECT * FROM run WHERE state = 'running' AND output_path IN (\(marks)) ORDER BY id", outputs)
            .filter { r in
                let since = Double(r["resumed_at"] ?? "") ?? Double(r["submitted_at"] ?? "")
                return r["coordinator"] != owner && coordinatorAlive(r["coordinator"], since: since) == true
            }
            .map { (Int64($0["id"]!)!, $0["output_path"]!, $0["coordinator"]!) }
    }

    /// Why the attempts a killed coordinator left running are lost (`recoverInterrupted`), and the
    /// renders a stopping one let go on: what `orphanedAttempts` finds them by.
    public static let coordinatorStopped = "coordinator stopped"

    /// Why the attempts a stopping coordinator cancelled are lost (`interruptRun`): a service's
    /// (`coord serve`, whose runs resume when it starts again) or a submit's (Ctrl-C, a hang-up).
    /// Someone stopped them; `coord status` shows them as no failure of their stage.
    public static func cancelledAsItStopped(resumesByItself: Bool) -> String {
        resumesByItself ? "\(coordinatorStopped); the run resumes when a coordinator starts on this state folder"
            : "the submit was interrupted; submitting the pipeline again resumes the run"
    }

    /// Whether `error` is the database's (a write refused: a full disk, a broken file), not the
    /// caller's own: a coordinator stops on those rather than record on past a gap.
    public static func isDatabaseError(_ error: any Error) -> Bool { error is DatabaseError }

    /// An attempt `a` lost with its coordinator (killed or stopped) whose render the next one kept: it made
    /// an output, so it is no failure (`coord status`, the dashboard).
    public static let keptRenderSQL = "(a.state = 'lost' AND EXISTS (SELECT 1 FROM attempt_io io WHERE io.attempt_id = a.id AND io.direction = 'out'))"

    /// An attempt `a` that was a cache check (it takes no slot) lost with its worker or its
    /// coordinator: checked again elsewhere in milliseconds, it set nothing back. (The dashboard
    /// listed one as three failures of a render with no error, `coord status` as a ✗ line.)
    public static let lostCheckSQL = "(a.state = 'lost' AND a.slot IS NULL)"

    /// An attempt `a` its coordinator cancelled as it stopped (`cancelledAsItStopped`): its stage
    /// goes out again when the run resumes.
    public static let cancelledAsItStoppedSQL = "(a.state = 'lost' AND a.error_message IN ("
        + [true, false].map { "'" + cancelledAsItStopped(resumesByItself: $0).replacingOccurrences(of: "'", with: "''") + "'" }.joined(separator: ", ") + "))"

    /// A failed or lost attempt `a` that is no failure: a kept render, a lost cache check, or one
    /// cancelled as its coordinator stopped. (The dashboard listed the last among a run's
    /// failures, and the farm's, after every restart and every Ctrl-C.)
    public static let noFailureSQL = "(\(keptRenderSQL) OR \(lostCheckSQL) OR \(cancelledAsItStoppedSQL))"

    /// Marks runs whose coordinator on this host is gone as interrupted, their in-flight attempts
    /// as lost (`only`: just these runs). Returns how many runs were interrupted.
    @discardableResult
    public func recoverInterrupted(only: Set<Int64>? = nil) throws -> Int {
        try write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, coordinator, coalesce(resumed_at, submitted_at) AS since FROM run WHERE state = 'running'")
            var count = 0
            for row in rows {
                let id: Int64 = row["id"]
                let owner: String? = row["coordinator"]
                if Self.coordinatorAlive(owner, since: row["since"]) == true || only.map({ !$0.contains(id) }) == true { continue }
                // Its work stopped when its coordinator did, at the latest where an attempt of it was
                // last heard of: not now, when this process found it (maybe the next morning).
                let lastHeard = try Double.fetchOne(db, sql: """
                    SELECT max(max(a.dispatched_at, coalesce(a.started_at, 0), coalesce(a.finished_at, 0)))
                    FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ?
                    """, arguments: [id])
                try db.cachedStatement(sql: "UPDATE run SET interrupted_at = max(?, ?) WHERE id = ?")
                    .execute(arguments: [lastHeard ?? 0, row["since"] as Double? ?? 0, id])
                try db.cachedStatement(sql: """
                    UPDATE attempt SET state = 'lost', finished_at = ?, error_class = 'retryable', error_message = '\(Self.coordinatorStopped)'
                    WHERE state = 'running' AND stage_id IN (SELECT id FROM stage WHERE run_id = ?)
                    """).execute(arguments: [now(), id])
                try db.cachedStatement(sql: "UPDATE stage SET state = 'pending' WHERE run_id = ? AND state IN ('running', 'ready')").execute(arguments: [id])
                try db.cachedStatement(sql: "UPDATE run SET state = 'interrupted' WHERE id = ?").execute(arguments: [id])
                try db.cachedStatement(sql: "INSERT INTO event (at, run_id, kind, message) VALUES (?, ?, 'run.interrupted', ?)").execute(arguments: [now(), id, "coordinator \(owner ?? "?") is gone"])
                count += 1
            }
            return count
        }
    }

    /// A run taken over by this process: running again, owned here, and when (`run.resumed_at`, and a `run.resumed` event).
    /// The time it lay interrupted is added to `paused_s`, which its duration leaves out. Returns
    /// the seconds it had run before (its duration so far, as `v_runs.duration_s` counts it), from
    /// which the resuming coordinator counts on.
    private func markResumed(_ db: Database, _ runID: Int64) throws -> Double {
        let at = now()
        try db.cachedStatement(sql: """
            UPDATE run SET state = 'running', coordinator = ?, finished_at = NULL, resumed_at = ?,
                           paused_s = paused_s + max(0, ? - coalesce(interrupted_at, ?)), interrupted_at = NULL
            WHERE id = ?
            """).execute(arguments: [Self.owner, at, at, at, runID])
        try db.cachedStatement(sql: "INSERT INTO event (at, run_id, kind, message) VALUES (?, ?, 'run.resumed', ?)").execute(arguments: [at, runID, "resumed by \(Self.owner)"])
        return try Double.fetchOne(db, sql: "SELECT max(0, resumed_at - submitted_at - paused_s) FROM run WHERE id = ?", arguments: [runID]) ?? 0
    }

    /// An interrupted run of the same pipeline (same text, same file), taken over by this process.
    public func resume(_ pipeline: Pipeline) throws -> (runID: Int64, stageIDs: [String: Int64], secondsBefore: Double)? {
        try write { db in
            guard let runID = try Int64.fetchOne(db, sql: """
                SELECT id FROM run WHERE state = 'interrupted' AND submission_json IS NULL AND pipeline_sha256 = ? AND pipeline_path = ? ORDER BY id DESC LIMIT 1
                """, arguments: [SHA256Hasher.hex(pipeline.text), pipeline.file]) else { return nil }
            var ids: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT id, name FROM stage WHERE run_id = ?", arguments: [runID]) {
                ids[row["name"]] = row["id"]
            }
            return (runID, ids, try markResumed(db, runID))
        }
    }

    /// Interrupted runs that were handed to a coordinator service, with what it needs to resume them.
    public func interruptedSubmissions() throws -> [(runID: Int64, submission: String, planning: Bool)] {
        try write { db in
            try Row.fetchAll(db, sql: "SELECT id, submission_json, planning FROM run WHERE state = 'interrupted' AND submission_json IS NOT NULL ORDER BY id")
                .map { ($0["id"], $0["submission_json"], $0["planning"] != 0) }
        }
    }

    /// Marks a run as being planned for a resume (committed before planning starts), or done
    /// planning. A run still marked when its coordinator starts again stopped that coordinator.
    public func setPlanning(_ runID: Int64, _ planning: Bool) throws {
        try write { db in try db.execute(sql: "UPDATE run SET planning = ? WHERE id = ?", arguments: [planning ? 1 : 0, runID]) }
    }

    /// The CURVE key that submitted a run (nil: a local run, or no such run).
    public func runOwnerKey(_ runID: Int64) throws -> String? {
        try write { db in try String.fetchOne(db, sql: "SELECT owner_key FROM run WHERE id = ?", arguments: [runID]) }
    }

    /// Whether `sha256` is the movie of a run that `key` submitted.
    public func movieOwned(sha256: String, byKey key: String) throws -> Bool {
        try write { db in
            try Bool.fetchOne(db, sql: """
                SELECT EXISTS (SELECT 1 FROM artifact ar JOIN attempt_io io ON io.artifact_id = ar.id AND io.direction = 'out'
                               JOIN attempt a ON a.id = io.attempt_id JOIN stage s ON s.id = a.stage_id JOIN run r ON r.id = s.run_id
                               WHERE ar.sha256 = ? AND ar.kind = 'movie' AND r.owner_key = ?)
                """, arguments: [sha256, key]) ?? false
        }
    }

    /// An interrupted run handed to a coordinator service, taken over by this process.
    public func resume(runID: Int64) throws -> (stageIDs: [String: Int64], secondsBefore: Double)? {
        try write { db in
            guard try Int64.fetchOne(db, sql: "SELECT id FROM run WHERE id = ? AND state = 'interrupted'", arguments: [runID]) != nil else { return nil }
            var ids: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT id, name FROM stage WHERE run_id = ?", arguments: [runID]) { ids[row["name"]] = row["id"] }
            return (ids, try markResumed(db, runID))
        }
    }

    /// The stages of a run that have succeeded, by name: what a resumed run had done.
    public func succeededStages(runID: Int64) throws -> Set<String> {
        try read { db in
            Set(try String.fetchAll(db, sql: "SELECT name FROM stage WHERE run_id = ? AND state = 'succeeded'", arguments: [runID]))
        }
    }

    /// The renders of a run that were in flight when its coordinator was killed (recorded lost
    /// by `recoverInterrupted`) or stopped past its drain timeout, each with the key of its output: their workers may still run
    /// them, and the coordinator that resumes the run keeps what they make.
    public func orphanedAttempts(runID: Int64) throws -> [OrphanedAttempt] {
        let rows = try read { db in
            try Row.fetchAll(db, sql: """
                SELECT a.id, a.lease, a.worker_id, s.key, s.name FROM attempt a JOIN stage s ON s.id = a.stage_id
                WHERE s.run_id = ? AND a.state = 'lost' AND a.error_message = '\(Self.coordinatorStopped)' AND a.slot IS NOT NULL
                ORDER BY a.id
                """, arguments: [runID])
        }
        var found: [OrphanedAttempt] = []
        for row in rows {
            let lease = String((row["lease"] as String).prefix { $0 != "#" })
            let id: Int64 = row["id"], key: String? = row["key"]
            if let k = found.firstIndex(where: { $0.lease == lease }) {
                found[k].attemptIDs.append(id)
                if found[k].key.isEmpty, let key { found[k].key = key }
            } else {
                found.append(OrphanedAttempt(runID: runID, lease: lease, worker: row["worker_id"], key: key ?? "", attemptIDs: [id], stage: row["name"]))
            }
        }
        return found.filter { !$0.key.isEmpty }
    }

    /// A run whose coordinator stops before it ends: in-flight attempts handed back (lost), the run
    /// left for the next coordinator to resume.
    public func interruptRun(_ runID: Int64, reason: String) throws {
        try write { db in
            try db.cachedStatement(sql: """
                UPDATE attempt SET state = 'lost', finished_at = ?, error_class = 'retryable', error_message = ?
                WHERE state = 'running' AND stage_id IN (SELECT id FROM stage WHERE run_id = ?)
                """).execute(arguments: [now(), reason, runID])
            try db.cachedStatement(sql: "UPDATE stage SET state = 'pending' WHERE run_id = ? AND state IN ('running', 'ready')").execute(arguments: [runID])
            try db.cachedStatement(sql: "UPDATE run SET state = 'interrupted', interrupted_at = ? WHERE id = ?").execute(arguments: [now(), runID])
            try db.cachedStatement(sql: "INSERT INTO event (at, run_id, kind, message) VALUES (?, ?, 'run.interrupted', ?)").execute(arguments: [now(), runID, reason])
        }
    }

    public struct RunRecord: Sendable {
        public var state: String
        public var error: String?
        public var outputPath: String
        public var seconds: Double
        /// The movie in the store, when the run succeeded.
        public var movie: (sha256: String, uri: String, size: Int64)?
        /// What planning noted (`item.note` events), each once, in the order noted.
        public var notes: [String] = []
    }

    /// How a run stands, and its movie.
    public func runRecord(_ runID: Int64) throws -> RunRecord? {
        try write { db in
            guard let r = try Row.fetchOne(db, sql: "SELECT state, error, output_path, coalesce(finished_at, interrupted_at, ?) - submitted_at - paused_s AS s FROM run WHERE id = ?",
                                           arguments: [now(), runID]) else { return nil }
            let m = try Row.fetchOne(db, sql: """
                SELECT ar.sha256, ar.uri, ar.size FROM attempt_io io JOIN artifact ar ON ar.id = io.artifact_id
                JOIN attempt a ON a.id = io.attempt_id JOIN stage s ON s.id = a.stage_id
                WHERE s.run_id = ? AND s.name = 'concat' AND io.direction = 'out' AND ar.kind = 'movie' ORDER BY a.id DESC LIMIT 1
                """, arguments: [runID])
            return RunRecord(state: r["state"], error: r["error"], outputPath: r["output_path"], seconds: r["s"],
                             movie: m.map { ($0["sha256"], $0["uri"], $0["size"]) }, notes: try Self.notes(db, run: runID))
        }
    }

    /// A run's notes (`item.note` events) in the order noted. A run resumed after a restart
    /// fetches again and notes again: each is listed once.
    static func notes(_ db: Database, run id: Int64) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT message FROM event WHERE run_id = ? AND kind = 'item.note' GROUP BY message ORDER BY min(id)",
                            arguments: [id])
    }

    /// Holds one read transaction open, as a slow dashboard query would, until `done` says so
    /// (asked every 10 ms); returns the seconds it was held.
    public static func holdReadTransaction(path: String, until done: () -> Bool) throws -> Double {
        let reader = try reader(path: path)
        return try reader.inDatabase { db in
            try db.cachedStatement(sql: "BEGIN DEFERRED").execute()
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM stage")
            let start = Clocks.steady
            while !done() { usleep(10_000) }
            let held = Clocks.steady - start
            try db.cachedStatement(sql: "COMMIT").execute()
            return held
        }
    }

    /// What `coord status` says of a run (one argument: its id): its `v_runs` row and its items
    /// (`coord wait` counts them on its total line; a run that ended before it was followed
    /// tells no progress, and the line read "0/0 items").
    public static let statusRunSQL = "SELECT v.*, (SELECT count(*) FROM item i WHERE i.run_id = v.id) AS items FROM v_runs v WHERE v.id = ?"

    /// A run's stages as `coord status` lists them (one argument: the run id), in the plan's order.
    public static let statusStagesSQL = "SELECT name, state, cached, attempts, round(seconds, 3) AS seconds, error FROM v_stages WHERE run_id = ? ORDER BY id"

    /// What `coord status` lists under a run's stages (one argument: the run id): its failed and
    /// lost attempts, and those a draining worker handed back, in the order they were sent (a
    /// stage's second attempt otherwise had no word of why there was one). `kept` and `stopped`
    /// (1 or 0) mark those `noFailureSQL` counts as no failure.
    public static let setbacksSQL = """
        SELECT s.name AS stage, a.attempt_no, a.worker_id, a.state, a.error_class, a.error_message,
               \(keptRenderSQL) AS kept, \(cancelledAsItStoppedSQL) AS stopped
        FROM attempt a JOIN stage s ON s.id = a.stage_id
        WHERE s.run_id = ? AND a.state IN ('\(AttemptStatus.failed.rawValue)', '\(AttemptStatus.lost.rawValue)', '\(AttemptStatus.handedBack.rawValue)')
              AND NOT \(lostCheckSQL)
        ORDER BY a.id
        """

    /// Rows of a query on a read-only connection, as dashboards and tests read while a render writes.
    public static func readRows(path: String, _ sql: String, _ arguments: [any DatabaseValueConvertible] = []) throws -> [[String: String]] {
        let reader = try reader(path: path)
        do { return try reader.read { db in try stringRows(db, sql, arguments) } } catch { throw explain(error, path: path) }
    }

    /// A query's rows as column → text dictionaries (NULL as "").
    static func stringRows(_ db: Database, _ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [[String: String]] {
        try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments.map { $0 as (any DatabaseValueConvertible)? })).map { row in
            var d: [String: String] = [:]
            for (col, value) in row { d[col] = value.isNull ? "" : String(describing: value.storage.value ?? "") }
            return d
        }
    }

    // MARK: recording (coordinator thread)

    public func now() -> Double { Date().timeIntervalSince1970 }

    /// The run a submission named `id` (the submitter's name for it, kept in its
    /// `submission_json`) by `ownerKey` made, if any: a submission sent again is not run twice.
    public func submittedRun(id: String, ownerKey: String?) throws -> Int64? {
        try write { db in
            try Int64.fetchOne(db, sql: """
                SELECT id FROM run WHERE json_extract(submission_json, '$.id') = ? AND submission_json IS NOT NULL AND owner_key IS ?
                ORDER BY id DESC LIMIT 1
                """, arguments: [id, ownerKey])
        }
    }

    /// `submission`: for runs handed to `coord serve`, what it needs to resume them after a restart.
    public func createRun(_ pipeline: Pipeline, stages: [PlannedStage], submitter: String? = nil, priority: Int = 0,
                          submission: String? = nil, ownerKey: String? = nil) throws -> (runID: Int64, stageIDs: [String: Int64]) {
        try writeWhole { db in
            try db.cachedStatement(sql: """
                INSERT INTO run (name, pipeline_path, pipeline_sha256, pipeline_text, output_path, submitter, submitted_at, state, coordinator,
                                 priority, submission_json, owner_key)
                VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)
                """).execute(arguments: [pipeline.name, pipeline.file, SHA256Hasher.hex(pipeline.text), pipeline.text,
                                 pipeline.output.path, submitter ?? ProcessInfo.processInfo.userName, now(), Self.owner,
                                 priority, submission, ownerKey])
            let runID = db.lastInsertedRowID
            let encoder = JSONEncoder(); encoder.outputFormatting = [.sortedKeys]
            for (i, item) in pipeline.items.enumerated() {
                let kind = item.kindName
                let params = String(decoding: try encoder.encode(item), as: UTF8.self)
                try db.cachedStatement(sql: "INSERT INTO item (run_id, idx, kind, label, source_uri, params_json) VALUES (?, ?, ?, ?, ?, ?)").execute(arguments: [runID, i, kind, item.label(index: i), item.sources.first?.uri, params])
            }
            var ids: [String: Int64] = [:]
            for s in stages {
                try db.cachedStatement(sql: "INSERT INTO stage (run_id, item_idx, name, kind, state) VALUES (?, ?, ?, ?, 'pending')").execute(arguments: [runID, s.item, s.id, s.kind.rawValue])
                ids[s.id] = db.lastInsertedRowID
            }
            for s in stages {
                for d in s.dependencies {
                    try db.cachedStatement(sql: "INSERT INTO stage_edge (run_id, from_stage, to_stage) VALUES (?, ?, ?)").execute(arguments: [runID, ids[d], ids[s.id]])
                }
            }
            try db.cachedStatement(sql: "INSERT INTO event (at, run_id, kind, message) VALUES (?, ?, 'run.submitted', ?)").execute(arguments: [now(), runID, "\(pipeline.name): \(pipeline.items.count) items"])
            return (runID, ids)
        }
    }

    public func setItemTiming(runID: Int64, timeline: [ItemTiming]) throws {
        try write { db in
            for t in timeline {
                try db.cachedStatement(sql: "UPDATE item SET start_frame = ?, frame_count = ? WHERE run_id = ? AND idx = ?").execute(arguments: [t.startFrame, t.frameCount, runID, t.item])
            }
        }
    }

    /// What a ready stage records besides its state: its parameters (JSON) and their SHA-256,
    /// and its output key.
    public struct StageParameters: Sendable {
        public var params: String?
        public var paramsSHA256: String?
        public var key: String?
        /// What a render should cost (`RenderCost`, milliseconds of a core), when known.
        public var cost: Double?
        public init(params: String?, key: String?, cost: Double? = nil) {
            self.params = params; self.paramsSHA256 = params.map { SHA256Hasher.hex($0) }; self.key = key; self.cost = cost
        }
    }

    /// Stages that became ready, with what they record (one UPDATE each).
    public func stagesReady(_ stageIDs: [Int64], _ p: StageParameters) throws {
        try write { db in
            let update = try db.cachedStatement(sql: """
                UPDATE stage SET state = 'ready', params_json = coalesce(?, params_json), params_sha256 = coalesce(?, params_sha256),
                    key = coalesce(?, key), cost_ms = coalesce(?, cost_ms) WHERE id = ?
                """)
            for id in stageIDs { try update.execute(arguments: [p.params, p.paramsSHA256, p.key, p.cost, id]) }
        }
    }

    /// `first`: the caller knows this is the stage's first end state, its kind and whether it was
    /// cached (the metric then needs no read of the row).
    public func stageUpdate(_ stageID: Int64, state: StageStatus, params: String? = nil, key: String? = nil, error: String? = nil,
                            started: Double? = nil, finished: Double? = nil, seconds: Double? = nil, attempts: Int? = nil,
                            first: (kind: String, cached: Bool)? = nil) throws {
        try write { db in
            // A stage reaching an end state for the first time is counted (threadline_stages_total).
            var ended: (kind: String, cached: Bool)? = state.isEnd ? first : nil
            if state.isEnd, first == nil,
               let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT kind, state, cached FROM stage WHERE id = ?"), arguments: [stageID]),
               !FarmMetrics.endStates.contains(row["state"] as String) {
                ended = (row["kind"], row["cached"] as Int != 0)
            }
            defer { if let ended { FarmMetrics.stageEnded(kind: ended.kind, state: state.rawValue, cached: ended.cached, seconds: seconds) } }
            try db.cachedStatement(sql: """
                UPDATE stage SET state = ?,
                    params_json = coalesce(?, params_json), params_sha256 = coalesce(?, params_sha256),
                    key = coalesce(?, key), error = coalesce(?, error),
                    started_at = coalesce(started_at, ?), finished_at = coalesce(?, finished_at),
                    seconds = coalesce(?, seconds), attempts = coalesce(?, attempts)
                WHERE id = ?
                """).execute(arguments: [state.rawValue, params, params.map { SHA256Hasher.hex($0) }, key, error, started, finished, seconds, attempts, stageID])
        }
    }

    public func workerSeen(id: String, host: String, pid: Int, slots: Int, version: String, state: WorkerStatus = .up) throws {
        try write { db in
            let t = now()
            try db.cachedStatement(sql: """
                INSERT INTO worker (id, host, pid, slots, version, first_seen, last_seen, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(id) DO UPDATE SET last_seen = excluded.last_seen, state = excluded.state, slots = excluded.slots
                """).execute(arguments: [id, host, pid, slots, version, t, t, state.rawValue])
        }
    }

    /// A stopping coordinator's workers, up or draining, recorded as gone: they are no longer its
    /// (and say hello again to the next coordinator, which records them up).
    public func workersGone(_ ids: [String]) throws {
        try write { db in
            for id in ids {
                try db.cachedStatement(sql: "UPDATE worker SET state = 'gone', last_seen = ? WHERE id = ? AND state IN ('up', 'draining')")
                    .execute(arguments: [now(), id])
            }
        }
    }

    public func workerState(id: String, state: WorkerStatus) throws {
        try write { db in try db.cachedStatement(sql: "UPDATE worker SET state = ?, last_seen = ? WHERE id = ?").execute(arguments: [state.rawValue, now(), id]) }
    }

    /// Records one try of a stage (for decode/transform/encode, one attempt row per stage).
    /// `ready`: what the stages' rows record as ready, when that was not written yet (a stage made
    /// ready and sent in the same turn needs one UPDATE, not two).
    public func attemptDispatched(stageIDs: [Int64], attemptNo: Int, worker: String, slot: Int?, lease: String,
                                  ready: StageParameters? = nil) throws -> [Int64] {
        try write { db in
            var ids: [Int64] = []
            let t = now()
            let insert = try db.cachedStatement(sql: """
                INSERT INTO attempt (stage_id, attempt_no, worker_id, slot, lease, dispatched_at, state) VALUES (?, ?, ?, ?, ?, ?, 'running')
                """)
            let update = try db.cachedStatement(sql: """
                UPDATE stage SET state = 'running', attempts = ?, started_at = coalesce(started_at, ?),
                    params_json = coalesce(?, params_json), params_sha256 = coalesce(?, params_sha256), key = coalesce(?, key),
                    cost_ms = coalesce(?, cost_ms) WHERE id = ?
                """)
            for (i, s) in stageIDs.enumerated() {
                try insert.execute(arguments: [s, attemptNo, worker, slot, stageIDs.count > 1 ? "\(lease)#\(i)" : lease, t])
                ids.append(db.lastInsertedRowID)
                try update.execute(arguments: [attemptNo, t, ready?.params, ready?.paramsSHA256, ready?.key, ready?.cost, s])
            }
            return ids
        }
    }

    /// Attempts their worker handed back unbegun once their coordinator had stopped (their inputs
    /// were still coming from it): no render was lost. When they ended stays the stop's time.
    public func attemptsHandedBackUnbegun(_ attemptIDs: [Int64], worker: String) throws {
        guard !attemptIDs.isEmpty else { return }
        try write { db in
            try db.execute(sql: "UPDATE attempt SET state = ?, error_class = NULL, error_message = ? WHERE id IN (\(databaseQuestionMarks(count: attemptIDs.count)))",
                           arguments: StatementArguments([AttemptStatus.handedBack.rawValue, Self.handedBackUnbegun(by: worker)]) + StatementArguments(attemptIDs))
        }
    }

    /// What an attempt handed back unbegun after its coordinator stopped reads (`coord status`
    /// tells it by its start).
    public static func handedBackUnbegun(by worker: String) -> String {
        "\(coordinatorStopped) before its inputs reached worker \(worker), which handed it back unbegun"
    }

    public func attemptFinished(_ attemptID: Int64, state: AttemptStatus, started: Double?, finished: Double?, errorClass: String? = nil,
                                errorMessage: String? = nil, cpu: Double? = nil, maxRSS: Int64? = nil) throws {
        try write { db in
            try db.cachedStatement(sql: """
                UPDATE attempt SET state = ?, started_at = coalesce(?, started_at), finished_at = coalesce(?, ?),
                    error_class = ?, error_message = ?, cpu_s = ?, max_rss = ? WHERE id = ?
                """).execute(arguments: [state.rawValue, started, finished, now(), errorClass, errorMessage, cpu, maxRSS, attemptID])
        }
    }

    @discardableResult
    public func recordArtifact(sha256: String, uri: String, size: Int64, kind: String, facts: String?, key: String?,
                               attemptID: Int64?, inputs: [Int64] = []) throws -> Int64 {
        try write { db in
            try db.cachedStatement(sql: """
                INSERT INTO artifact (sha256, uri, size, kind, facts_json, key, attempt_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [sha256, uri, size, kind, facts, key, attemptID, now()])
            let id = db.lastInsertedRowID
            if let attemptID {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO attempt_io (attempt_id, artifact_id, direction) VALUES (?, ?, 'out')").execute(arguments: [attemptID, id])
                for input in inputs {
                    try db.cachedStatement(sql: "INSERT OR IGNORE INTO attempt_io (attempt_id, artifact_id, direction) VALUES (?, ?, 'in')").execute(arguments: [attemptID, input])
                }
            }
            return id
        }
    }

    public func runFinished(_ runID: Int64, state: RunStatus, error: String? = nil) throws {
        try write { db in
            // A run that ended leaves no stage waiting or running: the ones it did not finish are
            // cancelled, before the run's state changes (its stage counts are kept from that moment:
            // `run_progress`).
            let left = try Row.fetchAll(db.cachedStatement(sql: "SELECT kind, count(*) AS n FROM stage WHERE run_id = ? AND state IN ('pending', 'ready', 'running') GROUP BY kind"),
                                        arguments: [runID])
            try db.cachedStatement(sql: "UPDATE stage SET state = 'cancelled' WHERE run_id = ? AND state IN ('pending', 'ready', 'running')").execute(arguments: [runID])
            try db.cachedStatement(sql: "UPDATE run SET state = ?, finished_at = ?, error = ? WHERE id = ?").execute(arguments: [state.rawValue, now(), error, runID])
            for r in left { FarmMetrics.stagesCancelled(kind: r["kind"], count: r["n"]) }
            try db.cachedStatement(sql: "INSERT INTO event (at, run_id, kind, message) VALUES (?, ?, ?, ?)").execute(arguments: [now(), runID, "run.\(state.rawValue)", error ?? state.rawValue])
            let w = writeStatistics
            try db.cachedStatement(sql: "INSERT INTO event (at, run_id, kind, message) VALUES (?, ?, 'lineage.writes', ?)").execute(arguments: [now(), runID, String(format: "writes=%d max_write_ms=%.1f", w.count, w.maxSeconds * 1000)])
        }
    }

    public func event(_ kind: String, _ message: String, runID: Int64? = nil, stageID: Int64? = nil) throws {
        try write { db in
            try db.cachedStatement(sql: "INSERT INTO event (at, run_id, stage_id, kind, message) VALUES (?, ?, ?, ?, ?)").execute(arguments: [now(), runID, stageID, kind, message])
        }
    }

    // MARK: reading

    /// Rows of a query as dictionaries of strings, for CLI output and tests.
    public func rows(_ sql: String, _ arguments: [any DatabaseValueConvertible] = []) throws -> [[String: String]] {
        try read { db in try Self.stringRows(db, sql, arguments) }
    }
}

// MARK: - cache

/// A render a killed coordinator gave out (`LineageStore.orphanedAttempts`).
public struct OrphanedAttempt: Sendable, Equatable {
    public var runID: Int64
    /// The lease it went out under (a render's stages share one: theirs are `lease#k`).
    public var lease: String
    public var worker: String
    /// The output key it makes.
    public var key: String
    /// Its attempt rows, one a stage.
    public var attemptIDs: [Int64]
    /// Its stage, as lineage names it (the first of a render's stages).
    public var stage: String
    /// Why it was lost, when its worker was (silent past the liveness timeout) rather than its
    /// coordinator: the worker came back still running it (`CoordinatorCore.lostRenders`).
    public var workerLost: String?
    public init(runID: Int64, lease: String, worker: String, key: String, attemptIDs: [Int64], stage: String, workerLost: String? = nil) {
        self.runID = runID; self.lease = lease; self.worker = worker; self.key = key; self.attemptIDs = attemptIDs; self.stage = stage
        self.workerLost = workerLost
    }

    /// How its attempt reads once its output is kept (`coord status` adds "not rendered again").
    public func kept(by worker: String) -> String {
        workerLost.map { "worker \(worker) lost (\($0)); it came back and finished it, and its output was kept" }
            ?? "coordinator stopped; worker \(worker) finished it after, and its output was kept for the resumed run"
    }

    /// When it went out, for the events that tell of it.
    public var givenOut: String {
        workerLost.map { "given out before its worker was lost (\($0))" } ?? "given out before the last coordinator stopped"
    }
}

/// An artifact recorded under a stage key.
public struct CachedArtifact: Sendable {
    public var id: Int64
    public var sha256: String
    public var path: String
    public var size: Int64
}

extension LineageStore {
    /// The newest artifact recorded under `key`, if any (its file is verified by whoever reuses it).
    /// Every kind the artifact store holds — a source copy, a segment, a transition, a movie — but
    /// not an `output` row (the user's copy, which may have been moved or edited since). Its
    /// `path` is where the store held it when recorded: a state folder moved since holds it
    /// elsewhere (see `ArtifactStore.local`).
    public func cachedArtifact(key: String) throws -> CachedArtifact? {
        try read { db in
            // A statement kept prepared with the connection: preparing it for each render took
            // ~50 µs, a sixth of the coordinator's work per render (coord bench-scheduler).
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT id, sha256, uri, size FROM artifact WHERE key = ? AND kind IN ('source', 'segment', 'transition', 'movie')
                ORDER BY id DESC LIMIT 1
                """), arguments: [key]).map { CachedArtifact(id: $0["id"], sha256: $0["sha256"], path: $0["uri"], size: $0["size"]) }
        }
    }

    /// Records that an attempt reused an artifact (and what it read to get there).
    public func linkArtifact(attemptID: Int64, artifactID: Int64, inputs: [Int64]) throws {
        try write { db in
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO attempt_io (attempt_id, artifact_id, direction) VALUES (?, ?, 'out')").execute(arguments: [attemptID, artifactID])
            for i in inputs {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO attempt_io (attempt_id, artifact_id, direction) VALUES (?, ?, 'in')").execute(arguments: [attemptID, i])
            }
        }
    }

    /// The media facts recorded with a source artifact.
    public func artifactFacts(_ id: Int64) throws -> MediaFacts? {
        let json: String? = try read { db in try String.fetchOne(db.cachedStatement(sql: "SELECT facts_json FROM artifact WHERE id = ?"), arguments: [id]) }
        return try json.map { try JSONDecoder().decode(MediaFacts.self, from: Data($0.utf8)) }
    }

    public func stageCached(_ stageID: Int64) throws {
        try write { db in try db.cachedStatement(sql: "UPDATE stage SET cached = 1 WHERE id = ?").execute(arguments: [stageID]) }
        FarmMetrics.cacheHit()
    }
}

// MARK: - lineage of an output

/// How one output came to be: its run, every stage with its parameters, every source with its hash.
public struct OutputLineage: Codable, Sendable {
    public struct Source: Codable, Sendable { public var item: Int; public var uri: String; public var sha256: String; public var storePath: String; public var facts: MediaFacts? }
    public struct Stage: Codable, Sendable {
        public var name: String; public var kind: String; public var state: String; public var cached: Bool
        public var key: String?; public var parameters: String?; public var seconds: Double?
    }
    /// An artifact the output was made from, `depth` steps back (its nearest way), with what it
    /// was made from in turn (`inputs`: other nodes' `id`s in the movie's order, `LineageOrder`;
    /// a watermark is an input of every segment).
    public struct Node: Codable, Sendable {
        public var id: Int64; public var depth: Int; public var kind: String; public var sha256: String; public var uri: String
        public var inputs: [Int64]
        /// The item (from 0) whose stage of this run made it, where one did (a source, a segment).
        public var item: Int?
    }
    public var output: String
    public var sha256: String
    public var run: Int64
    public var pipeline: String
    public var pipelineSHA256: String
    public var sources: [Source]
    public var stages: [Stage]
    public var tree: [Node]
}

extension LineageStore {
    /// Where a recorded store file is now: a state folder that was moved (to a bigger disk) keeps
    /// its artifacts by hash under its new root, while lineage holds the path at the time.
    /// (Under the root as it is now, nothing is looked up.)
    static func inStore(_ uri: String, sha256: String, root: String) -> String {
        guard uri.contains("/artifacts/sha256/"), !uri.hasPrefix(root + "/artifacts/sha256/") else { return uri }
        let here = "\(root)/artifacts/sha256/\(sha256.prefix(2))/\(sha256)"
        return FileManager.default.fileExists(atPath: here) ? here : uri
    }

    /// The lineage of an output file (by path) or artifact (by sha256 or its prefix). `file`: the
    /// path of the file `target` is the sha256 of, when it is one: of the runs that made the same
    /// bytes (two projects alike but for their names, a project submitted again), the last one
    /// that wrote its movie there is told, not whichever made them first.
    public static func lineage(path dbPath: String, of target: String, file: String? = nil) throws -> OutputLineage? {
        let reader = try reader(path: dbPath)
        let root = (dbPath as NSString).deletingLastPathComponent
        return try reader.read { db in
            guard let out = try Row.fetchOne(db, sql: """
                SELECT id, sha256, uri, attempt_id FROM artifact
                WHERE (kind = 'output' AND uri = ?) OR sha256 = ? OR (length(?) >= 8 AND sha256 LIKE ? || '%')
                ORDER BY (kind = 'output' AND uri IS ?) DESC, (kind = 'output') DESC, (attempt_id IS NOT NULL) DESC, id DESC LIMIT 1
                """, arguments: [target, target, target, target, file]) else { return nil }
            let outID: Int64 = out["id"]
            // A farm's movie has no output row (its submitter wrote the file): the last run writing
            // to `file` whose movie these bytes were.
            let writer: Row? = try file.flatMap { file in
                try Row.fetchOne(db, sql: """
                    SELECT r.id, r.pipeline_path, r.pipeline_sha256 FROM artifact ar
                    JOIN attempt_io io ON io.artifact_id = ar.id AND io.direction = 'out'
                    JOIN attempt a ON a.id = io.attempt_id JOIN stage s ON s.id = a.stage_id JOIN run r ON r.id = s.run_id
                    WHERE ar.sha256 = ? AND ar.kind IN ('movie', 'output') AND r.output_path = ?
                    ORDER BY r.id DESC LIMIT 1
                    """, arguments: [out["sha256"] as String, file])
            }
            // A file no attempt made (a font, a sticker, the soundtrack): the last run that read it.
            guard let runRow = try writer ?? Row.fetchOne(db, sql: """
                SELECT r.id, r.pipeline_path, r.pipeline_sha256 FROM attempt a JOIN stage s ON s.id = a.stage_id JOIN run r ON r.id = s.run_id
                WHERE a.id = coalesce(?, (SELECT max(io.attempt_id) FROM attempt_io io WHERE io.artifact_id = ? AND io.direction = 'in'))
                """, arguments: [out["attempt_id"] as Int64?, outID]) else { return nil }
            let runID: Int64 = runRow["id"]
            let stages = try Row.fetchAll(db, sql: """
                SELECT name, kind, state, cached, key, params_json, seconds FROM stage WHERE run_id = ? ORDER BY id
                """, arguments: [runID]).map {
                OutputLineage.Stage(name: $0["name"], kind: $0["kind"], state: $0["state"], cached: ($0["cached"] as Int) != 0,
                                    key: $0["key"], parameters: $0["params_json"], seconds: $0["seconds"])
            }
            let sources = try Row.fetchAll(db, sql: """
                SELECT i.idx, i.source_uri, ar.sha256, ar.uri AS store, ar.facts_json
                FROM item i
                JOIN stage s ON s.run_id = i.run_id AND s.name = 'fetch/' || i.idx
                JOIN attempt a ON a.stage_id = s.id AND a.state IN ('succeeded', 'cached')
                JOIN attempt_io io ON io.attempt_id = a.id AND io.direction = 'out'
                JOIN artifact ar ON ar.id = io.artifact_id
                WHERE i.run_id = ? GROUP BY i.idx ORDER BY i.idx
                """, arguments: [runID]).map { row -> OutputLineage.Source in
                let facts = (row["facts_json"] as String?).flatMap { try? JSONDecoder().decode(MediaFacts.self, from: Data($0.utf8)) }
                return OutputLineage.Source(item: row["idx"], uri: row["source_uri"], sha256: row["sha256"], storePath: row["store"], facts: facts)
            }
            let tree = try Row.fetchAll(db, sql: """
                WITH RECURSIVE walk(artifact_id, depth) AS (
                    SELECT ?, 0
                    UNION
                    SELECT e.input_id, w.depth + 1 FROM walk w JOIN v_artifact_inputs e ON e.artifact_id = w.artifact_id WHERE w.depth < 16
                )
                SELECT a.id, min(w.depth) AS depth, a.kind, a.sha256, a.uri,
                       (SELECT group_concat(input_id) FROM (SELECT DISTINCT e.input_id FROM v_artifact_inputs e
                                                            WHERE e.artifact_id = a.id ORDER BY e.input_id)) AS inputs,
                       (SELECT s.item_idx FROM attempt_io io JOIN attempt t ON t.id = io.attempt_id JOIN stage s ON s.id = t.stage_id
                        WHERE io.artifact_id = a.id AND io.direction = 'out' AND s.run_id = ? LIMIT 1) AS item
                FROM walk w JOIN artifact a ON a.id = w.artifact_id
                GROUP BY a.id ORDER BY depth, item, a.id
                """, arguments: [outID, runID]).map {
                OutputLineage.Node(id: $0["id"], depth: $0["depth"], kind: $0["kind"], sha256: $0["sha256"], uri: $0["uri"],
                                   inputs: (($0["inputs"] as String?) ?? "").split(separator: ",").compactMap { Int64($0) }, item: $0["item"])
            }
            return OutputLineage(output: out["uri"], sha256: out["sha256"], run: runID, pipeline: runRow["pipeline_path"],
                                 pipelineSHA256: runRow["pipeline_sha256"],
                                 sources: sources.map { var s = $0; s.storePath = inStore(s.storePath, sha256: s.sha256, root: root); return s },
                                 stages: stages,
                                 tree: LineageOrder.ordered(tree, id: \.id, inputs: \.inputs, item: \.item, kind: \.kind)
                                    .map { var n = $0; if n.kind != "output" { n.uri = inStore(n.uri, sha256: n.sha256, root: root) }; return n })
        }
    }
}

/// The order a person reads what an artifact was made from in: the movie's (by item), then
/// segment, transition, source, font, sticker, watermark, soundtrack. `coord lineage` and the
/// run page both draw `inputs` in this order.
public enum LineageOrder {
    static let kinds = ["movie", "segment", "transition", "source", "font", "sticker", "watermark", "soundtrack"]

    /// `nodes` with each one's `inputs` (other nodes' ids, by `id`) put in that order; ties by id.
    static func ordered<Node, ID: Comparable & Hashable>(_ nodes: [Node], id: KeyPath<Node, ID>, inputs: WritableKeyPath<Node, [ID]>,
                                                          item: KeyPath<Node, Int?>, kind: KeyPath<Node, String>) -> [Node] {
        let byID = Dictionary(nodes.map { ($0[keyPath: id], $0) }, uniquingKeysWith: { a, _ in a })
        func key(_ i: ID) -> (Int, Int) {
            let n = byID[i]
            return (n?[keyPath: item] ?? .max, n.flatMap { kinds.firstIndex(of: $0[keyPath: kind]) } ?? kinds.count)
        }
        return nodes.map { n in
            var n = n
            n[keyPath: inputs] = n[keyPath: inputs].sorted { a, b in key(a) != key(b) ? key(a) < key(b) : a < b }
            return n
        }
    }
}
