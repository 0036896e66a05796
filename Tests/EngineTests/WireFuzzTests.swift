import Foundation
import Testing
@testable import Engine

/// The wire decoder on the fuzzer's seeds and on every input kept from fuzzing.
@Suite struct WireFuzzTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/wire")

    static func files(_ sub: String) -> [URL] {
        let dir = root.appendingPathComponent(sub)
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
            .map { dir.appendingPathComponent($0) }
    }

    @Test func everySeedDecodesAndSurvivesReEncoding() throws {
        let seeds = Self.files("seeds")
        #expect(seeds.count == WireMessage.examples.count, "regenerate with: swift run fuzz-wire --write-seeds Tests/Fuzz/wire/seeds")
        for url in seeds {
            let e = try #require(Envelope.decode(try Data(contentsOf: url)), "\(url.lastPathComponent) no longer decodes")
            #expect(Envelope.decode(e.encoded()) != nil)
        }
    }

    @Test func regressionInputsDecodeOrAreRejected() throws {
        for url in Self.files("regressions") {
            if let e = Envelope.decode(try Data(contentsOf: url)) { #expect(Envelope.decode(e.encoded()) != nil, "\(url.lastPathComponent)") }
        }
    }
}
