import Foundation
import ArgumentParser
import Logging
import Engine
import Transport
import CSupport
import Glibc

@main
struct WorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Threadline worker: runs media pipelines for a coordinator.",
        discussion: "Example: worker --connect tcp://coord-host:7400 --pipelines 2 --store /var/lib/threadline")

    @Option(name: .long, help: "The coordinator's endpoint, e.g. tcp://127.0.0.1:7400.")
    var connect: String

    @Option(name: .long, help: "Media pipelines (slots) this worker runs at once.")
    var pipelines: Int = 1

    @Option(name: .long, help: "State folder holding the artifact store shared with the coordinator.")
    var store: String

    @Option(name: .long, help: "Worker id (default: host-pid-random).")
    var id: String?

    @Flag(name: .long, help: "Exit when the parent process exits (used by the embedded default).")
    var exitWithParent = false

    @Option(name: .long, help: ArgumentHelp("The parent's pid, to notice a parent that died before this worker started.", visibility: .hidden))
    var parentPid: Int32?

    @Flag(name: .long, help: "Log only errors.")
    var quiet = false

    func validate() throws {
        guard pipelines >= 1 && pipelines <= 64 else { throw ValidationError("--pipelines must be between 1 and 64") }
        guard connect.hasPrefix("tcp://") || connect.hasPrefix("ipc://") else {
            throw ValidationError("--connect takes tcp://HOST:PORT or ipc://PATH, got '\(connect)'")
        }
    }

    func run() throws {
        tl_unblock_termination_signals()
        if exitWithParent {
            tl_die_with_parent(SIGTERM)
            // prctl cannot fire for a parent that died before it was called.
            if let parentPid, getppid() != parentPid { Glibc._exit(0) }
        }
        var logger = Logger(label: "threadline.worker") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = quiet ? .error : .info
        let artifacts = try ArtifactStore(root: store)
        var config = WorkerRuntime.Configuration(endpoint: connect, slots: pipelines, id: id ?? WorkerRuntime.defaultID())
        if exitWithParent, let parentPid { config.parentPID = parentPid }
        let runtime = WorkerRuntime(config, runner: MediaTaskRunner(store: artifacts), logger: logger)
        // _exit, not exit: exit runs atexit handlers and destructors while the ZeroMQ thread is live, and hangs.
        let stop: @convention(c) (Int32) -> Void = { _ in Glibc._exit(0) }
        signal(SIGTERM, stop)
        signal(SIGINT, stop)
        let context = MessagingContext()
        try runtime.run(context: context)
    }
}
