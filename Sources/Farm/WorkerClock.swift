import DequeModule

/// How far a worker's wall clock is behind the coordinator's (negative: ahead), from the stamps
/// its hellos, heartbeats and results carry. Each message's `received − sent` is that offset plus
/// the time it spent on its way, never less; so the least of the last few is the offset to within
/// the quickest trip (NTP's bound, without the round trip). A delayed or re-sent message only
/// gives a larger value, which the least ignores.
///
/// The coordinator records the attempt times a worker reports on its own clock with it: a worker
/// five minutes behind had its attempts start before they were sent and end before their run
/// began, and the run page's chart of attempts was empty.
struct WorkerClock {
    /// Messages looked at: twenty seconds of heartbeats at most, so a step of the worker's clock
    /// is followed within that.
    static let window = 20
    /// Offsets smaller than this are a synchronised farm's (NTP keeps hosts within milliseconds):
    /// its workers' times are recorded as they measured them.
    static let tolerance = 0.1
    /// Said in the coordinator's log past this, once a connection, after `settled` messages.
    static let worthSaying = 2.0
    static let settled = 3

    private var samples = Deque<Double>()
    /// The offset, when any message has told it: the least sample.
    private(set) var offset: Double?
    /// Whether the log has said how far this worker's clock is off.
    var told = false

    mutating func observe(sent: Double, received: Double) {
        guard sent.isFinite, sent > 0 else { return }
        let sample = received - sent
        if samples.count == Self.window, samples.removeFirst() == offset { offset = samples.min() }
        samples.append(sample)
        offset = min(offset ?? sample, sample)
    }

    /// The offset when it is worth saying (the log, the farm page), else nil.
    var farOff: Double? { offset.flatMap { abs($0) > Self.worthSaying ? $0 : nil } }

    /// Whether the log should say now how far off the clock is (once, when settled and far off).
    mutating func shouldTell() -> Double? {
        guard !told, samples.count >= Self.settled, let o = farOff else { return nil }
        told = true
        return o
    }

    /// A time the worker stamped, on the coordinator's clock.
    func onCoordinatorsClock(_ t: Double) -> Double {
        guard let o = offset, abs(o) > Self.tolerance else { return t }
        return t + o
    }
}
