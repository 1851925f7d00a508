import Foundation
import HorizonTestSupport
import Testing

/// Comments, test names, scripts and tool output speak to the product's users and maintainers:
/// they say what a thing is and why, never which ticket or planning note it came from.
// Off the cooperative pool: it reads every file of the repository synchronously for seconds.
@Suite("Code and scripts cite no tickets", .offTheCooperativePool)
struct ProjectTextTests {
    /// The folders and files of code, tests, tools and benchmarks; generated code is checked
    /// through the document it is generated from.
    static let scanned = ["Sources", "Tests", "Tools", "Benchmarks", "udev", ".ci", "Package.swift"]
    static let skipped = ["Sources/HorizonAPI/Generated/"]

    /// Where `line` names a ticket or a work session ("issue", "issues", "session" or "sessions"
    /// as a word, a space, a digit) or the design notes the repository does not contain.
    static func citation(in line: String) -> String? {
        let designNotes = "DESIGN" + ".md"
        if line.contains(designNotes) { return designNotes }
        let lower = line.lowercased()
        for word in ["issue", "session"] {
            var rest = lower[...]
            while let found = rest.range(of: word) {
                let before = lower[..<found.lowerBound].last
                var after = rest[found.upperBound...]
                if after.first == "s" { after = after.dropFirst() }
                if !(before?.isLetter ?? false), after.first == " ", let next = after.dropFirst().first,
                    next.isASCII, next.isNumber
                {
                    return String(lower[found.lowerBound...].prefix(12))
                }
                rest = rest[found.upperBound...]
            }
        }
        return nil
    }

    @Test func theCitationCheckFindsWhatItLooksFor() {
        // Spelled in pieces, so that this file does not trip its own check.
        let ticket = "Issue"
        #expect(Self.citation(in: "// The gateway (\(ticket) 16): sealed requests.") != nil)
        #expect(Self.citation(in: "# \(ticket.lowercased())s 2-8 of the plan") != nil)
        #expect(Self.citation(in: "// Since \("Session") 9: faster.") != nil)
        #expect(Self.citation(in: "/// see " + "DESIGN" + ".md section 4") != nil)
        #expect(Self.citation(in: "/// The issuer key issues credentials; issue a coupon.") == nil)
        #expect(Self.citation(in: "let x = issues.count + 1") == nil)
        #expect(Self.citation(in: "/// Every session 's key; subsessions 3 deep") == nil)
    }

    @Test func noFileCitesATicketASessionOrTheDesignNotes() throws {
        let root = RepositoryFile.root
        var found: [String] = []
        for entry in Self.scanned {
            for path in Self.files(under: entry, in: root) where !Self.skipped.contains(where: path.hasPrefix) {
                // Binary files (fuzzing corpora, images) are not text anyone reads as prose.
                guard let data = FileManager.default.contents(atPath: root.appendingPathComponent(path).path),
                    let text = String(data: data, encoding: .utf8)
                else { continue }
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    if let citation = Self.citation(in: String(line)) {
                        found.append("\(path):\(number + 1): \(citation)")
                    }
                }
            }
        }
        #expect(found.isEmpty, "say what the thing is instead:\n\(found.joined(separator: "\n"))")
    }

    /// Every regular file under `entry` (or `entry` itself), relative to `root`.
    static func files(under entry: String, in root: URL) -> [String] {
        let url = root.appendingPathComponent(entry)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [entry] }
        guard let walker = FileManager.default.enumerator(atPath: url.path) else { return [] }
        var paths: [String] = []
        while let relative = walker.nextObject() as? String {
            var isFolder: ObjCBool = false
            let path = entry + "/" + relative
            if FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isFolder),
                !isFolder.boolValue
            {
                paths.append(path)
            }
        }
        return paths
    }
}
