import Foundation
import ThreadlineCore

/// Moves artifacts between peers over the message socket, with no shared filesystem.
///
/// The receiver pulls fixed-size chunks, keeping at most `window` requests in flight (so a fast
/// sender never floods a slow receiver or the socket), writes them at their offsets into a
/// temporary file, and adopts the file into its store only when the whole hashes to the sha256
/// it asked for. A stalled transfer asks again; one that stays stalled fails.
/// Lives on the thread that owns the socket.
final class Transfers {
    struct Incoming {
        var expected: ArtifactRef
        var peer: Data
        var tmp: String
        var handle: FileHandle
        var nextOffset: Int64 = 0
        var outstanding: Set<Int64> = []
        var lastProgress: Double
        var retries = 0
    }

    let store: ArtifactStore
    let chunkSize: Int
    let window: Int
    let stallTimeout: Double
    let maxRetries: Int
    /// peer, message, payload → sent?
    let send: (Data, WireMessage, Data?) -> Bool
    private(set) var incoming: [String: Incoming] = [:]
    private var completed: [(String, Result<ArtifactRef, TransferError>)] = []
    /// Extra files this peer serves besides its store (a submitter's sources): sha256 → path.
    var exported: [String: String] = [:]

    struct TransferError: Error, CustomStringConvertible {
        var description: String
        /// This side could not write what came (its disk), rather than the sender or the network failing.
        var here = false
    }

    init(store: ArtifactStore, chunkSize: Int = 1 << 20, window: Int = 8, stallTimeout: Double = 3, maxRetries: Int = 5,
         send: @escaping (Data, WireMessage, Data?) -> Bool) {
        self.store = store; self.chunkSize = chunkSize; self.window = window
        self.stallTimeout = stallTimeout; self.maxRetries = maxRetries; self.send = send
    }

    func isInFlight(_ sha: String) -> Bool { incoming[sha] != nil }

    /// Starts pulling `ref` from `peer` unless it is already here or on its way.
    func fetch(_ ref: ArtifactRef, from peer: Data, now: Double = Date().timeIntervalSince1970) {
        let local = store.local(ref)
        if store.isPresent(local) { completed.append((ref.sha256, .success(local))); return }
        guard incoming[ref.sha256] == nil else { return }
        let tmp = store.temporaryPath(suffix: ".part")
        guard FileManager.default.createFile(atPath: tmp, contents: nil), let handle = FileHandle(forWritingAtPath: tmp) else {
            completed.append((ref.sha256, .failure(TransferError(description: "cannot write \(tmp)", here: true)))); return
        }
        incoming[ref.sha256] = Incoming(expected: ref, peer: peer, tmp: tmp, handle: handle, lastProgress: now)
        if ref.size == 0 { finishIfComplete(ref.sha256); return }
        requestMore(ref.sha256)
    }

    private func requestMore(_ sha: String) {
        guard var t = incoming[sha] else { return }
        while t.outstanding.count < window && t.nextOffset < t.expected.size {
            let len = Int(min(Int64(chunkSize), t.expected.size - t.nextOffset))
            guard send(t.peer, .pull(sha256: sha, offset: t.nextOffset, length: len), nil) else { break }
            t.outstanding.insert(t.nextOffset)
            t.nextOffset += Int64(len)
        }
        incoming[sha] = t
    }

    /// A chunk arrived.
    func received(_ c: Chunk, payload: Data?, now: Double = Date().timeIntervalSince1970) {
        guard var t = incoming[c.sha256] else { return }   // finished or abandoned: a duplicate
        if let e = c.error { fail(c.sha256, "the sender cannot serve it: \(e)"); return }
        guard let payload, t.outstanding.contains(c.offset), c.total == t.expected.size,
              c.offset + Int64(payload.count) <= t.expected.size else { return }
        do {
            try t.handle.seek(toOffset: UInt64(c.offset))
            try t.handle.write(contentsOf: payload)
        } catch { incoming[c.sha256] = t; fail(c.sha256, "cannot write \(t.tmp): \(FileChecks.reason(error))", here: true); return }
        t.outstanding.remove(c.offset)
        t.lastProgress = now
        t.retries = 0
        incoming[c.sha256] = t
        if !finishIfComplete(c.sha256) { requestMore(c.sha256) }
    }

