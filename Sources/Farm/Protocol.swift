import Foundation
import ThreadlineCore
import Wire

/// What coordinators, workers and submitters say to one another, as the engine handles it. On the
/// wire each message is one protocol frame (Sources/Wire/Schema/wire.proto, converted in
/// WireCoding.swift), so renaming anything here does not change the protocol; a peer drops (and
/// logs) a frame it cannot decode.
public enum WireMessage: Sendable {
    /// Worker → coordinator, first message and after every reconnect.
    case hello(Hello)
    /// Both ways, about once a second; any message also counts as one. A worker's carries its wall
    /// clock as it sent it (`clock`), by which the coordinator finds how far that clock is off.
    case heartbeat(running: [String], clock: Double? = nil)
    /// Coordinator → worker: run this task in a free slot.
    case assign(Assignment)
    /// Worker → coordinator: how an attempt ended.
    case result(TaskResult)
    /// Coordinator → worker: stop the attempt with this lease.
    case cancel(lease: String)
    /// Coordinator → worker: finish and exit.
    case shutdown
    /// Coordinator → worker: your result for this lease arrived (stop resending it).
    case ack(lease: String)
    /// Coordinator → worker: I do not know you (I restarted, or declared you lost); say hello again.
    case reannounce
    /// Worker → coordinator: I am stopping (SIGTERM): send me no more work; these attempts will
    /// still finish and report.
    case draining(running: [String])
    /// Worker → coordinator: I will not run (or finish) this attempt; queue it again at once. It
    /// does not count as a failure or a lost worker.
    case handBack(lease: String)
    /// Worker → coordinator: every result delivered; I am leaving (not lost).
    case leaving
    /// Worker → coordinator: my store gave these artifacts up (trimmed): send their work elsewhere
    /// as readily as here. At most `WireMessage.droppedPerMessage` each.
    case dropped(sha256: [String])
    /// Coordinator → worker: a word for its log, about this worker (it is sidelined: why, how long).
    case notice(message: String)
    /// Coordinator → worker: I am stopping (SIGTERM past my drain timeout). These attempts of yours
    /// go on: deliver them to the coordinator that comes next, which keeps what they make. (What
    /// it does not keep it cancelled first.) A worker stopping itself leaves at once.
    /// Coordinator → submitter (`keep` empty): I am stopping and take no project; submit it to the
    /// coordinator that comes next (what of its files came is kept there).
    case stopping(keep: [String])

    // Artifacts move in chunks: the receiver asks for one chunk at a time, keeping a few
    // requests in flight (credit-based flow control); each `chunk` carries its bytes in a
    // second frame. Any peer serves what its store holds.
    case pull(sha256: String, offset: Int64, length: Int)
    case chunk(Chunk)

    // Submitters (coord submit/status/wait/cancel) talk to the coordinator on the same port.
    case submit(Submission)
    case accepted(run: Int64)
    case rejected(message: String)
    case watch(run: Int64)
    case progress(RunProgress)
    case ended(RunEnd)
    case cancelRun(run: Int64)
    /// One run, or (nil) the list of runs: the `limit` most recent (nil or 0: every run).
    case status(run: Int64?, limit: Int? = nil)
    case statusReply(StatusReply)
}

public struct Chunk: Codable, Sendable {
    public var sha256: String
    public var offset: Int64
    public var total: Int64
    /// Set when the sender cannot serve it (it does not hold the artifact).
    public var error: String?
}

/// A pipeline handed to a running coordinator, with every local file it names (sources,
/// soundtrack, watermark, fonts): the coordinator pulls those it lacks from the submitter.
public struct Submission: Codable, Sendable {
    public var pipeline: Pipeline
    /// path on the submitter's host → content.
    public var files: [ArtifactRef]
    public var priority: Int
    public var submitter: String
    /// The submitter's name for it (a UUID): sent again (its coordinator dialled again, perhaps
    /// restarted, before it answered), it is answered with the run it made, not made twice.
    public var id: String?
    public init(pipeline: Pipeline, files: [ArtifactRef], priority: Int = 0, submitter: String, id: String? = nil) {
        self.pipeline = pipeline; self.files = files; self.priority = priority; self.submitter = submitter; self.id = id
    }
}

public struct RunEnd: Codable, Sendable {
    public var run: Int64
    public var state: String           // succeeded | failed | cancelled
    public var message: String?
    public var output: ArtifactRef?    // the movie in the coordinator's store
    public var outputPath: String      // where the submitter asked for it
    public var seconds: Double
    /// Every note of the run (`RunProgress.notes`): one who follows a run that had ended before
    /// (a cached run ends in milliseconds) is sent no progress.
    public var notes: [String] = []

