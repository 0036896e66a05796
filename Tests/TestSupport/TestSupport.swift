import Foundation
import Synchronization
import ThreadlineCore

/// Runs a program and returns (status, stdout, stderr).
@discardableResult
public func run(_ program: String, _ args: [String], timeout: Double = 600, environment: [String: String]? = nil) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: program.hasPrefix("/") ? program : "/usr/bin/env")
    p.arguments = program.hasPrefix("/") ? args : [program] + args
    if let environment { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let outPipe = Pipe(), errPipe = Pipe()
    p.standardOutput = outPipe; p.standardError = errPipe
    p.standardInput = FileHandle.nullDevice
    // Woken when the program ends: polling every 20 ms made each of the suite's few thousand
    // program runs last at least 20 ms.
    let ended = DispatchSemaphore(value: 0)
    p.terminationHandler = { _ in ended.signal() }
    try p.run()
    // Read both pipes while the process runs so neither fills up.
    let outData = LockedData(), errData = LockedData()
    let group = DispatchGroup()
    for (pipe, sink) in [(outPipe, outData), (errPipe, errData)] {
        group.enter()
        DispatchQueue.global().async { sink.set(pipe.fileHandleForReading.readDataToEndOfFile()); group.leave() }
    }
    if ended.wait(timeout: .now() + timeout) == .timedOut {
        p.terminate()
        if ended.wait(timeout: .now() + 0.2) == .timedOut { kill(p.processIdentifier, SIGKILL) }
    }
    p.waitUntilExit()
    group.wait()
    return (p.terminationStatus, String(decoding: outData.get(), as: UTF8.self), String(decoding: errData.get(), as: UTF8.self))
}

final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    func get() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}

/// Starts `program` in the background with its output thrown away (a `coord submit` a test
/// watches through lineage, kills, or interrupts); the caller waits for it.
/// Under `scripts/test` (THREADLINE_REQUIRE_CLIENTS=1) a tool a test drives that is missing
/// (Chromium, Prometheus, libfaketime: `scripts/test-tools` installs them) fails the test;
/// elsewhere the test is skipped.
public let clientsRequired = ProcessInfo.processInfo.environment["THREADLINE_REQUIRE_CLIENTS"] == "1"

public func startQuietly(_ program: String, _ args: [String]) throws -> Process {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: program)
    p.arguments = args
    p.standardInput = FileHandle.nullDevice
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    return p
}

/// A fresh temporary folder.
public func temporaryDirectory(_ label: String = "threadline") -> String {
    let dir = NSTemporaryDirectory() + "\(label)-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// `body` on each of `inputs` side by side (renders a test compares, commands that each wait out
/// a timeout, on a two-core machine); each one's result, in the order of `inputs`.
public func allAtOnce<Input: Sendable, T: Sendable>(_ inputs: [Input], _ body: @Sendable (Input) throws -> T) -> [Result<T, any Error>] {
    let results = Mutex<[Int: Result<T, any Error>]>([:])
    DispatchQueue.concurrentPerform(iterations: inputs.count) { k in
        let r = Result { try body(inputs[k]) }
        results.withLock { $0[k] = r }
    }
    return results.withLock { r in inputs.indices.map { r[$0]! } }
}

/// `a` and `b` side by side; either's error is thrown, `a`'s first.
public func bothAtOnce<T: Sendable>(_ a: @Sendable () throws -> T, _ b: @Sendable () throws -> T) throws -> (T, T) {
    let r = allAtOnce([true, false]) { first in first ? try a() : try b() }
    return (try r[0].get(), try r[1].get())
}

/// The repository root (found from this file's location).
public let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
    }
    return FileManager.default.currentDirectoryPath
}()

/// ../shared/media next to the repository, when present.
public let sharedMedia: String? = {
    let path = URL(fileURLWithPath: repositoryRoot).deletingLastPathComponent().appendingPathComponent("shared/media").path
    return FileManager.default.fileExists(atPath: path + "/manifest.json") ? path : nil
}()

