import Foundation
import Testing
@testable import Media
import ThreadlineCore
import TestSupport

/// A batch's projects share clips: each is opened once while it is unchanged, and again as soon
/// as its status (`FileStatus`: size, times, inode) says it changed.
@Suite struct ProbedFactsTests {
    @Test func aClipIsOpenedOnceWhileUnchangedAndAgainOnceItChanges() throws {
        let dir = temporaryDirectory("probed-facts")
        let clip = dir + "/c.mp4"
        try Generate.clip(clip, width: 160, height: 90, seconds: 0.5, tone: 440)
        let probed = ProbedFacts()
        let first = try probed.facts(path: clip)
        for _ in 0..<5 { #expect(try probed.facts(path: clip) == first) }
        #expect(probed.opened == 1)

        // Replaced by a longer clip (given a later time, as an editor saving over it would).
        try Generate.clip(dir + "/longer.mp4", width: 160, height: 90, seconds: 1.5, tone: 440)
        try FileManager.default.removeItem(atPath: clip)
        try FileManager.default.moveItem(atPath: dir + "/longer.mp4", toPath: clip)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(60)], ofItemAtPath: clip)
        let replaced = try probed.facts(path: clip)
        #expect(probed.opened == 2)
        #expect(abs(replaced.duration - 1.5) < 0.1 && abs(first.duration - 0.5) < 0.1, "\(first.duration) then \(replaced.duration)")

        // Touched only (the same size, a new time): opened again, to be sure.
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(120)], ofItemAtPath: clip)
        _ = try probed.facts(path: clip)
        #expect(probed.opened == 3)

        // A file that is no media fails every time it is asked for: nothing kept of it.
        try Data("not a movie".utf8).write(to: URL(fileURLWithPath: dir + "/bad.mp4"))
        #expect(throws: MediaError.self) { try probed.facts(path: dir + "/bad.mp4") }
        #expect(throws: MediaError.self) { try probed.facts(path: dir + "/bad.mp4") }
        #expect(probed.opened == 5)
    }
}
