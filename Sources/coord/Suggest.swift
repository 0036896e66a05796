import ArgumentParser
import Foundation
import Engine
import Lineage
import Media
import Suggestions
import ThreadlineCore

/// `coord suggest`: "For You" drafts from a photo library. Opt-in, never rendered or shown
/// uninvited, titles that are dates only, every suggestion an ordinary pipeline file.
struct SuggestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "suggest",
        abstract: "Draft movies from a photo library by capture date (opt-in; never renders anything).",
        discussion: """
        Nothing happens for a library until you opt it in:
          coord suggest enable ~/Pictures             recent days (the last 30)
          coord suggest enable ~/Pictures --memories  and "on this day" in past years
          coord suggest ~/Pictures                    scan, write drafts, list them
          coord submit ~/.local/share/threadline/suggestions/<id>.yaml   render one

        Titles are dates only. Hide what you never want suggested:
          coord suggest block ~/Pictures --date 2024-03-02
              (or --from D --to D, --folder P, --asset P)
          coord suggest dismiss ID

        Capture dates come from metadata only (EXIF, QuickTime); files dated only by file times \
        are never suggested. See docs/SUGGESTIONS.md.
        """,
        subcommands: [SuggestList.self, SuggestEnable.self, SuggestDisable.self, SuggestPause.self, SuggestResume.self,
                      SuggestBlock.self, SuggestUnblock.self, SuggestDismiss.self],
        defaultSubcommand: SuggestList.self)
}

/// The two stores under the state folder.
struct SuggestStores {
    let settings: SuggestionSettings
    let index: LibraryIndex
    let state: String

    init(_ options: StateOptions) throws {
        state = try options.made()
        do {
            settings = try SuggestionSettings(path: state + "/suggestions.db")
            index = try LibraryIndex(path: state + "/library-index.db")
        } catch {
            errorLine("error: cannot open the suggestion settings in \(state): \(error)")
            throw ExitCode(1)
        }
    }
}

/// A library folder as the stores key it: absolute, symlinks resolved, no trailing slash.
func libraryPath(_ given: String) throws -> String {
    let url = URL(fileURLWithPath: given).standardizedFileURL.resolvingSymlinksInPath()
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir), isDir.boolValue else {
        throw ValidationError("\(given) is not a folder")
    }
    return url.path
}

func parseDay(_ text: String, _ option: String) throws -> Suggestions.Day {
    guard text.count == 10, let d = Suggestions.Day(text) else { throw ValidationError("\(option) takes a date as YYYY-MM-DD, got '\(text)'") }
    return d
}

