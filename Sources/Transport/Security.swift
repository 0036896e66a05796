import Foundation
import Synchronization
internal import CZeroMQ

/// A CURVE key pair in Z85 text (40 characters each). Key files look like
///
///     # Threadline CURVE key: worker-1
///     public-key = "…"
///     secret-key = "…"     (only in the secret file)
public struct CurveKeyPair: Sendable, Equatable {
    public var publicKey: String
    public var secretKey: String?

    public static func generate() throws -> CurveKeyPair {
        var pub = [CChar](repeating: 0, count: 41), sec = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&pub, &sec) == 0 else { throw TransportError.last("zmq_curve_keypair") }
        return CurveKeyPair(publicKey: String(cString: pub), secretKey: String(cString: sec))
    }

    /// The 32 raw bytes of a Z85 key, or nil if it is not one.
    public static func decode(_ z85: String) -> [UInt8]? {
        guard z85.utf8.count == 40 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        return zmq_z85_decode(&out, z85) == nil ? nil : out
    }
    static func encode(_ raw: [UInt8]) -> String? {
        guard raw.count == 32 else { return nil }
        var out = [CChar](repeating: 0, count: 41)
        return zmq_z85_encode(&out, raw, 32) == nil ? nil : String(cString: out)
    }

    var publicBytes: [UInt8] { Self.decode(publicKey) ?? [] }
    var secretBytes: [UInt8] { secretKey.flatMap(Self.decode) ?? [] }

    /// Reads a key file; a secret file holds both keys, a public one only the public key.
    public static func load(_ path: String) throws -> CurveKeyPair {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw TransportError(operation: "read key", code: 0, message: "cannot read the key file \(path)")
        }
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            fields[parts[0]] = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        guard let pub = fields["public-key"], decode(pub) != nil else {
            throw TransportError(operation: "read key", code: 0, message: "\(path) has no valid public-key line (make keys with `coord keygen`)")
        }
        if let sec = fields["secret-key"], decode(sec) == nil {
            throw TransportError(operation: "read key", code: 0, message: "\(path) has a malformed secret-key line")
        }
        return CurveKeyPair(publicKey: pub, secretKey: fields["secret-key"])
    }

    /// A client's side of CURVE from files: its own secret key file and the server's public key
    /// file (what `worker` and `coord` take on their command lines).
    public static func client(secretKeyFile: String, serverKeyFile: String) throws -> (keys: CurveKeyPair, serverPublicKey: String) {
        let keys = try load(secretKeyFile)
        guard keys.secretKey != nil else {
            throw TransportError(operation: "read key", code: 0, message: "\(secretKeyFile) holds no secret key; pass the .key file, not the .pub")
        }
        return (keys, try load(serverKeyFile).publicKey)
    }

    /// The text of a public key file for `name`.
    public func publicText(_ name: String) -> String { "# Threadline CURVE key: \(name)\npublic-key = \"\(publicKey)\"\n" }

    /// Writes `NAME.key` (both keys, mode 0600) and `NAME.pub` (public key only) into `directory`.
    public func write(directory: String, name: String) throws -> (secret: String, public: String) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let secretPath = "\(directory)/\(name).key", publicPath = "\(directory)/\(name).pub"
        for p in [secretPath, publicPath] where FileManager.default.fileExists(atPath: p) {
            throw TransportError(operation: "keygen", code: 0, message: "\(p) already exists; remove it or choose another name")
        }
        let header = publicText(name)
        guard FileManager.default.createFile(atPath: secretPath, contents: Data((header + "secret-key = \"\(secretKey ?? "")\"\n").utf8),
                                             attributes: [.posixPermissions: 0o600]),
              FileManager.default.createFile(atPath: publicPath, contents: Data(header.utf8), attributes: [.posixPermissions: 0o644]) else {
            throw TransportError(operation: "keygen", code: 0, message: "cannot write keys into \(directory)")
        }
        return (secretPath, publicPath)
    }
}

/// What a peer's key lets it do on a coordinator.
public enum PeerRole: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Registers as a worker: receives assignments, returns artifacts.
    case worker
    /// Submits runs and sees, downloads and cancels its own.
    case submitter
    /// An operator: sees, downloads and cancels every run.
    case admin
    public static func < (a: PeerRole, b: PeerRole) -> Bool { a.rawValue < b.rawValue }
}

/// Who sent a message, as the ZAP handler admitted it: the CURVE public key and its roles.
/// Without CURVE (a private Unix socket, or --insecure on loopback) there is no key and the peer
/// has every role: whoever can reach the socket is the machine's own user.
public struct Peer: Sendable, Hashable {
    public var key: String?
    public var roles: Set<PeerRole>
    public static let local = Peer(key: nil, roles: Set(PeerRole.allCases))
    public init(key: String?, roles: Set<PeerRole>) { self.key = key; self.roles = roles }

    /// The ZAP user id that carries a peer from the handshake to each of its messages.
    var userID: String { roles.sorted().map(\.rawValue).joined(separator: "+") + ":" + (key ?? "") }

    /// Parses `userID` (nil or empty: a peer admitted without ZAP).
    public init(userID: String?) {
        guard let userID, !userID.isEmpty, let colon = userID.firstIndex(of: ":") else { self = .local; return }
        roles = Set(userID[..<colon].split(separator: "+").compactMap { PeerRole(rawValue: String($0)) })
        let k = String(userID[userID.index(after: colon)...])
        key = k.isEmpty ? nil : k
    }

    public func `is`(_ role: PeerRole) -> Bool { roles.contains(role) }
    /// Admins, and peers without a key (the machine's own user), see every run; others their own.
    public var seesEveryRun: Bool { `is`(.admin) || key == nil }
    /// A short form of the key for logs and lineage.
    public var name: String { key.map { String($0.prefix(8)) } ?? "local" }
}

