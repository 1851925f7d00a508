import Foundation
import HorizonTestSupport
import HorizonProtocol
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
        let steps = SQLiteTerminalJournal.stepsColumns.split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(steps.count == 17)
        for column in steps { #expect(page.contains("`\(column)`"), "steps.\(column)") }
        for step in ["offered", "confirmed", "submitted", "result", "acknowledged"] {
            #expect(page.contains("| `\(step)` |"), "step \(step)")
        }
        // The offline table's columns: each line of its DDL that starts with a name.
        let offline = SQLiteTerminalJournal.offlinePaymentsTableSQL.split(separator: "\n").compactMap { line in
            line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init)
        }.filter { $0.allSatisfy { $0.isLowercase || $0 == "_" } }
        #expect(offline.count == 17, "\(offline)")
        for column in offline { #expect(page.contains("`\(column)`"), "offline_payments.\(column)") }
    }
}
