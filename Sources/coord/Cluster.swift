import Foundation
import ArgumentParser
import Logging
import ThreadlineCore
import Engine
import Lineage
import Transport
import CSupport
import ServiceLifecycle
import Dashboard
import Hummingbird

/// How to reach a running coordinator.
struct ClusterOptions: ParsableArguments {
    @Option(name: .long, help: "A running coordinator (`coord serve`), e.g. tcp://render-1:7400.")
    var coordinator: String?

    @Option(name: .long, help: "Your CURVE secret key file (from 'coord keygen'), when the coordinator uses CURVE.")
    var curveSecretKey: String?

    @Option(name: .long, help: "The coordinator's CURVE public key file.")
    var coordinatorKey: String?

    @Option(name: .long, help: "Seconds to wait for a silent coordinator before giving up; at least 60 once it said it is stopping (a restart or an upgrade), for it to come back.")
    var timeout: Double = 15

    func validate() throws {
        if let c = coordinator, let problem = Reachability.problem(with: c) { throw ValidationError("--coordinator \(problem)") }
        guard (curveSecretKey == nil) == (coordinatorKey == nil) else {
            throw ValidationError("--curve-secret-key and --coordinator-key go together")
        }
        guard timeout >= 1 else { throw ValidationError("--timeout must be at least 1 second") }
    }

    func client(_ context: MessagingContext) throws -> ClusterClient {
        guard let coordinator else { throw ValidationError("name the coordinator with --coordinator tcp://HOST:PORT") }
        var curve: (keys: CurveKeyPair, serverPublicKey: String)? = nil
        if let curveSecretKey, let coordinatorKey {
            do { curve = try CurveKeyPair.client(secretKeyFile: curveSecretKey, serverKeyFile: coordinatorKey) } catch let e as TransportError {
                errorLine("error: \(e.message)"); throw ExitCode(2)
            }
        }
        let client = try clusterCall { try ClusterClient(endpoint: coordinator, context: context, curve: curve) }
        client.silenceTimeout = timeout
        client.onSilence = { errorLine($0.line) }
        return client
    }

    /// The options that reach this coordinator again, for a command printed to the user.
    var flags: String {
        ([coordinator.map { "--coordinator \($0)" }, curveSecretKey.map { "--curve-secret-key \($0)" },
          coordinatorKey.map { "--coordinator-key \($0)" }] as [String?]).compactMap { $0 }.joined(separator: " ")
    }

    /// What Ctrl-C on a command following runs says: those still going go on, those that ended
    /// there have movies still to download (`FollowedRuns.ended`), and how to follow them again.
    func stoppedFollowing(_ ids: [Int64]) -> [String] {
        let ended = FollowedRuns.ended.withLock { $0 }
        let going = ids.filter { !ended.contains($0) }, over = ids.filter { ended.contains($0) }
        let it = ids.count == 1 ? "it" : "them"
        if going.isEmpty {
            let these = ids.count == 1 ? "run \(ids[0]) has" : "runs \(RunIDs.text(ids)) have"
            return ["\ninterrupted: \(these) ended at the coordinator; this only stopped following \(it)."] + followAgain(ids)
        }
        let these = going.count == 1 ? "run \(going[0]) goes" : "runs \(RunIDs.text(going)) go"
        // (A movie comes down as its run ends: those written are said, and not fetched again.)
        let written = ids.filter(FollowedRuns.written.withLock { $0 }.contains)
        let movies = written.isEmpty ? "" : written.count == 1 ? "; run \(written[0])'s movie is written" : "; the movies of runs \(RunIDs.text(written)) are written"
        let others = over.isEmpty ? "" : " (\(over.count == 1 ? "run \(over[0]) has" : "runs \(RunIDs.text(over)) have") ended there\(movies))"
        return ["\ninterrupted: \(these) on at the coordinator\(others); this only stopped following \(it)."] + followAgain(ids)
    }

    /// How to pick up runs that go on at the coordinator after this command stopped following them
    /// (not those whose movies this command wrote).
    func followAgain(_ all: [Int64]) -> [String] {
        let written = FollowedRuns.written.withLock { $0 }
        let left = all.filter { !written.contains($0) }
        let ids = left.isEmpty ? all : left
        return ids.count == 1
            ? ["follow it and download the movie: coord wait \(ids[0]) \(flags)", "stop it: coord cancel \(ids[0]) \(flags)"]
            : ["follow them and download their movies: coord wait \(RunIDs.text(ids, separator: " ")) \(flags)",
               "stop them: coord cancel \(RunIDs.text(ids, separator: " ")) \(flags)"]
    }

    /// Follows one run to its end on `display` (`following`), and notes it ended (`FollowedRuns`).
    func followOne(_ client: ClusterClient, _ id: Int64, display: ProgressDisplay) throws -> RunEnd {
        let end = try following([id], stop: display.finish) { try client.follow(id) { display.update($0) } }
        FollowedRuns.ended.withLock { _ = $0.insert(end.run) }
        return end
    }

    /// Follows runs with `body`; when that stops (the coordinator lost, a download cut off),
    /// `stop` ends the live display, and the error comes with how to follow the runs again, unless
    /// it is the coordinator's own answer (no such run), which following again would only repeat,
    /// or the coordinator never answered at all (the run it names may not be there).
    func following<T>(_ ids: [Int64], stop: () -> Void, _ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            stop()
            let failure = error as? ClusterClient.Failure
            let hint = failure?.answered == true || failure?.reached == false ? [] : followAgain(ids)
            return try clusterCall(hint: hint) { throw error }
        }
    }
}

