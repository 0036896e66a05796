import Foundation
import Glibc
internal import CZeroMQ

/// A ZeroMQ failure: which call, and libzmq's reason.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var code: Int32
    public var message: String
    public var description: String { "\(operation) failed: \(message)" }

    static func last(_ operation: String) -> TransportError {
        let code = tl_zmq_errno()
        return TransportError(operation: operation, code: code, message: String(cString: zmq_strerror(code)))
    }
}

/// A ZeroMQ context (thread-safe in libzmq). Close every socket before the context goes away.
public final class MessagingContext: @unchecked Sendable {
    let ptr: UnsafeMutableRawPointer
    public init() { ptr = zmq_ctx_new() }
    deinit { zmq_ctx_term(ptr) }
}

/// One ZeroMQ socket. Not thread-safe: confine it to one thread.
public final class Socket {
    public enum Kind: Sendable {
        case router, dealer, pair, push, pull, rep
        var raw: Int32 {
            switch self {
            case .rep: return ZMQ_REP
            case .router: return ZMQ_ROUTER
            case .dealer: return ZMQ_DEALER
            case .pair: return ZMQ_PAIR
            case .push: return ZMQ_PUSH
            case .pull: return ZMQ_PULL
            }
        }
    }

    fileprivate(set) var ptr: UnsafeMutableRawPointer?
    public let kind: Kind
    /// Largest message accepted; bigger ones are dropped by libzmq (and the peer disconnected).
    public static let defaultMaxMessageSize: Int64 = 64 << 20

    public init(_ context: MessagingContext, _ kind: Kind, maxMessageSize: Int64 = Socket.defaultMaxMessageSize) throws {
        guard let s = zmq_socket(context.ptr, kind.raw) else { throw TransportError.last("zmq_socket") }
        ptr = s
        self.kind = kind
        try set(ZMQ_LINGER, Int32(0))
        try set(ZMQ_MAXMSGSIZE, maxMessageSize)
        if kind == .router { try set(ZMQ_ROUTER_MANDATORY, Int32(1)) }
    }
    deinit { close() }

    public func close() {
        if let p = ptr { zmq_close(p); ptr = nil }
    }

    /// Closes after giving queued outgoing messages up to `lingerMs` to leave.
    public func close(lingerMs: Int32) {
        try? set(ZMQ_LINGER, lingerMs)
        close()
    }

    func set(_ option: Int32, bytes: [UInt8]) throws {
        guard zmq_setsockopt(ptr, option, bytes, bytes.count) == 0 else { throw TransportError.last("zmq_setsockopt(\(option))") }
    }
    func set(_ option: Int32, _ value: Int32) throws {
        var v = value
        guard zmq_setsockopt(ptr, option, &v, MemoryLayout<Int32>.size) == 0 else { throw TransportError.last("zmq_setsockopt(\(option))") }
    }
    func set(_ option: Int32, _ value: Int64) throws {
        var v = value
        guard zmq_setsockopt(ptr, option, &v, MemoryLayout<Int64>.size) == 0 else { throw TransportError.last("zmq_setsockopt(\(option))") }
    }

    /// The routing identity a DEALER presents to a ROUTER.
    public func setIdentity(_ id: String) throws {
        let bytes = Array(id.utf8)
        guard zmq_setsockopt(ptr, ZMQ_ROUTING_ID, bytes, bytes.count) == 0 else { throw TransportError.last("zmq_setsockopt(ROUTING_ID)") }
    }

