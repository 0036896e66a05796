import Foundation
import Synchronization
import Logging
import ThreadlineCore
import Transport
import Lineage
import Scheduler
import DequeModule

/// What observers of a run are told.
public struct RunProgress: Sendable, Codable {
    public var runID: Int64
    public var items: Int
    public var itemsDone: Int
    public var stagesTotal: Int
    public var stagesDone: Int
    /// The units at work on a slot now (a render, a fetch, the concat; not a cache check, which
    /// takes none), by name.
    public var running: [String]
    public var elapsed: Double
    /// Planned output frames rendered so far, and in all; `framesKnown` once every item's length
    /// is known (remote sources are measured when fetched). The ETA comes from these. Each item's
    /// frames (here and in every frame count of this, `slots` too) are weighed by what its render
    /// should cost against the run's `costPerFrame`: a photo's frame counts less than a 4K clip's.
    public var framesDone: Int? = nil
    public var framesTotal: Int? = nil
    public var framesKnown: Bool? = nil
    /// Frames the run rendered itself (not reused from the cache), and seconds since its first
    /// render was sent: the rate the ETA comes from. Nil from a coordinator that does not say,
    /// which leaves the frames done and the whole elapsed time.
    public var framesRendered: Int? = nil
    public var renderingFor: Double? = nil
    /// How its renders go on their slots (`TimeLeft.Slots`); nil from a coordinator that does not say.
    public var slots: TimeLeft.Slots? = nil
    /// What failed for good so far, one message each, by item: the run goes on with what does
    /// not wait for it (and counts only that in its frames), and its end names them all again.
    public var failures: [String] = []
    /// What planning did that the pipeline did not say (`Planner.note`: a trim past a clip's end),
    /// one line each, with the pipeline's file:line:col; told as the sources are fetched.
    public var notes: [String] = []
    /// Workers taking work (connected, not draining) when this was told; nil from a coordinator
    /// that does not say.
    public var workers: Int? = nil
    /// What set the run back on the farm, one line each as it happened (a worker lost with a
    /// stage, a stage handed back by a draining worker, a stage tried again after a failure):
    /// the time left grows then, and this says why. The last `RunState.setbacksKept`.
    public var setbacks: [String] = []
    /// Planned frames of its renders still to come whose output another run's render makes (the
    /// same clip with the same edits in two projects of a batch: rendered once, a cache hit for
    /// the other). A batch's total counts them once; nil from a coordinator that does not say.
    public var framesElsewhere: Int? = nil
    /// Milliseconds a planned frame of the run should take to render: `RenderCost`'s estimates of
    /// its renders over their frames, once any item's source is measured. One project's own time
    /// left does not need it (its rate is its own), but a batch's total does: its projects' frames
    /// are not the same work (a 1080p frame about 2.6 times a 540p one from the same clip), and
    /// counted alike, eight projects whose 540p ones came first read "ETA 0:02" with 6.7 s left.
    /// Nil from a coordinator that does not say.
    public var costPerFrame: Double? = nil

    /// No worker takes work and nothing of the run runs: it waits for one to join (all workers
    /// stopped, scaled to zero, or not started yet), which the time left cannot tell.
    public var waitingForWorker: Bool { workers == 0 && running.isEmpty }
    public static let waitingText = "waiting for a worker to join"
    /// What a log is told when a run starts waiting.
    public static let waitingLine = waitingText + " (none connected to the coordinator takes work)"

    /// Seconds left, from the rate at which this run has rendered its planned frames (`TimeLeft`).
    public var eta: Double? {
        TimeLeft.seconds(framesDone: done, framesTotal: total, known: known, rendered: rendered, renderingFor: renderingTime, slots: slots,
                         speed: TimeLeft.nominalSpeed(costPerFrame: costPerFrame))
    }

    /// How far along a progress bar is: frames once every item's length is known, items before
    /// (stages counted the quick fetches, and the bar went back to empty when the frames became
    /// known). One figure for the single run's line and a batch's lines.
    public var fractionDone: Double {
        known && total > 0 ? Double(done) / Double(total) : Double(itemsDone) / Double(max(1, items))
    }

    /// What a batch's line for this run shows for its time: as `etaText`, but a run with nothing
    /// running while the workers render other runs' stages (a batch's fair share gives each its
    /// turn) waits for a slot. Before, such a line read "ETA --:--", or held the time it last had,
    /// as if the project were stuck.
    public var timeInBatch: String { timeInBatch(speed: nil) }
    /// `speed`: the batch's (`BatchProgress.speed`), for a run that has rendered nothing of its own yet.
    public func timeInBatch(speed: Double?) -> String {
        running.isEmpty && !waitingForWorker && !joining ? Self.waitingForSlotText : etaText(speed: speed)
    }
    public static let waitingForSlotText = "waiting for a slot"

    /// Every planned frame is rendered and the run goes on: the concat is joining the movie.
    public var joining: Bool { TimeLeft.joining(framesDone: done, framesTotal: total, known: known) }

    /// What a progress line shows for the time left (`TimeLeft.text`).
    public var etaText: String { etaText(speed: nil) }
    /// `speed`: frames a slot renders a second elsewhere, for a run with no rate of its own
    /// (`TimeLeft.seconds`); without one, what its render costs say (`TimeLeft.nominalSpeed`).
    public func etaText(speed: Double?) -> String {
        if waitingForWorker { return Self.waitingText }
        return TimeLeft.text(framesDone: done, framesTotal: total, known: known, rendered: rendered, renderingFor: renderingTime,
                             slots: slots, speed: speed ?? TimeLeft.nominalSpeed(costPerFrame: costPerFrame))
    }

    /// As it stands `seconds` after it was told, for a display that redraws between words (a
    /// minute-long render would otherwise hold its ETA still for a minute): its renders in flight,
    /// and its time, that much further along.
    public func aged(by seconds: Double) -> RunProgress {
        guard seconds > 0 else { return self }
        var p = self
        p.elapsed += seconds
        if let t = renderingFor, t > 0 { p.renderingFor = t + seconds }
        if var s = slots { s.inFlightSeconds += Double(s.inFlight) * seconds; p.slots = s }
        return p
    }

    // What `TimeLeft` is given: an absent figure is none; without the rate's own figures (an older
    // coordinator), the frames done over the whole elapsed time.
    private var done: Int { framesDone ?? 0 }
    private var total: Int { framesTotal ?? 0 }
    private var known: Bool { framesKnown == true }
    private var rendered: Int { framesRendered ?? done }
    private var renderingTime: Double { renderingFor ?? elapsed }
}

/// A batch's projects summed for its one total line. A project that has ended counts as it
/// stood: its frames done are all it will do (a failed project's unrendered frames are not left
/// to render, so they neither lengthen the time left nor keep the line from saying the movies are
/// being joined) and nothing of it is running.
///
/// The frames are weighed (`weight`): a project's frames count as its cost per frame over the
/// mean of the projects that say theirs, so that the rate the batch has rendered at so far holds
/// for what is left when its projects differ in size.
public struct BatchProgress: Sendable, Equatable {
    public var running = 0
    /// Planned frames, each project's weighed by `weight`.
    public var framesDone = 0, framesTotal = 0, rendered = 0
    /// The mean cost per frame of the projects told that say theirs (`RunProgress.costPerFrame`).
    public var meanCost: Double?
    /// Every project still going knows its length (and every project has been heard from).
    public var known: Bool
    /// The renders of the projects still going, on their slots; nil when one does not say.
    public var slots: TimeLeft.Slots?
    /// Projects not ended: the movies still to be made.
    public var going: Int

    /// `told`: each project heard from, as it stands now, and whether it has ended; `projects`
    /// and `ended`: how many there are in all and how many have ended (some without a word).
    public init(projects: Int, ended: Int, told: [(progress: RunProgress, ended: Bool)]) {
        known = told.count + ended - told.filter(\.ended).count >= projects
        going = projects - ended
        let costs = told.compactMap { $0.progress.costPerFrame }.filter { $0 > 0 }
        meanCost = costs.isEmpty ? nil : costs.reduce(0, +) / Double(costs.count)
        var slots = TimeLeft.Slots(renderSeconds: 0, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0), everySays = true
        for (p, over) in told {
            let w = weight(p)
            func weighed(_ frames: Int) -> Int { w == 1 ? frames : Int((Double(frames) * w).rounded()) }
            framesDone += weighed(p.framesDone ?? 0)
            // (Frames another project of the batch renders for it are counted there, once.)
            framesTotal += weighed(over ? p.framesDone ?? 0 : max(p.framesDone ?? 0, (p.framesTotal ?? 0) - (p.framesElsewhere ?? 0)))
            rendered += weighed(p.framesRendered ?? p.framesDone ?? 0)
            if let q = p.slots { slots.renderSeconds += q.renderSeconds } else { everySays = false }
            guard !over else { continue }
            running += p.running.count
            if p.framesKnown != true { known = false }
            if let q = p.slots { slots.inFlight += q.inFlight; slots.inFlightFrames += weighed(q.inFlightFrames); slots.inFlightSeconds += q.inFlightSeconds }
        }
        self.slots = everySays ? slots : nil
    }

    /// What one planned frame of `p` counts as in the sums: its cost per frame over the batch's
    /// mean; 1 when it does not say (an older coordinator, or none of its sources measured yet)
    /// or none does.
    public func weight(_ p: RunProgress) -> Double {
        guard let c = p.costPerFrame, c > 0, let meanCost else { return 1 }
        return c / meanCost
    }

    /// Weighed frames a slot renders a second over the batch's renders so far; before any has
    /// ended, what the projects' render costs say (`TimeLeft.nominalSpeed`).
    public var speed: Double? {
        slots.flatMap { TimeLeft.speed(frames: rendered, seconds: $0.renderSeconds) } ?? TimeLeft.nominalSpeed(costPerFrame: meanCost)
    }

    /// Frames of `p` a slot renders a second at the batch's rate: the rate of a project line
    /// whose project has rendered nothing of its own yet (its first items reused, or it waited
    /// behind the others). A 1080p project goes slower a frame than the 540p ones that set it.
    public func speed(for p: RunProgress) -> Double? { speed.map { $0 / weight(p) } }

    /// The time left as a progress line shows it, the batch rendering for `seconds` so far.
    public func text(renderingFor seconds: Double) -> String {
        TimeLeft.text(framesDone: framesDone, framesTotal: framesTotal, known: known, rendered: rendered,
                      renderingFor: seconds, slots: slots, speed: TimeLeft.nominalSpeed(costPerFrame: meanCost), movies: going)
    }
}

public enum RunOutcome: Sendable {
    /// `seconds`: the run's whole time at the coordinator (before a resume too).
    case succeeded(output: String, seconds: Double)
    case failed(message: String, seconds: Double)
}

/// The coordinator: owns a ROUTER socket and all scheduling state on one thread. Other threads
/// talk to it through `submit`, `cancel`, `workerExited` and `stop`. Workers and submitters
/// (`coord submit --coordinator`) connect to the same socket.
public final class Coordinator: Sendable {
    public struct Configuration: Sendable {
        public var bind: String
        public var heartbeatInterval: Double = 1
        /// A worker silent this long is dead and its stages go back to the queue.
        public var livenessTimeout: Double = 5
        /// Tries per stage for retryable failures.
        public var maxAttempts: Int = 3
        /// A stage whose attempts lost this many workers is poison.
        public var poisonAfterLostWorkers: Int = 3
        public var backoffBase: Double = 0.25
        /// The coordinator's artifact store: it keeps a copy of every artifact workers without a
        /// shared folder produce, serves inputs to them, and receives submitters' files. Nil: all
        /// workers share the paths the coordinator names (tests with fake runners).
        public var store: ArtifactStore? = nil
        /// Copy each finished movie to the pipeline's output path (the embedded default). A
        /// service keeps movies in its store; submitters download them.
        public var publishOutputs = true
        /// Tell workers to exit when the coordinator stops (the embedded default's own workers).
        public var shutdownWorkersOnStop = true
        /// On a graceful stop, how long in-flight attempts may finish before they are handed back.
        public var drainTimeout: Double = 10
        /// CURVE: encrypt, and admit only peers whose public keys are in the allow-list folder.
        public var curve: CurveSettings? = nil
        /// Resume runs handed to a coordinator service that a stopped coordinator left unfinished.
        public var resumeInterrupted = false
        /// The share of rendered stages (renders, transitions, the concat) rendered again on a
        /// second worker before their output is accepted (0…1). Every host encodes the same bits
        /// for the same stage key, so the two outputs must hash the same; when they differ a third
        /// worker decides and the worker in the minority is quarantined. The sample is drawn at
        /// random when a result arrives, so a worker cannot tell which of its stages are checked.
        public var verifyFraction: Double = 0
        /// The most stages one submitter key may have in unfinished runs (and submissions still
        /// uploading) at once; 0: no limit. Admins and local submitters are not limited. One
        /// person's script gone wrong cannot fill the coordinator's memory (about 1.5 KB a stage)
        /// for everyone: its further submissions are refused, saying why, until some runs end.
        public var maxStagesPerKey: Int = 100_000
        /// An attempt that runs this many seconds without an answer (a stage hung on its worker:
        /// a decoder in a loop, a read from a dead network mount) is stopped and tried again on
        /// another worker, as after any retryable failure; its run fails once the stage's
        /// attempts are spent. Longer stages get `stageTimeoutFactor` times what they should
        /// take (`timeLimit`). Nil: no limit.
        public var stageTimeout: Double? = 1800
        public var stageTimeoutFactor: Double = 20
        public init(bind: String) { self.bind = bind }
    }

    public struct CurveSettings: Sendable {
        public var keys: CurveKeyPair
        /// Allow-list folders of public keys, by the role a key there has.
        public var allow: [PeerRole: String]
        public init(keys: CurveKeyPair, allow: [PeerRole: String]) { self.keys = keys; self.allow = allow }
    }

    /// What the coordinator is doing now, for the dashboard and /metrics (refreshed 5 times a second).
    public struct Live: Sendable, Equatable {
        public struct Worker: Sendable, Equatable {
            public var id: String, host: String, slots: Int, busy: Int, heartbeatAgeS: Double, draining: Bool
            /// What each busy slot runs ("run 3: render/4").
            public var running: [String]
            /// Seconds it still gets no work for, stages that failed on it having succeeded elsewhere (nil: it takes work).
            public var sidelinedS: Double? = nil
            /// Artifacts its store holds as far as the coordinator knows (what placement counts).
            public var holds = 0
            /// How far its clock is behind the coordinator's in seconds (negative: ahead); nil
            /// within `WorkerClock.worthSaying` (`WorkerClock.farOff`).
            public var clockOffsetS: Double? = nil
        }
        /// Units ready and waiting for a slot (a render's decode+transform+encode is one unit).
        public var queueDepth = 0
        public var slotsBusy = 0
        public var slotsTotal = 0
        public var workers: [Worker] = []
        /// It stopped taking work (SIGTERM): not ready for more.
        public var draining = false
    }
    private let liveFigures = Mutex<Live?>(nil)
    /// Nil until the coordinator's socket is bound and its loop runs.
    public var live: Live? { liveFigures.withLock { $0 } }
    func publish(_ l: Live) { liveFigures.withLock { $0 = l } }

    /// Scheduler figures, for benchmarks and logs.
    public struct Stats: Sendable {
        public var dispatched = 0
        /// Seconds from a unit becoming ready to its attempt starting on a worker (sampled).
        public var readyToStarted: [Double] = []
        /// Of that, seconds the coordinator held the unit before sending it (same samples).
        public var readyToSent: [Double] = []
        /// Attempts sent while other stages their submit made ready were still to be prepared
        /// (`Coordinator.dispatchEachPrepared`).
        public var sentWhilePreparing = 0
    }

    enum Command {
        case submit(Pipeline, priority: Int, @Sendable (Result<Int64, Error>) -> Void)
        case workerExited(pid: Int32)
        case stop(graceful: Bool, within: Double?)
        case forget(before: Double, @Sendable (Result<ForgetReport, Error>) -> Void)
    }

    let config: Configuration
    let lineage: LineageStore
    let logger: Logger
    private let inbox = Mutex<[Command]>([])
    /// Rings when a command is queued, so the coordinator thread takes it at once (not after its poll's timeout).
    let commandWakeup = Wakeup()
    private let observers = Mutex<[@Sendable (RunProgress?, Int64, RunOutcome?) -> Void]>([])
    private let boundEndpoint = Mutex<String?>(nil)
    private let ready = DispatchSemaphore(value: 0)
    private let stoppedSignal = DispatchSemaphore(value: 0)
    private let startError = Mutex<Error?>(nil)
    /// Why the coordinator stopped on its own (a lineage write failed), if it did.
    public let failure = Mutex<String?>(nil)
    public let stats = Mutex(Stats())

    public init(_ config: Configuration, lineage: LineageStore, logger: Logger) {
        self.config = config; self.lineage = lineage; self.logger = logger
    }

    /// Starts the coordinator thread; returns the endpoint actually bound.
    public func start(context: MessagingContext) throws -> String {
        // Held by its caller, not by this thread, which needs it only until its socket exists:
        // the caller's release of it then terminates it (waiting for the socket's last words,
        // `lastWordsMs`) before the process exits, not this thread's end, at any time after.
        weak let held = context
        let thread = Thread { [self] in
            do {
                guard let context = held else { throw PipelineError("the coordinator's messaging context was released before it started", at: nil) }
                let core = try CoordinatorCore(self, context: context)
                boundEndpoint.withLock { $0 = core.endpoint }
                ready.signal()
                core.loop()
            } catch {
                startError.withLock { $0 = error }
                ready.signal()
            }
            stoppedSignal.signal()
        }
        thread.name = "coordinator"
        thread.stackSize = 16 << 20
        thread.start()
        ready.wait()
        if let e = startError.withLock({ $0 }) { throw e }
        return boundEndpoint.withLock { $0! }
    }

    public func submit(_ pipeline: Pipeline, priority: Int = 0, reply: @escaping @Sendable (Result<Int64, Error>) -> Void) {
        let queued = inbox.withLock { inbox -> Bool in
            guard !hasStopped.withLock({ $0 }) else { return false }
            inbox.append(.submit(pipeline, priority: priority, reply))
            return true
        }
        if queued { commandWakeup.signal() } else { reply(.failure(stoppedError)) }
    }

    /// Set once the coordinator thread has left its loop: submits are refused from then on.
    private let hasStopped = Mutex(false)
    var stoppedError: PipelineError {
        PipelineError(failure.withLock { $0 } ?? "the coordinator has stopped", at: nil)
    }

    /// Called by the coordinator thread as it stops: refuses what is still queued.
    func refuseQueued() {
        let left = inbox.withLock { inbox -> [Command] in
            hasStopped.withLock { $0 = true }
            let c = inbox; inbox = []; return c
        }
        for c in left {
            switch c {
            case .submit(_, _, let reply): reply(.failure(stoppedError))
            case .forget(_, let reply): reply(.failure(stoppedError))
            default: break
            }
        }
    }
    /// Forgets the records of runs that ended before `cutoff` (`LineageStore.forgetRuns`, one
    /// call's worth), on the coordinator thread: the artifact rows its live runs hold stay.
    public func forgetRuns(before cutoff: Double, reply: @escaping @Sendable (Result<ForgetReport, Error>) -> Void) {
        let queued = inbox.withLock { inbox -> Bool in
            guard !hasStopped.withLock({ $0 }) else { return false }
            inbox.append(.forget(before: cutoff, reply))
            return true
        }
        if queued { commandWakeup.signal() } else { reply(.failure(stoppedError)) }
    }
    public func workerExited(pid: Int32) { inbox.withLock { $0.append(.workerExited(pid: pid)) }; commandWakeup.signal() }
    /// The process ids workers said hello with: the embedded cluster tells a worker that died
    /// before joining (it cannot start) from one that died at work.
    let joinedPIDs = Mutex<Set<Int>>([])
    public func hasJoined(pid: Int32) -> Bool { joinedPIDs.withLock { $0.contains(Int(pid)) } }
    /// Graceful: stop dispatching, let in-flight attempts finish (up to the drain timeout), hand
    /// the rest back and leave unfinished runs to be resumed. Otherwise stop at once.
    /// `within` overrides the configured drain timeout (0: hand everything back now).
    public func stop(graceful: Bool = false, within: Double? = nil) {
        inbox.withLock { $0.append(.stop(graceful: graceful, within: within)) }
        commandWakeup.signal()
    }
    /// Blocks until the coordinator thread has ended.
    public func waitUntilStopped() { stoppedSignal.wait(); stoppedSignal.signal() }
    /// Waits at most `timeout` seconds for the coordinator thread to end; false if it had not.
    public func waitUntilStopped(timeout: Double) -> Bool {
        guard stoppedSignal.wait(timeout: .now() + timeout) == .success else { return false }
        stoppedSignal.signal()
        return true
    }

