import Foundation
import ThreadlineCore
import Lineage

/// Moves artifacts between peers over the message socket, with no shared filesystem.
///
/// The receiver pulls chunks, writes them at their offsets into a temporary file, and adopts the
/// file into its store only when the whole hashes to the sha256 it asked for. A stalled transfer
/// asks again; one that stays stalled fails.
///
/// What is asked of one peer and not yet received is held to about a second of what that peer
/// has been measured to deliver (`Link`), in chunks small enough that one comes every fraction of
/// that second; a peer's transfers take that room in the order they started. With a fixed window
/// of eight 1 MiB chunks for each file, an upload over a 2 Mbit/s link queued 24 MiB at once: a
/// chunk took more than the 3 s that counts as a stall, every stall asked for the same chunks
/// again, and the upload failed with "the sender sent nothing for 18 s" while the link was busy
/// with copies (and the submitter's own messages waited behind them).
///
/// A transfer cut off (its sender gone or silent) keeps what it received from the start without a
/// gap, as `tmp/SHA256.partial` in the store, and the next transfer of that file goes on from there:
/// a phone video whose upload over Wi-Fi broke at 1.8 GiB is not sent again from the first byte.
/// When another peer asks to send a file already on its way (the same submit made again after the
/// first was interrupted), it takes the transfer over as soon as the first stalls.
///
/// Chunks are hashed as they arrive in order, so a finished file is checked without reading it
/// again; what could not be hashed on the way (chunks that came out of order, a kept start) is
/// hashed on a thread of its own. Hashing a 7 GB phone video whole on the socket's thread, twice,
/// had stopped a coordinator (and a worker) answering for 10 s: its peers took it for gone.
/// Lives on the thread that owns the socket.
final class Transfers {
    struct Incoming {
        var expected: ArtifactRef
        var peer: Data
        /// Peers that offered the same file since; the next takes over when `peer` stalls or goes.
        var alternates: [Data] = []
        var tmp: String
        var handle: FileHandle
        var nextOffset: Int64 = 0
        /// Chunks asked for and not received: offset → their length and the order the pull went to the peer.
        var outstanding: [Int64: (length: Int, seq: Int)] = [:]
        /// Started before every transfer with a higher one: first to take its peer's room.
        var serial: Int
        /// When a chunk last came, or the chunks were last asked for again.
        var lastProgress: Double
        /// When a chunk last came.
        var lastData: Double
        var retries = 0
        /// Bytes kept from an earlier transfer of the file that was cut off (0: from the start).
        var resumedFrom: Int64 = 0
        /// Bytes written by this transfer.
        var received: Int64 = 0
        /// Bytes received from the start without a gap: what is kept if this one is cut off too.
        var contiguous: Int64 { outstanding.keys.min() ?? nextOffset }
        var inFlight: Int64 { outstanding.values.reduce(0) { $0 + Int64($1.length) } }
        /// The hash of the file's first `digest.count` bytes, fed as chunks come in order; nil
        /// once that order broke (a kept start, a chunk out of order): hashed whole at the end.
        var digest: SHA256Hasher.Running? = SHA256Hasher.Running()
    }

    /// What is known of one peer's delivery: measured from the chunks that came while it had
    /// pulls to answer.
    struct Link {
        /// Bytes a second, smoothed; nil until measured.
        var rate: Double?
        /// The measurement under way: since when, and the bytes that came since.
        var sampleStart: Double
        var sampleBytes: Int64 = 0
        /// When a chunk last came from the peer, or pulls went to it while it had none to answer.
        var lastData: Double
        /// The order of the next pull, and the highest order of a pull answered: a peer answers
        /// in order, so a pull below it that is still outstanding was lost.
        var nextSeq = 0
        var answered = -1

        /// Pulls go to it while it had none to answer: the time it was idle is not counted into
        /// its delivery, and its silence counts from now.
        mutating func wakes(at now: Double) { sampleStart = now; sampleBytes = 0; lastData = now }
    }

