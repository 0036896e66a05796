import Foundation
import ArgumentParser
import Logging
import ThreadlineCore
import Media
import Engine
import Lineage
import CSupport
import Transport

@main
struct Coord: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "coord",
        abstract: "Threadline coordinator: threads clips into finished movies.",
        discussion: """
        Examples:
          coord submit pipelines/demo.yaml       render on this machine
          coord plan pipelines/demo.yaml --json  stage graph and frame-exact timeline
          coord runs                             runs recorded in the lineage database
          coord status 3                         a run's stages, attempts and failures
          coord lineage pipelines/out/demo.mp4   how an output came to be
          coord dashboard --http 127.0.0.1:7401  runs, workers, failures in a browser

        A farm (its keys first: coord keygen --farm keys):
          coord serve --bind tcp://0.0.0.0:7400 \\
              --curve-secret-key keys/coordinator/coordinator.key \\
              --allow-workers keys/coordinator/workers \\
              --allow-submitters keys/coordinator/submitters
          worker --connect tcp://HOST:7400 --pipelines 2 \\
              --curve-secret-key keys/worker/worker.key \\
              --coordinator-key keys/worker/coordinator.pub
          coord submit a.yaml b.yaml --coordinator tcp://HOST:7400 [--detach] \\
              --curve-secret-key keys/submitter/submitter.key \\
              --coordinator-key keys/submitter/coordinator.pub
          coord wait RUN... (ids or ranges: 12-40); coord cancel RUN
              (with the same --coordinator and keys)
        """,
        subcommands: [Submit.self, PlanCommand.self, ThumbnailsCommand.self, Runs.self, Status.self, Serve.self, Wait.self, Cancel.self,
                      Keygen.self, BenchScheduler.self, LineageCommand.self, GC.self, ExportLineage.self, DashboardCommand.self,
                      SuggestCommand.self, Doctor.self, FetchCommand.self],
        defaultSubcommand: nil)
}

/// Options shared by commands that use the state folder.
struct StateOptions: ParsableArguments {
    @Option(name: .long, help: "State folder: lineage database and artifact store (default: $XDG_DATA_HOME/threadline).")
    var state: String?

    var directory: String {
        if let state { return URL(fileURLWithPath: state).standardizedFileURL.path }
        return Home.dataFolder("threadline")
    }

    /// A command that reads runs from a state folder or asks a running coordinator takes one of
    /// them: given both, it asked the coordinator and said nothing of the folder.
    static func oneSource(_ state: StateOptions, _ cluster: ClusterOptions) throws {
        if state.state != nil, cluster.coordinator != nil {
            throw ValidationError("--state reads a state folder here and --coordinator asks a running coordinator: give one of them")
        }
    }

    /// The state folder, made if it is not there yet; when it cannot be, a clear error (exit 1).
    func made() throws -> String {
        let dir = directory
        do { try FileChecks.makeFolder(dir) } catch {
            errorLine("error: cannot use \(dir) as the state folder: \(error.description)")
            errorLine("  hint: pass --state with a folder you can write (it holds the lineage database and the artifact store)")
            throw ExitCode(1)
        }
        return dir
    }
}

/// Loads a pipeline or exits with its file:line:column errors (exit code 2). Movie-level media
/// (the soundtrack, the watermark and sticker images) is probed here too, so an unreadable file
/// stops the submit before any work.
func loadPipeline(_ path: String) throws -> Pipeline {
    do {
        let (p, notes) = try loadPipelineChecked(path)
        notes.forEach(errorLine)
        return p
    } catch let e as PipelineError {
        writeStandardError(e.description + "\n")
        throw ExitCode(2)
    }
}

/// Loads a pipeline and checks its movie-level media; errors carry file:line:column. `notes`:
/// what it asks for that its movie will not have (the render goes on): a soundtrack on a GIF, a
/// transition on the last item, a soundtrack section past the song's end (it plays to the end,
/// as a clip's trim does), the font drawing words the default one cannot, words no font here can
/// draw (empty boxes). A font that is not one is
/// an error, and so is a watermark or sticker image that is no picture.
func loadPipelineChecked(_ path: String, stateDirectory: String? = nil) throws -> (pipeline: Pipeline, notes: [String]) {
        var p = try LivePhotoResolver.resolve(try PipelineLoader.load(path: path))
        if let stateDirectory, let problem = FileChecks.outputProblem(p.output.path, inputs: [], stateDirectory: stateDirectory) {
            throw PipelineError("output.path: \(problem)", at: p.outputLocation, hint: "choose a path outside the state folder")
        }
        var notes = Planner.pipelineNotes(for: p)
        if let st = p.output.soundtrack {
            let song = (st.source as NSString).lastPathComponent
            let facts: MediaFacts
            do { facts = try Probe.facts(path: st.source, name: song) } catch {
                throw PipelineError("cannot read the soundtrack \(st.source): \((error as? MediaError)?.message ?? "\(error)")", at: st.location,
                                    hint: "use an audio file FFmpeg can decode (mp3, m4a, wav, flac, …)")
            }
            guard facts.hasAudio else {
                throw PipelineError("the soundtrack \(st.source) has no audio", at: st.location)
            }
            // A section that starts past the song's end is silence: a movie without its music.
            guard st.from < facts.duration else {
                throw PipelineError(String(format: "soundtrack.from %.3f s is at or past the end of %@ (%.3f s): the movie would have no music",
                                           st.from, song, facts.duration),
                                    at: st.location, hint: "give a from within the song, or leave it out to start at its beginning")
            }
            if let to = st.to, to > facts.duration + 0.05 {
                notes.append(pipelineNote(String(format: "soundtrack.to %.3f s is past the end of %@ (%.3f s): the section plays to the song's end",
                                                 to, song, facts.duration), at: st.location))
            }
        }
        let unusable = overlayImageErrors(p)
        if !unusable.isEmpty { throw PipelineError.combined(unusable) }
        notes += try Fonts.lettering(&p)
        return (p, notes)
}

