import Foundation
import Testing
import TestSupport

/// What `coord submit` draws on a real terminal (tmux), read back from the terminal's screen.
@Suite struct TerminalTests {
    /// Rows of `screen` holding `marker`.
    static func rows(_ screen: String, _ marker: String) -> [Substring] {
        screen.split(separator: "\n").filter { $0.contains(marker) }
    }

    /// On a terminal narrower than its progress lines (a split pane, an SSH session from a phone)
    /// each line redrawn in place stays on one row, cut with "…": the local batch's total and
    /// project lines, and a remote submit's bar. Before, every line wrapped, and each redraw left
    /// its first row behind: a 50-column window filled with copies of the progress line.
    @Test func progressStaysOnItsRowsOnANarrowTerminal() throws {
        let dir = temporaryDirectory("narrow-terminal")
        let files = try InterruptTests.projects(dir)
        let local = ([coordPath, "submit"] + files + ["--state", dir + "/state", "--workers", "1"]).joined(separator: " ")
        guard let terminal = try TerminalSession(local, columns: 50, rows: 30) else {
            print("skipped: tmux is not installed (scripts/setup installs it)"); return
        }
        let (ended, screen) = terminal.waitForExit(timeout: 300)
        #expect(ended && screen.contains("EXIT=0"), "\(screen)")
        // Each redraw replaced the last: one total line is left, the final one.
        #expect(Self.rows(screen, "projects done").count == 1, "\(screen)")
        #expect(Self.rows(screen, "projects done").first?.hasPrefix("3/3 projects done") == true, "\(screen)")
        #expect(!Self.rows(screen, "items ·").contains { $0.hasPrefix("  holiday-") }, "a project's line left behind:\n\(screen)")

        // A remote submit's bar (the coordinator tells a follower at least once a second).
        let remote = temporaryDirectory("narrow-terminal-remote")
        let pipeline = try ClusterTests.project(remote, items: 3, seconds: 2)
        let (procs, ep) = try ClusterTests.loopbackCluster(remote, workers: 1)
        defer { procs.stopAll() }
        guard let follower = try TerminalSession("\(coordPath) submit \(pipeline) --coordinator \(ep)", columns: 50, rows: 30) else { return }
        let (followed, remoteScreen) = follower.waitForExit(timeout: 120)
        #expect(followed && remoteScreen.contains("EXIT=0"), "\(remoteScreen)")
        let bars = Self.rows(remoteScreen, " items")
        #expect(bars.count == 1 && bars[0].hasSuffix("…"), "the bar drawn once and cut:\n\(remoteScreen)")
    }

    /// One project rendered here draws one bar, as a remote submit of one does; before, a total
    /// line "0/1 projects done · 3/7 items · …" stood above a line of the same project.
    @Test func oneLocalProjectDrawsOneBar() throws {
        let dir = temporaryDirectory("one-bar")
        let pipeline = try ClusterTests.project(dir, items: 3, seconds: 1, size: (160, 120))
        guard let terminal = try TerminalSession("\(coordPath) submit \(pipeline) --state \(dir)/st --workers 1") else {
            print("skipped: tmux is not installed (scripts/setup installs it)"); return
        }
        let (ended, screen) = terminal.waitForExit(timeout: 120)
        #expect(ended && screen.contains("EXIT=0"), "\(screen)")
        #expect(Self.rows(screen, "projects done").isEmpty, "\(screen)")
        let bars = Self.rows(screen, " items · ")
        #expect(bars.count == 1 && bars[0].hasPrefix("test [████████████████████████] 3/3 items · 0 running · ") && bars[0].hasSuffix(" s"), "\(screen)")
    }

