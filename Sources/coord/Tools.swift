import ArgumentParser
import Foundation
import Lineage
import Media

/// `coord doctor`: check a state folder and, with --repair, mend what is safe to mend.
struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a state folder (lineage, artifact store, suggestion stores) and, with --repair, mend what is safe to mend.",
        discussion: """
            Checks: the folder is writable; lineage.db, library-index.db and suggestions.db pass \
            SQLite's check; runs recorded running have a live coordinator; store files match \
            their recorded sizes (--full: their sha256); no stale temporary files.

            --repair never deletes a record: damaged indexes are rebuilt (REINDEX), a damaged \
            database is moved aside (library-index.db, which is rebuilt by a scan, is deleted), \
            orphaned runs are recorded interrupted (resumable), damaged store files are removed \
            (rendered again when needed). Exit status: 0 when nothing is left to fix, 1 otherwise.

            Run it while no coordinator uses the folder.
            """)
    @Flag(name: .long, help: "Carry out the safe repairs.") var repair = false
    @Flag(name: .long, help: "Hash every store file and run SQLite's full integrity check (slower).") var full = false
    @Flag(name: .long, help: "Print the findings as JSON.") var json = false
    @OptionGroup var stateOptions: StateOptions

    func run() throws {
        let findings = StateDoctor.examine(state: stateOptions.directory, .init(repair: repair, full: full))
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(findings), as: UTF8.self))
        } else {
            for f in findings {
                let mark = ["ok": "✔", "warning": "!", "problem": "✘", "repaired": "✚"][f.level.rawValue]!
                print("\(mark) \(f.subject): \(f.message)")
                if let fix = f.fix, f.level != .ok { print("    fix: \(fix)") }
            }
            let left = findings.filter { $0.level == .problem }.count
            let mended = findings.filter { $0.level == .repaired }.count
            print(left == 0 ? "no problems\(mended > 0 ? " left (\(mended) repaired)" : "")"
                            : "\(left) \(left == 1 ? "problem" : "problems")\(repair ? " left" : "; coord doctor --repair mends what is safe to mend")")
        }
        if findings.contains(where: { $0.level == .problem }) { throw ExitCode(1) }
    }
}

/// `coord fetch`: one download under a worker's rules, to check a URL or a host's network.
struct FetchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Download one http(s) URL with the limits and address rules a farm worker applies.",
        discussion: """
            What a worker would do with a URL source: only http(s), at most --max-bytes, within \
            --deadline, and (unless --allow-private-urls) no connection to a loopback, link-local \
            or private address, redirects included. Use it on a worker's host to see why a source fails.
            """)
    @Argument(help: "The URL.") var url: String
    @Option(name: .shortAndLong, help: "Where to write the download.") var output: String
    @Flag(name: .long, help: "Allow loopback, link-local and private addresses (as the embedded default's workers do).") var allowPrivateUrls = false
    @Option(name: .long, help: "Largest download, in bytes.") var maxBytes: Int64 = 4 << 30
    @Option(name: .long, help: "Seconds the download may take in all.") var deadline: Double = 600

    func validate() throws {
        guard maxBytes > 0, deadline > 0 else { throw ValidationError("--max-bytes and --deadline must be positive") }
    }

    func run() throws {
        let part = output + ".part-\(UUID().uuidString.prefix(8))"
        do {
            let n = try Fetch.copy(from: url, to: part, limits: FetchLimits(deadline: deadline, maxBytes: maxBytes, allowPrivateAddresses: allowPrivateUrls))
            guard rename(part, output) == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: output]) }
            print("\(output): \(n) bytes")
        } catch {
            try? FileManager.default.removeItem(atPath: part)
            errorLine("error: \(error)")
            throw ExitCode(1)
        }
    }
}
