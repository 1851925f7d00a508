import Foundation
import HorizonTestSupport
import Testing

/// `horizon-terminal register-users | transactions | programs | refund` on an activated terminal:
/// a real `horizon-server`, the terminal and a wallet as processes; the commands go through the
/// merchant service with the terminal's key and open no ledger file.
@Suite("horizon-terminal's merchant commands at a server", .offTheCooperativePool)
struct MerchantCommandsProgramTests {
    @Test func registerUsersTransactionsProgramsAndRefundsGoThroughTheServer() throws {
        let rig = try RemoteLedgerRig()
        let paid = try rig.pay("5.00", walletTimeout: 30)
        paid.expectPaid()
        let paymentID = try #require(try rig.transactions().first?.id)

        // `pay` still opens the terminal's own ledger for its currency; the merchant commands
        // must not: with the file gone, none of them may bring it back.
        let ledgerFile = rig.terminalDir + "/ledger.sqlite"
        if FileManager.default.fileExists(atPath: ledgerFile) {
            try FileManager.default.moveItem(atPath: ledgerFile, toPath: ledgerFile + ".away")
        }
        func terminal(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-terminal", arguments + ["--data-dir", rig.terminalDir])
        }
        func json(_ result: ProgramResult) throws -> Any {
            #expect(result.status == 0, "\(result.standardError)")
            return try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))
        }

        // Register users: added with an id made from the name, refused when taken, renamed, removed.
        let added = try json(try terminal(["register-users", "add", "Ada Lovelace", "--json"])) as? [String: Any]
        #expect(added?["id"] as? String == "ada-lovelace" && added?["name"] as? String == "Ada Lovelace")
        let taken = try terminal(["register-users", "add", "Ada Lovelace"])
        #expect(taken.status == 1)
        #expect(taken.standardError.contains("register_user_exists"), "\(taken.standardError)")
        let tooLong = try terminal(["register-users", "add", String(repeating: "x", count: 65)])
        #expect(tooLong.status != 0 && tooLong.standardError.contains("a name must be 1 to 64 bytes"))
        let renamed = try json(try terminal(["register-users", "rename", "ada-lovelace", "Ada L.", "--json"]))
        #expect((renamed as? [String: Any])?["name"] as? String == "Ada L.")
        let listed = try json(try terminal(["register-users", "list", "--json"])) as? [[String: Any]]
        #expect(listed?.map { $0["id"] as? String } == ["ada-lovelace"])
        #expect(try terminal(["register-users", "remove", "ada-lovelace"]).status == 0)
        let gone = try terminal(["register-users", "remove", "ada-lovelace"])
        #expect(gone.status == 1 && gone.standardError.contains("register_user_not_found"), "\(gone.standardError)")

        // Transactions at the server, filtered; a bad cursor is refused with its code.
        let page = try json(try terminal(["transactions", "--type", "payment", "--json"])) as? [String: Any]
        let rows = page?["transactions"] as? [[String: Any]]
        #expect(rows?.map { $0["paymentId"] as? String } == [paymentID])
        #expect(page?["nextCursor"] == nil)
        let bonus = try json(try terminal(["transactions", "--type", "bonus", "--json"])) as? [String: Any]
        #expect((bonus?["transactions"] as? [Any])?.isEmpty == true)
        let badCursor = try terminal(["transactions", "--cursor", "bogus"])
        #expect(
            badCursor.status == 1 && badCursor.standardError.contains("invalid_cursor"), "\(badCursor.standardError)")

        // Programs: the merchant's, from the server; a wallet's standing is not a terminal's to change there.
        let programs = try json(try terminal(["programs", "--json"])) as? [String: Any]
        #expect(programs?["hasBonusProgram"] as? Bool == true)
        #expect(programs?["bonusPointsPerMajorUnit"] as? Int == 1 && programs?["currency"] as? String == "EUR")
        let points = try terminal(["programs", "points", "5", "--wallet", "04" + String(repeating: "11", count: 64)])
        #expect(points.status == 1 && points.standardError.contains("is set up there by the merchant"))

        // Refunds need the merchant's admin: the terminal's key alone is refused before anything
        // is sent (and the server refuses a signed refund too: `aTerminalsKeyCannotRefundOrRevoke`).
        let byTheTill = try terminal(["refund", paymentID, "--amount", "1.50"])
        #expect(byTheTill.status == 1, "\(byTheTill.standardError)")
        #expect(
            byTheTill.standardError.contains(
                "a refund at the Horizon server needs the merchant's admin: add --admin-email"),
            "\(byTheTill.standardError)")
        func refund(_ arguments: [String]) throws -> ProgramResult {
            try terminal(
                ["refund"] + arguments + [
                    "--admin-email", RemoteLedgerRig.email, "--password-file", rig.sandbox.path("password"),
                ])
        }
        // Refunds: a part with a generated id, its retry by that id, the rest, then nothing left.
        let first = try json(try refund([paymentID, "--amount", "1.50", "--json"])) as? [String: Any]
        let refundID = try #require(first?["refundId"] as? String)
        #expect(refundID.hasPrefix("r_") && JSONShapes.formatted(first?["amount"]) == "1.50 EUR")
        let retry =
            try json(try refund([paymentID, "--amount", "1.50", "--refund-id", refundID, "--json"]))
            as? [String: Any]
        #expect(retry?["refundId"] as? String == refundID && retry?["createdAt"] as? Int == first?["createdAt"] as? Int)
        let conflict = try refund([paymentID, "--amount", "2.00", "--refund-id", refundID])
        #expect(conflict.status == 1 && conflict.standardError.contains("idempotency_conflict"))
        let rest = try refund([paymentID])
        #expect(rest.status == 0, "\(rest.standardError)")
        #expect(rest.standardOutput.contains("refunded 3.50 EUR of payment \(paymentID)"), "\(rest.standardOutput)")
        #expect(rest.standardError.contains("refund id r_"), "the generated id is printed for a retry")
        let tooMuch = try refund([paymentID, "--amount", "0.01"])
        #expect(tooMuch.status == 1 && tooMuch.standardError.contains("refund_exceeds_remaining"))
        let nothing = try refund([paymentID])
        #expect(nothing.status == 1 && nothing.standardError.contains("nothing is left to refund"))
        let badID = try terminal(["refund", "xyz"])
        #expect(badID.status != 0 && badID.standardError.contains("the payment id must be 32 hex digits"))

        let details = try json(try terminal(["transactions", paymentID, "--json"])) as? [String: Any]
        #expect(JSONShapes.money(details?["refundable"])?.minorUnits == 0)
        #expect(
            (details?["refunds"] as? [[String: Any]])?.compactMap { JSONShapes.money($0["amount"])?.minorUnits }
                == [150, 350])
        #expect(try rig.walletBalance() == 100_00, "the wallet has its 5.00 back")
        #expect(!FileManager.default.fileExists(atPath: ledgerFile), "a merchant command opened the terminal's ledger")
    }

    @Test func theSandboxRefundsInItsOwnLedger() throws {
        let sandbox = try Sandbox()
        let terminalDir = sandbox.path("terminal")
        let walletDir = sandbox.path("wallet")
        let socket = sandbox.path("radio.sock")
        #expect(
            try Programs.run("horizon-terminal", ["init", "--data-dir", terminalDir, "--merchant-name", "Test Bakery"])
                .status == 0)
        #expect(
            try Programs.run(
                "horizon-wallet", ["init", "--data-dir", walletDir, "--trust", terminalDir + "/anchor.pub"]
            )
            .status == 0)
        let terminal = try Programs.start(
            "horizon-terminal", ["pay", "12.50", "--data-dir", terminalDir, "--radio-socket", socket, "--json"])
        let wallet = try Programs.run(
            "horizon-wallet",
            ["pay", "--tip", "1.50", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
        #expect(terminal.finish().status == 0 && wallet.status == 0, "\(wallet.standardError)")
        let listed = try Programs.run("horizon-terminal", ["transactions", "--json", "--data-dir", terminalDir])
        let rows = JSONShapes.transactions(listed.standardOutput)
        let paymentID = try #require(rows.first?["paymentId"] as? String)

        let part = try Programs.run(
            "horizon-terminal", ["refund", paymentID, "--amount", "4.00", "--json", "--data-dir", terminalDir])
        #expect(part.status == 0, "\(part.standardError)")
        let refund = try JSONSerialization.jsonObject(with: Data(part.standardOutput.utf8)) as? [String: Any]
        #expect(
            JSONShapes.formatted(refund?["amount"]) == "4.00 EUR"
                && refund?["destination"] as? String == "horizon_balance")
        // floor(12 points × 4.00 / 14.00) = 3 points back.
        #expect(refund?["bonusPointsReversed"] as? Int == 3)
        let rest = try Programs.run("horizon-terminal", ["refund", paymentID, "--data-dir", terminalDir])
        #expect(rest.standardOutput.contains("refunded 10.00 EUR"), "\(rest.standardOutput) \(rest.standardError)")
        let again = try Programs.run(
            "horizon-terminal", ["refund", paymentID, "--amount", "0.01", "--data-dir", terminalDir])
        #expect(again.status == 1 && again.standardError.contains("refund_exceeds_remaining"), "\(again.standardError)")
        let filtered = try Programs.run(
            "horizon-terminal", ["transactions", "--type", "payment", "--data-dir", terminalDir])
        #expect(filtered.status == 1 && filtered.standardError.contains("need an activated terminal"))

        // The points the payment earned are gone from the sandbox's ledger (the wallet's own
        // receipts keep what they said); a sandbox wallet reads its loyalty through the terminal.
        let points = try Programs.run(
            "horizon-terminal", ["programs", "show", "--wallet-dir", walletDir, "--data-dir", terminalDir])
        #expect(points.standardOutput.contains("bonus points  0\n"), "\(points.standardOutput) \(points.standardError)")
    }
}

