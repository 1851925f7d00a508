import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// `horizon-wallet account | balance | history | points | coupons | memberships` through
/// the service clients against a real `horizon-server serve`, and `horizon-server messages`, all as
/// processes.
@Suite("Wallet services with the programs", .serialized, .offTheCooperativePool)
struct WalletServicesProgramTests {
    @Test func aRegisteredWalletAsksItsServerAndShowsTheLastAnswerWhenItIsDown() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let walletDir = sandbox.path("wallet")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let passwordFile = sandbox.path("password")
        try "a long merchant password\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let merchant = try Programs.run(
            "horizon-server",
            [
                "merchants", "add", "Corner Bakery", "--email", "owner@bakery.example", "--currency", "EUR",
                "--password-file", passwordFile,
                "--data-dir", serverDir,
            ])
        #expect(merchant.status == 0, "\(merchant.standardError)")
        let added = try Programs.run(
            "horizon-server",
            [
                "messages", "add", "Maintenance tonight", "--body", "Payments pause at 02:00.", "--severity", "warning",
                "--data-dir", serverDir, "--json",
            ])
        #expect(added.status == 0, "\(added.standardError)")
        let messageID = try #require(try object(added.standardOutput)["messageId"] as? Int)
        let badSeverity = try Programs.run(
            "horizon-server", ["messages", "add", "x", "--severity", "loud", "--data-dir", serverDir])
        #expect(badSeverity.status == 2)
        #expect(badSeverity.standardError.contains("--severity must be info, warning or critical, not loud"))

        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        let url = server.url

        // Register and verify the wallet (the codes from the sandbox outbox).
        try Programs.registerWallet(walletDir: walletDir, serverDir: serverDir, url: url)
        let topUp = try Programs.run(
            "horizon-server", ["wallets", "top-up", "alice@example.com", "25.00", "--data-dir", serverDir])
        #expect(topUp.status == 0, "\(topUp.standardError)")

        func wallet(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-wallet", arguments + ["--data-dir", walletDir])
        }

        let account = try wallet(["account"])
        #expect(account.status == 0, "\(account.standardError)")
        #expect(account.standardOutput.contains("name        Alice\n"))
        #expect(account.standardOutput.contains("e-mail      alice@example.com\n"))
        let renamed = try wallet(["account", "--set-name", "Alice Baker", "--json"])
        #expect(try object(renamed.standardOutput)["name"] as? String == "Alice Baker", "\(renamed.standardError)")
        let emptyName = try wallet(["account", "--set-name", " "])
        #expect(emptyName.status == 1)
        #expect(
            emptyName.standardError.hasPrefix(
                "error: refused: a name must be 1 to 200 bytes of printable text (invalid_request, request "),
            "\(emptyName.standardError)")

        let balance = try wallet(["balance"])
        #expect(
            balance.standardOutput
                == "balance       25.00 EUR\nbonus points  none yet\noffline       none (no valid daily token; run `horizon-wallet token` while online)\n",
            "\(balance.standardError)")
        let history = try wallet(["history"])
        #expect(history.standardOutput == "no transactions yet\n", "\(history.standardError)")
        let badCursor = try wallet(["history", "--cursor", "nonsense"])
        #expect(badCursor.status == 1)
        #expect(badCursor.standardError.hasPrefix("error: refused: cursor is not one this server gave; "))
        #expect(badCursor.standardError.contains("(invalid_cursor, request "))

        // Bonus programs: the bakery's can be joined, then left.
        let programs = try object(try wallet(["points", "--all", "--json"]).standardOutput)
        let program = try #require((programs["programs"] as? [[String: Any]])?.first)
        #expect(program["merchantName"] as? String == "Corner Bakery" && program["state"] as? String == "not_joined")
        let merchantID = try #require(program["merchantId"] as? String)
        let joined = try wallet(["points", "--join", merchantID])
        #expect(
            joined.standardOutput == "Joined the bonus program of Corner Bakery: 0 points\n", "\(joined.standardError)")
        #expect(
            try wallet(["points"]).standardOutput.contains(
                "0 points at Corner Bakery  (joined; merchant \(merchantID))"))
        let left = try wallet(["points", "--leave", merchantID])
        #expect(left.standardOutput == "Left the bonus program of Corner Bakery; its points were forfeited\n")
        #expect(try wallet(["coupons"]).standardOutput == "no coupons\n")
        #expect(try wallet(["memberships"]).standardOutput == "no gold memberships\n")

        let list = try Programs.run("horizon-server", ["messages", "list", "--data-dir", serverDir])
        #expect(list.standardOutput.contains("#\(messageID) [warning] Maintenance tonight"))
        #expect(list.standardOutput.contains("(shown now)"))

        // The last answers before the server stops (leaving a program dropped the cached lists).
        #expect(try wallet(["balance"]).status == 0)
        // The server stops: the wallet shows its last answers, and says they are not fresh.
        server.stop()
        let offline = try wallet(["balance"])
        #expect(offline.status == 0, "\(offline.standardError)")
        #expect(offline.standardOutput.hasPrefix("balance       25.00 EUR\n"))
        #expect(offline.standardOutput.contains("(the server cannot be reached: this is the last known answer, from "))
        let offlineJSON = try object(try wallet(["balance", "--json"]).standardOutput)
        #expect((offlineJSON["freshness"] as? [String: Any])?["cached"] as? Bool == true)
        // A page never asked: the wallet's own receipts, and a note that the server was not reached.
        let neverAsked = try wallet(["history", "--limit", "5"])
        #expect(neverAsked.status == 0, "\(neverAsked.standardError)")
        #expect(neverAsked.standardOutput == "no payments yet\n")
        #expect(
            neverAsked.standardError.hasPrefix("note: the server at \(url) does not answer (connection refused"),
            "\(neverAsked.standardError)")
        #expect(neverAsked.standardError.contains("these are the receipts this wallet keeps itself"))
        let neverAskedJSON = try object(try wallet(["history", "--limit", "5", "--json"]).standardOutput)
        #expect(neverAskedJSON["transactions"] == nil && neverAskedJSON["receipts"] as? [Any] != nil)
        #expect((neverAskedJSON["serverError"] as? String)?.contains("does not answer (connection refused") == true)
        let memberships = try wallet(["memberships"])
        #expect(memberships.status == 0 && memberships.standardOutput.hasPrefix("no gold memberships\n"))

        let removed = try Programs.run(
            "horizon-server", ["messages", "remove", "\(messageID)", "--data-dir", serverDir])
        #expect(removed.standardOutput == "Removed message #\(messageID).\n")
        let again = try Programs.run("horizon-server", ["messages", "remove", "\(messageID)", "--data-dir", serverDir])
        #expect(again.status == 1)
        #expect(again.standardError.contains("there is no message #\(messageID)"))
    }

    @Test func theHelpNamesTheCommands() throws {
        let help = try Programs.run("horizon-wallet", ["--help"])
        for command in ["account", "balance", "history", "points", "coupons", "memberships"] {
            #expect(help.standardOutput.contains("  \(command)"), "\(command)")
        }
        let points = try Programs.run("horizon-wallet", ["points", "--help"])
        #expect(points.standardOutput.contains("Leaving a program forfeits the points held there"))
        let messages = try Programs.run("horizon-server", ["messages", "--help"])
        #expect(messages.standardOutput.contains("add") && messages.standardOutput.contains("remove"))
    }

    private func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
    }
}
