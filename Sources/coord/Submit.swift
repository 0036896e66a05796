import Foundation
import ArgumentParser
import Logging
import ThreadlineCore
import Engine
import Media
import Lineage
import CSupport
import Transport

struct Submit: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Render pipelines into their movies.",
        discussion: """
        Every pipeline named is rendered at once on one cluster: the projects share the workers \
        fairly, and a summary table (or, with --json, one JSON object per project) follows.

        With no cluster named, starts a local coordinator and local worker processes, joined by a \
        private Unix socket (no network port). \
        Ctrl-C (or SIGTERM, or the terminal closing) stops it; the runs are recorded as \
        interrupted and resume, keeping every finished stage, when the same pipelines are \
        submitted again. A movie that another process is rendering on the same state folder is \
        waited for, then its work reused.

        With --coordinator, hands the pipelines (and the files their items use) to a running \
        'coord serve' and follows them, downloading each movie to its output path; with \
        --detach it prints the run ids and returns (then 'coord wait RUN...', 'coord status RUN'). \
        There Ctrl-C only stops following: the runs go on at the coordinator ('coord wait RUN...' \
        picks them up again, 'coord cancel RUN' stops one).

        Exit status: 0 when every movie was written, 1 when any run failed, 2 when a pipeline \
        file is invalid (nothing is rendered; --json still prints one object per file, state \
        'invalid' with its errors or 'not_rendered'), 130 when interrupted.
        """)

    @Argument(help: "Pipeline YAML files (any number: they render together).")
    var files: [String]

    @OptionGroup var stateOptions: StateOptions

    @OptionGroup var cluster: ClusterOptions

    @Flag(name: .long, help: "With --coordinator: return once submitted, printing the run ids.")
    var detach = false

    @Flag(name: .long, help: "With --coordinator: send long clips whole. By default a trim of a clip of 16 MiB or more goes as an excerpt, its packets from the key frame before the trim to the one after (or the clip's end) copied without re-encoding (the render is the same), when the clip's excerpts come to under half of it.")
    var wholeFiles = false

    @Option(name: .long, help: "With --coordinator: your higher runs first; runs of equal priority share workers fairly, and each submitter key's runs together get an equal share of the farm. (default: \(Defaults.priority))")
    var priority: Int?

    @Option(name: .long, help: "Without --coordinator: local worker processes: one per CPU this process may use (in a container, its CPU quota) unless given. (default: \(Cores.available))")
    var workers: Int?

    @Option(name: .long, help: "Without --coordinator: media pipelines each local worker runs at once. (default: \(Defaults.pipelines))")
    var pipelines: Int?

    @Option(name: .long, help: "Without --coordinator: codec threads per pipeline (1: identical bits on every host; 0: the codecs choose). (default: \(Defaults.threads))")
    var threads: Int?

    @Flag(name: .long, help: "Print the result as JSON on standard output: one object per project, one per line.")
    var json = false

    @Flag(name: .long, help: "Without --coordinator: log the local coordinator's decisions to standard error.")
    var verbose = false

    @Option(name: .long, help: ArgumentHelp("Without --coordinator: after rendering, remove from the state folder the artifacts (source copies, segments, movies) of runs older than this many days, at most every 6 hours, as `coord gc` does (0: never). The movies written to their output paths stay. (default: \(Defaults.gcKeepDays.formatted()))",
                                            valueName: "days"))
    var gcKeepDays: Double?

    /// What the options of either kind of submit are when not given (optional, so that one given
    /// to the other kind is refused in `validate`).
    enum Defaults {
        static let priority = 0, pipelines = 1, threads = 1
        static let gcKeepDays = 14.0
    }

    func validate() throws {
        if let workers { guard workers >= 1 && workers <= 256 else { throw ValidationError("--workers must be between 1 and 256") } }
        if let pipelines { guard pipelines >= 1 && pipelines <= 64 else { throw ValidationError("--pipelines must be between 1 and 64") } }
        if let threads { guard (0...64).contains(threads) else { throw ValidationError("--threads must be between 0 and 64") } }
        guard !files.isEmpty else { throw ValidationError("name at least one pipeline file") }
        if let gcKeepDays { guard gcKeepDays >= 0, gcKeepDays.isFinite else { throw ValidationError("--gc-keep-days must be 0 (never) or more days") } }
        // An option of the other kind of submit is refused, not ignored: `--workers 8` with
        // --coordinator adds no worker to the farm, and `--priority` without one orders nothing.
        let local = [("--state", stateOptions.state != nil), ("--workers", workers != nil), ("--pipelines", pipelines != nil),
                     ("--threads", threads != nil), ("--gc-keep-days", gcKeepDays != nil), ("--verbose", verbose)].filter(\.1).map(\.0)
        let remote = [("--detach", detach), ("--whole-files", wholeFiles), ("--priority", priority != nil)].filter(\.1).map(\.0)
        if cluster.coordinator != nil, !local.isEmpty {
            throw ValidationError("\(local.joined(separator: ", ")) \(local.count == 1 ? "is" : "are") for a render on this machine; with --coordinator "
                                  + "the farm's workers render and its state folder keeps the runs: leave \(local.count == 1 ? "it" : "them") out")
        }
        if cluster.coordinator == nil, !remote.isEmpty {
            throw ValidationError("\(remote.joined(separator: ", ")) \(remote.count == 1 ? "needs" : "need") --coordinator (a farm's `coord serve`); "
                                  + "here the pipelines render together on this machine")
        }
    }

    func run() throws {
        tl_unblock_termination_signals()
        let (projects, notes) = try loadProjects()
        if cluster.coordinator != nil { try runRemote(projects, notes: notes) } else { try runLocal(projects, notes: notes) }
    }

    /// Every pipeline, loaded and checked before anything renders, and each one's notes (printed
    /// here; its `--json` object lists them). Invalid files and two pipelines writing the same
    /// movie stop the whole submit (exit 2); with `--json`, one object per file still says which
    /// (state `invalid` with its errors, or `not_rendered`), for a script reading a batch.
    func loadProjects() throws -> ([Pipeline], notes: [[String]]) {
        var loaded: [Pipeline] = []
        var notes: [[String]] = []
        var names: [Int: String] = [:]
        /// Each refused file's errors, by its place in `files`, as printed.
        var problems: [Int: [String]] = [:]
        func refuse(_ k: Int, _ lines: [String]) {
            lines.forEach(errorLine)
            problems[k, default: []] += lines
        }
        var place: [Int] = []
        let probed = ProbedFacts()
        for (k, f) in files.enumerated() {
            do {
                let (p, told) = try loadPipelineChecked(f, stateDirectory: cluster.coordinator == nil ? stateOptions.directory : nil)
                names[k] = p.name
                told.forEach(errorLine)
                // A coordinator finds a clip it cannot plan (a trim past its end) only once the
                // files are up: minutes of phone video over Wi-Fi for a run that fails at once.
                // Files that do not open fail there as here, the rest of the run rendered.
                if cluster.coordinator != nil {
                    let refused = LocalSources(p, probed: probed).refused
                    if !refused.isEmpty { refuse(k, refused); continue }
                }
                notes.append(told)
                loaded.append(p)
                place.append(k)
            } catch let e as PipelineError {
                refuse(k, [e.description])
            }
        }
        if !problems.isEmpty {
            if files.count > 1 { errorLine("error: \(problems.count) of \(files.count) pipeline files are invalid; nothing was rendered") }
            try refused(problems, names: names)
        }
        var writers: [String: Int] = [:]
        // A file named more than once (a glob and a name): one line for all its names.
        var again: [Int: [Int]] = [:]
        for (j, p) in loaded.enumerated() {
            if let other = writers[p.output.path] {
                let same = URL(fileURLWithPath: files[other]).standardizedFileURL.resolvingSymlinksInPath() == URL(fileURLWithPath: p.file).standardizedFileURL.resolvingSymlinksInPath()
                if same { again[other, default: []].append(place[j]); continue }
                let clash = "error: \(files[other]) and \(p.file) both write \(p.output.path); give each its own output.path"
                refuse(place[j], [clash])
                // Both files are at fault (the message is printed once).
                problems[other, default: []].append(clash)
            } else {
                writers[p.output.path] = place[j]
            }
        }
        for (first, others) in again.sorted(by: { $0.key < $1.key }) {
            let named = ([first] + others).map { files[$0] }
            let line = "error: \(files[first]) is named \(named.count) times (\(named.joined(separator: ", "))); name each pipeline file once"
            refuse(others[0], [line])
            for k in others.dropFirst() { problems[k, default: []].append(line) }
        }
        // One project's movie must not replace another's input.
        let inputs = Dictionary(loaded.flatMap { p in p.files.map { ($0.path, p.file) } }, uniquingKeysWith: { a, _ in a })
        for (j, p) in loaded.enumerated() {
            if let user = inputs[p.output.path] {
                refuse(place[j], ["\(p.outputLocation.map { "\($0): " } ?? "")error: output.path \(p.output.path) is an input of \(user); choose another path for the movie"])
            }
        }
        // The movie's folder must take a file: found now, not after every item has rendered. (A
        // detached submit leaves the download to `coord wait`, perhaps elsewhere.)
        if !detach && problems.isEmpty {
            for (j, p) in loaded.enumerated() {
                do { try ArtifactStore.checkWritable(p.output.path) } catch {
                    refuse(place[j], ["\(p.outputLocation.map { "\($0): " } ?? "")error: cannot write the movie to \(p.output.path): \(error.description)",
                                      "  hint: make the folder writable or choose another output.path; nothing was rendered"])
                }
            }
        }
        if !problems.isEmpty { try refused(problems, names: names) }
        return (loaded, notes)
    }

    /// Stops a submit that refused files (exit 2), after `--json`'s object for each file: the
    /// refused ones `invalid` with their errors, the others `not_rendered` (they were valid).
    func refused(_ problems: [Int: [String]], names: [Int: String]) throws -> Never {
        if json {
            for (k, f) in files.enumerated() {
                var o: [String: Any] = ["file": f, "seconds": 0]
                if let name = names[k] { o["name"] = name }
                if let errors = problems[k] {
                    o["state"] = "invalid"; o["errors"] = errors; o["error"] = errors.joined(separator: "\n")
                } else {
                    o["state"] = "not_rendered"; o["error"] = "not rendered: another pipeline file of this submit was refused"
                }
                print(String(decoding: try JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]), as: UTF8.self))
            }
        }
        throw ExitCode(2)
    }

    // MARK: local

    /// Another `coord submit` (or a `coord serve`) on this state folder is rendering one of these
    /// movies: rendering beside it would make every segment twice, on twice the processes, and
    /// race it to the file. Wait for it, as cargo waits for a build folder's lock; what it
    /// finished is then reused (and a project it rendered with other edits is rendered as this
    /// submit has it, so the last submit's movie is the one left).
    func waitForOtherRuns(writing projects: [Pipeline]) throws {
        let db = stateOptions.directory + "/lineage.db"
        var told: Set<Int64> = []
        while true {
            let busy = try LineageStore.liveRuns(writing: projects.map(\.output.path), path: db)
            if busy.isEmpty { return }
            for b in busy where told.insert(b.run).inserted {
                errorLine("waiting: run \(b.run) (process \(b.owner)) is rendering \(b.output) on this state folder; this submit goes on when it ends, reusing what it made (Ctrl-C to stop waiting)")
            }
            usleep(200_000)
        }
    }

    /// What submits these files again, resuming their interrupted runs.
    var resumeCommand: String { resumeCommand(files) }
    func resumeCommand(_ files: [String]) -> String { (["coord", "submit"] + files + (stateOptions.state.map { ["--state", $0] } ?? [])).joined(separator: " ") }

    func runLocal(_ projects: [Pipeline], notes: [[String]]) throws {
        let stateDirectory = try stateOptions.made()
        // Local submits may render side by side on one state folder, but not beside a `coord serve`
        // of it: that farm takes the work instead.
        let lock: FolderLock?
        do { lock = try FolderLock.stateFolder(stateDirectory, shared: true) } catch let held as FolderLock.Held {
            errorLine("error: a coordinator serves the state folder \(stateDirectory)\(held.holder.isEmpty ? "" : " (\(held.holder))"); it cannot be rendered on beside it")
            let serve = ServeHolder(line: held.holder)
            let address = serve.flatMap { Reachability.address(ofListener: $0.endpoint, on: $0.host, from: ProcessInfo.processInfo.hostName) } ?? "tcp://HOST:PORT"
            let keys = serve?.curve == true ? " --curve-secret-key YOUR.key --coordinator-key ITS.pub" : ""
            errorLine("  hint: submit to that coordinator instead: coord submit \(files.joined(separator: " ")) --coordinator \(address)\(keys)"
                      + (address.hasPrefix("tcp://HOST") ? " (its address)" : ""))
            throw ExitCode(1)
        }
        defer { withExtendedLifetime(lock) {} }
        try waitForOtherRuns(writing: projects)
        // Without --verbose the CLI itself reports failures; the log stays quiet.
        let level: Logger.Level = verbose ? .info : .critical
        let logger = { var l = Logger(label: "threadline.coord") { StreamLogHandler.standardError(label: $0) }; l.logLevel = level; return l }()
        let workerExe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("worker").path
        let realExe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            .map { URL(fileURLWithPath: $0).deletingLastPathComponent().appendingPathComponent("worker").path }
        let exe = [realExe, workerExe].compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let exe else {
            errorLine("error: cannot find the 'worker' executable next to coord (\(workerExe)); build it with 'swift build'")
            throw ExitCode(1)
        }
        var clusterConfig = LocalCluster.Configuration(stateDirectory: stateDirectory, workers: workers ?? Cores.available, pipelinesPerWorker: pipelines ?? Defaults.pipelines,
                                                       workerExecutable: exe)
        clusterConfig.threadsPerPipeline = threads ?? Defaults.threads
        let cluster = try LocalCluster(clusterConfig, logger: logger)
        try cluster.start()
        let labels = ProjectReport.labels(projects)
        let display = BatchDisplay(names: labels, items: projects.map(\.items.count), terminal: isatty(STDERR_FILENO) == 1 && !json)
        let signals = onInterrupt { [files] in
            display.interrupted()
            do {
                let runs = try cluster.interrupt()
                let list = runs.map(String.init).joined(separator: ", ")
                errorLine("interrupted: \(runs.isEmpty ? "nothing was running" : "run\(runs.count == 1 ? "" : "s") \(list) stopped and recorded as interrupted"); finished stages are kept.")
            } catch {
                errorLine("interrupted: the render stopped, but the lineage database cannot say which runs were recorded as interrupted: \(error)")
            }
            // The projects whose movies are written are not submitted again (each would be a
            // new run, cached, its movie written anew).
            let written = display.succeeded()
            let left = files.count == projects.count ? files.indices.filter { !written.contains($0) }.map { files[$0] } : files
            errorLine("resume with: \(resumeCommand(left.isEmpty ? files : left))"
                      + (written.isEmpty || left.isEmpty ? "" : written.count == 1 ? " (the other movie is written)" : " (the other \(written.count) movies are written)"))
            Foundation.exit(130)
        }
        defer { _ = signals }
        let started = Clocks.steady
        let results = cluster.renderBatch(projects, progress: { display.update($0, $1) }, ended: { k, run, outcome in
            switch outcome {
            case .succeeded(let output, let seconds): display.ended(k, String(format: "succeeded in %.1f s → %@", seconds, output))
            // One project: its error follows at once (`report`), so the line does not print it twice.
            case .failed(let message, _): display.ended(k, projects.count == 1 ? "failed" : "failed: \(message)")
            }
        }, refused: { k, e in
            // Its run could not be recorded: said when it happens, as a remote batch says a
            // project the coordinator refused (the batch's count then reaches its end).
            display.ended(k, projects.count == 1 ? "refused" : "refused: \(PipelineError.line(e))")
        })
        display.finish()
        cluster.shutdown()
        // After the summary: the collection is said last.
        defer { collectGarbage(stateDirectory) }
        if let why = cluster.failure {
            // Nothing can render here until the worker starts: one error, not one per project.
            display.interrupted()
            errorLine("error: \(why)")
            errorLine("  hint: check that \(clusterConfig.workerExecutable) runs ('worker --help'); rebuild or reinstall it beside coord")
            let unfinished = results.filter { if case .failure = $0 { true } else { false } }.count
            errorLine("\(unfinished) of \(projects.count) project\(projects.count == 1 ? "" : "s") did not finish and \(unfinished == 1 ? "is" : "are") recorded as interrupted; finished stages are kept. Resume with: \(resumeCommand)")
            throw ExitCode(1)
        }
        var reports: [ProjectReport] = []
        for (k, (p, r)) in zip(projects, results).enumerated() {
            var rep = ProjectReport(p, label: labels[k], notes: notes[k])
            rep.notes += display.notes(k)
            switch r {
            case .success((let run, .succeeded(let output, let seconds))):
                rep.run = run; rep.state = "succeeded"; rep.seconds = seconds; rep.output = output
                rep.bytes = (try? FileManager.default.attributesOfItem(atPath: output)[.size] as? NSNumber)?.int64Value ?? 0
            case .success((let run, .failed(let message, let seconds))):
                rep.run = run; rep.error = message; rep.seconds = seconds
            case .failure(let e):
                // Refused before it had a run (its run could not be recorded): told as a remote
                // batch tells a project the coordinator refused.
                rep.state = "refused"; rep.error = PipelineError.line(e)
            }
            reports.append(rep)
        }
        if projects.count == 1, json, let rep = reports.first, let run = rep.run, rep.state == "succeeded" {
            // One project: its figures, as the benchmarks read them.
            let workerRSS = (try? cluster.lineage.rows("""
                SELECT coalesce(max(a.max_rss), 0) AS rss FROM attempt a JOIN stage s ON s.id = a.stage_id WHERE s.run_id = ?
                """, [run]).first?["rss"]).flatMap { $0.flatMap { Int64($0) } } ?? 0
            var obj = rep.object
            obj["coordinator_peak_rss"] = tl_peak_rss_self()
            obj["worker_peak_rss"] = workerRSS
            print(String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self))
            return
        }
        try reportProjects(reports, seconds: Clocks.steady - started, json: json)
    }

    /// The state folder's store keeps a copy of every source and segment a local render used:
    /// left alone, a person's folder grew by each month's footage for ever, unseen. After a local
    /// render, at most every 6 hours (the stamp file's time), the artifacts of runs older than
    /// `--gc-keep-days` go, as `coord serve` collects its own (never a live or interrupted run's,
    /// never a file younger than an hour); what went is said on standard error.
    func collectGarbage(_ stateDirectory: String) {
        let gcKeepDays = gcKeepDays ?? Defaults.gcKeepDays
        guard gcKeepDays > 0 else { return }
        let stamp = stateDirectory + "/gc.stamp"
        if let last = (try? FileManager.default.attributesOfItem(atPath: stamp))?[.modificationDate] as? Date,
           Date().timeIntervalSince(last) < Self.gcEvery { return }
        FileManager.default.createFile(atPath: stamp, contents: nil)
        do {
            let r = try LineageStore.collectGarbage(databasePath: stateDirectory + "/lineage.db", storeRoot: stateDirectory, keepDays: gcKeepDays)
            if r.removed > 0 {
                errorLine("state folder \(stateDirectory): removed \(r.removed) artifact\(r.removed == 1 ? "" : "s") (\(ByteSize.text(r.removedBytes))) of runs "
                          + "older than \(String(format: "%g", gcKeepDays)) days; the movies written stay (--gc-keep-days)")
            }
            if r.notRemoved > 0 { errorLine("warning: \(r.notRemoved) old files in \(stateDirectory) could not be removed; the first: \(r.firstFailure ?? "?")") }
        } catch {
            errorLine("warning: could not collect old artifacts in \(stateDirectory): \(error)")
        }
    }

    static let gcEvery: Double = 6 * 3600

    // MARK: remote

    func runRemote(_ projects: [Pipeline], notes: [[String]]) throws {
        let context = MessagingContext()
        let client = try cluster.client(context)
        let labels = ProjectReport.labels(projects)
        let terminal = isatty(STDERR_FILENO) == 1
        // What Ctrl-C finds: the runs submitted so far, and the project whose files are going up.
        let state = Locked(RemoteSubmitState())
        let signals = onInterrupt { [cluster, exit = client.exitRequest] in
            exit.stop()
            let now = state.withLock { $0 }
            now.interruptedLines(projects: labels, cluster: cluster).forEach(errorLine)
            Foundation.exit(130)
        }
        defer { _ = signals }
        // The summary's time counts the submitting too, as a local batch's does: 200 projects
        // were "in 0.4 s" after 2 s of sending them.
        let started = Clocks.steady
        for (k, (p, label)) in zip(projects, labels).enumerated() {
            // Its files go to the coordinator first (those it lacks): minutes for phone videos
            // over Wi-Fi, which were silent.
            client.onUpload = { u in
                state.withLock { $0.sending = (label, u) }
                let line = u.done
                    ? "\(label): sent \(ByteSize.text(u.sent)) (\(u.files) file\(u.files == 1 ? "" : "s")) to the coordinator in \(String(format: "%.1f", u.seconds)) s"
                        + (u.kept > 0 ? ", after the \(ByteSize.text(u.kept)) it kept from an upload that was cut off" : "")
                    : "\(label): sending \(u.files) file\(u.files == 1 ? "" : "s") to the coordinator: \(ByteSize.text(u.sent)) of \(ByteSize.text(u.asked))"
                        + (u.kept > 0 ? " (\(ByteSize.text(u.kept)) kept from an upload that was cut off)" : "")
                if terminal { TerminalLine.draw(line + (u.done ? "\n" : "")) } else if u.done { errorLine(line) }
            }
            client.onReading = { r in
                if terminal { TerminalLine.draw("\(label): reading its files to see what the coordinator lacks: \(ByteSize.text(r.bytes)) of \(ByteSize.text(r.total))") }
            }
            state.withLock { $0.sending = (label, ClusterClient.Upload()) }
            // Long clips it trims go as excerpts of what the trims need.
            var sent = RemoteExcerpts.Prepared(pipeline: p)
            if !wholeFiles {
                sent = RemoteExcerpts.prepare(p, folder: RemoteExcerpts.folder) { clip in
                    if terminal { TerminalLine.draw("\(label): cutting excerpts of \(clip)") }
                }
                if terminal { TerminalLine.clear() }
                if sent.excerpts > 0 {
                    errorLine("\(label): sends \(sent.excerpts) excerpt\(sent.excerpts == 1 ? "" : "s") of \(ByteSize.text(sent.excerptBytes)) in place of "
                              + "clips of \(ByteSize.text(sent.wholeBytes)) (the same frames; --whole-files sends them whole)")
                }
            }
            let id: Int64
            do {
                id = try client.submit(sent.pipeline, priority: priority ?? Defaults.priority, stand: sent.stand)
            } catch let e as ClusterClient.Failure where e.answered && projects.count > 1 {
                // One project of a batch refused (its submitter's stage limit reached, …): the
                // others still go, and the summary says why this one did not.
                if terminal { TerminalLine.clear() }
                errorLine("\(label): the coordinator refused it: \(e.answer!)")
                state.withLock { $0.refused[k] = e.answer!; $0.sending = nil }
                continue
            } catch where error is ClusterClient.Failure || error is TransportError {
                // The coordinator lost: what was submitted goes on there, and is said.
                if terminal { TerminalLine.clear() }
                errorLine("error: \(error)")
                // (What it was sending is neither submitted nor unsent: the error says it may have been accepted.)
                state.withLock { $0.goOnLines(projects: labels, cluster: cluster) }.forEach(errorLine)
                throw ExitCode(1)
            }
            if terminal { TerminalLine.clear() }
            state.withLock { $0.submitted.append((k, id)); $0.sending = nil }
            if detach { print(json ? "{\"run\":\(id)}" : "\(id)") } else if projects.count == 1 || !json { errorLine("submitted \(label) as run \(id)") }
        }
        let (submitted, refused) = state.withLock { ($0.submitted, $0.refused) }
        let ids = submitted.map(\.run)
        if detach {
            // Standard output keeps the ids alone, for scripts.
            if !json && !ids.isEmpty { cluster.followAgain(ids).forEach(errorLine) }
            if !refused.isEmpty { throw ExitCode(1) }
            return
        }
        if projects.count == 1 {
            let display = ProgressDisplay(name: projects[0].name, terminal: isatty(STDERR_FILENO) == 1 && !json)
            client.onSilence = { display.note($0.line) }
            let end = try cluster.followOne(client, ids[0], display: display)
            display.finish(end)
            var report = ProjectReport(projects[0], label: labels[0], notes: notes[0])
            report.notes += display.notes
            return try finishRun(client, end, output: nil, json: json, cluster: cluster, report: report)
        }
        let accepted = submitted.map(\.project)
        let followed = ids.isEmpty ? [] : try followRuns(client, ids: ids, labels: accepted.map { labels[$0] },
                                                         items: accepted.map { projects[$0].items.count }, json: json, cluster: cluster) { j in
            ProjectReport(projects[accepted[j]], label: labels[accepted[j]], notes: notes[accepted[j]])
        }
        // In the batch's order, the refused ones among them.
        var reports = Dictionary(uniqueKeysWithValues: zip(accepted, followed))
        for (k, why) in refused {
            var rep = ProjectReport(projects[k], label: labels[k], notes: notes[k])
            rep.state = "refused"; rep.error = why
            reports[k] = rep
        }
        try reportProjects(projects.indices.map { reports[$0]! }, seconds: Clocks.steady - started, json: json)
    }

    /// Where a remote submit stands, for what Ctrl-C says.
    struct RemoteSubmitState {
        /// The projects submitted (indices into the batch) and their runs; those refused, with why.
        var submitted: [(project: Int, run: Int64)] = []
        var refused: [Int: String] = [:]
        var ids: [Int64] { submitted.map(\.run) }
        /// The project being submitted and its upload so far.
        var sending: (label: String, upload: ClusterClient.Upload)?

        func interruptedLines(projects labels: [String], cluster: ClusterOptions) -> [String] {
            var lines: [String] = []
            if let (label, u) = sending {
                if u.files > 0 && u.sent < u.asked {
                    lines.append("\ninterrupted while sending \(label)'s files to the coordinator (\(ByteSize.text(u.sent)) of \(ByteSize.text(u.asked)) sent). "
                                 + "It keeps what it received for a day: submitting \(label) again sends only the rest.")
                } else {
                    lines.append("\ninterrupted before the coordinator accepted \(label); it may still start it: `coord runs \(cluster.flags)` lists its runs.")
                }
            }
            if !ids.isEmpty && sending == nil && submitted.count + refused.count == labels.count {
                return lines + cluster.stoppedFollowing(ids)
            }
            return lines + goOnLines(projects: labels, cluster: cluster)
        }

        /// The runs submitted before the submit stopped go on at the coordinator (how to follow
        /// them), and the projects never submitted.
        func goOnLines(projects labels: [String], cluster: ClusterOptions) -> [String] {
            var lines: [String] = []
            if !ids.isEmpty {
                lines.append(ids.count == 1 ? "run \(ids[0]) (submitted before) goes on at the coordinator."
                                            : "runs \(RunIDs.text(ids)) (submitted before) go on at the coordinator.")
                lines += cluster.followAgain(ids)
            }
            let unsent = labels.dropFirst(submitted.count + refused.count + (sending == nil ? 0 : 1))
            if !unsent.isEmpty {
                let named = unsent.prefix(5).joined(separator: ", ") + (unsent.count > 5 ? " and \(unsent.count - 5) more" : "")
                lines.append("not submitted: \(named).")
            }
            return lines
        }
    }
}