    /// The message of the answer to a cancel that stopped the run (one that had ended before is
    /// answered with how it ended, whose message is never this).
    public static let cancelledNow = "cancelled"
    /// Whether this answers a cancel by stopping the run then.
    public var cancelledNow: Bool { state == "cancelled" && message == Self.cancelledNow }
}

public struct StatusReply: Codable, Sendable {
    public var runs: [[String: String]]
    public var stages: [[String: String]]
    public var failures: [[String: String]]
    /// With a list of runs cut to a limit: how many runs the peer may see in all.
    public var runsTotal: Int? = nil
    /// The coordinator answering is stopping (a restart or an upgrade).
    public var stopping = false
}

public struct Envelope: Sendable {
    /// The protocol version this peer speaks (see `Wire.Frame`).
    public static var version: Int { Int(Frame.version) }
    public var v: Int
    public var message: WireMessage
    public init(_ message: WireMessage) { v = Envelope.version; self.message = message }
}

public struct Hello: Codable, Sendable {
    public var worker: String
    public var host: String
    public var pid: Int
    public var slots: Int
    public var version: String
    /// The worker's artifact store; when it is the coordinator's own (a shared folder), nothing is copied.
    public var storeID: String?
    /// Attempts still running in this worker (after a reconnect the coordinator cancels those it no longer knows).
    public var running: [String]?
    /// It is draining (stopping): send it no new work.
    public var draining: Bool? = nil
    /// `Planner.engineID` of the worker's build (nil from a worker older than the field).
    public var engine: String? = nil
    /// Made once per worker process (nil from a worker older than the field): another one under
    /// a known id is a new process, not the same one reconnecting.
    public var incarnation: String? = nil
    /// The worker's wall clock as it sent this (nil from a worker older than the field).
    public var clock: Double? = nil
}

/// One attempt of one unit of work. The lease token fences it: a result whose lease is no
/// longer current is discarded.
public struct Assignment: Codable, Sendable {
    public var lease: String
    public var task: TaskSpec
    /// The stage's output key: same key, same output.
    public var key: String?
    /// An artifact already recorded under `key`; the worker reuses it if its hash still matches.
    public var reuse: ArtifactRef?
    /// Only verify `reuse`; a cache check takes no media slot. A miss comes back with no artifact.
    public var checkOnly: Bool?
    /// A stored source the task reads, verified by hash before use, and the file it came from
    /// (to restore a damaged copy).
    public var source: ArtifactRef?
    public var origin: String?
    /// Every artifact the task reads, under the path the task names it by; the worker makes
    /// sure it holds each (pulling from the coordinator when not) and rewrites the paths.
    public var inputs: [ArtifactRef]?
    public init(lease: String, task: TaskSpec, key: String? = nil, reuse: ArtifactRef? = nil, checkOnly: Bool? = nil) {
        self.lease = lease; self.task = task; self.key = key; self.reuse = reuse; self.checkOnly = checkOnly
    }
}

public indirect enum TaskSpec: Codable, Sendable {
    /// Bring a source into the store and probe it.
    case fetch(uri: String, name: String)
    /// decode → transform → encode of one item, as one streamed pipeline.
    case segment(SegmentSpec)
    /// Join the tail of one segment and the head of the next.
    case transition(TransitionSpec, from: String, to: String, index: Int)
    /// Join segments into the movie.
    case concat([ConcatInput], profile: OutputProfile)

    public var label: String {
        switch self {
        case .fetch(_, let name): return "fetch \(name)"
        case .segment(let s): return "render \(s.sourceName)"
        case .transition(_, _, _, let b): return "transition \(b + 1)→\(b + 2)"
        case .concat: return "concat"
        }
    }
}

/// A produced file in the artifact store.
public struct ArtifactRef: Codable, Sendable, Hashable {
    public var sha256: String
    public var path: String
    public var size: Int64
}

public struct WireError: Codable, Sendable, Error, CustomStringConvertible {
    public var stage: StageKind
    public var errorClass: MediaError.Class
    public var file: String
    public var message: String
    /// The attempt failed for want of room on the disk (`MediaError.noSpace`). Read by the worker
    /// that ran it, which frees its store at once; not sent (the message says it).
    public var noSpace = false
    public init(stage: StageKind, errorClass: MediaError.Class, file: String, message: String) {
        self.stage = stage; self.errorClass = errorClass; self.file = file; self.message = message
    }
    public init(_ e: MediaError) {
        self.init(stage: e.stage, errorClass: e.errorClass, file: e.file, message: e.message)
        noSpace = e.noSpace
    }
    public var description: String { "\(stage.rawValue) failed on \(file): \(message)" }
    /// The attempt was stopped where it ran, as it was told (`MediaError.cancelled`).
    public var isCancellation: Bool { errorClass == .retryable && message == MediaError.cancelledMessage }
}