    let store: ArtifactStore
    /// The largest chunk asked for.
    let chunkSize: Int
    /// The most chunks asked of one peer at once: of `chunkSize` on a fast link, smaller on a slow one.
    let window: Int
    /// The seconds of a peer's measured delivery that may be asked of it at once.
    static let aheadSeconds = 1.0
    /// Bytes asked of a peer before its delivery is measured.
    let firstBudget: Int64
    /// The smallest chunk asked for (a slow link's).
    let smallestChunk: Int
    let stallTimeout: Double
    let maxRetries: Int
    /// peer, message, payload → sent?
    let send: (Data, WireMessage, Data?) -> Bool
    private(set) var incoming: [String: Incoming] = [:]
    private(set) var links: [Data: Link] = [:]
    private var serials = 0
    /// Received whole, being hashed on `hashing`: still in flight for everyone asking.
    private var checking: [String: Incoming] = [:]
    private let hashing = DispatchQueue(label: "threadline.transfers.hash")
    /// What `hashing` found, for the socket's thread: the file, what it hashed to (nil: unreadable).
    private let hashedOffThread = Locked<[(sha256: String, got: String?)]>([])
    private var completed: [(String, Result<ArtifactRef, TransferError>)] = []
    /// Transfers that moved from a stalled or lost peer to another: the file and the peer left.
    private var handedOver: [(sha256: String, from: Data)] = []
    /// Extra files this peer serves besides its store (a submitter's sources): sha256 → path.
    var exported: [String: String] = [:]

    struct TransferError: Error, CustomStringConvertible {
        var description: String
        /// This side could not write what came (its disk), rather than the sender or the network failing.
        var here = false
        /// The sender does not hold the file (removed since it was named: `coord gc`, or by hand).
        var notHeld = false
        /// This side's disk is full.
        var noSpace = false
    }
    /// What a sender answers for a file it does not hold.
    static let notHeldReason = "not held here"

    init(store: ArtifactStore, chunkSize: Int = 1 << 20, window: Int = 8, stallTimeout: Double = 3, maxRetries: Int = 5,
         send: @escaping (Data, WireMessage, Data?) -> Bool) {
        self.store = store; self.chunkSize = chunkSize; self.window = window
        self.stallTimeout = stallTimeout; self.maxRetries = maxRetries; self.send = send
        firstBudget = min(Int64(window) * Int64(chunkSize), 256 << 10)
        smallestChunk = min(chunkSize, 16 << 10)
    }

    /// Bytes that may be asked of `peer` and not yet received.
    func budget(of peer: Data) -> Int64 {
        guard let rate = links[peer]?.rate else { return firstBudget }
        return min(max(Int64(rate * Self.aheadSeconds), Int64(smallestChunk)), Int64(window) * Int64(chunkSize))
    }

    /// The length of the chunks asked of `peer`: about a `window`th of its budget, so that a few
    /// come in each second of it; a power of two (or `chunkSize`), so that chunks of one length
    /// start on its multiples whatever came before them.
    func chunkLength(for peer: Data) -> Int {
        let wanted = budget(of: peer) / Int64(window)
        guard wanted < chunkSize else { return chunkSize }
        var length = smallestChunk
        while Int64(length) * 2 <= wanted && length * 2 < chunkSize { length *= 2 }
        return length
    }

    func isInFlight(_ sha: String) -> Bool { incoming[sha] != nil || checking[sha] != nil }

    /// Bytes of `sha` here so far (kept from before and received since), while it is on its way.
    func arrived(_ sha: String) -> Int64? { (incoming[sha] ?? checking[sha]).map { $0.resumedFrom + $0.received } }