    /// Called on the coordinator thread for every progress change and when runs end.
    public func observe(_ f: @escaping @Sendable (RunProgress?, Int64, RunOutcome?) -> Void) { observers.withLock { $0.append(f) } }

    func takeCommands() -> [Command] { inbox.withLock { let c = $0; $0 = []; return c } }
    func notify(_ p: RunProgress?, _ run: Int64, _ o: RunOutcome?) { for f in observers.withLock({ $0 }) { f(p, run, o) } }
}

extension Unit.Kind {
    /// The stage whose output a unit's result is: where a success without it failed.
    var outputStage: StageKind {
        switch self {
        case .fetch: .fetch
        case .render: .encode
        case .transition: .transition
        case .concat: .concat
        }
    }
}

/// A dispatchable unit of work: fetch/i, render/i (decode+transform+encode of item i), transition/b, concat.
/// A class, not a struct: the coordinator updates units in place many times per attempt, and
/// copying one (a dozen fields, half of them references) cost 8 % of its time at full load.
final class Unit {
    /// What the unit does: fetch/i, render/i (decode+transform+encode of item i), transition/b, concat.
    enum Kind { case fetch, render, transition, concat }
    let kind: Kind
    let name: String
    let item: Int?
    /// Lineage stage names this unit covers.
    let stages: [String]
    /// Their lineage row ids, in the same order (set once the run's rows exist).
    var stageRows: [Int64] = []
    init(kind: Kind, name: String, item: Int?, stages: [String]) {
        self.kind = kind; self.name = name; self.item = item; self.stages = stages
    }
    /// What `prepare` has to record on the unit's stage rows (ready, with its parameters and key)
    /// and has not yet: written with the dispatch when the unit goes out in the same turn of the
    /// coordinator's loop, else as a row of its own when the turn ends (or, outside a turn, when
    /// the feed does: `CoordinatorCore.recordReady`).
    var unrecordedReady: LineageStore.StageParameters?
    /// When its current attempt's stage became ready, on the wall clock: the ready→started figure
    /// compares it with the worker's start stamp.
    var readyAt = 0.0
    /// How long the coordinator held its current attempt ready before sending it.
    var held = 0.0
    /// When its current attempt was sent (`Clocks.steady`).
    var sentAt = 0.0
    var attemptIDs: [Int64] = []
    var task: TaskSpec?
    var key: String?
    /// Lineage id of the artifact offered for reuse, and the artifact.
    var reuseID: Int64?
    var reuse: ArtifactRef?
    /// Why its last attempt failed (recorded on the stage when it is retried).
    var lastError: String?
    /// Workers where its attempts failed, first to last, each once: a failure for good names
    /// them (a full disk or a broken library is that machine's to mend).
    var failedOn: [String] = []
    /// An attempt failed on `worker`: "after 3 attempts on workers w1, w2", as a failure for good
    /// ends (a full disk on one worker failed a project with no word of which).
    func failed(on worker: String, attempts n: Int) -> String {
        if !failedOn.contains(worker) { failedOn.append(worker) }
        return "after \(n) attempt\(n == 1 ? "" : "s") on worker\(failedOn.count == 1 ? "" : "s") \(failedOn.joined(separator: ", "))"
    }
    /// `lastError` after its worker was lost (told as a setback when lost, not again at the retry).
    static let workerLost = "worker lost"
    /// Why it fails, should the scheduler end its run on it: the message, and the stage kind that failed.
    var failure: (message: String, stage: StageKind?)?
    /// Verification (--verify): outputs so far, by the worker that made them.
    var verifyOutputs: [(worker: String, sha256: String, result: TaskResult, attemptIDs: [Int64])] = []
}

/// A run's media side: what its units make and read. Which unit is ready, running or done, and
/// on which worker, is the scheduler's (`FarmScheduler`); unit indices are its node numbers.
final class RunState {
    let id: Int64
    let pipeline: Pipeline
    let stageIDs: [String: Int64]
    let priority: Int
    /// Files named by the pipeline on a remote submitter's host → their copies in the coordinator's store.
    let files: [String: ArtifactRef]
    /// The CURVE key of who submitted it (nil: local, or a coordinator without CURVE).
    var ownerKey: String? = nil
    var units: [Unit]
    var unitIndex: [String: Int] = [:]
    var facts: [Int: MediaFacts] = [:]
    /// What planning did that the pipeline did not say, by item, told as each source is fetched
    /// (`Planner.note`): the submitter prints it, the run page lists it (lineage event `item.note`).
    var notes: [Int: [String]] = [:]
    /// Every note, in item order.
    var notesInOrder: [String] { notes.sorted { $0.key < $1.key }.flatMap(\.value) }
    /// What set it back on the farm (`RunProgress.setbacks`), the last `setbacksKept`.
    var setbacks: [String] = []
    static let setbacksKept = 20
    func setBack(_ line: String) {
        setbacks.append(line)
        if setbacks.count > Self.setbacksKept { setbacks.removeFirst(setbacks.count - Self.setbacksKept) }
    }
    var sources: [Int: (ArtifactRef, Int64)] = [:]       // artifact + lineage artifact id
    var segments: [Int: (ArtifactRef, Int64)] = [:]
    var transitions: [Int: (ArtifactRef, Int64)] = [:]
    /// The lineage artifacts of the other files its renders and concat read (fonts, stickers,
    /// the watermark, the soundtrack), by role and path ("sticker:/…"): recorded once (`Coordinator.fileInputs`).
    var fileArtifacts: [String: Int64] = [:]
    var transitionCount = 0
    var frameCounts: [Int: Int] = [:]
    /// What each item's render should cost (`RenderCost`, milliseconds), once its source is
    /// measured: the run's cost per frame (`RunProgress.costPerFrame`).
    var renderCosts: [Int: Double] = [:]
    /// Milliseconds a planned frame should take to render, over the items whose cost is known.
    var costPerFrame: Double? {
        var cost = 0.0, frames = 0
        for (i, c) in renderCosts { if let n = frameCounts[i], n > 0 { cost += c; frames += n } }
        return frames > 0 && cost > 0 ? cost / Double(frames) : nil
    }

    /// Item → its planned frames weighed by what its render should cost: its cost over the run's
    /// cost per frame (`mean`), or the frames themselves while its cost is not known (a title, a
    /// source not measured yet). What the time left counts (`RunProgress.framesDone`): a phone
    /// library's project renders its 1080p HEVC clips first (the costliest go first) and its
    /// photos last, and counted alike, their frames read "ETA 0:15" with 4.8 s left.
    func weighedFrames(mean: Double?) -> (Int) -> Int {
        { [frameCounts, renderCosts] i in
            guard let n = frameCounts[i] else { return 0 }
            guard let mean, mean > 0, let c = renderCosts[i], c > 0 else { return n }
            return max(1, Int((c / mean).rounded()))
        }
    }
    /// Items whose segment this run rendered itself (not reused), and when its first render was
    /// sent: the ETA's rate (`RunProgress.framesRendered`, `renderingFor`).
    var renderedItems: Set<Int> = []
    /// A resumed run's items rendered under the coordinator before: counted done while the
    /// checks of their segments wait for a worker (a restarted coordinator with none yet read
    /// "0/3 items" for a run with two of three rendered), until a check finds one gone.
    var kept: Set<Int> = []
    var firstRenderSent: Double?
    /// Seconds its own finished renders took, each from when it was sent (`TimeLeft.Slots`).
    var renderSeconds = 0.0
    var timeline: [ItemTiming]?
    var finished = false
    var succeeded = false
    /// Why it was cancelled.
    var cancelReason: String?
    var output: ArtifactRef?
    /// Which units wait for which (from the plan).
    let dependencies: [[Int]]
    var lastProgress = 0.0
    /// When the run started on this coordinator's clock (`Clocks.steady`: for durations only): when
    /// it took the run on, less what a resumed run had run before (`ranBefore`), so the seconds it
    /// reports are its whole duration, as lineage counts it.
    let startedAt: Double

    init(id: Int64, pipeline: Pipeline, stageIDs: [String: Int64], priority: Int = 0, files: [String: ArtifactRef] = [:], ranBefore: Double = 0) {
        self.id = id; self.pipeline = pipeline; self.stageIDs = stageIDs; self.priority = priority; self.files = files
        startedAt = Clocks.steady - ranBefore
        var units: [Unit] = []
        for i in pipeline.items.indices {
            units.append(Unit(kind: .fetch, name: "fetch/\(i)", item: i, stages: ["fetch/\(i)"]))
            units.append(Unit(kind: .render, name: "render/\(i)", item: i, stages: ["decode/\(i)", "transform/\(i)", "encode/\(i)"]))
        }
        for b in Planner.transitionStageBoundaries(pipeline) {
            units.append(Unit(kind: .transition, name: "transition/\(b)", item: b, stages: ["transition/\(b)"]))
            transitionCount += 1
        }
        units.append(Unit(kind: .concat, name: "concat", item: nil, stages: ["concat"]))
        self.units = units
        for (k, u) in units.enumerated() {
            unitIndex[u.name] = k
            u.stageRows = u.stages.map { stageIDs[$0]! }
        }
        dependencies = RunState.dependencies(units, pipeline)
    }

    /// The plan's dependencies between units: a unit waits for the units that hold its stages'
    /// dependencies. The frame-exact timeline needs every item's length, so transitions and the
    /// concat (and, with a length cap, every render, fitted to it) also wait for every fetch.
    static func dependencies(_ units: [Unit], _ pipeline: Pipeline) -> [[Int]] {
        var unitOfStage: [String: Int] = [:]
        for (k, u) in units.enumerated() { for s in u.stages { unitOfStage[s] = k } }
        var deps = Array(repeating: Set<Int>(), count: units.count)
        for stage in Planner.stages(for: pipeline) {
            guard let k = unitOfStage[stage.id] else { continue }
            for d in stage.dependencies { if let j = unitOfStage[d], j != k { deps[k].insert(j) } }
        }
        let fetches = units.indices.filter { units[$0].kind == .fetch }
        for (k, u) in units.enumerated() where u.kind == .transition || u.kind == .concat || (u.kind == .render && pipeline.output.maxDuration != nil) {
            deps[k].formUnion(fetches)
        }
        return deps.map { $0.sorted() }
    }

    func index(of name: String) -> Int? { unitIndex[name] }
    func ref(_ ui: Int) -> StageRef { StageRef(run: id, node: ui) }

    /// The run as the scheduler takes it: the plan's graph of units, joining work (all but the
    /// renders) short; `done`: units complete before anything runs.
    func schedulerSpec(maxAttempts: Int, done: [Int]) -> FarmScheduler.RunSpec {
        .init(id: id, priority: priority, dependencies: dependencies, short: units.map { $0.kind != .render },
              maxAttempts: maxAttempts, done: done, owner: ownerKey)
    }

    /// Segments and transitions made so far, by the path a concat names them by.
    func renderedByPath() -> [String: ArtifactRef] {
        var byPath: [String: ArtifactRef] = [:]
        for (a, _) in segments.values { byPath[a.path] = a }
        for (a, _) in transitions.values { byPath[a.path] = a }
        return byPath
    }

    /// The two segments a transition after item `b` reads, under the paths its task names; a
    /// segment is nil unless it is the file named.
    func transitionInputs(from: String, to: String, after b: Int) -> [(path: String, segment: ArtifactRef?)] {
        [(from, segments[b]?.0), (to, segments[b + 1]?.0)].map { path, seg in (path, seg?.path == path ? seg : nil) }
    }
}

/// How to reach a worker. Its slots, leases and whether it drains are the scheduler's.
struct WorkerInfo {
    var identity: Data
    /// The CURVE key it joined with (nil without CURVE): its later messages must come with it.
    var key: String?
    var hello: Hello
    var lastSeen: Double
    var lastSent: Double = 0
    /// The worker uses the coordinator's own store folder: nothing needs copying.
    var shared: Bool
    /// Its last retryable failure, for the word when it is sidelined.
    var lastFailure: String?
    /// How far its wall clock is off the coordinator's.
    var clock = WorkerClock()
}

/// Caps on what one peer's messages may make the coordinator do.
enum Limits {
    static let slotsPerWorker = 256
    /// Files one submission may bring (each item has at most a handful).
    static let filesPerSubmission = PipelineLoader.maxItems * 2
    static let pendingSubmissionsPerPeer = 4
}

/// A remote submission whose files are still on their way.
struct PendingSubmission {
    var identity: Data
    var peer: Peer
    var submission: Submission
    var waiting: Set<String>
}

/// All coordinator state; lives on the coordinator thread only.
final class CoordinatorCore {
    let owner: Coordinator
    let socket: Socket
    let endpoint: String
    var zap: ZapHandler?
    /// Keys whose loss of roles was logged (said once, until the key is back).
    var rolesLost: Set<String> = []
    var runs: [Int64: RunState] = [:]
    var workers: [String: WorkerInfo] = [:]
    /// Which stage is ready, running or done, on which worker, under which lease: all scheduling
    /// decisions. The coordinator feeds it events and carries out its effects.
    var scheduler: FarmScheduler
    var events = Deque<FarmScheduler.Event>()
    var feeding = false
    /// Set while a new submission's stages are prepared: each goes out as soon as it is prepared,
    /// not once all of them are (a run's fetches all become ready at its submit, and the first
    /// waited for every other's key and cache look-up), when the free slots take all of them
    /// (see `feed`). Set only where the tick right after the submit would have sent them (the
    /// turn's last submit command, a remote submission started as its message is handled), so
    /// that submissions started together still share the free slots. Not while an interrupted
    /// run resumes: its orphaned renders are registered after its stages are prepared, and must
    /// come first.
    var dispatchEachPrepared = false
    /// Stages the scheduler has asked to prepare (`Effect.prepare`) that are not prepared yet.
    var preparesPending = 0
    /// Inside a turn of `loop`: stages made ready are recorded at the turn's end (or with their
    /// dispatch, if a tick of the same turn sends them), not at the end of each feed.
    var inTurn = false
    /// Why a worker was lost, for the attempts its loss ends.
    var lostReason: [String: String] = [:]
    var transfers: Transfers?
    /// Results whose artifact is being copied from the worker that made it: sha256 → results.
    /// The worker's result is acknowledged only once its artifact is here, so a draining worker
    /// keeps serving it until then.
    var awaitingUpload: [String: [(TaskResult, String, Data)]] = [:]
    /// Slots kept while the artifact of a result that makes another stage ready comes (by lease:
    /// the worker, and when the slot is freed anyway).
    var heldSlots: [String: (worker: String, until: Double)] = [:]
    static let slotHeldForUpload = 0.5
    var pendingSubmissions: [PendingSubmission] = []
    /// Which workers hold which artifacts, to send work where its inputs are.
    var holdings = Holdings()
    /// Submitters following a run.
    var watchers: [Int64: Set<Data>] = [:]
    /// The key each keyed watcher came with: one removed from the allow-lists stops being told.
    var watcherKeys: [Data: String] = [:]
    /// Runs whose progress changed this turn: told at the end of it, so what a result made ready
    /// and sent is in the same word (a render sent just after a result was shown as not running
    /// until the next result), at most ~8 times a second each.
    var progressOwed: Set<Int64> = []
    /// A render's output key → the render that makes it (the first prepared with it, while its run
    /// goes on): another run's render with that key waits for it and is a cache hit
    /// (`RunProgress.framesElsewhere`). Forgotten as runs end.
    var keyMakers: [String: StageRef] = [:]
    /// Renders this coordinator did not see end, by lease: an earlier coordinator's on this state
    /// folder (killed, or stopped past its drain timeout), of the runs this one resumed, and a
    /// lost worker's back (`lostRenders`). A worker still running one (its hello lists the lease)
    /// or reporting its result lets it finish, and its output is kept under its key for the
    /// waiting stage to reuse. Before, they were cancelled and rendered again from the start.
    var orphans: [String: OrphanedAttempt] = [:]
    /// Orphans whose result is in: the same result sent again (a worker sends what is not yet
    /// acknowledged each time it says hello) is dropped without a word.
    var orphansEnded: Set<String> = []
    /// Orphans their worker has told of (running, or its result): let finish.
    var orphansSeen: Set<String> = []
    /// How long a resumed stage waits for word of the render the last coordinator gave out
    /// (its worker reconnects with backoff, up to 5 s between tries), and then how long for its
    /// result once its worker is back without it.
    static let orphanWait = 10.0
    static let orphanResultWait = 2.0
    /// Renders of workers declared lost (silent past the liveness timeout: a network cut, a host
    /// suspended or stalled), by lease, with the lost worker's hello and when: should that worker
    /// come back still running one (or with its result) before the stage is given out again, the
    /// render finishes there and its output is kept, as an orphan's is. Before, the returning
    /// worker's render was cancelled and the stage rendered again from the start.
    var lostRenders: [String: (attempt: OrphanedAttempt, stage: StageRef, hello: Hello, at: Double)] = [:]
    /// The hello of each worker lost, for `lostRenders` (a worker that comes back as another process runs none of them).
    var lostHellos: [String: Hello] = [:]
    /// Leases a worker's heartbeat did not list, and when first (`reconcile`).
    var unlisted: [String: Double] = [:]
    /// How long a lost worker's renders are remembered.
    static let lostRenderMemory = 600.0
    var draining = false
    var drainDeadline = 0.0
    var lastLivenessCheck = 0.0
    var lastCheckpoint = 0.0
    var lastWatcherTick = 0.0
    var lastLivePublish = 0.0
    var droppedLogged = Every(1)
    var log: Logger { owner.logger }
    var lineage: LineageStore { owner.lineage }
    var config: Coordinator.Configuration { owner.config }

    init(_ owner: Coordinator, context: MessagingContext) throws {
        self.owner = owner
        var sc = FarmScheduler.Configuration(epoch: String(UUID().uuidString.prefix(8)))
        sc.backoffBase = owner.config.backoffBase
        sc.poisonAfterLostWorkers = owner.config.poisonAfterLostWorkers
        scheduler = FarmScheduler(sc)
        socket = try Socket(context, .router)
        if let curve = owner.config.curve {
            let logger = owner.logger
            zap = try ZapHandler(context: context, domain: "threadline", allow: curve.allow) { why in
                logger.warning("refused a connection", metadata: ["reason": "\(why)"])
            }
            try socket.makeCurveServer(secretKey: curve.keys, domain: "threadline")
        }
        try socket.setHeartbeat(intervalMs: Int32(owner.config.heartbeatInterval * 1000), timeoutMs: Int32(owner.config.livenessTimeout * 1000))
        do { endpoint = try socket.bind(owner.config.bind) } catch { zap?.stop(); throw error }
        if let store = owner.config.store {
            let sock = socket
            transfers = Transfers(store: store) { peer, m, payload in
                var frames = [peer, Envelope(m).encoded()]
                if let payload { frames.append(payload) }
                return (try? sock.send(frames)) == true
            }
        }
        let interrupted = try owner.lineage.recoverInterrupted()
        if interrupted > 0 { owner.logger.warning("found runs interrupted by a stopped coordinator", metadata: ["runs": "\(interrupted)"]) }
        let gone = try owner.lineage.recoverWorkers()
        if gone > 0 { owner.logger.info("recorded workers of a stopped coordinator gone: their processes have ended", metadata: ["workers": "\(gone)"]) }
        if owner.config.resumeInterrupted { resumeInterrupted() }
    }

