import Foundation
import ThreadlineCore
internal import CFFmpeg

/// What a decoded picture's colour tags say, read the way players read them, and the filters that
/// bring it to the movie's colour space: BT.709 primaries, transfer and matrix, limited range,
/// 8-bit 4:2:0. Every item's picture goes through `toOutput` once, before looks and overlays
/// (which are defined on display-referred BT.709 pictures).
struct SourceColour: Equatable {
    enum Family: Equatable {
        /// RGB pixels (PNG, decoded HEIC, generated titles): sRGB, whose primaries are BT.709's.
        case rgb
        /// Greyscale: no matrix to convert.
        case gray
        /// Y'CbCr with a standard-dynamic-range transfer.
        case yuv
        /// Y'CbCr with PQ (SMPTE ST 2084) or HLG (ARIB STD-B67): tone-mapped to SDR.
        case hdr
    }
    var family: Family
    /// Effective matrix (untagged decided by size, as players do), primaries, transfer and range.
    var matrix: AVColorSpace
    var primaries: AVColorPrimaries
    var transfer: AVColorTransferCharacteristic
    var fullRange: Bool
    /// An odd width or height: the colorspace filter and zimg refuse 4:2:0 pictures of that size.
    var oddSize: Bool
    /// 8-bit 4:2:0 (yuv420p): what the edit chain resizes with zscale when it scales first.
    var yuv420p: Bool

    /// The tone-mapping operator for HDR sources. Mobius is linear up to a knee and rolls off
    /// only the highlights above it, so SDR-range content (most of a phone's HLG picture) keeps
    /// its saturation and brightness; hable compresses everything and darkens mid-tones
    /// (measured on the corpus's HLG files and a generated PQ clip: see docs/COLOUR.md).
    static let toneMap = "mobius"

    init(frame f: UnsafePointer<AVFrame>) {
        self.init(format: f.pointee.format, width: Int(f.pointee.width), height: Int(f.pointee.height),
                  matrix: f.pointee.colorspace, primaries: f.pointee.color_primaries,
                  transfer: f.pointee.color_trc, range: f.pointee.color_range)
    }

    init(format: Int32, width: Int, height: Int, matrix: AVColorSpace, primaries: AVColorPrimaries,
         transfer: AVColorTransferCharacteristic, range: AVColorRange) {
        let pix = AVPixelFormat(rawValue: format)
        let desc = av_pix_fmt_desc_get(pix)
        let flags = desc?.pointee.flags ?? 0
        let components = Int(desc?.pointee.nb_components ?? 3)
        let isRGB = (flags & UInt64(AV_PIX_FMT_FLAG_RGB)) != 0 || (flags & UInt64(AV_PIX_FMT_FLAG_PAL)) != 0
        let isGray = !isRGB && components <= 2
        let jpegFormats: Set<AVPixelFormat> = [AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUVJ422P, AV_PIX_FMT_YUVJ444P, AV_PIX_FMT_YUVJ440P, AV_PIX_FMT_YUVJ411P]
        fullRange = range == AVCOL_RANGE_JPEG || (range == AVCOL_RANGE_UNSPECIFIED && jpegFormats.contains(pix))
        // Untagged: what mpv and browsers assume — BT.709 for HD, BT.601 (SMPTE 170M) for SD.
        oddSize = width % 2 != 0 || height % 2 != 0
        yuv420p = pix == AV_PIX_FMT_YUV420P
        let hd = width >= 1280 || height > 576
        self.matrix = matrix == AVCOL_SPC_UNSPECIFIED || matrix == AVCOL_SPC_RESERVED ? (hd ? AVCOL_SPC_BT709 : AVCOL_SPC_SMPTE170M) : matrix
        self.primaries = primaries == AVCOL_PRI_UNSPECIFIED || primaries == AVCOL_PRI_RESERVED ? AVCOL_PRI_BT709 : primaries
        self.transfer = transfer
        if isRGB { family = .rgb }
        else if isGray { family = .gray }
        else if transfer == AVCOL_TRC_SMPTE2084 || transfer == AVCOL_TRC_ARIB_STD_B67 { family = .hdr }
        else { family = .yuv }
    }

    /// An sRGB picture (generated titles).
    static let sRGB = SourceColour(format: AV_PIX_FMT_RGB24.rawValue, width: 2, height: 2, matrix: AVCOL_SPC_RGB,
                                   primaries: AVCOL_PRI_BT709, transfer: AVCOL_TRC_IEC61966_2_1, range: AVCOL_RANGE_JPEG)

    /// The movie's colour space.
    static let output = SourceColour(format: AV_PIX_FMT_YUV420P.rawValue, width: 1280, height: 720, matrix: AVCOL_SPC_BT709,
                                     primaries: AVCOL_PRI_BT709, transfer: AVCOL_TRC_BT709, range: AVCOL_RANGE_MPEG)