/// A ZAP handler (ZeroMQ RFC 27) for one domain: admits CURVE clients whose public key is in one
/// of the allow-list folders (`*.pub` files, re-read on every handshake so keys can be added or
/// removed while running) with the roles of the folders it is in; refuses everyone else. Runs on
/// its own thread in the server's context.
public final class ZapHandler: Sendable {
    public let domain: String
    public let allow: [PeerRole: String]
    /// How old a reading of the allow-lists may be: a key removed loses its roles within this.
    public let maxAge: Double
    /// How often a handshake with a key the last reading lacks may read the lists again (a key
    /// just added works at once; a stranger's handshakes cannot keep the folders being read).
    public let unknownKeyReread: Double
    let stopped = Mutex(false)
    let done = DispatchSemaphore(value: 0)
    let onRefuse: @Sendable (String) -> Void
    /// The allow-lists as last read, and when. Read on the handler's own thread (at start, every
    /// `maxAge`, and for a handshake with a key not in the reading), never on a caller's: a farm
    /// with a thousand keys takes tens of milliseconds to read them, which every handshake and,
    /// every 2 s, the coordinator's own thread used to spend.
    /// (When: on the monotonic clock. On the wall clock a step back of an hour kept a removed
    /// key's roles for that hour.)
    let lastRead = Mutex<(keys: [String: Set<PeerRole>], at: ContinuousClock.Instant)?>(nil)
    /// How many times the lists were read (for tests).
    let readings = Mutex(0)

    public init(context: MessagingContext, domain: String, allow: [PeerRole: String], maxAge: Double = 2, unknownKeyReread: Double = 0.2,
                onRefuse: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.domain = domain; self.allow = allow; self.maxAge = maxAge; self.unknownKeyReread = unknownKeyReread; self.onRefuse = onRefuse
        let socket = try Socket(context, .rep)
        try socket.bind("inproc://zeromq.zap.01")
        _ = allowedKeys()
        let box = UncheckedBox(socket)
        let thread = Thread { [self] in
            let socket = box.value
            while !stopped.withLock({ $0 }) {
                if age() > maxAge { _ = allowedKeys() }
                guard let frames = try? socket.receive(timeoutMs: 100) else { continue }
                let reply = answer(frames)
                _ = try? socket.send(reply, dontWait: false)
            }
            socket.close()
            done.signal()
        }
        thread.name = "zap"
        thread.start()
    }

    public func stop() {
        stopped.withLock { $0 = true }
        done.wait()
    }

    /// Reads the allow-lists: the public keys allowed now, with their roles.
    public func allowedKeys() -> [String: Set<PeerRole>] {
        var keys: [String: Set<PeerRole>] = [:]
        for (role, directory) in allow {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for f in files where f.hasSuffix(".pub") || f.hasSuffix(".key") {
                if let k = try? CurveKeyPair.load("\(directory)/\(f)") { keys[k.publicKey, default: []].insert(role) }
            }
        }
        lastRead.withLock { $0 = (keys, .now) }
        readings.withLock { $0 += 1 }
        return keys
    }

    /// Seconds since the lists were last read.
    func age() -> Double {
        lastRead.withLock { r in r.map { $0.at.duration(to: .now) / .seconds(1) } ?? .infinity }
    }

    /// The roles `key` has in the allow-lists, as the handler last read them (at most `maxAge`
    /// seconds ago): a key removed from them loses its roles on connections already open, not
    /// only at the next handshake. Reads nothing on the caller's thread.
    public func roles(of key: String) -> Set<PeerRole> {
        lastRead.withLock { $0?.keys[key] } ?? []
    }

    func answer(_ frames: [Data]) -> [Data] {
        // version, request id, domain, address, identity, mechanism, credentials…
        guard frames.count >= 6 else { return [Data("1.0".utf8), Data(), Data("500".utf8), Data("malformed ZAP request".utf8), Data(), Data()] }
        let requestID = frames[1]
        let reqDomain = String(decoding: frames[2], as: UTF8.self)
        let address = String(decoding: frames[3], as: UTF8.self)
        let mechanism = String(decoding: frames[5], as: UTF8.self)
        func reply(_ code: String, _ text: String, user: String = "") -> [Data] {
            [Data("1.0".utf8), requestID, Data(code.utf8), Data(text.utf8), Data(user.utf8), Data()]
        }
        guard reqDomain == domain else { return refuse(reply, "wrong ZAP domain '\(reqDomain)' from \(address)") }
        guard mechanism == "CURVE", frames.count >= 7, let key = CurveKeyPair.encode(Array(frames[6])) else {
            return refuse(reply, "\(address) did not use CURVE")
        }
        // The last reading serves a key it holds; one it lacks (just added, or a stranger) reads
        // the lists again, at most every `unknownKeyReread` seconds.
        var known = lastRead.withLock { $0?.keys[key] }
        if known == nil && age() > unknownKeyReread { known = allowedKeys()[key] }
        guard let roles = known, !roles.isEmpty else {
            return refuse(reply, "\(address) presented a public key in none of the allow-lists (\(allow.values.sorted().joined(separator: ", "))): \(key)")
        }
        return reply("200", "OK", user: Peer(key: key, roles: roles).userID)
    }

    private func refuse(_ reply: (String, String, String) -> [Data], _ why: String) -> [Data] {
        onRefuse(why)
        return reply("400", why, "")
    }
}

/// Moves a non-Sendable value into a thread that becomes its only user.
struct UncheckedBox<T>: @unchecked Sendable { let value: T; init(_ v: T) { value = v } }
