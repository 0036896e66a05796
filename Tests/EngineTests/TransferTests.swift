import Foundation
import Testing
import TestSupport
import ThreadlineCore
import Engine
@testable import Farm

/// Artifacts pulled chunk by chunk between two peers' stores, wired to each other in memory.
@Suite struct TransferTests {
    /// Two `Transfers`, each handing its messages to the other.
    final class Pair {
        let sender: Transfers, receiver: Transfers
        /// The receiver's pulls, with the peer each was sent to.
        var toSender: [(peer: Data, message: WireMessage)] = [], toReceiver: [(WireMessage, Data?)] = []
        /// The receiver's pulls cannot be sent (its peer out of reach) while this is set.
        var unreachable = false
        init(_ dir: String) throws {
            var s: Transfers!, r: Transfers!
            let box = Box()
            s = Transfers(store: try ArtifactStore(root: dir + "/sender"), chunkSize: 4) { _, m, p in box.pair?.toReceiver.append((m, p)); return true }
            r = Transfers(store: try ArtifactStore(root: dir + "/receiver"), chunkSize: 4) { peer, m, _ in
                guard box.pair?.unreachable != true else { return false }
                box.pair?.toSender.append((peer, m)); return true
            }
            sender = s; receiver = r
            box.pair = self
        }
        final class Box { weak var pair: Pair? }
        /// Delivers messages both ways until none are left (or, with `pulls`, answers only that
        /// many of the pulls waiting, in order, and delivers their chunks).
        func pump(pulls: Int? = nil) {
            while !toSender.isEmpty || !toReceiver.isEmpty {
                let answered = pulls.map { Array(toSender.prefix($0)) } ?? toSender
                for (_, m) in answered { if case .pull(let sha, let offset, let length) = m { sender.serve(sha256: sha, offset: offset, length: length, to: Data("r".utf8)) } }
                toSender = []
                let chunks = toReceiver; toReceiver = []
                for (m, p) in chunks { if case .chunk(let c) = m { receiver.received(c, payload: p) } }
                if pulls != nil { toSender = []; return }
            }
        }
        /// Offsets of the pulls waiting, and the peers they went to.
        var pulled: [(peer: String, offset: Int64)] {
            toSender.compactMap { if case .pull(_, let offset, _) = $0.message { (String(decoding: $0.peer, as: UTF8.self), offset) } else { nil } }
        }
    }

    /// An artifact of `bytes` in the sender's store.
    static func held(_ pair: Pair, _ dir: String, _ bytes: Data) throws -> ArtifactRef {
        try bytes.write(to: URL(fileURLWithPath: dir + "/source"))
        return try pair.sender.store.ingest(localFile: dir + "/source")
    }

    /// What the receiver stored once its transfers ended: a file that was not hashed on its way
    /// (a kept part, chunks out of order) is checked on a thread of its own, and one whose kept
    /// part was wrong is asked for again.
    static func arrived(_ pair: Pair) -> Data? {
        for _ in 0..<3 {
            pair.receiver.waitForChecks()
            if let last = pair.receiver.takeCompleted().last {
                guard case .success(let got) = last.1 else { return nil }
                return try? Data(contentsOf: URL(fileURLWithPath: got.path))
            }
            pair.pump()
        }
        return nil
    }

    /// A transfer whose first pulls could not be sent (its sender's connection being made again,
    /// as after a stall of the coordinator) asks for them once it stalls: with nothing asked for,
    /// asking again asked for nothing, and a finished render's upload gave up after 18 s of
    /// silence (and the render was made again).
    @Test func aTransferWhosePullsCouldNotBeSentAsksAgain() throws {
        let dir = temporaryDirectory("transfer-unsent")
        let pair = try Pair(dir)
        let bytes = Data((0..<40).map { UInt8($0) })
        let ref = try Self.held(pair, dir, bytes)
        pair.unreachable = true
        pair.receiver.fetch(ref, from: Data("a".utf8), now: 0)
        #expect(pair.pulled.isEmpty)
        pair.unreachable = false
        pair.receiver.tick(now: 1)
        #expect(pair.pulled.isEmpty, "not stalled yet")
        pair.receiver.tick(now: 4)
        #expect(pair.pulled.map(\.offset) == [0, 4, 8, 12, 16, 20, 24, 28], "\(pair.pulled)")
        pair.pump()
        #expect(Self.arrived(pair) == bytes)
    }