/// The runs this command follows that have ended, as they end: what Ctrl-C says of them.
enum FollowedRuns {
    static let ended = Locked<Set<Int64>>([])
    /// Those whose movies are written (a batch's come down as each run ends).
    static let written = Locked<Set<Int64>>([])
}

/// Runs a cluster command, turning its failures into one clear line (and the `hint` lines) and
/// exit 1; the coordinator's own answers (`Failure.answered`) are thrown on when `rethrowingAnswers`.
func clusterCall<T>(hint: [String] = [], rethrowingAnswers: Bool = false, _ body: () throws -> T) throws -> T {
    do { return try body() } catch where error is ClusterClient.Failure || error is TransportError {
        if rethrowingAnswers, (error as? ClusterClient.Failure)?.answered == true { throw error }
        errorLine("error: \(error)"); hint.forEach(errorLine); throw ExitCode(1)
    }
}

/// A movie coming down, drawn when `shown` (on a terminal): a 4K movie over Wi-Fi takes
/// minutes, which were silent.
func downloadProgress(_ what: String, of total: Int64, shown: Bool) -> (Int64) -> Void {
    guard shown else { return { _ in } }
    return { here in TerminalLine.draw("downloading \(what): \(ByteSize.text(here)) of \(ByteSize.text(total))") }
}

