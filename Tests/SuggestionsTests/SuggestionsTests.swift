import Testing
import Suggestions

/// The suggestion rules, each on its own (milliseconds; no files).
@Suite struct SuggestionsTests {
    typealias Day = Suggestions.Day
    static let today = Day(year: 2026, month: 6, day: 20)

    static func photo(_ local: String, _ path: String? = nil) -> Suggestions.Item {
        .init(path: path ?? "/lib/\(local).jpg", kind: .photo, local: local)
    }
    static func photos(_ day: String, _ n: Int, folder: String = "/lib") -> [Suggestions.Item] {
        (0..<n).map { photo(String(format: "%@T%02d:00:00", day, 8 + $0), "\(folder)/\(day)-\($0).jpg") }
    }

    @Test func theSmallestGroupGrowsWithTheLibrary() {
        #expect(Suggestions.minimumItems(eligible: 0) == 3)
        #expect(Suggestions.minimumItems(eligible: 7) == 3)
        #expect(Suggestions.minimumItems(eligible: 8) == 4)
        #expect(Suggestions.minimumItems(eligible: 1000) == 10)
        #expect(Suggestions.minimumItems(eligible: 10_000) == 14)
    }

    @Test func recentDaysAreGroupedByDayAndConsecutiveDaysMerge() {
        let items = Self.photos("2026-06-12", 2) + Self.photos("2026-06-13", 2) + Self.photos("2026-06-18", 4) + Self.photos("2026-06-01", 1)
        let s = Suggestions.suggest(items, today: Self.today, memories: false, blocks: [])
        #expect(s.map(\.title) == ["18 June 2026", "12–13 June 2026"], "newest first; 1 June alone is too small")
        #expect(s.allSatisfy { $0.kind == .recent })
        #expect(s[1].items.count == 4 && s[1].from == Day(year: 2026, month: 6, day: 12) && s[1].to == Day(year: 2026, month: 6, day: 13))
        #expect(s[1].items.map(\.local) == s[1].items.map(\.local).sorted(), "capture order")
    }

    @Test func recentMeansTheThirtyDaysUpToToday() {
        let inside = Self.photos("2026-05-22", 4)     // today − 29
        let outside = Self.photos("2026-05-21", 4)    // today − 30
        let future = Self.photos("2026-06-21", 4)
        let s = Suggestions.suggest(inside + outside + future, today: Self.today, memories: false, blocks: [])
        #expect(s.map(\.title) == ["22 May 2026"])
    }

    @Test func memoriesOnlyWhenAskedForNeverThisYearOnePerYear() {
        let items = Self.photos("2019-06-17", 2) + Self.photos("2019-06-23", 2)   // ±3 days of 20 June
            + Self.photos("2019-06-24", 3)                                         // 4 days: outside
            + Self.photos("2021-06-20", 4) + Self.photos("2026-02-01", 3)          // this year, not recent
        #expect(Suggestions.suggest(items, today: Self.today, memories: false, blocks: []).isEmpty, "no memories without --memories")
        let s = Suggestions.suggest(items, today: Self.today, memories: true, blocks: [])
        #expect(s.map(\.title) == ["20 June 2021", "17–23 June 2019"])
        #expect(s.allSatisfy { $0.kind == .onThisDay })
        #expect(s[1].items.count == 4, "one suggestion for 2019, without the 24th")
    }

