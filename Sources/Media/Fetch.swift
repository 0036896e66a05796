import Foundation
import ThreadlineCore
internal import CFFmpeg
internal import CSupport

/// Limits for bringing a source in.
public struct FetchLimits: Sendable, Hashable, Codable {
    /// Seconds without progress before a read gives up.
    public var timeout: Double = 30
    /// Seconds one attempt may take in all, however the server paces its bytes.
    public var deadline: Double = 600
    /// Largest source accepted, in bytes.
    public var maxBytes: Int64 = 4 << 30
    /// Tries for transient network errors.
    public var attempts: Int = 3
    /// Whether URLs may point at loopback, link-local or private addresses (the embedded
    /// default: the user's own network). A farm's workers refuse them: a submitter must not
    /// reach what listens beside the worker.
    public var allowPrivateAddresses = true
    public init(timeout: Double = 30, deadline: Double = 600, maxBytes: Int64 = 4 << 30, attempts: Int = 3, allowPrivateAddresses: Bool = true) {
        self.timeout = timeout; self.deadline = deadline; self.maxBytes = maxBytes; self.attempts = attempts
        self.allowPrivateAddresses = allowPrivateAddresses
    }
}

/// Copies an http(s):// source to a local file through libavformat's I/O layer (only its web
/// protocols), with a timeout, an overall deadline, a size limit and retries on transient
/// errors. Returns the byte count. The caller removes `path` when this throws. `isCancelled` is
/// asked between reads (of up to 1 MiB) and before each try.
public enum Fetch {
    public static func copy(from uri: String, to path: String, limits: FetchLimits = .init(), isCancelled: () -> Bool = { false }) throws -> Int64 {
        _ = configureLogging
        let name = (uri as NSString).lastPathComponent
        guard let url = URL(string: uri), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), let host = url.host, !host.isEmpty else {
            throw MediaError(.fetch, .permanent, file: name, "only http(s) URLs can be fetched, not \(uri)")
        }
        var lastError: MediaError?
        for attempt in 1...max(1, limits.attempts) {
            do {
                try stopIfCancelled(isCancelled, stage: .fetch, file: name)
                return try copyOnce(from: uri, host: host, to: path, limits: limits, name: name, isCancelled: isCancelled)
            } catch let e as MediaError where e.errorClass == .retryable && attempt < limits.attempts && !isCancelled() {
                lastError = e
                Thread.sleep(forTimeInterval: 0.2 * Double(1 << (attempt - 1)))
            }
        }
        throw lastError!
    }

    static func isPrivateIPv4(_ b: [UInt8]) -> Bool { b.count == 4 && tl_ipv4_is_private(b) != 0 }

    /// Whether the connect-time guard (CSupport/netguard.c) is in place in this process.
    public static var addressGuardInstalled: Bool { tl_fetch_guard_installed() != 0 }

    /// Why a farm fetch was refused by the guard. It names only the URL's host, so a refusal reads
    /// the same whatever listens on which port.
    static func privateAddress(_ host: String) -> String {
        "\(host) leads to a loopback, link-local or private address (directly or by a redirect); this worker fetches only from public addresses (a farm operator can allow others with worker --allow-private-urls)"
    }

    private static func copyOnce(from uri: String, host: String, to path: String, limits: FetchLimits, name: String,
                                 isCancelled: () -> Bool) throws -> Int64 {
        var io: UnsafeMutablePointer<AVIOContext>? = nil
        let deadline = UnsafeMutablePointer<Double>.allocate(capacity: 1)
        defer { deadline.deallocate() }
        deadline.pointee = tl_monotonic_now() + limits.deadline
        var interrupt = tl_deadline_callback(deadline)
        func overDeadline() -> MediaError {
            MediaError(.fetch, .permanent, file: name, "the download took longer than the \(Int(limits.deadline)) s limit")
        }
        // On a farm every connection this thread makes while fetching is checked where it is made,
        // against the address actually used: the URL's own host, any redirect, any DNS answer.
        if !limits.allowPrivateAddresses { tl_fetch_guard(1) }
        defer { tl_fetch_guard(0) }
        var opts: OpaquePointer? = nil
        // Only the web: a source URL cannot name another of libavformat's protocols.
        av_dict_set(&opts, "protocol_whitelist", "http,https,tls,tcp", 0)
        av_dict_set(&opts, "rw_timeout", "\(Int64(limits.timeout * 1_000_000))", 0)
        av_dict_set(&opts, "timeout", "\(Int64(limits.timeout * 1_000_000))", 0)
        var ret = avio_open2(&io, uri, AVIO_FLAG_READ, &interrupt, &opts)
        av_dict_free(&opts)
        guard ret >= 0, let io else {
            if ret == tl_averror_exit() { throw overDeadline() }
            if tl_fetch_guard_refused() != 0 { throw MediaError(.fetch, .permanent, file: name, privateAddress(host)) }
            throw MediaError(.fetch, fetchClass(ret, uri: uri), file: name, "cannot open \(uri): \(describe(ret))")
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
            try stopIfCancelled(isCancelled, stage: .fetch, file: name)
            ret = buf.withUnsafeMutableBufferPointer { avio_read(io, $0.baseAddress, Int32($0.count)) }
            if ret == tl_averror_eof() || ret == 0 { break }
            if ret == tl_averror_exit() || tl_deadline_passed(deadline) != 0 { throw overDeadline() }
            if ret < 0 {
                if tl_fetch_guard_refused() != 0 { throw MediaError(.fetch, .permanent, file: name, privateAddress(host)) }
                throw MediaError(.fetch, fetchClass(ret, uri: uri), file: name, "reading \(uri) failed: \(describe(ret))")
            }
            total += Int64(ret)
            if total > limits.maxBytes {
                throw MediaError(.fetch, .permanent, file: name, "source exceeds the \(limits.maxBytes)-byte limit")
            }
            do { try out.write(contentsOf: buf[0..<Int(ret)]) } catch {
                throw MediaError(.fetch, .retryable, file: name, "cannot write \(path): \(FileChecks.reason(error))", writing: error)
            }
        }
        if declared > 0 && total != declared {
            throw MediaError(.fetch, .retryable, file: name, "transfer ended after \(total) of \(declared) bytes")
        }
        return total
    }

    /// HTTP 4xx, a redirect loop and unknown protocols are permanent; network trouble and 5xx are
    /// worth retrying.
    static func fetchClass(_ code: Int32, uri: String) -> MediaError.Class {
        let permanentCodes: [Int32] = [tl_averror(ENOENT), tl_averror(EACCES), tl_averror(EISDIR), -0x3430_34F8 /* HTTP 404 */,
                                       -0x3330_34F8 /* 403 */, -0x3130_34F8 /* 401 */, -0x3030_34F8 /* 400 */, -0x5858_34F8 /* 4xx */,
                                       tl_averror(EIO) /* libavformat's "too many redirects" */, tl_averror_protocol_not_found(),
                                       tl_averror(EINVAL)]
        if permanentCodes.contains(code) { return .permanent }
        return .retryable
    }

    /// libavformat's reason, except that every way of failing to reach a server reads the same:
    /// "refused" against "timed out" would tell a submitter what listens where.
    static func describe(_ code: Int32) -> String {
        let unreachable = [ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, ECONNRESET, ECONNABORTED].map { tl_averror($0) }
        if unreachable.contains(code) { return "the server could not be reached" }
        if code == tl_averror(EIO) { return "the server's answer could not be used (too many redirects, or a broken response)" }
        return avErrorString(code)
    }
}
