import Foundation
import ThreadlineCore
import Wire

/// Between the engine's messages (`WireMessage`) and the protocol's own types (`Sources/Wire`,
/// protobuf): the protocol is defined by Schema/wire.proto, not by how these Swift types are
/// spelled. Render descriptions travel as `Document`s: the plan's JSON, versioned by
/// `DocumentSchema.version` and pinned by WireTests.
public enum DocumentSchema {
    /// Bump when the JSON of SegmentSpec, TransitionSpec, OutputProfile or Pipeline changes shape
    /// (WireTests fails until the pinned documents are regenerated).
    public static let version: UInt32 = 1

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    static func document<T: Encodable>(_ value: T) -> Threadline_Wire_Document {
        var d = Threadline_Wire_Document()
        d.schema = version
        d.json = (try? encoder.encode(value)) ?? Data()
        return d
    }

    static func value<T: Decodable>(_ type: T.Type, _ d: Threadline_Wire_Document) throws -> T {
        guard d.schema == version else { throw FrameError.document("\(T.self) of schema \(d.schema), this peer reads \(version)") }
        do { return try JSONDecoder().decode(T.self, from: d.json) } catch { throw FrameError.document("\(T.self): \(error)") }
    }
}

extension Envelope {
    /// This message as one protocol frame.
    public func encoded() -> Data { Frame.encode(message.wire) }

    /// The message in a frame, or nil for anything this peer must not act on (see `FrameError`).
    public static func decode(_ data: Data) -> Envelope? {
        guard case .success(let m) = Frame.decode(data), let message = try? WireMessage(m) else { return nil }
        return Envelope(message)
    }

    /// Why a frame is refused, for logs.
    public static func refusal(_ data: Data) -> FrameError? {
        switch Frame.decode(data) {
        case .failure(let e): return e
        case .success(let m):
            do { _ = try WireMessage(m); return nil } catch let e as FrameError { return e } catch { return .document("\(error)") }
        }
    }
}

// MARK: engine → protocol

extension WireMessage {
    var wire: Threadline_Wire_Envelope.OneOf_Message {
        switch self {
        case .hello(let h): return .hello(h.wire)
        case .heartbeat(let running, let clock): return .heartbeat(.with { $0.leases = running; if let clock { $0.clock = clock } })
        case .assign(let a): return .assign(a.wire)
        case .result(let r): return .result(r.wire)
        case .cancel(let lease): return .cancel(.with { $0.lease = lease })
        case .shutdown: return .shutdown(.init())
        case .ack(let lease): return .ack(.with { $0.lease = lease })
        case .reannounce: return .reannounce(.init())
        case .draining(let running): return .draining(.with { $0.leases = running })
        case .handBack(let lease): return .handBack(.with { $0.lease = lease })
        case .leaving: return .leaving(.init())
        case .dropped(let shas): return .dropped(.with { $0.sha256 = shas })
        case .notice(let message): return .notice(.with { $0.text = message })
        case .stopping(let keep): return .stopping(.with { $0.leases = keep })
        case .pull(let sha, let offset, let length):
            return .pull(.with { $0.sha256 = sha; $0.offset = offset; $0.length = Int64(length) })
        case .chunk(let c):
            return .chunk(.with { $0.sha256 = c.sha256; $0.offset = c.offset; $0.total = c.total; if let e = c.error { $0.error = e } })
        case .submit(let s):
            return .submit(.with {
                $0.pipeline = DocumentSchema.document(s.pipeline); $0.files = s.files.map(\.wire)
                $0.priority = Int32(clamping: s.priority); $0.submitter = s.submitter
                if let id = s.id { $0.id = id }
            })
        case .accepted(let run): return .accepted(.with { $0.run = run })
        case .rejected(let message): return .rejected(.with { $0.text = message })
        case .watch(let run): return .watch(.with { $0.run = run })
        case .progress(let p): return .progress(p.wire)
        case .ended(let e):
            return .ended(.with {
                $0.run = e.run; $0.state = e.state; if let m = e.message { $0.message = m }
                if let o = e.output { $0.output = o.wire }
                $0.outputPath = e.outputPath; $0.seconds = e.seconds; $0.notes = e.notes
            })
        case .cancelRun(let run): return .cancelRun(.with { $0.run = run })
        case .status(let run, let limit): return .status(.with { if let run { $0.run = run }; if let limit { $0.limit = Int64(limit) } })
        case .statusReply(let r):
            func rows(_ v: [[String: String]]) -> [Threadline_Wire_Row] { v.map { row in .with { $0.fields = row } } }
            return .statusReply(.with {
                $0.runs = rows(r.runs); $0.stages = rows(r.stages); $0.failures = rows(r.failures)
                if let n = r.runsTotal { $0.runsTotal = Int64(n) }
                if r.stopping { $0.stopping = true }
            })
        }
    }
}