public struct TaskResult: Codable, Sendable {
    public var lease: String
    public var error: WireError?
    public var artifact: ArtifactRef?
    public var facts: MediaFacts?
    public var segment: SegmentReport?
    public var startedAt: Double
    public var finishedAt: Double
    public var cpuSeconds: Double
    public var maxRSS: Int64
    /// The output was a verified artifact reused from an earlier attempt, not rendered again.
    public var cached: Bool? = nil

    public init(lease: String, error: WireError?, artifact: ArtifactRef?, facts: MediaFacts?, segment: SegmentReport?,
                startedAt: Double, finishedAt: Double, cpuSeconds: Double, maxRSS: Int64, cached: Bool? = nil) {
        self.lease = lease; self.error = error; self.artifact = artifact; self.facts = facts; self.segment = segment
        self.startedAt = startedAt; self.finishedAt = finishedAt; self.cpuSeconds = cpuSeconds; self.maxRSS = maxRSS; self.cached = cached
    }
}

extension TaskResult {
    /// The result with what its worker measured made recordable: a time that is not a number or
    /// endless taken as `now`, a negative or endless amount as 0. Such figures come only from a
    /// worker of another version, a broken or a hostile one; recorded as sent, one stopped the
    /// coordinator (a duration metric cannot hold an endless time) and skewed its clock estimate.
    public func measurable(now: Double) -> TaskResult {
        var r = self
        let amount = { (x: Double) in x.isFinite && x >= 0 ? x : 0 }
        r.startedAt = startedAt.isFinite ? startedAt : now
        r.finishedAt = finishedAt.isFinite ? finishedAt : now
        r.cpuSeconds = amount(cpuSeconds)
        r.maxRSS = max(0, maxRSS)
        if var s = segment {
            s.decodeSeconds = amount(s.decodeSeconds); s.transformSeconds = amount(s.transformSeconds); s.encodeSeconds = amount(s.encodeSeconds)
            s.framesDecoded = max(0, s.framesDecoded); s.framesOut = max(0, s.framesOut); s.samplesOut = max(0, s.samplesOut)
            r.segment = s
        }
        return r
    }
}

extension Assignment {
    /// The same assignment with `f` applied to every file it reads, field by field: the source,
    /// fonts, stickers, watermark and soundtrack, the segments a transition or concat joins, and
    /// the stored source to verify. Titles, captions and names are text and stay as they are.
    public func mappingFiles(_ f: (String) -> String) -> Assignment {
        var a = self
        func profile(_ p: OutputProfile) -> OutputProfile {
            var p = p
            if let w = p.watermark?.image { p.watermark?.image = f(w) }
            if let s = p.soundtrack?.source { p.soundtrack?.source = f(s) }
            return p
        }
        switch task {
        case .fetch(let uri, let name):
            a.task = .fetch(uri: f(uri), name: name)
        case .segment(var spec):
            spec.sourcePath = f(spec.sourcePath)
            if let font = spec.title?.font { spec.title?.font = f(font) }
            if let font = spec.edits.text?.font { spec.edits.text?.font = f(font) }
            for k in spec.edits.stickers.indices { spec.edits.stickers[k].image = f(spec.edits.stickers[k].image) }
            spec.profile = profile(spec.profile)
            a.task = .segment(spec)
        case .transition(var spec, let from, let to, let index):
            spec.profile = profile(spec.profile)
            a.task = .transition(spec, from: f(from), to: f(to), index: index)
        case .concat(var inputs, let p):
            for k in inputs.indices { inputs[k].path = f(inputs[k].path) }
            a.task = .concat(inputs, profile: profile(p))
        }
        if let path = a.source?.path { a.source?.path = f(path) }
        return a
    }
}

extension WireMessage {
    /// A trim that gives up more sends several `dropped` messages (66 bytes a name: 66 KB each).
    public static let droppedPerMessage = 1000