/// The watermark and each sticker whose image is no picture (a file that opens as something
/// else, or not at all), with its pipeline place: every render showing it would fail.
func overlayImageErrors(_ p: Pipeline) -> [PipelineError] {
    var known: [String: String?] = [:]   // each file probed once: nil when it is a picture
    func why(_ image: String, _ what: String) -> String? {
        if let k = known[image] { return k }
        let name = (image as NSString).lastPathComponent
        var reason: String? = nil
        do {
            if try !Probe.facts(path: image, name: name).hasVideo { reason = "it holds no picture" }
        } catch {
            reason = (error as? MediaError)?.message ?? "\(error)"
        }
        let said = reason.map { OverlayImage.notAPicture(what, name, because: $0) }
        known[image] = .some(said)
        return said
    }
    var errors: [PipelineError] = []
    if let w = p.output.watermark, let why = why(w.image, "watermark image") {
        errors.append(PipelineError("output.watermark: \(why)", at: p.outputLocation))
    }
    for (i, item) in p.items.enumerated() {
        for sticker in item.edits.stickers {
            if let why = why(sticker.image, "sticker image") { errors.append(PipelineError("\(item.label(index: i)): \(why)", at: item.location)) }
        }
    }
    return errors
}

/// Probes every local source and names every item that cannot be used, each on its own line
/// with its pipeline line, as a failed run does: files that do not open (exit 1), and clips
/// whose file opened but that planning refuses, such as an unreadable audio track not muted or a
/// trim past the end (exit 2 when nothing else failed).
func probeLocalSources(_ p: Pipeline) throws -> [String: MediaFacts] {
    let found = LocalSources(p)
    guard found.unopened.isEmpty && found.refused.isEmpty else {
        (found.unopened + found.refused).forEach(errorLine)
        throw ExitCode(found.unopened.isEmpty ? 2 : 1)
    }
    return found.facts
}

/// Every local source of a pipeline, probed: the facts of those that open, a line for each item
/// whose file does not (`unopened`), and one for each clip planning refuses (`refused`).
struct LocalSources {
    var facts: [String: MediaFacts] = [:]
    var unopened: [String] = [], refused: [String] = []

    /// `probed`: files probed before (by other projects of a batch), used again while unchanged.
    init(_ p: Pipeline, probed: ProbedFacts = ProbedFacts()) {
        for (i, item) in p.items.enumerated() {
            var opened = true
            for s in item.sources where !s.isRemote && facts[s.uri] == nil {
                do { facts[s.uri] = try probed.facts(path: s.uri, name: s.displayName) } catch {
                    unopened.append("\(item.location.map { "\($0): " } ?? "")error: \(item.label(index: i)): \(error)")
                    opened = false
                }
            }
            guard opened, case .video = item.kind, let source = item.sources.first, let f = facts[source.uri] else { continue }
            do {
                let frames = try Planner.frameCount(of: item, index: i, facts: f, fps: p.output.fps)
                // A tap-length clip under the pipeline's fade: known here too, before any upload.
                if let e = Planner.transitionsDoNotFit(p, index: i, segmentFrames: frames) { throw e }
            } catch let e as PipelineError {
                refused.append(e.description)
            } catch {
                refused.append("\(item.location.map { "\($0): " } ?? "")error: \(item.label(index: i)): \(error)")
            }
        }
    }
}

func errorLine(_ s: String) { writeStandardError(s + "\n") }

/// Writes to standard error, ignoring failure: after the terminal closes (SIGHUP) a write fails
/// with EIO, and FileHandle.write(_: Data) would crash the process in the middle of recording
/// its runs as interrupted.
func writeStandardError(_ s: String) { try? FileHandle.standardError.write(contentsOf: Data(s.utf8)) }

/// The one line a command redraws in place on a terminal (files going up, a movie coming down).
/// Lines of `text` before its last are written once; the last is the one redrawn, cut to the
/// terminal's width (`TerminalText.fit`).
enum TerminalLine {
    static func draw(_ text: String) {
        let rows = text.split(separator: "\n", omittingEmptySubsequences: false)
        let last = TerminalText.fit(String(rows.last ?? ""), columns: TerminalText.columns())
        writeStandardError("\r\u{1B}[K" + rows.dropLast().map { $0 + "\n" }.joined() + last)
    }
    static func clear() { draw("") }
}

