import Foundation

/// The person's folders as their shell and the XDG base-directory spec name them. Foundation on
/// Linux reads the home folder from the password database and ignores `$HOME`, so
/// `HOME=/srv/me coord …` (a service, a test harness, `sudo -E`) and `~/` in a pipeline would
/// have meant another folder than the shell's `~`.
public enum Home {
    /// `$HOME` when it is an absolute path, else the password database's.
    public static var directory: String {
        if let home = ProcessInfo.processInfo.environment["HOME"], home.hasPrefix("/") { return home }
        return NSHomeDirectory()
    }

    /// `$XDG_DATA_HOME/name`; `$XDG_DATA_HOME` is `~/.local/share` when unset or not absolute (as the spec says).
    public static func dataFolder(_ name: String) -> String {
        let xdg = ProcessInfo.processInfo.environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        return (xdg ?? directory + "/.local/share") + "/" + name
    }

    /// `$XDG_CACHE_HOME/name`; `$XDG_CACHE_HOME` is `~/.cache` when unset or not absolute: files
    /// that can be made again from others, and may be removed at any time.
    public static func cacheFolder(_ name: String) -> String {
        let xdg = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        return (xdg ?? directory + "/.cache") + "/" + name
    }

    /// Removes what in a cache `folder` has gone unused for `days`: each entry by its `.used`
    /// file (a folder whose every use touches one), else by its own modification time. Without
    /// it a cache keeps all it was ever given; an entry needed again is made again.
    public static func prune(_ folder: String, unusedFor days: Double, now: Date = Date()) {
        let fm = FileManager.default
        for name in (try? fm.contentsOfDirectory(atPath: folder)) ?? [] {
            let entry = folder + "/" + name
            let used = (try? fm.attributesOfItem(atPath: entry + "/.used"))?[.modificationDate] as? Date
                ?? (try? fm.attributesOfItem(atPath: entry))?[.modificationDate] as? Date
            if let used, now.timeIntervalSince(used) > days * 86_400 { try? fm.removeItem(atPath: entry) }
        }
    }
}
