import Foundation
import Testing
import ThreadlineCore

/// File errors reach people in the system's words, not as Foundation's error dump.
@Suite struct FileChecksTests {
    @Test func aFoundationFileErrorReadsAsItsPOSIXReason() throws {
        let missing = #expect(throws: (any Error).self) {
            try FileManager.default.copyItem(atPath: "/nonexistent/threadline/a", toPath: NSTemporaryDirectory() + "/threadline-b-\(getpid())")
        }
        #expect(missing.map(FileChecks.reason) == "No such file or directory")

        let file = NSTemporaryDirectory() + "/threadline-file-\(getpid())-\(UUID().uuidString)"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        let underAFile = #expect(throws: (any Error).self) {
            try FileManager.default.createDirectory(atPath: file + "/sub", withIntermediateDirectories: true)
        }
        let reason = underAFile.map(FileChecks.reason) ?? ""
        #expect(["Not a directory", "File exists"].contains(reason), "\(reason)")
    }
}