/// Generates small media with the ffmpeg command line.
public enum Generate {
    /// A clip with a test pattern and (optionally) a continuous sine tone.
    public static func clip(_ path: String, width: Int = 320, height: Int = 240, fps: String = "30", seconds: Double = 1,
                            tone: Double? = 440, rotation: Int? = nil, vfr: Bool = false, codec: String = "libx264") throws {
        var args = ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height):rate=\(fps):duration=\(seconds)"]
        if let tone { args += ["-f", "lavfi", "-i", "sine=frequency=\(tone):sample_rate=44100:duration=\(seconds)"] }
        var vf: [String] = []
        if vfr { vf.append("setpts='PTS+0.4*sin(N)/TB/\(fps)'") }
        if !vf.isEmpty { args += ["-vf", vf.joined(separator: ",")] }
        if vfr { args += ["-vsync", "vfr"] }
        args += ["-c:v", codec, "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
        if tone != nil { args += ["-c:a", "aac", "-b:a", "96k"] }
        args += ["-movflags", "+faststart"]
        try encoded(args, to: path)
        if let rotation { try setDisplayRotation(path, clockwise: rotation) }
    }

    /// The file `ffmpeg args path` writes, encoded once per test run: a suite asks for the same
    /// few hundred clips about 800 times (a fifth of its time), and x264 makes the same bits for
    /// the same arguments. Each caller gets its own copy, to change as it likes. Kept in a folder
    /// of the test process's own, removed when it exits: the key is the arguments only, so no
    /// later run (after an FFmpeg upgrade, say) may reuse a clip.
    static func encoded(_ args: [String], to path: String) throws {
        let cache = generatedFolder
        // The extension chooses the container, so it is part of the name.
        let key = SHA256Hasher.hex(args.joined(separator: "\u{0}")), ext = (path as NSString).pathExtension
        let cached = cache + "/" + key + "." + ext
        let fm = FileManager.default
        if !fm.fileExists(atPath: cached) {
            try fm.createDirectory(atPath: cache, withIntermediateDirectories: true)
            // Written under a name of its own, then renamed: a copy never sees half a file.
            let partial = cache + "/" + key + "-partial-\(getpid())-\(UUID().uuidString)." + ext
            let r = try run("ffmpeg", args + [partial])
            guard r.status == 0 else {
                try? fm.removeItem(atPath: partial)
                throw GenerateError(message: "ffmpeg failed for \(path): \(r.err)")
            }
            guard rename(partial, cached) == 0 else { throw GenerateError(message: "cannot keep the generated \(path) at \(cached): errno \(errno)") }
        }
        try? fm.removeItem(atPath: path)
        try fm.copyItem(atPath: cached, toPath: path)
        // Dated now, as a file just encoded is (local sources are keyed by size and mtime).
        try fm.setAttributes([.modificationDate: Date()], ofItemAtPath: path)
    }

    /// This test process's folder of generated clips, removed when the process exits.
    static let generatedFolder: String = {
        atexit { _ = try? FileManager.default.removeItem(atPath: Generate.generatedFolderPath) }
        return generatedFolderPath
    }()

    private static var generatedFolderPath: String { NSTemporaryDirectory() + "/threadline-generated-\(getpid())" }

    /// An Android motion photo as Google's Motion Photo format 1.0 writes one: the JPEG at `still`
    /// with an XMP packet (APP1, after SOI) whose `Camera:MotionPhoto` is `flag` and whose
    /// container directory gives the movie's length, then the movie at `movie` appended.
    public static func motionPhoto(_ path: String, still: String, movie: String, flag: Int = 1) throws {
        let xmp = Data(motionPhotoXMP(flag: flag, movieLength: try Data(contentsOf: URL(fileURLWithPath: movie)).count).utf8)
        try appendMovie(path, still: still, movie: movie, xmp: xmp)
    }