/// A progress bar on a terminal; plain lines otherwise.
final class ProgressDisplay: Sendable {
    let name: String
    let terminal: Bool
    let last = Locked(-1)   // stages done at the last logged line
    let told = Locked(ToldOnce())
    /// Whether the last word said the run waits for a worker (a log is told once when it starts).
    let waiting = Locked(false)
    /// The bar as last drawn, drawn again below a note.
    let bar = Locked("")
    init(name: String, terminal: Bool) { self.name = name; self.terminal = terminal }

    /// A line of its own (the coordinator gone silent, or answering again), above the bar on a terminal.
    func note(_ line: String) {
        if terminal { TerminalLine.draw(line + "\n" + bar.withLock { $0 }) } else { errorLine(line) }
    }

    func update(_ p: RunProgress) {
        // On a terminal a failure is printed as it comes, above the progress line: the run goes on
        // without it. A log gets the run's error once, at its end.
        // A note (what planning did that the pipeline did not say) and a setback (a worker lost)
        // are printed as they come, terminal or log.
        let lines = told.withLock { t in t.newNotes(0, p) + t.newSetbacks(0, p) + (terminal ? t.newFailures(0, p).map { ToldOnce.line($0) } : []) }
        for line in lines { if terminal { TerminalLine.draw(line + "\n") } else { errorLine(line) } }
        // A terminal redraws on every word (the coordinator tells a watcher at least once a second,
        // so the time left counts down through a long render); a log gets a line per finished stage.
        if !terminal {
            if waiting.withLock({ w in defer { w = p.waitingForWorker }; return !w && p.waitingForWorker }) {
                errorLine("\(name): \(RunProgress.waitingLine)")
            }
            let changed = last.withLock { l -> Bool in defer { l = p.stagesDone }; return l != p.stagesDone }
            guard changed else { return }
        }
        let fraction = p.fractionDone
        // The ETA comes from planned frames rendered, not stage counts (fetches are quick).
        let eta = p.etaText
        if terminal {
            let line = Self.line(name, fraction: fraction, itemsDone: p.itemsDone, items: p.items, failures: p.failures.count,
                                 running: p.running.count, tail: eta)
            self.bar.withLock { $0 = line }
            TerminalLine.draw(line)
        } else {
            errorLine(String(format: "%@: %d/%d items done, %d/%d stages, %d running, %.1f s", name, p.itemsDone, p.items,
                             p.stagesDone, p.stagesTotal, p.running.count, p.elapsed))
        }
    }

    /// One project's bar on a terminal: "demo [████····] 3/7 items · 2 running · ETA 0:02".
    static func line(_ name: String, fraction: Double, itemsDone: Int, items: Int, failures: Int, running: Int, tail: String) -> String {
        let width = 24
        let filled = max(0, min(width, Int(fraction * Double(width))))
        let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: width - filled)
        let failed = failures == 0 ? "" : " (\(failures) failed)"
        return String(format: "%@ [%@] %d/%d items%@ · %d running · %@", name, bar, itemsDone, items, failed, running, tail)
    }

    func finish() { if terminal { writeStandardError("\n") } }

    /// The run ended: its notes not told yet (it may have ended before it was followed: a cached
    /// run takes milliseconds), then `finish`.
    func finish(_ end: RunEnd) {
        told.withLock { $0.newNotes(0, end.notes) }.forEach(note)
        finish()
    }

    /// The run's notes told so far.
    var notes: [String] { told.withLock { $0.notes[0] ?? [] } }
}

/// The failures and notes a display has printed, per project, so that each is told once, as it
/// comes (`RunProgress.failures` and `notes` hold all of a run's so far).
struct ToldOnce: Sendable {
    private var told: [Int: Set<String>] = [:]
    /// Each project's notes in the order they came (a `--json` object lists them).
    private(set) var notes: [Int: [String]] = [:]
    mutating func newFailures(_ project: Int, _ p: RunProgress) -> [String] { p.failures.filter { told[project, default: []].insert($0).inserted } }
    /// Setbacks not printed yet (a worker lost with a stage, a stage tried again): why the time left grew.
    mutating func newSetbacks(_ project: Int, _ p: RunProgress) -> [String] { p.setbacks.filter { told[project, default: []].insert($0).inserted } }
    /// Notes not printed yet: each already says its file:line:col, so it is printed as it is.
    mutating func newNotes(_ project: Int, _ p: RunProgress) -> [String] { newNotes(project, p.notes) }
    /// The same of a run's end (`RunEnd.notes`): a run that ended before it was followed sent no progress.
    mutating func newNotes(_ project: Int, _ all: [String]) -> [String] {
        let new = all.filter { !notes[project, default: []].contains($0) }
        notes[project, default: []] += new
        return new
    }
    static func line(_ failure: String, project: String? = nil) -> String {
        "\(project.map { "\($0): " } ?? "")failed: \(failure)"
    }
}

