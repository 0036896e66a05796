import Foundation
import Hummingbird
import Lineage
import Logging
import Media
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import ThreadlineCore

/// Figures only a running coordinator knows (`coord serve --http`); `coord dashboard` has none.
public struct LiveFigures: Codable, Sendable, Equatable {
    public struct Worker: Codable, Sendable, Equatable {
        public var id: String
        public var host: String
        public var slots: Int
        public var busy: Int
        public var heartbeatAgeS: Double
        public var draining: Bool
        /// What each busy slot runs ("run 3: render/4").
        public var running: [String]
        /// Seconds it still gets no work for, stages that failed on it having succeeded elsewhere (nil: it takes work).
        public var sidelinedS: Double?
        /// Artifacts its store holds as far as the coordinator knows.
        public var holds: Int
        /// How far its clock is behind the coordinator's in seconds (negative: ahead), when by more than a little.
        public var clockOffsetS: Double?
        public init(id: String, host: String, slots: Int, busy: Int, heartbeatAgeS: Double, draining: Bool, running: [String],
                    sidelinedS: Double? = nil, holds: Int = 0, clockOffsetS: Double? = nil) {
            self.id = id; self.host = host; self.slots = slots; self.busy = busy; self.heartbeatAgeS = heartbeatAgeS
            self.draining = draining; self.running = running; self.sidelinedS = sidelinedS; self.holds = holds; self.clockOffsetS = clockOffsetS
        }
    }
    /// Units of work ready and waiting for a slot (a render's decode+transform+encode is one).
    public var queueDepth: Int
    public var slotsBusy: Int
    public var slotsTotal: Int
    public var workers: [Worker]
    public init(queueDepth: Int, slotsBusy: Int, slotsTotal: Int, workers: [Worker]) {
        self.queueDepth = queueDepth; self.slotsBusy = slotsBusy; self.slotsTotal = slotsTotal; self.workers = workers
    }
}

/// Why the dashboard will not start.
public struct DashboardError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// Where and how the dashboard listens.
public struct DashboardConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// A bearer token every request must carry (required on non-loopback addresses).
    public var token: String?
    /// Where `token` came from: read again when it changes, so a token is rotated without a restart.
    public var tokenFile: String?
    public init(host: String, port: Int, token: String?, tokenFile: String? = nil) {
        self.host = host; self.port = port; self.token = token; self.tokenFile = tokenFile
    }

    /// Parses "HOST:PORT" ("127.0.0.1:7401", "[::1]:7401", ":7401" means loopback).
    public static func parse(_ address: String, tokenFile: String?) throws -> DashboardConfiguration {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (0...65535).contains(port) else {
            throw DashboardError("--http takes HOST:PORT, e.g. 127.0.0.1:7401 (got \(address))")
        }
        var host = String(address[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host.isEmpty { host = "127.0.0.1" }
        let token = try tokenFile.map(readToken)
        if !isLoopback(host) && token == nil {
            throw DashboardError("""
                refusing to serve the dashboard on \(host):\(port) without a token: anyone who reaches it could read every run, its files and movies.
                Pass --token-file FILE (clients send 'Authorization: Bearer <token>'), or listen on 127.0.0.1.
                """)
        }
        return DashboardConfiguration(host: host, port: port, token: token, tokenFile: tokenFile)
    }

    /// Binds this address and lets it go at once, as the server will bind it, so that a port in
    /// use is told, in the system's words, before anything else starts (a coordinator would
    /// otherwise take workers and resume runs, then stop when its dashboard could not listen).
    public func checkCanListen() async throws {
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port).get()
            try await channel.close()
        } catch {
            throw DashboardError(Self.cannotListen(on: "\(host):\(port)", error))
        }
    }

    /// "cannot serve the dashboard on ADDRESS: why", NIO's errors in the system's words.
    public static func cannotListen(on address: String, _ error: any Error) -> String {
        listenFailure(on: address, error) ?? "cannot serve the dashboard on \(address): \(error)"
    }

    /// `cannotListen`'s sentence when `error` is a system call's failure (binding, listening), else nil.
    public static func listenFailure(on address: String, _ error: any Error) -> String? {
        guard let io = error as? IOError else { return nil }
        let why = String(cString: strerror(io.errnoCode))
        let hint = switch io.errnoCode {
        case EADDRINUSE: " (another coordinator or dashboard, or another program, listens there: stop it or choose another --http port)"
        case EADDRNOTAVAIL: " (no interface of this machine has that address)"
        case EACCES: " (ports below 1024 need privileges: choose a higher --http port)"
        default: ""
        }
        return "cannot serve the dashboard on \(address): \(why)\(hint)"
    }

    /// The token in `file`: its content, trimmed, at least 16 characters.
    static func readToken(_ file: String) throws -> String {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw DashboardError("cannot read the token file \(file): \(FileChecks.reason(error))")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.utf8.count >= 16 else {
            throw DashboardError("the token in \(file) is shorter than 16 characters; make one with: head -c 32 /dev/urandom | base64 > \(file)")
        }
        return token
    }

    /// "http://HOST:PORT/" for the port actually bound (IPv6 hosts in brackets).
    public func url(port: Int) -> String { "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/" }

    public static func isLoopback(_ host: String) -> Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }
}