    /// Starts pulling `ref` from `peer` unless it is already here or on its way (from another
    /// peer, `peer` is kept to take over if that one stalls). Returns the bytes a transfer of it
    /// that was cut off had received and this one goes on from.
    @discardableResult
    func fetch(_ ref: ArtifactRef, from peer: Data, now: Double = Clocks.steady) -> Int64 {
        let local = store.local(ref)
        if store.isPresent(local) { completed.append((ref.sha256, .success(local))); return 0 }
        if var t = incoming[ref.sha256] {
            if t.peer != peer && !t.alternates.contains(peer) { t.alternates.append(peer); incoming[ref.sha256] = t }
            return 0
        }
        if checking[ref.sha256] != nil { return 0 }
        let tmp = store.temporaryPath(suffix: ".part")
        let kept = claimPartial(of: ref, as: tmp)
        guard kept > 0 || FileManager.default.createFile(atPath: tmp, contents: nil), let handle = FileHandle(forWritingAtPath: tmp) else {
            completed.append((ref.sha256, .failure(TransferError(description: "cannot write \(tmp)", here: true)))); return 0
        }
        serials += 1
        incoming[ref.sha256] = Incoming(expected: ref, peer: peer, tmp: tmp, handle: handle, nextOffset: kept, serial: serials, lastProgress: now, lastData: now,
                                        resumedFrom: kept, digest: kept > 0 ? nil : SHA256Hasher.Running())
        FarmMetrics.transferKept(bytes: kept)
        if !finishIfComplete(ref.sha256) { requestMore(from: peer, now: now) }
        return kept
    }

    /// Moves what an earlier transfer of `ref` kept to `tmp`; returns its length (0 when none, or
    /// when what was kept is longer than the file).
    private func claimPartial(of ref: ArtifactRef, as tmp: String) -> Int64 {
        let partial = store.partialPath(sha256: ref.sha256)
        var st = stat()
        guard stat(partial, &st) == 0, rename(partial, tmp) == 0 else { return 0 }
        guard Int64(st.st_size) <= ref.size else { unlink(tmp); return 0 }
        return Int64(st.st_size)
    }

    /// Asks `peer` for more of the transfers it sends, oldest first, while its budget has room
    /// (at least one chunk when nothing is asked of it).
    private func requestMore(from peer: Data, now: Double) {
        let mine = incoming.values.filter { $0.peer == peer }
        var inFlight = mine.reduce(0) { $0 + $1.inFlight }
        let budget = budget(of: peer), length = chunkLength(for: peer)
        var link = links[peer] ?? Link(sampleStart: now, lastData: now)
        // (Not at once on a chunk's arrival: then it was not idle.)
        if inFlight == 0 && link.lastData < now { link.wakes(at: now) }
        defer { links[peer] = link }
        for sha in mine.sorted(by: { $0.serial < $1.serial }).map(\.expected.sha256) {
            guard var t = incoming[sha] else { continue }
            defer { incoming[sha] = t }
            while t.nextOffset < t.expected.size && (inFlight == 0 || inFlight + Int64(length) <= budget) {
                // To the next multiple of the length: a chunk of it starts on one.
                let len = Int(min(Int64(length) - t.nextOffset % Int64(length), t.expected.size - t.nextOffset))
                guard send(peer, .pull(sha256: sha, offset: t.nextOffset, length: len), nil) else { return }
                t.outstanding[t.nextOffset] = (len, link.nextSeq)
                link.nextSeq += 1
                t.nextOffset += Int64(len)
                inFlight += Int64(len)
            }
        }
    }

    /// A chunk arrived.
    func received(_ c: Chunk, payload: Data?, now: Double = Clocks.steady) {
        guard var t = incoming[c.sha256] else { return }   // finished or abandoned: a duplicate
        if let e = c.error { fail(c.sha256, "the sender cannot serve it: \(e)", notHeld: e == Self.notHeldReason); return }
        guard let payload, let asked = t.outstanding[c.offset], payload.count <= asked.length, c.total == t.expected.size else { return }
        do {
            try t.handle.seek(toOffset: UInt64(c.offset))
            try t.handle.write(contentsOf: payload)
        } catch { incoming[c.sha256] = t; fail(c.sha256, "cannot write \(t.tmp): \(FileChecks.reason(error))", here: true, noSpace: FileChecks.isNoSpace(error)); return }
        t.outstanding[c.offset] = nil
        t.received += Int64(payload.count)
        if t.digest?.count == c.offset { t.digest!.update(payload) } else { t.digest = nil }
        FarmMetrics.transferred(bytes: payload.count, received: true)
        t.lastProgress = now
        t.lastData = now
        t.retries = 0
        incoming[c.sha256] = t
        delivered(payload.count, seq: asked.seq, by: t.peer, now: now)
        finishIfComplete(c.sha256)
        requestMore(from: t.peer, now: now)
    }