struct PlanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show a pipeline's stage graph and frame-exact timeline without rendering.")

    @Argument(help: "The pipeline YAML file.")
    var pipeline: String

    @Flag(name: .long, help: "Print the plan as JSON.")
    var json = false

    func run() throws {
        let p = try loadPipeline(pipeline)
        let facts = try probeLocalSources(p)
        let remote = p.items.contains { $0.sources.contains(where: \.isRemote) }
        let plan: Plan
        do { plan = try Planner.plan(p, facts: remote ? nil : facts) } catch let e as PipelineError {
            errorLine(e.description); throw ExitCode(2)
        }
        Planner.notes(for: p, facts: facts).forEach(errorLine)
        if json {
            let enc = JSONEncoder(); enc.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try enc.encode(plan), as: UTF8.self))
            return
        }
        print("\(p.name): \(p.items.count) item\(p.items.count == 1 ? "" : "s") → \(p.output.path)")
        let encoding = p.output.isGIF ? "animated GIF (one palette, no sound)"
            : "\(p.output.video.codec) crf \(p.output.video.crf) \(p.output.video.preset), aac \(p.output.audio.bitrate / 1000)k, BT.709"
        print("output \(p.output.width)x\(p.output.height) @ \(p.output.fps) fps, \(p.output.fit.rawValue), \(encoding)")
        if let timeline = plan.timeline {
            print("")
            print("  #  start      duration  frames  item")
            for t in timeline {
                print(String(format: "%3ld  %8.3f  %8.3f  %6ld  %@", t.item + 1, t.start, t.duration, t.frameCount, p.items[t.item].label(index: t.item)))
            }
            let total = plan.totalFrames ?? 0
            print(String(format: "     total %.3f s, %ld frames", Timing.seconds(frames: total, fps: p.output.fps), total))
        } else {
            print("(timeline known after remote sources are fetched)")
        }
        print("")
        print("stages:")
        for s in plan.stages {
            print("  \(s.id)" + (s.dependencies.isEmpty ? "" : " ← \(s.dependencies.joined(separator: ", "))"))
        }
    }
}

struct Runs: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List runs recorded in the lineage database (or on a running coordinator).")
    @OptionGroup var stateOptions: StateOptions
    @OptionGroup var cluster: ClusterOptions
    @Option(name: .long, help: "Show the N most recent runs (0: every run).") var limit = 50
    @Flag(name: .long, help: "Print as JSON.") var json = false

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit must be 0 (every run) or more") }
        try StateOptions.oneSource(stateOptions, cluster)
    }

    func run() throws {
        let rows: [[String: String]]
        var total: Int?
        if cluster.coordinator != nil {
            let context = MessagingContext()
            let client = try cluster.client(context)
            let reply = try clusterCall { try client.status(nil, limit: limit) }
            // A coordinator from before limits sends every run: the most recent are kept here.
            rows = limit > 0 ? Array(reply.runs.suffix(limit)) : reply.runs
            total = reply.runsTotal ?? reply.runs.count
        } else {
            let path = try lineageDatabase(stateOptions)
            (rows, total) = try LineageStore.runList(limit: limit, owner: nil, rows: { try LineageStore.readRows(path: path, $0, $1) })
        }
        // Said after them on standard error, so what is printed stays the runs alone.
        defer {
            if let total, total > rows.count {
                fflush(nil)   // the runs, printed, before the note
                errorLine("(the \(rows.count) most recent of \(total) runs; --limit 0 lists every run)")
            }
        }
        if json {
            print(String(decoding: try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys]), as: UTF8.self))
            return
        }
        if isatty(STDOUT_FILENO) == 1 && !rows.isEmpty {
            // For a person: named columns, aligned. Piped, the lines stay tab-separated for scripts.
            print(Self.table(rows))
        } else {
            for r in rows {
                print("\(r["id"]!)\t\(r["state"]!)\t\(r["stages_done"]!)/\(r["stages"]!)\t\(Self.seconds(r))\t\(r["name"]!)\t\(r["output_path"]!)")
            }
        }
        // Nothing printed said nothing: an empty list says so (on standard error, as the note above).
        if rows.isEmpty {
            let place = cluster.coordinator.map { "on \($0)" } ?? "in \(stateOptions.directory)"
            // The flags that reached it, keys included (a keyed farm refuses a submit without them).
            let flag = cluster.coordinator != nil ? " \(cluster.flags)" : stateOptions.state.map { " --state \($0)" } ?? ""
            errorLine("no runs to list \(place): coord submit pipeline.yaml\(flag) renders one")
        }
    }
}

extension Runs {
    /// A run's seconds, "-" while it has none (running, interrupted): not a bare " s".
    static func seconds(_ r: [String: String]) -> String {
        guard let s = r["seconds"], !s.isEmpty else { return "-" }
        return s + " s"
    }