/// The read-only web dashboard over one state folder: pages, JSON API, Server-Sent Events,
/// artifacts by sha256, posters, and (with a live coordinator) /metrics, /healthz and /readyz.
public struct Dashboard: Sendable {
    public let stateDirectory: String
    public let configuration: DashboardConfiguration
    let reader: FarmReader
    let live: (@Sendable () -> LiveFigures?)?
    let ready: (@Sendable () -> String?)?
    let exporter: FarmExporter?
    let posters = PosterCache()
    let answers = AnswerCache()
    let logger: Logger

    /// - live: the coordinator's figures (nil for `coord dashboard`).
    /// - ready: nil when ready, else why not (for /readyz).
    /// - exporter: serves /metrics.
    public init(stateDirectory: String, configuration: DashboardConfiguration, live: (@Sendable () -> LiveFigures?)? = nil,
                ready: (@Sendable () -> String?)? = nil, exporter: FarmExporter? = nil, logger: Logger) throws {
        self.stateDirectory = stateDirectory
        self.configuration = configuration
        let db = stateDirectory + "/lineage.db"
        guard FileManager.default.fileExists(atPath: db) else {
            throw DashboardError("no lineage database at \(db): render something with this --state first (coord submit --state \(stateDirectory) …)")
        }
        reader = try FarmReader(path: db)
        self.live = live; self.ready = ready; self.exporter = exporter; self.logger = logger
    }

