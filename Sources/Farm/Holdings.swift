import OrderedCollections

/// Which workers hold which artifacts (by sha256), as far as the coordinator was told: what it
/// sent them and what they made, less what their stores gave up (`WireMessage.dropped`) and all
/// of a worker that left or was lost. Placement sends a stage where its inputs are.
///
/// Bounded: of each worker, only the `perWorker` artifacts it was last told of are kept (a worker
/// sharing the coordinator's folder never trims, and a coordinator runs for months), so memory
/// stays within about `perWorker` × workers × 200 bytes. An artifact forgotten this way only
/// loses its pull on placement.
struct Holdings {
    let perWorker: Int
    private var workersOf: [String: Set<String>] = [:]
    /// Oldest first.
    private var artifactsOf: [String: OrderedSet<String>] = [:]

    init(perWorker: Int = 20_000) { self.perWorker = max(1, perWorker) }

    var isEmpty: Bool { workersOf.isEmpty }
    func holds(_ worker: String, _ sha256: String) -> Bool { workersOf[sha256]?.contains(worker) ?? false }
    /// How many artifacts `worker` holds, as far as is known.
    func count(_ worker: String) -> Int { artifactsOf[worker]?.count ?? 0 }

    mutating func add(_ sha256: String, to worker: String) {
        guard artifactsOf[worker, default: []].append(sha256).inserted else { return }
        workersOf[sha256, default: []].insert(worker)
        // Forgets the oldest quarter at once rather than one per add (each removal shifts the set).
        let over = artifactsOf[worker]!.count - perWorker
        if over > 0 {
            let oldest = Array(artifactsOf[worker]!.prefix(max(over, perWorker / 4)))
            for sha in oldest { remove(worker, from: sha) }
            artifactsOf[worker]!.removeFirst(oldest.count)
        }
    }

    mutating func drop(_ shas: [String], from worker: String) {
        guard var held = artifactsOf.removeValue(forKey: worker) else { return }
        let gone = Set(shas).intersection(held)
        for sha in gone { remove(worker, from: sha) }
        // One pass over what it holds (removing one by one shifts the set each time).
        held.removeAll { gone.contains($0) }
        if !held.isEmpty { artifactsOf[worker] = held }
    }

    mutating func forget(_ worker: String) {
        for sha in artifactsOf.removeValue(forKey: worker) ?? [] { remove(worker, from: sha) }
    }

    private mutating func remove(_ worker: String, from sha: String) {
        workersOf[sha]?.remove(worker)
        if workersOf[sha]?.isEmpty == true { workersOf[sha] = nil }
    }
}