extension ArtifactRef {
    var wire: Threadline_Wire_ArtifactRef { .with { $0.sha256 = sha256; $0.path = path; $0.size = size } }
    init(_ w: Threadline_Wire_ArtifactRef) { self.init(sha256: w.sha256, path: w.path, size: w.size) }
}

extension Hello {
    var wire: Threadline_Wire_Hello {
        .with {
            $0.worker = worker; $0.host = host; $0.pid = Int64(pid); $0.slots = Int32(clamping: slots); $0.version = version
            if let s = storeID { $0.storeID = s }
            $0.running = running ?? []
            $0.draining = draining == true
            if let engine { $0.engine = engine }
            if let incarnation { $0.incarnation = incarnation }
            if let clock { $0.clock = clock }
        }
    }
    init(_ w: Threadline_Wire_Hello) {
        self.init(worker: w.worker, host: w.host, pid: Int(w.pid), slots: Int(w.slots), version: w.version,
                  storeID: w.hasStoreID ? w.storeID : nil, running: w.running, draining: w.draining ? true : nil,
                  engine: w.hasEngine ? w.engine : nil, incarnation: w.hasIncarnation ? w.incarnation : nil,
                  clock: w.hasClock ? w.clock : nil)
    }
}

extension Assignment {
    var wire: Threadline_Wire_Assignment {
        .with {
            $0.lease = lease
            $0.task = task.wire
            if let key { $0.key = key }
            if let reuse { $0.reuse = reuse.wire }
            $0.checkOnly = checkOnly == true
            if let source { $0.source = source.wire }
            if let origin { $0.origin = origin }
            $0.inputs = (inputs ?? []).map(\.wire)
        }
    }
    init(_ w: Threadline_Wire_Assignment) throws {
        self.init(lease: w.lease, task: try TaskSpec(w.task), key: w.hasKey ? w.key : nil,
                  reuse: w.hasReuse ? ArtifactRef(w.reuse) : nil, checkOnly: w.checkOnly ? true : nil)
        source = w.hasSource ? ArtifactRef(w.source) : nil
        origin = w.hasOrigin ? w.origin : nil
        inputs = w.inputs.isEmpty ? nil : w.inputs.map(ArtifactRef.init)
    }
}

extension TaskSpec {
    var wire: Threadline_Wire_Task {
        .with {
            switch self {
            case .fetch(let uri, let name): $0.fetch = .with { $0.uri = uri; $0.name = name }
            case .segment(let spec): $0.segment = DocumentSchema.document(spec)
            case .transition(let spec, let from, let to, let index):
                $0.transition = .with { $0.spec = DocumentSchema.document(spec); $0.from = from; $0.to = to; $0.index = Int32(clamping: index) }
            case .concat(let inputs, let profile):
                $0.concat = .with { $0.inputs = inputs.map(\.wire); $0.profile = DocumentSchema.document(profile) }
            }
        }
    }
    init(_ w: Threadline_Wire_Task) throws {
        switch w.kind {
        case .fetch(let f): self = .fetch(uri: f.uri, name: f.name)
        case .segment(let d): self = .segment(try DocumentSchema.value(SegmentSpec.self, d))
        case .transition(let t): self = .transition(try DocumentSchema.value(TransitionSpec.self, t.spec), from: t.from, to: t.to, index: Int(t.index))
        case .concat(let c): self = .concat(c.inputs.map(ConcatInput.init), profile: try DocumentSchema.value(OutputProfile.self, c.profile))
        case nil: throw FrameError.unknownMessage
        }
    }
}

extension ConcatInput {
    var wire: Threadline_Wire_ConcatInput {
        .with {
            $0.path = path; $0.frameCount = Int64(frameCount); $0.sampleCount = Int64(sampleCount); $0.label = label
            $0.firstFrame = Int64(firstFrame); $0.firstSample = Int64(firstSample)
        }
    }
    init(_ w: Threadline_Wire_ConcatInput) {
        self.init(path: w.path, frameCount: Int(w.frameCount), sampleCount: Int(w.sampleCount), label: w.label,
                  firstFrame: Int(w.firstFrame), firstSample: Int(w.firstSample))
    }
}

extension StageKind {
    var wire: Threadline_Wire_Stage {
        switch self {
        case .fetch: .fetch
        case .decode: .decode
        case .transform: .transform
        case .encode: .encode
        case .transition: .transition
        case .concat: .concat
        }
    }
    init(_ w: Threadline_Wire_Stage) throws {
        switch w {
        case .fetch: self = .fetch
        case .decode: self = .decode
        case .transform: self = .transform
        case .encode: self = .encode
        case .transition: self = .transition
        case .concat: self = .concat
        case .unspecified, .UNRECOGNIZED: throw FrameError.unknownMessage
        }
    }
}

