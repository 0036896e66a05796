import Foundation
import Media
import ArgumentParser
import Logging
import Engine
import ThreadlineCore
import Transport
import CSupport
import Glibc
import ServiceLifecycle

@main
struct WorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Threadline worker: runs media pipelines for a coordinator.",
        discussion: """
        Examples:
          worker --connect tcp://coord-host:7400 --pipelines 2
          worker --connect tcp://coord-host:7400 \\
              --curve-secret-key /etc/threadline/worker.key \\
              --coordinator-key /etc/threadline/coordinator.pub

        The worker keeps its own artifact store (--store) and pulls the inputs it lacks from the \
        coordinator; when --store is a folder shared with the coordinator, nothing is copied. \
        After losing the coordinator (or when it stops, asking its renders to go on) it keeps \
        running its stages, reconnects with backoff and delivers them to the coordinator that comes next.

        On SIGTERM or SIGINT (what Compose, Kubernetes and systemd send on scale-in or stop), or \
        SIGHUP (the terminal or SSH session it was started from closed), it drains: it takes no more work, lets the stages in flight finish and delivers their results \
        (within --drain-timeout), hands back any that cannot finish so they are queued again at \
        once, and exits 0. When its coordinator stopped too (and none has come back), it leaves at once.
        """)

    @Option(name: .long, help: "The coordinator's endpoint, e.g. tcp://127.0.0.1:7400.")
    var connect: String

    @Option(name: .long, help: "Media pipelines (slots) this worker runs at once: one per CPU it may use (in a container, its CPU quota) unless given.")
    var pipelines: Int = Cores.available

    @Option(name: .long, help: ArgumentHelp("Codec threads each pipeline uses. 1: every host encodes identical bits, and one pipeline per core is the cheapest way to fill a machine; 0: libavcodec and libx264 choose (a lone pipeline finishes sooner, but the encoded bits then depend on the host).", valueName: "N"))
    var threads: Int = 1

    @Option(name: .long, help: "Artifact store folder (default: $XDG_DATA_HOME/threadline-worker).")
    var store: String?

    @Option(name: .long, help: ArgumentHelp("Keep the store's artifacts (and the concat's kept audio chunks) within this size, removing the least recently used (they are copies of the coordinator's, pulled again when needed): bytes, or with K, M, G or T (1024-based); 0: no limit. Default: 20G, or half the store's disk when that is smaller. A store that is a coordinator's state folder is never trimmed (coord gc tidies it).", valueName: "size"))
    var storeMax: String?

    @Option(name: .long, help: ArgumentHelp("Artifacts used this recently stay even over --store-max (another worker sharing the folder may be about to read them).", valueName: "seconds"))
    var storeKeepRecent: Double = 600

    @Option(name: .long, help: ArgumentHelp("Keep this much free on the store's disk: when other files leave less, the store gives up its least recently used artifacts, recent or not (never one in use); a stage that finds the disk full makes it give up every artifact not in use at once, before the retry. Default: 1G, or 5% of the disk when that is smaller; 0: do not look.", valueName: "size"))
    var storeKeepFree: String?

    @Option(name: .long, help: ArgumentHelp("Seconds between looks at the store's size while work comes and goes.", visibility: .hidden))
    var storeTrimEvery: Double = 5

    @Option(name: .long, help: "A folder shared with submitters (NFS, …) at the same path: a submitted file found there with the content submitted is taken from it (cloned where the file system can) instead of pulled from the coordinator. Repeatable.")
    var sharedDir: [String] = []

    @Option(name: .long, help: "This worker's CURVE secret key file (made by 'coord keygen').")
    var curveSecretKey: String?

    @Option(name: .long, help: "The coordinator's CURVE public key file (its .pub from 'coord keygen').")
    var coordinatorKey: String?

    @Option(name: .long, help: "Seconds between heartbeats.")
    var heartbeat: Double = 1

    @Option(name: .long, help: "Seconds of coordinator silence before this worker reconnects and says hello again.")
    var liveness: Double = 5

    @Option(name: .long, help: "Worker id, unique among the coordinator's workers (default: host-pid-random).")
    var id: String?

    @Option(name: .long, help: "Seconds in-flight stages may take to finish after SIGTERM before they are handed back.")
    var drainTimeout: Double = 60

    @Flag(name: .long, help: "Exit when the parent process exits (used by the embedded default).")
    var exitWithParent = false
    @Flag(name: .long, help: "Let assignments name files on this host outside the store (the embedded default's workers do; a farm's workers should not: submitters' files come uploaded).")
    var localFiles = false
    @Flag(name: .long, help: "Let source URLs point at loopback, link-local and private addresses (the embedded default does; on a farm this lets submitters reach what listens beside the worker).")
    var allowPrivateUrls = false
    @Option(name: .long, help: "Largest source a URL may bring, in bytes.") var fetchMaxBytes: Int64 = 4 << 30
    @Option(name: .long, help: "Seconds one download may take in all.") var fetchDeadline: Double = 600

    @Option(name: .long, help: ArgumentHelp("Seconds without work after which the worker gives back to the system the memory its renders left in the heap (kept while work comes, so the next render starts without page faults); 0: as soon as it is idle.", valueName: "seconds"))
    var idleTrimAfter: Double = WorkerRuntime.defaultIdleTrimAfter

    @Option(name: .long, help: ArgumentHelp("The parent's pid, to notice a parent that died before this worker started.", visibility: .hidden))
    var parentPid: Int32?

    @Flag(name: .long, help: "Log only errors.")
    var quiet = false

    func validate() throws {
        guard fetchMaxBytes > 0, fetchDeadline > 0 else { throw ValidationError("--fetch-max-bytes and --fetch-deadline must be positive") }
        guard pipelines >= 1 && pipelines <= 64 else { throw ValidationError("--pipelines must be between 1 and 64") }
        guard threads >= 0 && threads <= 64 else { throw ValidationError("--threads must be between 0 and 64") }
        if let problem = Reachability.problem(with: connect) { throw ValidationError("--connect \(problem)") }
        guard (curveSecretKey == nil) == (coordinatorKey == nil) else {
            throw ValidationError("--curve-secret-key and --coordinator-key go together")
        }
        guard heartbeat > 0, liveness > heartbeat else { throw ValidationError("--liveness must be longer than --heartbeat") }
        guard (0...86_400).contains(drainTimeout) else { throw ValidationError("--drain-timeout must be 0…86400 seconds") }
        if let storeMax, ByteSize.parse(storeMax) == nil {
            throw ValidationError("--store-max takes a size such as 20G, 500M or 0 (no limit), got '\(storeMax)'")
        }
        if let storeKeepFree, ByteSize.parse(storeKeepFree) == nil {
            throw ValidationError("--store-keep-free takes a size such as 1G, 500M or 0 (do not look), got '\(storeKeepFree)'")
        }
        guard idleTrimAfter >= 0, idleTrimAfter.isFinite else { throw ValidationError("--idle-trim-after must be 0 or more seconds, got \(idleTrimAfter)") }
        guard storeKeepRecent >= 0, storeKeepRecent.isFinite, storeTrimEvery >= 0, storeTrimEvery.isFinite else { throw ValidationError("--store-keep-recent and --store-trim-every must be 0 or more seconds") }
    }

    func run() async throws {
        tl_unblock_termination_signals()
        if exitWithParent {
            // The embedded default's workers go with their parent at once: there is no one left to drain to.
            tl_die_with_parent(SIGKILL)
            // prctl cannot fire for a parent that died before it was called.
            if let parentPid, getppid() != parentPid { Glibc._exit(0) }
        }
        MediaThreads.perPipeline = Int32(threads)
        MediaMemory.keepFreedBuffers()
        var logger = Logger(label: "threadline.worker") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = quiet ? .error : .info
        let storeRoot = store ?? Home.dataFolder("threadline-worker")
        let artifacts: ArtifactStore
        do { artifacts = try ArtifactStore(root: storeRoot) } catch let e as FileChecks.FolderError {
            throw ValidationError("cannot use \(storeRoot) as the worker's store (--store): \(e.description)")
        }
        // Scratch files in the store's tmp, which the worker tidies (not /tmp, where a killed stage's stayed).
        if !Scratch.use(artifacts.root + "/tmp") {
            logger.notice("scratch files go to the system's temporary folder: the store's path needs escaping in a filter graph", metadata: ["store": "\(artifacts.root)"])
        }
        var config = WorkerRuntime.Configuration(endpoint: connect, slots: pipelines, id: id ?? WorkerRuntime.defaultID(),
                                                 heartbeatInterval: heartbeat, coordinatorTimeout: liveness)
        config.store = artifacts
        config.idGiven = id != nil
        config.idleTrimAfter = idleTrimAfter
        config.storeLimit = storeLimit(artifacts, logger: logger)
        config.sharedDirectories = sharedDir.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        if exitWithParent, let parentPid { config.parentPID = parentPid }
        if let curveSecretKey, let coordinatorKey {
            do {
                config.curve = try CurveKeyPair.client(secretKeyFile: curveSecretKey, serverKeyFile: coordinatorKey)
            } catch let e as TransportError {
                FileHandle.standardError.write(Data("error: \(e.message)\n".utf8))
                throw ExitCode(2)
            }
        }
        let runtime = WorkerRuntime(config, runner: MediaTaskRunner(store: artifacts, fetchLimits: FetchLimits(deadline: fetchDeadline, maxBytes: fetchMaxBytes, allowPrivateAddresses: allowPrivateUrls),
                                                                localFiles: localFiles), logger: logger)
        let service = WorkerService(runtime: runtime, drainTimeout: drainTimeout)
        var group = ServiceGroupConfiguration(services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)], gracefulShutdownSignals: [.sigterm, .sigint, .sighup], logger: logger)
        // A drain that overruns its own deadline by far is cut short.
        group.maximumGracefulShutdownDuration = .seconds(drainTimeout + 15)
        try await ServiceGroup(configuration: group).run()
    }
}

