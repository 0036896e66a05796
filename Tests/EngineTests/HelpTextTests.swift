import Foundation
import Testing
import TestSupport

/// `--help` as people read it in an 80-column terminal. ArgumentParser keeps a discussion's line
/// breaks and wraps any line wider than the terminal, so a paragraph broken by hand at 90 columns
/// came out ragged (a full line, then "fairly," alone on the next). Paragraphs are written as one
/// line each (ArgumentParser wraps them to the terminal), and example lines fit in 80 columns.
@Suite struct HelpTextTests {
    /// Every command with its own help: coord's subcommands (found from its own help, so a new one
    /// is checked too), suggest's, and worker.
    static func commands() throws -> [(program: String, args: [String])] {
        func subcommands(_ args: [String]) throws -> [String] {
            let help = try run(coordPath, args + ["--help"], timeout: 30, environment: ["COLUMNS": "5000"]).out
            guard let section = help.components(separatedBy: "SUBCOMMANDS:\n").dropFirst().first else { return [] }
            return section.split(separator: "\n").compactMap { line in
                guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first, !line.contains("See '") else { return nil }
                return String(name)
            }
        }
        var all: [(String, [String])] = [(coordPath, []), (workerPath, [])]
        for sub in try subcommands([]) {
            all.append((coordPath, [sub]))
            for nested in try subcommands([sub]) { all.append((coordPath, [sub, nested])) }
        }
        return all
    }

    /// The text between the overview and the usage line: the discussion as written.
    static func discussion(_ help: String) -> [String] {
        let lines = help.components(separatedBy: "\n")
        guard let start = lines.firstIndex(where: { $0.hasPrefix("OVERVIEW:") }),
              let end = lines.firstIndex(where: { $0.hasPrefix("USAGE:") }) else { return [] }
        return Array(lines[(start + 1)..<end])
    }

    @Test func discussionsReadWellAtEightyColumns() throws {
        let commands = try Self.commands()
        #expect(commands.count > 20, "coord's subcommands were not found: \(commands.map(\.args))")
        var checked = 0
        for (program, args) in commands {
            let name = ([URL(fileURLWithPath: program).lastPathComponent] + args).joined(separator: " ")
            // Wide enough that nothing is wrapped (5,000 columns): the lines as the source writes them.
            let wide = try run(program, args + ["--help"], timeout: 30, environment: ["COLUMNS": "5000"])
            #expect(wide.status == 0, "\(name) --help: \(wide.err)")
            let lines = Self.discussion(wide.out)
            // In 80 columns, as ArgumentParser wraps them there.
            let narrow = Set(Self.discussion(try run(program, args + ["--help"], timeout: 30, environment: ["COLUMNS": "80"]).out))
            for (i, line) in lines.enumerated() where !line.isEmpty {
                if line.hasPrefix(" ") {
                    let whole = narrow.contains(line)
                    #expect(whole, "\(name) --help: an example line of \(line.count) columns is wrapped in an 80-column terminal: \(line)")
                } else {
                    // A paragraph line is followed by a blank line, an example, or the end: a
                    // paragraph broken by hand goes ragged when the terminal wraps it again.
                    let next = i + 1 < lines.count ? lines[i + 1] : ""
                    #expect(next.isEmpty || next.hasPrefix(" "),
                            "\(name) --help: a paragraph broken by hand, which wraps raggedly:\n\(line)\n\(next)")
                }
            }
            checked += lines.isEmpty ? 0 : 1
        }
        #expect(checked >= 8, "only \(checked) commands have a discussion")
    }

    /// ArgumentParser prints an option's default after its help ("(default: 2)"); help that says
    /// its default too read "(default: number of cores). (default: 2)".
    @Test func everyOptionStatesItsDefaultOnce() throws {
        for (program, args) in try Self.commands() {
            let help = try run(program, args + ["--help"], timeout: 30, environment: ["COLUMNS": "5000"]).out
            guard let options = help.components(separatedBy: "OPTIONS:\n").dropFirst().first else { continue }
            for line in options.split(separator: "\n") {
                let said = line.lowercased().components(separatedBy: "default").count - 1
                #expect(said <= 1, "\(([URL(fileURLWithPath: program).lastPathComponent] + args).joined(separator: " ")) --help: \(line)")
            }
        }
    }
}