    /// Counts a chunk that came from `peer` into its measured delivery: a measurement ends after
    /// 0.2 s, or sooner once twice the peer's budget came (a fast link's first files are not all
    /// asked for in small chunks). Each at most doubles the rate: chunks that waited behind a
    /// stall of the link come at once, and measured alone they made a slow link look fast.
    private func delivered(_ bytes: Int, seq: Int, by peer: Data, now: Double) {
        guard var link = links[peer] else { return }
        link.lastData = now
        link.answered = max(link.answered, seq)
        link.sampleBytes += Int64(bytes)
        let elapsed = now - link.sampleStart
        if elapsed >= 0.2 || (elapsed > 0 && link.sampleBytes >= 2 * budget(of: peer)) {
            let measured = Double(link.sampleBytes) / elapsed
            let before = link.rate ?? Double(firstBudget) / Self.aheadSeconds
            link.rate = min(link.rate.map { ($0 + measured) / 2 } ?? measured, 2 * before)
            link.sampleStart = now; link.sampleBytes = 0
        }
        links[peer] = link
    }

    /// Ends a transfer whose bytes have all come: checked at once when every chunk was hashed on
    /// its way, else handed to `hashing` (`takeCompleted` collects the outcome).
    @discardableResult
    private func finishIfComplete(_ sha: String) -> Bool {
        guard let t = incoming[sha], t.outstanding.isEmpty, t.nextOffset >= t.expected.size else { return false }
        try? t.handle.close()
        incoming[sha] = nil
        if let digest = t.digest, digest.count == t.expected.size {
            checked(t, got: digest.hex())
            return true
        }
        checking[sha] = t
        let (tmp, digest, results) = (t.tmp, t.digest ?? SHA256Hasher.Running(), hashedOffThread)
        hashing.async { let got = try? digest.finish(fileAt: tmp); results.withLock { $0.append((sha, got)) } }
        return true
    }

    /// Moves a transfer's file into the store when it hashed to what was asked for.
    private func checked(_ t: Incoming, got: String?) {
        let sha = t.expected.sha256
        guard let got else {
            try? FileManager.default.removeItem(atPath: t.tmp)
            completed.append((sha, .failure(TransferError(description: "cannot read \(t.tmp) back", here: true))))
            return
        }
        guard got == sha else {
            // What an earlier transfer kept was not the start of this file after all (its
            // sender changed it, or the disk did): the whole file is asked for again, once.
            if t.resumedFrom > 0, truncate(t.tmp, 0) == 0, let handle = FileHandle(forWritingAtPath: t.tmp) {
                var again = t
                again.handle = handle; again.nextOffset = 0; again.resumedFrom = 0; again.received = 0
                again.outstanding = [:]; again.digest = SHA256Hasher.Running()
                incoming[sha] = again
                requestMore(from: again.peer, now: Clocks.steady)
                return
            }
            try? FileManager.default.removeItem(atPath: t.tmp)
            completed.append((sha, .failure(TransferError(description: "content does not match its sha256 (got \(got.prefix(12))…)"))))
            return
        }
        do {
            completed.append((sha, .success(try store.adopt(t.tmp, sha256: sha))))
        } catch {
            try? FileManager.default.removeItem(atPath: t.tmp)
            completed.append((sha, .failure(TransferError(description: "cannot store \(t.tmp): \(FileChecks.reason(error))", here: true))))
        }
    }

