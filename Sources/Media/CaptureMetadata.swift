import Foundation
import ThreadlineCore
internal import CFFmpeg
internal import CHeif
internal import CExif

/// When and how a library file was captured, from its metadata only (never from file times):
/// EXIF (libexif) for JPEG and for the EXIF block libheif hands out for HEIC; container metadata
/// (libavformat) for MOV/MP4. No pixels are decoded.
public struct CaptureInfo: Sendable, Equatable, Codable {
    /// A motion photo is an Android photo with its movie inside (Google's Motion Photo format,
    /// MicroVideo, Samsung's trailer): `live_photo:` in a pipeline shows that movie.
    public enum Kind: String, Sendable, Codable { case photo, video, motionPhoto = "motion_photo" }
    public var kind: Kind
    /// The wall-clock time where it was taken, "YYYY-MM-DDTHH:MM:SS" plus ".fff" when known;
    /// nil when the file carries no capture date.
    public var local: String?
    /// Its offset from UTC in minutes, when the file says.
    public var offsetMinutes: Int?
    /// Where the date came from: "exif", "quicktime.creationdate" or "creation_time".
    public var dateSource: String?
    /// Apple's Live Photo content identifier (MakerApple tag 17 / com.apple.quicktime.content.identifier).
    public var contentIdentifier: String?
    /// A movie's length in seconds as its container states it (a motion photo's: its movie's; nil
    /// for photos, or when unstated).
    public var seconds: Double?

    public init(kind: Kind, local: String? = nil, offsetMinutes: Int? = nil, dateSource: String? = nil, contentIdentifier: String? = nil,
                seconds: Double? = nil) {
        self.kind = kind; self.local = local; self.offsetMinutes = offsetMinutes; self.dateSource = dateSource; self.contentIdentifier = contentIdentifier
        self.seconds = seconds
    }

    /// The local calendar day, "YYYY-MM-DD".
    public var day: String? { local.map { String($0.prefix(10)) } }
}

public enum CaptureMetadata {
    public static let photoExtensions: Set<String> = ["jpg", "jpeg", "heic", "heif"]
    /// Phones' and cameras' movies whose containers carry a date libavformat reads: QuickTime and
    /// MP4, old phones' 3GP, and the AVI of 2000s compact cameras (its IDIT chunk, the camera's
    /// clock, which libavformat gives as `creation_time`).
    public static let movieExtensions: Set<String> = ["mov", "mp4", "m4v", "3gp", "3g2", "avi"]

    /// The capture facts of `path`, or an error when the file cannot be read as what its name says.
    public static func read(_ path: String) throws -> CaptureInfo {
        let ext = (path as NSString).pathExtension.lowercased()
        let name = (path as NSString).lastPathComponent
        if movieExtensions.contains(ext) { return try movie(path, name: name) }
        if ext == "heic" || ext == "heif" { return try heic(path, name: name) }
        if ext == "jpg" || ext == "jpeg" { return try jpeg(path, name: name) }
        throw MediaError(.fetch, .permanent, file: name, "not a photo or movie this library reads (JPEG, HEIC, MOV, MP4, 3GP, AVI)")
    }

    static func jpeg(_ path: String, name: String) throws -> CaptureInfo {
        guard let h = FileHandle(forReadingAtPath: path) else { throw MediaError(.fetch, .permanent, file: name, "cannot open it") }
        let head = (try? h.read(upToCount: 3)) ?? Data()
        try? h.close()
        guard head.count == 3, head[0] == 0xFF, head[1] == 0xD8, head[2] == 0xFF else {
            throw MediaError(.fetch, .permanent, file: name, "is not a JPEG")
        }
        var info = CaptureInfo(kind: .photo)
        if let exif = tl_exif_load_file(path) {
            info = fromEXIF(exif)
            exif_data_unref(exif)
        }
        if let movie = MotionPhoto.markedMovie(in: path) {
            info.kind = .motionPhoto
            info.seconds = MotionPhoto.seconds(of: movie, in: path)
        }
        return info
    }