extension MediaFacts {
    var wire: Threadline_Wire_MediaFacts {
        .with {
            $0.duration = duration; $0.width = Int64(width); $0.height = Int64(height); $0.video = hasVideo; $0.audio = hasAudio
            if let v = videoCodec { $0.videoCodec = v }
            if let a = audioCodec { $0.audioCodec = a }
            $0.rotation = Int32(clamping: rotation); $0.mirrored = mirrored
            if let r = frameRate { $0.frameRate = r }
            $0.container = container
            if let v = videoStream { $0.videoStream = Int32(clamping: v) }
            if let a = audioStream { $0.audioStream = Int32(clamping: a) }
            $0.isStill = isStill
            if let u = undecodableAudio { $0.undecodableAudio = u }
            $0.transparent = transparent == true
            $0.interlaced = interlaced == true
        }
    }
    init(_ w: Threadline_Wire_MediaFacts) {
        self.init(duration: w.duration, width: Int(w.width), height: Int(w.height), hasVideo: w.video, hasAudio: w.audio,
                  videoCodec: w.hasVideoCodec ? w.videoCodec : nil, audioCodec: w.hasAudioCodec ? w.audioCodec : nil,
                  rotation: Int(w.rotation), mirrored: w.mirrored, frameRate: w.hasFrameRate ? w.frameRate : nil, container: w.container)
        videoStream = w.hasVideoStream ? Int(w.videoStream) : nil
        audioStream = w.hasAudioStream ? Int(w.audioStream) : nil
        isStill = w.isStill
        undecodableAudio = w.hasUndecodableAudio ? w.undecodableAudio : nil
        transparent = w.transparent ? true : nil
        interlaced = w.interlaced ? true : nil
    }
}

extension SegmentReport {
    var wire: Threadline_Wire_SegmentReport {
        .with {
            $0.decodeSeconds = decodeSeconds; $0.transformSeconds = transformSeconds; $0.encodeSeconds = encodeSeconds
            $0.framesDecoded = Int64(framesDecoded); $0.framesOut = Int64(framesOut); $0.samplesOut = Int64(samplesOut)
        }
    }
    init(_ w: Threadline_Wire_SegmentReport) {
        self.init()
        decodeSeconds = w.decodeSeconds; transformSeconds = w.transformSeconds; encodeSeconds = w.encodeSeconds
        framesDecoded = Int(w.framesDecoded); framesOut = Int(w.framesOut); samplesOut = Int(w.samplesOut)
    }
}

extension TaskResult {
    var wire: Threadline_Wire_TaskResult {
        .with {
            $0.lease = lease
            if let e = error {
                $0.error = .with {
                    $0.stage = e.stage.wire
                    $0.errorClass = e.errorClass == .retryable ? .retryable : .permanent
                    $0.file = e.file; $0.message = e.message
                }
            }
            if let artifact { $0.artifact = artifact.wire }
            if let facts { $0.facts = facts.wire }
            if let segment { $0.segment = segment.wire }
            $0.startedAt = startedAt; $0.finishedAt = finishedAt; $0.cpuSeconds = cpuSeconds; $0.maxRss = maxRSS
            if let cached { $0.cached = cached }
        }
    }
    init(_ w: Threadline_Wire_TaskResult) throws {
        var error: WireError?
        if w.hasError {
            let cls: MediaError.Class
            switch w.error.errorClass {
            case .retryable: cls = .retryable
            case .permanent: cls = .permanent
            case .unspecified, .UNRECOGNIZED: throw FrameError.unknownMessage
            }
            error = WireError(stage: try StageKind(w.error.stage), errorClass: cls, file: w.error.file, message: w.error.message)
        }
        self.init(lease: w.lease, error: error, artifact: w.hasArtifact ? ArtifactRef(w.artifact) : nil, facts: w.hasFacts ? MediaFacts(w.facts) : nil,
                  segment: w.hasSegment ? SegmentReport(w.segment) : nil, startedAt: w.startedAt, finishedAt: w.finishedAt,
                  cpuSeconds: w.cpuSeconds, maxRSS: w.maxRss)
        cached = w.hasCached ? w.cached : nil
    }
}

