import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HorizonServerClient
import HorizonTestSupport
import Testing

/// Scale-out, quickly: two server processes on one database, 10 terminals, every
/// payment id submitted to both servers at once and retried. Every id executes exactly once, and
/// the ledger's invariants hold when read back from the database.
// On the cooperative pool, not `.offTheCooperativePool`: the body only awaits (the simulated
// radio's live driver, which waits for the server's answers, has a thread of its own), and it
// races the clock, which behind a blocking test on a shared queue it lost (a redemption's
// decision timed out while the fault simulation held that queue for ten minutes).
@Suite struct ScaleOutTests {
    static var kinds: [StoreKind] { TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite] }

    @Test(arguments: kinds) func everyPaymentIDExecutesOnceAcrossTwoServers(kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { store, another in
            let ledgerA = try await Ledger.open(store)
            let merchant = try await ledgerA.createMerchant(
                name: "Corner Café", currency: .eur, adminEmail: ServerRig.email)
            try await ledgerA.setPasswordHash(
                try PasswordHasher(costLog2: 10).hash(ServerRig.password), for: merchant.id)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scale-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let serverA = try await ServerRig.start(
                ledger: ledgerA, issuer: Issuer.generate(), merchant: merchant, directory: directory)
            let ledgerB = try await Ledger.open(try another())
            let serverB = try await serverA.sibling(ledger: ledgerB)

            let terminals = try await withThrowingTaskGroup(of: TerminalIdentity.self) { group in
                for index in 0..<10 { group.addTask { try await serverA.activateTerminal(label: "Till \(index)") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            var wallets: [(P256.Signing.PrivateKey, WalletID)] = []
            for _ in 0..<10 { wallets.append(try await serverA.registerWallet(balance: 1_000_00)) }

            // Each terminal: three payments one after another, as a till takes them; each sent to
            // both servers twice, all at once; the ten terminals at the same time. (All thirty
            // payments at once queued 120 requests behind the client's 8 connections a server,
            // and a loaded machine timed the queue out before the servers were slow.)
            let paymentsPerTerminal = 3
            let outcomes = try await withThrowingTaskGroup(of: [(PaymentID, [Int64?])].self) { group in
                for (index, terminal) in terminals.enumerated() {
                    let (walletKey, _) = wallets[index]
                    let clients = [
                        serverA.client(signingWith: terminal.signingKey),
                        serverB.client(signingWith: terminal.signingKey),
                    ]
                    let payments = try (0..<paymentsPerTerminal).map { payment in
                        try SignedConfirm(wallet: walletKey, terminal: terminal, amount: Int64(100 + payment), tip: 10)
                    }
                    group.addTask {
                        var outcomes: [(PaymentID, [Int64?])] = []
                        for signed in payments {
                            let references = try await withThrowingTaskGroup(of: Int64?.self) { submissions in
                                for attempt in 0..<4 {
                                    submissions.addTask {
                                        try await Self.submitRetrying(signed, to: clients[attempt % 2])
                                    }
                                }
                                return try await submissions.reduce(into: []) { $0.append($1) }
                            }
                            outcomes.append((signed.confirm.paymentID, references))
                        }
                        return outcomes
                    }
                }
                return try await group.reduce(into: []) { $0.append(contentsOf: $1) }
            }
            #expect(outcomes.count == 10 * paymentsPerTerminal)
            for (id, references) in outcomes {
                // Every submission got the one stored result.
                #expect(Set(references).count == 1 && references.first != nil)
                #expect(try await ledgerA.executionCount(of: id) == 1)
            }
            // Read back from the database: postings sum to zero, no negative account, one
            // transaction per id; and each wallet paid exactly its three payments.
            #expect(try await LedgerAudit.violations(in: store).isEmpty)
            for (_, walletID) in wallets {
                let spent = (0..<Int64(paymentsPerTerminal)).reduce(0) { $0 + 100 + $1 + 10 }
                #expect(try await ledgerA.balance(of: walletID, in: .eur).minorUnits == 1_000_00 - spent)
            }
            await serverB.stopKeepingLedgerOpen()
            await serverA.stopKeepingLedgerOpen()
            await ledgerB.close()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// A submission as a terminal makes it: one left unanswered (a timeout or a connection the
    /// loaded machine dropped) or answered "busy" is sent again, as the terminal's journal
    /// would; any other refusal fails the test with the server's words.
    static func submitRetrying(_ signed: SignedConfirm, to client: HorizonServerClient) async throws -> Int64? {
        let submission = try signed.submission()
        var attempt = 0
        while true {
            attempt += 1
            let retryable: String
            do {
                return try await client.submitPayment(submission).reference
            } catch {
                switch error {
                case .timedOut, .unreachable: retryable = error.description
                case .refused(let status, _, _, _) where status == 503: retryable = error.description
                default: throw error
                }
            }
            if attempt >= 5 { throw RigError("no settled answer after \(attempt) attempts: \(retryable)") }
            try await Task.sleep(for: .milliseconds(200 * attempt))
        }
    }
}