/// Prints how a run ended and downloads its movie; exit 1 unless it succeeded. `cluster` gives
/// the flags of the command that follows it again after an interruption; `report` (its name,
/// file and notes) is filled in and is its `--json` object, as a batch's are.
func finishRun(_ client: ClusterClient, _ end: RunEnd, output: String?, json: Bool, cluster: ClusterOptions, report: ProjectReport) throws {
    var rep = report
    rep.run = end.run; rep.state = end.state; rep.seconds = end.seconds; rep.error = end.message
    if end.state == "succeeded" {
        guard let movie = end.output else {
            errorLine("error: run \(end.run) succeeded but the coordinator names no movie for it; see 'coord status \(end.run)'")
            throw ExitCode(1)
        }
        let path = URL(fileURLWithPath: output ?? end.outputPath).standardizedFileURL.path
        let shown = !json && isatty(STDERR_FILENO) == 1
        try clusterCall { try client.download(movie, to: path, progress: downloadProgress("the movie", of: movie.size, shown: shown)) }
        if shown { TerminalLine.clear() }
        rep.output = path; rep.bytes = movie.size
    }
    try reportProjects([rep], seconds: end.seconds, json: json)
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a long-lived coordinator that workers and submitters connect to.",
        discussion: """
        Examples:
          coord serve --bind tcp://127.0.0.1:7400 --state /var/lib/threadline
          coord serve --bind tcp://0.0.0.0:7400 --state /var/lib/threadline \\
              --curve-secret-key /etc/threadline/coordinator.key \\
              --allow-workers /etc/threadline/workers \\
              --allow-submitters /etc/threadline/submitters \\
              --allow-admins /etc/threadline/admins

        Roles come from the allow-list folder a public key (*.pub) is in: worker keys register \
        as workers and nothing else; submitter keys submit runs and see, download and cancel only \
        their own; admin keys see, download and cancel every run. --allow DIR gives its keys the \
        worker and submitter roles both (for a single trusted user); prefer the separate lists.

        Without CURVE keys it binds only to loopback unless --insecure is given. On SIGTERM, \
        SIGINT or SIGHUP (its terminal closed) it stops taking work, lets in-flight stages finish (--drain-timeout), hands back the \
        rest and exits; runs left unfinished resume when it starts again on the same --state. Renders still under way at the \
        drain timeout go on on their workers, and the coordinator started again keeps what they make.
        """)

    @Option(name: .long, help: "Endpoint to listen on, e.g. tcp://0.0.0.0:7400.") var bind: String = "tcp://127.0.0.1:7400"
    @OptionGroup var stateOptions: StateOptions
    @Option(name: .long, help: "The coordinator's CURVE secret key file (from 'coord keygen').") var curveSecretKey: String?
    @Option(name: .long, help: "Folder of public keys (*.pub) that may join as workers.") var allowWorkers: String?
    @Option(name: .long, help: "Folder of public keys (*.pub) that may submit runs and manage their own.") var allowSubmitters: String?
    @Option(name: .long, help: "Folder of public keys (*.pub) of operators: every run is theirs to see, download and cancel.") var allowAdmins: String?
    @Option(name: .long, help: "Folder of public keys trusted as both worker and submitter (one trusted user; prefer the separate lists).") var allow: String?

    var allowLists: [PeerRole: String] {
        var lists: [PeerRole: [String]] = [:]
        if let allow { lists[.worker, default: []].append(allow); lists[.submitter, default: []].append(allow) }
        if let allowWorkers { lists[.worker, default: []].append(allowWorkers) }
        if let allowSubmitters { lists[.submitter, default: []].append(allowSubmitters) }
        if let allowAdmins { lists[.admin, default: []].append(allowAdmins) }
        return lists.compactMapValues { $0.count == 1 ? $0[0] : nil }
    }
    var anyAllowList: Bool { allow != nil || allowWorkers != nil || allowSubmitters != nil || allowAdmins != nil }
    @Flag(name: .long, help: "Listen on a non-loopback address without CURVE (anyone who reaches the port can submit or join).")
    var insecure = false
    @Option(name: .long, help: "Seconds between heartbeats.") var heartbeat: Double = 1
    @Option(name: .long, help: "Seconds of silence after which a worker is dead and its stages go back to the queue.") var liveness: Double = 5
    @Option(name: .long, help: "Attempts per stage for retryable failures.") var retryAttempts: Int = 3
    @Option(name: .long, help: ArgumentHelp("A stage whose attempts lost this many workers (killed or silent) is poison: its run fails instead of taking down more workers.",
                                            valueName: "N")) var poisonAfter: Int = 3
    @Option(name: .long, help: "Seconds in-flight stages may finish after SIGTERM before they are handed back (renders still under way go on on their workers, for the coordinator started again to keep).") var drainTimeout: Double = 10
    @Option(name: .long, help: ArgumentHelp("An attempt that runs this many seconds without finishing (a stage hung on its worker) is stopped there and tried again on another worker; its run fails once the stage's attempts are spent. Stages that should take long get 20 times their estimate (a render's frames, a fetch's bytes at 20 MB/s) when that is more. 0: no limit.",
                                            valueName: "seconds")) var stageTimeout: Double = 1800
    @Option(name: .long, help: ArgumentHelp("The most stages a submitter key's unfinished runs may hold at once (about 1.5 KB of coordinator memory each); its further submissions are refused, saying why, until some end. Admins are not limited; 0: no limit.",
                                            valueName: "N")) var maxStagesPerKey: Int = 100_000
    @Option(name: .long, help: ArgumentHelp("Remove, at start and every few hours, the artifacts no run of the last DAYS days refers to, as 'coord gc' does (never a live or interrupted run's); 0: never (run 'coord gc' yourself).",
                                            valueName: "days")) var gcKeepDays: Double = 14
    @Option(name: .long, help: ArgumentHelp("With each collection, also forget the records of runs submitted more than DAYS days ago that have ended (their stages, attempts and events; running and interrupted runs stay), so lineage stops growing by about 6 KB per item rendered; at least --gc-keep-days; 0: keep every record.",
                                            valueName: "days")) var lineageKeepDays: Double = 0
    @Option(name: .long, help: ArgumentHelp("Hours between collections.", visibility: .hidden)) var gcEvery: Double = 6
    @Flag(name: .long, help: "Log only warnings and errors.") var quiet = false
    @Option(name: .long, help: ArgumentHelp("Also serve the dashboard, /metrics, /healthz and /readyz on this address, e.g. 127.0.0.1:7401.",
                                            valueName: "HOST:PORT")) var http: String?
    @Option(name: .long, help: "A file holding the bearer token HTTP clients must send (required when --http is not loopback); rewrite it to rotate the token (read again within seconds).") var tokenFile: String?
    @Option(name: .long, help: ArgumentHelp("Render this share of stages again on a second worker and accept an output only when both hash the same; a worker whose output differs from the others' is quarantined (e.g. 5%).",
                                            valueName: "N%")) var verify: String?

    /// --verify as a fraction, 0…1.
    static func verifyFraction(_ text: String?) throws -> Double {
        guard let text else { return 0 }
        let digits = text.hasSuffix("%") ? String(text.dropLast()) : text
        guard let n = Double(digits), n.isFinite, (0...100).contains(n) else { throw ValidationError("--verify takes a share of stages from 0% to 100%, e.g. 5%; got '\(text)'") }
        return n / 100
    }

    func validate() throws {
        _ = try Self.verifyFraction(verify)
        if let http { do { _ = try DashboardConfiguration.parse(http, tokenFile: tokenFile) } catch { throw ValidationError("\(error)") } }
        else if tokenFile != nil { throw ValidationError("--token-file goes with --http") }
        if let problem = Reachability.problem(with: bind, binding: true) { throw ValidationError("--bind \(problem)") }
        guard (curveSecretKey == nil) == !anyAllowList else {
            throw ValidationError("--curve-secret-key goes with allow-lists (--allow-workers, --allow-submitters, --allow-admins)")
        }
        if allow != nil && (allowWorkers != nil || allowSubmitters != nil) {
            throw ValidationError("give either --allow or --allow-workers/--allow-submitters, not both")
        }
        guard heartbeat > 0, liveness > heartbeat else { throw ValidationError("--liveness must be longer than --heartbeat") }
        guard gcKeepDays >= 0, gcKeepDays.isFinite, gcEvery > 0 else { throw ValidationError("--gc-keep-days must be 0 (never) or more days") }
        guard lineageKeepDays == 0 || (lineageKeepDays.isFinite && lineageKeepDays >= gcKeepDays && gcKeepDays > 0) else {
            throw ValidationError("--lineage-keep-days must be 0 (keep every record) or at least --gc-keep-days (\(gcKeepDays.formatted(.number)), not 0): a run's record outlives its artifacts")
        }
        guard maxStagesPerKey >= 0 else { throw ValidationError("--max-stages-per-key must be 0 (no limit) or more stages") }
        guard (1...20).contains(retryAttempts) else { throw ValidationError("--retry-attempts must be 1…20") }
        guard (1...100).contains(poisonAfter) else { throw ValidationError("--poison-after must be 1…100") }
        guard stageTimeout >= 0, stageTimeout.isFinite else { throw ValidationError("--stage-timeout must be a number of seconds, 0 for no limit") }
        if curveSecretKey == nil && !insecure && !Serve.isLoopback(bind) {
            throw ValidationError("""
                refusing to listen on \(bind) without CURVE: anyone who can reach it could submit work or join as a worker.
                Make keys with 'coord keygen coordinator' and pass --curve-secret-key with --allow-workers and --allow-submitters, bind to 127.0.0.1, or pass --insecure.
                """)
        }
    }

    static func isLoopback(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("ipc://") { return true }
        var host = String(endpoint.dropFirst("tcp://".count))
        if let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    func run() async throws {
        tl_unblock_termination_signals()
        var logger = Logger(label: "threadline.coord") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = quiet ? .warning : .info
        // Metrics report into the exporter from the first lineage write on.
        let exporter = http == nil ? nil : FarmExporter()
        exporter?.bootstrap()
        let dir = try stateOptions.made()
        // One coordinator per state folder: a second would fight the first for SQLite's one writer
        // (a turn that waits past the busy timeout stops a coordinator) and split the farm's view.
        let lock: FolderLock?
        do {
            lock = try FolderLock.stateFolder(dir, holder: ServeHolder(pid: getpid(), host: ProcessInfo.processInfo.hostName, endpoint: bind,
                                                                       curve: curveSecretKey != nil).line, shared: false)
        } catch let held as FolderLock.Held {
            if held.holder.isEmpty {
                errorLine("error: local coord submit processes are rendering on \(dir); one coordinator per state folder")
                errorLine("  hint: let them finish (or stop them with Ctrl-C: their runs resume), or give this one its own --state")
            } else {
                errorLine("error: another coordinator serves \(dir) (\(held.holder)); one coordinator per state folder")
                errorLine("  hint: stop that one first (it drains within its --drain-timeout), or give this one its own --state")
            }
            throw ExitCode(1)
        }
        defer { withExtendedLifetime(lock) {} }
        let lineage = try LineageStore(path: dir + "/lineage.db")
        var config = Coordinator.Configuration(bind: bind)
        config.store = try ArtifactStore(root: dir)
        config.publishOutputs = false
        config.shutdownWorkersOnStop = false
        config.resumeInterrupted = true
        config.heartbeatInterval = heartbeat
        config.livenessTimeout = liveness
        config.maxAttempts = retryAttempts
        config.poisonAfterLostWorkers = poisonAfter
        config.drainTimeout = drainTimeout
        config.stageTimeout = stageTimeout > 0 ? stageTimeout : nil
        config.maxStagesPerKey = maxStagesPerKey
        config.verifyFraction = try Self.verifyFraction(verify)
        if let curveSecretKey {
            do {
                let keys = try CurveKeyPair.load(curveSecretKey)
                guard keys.secretKey != nil else { throw ValidationError("\(curveSecretKey) holds no secret key; pass the .key file") }
                for (role, dir) in allowLists.sorted(by: { $0.key < $1.key }) {
                    var isDir: ObjCBool = false
                    guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
                        throw ValidationError("the \(role.rawValue)s' allow-list folder \(dir) does not exist")
                    }
                }
                if allowLists[.worker] == nil { logger.warning("no --allow-workers: no worker can join") }
                config.curve = .init(keys: keys, allow: allowLists)
            } catch let e as TransportError { errorLine("error: \(e.message)"); throw ExitCode(2) }
        }
        let httpConfig = try http.map { try DashboardConfiguration.parse($0, tokenFile: tokenFile) }
        do { try await httpConfig?.checkCanListen() } catch { errorLine("error: \(error)"); throw ExitCode(1) }
        let coordinator = Coordinator(config, lineage: lineage, logger: logger)
        let context = MessagingContext()
        let endpoint: String
        do { endpoint = try coordinator.start(context: context) } catch {
            errorLine("error: cannot listen on \(bind): \(error)"); throw ExitCode(1)
        }
        logger.info("coordinator listening", metadata: ["endpoint": "\(endpoint)", "state": "\(dir)", "curve": "\(config.curve != nil)"])
        // The port it got, for a refusal to name (a bind to port * had none before).
        lock?.rewrite(holder: ServeHolder(pid: getpid(), host: ProcessInfo.processInfo.hostName, endpoint: endpoint, curve: config.curve != nil).line)
        // A group stops its services last first: the coordinator drains first, while the
        // dashboard still answers (/readyz says draining), then the dashboard, then the collector.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if gcKeepDays > 0 {
            services.append(.init(service: GarbageService(stateDirectory: dir, keepDays: gcKeepDays, lineageKeepDays: lineageKeepDays,
                                                          coordinator: coordinator, every: gcEvery * 3600, logger: logger)))
        }
        if let httpConfig, let exporter {
            let lineagePath = lineage.path
            let dashboard = try Dashboard(stateDirectory: dir, configuration: httpConfig, live: { coordinator.live.map(Self.figures) },
                                          ready: { Self.notReady(coordinator, lineagePath: lineagePath) }, exporter: exporter, logger: logger)
            services.append(.init(service: dashboard.application(onRunning: { port in
                FileHandle.standardOutput.write(Data("dashboard on \(httpConfig.url(port: port))\n".utf8))
            })))
        }
        services.append(.init(service: CoordinatorService(coordinator: coordinator, announce: "listening on \(endpoint)\n"),
                              successTerminationBehavior: .gracefullyShutdownGroup))
        var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint, .sighup], logger: logger)
        group.maximumGracefulShutdownDuration = .seconds(drainTimeout + 15)
        do { try await ServiceGroup(configuration: group).run() } catch {
            // The address taken since the check.
            guard let http, let line = DashboardConfiguration.listenFailure(on: http, error) else { throw error }
            errorLine("error: " + line); throw ExitCode(1)
        }
        // Released here, the context is terminated, which waits for the coordinator's last
        // messages to leave (`Coordinator.lastWordsMs`) before the process exits.
        withExtendedLifetime(context) {}
        if let failure = coordinator.failure.withLock({ $0 }) { errorLine("error: \(failure)"); throw ExitCode(1) }
    }
}

