import DequeModule
import HeapModule

/// Ready work in two lanes. Short joining work (fetches, transitions, the concat) goes first, in
/// the order it became ready, so a transition runs as soon as its two segments exist and a run
/// does not end on a queue of transitions. Then renders, the costliest first, so a run does not
/// end with one long render on one core while the others idle. Equal costs leave in the order
/// they were pushed.
public struct ReadyQueue<Element: Sendable>: Sendable {
    struct Ranked: Comparable, Sendable {
        var cost: Double
        var sequence: Int
        var element: Element
        // The heap's max is the costliest; among equals, the earliest pushed.
        static func < (a: Ranked, b: Ranked) -> Bool { a.cost != b.cost ? a.cost < b.cost : a.sequence > b.sequence }
        static func == (a: Ranked, b: Ranked) -> Bool { a.cost == b.cost && a.sequence == b.sequence }
    }

    private var short = Deque<Element>()
    private var long = Heap<Ranked>()
    private var sequence = 0

    public init() {}

    public var isEmpty: Bool { short.isEmpty && long.isEmpty }
    public var count: Int { short.count + long.count }
    /// What `pop` would return.
    public var first: Element? { short.first ?? long.max?.element }
    /// `pop` would return short joining work.
    public var firstIsShort: Bool { !short.isEmpty }

    public mutating func push(_ e: Element, short isShort: Bool, cost: Double = 0) {
        if isShort { short.append(e) } else { long.insert(Ranked(cost: cost, sequence: sequence, element: e)); sequence += 1 }
    }

    public mutating func pop() -> Element? {
        if let e = short.popFirst() { return e }
        return long.popMax()?.element
    }
}
