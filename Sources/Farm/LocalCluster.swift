import Foundation
import Synchronization
import Logging
import ThreadlineCore
import Transport
import Lineage
import CSupport

/// Why the embedded cluster could not start.
public struct LocalClusterError: Error, CustomStringConvertible { public var description: String }

/// The embedded default: an in-process coordinator on a private Unix socket and local `worker` processes
/// it starts, supervises and restarts. The same code as a real cluster.
public final class LocalCluster: Sendable {
    public struct Configuration: Sendable {
        public var stateDirectory: String
        public var workers: Int
        public var pipelinesPerWorker: Int
        public var workerExecutable: String
        public var livenessTimeout: Double = 3
        /// Codec threads per pipeline (worker --threads): 1 keeps encoded bits the same on every host.
        public var threadsPerPipeline = 1
        public init(stateDirectory: String, workers: Int, pipelinesPerWorker: Int, workerExecutable: String) {
            self.stateDirectory = stateDirectory; self.workers = workers
            self.pipelinesPerWorker = pipelinesPerWorker; self.workerExecutable = workerExecutable
        }
    }

    public let config: Configuration
    public let coordinator: Coordinator
    public let lineage: LineageStore
    let context = MessagingContext()
    let logger: Logger
    private let processes = Mutex<[Int32: Process]>([:])
    /// Entered for each worker process started, left when it exits: shutdown waits on it.
    private let running = DispatchGroup()
    private let stopping = Mutex(false)
    private let endpoint = Mutex<String>("")
    /// Workers that exited before joining, one after another (a join resets it), and the last
    /// line each wrote: past `startFailuresAllowed` the cluster gives up (`failure`).
    private let startFailures = Mutex(0)
    /// Each worker's standard error (errors only: --quiet), read as it comes.
    private let heard = Mutex<[Int32: (pipe: Pipe, words: Locked<Words>)]>([:])
    public static let startFailuresAllowed = 3
    /// Why the cluster gave up, once it has: its workers cannot start.
    public var failure: String? { gaveUp.withLock { $0 } }
    private let gaveUp = Mutex<String?>(nil)
    /// The 0700 folder holding the coordinator's socket; removed at shutdown.
    let socketDirectory: String

    public init(_ config: Configuration, logger: Logger) throws {
        self.config = config
        self.logger = logger
        try FileChecks.makeFolder(config.stateDirectory)
        lineage = try LineageStore(path: config.stateDirectory + "/lineage.db")
        // Private: a Unix socket in a folder only this user can enter (mkdtemp makes it 0700), not
        // a loopback TCP port any local user could connect to. Named with this process's id.
        Self.removeAbandonedSocketFolders(logger: logger)
        var template = Array("/tmp/\(Self.socketFolderName)\(getpid())-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw LocalClusterError(description: "cannot create a private folder for the embedded coordinator's socket in /tmp: \(String(cString: strerror(errno)))")
        }
        socketDirectory = String(cString: made)
        var cc = Coordinator.Configuration(bind: "ipc://\(socketDirectory)/coordinator")
        cc.livenessTimeout = config.livenessTimeout
        // The local workers use this same folder: the store is shared and nothing is copied.
        cc.store = try ArtifactStore(root: config.stateDirectory)
        coordinator = Coordinator(cc, lineage: lineage, logger: logger)
    }

    /// Starts the coordinator and the worker processes.
    public func start() throws {
        let ep = try coordinator.start(context: context)
        endpoint.withLock { $0 = ep }
        for _ in 0..<config.workers { try spawnWorker() }
        let supervisor = Thread { [self] in supervise() }
        supervisor.name = "supervisor"
        supervisor.start()
    }

    /// PIDs of the running worker processes.
    public var workerPIDs: [Int32] { processes.withLock { Array($0.keys) } }