struct SuggestList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Scan opted-in libraries, write one draft pipeline and contact sheet per suggestion, and list them.")
    @Argument(help: "Library folders.") var libraries: [String]
    @Option(name: .long, help: "The day to suggest for, YYYY-MM-DD (default: today, in this machine's time zone).") var today: String?
    @Option(name: .long, help: "Folder for the drafts (default: <state>/suggestions).") var out: String?
    @Flag(name: .long, help: "Print the suggestions as a JSON array.") var json = false
    @Flag(name: .long, help: "Do not draw contact sheets (faster).") var noContactSheets = false
    @OptionGroup var stateOptions: StateOptions

    func validate() throws {
        guard !libraries.isEmpty else { throw ValidationError("name at least one library folder") }
        if let today { _ = try parseDay(today, "--today") }
    }

    func run() throws {
        let stores = try SuggestStores(stateOptions)
        let day = try today.map { try parseDay($0, "--today") } ?? {
            var c = Calendar(identifier: .gregorian); c.timeZone = .current
            let p = c.dateComponents([.year, .month, .day], from: Date())
            return Suggestions.Day(year: p.year!, month: p.month!, day: p.day!)
        }()
        let folder = out.map { URL(fileURLWithPath: $0).standardizedFileURL.path } ?? stores.state + "/" + FileChecks.suggestionsFolder
        var all: [[String: Any]] = []
        var listed: [(id: String, itemsHash: String, library: String)] = []
        var failed = 0
        let paused = try stores.settings.pausedEverywhere()
        for given in libraries {
            let library = try libraryPath(given)
            guard let settings = try stores.settings.library(library) else {
                errorLine("\(library) is not opted in to suggestions: nothing was scanned or written.\n"
                          + "  To opt in: coord suggest enable \(given) [--memories]")
                continue
            }
            if paused || settings.paused {
                errorLine("suggestions are paused\(paused ? "" : " for \(library)"): nothing was scanned or written. To resume: coord suggest resume\(paused ? "" : " \(given)")")
                continue
            }
            let report = try LibraryScanner.scan(library: library, index: stores.index)
            errorLine(String(format: "%@: %d files, %d of them new or changed and read, %.1f s", library, report.files, report.read, report.seconds))
            if !report.unreadable.isEmpty {
                errorLine("\(report.unreadable.count) \(report.unreadable.count == 1 ? "file" : "files") could not be read (skipped):")
                for u in report.unreadable.prefix(10) { errorLine("  \(u.path): \(u.why)") }
                if report.unreadable.count > 10 { errorLine("  … and \(report.unreadable.count - 10) more") }
            }
            let entries = try stores.index.entries(library: library)
            let byPath = Dictionary(entries.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
            let items = LibraryScanner.items(entries)
            let blocks = try stores.settings.blocks(library: library).compactMap(Self.block)
            let dismissed = try stores.settings.dismissals()
            let tag = String(SHA256Hasher.hex(library).prefix(6))
            let made = Suggestions.suggest(items, today: day, memories: settings.memories, blocks: blocks)
            if made.isEmpty {
                let why = Suggestions.whyNone(items, today: day, memories: settings.memories, blocks: blocks)
                    + (settings.memories ? [] : ["memories from earlier years are off (to add them: coord suggest enable \(given) --memories)"])
                errorLine("\(library): no suggestion for \(day):\n" + why.map { "  " + $0 }.joined(separator: "\n"))
            }
            for var s in made {
                s.id += "-" + tag
                let hash = try LibraryScanner.itemsHash(s.items, cached: byPath, index: stores.index)
                listed.append((s.id, hash, library))
                if dismissed[s.id] == hash { continue }
                // One suggestion that cannot be drafted (a file its sheet cannot decode) does not hide the others.
                let draft: Draft
                do { draft = try writeDraft(s, itemsHash: hash, folder: folder) } catch {
                    errorLine("error: the draft of \(s.id) (\(s.title)) could not be written: \(error)")
                    failed += 1
                    continue
                }
                var entry: [String: Any] = ["id": s.id, "kind": s.kind.rawValue, "title": s.title, "from": "\(s.from)", "to": "\(s.to)",
                                            "items": s.items.map(\.path), "pipeline": draft.pipeline]
                if let suggested = draft.suggested {
                    entry["edited"] = true
                    entry["suggested_pipeline"] = suggested
                    errorLine("\(draft.pipeline) was edited, so it is kept as it is; the suggestion as it stands now is in \(suggested)")
                }
                all.append(entry)
            }
        }
        try stores.settings.recordListed(listed)
        if json && all.isEmpty {
            print("[]")
        } else if json {
            let data = try JSONSerialization.data(withJSONObject: all, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } else if all.isEmpty {
            if failed == 0 { print("no suggestions") }
        } else {
            for s in all {
                print("\(s["title"]!)  (\(s["kind"]!), \((s["items"] as! [String]).count) items)  \(s["id"]!)")
                print("  draft: \(s["pipeline"]!)   render: coord submit \(s["pipeline"]!)")
            }
        }
        if failed > 0 { throw ExitCode(1) }
    }

    static func block(_ b: SuggestionSettings.Block) -> Suggestions.Block? {
        switch b.kind {
        case "days": guard let f = b.from.flatMap(Suggestions.Day.init), let t = b.to.flatMap(Suggestions.Day.init) else { return nil }
                     return .days(from: f, to: t)
        case "folder": return b.path.map { .folder($0) }
        case "asset": return b.path.map { .asset($0) }
        default: return nil
        }
    }

    /// Where a suggestion's draft went: `pipeline` is the file to render. A draft a person has
    /// edited stays theirs (`edited`); the suggestion as it stands today then goes beside it.
    struct Draft {
        var pipeline: String
        var edited = false
        var suggested: String?
    }

    /// The draft pipeline (a date title card, then the items in capture order, no text) and its
    /// contact sheet. A draft names the sha256 of its own text, so listing again can tell a draft
    /// it wrote (rewritten when the suggestion changes) from one a person has edited (never
    /// overwritten: the fresh draft goes to `ID.suggested.yaml`). An unchanged draft with its
    /// sheet already there is left as it is: listing again decodes nothing.
    func writeDraft(_ s: Suggestions.Suggestion, itemsHash: String, folder: String) throws -> Draft {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        func q(_ text: String) -> String {   // a JSON string is a YAML double-quoted scalar
            let data = try! JSONSerialization.data(withJSONObject: [text], options: [.withoutEscapingSlashes])
            return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast())
        }
        let path = "\(folder)/\(s.id).yaml", sheet = "\(folder)/\(s.id).png"
        let title = 2.5, photo = 3.0, fade = 0.5
        func n(_ seconds: Double) -> String { String(format: "%g", seconds) }
        var body = """
            # Suggested by `coord suggest` (\(s.kind.rawValue), \(s.title)). A draft: nothing has been rendered.
            # Edit it freely (an edited draft is never overwritten), then render it with:  coord submit \(path)
            # items sha256: \(itemsHash)
            version: 1
            name: \(q(s.id))
            output:
              path: \(q(folder + "/" + s.id + ".mp4"))
              size: 1280x720
              fps: 30
              fit: blur
            transition: { type: fade, duration: \(n(fade)) }
            clips:
              - title: { text: \(q(s.title)), duration: \(n(title)) }

            """
        // Each item's `transition:` is the one into the next; written only where the default does not fit.
        let fits = Suggestions.transitions(lengths: [title] + s.items.map { $0.kind == .photo ? photo : $0.seconds },
                                           standard: fade, frame: 1.0 / 30)
        func transition(after k: Int) -> String {
            guard k < fits.count, fits[k] != fade else { return "" }
            return fits[k] == 0 ? "    transition: none\n" : "    transition: { type: fade, duration: \(n(fits[k])) }\n"
        }
        body += transition(after: 0)
        for (k, item) in s.items.enumerated() {
            switch item.kind {
            case .photo: body += "  - photo: \(q(item.path))\n    duration: \(n(photo))\n"
            case .livePhoto, .motionPhoto: body += "  - live_photo: \(q(item.path))\n"
            case .video: body += "  - video: \(q(item.path))\n"
            }
            body += transition(after: k + 1)
        }
        let text = Self.signed(body)
        var draft = Draft(pipeline: path)
        var target = path
        // Read as bytes: a draft an editor saved in another encoding than UTF-8 is still the
        // person's edit, not a missing file to write over.
        if FileManager.default.fileExists(atPath: path),
           case let existing = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self),
           existing != text, !Self.unedited(existing) {
            draft.edited = true
            target = "\(folder)/\(s.id).suggested.yaml"
            draft.suggested = target
        }
        let same = (try? Data(contentsOf: URL(fileURLWithPath: target))) == Data(text.utf8)
        if same && (noContactSheets || FileManager.default.fileExists(atPath: sheet)) { return draft }
        if !same { try text.write(toFile: target, atomically: true, encoding: .utf8) }
        if !noContactSheets {
            let p = try loadPipeline(target)
            let posters = NSTemporaryDirectory() + "threadline-suggest-\(UUID().uuidString.prefix(8))"
            defer { try? FileManager.default.removeItem(atPath: posters) }
            var captions: [Int: String] = [0: s.title]
            for (k, item) in s.items.enumerated() {
                // The day is in the title; each poster says its time and what it is.
                captions[k + 1] = String(item.local.dropFirst(11).prefix(5)) + "  " + Self.caption(item.kind)
            }
            try writeThumbnails(p, folder: posters, width: 240, columns: 5, sheet: sheet, captions: captions) { _ in }
        }
        return draft
    }

    /// What a contact sheet's poster says an item is.
    static func caption(_ kind: Suggestions.Item.Kind) -> String {
        switch kind {
        case .photo, .video: return kind.rawValue
        case .livePhoto: return "Live Photo"
        case .motionPhoto: return "motion photo"
        }
    }

    static let signaturePrefix = "# draft sha256: "

    /// The draft's text with a first line naming the sha256 of the rest.
    static func signed(_ body: String) -> String {
        signaturePrefix + SHA256Hasher.hex(body) + "\n" + body
    }

    /// Whether a draft on disk is still exactly as `coord suggest` wrote it.
    static func unedited(_ text: String) -> Bool {
        guard text.hasPrefix(signaturePrefix), let newline = text.firstIndex(of: "\n") else { return false }
        let named = text[text.index(text.startIndex, offsetBy: signaturePrefix.count)..<newline]
        return named == SHA256Hasher.hex(String(text[text.index(after: newline)...]))
    }
}

