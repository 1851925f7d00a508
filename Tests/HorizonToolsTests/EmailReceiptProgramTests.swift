import Foundation
import HorizonTestSupport
import Testing

/// `horizon-wallet receipt PAYMENT_ID` against a real `horizon-server serve`: the wallet that paid
/// has the server mail the receipt to the address it registered with (in the sandbox the mail
/// stays in the outbox, where `horizon-server outbox` shows it).
@Suite("E-mailed receipts with the programs", .offTheCooperativePool)
struct EmailReceiptProgramTests {
    @Test func aWalletHasTheReceiptOfItsPaymentMailedToItsRegisteredAddressOnce() throws {
        let rig = try RemoteLedgerRig()
        try rig.pay("4.20", walletTimeout: 30).expectPaid()
        let id = try #require(try rig.transactions().first?.id)
        func receipt(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-wallet", ["receipt"] + arguments + ["--data-dir", rig.walletDir])
        }

        let asked = try receipt([id])
        #expect(asked.status == 0, "\(asked.standardError)")
        #expect(
            asked.standardOutput == "The receipt of payment \(id) is being e-mailed to email a•••@example.com\n",
            "\(asked.standardOutput)")
        let mail = try Programs.outboxBody(serverDir: rig.serverDir, to: "alex@example.com")
        for line in ["Receipt from Corner Café", "Amount:    4.20 EUR", "Total:     4.20 EUR", "Payment:   \(id)"] {
            #expect(mail.contains(line), "\(line) in \(mail)")
        }
        // Asked again while it waits: the same mail, said so.
        let again = try receipt([id.uppercased(), "--json"])
        #expect(again.status == 0, "\(again.standardError)")
        let answer = try JSONSerialization.jsonObject(with: Data(again.standardOutput.utf8)) as? [String: Any]
        #expect(answer?["alreadyQueued"] as? Bool == true && answer?["paymentId"] as? String == id)

        // A payment this wallet did not make, and an id that is no id.
        let unknown = try receipt([String(repeating: "ab", count: 16)])
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("(transaction_not_found, request "), "\(unknown.standardError)")
        let malformed = try receipt(["12345"])
        #expect(malformed.status == 2)
        #expect(malformed.standardError.contains("the payment id must be 32 hex digits"))
    }

    @Test func theHelpSaysWhereTheReceiptGoes() throws {
        let help = try Programs.run("horizon-wallet", ["receipt", "--help"])
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("e-mail address this wallet registered with"), "\(help.standardOutput)")
        #expect(try Programs.run("horizon-wallet", ["--help"]).standardOutput.contains("  receipt"))
    }
}