/// The summary of several runs: a table (or JSON lines); exit 1 when any did not succeed.
/// `seconds`: how long the batch took, or with `followed` (`coord wait`, runs submitted before),
/// how long they were followed, which their own seconds may exceed.
func reportProjects(_ reports: [ProjectReport], seconds: Double, followed: Bool = false, json: Bool) throws {
    if json {
        for r in reports { print(String(decoding: try JSONSerialization.data(withJSONObject: r.object, options: [.sortedKeys]), as: UTF8.self)) }
    } else if reports.count == 1, let r = reports.first {
        if r.state == "succeeded" {
            print(String(format: "run %lld succeeded in %.1f s → %@ (%@)", r.run ?? 0, r.seconds, r.output ?? "", ByteSize.text(r.bytes)))
        }
    } else {
        print(ProjectReport.table(reports))
        let t = EndTally(states: reports.map(\.state))
        print(String(format: followed ? "%d projects followed for %.1f s: %d succeeded, %d failed" : "%d projects in %.1f s: %d succeeded, %d failed",
                     reports.count, seconds, t.succeeded, t.failed)
              + (t.refused > 0 ? ", \(t.refused) refused" : "") + (t.cancelled > 0 ? ", \(t.cancelled) cancelled" : ""))
    }
    let failures = reports.filter { $0.state != "succeeded" }
    if reports.count == 1, let r = failures.first {
        // (A project refused before its run was recorded has no run id: named by its label.)
        errorLine("error: \(r.run.map { "run \($0)" } ?? r.label) \(r.state == "refused" ? "was refused" : r.state): \(r.error ?? "")")
    }
    if !failures.isEmpty { throw ExitCode(1) }
}

