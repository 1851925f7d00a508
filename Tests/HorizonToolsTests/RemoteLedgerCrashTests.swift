import Foundation
import HorizonStores
import HorizonTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Crash tests with a remote ledger: a real `horizon-server`, an activated
/// `horizon-terminal` and a registered `horizon-wallet`, each its own process, paying over the
/// simulated radio while the server is killed (SIGKILL, `HORIZON_SERVER_CRASH`) before or after
/// its commit, during the terminal's recovery, is slow (`HORIZON_SERVER_DELAY_MS`), or is not
/// running at all. Each ends with the server's ledger, the terminal's journal and the wallet's
/// store checked: a confirmed payment charged exactly once, the wallet pending until a real
/// answer exists, and the register told promptly that the server did not answer.
@Suite("Crash tests with a remote ledger: the server killed, slow or gone", .offTheCooperativePool)
struct RemoteLedgerCrashTests {
    @Test func aServerKilledBeforeItsCommitAndDuringRecoveryChargesOnceInTheEnd() throws {
        let rig = try RemoteLedgerRig(serverEnvironment: [RemoteLedgerRig.crash: "before-commit"])

        // The sale: the server dies inside its transaction. Nothing is charged; the register says
        // the server did not answer, the wallet keeps the payment pending.
        let first = try rig.pay("5.00", walletTimeout: 6)
        rig.expectServerKilled("before committing")
        first.expectServerUnreachable()
        let pendingID = try rig.expectWalletPending(count: 1)
        #expect(try rig.transactions().isEmpty, "executed although the server died before its commit")
        #expect(try rig.walletBalance() == 100_00)

        // Recovery at the next start (no wallet comes): the server dies again before its commit.
        try rig.startServer([RemoteLedgerRig.crash: "before-commit"])
        _ = try rig.pay("1.00", walletTimeout: nil, waitForWallet: 1)
        rig.expectServerKilled("before committing")
        #expect(try rig.transactions().isEmpty)
        #expect(try rig.unsettledJournal() == [pendingID])

        // Recovery again: now the server dies right after its commit, before answering.
        try rig.startServer([RemoteLedgerRig.crash: "after-commit"])
        _ = try rig.pay("1.00", walletTimeout: nil, waitForWallet: 1)
        rig.expectServerKilled("after committing")
        #expect(try rig.transactions().map(\.id) == [pendingID], "recovery's execution is not on record")
        #expect(try rig.unsettledJournal() == [pendingID], "settled without an answer from the server")
        #expect(try rig.walletBalance() == 95_00)

        // A healthy server: recovery gets the stored result, the wallet its receipt, and the next
        // sale goes through. The pending payment was charged once, never twice.
        try rig.startServer()
        let last = try rig.pay("1.00", walletTimeout: 30)
        last.expectPaid()
        try rig.expectSettledExactlyOnce(amounts: ["5.00", "1.00"], balance: 94_00)
    }

    @Test func aServerKilledAfterItsCommitBeforeAnsweringChargesOnce() throws {
        let rig = try RemoteLedgerRig(serverEnvironment: [RemoteLedgerRig.crash: "after-commit"])

        let first = try rig.pay("5.00", walletTimeout: 6)
        rig.expectServerKilled("after committing")
        first.expectServerUnreachable()
        let pendingID = try rig.expectWalletPending(count: 1)
        // Charged, but nobody was told: the terminal still owes the wallet an answer.
        #expect(try rig.transactions().map(\.id) == [pendingID])
        #expect(try rig.unsettledJournal() == [pendingID])
        #expect(try rig.walletBalance() == 95_00)

        try rig.startServer()
        let last = try rig.pay("1.00", walletTimeout: 30)
        last.expectPaid()
        try rig.expectSettledExactlyOnce(amounts: ["5.00", "1.00"], balance: 94_00)
    }

    @Test func aServerSlowerThanTheTerminalWaitsLeavesThePaymentPendingThenChargedOnce() throws {
        // Every execution's answer comes 3 s after its commit; the terminal waits 1 s.
        let slow = [RemoteLedgerRig.delay: "3000"]
        let rig = try RemoteLedgerRig(serverEnvironment: slow)

        let first = try rig.pay("5.00", walletTimeout: 6, terminalEnvironment: ["HORIZON_SERVER_TIMEOUT": "1"])
        #expect(
            first.terminal.standardError.contains("the server did not answer in time"),
            "\(first.terminal.standardError)")
        #expect(first.terminalSeconds < 14, "the register waited \(first.terminalSeconds) s")
        let pendingID = try rig.expectWalletPending(count: 1)
        #expect(try rig.transactions().map(\.id) == [pendingID])