    /// Ends a transfer that failed. `keep`: it was cut off (its sender went silent or away, not
    /// a bad write or bad content), so what came from the start without a gap is kept for the
    /// next transfer of the file.
    private func fail(_ sha: String, _ why: String, here: Bool = false, keep: Bool = false, notHeld: Bool = false, noSpace: Bool = false) {
        guard let t = incoming.removeValue(forKey: sha) else { return }
        try? t.handle.close()
        let kept = keep && t.contiguous > 0 && truncate(t.tmp, off_t(t.contiguous)) == 0
            && rename(t.tmp, store.partialPath(sha256: sha)) == 0
        if !kept { try? FileManager.default.removeItem(atPath: t.tmp) }
        completed.append((sha, .failure(TransferError(description: why, here: here, notHeld: notHeld, noSpace: noSpace))))
    }

    /// Moves a transfer to the next peer that offered the file, asking it for what is missing.
    private func handOver(_ sha: String, now: Double) {
        guard var t = incoming[sha], !t.alternates.isEmpty else { return }
        handedOver.append((sha, t.peer))
        FarmMetrics.transferKept(bytes: t.contiguous)
        t.peer = t.alternates.removeFirst()
        t.retries = 0
        t.lastProgress = now
        incoming[sha] = t
        askAgain(sha, now: now)
    }

    /// Asks the transfer's peer again for the chunks it was asked for and did not send (first,
    /// each under a new order), then for more as its peer's budget allows.
    private func askAgain(_ sha: String, now: Double) {
        guard var t = incoming[sha] else { return }
        var link = links[t.peer] ?? Link(sampleStart: now, lastData: now)
        if !isAsked(t.peer, besides: sha) { link.wakes(at: now) }
        for off in t.outstanding.keys.sorted() {
            let length = t.outstanding[off]!.length
            guard send(t.peer, .pull(sha256: sha, offset: off, length: length), nil) else { break }
            t.outstanding[off] = (length, link.nextSeq)
            link.nextSeq += 1
        }
        incoming[sha] = t
        links[t.peer] = link
        requestMore(from: t.peer, now: now)
    }

    /// Whether chunks are asked of `peer` for a transfer (other than `sha`'s).
    private func isAsked(_ peer: Data, besides sha: String? = nil) -> Bool {
        incoming.values.contains { $0.peer == peer && $0.expected.sha256 != sha && !$0.outstanding.isEmpty }
    }

    /// Whether a transfer quiet for `stallTimeout` is stalled: its peer sent nothing for as long
    /// either, or answered a pull made after one of its chunks (which was lost). One with nothing
    /// asked is stalled only when nothing is asked of its peer at all (its pulls could not be
    /// sent): waiting its turn while the peer delivers the others' files is not a stall.
    /// `asked`: what `isAsked` found of each peer so far this tick.
    private func isStalled(_ t: Incoming, now: Double, asked: inout [Data: Bool]) -> Bool {
        guard let link = links[t.peer] else { return true }
        if t.outstanding.isEmpty {
            if asked[t.peer] == nil { asked[t.peer] = isAsked(t.peer) }
            return !asked[t.peer]!
        }
        return now - link.lastData > stallTimeout || t.outstanding.values.contains { $0.seq < link.answered }
    }

    /// Asks again for chunks of stalled transfers, or moves them to another peer that offered the
    /// file; gives up after `maxRetries` stalls in a row. Runs each turn of the socket's thread:
    /// only the transfers quiet for `stallTimeout` are ordered and looked at, and each peer's
    /// transfers are looked over once (a submission of 200 files waits its turn for minutes).
    func tick(now: Double = Clocks.steady) {
        let quiet = incoming.filter { now - $0.value.lastProgress > stallTimeout }
        guard !quiet.isEmpty else { return }
        var asked: [Data: Bool] = [:]
        for sha in quiet.sorted(by: { $0.value.serial < $1.value.serial }).map(\.key) {
            guard let t = incoming[sha], isStalled(t, now: now, asked: &asked) else { continue }
            // What is asked of the peers changes with each of these.
            asked = [:]
            if !t.alternates.isEmpty { handOver(sha, now: now); continue }
            if t.retries >= maxRetries { fail(sha, "the sender sent nothing for \(Int(now - t.lastData)) s", keep: true); continue }
            incoming[sha]!.retries += 1
            reask(sha, now: now)
        }
    }

