import Foundation
import Testing
import TestSupport
@testable import Farm

/// Artifacts pulled chunk by chunk between two peers' stores, wired to each other in memory.
@Suite struct TransferTests {
    /// Two `Transfers`, each handing its messages to the other.
    final class Pair {
        let sender: Transfers, receiver: Transfers
        var toSender: [WireMessage] = [], toReceiver: [(WireMessage, Data?)] = []
        init(_ dir: String) throws {
            var s: Transfers!, r: Transfers!
            let box = Box()
            s = Transfers(store: try ArtifactStore(root: dir + "/sender"), chunkSize: 4) { _, m, p in box.pair?.toReceiver.append((m, p)); return true }
            r = Transfers(store: try ArtifactStore(root: dir + "/receiver"), chunkSize: 4) { _, m, _ in box.pair?.toSender.append(m); return true }
            sender = s; receiver = r
            box.pair = self
        }
        final class Box { weak var pair: Pair? }
        /// Delivers messages both ways until none are left.
        func pump() {
            while !toSender.isEmpty || !toReceiver.isEmpty {
                for m in toSender { if case .pull(let sha, let offset, let length) = m { sender.serve(sha256: sha, offset: offset, length: length, to: Data("r".utf8)) } }
                toSender = []
                let chunks = toReceiver; toReceiver = []
                for (m, p) in chunks { if case .chunk(let c) = m { receiver.received(c, payload: p) } }
            }
        }
    }

    @Test func anArtifactArrivesWholeInChunks() throws {
        let dir = temporaryDirectory("transfer")
        let pair = try Pair(dir)
        try Data("eleven byte".utf8).write(to: URL(fileURLWithPath: dir + "/a"))
        let ref = try pair.sender.store.ingest(localFile: dir + "/a")
        pair.receiver.fetch(ref, from: Data("s".utf8))
        pair.pump()
        let done = pair.receiver.takeCompleted()
        #expect(done.count == 1)
        guard case .success(let got)? = done.first?.1 else { Issue.record("\(done)"); return }
        #expect(try Data(contentsOf: URL(fileURLWithPath: got.path)) == Data("eleven byte".utf8))
    }

    /// A worker's own store stays within its limit: the least recently used artifacts go first,
    /// never one an attempt in flight reads or has not delivered, nor one used within the grace
    /// period; a use renews a file's time.
    @Test func aBoundedStoreRemovesTheLeastRecentlyUsedFirst() throws {
        let dir = temporaryDirectory("store-trim")
        let store = try ArtifactStore(root: dir + "/store")
        let now = Date()
        var refs: [ArtifactRef] = []
        for (k, age) in [500.0, 400, 300, 200, 100, 5].enumerated() {
            try Data(repeating: UInt8(k), count: 1000).write(to: URL(fileURLWithPath: dir + "/f\(k)"))
            let ref = try store.ingest(localFile: dir + "/f\(k)")
            try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: ref.path)
            refs.append(ref)
        }
        let present = { refs.indices.filter { store.isPresent(refs[$0]) } }
        // Half-written files: one a killed writer left two hours ago, one being written now.
        for (name, age) in [("dead.part", 7200.0), ("live.part", 30)] {
            try Data(count: 10).write(to: URL(fileURLWithPath: store.root + "/tmp/" + name))
            try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: store.root + "/tmp/" + name)
        }
        // Within the limit: no artifact goes, only the dead writer's leftover.
        #expect(store.trim(toBytes: 6000, keep: [], grace: 60, now: now) == ArtifactStore.TrimReport(bytes: 6000, temporaryRemoved: 1))
        #expect(present() == [0, 1, 2, 3, 4, 5])
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.root + "/tmp") == ["live.part"])
        // The oldest goes first, but not one in use (1); the newest (5) is within the grace period.
        store.touch(refs[0].path)   // used just now: the most recent
        let t = store.trim(toBytes: 3000, keep: [refs[1].sha256], grace: 60, now: now.addingTimeInterval(1))
        #expect(present() == [0, 1, 5], "\(t)")
        #expect(t.removed == 3 && t.removedBytes == 3000 && t.bytes == 3000 && t.heldBytes == 1000, "\(t)")
        // Nothing left that may go: it says how much is held.
        let held = store.trim(toBytes: 0, keep: [refs[1].sha256], grace: 3600, now: now.addingTimeInterval(2))
        #expect(held.removed == 0 && held.bytes == 3000 && held.heldBytes == 3000 && present() == [0, 1, 5], "\(held)")
        // Within the limit, but the disk lacks 1,500 bytes: the least recently used go, recent or
        // not, until that much is free; the one in use stays.
        // Short of space, but everything else was written or used since an attempt in flight began
        // (its output may be among them, not yet named): nothing goes.
        let inFlight = store.trim(toBytes: 6000, keep: [refs[1].sha256], grace: 3600, freeing: 1500, keepSince: now.addingTimeInterval(-10),
                                  now: now.addingTimeInterval(2))
        #expect(inFlight.removed == 0 && present() == [0, 1, 5], "\(inFlight)")
        let short = store.trim(toBytes: 6000, keep: [refs[1].sha256], grace: 3600, freeing: 1500, now: now.addingTimeInterval(2))
        #expect(short.removed == 2 && short.removedBytes == 2000 && present() == [1], "\(short)")
        #expect(store.trim(toBytes: 0, keep: [], grace: 0, now: now.addingTimeInterval(3)).bytes == 0 && present().isEmpty)
    }

    /// A store named by a relative path (`worker --store ./store`) hands out absolute paths: an
    /// artifact's path that does not start with "/" was taken for a URL, and every fetch failed
    /// with "only http(s) URLs can be fetched".
    @Test func aStoreNamedRelativelyHandsOutAbsolutePaths() throws {
        let dir = temporaryDirectory("transfer-relative")
        let cwd = FileManager.default.currentDirectoryPath
        let up = String(repeating: "../", count: cwd.split(separator: "/").count)
        let store = try ArtifactStore(root: up + String(dir.dropFirst()) + "/./store")
        #expect(store.root == dir + "/store")
        try Data("eleven byte".utf8).write(to: URL(fileURLWithPath: dir + "/a"))
        let ref = try store.ingest(localFile: dir + "/a")
        #expect(ref.path.hasPrefix(dir + "/store/artifacts/"), "\(ref.path)")
    }

    /// A sender that cannot read what it holds says so: the receiver's error names the read, not a
    /// sha256 mismatch after a transfer of empty chunks.
    @Test func aSenderThatCannotReadItsFileRefusesWithTheReason() throws {
        let dir = temporaryDirectory("transfer-unreadable")
        let pair = try Pair(dir)
        let sha = String(repeating: "ab", count: 32)
        // What the store holds under that sha256 cannot be read: a folder in the file's place.
        let held = pair.sender.store.path(sha256: sha)
        try FileManager.default.createDirectory(atPath: held, withIntermediateDirectories: true)
        pair.receiver.fetch(ArtifactRef(sha256: sha, path: held, size: 10), from: Data("s".utf8))
        pair.pump()
        let done = pair.receiver.takeCompleted()
        guard case .failure(let error)? = done.first?.1 else { Issue.record("not refused: \(done)"); return }
        #expect("\(error)".contains("the sender cannot serve it: cannot read it here"), "\(error)")
    }
}
