import Foundation
import HorizonProtocol
import HorizonTestSupport
import Testing

@testable import HorizonStores

/// `docs/protocol.md` names the messages' signature labels and every table and column of the
/// terminal's journal as the code has them.
@Suite("The protocol page matches the messages and the journal")
struct DocumentationTests {
    static var page: String {
        get throws { try RepositoryFile.text("docs/protocol.md") }
    }

    @Test func everySignatureLabelIsTheCodes() throws {
        let page = try Self.page
        for label in [
            Hello.proofDomain, Offer.signatureDomain, Confirm.signatureDomain, Receipt.signatureDomain,
            Redeem.signatureDomain, PaymentStatusQuery.proofDomain,
        ] {
            let text = String(decoding: label, as: UTF8.self)
            #expect(page.contains("`\(text)`"), "docs/protocol.md does not name \(text)")
        }
    }

    @Test func everyJournalColumnAndStepIsNamed() throws {
        let page = try Self.page
        #expect(page.contains("schema\nversion \(SQLiteTerminalJournal.schemaVersion)"))
        let journal = try SQLiteTerminalJournal(path: ":memory:")
        func columns(_ table: String) throws -> [String] {
            try journal.database.query("SELECT name FROM pragma_table_info(?)", [.text(table)]).map {
                try $0.text("name")
            }
        }
        let steps = try columns("steps")
        #expect(steps.count == 18)
        for column in steps { #expect(page.contains("`\(column)`"), "steps.\(column)") }
        for step in ["offered", "confirmed", "submitted", "result", "acknowledged"] {
            #expect(page.contains("| `\(step)` |"), "step \(step)")
        }
        let offline = try columns("offline_payments")
        #expect(offline.count == 17, "\(offline)")
        for column in offline { #expect(page.contains("`\(column)`"), "offline_payments.\(column)") }
    }
}

/// The README is the five-minute page, and the pages it leads to hold together: no dead relative
/// link or anchor, no ticket or planning-note citation, and the licence it names is there.
// Off the cooperative pool: it reads every page synchronously for seconds.
@Suite("The README and docs/ hold together", .offTheCooperativePool)
struct ReadmeAndDocsTests {
    /// The README, every page in docs/, and the benchmark pages.
    static var pages: [String] {
        get throws {
            let docs = try FileManager.default.contentsOfDirectory(
                atPath: RepositoryFile.root.appendingPathComponent("docs").path)
            return ["README.md", "BENCHMARKS.md", "Benchmarks/README.md"]
                + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
        }
    }

    @Test func theReadmeIsShort() throws {
        let lines = try RepositoryFile.text("README.md").split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count <= 250, "README.md has \(lines.count) lines; move detail into docs/")
    }

    @Test func theLicenceIsThereAndTheReadmeNamesIt() throws {
        let licence = try RepositoryFile.text("LICENSE")
        #expect(licence.contains("Apache License"))
        #expect(licence.contains("Version 2.0, January 2004"))
        #expect(try RepositoryFile.text("README.md").contains("[LICENSE](LICENSE)"))
    }

    @Test func noPageCitesATicketASessionOrTheDesignNotes() throws {
        // Spelled in pieces, so that this file does not cite them itself.
        let designNotes = "DESIGN" + ".md"
        let numbered = try Regex("(?i)\\b(issue|issues|session|sessions) [0-9]")
        var found: [String] = []
        for page in try Self.pages {
            for (number, line) in try RepositoryFile.text(page).split(separator: "\n", omittingEmptySubsequences: false)
                .enumerated()
            where line.contains(designNotes) || line.contains(numbered) {
                found.append("\(page):\(number + 1): \(line.prefix(100))")
            }
        }
        #expect(found.isEmpty, "say what the thing is instead:\n\(found.joined(separator: "\n"))")
    }

    @Test func everyRelativeLinkPointsToAFileAndHeadingThatExist() throws {
        var dead: [String] = []
        for page in try Self.pages where page == "README.md" || page.hasPrefix("docs/") {
            let folder = page.lastIndex(of: "/").map { String(page[..<$0]) + "/" } ?? ""
            for target in Self.links(in: try RepositoryFile.text(page)) {
                if target.contains("://") || target.hasPrefix("mailto:") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let file = parts[0].isEmpty ? page : Self.normalised(folder + parts[0])
                guard FileManager.default.fileExists(atPath: RepositoryFile.root.appendingPathComponent(file).path)
                else {
                    dead.append("\(page): \(target) (no \(file))")
                    continue
                }
                if parts.count == 2, file.hasSuffix(".md") {
                    let anchors = Self.headingAnchors(in: try RepositoryFile.text(file))
                    if !anchors.contains(String(parts[1])) { dead.append("\(page): \(target) (no such heading)") }
                }
            }
        }
        #expect(dead.isEmpty, "dead links:\n\(dead.joined(separator: "\n"))")
    }

    @Test func theLinkReaderFindsLinksAndHeadings() {
        let text = "See [a](docs/a.md#b-c) and ![p](p.png).\n```\nx[0](y)\n```\n## B, c!\n"
        #expect(Self.links(in: text) == ["docs/a.md#b-c", "p.png"])
        #expect(Self.headingAnchors(in: text) == ["b-c"])
        #expect(Self.normalised("docs/../udev/README.md") == "udev/README.md")
    }

    /// The targets of the Markdown links outside code blocks.
    static func links(in text: String) -> [String] {
        var targets: [String] = []
        var inCode = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            if inCode { continue }
            var rest = line[...]
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                targets.append(String(after[..<close]))
                rest = after[after.index(after: close)...]
            }
        }
        return targets
    }

    /// The anchors GitHub makes of the headings: lower case, punctuation dropped, spaces to hyphens.
    static func headingAnchors(in text: String) -> Set<String> {
        var anchors: Set<String> = []
        var inCode = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, line.hasPrefix("#") else { continue }
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            let kept = title.unicodeScalars.filter {
                CharacterSet.alphanumerics.contains($0) || $0 == " " || $0 == "-" || $0 == "_"
            }
            anchors.insert(String(String.UnicodeScalarView(kept)).replacingOccurrences(of: " ", with: "-"))
        }
        return anchors
    }

    /// A relative path with `..` and `.` resolved.
    static func normalised(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") {
            if part == "." { continue }
            if part == "..", !parts.isEmpty { parts.removeLast() } else { parts.append(part) }
        }
        return parts.joined(separator: "/")
    }
}
