import Foundation

/// How long a render has left, from the rate at which its planned frames are being rendered (not
/// from counts of items or stages: a 60 s clip and a 2 s photo are not the same work). One rule for
/// `coord submit`'s progress lines, a batch's total line and the dashboard.
///
/// The rate comes from the run's own renders (`Slots`): frames reused from the cache come at once
/// and say nothing about it (an edit of one item of twelve would otherwise read ETA 0:00 while that
/// item renders), and a project that waited behind others in a batch has not been rendering while
/// it waited (with 8 projects on 2 workers, projects 5-8 read ETA 0:06-0:09 with under a second
/// left when the waiting counted).
public enum TimeLeft {
    /// How a run's renders go on their slots: the seconds its finished renders took (summed over
    /// them, from when each was sent), and the renders still in flight (how many hold a slot, and
    /// of all, those whose segment is still coming up too, their planned frames and the seconds
    /// since each was sent, summed). Renders run side by side, so frames
    /// over wall time alone said about twice the time left when the first of two parallel renders
    /// ended (the small bench's first ETA read 0:33 at 1/14 items of an 18.5 s run; with these, 0:14
    /// with 16.5 s of rendering left).
    public struct Slots: Sendable, Equatable, Codable {
        public var renderSeconds: Double
        public var inFlight: Int
        public var inFlightFrames: Int
        public var inFlightSeconds: Double
        public init(renderSeconds: Double, inFlight: Int, inFlightFrames: Int, inFlightSeconds: Double) {
            self.renderSeconds = renderSeconds; self.inFlight = inFlight; self.inFlightFrames = inFlightFrames; self.inFlightSeconds = inFlightSeconds
        }
    }

    /// Seconds left. With `slots`: a render's speed is the frames rendered over the seconds their
    /// renders took; the renders in flight are that far along; what is left goes at that speed on
    /// as many slots as the run has had on average since its first render (its renders' seconds
    /// over `renderingFor`), or as it has in flight when more (at least one), but no sooner than
    /// the renders in flight can end on their own slots. (By the renders in flight alone, the
    /// time left doubled whenever one of two slots was between renders: a 40-project batch on two
    /// slots read 0:10, 0:19, 0:08, 0:12, …) Without `slots` (an older coordinator): the frames
    /// not done yet at the rate `rendered` frames took `renderingFor` seconds of wall time.
    /// Nil until a frame is rendered and every item's length is known (remote sources are
    /// measured when fetched).
    ///
    /// `speed`: frames a slot renders a second, seen elsewhere (a batch's other projects), for a
    /// run with `slots` that has rendered nothing of its own yet: a project of a batch whose first
    /// items came from the cache (clips another project had rendered) read "ETA --:--" until its
    /// own last render ended.
    public static func seconds(framesDone done: Int, framesTotal total: Int, known: Bool, rendered: Int, renderingFor: Double,
                               slots: Slots? = nil, speed: Double? = nil) -> Double? {
        guard known, total >= done else { return nil }
        if let slots, let perSlot = Self.speed(frames: rendered, seconds: slots.renderSeconds) ?? speed.flatMap({ $0 > 0 ? $0 : nil }) {
            let underway = min(Double(slots.inFlightFrames), perSlot * slots.inFlightSeconds)
            let average = renderingFor > 0 ? (slots.renderSeconds + slots.inFlightSeconds) / renderingFor : 0
            let left = max(0, Double(total - done) - underway) / (perSlot * max(1, Double(slots.inFlight), average))
            let inFlightLeft = max(0, Double(slots.inFlightFrames) - underway) / (perSlot * Double(max(1, slots.inFlight)))
            return max(left, inFlightLeft)
        }
        guard rendered > 0, renderingFor > 0 else { return nil }
        return Double(total - done) * renderingFor / Double(rendered)
    }

    /// Frames a slot should render a second before any render has ended, for frames that should
    /// cost `costPerFrame` milliseconds each (`RenderCost`, whose unit is a millisecond of one
    /// core, a slot, of the machine it was measured on): the time left from the first second,
    /// where it read "ETA --:--" until the first render ended (3.7 s of a phone library's 8.5 s
    /// project; a minute and more of a long one). The renders' own rate takes over once there is one.
    public static func nominalSpeed(costPerFrame: Double?) -> Double? {
        costPerFrame.flatMap { $0 > 0 ? 1000 / $0 : nil }
    }

    /// Frames a slot renders a second: `frames` rendered in `seconds` of renders (summed over
    /// their slots); nil before there are any. A run's own rate, a batch's, the farm's.
    public static func speed(frames: Int, seconds: Double) -> Double? {
        frames > 0 && seconds > 0 ? Double(frames) / seconds : nil
    }

    /// Every planned frame is rendered and the run goes on: the concat is joining the movie. Its
    /// time is not in the frames, so an ETA would read 0:00 for as long as it takes (seconds for a
    /// long movie, whose audio is encoded then).
    public static func joining(framesDone done: Int, framesTotal total: Int, known: Bool) -> Bool {
        known && total > 0 && done == total
    }

    /// What a progress line shows: "joining the movie" (`movies` > 1: "the movies"), "ETA m:ss",
    /// "finishing the last render" once what is left is under way and overdue, or "ETA --:--"
    /// while the length or the rate is not known yet.
    public static func text(framesDone done: Int, framesTotal total: Int, known: Bool, rendered: Int, renderingFor: Double,
                            slots: Slots? = nil, speed: Double? = nil, movies: Int = 1) -> String {
        if joining(framesDone: done, framesTotal: total, known: known) { return movies == 1 ? "joining the movie" : "joining the movies" }
        guard let left = seconds(framesDone: done, framesTotal: total, known: known, rendered: rendered, renderingFor: renderingFor,
                                 slots: slots, speed: speed) else { return "ETA --:--" }
        if let n = finishing(framesDone: done, framesTotal: total, left: left, slots: slots) { return finishingText(n) }
        return "ETA " + clock(left)
    }

    /// "m:ss", and "h:mm:ss" from an hour on (an overnight batch read "ETA 245:13").
    public static func clock(_ seconds: Double) -> String {
        let s = seconds.isFinite ? Int(min(max(0, seconds), 1e12)) : 0
        return s < 3600 ? String(format: "%ld:%02ld", s / 60, s % 60) : String(format: "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60)
    }

    /// Every frame left is in renders under way, which the rate says should be done (`left`
    /// under a second): they go slower than the average (a heavy clip last), and "ETA 0:00" held
    /// for seconds read as stuck. The renders in flight then, else nil. (A render whose slot was
    /// given back, its segment coming up, is not counted in flight.)
    public static func finishing(framesDone done: Int, framesTotal total: Int, left: Double, slots: Slots?) -> Int? {
        guard left < 1, let slots, slots.inFlightFrames > 0, total - done <= slots.inFlightFrames else { return nil }
        return max(1, slots.inFlight)
    }

    /// What a line says while `renders` renders finish (`finishing`).
    static func finishingText(_ renders: Int) -> String {
        renders <= 1 ? "finishing the last render" : "finishing the last \(renders) renders"
    }
}
