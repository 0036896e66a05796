import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Finds the two halves of an Apple Live Photo: first by content identifier (the MOV's
/// `com.apple.quicktime.content.identifier`, the photo's Apple MakerNote tag 0x0011), else by
/// the same basename in the same folder.
public enum LivePhotoPairing {
    public struct Pair: Sendable, Equatable {
        public var photo: String?
        public var movie: String?
        public var identifier: String?
        /// "identifier" or "basename".
        public var matchedBy: String
    }

    static let movieExtensions = ["mov", "mp4", "m4v"]
    static let photoExtensions = ["jpg", "jpeg", "heic", "heif", "png"]

    /// The pair for `path` (either half). Missing halves are nil.
    public static func pair(for path: String) -> Pair {
        let url = URL(fileURLWithPath: path)
        let dir = url.deletingLastPathComponent().path
        let isMovie = movieExtensions.contains(url.pathExtension.lowercased())
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted().map { dir + "/" + $0 }
        let wanted = isMovie ? photoExtensions : movieExtensions
        let candidates = files.filter { wanted.contains(URL(fileURLWithPath: $0).pathExtension.lowercased()) }
        let identifier = isMovie ? movieIdentifier(path) : photoIdentifier(path)
        if let identifier {
            for c in candidates where (isMovie ? photoIdentifier(c) : movieIdentifier(c)) == identifier {
                return Pair(photo: isMovie ? c : path, movie: isMovie ? path : c, identifier: identifier, matchedBy: "identifier")
            }
        }
        let stem = url.deletingPathExtension().lastPathComponent.lowercased()
        let byName = candidates.first { URL(fileURLWithPath: $0).deletingPathExtension().lastPathComponent.lowercased() == stem }
        return Pair(photo: isMovie ? byName : path, movie: isMovie ? path : byName, identifier: identifier, matchedBy: "basename")
    }

    /// The content identifier a Live Photo MOV carries in its container metadata.
    public static func movieIdentifier(_ path: String) -> String? {
        (try? CaptureMetadata.read(path))?.contentIdentifier
    }

    /// Where in a Live Photo's movie the still was taken (seconds on the movie's timeline): the
    /// one sample of its `com.apple.quicktime.still-image-time` timed-metadata track — the frame
    /// Photos shows. Nil when the movie has no such track.
    public static func stillImageTime(_ movie: String) -> Double? {
        guard let track = QuickTimeBoxes.trackIndex(in: movie, containing: "com.apple.quicktime.still-image-time") else { return nil }
        _ = configureLogging
        // Only a packet's timestamp is needed: the container header says enough (no probing decode).
        guard let input = try? InputFile(path: movie, name: (movie as NSString).lastPathComponent, stage: .fetch, findStreamInfo: false),
              track < Int(input.ctx.pointee.nb_streams) else { return nil }
        let st = input.stream(Int32(track))
        for i in 0..<Int(input.ctx.pointee.nb_streams) { input.stream(Int32(i)).pointee.discard = i == track ? AVDISCARD_DEFAULT : AVDISCARD_ALL }
        let packet = Packet()
        while av_read_frame(input.ctx, packet.ptr) >= 0 {
            defer { packet.unref() }
            guard packet.ptr.pointee.stream_index == Int32(track), packet.ptr.pointee.pts != tl_nopts_value() else { continue }
            return max(0, Double(packet.ptr.pointee.pts) * av_q2d(st.pointee.time_base) - input.origin)
        }
        return nil
    }

    /// The content identifier in a still's Apple MakerNote (tag 0x0011), JPEG or HEIC.
    public static func photoIdentifier(_ path: String) -> String? {
        (try? CaptureMetadata.read(path))?.contentIdentifier
    }
}

/// Just enough of the QuickTime box structure to tell which track a timed-metadata key belongs to
/// (libavformat exposes `mebx` tracks but not their keys). Tracks are numbered as libavformat
/// numbers streams: in the order of the `trak` boxes.
enum QuickTimeBoxes {
    static func trackIndex(in path: String, containing key: String) -> Int? {
        guard let h = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? h.close() }
        // The top level, by box headers only: find moov (at the start or, in Live Photos, the end).
        var offset: UInt64 = 0
        let end = (try? h.seekToEnd()) ?? 0
        var moov: Data?
        while offset + 8 <= end {
            try? h.seek(toOffset: offset)
            guard let head = try? h.read(upToCount: 16), head.count >= 8 else { return nil }
            var size = UInt64(head.prefix(4).reduce(0) { $0 << 8 | UInt32($1) })
            var header: UInt64 = 8
            if size == 1, head.count >= 16 { size = head[8..<16].reduce(0) { $0 << 8 | UInt64($1) }; header = 16 }
            if size == 0 { size = end - offset }
            guard size >= header, size <= end - offset else { return nil }
            if head[4..<8] == Data("moov".utf8) {
                guard size < 64 << 20 else { return nil }
                try? h.seek(toOffset: offset + header)
                moov = try? h.read(upToCount: Int(size - header))
                break
            }
            offset += size
        }
        guard let moov else { return nil }
        let needle = Data(key.utf8)
        var k = 0, track = 0
        let bytes = [UInt8](moov)
        while k + 8 <= bytes.count {
            let size = Int(bytes[k..<k + 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            guard size >= 8, k + size <= bytes.count else { return nil }
            if bytes[k + 4..<k + 8].elementsEqual("trak".utf8) {
                if moov[(moov.startIndex + k)..<(moov.startIndex + k + size)].range(of: needle) != nil { return track }
                track += 1
            }
            k += size
        }
        return nil
    }
}

/// EXIF pieces libexif does not read right: orientation of a TIFF block, and Apple MakerNote strings.
enum EXIF {
    /// Orientation (tag 0x0112 in IFD0) of a TIFF-structured EXIF block.
    static func orientation(_ b: [UInt8]) -> Int? {
        guard b.count >= 8 else { return nil }
        let little = b[0] == 0x49
        func u16(_ o: Int) -> Int? { o + 2 <= b.count ? (little ? Int(b[o]) | Int(b[o + 1]) << 8 : Int(b[o]) << 8 | Int(b[o + 1])) : nil }
        func u32(_ o: Int) -> Int? {
            guard o + 4 <= b.count else { return nil }
            return little ? Int(b[o]) | Int(b[o + 1]) << 8 | Int(b[o + 2]) << 16 | Int(b[o + 3]) << 24
                          : Int(b[o]) << 24 | Int(b[o + 1]) << 16 | Int(b[o + 2]) << 8 | Int(b[o + 3])
        }
        guard let ifd = u32(4), let n = u16(ifd), n < 1000 else { return nil }
        for k in 0..<n where u16(ifd + 2 + 12 * k) == 0x0112 { return u16(ifd + 2 + 12 * k + 8) }
        return nil
    }

    /// An ASCII value of Apple's MakerNote ("Apple iOS" header; a big-endian IFD at +14 whose
    /// offsets are relative to the MakerNote's start): tag 0x0011 is the Live Photo content identifier.
    static func appleMakerNoteString(_ b: [UInt8], tag: Int) -> String? {
        let end = b.count
        guard end >= 16, Array(b[0..<9]) == Array("Apple iOS".utf8) else { return nil }
        func be16(_ o: Int) -> Int? { o + 2 <= end ? Int(b[o]) << 8 | Int(b[o + 1]) : nil }
        func be32(_ o: Int) -> Int? { o + 4 <= end ? Int(b[o]) << 24 | Int(b[o + 1]) << 16 | Int(b[o + 2]) << 8 | Int(b[o + 3]) : nil }
        guard let n = be16(14), n < 500 else { return nil }
        for k in 0..<n {
            let e = 16 + 12 * k
            guard be16(e) == tag, be16(e + 2) == 2, let count = be32(e + 4), count > 4, count < 200, let off = be32(e + 8) else { continue }
            guard off + count <= end else { return nil }
            let bytes = b[off..<(off + count)].prefix { $0 != 0 }
            let s = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespaces)
            return s.isEmpty ? nil : s
        }
        return nil
    }
}

/// Android's counterpart of a Live Photo: one file, the still with its movie appended (Google's
/// Motion Photo format 1.0, `…MP.jpg`; its MicroVideo predecessor, `MVIMG_…jpg`; Samsung's
/// `MotionPhoto_Data` trailer). The still's XMP says where the movie is; the movie is checked to
/// be one (an MP4 `ftyp` box there) before it is believed, as the format asks of readers.
public enum MotionPhoto {
    /// The byte range of the movie embedded in the still at `path`, or nil when it holds none.
    public static func embeddedMovie(in path: String) -> Range<Int>? {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) else { return nil }
        return embeddedMovie(in: data)
    }

    /// The movie embedded in the JPEG at `path`, looked for only where the file says it may hold
    /// one: its XMP names a motion photo (`MotionPhoto`, `MicroVideo`), or it ends with Samsung's
    /// trailer (`SEFT`). A library scan asks this of every photo, over a network share too: a
    /// plain one costs its segment headers (the EXIF block is stepped over, not read), its XMP
    /// when it has one, and its last four bytes.
    public static func markedMovie(in path: String) -> Range<Int>? {
        guard let file = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? file.close() }
        let xmp = jpegXMP(file)
        var marked = xmp.map { $0.range(of: Data("MotionPhoto".utf8)) != nil || $0.range(of: Data("MicroVideo".utf8)) != nil } ?? false
        if !marked, let end = try? file.seekToEnd(), end >= 4, (try? file.seek(toOffset: end - 4)) != nil {
            marked = (try? file.read(upToCount: 4)) == Data("SEFT".utf8)
        }
        guard marked, let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) else { return nil }
        return embeddedMovie(in: data, xmp: xmp ?? Data())   // none in its segments: none to look for
    }

    /// The XMP packet of a JPEG (its APP1 segment named by Adobe's namespace), found by stepping
    /// from segment header to segment header until the image data starts (ITU T.81 B.1.1.2).
    static func jpegXMP(_ file: FileHandle) -> Data? {
        func bytes(_ n: Int) -> [UInt8]? { (try? file.read(upToCount: n)).flatMap { $0.count == n ? [UInt8]($0) : nil } }
        guard (try? file.seek(toOffset: 0)) != nil, bytes(2) == [0xFF, 0xD8] else { return nil }
        let namespace = Data("http://ns.adobe.com/xap/1.0/\u{0}".utf8)
        for _ in 0..<64 {
            guard var marker = bytes(2), marker[0] == 0xFF else { return nil }
            while marker[1] == 0xFF { guard let next = bytes(1) else { return nil }; marker[1] = next[0] }   // fill bytes
            if marker[1] == 0xDA || marker[1] == 0xD9 { return nil }                                       // image data, or the end
            if (0xD0...0xD7).contains(marker[1]) || marker[1] == 0x01 { continue }                         // no length
            guard let length = bytes(2).map({ Int($0[0]) << 8 | Int($0[1]) }), length >= 2 else { return nil }
            var rest = length - 2
            if marker[1] == 0xE1, rest > namespace.count {
                guard let name = bytes(namespace.count) else { return nil }
                rest -= namespace.count
                if Data(name) == namespace { return (try? file.read(upToCount: rest)).flatMap { $0.count == rest ? $0 : nil } }
            }
            guard let here = try? file.offset(), (try? file.seek(toOffset: here + UInt64(rest))) != nil else { return nil }
        }
        return nil
    }

    /// How long the movie at `range` of the file at `path` plays, as its header says (no packets
    /// read), or nil when it does not say.
    public static func seconds(of range: Range<Int>, in path: String) -> Double? {
        _ = configureLogging
        var ctx: UnsafeMutablePointer<AVFormatContext>? = nil
        guard openLocalInput(&ctx, path, range: range) >= 0, let c = ctx else { return nil }
        defer { avformat_close_input(&ctx) }
        return headerSeconds(c)
    }

    /// `xmp`: the XMP packet when already read (`jpegXMP`); else it is looked for in `data`.
    static func embeddedMovie(in data: Data, xmp: Data? = nil) -> Range<Int>? {
        // The XMP packet: in a JPEG's APP1 near the start, in a HEIC wherever its item lies.
        let packet = xmp ?? data.range(of: Data("<x:xmpmeta".utf8)).map { data[$0.lowerBound..<min(data.endIndex, $0.lowerBound + (1 << 16))] } ?? Data()
        let xmp = String(decoding: packet, as: UTF8.self)
        var starts: [Int] = []
        func number(_ pattern: String, in text: Substring) -> Int? {
            guard let r = text.range(of: pattern, options: .regularExpression) else { return nil }
            return Int(text[r].drop { !$0.isNumber }.prefix { $0.isNumber })
        }
        let whole = Substring(xmp)
        // Camera:MotionPhoto 0 says "not a motion photo", whatever is appended.
        if let flag = number(#"MotionPhoto(="|>)\d+"#, in: whole), flag <= 0 { return nil }
        // Container:Directory: the item whose semantic is MotionPhoto, its length from the end.
        var rest = whole
        while let tag = rest.range(of: #"<[A-Za-z]*:?Item\b[^>]*>"#, options: .regularExpression) {
            let element = rest[tag]
            if element.contains(#"Semantic="MotionPhoto""#), let length = number(#"Length="\d+""#, in: element) {
                starts.append(data.count - length)
            }
            rest = rest[tag.upperBound...]
        }
        // MicroVideo: the offset of the movie from the file's end.
        if let offset = number(#"MicroVideoOffset(="|>)\d+"#, in: whole) { starts.append(data.count - offset) }
        for start in starts where start > 0 {
            if let end = movieEnd(data, from: start) { return start..<end }
        }
        // Samsung: the movie follows its marker. Searched for only when the XMP named none (the
        // search reads the file from its end back to the marker).
        if let marker = data.range(of: Data("MotionPhoto_Data".utf8), options: .backwards) {
            let start = marker.upperBound - data.startIndex
            if let end = movieEnd(data, from: start) { return start..<end }
        }
        return nil
    }

    /// The top-level boxes of an MP4 or QuickTime file.
    static let topLevelBoxes: Set<String> = ["ftyp", "moov", "mdat", "free", "skip", "wide", "uuid", "meta", "udta", "pdin", "moof", "mfra", "sidx", "styp"]

    /// Where the ISO BMFF file starting at `start` ends: after its last whole top-level box
    /// (Samsung's trailer follows it). Nil unless it starts with `ftyp` and holds a `moov`.
    static func movieEnd(_ data: Data, from start: Int) -> Int? {
        func u32(_ o: Int) -> UInt64 { data[data.startIndex + o..<data.startIndex + o + 4].reduce(0) { $0 << 8 | UInt64($1) } }
        func type(_ o: Int) -> String { String(decoding: data[data.startIndex + o + 4..<data.startIndex + o + 8], as: UTF8.self) }
        guard start + 8 <= data.count, type(start) == "ftyp" else { return nil }
        var offset = start, sawMovie = false
        while offset + 8 <= data.count {
            var size = u32(offset)
            if size == 1 {
                guard offset + 16 <= data.count else { break }
                size = u32(offset + 8) << 32 | u32(offset + 12)
            } else if size == 0, type(offset) == "mdat" {
                size = UInt64(data.count - offset)   // "to the end of the file"
            }
            let kind = type(offset)
            guard size >= 8, size <= UInt64(data.count - offset), Self.topLevelBoxes.contains(kind) else { break }
            if kind == "moov" { sawMovie = true }
            offset += Int(size)
        }
        return sawMovie ? offset : nil
    }

    /// Writes the movie embedded in `photo` under `folder` (named by its content, so an unchanged
    /// photo reuses it) and returns its path; nil when the photo holds none. Each use is noted
    /// (`.used`, not the movie's own time, which its fetch is keyed by) for `Home.prune`.
    public static func extractMovie(from photo: String, to folder: String) throws -> String? {
        let data = try Data(contentsOf: URL(fileURLWithPath: photo), options: .alwaysMapped)
        guard let range = embeddedMovie(in: data) else { return nil }
        let movie = data[(data.startIndex + range.lowerBound)..<(data.startIndex + range.upperBound)]
        let stem = ((photo as NSString).lastPathComponent as NSString).deletingPathExtension
        let dir = folder + "/" + SHA256Hasher.hex(movie)
        let path = dir + "/" + stem + ".mp4"
        defer { FileManager.default.createFile(atPath: dir + "/.used", contents: nil) }
        if FileManager.default.fileExists(atPath: path) { return path }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let part = path + ".part-\(getpid())"
        try movie.write(to: URL(fileURLWithPath: part))
        guard rename(part, path) == 0 else {
            let why = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: part)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: why])
        }
        return path
    }
}
