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