    /// The runs under a header, each column as wide as its widest value (a project's name at
    /// most 32 columns, cut in the middle), the movie last.
    static func table(_ rows: [[String: String]]) -> String {
        let cells = rows.map { r in
            [r["id"] ?? "", r["state"] ?? "", "\(r["stages_done"] ?? "")/\(r["stages"] ?? "")", seconds(r), r["name"] ?? "", r["output_path"] ?? ""]
        }
        let header = ["run", "state", "stages", "seconds", "project", "movie"]
        let widths = (0..<5).map { c in min(c == 4 ? 32 : .max, ([header] + cells).map { TerminalText.width($0[c]) }.max() ?? 0) }
        // Numbers to the right, words to the left.
        let right: Set<Int> = [0, 2, 3]
        func line(_ v: [String]) -> String {
            (0..<5).map { c in
                right.contains(c) ? String(repeating: " ", count: max(0, widths[c] - TerminalText.width(v[c]))) + v[c] : TerminalText.column(v[c], widths[c])
            }.joined(separator: "  ") + "  " + v[5]
        }
        return ([line(header)] + cells.map(line)).joined(separator: "\n")
    }
}

/// The lineage database of a state folder, or a clear error.
func lineageDatabase(_ state: StateOptions) throws -> String {
    let path = state.directory + "/lineage.db"
    guard FileManager.default.fileExists(atPath: path) else {
        errorLine("error: no lineage database at \(path); pass --state DIR of the renders you mean")
        throw ExitCode(1)
    }
    return path
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one run: its state, stages and failures (from the state folder, or a running coordinator).")
    @Argument(help: "Run id (see 'coord runs').") var runID: Int64
    @OptionGroup var stateOptions: StateOptions
    @OptionGroup var cluster: ClusterOptions
    @Flag(name: .long, help: "Print as JSON.") var json = false

    func validate() throws { try StateOptions.oneSource(stateOptions, cluster) }

    func run() throws {
        let runRows: [[String: String]], stages: [[String: String]], failures: [[String: String]]
        // The state folder's lineage database, when the run is read from it (not from a coordinator).
        var local: String?
        if cluster.coordinator != nil {
            let context = MessagingContext()
            let client = try cluster.client(context)
            let reply = try clusterCall { try client.status(runID) }
            (runRows, stages, failures) = (reply.runs, reply.stages, reply.failures)
        } else {
            let db = try lineageDatabase(stateOptions)
            local = db
            runRows = try LineageStore.readRows(path: db, LineageStore.statusRunSQL, [runID])
            stages = try LineageStore.readRows(path: db, LineageStore.statusStagesSQL, [runID])
            failures = try LineageStore.readRows(path: db, LineageStore.setbacksSQL, [runID])
        }
        guard let r = runRows.first else {
            errorLine("error: no run \(runID) \(cluster.coordinator.map { "on \($0)" } ?? "in \(stateOptions.directory)")"); throw ExitCode(1)
        }
        if json {
            let obj: [String: Any] = ["run": r, "stages": stages, "failures": failures]
            print(String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys, .prettyPrinted]), as: UTF8.self))
            return
        }
        let seconds = r["duration_s"].flatMap(Double.init).map { String(format: "%.2f s", $0) } ?? "-"
        // Only a finished run's path holds its movie; another state says what became of it.
        let output = r["output_path"]!
        let destination = switch RunStatus(rawValue: r["state"]!) {
        case .succeeded: "→ \(output)"
        case .running: "→ \(output) (when it finishes)"
        default: "(no movie written to \(output))"
        }
        print("run \(runID) \(r["name"]!): \(r["state"]!), \(r["stages_done"]!)/\(r["stages"]!) stages, \(seconds) \(destination)")
        // A cancel is no error: its reason says who stopped the run.
        if let e = r["error"], !e.isEmpty { print("\(r["state"] == RunStatus.cancelled.rawValue ? "why" : "error"): \(e)") }
        // An interrupted run says how it goes on (a running coordinator resumes its own at start).
        if r["state"] == RunStatus.interrupted.rawValue, let local,
           let how = try LineageStore.readRows(path: local, "SELECT pipeline_path, submission_json IS NOT NULL AS farm FROM run WHERE id = ?", [runID]).first {
            let state = stateOptions.state.map { " --state \($0)" } ?? ""
            print(how["farm"] == "1" ? "resumes by itself when a coordinator starts on this state folder: coord serve\(state) …"
                                     : "resume with: coord submit \(how["pipeline_path"] ?? "PIPELINE")\(state)")
        }
        Self.stageLines(stages).forEach { print($0) }
        Self.setbackLines(failures).forEach { print($0) }
    }
}

