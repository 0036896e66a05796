import Foundation
import Testing
import Lineage
import TestSupport

/// The deployment files (docker/), checked by the real tools, and the behaviour they rely on,
/// simulated with real processes: no Docker engine or Kubernetes cluster runs here.
@Suite(.serialized) struct DeployTests {
    static let docker = repositoryRoot + "/docker"
    static let python = repositoryRoot + "/.build/test-venv/bin/python"
    static let check = repositoryRoot + "/Tests/Clients/deploy_check.py"
    static let schemas = repositoryRoot + "/Tests/Data/deploy"
    static let haveValidators = FileManager.default.isExecutableFile(atPath: python)
        && (try? run(python, ["-c", "import kubernetes_validate, jsonschema"]).status) == 0
    static let haveKubectl = FileManager.default.isExecutableFile(atPath: "/usr/bin/kubectl")
        || (try? run("kubectl", ["version", "--client"]).status) == 0
    static let haveCompose = (try? run("docker-compose", ["version", "--short"]).status) == 0
    static let haveSystemd = FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze")
    static let note: Comment = "needs kubectl, docker-compose, systemd-analyze and .build/test-venv: run scripts/test-tools"
    static let isRoot = getuid() == 0

    /// Fails under scripts/test when a tool is missing; elsewhere the test is skipped.
    static func tools(_ have: Bool) -> Bool {
        if !have && DashboardTests.required { Issue.record("a deployment tool is missing: scripts/test-tools should have installed it") }
        return have
    }

    static func validate(_ args: [String]) throws {
        let r = try run(python, [check] + args, timeout: 300)
        #expect(r.status == 0, "deploy_check \(args.joined(separator: " ")):\n\(r.out)\n\(r.err)")
        print(r.out.split(separator: "\n").filter { $0.contains("(") }.joined(separator: "\n"))
    }

    // MARK: Kubernetes

    /// `kubectl kustomize` renders the base and the example overlay; every core object validates
    /// strictly against Kubernetes 1.30, ScaledObject and ServiceMonitor against their CRDs, and
    /// the farm's own rules hold (deploy_check.py).
    @Test(.enabled(if: tools(haveValidators && haveKubectl), note))
    func kubernetesManifestsRenderAndValidate() throws {
        let dir = temporaryDirectory("k8s")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let base = try run("kubectl", ["kustomize", Self.docker + "/kubernetes"], timeout: 120)
        #expect(base.status == 0, "kubectl kustomize docker/kubernetes: \(base.err)")
        try base.out.write(toFile: dir + "/base.yaml", atomically: true, encoding: .utf8)
        try Self.validate(["k8s", dir + "/base.yaml", Self.schemas])

        // The overlay, with keys made as docs/DEPLOY.md says (in a copy: keys never go into the checkout).
        try FileManager.default.copyItem(atPath: Self.docker + "/kubernetes", toPath: dir + "/kubernetes")
        let keys = try run(coordPath, ["keygen", "--farm", dir + "/kubernetes/overlays/example/keys"])
        #expect(keys.status == 0, "\(keys.err)")
        let overlay = try run("kubectl", ["kustomize", dir + "/kubernetes/overlays/example"], timeout: 120)
        #expect(overlay.status == 0, "kubectl kustomize overlays/example: \(overlay.err)")
        try overlay.out.write(toFile: dir + "/overlay.yaml", atomically: true, encoding: .utf8)
        try Self.validate(["k8s", dir + "/overlay.yaml", Self.schemas, "--complete"])
        // The Secret holds the very key `coord keygen` made.
        let secret = try String(contentsOfFile: dir + "/kubernetes/overlays/example/keys/worker/worker.key", encoding: .utf8)
        let flat = overlay.out.filter { !$0.isWhitespace }   // kustomize folds long base64 values
        #expect(flat.contains(Data(secret.utf8).base64EncodedString()), "the worker key Secret carries keys/worker/worker.key")
        // Without keys the overlay must not render half a farm.
        try FileManager.default.removeItem(atPath: dir + "/kubernetes/overlays/example/keys")
        #expect(try run("kubectl", ["kustomize", dir + "/kubernetes/overlays/example"], timeout: 120).status != 0)
    }

    // MARK: Compose