struct SuggestEnable: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "enable", abstract: "Opt a library in to suggestions of recent days (and, with --memories, earlier years).")
    @Argument(help: "Library folder.") var library: String
    @Flag(name: .long, help: "Also suggest \"on this day\" memories from earlier years.") var memories = false
    @OptionGroup var stateOptions: StateOptions
    func run() throws {
        let stores = try SuggestStores(stateOptions)
        let path = try libraryPath(library)
        try stores.settings.enable(path, memories: memories, now: Date().timeIntervalSince1970)
        print("suggestions enabled for \(path): recent days\(memories ? " and memories from earlier years" : " (memories from earlier years stay off; add --memories)")")
        print("list them with: coord suggest \(library)")
    }
}

struct SuggestDisable: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "disable", abstract: "Opt a library out: no more scans or suggestions for it.")
    @Argument(help: "Library folder.") var library: String
    @OptionGroup var stateOptions: StateOptions
    func run() throws {
        let stores = try SuggestStores(stateOptions)
        let path = try libraryPath(library)
        print(try stores.settings.disable(path) ? "suggestions disabled for \(path)" : "\(path) was not opted in")
    }
}

struct SuggestPause: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause suggestions for one library, or for all when none is named.")
    @Argument(help: "Library folder (default: all).") var library: String?
    @OptionGroup var stateOptions: StateOptions
    func run() throws { try setPaused(true, library: library, stateOptions) }
}