extension RunEnd {
    /// Where the submitter asked for the movie, as a path here: what a batch writes it to and reports.
    var moviePath: String { URL(fileURLWithPath: outputPath).standardizedFileURL.path }
}

/// Follows runs at a coordinator to their ends with one live display (`labels` name them;
/// `items`: each one's items, 0 where its progress will tell), downloading each succeeded run's
/// movie to its output path as that run ends. `report(k)`: the report of the `k`th run, filled in here.
func followRuns(_ client: ClusterClient, ids: [Int64], labels: [String], items: [Int], json: Bool, cluster: ClusterOptions,
                report: (Int) -> ProjectReport) throws -> [ProjectReport] {
    let terminal = isatty(STDERR_FILENO) == 1
    let display = BatchDisplay(names: labels, items: items, terminal: terminal && !json)
    let index = Dictionary(uniqueKeysWithValues: ids.enumerated().map { ($1, $0) })
    client.onSilence = { display.note($0.line) }
    // Each movie comes down as its run ends, while the others render (`followAll`).
    var unwritten: [Int64: Error] = [:]
    let ends = try cluster.following(ids, stop: display.interrupted) {
        try client.followAll(ids, progress: { p in if let k = index[p.runID] { display.update(k, p) } },
                             ended: { e in
                                 FollowedRuns.ended.withLock { _ = $0.insert(e.run) }
                                 if let k = index[e.run] { display.ended(k, e.state == "succeeded" ? "succeeded" : "\(e.state): \(e.message ?? "")", notes: e.notes) }
                             },
                             movie: { e in
                                 guard e.state == "succeeded", let movie = e.output else { return nil }
                                 return (movie, e.moviePath)
                             },
                             fetching: { run, here, total in
                                 if let k = index[run] { display.downloading("downloading \(labels[k])'s movie: \(ByteSize.text(here)) of \(ByteSize.text(total))") }
                             },
                             fetched: { run, failure in
                                 display.downloading(nil)
                                 if failure == nil { FollowedRuns.written.withLock { _ = $0.insert(run) } }
                                 guard let failure, let k = index[run] else { return }
                                 unwritten[run] = failure
                                 display.note("\(labels[k]): the movie could not be downloaded: \(failure)")
                             })
    }
    display.finish()
    var reports: [ProjectReport] = []
    for (k, id) in ids.enumerated() {
        let end = ends[id]!
        var rep = report(k)
        rep.run = id; rep.state = end.state; rep.seconds = end.seconds; rep.error = end.message
        rep.notes += display.notes(k)
        if end.state == "succeeded" {
            if let movie = end.output {
                if let failure = unwritten[id] {
                    rep.state = "failed"; rep.error = "the movie could not be downloaded: \(failure)"
                } else {
                    rep.output = end.moviePath; rep.bytes = movie.size
                }
            } else {
                rep.state = "failed"; rep.error = "the coordinator names no movie for it; see 'coord status \(id)'"
            }
        }
        reports.append(rep)
    }
    return reports
}