    /// The HTTP application; `onRunning` gets the port actually bound (useful with port 0).
    public func application(onRunning: @escaping @Sendable (Int) -> Void = { _ in }) -> some ApplicationProtocol {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: SecurityMiddleware(token: configuration.token.map { BearerToken($0, file: configuration.tokenFile, logger: self.logger) }))
        routes(router)
        var logger = self.logger
        logger.logLevel = .warning
        return Application(router: router, configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "threadline"),
                           onServerRunning: { channel in onRunning(channel.localAddress?.port ?? 0) }, logger: logger)
    }

    // MARK: routes

    func routes(_ router: Router<BasicRequestContext>) {
        let reader = self.reader
        for page in ["/", "/runs/:id"] {
            router.get(RouterPath(page)) { _, _ in Self.asset(Assets.html, type: "text/html; charset=utf-8") }
        }
        router.get("/assets/app.js") { _, _ in Self.asset(Assets.script, type: "text/javascript; charset=utf-8") }
        router.get("/assets/app.css") { _, _ in Self.asset(Assets.style, type: "text/css; charset=utf-8") }

        router.get("/api/runs") { request, _ in
            let limit = request.uri.queryParameters.get("limit", as: Int.self).map { max(1, min($0, 100_000)) } ?? 1000
            // Run and its stage counts spell their keys as the API does: no key conversion.
            return Self.json(try JSONEncoder().encode(try reader.runs(limit: limit)))
        }
        // A run's detail and its attempts are answered from memory while lineage has not changed:
        // a page refreshed ten times a second during a render mostly finds nothing new (about 3
        // polls in 4). A running run's duration and ETA move with the clock, so its detail is
        // kept for the second it was read in (the page shows whole seconds).
        router.get("/api/runs/:id") { _, context in
            guard let id = context.parameters.get("id", as: Int64.self) else { throw HTTPError(.notFound) }
            let second = Int64(Date().timeIntervalSince1970)
            guard let bytes = try self.answers.answer("run/\(id)@\(second)", version: try reader.dataVersion(), {
                try reader.run(id).map(Self.encode)
            }) else { throw HTTPError(.notFound) }
            return Self.json(bytes)
        }
        router.get("/api/runs/:id/attempts") { _, context in
            guard let id = context.parameters.get("id", as: Int64.self) else { throw HTTPError(.notFound) }
            guard let bytes = try self.answers.answer("attempts/\(id)", version: try reader.dataVersion(), {
                try reader.runs(limit: 1, id: id).isEmpty ? nil : try Self.encode(try reader.attempts(run: id))
            }) else { throw HTTPError(.notFound) }
            return Self.json(bytes)
        }
        router.get("/api/workers") { _, _ in try Self.json(try self.workers()) }
        router.get("/api/farm") { _, _ in try Self.json(try self.farm()) }
        router.get("/api/events") { _, _ in self.events() }

        // Files: only recorded artifacts, by sha256; posters of recorded segments and movies.
        router.get("/artifacts/:sha256") { request, context in
            guard let sha = context.parameters.get("sha256"), Self.isSHA256(sha), try reader.isRecordedArtifact(sha256: sha) else { throw HTTPError(.notFound) }
            return try await self.serveFile(self.artifactPath(sha), request: request, context: context)
        }
        router.get("/api/runs/:id/items/:idx/poster.png") { _, context in
            guard let id = context.parameters.get("id", as: Int64.self), let idx = context.parameters.get("idx", as: Int.self),
                  let sha = try reader.segment(run: id, item: idx)
            else { throw HTTPError(.notFound) }
            return Self.png(try await self.poster(sha256: sha, width: 320))
        }
        // The movie's poster, shown by its player until played (with `preload="metadata"`,
        // Chromium painted no frame: the player stayed black). Its address names its content.
        router.get("/artifacts/:sha256/poster.png") { _, context in
            guard let sha = context.parameters.get("sha256"), Self.isSHA256(sha), try reader.isRecordedArtifact(sha256: sha, kinds: ["movie", "segment"]) else { throw HTTPError(.notFound) }
            return Self.png(try await self.poster(sha256: sha, width: 1280))
        }

        // Operations.
        router.get("/healthz") { _, _ in "ok\n" }
        router.get("/readyz") { _, _ -> Response in
            if let why = self.ready?() {
                return Response(status: .serviceUnavailable, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: why + "\n")))
            }
            return Response(status: .ok, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: "ready\n")))
        }
        if let exporter {
            router.get("/metrics") { _, _ -> Response in
                let counts = Result { try reader.runCounts() }
                if case .failure(let error) = counts { self.logger.error("/metrics: cannot read the run counts from lineage (threadline_lineage_up is 0): \(error)") }
                let text = exporter.scrape(live: self.live?(), runs: counts)
                return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: text)))
            }
        }
    }

    // MARK: answers

    public struct Farm: Codable, Sendable {
        public var live: Bool
        public var queueDepth: Int?
        public var slotsBusy: Int
        public var slotsTotal: Int
        public var workersUp: Int
        public var runs: [String: Int]
        public var failures: [FarmReader.Failure]
        /// One line: "2 workers · 5/8 slots busy · 3 queued · 1 running run · 0 failures".
        public var status: String
    }

    func farm() throws -> Farm {
        let counts = try reader.runCounts()
        let workers = try self.workers()
        let l = live?()
        let up = workers.filter { ["up", "draining", "sidelined"].contains($0.state) }
        let busy = l?.slotsBusy ?? up.reduce(0) { $0 + $1.busy }
        let total = l?.slotsTotal ?? up.reduce(0) { $0 + $1.slots }
        let failures = try reader.recentFailures(limit: 10)
        var parts = ["\(up.count) worker\(up.count == 1 ? "" : "s")", "\(busy)/\(total) slots busy"]
        if let q = l?.queueDepth { parts.append("\(q) queued") }
        let running = counts["running", default: 0]
        parts.append("\(running) running run\(running == 1 ? "" : "s")")
        parts.append("\(counts["failed", default: 0]) failed")
        return Farm(live: l != nil, queueDepth: l?.queueDepth, slotsBusy: busy, slotsTotal: total, workersUp: up.count, runs: counts,
                    failures: failures, status: parts.joined(separator: " · "))
    }

    /// Workers from lineage; with a live coordinator its own view (slots, heartbeats, drains) wins.
    func workers() throws -> [FarmReader.Worker] {
        var list = try reader.workers()
        guard let l = live?() else { return list }
        let known = Dictionary(uniqueKeysWithValues: l.workers.map { ($0.id, $0) })
        for k in list.indices {
            if let w = known[list[k].id] {
                list[k].heartbeatAgeS = w.heartbeatAgeS
                list[k].slots = w.slots
                list[k].busy = w.busy
                list[k].holds = w.holds
                list[k].clockOffsetS = w.clockOffsetS
                if w.draining { list[k].state = "draining" } else if w.sidelinedS != nil { list[k].state = "sidelined" }
            } else if list[k].state == "up" {
                list[k].state = "gone"
            }
        }
        return list
    }

    /// Server-Sent Events: "change" whenever lineage or the live figures moved (checked 5 times a
    /// second), a comment every 10 s so a closed connection is noticed. The stream ends when the
    /// server shuts down gracefully: an open page would otherwise hold the server's shutdown (and
    /// the coordinator's behind it) until the connection timed out. The page reconnects by itself.
    func events() -> Response {
        let reader = self.reader, live = self.live
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            var lastVersion: Int64 = -1
            var lastLive: LiveFigures?
            var quiet = 0
            try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                let version = (try? reader.dataVersion()) ?? lastVersion
                // Heartbeat ages in whole seconds: the farm page ticks once a second, not five times.
                let figures = live?().map { l -> LiveFigures in
                    var l = l
                    for k in l.workers.indices { l.workers[k].heartbeatAgeS = l.workers[k].heartbeatAgeS.rounded(.down) }
                    return l
                }
                if version != lastVersion || figures != lastLive {
                    lastVersion = version; lastLive = figures
                    try await writer.write(ByteBuffer(string: "event: change\ndata: \(version)\n\n"))
                    quiet = 0
                } else {
                    quiet += 1
                    if quiet >= 50 { try await writer.write(ByteBuffer(string: ": still here\n\n")); quiet = 0 }
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            try await writer.finish(nil)
        })
    }

    func artifactPath(_ sha: String) -> String { "\(stateDirectory)/artifacts/sha256/\(sha.prefix(2))/\(sha)" }

    /// A file with Range support (a `<video>` element seeks with ranges).
    func serveFile(_ path: String, request: Request, context: BasicRequestContext) async throws -> Response {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path), let size = (attributes[.size] as? NSNumber)?.intValue else {
            throw HTTPError(.notFound)
        }
        var headers = HTTPFields()
        headers[.contentType] = Self.mediaType(path)
        headers[.acceptRanges] = "bytes"
        headers[.cacheControl] = "private, max-age=86400, immutable"
        let io = FileIO()
        if let header = request.headers[.range], let range = Self.byteRange(header, size: size) {
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
            headers[.contentLength] = "\(range.count)"
            return Response(status: .partialContent, headers: headers, body: try await io.loadFile(path: path, range: range, context: context))
        }
        headers[.contentLength] = "\(size)"
        return Response(status: .ok, headers: headers, body: try await io.loadFile(path: path, context: context))
    }

    /// "bytes=a-b", "bytes=a-", "bytes=-n" → a range inside the file (nil: serve it whole).
    static func byteRange(_ header: String, size: Int) -> ClosedRange<Int>? {
        guard size > 0, header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard spec.count == 2 else { return nil }
        if spec[0].isEmpty, let n = Int(spec[1]), n > 0 { return max(0, size - n)...(size - 1) }
        guard let a = Int(spec[0]), a < size else { return nil }
        let b = Int(spec[1]).map { min($0, size - 1) } ?? (size - 1)
        return a <= b ? a...b : nil
    }

    static func mediaType(_ path: String) -> String {
        // The first bytes only: movies can be gigabytes, and <video> asks for many ranges.
        guard let file = FileHandle(forReadingAtPath: path) else { return "application/octet-stream" }
        defer { try? file.close() }
        let bytes = [UInt8]((try? file.read(upToCount: 12)) ?? Data())
        guard bytes.count >= 8 else { return "application/octet-stream" }
        if bytes[4...7] == [0x66, 0x74, 0x79, 0x70] { return "video/mp4" }            // ....ftyp
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return "image/png" }
        if bytes.starts(with: [0xFF, 0xD8]) { return "image/jpeg" }
        if bytes.starts(with: [0x47, 0x49, 0x46]) { return "image/gif" }
        return "application/octet-stream"
    }

    /// A frame from the middle of a recorded segment or movie, at most `width` wide.
    func poster(sha256: String, width: Int) async throws -> [UInt8] {
        let key = "\(sha256)/\(width)"
        if let cached = posters.get(key) { return cached }
        let path = artifactPath(sha256)
        let png: [UInt8] = try await withCheckedThrowingContinuation { done in
            DispatchQueue.global().async {
                done.resume(with: Result { [UInt8](try Thumbnails.posterOfMovie(path: path, name: "artifact \(sha256.prefix(12))", width: width)) })
            }
        }
        posters.put(key, png)
        return png
    }

    static func png(_ bytes: [UInt8]) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "image/png"
        headers[.cacheControl] = "private, max-age=86400, immutable"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func isSHA256(_ s: String) -> Bool { s.utf8.count == 64 && s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } }

    static func asset(_ text: String, type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func json(_ value: some Encodable) throws -> Response { json(try encode(value)) }

    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return try encoder.encode(value)
    }

    static func json(_ data: Data) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// Encoded answers by what was asked, each with the lineage data version it was read at; an