extension Serve {
    static func figures(_ l: Coordinator.Live) -> LiveFigures {
        LiveFigures(queueDepth: l.queueDepth, slotsBusy: l.slotsBusy, slotsTotal: l.slotsTotal,
                    workers: l.workers.map { .init(id: $0.id, host: $0.host, slots: $0.slots, busy: $0.busy, heartbeatAgeS: $0.heartbeatAgeS,
                                                   draining: $0.draining, running: $0.running, sidelinedS: $0.sidelinedS, holds: $0.holds,
                                                   clockOffsetS: $0.clockOffsetS) })
    }

    /// /readyz: the socket is bound and the loop runs, lineage is writable, and it is not draining.
    /// The answer is open to unauthenticated probes, so it names a fixed reason, never a path or
    /// an error text (those are in the log).
    static func notReady(_ coordinator: Coordinator, lineagePath: String) -> String? {
        if coordinator.failure.withLock({ $0 }) != nil { return "not ready: the coordinator failed (see its log)" }
        guard let live = coordinator.live else { return "not ready: the coordinator is starting" }
        if live.draining { return "not ready: draining (stopping)" }
        if !lineageWritable(lineagePath) { return "not ready: lineage is not writable" }
        return nil
    }

    /// SQLite needs to write the database, its WAL and, for new journal files, its folder.
    static func lineageWritable(_ path: String) -> Bool {
        let folder = (path as NSString).deletingLastPathComponent
        for p in [path, path + "-wal", folder] where FileManager.default.fileExists(atPath: p) {
            if access(p, W_OK) != 0 { return false }
        }
        return true
    }
}