/// How the projects of a batch ended, counted by state as the summary line and a terminal's total
/// line both tell them. Runs someone cancelled (`coord cancel`) and projects refused before they
/// had a run (the coordinator's refusal, or a run that could not be recorded) are counted apart;
/// every other end but success (failed, interrupted, …) is a failure.
struct EndTally {
    var succeeded = 0, failed = 0, refused = 0, cancelled = 0

    init(states: some Sequence<String>) {
        for state in states {
            switch state {
            case "succeeded": succeeded += 1
            case "refused": refused += 1
            case "cancelled": cancelled += 1
            default: failed += 1
            }
        }
    }
}

/// How one project of a submit ended.
struct ProjectReport {
    /// Its pipeline file (nil for a run followed by `coord wait`).
    var file: String?
    var name: String
    /// What the table and the live lines call it: `labels`.
    var label: String
    var run: Int64? = nil
    var state = "failed"
    var seconds = 0.0
    var output: String? = nil
    var bytes: Int64 = 0
    var error: String? = nil
    /// What the movie will not have that the pipeline asks for, as printed: loading's
    /// (`loadPipelineChecked`), then the run's (`RunProgress.notes`).
    var notes: [String] = []

    /// A project of a batch, not yet followed.
    init(file: String?, name: String, label: String) { self.file = file; self.name = name; self.label = label }
    /// `notes`: what loading it said (`loadPipelineChecked`); the run's own come as it goes.
    init(_ project: Pipeline, label: String, notes: [String]) {
        self.init(file: project.file, name: project.name, label: label)
        self.notes = notes
    }

