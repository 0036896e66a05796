/// A run's work as a dependency graph: each node waits for the nodes it depends on, and becomes
/// ready exactly once, when the last of them completes. Built from the plan's dependencies
/// (`PlannedStage.dependencies`), not from names.
public struct RunGraph: Sendable {
    /// Dependencies not yet complete, per node.
    private var waitingOn: [Int]
    private var dependents: [[Int]]
    public private(set) var completed: [Bool]
    public private(set) var completedCount = 0

    /// `dependencies[n]`: the nodes node `n` waits for (indices into the same array). Duplicates
    /// are ignored; a node depending on itself, or a cycle, never becomes ready.
    public init(dependencies: [[Int]]) {
        let n = dependencies.count
        waitingOn = Array(repeating: 0, count: n)
        dependents = Array(repeating: [], count: n)
        completed = Array(repeating: false, count: n)
        for (node, deps) in dependencies.enumerated() {
            for d in Set(deps) where dependencies.indices.contains(d) {
                waitingOn[node] += 1
                dependents[d].append(node)
            }
        }
    }

    public var count: Int { waitingOn.count }
    public var isComplete: Bool { completedCount == waitingOn.count }

    /// Nodes with nothing to wait for.
    public var initiallyReady: [Int] { waitingOn.indices.filter { waitingOn[$0] == 0 } }

    /// The nodes that wait for `node`.
    public func dependents(of node: Int) -> [Int] { dependents[node] }

    public func isReady(_ node: Int) -> Bool { !completed[node] && waitingOn[node] == 0 }

    /// Whether completing `node` would make another node ready (it is the last thing one waits for).
    public func completingReadies(_ node: Int) -> Bool {
        guard completed.indices.contains(node), !completed[node] else { return false }
        return dependents[node].contains { waitingOn[$0] == 1 && !completed[$0] }
    }

    /// Marks `node` complete; returns the nodes that became ready because of it (in index order).
    /// Completing a node twice changes nothing and returns nothing.
    @discardableResult
    public mutating func complete(_ node: Int) -> [Int] {
        guard completed.indices.contains(node), !completed[node] else { return [] }
        completed[node] = true
        completedCount += 1
        var ready: [Int] = []
        for d in dependents[node] {
            waitingOn[d] -= 1
            if waitingOn[d] == 0 && !completed[d] { ready.append(d) }
        }
        return ready.sorted()
    }
}
