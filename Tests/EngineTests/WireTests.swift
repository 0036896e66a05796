import Foundation
import Testing
import ThreadlineCore
import Media
import Wire
@testable import Engine
@testable import Farm

/// The farm protocol (Sources/Wire/Schema/wire.proto): every message survives a round trip, the
/// render documents it carries are pinned, and a worker rewrites file fields only.
@Suite struct WireTests {
    static let pinned = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/wire/documents")

    /// A pipeline using every file-bearing and optional field the documents carry.
    static var richPipeline: Pipeline {
        var output = OutputProfile(path: "/out/movie.mp4")
        output.watermark = Watermark(image: "/in/logo.png", sha256: String(repeating: "1", count: 64))
        output.soundtrack = Soundtrack(source: "/in/music.m4a", sha256: String(repeating: "2", count: 64))
        var edits = Edits(rotate: 90, flip: .horizontal, crop: CropRect(x: 0.1, y: 0.1, width: 0.8, height: 0.8), volume: 0.5,
                          look: .warm, adjust: Adjust(contrast: 1.1), fit: .crop, speed: 2)
        edits.text = TextOverlay(value: "/in/clip.mov", position: .bottomLeft, start: 0.5, end: 1.5, font: "/in/font.ttf")
        edits.stickers = [Sticker(image: "/in/star.png", sha256: String(repeating: "3", count: 64), x: 0.25, y: 0.25, size: 0.1, rotate: 15,
                                  start: 0.5, end: 1.5)]
        let clip = Item(kind: .video(source: SourceRef("/in/clip.mov"), trim: Trim(start: 0.5, end: 2)), edits: edits)
        let title = Item(kind: .title(Title(text: "/in/clip.mov", font: "/in/title.ttf")))
        var p = Pipeline(name: "wire", output: output, items: [title, clip])
        p.transition = Transition(kind: .fade, duration: 0.5)
        return p
    }

    static var richSegment: SegmentSpec {
        var s = Planner.segmentSpec(richPipeline, index: 1, sourcePath: "/in/clip.mov", frameCount: 45)
        s.keyframes = [0, 30]
        s.transparent = true
        return s
    }

    /// What a message looks like after the protocol: encoded, decoded, encoded again.
    static func roundTrip(_ m: WireMessage) throws -> WireMessage {
        let frame = Envelope(m).encoded()
        let back = try #require(Envelope.decode(frame), "\(m) does not decode: \(Envelope.refusal(frame).map(String.init(describing:)) ?? "")")
        #expect(Envelope(back.message).encoded() == frame, "\(m) changes on a round trip")
        return back.message
    }

    @Test func everyMessageSurvivesARoundTrip() throws {
        for m in WireMessage.examples { _ = try Self.roundTrip(m) }
        // The rich one, field by field where the engine's types are comparable.
        var a = Assignment(lease: "7-1", task: .segment(Self.richSegment), key: "k", reuse: nil, checkOnly: nil)
        a.source = ArtifactRef(sha256: String(repeating: "a", count: 64), path: "/store/a", size: 5)
        a.origin = "/in/clip.mov"
        a.inputs = [a.source!]
        guard case .assign(let b) = try Self.roundTrip(.assign(a)), case .segment(let spec) = b.task else { Issue.record("not an assignment"); return }
        #expect(spec == Self.richSegment)
        #expect(b.source == a.source && b.origin == a.origin && b.inputs == a.inputs && b.key == "k" && b.reuse == nil && b.checkOnly == nil)
        guard case .submit(let s) = try Self.roundTrip(.submit(Submission(pipeline: Self.richPipeline, files: [], submitter: "me"))) else {
            Issue.record("not a submission"); return
        }
        #expect(s.pipeline == Self.richPipeline)
        var r = TaskResult(lease: "7-2", error: WireError(stage: .transform, errorClass: .retryable, file: "clip.mov", message: "x"),
                           artifact: nil, facts: MediaFacts(duration: 2.5, width: 1920, height: 1080, hasVideo: true, hasAudio: false,
                                                            videoCodec: "h264", rotation: 270, mirrored: true, frameRate: 29.97, container: "mov"),
                           segment: nil, startedAt: 1.25, finishedAt: 2.5, cpuSeconds: 0.75, maxRSS: 1 << 30)
        r.facts?.videoStream = 0
        r.facts?.isStill = true
        r.facts?.undecodableAudio = "an unknown codec"
        r.facts?.transparent = true
        r.cached = false
        guard case .result(let back) = try Self.roundTrip(.result(r)) else { Issue.record("not a result"); return }
        #expect(back.facts == r.facts && back.cached == false && back.error?.stage == .transform && back.error?.errorClass == .retryable)
        #expect(back.startedAt == 1.25 && back.maxRSS == 1 << 30 && back.artifact == nil && back.segment == nil)
    }