    static func heic(_ path: String, name: String) throws -> CaptureInfo {
        guard let ctx = heif_context_alloc() else { throw MediaError(.fetch, .permanent, file: name, "cannot read it (libheif)") }
        defer { heif_context_free(ctx) }
        let err = heif_context_read_from_file(ctx, path, nil)
        guard err.code == heif_error_Ok else {
            throw MediaError(.fetch, .permanent, file: name, "is not a readable HEIC: \(String(cString: err.message))")
        }
        var handle: OpaquePointer?
        guard heif_context_get_primary_image_handle(ctx, &handle).code == heif_error_Ok, let handle else {
            throw MediaError(.fetch, .permanent, file: name, "has no primary image")
        }
        defer { heif_image_handle_release(handle) }
        let count = heif_image_handle_get_number_of_metadata_blocks(handle, "Exif")
        guard count > 0 else { return CaptureInfo(kind: .photo) }
        var ids = [heif_item_id](repeating: 0, count: Int(count))
        _ = heif_image_handle_get_list_of_metadata_block_IDs(handle, "Exif", &ids, count)
        let size = heif_image_handle_get_metadata_size(handle, ids[0])
        guard size > 4, size < 16 << 20 else { return CaptureInfo(kind: .photo) }
        var block = [UInt8](repeating: 0, count: size)
        guard heif_image_handle_get_metadata(handle, ids[0], &block).code == heif_error_Ok else { return CaptureInfo(kind: .photo) }
        // ISO/IEC 23008-12: a 4-byte offset to the TIFF header, then the EXIF payload.
        let offset = Int(block[0]) << 24 | Int(block[1]) << 16 | Int(block[2]) << 8 | Int(block[3])
        guard 4 + offset < block.count else { return CaptureInfo(kind: .photo) }
        let exifData = Array("Exif\0\0".utf8) + block[(4 + offset)...]
        guard let exif = exifData.withUnsafeBufferPointer({ tl_exif_load($0.baseAddress, UInt32($0.count)) }) else { return CaptureInfo(kind: .photo) }
        defer { exif_data_unref(exif) }
        return fromEXIF(exif)
    }

    static func fromEXIF(_ exif: UnsafeMutablePointer<ExifData>) -> CaptureInfo {
        var buffer = [CChar](repeating: 0, count: 256)
        func text(_ ifd: ExifIfd, _ tag: ExifTag) -> String? {
            guard tl_exif_text(exif, Int32(ifd.rawValue), Int32(tag.rawValue), &buffer, UInt32(buffer.count)) != nil else { return nil }
            let s = String(cString: buffer).trimmingCharacters(in: .whitespacesAndNewlines.union(CharacterSet(charactersIn: "\0")))
            return s.isEmpty ? nil : s
        }
        var info = CaptureInfo(kind: .photo)
        if let original = text(EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_ORIGINAL), let local = exifLocal(original) {
            var value = local
            if let sub = text(EXIF_IFD_EXIF, EXIF_TAG_SUB_SEC_TIME_ORIGINAL), sub.allSatisfy(\.isNumber), !sub.isEmpty {
                value += "." + String((sub + "000").prefix(3))
            }
            info.local = value
            info.dateSource = "exif"
            info.offsetMinutes = text(EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_ORIGINAL).flatMap(offset)
        }
        // The content identifier is Apple MakerNote tag 17. libexif 0.6.24 finds that tag but
        // reads its value wrongly (measured on lychee/train.jpg: "5" instead of the UUID), so the
        // MakerNote's bytes come from libexif and its one string is taken from Apple's IFD here.
        var size: UInt32 = 0
        if let raw = tl_exif_raw(exif, Int32(EXIF_IFD_EXIF.rawValue), Int32(EXIF_TAG_MAKER_NOTE.rawValue), &size), size > 16 {
            info.contentIdentifier = EXIF.appleMakerNoteString(Array(UnsafeBufferPointer(start: raw, count: Int(size))), tag: 0x0011)
        }
        return info
    }

