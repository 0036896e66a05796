import Foundation
import Glibc

/// Why a ZeroMQ peer at a `tcp://` endpoint may be silent, found by asking the system directly:
/// ZeroMQ itself retries a name that does not resolve or a port where nothing listens without a
/// word, so a wrong host name, a coordinator not started and wrong keys all look the same.
public enum Reachability: Sendable, Equatable {
    /// The host name does not resolve (getaddrinfo's reason).
    case unresolvable(host: String, why: String)
    /// Nothing listens at the address (the connection was refused).
    case refused(address: String)
    /// The address could not be reached (no route, network down) or did not answer a connection in time.
    case unreachable(address: String, why: String)
    /// A connection was accepted: something listens there.
    case listening(address: String)

    /// For a person, in sentences: what was found, and what to check.
    public var finding: String {
        switch self {
        case .unresolvable(let host, let why):
            "The host name '\(host)' does not resolve (\(why)). Is it spelled right, and known to DNS or /etc/hosts on this machine?"
        case .refused(let address):
            "Nothing listens at \(address) (connection refused). Is `coord serve` running there, bound (--bind) to that port?"
        case .unreachable(let address, let why):
            "\(address) cannot be reached (\(why)). Is the address right, and does a firewall let this machine through?"
        case .listening(let address):
            "Something listens at \(address) but does not answer. Is it `coord serve`, and do its keys match yours?"
        }
    }

    /// The finding when it explains the silence by itself (the peer cannot be reached at all); nil
    /// when something listens there (then a busy peer, the wrong program or wrong keys).
    public var unlessListening: String? {
        if case .listening = self { return nil }
        return finding
    }

    /// Probes `endpoint` (`tcp://host:port`; nil for other transports or one it cannot parse):
    /// resolves the host and opens, then closes, one TCP connection to each address it resolves
    /// to (at most `timeout` seconds each) until one is accepted. Blocks the caller.
    public static func probe(_ endpoint: String, timeout: Double = 1) -> Reachability? {
        guard let (host, port) = hostAndPort(endpoint) else { return nil }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, port, &hints, &list)
        guard rc == 0, let first = list else { return .unresolvable(host: host, why: String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(list) }
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var result = Reachability.unreachable(address: address, why: "no address")
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let ai = next {
            next = ai.pointee.ai_next
            switch connectOnce(ai.pointee, timeout: timeout) {
            case 0: return .listening(address: address)
            case ECONNREFUSED: result = .refused(address: address)
            case ETIMEDOUT: if case .refused = result {} else { result = .unreachable(address: address, why: "no answer to a connection within \(timeout.formatted()) s") }
            case let code: if case .refused = result {} else { result = .unreachable(address: address, why: String(cString: strerror(code))) }
            }
        }
        return result
    }

    /// What is wrong with an address given on the command line, in a sentence; nil when it is
    /// one ZeroMQ takes. `binding`: a listener's, whose host and port may be `*` (any address,
    /// a free port).
    public static func problem(with endpoint: String, binding: Bool = false) -> String? {
        let shape = binding ? "tcp://ADDRESS:PORT (e.g. tcp://0.0.0.0:7400) or ipc://PATH" : "tcp://HOST:PORT (e.g. tcp://render-1:7400) or ipc://PATH"
        if endpoint.hasPrefix("ipc://") { return endpoint.count > 6 ? nil : "'\(endpoint)' names no path: it takes \(shape)" }
        guard endpoint.hasPrefix("tcp://") else { return "'\(endpoint)' is not an address it takes: \(shape)" }
        guard let (host, port) = tcpParts(endpoint), !host.isEmpty, !host.hasSuffix(":") else {
            return "'\(endpoint)' has no port: it takes \(shape)"
        }
        // A listener may take a free port: * or 0.
        if binding && port == "*" { return nil }
        guard let n = Int(port), ((binding ? 0 : 1)...65535).contains(n) else {
            return "'\(endpoint)' has no port number (\(binding ? 0 : 1)-65535): it takes \(shape)"
        }
        return binding || hostAndPort(endpoint) != nil ? nil : "'\(endpoint)' names no host: it takes \(shape)"
    }

    /// Where a client on `thisHost` reaches a listener that bound `endpoint` on `host`: a
    /// wildcard address (0.0.0.0, *, ::) is that host's name, or loopback on the same host; nil
    /// while the port is not known (* or 0, before it listened), and for another host's ipc:// path.
    public static func address(ofListener endpoint: String, on host: String, from thisHost: String) -> String? {
        if endpoint.hasPrefix("ipc://") { return host == thisHost ? endpoint : nil }
        guard let (bound, port) = tcpParts(endpoint), let n = Int(port), n > 0 else { return nil }
        guard ["0.0.0.0", "*", "[::]", "::", "[::0]"].contains(bound) else { return endpoint }
        return "tcp://\(host == thisHost ? "127.0.0.1" : host):\(n)"
    }

    /// `tcp://host:port`, `tcp://[v6]:port` or `tcp://source;host:port` → its host (an IPv6
    /// address in its brackets) and port as written; nil for another transport, or without a colon.
    static func tcpParts(_ endpoint: String) -> (host: Substring, port: Substring)? {
        guard endpoint.hasPrefix("tcp://") else { return nil }
        var rest = Substring(endpoint.dropFirst(6))
        if let semicolon = rest.lastIndex(of: ";") { rest = rest[rest.index(after: semicolon)...] }
        guard let colon = rest.lastIndex(of: ":") else { return nil }
        return (rest[..<colon], rest[rest.index(after: colon)...])
    }

    /// `tcp://host:port`, `tcp://[v6]:port` or `tcp://source;host:port` → (host, port), a host
    /// and port to connect to.
    static func hostAndPort(_ endpoint: String) -> (String, String)? {
        guard var (host, port) = tcpParts(endpoint) else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty, host != "*", !port.isEmpty, port.allSatisfy(\.isNumber) else { return nil }
        return (String(host), String(port))
    }

    /// 0 when a connection to `ai` was accepted, else the errno that ended the try.
    private static func connectOnce(_ ai: addrinfo, timeout: Double) -> Int32 {
        let fd = socket(ai.ai_family, ai.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), ai.ai_protocol)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        if connect(fd, ai.ai_addr, ai.ai_addrlen) == 0 { return 0 }
        guard errno == EINPROGRESS else { return errno }
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let ready = poll(&p, 1, Int32(timeout * 1000))
        guard ready > 0 else { return ready == 0 ? ETIMEDOUT : errno }
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else { return errno }
        return code
    }
}