extension RunProgress {
    var wire: Threadline_Wire_RunProgress {
        .with {
            $0.runID = runID; $0.items = Int64(items); $0.itemsDone = Int64(itemsDone); $0.stagesTotal = Int64(stagesTotal)
            $0.stagesDone = Int64(stagesDone); $0.running = running; $0.elapsed = elapsed
            if let f = framesDone { $0.framesDone = Int64(f) }
            if let f = framesTotal { $0.framesTotal = Int64(f) }
            if let k = framesKnown { $0.framesKnown = k }
            if let f = framesRendered { $0.framesRendered = Int64(f) }
            if let t = renderingFor { $0.renderingFor = t }
            if let s = slots {
                $0.renderSeconds = s.renderSeconds; $0.rendersInFlight = Int64(s.inFlight)
                $0.framesInFlight = Int64(s.inFlightFrames); $0.inFlightSeconds = s.inFlightSeconds
            }
            $0.failures = failures
            $0.notes = notes
            $0.setbacks = setbacks
            if let w = workers { $0.workers = Int64(w) }
            if let f = framesElsewhere { $0.framesElsewhere = Int64(f) }
            if let c = costPerFrame { $0.costPerFrame = c }
        }
    }
    init(_ w: Threadline_Wire_RunProgress) {
        self.init(runID: w.runID, items: Int(w.items), itemsDone: Int(w.itemsDone), stagesTotal: Int(w.stagesTotal),
                  stagesDone: Int(w.stagesDone), running: w.running, elapsed: w.elapsed,
                  framesDone: w.hasFramesDone ? Int(w.framesDone) : nil, framesTotal: w.hasFramesTotal ? Int(w.framesTotal) : nil,
                  framesKnown: w.hasFramesKnown ? w.framesKnown : nil, framesRendered: w.hasFramesRendered ? Int(w.framesRendered) : nil,
                  renderingFor: w.hasRenderingFor ? w.renderingFor : nil,
                  slots: w.hasRenderSeconds ? TimeLeft.Slots(renderSeconds: w.renderSeconds, inFlight: Int(w.rendersInFlight),
                                                             inFlightFrames: Int(w.framesInFlight), inFlightSeconds: w.inFlightSeconds) : nil,
                  failures: w.failures, notes: w.notes, workers: w.hasWorkers ? Int(w.workers) : nil, setbacks: w.setbacks,
                  framesElsewhere: w.hasFramesElsewhere ? Int(w.framesElsewhere) : nil,
                  costPerFrame: w.hasCostPerFrame ? w.costPerFrame : nil)
    }
}

// MARK: protocol → engine

extension WireMessage {
    init(_ m: Threadline_Wire_Envelope.OneOf_Message) throws {
        switch m {
        case .hello(let h): self = .hello(Hello(h))
        case .heartbeat(let l): self = .heartbeat(running: l.leases, clock: l.hasClock ? l.clock : nil)
        case .assign(let a): self = .assign(try Assignment(a))
        case .result(let r): self = .result(try TaskResult(r))
        case .cancel(let l): self = .cancel(lease: l.lease)
        case .shutdown: self = .shutdown
        case .ack(let l): self = .ack(lease: l.lease)
        case .reannounce: self = .reannounce
        case .draining(let l): self = .draining(running: l.leases)
        case .handBack(let l): self = .handBack(lease: l.lease)
        case .leaving: self = .leaving
        case .dropped(let a):
            guard a.sha256.count <= WireMessage.droppedPerMessage else { throw FrameError.malformed("\(a.sha256.count) dropped artifacts in one message") }
            self = .dropped(sha256: a.sha256)
        case .notice(let t): self = .notice(message: t.text)
        case .stopping(let l): self = .stopping(keep: l.leases)
        case .pull(let p):
            guard let length = Int(exactly: p.length) else { throw FrameError.malformed("pull length \(p.length)") }
            self = .pull(sha256: p.sha256, offset: p.offset, length: length)
        case .chunk(let c): self = .chunk(Chunk(sha256: c.sha256, offset: c.offset, total: c.total, error: c.hasError ? c.error : nil))
        case .submit(let s):
            self = .submit(Submission(pipeline: try DocumentSchema.value(Pipeline.self, s.pipeline), files: s.files.map(ArtifactRef.init),
                                      priority: Int(s.priority), submitter: s.submitter, id: s.id.isEmpty ? nil : s.id))
        case .accepted(let r): self = .accepted(run: r.run)
        case .rejected(let t): self = .rejected(message: t.text)
        case .watch(let r): self = .watch(run: r.run)
        case .progress(let p): self = .progress(RunProgress(p))
        case .ended(let e):
            self = .ended(RunEnd(run: e.run, state: e.state, message: e.hasMessage ? e.message : nil, output: e.hasOutput ? ArtifactRef(e.output) : nil,
                                 outputPath: e.outputPath, seconds: e.seconds, notes: e.notes))
        case .cancelRun(let r): self = .cancelRun(run: r.run)
        case .status(let q): self = .status(run: q.hasRun ? q.run : nil, limit: q.hasLimit ? Int(clamping: q.limit) : nil)
        case .statusReply(let r):
            self = .statusReply(StatusReply(runs: r.runs.map(\.fields), stages: r.stages.map(\.fields), failures: r.failures.map(\.fields),
                                            runsTotal: r.hasRunsTotal ? Int(clamping: r.runsTotal) : nil, stopping: r.stopping))
        }
    }
}