        // Still slow, but within the terminal's usual 10 s: recovery finds the stored result at
        // once, and the next sale waits out the server's 3 s while its session stays open.
        let last = try rig.pay("1.00", walletTimeout: 30)
        last.expectPaid()
        try rig.expectSettledExactlyOnce(amounts: ["5.00", "1.00"], balance: 94_00)
    }

    @Test func aServerThatIsDownIsSaidSoPromptlyAndThePaymentSettledWhenItIsBack() throws {
        let rig = try RemoteLedgerRig()
        let stopped = rig.stopServer()
        #expect(stopped.status == 0, "\(stopped.standardError)")

        let first = try rig.pay("5.00", walletTimeout: 6, verbose: true)
        first.expectServerUnreachable()
        #expect(first.terminal.standardError.contains("connection refused"), "\(first.terminal.standardError)")
        // Refused at once, not retried until the request's timeout (the terminal's log, to the
        // second: from executing the payment to giving up on the server).
        let waited = try #require(
            first.secondsBetween("executing the request", and: "the server did not answer; pending"))
        #expect(waited <= 2, "the terminal waited \(waited) s for a server that refuses connections")
        _ = try rig.expectWalletPending(count: 1)
        #expect(try rig.transactions().isEmpty)

        try rig.startServer()
        let last = try rig.pay("1.00", walletTimeout: 30)
        last.expectPaid()
        try rig.expectSettledExactlyOnce(amounts: ["5.00", "1.00"], balance: 94_00)
    }
}

/// A server on SQLite with one merchant, a terminal activated with it and a wallet registered
/// with it and topped up with 100.00 EUR, all in one sandbox; the server on a fixed port so it
/// can be killed and started again where the terminal expects it.
final class RemoteLedgerRig {
    let sandbox: Sandbox
    let port: Int
    let serverDir: String
    let terminalDir: String
    let walletDir: String
    let socket: String
    private var server: RunningProgram?

    static let email = "owner@corner.example"
    /// The server's crash-test variables (see `ServerFaultInjection`).
    static let crash = "HORIZON_SERVER_CRASH"
    static let delay = "HORIZON_SERVER_DELAY_MS"
    static let phone = "+4915112345678"

    init(serverEnvironment: [String: String] = [:]) throws {
        sandbox = try Sandbox()
        serverDir = sandbox.path("server")
        terminalDir = sandbox.path("terminal")
        walletDir = sandbox.path("wallet")
        socket = sandbox.path("radio.sock")
        let password = sandbox.path("password")
        try "correct horse battery staple\n".write(toFile: password, atomically: true, encoding: .utf8)
        try Self.run("horizon-server", ["init", "--data-dir", serverDir])
        try Self.run(
            "horizon-server",
            [
                "merchants", "add", "Corner Café", "--email", Self.email, "--currency", "EUR", "--password-file",
                password, "--data-dir", serverDir,
            ])
        port = try freeLoopbackPort()
        // The crash points are met only by an execution: setting up through this server is safe.
        try startServer(serverEnvironment)
        let url = "http://127.0.0.1:\(port)"
        try Self.run(
            "horizon-terminal",
            [
                "activate", "--server", url, "--email", Self.email, "--password-file", password, "--label", "Till 1",
                "--data-dir", terminalDir,
            ])
        try Self.run(
            "horizon-wallet",
            [
                "register", "--server", url, "--name", "Alex", "--email", "alex@example.com", "--phone", Self.phone,
                "--data-dir", walletDir,
            ])
        let puk = try Programs.outboxCode(serverDir: serverDir, to: Self.phone)
        let link = try Programs.outboxLink(serverDir: serverDir, to: "alex@example.com")
        try Self.run("horizon-wallet", ["verify", puk, "--data-dir", walletDir])
        try Self.run(
            "horizon-wallet",
            [
                "activation-status", "--confirm-link", link, "--anchor-fingerprint",
                try Programs.anchorFingerprint(serverDir: serverDir), "--data-dir", walletDir,
            ])
        try Self.run("horizon-server", ["wallets", "top-up", "alex@example.com", "100.00", "--data-dir", serverDir])
    }

    deinit {
        server?.interrupt()
        _ = server?.finish(timeout: 10)
    }

    @discardableResult
    static func run(_ program: String, _ arguments: [String]) throws -> String {
        let result = try Programs.run(program, arguments)
        guard result.status == 0 else {
            throw SandboxError("\(program) \(arguments.first ?? ""): \(result.standardError)")
        }
        return result.standardOutput
    }