    /// Binds and returns the endpoint actually bound (a `*` port becomes the real one).
    @discardableResult
    public func bind(_ endpoint: String) throws -> String {
        guard zmq_bind(ptr, endpoint) == 0 else {
            var e = TransportError.last("bind \(endpoint)")
            e.message += " (is another coordinator already using it?)"
            throw e
        }
        var buf = [CChar](repeating: 0, count: 256)
        var size = buf.count
        zmq_getsockopt(ptr, ZMQ_LAST_ENDPOINT, &buf, &size)
        return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Incoming messages held before libzmq stops reading the connection (a slow reader, in
    /// tests: what it is sent then waits in its sender's queue).
    func setReceiveHighWaterMark(_ messages: Int32) throws { try set(ZMQ_RCVHWM, messages) }

    /// Reconnect after a lost connection, backing off from `initialMs` up to `maximumMs`.
    public func setReconnect(initialMs: Int32, maximumMs: Int32) throws {
        try set(ZMQ_RECONNECT_IVL, initialMs)
        try set(ZMQ_RECONNECT_IVL_MAX, maximumMs)
    }

    /// ZMTP heartbeats: a connection silent for `timeoutMs` is dropped (and a client reconnects),
    /// so a half-open TCP connection after a network cut does not linger.
    public func setHeartbeat(intervalMs: Int32, timeoutMs: Int32) throws {
        try set(ZMQ_HEARTBEAT_IVL, intervalMs)
        try set(ZMQ_HEARTBEAT_TIMEOUT, timeoutMs)
        try set(ZMQ_HEARTBEAT_TTL, timeoutMs)
    }

    /// Server side of CURVE: encrypt, and ask the ZAP handler of `domain` about every peer.
    /// ZAP_ENFORCE_DOMAIN makes a missing handler a refusal rather than an open door.
    public func makeCurveServer(secretKey: CurveKeyPair, domain: String) throws {
        try set(ZMQ_CURVE_SERVER, Int32(1))
        try set(ZMQ_CURVE_SECRETKEY, bytes: secretKey.secretBytes)
        try set(ZMQ_ZAP_DOMAIN, bytes: Array(domain.utf8))
        try set(tl_zmq_zap_enforce_domain(), Int32(1))
    }

    /// Client side of CURVE: this peer's key pair and the server's public key.
    public func makeCurveClient(keys: CurveKeyPair, serverPublicKey: String) throws {
        guard let server = CurveKeyPair.decode(serverPublicKey) else {
            throw TransportError(operation: "CURVE", code: 0, message: "the server public key is not a 40-character Z85 key")
        }
        try set(ZMQ_CURVE_SERVERKEY, bytes: server)
        try set(ZMQ_CURVE_PUBLICKEY, bytes: keys.publicBytes)
        try set(ZMQ_CURVE_SECRETKEY, bytes: keys.secretBytes)
    }

    public func connect(_ endpoint: String) throws {
        guard zmq_connect(ptr, endpoint) == 0 else { throw TransportError.last("connect \(endpoint)") }
    }

    /// Drops the connection to `endpoint` (what is queued on it goes) and dials it again. libzmq
    /// reconnects a connection that breaks, but not one a ROUTER never reads: one that came
    /// while the peer's identity was still held by the connection before (a coordinator stalled
    /// past the timeout, which had not yet found the old one closed) stays open and unread.
    public func redial(_ endpoint: String) throws {
        _ = zmq_disconnect(ptr, endpoint)
        try connect(endpoint)
    }

    /// Sends a multipart message. Returns false when the peer is unknown or would block.
    @discardableResult
    public func send(_ frames: [Data], dontWait: Bool = true) throws -> Bool {
        for (i, frame) in frames.enumerated() {
            var flags: Int32 = dontWait ? ZMQ_DONTWAIT : 0
            if i < frames.count - 1 { flags |= ZMQ_SNDMORE }
            let rc = frame.withUnsafeBytes { zmq_send(ptr, $0.baseAddress, $0.count, flags) }
            if rc < 0 {
                let code = tl_zmq_errno()
                if code == tl_eagain() || code == tl_ehostunreach() { return false }
                throw TransportError.last("zmq_send")
            }
        }
        return true
    }

    /// Receives one multipart message, waiting up to `timeoutMs` (0: don't wait; -1: forever).
    public func receive(timeoutMs: Int32 = 0) throws -> [Data]? {
        try receiveFromPeer(timeoutMs: timeoutMs)?.frames
    }

    /// Receives one multipart message and who sent it: the ZAP user id of the connection it came
    /// on (see `Peer`), which a peer cannot forge.
    public func receiveFromPeer(timeoutMs: Int32 = 0) throws -> (frames: [Data], peer: Peer)? {
        if timeoutMs != 0 {
            guard try Socket.poll([self], timeoutMs: timeoutMs).first == true else { return nil }
        }
        var frames: [Data] = []
        var userID: String? = nil
        while true {
            var msg = zmq_msg_t()
            zmq_msg_init(&msg)
            defer { zmq_msg_close(&msg) }
            let rc = zmq_msg_recv(&msg, ptr, ZMQ_DONTWAIT)
            if rc < 0 {
                let code = tl_zmq_errno()
                if code == tl_eagain() && frames.isEmpty { return nil }
                if code == tl_eintr() { continue }
                throw TransportError.last("zmq_msg_recv")
            }
            // A ROUTER's routing-id frame carries no metadata; the peer's own frames do.
            if userID == nil, let u = zmq_msg_gets(&msg, "User-Id") { userID = String(cString: u) }
            frames.append(Data(bytes: zmq_msg_data(&msg), count: zmq_msg_size(&msg)))
            if zmq_msg_more(&msg) == 0 { break }
        }
        return (frames, Peer(userID: userID))
    }

    /// Waits up to `timeoutMs` for a message on this socket or a signal on `wakeup`; true when a
    /// message is waiting.
    public func wait(timeoutMs: Int32, wakeup: Wakeup) throws -> Bool {
        var items = [zmq_pollitem_t(socket: ptr, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0),
                     zmq_pollitem_t(socket: nil, fd: wakeup.fd, events: Int16(ZMQ_POLLIN), revents: 0)]
        let rc = zmq_poll(&items, 2, Int(timeoutMs))
        if rc < 0 {
            if tl_zmq_errno() == tl_eintr() { return false }
            throw TransportError.last("zmq_poll")
        }
        if items[1].revents != 0 { wakeup.drain() }
        return (items[0].revents & Int16(ZMQ_POLLIN)) != 0
    }

    /// Which of `sockets` have a message waiting, after at most `timeoutMs`.
    public static func poll(_ sockets: [Socket], timeoutMs: Int32) throws -> [Bool] {
        var items = sockets.map { zmq_pollitem_t(socket: $0.ptr, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0) }
        let rc = zmq_poll(&items, Int32(items.count), Int(timeoutMs))
        if rc < 0 {
            if tl_zmq_errno() == tl_eintr() { return sockets.map { _ in false } }
            throw TransportError.last("zmq_poll")
        }
        return items.map { ($0.revents & Int16(ZMQ_POLLIN)) != 0 }
    }
}

/// Counts the connections a socket completes (their ZMTP handshake, CURVE's included), through
/// libzmq's socket monitor. For a client one past the first means it dialled its peer again: a
/// peer restarted since (at once, under systemd or Kubernetes) knows nothing it was told before.
/// Confined to the monitored socket's thread; close it after that socket.
public final class HandshakeMonitor {
    private let pair: Socket
    /// Handshakes completed so far.
    private var count = 0

    public init(_ context: MessagingContext, watching socket: Socket) throws {
        let address = "inproc://threadline-monitor-\(UUID().uuidString)"
        guard zmq_socket_monitor(socket.ptr, address, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0 else { throw TransportError.last("zmq_socket_monitor") }
        pair = try Socket(context, .pair)
        try pair.connect(address)
    }

    /// Reads the events that came since the last call (without waiting); true when a handshake
    /// past the first completed among them.
    public func redialled() -> Bool {
        let before = count
        // The monitor tells only handshakes (`init`): one message each.
        while (try? pair.receive()) != nil { count += 1 }
        return count > max(before, 1)
    }

    public func close() { pair.close() }
}

/// Wakes a thread blocked in `Socket.wait` from another thread (an eventfd).
public final class Wakeup: Sendable {
    let fd: Int32
    public init() { fd = tl_eventfd() }
    deinit { Glibc.close(fd) }
    public func signal() { tl_eventfd_signal(fd) }
    func drain() { tl_eventfd_drain(fd) }
}