    /// "2019:06:14 15:30:12" → "2019-06-14T15:30:12"; nil for blanks and impossible dates.
    static func exifLocal(_ s: String) -> String? {
        let parts = s.split(whereSeparator: { $0 == ":" || $0 == " " }).map(String.init)
        guard parts.count >= 6, let y = Int(parts[0]), let mo = Int(parts[1]), let d = Int(parts[2]),
              let h = Int(parts[3]), let mi = Int(parts[4]), let se = Int(parts[5].prefix(2)) else { return nil }
        return validLocal(y, mo, d, h, mi, se)
    }

    static func validLocal(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int, _ se: Int) -> String? {
        guard (1900...2999).contains(y), (1...12).contains(mo), (1...31).contains(d), (0...23).contains(h), (0...59).contains(mi), (0...60).contains(se) else { return nil }
        var c = DateComponents(); c.year = y; c.month = mo; c.day = d
        guard let date = Self.utc.date(from: c), Self.utc.component(.day, from: date) == d else { return nil }   // no 31 June
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d", y, mo, d, h, mi, se)
    }

    static let utc: Calendar = { var c = Calendar(identifier: .gregorian); c.timeZone = TimeZone(identifier: "UTC")!; return c }()

    /// "+02:00", "-0530", "Z" → minutes east of UTC.
    static func offset(_ s: String) -> Int? {
        if s == "Z" { return 0 }
        let sign: Int
        switch s.first { case "+": sign = 1; case "-": sign = -1; default: return nil }
        let digits = s.dropFirst().filter(\.isNumber)
        guard digits.count == 4, let h = Int(digits.prefix(2)), let m = Int(digits.suffix(2)), h <= 14, m < 60 else { return nil }
        return sign * (h * 60 + m)
    }

    static func movie(_ path: String, name: String) throws -> CaptureInfo {
        _ = configureLogging
        var ctx: UnsafeMutablePointer<AVFormatContext>? = nil
        let status = openLocalInput(&ctx, path)
        guard status >= 0, let c = ctx else { throw MediaError(.fetch, .permanent, file: name, "is not a readable movie (\(avErrorString(status)))") }
        defer { avformat_close_input(&ctx) }
        func tag(_ key: String) -> String? {
            guard let e = av_dict_get(c.pointee.metadata, key, nil, 0) else { return nil }
            return String(cString: e.pointee.value)
        }
        var info = CaptureInfo(kind: .video)
        info.contentIdentifier = tag("com.apple.quicktime.content.identifier")
        // The header's length (no packets are read): what a suggestion's draft fits its transitions to.
        info.seconds = headerSeconds(c)
        // Apple's creationdate carries the zone it was taken in: "2019-06-14T15:30:12+0200".
        if let apple = tag("com.apple.quicktime.creationdate"), let (local, offset) = isoLocal(apple), offset != nil {
            info.local = local; info.offsetMinutes = offset; info.dateSource = "quicktime.creationdate"
        } else if let utc = tag("creation_time"), let (local, offset) = isoLocal(utc), !local.hasPrefix("1970-01-01"), !local.hasPrefix("1904-01-01") {
            // creation_time is UTC and says nothing of the zone: its UTC day is the best it knows.
            info.local = local; info.offsetMinutes = offset ?? 0; info.dateSource = "creation_time"
        }
        return info
    }

    /// "2019-06-14T15:30:12+0200", "2019-06-14T13:30:12.000000Z" → (local "…T15:30:12[.fff]", offset minutes).
    static func isoLocal(_ s: String) -> (String, Int?)? {
        let t = s.trimmingCharacters(in: .whitespaces)
        guard t.count >= 19 else { return nil }
        let chars = Array(t)
        func num(_ r: Range<Int>) -> Int? { Int(String(chars[r])) }
        guard let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13), let mi = num(14..<16), let se = num(17..<19),
              var local = validLocal(y, mo, d, h, mi, se) else { return nil }
        var rest = String(chars[19...])
        if rest.hasPrefix(".") {
            let frac = rest.dropFirst().prefix(while: \.isNumber)
            if !frac.isEmpty { local += "." + String((frac + "000").prefix(3)) }
            rest = String(rest.dropFirst(1 + frac.count))
        }
        return (local, rest.isEmpty ? nil : offset(rest))
    }
}