    /// Starts `horizon-server serve` on this rig's port and waits until it accepts connections.
    func startServer(_ environment: [String: String] = [:]) throws {
        let program = try Programs.start(
            "horizon-server",
            ["serve", "--data-dir", serverDir, "--listen", "127.0.0.1:\(port)", "--log-level", "warning"],
            environment: environment)
        server = program
        guard waitUntilListening(port: port, seconds: 30) else {
            program.process.terminate()
            throw SandboxError("horizon-server did not listen: \(program.finish(timeout: 5).standardError)")
        }
    }

    /// Stops the server gracefully (SIGINT) and returns how it ended.
    func stopServer() -> ProgramResult {
        server?.interrupt()
        defer { server = nil }
        return server?.finish(timeout: 10) ?? ProgramResult(status: -1, standardOutput: "", standardError: "no server")
    }

    /// The server ended by its own crash injection (SIGKILL) at `point`.
    func expectServerKilled(_ point: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let result = server?.finish(timeout: 10)
        server = nil
        #expect(result?.status == SIGKILL, "server: \(result?.standardError ?? "none")", sourceLocation: sourceLocation)
        #expect(
            result?.standardError.contains("crash injection: horizon-server killed \(point)") == true,
            "\(result?.standardError ?? "")", sourceLocation: sourceLocation)
    }

    struct Round {
        let terminal: ProgramResult
        let wallet: ProgramResult?
        /// From the terminal's start to its exit: what the cashier waited.
        let terminalSeconds: Double

        /// The register said the server did not answer, and did not hang: the wallet's
        /// connection and the terminal's 5 s linger for it included, well under the 10 s
        /// a retried connection would wait.
        func expectServerUnreachable(sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(terminal.status == 1, "terminal: \(terminal.standardError)", sourceLocation: sourceLocation)
            // Killed mid-request, the server closed the connection; killed before, it refused it.
            #expect(
                terminal.standardError.contains("does not answer (connection refused; is it running?)")
                    || terminal.standardError.contains("closed the connection (try again)"),
                "\(terminal.standardError)",
                sourceLocation: sourceLocation)
            // Said as what it is (pending on an unreachable server, not "could not be recorded"),
            // with what to do at this terminal.
            #expect(
                terminal.standardError.contains("error: The payment is pending: the server at ")
                    && terminal.standardError.contains(
                        "the next horizon-terminal pay, redeem or serve settles it first"),
                "\(terminal.standardError)", sourceLocation: sourceLocation)
            #expect(terminalSeconds < 14, "the register waited \(terminalSeconds) s", sourceLocation: sourceLocation)
            #expect(wallet?.status == 1, "wallet: \(wallet?.standardError ?? "")", sourceLocation: sourceLocation)
            #expect(
                wallet?.standardError.contains("is pending: the terminal may have executed it") == true,
                "wallet: \(wallet?.standardError ?? "")", sourceLocation: sourceLocation)
        }

        /// Seconds between the terminal's log lines containing `start` and `end` (`--verbose`).
        func secondsBetween(_ start: String, and end: String) -> Double? {
            let lines = terminal.standardError.split(separator: "\n")
            let formatter = ISO8601DateFormatter()
            func time(_ text: String) -> Date? {
                lines.first { $0.contains(text) }.flatMap { line in
                    line.split(separator: " ").first.flatMap { formatter.date(from: String($0)) }
                }
            }
            guard let from = time(start), let to = time(end) else { return nil }
            return to.timeIntervalSince(from)
        }

        func expectPaid(sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(
                terminal.status == 0, "terminal: \(terminal.standardOutput) \(terminal.standardError)",
                sourceLocation: sourceLocation)
            #expect(
                wallet?.status == 0, "wallet: \(wallet?.standardOutput ?? "") \(wallet?.standardError ?? "")",
                sourceLocation: sourceLocation)
        }
    }

    /// `horizon-terminal pay AMOUNT` (which first recovers its journal), and a wallet paying it
    /// unless `walletTimeout` is nil.
    func pay(
        _ amount: String, walletTimeout: Int?, waitForWallet: Int = 30, terminalEnvironment: [String: String] = [:],
        walletEnvironment: [String: String] = [:], terminalArguments: [String] = [], verbose: Bool = false
    ) throws -> Round {
        let started = Date()
        let terminal = try Programs.start(
            "horizon-terminal",
            [
                "pay", amount, "--json", "--data-dir", terminalDir, "--radio-socket", socket, "--timeout", "5",
                "--wait-for-wallet", "\(waitForWallet)",
            ] + terminalArguments + (verbose ? ["--verbose"] : []), environment: terminalEnvironment)
        let wallet = try walletTimeout.map { timeout in
            try Programs.start(
                "horizon-wallet",
                [
                    "pay", "--yes", "--json", "--data-dir", walletDir, "--radio-socket", socket, "--timeout",
                    "\(timeout)",
                ], environment: walletEnvironment)
        }
        let terminalResult = terminal.finish(timeout: 60)
        let seconds = Date().timeIntervalSince(started)
        // A wallet left with a pending payment asks for its answer for 30 s; its person giving up
        // (Ctrl-C) keeps it pending all the same, and spares the test the wait.
        if terminalResult.status != 0 { wallet?.interrupt() }
        return Round(terminal: terminalResult, wallet: wallet?.finish(timeout: 60), terminalSeconds: seconds)
    }

    struct Transaction: Equatable {
        let id: String
        let amount: String
        let outcome: String
    }

    /// The merchant's transactions as `horizon-server transactions` reports them, oldest first.
    func transactions() throws -> [Transaction] {
        let text = try Self.run("horizon-server", ["transactions", "--json", "--data-dir", serverDir])
        let rows = JSONShapes.transactions(text)
        return rows.reversed().map {
            Transaction(
                id: $0["paymentId"] as? String ?? "", amount: JSONShapes.formatted($0["amount"]) ?? "",
                outcome: $0["outcome"] as? String ?? "")
        }
    }

    /// The wallet's balance at the server, in cents, read from its database.
    func walletBalance() throws -> Int64? {
        let database = try SQLiteDatabase(path: sandbox.path("server/horizon.sqlite"))
        defer { database.close() }
        return try database.query("SELECT balance FROM accounts WHERE kind = 'wallet' AND currency = 'EUR'").first?
            .integer("balance")
    }

    /// The ids the terminal's journal still owes an answer.
    func unsettledJournal() throws -> [String] {
        let text = try Self.run("horizon-terminal", ["journal", "--unsettled", "--json", "--data-dir", terminalDir])
        let rows = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] ?? []
        return rows.compactMap { $0["paymentId"] as? String }
    }

    func walletHistory() throws -> (pending: [String], receipts: [String]) {
        let text = try Self.run("horizon-wallet", ["history", "--json", "--data-dir", walletDir])
        let history = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        let ids = { (key: String) in
            ((history?[key] as? [[String: Any]]) ?? []).compactMap { $0["paymentId"] as? String }
        }
        return (ids("pending"), ids("receipts"))
    }

    /// The wallet keeps `count` payments pending (signed, no answer yet); returns the first id.
    func expectWalletPending(count: Int, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let history = try walletHistory()
        #expect(history.pending.count == count, "pending: \(history.pending)", sourceLocation: sourceLocation)
        #expect(history.receipts.isEmpty, "receipts: \(history.receipts)", sourceLocation: sourceLocation)
        return try #require(history.pending.first, sourceLocation: sourceLocation)
    }

    /// The end state every test reaches: each amount approved once at the server (one
    /// transaction per id), the wallet's balance, its receipts exactly the server's approvals,
    /// nothing pending in the wallet or owed by the journal, and the ledger's sums intact.
    func expectSettledExactlyOnce(
        amounts: [String], balance: Int64, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let transactions = try transactions()
        #expect(
            transactions.map { String($0.amount.prefix(while: { $0 != " " })) } == amounts,
            "server: \(transactions)", sourceLocation: sourceLocation)
        #expect(transactions.allSatisfy { $0.outcome.hasPrefix("approved") }, sourceLocation: sourceLocation)
        #expect(
            Set(transactions.map(\.id)).count == transactions.count, "an id executed twice",
            sourceLocation: sourceLocation)
        #expect(try walletBalance() == balance, "the wallet's balance", sourceLocation: sourceLocation)
        let history = try walletHistory()
        #expect(history.pending.isEmpty, "still pending: \(history.pending)", sourceLocation: sourceLocation)
        #expect(
            Set(history.receipts) == Set(transactions.map(\.id)),
            "the wallet's receipts \(history.receipts) differ from the server's transactions",
            sourceLocation: sourceLocation)
        #expect(try unsettledJournal().isEmpty, "the journal still owes", sourceLocation: sourceLocation)
        // Money only moved in balanced entries: every account is the sum of its postings, and
        // the accounts of a currency sum to zero (the external account holds the top-up).
        let database = try SQLiteDatabase(path: sandbox.path("server/horizon.sqlite"))
        let unbalanced = try database.query(
            """
            SELECT a.id FROM accounts a LEFT JOIN postings p ON p.account_id = a.id
            GROUP BY a.id, a.balance HAVING a.balance <> COALESCE(SUM(p.amount), 0)
            UNION ALL SELECT entry_id FROM postings GROUP BY entry_id, currency HAVING SUM(amount) <> 0
            UNION ALL SELECT 0 FROM accounts GROUP BY currency HAVING SUM(balance) <> 0
            """)
        #expect(unbalanced.isEmpty, "the ledger's sums are broken: \(unbalanced.count)", sourceLocation: sourceLocation)
    }
}
