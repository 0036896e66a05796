import Foundation

/// "For You": suggested movies from a dated photo library. Pure: the library's dated items,
/// the person's settings and blocks, and `today` in; suggestions out. No files, no clock.
///
/// The rules (docs/SUGGESTIONS.md): recent days (the 30 days up to today, grouped by local day,
/// consecutive days merged) and, only when asked for, "on this day" memories from earlier years
/// (±3 days of today's month-day, one per year). A group needs max(3, ⌊log2 N⌋ + 1) items, N the
/// library's eligible items; at most 20, picked evenly over its time span. Titles are dates only.
public enum Suggestions {
    /// A calendar day.
    public struct Day: Hashable, Comparable, Sendable, CustomStringConvertible {
        public var year: Int, month: Int, day: Int
        public init(year: Int, month: Int, day: Int) { self.year = year; self.month = month; self.day = day }
        /// "YYYY-MM-DD", or nil when it is not a real date.
        public init?(_ text: String) {
            let p = text.prefix(10).split(separator: "-")
            guard p.count == 3, let y = Int(p[0]), let m = Int(p[1]), let d = Int(p[2]) else { return nil }
            self.init(year: y, month: m, day: d)
            guard Day(ordinal: ordinal) == self else { return nil }
        }
        /// Days since 1970-01-01 (proleptic Gregorian; Foundation's calendar in UTC).
        public var ordinal: Int {
            var c = DateComponents(); c.year = year; c.month = month; c.day = day
            return Int((Self.calendar.date(from: c) ?? .distantPast).timeIntervalSince1970 / 86_400)
        }
        public init(ordinal: Int) {
            let c = Self.calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(ordinal) * 86_400))
            self.init(year: c.year ?? 1970, month: c.month ?? 1, day: c.day ?? 1)
        }
        public func adding(days: Int) -> Day { Day(ordinal: ordinal + days) }
        public var description: String { String(format: "%04d-%02d-%02d", year, month, day) }
        public static func < (a: Day, b: Day) -> Bool { (a.year, a.month, a.day) < (b.year, b.month, b.day) }
        static let calendar: Calendar = { var c = Calendar(identifier: .gregorian); c.timeZone = TimeZone(identifier: "UTC")!; return c }()
        static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }
    }

    /// One item of the library: a photo, a video, a Live Photo (by its still's path), or an
    /// Android motion photo (one file, its movie inside).
    public struct Item: Sendable, Equatable {
        public enum Kind: String, Sendable { case photo, video, livePhoto = "live_photo", motionPhoto = "motion_photo" }
        public var path: String
        public var kind: Kind
        /// Local capture time, "YYYY-MM-DDTHH:MM:SS[.fff]" (sorts as it reads).
        public var local: String
        /// The Live Photo's movie, when `kind` is live_photo.
        public var motion: String?
        /// How long a video (or a Live Photo's or motion photo's movie) plays, when its file says.
        public var seconds: Double?
        public init(path: String, kind: Kind, local: String, motion: String? = nil, seconds: Double? = nil) {
            self.path = path; self.kind = kind; self.local = local; self.motion = motion; self.seconds = seconds
        }
        public var day: Day? { Day(local) }
    }

    /// What a person hid: a day, a range of days, a folder (and everything under it) or one file.
    public enum Block: Sendable, Equatable {
        case days(from: Day, to: Day)
        case folder(String)
        case asset(String)

        public func hides(_ item: Item) -> Bool {
            switch self {
            case .days(let from, let to):
                guard let d = item.day else { return false }
                return from <= d && d <= to
            case .folder(let folder):
                let f = folder.hasSuffix("/") ? folder : folder + "/"
                return item.path.hasPrefix(f) || (item.motion?.hasPrefix(f) ?? false)
            case .asset(let path):
                return item.path == path || item.motion == path
            }
        }
    }

    public struct Suggestion: Sendable, Equatable {
        public enum Kind: String, Sendable { case recent, onThisDay = "on_this_day" }
        public var id: String
        public var kind: Kind
        public var title: String
        public var from: Day
        public var to: Day
        /// In capture order.
        public var items: [Item]
    }

    /// The transition after each item of a draft, in seconds (0: a cut), given each item's length
    /// (nil: not known, taken as long enough): `standard`, shortened where an item cannot give
    /// half its length less a frame to each side, and a cut where under `shortest` would be left.
    /// A tap-length clip (a fifth of a second) in a library must not make its day's draft one
    /// that `coord submit` refuses.
    public static func transitions(lengths: [Double?], standard: Double, frame: Double, shortest: Double = 0.1) -> [Double] {
        guard lengths.count > 1 else { return [] }
        return (0..<lengths.count - 1).map { i in
            let room = [lengths[i], lengths[i + 1]].compactMap { $0.map { $0 / 2 - frame } }.min() ?? standard
            let seconds = min(standard, (room * 100).rounded(.down) / 100)
            return seconds < shortest ? 0 : seconds
        }
    }

    public static let recentDays = 30
    public static let memoryWindow = 3
    public static let maximumItems = 20

    /// The smallest group that becomes a suggestion, for a library of `eligible` items.
    public static func minimumItems(eligible: Int) -> Int {
        max(3, eligible > 0 ? Int(log2(Double(eligible)).rounded(.down)) + 1 : 0)
    }

    /// The suggestions for `items` (dated ones; undated are never passed in) on `today`.
    public static func suggest(_ items: [Item], today: Day, memories: Bool, blocks: [Block]) -> [Suggestion] {
        let eligible = eligible(items, blocks: blocks)
        let minimum = minimumItems(eligible: eligible.count)
        var out: [Suggestion] = []
        for g in recentGroups(eligible, today: today).reversed() where g.count >= minimum {
            out.append(make(.recent, g))
        }
        if memories {
            for (_, g) in memoryGroups(eligible, today: today) where g.count >= minimum {
                out.append(make(.onThisDay, g))
            }
        }
        return out
    }

    /// Why `suggest` made nothing of `items` on `today`: sentences for the person who asked (what
    /// is dated, what each window holds, how big a group must be).
    public static func whyNone(_ items: [Item], today: Day, memories: Bool, blocks: [Block]) -> [String] {
        let dated = items.filter { $0.day != nil }
        guard !dated.isEmpty else { return ["no photo or video in it has a capture date in its metadata (file times are never used)"] }
        let eligible = eligible(dated, blocks: blocks)
        guard !eligible.isEmpty else { return ["all \(count(dated.count, "dated item")) are hidden by blocks"] }
        let minimum = minimumItems(eligible: eligible.count)
        let hidden = dated.count - eligible.count
        var out = ["\(count(eligible.count, "dated item"))\(hidden > 0 ? " (and \(hidden) hidden by blocks)" : ""); a suggestion needs at least \(minimum) together (on days in a row lately, or around this date in one earlier year)"]
        let first = today.adding(days: -(recentDays - 1))
        let recent = recentGroups(eligible, today: today)
        if recent.isEmpty {
            let before = eligible.filter { $0.day! < first }.last?.day
            out.append("none is from the last \(recentDays) days (since \(first))" + (before.map { "; the newest before then is from \($0)" } ?? ""))
        } else {
            let total = recent.reduce(0) { $0 + $1.count }
            out.append("the last \(recentDays) days hold \(count(total, "item")), at most \(recent.map(\.count).max()!) on consecutive days")
        }
        if memories {
            let years = memoryGroups(eligible, today: today)
            let near = "within \(memoryWindow) days of \(today.day) \(months[today.month - 1])"
            out.append(years.isEmpty ? "no item from an earlier year is \(near)"
                                     : "earlier years \(near): " + years.map { "\($0.group.count) from \($0.year)" }.joined(separator: ", "))
        }
        return out
    }

    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }

    /// Dated items no block hides, in capture order.
    static func eligible(_ items: [Item], blocks: [Block]) -> [Item] {
        items.filter { i in i.day != nil && !blocks.contains { $0.hides(i) } }
            .sorted { ($0.local, $0.path) < ($1.local, $1.path) }
    }

    /// Recent: the 30 days up to today, by local day, consecutive days merged; oldest first.
    static func recentGroups(_ eligible: [Item], today: Day) -> [[Item]] {
        let first = today.adding(days: -(recentDays - 1))
        var groups: [[Item]] = []
        for item in eligible where first <= item.day! && item.day! <= today {
            if let last = groups.last?.last, item.day!.ordinal - last.day!.ordinal <= 1 { groups[groups.count - 1].append(item) }
            else { groups.append([item]) }
        }
        return groups
    }

    /// On this day: earlier years only, ±3 days of today's month-day, one group per year, newest first.
    static func memoryGroups(_ eligible: [Item], today: Day) -> [(year: Int, group: [Item])] {
        var byYear: [Int: [Item]] = [:]
        for item in eligible {
            let d = item.day!
            // The anniversary nearest the item: this year's, or (around New Year) a neighbour's.
            for year in [d.year - 1, d.year, d.year + 1] where year < today.year {
                let anchor = anniversary(of: today, in: year)
                if abs(d.ordinal - anchor.ordinal) <= memoryWindow { byYear[year, default: []].append(item); break }
            }
        }
        return byYear.keys.sorted(by: >).map { ($0, byYear[$0]!) }
    }

    /// Today's month and day in `year` (29 February becomes the 28th in other years).
    static func anniversary(of today: Day, in year: Int) -> Day {
        if today.month == 2 && today.day == 29 && !Day.isLeap(year) { return Day(year: year, month: 2, day: 28) }
        return Day(year: year, month: today.month, day: today.day)
    }

    static func make(_ kind: Suggestion.Kind, _ group: [Item]) -> Suggestion {
        let items = pickEvenly(group, count: maximumItems)
        let from = group.first!.day!, to = group.last!.day!
        return Suggestion(id: "\(kind.rawValue)-\(from)" + (from == to ? "" : "-to-\(to)"), kind: kind,
                          title: title(from: from, to: to), from: from, to: to, items: items)
    }

    /// At most `count` items, spread evenly over the group's time span (first and last kept).
    static func pickEvenly(_ group: [Item], count: Int) -> [Item] {
        guard group.count > count, count >= 2 else { return Array(group.prefix(count)) }
        let times = group.map { seconds($0.local) }
        let start = times.first!, span = times.last! - start
        var chosen = Set<Int>()
        for k in 0..<count {
            let target = start + span * Double(k) / Double(count - 1)
            // The nearest item not yet taken (ties: the earlier one).
            var best = -1, bestGap = Double.infinity
            for (i, t) in times.enumerated() where !chosen.contains(i) {
                let gap = abs(t - target)
                if gap < bestGap { best = i; bestGap = gap }
            }
            chosen.insert(best)
        }
        return chosen.sorted().map { group[$0] }
    }

    /// Seconds since 1970 of a local time string, for spacing only.
    static func seconds(_ local: String) -> Double {
        guard let day = Day(local) else { return 0 }
        let t = Array(local)
        func n(_ r: Range<Int>) -> Double { r.upperBound <= t.count ? Double(String(t[r])) ?? 0 : 0 }
        let frac = local.count > 20 ? (Double("0" + String(t[19...])) ?? 0) : 0
        return Double(day.ordinal) * 86_400 + n(11..<13) * 3600 + n(14..<16) * 60 + n(17..<19) + frac
    }

    static let months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]

    /// Dates only: "14 June 2019", "12–14 June 2019", "30 May – 2 June 2026", "30 December 2025 – 2 January 2026".
    public static func title(from: Day, to: Day) -> String {
        let m1 = months[from.month - 1], m2 = months[to.month - 1]
        if from == to { return "\(from.day) \(m1) \(from.year)" }
        if from.year == to.year && from.month == to.month { return "\(from.day)–\(to.day) \(m1) \(from.year)" }
        if from.year == to.year { return "\(from.day) \(m1) – \(to.day) \(m2) \(to.year)" }
        return "\(from.day) \(m1) \(from.year) – \(to.day) \(m2) \(to.year)"
    }
}