/// `coord gc` on a farm's state folder, at start and then every `every` seconds: a coordinator
/// left running for weeks would otherwise fill its disk with artifacts of long-finished runs (and
/// a full disk stops it). Lineage is read read-only, beside the coordinator's writes, and a file
/// younger than an hour is never removed (it may not be recorded yet).
struct GarbageService: Service {
    let stateDirectory: String
    let keepDays: Double
    /// Runs that ended longer ago are forgotten, by the coordinator (lineage's one writer); 0: never.
    let lineageKeepDays: Double
    let coordinator: Coordinator
    let every: Double
    let logger: Logger

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global(qos: .utility).async { collect(); done.resume() }
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(every)) }
        }
    }

    /// One collection, off Swift's cooperative threads (a large store takes a while to walk).
    func collect() {
        do {
            let r = try LineageStore.collectGarbage(databasePath: stateDirectory + "/lineage.db", storeRoot: stateDirectory, keepDays: keepDays)
            logger.info("collected garbage: artifacts of runs older than \(keepDays) days removed",
                        metadata: ["removed": "\(r.removed)", "removed_bytes": "\(ByteSize.text(r.removedBytes))", "kept": "\(r.kept)",
                                   "stale_temporaries": "\(r.temporaryRemoved)"])
            if r.notRemoved > 0 {
                logger.warning("garbage collection could not remove \(r.notRemoved) files; the first: \(r.firstFailure ?? "?")")
            }
        } catch {
            logger.error("garbage collection failed: \(error)")
        }
        guard lineageKeepDays > 0 else { return }
        let cutoff = Date().timeIntervalSince1970 - lineageKeepDays * 86_400
        var total = ForgetReport()
        repeat {
            // One transaction of at most 500 runs a turn of the coordinator: its other work goes on between.
            let done = DispatchSemaphore(value: 0)
            let outcome = Locked<Result<ForgetReport, Error>?>(nil)
            coordinator.forgetRuns(before: cutoff) { r in outcome.withLock { $0 = r }; done.signal() }
            done.wait()
            switch outcome.value! {
            case .success(let r): total.add(r)
            case .failure(let e): logger.error("forgetting old runs failed: \(e)"); return
            }
        } while total.more
        logger.info("forgot the records of runs submitted more than \(lineageKeepDays) days ago",
                    metadata: ["runs": "\(total.runs)", "artifact_records": "\(total.artifacts)", "workers": "\(total.workers)"])
    }
}

/// The coordinator as a service: on a graceful shutdown it stops taking work, lets in-flight
/// stages finish (the drain timeout), hands back the rest and leaves unfinished runs resumable.
struct CoordinatorService: Service {
    let coordinator: Coordinator
    /// Printed when the service starts: the group handles SIGTERM, SIGINT and SIGHUP by then, so
    /// whoever waits for this line (a test, a script) may stop the coordinator gracefully at once.
    let announce: String

    func run() async throws {
        FileHandle.standardOutput.write(Data(announce.utf8))
        let coordinator = self.coordinator
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    let waiter = Thread { coordinator.waitUntilStopped(); done.resume() }
                    waiter.name = "coordinator-wait"
                    waiter.start()
                }
            } onGracefulShutdown: {
                coordinator.stop(graceful: true)
            }
        } onCancel: {
            coordinator.stop()
        }
    }
}