    @discardableResult
    private func finishIfComplete(_ sha: String) -> Bool {
        guard let t = incoming[sha], t.outstanding.isEmpty, t.nextOffset >= t.expected.size else { return false }
        try? t.handle.close()
        incoming[sha] = nil
        do {
            let got = try SHA256Hasher.hex(fileAt: t.tmp)
            guard got == sha else {
                try? FileManager.default.removeItem(atPath: t.tmp)
                completed.append((sha, .failure(TransferError(description: "content does not match its sha256 (got \(got.prefix(12))…)"))))
                return true
            }
            completed.append((sha, .success(try store.adopt(t.tmp))))
        } catch {
            try? FileManager.default.removeItem(atPath: t.tmp)
            completed.append((sha, .failure(TransferError(description: "cannot store \(t.tmp): \(FileChecks.reason(error))", here: true))))
        }
        return true
    }

    private func fail(_ sha: String, _ why: String, here: Bool = false) {
        guard let t = incoming.removeValue(forKey: sha) else { return }
        try? t.handle.close()
        try? FileManager.default.removeItem(atPath: t.tmp)
        completed.append((sha, .failure(TransferError(description: why, here: here))))
    }

    /// Asks again for chunks of stalled transfers; gives up after `maxRetries` stalls in a row.
    func tick(now: Double = Date().timeIntervalSince1970) {
        for (sha, t) in incoming where now - t.lastProgress > stallTimeout {
            if t.retries >= maxRetries { fail(sha, "stalled for \(Int(now - t.lastProgress)) s"); continue }
            var u = t
            u.retries += 1
            u.lastProgress = now
            for off in u.outstanding {
                let len = Int(min(Int64(chunkSize), u.expected.size - off))
                _ = send(u.peer, .pull(sha256: sha, offset: off, length: len), nil)
            }
            incoming[sha] = u
        }
    }

    /// Abandons every transfer from a peer that is gone.
    func peerLost(_ peer: Data) {
        for (sha, t) in incoming where t.peer == peer { fail(sha, "the sender went away") }
    }

    func takeCompleted() -> [(String, Result<ArtifactRef, TransferError>)] {
        defer { completed = [] }
        return completed
    }

    /// Answers a pull from the store (or an exported file), refusing lengths over the chunk size.
    /// Returns the bytes sent (0 when refused).
    @discardableResult
    func serve(sha256 sha: String, offset: Int64, length: Int, to peer: Data) -> Int {
        let path = exported[sha] ?? store.path(sha256: sha)
        func refuse(_ why: String) -> Int { _ = send(peer, .chunk(Chunk(sha256: sha, offset: offset, total: 0, error: why)), nil); return 0 }
        guard sha.count == 64, sha.allSatisfy(\.isHexDigit), length >= 0, length <= chunkSize * 4, offset >= 0 else {
            return refuse("malformed request")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else { return refuse("not held here") }
        defer { try? handle.close() }
        // A read that fails is refused with its error: an empty chunk in its place would end,
        // after the whole transfer, as "content does not match its sha256".
        do {
            let total = try handle.seekToEnd()
            guard offset <= Int64(total) else { return refuse("offset past the end") }
            try handle.seek(toOffset: UInt64(offset))
            let data = try handle.read(upToCount: length) ?? Data()
            _ = send(peer, .chunk(Chunk(sha256: sha, offset: offset, total: Int64(total), error: nil)), data)
            return data.count
        } catch {
            return refuse("cannot read it here: \(FileChecks.reason(error))")
        }
    }
}
