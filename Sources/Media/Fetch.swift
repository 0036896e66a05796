import Foundation
import ThreadlineCore
internal import CFFmpeg

/// Limits for bringing a source in.
public struct FetchLimits: Sendable, Hashable, Codable {
    /// Seconds without progress before a read gives up.
    public var timeout: Double = 30
    /// Largest source accepted, in bytes.
    public var maxBytes: Int64 = 8 << 30
    /// Tries for transient network errors.
    public var attempts: Int = 3
    public init(timeout: Double = 30, maxBytes: Int64 = 8 << 30, attempts: Int = 3) {
        self.timeout = timeout; self.maxBytes = maxBytes; self.attempts = attempts
    }
}

/// Copies a source (local path, file:// or http(s):// URL) to a local file through libavformat's
/// I/O layer, with a timeout, a size limit and retries on transient errors. Returns the byte count.
public enum Fetch {
    public static func copy(from uri: String, to path: String, limits: FetchLimits = .init()) throws -> Int64 {
        _ = configureLogging
        let name = (uri as NSString).lastPathComponent
        var lastError: MediaError?
        for attempt in 1...max(1, limits.attempts) {
            do {
                return try copyOnce(from: uri, to: path, limits: limits, name: name)
            } catch let e as MediaError where e.errorClass == .retryable && attempt < limits.attempts {
                lastError = e
                Thread.sleep(forTimeInterval: 0.2 * Double(1 << (attempt - 1)))
            }
        }
        throw lastError!
    }

    private static func copyOnce(from uri: String, to path: String, limits: FetchLimits, name: String) throws -> Int64 {
        var io: UnsafeMutablePointer<AVIOContext>? = nil
        var opts: OpaquePointer? = nil
        // Only the web: a source URL cannot name another of libavformat's protocols.
        av_dict_set(&opts, "protocol_whitelist", "http,https,tls,tcp", 0)
        av_dict_set(&opts, "rw_timeout", "\(Int64(limits.timeout * 1_000_000))", 0)
        av_dict_set(&opts, "timeout", "\(Int64(limits.timeout * 1_000_000))", 0)
        var ret = avio_open2(&io, uri, AVIO_FLAG_READ, nil, &opts)
        av_dict_free(&opts)
        guard ret >= 0, let io else {
            throw MediaError(.fetch, fetchClass(ret, uri: uri), file: name, "cannot open \(uri): \(avErrorString(ret))")
        }
        defer { var p: UnsafeMutablePointer<AVIOContext>? = io; avio_closep(&p) }
        let declared = avio_size(io)
        if declared > limits.maxBytes {
            throw MediaError(.fetch, .permanent, file: name, "source is \(declared) bytes, over the \(limits.maxBytes)-byte limit")
        }
        guard FileManager.default.createFile(atPath: path, contents: nil), let out = FileHandle(forWritingAtPath: path) else {
            throw MediaError(.fetch, .retryable, file: name, "cannot write \(path)")
        }
        defer { try? out.close() }
        var total: Int64 = 0
        var buf = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            ret = buf.withUnsafeMutableBufferPointer { avio_read(io, $0.baseAddress, Int32($0.count)) }
            if ret == tl_averror_eof() || ret == 0 { break }
            if ret < 0 { throw MediaError(.fetch, fetchClass(ret, uri: uri), file: name, "reading \(uri) failed: \(avErrorString(ret))") }
            total += Int64(ret)
            if total > limits.maxBytes {
                throw MediaError(.fetch, .permanent, file: name, "source exceeds the \(limits.maxBytes)-byte limit")
            }
            do { try out.write(contentsOf: buf[0..<Int(ret)]) } catch {
                throw MediaError(.fetch, .retryable, file: name, "cannot write \(path): \(error.localizedDescription)")
            }
        }
        if declared > 0 && total != declared {
            throw MediaError(.fetch, .retryable, file: name, "transfer ended after \(total) of \(declared) bytes")
        }
        return total
    }

    /// Missing files and HTTP 4xx are permanent; network trouble and 5xx are worth retrying.
    static func fetchClass(_ code: Int32, uri: String) -> MediaError.Class {
        let permanentCodes: [Int32] = [tl_averror(ENOENT), tl_averror(EACCES), tl_averror(EISDIR), -0x3430_34F8 /* HTTP 404 */,
                                       -0x3330_34F8 /* 403 */, -0x3130_34F8 /* 401 */, -0x3030_34F8 /* 400 */, -0x5858_34F8 /* 4xx */]
        if permanentCodes.contains(code) { return .permanent }
        return .retryable
    }
}
