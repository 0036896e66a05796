import ThreadlineCore
internal import CFFmpeg

func avErrorString(_ code: Int32) -> String {
    var buf = [CChar](repeating: 0, count: 256)
    tl_err2str(code, &buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Why writing an output failed; a full disk says what to do about it.
func writeError(_ code: Int32) -> String {
    let reason = avErrorString(code)
    guard code == tl_averror(ENOSPC) else { return reason }
    return reason + " (free space on that disk: a worker's store gives up what it may to keep `worker --store-keep-free` free; on a state folder, `coord gc` removes artifacts no recent run uses)"
}

/// Writing an output failed with `code`: `what` and the reason, marked `noSpace` when the disk is full.
func writeFailure(_ code: Int32, file: String, _ what: String) -> MediaError {
    var e = MediaError(.encode, classify(code), file: file, "\(what): \(writeError(code))")
    e.noSpace = code == tl_averror(ENOSPC)
    return e
}

/// I/O errors that may pass; everything else about input is permanent.
func classify(_ code: Int32) -> MediaError.Class {
    let transient: [Int32] = [EIO, ENOSPC, EAGAIN, ETIMEDOUT, ECONNRESET, ECONNREFUSED, EPIPE, ENETUNREACH, EHOSTUNREACH, ENOMEM]
    return transient.map { tl_averror($0) }.contains(code) ? .retryable : .permanent
}

#if canImport(Glibc)
import Glibc
#endif
