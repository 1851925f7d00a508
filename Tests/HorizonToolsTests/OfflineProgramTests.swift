import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import Testing

/// Offline payments with the programs as processes: an activated terminal whose server is down
/// takes a payment offline against the wallet's daily token; the wallet says "accepted offline"
/// and its allowance drops; the terminal lists the stored payment and says it is offline.
@Suite("Offline payments with the programs", .serialized, .offTheCooperativePool)
struct OfflineProgramTests {
    @Test func aTerminalWhoseServerIsDownAcceptsAPaymentOfflineAgainstTheWalletsToken() throws {
        let rig = try RemoteLedgerRig()
        let token = try json(
            try RemoteLedgerRig.run("horizon-wallet", ["token", "--json", "--data-dir", rig.walletDir]))
        let allowance = try #require(JSONShapes.money(token["allowance"])?.minorUnits)
        #expect(allowance >= 12_00)
        let stopped = rig.stopServer()
        #expect(stopped.status == 0, "\(stopped.standardError)")

        let round = try rig.pay("12.00", walletTimeout: 30)
        #expect(
            round.terminal.status == 0, "terminal: \(round.terminal.standardOutput) \(round.terminal.standardError)")
        let sale = try json(String(round.terminal.standardOutput.drop(while: { $0 != "{" })))
        #expect(sale["state"] as? String == "acceptedOffline")
        let paymentID = try #require(sale["paymentId"] as? String)
        let wallet = try #require(round.wallet)
        #expect(wallet.status == 0, "wallet: \(wallet.standardOutput) \(wallet.standardError)")
        let receipt = try json(String(wallet.standardOutput.drop(while: { $0 != "{" })))
        #expect(receipt["acceptedOffline"] as? Bool == true)
        #expect(receipt["paymentId"] as? String == paymentID)

        // The wallet's kept token now allows 12.00 less.
        let after = try json(
            try RemoteLedgerRig.run("horizon-wallet", ["token", "--json", "--data-dir", rig.walletDir]))
        #expect(JSONShapes.money(after["remaining"])?.minorUnits == allowance - 12_00)

