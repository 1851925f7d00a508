import Foundation
import HorizonStores
import HorizonTestSupport
import Testing

/// Crash tests with real processes: a terminal and a wallet, each its own
/// program, pay each other over the shared simulated radio while one of them is SIGKILLed right
/// after a durable step (`HORIZON_CRASH_AFTER`). Both are started again over the same files, and
/// then the ledger, the journal and the wallet's store are checked: a confirmed payment charged
/// exactly once, nothing charged that was not confirmed, nothing left pending or owed, and every
/// database intact.
@Suite("Crash tests: each durable step, a SIGKILL, a restart", .offTheCooperativePool)
struct CrashTests {
    enum Victim: Sendable, CustomStringConvertible {
        case terminal(String)
        case wallet(String)

        var description: String {
            switch self {
            case .terminal(let step): "terminal after \(step)"
            case .wallet(let step): "wallet after \(step)"
            }
        }

        /// Whether the first payment was confirmed by the time of the crash, so it must be
        /// charged exactly once in the end (and otherwise never).
        var confirmed: Bool {
            switch self {
            case .terminal(let step): step != "offered"
            case .wallet(let step): step != "stored-request"
            }
        }
    }

    static let victims: [Victim] =
        ["offered", "confirmed", "submitted", "settle", "result", "acknowledged"].map(Victim.terminal)
        + ["stored-request", "resolved-request"].map(Victim.wallet)

    @Test(arguments: victims)
    func aKillAtEachDurableStepChargesAConfirmedPaymentExactlyOnce(victim: Victim) throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        var terminalEnvironment: [String: String] = [:]
        var walletEnvironment: [String: String] = [:]
        switch victim {
        case .terminal(let step): terminalEnvironment["HORIZON_CRASH_AFTER"] = step
        case .wallet(let step): walletEnvironment["HORIZON_CRASH_AFTER"] = step
        }
        func terminal(_ amount: String, environment: [String: String] = [:]) throws -> RunningProgram {
            try Programs.start(
                "horizon-terminal",
                [
                    "pay", amount, "--data-dir", terminalDir, "--radio-socket", socket, "--json", "--timeout", "5",
                    "--wait-for-wallet", "30",
                ], environment: environment)
        }
        func wallet(timeout: Int = 30, environment: [String: String] = [:]) throws -> ProgramResult {
            try RunningProgram(
                Programs.url("horizon-wallet"),
                [
                    "pay", "--yes", "--json", "--data-dir", walletDir, "--radio-socket", socket, "--timeout",
                    "\(timeout)",
                ],
                input: nil, environment: environment
            ).finish(timeout: 60)
        }

        // The run that crashes.
        let first = try terminal("5.00", environment: terminalEnvironment)
        // With its terminal dead, a wallet keeps asking until its timeout: a short one here.
        let firstWallet = try wallet(timeout: 8, environment: walletEnvironment)
        let firstTerminal = first.finish(timeout: 60)
        switch victim {
        case .terminal:
            #expect(firstTerminal.status == SIGKILL, "terminal: \(firstTerminal.standardError)")
            #expect(firstTerminal.standardError.contains("crash injection: killed after"))
        case .wallet:
            #expect(firstWallet.status == SIGKILL, "wallet: \(firstWallet.standardError)")
            #expect(firstWallet.standardError.contains("crash injection: killed after"))
        }

        // Both programs again over the same files: the terminal recovers from its journal, the
        // wallet first asks for whatever it left pending, then pays the cashier's next amount.
        let second = try terminal("1.00")
        let secondWallet = try wallet()
        let secondTerminal = second.finish(timeout: 60)
        #expect(
            secondTerminal.status == 0, "terminal: \(secondTerminal.standardOutput) \(secondTerminal.standardError)")
        #expect(secondWallet.status == 0, "wallet: \(secondWallet.standardOutput) \(secondWallet.standardError)")

        let rows =
            (try json(try Programs.run("horizon-terminal", ["transactions", "--json", "--data-dir", terminalDir]))
            as? [String: Any])?["transactions"] as? [[String: Any]] ?? []
        let approved = rows.filter { $0["outcome"] as? String == "approved" }
        let firstPayments = approved.filter { JSONShapes.formatted($0["amount"]) == "5.00 EUR" }
        #expect(firstPayments.count == (victim.confirmed ? 1 : 0), "\(victim): ledger \(rows)")
        #expect(
            approved.filter { JSONShapes.formatted($0["amount"]) == "1.00 EUR" }.count == 1, "\(victim): ledger \(rows)"
        )
        #expect(Set(rows.compactMap { $0["paymentId"] as? String }).count == rows.count, "an id executed twice")

        let unsettled = try json(
            try Programs.run("horizon-terminal", ["journal", "--unsettled", "--json", "--data-dir", terminalDir]))
        #expect((unsettled as? [Any])?.isEmpty == true, "the journal still owes: \(String(describing: unsettled))")

        let history =
            try json(try Programs.run("horizon-wallet", ["history", "--json", "--data-dir", walletDir]))
            as? [String: Any]
        #expect((history?["pending"] as? [Any])?.isEmpty == true, "\(victim): still pending")
        let receiptIDs = Set(
            ((history?["receipts"] as? [[String: Any]]) ?? []).compactMap { $0["paymentId"] as? String })
        let approvedIDs = Set(approved.compactMap { $0["paymentId"] as? String })
        #expect(receiptIDs == approvedIDs, "\(victim): the wallet's receipts differ from the ledger's approvals")

        for file in ["terminal/ledger.sqlite", "terminal/journal.sqlite", "wallet/wallet.sqlite"] {
            let database = try SQLiteDatabase(path: sandbox.path(file))
            let check = try database.query("PRAGMA integrity_check").first?.text("integrity_check")
            #expect(check == "ok", "\(file): \(check ?? "no answer")")
        }
    }

    private func json(_ result: ProgramResult) throws -> Any {
        #expect(result.status == 0, "\(result.standardError)")
        return try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8))
    }
}
