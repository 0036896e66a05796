import Foundation
import Synchronization
import ThreadlineCore

/// Where the media code writes its scratch files: the text a drawtext reads, copies of overlay
/// images, a title's lines, a GIF's palette, posters. The system's temporary folder unless the
/// process says otherwise: a worker points it into its store's `tmp`, which it tidies, so what a
/// killed stage left there goes an hour later (`StaleTemporaries`), where /tmp kept it until the
/// next boot (and a GIF's movie is hard-linked there rather than copied across file systems).
public enum Scratch {
    private static let folder = Mutex(systemFolder)

    /// The system's temporary folder, or /tmp where its path ($TMPDIR) would need escaping in a
    /// filter graph: in "/tmp/bob's tmp" every title and poster drawn outside a worker failed
    /// ("Option not found").
    static var systemFolder: String {
        let t = NSTemporaryDirectory()
        return needsNoEscaping(t) ? t : "/tmp/"
    }

    /// Scratch files go in `dir` from now on, when its path needs no escaping in a filter graph
    /// (these paths are written into graphs); false, and the folder unchanged, otherwise.
    @discardableResult
    public static func use(_ dir: String) -> Bool {
        guard !dir.isEmpty, needsNoEscaping(dir) else { return false }
        folder.withLock { $0 = dir.hasSuffix("/") ? dir : dir + "/" }
        return true
    }

    /// Whether a filter graph can name `path` as it is, in single quotes: ASCII letters, digits
    /// and `/._-` only (a quote, a colon, a comma or a backslash would need escaping at two levels).
    public static func needsNoEscaping(_ path: String) -> Bool {
        path.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "/._-".contains($0)) }
    }

    /// `path` under a name a filter graph can hold: itself when it needs no escaping, else a
    /// symbolic link to it at `link` (the caller removes it), which costs no copy of a large font.
    static func graphName(_ path: String, link: @autoclosure () -> String, what: String, file: String) throws -> String {
        guard !needsNoEscaping(path) else { return path }
        let ext = (path as NSString).pathExtension
        let named = link() + (ext.isEmpty || !needsNoEscaping(ext) ? "" : "." + ext)
        do { try FileManager.default.createSymbolicLink(atPath: named, withDestinationPath: path) } catch {
            throw MediaError(.transform, .permanent, file: file, "cannot use the \(what) \(path): \(FileChecks.reason(error))")
        }
        return named
    }

    /// A fresh path in the scratch folder: `threadline-<what>-<uuid><suffix>`.
    public static func path(_ what: String, suffix: String = "") -> String {
        folder.withLock { $0 } + "threadline-\(what)-\(UUID().uuidString)\(suffix)"
    }
}
