import Testing
import ThreadlineCore

@Suite struct ClocksTests {
    /// A repeated warning is said the first time whatever the steady clock reads: on a host up for
    /// five seconds (the clock counts from boot) as on one up for a year.
    @Test func aRepeatedWarningIsSaidAtOnceThenOnlyAfterItsInterval() {
        for boot in [5.0, 31_536_000] {
            var e = Every(600)
            let answers = [0, 1, 599.9, 600, 601].map { e.due(boot + $0) }
            #expect(answers == [true, false, false, true, false], "up \(boot) s")
        }
    }
}