struct Wait: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Follow runs on a running coordinator to their ends and download their movies.",
        discussion: """
        Several runs (ids, or ranges such as 12-40, as an interrupted batch submit prints them) \
        are followed together, each movie written to its pipeline's output path, then a summary \
        table (or, with --json, one JSON object per run). Exit status: 0 when every movie was \
        written, 1 when any run failed, 130 when interrupted (the runs go on).
        """)
    @Argument(help: "Run ids, or ranges of them (12-40), as 'coord submit' prints them.") var runs: [String]
    @OptionGroup var cluster: ClusterOptions
    @Option(name: .long, help: "Where to write the movie, with one run (default: the pipeline's output path).") var output: String?
    @Flag(name: .long, help: "Print the result as JSON.") var json = false

    /// The ids are parsed in `run` (before anything is asked), not here: an option this command
    /// does not take (`--state st`) is told as such, which ArgumentParser does only after this,
    /// rather than as "'st' is not a run id".
    func validate() throws {
        if let ids = try? RunIDs.parse(runs), ids.count > 1 && output != nil {
            throw ValidationError("--output names one movie; with several runs each goes to its pipeline's output path")
        }
    }

    func run() throws {
        let ids = try RunIDs.parse(runs)
        let context = MessagingContext()
        let client = try cluster.client(context)
        // The runs are the coordinator's: Ctrl-C stops following them (and their movies coming down).
        let signals = onInterrupt { [ids, cluster, exit = client.exitRequest] in
            exit.stop()
            cluster.stoppedFollowing(ids).forEach(errorLine)
            Foundation.exit(130)
        }
        defer { _ = signals }
        guard ids.count > 1 else {
            let display = ProgressDisplay(name: "run \(ids[0])", terminal: isatty(STDERR_FILENO) == 1 && !json)
            client.onSilence = { display.note($0.line) }
            let end = try cluster.followOne(client, ids[0], display: display)
            display.finish(end)
            // Its name as the coordinator recorded it (a batch's objects have theirs).
            let name = (try? client.status(ids[0]).runs.first?["name"]).flatMap { $0 } ?? "run \(ids[0])"
            var report = ProjectReport(file: nil, name: name, label: name)
            report.notes = display.notes
            return try finishRun(client, end, output: output, json: json, cluster: cluster, report: report)
        }
        let started = Clocks.steady
        // Every run first: a typo in a range (or another's run) is said before anything is followed.
        var names: [String] = [], items: [Int] = [], unknown: [Int64] = []
        for id in ids {
            do {
                if let run = try clusterCall(rethrowingAnswers: true, { try client.status(id).runs.first }), let name = run["name"] {
                    names.append(name)
                    // (An older coordinator does not say: the runs' progress will.)
                    items.append(run["items"].flatMap { Int($0) } ?? 0)
                } else { unknown.append(id) }
            } catch let e as ClusterClient.Failure where e.answered { unknown.append(id) }
        }
        guard unknown.isEmpty else {
            errorLine("error: no \(unknown.count == 1 ? "run" : "runs") \(RunIDs.text(unknown)) of yours on \(cluster.coordinator ?? "the coordinator"); nothing was followed")
            errorLine("  hint: coord runs \(cluster.flags) lists the runs there")
            throw ExitCode(1)
        }
        let labels = ProjectReport.labels(names: names, files: ids.map { "run \($0)" })
        let reports = try followRuns(client, ids: ids, labels: labels, items: items, json: json, cluster: cluster) { k in
            ProjectReport(file: nil, name: names[k], label: labels[k])
        }
        try reportProjects(reports, seconds: Clocks.steady - started, followed: true, json: json)
    }
}

/// Run ids as people read and type them: consecutive ones as a range, `3-200`.
enum RunIDs {
    /// "1-3, 7" for prose; with `separator: " "`, the words of a command.
    static func text(_ ids: [Int64], separator: String = ", ") -> String {
        var parts: [String] = []
        var k = 0
        let sorted = ids.sorted()
        while k < sorted.count {
            var j = k
            while j + 1 < sorted.count && sorted[j + 1] == sorted[j] + 1 { j += 1 }
            parts.append(j - k >= 2 ? "\(sorted[k])-\(sorted[j])" : (k...j).map { String(sorted[$0]) }.joined(separator: separator))
            k = j + 1
        }
        return parts.joined(separator: separator)
    }

    /// Ids and ranges (`12`, `12-40`), in order, each once.
    static func parse(_ words: [String]) throws -> [Int64] {
        guard !words.isEmpty else { throw ValidationError("name a run (an id, or a range such as 12-40)") }
        var ids: [Int64] = []
        var seen = Set<Int64>()
        for w in words {
            let ends = w.split(separator: "-", omittingEmptySubsequences: false).map { Int64($0) }
            guard (ends.count == 1 || ends.count == 2), let first = ends[0], let last = ends.last!, first >= 1, first <= last else {
                throw ValidationError("'\(w)' is not a run id or a range of them (12, or 12-40)")
            }
            guard last - first < 100_000 else { throw ValidationError("'\(w)' names more than 100,000 runs") }
            for id in first...last where seen.insert(id).inserted { ids.append(id) }
        }
        return ids
    }
}