    /// The XMP packet of a Google motion photo (Camera:MotionPhoto = `flag`, the movie's length).
    public static func motionPhotoXMP(flag: Int, movieLength: Int) -> String {
        #"<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">"#
            + #"<rdf:Description rdf:about="" xmlns:Camera="http://ns.google.com/photos/1.0/camera/" xmlns:Container="http://ns.google.com/photos/1.0/container/" xmlns:Item="http://ns.google.com/photos/1.0/container/item/" Camera:MotionPhoto="\#(flag)" Camera:MotionPhotoVersion="1" Camera:MotionPhotoPresentationTimestampUs="750000"><Container:Directory><rdf:Seq><rdf:li rdf:parseType="Resource"><Container:Item Item:Mime="image/jpeg" Item:Semantic="Primary" Item:Length="0" Item:Padding="0"/></rdf:li><rdf:li rdf:parseType="Resource"><Container:Item Item:Mime="video/mp4" Item:Semantic="MotionPhoto" Item:Length="\#(movieLength)" Item:Padding="0"/></rdf:li></rdf:Seq></Container:Directory></rdf:Description></rdf:RDF></x:xmpmeta>"#
    }

    /// The JPEG at `still` with `xmp` (when given) in an APP1 segment after SOI, then `marker`,
    /// the movie at `movie` and `trailer`: the shapes Android phones write.
    public static func appendMovie(_ path: String, still: String, movie: String, xmp: Data?, marker: Data = Data(), trailer: Data = Data()) throws {
        var body = try Data(contentsOf: URL(fileURLWithPath: still))
        if let xmp {
            let payload = Data("http://ns.adobe.com/xap/1.0/\u{0}".utf8) + xmp
            let length = payload.count + 2
            body = body.prefix(2) + Data([0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)]) + payload + body.dropFirst(2)
        }
        try (body + marker + Data(contentsOf: URL(fileURLWithPath: movie)) + trailer).write(to: URL(fileURLWithPath: path))
    }

    /// Writes a display matrix into the first track header (tkhd) of an MP4/MOV, as phones do
    /// for portrait video; ffmpeg 5.1's command line cannot write one.
    public static func setDisplayRotation(_ path: String, clockwise degrees: Int) throws {
        guard var data = FileManager.default.contents(atPath: path),
              let range = data.range(of: Data("tkhd".utf8)) else { throw GenerateError(message: "no tkhd in \(path)") }
        let version = data[range.upperBound]
        let matrixOffset = range.upperBound + 4 + (version == 1 ? 32 : 20) + 8 + 8
        let one: UInt32 = 0x0001_0000, minusOne: UInt32 = 0xFFFF_0000, w: UInt32 = 0x4000_0000
        let m: [UInt32]
        switch (degrees % 360 + 360) % 360 {
        case 90: m = [0, one, 0, minusOne, 0, 0, 0, 0, w]
        case 180: m = [minusOne, 0, 0, 0, minusOne, 0, 0, 0, w]
        case 270: m = [0, minusOne, 0, one, 0, 0, 0, 0, w]
        default: m = [one, 0, 0, 0, one, 0, 0, 0, w]
        }
        for (i, v) in m.enumerated() {
            for b in 0..<4 { data[matrixOffset + 4 * i + b] = UInt8((v >> (24 - 8 * UInt32(b))) & 0xFF) }
        }
        try data.write(to: URL(fileURLWithPath: path))
    }
}

public struct GenerateError: Error, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// What ffprobe says about a file.
public struct ProbeResult: Sendable {
    public var duration: Double
    public var videoCodec: String?
    public var audioCodec: String?
    public var width: Int
    public var height: Int
    public var frameRate: String?
    public var videoDuration: Double?
    public var audioDuration: Double?
    public var frames: Int?
    public var sampleRate: Int?
    public var channels: Int?
}

public func ffprobe(_ path: String, countFrames: Bool = false) throws -> ProbeResult {
    var args = ["-v", "error", "-print_format", "json", "-show_format", "-show_streams"]
    if countFrames { args.append("-count_frames") }
    let r = try run("ffprobe", args + [path])
    guard r.status == 0, let json = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] else {
        throw GenerateError(message: "ffprobe failed on \(path): \(r.err)")
    }
    let format = json["format"] as? [String: Any] ?? [:]
    let streams = json["streams"] as? [[String: Any]] ?? []
    let v = streams.first { $0["codec_type"] as? String == "video" }
    let a = streams.first { $0["codec_type"] as? String == "audio" }
    func dbl(_ any: Any?) -> Double? { (any as? String).flatMap(Double.init) }
    return ProbeResult(duration: dbl(format["duration"]) ?? 0,
                       videoCodec: v?["codec_name"] as? String, audioCodec: a?["codec_name"] as? String,
                       width: v?["width"] as? Int ?? 0, height: v?["height"] as? Int ?? 0,
                       frameRate: v?["r_frame_rate"] as? String,
                       videoDuration: dbl(v?["duration"]), audioDuration: dbl(a?["duration"]),
                       frames: (v?["nb_read_frames"] as? String).flatMap(Int.init) ?? (v?["nb_frames"] as? String).flatMap(Int.init),
                       sampleRate: (a?["sample_rate"] as? String).flatMap(Int.init), channels: a?["channels"] as? Int)
}