    func loop() {
        var stopping = false
        while !stopping {
            let commands = owner.takeCommands()
            var waiting = false
            // A command just taken (a submit) may have made work ready: dispatch it this turn, not after the timeout.
            // With nothing queued, running or draining, a turn waits up to 50 ms rather than 5:
            // messages and commands wake it at once, and its timers (liveness every 0.1 s, the
            // live view every 0.2 s) need no finer step. 200 idle turns a second cost a farm
            // doing nothing about 1 % of a core.
            let idle = commands.isEmpty && !draining && scheduler.liveLeaseCount == 0 && !scheduler.hasQueuedWork
            do { waiting = try socket.wait(timeoutMs: !commands.isEmpty ? 0 : idle ? 50 : 5, wakeup: owner.commandWakeup) } catch { log.error("poll failed: \(error)") }
            let now = Clocks.steady
            turnStartedAt = now
            if now - lastCheckpoint > 2 { try? lineage.checkpoint(); lastCheckpoint = now }
            // Submitters hear their run's id once its rows are committed.
            var replies: [(@Sendable (Result<Int64, Error>) -> Void, Result<Int64, Error>)] = []
            var forgotten: [(@Sendable (Result<ForgetReport, Error>) -> Void, Result<ForgetReport, Error>)] = []
            // One lineage transaction for everything this turn of the loop records.
            record("batch commit") { try lineage.batch {
                // A stage made ready by a result is sent by the tick after it: in a separate feed,
                // so its ready row was written on its own, then its dispatch's. Recorded at the
                // turn's end instead (the same transaction), it rides on the dispatch's update.
                inTurn = true
                defer { inTurn = false; if lineageFailure == nil { recordReady() } }
                // Commands first, in the same transaction: a submit's rows are one commit, and the
                // stages it made ready go out at once.
                // Only the turn's last submit sends its stages as it prepares them: those of a
                // batch's projects submitted in one turn wait for the tick after all of them, so
                // fair share divides the free slots between the projects. None does in a turn
                // that also stops the coordinator.
                let lastSubmit = commands.lastIndex { if case .submit = $0 { true } else { false } }
                let stops = commands.contains { if case .stop = $0 { true } else { false } }
                for (k, c) in commands.enumerated() {
                    switch c {
                    case .submit(let p, let priority, let reply):
                        dispatchEachPrepared = k == lastSubmit && !stops
                        replies.append((reply, Result { try submit(p, priority: priority) }))
                        dispatchEachPrepared = false
                    case .forget(let cutoff, let reply):
                        forgotten.append((reply, Result { try lineage.forgetRuns(submittedBefore: cutoff, held: heldArtifactRows()) }))
                    case .workerExited(let pid):
                        if let (id, _) = workers.first(where: { $0.value.hello.pid == Int(pid) && $0.value.hello.host == ProcessInfo.processInfo.hostName }) {
                            lose(worker: id, reason: "process exited")
                        }
                    case .stop(let graceful, let within):
                        if graceful && (!draining || within != nil) {
                            draining = true
                            feed(.stopDispatching)
                            drainDeadline = Clocks.steady + (within ?? config.drainTimeout)
                            log.info("stopping: no new work; waiting for in-flight stages", metadata: ["in_flight": "\(scheduler.liveLeaseCount)"])
                        } else {
                            stopping = true
                        }
                    }
                }
                // A turn ends at its first failed write: what it would handle next (a result of an
                // attempt whose row was never written) would build on a record that is not there.
                // Before, it went on, and a worker's result in the same turn crashed the
                // coordinator (an attempt id read from an empty list).
                if lineageFailure != nil { return }
                if !draining && scheduler.hasQueuedWork { feed(.tick) }
                if waiting {
                    do {
                        // At most 2000 messages or 0.1 s a turn: an upload's chunks keep coming as fast as
                        // they are taken, and a turn that took them for seconds sent no heartbeat
                        // meanwhile (its workers took the coordinator for gone).
                        var n = 0
                        let turnEnds = now + 0.1
                        while n < 2000, n == 0 || Clocks.steady < turnEnds, let (frames, peer) = try socket.receiveFromPeer() {
                            handle(frames, from: peer); n += 1
                            if lineageFailure != nil { break }
                            // What the message made ready goes out now, not after the rest of the turn's messages.
                            if !draining && scheduler.hasQueuedWork { feed(.tick) }
                        }
                    } catch {
                        log.error("receive failed: \(error)")
                    }
                }
                if lineageFailure != nil { return }
                if now - lastLivenessCheck > 0.1 { checkLiveness(now); lastLivenessCheck = now }
                for (lease, held) in heldSlots where now >= held.until {
                    heldSlots[lease] = nil
                    feed(.released(lease: lease, worker: held.worker), now: now)
                }
                if let transfers {
                    transfers.tick(now: now)
                    for (sha, from) in transfers.takeHandovers() { dropSubmissions(from: from, waitingFor: sha) }
                    for (sha, outcome) in transfers.takeCompleted() { transferDone(sha, outcome) }
                }
                if draining {
                    if (scheduler.liveLeaseCount == 0 && awaitingUpload.isEmpty) || now >= drainDeadline { handBack(); stopping = true }
                } else {
                    feed(.tick, now: now)
                }
            } }
            if let failure = lineageFailure {
                for (reply, result) in replies {
                    reply(result.flatMap { _ in .failure(PipelineError("the run could not be recorded: \(failure)", at: nil)) })
                }
                for (reply, _) in forgotten { reply(.failure(PipelineError("lineage could not be written: \(failure)", at: nil))) }
                stopForLineage(failure); stopping = true
            } else {
                for (reply, result) in replies { reply(result) }
                for (reply, result) in forgotten { reply(result) }
            }
            tellCommitted(failure: lineageFailure)
            // Nothing to workers or followers after `stopping` (a run's followers have had its stop
            // notice, `handBack`): each takes any message for a coordinator that is back, and a
            // follower then waited for a restart no longer than its --timeout (15 s) instead of the
            // minute it was told.
            if !stopping {
                heartbeat(now)
                if now - lastWatcherTick > 1 {
                    lastWatcherTick = now
                    dropRevokedWatchers()
                    for id in watchers.keys { if let r = runs[id] { progress(r, force: true) } }
                }
                tellOwedProgress()
            }
            if now - lastLivePublish > 0.2 { lastLivePublish = now; publishLive(now) }
        }
        owner.refuseQueued()
        // The workers it knew are not its any more: recorded as gone, or every `coord submit`
        // left its workers up in lineage for ever (the state folder's dashboard listed them all).
        if lineageFailure == nil && !workers.isEmpty { record("workersGone") { try lineage.workersGone(workers.keys.sorted()) } }
        if config.shutdownWorkersOnStop { for (_, w) in workers { send(.shutdown, to: w.identity) } }
        zap?.stop()
        // Its last words (`stopping` to its workers, with the renders they keep; cancels; a
        // run's end to its followers) leave after it: closed at once, what was still queued
        // behind a busy connection was dropped, and a worker never told took the coordinator for
        // lost 5 s later. They leave while the context lives; `zmq_ctx_term` waits for them.
        socket.close(lingerMs: Self.lastWordsMs)
    }

    /// How long a stopping coordinator's queued messages have to leave (a second, as a worker's).
    static let lastWordsMs: Int32 = 1000

    func publishLive(_ now: Double) {
        var l = Coordinator.Live()
        l.queueDepth = scheduler.queueDepth
        for (id, w) in workers.sorted(by: { $0.key < $1.key }) {
            let leases = scheduler.running(on: id)
            let running = leases.sorted().map { lease -> String in
                // Stopped (its run ended, or past its time limit) and not answered yet.
                guard let s = scheduler.stage(of: lease), let run = runs[s.run] else { return "\(lease): stopped, not answered yet" }
                return "run \(s.run): \(run.units[s.node].name)"
            }
            let draining = scheduler.isDraining(id)
            l.workers.append(.init(id: id, host: w.hello.host, slots: w.hello.slots, busy: leases.count, heartbeatAgeS: max(0, now - w.lastSeen),
                                   draining: draining, running: running, sidelinedS: scheduler.sidelined(id, now: now),
                                   holds: holdings.count(id), clockOffsetS: w.clock.farOff))
            // A worker not taking work (draining, sidelined) counts in neither, as on the farm page.
            if !draining && l.workers.last!.sidelinedS == nil { l.slotsTotal += w.hello.slots; l.slotsBusy += leases.count }
        }
        l.draining = draining
        owner.publish(l)
    }

    /// Set when a lineage write failed: the coordinator stops rather than run on with a record that
    /// no longer matches what happened.
    var lineageFailure: String?
    /// When this turn (and its lineage transaction) began: what went out before it is committed.
    var turnStartedAt = -Double.infinity

    /// Runs a lineage write; a failure is logged with what was being recorded and stops the coordinator.
    func record(_ what: String, _ body: () throws -> Void) {
        do { try body() } catch { lineageWriteFailed(what, error) }
    }

    /// A lineage write `what` refused with `error`: logged, and the coordinator stops at the end of the turn.
    func lineageWriteFailed(_ what: String, _ error: any Error) {
        log.critical("lineage write failed", metadata: ["write": "\(what)", "error": "\(error)", "database": "\(lineage.path)"])
        if lineageFailure == nil { lineageFailure = "lineage write '\(what)' failed: \(LineageStore.brief(error) ?? "\(error)")" }
    }

    func recorded<T>(_ what: String, _ body: () throws -> T) -> T? {
        var value: T?
        record(what) { value = try body() }
        return value
    }

    /// After a failed lineage write: every run still going ends for its observers with that error
    /// (they are left 'running' in the database, which the next coordinator marks interrupted),
    /// and the coordinator stops. A service's renders given out in an earlier turn (their attempt
    /// and key committed) go on on their workers, as after a kill: the coordinator started again
    /// on the mended folder keeps what they make. Before, they were cancelled and rendered again
    /// from the start on resume (9 renders of the demo in one check). One given out in this turn
    /// is cancelled: its attempt row may have gone with the turn's transaction, and a render no
    /// record knows of would be made for nobody.
    func stopForLineage(_ failure: String) {
        let message = lineageStopMessage(failure) + " to resume."
        log.critical("stopping: \(message)")
        owner.failure.withLock { $0 = message }
        _ = stopWorkers(keeping: { $0.sentAt < turnStartedAt })
        for run in runs.values where !run.finished {
            run.finished = true
            ended(run, state: .failed, message: message, output: nil)
            notifyWhenCommitted(run.id, .failed(message: message, seconds: Clocks.steady - run.startedAt))
        }
    }

    /// Graceful stop: attempts still running are cancelled and recorded lost, with why
    /// (`LineageStore.cancelledAsItStopped`, which `coord status` shows as no failure); their runs
    /// stay resumable. A service's renders still under way go on instead (`keepsGoing`): recorded
    /// lost as a killed coordinator's are, and kept by the coordinator that resumes their runs.
    func handBack() {
        for u in stopWorkers(keeping: { _ in true }) {
            for a in u.attemptIDs {
                record("attemptFinished") { try lineage.attemptFinished(a, state: .lost, started: nil, finished: Clocks.wall, errorClass: "retryable",
                                                                        errorMessage: LineageStore.coordinatorStopped) }
            }
        }
        // How it goes on: a service resumes its runs when it starts again; a run of the embedded
        // default (an interrupted `coord submit`) when its pipeline is submitted again.
        let reason = LineageStore.cancelledAsItStopped(resumesByItself: config.resumeInterrupted)
        for run in runs.values where !run.finished {
            record("interruptRun") { try lineage.interruptRun(run.id, reason: reason) }
            for w in watchers[run.id] ?? [] {
                sendWhenCommitted(.ended(RunEnd(run: run.id, state: RunStatus.interrupted.rawValue, message: "the coordinator stopped; the run resumes when it starts again",
                                   output: nil, outputPath: run.pipeline.output.path, seconds: Clocks.steady - run.startedAt)), to: w)
            }
        }
        // Submissions whose files were still coming: what came is kept for their next submit.
        transfers?.cutOff("the coordinator stopped")
        // Their submitters submit again to the coordinator that comes next, which asks only for
        // the rest (what came is kept for a day).
        for p in pendingSubmissions { send(.stopping(keep: []), to: p.identity) }
        pendingSubmissions = []
        log.info("stopped", metadata: ["runs_handed_back": "\(runs.values.filter { !$0.finished }.count)"])
    }

    /// Tells the workers this coordinator stops: the renders `keepsGoing` allows and `keeping`
    /// accepts go on (listed in each worker's `stopping`), every other stage under way is
    /// cancelled. Returns the renders that go on. The graceful stop and the lineage stop share it.
    func stopWorkers(keeping: (Unit) -> Bool) -> [Unit] {
        var kept: [String: [String]] = [:], units: [Unit] = []
        for (lease, w) in scheduler.liveLeases {
            guard let info = workers[w] else { continue }
            if let u = keepsGoing(lease, on: w), keeping(u) {
                kept[w, default: []].append(lease)
                units.append(u)
            } else {
                send(.cancel(lease: lease), to: info.identity)
            }
        }
        if config.resumeInterrupted {
            // Every worker is told, so that one stopping too leaves at once (nobody to deliver to).
            for (id, w) in workers { send(.stopping(keep: kept[id] ?? []), to: w.identity) }
            if !units.isEmpty {
                log.info("renders still under way go on on their workers; the coordinator that resumes their runs keeps what they make", metadata: ["renders": "\(units.count)"])
            }
        }
        return units
    }

    /// The unit of a render that a stopping service lets go on on its worker after its drain
    /// timeout (nil: cancel it): its output key was recorded as it went out, so the coordinator
    /// that resumes its run keeps what it makes (`orphans`), as after a kill. Before, each such
    /// render was cancelled and made again from the start after the restart (a long 4K render
    /// lost at every upgrade of the coordinator). Not kept: a worker stopping too (it leaves),
    /// cache checks, and everything but renders (short, made again).
    func keepsGoing(_ lease: String, on worker: String) -> Unit? {
        guard config.resumeInterrupted, !scheduler.isDraining(worker), !scheduler.isCheck(lease),
              let s = scheduler.stage(of: lease), let run = runs[s.run], !run.finished else { return nil }
        let u = run.units[s.node]
        return u.kind == .render && u.key != nil && !u.attemptIDs.isEmpty ? u : nil
    }

    // MARK: submissions

    func submit(_ pipeline: Pipeline, priority: Int = 0) throws -> Int64 {
        let stages = Planner.stages(for: pipeline)
        // An interrupted run of the same pipeline continues; its succeeded stages come back as verified cache hits.
        let (resumed, (runID, ids)) = try recordingRun(pipeline.name) {
            let resumed = try lineage.resume(pipeline)
            return (resumed, try resumed.map { ($0.runID, $0.stageIDs) } ?? lineage.createRun(pipeline, stages: stages, priority: priority))
        }
        return try start(RunState(id: runID, pipeline: pipeline, stageIDs: ids, priority: priority, ranBefore: resumed?.secondsBefore ?? 0))
    }

