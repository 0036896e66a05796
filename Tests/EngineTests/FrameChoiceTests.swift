import Foundation
import Testing
import ThreadlineCore
import TestSupport

/// Each output slot shows exactly the frame ffmpeg's fps filter would: the last source frame whose
/// time rounds to the slot (ties to the later slot) — also where the renderer skips decoding frames
/// no slot shows (60 fps at 30, frames before the trim), and where a source frame lies exactly
/// halfway between two slots.
@Suite struct FrameChoiceTests {
    /// Per output frame, the PSNR (dB) against the source frames `first`, `first + step`, …
    static func psnrs(_ out: String, _ source: String, first: Int, step: Int) throws -> [Double] {
        let stats = temporaryDirectory("psnr") + "/psnr.txt"
        let r = try run("ffmpeg", ["-v", "error", "-i", out, "-i", source, "-lavfi",
                                   "[1:v]select='gte(n\\,\(first))*not(mod(n-\(first)\\,\(step)))',setpts=N/30/TB[r];[0:v][r]psnr=stats_file=\(stats):eof_action=endall",
                                   "-f", "null", "-"])
        #expect(r.status == 0, "\(r.err)")
        let text = try String(contentsOfFile: stats, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("psnr_avg:") }.flatMap { Double($0.dropFirst(9)) ?? ($0.hasSuffix("inf") ? 99 : nil) }
        }
    }

    @Test func sixtyFPSSourcesShowExactlyTheRightFrames() throws {
        let d = temporaryDirectory("frames")
        // x264 with B-frames (most of the odd frames are non-reference, so they can be skipped).
        let g = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=60:duration=5", "-f", "lavfi", "-i", "sine=duration=5",
                                   "-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-bf", "3", "-pix_fmt", "yuv420p", "-c:a", "aac", d + "/c60.mp4"])
        #expect(g.status == 0, "\(g.err)")
        // Plain: slot k is at source frame 30 + 2k exactly. At speed 1.5 slot k lies at frame 66 + 3k
        // and the window rounding to it holds frames 66 + 3k and 67 + 3k: the later one shows.
        for (name, edit, first, step, frames) in [("plain", "trim: { start: 0.5, end: 3.5 }", 30, 2, 90),
                                                  ("faster", "trim: { start: 1.1, end: 4.1 }\n    speed: 1.5", 67, 3, 60)] {
            try "version: 1\nname: \(name)\noutput: { path: \(name).mp4, size: 1280x720, fps: 30, video: { preset: ultrafast, crf: 8 } }\nclips:\n  - video: c60.mp4\n    \(edit)\n"
                .write(toFile: d + "/\(name).yaml", atomically: true, encoding: .utf8)
            let r = try run(coordPath, ["submit", d + "/\(name).yaml", "--state", d + "/state"], timeout: 120)
            #expect(r.status == 0, "\(r.err)")
            let right = try Self.psnrs(d + "/\(name).mp4", d + "/c60.mp4", first: first, step: step)
            #expect(right.count == frames, "\(name): \(right.count) frames compared")
            // The encoding loses little at crf 8 (above 45 dB); a neighbouring frame of this moving
            // pattern scores below 32 dB, so any wrong choice shows.
            #expect(right.min() ?? 0 > 45, "\(name): worst frame \(right.min() ?? 0) dB; frames under 45 dB: \(right.enumerated().filter { $0.element <= 45 }.map(\.offset))")
            let neighbour = try Self.psnrs(d + "/\(name).mp4", d + "/c60.mp4", first: first + 1, step: step)
            #expect(neighbour.max() ?? 99 < 35, "\(name): the neighbouring frames score \(neighbour.max() ?? 99) dB")
        }
    }
}
