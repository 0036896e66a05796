import Foundation
import Synchronization
import Logging
import ThreadlineCore
import Transport

/// A worker: connects a DEALER to the coordinator, announces its slots, runs at most that many
/// tasks at once (each on its own thread), and reports results with their lease tokens.
public final class WorkerRuntime: Sendable {
    public struct Configuration: Sendable {
        public var endpoint: String
        public var slots: Int
        public var id: String
        public var heartbeatInterval: Double
        /// Re-announce when the coordinator has been silent this long.
        public var coordinatorTimeout: Double
        /// When set, the worker stops as soon as its parent process is no longer this one.
        public var parentPID: Int32?
        public init(endpoint: String, slots: Int = 1, id: String = WorkerRuntime.defaultID(),
                    heartbeatInterval: Double = 1, coordinatorTimeout: Double = 5) {
            self.endpoint = endpoint; self.slots = slots; self.id = id
            self.heartbeatInterval = heartbeatInterval; self.coordinatorTimeout = coordinatorTimeout
        }
    }

    public static let version = "0.1.0"
    public static func defaultID() -> String { "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(6))" }

    let config: Configuration
    let runner: any TaskRunner
    let logger: Logger
    let stopped = Mutex(false)
    private let finished = Mutex<[TaskResult]>([])
    private let cancelled = Mutex<Set<String>>([])

    public init(_ config: Configuration, runner: any TaskRunner, logger: Logger) {
        self.config = config; self.runner = runner; self.logger = logger
    }

    public func stop() { stopped.withLock { $0 = true } }

    /// Runs until stopped or told to shut down.
    public func run(context: MessagingContext) throws {
        let socket = try Socket(context, .dealer)
        try socket.setIdentity(config.id)
        try socket.connect(config.endpoint)
        var running: Set<String> = []
        let hello = Hello(worker: config.id, host: ProcessInfo.processInfo.hostName, pid: Int(getpid()),
                          slots: config.slots, version: Self.version)
        func send(_ m: WireMessage) { _ = try? socket.send([Envelope(m).encoded()]) }
        send(.hello(hello))
        var lastSent = Date().timeIntervalSince1970
        var lastHeard = lastSent
        logger.info("worker started", metadata: ["worker.id": "\(config.id)", "worker.slots": "\(config.slots)", "endpoint": "\(config.endpoint)"])

        while !stopped.withLock({ $0 }) {
            if let frames = try socket.receive(timeoutMs: 10) {
                lastHeard = Date().timeIntervalSince1970
                guard let data = frames.last, let envelope = Envelope.decode(data) else {
                    logger.warning("dropped an undecodable message", metadata: ["bytes": "\(frames.last?.count ?? 0)"])
                    continue
                }
                switch envelope.message {
                case .assign(let a) where a.checkOnly == true:
                    // Cache checks are not media pipelines: they run beside the slots.
                    let runner = self.runner
                    Thread { [self] in let r = runner.check(a); finished.withLock { $0.append(r) } }.start()
                case .assign(let a):
                    if running.count >= config.slots {
                        let now = Date().timeIntervalSince1970
                        send(.result(TaskResult(lease: a.lease, error: WireError(stage: .fetch, errorClass: .retryable, file: a.task.label,
                                                                                 message: "worker has no free slot"),
                                                artifact: nil, facts: nil, segment: nil, startedAt: now, finishedAt: now, cpuSeconds: 0, maxRSS: 0)))
                        continue
                    }
                    running.insert(a.lease)
                    start(a)
                case .cancel(let lease):
                    cancelled.withLock { _ = $0.insert(lease) }
                case .shutdown:
                    logger.info("coordinator asked this worker to shut down")
                    stop()
                case .heartbeat, .hello, .result:
                    break
                }
            }
            for r in finished.withLock({ let r = $0; $0 = []; return r }) {
                running.remove(r.lease)
                cancelled.withLock { _ = $0.remove(r.lease) }
                send(.result(r))
                lastSent = Date().timeIntervalSince1970
            }
            let now = Date().timeIntervalSince1970
            if now - lastHeard > config.coordinatorTimeout {
                // Lost the coordinator: announce again; libzmq reconnects underneath.
                send(.hello(hello))
                lastHeard = now
                lastSent = now
            } else if now - lastSent >= config.heartbeatInterval {
                if let parent = config.parentPID, getppid() != parent {
                    logger.error("the parent process is gone; stopping")
                    stop()
                }
                send(.heartbeat(running: Array(running)))
                lastSent = now
            }
        }
        socket.close()
    }

    private func start(_ a: Assignment) {
        let runner = self.runner
        let lease = a.lease
        let thread = Thread { [self] in
            let result = runner.run(a, isCancelled: { [self] in
                self.cancelled.withLock { $0.contains(lease) } || self.stopped.withLock { $0 }
            })
            finished.withLock { $0.append(result) }
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