/// SSIM (All) between two images or single frames, computed by ffmpeg.
public func ssim(_ a: String, _ b: String) throws -> Double {
    let r = try run("ffmpeg", ["-v", "info", "-i", a, "-i", b, "-lavfi", "[0:v][1:v]ssim", "-f", "null", "-"])
    guard let range = r.err.range(of: "All:") else { throw GenerateError(message: "no SSIM in: \(r.err.suffix(500))") }
    let rest = r.err[range.upperBound...].trimmingCharacters(in: .whitespaces)
    return Double(rest.prefix { "0123456789.".contains($0) }) ?? 0
}

/// PSNR (average, dB) between two images or videos, computed by ffmpeg.
public func psnr(_ a: String, _ b: String) throws -> Double {
    let r = try run("ffmpeg", ["-v", "info", "-i", a, "-i", b, "-lavfi", "[0:v][1:v]psnr", "-f", "null", "-"])
    guard let range = r.err.range(of: "average:") else { throw GenerateError(message: "no PSNR in: \(r.err.suffix(500))") }
    let rest = r.err[range.upperBound...].trimmingCharacters(in: .whitespaces)
    return Double(rest.prefix { "0123456789.".contains($0) }) ?? 0
}

/// Extracts one frame as a PNG: the one at `time` (seeking), or the first the filter lets through.
public func extractFrame(_ video: String, at time: Double, to png: String, filter: String? = nil, seek: Bool = true,
                         extra: [String] = [], inputOptions: [String] = []) throws {
    var args = ["-v", "error", "-y"] + inputOptions
    if seek { args += ["-ss", String(format: "%.3f", time)] }
    args += ["-i", video] + extra
    if let filter { args += ["-vf", filter] }
    args += ["-frames:v", "1", "-fps_mode", "passthrough", png]
    let r = try run("ffmpeg", args)
    guard r.status == 0, FileManager.default.fileExists(atPath: png) else { throw GenerateError(message: "frame extract failed: \(r.err)") }
}

/// Several frames from one decode, as `extractFrame` takes each (autorotated, the first frame a
/// filter passes): `common` filters the video stream (`stream`, else the first) once, then each
/// branch its own way into its PNG. A decode up to the middle of a 4K HEVC clip costs seconds.
public func extractFrames(_ video: String, stream: Int? = nil, common: String, branches: [(filter: String, png: String)]) throws {
    let labels = branches.indices.map { "[b\($0)]" }
    var graph = (stream.map { "[0:\($0)]" } ?? "[0:v]") + common + ",split=\(branches.count)" + labels.joined()
    var outputs: [String] = []
    for (k, b) in branches.enumerated() {
        graph += ";\(labels[k])\(b.filter)[o\(k)]"
        outputs += ["-map", "[o\(k)]", "-frames:v", "1", "-fps_mode", "passthrough", b.png]
    }
    let r = try run("ffmpeg", ["-v", "error", "-y", "-i", video, "-filter_complex", graph] + outputs)
    guard r.status == 0, branches.allSatisfy({ FileManager.default.fileExists(atPath: $0.png) }) else {
        throw GenerateError(message: "frame extract failed: \(r.err)")
    }
}