    var object: [String: Any] {
        var o: [String: Any] = ["name": name, "state": state, "seconds": seconds]
        if let file { o["file"] = file }
        if let run { o["run"] = run }
        if let output { o["output"] = output; o["bytes"] = bytes }
        if let error { o["error"] = error }
        if !notes.isEmpty { o["notes"] = notes }
        return o
    }

    /// Each project as a person tells them apart: its name, and where projects share one (a
    /// pipeline copied to render a variant), the end of its file's path too, as few of the path's
    /// last parts as tell that file from the others (`p2.yaml`, or `again/p3.yaml`).
    static func labels(_ projects: [Pipeline]) -> [String] {
        labels(names: projects.map(\.name), files: projects.map(\.file))
    }

    static func labels(names: [String], files: [String]) -> [String] {
        let sharing = Dictionary(grouping: names.indices, by: { names[$0] })
        let parts = files.map { $0.split(separator: "/", omittingEmptySubsequences: true).map(String.init) }
        return names.indices.map { k in
            let group = sharing[names[k]]!
            if group.count == 1 { return names[k] }
            let longest = group.map { parts[$0].count }.max() ?? 1
            let n = (1...max(1, longest)).first { n in Set(group.map { parts[$0].suffix(n) }).count == group.count } ?? longest
            let tail = parts[k].count <= n ? files[k] : parts[k].suffix(n).joined(separator: "/")
            return "\(names[k]) (\(tail))"
        }
    }