struct Cancel: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop runs on a running coordinator: their stages stop on every worker and free their slots.",
        discussion: "Exit status 1 when any run named had already ended (cancelled before too) or is not yours or not there; the others are cancelled.")
    @Argument(help: "Run ids, or ranges of them (12-40).") var runs: [String]
    @OptionGroup var cluster: ClusterOptions

    func run() throws {
        let ids = try RunIDs.parse(runs)
        let context = MessagingContext()
        let client = try cluster.client(context)
        var cancelled: [Int64] = [], ended: [String: [Int64]] = [:]
        // A run the coordinator refuses (none such, another's) does not stop the others being cancelled.
        var refused: [(id: Int64, why: String)] = []
        for id in ids {
            do {
                let end = try clusterCall(rethrowingAnswers: true) { try client.cancel(id) }
                if end.cancelledNow { cancelled.append(id) } else { ended[end.state, default: []].append(id) }
            } catch let e as ClusterClient.Failure where e.answered { refused.append((id, e.answer!)) }
        }
        if !cancelled.isEmpty { print("\(cancelled.count == 1 ? "run" : "runs") \(RunIDs.text(cancelled)) cancelled") }
        for (state, runs) in ended.sorted(by: { $0.key < $1.key }) {
            errorLine("\(runs.count == 1 ? "run" : "runs") \(RunIDs.text(runs)) had already ended: \(state)")
        }
        if refused.count > 3 {
            errorLine("error: the coordinator refused runs \(RunIDs.text(refused.map(\.id))) (of the first it said: \(refused[0].why))")
        } else {
            for r in refused { errorLine("error: the coordinator refused: \(r.why)") }
        }
        if !refused.isEmpty { errorLine("  hint: coord runs \(cluster.flags) lists the runs there") }
        if !ended.isEmpty || !refused.isEmpty { throw ExitCode(1) }
    }
}

struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a CURVE key pair: NAME.key (secret, mode 0600) and NAME.pub (public); or, with --farm, every key a farm needs.",
        discussion: """
        Example, for a coordinator, a worker and a submitter:
          coord keygen coordinator --dir keys  # serve --curve-secret-key
          coord keygen worker-1 --dir keys     # worker --curve-secret-key
          coord keygen alice --dir keys        # submit --curve-secret-key
          mkdir workers submitters
          cp keys/worker-1.pub workers/ && cp keys/alice.pub submitters/
          # serve --allow-workers workers --allow-submitters submitters
          # worker and submit: --coordinator-key keys/coordinator.pub

        One-shot farm setup (what Compose's `keys` service and docs/DEPLOY.md run):
          coord keygen --farm DIR

        It makes, as the user that runs it, one folder per party with only what that party needs:
          DIR/coordinator/  coordinator.key, coordinator.pub, dashboard.token,
                            allow-lists workers/worker.pub, submitters/submitter.pub
          DIR/worker/       worker.key, worker.pub, coordinator.pub
          DIR/submitter/    submitter.key, submitter.pub, coordinator.pub,
                            dashboard.token
          DIR/metrics/      dashboard.token (mode 0644, for a Prometheus that runs as
                            another user)

        Secret files are 0600; worker/ and submitter/ are 0700; coordinator/ is 0711 and its \
        allow-lists 0755 (public keys), so a service user without the secret can read them. Files \
        that exist are kept, so it is safe to run again (every `docker compose up` does).
        """)
    @Argument(help: "Name of the key pair (the file names).") var name: String?
    @Option(name: .long, help: "Folder for the files.") var dir: String = "."
    @Option(name: .long, help: ArgumentHelp("Make every key a farm needs under DIR (see below).", valueName: "DIR")) var farm: String?

    func validate() throws {
        if farm != nil, name != nil { throw ValidationError("give either NAME or --farm DIR, not both") }
        if farm == nil, name == nil { throw ValidationError("name the key pair (coord keygen NAME) or pass --farm DIR") }
    }

    func run() throws {
        if let farm {
            do {
                for line in try FarmKeys.make(farm) { print(line) }
            } catch let e as TransportError { errorLine("error: \(e.message)"); throw ExitCode(1)
            } catch let e as FarmKeys.Failure { errorLine("error: \(e.message)"); throw ExitCode(1) }
            return
        }
        guard let name, !name.isEmpty, !name.contains("/") else { throw ValidationError("NAME must be a plain file name") }
        do {
            let pair = try CurveKeyPair.generate()
            let (sec, pub) = try pair.write(directory: dir, name: name)
            print("secret key: \(sec)")
            print("public key: \(pub)  (\(pair.publicKey))")
        } catch let e as TransportError { errorLine("error: \(e.message)"); throw ExitCode(1) }
    }
}

/// `coord keygen --farm DIR`: the keys of a coordinator, its workers and one submitter, each
/// party's folder holding only what it needs. Existing files are kept (idempotent).
enum FarmKeys {
    struct Failure: Error { let message: String; init(_ m: String) { message = m } }

