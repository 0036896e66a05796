import Foundation
import Testing
import TestSupport

/// In a container the default slots and local workers follow the CPUs it may use, not the
/// host's cores. The container is made here as a container runtime makes one: a cgroup with a
/// one-CPU quota, entered, and seen from a cgroup namespace of its own (root only; skipped with a
/// message elsewhere). This machine's CPU controller is cgroup v1, whose quota Foundation's count
/// follows too; the v2 quota (`cpu.max`), which only NIOCore's count reads, cannot be made here.
@Suite struct CoresTests {
    @Test func defaultsFollowAContainersCPUQuota() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            print("skipped: needs root and unshare(1) to make a cgroup with a CPU quota"); return
        }
        let name = "threadline-cores-\(getpid())"
        let dir = temporaryDirectory("cores")
        // make: a cgroup with a one-CPU quota ($CG); inside: how the container sees its cgroups.
        let make: String, inside: String
        if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") {
            make = """
                echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
                CG=/sys/fs/cgroup/\(name); mkdir $CG && echo '100000 100000' > $CG/cpu.max || exit 3
                """
            inside = "umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup || exit 3"
        } else if FileManager.default.fileExists(atPath: "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") {
            make = """
                CG=/sys/fs/cgroup/cpu/\(name); mkdir $CG || exit 3
                echo 100000 > $CG/cpu.cfs_period_us && echo 100000 > $CG/cpu.cfs_quota_us || exit 3
                """
            inside = "umount /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu || exit 3"
        } else {
            print("skipped: no cgroup CPU controller at /sys/fs/cgroup"); return
        }
        try (inside + "\nexec \"$@\"\n").write(toFile: dir + "/inside.sh", atomically: true, encoding: .utf8)
        // The program (and its arguments) run inside the one-CPU cgroup, in a cgroup and mount
        // namespace of their own; the cgroup is removed when they end. Status 3: this machine
        // cannot make such a container (no cgroup namespaces, a controller not delegated).
        try (make + """

            trap 'rmdir $CG' EXIT
            sh -c 'echo $$ > "$1/cgroup.procs" || exit 3; shift; unshare --cgroup --mount sh "$@" || exit 3' _ "$CG" \(dir)/inside.sh "$@"
            """).write(toFile: dir + "/in-one-cpu.sh", atomically: true, encoding: .utf8)
        let file = dir + "/in-one-cpu.sh"
        let worker = try run("/bin/sh", [file, workerPath, "--help"], timeout: 30, environment: ["COLUMNS": "5000"])
        guard worker.status != 3 else { print("skipped: could not make a cgroup with a CPU quota here: \(worker.err)"); return }
        #expect(worker.out.contains("(in a container, its CPU quota) unless given. (default: 1)"), "\(worker.out)\(worker.err)")
        let submit = try run("/bin/sh", [file, coordPath, "submit", "--help"], timeout: 30, environment: ["COLUMNS": "5000"])
        #expect(submit.out.contains("(in a container, its CPU quota) unless given. (default: 1)"), "\(submit.out)\(submit.err)")
        // Outside it, the machine's CPUs (more than one on any machine that runs this suite's renders).
        let host = try run(workerPath, ["--help"], timeout: 30, environment: ["COLUMNS": "5000"])
        #expect(host.out.contains("unless given. (default: \(ProcessInfo.processInfo.activeProcessorCount))"), "\(host.out)")
    }
}