/// Decodes a file's audio to mono s16 at 48 kHz.
public func decodeAudio(_ path: String) throws -> [Int16] {
    let out = temporaryDirectory("pcm") + "/a.raw"
    let r = try run("ffmpeg", ["-v", "error", "-y", "-i", path, "-ac", "1", "-ar", "48000", "-f", "s16le", out])
    guard r.status == 0, let data = FileManager.default.contents(atPath: out) else { throw GenerateError(message: "audio decode failed: \(r.err)") }
    return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
}

/// The longest run of near-silent samples (|x| < threshold) in milliseconds, ignoring the
/// first and last `edge` seconds.
public func longestSilenceMs(_ samples: [Int16], threshold: Int16 = 64, edge: Double = 0.05) -> Double {
    let skip = Int(edge * 48000)
    guard samples.count > 2 * skip else { return 0 }
    var best = 0, run = 0
    for s in samples[skip..<(samples.count - skip)] {
        if abs(Int(s)) < Int(threshold) { run += 1; best = max(best, run) } else { run = 0 }
    }
    return Double(best) / 48.0
}

/// Where `swift build` put the executables (next to the test bundle).
public let productsDirectory: String = {
    let candidates = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path,
                      repositoryRoot + "/.build/debug"]
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0 + "/coord") } ?? candidates[1]
}()
public var coordPath: String { productsDirectory + "/coord" }
public var workerPath: String { productsDirectory + "/worker" }

/// Writes a pipeline file.
public func writePipeline(_ path: String, output: String, size: String = "640x360", fps: Int = 30, preset: String = "ultrafast",
                          clips: [String]) throws {
    var y = "version: 1\nname: test\noutput:\n  path: \(output)\n  size: \(size)\n  fps: \(fps)\n  video: { preset: \(preset) }\nclips:\n"
    for c in clips { y += "  - \(c)\n" }
    try y.write(toFile: path, atomically: true, encoding: .utf8)
}

/// The colour tags of a file's first video stream, as ffprobe reads them ("unknown" when untagged).
public struct ColourTags: Sendable, Equatable {
    public var space: String, primaries: String, transfer: String, range: String, pixelFormat: String, height: Int
    /// BT.709 limited range in every tag: what the movie must say.
    public var isBT709Limited: Bool { space == "bt709" && primaries == "bt709" && transfer == "bt709" && range == "tv" }
}

public func colourTags(_ path: String) throws -> ColourTags {
    let r = try run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-print_format", "json", "-show_entries",
                                "stream=color_space,color_primaries,color_transfer,color_range,pix_fmt,height", path])
    guard r.status == 0, let json = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any],
          let s = (json["streams"] as? [[String: Any]])?.first else { throw GenerateError(message: "ffprobe failed on \(path): \(r.err)") }
    func v(_ k: String) -> String { s[k] as? String ?? "unknown" }
    return ColourTags(space: v("color_space"), primaries: v("color_primaries"), transfer: v("color_transfer"), range: v("color_range"),
                      pixelFormat: v("pix_fmt"), height: s["height"] as? Int ?? 0)
}

/// The scale filter that turns a file's Y'CbCr into RGB as a player does: by its own matrix and
/// range tags, and where untagged, BT.709 for HD (≥ 720 lines) and BT.601 below — not ffmpeg's
/// default (always BT.601), which hides wrong colours.
public func playerRGBFilter(_ path: String) throws -> String {
    let t = try colourTags(path)
    let matrix: String
    switch t.space {
    case "bt709": matrix = "bt709"
    case "bt470bg", "smpte170m": matrix = "bt601"
    case "bt2020nc", "bt2020c": matrix = "bt2020"
    case "fcc": matrix = "fcc"
    case "smpte240m": matrix = "smpte240m"
    default: matrix = t.height >= 720 ? "bt709" : "bt601"
    }
    let full = t.range == "pc" || (t.range == "unknown" && t.pixelFormat.hasPrefix("yuvj"))
    return "scale=in_color_matrix=\(matrix):in_range=\(full ? "pc" : "tv"),format=rgb24"
}