    private func spawnWorker() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: config.workerExecutable)
        p.arguments = ["--connect", endpoint.withLock { $0 }, "--pipelines", "\(config.pipelinesPerWorker)", "--threads", "\(config.threadsPerPipeline)",
                       "--store", config.stateDirectory, "--local-files", "--allow-private-urls", "--exit-with-parent", "--parent-pid", "\(getpid())", "--quiet"]
        p.standardInput = FileHandle.nullDevice
        // What a worker writes (errors only: --quiet) goes on to this process's standard error;
        // its last line is kept to say why, should it die before joining.
        let pipe = Pipe()
        p.standardError = pipe
        running.enter()
        p.terminationHandler = { [running] _ in running.leave() }
        do { try p.run() } catch { running.leave(); throw error }
        let pid = p.processIdentifier
        let words = Locked(Words())
        pipe.fileHandleForReading.readabilityHandler = { h in
            let data = h.availableData
            guard !data.isEmpty else { h.readabilityHandler = nil; return }
            words.withLock { $0.heard(data) }
        }
        heard.withLock { $0[pid] = (pipe, words) }
        processes.withLock { $0[pid] = p }
    }

    /// What a worker wrote: passed on to this process's standard error, its last line kept.
    struct Words {
        var text = ""
        mutating func heard(_ data: Data) {
            try? FileHandle.standardError.write(contentsOf: data)
            text = String((text + String(decoding: data, as: UTF8.self)).suffix(4096))
        }
        var last: String? { text.split(separator: "\n").last(where: { !$0.allSatisfy(\.isWhitespace) }).map(String.init) }
    }

    /// A worker has exited: what it wrote that is still in the pipe is read (and passed on) here,
    /// without waiting for the pipe's end (workers started since may hold its write end open).
    /// Returns its last line.
    @discardableResult
    private func drain(_ pid: Int32) -> String? {
        guard let (pipe, words) = heard.withLock({ $0.removeValue(forKey: pid) }) else { return nil }
        let h = pipe.fileHandleForReading
        h.readabilityHandler = nil
        let fd = h.fileDescriptor
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while case let n = read(fd, &buffer, buffer.count), n > 0 { words.withLock { $0.heard(Data(buffer[0..<n])) } }
        return words.withLock { $0.last }
    }

    /// Why a worker process that never joined ended: its exit and its last words.
    private func startFailure(_ p: Process) -> String {
        let words = drain(p.processIdentifier)
        let how = p.terminationReason == .uncaughtSignal ? "was killed by signal \(p.terminationStatus)" : "exited with status \(p.terminationStatus)"
        return "the worker process (\(config.workerExecutable)) \(how) before it could join" + (words.map { ": \($0)" } ?? "")
    }

    /// Notices dead workers at once (not only after the liveness timeout). One that dies at work is
    /// replaced; workers that die before joining, several in a row
    /// (a missing library, a binary for another machine), end the cluster's runs as interrupted
    /// and say why, instead of being started again for ever.
    private func supervise() {
        while !stopping.withLock({ $0 }) {
            let dead = processes.withLock { procs in
                let d = procs.filter { !$0.value.isRunning }
                for pid in d.keys { procs[pid] = nil }
                return d
            }
            for (pid, p) in dead where !stopping.withLock({ $0 }) {
                coordinator.workerExited(pid: pid)
                if coordinator.hasJoined(pid: pid) {
                    startFailures.withLock { $0 = 0 }
                } else if startFailures.withLock({ $0 += 1; return $0 }) >= Self.startFailuresAllowed {
                    giveUp(startFailure(p))
                    return
                }
                drain(pid)
                logger.warning("worker process exited; starting a replacement", metadata: ["worker.pid": "\(pid)"])
                do { try spawnWorker() } catch {
                    giveUp("cannot start the worker process \(config.workerExecutable): \(FileChecks.reason(error))")
                    return
                }
            }
            // A join anywhere means the workers can start.
            if processes.withLock({ $0.keys.contains { coordinator.hasJoined(pid: $0) } }) { startFailures.withLock { $0 = 0 } }
            usleep(50_000)
        }
    }

    private func giveUp(_ why: String) {
        logger.error("giving up on the workers: \(why)")
        gaveUp.withLock { $0 = why }
        // The runs stop as on Ctrl-C: recorded as interrupted, to resume once the workers start.
        coordinator.stop(graceful: true, within: 0)
    }

    /// Submits a pipeline and blocks until its run ends. `progress` is called from the coordinator thread.
    public func render(_ pipeline: Pipeline, progress: @escaping @Sendable (RunProgress) -> Void = { _ in }) throws -> (Int64, RunOutcome) {
        try renderBatch([pipeline], progress: { progress($1) })[0].get()
    }

    /// Submits every pipeline at once (they share the workers, fairly) and blocks until all runs
    /// end. `progress` and `ended` are called from the coordinator thread with the pipeline's index;
    /// so is `refused`, as a pipeline is refused (its run could not be recorded). Each result is
    /// the run's id and outcome, or why it could not be submitted.
    public func renderBatch(_ pipelines: [Pipeline], progress: @escaping @Sendable (Int, RunProgress) -> Void = { _, _ in },
                            ended: @escaping @Sendable (Int, Int64, RunOutcome) -> Void = { _, _, _ in },
                            refused: @escaping @Sendable (Int, Error) -> Void = { _, _ in }) -> [Result<(Int64, RunOutcome), Error>] {
        let index = Locked<[Int64: Int]>([:])
        let results = Locked<[Int: Result<(Int64, RunOutcome), Error>]>([:])
        let pending = Locked<[Int64: RunOutcome]>([:])
        let done = DispatchSemaphore(value: 0)
        coordinator.observe { p, run, outcome in
            guard let k = index.withLock({ $0[run] }) else {
                // Ended before its submit reply was seen: kept until the id is known.
                if let outcome { pending.withLock { $0[run] = outcome } }
                return
            }
            if let p { progress(k, p) }
            if let outcome {
                ended(k, run, outcome)
                results.withLock { $0[k] = .success((run, outcome)) }
                done.signal()
            }
        }
        for (k, p) in pipelines.enumerated() {
            coordinator.submit(p) { r in
                switch r {
                case .success(let run):
                    index.withLock { $0[run] = k }
                    if let o = pending.withLock({ $0.removeValue(forKey: run) }) {
                        ended(k, run, o)
                        results.withLock { $0[k] = .success((run, o)) }
                        done.signal()
                    }
                case .failure(let e):
                    refused(k, e)
                    results.withLock { $0[k] = .failure(e) }
                    done.signal()
                }
            }
        }
        // Every run ends, or the cluster gives up on its workers (the runs left are interrupted).
        var ended = 0
        while ended < pipelines.count {
            if done.wait(timeout: .now() + 0.1) == .success { ended += 1 } else if failure != nil { break }
        }
        if let why = failure {
            coordinator.waitUntilStopped()
            return pipelines.indices.map { results.withLock { $0 }[$0] ?? .failure(LocalClusterError(description: why)) }
        }
        return pipelines.indices.map { results.withLock { $0 }[$0]! }
    }

    /// Ctrl-C: stops the coordinator at once, recording unfinished runs as interrupted (their
    /// in-flight attempts lost), and stops the workers. Returns the ids of the interrupted runs;
    /// throws when lineage cannot say which they are (the workers are stopped either way).
    public func interrupt() throws -> [Int64] {
        coordinator.stop(graceful: true, within: 0)
        coordinator.waitUntilStopped()
        shutdown()
        return try lineage.rows("SELECT id FROM run WHERE state = 'interrupted' AND coordinator = ?", [LineageStore.owner])
            .compactMap { $0["id"].flatMap { Int64($0) } }
    }

    public func shutdown() {
        stopping.withLock { $0 = true }
        coordinator.stop()
        let procs = processes.withLock { $0 }
        // A worker still starting (it never joined) holds no work and hears nothing from the
        // stopped coordinator: stopped at once. A cached run can end before the second worker
        // has loaded its libraries, and waiting for it held the exit 3 s more.
        for (pid, p) in procs where p.isRunning && !coordinator.hasJoined(pid: pid) { p.terminate() }
        // The others leave when the coordinator says so; woken by their exits, not by polling.
        _ = running.wait(timeout: .now() + 3)
        for p in procs.values where p.isRunning { p.terminate() }
        for p in procs.values { p.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: socketDirectory)
    }

    static let socketFolderName = "threadline-"

    /// Removes the socket folders of embedded coordinators that ended without removing them
    /// (`coord submit` SIGKILLed, OOM-killed, its machine's power cut): this user's
    /// `/tmp/threadline-…` folders holding only a `coordinator` socket that nobody listens on any
    /// more. Each killed submit left one, for ever (until /tmp was cleared). So is an empty one
    /// whose submit (the pid in its name) is gone: killed between making the folder and its socket.
    /// A folder whose socket answers, or that holds anything else, is left alone.
    static func removeAbandonedSocketFolders(in parent: String = "/tmp", logger: Logger) {
        let fm = FileManager.default
        guard let entries = try? fm.contentsOfDirectory(atPath: parent) else { return }
        for entry in entries where entry.hasPrefix(socketFolderName) {
            let folder = parent + "/" + entry
            var st = stat(), socket = stat()
            guard lstat(folder, &st) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_uid == getuid(),
                  let contents = try? fm.contentsOfDirectory(atPath: folder) else { continue }
            let abandoned: Bool
            if contents.isEmpty {
                // "threadline-PID-XXXXXX": its maker is gone.
                let pid = entry.dropFirst(socketFolderName.count).split(separator: "-").first.flatMap { Int32($0) }
                abandoned = pid.map { kill($0, 0) != 0 && errno == ESRCH } ?? false
            } else {
                abandoned = contents == ["coordinator"] && lstat(folder + "/coordinator", &socket) == 0 && socket.st_mode & S_IFMT == S_IFSOCK
                    && tl_unix_socket_listened(folder + "/coordinator") == 0
            }
            guard abandoned else { continue }
            do {
                try fm.removeItem(atPath: folder)
                logger.debug("removed an abandoned socket folder", metadata: ["folder": "\(folder)"])
            } catch {
                logger.debug("could not remove an abandoned socket folder", metadata: ["folder": "\(folder)", "error": "\(error)"])
            }
        }
    }
}
