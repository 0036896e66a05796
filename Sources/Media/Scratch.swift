import Foundation
import Synchronization

/// Where the media code writes its scratch files: the text a drawtext reads, copies of overlay
/// images, a title's lines, a GIF's palette, posters. The system's temporary folder unless the
/// process says otherwise: a worker points it into its store's `tmp`, which it tidies, so what a
/// killed stage left there goes an hour later (`StaleTemporaries`), where /tmp kept it until the
/// next boot (and a GIF's movie is hard-linked there rather than copied across file systems).
public enum Scratch {
    private static let folder = Mutex(NSTemporaryDirectory())

    /// Scratch files go in `dir` from now on, when its path needs no escaping in a filter graph
    /// (these paths are written into graphs); false, and the folder unchanged, otherwise.
    @discardableResult
    public static func use(_ dir: String) -> Bool {
        guard !dir.isEmpty, dir.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "/._-".contains($0)) }) else { return false }
        folder.withLock { $0 = dir.hasSuffix("/") ? dir : dir + "/" }
        return true
    }

    /// A fresh path in the scratch folder: `threadline-<what>-<uuid><suffix>`.
    public static func path(_ what: String, suffix: String = "") -> String {
        folder.withLock { $0 } + "threadline-\(what)-\(UUID().uuidString)\(suffix)"
    }
}