/// answer is used only while that version is current (read before the query, so a commit
/// racing the query costs one more read, never a stale answer). The newest 256 kept.
final class AnswerCache: Sendable {
    private let entries = Mutex<[String: (version: Int64, bytes: Data)]>([:])

    /// The answer kept for `key` at `version`, else `make()`'s (kept when there is one).
    func answer(_ key: String, version: Int64, _ make: () throws -> Data?) throws -> Data? {
        if let kept = entries.withLock({ $0[key] }), kept.version == version { return kept.bytes }
        guard let bytes = try make() else { return nil }
        entries.withLock { if $0.count >= 256 { $0.removeAll() }; $0[key] = (version, bytes) }
        return bytes
    }
}

/// Posters drawn so far (a few hundred KB each at most; the newest 512 kept).
final class PosterCache: Sendable {
    private let entries = Mutex<[String: [UInt8]]>([:])
    func get(_ key: String) -> [UInt8]? { entries.withLock { $0[key] } }
    func put(_ key: String, _ value: [UInt8]) {
        entries.withLock { if $0.count >= 512 { $0.removeAll() }; $0[key] = value }
    }
}

/// The bearer token requests must carry, read again from its file when that changes (checked at
/// most every 2 s): an operator rotates a leaked token by writing the new one there (a Kubernetes
/// Secret update does the same), no restart. A file that becomes unreadable or too short keeps
/// the previous token and is logged: it never opens the dashboard.
final class BearerToken: Sendable {
    /// `checkedAt`: when the file was last looked at, on the monotonic clock (on the wall clock a
    /// step back of an hour kept a replaced token working for that hour).
    struct State { var token: String; var checkedAt: Double; var seen: [FileAttributeKey: AnyHashable] }
    let file: String?
    let logger: Logger
    let state: Mutex<State>