    /// Filters from this picture to BT.709 limited-range 8-bit 4:2:0; empty when it already is.
    var toOutput: [String] {
        switch family {
        case .rgb:
            // sRGB shares BT.709's primaries: only the matrix and range to apply.
            return ["scale=out_color_matrix=bt709:out_range=tv", "format=yuv420p"]
        case .gray:
            return fullRange ? ["scale=in_range=pc:out_range=tv", "format=yuv420p"] : []
        case .hdr:
            let even = oddSize ? ["scale=w=trunc(iw/2)*2:h=trunc(ih/2)*2"] : []
            // To linear light (zimg applies the HLG system gamma / PQ EOTF), BT.2020 → BT.709
            // primaries, tone-map the highlights, then BT.709's transfer and matrix.
            return even + ["zscale=t=linear:npl=100", "format=gbrpf32le", "zscale=p=bt709",
                    "tonemap=tonemap=\(Self.toneMap):desat=0", "zscale=t=bt709:m=bt709:r=tv", "format=yuv420p"]
        case .yuv:
            if primaries == AVCOL_PRI_BT2020 {
                // Wide-gamut SDR: zimg converts primaries through linear light.
                let tin = transfer == AVCOL_TRC_UNSPECIFIED ? ":tin=2020_10" : ""
                return (oddSize ? ["scale=w=trunc(iw/2)*2:h=trunc(ih/2)*2"] : []) + ["zscale=p=bt709:t=bt709:m=bt709:r=tv\(tin)", "format=yuv420p"]
            }
            if matrix == AVCOL_SPC_BT709 && !fullRange { return [] }
            if oddSize {
                // Through RGB with libswscale, which takes any size.
                return ["scale=in_color_matrix=\(Self.swscaleName(matrix)):in_range=\(fullRange ? "pc" : "tv")", "format=gbrp",
                        "scale=out_color_matrix=bt709:out_range=tv", "format=yuv420p"]
            }
            guard let space = Self.colorspaceFilterName(matrix) else {
                return ["zscale=m=bt709:r=tv", "format=yuv420p"]
            }
            // Matrix and range only, as players do for SDR: BT.601's primaries are close enough to
            // BT.709's that no player converts them, and the tests judge pictures as players show them.
            return ["colorspace=ispace=\(space):irange=\(fullRange ? "pc" : "tv"):iprimaries=bt709:itrc=bt709"
                    + ":all=bt709:range=tv:fast=1:format=yuv420p"]
        }
    }

    /// The filters that make the picture RGBA (sRGB's full range, its own alpha kept): a watermark
    /// or sticker image as the edit chain draws it. Y'CbCr by its own matrix and range (a phone's
    /// JPEG is BT.601 full range); HDR and wide-gamut pictures as SDR, without tone mapping.
    var toRGBA: [String] {
        switch family {
        case .rgb: return ["format=rgba"]
        case .gray: return fullRange ? ["format=rgba"] : ["scale=in_range=tv:out_range=pc", "format=rgba"]
        case .yuv, .hdr: return ["scale=in_color_matrix=\(Self.swscaleName(matrix)):in_range=\(fullRange ? "pc" : "tv")", "format=rgba"]
        }
    }

    /// For a picture of pixel format `format`: the filters that make it sRGB with alpha when it
    /// has an alpha channel ([] for RGB), so the edit chain can show its transparency over the
    /// background; nil when it has none, or when it is HDR or wide-gamut (tone mapping and
    /// primaries need their own path: such pictures keep showing the colour under their
    /// transparent pixels).
    func transparency(format: Int32) -> [String]? {
        guard Self.hasAlpha(format) else { return nil }
        switch family {
        case .rgb: return []
        case .gray: return ["format=rgba"]
        case .yuv where primaries != AVCOL_PRI_BT2020:
            return ["scale=in_color_matrix=\(Self.swscaleName(matrix)):in_range=\(fullRange ? "pc" : "tv")", "format=rgba"]
        case .yuv, .hdr: return nil
        }
    }

    /// Whether pixels of `format` carry transparency (an alpha plane, or a palette's).
    static func hasAlpha(_ format: Int32) -> Bool {
        guard let desc = av_pix_fmt_desc_get(AVPixelFormat(rawValue: format)) else { return false }
        return desc.pointee.flags & UInt64(AV_PIX_FMT_FLAG_ALPHA) != 0
    }

    /// libswscale's name for a matrix (its BT.601 covers bt470bg and smpte170m).
    static func swscaleName(_ m: AVColorSpace) -> String {
        switch m {
        case AVCOL_SPC_BT709: return "bt709"
        case AVCOL_SPC_FCC: return "fcc"
        case AVCOL_SPC_SMPTE240M: return "smpte240m"
        case AVCOL_SPC_BT2020_NCL, AVCOL_SPC_BT2020_CL: return "bt2020"
        default: return "bt601"
        }
    }

    /// The `colorspace` filter's name for a matrix, or nil where it has none.
    static func colorspaceFilterName(_ m: AVColorSpace) -> String? {
        switch m {
        case AVCOL_SPC_BT709: return "bt709"
        case AVCOL_SPC_BT470BG: return "bt470bg"
        case AVCOL_SPC_SMPTE170M: return "smpte170m"
        case AVCOL_SPC_SMPTE240M: return "smpte240m"
        case AVCOL_SPC_FCC: return "fcc"
        case AVCOL_SPC_YCGCO: return "ycgco"
        case AVCOL_SPC_BT2020_NCL: return "bt2020ncl"
        default: return nil
        }
    }
}
