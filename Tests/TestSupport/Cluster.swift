import Foundation

/// Decoded-frame md5s of every stream (ffmpeg's framemd5), without the header comments.
public func frameMD5s(_ path: String) throws -> [String] {
    let r = try run("ffmpeg", ["-v", "error", "-i", path, "-map", "0", "-f", "framemd5", "-"])
    guard r.status == 0 else { throw GenerateError(message: "framemd5 of \(path) failed: \(r.err)") }
    return r.out.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
}

/// Long-running processes a test starts (a coordinator service, workers), each logging to a
/// file; all are killed when the test ends.
public final class ServiceProcesses: @unchecked Sendable {
    public let directory: String
    private let lock = NSLock()
    private var processes: [String: Process] = [:]
    /// Processes started with libfaketime preloaded: it leaves shared memory named by their pid.
    private var faked: Set<Int32> = []

    public init(directory: String) { self.directory = directory }

    /// Starts `program args` (in network namespace `namespace` when given; as user and group
    /// `uid` when given, which needs root; with `environment` added to this process's) as `name`.
    @discardableResult
    public func start(_ name: String, _ program: String, _ args: [String], namespace: String? = nil, uid: UInt32? = nil,
                      environment: [String: String] = [:]) throws -> Process {
        let p = Process()
        var command = [program] + args
        if !environment.isEmpty {
            p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            // Started by env(1), which then runs the program: a library preloaded through the
            // environment that sets a variable as it loads (libfaketime does) does so in env, a
            // C program; loaded first into a Swift program, that hid the program's arguments from it.
            command = ["/usr/bin/env"] + command
        }
        if let uid {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            p.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--"] + command
        } else if let namespace {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["ip", "netns", "exec", namespace] + command
        } else {
            p.executableURL = URL(fileURLWithPath: command[0])
            p.arguments = Array(command.dropFirst())
        }
        FileManager.default.createFile(atPath: log(name), contents: nil)
        FileManager.default.createFile(atPath: out(name), contents: nil)
        p.standardOutput = FileHandle(forWritingAtPath: out(name))
        p.standardError = FileHandle(forWritingAtPath: log(name))
        p.standardInput = FileHandle.nullDevice
        try p.run()
        lock.lock(); processes[name] = p
        if environment["LD_PRELOAD"]?.contains("faketime") == true { faked.insert(p.processIdentifier) }
        lock.unlock()
        return p
    }

    public func log(_ name: String) -> String { "\(directory)/\(name).log" }
    public func out(_ name: String) -> String { "\(directory)/\(name).out" }
    public func process(_ name: String) -> Process? { lock.lock(); defer { lock.unlock() }; return processes[name] }

    /// Waits for `coord serve` (started as `name`) to print its endpoint.
    public func endpoint(of name: String, timeout: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let text = try? String(contentsOfFile: out(name), encoding: .utf8),
               let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) {
                return String(line.dropFirst("listening on ".count))
            }
            if let p = process(name), !p.isRunning {
                throw GenerateError(message: "\(name) exited (\(p.terminationStatus)): \((try? String(contentsOfFile: log(name), encoding: .utf8)) ?? "")")
            }
            usleep(50_000)
        }
        throw GenerateError(message: "\(name) did not start listening within \(timeout) s")
    }

    /// SIGKILL (or another signal) to one process, waiting for it to end.
    public func signal(_ name: String, _ sig: Int32 = SIGKILL) {
        guard let p = process(name) else { return }
        kill(p.processIdentifier, sig)
        if sig == SIGKILL { p.waitUntilExit() }
    }

    public func stopAll() {
        lock.lock(); let all = processes; processes = [:]; let pids = faked; faked = []; lock.unlock()
        for p in all.values where p.isRunning { kill(p.processIdentifier, SIGKILL) }
        for p in all.values { p.waitUntilExit() }
        for pid in pids { unlink("/dev/shm/faketime_shm_\(pid)"); unlink("/dev/shm/sem.faketime_sem_\(pid)") }
    }

    deinit { stopAll() }
}

/// Three network namespaces joined by veth (scripts/netns-cluster): PREFIX-coord, -w1, -w2.
public final class NetworkNamespaces: @unchecked Sendable {
    public static let script = repositoryRoot + "/scripts/netns-cluster"
    /// True when this machine lets us create namespaces and veth pairs (root or CAP_NET_ADMIN).
    public static let available: Bool = {
        (try? run(script, ["check"], timeout: 20).status) == 0
    }()

    /// True when a link's rate can be limited here as well (tc's token bucket filter).
    public static let limitable: Bool = available && (try? run(script, ["check-limit"], timeout: 20).status) == 0