extension Status {
    /// A run's setbacks (`LineageStore.setbacksSQL`), one a line: the stages of one attempt with
    /// one outcome (a render's decode, transform and encode) on one line, where each had its own.
    static func setbackLines(_ rows: [[String: String]]) -> [String] {
        var groups: [(stages: [String], row: [String: String], kept: Bool)] = []
        for f in rows {
            if let last = groups.last, ["attempt_no", "worker_id", "state", "error_message"].allSatisfy({ last.row[$0] == f[$0] }) {
                groups[groups.count - 1].stages.append(f["stage"] ?? "")
                groups[groups.count - 1].kept = last.kept || f["kept"] == "1"
            } else {
                groups.append(([f["stage"] ?? ""], f, f["kept"] == "1"))
            }
        }
        return groups.map { g in
            let f = g.row, which = "\(g.stages.joined(separator: ", ")) attempt \(f["attempt_no"] ?? "?") on \(f["worker_id"] ?? "?")"
            // A hand-back is no failure: the worker was leaving, or never began it when its
            // coordinator stopped, and the stage went out again.
            if f["state"] == AttemptStatus.handedBack.rawValue {
                let why = f["error_message"].flatMap { $0.hasPrefix(LineageStore.coordinatorStopped) ? $0 : nil }
                return "  ↩ \(which): \(why ?? "handed back by its worker, which was leaving") (not a failure)"
            }
            // Nor is one its coordinator cancelled as it stopped (a restart, Ctrl-C on a submit):
            // the stage goes out again when the run resumes. Before, these read "✗ … lost".
            if f["stopped"] == "1" {
                return "  ↩ \(which): \(f["error_message"] ?? "") (not a failure)"
            }
            // Nor is a render its coordinator did not live to take in, kept by the next one.
            if f["state"] == AttemptStatus.lost.rawValue && g.kept {
                return "  ↻ \(which): \(f["error_message"] ?? "") (not rendered again)"
            }
            return "  ✗ \(which): \(f["state"] ?? "?") — \(f["error_message"] ?? "")"
        }
    }

    /// Stages shown one a line up to this many; beyond, counted by state.
    static let stagesListed = 40

    /// A run's stages, one a line; a run of more (a 500-item project has 2,000) in counts by
    /// state, then the ones not succeeded, at most `stagesListed` (`--json` lists every one).
    static func stageLines(_ stages: [[String: String]]) -> [String] {
        func line(_ st: [String: String]) -> String {
            let cached = st["cached"] == "1" ? " (cached)" : ""
            let seconds = st["seconds"] ?? ""
            return "  \((st["name"] ?? "").padding(toLength: 14, withPad: " ", startingAt: 0)) \(st["state"] ?? "")\(cached)  \(seconds.isEmpty ? "" : seconds + " s")"
        }
        guard stages.count > stagesListed else { return stages.map(line) }
        var counts: [String: Int] = [:], cached = 0
        for st in stages {
            counts[st["state"] ?? "", default: 0] += 1
            if st["cached"] == "1" { cached += 1 }
        }
        // In the order a stage goes through its states (lineage records no others).
        let byState = StageStatus.allCases.compactMap { state in
            counts[state.rawValue].map { "\($0) \(state.rawValue)\(state == .succeeded && cached > 0 ? " (\(cached) cached)" : "")" }
        }
        let open = stages.filter { $0["state"] != StageStatus.succeeded.rawValue }
        var lines = ["  \(stages.count) stages: " + byState.joined(separator: ", ")]
        lines += open.prefix(stagesListed).map(line)
        if open.count > stagesListed { lines.append("  … and \(open.count - stagesListed) more not succeeded") }
        lines.append("  (--json lists every stage)")
        return lines
    }
}

struct LineageCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lineage",
        abstract: "Show how an output came to be: its run, sources (with sha256) and every stage's parameters.")
    @Argument(help: "An output file, or an artifact's sha256 (or a prefix of 8+ characters).") var target: String
    @OptionGroup var stateOptions: StateOptions
    @Flag(name: .long, help: "Print as JSON.") var json = false

    func run() throws {
        let db = try lineageDatabase(stateOptions)
        // A file is looked up by what it holds, not by its name: a movie replaced since (or a
        // different file at the same path) is not reported as the recorded one.
        var isDir: ObjCBool = false
        let isFile = FileManager.default.fileExists(atPath: target, isDirectory: &isDir) && !isDir.boolValue
        let key: String
        if isFile {
            if let problem = FileChecks.sourceProblem(target) { errorLine("error: \(problem)"); throw ExitCode(1) }
            key = try SHA256Hasher.hex(fileAt: target)
        } else {
            key = target
        }
        let file = isFile ? FileChecks.spelledOnDisk(URL(fileURLWithPath: target).standardizedFileURL.path) : nil
        guard let l = try LineageStore.lineage(path: db, of: key, file: file) else {
            errorLine("error: \(target)\(isFile ? " (sha256 \(key.prefix(16))…)" : "") is not recorded in \(db)\(isFile ? "; if a movie was written there, it has been replaced or changed since" : "")")
            throw ExitCode(1)
        }
        if json {
            let enc = JSONEncoder(); enc.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try enc.encode(l), as: UTF8.self))
            return
        }
        // A camera file is found too (a run copied it in): it is one of the run's inputs, not
        // something the run made, and the report would otherwise read as the file's making.
        if isFile, let kind = l.tree.first?.kind, kind != "output", kind != "movie" {
            print("\(target) is a \(kind), not a movie: run \(l.run) read it\(kind == "source" ? " (its copy below)" : ""); the run's own lineage follows")
        }
        print("\(l.output)  sha256 \(l.sha256.prefix(16))…")
        print("run \(l.run) of \(l.pipeline) (pipeline sha256 \(l.pipelineSHA256.prefix(16))…)")
        // What each artifact was made from, under it, in the movie's order (`inputs` comes so; a
        // source by the path the pipeline named).
        let nodes = Dictionary(l.tree.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let named = Dictionary(l.sources.map { ($0.sha256, $0.uri) }, uniquingKeysWith: { a, _ in a })
        func show(_ n: OutputLineage.Node, _ level: Int, _ path: Set<Int64>) {
            for m in n.inputs.filter({ !path.contains($0) }).compactMap({ nodes[$0] }) {
                let uri = m.kind == "source" ? named[m.sha256] ?? m.uri : m.uri
                print(String(repeating: "  ", count: level) + "← \(m.kind)\(m.item.map { " of item \($0 + 1)" } ?? "") \(m.sha256.prefix(12))… \(uri)")
                show(m, level + 1, path.union([m.id]))
            }
        }
        if let top = l.tree.first { show(top, 1, [top.id]) }
        print("sources:")
        for s in l.sources { print("  item \(s.item + 1): \(s.uri)  sha256 \(s.sha256)") }
        print("stages:")
        for st in l.stages {
            print("  \(st.name)\(st.cached ? " (cached)" : ""): \(st.state)  \(st.parameters ?? "")")
        }
    }
}

