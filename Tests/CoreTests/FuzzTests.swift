import Foundation
import Testing
@testable import ThreadlineCore

/// Seeded mutation fuzzing of the pipeline loader: any input must give a Pipeline or a
/// PipelineError, never a crash or another error type.
@Suite struct FuzzTests {
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let seeds: [String] = {
        var out: [String] = []
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for name in ["demo", "transitions", "photos", "motion", "soundtrack-and-watermark", "looks-and-titles"] {
            if let s = try? String(contentsOf: root.appendingPathComponent("pipelines/\(name).yaml"), encoding: .utf8) { out.append(s) }
        }
        return out
    }()

    static let tokens = ["{", "}", "[", "]", ":", "- ", "\n", "  ", "\"", "'", "#", "&a", "*a", "!!int ", "-1", "0", "1e309", "nan",
                         "video:", "title:", "photo:", "live_photo:", "trim:", "transition:", "ken_burns:", "center: [", "speed:",
                         "loop:", "fit: blur", "max_duration:", "soundtrack:", "watermark:", "text:", "\u{0}", "💥", "9999999999999999999"]

    func mutate(_ s: String, _ rng: inout SplitMix) -> String {
        var chars = Array(s)
        for _ in 0..<Int.random(in: 1...8, using: &rng) {
            guard !chars.isEmpty else { break }
            let at = Int.random(in: 0..<chars.count, using: &rng)
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: chars.remove(at: at)
            case 1: chars.insert(contentsOf: Self.tokens.randomElement(using: &rng)!, at: at)
            case 2: let end = min(chars.count, at + Int.random(in: 1...40, using: &rng)); chars.removeSubrange(at..<end)
            default: chars[at] = Character(UnicodeScalar(UInt8.random(in: 32...126, using: &rng)))
            }
        }
        return String(chars)
    }

    @Test func theLoaderNeverCrashesOnMutatedPipelines() throws {
        #expect(!Self.seeds.isEmpty)
        var rng = SplitMix(state: 20261121)
        let iterations = Int(ProcessInfo.processInfo.environment["THREADLINE_FUZZ_RUNS"] ?? "") ?? 20_000
        var parsed = 0, rejected = 0
        for _ in 0..<iterations {
            let input = mutate(Self.seeds.randomElement(using: &rng)!, &rng)
            do {
                _ = try PipelineLoader.parse(text: input, file: "fuzz.yaml", baseDirectory: "/nonexistent", checkFiles: false)
                parsed += 1
            } catch let e as PipelineError {
                rejected += 1
                // A located error points inside the input (a column one past a line's end is its end).
                if let at = e.location {
                    let lines = input.split(separator: "\n", omittingEmptySubsequences: false)
                    #expect(at.file == "fuzz.yaml" && at.line >= 1 && at.line <= lines.count + 1 && at.column >= 1
                            && (at.line > lines.count || at.column <= lines[at.line - 1].count + 2),
                            "\(e) points outside the input:\n\(input)")
                }
            } catch {
                Issue.record("a non-pipeline error escaped for input:\n\(input)\n\(error)")
                return
            }
        }
        print("fuzz: \(iterations) mutated pipelines, \(parsed) parsed, \(rejected) rejected with a located error")
        // The mutations reach both outcomes: a loader that refused or accepted everything fails here.
        #expect(parsed > iterations / 100 && rejected > iterations / 100, "\(parsed) parsed, \(rejected) rejected")
    }
}

extension FuzzTests {
    /// Inputs kept from fuzzing (scripts/fuzz writes what it finds into Tests/Fuzz/pipeline/regressions).
    static let regressions: [String] = {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/pipeline/regressions")
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).filter { !$0.hasPrefix(".") }.sorted().map { dir.path + "/" + $0 }
    }()

    @Test func regressionInputsGiveAPipelineOrALocatedError() throws {
        #expect(Self.regressions.count >= 4)
        for path in Self.regressions {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
            do {
                _ = try PipelineLoader.parse(text: text, file: "p.yaml", baseDirectory: "/", checkFiles: false)
                #expect(!path.contains("overflow"), "\(path) should be refused")
            } catch is PipelineError {
            } catch {
                Issue.record("\(path): a non-pipeline error escaped: \(error)")
            }
        }
    }
}
