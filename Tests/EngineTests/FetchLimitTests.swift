import Foundation
import Testing
import ThreadlineCore
@testable import Media
import Engine
import TestSupport

/// HTTP sources (issue 16, finding 6): an endless body stops at the size cap, a trickling server
/// at the overall deadline, a redirect loop is not retried as if transient, the temporary file
/// goes with the failure, and a farm worker neither fetches from private addresses nor tells
/// a listening port from a closed one.
@Suite(.serialized) struct FetchLimitTests {
    /// A small HTTP server on loopback: /endless streams forever, /trickle sends a byte every
    /// 0.3 s, /loop redirects to itself, /ok is a short body. Returns the process and its port.
    static func server(_ dir: String) throws -> (Process, Int) {
        let script = """
            import http.server, socketserver, sys, time
            class H(http.server.BaseHTTPRequestHandler):
                def log_message(self, *a): pass
                def do_GET(self):
                    if self.path == '/loop':
                        self.send_response(302); self.send_header('Location', '/loop'); self.end_headers(); return
                    if self.path == '/ok':
                        self.send_response(200); self.send_header('Content-Length', '5'); self.end_headers()
                        self.wfile.write(b'hello'); return
                    self.send_response(200); self.end_headers()
                    try:
                        if self.path == '/endless':
                            block = b'\\0' * 65536
                            while True: self.wfile.write(block)
                        elif self.path == '/trickle':
                            while True: self.wfile.write(b'x'); self.wfile.flush(); time.sleep(0.3)
                    except (BrokenPipeError, ConnectionResetError): pass
            class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
            s = S(('127.0.0.1', 0), H)
            print(s.server_address[1], flush=True)
            s.serve_forever()
            """
        try script.write(toFile: dir + "/server.py", atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = [dir + "/server.py"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let d = out.fileHandleForReading.availableData
            guard !d.isEmpty else { break }
            line.append(d)
        }
        let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        guard let port else { p.terminate(); throw MediaError(.fetch, .permanent, file: "server.py", "the test server did not start") }
        return (p, port)
    }

    /// The test server's port, a store to fetch into, and how to stop the server (SIGKILL: the
    /// test process's blocked signals are inherited); nil, recorded as an issue, without python3.
    static func serving(_ dir: String) throws -> (Int, ArtifactStore, () -> Void)? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            Issue.record("python3 is needed for the test HTTP server (scripts/setup installs it)"); return nil
        }
        let (server, port) = try server(dir)
        return (port, try ArtifactStore(root: dir + "/store"), { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() })
    }

    func fetch(_ url: String, _ limits: FetchLimits, store: ArtifactStore, isCancelled: @escaping @Sendable () -> Bool = { false }) -> (TaskResult, Double) {
        let t0 = Date()
        let r = MediaTaskRunner(store: store, fetchLimits: limits, localFiles: false)
            .run(Assignment(lease: "L", task: .fetch(uri: url, name: "x")), isCancelled: isCancelled)
        return (r, Date().timeIntervalSince(t0))
    }

    func storedBytes(_ store: ArtifactStore) -> Int64 {
        let e = FileManager.default.enumerator(atPath: store.root)
        var total: Int64 = 0
        while let f = e?.nextObject() as? String {
            total += ((try? FileManager.default.attributesOfItem(atPath: store.root + "/" + f)[.size]) as? NSNumber)?.int64Value ?? 0
        }
        return total
    }

    @Test func endlessTricklingAndLoopingServersAreCutOff() throws {
        let dir = temporaryDirectory("fetch-limits")
        guard let (port, store, stop) = try Self.serving(dir) else { return }
        defer { stop() }
        let base = "http://127.0.0.1:\(port)"
        let empty = storedBytes(store)

        let (endless, t1) = fetch(base + "/endless", FetchLimits(maxBytes: 4 << 20), store: store)
        #expect(endless.error?.errorClass == .permanent && endless.error?.message.contains("limit") == true, "\(String(describing: endless.error))")
        #expect(storedBytes(store) == empty, "the partial download was left behind")
        print("endless body stopped at the 4 MiB cap in \(String(format: "%.2f", t1)) s")

        let (trickle, t2) = fetch(base + "/trickle", FetchLimits(timeout: 30, deadline: 2), store: store)
        #expect(trickle.error?.message.contains("longer than the 2 s limit") == true, "\(String(describing: trickle.error))")
        #expect(t2 < 8, "a trickling server held the slot for \(t2) s")
        #expect(storedBytes(store) == empty)

        let (loop, t3) = fetch(base + "/loop", FetchLimits(), store: store)
        #expect(loop.error?.errorClass == .permanent, "\(String(describing: loop.error))")
        #expect(loop.error?.message.contains("redirects") == true, "\(String(describing: loop.error))")
        print("redirect loop refused in \(String(format: "%.2f", t3)) s")

        // Stopped (its run cancelled, its time limit passed): the download stops at the next
        // read, is not tried again, and leaves nothing. Before, it ran on to the size cap.
        let stopAt = Clocks.steady + 0.2
        let (stopped, t4) = fetch(base + "/endless", FetchLimits(maxBytes: 2 << 30, attempts: 3), store: store, isCancelled: { Clocks.steady > stopAt })
        #expect(stopped.error?.message == "cancelled" && stopped.error?.errorClass == .retryable, "\(String(describing: stopped.error))")
        #expect(t4 < 1.5, "a stopped download went on for \(t4) s")
        #expect(storedBytes(store) == empty)

        #expect(try Fetch.copy(from: base + "/ok", to: dir + "/ok.bin") == 5, "a plain download still works")
    }

    @Test func farmWorkersFetchOnlyFromPublicAddressesAndSayTheSameWhateverListens() throws {
        let dir = temporaryDirectory("fetch-private")
        guard let (port, store, stop) = try Self.serving(dir) else { return }
        defer { stop() }
        let farm = FetchLimits(allowPrivateAddresses: false)
        let open = fetch("http://127.0.0.1:\(port)/ok", farm, store: store).0
        let closed = fetch("http://127.0.0.1:9/ok", farm, store: store).0
        let v6 = fetch("http://[::1]:\(port)/ok", farm, store: store).0
        let lan = fetch("http://192.168.1.1/router", farm, store: store).0
        let local = fetch("http://localhost:\(port)/ok", farm, store: store).0
        for r in [open, closed, v6, lan, local] {
            #expect(r.error?.errorClass == .permanent && r.error?.message.contains("fetches only from public addresses") == true, "\(String(describing: r.error))")
        }
        #expect(open.error?.message == closed.error?.message, "a listening port and a closed one must read the same")
        let file = fetch("file:///etc/passwd", farm, store: store).0
        #expect(file.error?.message.contains("only http(s) URLs") == true, "\(String(describing: file.error))")
        #expect(Fetch.isPrivateIPv4([8, 8, 8, 8]) == false && Fetch.isPrivateIPv4([172, 20, 0, 1]) && Fetch.isPrivateIPv4([169, 254, 169, 254]))
    }

    /// Whether this machine lets us make a network namespace (root; `unshare` from util-linux).
    static let canUnshare = (try? run("unshare", ["-n", "true"], timeout: 10).status) == 0

    /// A public address that redirects to loopback: libavformat follows redirects itself, so the
    /// check must happen where it connects. In a network namespace of its own (198.51.100.7, a
    /// documentation address, on its loopback), `coord fetch` with the farm's rules downloads from
    /// the public address, refuses the redirect, and takes it with --allow-private-urls.
    @Test(.enabled(if: canUnshare, "needs root to make a network namespace (unshare -n)"))
    func aRedirectToAPrivateAddressIsRefusedWhereTheWorkerConnects() throws {
        let dir = temporaryDirectory("fetch-redirect")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(Fetch.addressGuardInstalled, "this process's connect is the guarded one")
        let server = """
            import http.server, socketserver
            class H(http.server.BaseHTTPRequestHandler):
                def log_message(self, *a): pass
                def do_GET(self):
                    if self.path == '/to-private':
                        self.send_response(302); self.send_header('Location', 'http://127.0.0.1:8088/ok'); self.end_headers(); return
                    if self.path == '/to-metadata':
                        self.send_response(301); self.send_header('Location', 'http://[::1]:8088/ok'); self.end_headers(); return
                    self.send_response(200); self.send_header('Content-Length', '5'); self.end_headers(); self.wfile.write(b'hello')
            class S(socketserver.ThreadingMixIn, http.server.HTTPServer): daemon_threads = True
            S(('0.0.0.0', 8088), H).serve_forever()
            """
        try server.write(toFile: dir + "/server.py", atomically: true, encoding: .utf8)
        let coord = coordPath
        let script = """
            set -u
            ip link set lo up && ip addr add 198.51.100.7/32 dev lo || exit 90
            /usr/bin/python3 \(dir)/server.py >/dev/null 2>&1 & server=$!
            for i in $(seq 50); do /usr/bin/python3 -c 'import socket; socket.create_connection(("198.51.100.7", 8088), 1)' 2>/dev/null && break; sleep 0.1; done
            fetch() { echo "== $1"; "\(coord)" fetch "$2" -o "\(dir)/$1" ${3:-} 2>&1; echo "rc=$?"; }
            fetch public http://198.51.100.7:8088/ok
            fetch redirected http://198.51.100.7:8088/to-private
            fetch redirected6 http://198.51.100.7:8088/to-metadata
            fetch allowed http://198.51.100.7:8088/to-private --allow-private-urls
            kill -9 $server; wait 2>/dev/null; true
            """
        let r = try run("unshare", ["-n", "bash", "-c", script], timeout: 120)
        #expect(r.status == 0, "\(r.err)")
        let parts = Dictionary(r.out.components(separatedBy: "== ").dropFirst().map { block -> (String, String) in
            let name = String(block.prefix { $0 != "\n" })
            return (name, String(block.dropFirst(name.count)))
        }, uniquingKeysWith: { a, _ in a })
        #expect(parts["public"]?.contains("rc=0") == true, "a public address is fetched: \(r.out)")
        for name in ["redirected", "redirected6"] {
            let out = parts[name] ?? ""
            #expect(out.contains("rc=1") && out.contains("leads to a loopback, link-local or private address (directly or by a redirect)"), "\(name): \(out)")
            #expect(!FileManager.default.fileExists(atPath: dir + "/" + name), "nothing written for \(name)")
        }
        #expect(parts["allowed"]?.contains("rc=0") == true, "--allow-private-urls follows it: \(r.out)")
        #expect((try? String(contentsOfFile: dir + "/allowed", encoding: .utf8)) == "hello")
    }
}
