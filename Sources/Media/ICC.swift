import Foundation
import ThreadlineCore
internal import CFFmpeg
internal import CLCMS

/// ICC colour profiles through LittleCMS: stills that carry one (iPhone HEICs and JPEGs are
/// Display P3) are converted to sRGB — whose primaries are BT.709's — before the edit chain, so a
/// P3 red stays the red the phone showed instead of being read as a more saturated sRGB one.
enum ICC {
    /// The profile's description ("Display P3", "sRGB IEC61966-2.1"), or nil when LittleCMS cannot read it.
    static func describe(_ profile: [UInt8]) -> String? {
        guard let p = profile.withUnsafeBytes({ cmsOpenProfileFromMem($0.baseAddress, cmsUInt32Number($0.count)) }) else { return nil }
        defer { cmsCloseProfile(p) }
        var buffer = [CChar](repeating: 0, count: 256)
        let n = cmsGetProfileInfoASCII(p, cmsInfoDescription, "en", "US", &buffer, cmsUInt32Number(buffer.count))
        return n > 0 ? String(cString: buffer) : ""
    }

    /// Whether converting through this profile can be skipped: it is sRGB already (or unreadable).
    static func isSRGB(_ profile: [UInt8]) -> Bool { describe(profile)?.lowercased().contains("srgb") ?? true }

    /// `picture` (any pixel format) as RGB24 in sRGB, converted from `profile` with relative
    /// colorimetric intent (what colour-managed viewers use for P3 → sRGB); nil when the profile
    /// is unreadable or not an RGB one (the picture is then used as its tags say).
    static func toSRGB(_ picture: Frame, profile: [UInt8], name: String) throws -> Frame? {
        guard let input = profile.withUnsafeBytes({ cmsOpenProfileFromMem($0.baseAddress, cmsUInt32Number($0.count)) }) else { return nil }
        defer { cmsCloseProfile(input) }
        guard cmsGetColorSpace(input) == cmsSigRgbData, let srgb = cmsCreate_sRGBProfile() else { return nil }
        defer { cmsCloseProfile(srgb) }
        guard let transform = cmsCreateTransform(input, tl_type_rgb_8(), srgb, tl_type_rgb_8(), cmsUInt32Number(INTENT_RELATIVE_COLORIMETRIC), 0) else { return nil }
        defer { cmsDeleteTransform(transform) }
        let rgb = try rgb24(picture, name: name)
        let f = rgb.ptr.pointee
        let w = Int(f.width), stride = Int(f.linesize.0)
        for y in 0..<Int(f.height) {
            let row = f.data.0! + y * stride
            cmsDoTransform(transform, row, row, cmsUInt32Number(w))
        }
        return rgb
    }

    /// The picture as RGB24, decoded by its own matrix and range (a JPEG's is BT.601 full range).
    static func rgb24(_ picture: Frame, name: String) throws -> Frame {
        let p = picture.ptr.pointee
        if p.format == AV_PIX_FMT_RGB24.rawValue {
            let copy = Frame()
            guard av_frame_ref(copy.ptr, picture.ptr) >= 0, av_frame_make_writable(copy.ptr) >= 0 else {
                throw MediaError(.decode, .retryable, file: name, "out of memory")
            }
            return copy
        }
        let colour = SourceColour(frame: picture.ptr)
        let matrix = SourceColour.swscaleName(colour.matrix)
        let filter = try VideoFilter(width: p.width, height: p.height, format: p.format,
                                     sar: p.sample_aspect_ratio.num > 0 ? p.sample_aspect_ratio : AVRational(num: 1, den: 1),
                                     timeBase: AVRational(num: 1, den: 1),
                                     description: "scale=in_color_matrix=\(matrix):in_range=\(colour.fullRange ? "pc" : "tv"),format=rgb24", file: name)
        let out = Frame()
        try filter.process(picture.ptr, into: out, file: name)
        guard av_frame_make_writable(out.ptr) >= 0 else { throw MediaError(.decode, .retryable, file: name, "out of memory") }
        out.ptr.pointee.color_range = AVCOL_RANGE_JPEG
        return out
    }

    /// The ICC profile a decoded frame carries (JPEG APP2, PNG iCCP), if any.
    static func profile(of frame: Frame) -> [UInt8]? {
        guard let sd = av_frame_get_side_data(frame.ptr, AV_FRAME_DATA_ICC_PROFILE), sd.pointee.size > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: sd.pointee.data, count: Int(sd.pointee.size)))
    }
}