    /// One message of each kind, as the fuzzer's starting corpus (in step with the schema).
    public static var examples: [WireMessage] {
        let ref = ArtifactRef(sha256: String(repeating: "ab", count: 32), path: "/s/a.mov", size: 1234)
        let item = Item(kind: .video(source: SourceRef("/m/a.mov"), trim: nil))
        let pipeline = Pipeline(name: "p", output: OutputProfile(path: "/o/p.mp4"), items: [item])
        var a = Assignment(lease: "L1", task: .fetch(uri: "/m/a.mov", name: "a.mov"), key: "k")
        a.inputs = [ref]
        let spec = Planner.segmentSpec(pipeline, index: 0, sourcePath: "/s/a.mov", frameCount: 30)
        return [
            .hello(Hello(worker: "w1", host: "h", pid: 1, slots: 2, version: "0.2.0", storeID: "S", running: ["L0"])),
            .heartbeat(running: ["L1", "L2"]),
            .assign(a),
            .assign(Assignment(lease: "L2", task: .segment(spec), key: "k2", reuse: ref, checkOnly: true)),
            .assign(Assignment(lease: "L3", task: .concat([ConcatInput(path: "/s/b.mov", frameCount: 30, sampleCount: 48000, label: "b")],
                                                          profile: pipeline.output))),
            .result(TaskResult(lease: "L1", error: WireError(stage: .decode, errorClass: .permanent, file: "a.mov", message: "bad"),
                               artifact: ref, facts: MediaFacts(duration: 1, width: 2, height: 2, hasVideo: true, hasAudio: false),
                               segment: nil, startedAt: 1, finishedAt: 2, cpuSeconds: 0.5, maxRSS: 10)),
            .cancel(lease: "L1"), .shutdown, .ack(lease: "L1"), .reannounce,
            .draining(running: ["L1"]), .handBack(lease: "L2"), .leaving,
            .pull(sha256: ref.sha256, offset: 0, length: 1 << 20),
            .chunk(Chunk(sha256: ref.sha256, offset: 0, total: 10, error: nil)),
            .submit(Submission(pipeline: pipeline, files: [ref], priority: 1, submitter: "me")),
            .accepted(run: 3), .rejected(message: "no"), .watch(run: 3), .cancelRun(run: 3), .status(run: nil),
            .progress(RunProgress(runID: 3, items: 1, itemsDone: 0, stagesTotal: 5, stagesDone: 1, running: ["fetch/0"], elapsed: 1)),
            .ended(RunEnd(run: 3, state: "succeeded", message: nil, output: ref, outputPath: "/o/p.mp4", seconds: 2,
                          notes: ["p.yaml:5:5: note: clip 1 (a.mp4): trim.end 7.500 s is past the clip's end (1.000 s): it plays to its end"])),
            .statusReply(StatusReply(runs: [["id": "1"]], stages: [], failures: [])),
            .progress(RunProgress(runID: 3, items: 2, itemsDone: 1, stagesTotal: 9, stagesDone: 5, running: ["render/1"], elapsed: 3,
                                  framesDone: 60, framesTotal: 120, framesKnown: true, framesRendered: 30, renderingFor: 1.5,
                                  slots: TimeLeft.Slots(renderSeconds: 2.5, inFlight: 1, inFlightFrames: 30, inFlightSeconds: 0.75),
                                  failures: ["clip 2 (b.mp4): decode failed"],
                                  notes: ["p.yaml:5:5: note: clip 1 (a.mp4): trim.end 7.500 s is past the clip's end (1.000 s): it plays to its end"], workers: 0)),
            .status(run: nil, limit: 50),
            .statusReply(StatusReply(runs: [["id": "7"]], stages: [], failures: [], runsTotal: 120)),
            .hello(Hello(worker: "w2", host: "h", pid: 2, slots: 1, version: "0.4.0", storeID: nil, running: [], draining: true, engine: "e+1")),
            .dropped(sha256: [ref.sha256, String(repeating: "b", count: 64)]),
            .notice(message: "this worker gets no work for 30 s"),
            .hello(Hello(worker: "w3", host: "h", pid: 1, slots: 4, version: "0.5.0", storeID: "S", running: ["L9"], engine: "e+2",
                         incarnation: "8D5C1E0A-4F3B-4C55-9E0F-7A1D2B3C4D5E")),
            .hello(Hello(worker: "w4", host: "h", pid: 1, slots: 1, version: "0.6.0", storeID: nil, running: [], engine: "e+3",
                         incarnation: "0F1E2D3C-4B5A-4968-8776-655443322110", clock: 1_795_720_841.25)),
            .heartbeat(running: ["L4"], clock: 1_795_720_842.5),
            .stopping(keep: ["L3"]),
            .progress(RunProgress(runID: 4, items: 3, itemsDone: 1, stagesTotal: 12, stagesDone: 4, running: ["render/1"], elapsed: 2,
                                  framesDone: 90, framesTotal: 270, framesKnown: true, framesRendered: 90, renderingFor: 1.2,
                                  slots: TimeLeft.Slots(renderSeconds: 1.1, inFlight: 1, inFlightFrames: 90, inFlightSeconds: 0.4),
                                  workers: 1, framesElsewhere: 0, costPerFrame: 28.25)),
            .statusReply(StatusReply(runs: [], stages: [], failures: [], runsTotal: 0, stopping: true)),
            .submit(Submission(pipeline: pipeline, files: [ref], priority: 0, submitter: "me", id: "6F9619FF-8B86-D011-B42D-00C04FC964FF")),
        ]
    }
}