extension MerchantCommandsProgramTests {
    /// The merchant commands as the merchant's admin (`--admin-email`), from a data
    /// directory with no terminal at all; a wrong password is said as such.
    @Test func theAdminUsesTheMerchantCommandsWithoutATerminal() throws {
        let rig = try RemoteLedgerRig()
        let paid = try rig.pay("4.00", walletTimeout: 30)
        paid.expectPaid()
        let paymentID = try #require(try rig.transactions().first?.id)
        let elsewhere = rig.sandbox.path("laptop")
        let server = "http://127.0.0.1:\(rig.port)"
        func asAdmin(_ arguments: [String], password: String = "password") throws -> ProgramResult {
            try Programs.run(
                "horizon-terminal",
                arguments + [
                    "--admin-email", RemoteLedgerRig.email, "--password-file", rig.sandbox.path(password), "--server",
                    server, "--data-dir", elsewhere,
                ])
        }

        let added = try asAdmin(["register-users", "add", "Grace Hopper", "--json"])
        #expect(added.status == 0, "\(added.standardError)")
        #expect(added.standardOutput.contains("\"id\" : \"grace-hopper\""), "\(added.standardOutput)")
        let transactions = try asAdmin(["transactions", "--json"])
        #expect(transactions.status == 0, "\(transactions.standardError)")
        #expect(transactions.standardOutput.contains(paymentID), "\(transactions.standardOutput)")
        let refund = try asAdmin(["refund", paymentID, "--amount", "1.00", "--json"])
        #expect(refund.status == 0, "\(refund.standardOutput) \(refund.standardError)")
        // The terminal, with its own key, sees what the admin did, and takes a payment for that
        // register user by id; an id the server does not know is refused before anything opens.
        let listed = try Programs.run("horizon-terminal", ["register-users", "list", "--data-dir", rig.terminalDir])
        #expect(listed.standardOutput.contains("grace-hopper\tGrace Hopper"), "\(listed.standardOutput)")
        let unknown = try Programs.run(
            "horizon-terminal",
            ["pay", "1.00", "--register", "nobody", "--data-dir", rig.terminalDir, "--radio-socket", rig.socket])
        #expect(unknown.status != 0)
        #expect(
            unknown.standardError.contains("unknown register user 'nobody'; known: grace-hopper"),
            "\(unknown.standardError)")
        let byGrace = try rig.pay("2.00", walletTimeout: 30, terminalArguments: ["--register", "grace-hopper"])
        byGrace.expectPaid()
        let hers = try asAdmin(["transactions", "--register-user", "grace-hopper", "--json"])
        #expect(hers.status == 0, "\(hers.standardError)")
        #expect(!hers.standardOutput.contains(paymentID), "the first payment had no register user")
        #expect(hers.standardOutput.contains("\"registerUser\" : \"grace-hopper\""), "\(hers.standardOutput)")

        try "not the password\n".write(toFile: rig.sandbox.path("wrong"), atomically: true, encoding: .utf8)
        let refused = try asAdmin(["register-users", "list"], password: "wrong")
        #expect(refused.status != 0)
        #expect(refused.standardError.contains("invalid_credentials"), "\(refused.standardError)")
        #expect(refused.standardError.contains("Check the admin's e-mail and password."))
        let noServer = try Programs.run(
            "horizon-terminal",
            ["transactions", "--admin-email", RemoteLedgerRig.email, "--data-dir", rig.sandbox.path("empty")])
        #expect(noServer.status != 0)
        #expect(noServer.standardError.contains("--admin-email needs the server: pass --server URL"))
    }
}