    /// The compose file validates against the Compose Specification's schema and Debian's
    /// `docker-compose config` (no engine needed), and keeps the farm's rules.
    @Test(.enabled(if: tools(haveValidators && haveCompose), note))
    func composeFileValidates() throws {
        try Self.validate(["compose", Self.docker + "/compose.yaml", Self.schemas])
        let config = try run("docker-compose", ["-f", Self.docker + "/compose.yaml", "config", "--quiet"], timeout: 120)
        #expect(config.status == 0, "docker-compose config: \(config.err)")
        let services = try run("docker-compose", ["-f", Self.docker + "/compose.yaml", "config", "--services"], timeout: 120)
        #expect(Set(services.out.split(separator: "\n").map(String.init)) == ["keys", "coordinator", "worker", "prometheus", "grafana"])
        // The Prometheus config compose mounts is one promtool accepts.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") {
            let dir = temporaryDirectory("promcfg")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let text = try String(contentsOfFile: Self.docker + "/prometheus/prometheus.yml", encoding: .utf8)
                .replacingOccurrences(of: "/etc/prometheus/token/dashboard.token", with: dir + "/dashboard.token")
            try text.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
            try "token\n".write(toFile: dir + "/dashboard.token", atomically: true, encoding: .utf8)
            let r = try run("/usr/bin/promtool", ["check", "config", dir + "/prometheus.yml"])
            #expect(r.status == 0, "promtool check config: \(r.out)\(r.err)")
        }
    }

    /// Compose's one-shot key setup, run as the container user would: the named volumes seeded
    /// with the image's folders (owner and modes from the Dockerfile), the `keys` service's own
    /// command as uid 10001. Then a coordinator and a worker, as that user, read their keys and
    /// render a project submitted with the submitter's key; other users cannot read the secrets.
    @Test func composeKeySetupAsTheContainerUser() throws {
        let dir = temporaryDirectory("compose-keys")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = chmod(dir, 0o755)
        let dockerfile = try String(contentsOfFile: Self.docker + "/Dockerfile", encoding: .utf8)
        let uid = UInt32(try #require(dockerfile.firstMatch(of: /ARG THREADLINE_UID=(\d+)/)?.1)) ?? 0
        #expect(uid == 10001)
        let asUser: UInt32? = Self.isRoot ? uid : nil
        let owner = asUser ?? getuid()
        // Docker seeds a new named volume with the image folder's owner and mode.
        for m in dockerfile.matches(of: /install -d -o threadline -g threadline -m (0\d+) ([^\\&\n]+)/) {
            for path in m.2.split(separator: " ") where path.hasPrefix("/keys") {
                let folder = dir + String(path)
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                _ = chmod(folder, mode_t(Int(m.1, radix: 8)!))
                _ = chown(folder, owner, owner)
            }
        }
        // The keys service's command, from the compose file itself.
        let compose = try Self.composeJSON()
        let keysService = try #require((compose["services"] as? [String: Any])?["keys"] as? [String: Any])
        let command = try #require(keysService["command"] as? [String])
        #expect(command.prefix(3) == ["coord", "keygen", "--farm"])
        let volumes = (keysService["volumes"] as? [String]) ?? []
        for v in volumes {   // every volume it writes was seeded
            let target = v.split(separator: ":")[1]
            #expect(FileManager.default.fileExists(atPath: dir + target), "\(v): the image has no \(target) to seed the volume from")
        }
        let args = command.dropFirst().map { $0.hasPrefix("/keys") ? dir + $0 : $0 }
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        let setup = try procs.start("keys", coordPath, Array(args), uid: asUser)
        setup.waitUntilExit()
        #expect(setup.terminationStatus == 0, "keys: \((try? String(contentsOfFile: procs.log("keys"), encoding: .utf8)) ?? "")")

        let keys = dir + "/keys"
        func stat(_ path: String) -> (mode: Int, uid: UInt32)? {
            var s = Foundation.stat()
            return lstat(path, &s) == 0 ? (Int(s.st_mode) & 0o777, s.st_uid) : nil
        }
        let secrets = ["coordinator/coordinator.key", "coordinator/dashboard.token", "worker/worker.key", "submitter/submitter.key", "submitter/dashboard.token"]
        for f in secrets {
            let s = stat("\(keys)/\(f)")
            #expect(s?.mode == 0o600 && s?.uid == owner, "\(f): \(String(describing: s))")
        }
        for f in ["coordinator/coordinator.pub", "coordinator/workers/worker.pub", "coordinator/submitters/submitter.pub",
                  "worker/coordinator.pub", "submitter/coordinator.pub", "metrics/dashboard.token"] {
            let s = stat("\(keys)/\(f)")
            #expect(s?.mode == 0o644 && s?.uid == owner, "\(f): \(String(describing: s))")
        }
        // Run again (every `docker compose up` does): nothing changes.
        let before = try String(contentsOfFile: keys + "/coordinator/coordinator.key", encoding: .utf8)
        let again = try procs.start("keys-again", coordPath, Array(args), uid: asUser)
        again.waitUntilExit()
        #expect(again.terminationStatus == 0)
        #expect(try String(contentsOfFile: keys + "/coordinator/coordinator.key", encoding: .utf8) == before, "keys are kept")

        if Self.isRoot {
            // Another user (nobody) may pass through coordinator/ to the allow-lists (public keys),
            // as systemd's DynamicUser does, but may read no secret.
            for f in secrets {
                #expect(try run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "cat", "\(keys)/\(f)"]).status != 0, "nobody read \(f)")
            }
            #expect(try run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "cat", "\(keys)/coordinator/workers/worker.pub"]).status == 0)
        }

        // The coordinator and a worker, as the container user, with the keys from their volumes.
        let state = dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        _ = chown(state, owner, owner)
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:0", "--state", state,
                                             "--curve-secret-key", keys + "/coordinator/coordinator.key",
                                             "--allow-workers", keys + "/coordinator/workers", "--allow-submitters", keys + "/coordinator/submitters",
                                             "--http", "127.0.0.1:0", "--token-file", keys + "/coordinator/dashboard.token"], uid: asUser)
        let endpoint = try procs.endpoint(of: "coord")
        let store = dir + "/store"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        _ = chown(store, owner, owner)
        try procs.start("worker", workerPath, ["--connect", endpoint, "--pipelines", "1", "--store", store,
                                               "--curve-secret-key", keys + "/worker/worker.key", "--coordinator-key", keys + "/worker/coordinator.pub"], uid: asUser)
        let pipeline = try ClusterTests.project(dir, items: 2)
        let submit = try run(coordPath, ["submit", pipeline, "--coordinator", endpoint, "--json",
                                         "--curve-secret-key", keys + "/submitter/submitter.key", "--coordinator-key", keys + "/submitter/coordinator.pub"], timeout: 300)
        #expect(submit.status == 0, "submit with the submitter's key: \(submit.err)")
        let base = try DashboardTests.dashboardURL(procs, "coord")
        let token = try String(contentsOfFile: keys + "/metrics/dashboard.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try DashboardTests.get(base, "/metrics").status == 401)
        #expect(try DashboardTests.get(base, "/metrics", headers: ["Authorization: Bearer \(token)"]).status == 200,
                "Prometheus's copy of the token opens /metrics")
    }

    static func composeJSON() throws -> [String: Any] {
        let r = try run(haveValidators ? python : "python3", ["-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
                                                             docker + "/compose.yaml"])
        guard r.status == 0 else { throw GenerateError(message: "cannot read compose.yaml: \(r.err)") }
        return try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] ?? [:]
    }

    // MARK: systemd

    /// The units pass `systemd-analyze verify` (with the binaries from this build), make their
    /// own user, get their secrets through LoadCredential= from where `coord keygen --farm
    /// /etc/threadline` puts them, and give the drain time to finish before SIGKILL.
    @Test(.enabled(if: tools(haveSystemd), note))
    func systemdUnitsVerifyAndMatchTheDrain() throws {
        let dir = temporaryDirectory("systemd")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let farm = dir + "/etc/threadline"
        #expect(try run(coordPath, ["keygen", "--farm", farm]).status == 0)
        for unit in ["threadline-coordinator.service", "threadline-worker.service"] {
            let text = try String(contentsOfFile: "\(Self.docker)/\(unit)", encoding: .utf8)
            let local = text.replacingOccurrences(of: "/usr/local/bin/", with: repositoryRoot + "/.build/debug/")
            try local.write(toFile: "\(dir)/\(unit)", atomically: true, encoding: .utf8)
            let r = try run("/usr/bin/systemd-analyze", ["verify", "\(dir)/\(unit)"], timeout: 120)
            #expect(r.status == 0 && r.err.isEmpty, "systemd-analyze verify \(unit): \(r.err)")
            let lines = text.split(separator: "\n").map(String.init)
            func value(_ key: String) -> [String] { lines.filter { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) } }
            #expect(value("DynamicUser") == ["yes"], "\(unit) makes its own user")
            #expect(value("User").isEmpty, "\(unit) must not name a user nobody created")
            for credential in value("LoadCredential") {
                let source = String(credential.split(separator: ":", maxSplits: 1)[1])
                #expect(FileManager.default.fileExists(atPath: dir + source), "\(unit): \(source) is not where coord keygen --farm puts it")
            }
            #expect(value("KillSignal") == ["SIGTERM"])
            let exec = text.components(separatedBy: "ExecStart=")[1].components(separatedBy: "\n#")[0]
            let drain = Double(exec.firstMatch(of: /--drain-timeout (\d+)/).map { String($0.1) } ?? "") ?? -1
            let stop = Double(value("TimeoutStopSec").first ?? "") ?? 0
            #expect(drain > 0 && stop > drain, "\(unit): TimeoutStopSec \(stop) must outlast --drain-timeout \(drain)")
            #expect(value("ExecReload").first?.contains("-TERM") == true && value("Restart") == ["always"],
                    "\(unit): reload drains and starts again")
            for allow in exec.matches(of: /--allow-\w+ (\S+)/) {
                #expect(FileManager.default.fileExists(atPath: dir + allow.1), "\(unit): allow-list \(allow.1) is not made by coord keygen --farm")
            }
        }
    }

    /// Run again over a farm folder, keygen keeps the dashboard token; one it cannot read stops it
    /// with the reason, rather than a new token for the submitter and Prometheus that the
    /// coordinator's kept one would refuse.
    @Test func farmKeysKeepTheTokenOrSayWhyNot() throws {
        let farm = temporaryDirectory("farm-token") + "/farm"
        #expect(try run(coordPath, ["keygen", "--farm", farm]).status == 0)
        let token = try String(contentsOfFile: farm + "/coordinator/dashboard.token", encoding: .utf8)
        try FileManager.default.removeItem(atPath: farm + "/metrics/dashboard.token")
        #expect(try run(coordPath, ["keygen", "--farm", farm]).status == 0)
        #expect(try String(contentsOfFile: farm + "/metrics/dashboard.token", encoding: .utf8) == token, "the kept token, not a new one")
        // A token that cannot be read (here a folder in its place).
        try FileManager.default.removeItem(atPath: farm + "/coordinator/dashboard.token")
        try FileManager.default.removeItem(atPath: farm + "/metrics/dashboard.token")
        try FileManager.default.createDirectory(atPath: farm + "/coordinator/dashboard.token", withIntermediateDirectories: true)
        let r = try run(coordPath, ["keygen", "--farm", farm])
        #expect(r.status != 0 && r.err.contains("cannot read \(farm)/coordinator/dashboard.token"), "\(r.status) \(r.err)")
        #expect(!FileManager.default.fileExists(atPath: farm + "/metrics/dashboard.token"), "no token the coordinator would refuse")
    }

    // MARK: scale-in and scale-out, as Kubernetes does them

    /// `coord serve --http` and one worker; two workers started mid-run get work within a second
    /// (scale-out); then two of the three get SIGTERM mid-stage and SIGKILL after the grace
    /// period (scale-in): they finish their stages and exit 0 within it, the run succeeds with one
    /// success per stage and nothing lost. /healthz and /readyz answer 200, and /readyz 503 while
    /// the coordinator cannot write its lineage.
    @Test func scaleOutAndScaleInLoseNothing() throws {
        let dir = temporaryDirectory("scale")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = chmod(dir, 0o755)
        let pipeline = try ClusterTests.project(dir, items: 10, seconds: 2, output: "640x360", preset: "medium")
        // The coordinator runs as an unprivileged user (as in its container), so a read-only state
        // folder is read-only to it; root would write through any mode.
        let coordUser: UInt32? = Self.isRoot ? 65534 : nil
        let state = dir + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        if let coordUser { _ = chown(state, coordUser, coordUser) }
        let procs = ServiceProcesses(directory: dir)
        defer { procs.stopAll() }
        try procs.start("coord", coordPath, ["serve", "--bind", "tcp://127.0.0.1:0", "--state", state, "--http", "127.0.0.1:0",
                                             "--liveness", "5"], uid: coordUser)
        let endpoint = try procs.endpoint(of: "coord")
        let base = try DashboardTests.dashboardURL(procs, "coord")
        func worker(_ id: String) throws -> Process {
            try procs.start(id, workerPath, ["--connect", endpoint, "--pipelines", "1", "--threads", "1", "--store", dir + "/" + id,
                                             "--id", id, "--drain-timeout", "20"])
        }
        _ = try worker("w1")
        let submit = try startQuietly(coordPath, ["submit", pipeline, "--coordinator", endpoint, "--json"])
        let db = state + "/lineage.db"
        func running(_ worker: String) -> [String] {
            ((try? LineageStore.readRows(path: db, """
                SELECT a.id FROM attempt a JOIN stage s ON s.id = a.stage_id
                WHERE a.worker_id = ? AND a.state = 'running' AND s.kind = 'decode'
                """, [worker])) ?? []).compactMap { $0["id"] }
        }
        #expect(waitUntil(timeout: 120) { !running("w1").isEmpty }, "w1 never started a render")
        #expect(try DashboardTests.get(base, "/healthz").status == 200)
        #expect(try DashboardTests.get(base, "/readyz").status == 200)

        // Scale-out: two workers join mid-run.
        let joined = Date().timeIntervalSince1970
        _ = try worker("w2")
        _ = try worker("w3")
        var firstWork: [String: Double] = [:]
        _ = waitUntil(timeout: 10) {
            for w in ["w2", "w3"] where firstWork[w] == nil {
                let r = try? LineageStore.readRows(path: db, "SELECT min(dispatched_at) AS t FROM attempt WHERE worker_id = ?", [w])
                if let t = r?.first?["t"].flatMap(Double.init) { firstWork[w] = t - joined }
            }
            return firstWork.count == 2
        }
        print("scale-out: first work \(firstWork.mapValues { String(format: "%.2f s", $0) }) after the workers were started")
        for w in ["w2", "w3"] {
            #expect((firstWork[w] ?? 99) < 1.0, "\(w) got its first stage \(firstWork[w] ?? -1) s after it was started")
        }

        // Scale-in: SIGTERM to w1 and w2 while each runs a stage; SIGKILL after the grace period.
        #expect(waitUntil(timeout: 60) { !running("w1").isEmpty && !running("w2").isEmpty }, "w1 and w2 both rendering")
        let inFlight = running("w1") + running("w2")
        let grace = 30.0
        let t0 = Date()
        let leaving = ["w1", "w2"].compactMap { procs.process($0) }
        for p in leaving { kill(p.processIdentifier, SIGTERM) }
        var exits: [Double] = []
        for (name, p) in zip(["w1", "w2"], leaving) {
            if !waitUntil(timeout: max(0, grace - Date().timeIntervalSince(t0)), { !p.isRunning }) {
                kill(p.processIdentifier, SIGKILL)
                Issue.record("\(name) was still running after the \(grace) s grace period")
            }
            p.waitUntilExit()
            exits.append(Date().timeIntervalSince(t0))
            #expect(p.terminationReason == .exit && p.terminationStatus == 0, "\(name) ended with \(p.terminationStatus)")
        }
        print("scale-in: w1 and w2 exited \(exits.map { String(format: "%.1f s", $0) }) after SIGTERM (grace \(grace) s)")
        submit.waitUntilExit()
        #expect(submit.terminationStatus == 0, "the run succeeds on the remaining worker")
        for id in inFlight {
            let row = try LineageStore.readRows(path: db, "SELECT state FROM attempt WHERE id = ?", [Int64(id)!])
            #expect(row.first?["state"] == "succeeded", "attempt \(id), in flight at SIGTERM: \(row)")
        }
        let lost = try LineageStore.readRows(path: db, "SELECT count(*) AS n FROM attempt WHERE state IN ('lost', 'handed_back')")
        #expect(lost.first?["n"] == "0", "no attempt lost or handed back")
        try ClusterTests.expectOneSuccessPerStage(db, run: 1)
        let byWorker = try LineageStore.readRows(path: db, "SELECT worker_id, count(*) AS n FROM attempt WHERE state = 'succeeded' GROUP BY worker_id")
        print("scale: successes by worker \(byWorker.map { "\($0["worker_id"] ?? "?")=\($0["n"] ?? "?")" })")

        // Readiness follows the lineage's writability.
        #expect(try DashboardTests.get(base, "/readyz").status == 200)
        _ = chmod(state, 0o555)
        _ = chmod(db, 0o444)
        let notReady = try DashboardTests.get(base, "/readyz")
        #expect(notReady.status == 503 && notReady.text.contains("lineage is not writable"), "\(notReady.status) \(notReady.text)")
        #expect(try DashboardTests.get(base, "/healthz").status == 200, "alive, only not ready")
        _ = chmod(state, 0o755)
        _ = chmod(db, 0o644)
        #expect(try DashboardTests.get(base, "/readyz").status == 200)
    }
}
