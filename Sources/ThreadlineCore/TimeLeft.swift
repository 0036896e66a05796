import Foundation

/// How long a render has left, from the rate at which its planned frames are being rendered (not
/// from counts of items or stages: a 60 s clip and a 2 s photo are not the same work). One rule for
/// `coord submit`'s progress lines, a batch's total line and the dashboard.
///
/// The rate is the frames the run rendered itself over the time since its first render was sent:
/// frames reused from the cache come at once and say nothing about the rate (an edit of one item
/// of twelve would otherwise read ETA 0:00 while that item renders), and a project that waited
/// behind others in a batch has not been rendering while it waited (with 8 projects on 2
/// workers, projects 5-8 read ETA 0:06-0:09 with under a second left).
public enum TimeLeft {
    /// Seconds left: the frames not done yet, at the rate `rendered` frames took `renderingFor`
    /// seconds. Nil until a frame is rendered and every item's length is known (remote sources
    /// are measured when fetched).
    public static func seconds(framesDone done: Int, framesTotal total: Int, known: Bool, rendered: Int, renderingFor: Double) -> Double? {
        guard known, rendered > 0, total >= done, renderingFor > 0 else { return nil }
        return Double(total - done) * renderingFor / Double(rendered)
    }

    /// Every planned frame is rendered and the run goes on: the concat is joining the movie. Its
    /// time is not in the frames, so an ETA would read 0:00 for as long as it takes (seconds for a
    /// long movie, whose audio is encoded then).
    public static func joining(framesDone done: Int, framesTotal total: Int, known: Bool) -> Bool {
        known && total > 0 && done == total
    }

    /// What a progress line shows: "joining the movie" (`movies` > 1: "the movies"), "ETA m:ss",
    /// or "ETA --:--" while the length or the rate is not known yet.
    public static func text(framesDone done: Int, framesTotal total: Int, known: Bool, rendered: Int, renderingFor: Double, movies: Int = 1) -> String {
        if joining(framesDone: done, framesTotal: total, known: known) { return movies == 1 ? "joining the movie" : "joining the movies" }
        guard let left = seconds(framesDone: done, framesTotal: total, known: known, rendered: rendered, renderingFor: renderingFor) else { return "ETA --:--" }
        return String(format: "ETA %d:%02d", Int(left) / 60, Int(left) % 60)
    }
}