    /// `s` in `n` columns: padded, or cut in the middle, so a label keeps its file.
    static func fit(_ s: String, _ n: Int) -> String { TerminalText.column(s, n) }

    static func table(_ rows: [ProjectReport]) -> String {
        let nameWidth = min(32, max(7, rows.map { TerminalText.width($0.label) }.max() ?? 0))
        let pad = fit
        var lines = [pad("project", nameWidth) + "  " + pad("state", 11) + "  seconds  output or error"]
        for r in rows {
            let tail = r.state == "succeeded" ? (r.output ?? "") : (r.error ?? "")
            // An error of several lines (every bad input of a project) keeps to its column.
            let indent = String(repeating: " ", count: nameWidth + 2 + 11 + 2 + 7 + 2)
            lines.append(pad(r.label, nameWidth) + "  " + pad(r.state, 11) + "  " + String(format: "%7.1f", r.seconds) + "  "
                         + tail.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\n" + indent))
        }
        return lines.joined(separator: "\n")
    }
}

/// Progress of many projects: on a terminal, one total line and a line per active project,
/// redrawn in place; otherwise a plain line as each project ends.
final class BatchDisplay: Sendable {
    struct State {
        var progress: [Int: RunProgress] = [:]
        /// When each project's progress was told: drawn aged by the time since.
        var received: [Int: Double] = [:]
        var ended: [Int: String] = [:]
        var told = ToldOnce()
        /// The batch waits for a worker (`RunProgress.waitingForWorker`); a log is told once when it starts.
        var waiting = false
        var drawn = 0
        var lastDraw = 0.0
        /// A word came within 0.1 s of the last drawing and is not drawn yet.
        var owed = false
        var stopped = false
        /// The movie coming down, drawn below the live lines on a terminal.
        var downloading: String? = nil
        /// The `k`th project ended with its movie.
        func succeeded(_ k: Int) -> Bool { ended[k]?.hasPrefix("succeeded") == true }
    }
    let names: [String]
    /// Each project's items, known before any progress comes (a project that fails at once sends
    /// none); 0 where not known (a run followed by `coord wait`): its progress tells.
    let items: [Int]
    let terminal: Bool
    let started = Clocks.steady
    let state = Locked(State())
    static let activeLines = 8