    /// The render documents are the plan's JSON: any change to it (a renamed or retyped field in
    /// ThreadlineCore) fails here instead of silently changing the protocol.
    @Test func renderDocumentsArePinned() throws {
        let transition = TransitionSpec(kind: .fade, frames: 15, samples: 24000, fromFrame: 30, fromSample: 48000, profile: Self.richPipeline.output)
        let documents: [(String, Data)] = [
            ("segment", DocumentSchema.document(Self.richSegment).json),
            ("transition", DocumentSchema.document(transition).json),
            ("profile", DocumentSchema.document(Self.richPipeline.output).json),
            ("pipeline", DocumentSchema.document(Self.richPipeline).json),
        ]
        for (name, json) in documents {
            let url = Self.pinned.appendingPathComponent("\(name).v\(DocumentSchema.version).json")
            if ProcessInfo.processInfo.environment["THREADLINE_PIN_DOCUMENTS"] == "1" { try json.write(to: url) }
            let pinned = try #require(try? Data(contentsOf: url), "no pinned \(url.lastPathComponent): run the test with THREADLINE_PIN_DOCUMENTS=1")
            #expect(json == pinned, """
                the \(name) document changed shape: bump DocumentSchema.version (Sources/Farm/WireCoding.swift), then pin it anew with THREADLINE_PIN_DOCUMENTS=1
                """)
        }
    }

    /// A document of another schema is refused, not guessed at.
    @Test func aDocumentOfAnotherSchemaIsRefused() {
        var d = DocumentSchema.document(Self.richSegment)
        d.schema = DocumentSchema.version + 1
        var task = Threadline_Wire_Task()
        task.segment = d
        var a = Threadline_Wire_Assignment()
        a.lease = "1-1"
        a.task = task
        let frame = Frame.encode(.assign(a))
        #expect(Envelope.decode(frame) == nil)
        #expect(Envelope.refusal(frame) == .document("SegmentSpec of schema \(DocumentSchema.version + 1), this peer reads \(DocumentSchema.version)"))
        // Without the end mark the same bytes are a frame cut short.
        #expect(Envelope.refusal(Envelope(.leaving).encoded().dropLast(6)) == .truncated)
    }

    /// The worker puts its own copies' paths into the file fields — and nowhere else: a title or
    /// caption reading exactly like an input's path stays as written.
    @Test func aWorkerRewritesFileFieldsOnly() throws {
        var a = Assignment(lease: "1-1", task: .segment(Self.richSegment))
        a.source = ArtifactRef(sha256: "s", path: "/in/clip.mov", size: 1)
        let local = ["/in/clip.mov": "/w/src", "/in/star.png": "/w/star", "/in/font.ttf": "/w/font", "/in/logo.png": "/w/logo"]
        let b = WorkerRuntime.rewrite(a, local)
        guard case .segment(let s) = b.task else { Issue.record("not a segment"); return }
        #expect(s.sourcePath == "/w/src")
        #expect(s.edits.stickers.first?.image == "/w/star")
        #expect(s.edits.text?.font == "/w/font")
        #expect(s.profile.watermark?.image == "/w/logo")
        #expect(b.source?.path == "/w/src")
        #expect(s.edits.text?.value == "/in/clip.mov", "the caption is text, not a file")
        #expect(s.sourceName == Self.richSegment.sourceName)

        let t = Planner.segmentSpec(Self.richPipeline, index: 0, sourcePath: "", frameCount: 60)
        guard case .segment(let tb) = WorkerRuntime.rewrite(Assignment(lease: "1-2", task: .segment(t)), ["/in/title.ttf": "/w/title", "/in/clip.mov": "/w/src"]).task else {
            Issue.record("not a segment"); return
        }
        #expect(tb.title?.font == "/w/title")
        #expect(tb.title?.text == "/in/clip.mov", "the title is text, not a file")

        let concat = Assignment(lease: "1-3", task: .concat([ConcatInput(path: "/c/seg0", frameCount: 30, sampleCount: 48000, label: "/c/seg0")],
                                                            profile: Self.richPipeline.output))
        guard case .concat(let inputs, let profile) = WorkerRuntime.rewrite(concat, ["/c/seg0": "/w/seg0", "/in/music.m4a": "/w/music"]).task else {
            Issue.record("not a concat"); return
        }
        #expect(inputs.first?.path == "/w/seg0" && inputs.first?.label == "/c/seg0")
        #expect(profile.soundtrack?.source == "/w/music")
    }

    /// Binary frames are what make the hot path cheap: a segment's result is a fraction of its JSON size.
    @Test func framesAreCompact() throws {
        let r = TaskResult(lease: "12-3456", error: nil, artifact: ArtifactRef(sha256: String(repeating: "a", count: 64), path: "/store/ab/cd", size: 123_456),
                           facts: nil, segment: SegmentReport(), startedAt: 1_795_000_000.25, finishedAt: 1_795_000_001.5, cpuSeconds: 1.25, maxRSS: 300 << 20)
        let frame = Envelope(.result(r)).encoded()
        let json = try JSONEncoder().encode(r)
        #expect(frame.count * 2 < json.count, "\(frame.count) bytes against \(json.count) as JSON")
    }
}
