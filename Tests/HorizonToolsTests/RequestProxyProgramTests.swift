import Foundation
import HorizonTestSupport
import Testing

/// The request proxy with the programs as processes: a wallet with no route to its server (run in
/// a network namespace of its own: not even loopback is up) fetches its balance through the
/// terminal taking its payment (`--via-terminal`), then pays it. The simulated radio is a Unix
/// socket on the file system, which a network namespace does not cut.
@Suite("Request proxy with the programs", .serialized, .offTheCooperativePool)
struct RequestProxyProgramTests {
    @Test func aWalletWithNoRouteFetchesItsBalanceThroughTheTerminalAndPays() throws {
        let rig = try RemoteLedgerRig()
        // Online: the token, and with it the server's gateway key, are kept.
        let token = try Programs.run("horizon-wallet", ["token", "--data-dir", rig.walletDir])
        #expect(token.status == 0, "\(token.standardError)")
        #expect(!token.standardError.contains("gateway key was not kept"), "\(token.standardError)")

        // Without a route and without --via-terminal: nothing cached, and it says what to do.
        let direct = try isolatedWallet(["balance", "--data-dir", rig.walletDir])
        #expect(direct.status != 0)
        #expect(direct.standardError.contains("--via-terminal asks through it"), "\(direct.standardError)")

        // No terminal is taking a payment: said so, promptly.
        let alone = try isolatedWallet(
            [
                "balance", "--via-terminal", "--terminal-timeout", "2", "--data-dir", rig.walletDir,
                "--radio-socket", rig.socket,
            ])
        #expect(alone.status != 0)
        #expect(
            alone.standardError.contains("no terminal advertising a session was heard in 2 s"), "\(alone.standardError)"
        )

        let terminal = try Programs.start(
            "horizon-terminal",
            [
                "pay", "12.50", "--json", "--data-dir", rig.terminalDir, "--radio-socket", rig.socket, "--timeout",
                "5", "--wait-for-wallet", "60",
            ])
        let balance = try isolatedWallet(
            ["balance", "--json", "--via-terminal", "--data-dir", rig.walletDir, "--radio-socket", rig.socket])
        #expect(balance.status == 0, "\(balance.standardOutput) \(balance.standardError)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(balance.standardOutput.utf8)) as? [String: Any])
        #expect(report["viaTerminal"] as? Bool == true)
        #expect((report["freshness"] as? [String: Any])?["cached"] as? Bool == false, "a fresh answer, not the cache")
        let balances = try #require(report["balances"] as? [[String: Any]])
        #expect(balances.first?["minorUnits"] as? Int == 100_00, "\(balances)")
        // Balances and bonus points: two sealed requests, both through the terminal.
        #expect(
            balance.standardError.contains("through a nearby terminal: 2 request(s) relayed sealed"),
            "\(balance.standardError)")

        // The card list too (the wallet's cards client on the same routed identity).
        let cards = try isolatedWallet(
            ["cards", "list", "--json", "--via-terminal", "--data-dir", rig.walletDir, "--radio-socket", rig.socket])
        #expect(cards.status == 0, "\(cards.standardOutput) \(cards.standardError)")
        let cardList = try JSONSerialization.jsonObject(with: Data(cards.standardOutput.utf8)) as? [Any]
        #expect(cardList?.isEmpty == true, "no cards yet: \(cards.standardOutput)")
        #expect(
            cards.standardError.contains("through a nearby terminal: 1 request(s) relayed"), "\(cards.standardError)")

        // The same wallet, still without a route, pays the terminal (which settles online).
        let pay = try isolatedWallet(
            ["pay", "--yes", "--json", "--data-dir", rig.walletDir, "--radio-socket", rig.socket, "--timeout", "30"])
        let sale = terminal.finish(timeout: 60)
        #expect(pay.status == 0, "wallet: \(pay.standardOutput) \(pay.standardError)")
        #expect(sale.status == 0, "terminal: \(sale.standardOutput) \(sale.standardError)")
        #expect(try rig.transactions().map(\.amount) == ["12.50 EUR"])
        #expect(try rig.walletBalance() == 100_00 - 12_50)
        // The terminal relayed what it could not read: no balance figure in anything it printed.
        #expect(!sale.standardOutput.contains("10000") && !sale.standardError.contains("10000"))
    }

    /// Runs `horizon-wallet` in a network namespace of its own (no route to anything).
    private func isolatedWallet(_ arguments: [String]) throws -> ProgramResult {
        let isolation = getuid() == 0 ? ["--net"] : ["--net", "--map-root-user"]
        return try RunningProgram(
            URL(fileURLWithPath: "/usr/bin/unshare"), isolation + [Programs.url("horizon-wallet").path] + arguments,
            input: nil
        ).finish()
    }
}