    /// Draws a word that came too soon after the last drawing (at most 0.1 s later), and redraws
    /// every second between words, so the time left counts down during long renders. (A word
    /// held back waited for the next second: a render sent was shown "waiting for a slot" for
    /// 0.75 s.)
    nonisolated(unsafe) private var ticker: DispatchSourceTimer?

    init(names: [String], items: [Int], terminal: Bool) {
        self.names = names; self.items = items; self.terminal = terminal
        guard terminal else { return }
        let t = DispatchSource.makeTimerSource(queue: .global())
        t.schedule(deadline: .now() + 0.1, repeating: 0.1)
        t.setEventHandler { [weak self] in
            guard let self else { return }
            let text = self.state.withLock { s -> String? in
                guard !s.stopped, !s.progress.isEmpty, s.owed || Clocks.steady - s.lastDraw >= 1 else { return nil }
                return self.draw(&s, force: true)
            }
            if let text { writeStandardError(text) }
        }
        t.resume()
        ticker = t
    }

    deinit { ticker?.cancel() }

    func update(_ k: Int, _ p: RunProgress) {
        let text = state.withLock { s -> String? in
            guard !s.stopped else { return nil }
            s.progress[k] = p
            s.received[k] = Clocks.steady
            // On a terminal a failure is printed as it comes, above the live lines (drawn again below
            // it): the run goes on. A log gets the run's error once, at its end.
            // A note (what planning did that the pipeline did not say) and a setback (a worker
            // lost with a stage) are printed as they come, terminal or log.
            let notes = s.told.newNotes(k, p).map { $0 + "\n" }.joined() + s.told.newSetbacks(k, p).map { "\(names[k]): \($0)\n" }.joined()
            if !terminal {
                let wasWaiting = s.waiting
                s.waiting = Self.waitingForWorker(s)
                let text = notes + (s.waiting && !wasWaiting ? RunProgress.waitingLine + "\n" : "")
                return text.isEmpty ? nil : text
            }
            let above = notes + s.told.newFailures(k, p).map { ToldOnce.line($0, project: names[k]) + "\n" }.joined()
            guard !above.isEmpty else { return draw(&s, force: false) }
            return lines(above, &s)
        }
        if let text { writeStandardError(text) }
    }

    /// The projects that have succeeded so far, by index.
    func succeeded() -> Set<Int> { state.withLock { s in Set(s.ended.keys.filter(s.succeeded)) } }

    /// The `k`th project's notes told so far.
    func notes(_ k: Int) -> [String] { state.withLock { $0.told.notes[k] ?? [] } }

    /// The `k`th project ended; `notes`: all of its run's (`RunEnd.notes`), those not told yet are
    /// (a run that ended before it was followed sent no progress).
    func ended(_ k: Int, _ what: String, notes: [String] = []) {
        let text = state.withLock { s -> String? in
            guard !s.stopped else { return nil }
            s.ended[k] = what
            let above = s.told.newNotes(k, notes).map { $0 + "\n" }.joined()
            if !terminal { return above + String(format: "[%d/%d] %@: %@\n", s.ended.count, names.count, names[k], what) }
            return above.isEmpty ? draw(&s, force: true) : lines(above, &s)
        }
        if let text { writeStandardError(text) }
    }

    /// The movie coming down as the other projects go on (`ClusterClient.followAll`), on a
    /// terminal: a line below the live ones; nil once it is written.
    func downloading(_ line: String?) {
        let text = state.withLock { s -> String? in
            guard terminal, !s.stopped, s.downloading != line else { return nil }
            s.downloading = line
            return draw(&s, force: line == nil)
        }
        if let text { writeStandardError(text) }
    }

    /// A line of its own (the coordinator gone silent, or answering again), above the live lines
    /// on a terminal.
    func note(_ line: String) {
        let text = state.withLock { s -> String in
            guard terminal, !s.stopped else { return line + "\n" }
            return lines(line + "\n", &s, redraw: !s.progress.isEmpty)
        }
        writeStandardError(text)
    }

    /// On a terminal: `text` (whole lines) in place of the live lines, which are drawn again below
    /// it when `redraw`.
    private func lines(_ text: String, _ s: inout State, redraw: Bool = true) -> String {
        let up = s.drawn > 0 ? "\u{1B}[\(s.drawn)F\u{1B}[J" : ""
        s.drawn = 0
        return up + text + (redraw ? draw(&s, force: true) ?? "" : "")
    }

    /// Leaves the last drawing on screen and stops drawing.
    func finish() { state.withLock { $0.stopped = true }; ticker?.cancel() }

    /// Stops drawing and moves below the live lines.
    func interrupted() { state.withLock { $0.stopped = true }; ticker?.cancel(); if terminal { writeStandardError("\n") } }

