import Foundation
import DequeModule
import ThreadlineCore
import Transport
import Lineage

/// A submitter's connection to a running coordinator (`coord serve`): submits projects (serving
/// the coordinator the files they name), follows runs, downloads movies, cancels and queries.
/// One thread uses it.
public final class ClusterClient {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        /// The coordinator's own answer, when that is what failed (it refused: no such run; it no
        /// longer holds the movie): following the runs again gets the same one.
        public var answer: String?
        public var answered: Bool { answer != nil }
        /// Whether the coordinator answered this command at all: if it never did, a run this
        /// command names may not exist there, and how to follow it again is no help.
        public var reached = true
        init(_ d: String, answer: String? = nil, reached: Bool = true) { description = d; self.answer = answer; self.reached = reached }
    }

    let endpoint: String
    /// Held so the context outlives the socket: zmq_ctx_term blocks while a socket is open.
    let context: MessagingContext
    let socket: Socket
    /// Tells when the socket dialled the coordinator again (`pump` asks again at once then).
    let connections: HandshakeMonitor
    let transfers: Transfers
    let store: ArtifactStore
    /// The sha256 of files sent before, by path (not read again while unchanged).
    let hashes: FileHashes
    /// How long the coordinator may stay silent before a request fails.
    public var silenceTimeout: Double = 15
    /// Told, for standard error, when the coordinator keeps silent for a few seconds (a third of
    /// `silenceTimeout`, at least 1.5 s and at most 3 s) and when it answers again after that: the wait is not a hang.
    /// Before its first answer it may be the wrong address or keys; after it, a coordinator that
    /// stopped or a network that broke, while the runs it holds go on once it is back.
    public var onSilence: ((Silence) -> Void)?
    public enum Silence: Sendable, Equatable {
        /// `finding`: why, where the system can tell (a name that does not resolve, nothing listening).
        case noAnswerYet(endpoint: String, timeout: Int, finding: String?)
        case silent(endpoint: String, seconds: Int, timeout: Int)
        case answersAgain(endpoint: String)
        /// It said it is stopping, its runs to resume when it starts again: a restart or an upgrade.
        case stopping(endpoint: String, timeout: Int)
        /// It said it is stopping as a project was submitted (or went up): submitted again once it is back.
        case stoppingBeforeSubmit(endpoint: String, timeout: Int, project: String)

        public var line: String {
            switch self {
            case .stopping(let e, let t): "the coordinator at \(e) is stopping (a restart or an upgrade); waiting up to \(t) s for it to come back, its runs resume then"
            case .stoppingBeforeSubmit(let e, let t, let p):
                "the coordinator at \(e) is stopping (a restart or an upgrade) and takes no project now; waiting up to \(t) s for it to come back to submit \(p) there"
            case .noAnswerYet(let e, let t, let finding): "no answer yet from the coordinator at \(e); waiting up to \(t) s (--timeout)\(finding.map { ". " + $0 } ?? "")"
            case .silent(let e, let s, let t): "the coordinator at \(e) has not answered for \(s) s; waiting up to \(t) s (--timeout)"
            case .answersAgain(let e): "the coordinator at \(e) answers again"
            }
        }
    }
    /// Told while a submission's files are read to hash them (only those not hashed before, and
    /// only once that takes over half a second).
    public var onReading: ((Reading) -> Void)?
    public struct Reading: Sendable, Equatable {
        /// Bytes read so far, and the size of all the submission's files.
        public var bytes: Int64 = 0, total: Int64 = 0
    }

    static func size(_ path: String) -> Int64 { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0 }

    /// Told while the coordinator copies a submission's files from here (it asks only for those
    /// it lacks): at most 4 times a second, and once more with `done` when it accepted the run.
    public var onUpload: ((Upload) -> Void)?
    public struct Upload: Sendable, Equatable {
        /// Bytes sent, of the files asked for so far, and how many files those are.
        public var sent: Int64 = 0, asked: Int64 = 0, files = 0
        /// Bytes of those files the coordinator kept from an earlier upload that was cut off
        /// (not asked for again, not in `asked`).
        public var kept: Int64 = 0
        public var seconds = 0.0
        public var done = false
        public init() {}
    }
    /// The submission being sent: each file's size by sha256, which were asked for, since when,
    /// and the bytes of each sent so far.
    private var sending: (sizes: [String: Int64], asked: Set<String>, started: Double, toldAt: Double, upload: Upload, served: [String: IndexSet])?
    private var heardOnce = false
    /// What probing the coordinator's address found, when it had never answered.
    private var reachability: Reachability?
    /// Whether `onSilence` was told of the present silence.
    private var toldSilence = false
    /// The coordinator said it is stopping: followers wait for it to come back, at least a minute.
    private var stopping = false
    static let restartPatience = 60.0
    /// For a signal handler's thread: stops this client before the process exits.
    public let exitRequest = ExitRequest()

    public init(endpoint: String, context: MessagingContext, curve: (keys: CurveKeyPair, serverPublicKey: String)? = nil,
                downloads: String = NSTemporaryDirectory() + "threadline-client-\(getuid())") throws {
        self.endpoint = endpoint
        self.context = context
        socket = try Socket(context, .dealer)
        try socket.setIdentity(ClientIdentity.make())
        // Dialled again within half a second: a coordinator restarted (an upgrade) is heard at
        // once, not up to 2 s later.
        try socket.setReconnect(initialMs: 100, maximumMs: 500)
        connections = try HandshakeMonitor(context, watching: socket)
        if let curve { try socket.makeCurveClient(keys: curve.keys, serverPublicKey: curve.serverPublicKey) }
        try socket.connect(endpoint)
        do { try FileChecks.makePrivateFolder(downloads) } catch { throw Failure(error.description) }
        store = try ArtifactStore(root: downloads)
        hashes = FileHashes(path: store.root + "/file-hashes.json")
        let sock = socket
        transfers = Transfers(store: store) { _, m, payload in
            (try? sock.send(payload.map { [Envelope(m).encoded(), $0] } ?? [Envelope(m).encoded()])) == true
        }
    }

    deinit { socket.close(); connections.close() }

    func send(_ m: WireMessage) { _ = try? socket.send([Envelope(m).encoded()]) }

    /// Processes messages (serving pulls, taking chunks) until `until` returns a value.
    /// `resend` is called each time the coordinator has been silent for `silenceTimeout / 3`.
    /// `whenLost`: what to do when the coordinator stays silent, if not to follow the runs again.
    /// `redialled`: called once the socket has dialled the coordinator again; false: `resend` then.
    func pump<T>(until: (WireMessage) throws -> T?, resend: () -> Void = {}, redialled: () -> Bool = { false }, idle: () -> T? = { nil },
                 whenLost: String? = nil) throws -> T {
        var lastHeard = Clocks.steady
        var lastResend = lastHeard
        while true {
            if let stopped = exitRequest.requested.withLock({ $0 }) {
                transfers.cutOff("this command was interrupted")
                stopped.signal()
                // The handler exits the process; this thread touches nothing more.
                while true { Thread.sleep(forTimeInterval: 60) }
            }
            if let frames = try socket.receive(timeoutMs: 20) {
                lastHeard = Clocks.steady
                heardOnce = true
                guard let e = frames.first.flatMap(Envelope.decode) else { continue }
                // (A stopping coordinator tells each run's followers in turn, and answers a
                // submitter's probes until it is gone: neither is it back.)
                if toldSilence && !(stopping && (Self.isStopNotice(e.message) || Self.isProbeAnswer(e.message))) {
                    toldSilence = false; stopping = false
                    onSilence?(.answersAgain(endpoint: endpoint))
                }
                switch e.message {
                case .pull(let sha, let offset, let length):
                    sent(sha, offset: offset, bytes: transfers.serve(sha256: sha, offset: offset, length: length, to: Data()))
                case .chunk(let c):
                    transfers.received(c, payload: frames.count > 1 ? frames[1] : nil)
                case .rejected(let why):
                    throw Failure("the coordinator refused: \(why)", answer: why)
                default:
                    if let v = try until(e.message) { return v }
                }
            }
            transfers.tick()
            if let v = idle() { return v }
            let now = Clocks.steady
            // Dialled again: a coordinator restarted at once (killed, and started again by systemd
            // or Kubernetes) knows none of its followers, and was silent to them until they asked
            // again after `silenceTimeout / 3` (5 s; 40 s with --timeout 120), the runs going on unseen.
            if connections.redialled() {
                if !redialled() { resend() }
                lastResend = now
            }
            // Told it is stopping, every second: the coordinator that comes next knows none of its
            // followers until they ask again (queued while it is down, the asks reach it as it binds).
            let resendAfter = stopping ? 1 : silenceTimeout / 3
            if now - lastResend > resendAfter && now - lastHeard > resendAfter { resend(); lastResend = now }
            // Not under 1.5 s: a coordinator tells each follower at least once a second, and a
            // short --timeout said "has not answered" and "answers again" by turns while it rendered.
            let patience = min(3, max(1.5, silenceTimeout / 3))
            if !toldSilence, now - lastHeard > patience {
                toldSilence = true
                let timeout = Int(silenceTimeout)
                if !heardOnce { reachability = Reachability.probe(endpoint) }
                onSilence?(heardOnce ? .silent(endpoint: endpoint, seconds: Int(patience.rounded()), timeout: timeout)
                                     : .noAnswerYet(endpoint: endpoint, timeout: timeout, finding: reachability.flatMap(\.unlessListening)))
            }
            let limit = stopping ? max(silenceTimeout, Self.restartPatience) : silenceTimeout
            if now - lastHeard > limit {
                throw heardOnce
                    ? Failure("lost the coordinator at \(endpoint): no answer for \(Int(limit)) s\(stopping ? " since it said it was stopping" : " (--timeout)"). "
                              + (whenLost ?? "Its runs go on once it is back (started again on its state folder, it resumes them)"))
                    : Failure("no answer from the coordinator at \(endpoint) for \(Int(silenceTimeout)) s. "
                              + (reachability?.finding ?? "Is `coord serve` running there, and do its keys match yours?"), reached: false)
            }
        }
    }

    /// Every local file the pipeline's items and movie use (sources, fonts, stickers, watermark,
    /// soundtrack), hashed: found by their typed fields, never by what text happens to look like.
    /// With `hashes`, a file hashed before and unchanged since is not read again; `read` is told
    /// the bytes of each piece read.
    /// `stand` names the local file read for a path of the pipeline that is not one (an excerpt's).
    static func files(of pipeline: Pipeline, stand: [String: String] = [:], hashes: FileHashes? = nil, read: (Int) -> Void = { _ in }) throws -> [ArtifactRef] {
        let paths = Set(pipeline.files.map(\.path)).sorted()
        defer { hashes?.save() }
        return try paths.map { p in
            let local = stand[p] ?? p
            if let hashes {
                let (sha, size) = try hashes.sha256(of: local, read: read)
                return ArtifactRef(sha256: sha, path: p, size: size)
            }
            return ArtifactRef(sha256: try SHA256Hasher.hex(fileAt: local, read: read), path: p, size: Self.size(local))
        }
    }

    /// Hands a pipeline to the coordinator; returns its run id once the coordinator holds every file.
    /// `stand`: the local file to send for a path of the pipeline that names none (an excerpt's).
    public func submit(_ pipeline: Pipeline, priority: Int = 0, stand: [String: String] = [:]) throws -> Int64 {
        // Reading files not hashed before takes seconds a gigabyte from a slow disk: told after
        // half a second, at most 4 times a second.
        let started = Clocks.steady
        var reading = Reading(), toldAt = started + 0.25
        let files = try Self.files(of: pipeline, stand: stand, hashes: hashes) { bytes in
            reading.bytes += Int64(bytes)
            let now = Clocks.steady
            if now - toldAt >= 0.25, let onReading {
                if reading.total == 0 { reading.total = Set(pipeline.files.map(\.path)).reduce(0) { $0 + Self.size(stand[$1] ?? $1) } }
                toldAt = now
                onReading(reading)
            }
        }
        for f in files { transfers.exported[f.sha256] = stand[f.path] ?? f.path }
        let s = Submission(pipeline: pipeline, files: files, priority: priority,
                           submitter: "\(ProcessInfo.processInfo.userName)@\(ProcessInfo.processInfo.hostName)", id: UUID().uuidString)
        let now = Clocks.steady
        sending = (Dictionary(files.map { ($0.sha256, $0.size) }, uniquingKeysWith: { a, _ in a }), [], now, 0, Upload(), [:])
        defer { sending = nil }
        send(.submit(s))
        // Told the coordinator is stopping (a restart or an upgrade), the submission goes again
        // once a coordinator that is not stopping answers a probe: one at a time, so that none
        // waits in the socket while it is down for the next one to take twice, and not to the
        // stopping one, which answers probes until it is gone (a submission of 10,000 items is
        // megabytes). At most every 2 s: a coordinator from before `stopping` was told never says so.
        var again = false, probed = 0.0, submitted = Clocks.steady
        let run = try pump(until: { m in
            switch m {
            case .accepted(let run): return run
            case .stopping:
                coordinatorStopping(submitting: pipeline.name)
                again = true
            case .statusReply(let r) where again && !r.stopping && Clocks.steady - submitted >= Self.resubmitInterval:
                again = false; submitted = Clocks.steady
                // The upload's time counts from here (the wait is not its).
                sending?.started = submitted
                send(.submit(s))
            default: break
            }
            return nil
        }, redialled: {
            // Dialled again before an answer (a coordinator killed and started again at once, a
            // network blip): sent again, under its id, so a run it made is not made twice.
            // (Told it is stopping, the probes above send it.)
            if !again { self.send(.submit(s)) }
            return true
        }, idle: {
            if again && Clocks.steady - probed > Self.probeInterval { probed = Clocks.steady; send(.status(run: nil, limit: 1)) }
            return nil
        }, whenLost: "\(pipeline.name) may not have been accepted: `coord runs` there lists its runs once it is back; "
                               + "submitting it again sends only what the coordinator lacks (it keeps an upload that was cut off for a day)")
        if var u = sending?.upload, u.files > 0 {
            u.done = true
            u.seconds = Clocks.steady - sending!.started
            onUpload?(u)
        }
        return run
    }

    /// Counts a piece of a submission's file served to the coordinator, and tells `onUpload`. A
    /// file's first piece asked for is its lowest: past 0, the coordinator kept the bytes before it.
    /// A piece asked for again (the coordinator dialled again, or a stall) is counted once: the
    /// count is of the files' bytes that went, not of the copies.
    private func sent(_ sha: String, offset: Int64, bytes: Int) {
        guard var s = sending, let size = s.sizes[sha] else { return }
        if s.asked.insert(sha).inserted {
            let kept = min(max(offset, 0), size)
            s.upload.asked += size - kept; s.upload.kept += kept; s.upload.files = s.asked.count
        }
        if bytes > 0 {
            let before = s.served[sha]?.count ?? 0
            s.served[sha, default: IndexSet()].insert(integersIn: Int(offset)..<Int(offset) + bytes)
            s.upload.sent += Int64(s.served[sha]!.count - before)
        }
        let now = Clocks.steady
        if now - s.toldAt >= 0.25 {
            s.toldAt = now
            s.upload.seconds = now - s.started
            onUpload?(s.upload)
        }
        sending = s
    }

    /// Follows a run to its end.
    public func follow(_ run: Int64, progress: (RunProgress) -> Void = { _ in }) throws -> RunEnd {
        send(.watch(run: run))
        return try pump(until: { m in
            switch m {
            case .progress(let p) where p.runID == run: progress(p); return nil
            case .ended(let e) where e.run == run:
                if Self.isStopNotice(m) { coordinatorStopping(); return nil }
                return e
            default: return nil
            }
        }, resend: { send(.watch(run: run)) })
    }

    /// Follows many runs at once until every one has ended.
    ///
    /// `movie`: where a run that ended is to have its movie written (nil: not fetched). Each is
    /// fetched as its run ends, one at a time, while the other runs go on; `fetched` is told each
    /// one's end (nil: written), and `fetching` the bytes of the one under way so far, at most 4
    /// times a second. This returns once every run has ended and every movie is fetched. Fetched
    /// after the last run instead, a batch's movies came one after another once all had rendered:
    /// none was there while the batch ran, and their copying added to its time.
    public func followAll(_ runs: [Int64], progress: (RunProgress) -> Void = { _ in }, ended: (RunEnd) -> Void = { _ in },
                          movie: (RunEnd) -> (ref: ArtifactRef, path: String)? = { _ in nil },
                          fetching: (_ run: Int64, _ bytes: Int64, _ of: Int64) -> Void = { _, _, _ in },
                          fetched: (_ run: Int64, _ failure: Error?) -> Void = { _, _ in }) throws -> [Int64: RunEnd] {
        let wanted = Set(runs)
        var ends: [Int64: RunEnd] = [:]
        for r in runs { send(.watch(run: r)) }
        guard !runs.isEmpty else { return [:] }
        var queued = Deque<(run: Int64, ref: ArtifactRef, path: String)>()
        var current: (run: Int64, ref: ArtifactRef, path: String)? = nil
        var told = 0.0
        func startNext() {
            guard current == nil, let next = queued.popFirst() else { return }
            current = next
            transfers.fetch(next.ref, from: Data())
            told = Clocks.steady
            fetching(next.run, transfers.arrived(next.ref.sha256) ?? 0, next.ref.size)
        }
        func done() -> [Int64: RunEnd]? { ends.count == wanted.count && current == nil ? ends : nil }
        do {
            return try pump(until: { m in
                switch m {
                case .progress(let p) where wanted.contains(p.runID) && ends[p.runID] == nil: progress(p)
                case .ended(let e) where wanted.contains(e.run) && ends[e.run] == nil:
                    if Self.isStopNotice(m) { coordinatorStopping(); break }
                    ends[e.run] = e
                    ended(e)
                    if let (ref, path) = movie(e) { queued.append((e.run, ref, path)); startNext() }
                    return done()
                default: break
                }
                return nil
            }, resend: { for r in runs where ends[r] == nil { send(.watch(run: r)) } },
            redialled: {
                // A coordinator restarted at once: the movie under way is asked for again now, not at the next stall.
                if current != nil { transfers.askAgainNow() }
                return false
            }, idle: {
                guard let c = current, let outcome = arrival(of: c.ref, told: &told, progress: { fetching(c.run, $0, c.ref.size) }) else { return nil }
                current = nil
                var failure: Error? = nil
                do { try Self.place(outcome, at: c.path) } catch { failure = error }
                fetched(c.run, failure)
                startNext()
                return done()
            })
        } catch {
            // The coordinator went silent: what came of the movie under way is kept, and
            // `coord wait` goes on from there.
            if current != nil { transfers.cutOff("the coordinator stopped answering") }
            throw error
        }
    }

    /// How a stopping coordinator tells a follower of each run it holds (it resumes them when it
    /// starts again on its state folder).
    static func isStopNotice(_ m: WireMessage) -> Bool {
        if case .ended(let e) = m { return e.state == RunStatus.interrupted.rawValue }
        if case .stopping = m { return true }
        return false
    }

    /// How a stopping coordinator answers a submitter's probe (`submit`): it is not back.
    static func isProbeAnswer(_ m: WireMessage) -> Bool {
        if case .statusReply(let r) = m { return r.stopping }
        return false
    }

    /// How often a submitter told the coordinator is stopping asks whether it is back, and sends
    /// its submission again at most.
    static let probeInterval = 0.5, resubmitInterval = 2.0

    /// A follower told its run was interrupted by the coordinator stopping waits for it to come
    /// back (as for one gone silent, with at least `restartPatience`) and follows the run on:
    /// a restart or an upgrade of `coord serve` is not the end of anyone's run. A submitter of
    /// `project` waits the same to submit it there.
    private func coordinatorStopping(submitting project: String? = nil) {
        guard !stopping else { return }
        stopping = true
        toldSilence = true
        let timeout = Int(max(silenceTimeout, Self.restartPatience))
        onSilence?(project.map { .stoppingBeforeSubmit(endpoint: endpoint, timeout: timeout, project: $0) } ?? .stopping(endpoint: endpoint, timeout: timeout))
    }

    /// Copies a finished movie from the coordinator to `path` (verified by sha256). `progress` is
    /// told the bytes here so far: at the start, then at most 4 times a second.
    public func download(_ ref: ArtifactRef, to path: String, progress: (Int64) -> Void = { _ in }) throws {
        transfers.fetch(ref, from: Data())
        var told = Clocks.steady
        if let here = transfers.arrived(ref.sha256) { progress(here) }
        let outcome: Result<ArtifactRef, Transfers.TransferError>
        do {
            // Dialled again (a coordinator restarted at once): asked again now, not at the next stall 3 s on.
            outcome = try pump(until: { _ in nil }, redialled: { transfers.askAgainNow(); return true }, idle: {
                arrival(of: ref, told: &told, progress: progress)
            })
        } catch {
            // The coordinator went silent: what came is kept, and `coord wait` goes on from there.
            transfers.cutOff("the coordinator stopped answering")
            throw error
        }
        try Self.place(outcome, at: path)
    }

    /// The movie `ref` under way: how its download ended, once it has; until then `progress` is
    /// told the bytes here at most 4 times a second (`told`: when it was last).
    private func arrival(of ref: ArtifactRef, told: inout Double, progress: (Int64) -> Void) -> Result<ArtifactRef, Transfers.TransferError>? {
        for (sha, outcome) in transfers.takeCompleted() where sha == ref.sha256 { return outcome }
        let now = Clocks.steady
        if now - told >= 0.25, let here = transfers.arrived(ref.sha256) { told = now; progress(here) }
        return nil
    }

    /// A download's end: the movie written to `path` from where it arrived, or why not.
    static func place(_ outcome: Result<ArtifactRef, Transfers.TransferError>, at path: String) throws {
        let local = try outcome.mapError {
            $0.notHeld ? Failure("the coordinator no longer holds the movie: `coord gc` (which `coord serve --gc-keep-days` runs) removes the files of old runs. "
                        + "Submit the project again to render it; what the coordinator still holds of it is reused", answer: Transfers.notHeldReason)
                    : Failure("download of the movie failed: \($0)")
        }.get()
        do { try ArtifactStore.publish(local, to: path) } catch {
            throw Failure("could not write the movie to \(path): \(error) (it stays on the coordinator; submit again to fetch it, nothing is rendered again)")
        }
        try? FileManager.default.removeItem(atPath: local.path)
    }

    public func cancel(_ run: Int64) throws -> RunEnd {
        send(.cancelRun(run: run))
        return try pump(until: { m in if case .ended(let e) = m, e.run == run { return e }; return nil })
    }

    /// One run's status, or (nil) the list of runs: the `limit` most recent (nil: every run).
    public func status(_ run: Int64?, limit: Int? = nil) throws -> StatusReply {
        send(.status(run: run, limit: limit))
        return try pump(until: { m in if case .statusReply(let r) = m { return r }; return nil })
    }
}

