import Foundation
import Testing
import ThreadlineCore
import Engine
import TestSupport

/// A remote submit uploads the files the items and the movie use, found by their typed fields —
/// never a file whose path merely appears as text (a title reading "/home/me/notes.txt" used to
/// send that file to the coordinator).
@Suite struct SubmissionFilesTests {
    func pipeline(_ dir: String, secret: String) throws -> Pipeline {
        try Generate.clip(dir + "/c.mp4", width: 160, height: 90, seconds: 0.5, tone: 440)
        try """
            version: 1
            name: notes
            output: { path: \(dir)/out.mp4, size: 160x90, fps: 30, video: { preset: ultrafast } }
            clips:
              - title: { text: "\(secret)", duration: 0.5 }
              - video: c.mp4
                text: "\(secret)"
            """.write(toFile: dir + "/p.yaml", atomically: true, encoding: .utf8)
        return try PipelineLoader.load(path: dir + "/p.yaml")
    }

    @Test func textThatLooksLikeAPathIsNotAFile() throws {
        let dir = temporaryDirectory("typed-files")
        let secret = dir + "/notes.txt"
        try "my private notes".write(toFile: secret, atomically: true, encoding: .utf8)
        let p = try pipeline(dir, secret: secret)
        let files = p.files
        #expect(files.contains { $0.role == .source && $0.path == dir + "/c.mp4" && $0.item == 1 })
        #expect(files.contains { $0.role == .font && $0.item == 0 })
        #expect(!files.contains { $0.path == secret }, "\(files)")
        let refs = try ClusterClient.files(of: p)
        #expect(Set(refs.map(\.path)) == Set(files.map(\.path)))
    }

    /// End to end: after the render, the coordinator's store holds the clip but not the file the
    /// title names.
    @Test func remoteSubmitUploadsOnlyTheFilesItemsUse() throws {
        let dir = temporaryDirectory("typed-files-remote")
        let secret = dir + "/notes.txt"
        try "my private notes \(UUID())".write(toFile: secret, atomically: true, encoding: .utf8)
        _ = try pipeline(dir, secret: secret)
        let (procs, ep) = try ClusterTests.loopbackCluster(dir, workers: 1)
        defer { procs.stopAll() }
        let r = try run(coordPath, ["submit", dir + "/p.yaml", "--coordinator", ep], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        let store = dir + "/coord/artifacts/sha256"
        func held(_ path: String) throws -> Bool {
            let sha = try SHA256Hasher.hex(fileAt: path)
            return FileManager.default.fileExists(atPath: "\(store)/\(sha.prefix(2))/\(sha)")
        }
        #expect(try held(dir + "/c.mp4"), "the clip should have been uploaded")
        #expect(try !held(secret), "the file named only by the title's text was uploaded")
    }
}