    @Test func whenThereIsNoneItSaysWhy() {
        #expect(Suggestions.whyNone([], today: Self.today, memories: true, blocks: []) ==
                ["no photo or video in it has a capture date in its metadata (file times are never used)"])
        let old = Self.photos("2019-06-17", 1) + Self.photos("2021-06-22", 2) + Self.photos("2025-12-24", 3)
        #expect(Suggestions.whyNone(old, today: Self.today, memories: true, blocks: [.folder("/lib")]) == ["all 6 dated items are hidden by blocks"])
        let tooFew = old + Self.photos("2026-06-12", 1) + Self.photos("2026-06-18", 1) + Self.photos("2026-06-19", 1, folder: "/other")
        #expect(Suggestions.suggest(tooFew, today: Self.today, memories: true, blocks: []).isEmpty)
        #expect(Suggestions.whyNone(tooFew, today: Self.today, memories: true, blocks: []) == [
            "9 dated items; a suggestion needs at least 4 together (on days in a row lately, or around this date in one earlier year)",
            "the last 30 days hold 3 items, at most 2 on consecutive days",
            "earlier years within 3 days of 20 June: 2 from 2021, 1 from 2019"])
        #expect(Suggestions.whyNone(old, today: Self.today, memories: false, blocks: [.folder("/other")]) == [
            "6 dated items; a suggestion needs at least 3 together (on days in a row lately, or around this date in one earlier year)",
            "none is from the last 30 days (since 2026-05-22); the newest before then is from 2025-12-24"])
        let hidden = Suggestions.whyNone(tooFew, today: Self.today, memories: false, blocks: [.folder("/other")])
        #expect(hidden.first == "8 dated items (and 1 hidden by blocks); a suggestion needs at least 4 together (on days in a row lately, or around this date in one earlier year)")
        #expect(hidden.last == "the last 30 days hold 2 items, at most 1 on consecutive days")
    }

    @Test func memoriesAroundNewYearBelongToTheNearestAnniversary() {
        let today = Day(year: 2026, month: 1, day: 1)
        let items = Self.photos("2024-12-30", 2) + Self.photos("2025-01-02", 2)
        let s = Suggestions.suggest(items, today: today, memories: true, blocks: [])
        #expect(s.map(\.title) == ["30 December 2024 – 2 January 2025"])
        let leap = Suggestions.suggest(Self.photos("2023-02-28", 3), today: Day(year: 2024, month: 2, day: 29), memories: true, blocks: [])
        #expect(leap.map(\.title) == ["28 February 2023"])
    }

    @Test func atMostTwentyItemsPickedEvenlyOverTheSpan() {
        let items = (0..<60).map { Self.photo(String(format: "2026-06-19T%02d:%02d:00", $0 / 4 + 6, ($0 % 4) * 15)) }
        let s = Suggestions.suggest(items, today: Self.today, memories: false, blocks: [])
        #expect(s.count == 1 && s[0].items.count == 20)
        #expect(s[0].items.first == items.first && s[0].items.last == items.last)
        // Even: the gaps between picked items differ by at most one source step (15 minutes).
        let minutes = s[0].items.map { Int($0.local.dropFirst(11).prefix(2))! * 60 + Int($0.local.dropFirst(14).prefix(2))! }
        let gaps = zip(minutes.dropFirst(), minutes).map { $0 - $1 }
        #expect(gaps.max()! - gaps.min()! <= 15, "\(gaps)")
    }

    @Test func titlesAreDatesOnly() {
        #expect(Suggestions.title(from: Day(year: 2019, month: 6, day: 14), to: Day(year: 2019, month: 6, day: 14)) == "14 June 2019")
        #expect(Suggestions.title(from: Day(year: 2019, month: 6, day: 12), to: Day(year: 2019, month: 6, day: 14)) == "12–14 June 2019")
        #expect(Suggestions.title(from: Day(year: 2026, month: 5, day: 30), to: Day(year: 2026, month: 6, day: 2)) == "30 May – 2 June 2026")
        #expect(Suggestions.title(from: Day(year: 2025, month: 12, day: 30), to: Day(year: 2026, month: 1, day: 2)) == "30 December 2025 – 2 January 2026")
    }

    @Test func blocksHideDaysRangesFoldersAndFilesAndShrinkN() {
        let items = Self.photos("2026-06-12", 4) + Self.photos("2026-06-14", 4, folder: "/lib/private") + Self.photos("2026-06-16", 4)
        let all = Suggestions.suggest(items, today: Self.today, memories: false, blocks: [])
        #expect(all.map(\.title) == ["16 June 2026", "14 June 2026", "12 June 2026"])
        let day = Suggestions.suggest(items, today: Self.today, memories: false, blocks: [.days(from: Day("2026-06-12")!, to: Day("2026-06-12")!)])
        #expect(day.map(\.title) == ["16 June 2026", "14 June 2026"])
        let range = Suggestions.suggest(items, today: Self.today, memories: false, blocks: [.days(from: Day("2026-06-13")!, to: Day("2026-06-20")!)])
        #expect(range.map(\.title) == ["12 June 2026"])
        let folder = Suggestions.suggest(items, today: Self.today, memories: false, blocks: [.folder("/lib/private")])
        #expect(folder.map(\.title) == ["16 June 2026", "12 June 2026"])
        #expect(!folder.flatMap(\.items).contains { $0.path.hasPrefix("/lib/private/") })
        let asset = Suggestions.suggest(items, today: Self.today, memories: false, blocks: [.asset(items[0].path)])
        #expect(asset.map(\.title) == ["16 June 2026", "14 June 2026"], "12 June falls to 3 items, below 4")
        #expect(!Suggestions.Block.folder("/lib/priv").hides(items[4]), "a folder block is a folder, not a prefix")
    }

    @Test func theSameLibraryGivesTheSameSuggestions() {
        let items = Self.photos("2026-06-12", 5) + Self.photos("2019-06-20", 4)
        let a = Suggestions.suggest(items, today: Self.today, memories: true, blocks: [])
        let b = Suggestions.suggest(items.reversed(), today: Self.today, memories: true, blocks: [])
        #expect(a == b && a.count == 2)
        #expect(a.map(\.id) == ["recent-2026-06-12", "on_this_day-2019-06-20"])
    }

    /// A draft's fades fit its items: a tap-length clip (0.15 s, as in the shared corpus) gets
    /// cuts on both sides, a one-second clip slightly shorter fades, long or unknown items the
    /// default. Over a grid of lengths, no item gives more than its length less two frames.
    @Test func aDraftsTransitionsFitItsShortestItems() {
        let frame = 1.0 / 30
        #expect(Suggestions.transitions(lengths: [2.5, 1.234, 0.15, 3, nil], standard: 0.5, frame: frame) == [0.5, 0, 0, 0.5])
        #expect(Suggestions.transitions(lengths: [2.5, 1.0, 3], standard: 0.5, frame: frame) == [0.46, 0.46])
        #expect(Suggestions.transitions(lengths: [2.5, 0.4], standard: 0.5, frame: frame) == [0.16])
        #expect(Suggestions.transitions(lengths: [2.5], standard: 0.5, frame: frame) == [])
        let grid: [Double?] = [nil, 0.05, 0.2, 0.25, 0.3, 0.5, 0.7, 1, 1.05, 2, 3]
        for a in grid { for b in grid { for c in grid {
            let lengths = [a, b, c]
            let t = Suggestions.transitions(lengths: lengths, standard: 0.5, frame: frame)
            #expect(t.count == 2 && t.allSatisfy { $0 == 0 || (0.1...0.5).contains($0) })
            for (k, length) in lengths.enumerated() {
                guard let length else { continue }
                let given = (k > 0 ? t[k - 1] : 0) + (k < t.count ? t[k] : 0)
                #expect(given <= length - 2 * frame + 1e-9 || given == 0, "\(lengths): \(t)")
            }
        } } }
    }
}