    static func make(_ root: String) throws -> [String] {
        let fm = FileManager.default
        var said: [String] = []
        func folder(_ path: String, mode: Int) throws {
            if !fm.fileExists(atPath: path) {
                do { try FileChecks.makeFolder(path) } catch { throw FarmKeys.Failure("\(error.description) (run as the user that owns \(root))") }
            }
            // A folder we cannot tighten (a volume's root owned by someone else) is left as it is.
            _ = chmod(path, mode_t(mode))
        }
        func write(_ path: String, _ text: String, mode: Int) throws {
            if fm.fileExists(atPath: path) { return }
            guard fm.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode]) else {
                throw FarmKeys.Failure("cannot write \(path) (run as the user that owns \(root))")
            }
            said.append("made \(path)")
        }
        func pair(_ dir: String, _ name: String) throws -> CurveKeyPair {
            let secret = "\(dir)/\(name).key"
            if fm.fileExists(atPath: secret) {
                let k = try CurveKeyPair.load(secret)
                guard k.secretKey != nil else { throw FarmKeys.Failure("\(secret) holds no secret key") }
                if !fm.fileExists(atPath: "\(dir)/\(name).pub") { try write("\(dir)/\(name).pub", k.publicText(name), mode: 0o644) }
                said.append("kept \(secret)")
                return k
            }
            let k = try CurveKeyPair.generate()
            _ = try k.write(directory: dir, name: name)
            said.append("made \(secret) and \(name).pub")
            return k
        }
        let c = "\(root)/coordinator", w = "\(root)/worker", s = "\(root)/submitter", m = "\(root)/metrics"
        try folder(root, mode: 0o755)
        for d in [w, s] { try folder(d, mode: 0o700) }
        // coordinator/ can be passed through but not listed (0711), so a service user that only
        // gets the secret through systemd's LoadCredential= can still read the allow-lists, which
        // hold public keys only.
        try folder(c, mode: 0o711)
        for d in [c + "/workers", c + "/submitters", m] { try folder(d, mode: 0o755) }
        let coordinator = try pair(c, "coordinator")
        let worker = try pair(w, "worker")
        let submitter = try pair(s, "submitter")
        try write("\(c)/workers/worker.pub", worker.publicText("worker"), mode: 0o644)
        try write("\(c)/submitters/submitter.pub", submitter.publicText("submitter"), mode: 0o644)
        for d in [w, s] { try write("\(d)/coordinator.pub", coordinator.publicText("coordinator"), mode: 0o644) }
        // The dashboard's bearer token: 32 random bytes, base64 (one line).
        let token: String
        if fm.fileExists(atPath: "\(c)/dashboard.token") {
            // Kept; one that cannot be read must not be replaced by a new one in the other
            // folders only (the coordinator would refuse the submitter's and Prometheus's token).
            do { token = try String(contentsOfFile: "\(c)/dashboard.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) } catch {
                throw FarmKeys.Failure("cannot read \(c)/dashboard.token: \(FileChecks.reason(error)) (run as the user that owns \(root))")
            }
        } else {
            var rng = SystemRandomNumberGenerator()
            token = Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }).base64EncodedString()
        }
        try write("\(c)/dashboard.token", token + "\n", mode: 0o600)
        try write("\(s)/dashboard.token", token + "\n", mode: 0o600)
        try write("\(m)/dashboard.token", token + "\n", mode: 0o644)
        said.append("farm keys ready in \(root): coordinator/ for coord serve, worker/ for workers, submitter/ for you, metrics/ for Prometheus")
        return said
    }
}

struct BenchScheduler: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-scheduler",
        abstract: "Measure the scheduler alone: no-op stages, simulated workers over ZeroMQ on loopback (see scripts/bench-scheduler).",
        shouldDisplay: false)
    @Option(name: .long, help: "Simulated workers (one slot each).") var workers: Int = 64
    @Option(name: .long, help: "Items in the throughput run (two attempts each, plus a concat).") var items: Int = 10_000
    @Option(name: .long, help: "Queued units for the memory figure.") var queued: Int = 100_000
    @Option(name: .long, help: "Scratch folder (default: a temporary one).") var dir: String?

    func run() throws {
        let d = dir ?? NSTemporaryDirectory() + "threadline-bench-\(UUID().uuidString.prefix(8))"
        defer { if dir == nil { try? FileManager.default.removeItem(atPath: d) } }
        let f = try SchedulerBenchmark.run(workers: workers, items: items, queued: queued, directory: d) { errorLine($0) }
        let enc = JSONEncoder(); enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try enc.encode(f), as: UTF8.self))
    }
}

struct DashboardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dashboard",
        abstract: "Serve a read-only web dashboard over a state folder's lineage and artifacts.",
        discussion: """
        Examples:
          coord dashboard    # http://127.0.0.1:7401/ over the default state folder
          coord dashboard --state /var/lib/threadline --http 0.0.0.0:7401 \\
              --token-file /etc/threadline/dashboard.token

        Pages update live while embedded renders or 'coord serve' write to the same state folder. \
        The JSON API (/api/runs, /api/runs/ID, /api/runs/ID/attempts, /api/workers) is described in \
        docs/openapi.yaml. Nothing served changes state. Addresses other than loopback need \
        --token-file: clients send 'Authorization: Bearer <token>' (pages take ?token=…). \
        'coord serve --http' serves the same dashboard plus /metrics, /healthz and /readyz.
        """)

    @OptionGroup var stateOptions: StateOptions
    @Option(name: .long, help: ArgumentHelp("Address to listen on.", valueName: "HOST:PORT")) var http: String = "127.0.0.1:7401"
    @Option(name: .long, help: "A file holding the bearer token clients must send (required when --http is not loopback); rewrite it to rotate the token (read again within seconds).") var tokenFile: String?

    func validate() throws {
        do { _ = try DashboardConfiguration.parse(http, tokenFile: tokenFile) } catch { throw ValidationError("\(error)") }
    }

    func run() async throws {
        tl_unblock_termination_signals()
        let logger = Logger(label: "threadline.dashboard") { StreamLogHandler.standardError(label: $0) }
        let config = try DashboardConfiguration.parse(http, tokenFile: tokenFile)
        let dashboard: Dashboard
        do { dashboard = try Dashboard(stateDirectory: stateOptions.directory, configuration: config, logger: logger) } catch {
            errorLine("error: \(error)"); throw ExitCode(1)
        }
        let app = dashboard.application(onRunning: { port in
            FileHandle.standardOutput.write(Data("dashboard on \(config.url(port: port))\n".utf8))
        })
        do { try await app.runService() } catch {
            errorLine("error: " + DashboardConfiguration.cannotListen(on: http, error)); throw ExitCode(1)
        }
    }
}