    /// Asks the transfer's peer again for what it was asked and did not send, and for what could
    /// not be asked at all (the pulls not sent: the peer's connection gone for a moment): with
    /// none outstanding, asking again asked for nothing.
    private func reask(_ sha: String, now: Double) {
        incoming[sha]!.lastProgress = now
        askAgain(sha, now: now)
    }

    /// Asks again at once for every transfer's outstanding chunks (and what could not be asked
    /// for): its peer was dialled again, perhaps restarted, and what was asked before is gone.
    /// Not counted as a stall.
    func askAgainNow(now: Double = Clocks.steady) {
        for sha in incoming.sorted(by: { $0.value.serial < $1.value.serial }).map(\.key) { reask(sha, now: now) }
    }

    /// Abandons every transfer from a peer that is gone, or moves it to another that offered it.
    func peerLost(_ peer: Data, now: Double = Clocks.steady) {
        for (sha, t) in incoming {
            if t.peer == peer {
                // (A transfer's peer is never among its alternates.)
                if t.alternates.isEmpty { fail(sha, "the sender went away", keep: true) } else { handOver(sha, now: now) }
            } else if t.alternates.contains(peer) {
                incoming[sha]!.alternates.removeAll { $0 == peer }
            }
        }
        links[peer] = nil
    }

    /// Ends every transfer (this side is stopping), keeping what each received for the next.
    func cutOff(_ why: String) {
        for sha in incoming.keys { fail(sha, why, keep: true) }
    }

    /// Transfers moved to another peer since the last call: the file, and the peer that stopped sending it.
    func takeHandovers() -> [(sha256: String, from: Data)] {
        defer { handedOver = [] }
        return handedOver
    }

    func takeCompleted() -> [(String, Result<ArtifactRef, TransferError>)] {
        let hashed: [(sha256: String, got: String?)] = hashedOffThread.withLock { list in
            defer { list = [] }
            return list
        }
        for (sha, got) in hashed {
            guard let t = checking.removeValue(forKey: sha) else { continue }
            checked(t, got: got)
        }
        defer { completed = [] }
        return completed
    }

    /// Waits for the files being hashed (a test, or a peer stopping) and collects them.
    func waitForChecks() { hashing.sync {} }

    /// Answers a pull from the store (or an exported file), refusing lengths over the chunk size.
    /// Returns the bytes sent (0 when refused).
    @discardableResult
    func serve(sha256 sha: String, offset: Int64, length: Int, to peer: Data) -> Int {
        let path = exported[sha] ?? store.path(sha256: sha)
        func refuse(_ why: String) -> Int { _ = send(peer, .chunk(Chunk(sha256: sha, offset: offset, total: 0, error: why)), nil); return 0 }
        guard sha.count == 64, sha.allSatisfy(\.isHexDigit), length >= 0, length <= chunkSize * 4, offset >= 0 else {
            return refuse("malformed request")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else { return refuse(Self.notHeldReason) }
        defer { try? handle.close() }
        // A read that fails is refused with its error: an empty chunk in its place would end,
        // after the whole transfer, as "content does not match its sha256".
        do {
            let total = try handle.seekToEnd()
            guard offset <= Int64(total) else { return refuse("offset past the end") }
            try handle.seek(toOffset: UInt64(offset))
            let data = try handle.read(upToCount: length) ?? Data()
            _ = send(peer, .chunk(Chunk(sha256: sha, offset: offset, total: Int64(total), error: nil)), data)
            FarmMetrics.transferred(bytes: data.count, received: false)
            return data.count
        } catch {
            return refuse("cannot read it here: \(FileChecks.reason(error))")
        }
    }
}