struct GC: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Remove artifacts no recent run refers to (never those of a live or interrupted run).")
    @Option(name: .long, help: "Keep artifacts of runs submitted in the last N days.") var keepDays: Double = 14
    @Option(name: .long, help: "Never remove files younger than this many seconds (they may not be recorded yet).")
    var minAge: Double = 3600
    @Flag(name: .long, help: "Only report what would be removed.") var dryRun = false
    @Option(name: .long, help: ArgumentHelp("Also forget the records of runs submitted more than DAYS days ago that have ended (their stages, attempts and events; running and interrupted runs stay), so a farm's lineage database stops growing, and compact the database when a quarter of it (or 64 MiB) is then free space. At least --keep-days; needs the state folder to itself ('coord serve --lineage-keep-days' forgets while serving, and later runs reuse the space).",
                                            valueName: "days")) var lineageKeepDays: Double?
    @OptionGroup var stateOptions: StateOptions

    func validate() throws {
        guard keepDays >= 0 else { throw ValidationError("--keep-days must not be negative") }
        if let lineageKeepDays {
            guard lineageKeepDays.isFinite, lineageKeepDays > 0 else {
                throw ValidationError("--lineage-keep-days must be more than 0 days (fractions such as 0.5 are fine)")
            }
            guard lineageKeepDays >= keepDays else {
                throw ValidationError("--lineage-keep-days must be at least --keep-days (\(keepDays.formatted(.number))): a run's record outlives its artifacts")
            }
            guard !dryRun else { throw ValidationError("--dry-run reports artifacts only; leave out --lineage-keep-days") }
        }
        guard minAge >= 0 else { throw ValidationError("--min-age must not be negative") }
    }

    func run() throws {
        let db = try lineageDatabase(stateOptions)
        // Forgetting needs the folder to itself: asked first, so a refusal leaves everything as it was.
        var lock: FolderLock?
        if lineageKeepDays != nil {
            do { lock = try FolderLock.stateFolder(stateOptions.directory, holder: "coord gc, pid \(getpid())", shared: false) } catch {
                errorLine("error: \(error): the records of old runs are forgotten only with the state folder to itself; a running 'coord serve' does it with --lineage-keep-days, and local submits must end first. Nothing was removed.")
                throw ExitCode(1)
            }
        }
        defer { withExtendedLifetime(lock) {} }
        let r = try LineageStore.collectGarbage(databasePath: db, storeRoot: stateOptions.directory, keepDays: keepDays, grace: minAge, dryRun: dryRun)
        print(String(format: "%@%d artifacts removed (%@), %d kept, %d stale temporary files removed",
                     dryRun ? "dry run: would have " : "", r.removed, ByteSize.text(r.removedBytes), r.kept, r.temporaryRemoved))
        if r.partsKept > 0 {
            print(StaleTemporaries.partsKeptText(r.partsKept, bytes: r.partsKeptBytes))
        }
        if let lineageKeepDays {
            let lineage = try LineageStore(path: db)
            var total = ForgetReport()
            repeat {
                let r = try lineage.forgetRuns(submittedBefore: Date().timeIntervalSince1970 - lineageKeepDays * 86_400)
                total.add(r)
            } while total.more
            print("\(total.runs) run\(total.runs == 1 ? "" : "s") older than \(lineageKeepDays.formatted(.number)) days forgotten (with \(total.artifacts) artifact records and \(total.workers) workers gone since)")
            // The space their records held goes back to the disk, not only to later records.
            switch try lineage.compact() {
            case .compacted(let before, let after):
                print("lineage database compacted: \(ByteSize.text(before)) → \(ByteSize.text(after))")
            case .tooLittleDisk(let needed, let free):
                errorLine("note: the lineage database was not compacted: rewriting it needs \(ByteSize.text(needed)) free beside it, \(ByteSize.text(free)) is; its free pages are reused by later runs")
            case .notWorthIt:
                break
            }
        }
        if r.notRemoved > 0 {
            errorLine("error: \(r.notRemoved) files could not be removed; the first: \(r.firstFailure ?? "?"). Run gc as the user that owns \(stateOptions.directory).")
            throw ExitCode(1)
        }
    }
}

