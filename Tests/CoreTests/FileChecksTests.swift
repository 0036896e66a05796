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

    /// A write to a full disk is told from other failures by its error, not its words: a
    /// worker's store then gives up what it may before the retry. (/dev/full answers every
    /// write with ENOSPC.)
    @Test func aFullDiskIsToldByItsError() throws {
        let full = #expect(throws: (any Error).self) {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/full"))
            defer { try? handle.close() }
            try handle.write(contentsOf: Data(count: 4096))
        }
        #expect(full.map(FileChecks.isNoSpace) == true, "\(String(describing: full))")
        #expect(full.map(FileChecks.reason) == "No space left on device")
        #expect(full.map { MediaError(.fetch, .retryable, file: "a.mov", "cannot write", writing: $0).noSpace } == true)
        let missing = #expect(throws: (any Error).self) {
            try Data("x".utf8).write(to: URL(fileURLWithPath: "/nonexistent/threadline/a"))
        }
        #expect(missing.map(FileChecks.isNoSpace) == false)
        #expect(missing.map { MediaError(.fetch, .retryable, file: "a.mov", "cannot write", writing: $0).noSpace } == false)
    }

    /// A state folder, a store or a movie's folder that cannot be made says which and why.
    @Test func aFolderThatCannotBeMadeSaysWhichAndWhy() throws {
        let base = NSTemporaryDirectory() + "/threadline-folders-\(getpid())-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: base) }
        try FileChecks.makeFolder(base + "/a/b")
        try FileChecks.makeFolder(base + "/a/b")   // there already: nothing to do
        #expect(FileManager.default.fileExists(atPath: base + "/a/b"))
        try Data("x".utf8).write(to: URL(fileURLWithPath: base + "/file"))
        #expect(throws: FileChecks.FolderError.self) { try FileChecks.makeFolder(base + "/file") }
        do { try FileChecks.makeFolder(base + "/file") } catch { #expect(error.description == "\(base)/file is a file, not a folder") }
        do { try FileChecks.makeFolder("/proc/threadline-nope/x") } catch {
            #expect(error.description == "cannot make the folder /proc/threadline-nope/x: No such file or directory")
        }
        #expect(throws: FileChecks.FolderError.self) { try FileChecks.makeFolder("/proc/threadline-nope/x") }
    }

    /// Sizes as people write them on a command line (`worker --store-max 20G`).
    @Test func sizesReadAsPeopleWriteThem() {
        #expect(ByteSize.parse("0") == 0)
        #expect(ByteSize.parse("1500") == 1500)
        #expect(ByteSize.parse("20G") == 20 << 30)
        #expect(ByteSize.parse("20GiB") == 20 << 30 && ByteSize.parse("20gb") == 20 << 30)
        #expect(ByteSize.parse("1.5M") == 3 << 19)
        #expect(ByteSize.parse("2T") == 2 << 40 && ByteSize.parse("512k") == 512 << 10)
        #expect(ByteSize.text(16 << 30) == "16.0 GiB" && ByteSize.text(1536) == "1.5 KiB" && ByteSize.text(1023) == "1023 bytes")
        for bad in ["", "G", "-1G", "20X", "1e3", "nan", "twenty", "1 G B", "99999999999T"] { #expect(ByteSize.parse(bad) == nil, "\(bad)") }
    }
}

/// What `coord serve` writes into its state folder's lock reads back (where a refused local
/// submit is told to submit instead: `ClusterTests.aListenersAddressIsWhereClientsReachIt`).
@Suite struct ServeHolderTests {
    @Test func theLockLineReadsBack() {
        let keyed = ServeHolder(pid: 41, host: "render-1", endpoint: "tcp://0.0.0.0:7400", curve: true)
        #expect(keyed.line == "coord serve, pid 41 on render-1, bound to tcp://0.0.0.0:7400, with CURVE keys")
        #expect(ServeHolder(line: keyed.line) == keyed)
        let plain = ServeHolder(pid: 7, host: "vm", endpoint: "tcp://10.0.0.5:7401", curve: false)
        #expect(ServeHolder(line: plain.line) == plain)
        // Another program's line: nothing to read.
        #expect(ServeHolder(line: "coord gc, pid 12") == nil)
        #expect(ServeHolder(line: "") == nil)
    }
}