extension WorkerCommand {
    /// The bound on this worker's store: --store-max, or 20 GiB (half the disk when smaller).
    func storeLimit(_ store: ArtifactStore, logger: Logger) -> WorkerRuntime.StoreLimit? {
        if store.isStateFolder {
            logger.info("the store is a coordinator's state folder: kept whole ('coord gc' tidies it)", metadata: ["store": "\(store.root)"])
            return nil
        }
        var fs = statvfs()
        let disk: Int64? = statvfs(store.root, &fs) == 0 ? Int64(fs.f_blocks) * Int64(fs.f_frsize) : nil
        let maxBytes = storeMax.flatMap(ByteSize.parse) ?? min(20 << 30, disk.map { $0 / 2 } ?? .max)
        guard maxBytes > 0 else { return nil }
        let keepFree = storeKeepFree.flatMap(ByteSize.parse) ?? min(1 << 30, disk.map { $0 / 20 } ?? 0)
        logger.info("store kept within its limit", metadata: ["store": "\(store.root)", "limit": "\(ByteSize.text(maxBytes))",
                                                              "keep_free": "\(ByteSize.text(keepFree))"])
        var limit = WorkerRuntime.StoreLimit(maxBytes: maxBytes, grace: storeKeepRecent)
        limit.interval = storeTrimEvery
        limit.keepFree = keepFree
        return limit
    }
}

/// The worker as a service: runs until told to shut down or, on a graceful shutdown, drains.
struct WorkerService: Service {
    let runtime: WorkerRuntime
    let drainTimeout: Double

    func run() async throws {
        let runtime = self.runtime
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, Error>) in
                    // The worker's socket loop blocks: it has a thread of its own.
                    let thread = Thread {
                        do { try runtime.run(context: MessagingContext()); done.resume() } catch { done.resume(throwing: error) }
                    }
                    thread.name = "worker"
                    thread.stackSize = 8 << 20
                    thread.start()
                }
            } onGracefulShutdown: {
                runtime.drain(timeout: drainTimeout)
            }
        } onCancel: {
            runtime.stop()
        }
    }
}