    public let prefix: String
    public init() throws {
        prefix = "tl" + String(UUID().uuidString.prefix(4)).lowercased()
        let r = try run(Self.script, ["up", prefix], timeout: 60)
        guard r.status == 0 else { throw GenerateError(message: "netns-cluster up failed: \(r.err)") }
    }
    public func name(_ host: String) -> String { "\(prefix)-\(host)" }
    public func cut(_ host: String) throws { try run(Self.script, ["cut", prefix, host]) }
    public func restore(_ host: String) throws { try run(Self.script, ["restore", prefix, host]) }
    /// Limits what `host` sends to `rate` (tc's words: "2mbit"): a slow uplink.
    public func limit(_ host: String, to rate: String) throws {
        let r = try run(Self.script, ["limit", prefix, host, rate])
        guard r.status == 0 else { throw GenerateError(message: "netns-cluster limit failed: \(r.err)") }
    }
    deinit { _ = try? run(Self.script, ["down", prefix], timeout: 60) }
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes; returns whether it held.
@discardableResult
public func waitUntil(timeout: Double, poll: Double = 0.05, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(useconds_t(poll * 1_000_000))
    }
    return try condition()
}

/// A small tmpfs, mounted for a test that needs a disk that fills up (a full store, a full state
/// folder). Needs the right to mount: root outside a restricted container.
public enum SmallDisk {
    /// Whether a tmpfs can be mounted here (tried once, on a scratch folder).
    public static let available: Bool = {
        let dir = NSTemporaryDirectory() + "tmpfs-probe-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard getuid() == 0, (try? run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir], timeout: 10).status) == 0 else { return false }
        _ = try? run("/bin/umount", [dir], timeout: 10)
        return true
    }()
    public static let note = "needs the right to mount a tmpfs (root outside a restricted container)"

    /// Mounts a tmpfs of `size` ("256k", "8m") at `path`, made first; whether it worked. Unmount
    /// it when the test ends (`unmount`).
    public static func mount(_ path: String, size: String) throws -> Bool {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return try run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", path]).status == 0
    }

    public static func unmount(_ path: String) { _ = try? run("/bin/umount", ["-l", path]) }
}

/// A program started as on a host booted `seconds` ago, whatever this one's uptime: in a time
/// namespace of its own (`unshare --time`, root) whose steady clock (CLOCK_MONOTONIC, which counts
/// from boot) reads about `seconds` at its start. The command to start, or nil where time
/// namespaces cannot be made here.
public enum FreshlyBooted {
    public static func command(_ program: String, seconds: Int = 120) -> [String]? {
        guard let text = try? String(contentsOfFile: "/proc/uptime", encoding: .utf8),
              let uptime = text.split(separator: " ").first.flatMap({ Double($0) }) else { return nil }
        let wrap = ["/usr/bin/unshare", "--time", "--monotonic", "\(-max(0, Int(uptime) - seconds))"]
        guard getuid() == 0, (try? run(wrap[0], Array(wrap.dropFirst()) + ["/bin/true"], timeout: 10).status) == 0 else { return nil }
        return wrap + [program]
    }
}

/// A command in a real terminal: a tmux server of its own, one window of `columns` × `rows`, the
/// command followed by `echo EXIT=$?` and a pause so that its last screen can be read.
public final class TerminalSession: @unchecked Sendable {
    public static let tmux = ["/usr/bin/tmux", "/bin/tmux"].first { FileManager.default.isExecutableFile(atPath: $0) }
    let tmux: String
    let socket: [String]
    let session = "tl-\(UUID().uuidString.prefix(8))"

    /// nil when tmux is not installed (scripts/setup installs it).
    public init?(_ command: String, columns: Int = 160, rows: Int = 40) throws {
        guard let tmux = Self.tmux else { return nil }
        self.tmux = tmux
        socket = ["-L", session]
        // Started with no pipes to this process (a server holding them would make a captured run
        // wait for the whole session), and not waited for: Foundation's waitUntilExit also waits
        // for the server tmux forks, which lives as long as the session.
        let start = Process()
        start.executableURL = URL(fileURLWithPath: tmux)
        start.arguments = socket + ["new-session", "-d", "-s", session, "-x", "\(columns)", "-y", "\(rows)", "\(command); echo EXIT=$?; sleep 60"]
        start.standardInput = FileHandle.nullDevice
        start.standardOutput = FileHandle.nullDevice
        start.standardError = FileHandle.nullDevice
        try start.run()
        guard waitUntil(timeout: 10, { (try? run(tmux, socket + ["has-session", "-t", session]).status) == 0 }) else {
            throw GenerateError(message: "tmux did not start")
        }
    }

    deinit { _ = try? run(tmux, socket + ["kill-server"]) }

    /// What the window shows. (Not its history: tmux moves a whole screen cleared from its top
    /// corner there, so a command started at the top of a fresh window leaves each redraw in it.)
    public func screen() -> String {
        (try? run(tmux, socket + ["capture-pane", "-p", "-t", session]).out) ?? ""
    }

    public func sendKeys(_ keys: String) throws { _ = try run(tmux, socket + ["send-keys", "-t", session, keys]) }

    /// Waits for the command to end (its `EXIT=` line shown): whether it did, and the screen then.
    public func waitForExit(timeout: Double) -> (ended: Bool, screen: String) {
        var pane = ""
        let ended = waitUntil(timeout: timeout, poll: 0.2) { pane = screen(); return pane.contains("EXIT=") }
        return (ended, pane)
    }
}