struct ExportLineage: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-lineage",
        abstract: "Print a run's lineage as OpenLineage-style run events, one JSON object per line.")
    @Argument(help: "Run id (see 'coord runs').") var runID: Int64
    @OptionGroup var stateOptions: StateOptions

    func run() throws {
        let db = try lineageDatabase(stateOptions)
        let lines = try LineageStore.openLineageEvents(databasePath: db, runID: runID)
        guard !lines.isEmpty else { errorLine("error: no run \(runID) in \(db)"); throw ExitCode(1) }
        for l in lines { print(l) }
    }
}

struct ThumbnailsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thumbnails",
        abstract: "Write one poster image per item (its middle frame, with its edits) and a contact sheet of the timeline.")

    @Argument(help: "The pipeline YAML file.") var pipeline: String
    @Option(name: .long, help: "Folder for the images (default: <output name>-thumbnails beside the output).") var out: String?
    @Option(name: .long, help: "Poster width in pixels.") var width: Int = 320
    @Option(name: .long, help: "Posters per row on the contact sheet.") var columns: Int = 4

    func validate() throws {
        guard (64...1920).contains(width) else { throw ValidationError("--width must be 64…1920") }
        guard (1...16).contains(columns) else { throw ValidationError("--columns must be 1…16") }
    }

    func run() throws {
        let p = try loadPipeline(pipeline)
        let folder = out.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            ?? (p.output.path as NSString).deletingPathExtension + "-thumbnails"
        try writeThumbnails(p, folder: folder, width: width, columns: columns, sheet: folder + "/contact-sheet.png") { print($0) }
    }
}

/// One poster per item (rendered as in the movie: orientation, colour, edits) into `folder`,
/// and a contact sheet of them at `sheet`. `captions` replaces the default "N  kind  seconds".
func writeThumbnails(_ p: Pipeline, folder: String, width: Int, columns: Int, sheet: String,
                     captions custom: [Int: String] = [:], wrote: (String) -> Void) throws {
    let facts = try probeLocalSources(p)
    let timeline: [ItemTiming]
    do { timeline = try Planner.timeline(for: p, facts: facts) } catch let e as PipelineError { errorLine(e.description); throw ExitCode(2) }
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    // Posters at the output's aspect, `width` wide.
    var small = p
    small.output.width = width & ~1
    small.output.height = max(2, Int((Double(width) * Double(p.output.height) / Double(p.output.width) / 2).rounded()) * 2)
    // Sizes the pipeline gives in pixels (a title's, a text's) scale with the frame, so a poster
    // looks as the movie does: a title of size 64 on a 320-wide poster ran off its top and bottom.
    let scale = Double(small.output.height) / Double(p.output.height)
    func scaled(_ size: Int?) -> Int? { size.map { max(6, Int((Double($0) * scale).rounded())) } }
    for i in small.items.indices {
        if case .title(var title) = small.items[i].kind, title.size != nil {
            title.size = scaled(title.size)
            small.items[i].kind = .title(title)
        }
        let textSize = scaled(small.items[i].edits.text?.size)
        small.items[i].edits.text?.size = textSize
    }
    var posters: [String] = [], captions: [String] = []
    for t in timeline {
        var spec = Planner.segmentSpec(small, index: t.item, sourcePath: p.items[t.item].sources.first?.uri ?? "", frameCount: t.segmentFrames)
        // The poster is the item's middle frame; it renders as a segment of that one frame, at
        // time 0: a caption or sticker shown from 0.5 s was missing from a 2 s clip's poster.
        let middle = Timing.seconds(frames: t.segmentFrames / 2, fps: p.output.fps)
        if case .video = p.items[t.item].kind { spec.trimStart += middle * p.items[t.item].edits.speed }
        spec.edits = EditChain(edits: spec.edits, profile: spec.profile, files: .init()).at(middle)
        // A Ken Burns photo's poster is its view at that frame, not at its first.
        if let kb = spec.kenBurns {
            let view = kb.framing(at: Double(t.segmentFrames / 2) / Double(max(1, t.segmentFrames - 1)))
            spec.kenBurns = KenBurns(from: view, to: view)
        }
        let png = String(format: "%@/item-%02d.png", folder, t.item + 1)
        do { try Thumbnails.poster(spec, to: png) } catch {
            errorLine("\(p.items[t.item].location.map { "\($0): " } ?? "")error: \(p.items[t.item].label(index: t.item)): \(error)")
            throw ExitCode(1)
        }
        posters.append(png)
        captions.append(custom[t.item] ?? String(format: "%d  %@  %.1f s", t.item + 1, p.items[t.item].kindName.replacingOccurrences(of: "_", with: " "), t.duration))
        wrote(png)
    }
    try Thumbnails.contactSheet(posters: posters, captions: captions, columns: columns, to: sheet)
    wrote(sheet)
}