struct SuggestResume: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Resume paused suggestions (one library, or all).")
    @Argument(help: "Library folder (default: all).") var library: String?
    @OptionGroup var stateOptions: StateOptions
    func run() throws { try setPaused(false, library: library, stateOptions) }
}

func setPaused(_ paused: Bool, library: String?, _ stateOptions: StateOptions) throws {
    let stores = try SuggestStores(stateOptions)
    let path = try library.map(libraryPath)
    guard try stores.settings.setPaused(path, paused) else { errorLine("error: \(path ?? "") is not opted in"); throw ExitCode(1) }
    print("suggestions \(paused ? "paused" : "resumed")\(path.map { " for \($0)" } ?? "")")
}

/// What `block` and `unblock` take.
struct BlockOptions: ParsableArguments {
    @Argument(help: "Library folder.") var library: String
    @Option(name: .long, help: "One day, YYYY-MM-DD.") var date: String?
    @Option(name: .long, help: "First day of a range, YYYY-MM-DD (with --to).") var from: String?
    @Option(name: .long, help: "Last day of a range, YYYY-MM-DD (with --from).") var to: String?
    @Option(name: .long, help: "A folder: nothing under it is suggested.") var folder: String?
    @Option(name: .long, help: "One file (a Live Photo's still or movie hides the pair).") var asset: String?

    func validate() throws {
        let given = [date != nil, from != nil || to != nil, folder != nil, asset != nil].filter { $0 }.count
        guard given == 1 else { throw ValidationError("give exactly one of --date, --from/--to, --folder, --asset") }
        if from != nil || to != nil {
            guard let from, let to else { throw ValidationError("--from and --to go together") }
            guard try parseDay(from, "--from") <= parseDay(to, "--to") else { throw ValidationError("--from must not be after --to") }
        }
        if let date { _ = try parseDay(date, "--date") }
    }

    func block() throws -> SuggestionSettings.Block {
        let lib = try libraryPath(library)
        func absolute(_ p: String) -> String { URL(fileURLWithPath: p).standardizedFileURL.resolvingSymlinksInPath().path }
        if let date { return .init(library: lib, kind: "days", from: date, to: date) }
        if let from, let to { return .init(library: lib, kind: "days", from: from, to: to) }
        if let folder { return .init(library: lib, kind: "folder", path: absolute(folder)) }
        return .init(library: lib, kind: "asset", path: absolute(asset!))
    }

    var what: String {
        if let date { return "the day \(date)" }
        if let from, let to { return "the days \(from) to \(to)" }
        if let folder { return "the folder \(folder)" }
        return "the file \(asset ?? "")"
    }
}

struct SuggestBlock: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "block", abstract: "Never suggest a day, a range of days, a folder or a file (until unblocked).")
    @OptionGroup var options: BlockOptions
    @OptionGroup var stateOptions: StateOptions
    func run() throws {
        let stores = try SuggestStores(stateOptions)
        try stores.settings.addBlock(try options.block())
        print("blocked \(options.what): it will not appear in suggestions until 'coord suggest unblock'")
    }
}

struct SuggestUnblock: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unblock", abstract: "Undo a block (the same options as block).")
    @OptionGroup var options: BlockOptions
    @OptionGroup var stateOptions: StateOptions
    func run() throws {
        let stores = try SuggestStores(stateOptions)
        guard try stores.settings.removeBlock(try options.block()) else { errorLine("error: \(options.what) was not blocked"); throw ExitCode(1) }
        print("unblocked \(options.what)")
    }
}

struct SuggestDismiss: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "dismiss", abstract: "Hide one suggestion for good (it comes back only if its items change).")
    @Argument(help: "The suggestion's id (from 'coord suggest list').") var id: String
    @OptionGroup var stateOptions: StateOptions
    func run() throws {
        let stores = try SuggestStores(stateOptions)
        guard let hash = try stores.settings.listedHash(id: id) else {
            errorLine("error: no suggestion \(id) has been listed; run 'coord suggest list LIBRARY' and copy an id from it")
            throw ExitCode(1)
        }
        try stores.settings.dismiss(id: id, itemsHash: hash, now: Date().timeIntervalSince1970)
        print("dismissed \(id)")
    }
}