/// Frame `index` of a video as RGB24 bytes, decoded as a player does.
public func playerFrame(_ video: String, frame index: Int) throws -> (width: Int, height: Int, rgb: [UInt8]) {
    let probe = try ffprobe(video)
    let w = probe.width, h = probe.height
    let raw = temporaryDirectory("rgb") + "/f.rgb"
    let r = try run("ffmpeg", ["-v", "error", "-y", "-i", video, "-vf", "select='eq(n\\,\(index))'," + (try playerRGBFilter(video)),
                               "-frames:v", "1", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", raw])
    guard r.status == 0, let data = FileManager.default.contents(atPath: raw), data.count == w * h * 3 else {
        throw GenerateError(message: "cannot read frame \(index) of \(video): \(r.err)")
    }
    return (w, h, [UInt8](data))
}

/// Mean R, G, B (0…255) of frame `index` of a video, decoded as a player does, over columns
/// [x0, x1) and rows [y0, y1) as fractions of the picture.
public func frameRGBMeans(_ video: String, frame index: Int, x0: Double = 0, x1: Double = 1, y0: Double = 0, y1: Double = 1) throws -> (r: Double, g: Double, b: Double) {
    rgbMeans(try playerFrame(video, frame: index), x0: x0, x1: x1, y0: y0, y1: y1)
}

/// Mean R, G, B (0…255) of a frame `playerFrame` decoded, over columns [x0, x1) and rows
/// [y0, y1) as fractions of the picture (for many regions of one frame, decoded once).
public func rgbMeans(_ frame: (width: Int, height: Int, rgb: [UInt8]), x0: Double = 0, x1: Double = 1, y0: Double = 0, y1: Double = 1) -> (r: Double, g: Double, b: Double) {
    let (w, h, data) = frame
    var sum = (0.0, 0.0, 0.0), n = 0.0
    let c0 = Int(Double(w) * x0), c1 = Int(Double(w) * x1), r0 = Int(Double(h) * y0), r1 = Int(Double(h) * y1)
    for y in stride(from: r0, to: r1, by: 2) {
        for x in stride(from: c0, to: c1, by: 2) {
            let o = (y * w + x) * 3
            sum.0 += Double(data[o]); sum.1 += Double(data[o + 1]); sum.2 += Double(data[o + 2]); n += 1
        }
    }
    return (sum.0 / n, sum.1 / n, sum.2 / n)
}

/// Mean saturation and luma of a video's frames (ffmpeg signalstats on Y'CbCr, 8-bit scale).
public func saturationAndLuma(_ video: String, filter: String? = nil) throws -> (saturation: Double, luma: Double) {
    let vf = (filter.map { $0 + "," } ?? "") + "format=yuv420p,signalstats,metadata=print:file=-"
    let r = try run("ffmpeg", ["-v", "error", "-i", video, "-vf", vf, "-f", "null", "-"])
    func mean(_ key: String) -> Double? {
        let v = r.out.split(separator: "\n").compactMap { $0.components(separatedBy: "\(key)=").dropFirst().first.flatMap(Double.init) }
        return v.isEmpty ? nil : v.reduce(0, +) / Double(v.count)
    }
    guard let s = mean("lavfi.signalstats.SATAVG"), let y = mean("lavfi.signalstats.YAVG") else {
        throw GenerateError(message: "no signalstats for \(video): \(r.err)")
    }
    return (s, y)
}

/// Average saturation of a video's frames, from ffmpeg's signalstats (0 for black and white).
public func averageSaturation(_ video: String) throws -> Double {
    let r = try run("ffmpeg", ["-v", "error", "-i", video, "-vf", "signalstats,metadata=print:key=lavfi.signalstats.SATAVG:file=-", "-f", "null", "-"])
    let values = r.out.split(separator: "\n").compactMap { $0.components(separatedBy: "SATAVG=").last.flatMap(Double.init) }
    guard !values.isEmpty else { throw GenerateError(message: "no signalstats: \(r.err)") }
    return values.reduce(0, +) / Double(values.count)
}

/// The dominant frequency of a pure tone, from its zero-crossing rate (Hz).
public func toneFrequency(_ samples: ArraySlice<Int16>) -> Double {
    var crossings = 0
    var previous = samples.first ?? 0
    for s in samples.dropFirst() {
        if (previous < 0) != (s < 0) { crossings += 1 }
        previous = s
    }
    return Double(crossings) / 2 / (Double(samples.count) / 48000)
}
