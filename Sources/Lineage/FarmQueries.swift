import Foundation
import GRDB
import ThreadlineCore

/// What the dashboard shows, read from a lineage database over one read-only connection while
/// a coordinator writes it (WAL: readers never block the writer). Every query is bounded by an
/// index: 1,000 runs / 100,000 stages answer in milliseconds.
public struct FarmReader: Sendable {
    public let path: String
    let db: DatabaseQueue

    public init(path: String) throws {
        self.path = path
        db = try LineageStore.reader(path: path, busyTimeout: 2)
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do { return try db.read(body) } catch { throw LineageStore.explain(error, path: path) }
    }

    /// Changes whenever another connection commits: the live pages poll it (cheap) and fetch
    /// only when it moved.
    public func dataVersion() throws -> Int64 {
        try db.inDatabase { db in try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
    }

    // MARK: runs

    public struct StageCounts: Codable, Sendable, Equatable {
        public var pending = 0, ready = 0, running = 0, succeeded = 0, cached = 0, failed = 0, cancelled = 0
        public init() {}
        public var total: Int { pending + ready + running + succeeded + cached + failed + cancelled }
        mutating func add(state: String, cached isCached: Bool, count: Int) {
            switch state {
            case "succeeded": if isCached { cached += count } else { succeeded += count }
            case "running": running += count
            case "ready": ready += count
            case "failed": failed += count
            case "cancelled": cancelled += count
            default: pending += count
            }
        }
    }

    public struct Run: Codable, Sendable {
        public var id: Int64
        public var name: String
        public var state: String
        public var items: Int
        public var itemsDone: Int
        public var stages: StageCounts
        public var started: Double
        public var finished: Double?
        /// Seconds it was worked on: from `started` to its end (or now) less `pausedS`, the time it
        /// lay interrupted before its resumes.
        public var durationS: Double
        public var pausedS: Double
        /// Planned frames of the items rendered so far, and of all items (a looped item's segment
        /// counted once: it is rendered once), for a running run or the one run asked for; nil
        /// until every item's length is known (the timeline is recorded once the last source is fetched).
        public var framesDone: Int?
        public var framesTotal: Int?
        /// Seconds left for a running run, from the speed of its own renders and those in flight
        /// (`TimeLeft.Slots`, as `coord submit` shows it); nil until it rendered a frame and the
        /// lengths are known.
        public var etaS: Double?
        /// The renders a running run's every frame left is in, when they should be done by now
        /// (`TimeLeft.finishing`): the page says so rather than "ETA 0.0 s", as `coord submit` does.
        public var finishingRenders: Int?
        /// A running run whose every frame is rendered: the concat is joining the movie.
        public var joining: Bool
        public var outputPath: String
        public var pipelinePath: String
        public var error: String?
        public var priority: Int
        /// Who submitted it: the name its client gave ("alice@laptop", not checked) and, on a farm
        /// with keys, the first 8 characters of the key it came with (checked; nil: the farm's own user).
        /// Each key's runs share the farm equally.
        public var submitter: String?
        public var ownerKey: String?

        /// The API's names (snake case) spelled out: the run list encodes 1,000 runs per
        /// refresh, and an encoder converting every key's case spent a third of its time on it.
        enum CodingKeys: String, CodingKey {
            case id, name, state, items, stages, started, finished, joining, error, priority, submitter
            case itemsDone = "items_done", durationS = "duration_s", pausedS = "paused_s", framesDone = "frames_done"
            case framesTotal = "frames_total", etaS = "eta_s", finishingRenders = "finishing_renders", outputPath = "output_path", pipelinePath = "pipeline_path"
            case ownerKey = "owner_key"
        }
    }

    /// The frames an item's render makes: the frames it occupies in the movie (`frame_count`)
    /// over the times its segment plays (a loop is rendered once and repeated by the concat).
    static let renderedFrames = "i.frame_count / max(1, coalesce(json_extract(i.params_json, '$.edits.loop'), 1))"

    /// Each running run's cost per frame (`c(run_id, cpf)`, `RunProgress.costPerFrame`): the
    /// render costs its stages record over their items' frames, for the runs listed at `?`s.
    static func costPerFrame(_ list: String) -> String {
        """
        WITH c(run_id, cpf) AS (SELECT s.run_id, sum(s.cost_ms) / sum(\(renderedFrames)) FROM stage s
            JOIN item i ON i.run_id = s.run_id AND i.idx = s.item_idx
            WHERE s.run_id IN (\(list)) AND s.kind = 'decode' AND s.cost_ms > 0 AND i.frame_count > 0 GROUP BY s.run_id)
        """
    }

    /// An item's frames weighed by what its render should cost, as `coord submit` counts them
    /// (`RunState.weighedFrames`): the cost its stage `stage` records over its run's cost per
    /// frame (`c`, from `costPerFrame`), or its frames while it records none.
    static func weighedFrames(_ stage: String) -> String {
        "(CASE WHEN \(stage).cost_ms > 0 AND c.cpf > 0 THEN max(1, CAST(round(\(stage).cost_ms / c.cpf) AS INTEGER)) ELSE \(renderedFrames) END)"
    }

    /// The newest runs first (at most `limit`), or one run.
    public func runs(limit: Int = 1000, id: Int64? = nil, now: Double = Date().timeIntervalSince1970) throws -> [Run] {
        try read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT r.id, r.name, r.state, r.submitted_at, r.finished_at, r.output_path, r.pipeline_path, r.error, r.priority,
                       (SELECT count(*) FROM item i WHERE i.run_id = r.id) AS items, r.submitter, substr(r.owner_key, 1, 8),
                       r.interrupted_at, r.paused_s
                FROM run r WHERE ? IS NULL OR r.id = ? ORDER BY r.id DESC LIMIT ?
                """, arguments: [id, id, limit])
            // Columns by position: this answers 1,000 runs on every page refresh.
            guard let first = rows.last?[0] as Int64?, let last = rows.first?[0] as Int64? else { return [] }
            // Stage counts and finished items (succeeded encodes) for the runs shown: an ended
            // run's as it kept them when it ended (`run_progress`), the others' (and those of a run
            // that ended before there were kept counts) from their stages, through the covering
            // index `stage_progress`.
            var counts: [Int64: StageCounts] = [:]
            var done: [Int64: Int] = [:]
            let progress = try Row.fetchCursor(db, sql: """
                SELECT p.run_id, p.state, p.cached, p.stages, p.encodes FROM run_progress p JOIN run r ON r.id = p.run_id
                WHERE p.run_id BETWEEN ?1 AND ?2 AND r.state IN (\(RunStatus.endedSQL))
                UNION ALL
                SELECT run_id, state, cached, count(*), sum(kind = 'encode') FROM stage
                WHERE run_id IN (SELECT r.id FROM run r WHERE r.id BETWEEN ?1 AND ?2
                                 AND (r.state NOT IN (\(RunStatus.endedSQL)) OR NOT EXISTS (SELECT 1 FROM run_progress p WHERE p.run_id = r.id)))
                GROUP BY run_id, state, cached
                """, arguments: [first, last])
            while let r = try progress.next() {
                let run: Int64 = r[0], state: String = r[1]
                counts[run, default: StageCounts()].add(state: state, cached: (r[2] as Int) != 0, count: r[3])
                if state == "succeeded" { done[run, default: 0] += r[4] }
            }
            // Planned frames, in all and of the items rendered, for the runs whose time left is
            // shown (running ones, or the one asked for): the item rows, and the rendered items'
            // rows through their encode stages.
            // (With one run asked for, the other running runs too: their renders give the farm's
            // speed, which a run that has rendered nothing of its own yet goes by.)
            var framed = rows.filter { id != nil || ($0[2] as String) == "running" }.map { $0[0] as Int64 }
            if let id {
                framed += try Int64.fetchAll(db, sql: "SELECT id FROM run WHERE state = 'running' AND id != ?", arguments: [id])
            }
            // The frames shown (`total`, `done`), and those the time left counts, each item's
            // weighed by what its render should cost (`weighedTotal`, `weighedDone`, `rendered`).
            var frames: [Int64: (known: Int, total: Int, done: Int, weighedTotal: Int, weighedDone: Int, rendered: Int)] = [:]
            var slots: [Int64: TimeLeft.Slots] = [:]
            var firstRenderSent: [Int64: Double] = [:]
            /// Milliseconds a planned frame should take to render (`RunProgress.costPerFrame`), from
            /// the frames' query.
            var costPerFrame: [Int64: Double] = [:]
            if !framed.isEmpty {
                let list = databaseQuestionMarks(count: framed.count)
                // (Each item's frames weighed by what its render should cost: `weighedFrames`.)
                for r in try Row.fetchAll(db, sql: """
                    \(Self.costPerFrame(list))
                    SELECT i.run_id, count(i.frame_count), coalesce(sum(\(Self.renderedFrames)), 0), coalesce(sum(\(Self.weighedFrames("e"))), 0), max(c.cpf)
                    FROM item i LEFT JOIN stage e ON e.run_id = i.run_id AND e.name = 'encode/' || i.idx LEFT JOIN c ON c.run_id = i.run_id
                    WHERE i.run_id IN (\(list)) GROUP BY i.run_id
                    """, arguments: StatementArguments(framed + framed)) {
                    frames[r[0]] = (r[1], r[2], 0, r[3], 0, 0)
                    costPerFrame[r[0]] = r[4]
                }
                // Frames done, and those the run rendered itself (not reused from the cache: the
                // ETA's rate). A resumed run is judged by what it rendered since the resume, as
                // `coord submit`'s lines judge it: the time it lay interrupted was not rendering time.
                for r in try Row.fetchAll(db, sql: """
                    \(Self.costPerFrame(list))
                    SELECT s.run_id, coalesce(sum(\(Self.renderedFrames)), 0), coalesce(sum(\(Self.weighedFrames("s"))), 0),
                           coalesce(sum(CASE WHEN s.cached = 0 AND (r.resumed_at IS NULL OR s.finished_at >= r.resumed_at) THEN \(Self.weighedFrames("s")) END), 0)
                    FROM stage s JOIN item i ON i.run_id = s.run_id AND i.idx = s.item_idx JOIN run r ON r.id = s.run_id LEFT JOIN c ON c.run_id = s.run_id
                    WHERE s.run_id IN (\(list)) AND s.kind = 'encode' AND s.state = 'succeeded' GROUP BY s.run_id
                    """, arguments: StatementArguments(framed + framed)) {
                    frames[r[0]]?.done = r[1]
                    frames[r[0]]?.weighedDone = r[2]
                    frames[r[0]]?.rendered = r[3]
                }
                // How its renders go on their slots (`TimeLeft.Slots`): the seconds its own
                // finished renders took (their attempts, as the workers timed them: the stages'
                // own seconds overlap, decode and encode being interleaved frame by frame), and
                // the renders in flight (frames, seconds since each attempt was sent).
                for r in try Row.fetchAll(db, sql: """
                    SELECT s.run_id, coalesce(sum(a.finished_at - a.started_at), 0)
                    FROM stage s JOIN attempt a ON a.stage_id = s.id AND a.state = 'succeeded'
                         JOIN stage e ON e.run_id = s.run_id AND e.item_idx = s.item_idx AND e.kind = 'encode' JOIN run r ON r.id = s.run_id
                    WHERE s.run_id IN (\(list)) AND s.kind = 'decode' AND s.cached = 0 AND e.state = 'succeeded' AND e.cached = 0
                          AND (r.resumed_at IS NULL OR e.finished_at >= r.resumed_at)
                    GROUP BY s.run_id
                    """, arguments: StatementArguments(framed)) {
                    slots[r[0]] = TimeLeft.Slots(renderSeconds: r[1], inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0)
                }
                for r in try Row.fetchAll(db, sql: """
                    \(Self.costPerFrame(list))
                    SELECT s.run_id, count(*), coalesce(sum(\(Self.weighedFrames("s"))), 0), coalesce(sum(max(0, ? - a.dispatched_at)), 0)
                    FROM stage s JOIN item i ON i.run_id = s.run_id AND i.idx = s.item_idx
                         JOIN attempt a ON a.stage_id = s.id AND a.state = 'running' LEFT JOIN c ON c.run_id = s.run_id
                    WHERE s.run_id IN (\(list)) AND s.kind = 'decode' AND s.state = 'running'
                    GROUP BY s.run_id
                    """, arguments: StatementArguments(framed.map { $0 as any DatabaseValueConvertible } + [now] + framed.map { $0 as any DatabaseValueConvertible })) {
                    // (A run with no render of its own finished yet has its renders in flight.)
                    let run: Int64 = r[0]
                    var s = slots[run] ?? TimeLeft.Slots(renderSeconds: 0, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0)
                    s.inFlight = r[1]; s.inFlightFrames = r[2]; s.inFlightSeconds = r[3]
                    slots[run] = s
                }
                // When its first render was sent (since the resume): the slots it has had on
                // average are its renders' seconds over the time since, as `coord submit` counts
                // them. By the renders in flight alone, the time left jumped whenever one of two
                // slots was between renders (13, 12, 11, then 5.3 s in a live run).
                for r in try Row.fetchAll(db, sql: """
                    SELECT s.run_id, min(a.dispatched_at)
                    FROM stage s JOIN attempt a ON a.stage_id = s.id JOIN run r ON r.id = s.run_id
                    WHERE s.run_id IN (\(list)) AND s.kind = 'decode' AND (r.resumed_at IS NULL OR a.dispatched_at >= r.resumed_at)
                    GROUP BY s.run_id
                    """, arguments: StatementArguments(framed)) {
                    firstRenderSent[r[0]] = r[1]
                }
            }
            // Frames a slot renders a second over the running runs' own renders: the rate of a
            // run whose items so far came from the cache (clips another project had rendered), as
            // a batch's project lines take it; without it, "ETA" stayed blank until its own
            // last render ended.
            // When every run sampled says what its frames cost, that rate is in milliseconds of
            // estimated cost a second, and each run takes it over its own cost per frame: a 1080p
            // run waiting behind 540p ones goes slower a frame than they did.
            let sampled = slots.filter { $0.value.renderSeconds > 0 }
            let seconds = sampled.values.reduce(0) { $0 + $1.renderSeconds }
            let weighed = !sampled.isEmpty && sampled.keys.allSatisfy { costPerFrame[$0] != nil }
            let farmSpeed = TimeLeft.speed(frames: sampled.keys.reduce(0) { $0 + (frames[$1]?.rendered ?? 0) }, seconds: seconds)
            let costSpeed = weighed && seconds > 0
                ? sampled.keys.reduce(0.0) { $0 + Double(frames[$1]?.rendered ?? 0) * costPerFrame[$1]! } / seconds : nil
            // Before any render of the farm's has ended, what the run's render costs say.
            func speed(of run: Int64) -> Double? {
                guard let costSpeed, costSpeed > 0, let c = costPerFrame[run] else { return farmSpeed ?? TimeLeft.nominalSpeed(costPerFrame: costPerFrame[run]) }
                return costSpeed / c
            }
            return rows.map { r in
                let id: Int64 = r[0], state: String = r[2], started: Double = r[3], finished: Double? = r[4]
                let items: Int = r[9]
                let f = frames[id] ?? (0, 0, 0, 0, 0, 0)
                let known = items > 0 && f.known == items
                // The time it was worked on: not the time it lay interrupted (`v_runs.duration_s`).
                let interrupted: Double? = r[12], paused: Double = r[13]
                let elapsed = (finished ?? interrupted ?? now) - started - paused
                let running = state == "running"
                let joining = running && TimeLeft.joining(framesDone: f.done, framesTotal: f.total, known: known)
                let eta = running && !joining ? TimeLeft.seconds(framesDone: f.weighedDone, framesTotal: f.weighedTotal, known: known, rendered: f.rendered,
                                                                 renderingFor: firstRenderSent[id].map { max(0, now - $0) } ?? 0,
                                                                 slots: slots[id], speed: speed(of: id)) : nil
                return Run(id: id, name: r[1], state: state, items: items, itemsDone: done[id] ?? 0, stages: counts[id] ?? StageCounts(),
                           started: started, finished: finished, durationS: elapsed, pausedS: paused,
                           framesDone: known ? f.done : nil, framesTotal: known ? f.total : nil,
                           etaS: eta,
                           finishingRenders: eta.flatMap { TimeLeft.finishing(framesDone: f.weighedDone, framesTotal: f.weighedTotal, left: $0, slots: slots[id]) },
                           joining: joining,
                           outputPath: r[5], pipelinePath: r[6], error: r[7], priority: r[8], submitter: r[10], ownerKey: r[11])
            }
        }
    }

    /// Runs by state, over every run recorded.
    public func runCounts() throws -> [String: Int] {
        try read { db in
            var out: [String: Int] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT state, count(*) AS n FROM run GROUP BY state") { out[r["state"]] = r["n"] }
            return out
        }
    }

    // MARK: one run

    public struct Item: Codable, Sendable {
        public var idx: Int
        public var kind: String
        public var label: String
        public var source: String?
        /// Where the item is in the pipeline file (file:line:col).
        public var location: String?
        public var state: String
        /// The item's rendered segment, once there is one: its poster is drawn from it.
        public var segmentSha256: String?
    }

    /// A failed or lost attempt, or a stage that failed without one (refused when planned: an
    /// audio track no decoder reads; its movie could not be written): then `attemptId` and
    /// `attemptNo` are nil.
    public struct Failure: Codable, Sendable {
        public var attemptId: Int64?
        public var item: Int?
        public var stage: String
        public var attemptNo: Int?
        public var worker: String?
        public var state: String
        public var errorClass: String?
        public var error: String?
        public var file: String?
        public var location: String?
        public var finished: Double?
    }

    public struct Artifact: Codable, Sendable {
        public var depth: Int
        public var kind: String
        public var sha256: String
        public var uri: String
        public var size: Int64
        /// What it was made from (other artifacts' sha256, in the movie's order: `LineageOrder`),
        /// for the page to draw a tree: a watermark is an input of every segment.
        public var inputs: [String]? = nil
        var inputsInOrder: [String] { get { inputs ?? [] } set { inputs = newValue } }
        /// The item (from 0) whose stage of this run made it, where one did (a source, a segment).
        public var item: Int? = nil
    }

    public struct RunDetail: Codable, Sendable {
        public var run: Run
        public var items: [Item]
        public var failures: [Failure]
        /// The finished movie in the store, when the run succeeded.
        public var movie: Artifact?
        /// From the movie back to its segments and sources (depth 0 is the movie).
        public var lineage: [Artifact]
        /// What planning did that the pipeline did not say (a trim past a clip's end), once each,
        /// with the pipeline's file:line:col.
        public var notes: [String] = []
    }

    public func run(_ id: Int64) throws -> RunDetail? {
        guard let run = try runs(limit: 1, id: id).first else { return nil }
        return try read { db in
            var locations: [Int: String] = [:]
            var items: [Item] = []
            let itemRows = try Row.fetchAll(db, sql: "SELECT idx, kind, label, source_uri, params_json FROM item WHERE run_id = ? ORDER BY idx", arguments: [id])
            for r in itemRows {
                let idx: Int = r["idx"]
                if let json: String = r["params_json"], let loc = Self.location(json) { locations[idx] = loc }
                items.append(Item(idx: idx, kind: r["kind"], label: r["label"], source: r["source_uri"], location: locations[idx],
                                  state: "pending", segmentSha256: nil))
            }
            // An item's state: failed if any stage failed, else running if any runs, else done when its encode is.
            var stageStates: [Int: [String]] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT item_idx, state FROM stage WHERE run_id = ? AND item_idx IS NOT NULL", arguments: [id]) {
                stageStates[r["item_idx"], default: []].append(r["state"])
            }
            for k in items.indices {
                let s = stageStates[items[k].idx] ?? []
                items[k].state = s.contains("failed") ? "failed" : s.contains("running") ? "running"
                    : (!s.isEmpty && s.allSatisfy { $0 == "succeeded" }) ? "succeeded" : s.contains("cancelled") ? "cancelled" : "pending"
            }
            let segments = try Self.segments(db, run: id, item: nil)
            for k in items.indices { items[k].segmentSha256 = segments[items[k].idx] }
            // Stages that failed with no failed attempt first (one row per item and error: a
            // refused render fails its three stages alike), then attempts, the latest first.
            let failures = try Row.fetchAll(db, sql: """
                SELECT * FROM (
                    SELECT NULL AS id, s.item_idx, min(s.name) AS name, NULL AS attempt_no, NULL AS worker_id, 'failed' AS state,
                           NULL AS error_class, s.error AS error_message, max(s.finished_at) AS finished_at, i.source_uri, 0 AS refused_first
                    FROM stage s LEFT JOIN item i ON i.run_id = s.run_id AND i.idx = s.item_idx
                    WHERE s.run_id = ? AND s.state = 'failed' AND s.error IS NOT NULL
                      AND NOT EXISTS (SELECT 1 FROM attempt a WHERE a.stage_id = s.id AND a.state IN ('failed', 'lost'))
                    GROUP BY s.item_idx, s.error
                    UNION ALL
                    SELECT a.id, s.item_idx, s.name, a.attempt_no, a.worker_id, a.state, a.error_class, a.error_message, a.finished_at, i.source_uri, 1
                    FROM stage s JOIN attempt a ON a.stage_id = s.id LEFT JOIN item i ON i.run_id = s.run_id AND i.idx = s.item_idx
                    WHERE s.run_id = ? AND a.state IN ('failed', 'lost') AND NOT \(LineageStore.noFailureSQL)
                ) ORDER BY refused_first, id DESC LIMIT 200
                """, arguments: [id, id]).map { r -> Failure in
                let item: Int? = r["item_idx"]
                return Failure(attemptId: r["id"], item: item, stage: r["name"], attemptNo: r["attempt_no"], worker: r["worker_id"], state: r["state"],
                               errorClass: r["error_class"], error: r["error_message"], file: r["source_uri"],
                               location: item.flatMap { locations[$0] }, finished: r["finished_at"])
            }
            let movieRow = try Row.fetchOne(db, sql: """
                SELECT ar.id, ar.sha256, ar.uri, ar.size FROM stage s JOIN attempt a ON a.stage_id = s.id
                JOIN attempt_io io ON io.attempt_id = a.id AND io.direction = 'out' JOIN artifact ar ON ar.id = io.artifact_id
                WHERE s.run_id = ? AND s.name = 'concat' AND ar.kind = 'movie' ORDER BY a.id DESC LIMIT 1
                """, arguments: [id])
            var lineage: [Artifact] = []
            var movie: Artifact?
            if let m = movieRow, run.state == "succeeded" {
                let root = (path as NSString).deletingLastPathComponent
                movie = Artifact(depth: 0, kind: "movie", sha256: m["sha256"], uri: LineageStore.inStore(m["uri"], sha256: m["sha256"], root: root), size: m["size"])
                lineage = try Row.fetchAll(db, sql: """
                    WITH RECURSIVE walk(artifact_id, depth) AS (
                        SELECT ?, 0
                        UNION
                        SELECT i.artifact_id, w.depth + 1 FROM walk w
                        JOIN attempt_io o ON o.artifact_id = w.artifact_id AND o.direction = 'out'
                        JOIN attempt_io i ON i.attempt_id = o.attempt_id AND i.direction = 'in'
                        WHERE w.depth < 8
                    )
                    SELECT min(w.depth) AS depth, a.kind, a.sha256, a.uri, a.size,
                           (SELECT group_concat(sha256) FROM (SELECT DISTINCT ia.sha256 FROM attempt_io o
                                JOIN attempt_io i ON i.attempt_id = o.attempt_id AND i.direction = 'in' JOIN artifact ia ON ia.id = i.artifact_id
                                WHERE o.artifact_id = a.id AND o.direction = 'out')) AS inputs,
                           (SELECT s.item_idx FROM attempt_io io JOIN attempt t ON t.id = io.attempt_id JOIN stage s ON s.id = t.stage_id
                            WHERE io.artifact_id = a.id AND io.direction = 'out' AND s.run_id = ? LIMIT 1) AS item
                    FROM walk w JOIN artifact a ON a.id = w.artifact_id
                    GROUP BY a.sha256 ORDER BY depth, a.kind, a.uri
                    """, arguments: [m["id"] as Int64, id]).map {
                        Artifact(depth: $0["depth"], kind: $0["kind"], sha256: $0["sha256"], uri: LineageStore.inStore($0["uri"], sha256: $0["sha256"], root: root), size: $0["size"],
                                 inputs: (($0["inputs"] as String?) ?? "").split(separator: ",").map(String.init), item: $0["item"])
                    }
            }
            let notes = try LineageStore.notes(db, run: id)
            return RunDetail(run: run, items: items, failures: failures, movie: movie,
                             lineage: LineageOrder.ordered(lineage, id: \.sha256, inputs: \.inputsInOrder, item: \.item, kind: \.kind), notes: notes)
        }
    }

    /// The sha256 of each item's newest rendered segment (one item's, or every item's).
    public func segment(run id: Int64, item: Int) throws -> String? {
        try read { db in try Self.segments(db, run: id, item: item)[item] }
    }

    static func segments(_ db: Database, run id: Int64, item: Int?) throws -> [Int: String] {
        var out: [Int: String] = [:]
        for r in try Row.fetchAll(db, sql: """
            SELECT s.item_idx, ar.sha256 FROM stage s JOIN attempt a ON a.stage_id = s.id
            JOIN attempt_io io ON io.attempt_id = a.id AND io.direction = 'out' JOIN artifact ar ON ar.id = io.artifact_id
            WHERE s.run_id = ? AND s.kind = 'encode' AND (? IS NULL OR s.item_idx = ?) AND ar.kind = 'segment' ORDER BY a.id
            """, arguments: [id, item, item]) {
            out[r["item_idx"]] = r["sha256"]
        }
        return out
    }

    static func location(_ itemJSON: String) -> String? {
        struct WithLocation: Decodable { var location: SourceLocation? }
        return (try? JSONDecoder().decode(WithLocation.self, from: Data(itemJSON.utf8)))?.location?.description
    }

    // MARK: attempts

    public struct Attempt: Codable, Sendable {
        public var id: Int64
        public var item: Int?
        public var stage: String
        public var kind: String
        public var attemptNo: Int
        public var worker: String?
        public var slot: Int?
        /// succeeded, cached, failed, lost, stale, missed, handed_back, cancelled or running.
        public var state: String
        public var dispatched: Double
        public var started: Double?
        public var finished: Double?
        public var error: String?
        /// A render lost with its coordinator whose output the next one kept (`keptRenderSQL`):
        /// made once and reused, so no failure; the chart draws it apart from the lost.
        public var kept: Bool
        /// Cancelled as its coordinator stopped (a restart, a Ctrl-C: `cancelledAsItStoppedSQL`):
        /// the stage goes out again when the run resumes, so no failure; the chart draws it apart
        /// from the lost, as `coord status` lists it (↩).
        public var stopped: Bool
    }

    /// Every attempt of a run, in dispatch order (the Gantt's bars).
    public func attempts(run id: Int64) throws -> [Attempt] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT a.id, s.item_idx, s.name, s.kind, a.attempt_no, a.worker_id, a.slot, a.state, a.dispatched_at, a.started_at,
                       a.finished_at, a.error_message, \(LineageStore.keptRenderSQL) AS kept, \(LineageStore.cancelledAsItStoppedSQL) AS stopped
                FROM stage s JOIN attempt a ON a.stage_id = s.id WHERE s.run_id = ? ORDER BY a.id
                """, arguments: [id]).map {
                Attempt(id: $0["id"], item: $0["item_idx"], stage: $0["name"], kind: $0["kind"], attemptNo: $0["attempt_no"], worker: $0["worker_id"],
                        slot: $0["slot"], state: $0["state"], dispatched: $0["dispatched_at"], started: $0["started_at"], finished: $0["finished_at"],
                        error: $0["error_message"], kept: $0["kept"], stopped: $0["stopped"])
            }
        }
    }

    // MARK: workers and failures

    public struct Worker: Codable, Sendable {
        public struct Slot: Codable, Sendable {
            public var slot: Int?
            public var run: Int64
            public var stage: String
            public var since: Double
        }
        public var id: String
        public var host: String
        public var state: String
        public var slots: Int
        public var busy: Int
        public var lastSeen: Double
        public var heartbeatAgeS: Double
        /// What each busy slot runs.
        public var running: [Slot]
        /// Artifacts in its store as far as a live coordinator knows (nil: no live coordinator).
        public var holds: Int? = nil
        /// How far its clock is behind the coordinator's in seconds (negative: ahead), as a live
        /// coordinator finds it; nil within 2 s (or no live coordinator).
        public var clockOffsetS: Double? = nil
    }

    /// Workers seen in the last `withinSeconds` (or still up), with what their slots run.
    public func workers(withinSeconds: Double = 3600, now: Double = Date().timeIntervalSince1970) throws -> [Worker] {
        try read { db in
            var running: [String: [Worker.Slot]] = [:]
            for r in try Row.fetchAll(db, sql: """
                SELECT a.worker_id, a.slot, s.run_id, s.name, a.dispatched_at FROM attempt a JOIN stage s ON s.id = a.stage_id
                WHERE a.state = 'running' AND s.kind IN ('fetch', 'encode', 'transition', 'concat') ORDER BY a.id
                """) {
                guard let w: String = r["worker_id"] else { continue }
                running[w, default: []].append(.init(slot: r["slot"], run: r["run_id"], stage: r["name"], since: r["dispatched_at"]))
            }
            return try Row.fetchAll(db, sql: "SELECT id, host, state, slots, last_seen FROM worker WHERE state = 'up' OR last_seen > ? ORDER BY id",
                                    arguments: [now - withinSeconds]).map { r in
                let id: String = r["id"], seen: Double = r["last_seen"]
                let slots = running[id] ?? []
                return Worker(id: id, host: r["host"], state: r["state"], slots: r["slots"], busy: slots.count, lastSeen: seen,
                              heartbeatAgeS: max(0, now - seen), running: slots)
            }
        }
    }

    /// The newest failed or lost attempts across the farm.
    public func recentFailures(limit: Int = 20) throws -> [Failure] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT a.id, s.run_id, s.item_idx, s.name, a.attempt_no, a.worker_id, a.state, a.error_class, a.error_message, a.finished_at,
                       i.source_uri, i.params_json
                FROM attempt a JOIN stage s ON s.id = a.stage_id LEFT JOIN item i ON i.run_id = s.run_id AND i.idx = s.item_idx
                WHERE a.state IN ('failed', 'lost') AND NOT \(LineageStore.noFailureSQL) ORDER BY a.id DESC LIMIT ?
                """, arguments: [limit]).map { r in
                Failure(attemptId: r["id"], item: r["item_idx"], stage: "run \(r["run_id"] as Int64): \(r["name"] as String)", attemptNo: r["attempt_no"],
                        worker: r["worker_id"], state: r["state"], errorClass: r["error_class"], error: r["error_message"], file: r["source_uri"],
                        location: (r["params_json"] as String?).flatMap(Self.location), finished: r["finished_at"])
            }
        }
    }

    // MARK: files the dashboard may serve

    /// Whether an artifact with this sha256 is recorded (only recorded artifacts are served).
    /// Whether an artifact with these bytes is recorded; with `kinds`, as one of those (a movie
    /// or a segment: what has a poster).
    public func isRecordedArtifact(sha256: String, kinds: [String] = []) throws -> Bool {
        try read { db in
            let only = kinds.isEmpty ? "" : " AND kind IN (\(databaseQuestionMarks(count: kinds.count)))"
            return try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM artifact WHERE sha256 = ?\(only))",
                                     arguments: StatementArguments([sha256] + kinds)) ?? false
        }
    }

    /// Stages by kind and outcome (what threadline_stages_total counts), for checks.
    public func stageOutcomes() throws -> [String: Int] {
        try read { db in
            var out: [String: Int] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT kind, state, cached, count(*) AS n FROM stage WHERE state IN ('succeeded', 'failed', 'cancelled') GROUP BY kind, state, cached") {
                out["\(r["kind"] as String)/\(FarmMetrics.outcome(state: r["state"], cached: (r["cached"] as Int) != 0))", default: 0] += r["n"] as Int
            }
            return out
        }
    }
}

extension LineageStore {
    /// The runs `coord runs` lists: the `limit` most recent (0: every run), the oldest of them
    /// first, and how many there are in all; `owner`: only the runs that key submitted. `rows`
    /// runs a query (a writer's connection, or a read-only one beside it).
    public static func runList(limit: Int, owner: String?,
                               rows: (String, [any DatabaseValueConvertible]) throws -> [[String: String]]) throws -> (runs: [[String: String]], total: Int) {
        let mine = owner == nil ? "" : "WHERE owner_key = ?"
        let args: [any DatabaseValueConvertible] = owner.map { [$0] } ?? []
        let recent = try rows("""
            SELECT id, name, state, stages_done, stages, round(duration_s, 2) AS seconds, output_path, error FROM v_runs
            WHERE id IN (SELECT id FROM run \(mine) ORDER BY id DESC LIMIT ?) ORDER BY id
            """, args + [limit > 0 ? limit : -1])
        let total = try rows("SELECT count(*) AS n FROM run \(mine)", args).first?["n"].flatMap { Int($0) } ?? recent.count
        return (recent, total)
    }
}