    /// The total line: projects done, items, and an ETA from planned frames (once every running
    /// project's length is known).
    func totalLine(_ s: State, _ batch: BatchProgress, now: Double) -> String {
        // (Each ended word begins with its state: "succeeded in 2.0 s → …", "refused: …".)
        let t = EndTally(states: s.ended.values.map { String($0.prefix { $0.isLetter }) })
        let unfinished = [t.failed > 0 ? "\(t.failed) failed" : nil, t.refused > 0 ? "\(t.refused) refused" : nil, t.cancelled > 0 ? "\(t.cancelled) cancelled" : nil]
            .compactMap { $0 }
        // All ended: how long the batch took; else the runs' frames summed, as one run's line (the
        // batch renders from its first seconds on, so its rate is the frames it rendered over its time).
        let eta = s.ended.count == names.count ? String(format: "%.1f s", now - started)
            : Self.waitingForWorker(s) ? RunProgress.waitingText : batch.text(renderingFor: now - started)
        let counts = names.indices.map { itemCounts(s, $0) }
        return String(format: "%d/%d projects done%@ · %d/%d items · %d running · %@", s.ended.count, names.count,
                      unfinished.isEmpty ? "" : " (\(unfinished.joined(separator: ", ")))", counts.reduce(0) { $0 + $1.done },
                      counts.reduce(0) { $0 + $1.all }, batch.running, eta)
    }

    /// Every project's last word, as it stands now, summed.
    func batchProgress(_ s: State, now: Double) -> BatchProgress {
        let told = s.progress.map { k, p in (progress: p.aged(by: now - (s.received[k] ?? now)), ended: s.ended[k] != nil) }
        return BatchProgress(projects: names.count, ended: s.ended.count, told: told)
    }

    /// The `k`th project's items made and in all. A project that succeeded made every item,
    /// whatever it last told: a run that ended before it was followed (its stages cached) tells
    /// no progress at all.
    func itemCounts(_ s: State, _ k: Int) -> (done: Int, all: Int, succeeded: Bool) {
        let all = max(items[k], s.progress[k]?.items ?? 0)
        let succeeded = s.succeeded(k)
        return (succeeded ? all : s.progress[k]?.itemsDone ?? 0, all, succeeded)
    }

    /// A batch of one project: its own bar, as a remote submit of one draws it (a total line
    /// "0/1 projects done" above a line of the same project said everything twice).
    func soleLine(_ s: State, now: Double) -> String {
        let p = s.progress[0]?.aged(by: now - (s.received[0] ?? now))
        let items = itemCounts(s, 0)
        let tail = s.ended[0] != nil ? String(format: "%.1f s", now - started)
            : Self.waitingForWorker(s) ? RunProgress.waitingText : p?.etaText ?? "ETA --:--"
        return ProgressDisplay.line(names[0], fraction: items.succeeded ? 1 : p?.fractionDone ?? 0, itemsDone: items.done, items: items.all,
                                    failures: p?.failures.count ?? 0, running: s.ended[0] == nil ? p?.running.count ?? 0 : 0, tail: tail)
    }

    /// One project's line under the total (its time as `RunProgress.timeInBatch` says; `speed`:
    /// the batch's, for a project that has rendered nothing of its own yet).
    static func projectLine(_ name: String, _ p: RunProgress, speed: Double? = nil) -> String {
        let filled = min(16, Int(p.fractionDone * 16))
        let bar = String(repeating: "█", count: filled) + String(repeating: "·", count: 16 - filled)
        let failed = p.failures.isEmpty ? "" : " (\(p.failures.count) failed)"
        return "  \(ProjectReport.fit(name, 24)) [\(bar)] \(p.itemsDone)/\(p.items) items\(failed) · \(p.timeInBatch(speed: speed))"
    }

    /// The projects going beyond the lines drawn: how many render and how many wait their turn
    /// ("… and 10 more running" was said of ten of which one rendered).
    static func moreLine(_ hidden: [RunProgress]) -> String {
        // (One whose movie is to be joined waits for a slot too, until its concat is sent.)
        let going = hidden.filter { !$0.running.isEmpty }.count, worker = hidden.filter(\.waitingForWorker).count
        let kinds = [(going, "running"), (hidden.count - going - worker, RunProgress.waitingForSlotText), (worker, RunProgress.waitingText)]
            .filter { $0.0 > 0 }
        // One kind: "… and 9 more waiting for a slot".
        if kinds.count == 1 { return "  … and \(hidden.count) more \(kinds[0].1)" }
        return "  … and \(hidden.count) more: " + kinds.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
    }

    /// Every project still going waits for a worker, as last told.
    static func waitingForWorker(_ s: State) -> Bool {
        let going = s.progress.filter { s.ended[$0.key] == nil }.values
        return !going.isEmpty && going.allSatisfy(\.waitingForWorker)
    }

    private func draw(_ s: inout State, force: Bool) -> String? {
        let now = Clocks.steady
        guard terminal else { return nil }
        guard force || now - s.lastDraw >= 0.1 else { s.owed = true; return nil }
        s.lastDraw = now
        s.owed = false
        let batch = names.count > 1 ? batchProgress(s, now: now) : nil
        var lines = [batch.map { totalLine(s, $0, now: now) } ?? soleLine(s, now: now)]
        let active = s.progress.keys.filter { s.ended[$0] == nil }.sorted()
        for k in active.prefix(Self.activeLines) where batch != nil {
            lines.append(Self.projectLine(names[k], s.progress[k]!.aged(by: now - (s.received[k] ?? now)), speed: batch?.speed(for: s.progress[k]!)))
        }
        if active.count > Self.activeLines { lines.append(Self.moreLine(active.dropFirst(Self.activeLines).map { s.progress[$0]! })) }
        if let d = s.downloading { lines.append(d) }
        let up = s.drawn > 0 ? "\u{1B}[\(s.drawn)F" : ""
        s.drawn = lines.count
        // Each line one row (the cursor goes back up a row per line drawn).
        let columns = TerminalText.columns()
        return up + "\u{1B}[J" + lines.map { TerminalText.fit($0, columns: columns) }.joined(separator: "\n") + "\n"
    }
}

/// Runs `handler` (once) on SIGINT, SIGTERM or SIGHUP (the terminal closed, an SSH session
/// dropped) instead of dying silently.
func onInterrupt(_ handler: @escaping @Sendable () -> Void) -> [DispatchSourceSignal] {
    let once = Locked(false)
    return [SIGINT, SIGTERM, SIGHUP].map { sig in
        signal(sig, SIG_IGN)
        let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        s.setEventHandler {
            guard !once.withLock({ let was = $0; $0 = true; return was }) else { return }
            handler()
        }
        s.resume()
        return s
    }
}
