import Foundation
import ThreadlineCore
internal import CFFmpeg
internal import CHeif

/// HEIC/HEIF stills through libheif, which applies the file's rotation and mirroring itself.
enum Heif {
    /// True when the file's content (not its name) is HEIF: an ftyp box with a HEIF brand.
    static func isHeif(_ path: String) -> Bool {
        guard let h = FileHandle(forReadingAtPath: path), let head = try? h.read(upToCount: 32) else { return false }
        try? h.close()
        guard head.count >= 12, String(decoding: head[4..<8], as: UTF8.self) == "ftyp" else { return false }
        let brands = ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1", "avif"]
        let major = String(decoding: head[8..<12], as: UTF8.self)
        return brands.contains(major)
    }

    /// The primary image as an RGB24 frame, and the EXIF orientation still to apply: libheif applies
    /// the file's irot/imir itself; when it applied no rotation, the Exif block's orientation counts.
    static func decode(_ path: String, name: String) throws -> (Frame, Orientation?, icc: [UInt8]?) {
        guard let ctx = heif_context_alloc() else { throw MediaError(.decode, .retryable, file: name, "out of memory") }
        defer { heif_context_free(ctx) }
        var err = heif_context_read_from_file(ctx, path, nil)
        guard err.code == heif_error_Ok else { throw MediaError(.decode, .permanent, file: name, "not a readable HEIF image: \(String(cString: err.message))") }
        var handle: OpaquePointer? = nil
        err = heif_context_get_primary_image_handle(ctx, &handle)
        guard err.code == heif_error_Ok, let handle else { throw MediaError(.decode, .permanent, file: name, "no primary image: \(String(cString: err.message))") }
        defer { heif_image_handle_release(handle) }
        var orientation: Orientation? = nil
        if heif_image_handle_get_ispe_width(handle) == heif_image_handle_get_width(handle),
           heif_image_handle_get_ispe_height(handle) == heif_image_handle_get_height(handle) {
            var id: heif_item_id = 0
            if heif_image_handle_get_list_of_metadata_block_IDs(handle, "Exif", &id, 1) == 1 {
                let size = heif_image_handle_get_metadata_size(handle, id)
                if size > 8 && size < 1 << 20 {
                    var bytes = [UInt8](repeating: 0, count: size)
                    if heif_image_handle_get_metadata(handle, id, &bytes).code == heif_error_Ok {
                        let offset = 4 + (Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3]))
                        if offset < size, let o = EXIF.orientation(Array(bytes[offset...])), o > 1 { orientation = Orientation(exif: o) }
                    }
                }
            }
        }
        var icc: [UInt8]? = nil
        let iccSize = heif_image_handle_get_raw_color_profile_size(handle)
        if iccSize > 0 && iccSize < 1 << 22 {
            var bytes = [UInt8](repeating: 0, count: iccSize)
            if heif_image_handle_get_raw_color_profile(handle, &bytes).code == heif_error_Ok { icc = bytes }
        }
        var image: OpaquePointer? = nil
        err = heif_decode_image(handle, &image, heif_colorspace_RGB, heif_chroma_interleaved_RGB, nil)
        guard err.code == heif_error_Ok, let image else { throw MediaError(.decode, .permanent, file: name, "cannot decode: \(String(cString: err.message))") }
        defer { heif_image_release(image) }
        let w = heif_image_get_width(image, heif_channel_interleaved), h = heif_image_get_height(image, heif_channel_interleaved)
        var stride: Int32 = 0
        guard w > 0, h > 0, let src = heif_image_get_plane_readonly(image, heif_channel_interleaved, &stride) else {
            throw MediaError(.decode, .permanent, file: name, "the decoded image has no pixels")
        }
        let frame = Frame()
        frame.ptr.pointee.width = w; frame.ptr.pointee.height = h; frame.ptr.pointee.format = AV_PIX_FMT_RGB24.rawValue
        guard av_frame_get_buffer(frame.ptr, 0) >= 0 else { throw MediaError(.decode, .retryable, file: name, "out of memory") }
        let dst = frame.ptr.pointee.data.0!, dstStride = Int(frame.ptr.pointee.linesize.0)
        for y in 0..<Int(h) { (dst + y * dstStride).update(from: src + y * Int(stride), count: Int(w) * 3) }
        frame.ptr.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        return (frame, orientation, icc)
    }

    /// What planning needs to know about a HEIF still.
    static func facts(_ path: String, name: String) throws -> MediaFacts {
        guard let ctx = heif_context_alloc() else { throw MediaError(.fetch, .retryable, file: name, "out of memory") }
        defer { heif_context_free(ctx) }
        var err = heif_context_read_from_file(ctx, path, nil)
        guard err.code == heif_error_Ok else { throw MediaError(.fetch, .permanent, file: name, "not a readable HEIF image: \(String(cString: err.message))") }
        var handle: OpaquePointer? = nil
        err = heif_context_get_primary_image_handle(ctx, &handle)
        guard err.code == heif_error_Ok, let handle else { throw MediaError(.fetch, .permanent, file: name, "no primary image") }
        defer { heif_image_handle_release(handle) }
        var f = MediaFacts(duration: 0, width: Int(heif_image_handle_get_width(handle)), height: Int(heif_image_handle_get_height(handle)),
                           hasVideo: true, hasAudio: false, videoCodec: "hevc (HEIF)", container: "heif")
        f.isStill = true
        return f
    }
}