    init(_ token: String, file: String?, logger: Logger) {
        self.file = file; self.logger = logger
        state = Mutex(State(token: token, checkedAt: Clocks.steady, seen: file.map(Self.identity) ?? [:]))
    }

    /// What tells a changed file: its inode (a rename over it), size and time, of the file its
    /// links lead to: a Kubernetes Secret is a link through `..data`, which an update points at a
    /// new folder, leaving the link itself as it was.
    static func identity(_ file: String) -> [FileAttributeKey: AnyHashable] {
        let a = (try? FileManager.default.attributesOfItem(atPath: URL(fileURLWithPath: file).resolvingSymlinksInPath().path)) ?? [:]
        var id: [FileAttributeKey: AnyHashable] = [:]
        for k in [FileAttributeKey.systemFileNumber, .size, .modificationDate] { if let v = a[k] as? AnyHashable { id[k] = v } }
        return id
    }

    func current(now: Double = Clocks.steady) -> String {
        state.withLock { s in
            guard let file, now - s.checkedAt >= 2 else { return s.token }
            s.checkedAt = now
            let seen = Self.identity(file)
            guard seen != s.seen else { return s.token }
            s.seen = seen
            do {
                let token = try DashboardConfiguration.readToken(file)
                if token != s.token {
                    s.token = token
                    logger.notice("the dashboard's token changed: requests now need the one in \(file)")
                }
            } catch {
                logger.error("\(error); the dashboard keeps its previous token")
            }
            return s.token
        }
    }
}

