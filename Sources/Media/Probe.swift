import Foundation
import ThreadlineCore
internal import CFFmpeg

public enum Probe {
    /// Opens `path` and reports what planning needs. Throws a permanent `MediaError` for input
    /// that is not media, or has no decodable video.
    public static func facts(path: String, name: String? = nil, stage: StageKind = .fetch) throws -> MediaFacts {
        if Heif.isHeif(path) { return try Heif.facts(path, name: name ?? (path as NSString).lastPathComponent) }
        let input = try InputFile(path: path, name: name ?? (path as NSString).lastPathComponent, stage: stage)
        var facts = MediaFacts(duration: input.duration, width: 0, height: 0, hasVideo: false, hasAudio: input.audioIndex != nil,
                               container: String(cString: input.ctx.pointee.iformat.pointee.name))
        facts.videoStream = input.videoIndex.map(Int.init)
        facts.audioStream = input.audioIndex.map(Int.init)
        if let v = input.videoIndex {
            let st = input.stream(v).pointee
            let par = st.codecpar.pointee
            facts.hasVideo = true
            facts.width = Int(par.width); facts.height = Int(par.height)
            facts.videoCodec = String(cString: avcodec_get_name(par.codec_id))
            let r = st.avg_frame_rate, rate = av_q2d(r)
            // A rate no camera records (past a million a second) is a broken header: unknown.
            if r.num > 0 && r.den > 0, rate <= MediaFacts.fastestFrameRate { facts.frameRate = rate }
            if SourceColour.hasAlpha(par.format) { facts.transparent = true }
            // Interlaced by the stream's field order; DV stores fields whatever the container says
            // (its frames carry the flag, its streams no order). The deinterlacer passes frames
            // flagged progressive untouched.
            if [AV_FIELD_TT, AV_FIELD_BB, AV_FIELD_TB, AV_FIELD_BT].contains(par.field_order) || par.codec_id == AV_CODEC_ID_DVVIDEO {
                facts.interlaced = true
            }
            if let m = input.displayMatrix {
                let o = Orientation(displayMatrix: m)
                facts.rotation = o.clockwise; facts.mirrored = o.mirrored
            }
        }
        if let a = input.audioIndex {
            facts.audioCodec = String(cString: avcodec_get_name(input.stream(a).pointee.codecpar.pointee.codec_id))
        }
        facts.undecodableAudio = input.undecodableAudio
        let format = facts.container
        facts.isStill = format.hasPrefix("image2") || format.hasSuffix("_pipe")
            || (input.videoIndex.map { input.stream($0).pointee.nb_frames == 1 } ?? false && facts.duration <= 0.05)
        guard facts.duration > 0 || !facts.hasVideo || facts.isStill else {
            throw MediaError(stage, .permanent, file: input.name, "the file reports no duration")
        }
        // Past the bounds a coordinator takes facts within (tens of thousands of years, say): the
        // file's header is broken, and every worker would say the same.
        if let why = facts.impossible {
            throw MediaError(stage, .permanent, file: input.name, "the file's header is broken: it reports \(why)")
        }
        return facts
    }
}

/// Facts of local files already probed, each kept with the file's status (`FileStatus`, as the
/// submitter's remembered hashes are) and used again only while it is the same: a batch whose
/// projects share clips (one library, many movies) opens each clip once. Before, a remote submit of 200 projects
/// made of 10 clips opened them 400 times: more than half of its own CPU time.
/// A file that cannot be probed is not kept (each project names it in its own error).
public final class ProbedFacts {
    private var known: [String: (status: FileStatus, facts: MediaFacts)] = [:]
    /// How many files were opened (the others came from what was kept).
    public private(set) var opened = 0

    public init() {}

    /// `Probe.facts` of `path`, or what it said before when the file is unchanged.
    public func facts(path: String, name: String? = nil) throws -> MediaFacts {
        let status = FileStatus.of(path)
        if let status, let k = known[path], k.status == status { return k.facts }
        opened += 1
        let facts = try Probe.facts(path: path, name: name)
        if let status { known[path] = (status, facts) }
        return facts
    }
}

/// How a display matrix turns the stored picture upright, decided the way the ffmpeg command
/// line's autorotation does, so outputs match what users see elsewhere.
struct Orientation: Equatable {
    /// Filters that make the stored picture upright, in order.
    var filters: [String]
    var clockwise: Int
    var mirrored: Bool

    /// From an EXIF orientation value (1…8).
    init(exif: Int) {
        switch exif {
        case 2: (filters, clockwise, mirrored) = (["hflip"], 0, true)
        case 3: (filters, clockwise, mirrored) = (["hflip", "vflip"], 180, false)
        case 4: (filters, clockwise, mirrored) = (["vflip"], 180, true)
        case 5: (filters, clockwise, mirrored) = (["transpose=cclock_flip"], 270, true)
        case 6: (filters, clockwise, mirrored) = (["transpose=clock"], 90, false)
        case 7: (filters, clockwise, mirrored) = (["transpose=clock_flip"], 90, true)
        case 8: (filters, clockwise, mirrored) = (["transpose=cclock"], 270, false)
        default: (filters, clockwise, mirrored) = ([], 0, false)
        }
    }

    init(displayMatrix m: [Int32]) {
        var theta = -(av_display_rotation_get(m) .rounded())
        if theta.isNaN { theta = 0 }
        theta -= 360 * (theta / 360 + 0.9 / 360).rounded(.down)
        // Mirroring shows as a negative determinant of the 2x2 part.
        let det = Double(m[0]) * Double(m[4]) - Double(m[1]) * Double(m[3])
        mirrored = det < 0
        if abs(theta - 90) < 1 {
            filters = [m[3] > 0 ? "transpose=cclock_flip" : "transpose=clock"]
            clockwise = 90
        } else if abs(theta - 180) < 1 {
            var f: [String] = []
            if m[0] < 0 { f.append("hflip") }
            if m[4] < 0 { f.append("vflip") }
            filters = f
            clockwise = 180
        } else if abs(theta - 270) < 1 {
            filters = [m[3] < 0 ? "transpose=clock_flip" : "transpose=cclock"]
            clockwise = 270
        } else if abs(theta) > 1 {
            filters = [String(format: "rotate=%f*PI/180", theta)]
            clockwise = Int(theta.rounded())
        } else {
            filters = m[4] < 0 ? ["vflip"] : []
            clockwise = 0
        }
    }
}
