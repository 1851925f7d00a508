import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// `horizon-wallet token` against a real `horizon-server serve`,
/// both as processes: a new token, the same one asked again, a new one after the balance
/// changed, the kept one while the server is down, and the errors a person can act on.
@Suite("The daily token with the programs", .serialized, .offTheCooperativePool)
struct TokenProgramTests {
    @Test func aRegisteredWalletGetsItsTokenAndShowsTheKeptOneWhenTheServerIsDown() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let walletDir = sandbox.path("wallet")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        let url = server.url

        try Programs.registerWallet(walletDir: walletDir, serverDir: serverDir, url: url)

        func wallet(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-wallet", arguments + ["--data-dir", walletDir])
        }
        func topUp(_ amount: String) throws {
            let result = try Programs.run(
                "horizon-server", ["wallets", "top-up", "alice@example.com", amount, "--data-dir", serverDir])
            #expect(result.status == 0, "\(result.standardError)")
        }

        // No money yet, so no currency to issue the token in: the server says what to do.
        let noCurrency = try wallet(["token"])
        #expect(noCurrency.status == 1)
        #expect(
            noCurrency.standardError.contains(
                "this wallet holds no currency yet; name the token's currency (e.g. \"currency\": \"EUR\")"),
            "\(noCurrency.standardError)")
        let badCurrency = try wallet(["token", "--currency", "EURO"])
        #expect(badCurrency.status != 0)
        #expect(
            badCurrency.standardError.contains("--currency must be a supported ISO 4217 code such as EUR, not EURO"))

        try topUp("80.00")
        let first = try wallet(["token"])
        #expect(first.status == 0, "\(first.standardError)")
        #expect(
            first.standardOutput.contains("allowance   50.00 EUR (remaining 50.00 EUR)\n"), "\(first.standardOutput)")
        #expect(first.standardOutput.contains("state       new (signed by the server just now)\n"))
        #expect(
            first.standardOutput.contains(" h 59 min left)\n") || first.standardOutput.contains("(24 h 0 min left)"))

        // The balance shows what the kept token still allows offline.
        let balance = try wallet(["balance"])
        #expect(
            balance.standardOutput.contains("offline       50.00 EUR of 50.00 EUR (token valid "),
            "\(balance.standardOutput) \(balance.standardError)")
        let balanceJSON = try object(try wallet(["balance", "--json"]).standardOutput)
        #expect((balanceJSON["offlineAllowance"] as? [String: Any])?["minorUnits"] as? Int == 50_00)

        let again = try object(try wallet(["token", "--json"]).standardOutput)
        let id = try #require(again["tokenId"] as? String)
        #expect(id.count == 32 && first.standardOutput.hasPrefix("token       \(id)\n"))
        #expect(again["state"] as? String == "fresh" && JSONShapes.money(again["allowance"])?.minorUnits == 50_00)
        #expect(JSONShapes.formatted(again["allowance"]) == "50.00 EUR")
        let issuedAt = try #require(again["issuedAt"] as? Int)
        #expect(again["expiresAt"] as? Int == issuedAt + 86_400)
        // A refresh with nothing changed: the same token.
        let unchanged = try object(try wallet(["token", "--refresh", "--json"]).standardOutput)
        #expect(unchanged["tokenId"] as? String == id && unchanged["state"] as? String == "fresh")

        // The balance changed: a refresh gets a new token, bounded by the new balance.
        try topUp("1.00")
        #expect(try object(try wallet(["token", "--json"]).standardOutput)["tokenId"] as? String == id)
        let renewed = try object(try wallet(["token", "--refresh", "--json"]).standardOutput)
        let newID = try #require(renewed["tokenId"] as? String)
        #expect(newID != id && renewed["state"] as? String == "new")

        // The server stops: the kept token is shown, marked as cached; one never fetched is an error.
        server.stop()
        let offline = try wallet(["token"])
        #expect(offline.status == 0, "\(offline.standardError)")
        #expect(offline.standardOutput.hasPrefix("token       \(newID)\n"))
        #expect(
            offline.standardOutput.contains(
                "state       cached (the server cannot be reached; this is the token kept from before)\n"))
        let neverFetched = try wallet(["token", "--currency", "USD"])
        #expect(neverFetched.status == 1)
        #expect(
            neverFetched.standardError.contains(
                "(and nothing was cached to show instead; near a terminal taking a payment, --via-terminal asks through it)"
            ),
            "\(neverFetched.standardError)")
    }

    @Test func theHelpExplainsTheToken() throws {
        let help = try Programs.run("horizon-wallet", ["--help"])
        #expect(help.standardOutput.contains("  token"))
        let token = try Programs.run("horizon-wallet", ["token", "--help"])
        #expect(token.standardOutput.contains("--refresh") && token.standardOutput.contains("--json"))
        // The help wraps lines to the terminal's width.
        let words = token.standardOutput.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(words.contains("valid for at most 24 h"), "\(token.standardOutput)")
    }

    private func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
    }
}