    /// Records a new run's rows (`body`); a lineage error there refuses that submission alone,
    /// saying so without SQL. The coordinator goes on: the rows were one savepoint, so nothing of
    /// the run is left and the record stays true, and a submission no one could record (too big
    /// for SQLite, say) cannot stop a farm. A disk that is full fails the next write of any run,
    /// and that one stops it.
    func recordingRun<T>(_ name: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            guard let brief = LineageStore.brief(error) else { throw error }
            log.error("a run could not be recorded; its submission is refused", metadata: ["run.name": "\(name)", "error": "\(error)", "database": "\(lineage.path)"])
            throw PipelineError("the run could not be recorded in the lineage database \(lineage.path): \(brief)", at: nil,
                                hint: "check that database and its disk, then submit again")
        }
    }

    /// A remote submission whose files are all in the store now.
    func submit(_ s: Submission, ownerKey: String? = nil, resuming: (runID: Int64, stageIDs: [String: Int64], secondsBefore: Double)? = nil) throws -> Int64 {
        guard let store = config.store else { throw PipelineError("this coordinator has no artifact store", at: nil) }
        var files: [String: ArtifactRef] = [:]
        for f in s.files {
            let local = store.local(f)
            guard store.isPresent(local) else { throw PipelineError("the coordinator's copy of \(f.path) is missing (sha256 \(f.sha256.prefix(12))…); submit again", at: nil) }
            files[f.path] = local
        }
        let enc = JSONEncoder(); enc.outputFormatting = [.sortedKeys]
        let submission = String(decoding: try enc.encode(s), as: UTF8.self)
        let (runID, ids) = try resuming.map { ($0.runID, $0.stageIDs) } ?? recordingRun(s.pipeline.name) {
            try lineage.createRun(s.pipeline, stages: Planner.stages(for: s.pipeline), submitter: s.submitter, priority: s.priority,
                                  submission: submission, ownerKey: ownerKey)
        }
        let run = RunState(id: runID, pipeline: s.pipeline, stageIDs: ids, priority: s.priority, files: files, ranBefore: resuming?.secondsBefore ?? 0)
        run.ownerKey = try resuming == nil ? ownerKey : lineage.runOwnerKey(runID)
        if resuming != nil {
            let done = try lineage.succeededStages(runID: runID)
            for u in run.units where u.kind == .render && u.stages.allSatisfy(done.contains) { if let i = u.item { run.kept.insert(i) } }
        }
        return try start(run)
    }

    func resumeInterrupted() {
        let list: [(runID: Int64, submission: String, planning: Bool)]
        do { list = try lineage.interruptedSubmissions() } catch {
            // They stay interrupted, for the next start to resume.
            log.error("cannot read the interrupted runs to resume them: \(error)")
            return
        }
        for (runID, json, planning) in list {
            if planning {
                // The last coordinator stopped while planning this run: resuming it could stop this one too.
                log.error("not resuming run \(runID): planning it stopped the last coordinator", metadata: ["run.id": "\(runID)"])
                record("runFinished") { try lineage.runFinished(runID, state: .failed, error: "quarantined: planning this run stopped the coordinator, so it is not resumed; check the pipeline and submit it again") }
                continue
            }
            let s: Submission
            do { s = try JSONDecoder().decode(Submission.self, from: Data(json.utf8)) } catch {
                // Left interrupted, it would be skipped at every start with no word to anyone.
                log.error("cannot resume run \(runID): its stored submission cannot be read: \(error)", metadata: ["run.id": "\(runID)"])
                record("runFinished") {
                    try lineage.runFinished(runID, state: .failed, error: "could not resume: the submission stored with this run cannot be read (\(error)); submit the pipeline again")
                }
                continue
            }
            do {
                guard let resumed = try lineage.resume(runID: runID) else { continue }
                try lineage.setPlanning(runID, true)
                // Left marked, the next start would quarantine a run that planned fine.
                defer { record("planningDone") { try lineage.setPlanning(runID, false) } }
                if let problem = Self.submissionProblem(s) { throw PipelineError(problem, at: nil) }
                _ = try submit(s, resuming: (runID, resumed.stageIDs, resumed.secondsBefore))
                for o in try lineage.orphanedAttempts(runID: runID) {
                    // Waited for a while: its worker may be on its way back (on a farm of several,
                    // another that came back first would otherwise render it again).
                    awaitOrphan(o, until: Clocks.steady + Self.orphanWait)
                }
                log.info("resumed an interrupted run", metadata: ["run.id": "\(runID)", "run.name": "\(s.pipeline.name)"])
            } catch {
                log.error("cannot resume run \(runID): \(error)")
                record("runFinished") { try lineage.runFinished(runID, state: .failed, error: "could not resume: \(error)") }
            }
        }
    }

    func start(_ run: RunState) throws -> Int64 {
        let pipeline = run.pipeline, ids = run.stageIDs, runID = run.id
        runs[runID] = run
        // Items without a source (titles) have nothing to fetch: their frames are known now.
        let encoder = JSONEncoder(); encoder.outputFormatting = [.sortedKeys]
        var titles: [Int] = []
        for (i, item) in pipeline.items.enumerated() where item.sources.isEmpty {
            guard let fi = run.index(of: "fetch/\(i)") else { continue }
            titles.append(fi)
            run.frameCounts[i] = try Planner.frameCount(of: item, index: i, facts: nil, fps: pipeline.output.fps)
            try note(run, item: i, facts: nil)
            // {"title":{…}}, as a source's fetch records {"uri":…} (the item kind's own encoding reads {"title":{"_0":{…}}}).
            guard case .title(let title) = item.kind else { continue }
            try lineage.stageUpdate(ids["fetch/\(i)"]!, state: .succeeded, params: String(decoding: try encoder.encode(["title": title]), as: UTF8.self),
                                    finished: Clocks.wall, seconds: 0)
        }
        try updateTimeline(run)
        feed(.submit(run.schedulerSpec(maxAttempts: pipeline.retryAttempts ?? config.maxAttempts, done: titles)))
        log.info("run submitted", metadata: ["run.id": "\(runID)", "run.name": "\(pipeline.name)", "run.items": "\(pipeline.items.count)"])
        progress(run, force: true)
        return runID
    }

    /// Stops a run: its attempts are cancelled on their workers (whose slots free as they answer).
    func cancel(run id: Int64, reason: String) -> Bool {
        guard let run = runs[id], !run.finished else { return false }
        run.cancelReason = reason
        feed(.cancel(run: id))
        return true
    }

    // MARK: messages

    func handle(_ frames: [Data], from peer: Peer = .local) {
        guard frames.count == 2 || frames.count == 3, !frames[0].isEmpty, let id = String(data: frames[0], encoding: .utf8) else {
            dropped("malformed message", ["frames": "\(frames.count)"])
            return
        }
        guard let envelope = Envelope.decode(frames[1]) else {
            dropped("undecodable message", ["peer": "\(id.prefix(64))", "bytes": "\(frames[1].count)",
                                             "reason": "\(Envelope.refusal(frames[1]).map(String.init(describing:)) ?? "unknown")"])
            return
        }
        let identity = frames[0]
        let payload = frames.count == 3 ? frames[2] : nil
        let now = Clocks.steady
        let peer = rolesNow(peer, id: id, identity: identity)
        if let refusal = refusal(envelope.message, from: peer, id: id) {
            // (A key that lost its roles while connected was logged once; its heartbeats keep coming.)
            if !rolesLost.contains(peer.key ?? "") { dropped("message refused by role", ["peer": "\(peer.name)", "reason": "\(refusal)"]) }
            switch envelope.message {
            case .hello, .submit, .watch, .cancelRun, .status: send(.rejected(message: refusal), to: identity)
            case .pull(let sha, let offset, _): send(.chunk(Chunk(sha256: sha, offset: offset, total: 0, error: refusal)), to: identity)
            default: break
            }
            return
        }
        switch envelope.message {
        case .hello(let h):
            // A new process under a known id (restarted by systemd or Kubernetes within the
            // liveness timeout): what the old one ran is lost, not held for ever. Before, its
            // leases kept its slots busy and the stages stayed `running` with no one running them.
            if let old = workers[id], Self.isRestart(of: old.hello, h) {
                lose(worker: id, reason: "it was restarted: a new process joined under its id")
            }
            let known = workers[id]
            let shared = config.store == nil || h.storeID == nil || h.storeID == config.store?.id
            var info = WorkerInfo(identity: identity, key: peer.key, hello: h, lastSeen: now, shared: shared)
            // The same process again (a reconnect) keeps what its clock was found to be.
            if let known { info.clock = known.clock }
            if let sent = h.clock { info.clock.observe(sent: sent, received: Clocks.wall) }
            workers[id] = info
            adoptLostRenders(of: id, hello: h, now: now)
            // A render the last coordinator gave it before it was killed goes on (`orphans`); one
            // it no longer runs may have ended while no coordinator was there: its result follows.
            for lease in h.running ?? [] { _ = letOrphanFinish(lease, on: id, now: now) }
            for (lease, o) in orphans where o.worker == id && !(h.running ?? []).contains(lease) && scheduler.isOrphan(lease) {
                feed(.orphaned(lease: lease, key: o.key, worker: id, until: now + Self.orphanResultWait), now: now)
            }
            // What it still runs holds its slots until it reports them; leases nobody knows are cancelled.
            feed(.workerJoined(id, slots: h.slots, running: h.running ?? []), now: now)
            if h.draining == true { feed(.workerDraining(id), now: now) }
            record("workerSeen") { try lineage.workerSeen(id: id, host: h.host, pid: h.pid, slots: h.slots, version: h.version) }
            owner.joinedPIDs.withLock { _ = $0.insert(h.pid) }
            if known == nil {
                log.info("worker joined", metadata: ["worker.id": "\(id)", "worker.slots": "\(h.slots)", "worker.host": "\(h.host)",
                                                     "worker.store": "\(shared ? "shared" : "own")"])
            }
        case .heartbeat(let running, let sent):
            guard workers[id] != nil else { send(.reannounce, to: identity); return }   // declared lost, or we restarted
            workers[id]!.lastSeen = now
            if let sent { observeClock(of: id, sent: sent) }
            for lease in running where !scheduler.isLive(lease) && !scheduler.isOrphan(lease) { send(.cancel(lease: lease), to: identity) }
            reconcile(id, listed: running, identity: identity, now: now)
        case .result(var r):
            r = r.measurable(now: Clocks.wall)
            if workers[id] == nil, orphans[r.lease]?.worker == id || lostRenders[r.lease]?.attempt.worker == id {
                // A render the last coordinator gave out, whose result the worker queued while
                // no coordinator was there: it comes before the worker's hello. Not acknowledged
                // (that would drop it) but asked again once the worker has said who it is and
                // where it keeps its files (its upload depends on that).
                send(.reannounce, to: identity)
                return
            }
            if workers[id] != nil {
                workers[id]!.lastSeen = now
                // Its times as the coordinator's clock has them (see `WorkerClock`).
                observeClock(of: id, sent: r.finishedAt)
                r.startedAt = workers[id]!.clock.onCoordinatorsClock(r.startedAt)
                r.finishedAt = workers[id]!.clock.onCoordinatorsClock(r.finishedAt)
            }
            // The slot is free now; the result counts once its artifact is here. But a result
            // whose success makes another stage ready (a run's last render: its concat) keeps its
            // slot while the artifact comes, for up to `slotHeldForUpload`: freed at once, the
            // slot went to the next render in the queue (another run's, even one of lower
            // priority), and the concat, ready a moment later, waited for that whole render.
            let holds = heldSlots[r.lease] == nil && scheduler.current(r.lease, from: id) != nil && scheduler.successReadies(r.lease)
            if !holds { feed(.released(lease: r.lease, worker: id), now: now) }
            if !received(r, from: id, identity: identity) {
                if holds { feed(.released(lease: r.lease, worker: id), now: now) }
                ackWhenCommitted(r.lease, identity)
            } else if holds {
                heldSlots[r.lease] = (id, now + Self.slotHeldForUpload)
            }
        case .pull(let sha, let offset, let length):
            transfers?.serve(sha256: sha, offset: offset, length: length, to: identity)
            if workers[id] != nil { workers[id]!.lastSeen = now }
        case .chunk(let c):
            transfers?.received(c, payload: payload, now: now)
            if workers[id] != nil { workers[id]!.lastSeen = now }
        case .submit(let s):
            receiveSubmission(s, from: identity, peer: peer)
        case .watch(let run):
            if let key = peer.key { watcherKeys[identity] = key }
            watch(run, from: identity)
        case .cancelRun(let run):
            if cancel(run: run, reason: "cancelled by \(ClientIdentity.requester(id, key: peer.key))") {
                sendWhenCommitted(.ended(RunEnd(run: run, state: RunStatus.cancelled.rawValue, message: RunEnd.cancelledNow, output: nil, outputPath: "", seconds: 0)), to: identity)
            } else {
                watch(run, from: identity, once: true)
            }
        case .status(let run, let limit):
            do {
                var reply = try status(run, limit: limit, for: peer)
                reply.stopping = draining
                send(.statusReply(reply), to: identity)
            } catch {
                log.error("cannot answer a status request: \(error)")
                send(.rejected(message: "cannot read the lineage database to answer: \(error)"), to: identity)
            }
        case .draining(let running):
            guard workers[id] != nil else { return }
            feed(.workerDraining(id), now: now)
            workers[id]!.lastSeen = now
            record("workerState") { try lineage.workerState(id: id, state: .draining) }
            log.info("worker draining", metadata: ["worker.id": "\(id)", "in_flight": "\(running.count)"])
        case .handBack(let lease):
            if workers[id] != nil { workers[id]!.lastSeen = now }
            if orphanHandedBack(lease, by: id, now: now) { return }
            feed(.handedBack(lease: lease, worker: id), now: now)
        case .leaving:
            leave(worker: id, now: now)
        case .dropped(let shas):
            guard workers[id] != nil else { return }
            workers[id]!.lastSeen = now
            holdings.drop(shas, from: id)
        case .assign, .cancel, .shutdown, .ack, .reannounce, .accepted, .rejected, .progress, .ended, .statusReply, .notice, .stopping:
            dropped("message a coordinator does not take", ["peer": "\(id.prefix(64))"])
        }
    }

    /// Why `peer` may not send `message`, or nil when it may. Roles come from the allow-list
    /// folder its key is in (`Peer`); runs belong to the key that submitted them.
    func refusal(_ message: WireMessage, from peer: Peer, id: String) -> String? {
        switch message {
        case .hello(let h):
            guard peer.is(.worker) else {
                return rolesLost.contains(peer.key ?? "") ? Self.keyRemoved : "this key is not a worker key: it may not register as a worker"
            }
            if quarantined.contains(peer.key ?? "id:" + id) { return "this worker is quarantined: its output differed from other workers' for the same stage (see the coordinator's log)" }
            if let known = workers[id], known.key != peer.key { return "worker id \(id.prefix(64)) is already taken by another key" }
            guard (1...Limits.slotsPerWorker).contains(h.slots) else { return "slots must be 1…\(Limits.slotsPerWorker), got \(h.slots)" }
            guard (h.running?.count ?? 0) <= Limits.slotsPerWorker * 4 else { return "a hello lists at most \(Limits.slotsPerWorker * 4) running leases" }
            // Its renders would be stored under keys this coordinator made for its own engine, and
            // served from the cache to every later run as if this engine had made them.
            guard h.engine == Planner.engineID else {
                return "this worker (Threadline \(h.version), engine \(h.engine ?? "unnamed: older than 0.4")) renders differently from this coordinator's engine \(Planner.engineID): run the same Threadline version on workers and coordinator"
            }
        case .heartbeat, .result, .draining, .handBack, .leaving, .dropped:
            guard peer.is(.worker) else { return "only worker keys report work" }
            if quarantined.contains(peer.key ?? "id:" + id) { return "this worker is quarantined" }
            if let known = workers[id], known.key != peer.key { return "worker id \(id.prefix(64)) belongs to another key" }
        case .submit:
            guard peer.is(.submitter) else { return "this key may not submit (it is not in the submitters' allow-list)" }
        case .watch(let run), .cancelRun(let run):
            guard mayAccess(run: run, peer) else { return "no run \(run) of yours on this coordinator" }
        case .status(let run, _):
            guard peer.is(.submitter) || peer.is(.admin) else { return "this key may not see runs" }
            if let run, !mayAccess(run: run, peer) { return "no run \(run) of yours on this coordinator" }
        case .pull(let sha, _, _):
            guard peer.is(.worker) || mayDownload(sha256: sha, peer) else { return "not an artifact of yours" }
        case .chunk:
            break   // only chunks this coordinator asked for are taken, and each file is checked against its sha256
        case .assign, .cancel, .shutdown, .ack, .reannounce, .accepted, .rejected, .progress, .ended, .statusReply, .notice, .stopping:
            break
        }
        return nil
    }

    /// Admins and local peers see every run; a submitter only those its key submitted.
    func mayAccess(run: Int64, _ peer: Peer) -> Bool {
        if peer.seesEveryRun { return true }
        guard peer.is(.submitter) else { return false }
        if let r = runs[run] { return r.ownerKey == peer.key }
        return (try? lineage.runOwnerKey(run)) == .some(peer.key)
    }

    /// A submitter downloads only the movies of its own runs.
    func mayDownload(sha256: String, _ peer: Peer) -> Bool {
        if peer.seesEveryRun { return true }
        guard peer.is(.submitter), let key = peer.key else { return false }
        return (try? lineage.movieOwned(sha256: sha256, byKey: key)) ?? false
    }

    /// `peer` with only the roles its key still has in the allow-lists. ZeroMQ checks a key once,
    /// at the handshake; an operator who removes a key (a host retired, a laptop lost) means it
    /// to stop now: a worker so cut off is lost (its stages go to others) and told why.
    func rolesNow(_ peer: Peer, id: String, identity: Data) -> Peer {
        guard let key = peer.key, let zap else { return peer }
        var left = peer
        left.roles.formIntersection(zap.roles(of: key))
        guard left.roles != peer.roles else {
            if !rolesLost.isEmpty { rolesLost.remove(key) }   // (its key is back)
            return peer
        }
        if rolesLost.insert(key).inserted {
            let lost = peer.roles.subtracting(left.roles).map(\.rawValue).sorted().joined(separator: ", ")
            log.warning("a connected key was removed from the allow-lists: its messages as \(lost) are refused from now on",
                        metadata: ["peer": "\(peer.name)", "roles_left": "\(left.roles.map(\.rawValue).sorted().joined(separator: ", "))"])
        }
        if !left.is(.worker), let w = workers[id], w.key == key {
            // Its stages stop there and go to other workers; what it still sends is refused.
            for lease in scheduler.running(on: id) { send(.cancel(lease: lease), to: identity) }
            lose(worker: id, reason: "its key was removed from the workers' allow-list")
            send(.rejected(message: Self.keyRemoved), to: identity)
        }
        return left
    }

    static let keyRemoved = "this worker's key was removed from the coordinator's allow-list: it gets no work"

    /// Followers whose key was removed from the allow-lists since they began (a laptop lost, a
    /// person gone) stop being told their runs' progress: they are told why, once. (A watcher
    /// sends nothing while it is told, so the per-message check never saw it.)
    func dropRevokedWatchers() {
        guard let zap, !watcherKeys.isEmpty else { return }
        let watching = watchers.values.reduce(into: Set<Data>()) { $0.formUnion($1) }
        for (identity, key) in watcherKeys {
            guard watching.contains(identity) else { watcherKeys[identity] = nil; continue }
            let roles = zap.roles(of: key)
            guard !roles.contains(.submitter) && !roles.contains(.admin) else { continue }
            watcherKeys[identity] = nil
            for run in Array(watchers.keys) { watchers[run]?.remove(identity); if watchers[run]?.isEmpty == true { watchers[run] = nil } }
            log.warning("a follower's key was removed from the allow-lists: it is told no more", metadata: ["key": "\(key.prefix(8))"])
            send(.rejected(message: "this key was removed from the coordinator's allow-list: it may no longer follow runs"), to: identity)
        }
    }

    /// Takes a worker's message stamped `sent` by its clock as a measure of how far that clock is
    /// off; says so in the log once when it is off by more than a little.
    func observeClock(of id: String, sent: Double) {
        workers[id]!.clock.observe(sent: sent, received: Clocks.wall)
        if let offset = workers[id]!.clock.shouldTell() {
            log.warning("""
                this worker's clock is \(String(format: "%.1f", abs(offset))) s \(offset > 0 ? "behind" : "ahead of") the coordinator's: \
                its attempts' times are recorded on the coordinator's clock. Keep the hosts' clocks in sync (NTP, chrony or systemd-timesyncd).
                """, metadata: ["worker.id": "\(id)", "worker.host": "\(workers[id]!.hello.host)"])
        }
    }

    /// Logs dropped messages, at most once a second (a flood must not flood the log).
    func dropped(_ what: String, _ meta: Logger.Metadata) {
        if droppedLogged.due() { log.warning("dropped a \(what)", metadata: meta) }
    }

    func send(_ m: WireMessage, to identity: Data) {
        _ = try? socket.send([identity, Envelope(m).encoded()])
    }

    /// Artifact rows the live runs hold by id (their sources, segments, transitions and files).
    func heldArtifactRows() -> Set<Int64> {
        var held = Set<Int64>()
        for r in runs.values {
            for (_, id) in r.sources.values { held.insert(id) }
            for (_, id) in r.segments.values { held.insert(id) }
            for (_, id) in r.transitions.values { held.insert(id) }
            held.formUnion(r.fileArtifacts.values)
        }
        return held
    }

    func heartbeat(_ now: Double) {
        for (id, w) in workers where now - w.lastSent >= config.heartbeatInterval {
            send(.heartbeat(running: scheduler.running(on: id)), to: w.identity)
            workers[id]!.lastSent = now
        }
    }

    // MARK: submitters

    func receiveSubmission(_ s: Submission, from identity: Data, peer: Peer = .local) {
        // A restart or an upgrade under way: the submitter waits for the coordinator that comes
        // next and submits again (before, it failed: "submit again when it is back").
        guard !draining else {
            log.info("a project came as this coordinator stops: its submitter submits it to the next one", metadata: ["project": "\(s.pipeline.name)"])
            send(.stopping(keep: []), to: identity)
            return
        }
        guard let store = config.store, let transfers else { send(.rejected(message: "this coordinator has no artifact store"), to: identity); return }
        // Sent again (its submitter dialled this coordinator again: a restart, a network blip):
        // answered with the run it made, or left to the upload under way.
        if let id = s.id {
            if pendingSubmissions.contains(where: { $0.submission.id == id && $0.peer.key == peer.key }) { return }
            do {
                if let run = try lineage.submittedRun(id: id, ownerKey: peer.key) {
                    log.info("a submission came again: it made a run already", metadata: ["run.id": "\(run)", "run.name": "\(s.pipeline.name)"])
                    acceptWhenCommitted(run, identity)
                    return
                }
            } catch {
                log.error("cannot look up a submission sent again: \(error)", metadata: ["run.name": "\(s.pipeline.name)"])
                send(.rejected(message: "cannot read the lineage database to look up the submission: \(error)"), to: identity)
                return
            }
        }
        if let problem = Self.submissionProblem(s) { send(.rejected(message: problem), to: identity); return }
        let copying = pendingSubmissions.filter { $0.identity == identity }.count
        guard copying < Limits.pendingSubmissionsPerPeer else {
            send(.rejected(message: "\(copying) submissions of yours are still uploading; wait for them to be accepted"), to: identity); return
        }
        if let problem = overQuota(s, from: peer) { send(.rejected(message: problem), to: identity); return }
        var pending = PendingSubmission(identity: identity, peer: peer, submission: s, waiting: [])
        var kept: Int64 = 0
        for f in s.files where !store.isPresent(store.local(f)) && !pending.waiting.contains(f.sha256) {
            pending.waiting.insert(f.sha256)
            kept += transfers.fetch(f, from: identity)
        }
        var said: Logger.Metadata = ["run.name": "\(s.pipeline.name)", "files": "\(s.files.count)", "to_copy": "\(pending.waiting.count)"]
        if kept > 0 { said["resumed_bytes"] = "\(kept)" }
        log.info("submission received", metadata: said)
        // Started as its message is handled (its files were all here), its stages go out as they
        // are prepared: the tick after this message would send them before the next is handled.
        // Those whose uploads end in the same turn start together, and wait for the tick.
        if pending.waiting.isEmpty {
            dispatchEachPrepared = true
            defer { dispatchEachPrepared = false }
            startSubmission(pending)
        } else {
            pendingSubmissions.append(pending)
        }
    }

    /// Why a submitter's submission would take it past `maxStagesPerKey`, or nil. Counted before
    /// anything is uploaded: the stages of the key's unfinished runs and of its submissions still
    /// uploading, and this one's.
    func overQuota(_ s: Submission, from peer: Peer) -> String? {
        let limit = config.maxStagesPerKey
        guard limit > 0, let key = peer.key, !peer.seesEveryRun else { return nil }
        let stages = { (p: Pipeline) in Planner.stages(for: p).count }
        let held = runs.values.reduce(0) { $0 + ($1.ownerKey == key && !$1.finished ? $1.stageIDs.count : 0) }
            + pendingSubmissions.reduce(0) { $0 + ($1.peer.key == key ? stages($1.submission.pipeline) : 0) }
        let wanted = stages(s.pipeline)
        guard held + wanted > limit else { return nil }
        return "this coordinator takes at most \(limit) stages of unfinished runs a submitter; yours hold \(held) and \(s.pipeline.name) "
            + "needs \(wanted). Submit it once some of your runs have ended (`coord runs` lists them), or ask the operator (coord serve --max-stages-per-key)"
    }

    /// Why a remote submission is refused before anything is copied or planned, or nil. It may
    /// touch only what it brought: every local file its pipeline names must be among its uploaded
    /// files (a worker never reads its own host's files for a submitter), other sources must be
    /// http(s) URLs, and its numbers must be within the loader's bounds.
    static func submissionProblem(_ s: Submission) -> String? {
        guard s.files.count <= Limits.filesPerSubmission else {
            return "a submission brings at most \(Limits.filesPerSubmission) files, this one \(s.files.count)"
        }
        guard s.files.allSatisfy({ $0.sha256.utf8.count == 64 && $0.sha256.allSatisfy(\.isHexDigit) && $0.size >= 0 && $0.path.hasPrefix("/") }) else {
            return "malformed submission: each file needs an absolute path, a sha256 and a size"
        }
        if let problem = s.pipeline.boundsProblem { return "\(s.pipeline.file): \(problem)" }
        let brought = Set(s.files.map(\.path))
        for (i, item) in s.pipeline.items.enumerated() {
            for src in item.sources where !brought.contains(src.uri) {
                guard src.isRemote, URL(string: src.uri)?.host != nil else {
                    return "\(item.label(index: i)): \(src.uri) is neither an uploaded file nor an http(s) URL; this coordinator reads only what a submission brings"
                }
            }
        }
        for f in s.pipeline.files where !brought.contains(f.path) {
            return "\(f.role.rawValue) \(f.path) was not uploaded with the submission; this coordinator reads only what a submission brings"
        }
        return nil
    }

    func startSubmission(_ p: PendingSubmission) {
        do {
            acceptWhenCommitted(try submit(p.submission, ownerKey: p.peer.key), p.identity)
        } catch {
            let why = PipelineError.line(error)
            log.warning("submission refused", metadata: ["run.name": "\(p.submission.pipeline.name)", "error": "\(why)"])
            send(.rejected(message: why), to: p.identity)
        }
    }

    /// What this turn tells submitters, observers and workers about what it recorded, held until
    /// the turn's lineage transaction has committed. Told at once, a submitter could look for its
    /// run in lineage before the row was there (CI did), a `coord submit` that exited on its run's
    /// end left a script reading `running`, and a coordinator killed before the commit had said
    /// "accepted" for a run it never recorded, or acknowledged a result it never recorded (its
    /// worker, draining, exited; or trimmed the output from its store).
    enum Told {
        case accepted(run: Int64, to: Data)
        case ack(lease: String, to: Data)
        case message(WireMessage, to: Data)
        case outcome(run: Int64, RunOutcome)
    }
    var told: [Told] = []

    func acceptWhenCommitted(_ run: Int64, _ identity: Data) { told.append(.accepted(run: run, to: identity)) }
    func ackWhenCommitted(_ lease: String, _ identity: Data) { told.append(.ack(lease: lease, to: identity)) }
    func sendWhenCommitted(_ m: WireMessage, to identity: Data) { told.append(.message(m, to: identity)) }
    func notifyWhenCommitted(_ run: Int64, _ outcome: RunOutcome) { told.append(.outcome(run: run, outcome)) }

    /// A run that ended well in a turn whose writes failed: its movie is out, but lineage does not
    /// say so. Told as a failure with the write's reason, as every other run of the coordinator
    /// stopping for it is (before: told succeeded, and the next coordinator found it interrupted).
    /// `output`: where the movie was written; nil: it is in this coordinator's store (a remote
    /// submitter downloads only what ended well, and submitting again brings it down).
    func unrecordedEnd(_ failure: String, output: String?) -> String {
        "\(output.map { "the movie was written to \($0)" } ?? "the movie was made"), but its run could not be recorded: " + lineageStopMessage(failure) + ": nothing is rendered again"
    }

    /// What a failed lineage write means for whoever submitted: why the coordinator stopped and
    /// what to do (each caller adds what submitting again does).
    func lineageStopMessage(_ failure: String) -> String {
        "\(failure); the coordinator stopped so the lineage database stays true. Check the disk and \(lineage.path), then submit again"
    }

    /// Tells what the turn held back. After a failed commit a run it accepted is not recorded: its
    /// submitter hears that instead; a result is not acknowledged, so its worker sends it again to
    /// the coordinator that comes next (ends are told as they are: `stopForLineage` adds the rest);
    /// a run's good end is told as `unrecordedEnd`.
    func tellCommitted(failure: String?) {
        let list = told
        told = []
        for t in list {
            switch t {
            case .accepted(let run, let identity):
                if let failure { send(.rejected(message: "the run could not be recorded: \(failure)"), to: identity) }
                else { send(.accepted(run: run), to: identity) }
            case .ack(let lease, let identity):
                if failure == nil { send(.ack(lease: lease), to: identity) }
            case .message(.ended(var end), let identity) where failure != nil && end.state == RunStatus.succeeded.rawValue:
                end.state = RunStatus.failed.rawValue
                end.message = unrecordedEnd(failure!, output: nil)
                send(.ended(end), to: identity)
            case .message(let m, let identity): send(m, to: identity)
            case .outcome(let run, .succeeded(let output, let seconds)) where failure != nil:
                owner.notify(nil, run, .failed(message: unrecordedEnd(failure!, output: output), seconds: seconds))
            case .outcome(let run, let outcome): owner.notify(nil, run, outcome)
            }
        }
    }

    func watch(_ runID: Int64, from identity: Data, once: Bool = false) {
        var found: LineageStore.RunRecord?
        if runs[runID] == nil {
            do { found = try lineage.runRecord(runID) } catch {
                log.error("cannot read run \(runID) to answer a watch: \(error)", metadata: ["run.id": "\(runID)"])
                send(.rejected(message: "cannot read run \(runID) from the lineage database: \(error)"), to: identity); return
            }
            if config.resumeInterrupted, let state = found.flatMap({ RunStatus(rawValue: $0.state) }), !state.isEnd {
                // Left by a coordinator that is gone (this one serves the folder, so none other
                // renders on it) and not resumed as this one started (it was dying then): taken over now.
                record("recoverInterrupted") { _ = try lineage.recoverInterrupted(only: [runID]) }
                resumeInterrupted()
                if runs[runID] == nil { found = (try? lineage.runRecord(runID)) ?? found }
            }
        }
        if let run = runs[runID] {
            if !once { watchers[runID, default: []].insert(identity) }
            progress(run, force: true)
            return
        }
        guard let rec = found else {
            send(.rejected(message: "no run \(runID) on this coordinator"), to: identity); return
        }
        let output = rec.movie.map { stored(ArtifactRef(sha256: $0.sha256, path: $0.uri, size: $0.size)) }
        let message = RunStatus(rawValue: rec.state)?.isEnd == false
            ? "run \(runID) is recorded \(rec.state) but no coordinator renders it (another process took it and is still there); restart coord serve on its state folder to resume it"
            : rec.error
        sendWhenCommitted(.ended(RunEnd(run: runID, state: rec.state, message: message, output: output, outputPath: rec.outputPath, seconds: rec.seconds,
                                        notes: rec.notes)),
                          to: identity)
    }

    func ended(_ run: RunState, state: RunStatus, message: String?, output: ArtifactRef?) {
        let end = RunEnd(run: run.id, state: state.rawValue, message: message, output: output, outputPath: run.pipeline.output.path,
                         seconds: Clocks.steady - run.startedAt, notes: run.notesInOrder)
        for w in watchers.removeValue(forKey: run.id) ?? [] { sendWhenCommitted(.ended(end), to: w) }
    }

    func status(_ runID: Int64?, limit: Int? = nil, for peer: Peer = .local) throws -> StatusReply {
        guard let runID else {
            // Admins (and local peers) see the farm; a submitter its own runs.
            let list = try LineageStore.runList(limit: limit ?? 0, owner: peer.seesEveryRun ? nil : peer.key ?? "", rows: lineage.rows)
            return StatusReply(runs: list.runs, stages: [], failures: [], runsTotal: list.total)
        }
        let runs = try lineage.rows(LineageStore.statusRunSQL, [runID])
        let stages = try lineage.rows(LineageStore.statusStagesSQL, [runID])
        let failures = try lineage.rows(LineageStore.setbacksSQL, [runID])
        return StatusReply(runs: runs, stages: stages, failures: failures)
    }

    // MARK: transfers

    /// A result: its artifact is copied here first when the worker keeps its own store.
    /// True when the result waits for its artifact to be copied (it is acknowledged then).
    @discardableResult
    func received(_ r: TaskResult, from wid: String, identity: Data) -> Bool {
        guard scheduler.current(r.lease, from: wid) != nil || letOrphanFinish(r.lease, on: wid) else { finish(r, from: wid); return false }
        var r = r
        if let art = r.artifact {
            holdings.add(art.sha256, to: wid)
            // Read from the coordinator's store by hash, never from the path the worker sent (taken
            // as sent, a worker sharing the store could have any file the coordinator can read
            // published as a run's movie); not there yet, copied from a worker with its own store.
            if let store = config.store {
                let local = store.local(art)
                if store.isPresent(local) {
                    r.artifact = local
                } else if let transfers, !(workers[wid]?.shared ?? true) {
                    // A result sent again (after a reconnect) joins the copy already under way.
                    if awaitingUpload[art.sha256]?.contains(where: { $0.0.lease == r.lease }) == true { return true }
                    awaitingUpload[art.sha256, default: []].append((r, wid, identity))
                    if !transfers.isInFlight(art.sha256) { transfers.fetch(art, from: identity) }
                    return true
                } else {
                    log.warning("a worker sharing the store sent a result whose file is not in it", metadata: [
                        "worker.id": "\(wid)", "lease": "\(r.lease)", "sha256": "\(art.sha256)", "path": "\(art.path)"])
                    r.artifact = nil   // its stage's failure (`lacking`): tried again elsewhere
                }
            }
        }
        finish(r, from: wid)
        return false
    }

    func transferDone(_ sha: String, _ outcome: Result<ArtifactRef, Transfers.TransferError>) {
        for (r, wid, identity) in awaitingUpload.removeValue(forKey: sha) ?? [] {
            ackWhenCommitted(r.lease, identity)
            if heldSlots.removeValue(forKey: r.lease) != nil { feed(.released(lease: r.lease, worker: wid)) }
            var r = r
            var workersFault = true
            switch outcome {
            case .success(let local): r.artifact = local
            case .failure(let e):
                r.artifact = nil
                let stage: StageKind = r.segment != nil ? .encode : .fetch
                // The coordinator's own disk failed: not held against the worker.
                workersFault = !e.here
                r.error = WireError(stage: stage, errorClass: .retryable, file: "artifact \(sha.prefix(12))…",
                                    message: e.here ? "the coordinator could not store it: \(e) (free space in its state folder; `coord gc` removes artifacts no recent run uses)"
                                                    : "could not copy it from worker \(wid): \(e)")
            }
            finish(r, from: wid, workersFault: workersFault)
        }
        var still: [PendingSubmission] = []
        for var p in pendingSubmissions {
            guard p.waiting.contains(sha) else { still.append(p); continue }
            switch outcome {
            case .success:
                p.waiting.remove(sha)
                if p.waiting.isEmpty { startSubmission(p) } else { still.append(p) }
            case .failure(let e):
                let name = p.submission.files.first { $0.sha256 == sha }?.path ?? sha
                // The operator's word too: a full state folder refuses every submission.
                log.warning("submission refused: a file could not be received", metadata: [
                    "run.name": "\(p.submission.pipeline.name)", "file": "\(name)", "error": "\(e)"])
                send(.rejected(message: "could not receive \(name) from the submitter: \(e)"), to: p.identity)
            }
        }
        pendingSubmissions = still
    }

    /// A submitter stopped sending a file that another submitter (most often the same submit
    /// made again after it was interrupted) now sends: its submissions waiting for that file are
    /// dropped, so the file's arrival starts the run once, for the submitter still there.
    func dropSubmissions(from identity: Data, waitingFor sha: String) {
        pendingSubmissions.removeAll { p in
            guard p.identity == identity, p.waiting.contains(sha) else { return false }
            let name = p.submission.files.first { $0.sha256 == sha }?.path ?? sha
            log.info("submission dropped: its submitter stopped sending a file that another submit now sends",
                     metadata: ["run.name": "\(p.submission.pipeline.name)", "file": "\(name)"])
            send(.rejected(message: "\(name) stopped coming from you and another submit now sends it; submit again if you still want this one"),
                 to: p.identity)
            return true
        }
    }

    // MARK: liveness

    /// Assignments sent to a worker whose heartbeats do not list them (`unlisted`: lease → when
    /// first found missing): the worker is asked to say what it runs again (`reannounce`: its
    /// hello, and any result it has not had acknowledged), and one still missing after that went
    /// astray (sent into a connection the worker had just given up on, as when the coordinator's
    /// host was suspended past the workers' timeout): it goes out again. Before, such a stage stayed
    /// running until its time limit (30 minutes by default), its slot taken and its run stuck.
    func reconcile(_ id: String, listed: [String], identity: Data, now: Double) {
        // Later than a heartbeat sent before the assignment came could arrive (both heartbeat intervals).
        let margin = max(2, 2 * config.heartbeatInterval)
        let listed = Set(listed)
        var ask = false
        for lease in scheduler.running(on: id) where !listed.contains(lease) && heldSlots[lease] == nil && !scheduler.isCheck(lease) {
            guard let s = scheduler.stage(of: lease), let run = runs[s.run] else {
                // A lease no stage has (its hello listed it; it was cancelled) that the worker no
                // longer lists: its slot is free. Before, it stayed taken until the worker said
                // more of it, and a worker that never did had a slot fewer for ever (all of it,
                // with one slot: the runs waiting for it never ended).
                if let first = unlisted[lease] {
                    if now - first > margin { unlisted[lease] = nil; feed(.released(lease: lease, worker: id), now: now) }
                } else { unlisted[lease] = now }
                continue
            }
            let u = run.units[s.node]
            guard now - u.sentAt > margin else { continue }
            guard let first = unlisted[lease] else { unlisted[lease] = now; ask = true; continue }
            guard now - first > margin else { continue }
            unlisted[lease] = nil
            log.warning("an assignment never reached its worker; it goes out again", metadata: ["stage.id": "\(u.name)", "worker.id": "\(id)", "run.id": "\(run.id)"])
            undelivered(u, lease: lease, "not delivered: worker \(id) never received it (its connection was made again meanwhile)", now: now)
        }
        if ask { send(.reannounce, to: identity) }
    }

    func checkLiveness(_ now: Double) {
        // The coordinator's own stall (its host suspended, the process stopped or starved of
        // CPU; it looks every 0.1 s): the silence it accrued meanwhile is not the workers'. Before,
        // a coordinator stopped for 8 s declared every worker lost as it went on, and their renders
        // went back to the queue to be made again.
        let stall = now - lastLivenessCheck - 0.1
        if lastLivenessCheck > 0, stall > 1 {
            for id in workers.keys { workers[id]!.lastSeen += stall }
            log.warning("the coordinator was stalled (its host suspended, or the process stopped or starved): its workers' silence meanwhile is not held against them",
                        metadata: ["stalled_s": "\(String(format: "%.1f", stall))"])
        }
        for (id, w) in workers where now - w.lastSeen > config.livenessTimeout {
            lose(worker: id, reason: String(format: "silent for %.1f s", now - w.lastSeen))
        }
        for (lease, l) in lostRenders where now - l.at > Self.lostRenderMemory { lostRenders[lease] = nil }
        // (A lease no stage has stays while its worker holds a slot for it: `reconcile` frees that.)
        for lease in unlisted.keys where !scheduler.isLive(lease) && !workers.keys.contains(where: { scheduler.slot(of: lease, on: $0) != nil }) { unlisted[lease] = nil }
    }

    /// A drained worker leaves: not lost; anything it still held goes back to the queue.
    func leave(worker id: String, now: Double) {
        guard let w = workers.removeValue(forKey: id) else { return }
        lostHellos[id] = nil
        feed(.workerLeft(id), now: now)
        forget(worker: id, w)
        record("workerState") { try lineage.workerState(id: id, state: .gone) }
        log.info("worker left", metadata: ["worker.id": "\(id)"])
    }

    func forget(worker id: String, _ w: WorkerInfo) {
        transfers?.peerLost(w.identity)
        holdings.forget(id)
        unreachableLogged[id] = nil
    }

    /// Whether a hello under a known worker id comes from another process than the one known
    /// (rather than that one reconnecting): its incarnation, or for a worker older than that
    /// field, its pid and host.
    static func isRestart(of old: Hello, _ new: Hello) -> Bool {
        if let a = old.incarnation, let b = new.incarnation { return a != b }
        return old.pid != new.pid || old.host != new.host
    }

    /// How long a worker an assignment could not reach gets no work (its connection being made
    /// again takes well under this), and when that was last logged, by worker (at most once a pause).
    static let unreachablePause = 1.0
    var unreachableLogged: [String: Double] = [:]

    func lose(worker id: String, reason: String) {
        guard let w = workers.removeValue(forKey: id) else { return }
        log.warning("worker lost", metadata: ["worker.id": "\(id)", "reason": "\(reason)"])
        record("workerState") { try lineage.workerState(id: id, state: .lost) }
        forget(worker: id, w)
        lostReason[id] = reason
        lostHellos[id] = w.hello
        feed(.workerLost(id))
    }

    /// A lost worker back (its hello): the renders it had when it was lost go on there
    /// (`lostRenders`), unless it came back as another process, whether their stages wait to be
    /// given out again or went to another worker meanwhile (the first to finish is the stage's:
    /// the one it had started earlier, usually; before, it was stopped and its work lost).
    func adoptLostRenders(of id: String, hello h: Hello, now: Double) {
        for (lease, l) in lostRenders where l.attempt.worker == id {
            lostRenders[lease] = nil
            guard !Self.isRestart(of: l.hello, h), [.ready, .running].contains(scheduler.phase(l.stage)),
                  runs[l.stage.run].map({ !$0.finished }) == true else { continue }
            // Running: let finish as the hello goes on (`letOrphanFinish`). Not running any
            // more: its result, queued by the worker, follows the hello.
            if (h.running ?? []).contains(lease) { orphans[lease] = l.attempt } else { awaitOrphan(l.attempt, until: now + Self.orphanResultWait, now: now) }
        }
    }

    /// An orphan waited for until `until` (its worker not back yet, or back without it and its
    /// result to follow); forgotten when the scheduler refuses it (an attempt of this
    /// coordinator makes its key).
    func awaitOrphan(_ o: OrphanedAttempt, until: Double, now: Double = Clocks.steady) {
        orphans[o.lease] = o
        feed(.orphaned(lease: o.lease, key: o.key, worker: o.worker, until: until), now: now)
        if !scheduler.isOrphan(o.lease) { orphans[o.lease] = nil }
    }

    // MARK: the scheduler

    /// Hands the scheduler an event and carries out what it decides. Events raised while
    /// effects are carried out (an assignment that cannot be delivered) wait their turn.
    func feed(_ event: FarmScheduler.Event, now: Double = Clocks.steady) {
        // A submission's stage prepared (see `dispatchEachPrepared`) goes out now, before the next
        // of its run is prepared, when the free slots take every stage waiting and every one still
        // to prepare: the same stages go out as the tick after all of them would send. With fewer
        // slots the tick waits for all of them, so the scheduler still chooses among them (the
        // costliest render first, fair share between runs).
        if feeding, dispatchEachPrepared, case .prepared = event {
            guard lineageFailure == nil else { return }
            apply(event, now: now)
            if lineageFailure == nil && scheduler.dispatching
                && scheduler.freeSlots(now: now) >= scheduler.waitingForSlots + preparesPending { apply(.tick, now: now) }
            return
        }
        events.append(event)
        guard !feeding else { return }
        feeding = true
        // After a failed write nothing more is handled or written (the turn ends there; see `loop`):
        // a tick's later dispatches would each fail their attempt's write too.
        defer { feeding = false; if lineageFailure == nil && !inTurn { recordReady() } }
        while lineageFailure == nil, let e = events.popFirst() { apply(e, now: now) }
    }

    /// One event through the scheduler, and its effects carried out.
    private func apply(_ e: FarmScheduler.Event, now: Double) {
        // The scheduler scores each free worker for a stage: work out the stage's inputs once.
        var memo: (StageRef, [ArtifactRef])?
        let affinity: ((StageRef, String) -> Int64)? = holdings.isEmpty ? nil : { [self] s, w in
            if memo?.0 != s {
                guard let run = runs[s.run], let task = run.units[s.node].task else { return 0 }
                memo = (s, inputRefs(run, s.node, task))
            }
            return heldBytes(memo!.1, w)
        }
        let effects = scheduler.handle(e, now: now, affinity: affinity)
        let outer = preparesPending
        defer { preparesPending = outer }
        preparesPending += effects.count(where: { if case .prepare = $0 { true } else { false } })
        for effect in effects where lineageFailure == nil { carryOut(effect, now: now) }
    }

    /// Stops an attempt on its worker, and records the stage's attempt rows cancelled (`why`).
    func cancelAttempt(_ lease: String, _ s: StageRef?, on wid: String, why: String? = nil) {
        if let info = workers[wid] { send(.cancel(lease: lease), to: info.identity) }
        if let s, let run = runs[s.run] {
            for a in run.units[s.node].attemptIDs {
                record("attemptFinished") { try lineage.attemptFinished(a, state: .cancelled, started: nil, finished: Clocks.wall, errorMessage: why) }
            }
        }
    }

    func carryOut(_ effect: FarmScheduler.Effect, now: Double) {
        switch effect {
        case .prepare(let s):
            preparesPending -= 1
            prepare(s)
        case .dispatch(let lease, let s, let wid, let attempt, let checkOnly, let readySince):
            dispatch(lease: lease, s, to: wid, attempt: attempt, checkOnly: checkOnly, readySince: readySince, now: now)
        case .cancel(let lease, let s, let wid):
            cancelAttempt(lease, s, on: wid)
            // An orphan let finish whose key another render made first.
            if s == nil, let o = orphans.removeValue(forKey: lease), orphansSeen.remove(lease) != nil {
                record("event") {
                    try lineage.event("attempt.recovered", "\(o.stage) on worker \(wid), \(o.givenOut), stopped: another worker finished it first", runID: o.runID)
                }
            }
        case .superseded(let lease, let s, let wid, let orphanWorker):
            cancelAttempt(lease, s, on: wid, why: "stopped: worker \(orphanWorker), back after it was lost, finished the render it had first, and its output is reused")
            guard let run = runs[s.run] else { return }
            let u = run.units[s.node]
            log.info("a render stopped: the lost worker back with the same one finished it first", metadata: ["stage.id": "\(u.name)", "worker.id": "\(wid)", "by": "\(orphanWorker)"])
            run.setBack("\(label(run, u)): worker \(orphanWorker) is back and finished it first; its render on \(wid) stopped")
        case .lost(let lease, let s, let wid, let checkOnly):
            guard let run = runs[s.run] else { return }
            let reason = lostReason[wid] ?? "lost"
            for a in run.units[s.node].attemptIDs {
                record("attemptFinished") {
                    if checkOnly {
                        try lineage.attemptFinished(a, state: .lost, started: nil, finished: nil, errorClass: "retryable",
                                                    errorMessage: "worker \(wid) lost: \(reason), while checking a cached output (checked again elsewhere)")
                    } else {
                        try lineage.attemptFinished(a, state: .lost, started: nil, finished: nil, errorClass: "retryable", errorMessage: "worker \(wid) lost: \(reason)")
                    }
                }
            }
            if !checkOnly {
                let u = run.units[s.node]
                if u.kind == .render, let key = u.key, !u.attemptIDs.isEmpty, let hello = lostHellos[wid] {
                    lostRenders[lease] = (OrphanedAttempt(runID: run.id, lease: lease, worker: wid, key: key, attemptIDs: u.attemptIDs,
                                                          stage: u.stages.first ?? u.name, workerLost: reason), s, hello, now)
                }
                run.units[s.node].lastError = Unit.workerLost
                // (The scheduler has decided by now: another try, or none when the stage is poison.)
                let next = scheduler.phase(s) == .ended ? "it is not tried again" : "it goes to another worker"
                run.setBack("\(label(run, run.units[s.node])): worker \(wid) was lost (\(reason)) while \(Self.doing(run.units[s.node].kind)) it; \(next)")
                progress(run, force: true)   // told before a run the loss ends stops telling
            }
        case .handedBack(_, let s, let wid):
            guard let run = runs[s.run] else { return }
            let u = run.units[s.node]
            for a in u.attemptIDs {
                record("attemptFinished") { try lineage.attemptFinished(a, state: .handedBack, started: nil, finished: Clocks.wall, errorMessage: "handed back by worker \(wid) (draining)") }
            }
            log.info("attempt handed back", metadata: ["stage.id": "\(u.name)", "worker.id": "\(wid)"])
            run.setBack("\(label(run, u)): handed back by worker \(wid), which is leaving (draining); it goes to another worker")
            progress(run)
        case .retry(let s, _, let attempts):
            guard let run = runs[s.run] else { return }
            let u = run.units[s.node]
            for id in u.stageRows { record("stageUpdate") { try lineage.stageUpdate(id, state: .ready, error: u.lastError) } }
            // (A lost worker's stage is told of as it is lost.)
            if let why = u.lastError, why != Unit.workerLost {
                run.setBack("\(label(run, u)): \(why); trying again (attempt \(attempts + 1) of \(run.pipeline.retryAttempts ?? config.maxAttempts))")
            }
            progress(run)
        case .stale(let lease, let wid):
            record("event") { try lineage.event("attempt.stale", "discarded a result from worker \(wid) with a stale lease \(lease)") }
        case .timedOut(let lease, let s, let wid, let seconds, let n, let checkOnly):
            if let info = workers[wid] { send(.cancel(lease: lease), to: info.identity) }
            guard let run = runs[s.run] else { return }
            let u = run.units[s.node]
            let took = String(format: seconds < 10 ? "%.1f s" : "%.0f s", seconds)
            let message = checkOnly ? "checking its recorded output on worker \(wid) did not finish within \(took); rendered instead"
                : "did not finish within \(took) on worker \(wid) (its time limit; a farm's is set by coord serve --stage-timeout); stopped there"
            for a in u.attemptIDs {
                record("attemptFinished") { try lineage.attemptFinished(a, state: checkOnly ? .missed : .failed, started: nil, finished: Clocks.wall,
                                                                       errorClass: checkOnly ? nil : "retryable", errorMessage: message) }
            }
            log.warning("attempt timed out: stopped on its worker", metadata: ["stage.id": "\(u.name)", "worker.id": "\(wid)", "seconds": "\(took)"])
            if checkOnly {
                u.reuseID = nil; u.reuse = nil
                if u.kind == .render, let i = u.item { run.kept.remove(i) }
            } else {
                // Used only if the scheduler ends the run; otherwise the stage is retried.
                u.failure = ("\(label(run, u)): \(message), \(u.failed(on: wid, attempts: n))", nil)
                u.lastError = message
                workers[wid]?.lastFailure = message
            }
            progress(run)
        case .sidelined(let wid, let until, let failures):
            let seconds = Int((until - now).rounded()), why = workers[wid]?.lastFailure ?? "unknown"
            log.warning("worker sidelined: stages that fail there succeed elsewhere; other workers take its work", metadata: [
                "worker.id": "\(wid)", "failures": "\(failures)", "seconds": "\(seconds)", "last_error": "\(why)"])
            record("event") {
                try lineage.event("worker.sidelined", "worker \(wid) gets no work for \(seconds) s: \(failures) stages that failed there succeeded on other workers (its last error: \(why)); other workers take its work. Check that worker's disk and log.")
            }
            // Its own log says so too: that is where whoever looks after that host looks.
            if let w = workers[wid] {
                send(.notice(message: "this worker gets no work for \(seconds) s: \(failures) stages that failed here succeeded on other workers (the last error here: \(why)). Check this host's disk and this log."), to: w.identity)
            }
        case .stageFailed(let outcome):
            stageFailed(outcome)
        case .runEnded(let id, let outcome):
            guard let run = runs[id] else { return }
            runEnded(run, outcome, now: now)
        }
    }

    /// A stage failed for good while its run goes on: its rows say so now (the dashboard and
    /// `coord status` show it failed, not running, while the rest of the run renders).
    func stageFailed(_ outcome: FarmScheduler.Outcome) {
        let s: StageRef, lostWorkers: Int?
        switch outcome {
        case .failed(let failed, _, _): (s, lostWorkers) = (failed, nil)
        case .poison(let failed, let lost, _): (s, lostWorkers) = (failed, lost)
        case .succeeded, .cancelled: return
        }
        guard let run = runs[s.run] else { return }
        let u = run.units[s.node]
        if let lostWorkers { u.failure = ("\(label(run, u)): poison — its attempts lost \(lostWorkers) workers; not retried", nil) }
        let message = u.failure?.message ?? "\(label(run, u)) failed"
        // Made ready and failed before it went out (its task could not be worked out): its ready
        // row (its parameters and key) first, or written later it would overwrite the failure.
        recordReady(u)
        for (st, id) in zip(u.stages, u.stageRows) {
            // A unit of one stage failed there, whichever step of it the error names.
            let failed = u.stages.count == 1 || (u.failure?.stage.map { st.hasPrefix($0.rawValue) } ?? true)
            record("stageUpdate") { try lineage.stageUpdate(id, state: failed ? .failed : .cancelled, error: failed ? message : nil, finished: Clocks.wall) }
        }
        log.warning("stage failed; the run goes on with what does not need it", metadata: ["run.id": "\(s.run)", "stage.id": "\(u.name)", "error": "\(message)"])
    }

    /// A unit is ready: record it, work out its task and output key, and tell the scheduler
    /// whether an artifact recorded under that key should be checked before rendering.
    func prepare(_ s: StageRef) {
        guard let run = runs[s.run] else { return }
        let ui = s.node
        let u = run.units[ui]
        let task = makeTask(run, ui)
        let key = task.flatMap { stageKey(run, ui, $0) }
        u.task = task; u.key = key; u.reuseID = nil; u.reuse = nil
        if u.kind == .render, let key, keyMakers[key] == nil { keyMakers[key] = s }
        var ready = LineageStore.StageParameters(params: nil, key: u.kind == .render ? key : nil)
        var cost = 0.0
        if case .segment(let spec) = task, let i = u.item {
            ready = editsParameters(spec.edits, key: ready.key)
            if let f = run.facts[i] { cost = RenderCost.estimate(f, spec: spec); run.renderCosts[i] = cost; ready.cost = cost }
        }
        // Recorded with the dispatch if the unit goes out in this turn, else when the turn ends.
        if u.unrecordedReady == nil { unrecordedReady.append((s.run, u)) }
        u.unrecordedReady = ready
        var check = false
        if let key, let candidate = try? lineage.cachedArtifact(key: key) {
            u.reuseID = candidate.id
            u.reuse = stored(ArtifactRef(sha256: candidate.sha256, path: candidate.path, size: candidate.size))
            check = true
        }
        guard let task else {
            u.failure = ("\(label(run, u)): could not work out its task (an input it needs was not recorded); submit again", nil)
            feed(.fail(s))
            return
        }
        feed(.prepared(s, cacheCheck: check, cost: cost, key: key, timeLimit: timeLimit(run, task, cost: cost)))
    }

    /// How long an attempt of a stage may run (`Configuration.stageTimeout`): the floor, or
    /// `stageTimeoutFactor` times what it should take on a slow host, if more: a render what
    /// `RenderCost` estimates, a fetch its bytes at 20 MB/s, the concat 1 ms a frame (it copies
    /// the pictures and encodes the sound).
    func timeLimit(_ run: RunState, _ task: TaskSpec, cost: Double) -> Double? {
        guard let floor = config.stageTimeout, floor > 0 else { return nil }
        let estimate: Double
        switch task {
        case .segment: estimate = cost / 1000
        case .fetch(let uri, _): estimate = Double(run.files[uri]?.size ?? (uri.hasPrefix("/") ? FileChecks.size(of: uri) ?? 0 : 0)) / 20e6
        case .concat(let inputs, _): estimate = Double(inputs.reduce(0) { $0 + $1.frameCount }) / 1000
        case .transition: estimate = 0
        }
        return max(floor, config.stageTimeoutFactor * estimate)
    }

    /// A store artifact recorded in lineage, at its path in this coordinator's store: lineage
    /// records the path the store had then, and a state folder moved to another disk since (a
    /// full one, say) holds the same content under its new root. Reading the old path found
    /// nothing there, so every stage rendered again.
    func stored(_ recorded: ArtifactRef) -> ArtifactRef { config.store?.local(recorded) ?? recorded }

    /// Units prepared whose ready rows are not written yet (see `Unit.unrecordedReady`), by run.
    var unrecordedReady: [(run: Int64, unit: Unit)] = []

    /// Writes the ready rows of units prepared and not sent (all of them, or one run's).
    func recordReady(run only: Int64? = nil) {
        guard !unrecordedReady.isEmpty else { return }
        var left: [(run: Int64, unit: Unit)] = []
        for (run, u) in unrecordedReady {
            if let only, run != only { left.append((run, u)); continue }
            recordReady(u)
        }
        unrecordedReady = left
    }

    /// One unit's ready row, if it is still owed (a unit sent meanwhile owes none).
    func recordReady(_ u: Unit) {
        guard let ready = u.unrecordedReady else { return }
        u.unrecordedReady = nil
        record("stagesReady") { try lineage.stagesReady(u.stageRows, ready) }
    }

    /// A render's recorded parameters (its edits as JSON, and their hash), kept for the edits
    /// last seen: items of one pipeline mostly share them, and encoding them was a tenth of the
    /// coordinator's work per render.
    var editsJSON: [Edits: LineageStore.StageParameters] = [:]

    func editsParameters(_ edits: Edits, key: String?) -> LineageStore.StageParameters {
        var p = Self.remembered(edits, in: &editsJSON) {
            let encoder = JSONEncoder(); encoder.outputFormatting = [.sortedKeys]
            return LineageStore.StageParameters(params: (try? encoder.encode(edits)).map { String(decoding: $0, as: UTF8.self) }, key: nil)
        }
        p.key = key
        return p
    }

    /// `make(key)`, kept in `memo` for the last few hundred keys seen.
    static func remembered<K: Hashable, V>(_ key: K, in memo: inout [K: V], _ make: () -> V) -> V {
        if let known = memo[key] { return known }
        let value = make()
        if memo.count >= 256 { memo.removeAll(keepingCapacity: true) }
        memo[key] = value
        return value
    }

    /// Sends a stage to the worker the scheduler chose, under its lease.
    func dispatch(lease: String, _ s: StageRef, to wid: String, attempt: Int, checkOnly: Bool, readySince: Double, now: Double) {
        guard let run = runs[s.run], let worker = workers[wid], let task = run.units[s.node].task else { feed(.notDelivered(lease: lease)); return }
        let u = run.units[s.node]
        let stageIDs = u.stageRows
        let ready = u.unrecordedReady
        u.unrecordedReady = nil
        var assignment: Assignment
        var inputs: [ArtifactRef] = []
        if checkOnly, let reuse = u.reuse {
            assignment = Assignment(lease: lease, task: task, key: u.key, reuse: reuse, checkOnly: true)
            assignment.inputs = [reuse]
            u.attemptIDs = recorded("attemptDispatched") { try lineage.attemptDispatched(stageIDs: stageIDs, attemptNo: attempt, worker: wid, slot: nil, lease: lease,
                                                                                         ready: ready) } ?? []
        } else {
            u.reuseID = nil
            inputs = inputRefs(run, s.node, task)
            assignment = Assignment(lease: lease, task: task, key: u.key)
            assignment.inputs = inputs.isEmpty ? nil : inputs
            if case .segment = task, let i = u.item, let src = run.sources[i] {
                assignment.source = src.0
                assignment.origin = run.files.isEmpty ? run.pipeline.items[i].sources.first?.uri : nil
            }
            u.attemptIDs = recorded("attemptDispatched") { try lineage.attemptDispatched(stageIDs: stageIDs, attemptNo: attempt, worker: wid,
                                                             slot: scheduler.slot(of: lease, on: wid), lease: lease, ready: ready) } ?? []
        }
        // Its attempt not recorded, it does not go out: the coordinator stops at the end of this
        // turn, and a next one finds the stage where the record says it is.
        if lineageFailure != nil { return }
        u.sentAt = Clocks.steady
        u.held = max(0, u.sentAt - readySince)
        u.readyAt = Clocks.wall - u.held
        guard (try? socket.send([worker.identity, Envelope(.assign(assignment)).encoded()])) == true else {
            // Never delivered (the worker's connection is gone): not this stage's fault, so it
            // does not count towards poison; it goes straight back to the queue. The worker is
            // not lost for it: after a stall of this coordinator its connection is being made
            // again, and lost, its results on the way in were thrown away with it (one render
            // made twice after an 8 s pause). It gets no work for a moment; a worker really gone
            // stops beating and is lost by the liveness timeout.
            if now - (unreachableLogged[wid] ?? -.infinity) > Self.unreachablePause {
                unreachableLogged[wid] = now
                log.warning("worker unreachable; no work for it for a moment", metadata: ["worker.id": "\(wid)", "stage.id": "\(u.name)"])
            }
            undelivered(u, lease: lease, "not delivered: worker \(wid) is unreachable (its connection is gone for the moment)",
                        unreachableUntil: now + Self.unreachablePause, now: now)
            return
        }
        for i in inputs { holdings.add(i.sha256, to: wid) }
        workers[wid]!.lastSent = now
        if !checkOnly {
            if case .segment = task, run.firstRenderSent == nil { run.firstRenderSent = now }
            let early = dispatchEachPrepared && preparesPending > 0
            owner.stats.withLock { $0.dispatched += 1; if early { $0.sentWhilePreparing += 1 } }
            log.debug("dispatched", metadata: ["run.id": "\(run.id)", "stage.id": "\(u.name)", "worker.id": "\(wid)"])
            progress(run)
        }
    }

    /// An assignment that never reached its worker: its attempts recorded lost with `why`, and
    /// the stage back to the queue, not counted (`Event.notDelivered`).
    func undelivered(_ u: Unit, lease: String, _ why: String, unreachableUntil: Double? = nil, now: Double) {
        for a in u.attemptIDs {
            record("attemptFinished") { try lineage.attemptFinished(a, state: .lost, started: nil, finished: Clocks.wall, errorClass: "retryable", errorMessage: why) }
        }
        feed(.notDelivered(lease: lease, unreachableUntil: unreachableUntil), now: now)
    }

    func heldBytes(_ inputs: [ArtifactRef], _ wid: String) -> Int64 {
        inputs.reduce(0) { $0 + (holdings.holds(wid, $1.sha256) ? $1.size : 0) }
    }

    /// Every artifact a task reads, under the path the task names it by.
    func inputRefs(_ run: RunState, _ ui: Int, _ task: TaskSpec) -> [ArtifactRef] {
        var refs: [ArtifactRef] = []
        switch task {
        case .fetch(let uri, _):
            // A fetch reads nothing but its source.
            return run.files[uri].map { [ArtifactRef(sha256: $0.sha256, path: uri, size: $0.size)] } ?? []
        case .segment:
            if let i = run.units[ui].item, let src = run.sources[i] { refs.append(src.0) }
        case .transition(_, let from, let to, let b):
            refs += run.transitionInputs(from: from, to: to, after: b).compactMap(\.segment)
        case .concat(let inputs, _):
            let byPath = run.renderedByPath()
            refs += inputs.compactMap { byPath[$0.path] }
        }
        // The other files the task reads (fonts, stickers, watermark; the soundtrack for the
        // concat), by the pipeline's typed file fields: a remote submitter's copies.
        if !run.files.isEmpty {
            let wanted: [PipelineFile]
            switch task {
            case .segment: wanted = run.units[ui].item.map { run.pipeline.otherFiles(read: $0) } ?? []
            case .concat: wanted = run.pipeline.otherFiles(read: nil)
            case .fetch, .transition: wanted = []
            }
            var seen = Set(refs.map(\.path))
            for f in wanted where seen.insert(f.path).inserted {
                if let a = run.files[f.path] { refs.append(ArtifactRef(sha256: a.sha256, path: f.path, size: a.size)) }
            }
        }
        return refs
    }

    func makeTask(_ run: RunState, _ ui: Int) -> TaskSpec? {
        let u = run.units[ui]
        let p = run.pipeline
        if u.kind == .fetch, let i = u.item {
            let src = p.items[i].sources[0]
            return .fetch(uri: src.uri, name: src.displayName)
        }
        if u.kind == .render, let i = u.item, let n = run.frameCounts[i], run.sources[i] != nil || p.items[i].sources.isEmpty {
            return .segment(Planner.segmentSpec(p, index: i, sourcePath: run.sources[i]?.0.path ?? "", frameCount: n, facts: run.facts[i]))
        }
        if u.kind == .transition, let b = u.item, let timeline = run.timeline,
           let from = run.segments[b], let to = run.segments[b + 1], let spec = Planner.transitionSpec(p, after: b, timeline: timeline) {
            return .transition(spec, from: from.0.path, to: to.0.path, index: b)
        }
        if u.kind == .concat, let timeline = run.timeline {
            var inputs: [ConcatInput] = []
            for part in Planner.concatParts(timeline, fps: p.output.fps) {
                switch part.source {
                case .item(let i):
                    inputs.append(ConcatInput(path: run.segments[i]!.0.path, frameCount: part.frames, sampleCount: part.samples,
                                              label: p.items[i].label(index: i), firstFrame: part.firstFrame, firstSample: part.firstSample))
                case .transition(let b):
                    inputs.append(ConcatInput(path: run.transitions[b]!.0.path, frameCount: part.frames, sampleCount: part.samples,
                                              label: "transition \(b + 1)→\(b + 2)"))
                }
            }
            return .concat(inputs, profile: p.output)
        }
        return nil
    }

    /// The output key of a unit's task: what its output depends on, and nothing else.
    func stageKey(_ run: RunState, _ ui: Int, _ task: TaskSpec) -> String? {
        switch task {
        case .fetch(let uri, _):
            // A submitter's file: keyed by its content.
            if let f = run.files[uri] {
                return StageKey.compute(kind: .fetch, inputs: [f.sha256], parameters: ["uri": uri, "probe": MediaFacts.probeVersion])
            }
            // Local sources: keyed by path, size and modification time; the reused copy is still
            // verified by hash. Remote sources are always fetched.
            guard uri.hasPrefix("/"), let a = try? FileManager.default.attributesOfItem(atPath: uri),
                  let size = (a[.size] as? NSNumber)?.int64Value, let mtime = (a[.modificationDate] as? Date)?.timeIntervalSince1970 else { return nil }
            return StageKey.compute(kind: .fetch, inputs: [], parameters: ["uri": uri, "size": "\(size)", "mtime": "\(mtime)", "probe": MediaFacts.probeVersion])
        case .segment(let spec):
            if spec.title != nil { return segmentKey(spec, sourceSHA256: "") }   // the title is all in the spec
            // The item's own source (one lookup; a scan of every item's source made a run's
            // renders quadratic in its length).
            guard let i = run.units[ui].item, let src = run.sources[i]?.0, src.path == spec.sourcePath else { return nil }
            return segmentKey(spec, sourceSHA256: src.sha256)
        case .transition(let spec, let from, let to, let b):
            let shas = run.transitionInputs(from: from, to: to, after: b).map { $0.segment?.sha256 ?? $0.path }
            return StageKey.compute(kind: .transition, inputs: shas, parameters: spec)
        case .concat(let inputs, let profile):
            let byPath = run.renderedByPath()
            let shas = inputs.map { byPath[$0.path]?.sha256 ?? $0.path }
            var normalised = inputs
            for k in normalised.indices { normalised[k].path = ""; normalised[k].label = "" }
            return StageKey.compute(kind: .concat, inputs: shas, parameters: ConcatKey(inputs: normalised, profile: profile.movieProfile,
                                                                                       mixing: profile.soundtrack == nil ? nil : Soundtrack.mixing))
        }
    }

    func segmentKey(_ spec: SegmentSpec, sourceSHA256: String) -> String {
        StageKey.segment(spec, sourceSHA256: sourceSHA256, renderer: fingerprint(spec))
    }

    /// The renderer's fingerprint depends on the edits, the output and whether the item is a Ken
    /// Burns still, which a pipeline's items mostly share: kept for the last few hundred seen.
    var fingerprints: [EditChain.FingerprintInputs: String] = [:]

    func fingerprint(_ spec: SegmentSpec) -> String {
        let inputs = EditChain.FingerprintInputs(spec)
        return Self.remembered(inputs, in: &fingerprints) { EditChain.fingerprint(inputs) }
    }

    /// Lineage artifacts of the files besides its source that an item's render reads (fonts,
    /// stickers, the watermark) or, for `item` nil, the concat (the soundtrack): with them a
    /// movie's lineage names every file it was made from ("which song is in this movie?").
    /// Recorded once per run, by the sha256 the submitter sent or the loader took (a font, not
    /// hashed at loading, is hashed here once per coordinator). A file that cannot be read is
    /// left out: the render that reads it says so.
    func fileInputs(_ run: RunState, item: Int?) throws -> [Int64] {
        var ids: [Int64] = []
        for f in run.pipeline.otherFiles(read: item) {
            // By role too: one image as sticker and watermark is both.
            let name = f.role.rawValue + ":" + f.path
            if let id = run.fileArtifacts[name] {
                if !ids.contains(id) { ids.append(id) }
                continue
            }
            guard let (sha, size) = digest(of: f, in: run) else { continue }
            let id = try lineage.recordArtifact(sha256: sha, uri: f.path, size: size, kind: f.role.rawValue, facts: nil, key: nil, attemptID: nil)
            run.fileArtifacts[name] = id
            ids.append(id)
        }
        return ids
    }

    /// Fonts' sha256 and size by path: system files, read once by this coordinator.
    var fontDigests: [String: (sha256: String, size: Int64)] = [:]

    func digest(of f: PipelineFile, in run: RunState) -> (sha256: String, size: Int64)? {
        if let a = run.files[f.path] { return (a.sha256, a.size) }
        let p = run.pipeline
        let sha: String?
        switch f.role {
        case .sticker: sha = f.item.flatMap { i in p.items[i].edits.stickers.first { $0.image == f.path }?.sha256 }
        case .watermark: sha = p.output.watermark?.sha256
        case .soundtrack: sha = p.output.soundtrack?.sha256
        case .font:
            if let known = fontDigests[f.path] { return known }
            guard let hashed = try? SHA256Hasher.hex(fileAt: f.path), let size = FileChecks.size(of: f.path) else { return nil }
            fontDigests[f.path] = (hashed, size)
            return (hashed, size)
        case .source: sha = nil
        }
        guard let sha, !sha.isEmpty, let size = FileChecks.size(of: f.path) else { return nil }
        return (sha, size)
    }

    struct ConcatKey: Codable {
        var inputs: [ConcatInput]; var profile: OutputProfile
        /// With a soundtrack, how it is mixed (`Soundtrack.mixing`); absent without one.
        var mixing: String? = nil
    }

    /// Lineage attempt state and artifact id for a result: cache hits reuse the recorded artifact.
    func recordOutput(_ run: RunState, _ u: Unit, _ r: TaskResult, kind: String, facts: String?, inputs: [Int64]) throws -> Int64 {
        let art = r.artifact!
        if r.cached == true, let id = u.reuseID {
            for a in u.attemptIDs { try lineage.linkArtifact(attemptID: a, artifactID: id, inputs: inputs) }
            for id in u.stageRows { try lineage.stageCached(id) }
            try lineage.event("stage.cached", "\(u.name) reused artifact \(art.sha256.prefix(12))", runID: run.id, stageID: u.stageRows[0])
            return id
        }
        return try lineage.recordArtifact(sha256: art.sha256, uri: art.path, size: art.size, kind: kind, facts: facts,
                                          key: u.key, attemptID: u.attemptIDs.last, inputs: inputs)
    }

    func attemptState(_ r: TaskResult) -> AttemptStatus { r.cached == true ? .cached : .succeeded }

    // MARK: results

    /// Whether `lease`, which `worker` runs or reports, is an orphaned render (`orphans`) let
    /// finish: it is when no attempt of this coordinator makes its output.
    func letOrphanFinish(_ lease: String, on worker: String, now: Double = Clocks.steady) -> Bool {
        guard let o = orphans[lease], o.worker == worker, workers[worker] != nil else { return false }
        if orphansSeen.contains(lease) { return true }
        feed(.orphaned(lease: lease, key: o.key, worker: worker), now: now)
        guard scheduler.isOrphan(lease) else {
            orphans[lease] = nil
            return false
        }
        orphansSeen.insert(lease)
        log.info(o.workerLost == nil ? "a render the last coordinator gave out goes on: its output is kept for the resumed run"
                                     : "a render of a worker that was lost goes on now it is back: its output is kept",
                 metadata: ["run.id": "\(o.runID)", "stage.id": "\(o.stage)", "worker.id": "\(worker)"])
        record("event") {
            try lineage.event("attempt.orphaned", "worker \(worker) still runs \(o.stage), \(o.givenOut): it finishes, and its output is kept for this run",
                              runID: o.runID)
        }
        return true
    }

    /// The result of an orphaned render (`letOrphanFinish`): its output is recorded under its
    /// key, and the stage waiting for it finds it there. The attempt stays lost (its coordinator
    /// or its worker was gone; the stage's success is the reuse that follows).
    func orphanFinished(_ r: TaskResult, from wid: String) -> Bool {
        if orphansEnded.contains(r.lease) { return true }
        guard scheduler.isOrphan(r.lease), let o = orphans.removeValue(forKey: r.lease) else { return false }
        orphansEnded.insert(r.lease)
        var made = false
        if r.error == nil, let art = r.artifact, r.segment != nil {
            record("orphanOutput") {
                // Each of its stages' attempts made it (what tells a kept render from a lost one).
                let id = try lineage.recordArtifact(sha256: art.sha256, uri: art.path, size: art.size, kind: "segment", facts: nil, key: o.key, attemptID: o.attemptIDs.first)
                for a in o.attemptIDs.dropFirst() { try lineage.linkArtifact(attemptID: a, artifactID: id, inputs: []) }
                for a in o.attemptIDs {
                    try lineage.attemptFinished(a, state: .lost, started: r.startedAt, finished: r.finishedAt, errorClass: "retryable",
                                                errorMessage: o.kept(by: wid),
                                                cpu: r.cpuSeconds, maxRSS: r.maxRSS)
                }
                try lineage.event("attempt.recovered", "\(o.stage) from worker \(wid), \(o.givenOut): its output \(art.sha256.prefix(12))… is kept and reused",
                                  runID: o.runID)
            }
            made = true
        } else {
            record("event") {
                try lineage.event("attempt.recovered", "\(o.stage) from worker \(wid), \(o.givenOut), did not finish (\(r.error?.description ?? "no output")): it renders again",
                                  runID: o.runID)
            }
        }
        feed(.orphanEnded(lease: r.lease, made: made))
        return true
    }

    /// An orphan its worker never began (the last coordinator stopped while its inputs were still
    /// coming) handed back with the worker's hello: recorded as such, not as a render lost, and its
    /// stage goes out again now. Before, the stage waited `orphanResultWait` for a result that
    /// could not come, and lineage counted the attempt among the renders a stop had cost.
    func orphanHandedBack(_ lease: String, by wid: String, now: Double) -> Bool {
        guard let o = orphans[lease], o.worker == wid, workers[wid] != nil, scheduler.isOrphan(lease) else { return false }
        orphans[lease] = nil
        orphansSeen.remove(lease)
        record("attemptFinished") {
            try lineage.attemptsHandedBackUnbegun(o.attemptIDs, worker: wid)
            try lineage.event("attempt.handed_back", "\(o.stage), \(o.givenOut), was handed back unbegun by worker \(wid) (its inputs had not all come): it goes out again",
                              runID: o.runID)
        }
        log.info("a render the last coordinator gave out was handed back unbegun; it goes out again",
                 metadata: ["run.id": "\(o.runID)", "stage.id": "\(o.stage)", "worker.id": "\(wid)"])
        feed(.orphanEnded(lease: lease, made: false), now: now)
        return true
    }

    func finish(_ r: TaskResult, from wid: String, workersFault: Bool = true) {
        guard let s = scheduler.current(r.lease, from: wid), let run = runs[s.run], !run.finished else {
            if orphanFinished(r, from: wid) { return }
            // An attempt stopped as it was told (its run cancelled, or cancelled as this
            // coordinator or the last one stopped): its worker says it stopped, and no result is
            // discarded. Before, each such answer was recorded as a stale result: `coord cancel`
            // of a run with two renders under way wrote two `attempt.stale` events.
            if r.error?.isCancellation == true {
                log.debug("a stopped attempt's worker says it stopped", metadata: ["lease": "\(r.lease)", "worker.id": "\(wid)"])
                return
            }
            // A stale lease: the stage was reassigned or its run ended, or another worker holds it.
            // Never counted; recorded as the scheduler's stale hand-backs were.
            carryOut(.stale(lease: r.lease, worker: wid), now: Clocks.steady)
            return
        }
        let ui = s.node
        let u = run.units[ui]
        // A success without what its stage makes (a worker of another version, a broken or a
        // hostile one) is that worker's failure, tried again elsewhere. Taken as it came, the
        // stage counted done with nothing to show: the concat it made ready then had no segment
        // to join, and the coordinator crashed.
        let lacking = r.error == nil ? Self.lacking(r, u) : nil
        if let lacking, scheduler.phase(s) != .checking {
            var failed = r
            // The file it worked on, as a worker's own errors name it; the movie's for a transition or the concat.
            let item = u.kind == .fetch || u.kind == .render ? u.item.flatMap { run.pipeline.items[$0].sources.first?.displayName } : nil
            failed.error = WireError(stage: u.kind.outputStage, errorClass: .retryable, file: item ?? (run.pipeline.output.path as NSString).lastPathComponent,
                                     message: "worker \(wid) said it was done but \(lacking) (a worker of another version, or a broken one)")
            finish(failed, from: wid, workersFault: true)
            return
        }
        if scheduler.phase(s) == .checking {
            if r.cached != true || lacking != nil {
                // A miss (missing or altered artifact): render it for real.
                for a in u.attemptIDs { record("attemptFinished") { try lineage.attemptFinished(a, state: .missed, started: r.startedAt, finished: r.finishedAt) } }
                u.reuseID = nil; u.reuse = nil
                if u.kind == .render, let i = u.item { run.kept.remove(i) }
                feed(.cacheMiss(lease: r.lease, worker: wid))
                return
            }
        } else {
            let wait = r.startedAt - u.readyAt
            owner.stats.withLock { if $0.readyToStarted.count < 2_000_000 { $0.readyToStarted.append(wait); $0.readyToSent.append(u.held) } }
        }
        if let e = r.error {
            for (k, a) in u.attemptIDs.enumerated() {
                let failedHere = u.stages[k].hasPrefix(e.stage.rawValue) || u.stages.count == 1
                record("attemptFinished") { try lineage.attemptFinished(a, state: failedHere ? .failed : .cancelled, started: r.startedAt, finished: r.finishedAt,
                                             errorClass: e.errorClass.rawValue, errorMessage: e.message, cpu: r.cpuSeconds, maxRSS: r.maxRSS) }
            }
            let tries = e.errorClass == .retryable ? " " + u.failed(on: wid, attempts: scheduler.attempts(s)) : ""
            // Used only if the scheduler ends the run; otherwise the stage is retried.
            u.failure = ("\(label(run, u)): \(e.description)\(tries)", e.stage)
            u.lastError = e.description
            if e.errorClass == .retryable {
                log.warning("attempt failed", metadata: ["stage.id": "\(u.name)", "worker.id": "\(wid)", "error": "\(e)"])
                if workersFault { workers[wid]?.lastFailure = e.description }
            }
            feed(.failed(lease: r.lease, worker: wid, retryable: e.errorClass == .retryable, workersFault: workersFault))
            if !run.finished { progress(run) }  // a failure for good is told while the run goes on
            return
        }
        guard let r = verified(run, ui, r, from: wid) else { return }
        do {
            try succeed(run, ui, r)
            feed(.succeeded(lease: r.lease, worker: wid))
            // Shown once the scheduler has the stage done (not still among the running). The last
            // segment in is shown at once, whatever the throttle, so the line says the movie is
            // being joined (RunProgress.joining) rather than keeping a stale count through the concat.
            if u.kind != .concat, !run.finished {
                progress(run, force: u.kind == .render && run.segments.count == run.pipeline.items.count)
            }
        } catch let e as PipelineError {
            failRun(run, unit: ui, message: e.description)
        } catch where LineageStore.isDatabaseError(error) {
            // A write of the success refused (as `record` takes it): the coordinator stops with
            // its reason. Before, only this run failed, with the database's words, and the farm
            // rendered on past the gap in its record.
            lineageWriteFailed("stageSucceeded", error)
        } catch {
            failRun(run, unit: ui, message: "\(label(run, u)): \(error)")
        }
    }

    /// What a success lacks that its unit makes, or nil: every stage a file, a render its
    /// segment's report, a fetch what it found (unless the file it reuses has it recorded).
    static func lacking(_ r: TaskResult, _ u: Unit) -> String? {
        guard r.artifact != nil else { return "sent no file" }
        switch u.kind {
        case .render where r.segment == nil: return "sent no report of the segment"
        case .fetch where r.facts == nil && u.reuseID == nil: return "sent nothing about the file"
        case .fetch: return r.facts?.impossible.map { "sent facts no file has (\($0))" }
        default: return nil
        }
    }

    // MARK: verification

    /// Workers quarantined by verification (by CURVE key when there is one, else by id): they get
    /// no more work from this coordinator.
    var quarantined: Set<String> = []

    func quarantineKey(_ wid: String) -> String { workers[wid]?.key ?? "id:" + wid }

    /// --verify: holds a rendered result until a second worker's output for the same stage hashes
    /// the same. Returns the result to accept (an agreed one), or nil when it is held (the unit
    /// goes back to the queue for another worker) or the run ended.
    func verified(_ run: RunState, _ ui: Int, _ r: TaskResult, from wid: String) -> TaskResult? {
        let u = run.units[ui]
        guard config.verifyFraction > 0, r.cached != true, u.kind != .fetch, let sha = r.artifact?.sha256 else { return r }
        let others = { (excluded: Set<String>) in self.scheduler.takingWork(except: excluded) }
        if u.verifyOutputs.isEmpty {
            guard Double.random(in: 0..<1) < config.verifyFraction else { return r }
            guard others([wid]) > 0 else {
                record("event") { try lineage.event("verify.skipped", "\(label(run, u)) from worker \(wid) not verified: no second worker", runID: run.id) }
                return r
            }
        }
        for a in u.attemptIDs {
            record("attemptFinished") { try lineage.attemptFinished(a, state: .succeeded, started: r.startedAt, finished: r.finishedAt, cpu: r.cpuSeconds, maxRSS: r.maxRSS) }
        }
        u.verifyOutputs.append((wid, sha, r, u.attemptIDs))
        let excluded = scheduler.excluded(run.ref(ui)).union(u.verifyOutputs.map(\.worker))
        let votes = Dictionary(grouping: u.verifyOutputs, by: \.sha256)
        let (top, topVotes) = votes.map { ($0.key, $0.value.count) }.max { $0.1 < $1.1 }!
        if u.verifyOutputs.count >= 2 && topVotes >= 2 {
            // Agreed. A worker whose output differs from the agreed one forged or corrupted it.
            let agreeing = u.verifyOutputs.filter { $0.sha256 == top }
            for o in u.verifyOutputs where o.sha256 != top { quarantine(o.worker, run: run, unit: u, agreed: top, theirs: o.sha256, attempts: o.attemptIDs) }
            record("event") { try lineage.event("verify.matched", "\(label(run, u)): workers \(agreeing.map(\.worker).joined(separator: ", ")) made the same output \(top.prefix(12))…", runID: run.id) }
            let accepted = agreeing.last!
            u.attemptIDs = accepted.attemptIDs
            u.verifyOutputs = []
            var result = accepted.result
            result.lease = r.lease
            return result
        }
        if u.verifyOutputs.count >= 3 || others(excluded) == 0 {
            let who = u.verifyOutputs.map { "\($0.worker) → \($0.sha256.prefix(12))…" }.joined(separator: ", ")
            for o in u.verifyOutputs {
                for a in o.attemptIDs { record("attemptFinished") { try lineage.attemptFinished(a, state: .failed, started: o.result.startedAt, finished: o.result.finishedAt, errorClass: "permanent", errorMessage: "verification: outputs differ (\(who))") } }
            }
            failRun(run, unit: ui, message: "\(label(run, u)): verification failed: the workers' outputs differ (\(who)) and no further worker can decide; check those workers (same Threadline and FFmpeg versions?)")
            return nil
        }
        if u.verifyOutputs.count == 2 {
            log.warning("verification mismatch; a third worker decides", metadata: ["stage.id": "\(u.name)", "outputs": "\(u.verifyOutputs.map { "\($0.worker)=\($0.sha256.prefix(12))" })"])
        }
        // One more render of the same stage, on a worker that has not made it (not a retry). The
        // attempts so far stand as succeeded unless a vote finds their output wrong.
        feed(.again(lease: r.lease, worker: wid))
        return nil
    }

    func quarantine(_ wid: String, run: RunState, unit u: Unit, agreed: String, theirs: String, attempts: [Int64]) {
        let message = "worker \(wid) quarantined: its output for \(label(run, u)) of \(run.pipeline.name) was \(theirs.prefix(12))…, other workers agreed on \(agreed.prefix(12))…"
        for a in attempts { record("attemptFinished") { try lineage.attemptFinished(a, state: .failed, started: nil, finished: nil, errorClass: "permanent", errorMessage: message) } }
        // Held outputs of other stages can convict it again: it is quarantined once.
        guard quarantined.insert(quarantineKey(wid)).inserted else { return }
        log.error("worker quarantined", metadata: ["worker.id": "\(wid)", "stage.id": "\(u.name)"])
        record("event") { try lineage.event("worker.quarantined", message, runID: run.id) }
        if let w = workers[wid] { send(.shutdown, to: w.identity) }
        lose(worker: wid, reason: "quarantined by verification")
        record("workerState") { try lineage.workerState(id: wid, state: .quarantined) }
    }

    func succeed(_ run: RunState, _ ui: Int, _ r: TaskResult) throws {
        let u = run.units[ui]
        let p = run.pipeline
        // Each stage's first and only success: the metric needs no read of its row.
        let cached = r.cached == true && u.reuseID != nil
        func first(_ k: Int) -> (kind: String, cached: Bool) { (String(u.stages[k].prefix { $0 != "/" }), cached) }
        let encoder = JSONEncoder(); encoder.outputFormatting = [.sortedKeys]
        let done = Clocks.wall
        if u.kind == .fetch, let i = u.item, let art = r.artifact,
           let facts = try r.facts ?? u.reuseID.flatMap({ try lineage.artifactFacts($0) }) {
            let factsJSON = String(decoding: try encoder.encode(facts), as: UTF8.self)
            let aid = try recordOutput(run, u, r, kind: "source", facts: factsJSON, inputs: [])
            try lineage.attemptFinished(u.attemptIDs[0], state: attemptState(r), started: r.startedAt, finished: r.finishedAt, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
            try lineage.stageUpdate(u.stageRows[0], state: .succeeded,
                                    params: "{\"uri\":\"\(p.items[i].sources[0].uri)\"}", key: u.key ?? art.sha256,
                                    finished: done, seconds: r.finishedAt - r.startedAt, first: first(0))
            run.sources[i] = (art, aid)
            run.facts[i] = facts
            let frames = try Planner.frameCount(of: p.items[i], index: i, facts: facts, fps: p.output.fps)
            if try note(run, item: i, facts: facts) {
                // Told now: a run that fails in this turn (its stages cached) tells no more progress.
                progress(run, force: true)
            }
            // An item its transitions do not fit fails now (after its note: a trim.end past its
            // end says why it is short): no render of it is sent.
            if let e = Planner.transitionsDoNotFit(p, index: i, segmentFrames: frames) { throw e }
            run.frameCounts[i] = frames
            try updateTimeline(run)
        } else if u.kind == .render, let i = u.item, let art = r.artifact, let report = r.segment {
            let aid = try recordOutput(run, u, r, kind: "segment", facts: nil, inputs: (run.sources[i].map { [$0.1] } ?? []) + fileInputs(run, item: i))
            let seconds = [report.decodeSeconds, report.transformSeconds, report.encodeSeconds]
            for k in u.stages.indices {
                try lineage.attemptFinished(u.attemptIDs[k], state: attemptState(r), started: r.startedAt, finished: r.finishedAt,
                                            cpu: k == 0 ? r.cpuSeconds : nil, maxRSS: r.maxRSS)
                try lineage.stageUpdate(u.stageRows[k], state: .succeeded, finished: done, seconds: seconds[k], first: first(k))
            }
            run.segments[i] = (art, aid)
            if !cached { run.renderedItems.insert(i); run.renderSeconds += max(0, Clocks.steady - u.sentAt) }
        } else if u.kind == .transition, let b = u.item, let art = r.artifact {
            let inputs = [run.segments[b]?.1, run.segments[b + 1]?.1].compactMap { $0 }
            let aid = try recordOutput(run, u, r, kind: "transition", facts: nil, inputs: inputs)
            try lineage.attemptFinished(u.attemptIDs[0], state: attemptState(r), started: r.startedAt, finished: r.finishedAt, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
            let params: String? = { if case .transition(let spec, _, _, _) = u.task {
                    return (try? encoder.encode(spec)).map { String(decoding: $0, as: UTF8.self) } }
                return nil }()
            try lineage.stageUpdate(u.stageRows[0], state: .succeeded, params: params, key: u.key, finished: done,
                                    seconds: r.finishedAt - r.startedAt, first: first(0))
            run.transitions[b] = (art, aid)
        } else if u.kind == .concat, let art = r.artifact {
            let out = p.output.path
            // Segments and transitions, in the movie's order, and the soundtrack.
            let parts = run.segments.sorted { $0.key < $1.key }.map(\.value.1) + run.transitions.sorted { $0.key < $1.key }.map(\.value.1)
            let aid = try recordOutput(run, u, r, kind: "movie", facts: nil, inputs: parts + fileInputs(run, item: nil))
            _ = aid
            if config.publishOutputs {
                do { try ArtifactStore.publish(art, to: out) } catch {
                    // The movie is made and kept (its artifact is recorded above): a resubmit finds it cached.
                    let mend = error.noSpace ? "free space on that disk" : "make the folder writable"
                    let e = PipelineError("could not write the movie to \(out): \(error)", at: p.outputLocation,
                                          hint: "it is kept in the artifact store (\(art.path)); \(mend) or choose another output.path and submit again: nothing is rendered again")
                    try lineage.attemptFinished(u.attemptIDs[0], state: .failed, started: r.startedAt, finished: r.finishedAt,
                                                errorClass: "permanent", errorMessage: e.description, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
                    throw e
                }
                // The file at the user's path is the movie's copy: produced by concat from the segments.
                try lineage.recordArtifact(sha256: art.sha256, uri: out, size: art.size, kind: "output", facts: nil, key: nil,
                                           attemptID: u.attemptIDs.first, inputs: run.segments.values.map(\.1))
            }
            try lineage.attemptFinished(u.attemptIDs[0], state: attemptState(r), started: r.startedAt, finished: r.finishedAt, cpu: r.cpuSeconds, maxRSS: r.maxRSS)
            let concatParams: String? = { if case .concat(let inputs, let profile) = u.task {
                    var n = inputs; for k in n.indices { n[k].path = "" }
                    return (try? encoder.encode(ConcatKey(inputs: n, profile: profile))).map { String(decoding: $0, as: UTF8.self) } }
                return nil }()
            try lineage.stageUpdate(u.stageRows[0], state: .succeeded, params: concatParams, key: u.key ?? art.sha256,
                                    finished: done, seconds: r.finishedAt - r.startedAt, first: first(0))
            run.output = art
            return
        } else {
            // `lacking` lets none through; counted done, the stage would leave what needs it nothing.
            throw PipelineError("\(label(run, u)): the result lacks what the stage makes (the facts of a file reused from an earlier run?); submit again", at: nil)
        }
    }

    /// Once every item's length is known, the frame-exact timeline.
    func updateTimeline(_ run: RunState) throws {
        let p = run.pipeline
        guard run.timeline == nil, run.frameCounts.count == p.items.count else { return }
        var byURI: [String: MediaFacts] = [:]
        for (i, f) in run.facts { byURI[p.items[i].sources[0].uri] = f }
        let timeline = try Planner.timeline(for: p, facts: byURI)
        run.timeline = timeline
        try lineage.setItemTiming(runID: run.id, timeline: timeline)
        // With a length cap, renders wait for the whole timeline (the run graph) and are fitted to it.
        if p.output.maxDuration != nil {
            for t in timeline { run.frameCounts[t.item] = t.segmentFrames }
        }
    }

    /// Records and logs what planning did to item `i` that its pipeline did not say
    /// (`Planner.notes`); whether there was any.
    @discardableResult
    func note(_ run: RunState, item i: Int, facts: MediaFacts?) throws -> Bool {
        let p = run.pipeline
        let notes = Planner.notes(for: p.items[i], index: i, facts: facts, fps: p.output.fps)
        guard !notes.isEmpty else { return false }
        run.notes[i] = notes
        for note in notes {
            log.notice("\(note)", metadata: ["run.id": "\(run.id)"])
            try lineage.event("item.note", note, runID: run.id)   // the run page lists it
        }
        return true
    }

    /// Fails the run now (its output could not be recorded, or verification failed).
    func failRun(_ run: RunState, unit ui: Int, message: String, failedStage: StageKind? = nil) {
        guard !run.finished else { return }
        run.units[ui].failure = (message, failedStage)
        feed(.fail(run.ref(ui)))
        if !run.finished { progress(run) }
    }

    /// The scheduler ended a run: record how, tell its observers and watchers, forget it.
    func runEnded(_ run: RunState, _ outcome: FarmScheduler.Outcome, now: Double) {
        run.finished = true
        for (k, u) in run.units.enumerated() where u.kind == .render {
            if let key = u.key, keyMakers[key] == StageRef(run: run.id, node: k) { keyMakers[key] = nil }
        }
        // Its whole time (before a resume too), and what the log line for its end starts with.
        let seconds = now - run.startedAt
        let said: Logger.Metadata = ["run.id": "\(run.id)", "run.name": "\(run.pipeline.name)", "run.seconds": "\(String(format: "%.1f", seconds))"]
        runs[run.id] = nil
        recordReady(run: run.id)
        switch outcome {
        case .succeeded:
            guard let art = run.output else {
                let message = "the concat: the worker reported the movie done but sent no file; submit again"
                record("runFinished") { try lineage.runFinished(run.id, state: .failed, error: message) }
                ended(run, state: .failed, message: message, output: nil)
                notifyWhenCommitted(run.id, .failed(message: message, seconds: seconds))
                return
            }
            run.succeeded = true
            record("runFinished") { try lineage.runFinished(run.id, state: .succeeded) }
            let out = run.pipeline.output.path
            log.info("run succeeded", metadata: said.merging(["output": "\(out)"]) { $1 })
            progress(run, force: true)
            ended(run, state: .succeeded, message: nil, output: art)
            notifyWhenCommitted(run.id, .succeeded(output: config.publishOutputs ? out : art.path, seconds: seconds))
        case .cancelled:
            let reason = run.cancelReason ?? "cancelled by the coordinator"
            record("runFinished") { try lineage.runFinished(run.id, state: .cancelled, error: reason) }
            log.info("run cancelled", metadata: said.merging(["reason": "\(reason)"]) { $1 })
            ended(run, state: .cancelled, message: reason, output: nil)
            notifyWhenCommitted(run.id, .failed(message: "run \(run.id) was cancelled", seconds: seconds))
        case .failed(let first, _, let also), .poison(let first, _, let also):
            // Every failure, in the pipeline's order (as a person reads the file against it), not
            // in the order they came: two items fetched side by side fail in either order.
            let failed = ([first] + also).sorted { $0.node < $1.node }
            let messages = failed.map { s in run.units[s.node].failure?.message ?? "\(label(run, run.units[s.node])) failed" }
            let what = failed.allSatisfy { run.units[$0.node].item != nil } ? "items" : "stages"
            var message = messages.count == 1 ? messages[0] : "\(messages.count) \(what) failed:\n" + messages.map { "  " + $0 }.joined(separator: "\n")
            // The run went on without them: say what that kept, and how it is used.
            if what == "items", !run.segments.isEmpty {
                let n = run.segments.count
                message += "\n  (\(n == 1 ? "the 1 other item is" : "the \(n) other items are") rendered and kept: mend or remove the failed \(messages.count == 1 ? "one" : "ones") and submit again to reuse \(n == 1 ? "it" : "them"))"
            }
            record("runFinished") { try lineage.runFinished(run.id, state: .failed, error: message) }
            log.error("run failed", metadata: said.merging(["error": "\(message)"]) { $1 })
            ended(run, state: .failed, message: message, output: nil)
            notifyWhenCommitted(run.id, .failed(message: message, seconds: seconds))
        }
    }

    /// What a unit's worker does, for a line about it ("while rendering it").
    static func doing(_ kind: Unit.Kind) -> String {
        switch kind {
        case .fetch: "fetching"
        case .render: "rendering"
        case .transition: "blending"
        case .concat: "joining"
        }
    }

    func label(_ run: RunState, _ u: Unit) -> String {
        // (Said where the run is named already: a batch's line, the summary's project column.)
        guard let i = u.item else { return "the concat" }
        let item = run.pipeline.items[i]
        let loc = item.location.map { " [\($0)]" } ?? ""
        return "\(item.label(index: i))\(loc)"
    }

    /// The progress owed this turn, for runs not told in the last 0.125 s (the others wait for a
    /// later turn).
    func tellOwedProgress() {
        guard !progressOwed.isEmpty else { return }
        let now = Clocks.steady
        for id in progressOwed {
            guard let r = runs[id], !r.finished else { progressOwed.remove(id); continue }
            if now - r.lastProgress > 0.125 { progress(r, force: true) }
        }
    }

    /// Tells observers and watching submitters how a run stands: at once when forced, else at the
    /// end of the turn (`tellOwedProgress`).
    func progress(_ run: RunState, force: Bool = false) {
        guard force else { progressOwed.insert(run.id); return }
        let now = Clocks.steady
        progressOwed.remove(run.id)
        run.lastProgress = now
        let items = run.pipeline.items.count
        var done = 0, total = 0
        var running: [String] = []
        var failures: [String] = []
        /// Items that will not be rendered (they failed, or wait for what did), and their planned frames.
        var itemsLost: Set<Int> = []
        var framesLost = 0
        var slots = TimeLeft.Slots(renderSeconds: run.renderSeconds, inFlight: 0, inFlightFrames: 0, inFlightSeconds: 0)
        var framesElsewhere = 0
        let costPerFrame = run.costPerFrame
        let frames = run.weighedFrames(mean: costPerFrame)
        let phases = scheduler.phases(ofRun: run.id)
        for (k, u) in run.units.enumerated() {
            total += u.stages.count
            // A render to come whose output another run's render makes: a cache hit once that is
            // done. (A maker whose run ended, or that ended without it, makes it no more: the
            // first render left with the key takes it over.)
            if u.kind == .render, let key = u.key, let i = u.item, k < phases.count, phases[k] != .done, phases[k] != .ended {
                let me = StageRef(run: run.id, node: k)
                if let maker = keyMakers[key], maker != me, scheduler.phase(maker) != .ended {
                    if maker.run != run.id { framesElsewhere += frames(i) }
                } else {
                    keyMakers[key] = me
                }
            }
            switch run.succeeded ? .done : (k < phases.count ? phases[k] : .ended) {
            case .ended where k < phases.count:
                // A unit that waited for a failure has none of its own.
                if let f = u.failure { failures.append(f.message) }
                if u.kind == .render, let i = u.item { framesLost += frames(i); itemsLost.insert(i) }
            case .done: done += u.stages.count
            case .running:
                // A render whose slot was given back (its segment coming up) is as far along as
                // its time says, but renders nothing beside the others: on one slot, the next
                // render and it read as two running and halved the time left.
                let holdsSlot = scheduler.inSlot(StageRef(run: run.id, node: k))
                if holdsSlot { running.append(u.name) }
                if u.kind == .render, let i = u.item {
                    if holdsSlot { slots.inFlight += 1 }
                    slots.inFlightFrames += frames(i)
                    slots.inFlightSeconds += max(0, now - u.sentAt)
                }
            // A cache check takes no slot and a few milliseconds: counted, a coordinator
            // restarted under a batch on one slot read "3 running" while its resumed runs
            // checked what they had.
            case .checking: break
            default: break
            }
        }
        // Rendered before a restart, their checks still to come (see `RunState.kept`).
        let kept = run.kept.subtracting(run.segments.keys).subtracting(itemsLost)
        var p = RunProgress(runID: run.id, items: items, itemsDone: run.segments.count + kept.count, stagesTotal: total, stagesDone: done,
                            running: running.count > 64 ? Array(running.prefix(64)) : running, elapsed: now - run.startedAt)
        p.framesTotal = run.frameCounts.keys.reduce(0) { $0 + frames($1) } - framesLost
        p.framesDone = run.segments.keys.reduce(0) { $0 + frames($1) } + kept.reduce(0) { $0 + frames($1) }
        // An item that will not render needs no length: the time left is the others'.
        p.framesKnown = run.frameCounts.count == items || Set(run.frameCounts.keys).union(itemsLost).count == items
        p.framesRendered = run.renderedItems.reduce(0) { $0 + frames($1) }
        p.renderingFor = run.firstRenderSent.map { now - $0 } ?? 0
        p.slots = slots
        p.failures = failures
        p.notes = run.notesInOrder
        p.setbacks = run.setbacks
        p.framesElsewhere = framesElsewhere
        p.costPerFrame = costPerFrame
        p.workers = scheduler.takingWork()
        owner.notify(p, run.id, nil)
        if let ws = watchers[run.id] {
            let data = Envelope(.progress(p)).encoded()
            for w in ws where (try? socket.send([w, data])) != true { watchers[run.id]?.remove(w) }
        }
    }
}
