import NIOCore

/// The CPUs this process may use: in a container, its cgroup's CPU quota or cpuset (`docker run
/// --cpus 2` on a 64-core host is 2, not 64), else the machine's. Slots, local workers and
/// parallel encodes default to it: counting the host's cores in a container runs many times the
/// work its quota allows at once, each pipeline with its own memory.
///
/// Foundation's `activeProcessorCount` (Swift 6.3) follows a cgroup v1 quota but not cgroup v2's
/// `cpu.max` (its library holds only the v1 paths), and v2 is what Debian 12, Ubuntu 22.04 and
/// current Docker and Kubernetes hosts use; NIOCore's `System.coreCount` reads both.
public enum Cores {
    public static var available: Int { max(1, System.coreCount) }
}
