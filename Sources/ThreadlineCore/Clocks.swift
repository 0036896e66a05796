import Dispatch
import Foundation

/// The two clocks the farm reads, in seconds.
///
/// `wall` is the calendar's: lineage's timestamps, files' modification times, anything a person
/// reads or another host compares. It can jump: NTP stepping it at boot on a machine without a
/// clock, an operator's `date -s`, a virtual machine resumed after hours.
///
/// `steady` only goes forward, one second a second, whatever the wall clock is set to (Linux's
/// `CLOCK_MONOTONIC`; it stands still while the machine sleeps). Every timeout, deadline, backoff,
/// liveness check and duration is measured on it: on the wall clock a one-hour step forward
/// declared every worker lost and threw away their stages in flight, and a step back held
/// retries and lost-worker detection up by as long. Its values mean nothing across processes or
/// hosts and are never stored.
public enum Clocks {
    public static var wall: Double { Date().timeIntervalSince1970 }
    public static var steady: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}

/// Yes at most once every `interval` seconds of the steady clock: a warning repeated while what
/// it warns of lasts, a periodic check. The first asking is always yes. (`steady` counts from the machine's boot: a
/// last time kept as 0 read as a warning given at boot, and a worker on a host up for less than
/// ten minutes never said its disk was nearly full.)
public struct Every: Sendable {
    public let interval: Double
    private var last: Double?
    public init(_ interval: Double) { self.interval = interval }
    /// Whether it is time again; if so, the next time counts from `now`.
    public mutating func due(_ now: Double = Clocks.steady) -> Bool {
        if let last, now - last < interval { return false }
        last = now
        return true
    }
}