    /// A transfer whose peer was dialled again (a coordinator restarted at once, which knows
    /// nothing of the pulls before) asks again at once for what it had asked and not received,
    /// not at its next stall 3 s on.
    @Test func aTransferAsksAgainAtOnceWhenItsPeerWasDialledAgain() throws {
        let dir = temporaryDirectory("transfer-redial")
        let pair = try Pair(dir)
        let bytes = Data((0..<40).map { UInt8($0) })
        let ref = try Self.held(pair, dir, bytes)
        pair.receiver.fetch(ref, from: Data("a".utf8), now: 0)
        #expect(pair.pulled.map(\.offset) == [0, 4, 8, 12, 16, 20, 24, 28])
        pair.toSender = []   // lost with the peer that went
        pair.receiver.askAgainNow(now: 0.5)
        #expect(pair.pulled.map(\.offset) == [0, 4, 8, 12, 16, 20, 24, 28], "\(pair.pulled)")
        pair.pump()
        #expect(Self.arrived(pair) == bytes)
    }

    /// A transfer cut off (its sender went away or silent: a submitter's laptop closed half-way
    /// through a phone video) keeps what came from the start without a gap, and the next transfer
    /// of the file, from whichever peer, asks only for the rest.
    @Test func aTransferCutOffGoesOnFromWhereItStopped() throws {
        let dir = temporaryDirectory("transfer-resume")
        let pair = try Pair(dir)
        let bytes = Data((0..<100).map { UInt8($0) })
        let ref = try Self.held(pair, dir, bytes)
        #expect(pair.receiver.fetch(ref, from: Data("a".utf8)) == 0)
        #expect(pair.pulled.map(\.offset) == [0, 4, 8, 12, 16, 20, 24, 28])   // a window of 8 chunks of 4 bytes
        // Three chunks come, then the fifth (16): 12 bytes without a gap; then the sender goes.
        pair.toSender = Array(pair.toSender.prefix(3)) + [pair.toSender[4]]
        pair.pump(pulls: 4)
        pair.receiver.peerLost(Data("a".utf8))
        guard case .failure(let e)? = pair.receiver.takeCompleted().first?.1 else { Issue.record("not failed"); return }
        #expect("\(e)" == "the sender went away")
        let partial = pair.receiver.store.partialPath(sha256: ref.sha256)
        #expect(try Data(contentsOf: URL(fileURLWithPath: partial)) == bytes.prefix(12))
        // Offered again by another peer: it goes on at byte 12.
        pair.toSender = []
        #expect(pair.receiver.fetch(ref, from: Data("b".utf8)) == 12)
        #expect(pair.pulled.first?.offset == 12 && pair.pulled.allSatisfy { $0.peer == "b" && $0.offset >= 12 }, "\(pair.pulled)")
        pair.pump()
        #expect(Self.arrived(pair) == bytes)
        #expect(!FileManager.default.fileExists(atPath: partial))
        // A transfer that stalls until it gives up keeps its part too, and says how long it heard nothing.
        let other = try Self.held(pair, dir, Data((0..<40).map { UInt8(255 - $0) }))
        let t0 = Clocks.steady   // chunks are timed by the clock as they come (the steady one)
        pair.receiver.fetch(other, from: Data("a".utf8), now: t0)
        pair.pump(pulls: 2)
        for k in 1...6 { pair.receiver.tick(now: t0 + 3.5 * Double(k)) }
        guard case .failure(let stalled)? = pair.receiver.takeCompleted().first?.1 else { Issue.record("not given up"); return }
        #expect("\(stalled)".hasPrefix("the sender sent nothing for "), "\(stalled)")
        #expect((try? Data(contentsOf: URL(fileURLWithPath: pair.receiver.store.partialPath(sha256: other.sha256))))?.count == 8)
    }