    /// Projects beyond the lines drawn are told as they stand: eleven projects on one slot read
    /// "… and 3 more running" while the total said "1 running".
    @Test func projectsBeyondTheLinesSayWhetherTheyRenderOrWait() throws {
        let dir = temporaryDirectory("more-line")
        let files = try (1...11).map { k -> String in
            try FileManager.default.createDirectory(atPath: dir + "/p\(k)", withIntermediateDirectories: true)
            return try ClusterTests.project(dir + "/p\(k)", items: 3, seconds: 2, size: (320, 240))
        }
        guard let terminal = try TerminalSession("\(coordPath) submit \(files.joined(separator: " ")) --state \(dir)/st --workers 1") else {
            print("skipped: tmux is not installed (scripts/setup installs it)"); return
        }
        var mores: [String] = [], claims: [String] = []
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let screen = terminal.screen()
            if screen.contains("EXIT=") { break }
            guard let total = Self.rows(screen, "projects done").first, let more = Self.rows(screen, "… and ").first else { usleep(50_000); continue }
            mores.append(String(more))
            // What the hidden ones say runs, against what the total says runs (one slot).
            let running = Int(total.components(separatedBy: " running")[0].split(separator: " ").last ?? "") ?? -1
            let hiddenRunning = more.hasSuffix("more running") ? Int(more.split(separator: " ")[2]) ?? 99
                : more.contains(" running,") ? Int(more.components(separatedBy: " running,")[0].split(separator: " ").last ?? "") ?? 99 : 0
            if hiddenRunning > max(running, 1) { claims.append("\(total) / \(more)") }
            usleep(50_000)
        }
        let (ended, screen) = terminal.waitForExit(timeout: 60)
        #expect(ended && screen.contains("EXIT=0"), "\(screen)")
        #expect(!mores.isEmpty, "never more projects than lines")
        #expect(claims.isEmpty, "more said running than the farm runs: \(claims.prefix(3))")
        #expect(mores.contains { $0.contains("waiting for a slot") }, "\(Set(mores))")
    }

    /// `coord runs` on a terminal: named, aligned columns. Piped, tab-separated lines as before
    /// (what scripts read).
    @Test func runsOnATerminalHaveNamedColumns() throws {
        let dir = temporaryDirectory("runs-table")
        let pipeline = try ClusterTests.project(dir, items: 1, seconds: 0.5, size: (160, 120))
        let rendered = try run(coordPath, ["submit", pipeline, "--state", dir + "/st", "--workers", "1"], timeout: 120)
        #expect(rendered.status == 0, "\(rendered.err)")
        guard let terminal = try TerminalSession("\(coordPath) runs --state \(dir)/st") else {
            print("skipped: tmux is not installed (scripts/setup installs it)"); return
        }
        let (ended, screen) = terminal.waitForExit(timeout: 60)
        #expect(ended && screen.contains("EXIT=0"), "\(screen)")
        let lines = screen.split(separator: "\n").map(String.init)
        guard let h = lines.firstIndex(where: { $0.hasPrefix("run  state") }), lines.indices.contains(h + 1) else {
            Issue.record("no header:\n\(screen)"); return
        }
        #expect(lines[h].split(separator: " ", omittingEmptySubsequences: true) == ["run", "state", "stages", "seconds", "project", "movie"], "\(lines[h])")
        let row = lines[h + 1]
        #expect(row.hasPrefix("  1  succeeded  ") && row.hasSuffix(".mp4") && !row.contains("\t"), "\(screen)")
        // Each value starts under its name (words) or ends under it (numbers).
        let movie = lines[h].range(of: "movie")!.lowerBound.utf16Offset(in: lines[h])
        #expect(row.dropFirst(movie).hasPrefix("/"), "the movie under its heading:\n\(lines[h])\n\(row)")
        let piped = try run(coordPath, ["runs", "--state", dir + "/st"], timeout: 30)
        #expect(piped.out.hasPrefix("1\tsucceeded\t") && !piped.out.contains("project"), "\(piped.out)")
    }

    /// A batch submitted again to a farm (every stage cached) ends with every item counted. Its
    /// runs end before they are followed, so they tell no progress: the total line said
    /// "3/3 projects done · 0/6 items" (a run that told some before it succeeded counted only those).
    @Test func aCachedBatchOnAFarmCountsEveryItem() throws {
        let dir = temporaryDirectory("cached-batch-items")
        let files = try InterruptTests.projects(dir)
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1, pipelines: 2)
        defer { procs.stopAll() }
        let first = try run(coordPath, ["submit"] + files + ["--coordinator", ep], timeout: 300)
        #expect(first.status == 0, "\(first.err)")
        guard let terminal = try TerminalSession((["cd", dir, "&&", coordPath, "submit"] + files + ["--coordinator", ep]).joined(separator: " ")) else {
            print("skipped: tmux is not installed (scripts/setup installs it)"); return
        }
        let (ended, screen) = terminal.waitForExit(timeout: 120)
        #expect(ended && screen.contains("EXIT=0"), "\(screen)")
        let total = Self.rows(screen, "projects done")
        #expect(total.count == 1 && total[0].hasPrefix("3/3 projects done · 6/6 items · 0 running · "), "\(screen)")
        // `coord wait` of runs that have ended counts their items too (it read "0/0 items").
        guard let waiting = try TerminalSession("\(coordPath) wait 1-3 --coordinator \(ep)") else { return }
        let (waited, waitScreen) = waiting.waitForExit(timeout: 120)
        #expect(waited && waitScreen.contains("EXIT=0"), "\(waitScreen)")
        let followed = Self.rows(waitScreen, "projects done")
        #expect(followed.count == 1 && followed[0].hasPrefix("3/3 projects done · 6/6 items · 0 running · "), "\(waitScreen)")
    }
}