/// Bearer token (constant-time comparison) and headers that keep pages from being framed or sniffed.
struct SecurityMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext
    let token: BearerToken?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // /healthz and /readyz stay open for probes (kubelet, Compose) that carry no credentials;
        // they say only whether the process is up and ready, and a fixed reason when it is not.
        if let token = token?.current(), request.uri.path != "/healthz", request.uri.path != "/readyz" {
            let given = Self.bearer(request.headers[.authorization]) ?? Self.tokenParameter(request)
            guard let given, Self.constantTimeEqual(Array(given.utf8), Array(token.utf8)) else {
                return Response(status: .unauthorized, headers: [.wwwAuthenticate: "Bearer realm=\"threadline\"", .contentType: "text/plain; charset=utf-8"],
                                body: .init(byteBuffer: ByteBuffer(string: "a bearer token is required (Authorization: Bearer <token>)\n")))
            }
        }
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPFields.Element.Name("X-Frame-Options")!] = "DENY"
        response.headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' data:; media-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self'"
        response.headers[HTTPFields.Element.Name("Referrer-Policy")!] = "no-referrer"
        return response
    }

    static func bearer(_ header: String?) -> String? {
        guard let header, header.lowercased().hasPrefix("bearer ") else { return nil }
        return String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }

    /// EventSource and `<video>` cannot send headers: the pages pass the token as ?token=.
    static func tokenParameter(_ request: Request) -> String? {
        request.uri.queryParameters.get("token")
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var diff = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for k in 0..<max(a.count, b.count) {
            diff |= (k < a.count ? a[k] : 0) ^ (k < b.count ? b[k] : 0)
        }
        return diff == 0
    }
}