    /// What was kept is checked with the rest: a kept part that is not the file's start (its disk
    /// or its sender changed it) costs one transfer of the whole file, not a failure.
    @Test func aKeptPartThatIsWrongIsFetchedAgainWhole() throws {
        let dir = temporaryDirectory("transfer-bad-part")
        let pair = try Pair(dir)
        let bytes = Data((0..<30).map { UInt8($0 * 3) })
        let ref = try Self.held(pair, dir, bytes)
        try Data(repeating: 7, count: 16).write(to: URL(fileURLWithPath: pair.receiver.store.partialPath(sha256: ref.sha256)))
        #expect(pair.receiver.fetch(ref, from: Data("a".utf8)) == 16)
        pair.pump()
        #expect(Self.arrived(pair) == bytes)
        // One longer than the file is not used at all.
        let other = try Self.held(pair, dir, Data("short".utf8))
        try Data(repeating: 1, count: 9).write(to: URL(fileURLWithPath: pair.receiver.store.partialPath(sha256: other.sha256)))
        #expect(pair.receiver.fetch(other, from: Data("a".utf8)) == 0)
        pair.pump()
        #expect(Self.arrived(pair) == Data("short".utf8))
    }

    /// A second peer offering a file on its way (the same submit made again after the first was
    /// interrupted) takes the transfer over when the first stalls, from where it stood; the first
    /// is reported, so its submission does not start a second run.
    @Test func anotherPeerTakesOverAStalledTransfer() throws {
        let dir = temporaryDirectory("transfer-handover")
        let pair = try Pair(dir)
        let bytes = Data((0..<64).map { UInt8($0 ^ 0x5a) })
        let ref = try Self.held(pair, dir, bytes)
        let t0 = Clocks.steady   // chunks are timed by the clock as they come (the steady one)
        pair.receiver.fetch(ref, from: Data("a".utf8), now: t0)
        pair.pump(pulls: 3)     // 12 bytes came from a, then a went quiet
        pair.receiver.fetch(ref, from: Data("b".utf8), now: t0)
        #expect(pair.toSender.isEmpty, "b was asked before a stalled")
        pair.receiver.tick(now: t0 + 2)
        #expect(pair.receiver.takeHandovers().isEmpty)
        pair.receiver.tick(now: t0 + 4)
        let handed = pair.receiver.takeHandovers()
        #expect(handed.map(\.sha256) == [ref.sha256] && handed.map { String(decoding: $0.from, as: UTF8.self) } == ["a"])
        #expect(!pair.pulled.isEmpty && pair.pulled.allSatisfy { $0.peer == "b" } && pair.pulled.map(\.offset).min() == 12, "\(pair.pulled)")
        pair.pump()
        #expect(Self.arrived(pair) == bytes)
        // A peer that goes while another offered the file hands it over at once.
        let other = try Self.held(pair, dir, Data((0..<20).map { UInt8($0) }))
        pair.receiver.fetch(other, from: Data("a".utf8))
        pair.receiver.fetch(other, from: Data("b".utf8))
        pair.toSender = []
        pair.receiver.peerLost(Data("a".utf8))
        #expect(pair.receiver.takeHandovers().map(\.sha256) == [other.sha256])
        #expect(!pair.pulled.isEmpty && pair.pulled.allSatisfy { $0.peer == "b" })
        pair.pump()
        #expect(Self.arrived(pair) == Data((0..<20).map { UInt8($0) }))
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

    /// A finished transfer costs the thread that owns the socket almost nothing: chunks that come
    /// in order are hashed as they come, and a file that could not be (a chunk out of order) is
    /// hashed on another thread. The coordinator hashed a whole upload on its socket's thread,
    /// twice, when the last chunk came: a 7 GB phone video held it 10 s, and its worker, which did
    /// the same, was taken for dead. Bytes that are not what was asked for still fail.
    @Test func aFinishedTransferIsNotHashedOnTheSocketsThread() throws {
        let dir = temporaryDirectory("transfer-hash")
        let mib = 1 << 20
        var sent: [(WireMessage, Data?)] = [], pulls: [WireMessage] = []
        let sender = Transfers(store: try ArtifactStore(root: dir + "/sender"), chunkSize: mib) { _, m, p in sent.append((m, p)); return true }
        let receiver = Transfers(store: try ArtifactStore(root: dir + "/receiver"), chunkSize: mib) { _, m, _ in pulls.append(m); return true }
        var bytes = Data(count: 96 * mib)
        bytes.withUnsafeMutableBytes { b in for i in stride(from: 0, to: b.count, by: 4096) { b[i] = UInt8(truncatingIfNeeded: i >> 12) } }
        try bytes.write(to: URL(fileURLWithPath: dir + "/video"))
        let ref = try sender.store.ingest(localFile: dir + "/video")
        let started = Clocks.steady
        _ = try SHA256Hasher.hex(fileAt: ref.path)
        let hashing = Clocks.steady - started
        /// Moves chunks until one is left, then times the receiver taking that last one.
        func transfer(swapping: Bool, damaging: Bool = false) -> (last: Double, done: [(String, Result<ArtifactRef, Transfers.TransferError>)]) {
            receiver.fetch(ref, from: Data("s".utf8))
            var last: (Chunk, Data?)?
            while !pulls.isEmpty || !sent.isEmpty {
                for case .pull(let sha, let offset, let length) in pulls { sender.serve(sha256: sha, offset: offset, length: length, to: Data()) }
                pulls = []
                var chunks = sent.compactMap { m, p -> (Chunk, Data?)? in if case .chunk(let c) = m { (c, p) } else { nil } }
                sent = []
                if swapping, chunks.count > 1, chunks[0].0.offset == 0 { chunks.swapAt(0, 1) }
                if damaging, let k = chunks.firstIndex(where: { $0.0.offset == Int64(40 * mib) }) { chunks[k].1![5] ^= 1 }
                for (c, p) in chunks {
                    if c.offset + Int64(p?.count ?? 0) == ref.size { last = (c, p); continue }
                    receiver.received(c, payload: p)
                }
            }
            let t0 = Clocks.steady
            if let (c, p) = last { receiver.received(c, payload: p) }
            let took = Clocks.steady - t0
            var done = receiver.takeCompleted()
            if done.isEmpty { receiver.waitForChecks(); done = receiver.takeCompleted() }
            return (took, done)
        }
        let inOrder = transfer(swapping: false)
        guard case .success(let got)? = inOrder.done.first?.1, inOrder.done.count == 1 else { Issue.record("\(inOrder.done)"); return }
        #expect(try SHA256Hasher.hex(fileAt: got.path) == ref.sha256)
        #expect(inOrder.last < hashing / 4, "the last chunk took \(inOrder.last) s; hashing the file takes \(hashing) s")
        try FileManager.default.removeItem(atPath: got.path)
        let outOfOrder = transfer(swapping: true)
        guard case .success(let again)? = outOfOrder.done.first?.1, outOfOrder.done.count == 1 else { Issue.record("\(outOfOrder.done)"); return }
        #expect(again.path == got.path && (try? SHA256Hasher.hex(fileAt: again.path)) == ref.sha256)
        #expect(outOfOrder.last < hashing / 4, "the last chunk took \(outOfOrder.last) s; hashing the file takes \(hashing) s")
        try FileManager.default.removeItem(atPath: got.path)
        for swapping in [false, true] {
            let damaged = transfer(swapping: swapping, damaging: true)
            guard case .failure(let e)? = damaged.done.first?.1 else { Issue.record("a damaged chunk was stored: \(damaged.done)"); return }
            #expect("\(e)".hasPrefix("content does not match its sha256"), "\(e)")
            #expect(!FileManager.default.fileExists(atPath: got.path))
        }
    }

    /// A file of the store is hashed when it comes in and again only when it has changed since:
    /// a 2.3 GB concert video was hashed whole before each of the ten highlights cut from it.
    /// A change in place, or a file put in its place, is still found.
    @Test func aStoredFileIsHashedAgainOnlyWhenItChanged() throws {
        let dir = temporaryDirectory("store-stamp")
        let store = try ArtifactStore(root: dir + "/store")
        var bytes = Data(count: 64 << 20)
        bytes.withUnsafeMutableBytes { b in for i in stride(from: 0, to: b.count, by: 512) { b[i] = UInt8(truncatingIfNeeded: i >> 9) } }
        try bytes.write(to: URL(fileURLWithPath: dir + "/video"))
        let ref = try store.ingest(localFile: dir + "/video")
        #expect(ref.sha256 == SHA256Hasher.hex(bytes) && ref.size == Int64(bytes.count))
        guard ArtifactStore.readStamp(ref.path) != nil else {
            print("skipped the stamp's checks: \(dir) keeps no extended attributes (the store hashes on every check there)")
            #expect(store.verify(ref))
            return
        }
        func timed(_ body: () -> Bool) -> (Bool, Double) { let t0 = Clocks.steady; let r = body(); return (r, Clocks.steady - t0) }
        let t0 = Clocks.steady
        _ = try SHA256Hasher.hex(fileAt: ref.path)
        let hashing = Clocks.steady - t0
        let (intact, checking) = timed { store.verify(ref) }
        #expect(intact && checking < hashing / 10, "checked in \(checking) s; hashing takes \(hashing) s")
        // Used again (the least recently used go first): still known.
        store.touch(ref.path)
        let (touched, afterTouch) = timed { store.verify(ref) }
        #expect(touched && afterTouch < hashing / 10, "checked in \(afterTouch) s after a touch; hashing takes \(hashing) s")
        // A byte changed in place, the size the same: found.
        let handle = try #require(FileHandle(forUpdatingAtPath: ref.path))
        try handle.seek(toOffset: 1000)
        try handle.write(contentsOf: Data([bytes[1000] ^ 0xFF]))
        try handle.close()
        #expect(!store.verify(ref))
        // Put back as it was: hashed, and known again.
        try bytes.write(to: URL(fileURLWithPath: ref.path))
        #expect(store.verify(ref) && ArtifactStore.readStamp(ref.path) != nil)
        // Another file of the same size put in its place (a new file, no stamp): found.
        var other = bytes; other[5] ^= 1
        try other.write(to: URL(fileURLWithPath: dir + "/other"))
        #expect(rename(dir + "/other", ref.path) == 0)
        #expect(!store.verify(ref))
        // An upload the store holds is brought in by its address, checked, not copied.
        try bytes.write(to: URL(fileURLWithPath: ref.path))
        #expect(store.verify(ref))
        #expect(try store.ingest(localFile: ref.path) == ref)
    }

    /// A stopped fetch of a large local file (its run cancelled, its attempt past the time limit,
    /// its worker draining) stops within a MiB hashed or 64 MiB copied and leaves nothing in the
    /// store; before, it hashed and copied the whole file, holding its slot to the end. Through
    /// the worker's runner, a stopped fetch fails "cancelled" (retryable), whatever its step.
    @Test func aStoppedIngestStopsSoonAndLeavesNothing() throws {
        let dir = temporaryDirectory("store-cancel")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try ArtifactStore(root: dir + "/store")
        let size = 200 << 20
        var bytes = Data(count: size)
        bytes.withUnsafeMutableBytes { b in for i in stride(from: 0, to: b.count, by: 4096) { b[i] = UInt8(truncatingIfNeeded: i >> 12) } }
        try bytes.write(to: URL(fileURLWithPath: dir + "/long.mov"))
        let leftovers = { (try? FileManager.default.contentsOfDirectory(atPath: store.root + "/tmp")) ?? [] }
        // Stopped while hashing: asked once a MiB, it stops at the first look after the stop.
        var asked = 0
        #expect(throws: CancellationError.self) { try store.ingest(localFile: dir + "/long.mov", isCancelled: { asked += 1; return asked > 10 }) }
        #expect(asked == 11, "asked \(asked) times")
        // Stopped while copying (the hash asks once a MiB, 200 times): stops at the copy's first
        // look. Where the file system clones (btrfs, XFS) there is no copy to stop: stored.
        asked = 0
        do {
            _ = try store.ingest(localFile: dir + "/long.mov", isCancelled: { asked += 1; return asked > size >> 20 })
            #expect(asked == size >> 20, "stored without a stop: cloned, so asked only by the hash, not \(asked) times")
        } catch is CancellationError {
            #expect(asked == (size >> 20) + 1, "asked \(asked) times")
        }
        #expect(leftovers().isEmpty, "\(leftovers())")
        // Let run, the copy asks before every 64 MiB and once at the end: five looks for 200 MiB
        // (where the file system clones, none), and the file is stored.
        asked = 0
        let ref = try store.ingest(localFile: dir + "/long.mov", isCancelled: { asked += 1; return false })
        #expect(ref.sha256 == SHA256Hasher.hex(bytes) && store.verify(ref))
        #expect(asked == (size >> 20) + 5 || asked == size >> 20, "asked \(asked) times")
        // The runner: a fetch stopped from the start fails at once, as a cancelled attempt.
        let other = try ArtifactStore(root: dir + "/other")
        let runner = MediaTaskRunner(store: other)
        let t0 = Clocks.steady
        let result = runner.run(Assignment(lease: "l", task: .fetch(uri: dir + "/long.mov", name: "long.mov"), key: "k"), isCancelled: { true })
        #expect(result.error?.message == "cancelled" && result.error?.errorClass == .retryable && result.artifact == nil, "\(String(describing: result.error))")
        #expect(Clocks.steady - t0 < 0.5)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: other.root + "/tmp")) ?? []).isEmpty)
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
        // A transfer's kept part stays a day, untouched or not.
        for (name, age) in [("dead.part", 7200.0), ("live.part", 30), ("\(String(repeating: "c", count: 64)).partial", 7200)] {
            try Data(count: 10).write(to: URL(fileURLWithPath: store.root + "/tmp/" + name))
            try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: store.root + "/tmp/" + name)
        }
        // Within the limit: no artifact goes, only the dead writer's leftover.
        #expect(store.trim(toBytes: 6000, keep: [], grace: 60, now: now) == ArtifactStore.TrimReport(bytes: 6000, temporaryRemoved: 1))
        #expect(present() == [0, 1, 2, 3, 4, 5])
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.root + "/tmp").sorted() == ["\(String(repeating: "c", count: 64)).partial", "live.part"])
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
        // A kept part goes once untouched for over a day (the live writer's file long before).
        #expect(StaleTemporaries.remove(in: store.root + "/tmp", untouchedFor: 60, now: now.addingTimeInterval(60_000)).paths.map { ($0 as NSString).lastPathComponent } == ["live.part"])
        #expect(StaleTemporaries.remove(in: store.root + "/tmp", untouchedFor: 60, now: now.addingTimeInterval(80_000)).removed == 1)
    }

    /// The audio chunks a concat keeps in the store (`AudioChunks`) count in its limit and go by
    /// the same rule, the least recently used first, as artifacts do; the coordinator is told of
    /// artifacts only. Before, they were left out: up to 4,096 chunks beside a store at its limit.
    @Test func aBoundedStoreCountsItsAudioChunks() throws {
        let dir = temporaryDirectory("store-trim-chunks")
        let store = try ArtifactStore(root: dir + "/store")
        let now = Date()
        let chunks = store.root + "/" + StoreFiles.audioChunks
        try FileManager.default.createDirectory(atPath: chunks, withIntermediateDirectories: true)
        var refs: [ArtifactRef] = []
        // Oldest to newest: artifact 0, chunk a, artifact 1, chunk b (a chunk being written beside them).
        for (k, (name, age)) in [("f0", 400.0), ("a", 300), ("f1", 200), ("b", 100)].enumerated() {
            if name.hasPrefix("f") {
                try Data(repeating: UInt8(k), count: 1000).write(to: URL(fileURLWithPath: dir + "/" + name))
                let ref = try store.ingest(localFile: dir + "/" + name)
                try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: ref.path)
                refs.append(ref)
            } else {
                try Data(count: 1000).write(to: URL(fileURLWithPath: chunks + "/" + name))
                try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: chunks + "/" + name)
            }
        }
        try Data(count: 500).write(to: URL(fileURLWithPath: chunks + "/c.tmp-1A2B3C4D"))
        #expect(store.trim(toBytes: 4000, keep: [], grace: 60, now: now).bytes == 4000)
        let t = store.trim(toBytes: 2000, keep: [], grace: 60, now: now)
        #expect(t.removed == 2 && t.bytes == 2000 && t.removedSHA256 == [refs[0].sha256], "\(t)")
        #expect(!store.isPresent(refs[0]) && store.isPresent(refs[1]))
        #expect(try FileManager.default.contentsOfDirectory(atPath: chunks).sorted() == ["b", "c.tmp-1A2B3C4D"])
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

    /// Files pulled at once over a link that delivers `rate` bytes a second, in order, in
    /// virtual time: the receiver's pulls reach the sender at once, and its chunks queue for the
    /// link. Returns when each file was stored, the bytes the sender sent, and the longest a
    /// message sent behind the chunks waited for the link.
    /// `paused`: seconds in which the receiver reads nothing (its thread busy); what came meanwhile
    /// it reads at once at the end.
    static func overLink(rate: Double, latency: Double, files: Int, of size: Int, paused: Range<Double>? = nil, _ dir: String) throws
        -> (stored: [Double], sent: Int, longestWait: Double) {
        var pulls: [(sha: String, offset: Int64, length: Int)] = [], served: [(Chunk, Data)] = []
        let sender = Transfers(store: try ArtifactStore(root: dir + "/sender")) { _, m, p in
            if case .chunk(let c) = m, let p { served.append((c, p)) }
            return true
        }
        let receiver = Transfers(store: try ArtifactStore(root: dir + "/receiver")) { _, m, _ in
            if case .pull(let sha, let offset, let length) = m { pulls.append((sha, offset, length)) }
            return true
        }
        var refs: [ArtifactRef] = []
        for k in 0..<files {
            var bytes = Data(count: size)
            bytes.withUnsafeMutableBytes { b in for i in stride(from: 0, to: b.count, by: 997) { b[i] = UInt8(truncatingIfNeeded: i &+ k) } }
            try bytes.write(to: URL(fileURLWithPath: dir + "/f\(k)"))
            refs.append(try sender.store.ingest(localFile: dir + "/f\(k)"))
        }
        var now = 0.0, linkFree = 0.0, nextTick = 0.25, sent = 0, longestWait = 0.0
        var onLink: [(arrives: Double, chunk: Chunk, payload: Data)] = []
        var stored: [String: Double] = [:]
        for ref in refs { receiver.fetch(ref, from: Data("s".utf8), now: now) }
        while stored.count < files && now < 600 {
            for p in pulls { sender.serve(sha256: p.sha, offset: p.offset, length: p.length, to: Data("r".utf8)) }
            pulls = []
            for (c, p) in served {
                linkFree = max(linkFree, now) + Double(p.count) / rate
                onLink.append((linkFree + latency, c, p))
                sent += p.count
            }
            served = []
            longestWait = max(longestWait, linkFree - now)
            if let first = onLink.first, first.arrives <= nextTick {
                onLink.removeFirst()
                now = max(now, paused.map { $0.contains(first.arrives) ? $0.upperBound : first.arrives } ?? first.arrives) + 1e-6
                receiver.received(first.chunk, payload: first.payload, now: now)
            } else {
                now = max(now, nextTick); nextTick += 0.25
                if let paused, paused.contains(now) { nextTick = paused.upperBound; continue }
                receiver.tick(now: now)
            }
            receiver.waitForChecks()
            for (sha, result) in receiver.takeCompleted() {
                guard case .success(let got) = result else { Issue.record("\(sha.prefix(8)) failed: \(result)"); return ([], sent, longestWait) }
                #expect(try SHA256Hasher.hex(fileAt: got.path) == sha)
                stored[sha] = now
            }
        }
        return (refs.map { stored[$0.sha256] ?? .infinity }, sent, longestWait)
    }

    /// Over a slow link (a submitter's 2 Mbit/s upload) a transfer asks for about a second of
    /// what the link delivers, so chunks come well within the stall timeout: each byte is sent
    /// once, what is sent behind the chunks (the submitter's other messages) waits about a second,
    /// and the files come one after another (the first can be used while the rest come). With
    /// eight 1 MiB chunks asked for each file, 24 MiB queued at once: no chunk came within 3 s,
    /// every stall asked for the same chunks again, and the upload failed after 18 s. A file waiting
    /// its turn is not stalled.
    @Test func aSlowLinkIsAskedForEachByteOnce() throws {
        let dir = temporaryDirectory("transfer-slow-link")
        let mib = 1 << 20, rate = 250_000.0
        // Four files: the last waits its turn longer than a transfer may stall (5 times 3 s).
        let slow = try Self.overLink(rate: rate, latency: 0.02, files: 4, of: 2 * mib, dir + "/slow")
        let ideal = Double(4 * 2 * mib) / rate
        #expect(slow.stored.allSatisfy { $0 <= ideal * 1.1 }, "stored at \(slow.stored) s; the link takes \(ideal) s")
        #expect(slow.sent <= 4 * 2 * mib * 101 / 100, "sent \(slow.sent) bytes of \(4 * 2 * mib)")
        #expect(slow.longestWait <= 1.5, "a message behind the chunks waited up to \(slow.longestWait) s")
        #expect(slow.stored[0] <= ideal * 0.3, "the first file was stored at \(slow.stored[0]) s of \(ideal) s")
        // The receiver busy for 2 s: what came meanwhile, read at once, does not make the link
        // look faster than it is (chunks asked for too large would take longer than a stall).
        let paused = try Self.overLink(rate: rate, latency: 0.02, files: 4, of: 2 * mib, paused: 10..<12, dir + "/paused")
        #expect(paused.sent <= 4 * 2 * mib * 101 / 100, "sent \(paused.sent) bytes of \(4 * 2 * mib)")
        #expect(paused.longestWait <= 2.5, "a message behind the chunks waited up to \(paused.longestWait) s")
        // A fast link is still used whole: a 100 MB/s one with a 0.5 ms latency.
        let fast = try Self.overLink(rate: 100e6, latency: 0.0005, files: 3, of: 8 * mib, dir + "/fast")
        let fastIdeal = Double(3 * 8 * mib) / 100e6
        #expect(fast.stored.allSatisfy { $0 <= fastIdeal * 1.25 }, "stored at \(fast.stored) s; the link takes \(fastIdeal) s")
        #expect(fast.sent == 3 * 8 * mib)
    }
}
