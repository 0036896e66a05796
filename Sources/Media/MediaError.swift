import ThreadlineCore
internal import CFFmpeg

/// A failure inside the media engine, attributed to the stage where it happened.
public struct MediaError: Error, Sendable, CustomStringConvertible {
    public enum Class: String, Sendable, Codable {
        /// Worth another attempt: I/O hiccup, network error, out of disk.
        case retryable
        /// Another attempt gives the same result: undecodable input, impossible parameters.
        case permanent
    }
    public var stage: StageKind
    public var errorClass: Class
    /// The file concerned, as the user named it.
    public var file: String
    public var message: String

    public init(_ stage: StageKind, _ errorClass: Class, file: String, _ message: String) {
        self.stage = stage; self.errorClass = errorClass; self.file = file; self.message = message
    }

    public var description: String { "\(stage.rawValue) failed on \(file): \(message)" }
}

func avErrorString(_ code: Int32) -> String {
    var buf = [CChar](repeating: 0, count: 256)
    tl_err2str(code, &buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// I/O errors that may pass; everything else about input is permanent.
func classify(_ code: Int32) -> MediaError.Class {
    let transient: [Int32] = [EIO, ENOSPC, EAGAIN, ETIMEDOUT, ECONNRESET, ECONNREFUSED, EPIPE, ENETUNREACH, EHOSTUNREACH, ENOMEM]
    return transient.map { tl_averror($0) }.contains(code) ? .retryable : .permanent
}

#if canImport(Glibc)
import Glibc
#endif