/// Before the process exits on a signal (Ctrl-C, a closed terminal), from the handler's thread:
/// the thread using the client keeps what has come of a download — the next download of that
/// movie goes on from it instead of starting again — and stops there for good.
public final class ExitRequest: Sendable {
    /// Signalled once the client's thread has stopped.
    let requested = Locked<DispatchSemaphore?>(nil)

    /// Returns once the client's thread has stopped, or after `timeout` seconds (it may be busy
    /// elsewhere, hashing files).
    public func stop(timeout: Double = 1) {
        let stopped = DispatchSemaphore(value: 0)
        requested.withLock { $0 = stopped }
        _ = stopped.wait(timeout: .now() + timeout)
    }
}

/// A client's socket identity, which the coordinator reads back to name who asked (a cancel's
/// reason): "client-USER@HOST-PID-XXXXXX". Both directions live here, so they cannot drift apart.
/// Not proven without keys; with keys the key is named too.
enum ClientIdentity {
    static func make() -> String {
        let user = getpwuid(getuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "uid\(getuid())"
        return "client-\(user.prefix(32))@\(ProcessInfo.processInfo.hostName.prefix(100))-\(getpid())-\(UUID().uuidString.prefix(6))"
    }

    /// Who a request came from, for a person reading the run's record: "root@render-1 (process
    /// 4242)" (clients from before the user was in the identity give the host alone), with the
    /// first characters of its key when it has one; another identity as it came (64 characters).
    static func requester(_ id: String, key: String?) -> String {
        var who = String(id.prefix(64))
        let parts = id.split(separator: "-", omittingEmptySubsequences: false)
        if id.hasPrefix("client-"), parts.count >= 4, let pid = Int32(parts[parts.count - 2]) {
            who = "\(parts[1..<(parts.count - 2)].joined(separator: "-").prefix(140)) (process \(pid))"
        }
        return key.map { "\(who), key \($0.prefix(8))…" } ?? who
    }
}