        // Its own history says so (the server, down, cannot list it yet anyway).
        let history = try Programs.run("horizon-wallet", ["history", "--data-dir", rig.walletDir])
        #expect(
            history.standardOutput.contains("12.00 EUR + tip 0.00 EUR  payment \(paymentID)  (accepted offline)"),
            "\(history.standardOutput) \(history.standardError)")

        let list = try Programs.run("horizon-terminal", ["offline", "list", "--json", "--data-dir", rig.terminalDir])
        #expect(list.status == 0, "\(list.standardError)")
        let stored = try #require(
            try JSONSerialization.jsonObject(with: Data(list.standardOutput.utf8)) as? [[String: Any]])
        #expect(stored.count == 1)
        #expect(stored.first?["paymentId"] as? String == paymentID)
        #expect(stored.first?["state"] as? String == "stored")
        #expect(JSONShapes.formatted(stored.first?["total"]) == "12.00 EUR")

        let status = try Programs.run(
            "horizon-terminal",
            ["status", "--json", "--seconds", "1", "--data-dir", rig.terminalDir, "--radio-socket", rig.socket])
        #expect(status.status == 0, "\(status.standardError)")
        let offline = try #require(try json(status.standardOutput)["offline"] as? [String: Any])
        #expect(offline["server"] as? String == "offline")
        #expect(offline["storedCount"] as? Int == 1)
        #expect((offline["storedTotals"] as? [Any])?.compactMap(JSONShapes.formatted) == ["12.00 EUR"])

        #expect(try rig.transactions().isEmpty)

        // The server is back: forwarding settles the payment once, and a second run sends nothing.
        try rig.startServer()
        let forward = try Programs.run("horizon-terminal", ["offline", "forward", "--data-dir", rig.terminalDir])
        #expect(forward.status == 0, "\(forward.standardOutput) \(forward.standardError)")
        #expect(forward.standardOutput == "offline payments: 1 settled, 0 still to forward\n")
        #expect(try rig.transactions().map(\.id) == [paymentID])
        #expect(try rig.walletBalance() == 100_00 - 12_00)
        let again = try Programs.run("horizon-terminal", ["offline", "forward", "--data-dir", rig.terminalDir])
        #expect(again.standardOutput == "offline payments: 0 settled, 0 still to forward\n", "\(again.standardError)")
        let settled = try offlineList(rig)
        #expect(settled.map { $0["state"] as? String } == ["settled"])
    }

    /// Three payments taken offline; the terminal is killed right after the
    /// server answered the first forward (its journal still says `forwarding`); the next run
    /// sends that payment id again and the server settles each of the three exactly once.
    @Test func threeOfflinePaymentsAreForwardedOnceAcrossAKillMidForward() throws {
        let rig = try RemoteLedgerRig()
        _ = try RemoteLedgerRig.run("horizon-wallet", ["token", "--data-dir", rig.walletDir])
        _ = rig.stopServer()
        var ids: [String] = []
        for amount in ["5.00", "6.00", "7.00"] {
            let round = try rig.pay(amount, walletTimeout: 30)
            #expect(round.terminal.status == 0, "terminal: \(round.terminal.standardError)")
            let sale = try json(String(round.terminal.standardOutput.drop(while: { $0 != "{" })))
            #expect(sale["state"] as? String == "acceptedOffline")
            ids.append(try #require(sale["paymentId"] as? String))
        }
        #expect(try offlineList(rig).map { $0["state"] as? String } == ["stored", "stored", "stored"])

        try rig.startServer()
        let killed = try Programs.run(
            "horizon-terminal", ["offline", "forward", "--data-dir", rig.terminalDir],
            environment: [CrashInjection.variable: CrashInjection.offlineForwardedStep])
        #expect(killed.status == SIGKILL, "\(killed.standardError)")
        #expect(killed.standardError.contains("crash injection: killed after forwarding offline payment \(ids[0])"))
        // The server settled the first; the terminal never recorded its answer.
        #expect(try rig.transactions().map(\.id) == [ids[0]])
        let afterKill = try offlineList(rig)
        #expect(afterKill.map { $0["state"] as? String } == ["forwarding", "stored", "stored"])

        let forward = try Programs.run("horizon-terminal", ["offline", "forward", "--data-dir", rig.terminalDir])
        #expect(forward.status == 0, "\(forward.standardOutput) \(forward.standardError)")
        #expect(forward.standardOutput == "offline payments: 3 settled, 0 still to forward\n")
        let transactions = try rig.transactions()
        #expect(transactions.count == 3, "each payment once: \(transactions)")
        #expect(Set(transactions.map(\.id)) == Set(ids))
        #expect(Set(transactions.map(\.amount)) == ["5.00 EUR", "6.00 EUR", "7.00 EUR"])
        #expect(try rig.walletBalance() == 100_00 - 18_00)
        let final = try offlineList(rig)
        #expect(final.map { $0["state"] as? String } == ["settled", "settled", "settled"])
        #expect(final.map { $0["forwardAttempts"] as? Int } == [2, 1, 1])
    }

    @Test func aSandboxTerminalHasNothingOffline() throws {
        let sandbox = try Sandbox()
        let terminalDir = sandbox.path("terminal")
        #expect(try Programs.run("horizon-terminal", ["init", "--data-dir", terminalDir]).status == 0)
        let list = try Programs.run("horizon-terminal", ["offline", "list", "--data-dir", terminalDir])
        #expect(list.standardOutput == "no offline payments\n", "\(list.standardError)")
        let forward = try Programs.run("horizon-terminal", ["offline", "forward", "--data-dir", terminalDir])
        #expect(forward.status != 0)
        #expect(forward.standardError.contains("settles in its own ledger (sandbox)"), "\(forward.standardError)")
    }

    private func offlineList(_ rig: RemoteLedgerRig) throws -> [[String: Any]] {
        let list = try Programs.run("horizon-terminal", ["offline", "list", "--json", "--data-dir", rig.terminalDir])
        #expect(list.status == 0, "\(list.standardError)")
        return try #require(try JSONSerialization.jsonObject(with: Data(list.standardOutput.utf8)) as? [[String: Any]])
    }

    private func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }
}
