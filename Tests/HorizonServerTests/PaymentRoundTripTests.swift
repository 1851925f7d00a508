import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonServer
import HummingbirdTesting
import Synchronization
import Testing

/// What one payment through the server costs the database: one transaction, one commit, with
/// the signed request's nonce and rate count in it (counted at the ledger's store, for a wallet's
/// second payment, the steady state); and the request checks that moved into it refuse as they
/// did on their own.
@Suite("Payment round trips")
struct PaymentRoundTripTests {
    static var kinds: [StoreKind] { TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite] }

    /// A shop (merchant, till, wallet with 50.00) whose server counts `burst` requests a key.
    static func shop(on store: any LedgerStore, burst: Int = 1000) async throws -> CardPaymentTests.Shop {
        let server = try await TestServer(
            configuration: .testing(rateLimitBurst: burst, rateLimitPerSecond: 0.01), store: { _ in store })
        let merchant = try await server.addMerchant()
        let till = TerminalKey()
        _ = try await server.activate(till)
        let wallet = WalletDevice()
        let walletID = try await server.ledger.createWallet(name: "Alice", publicKey: wallet.publicKeyBytes).id
        try await server.ledger.deposit(try Money(minorUnits: 50_00, currency: .eur), to: walletID)
        return CardPaymentTests.Shop(server: server, merchant: merchant, till: till, wallet: wallet, walletID: walletID)
    }

    /// The till's request for `confirm`, and the header that signs it (sent twice to replay it).
    static func signedSubmission(_ confirm: Confirm, at shop: CardPaymentTests.Shop) throws -> (
        body: String, authorization: String
    ) {
        let body = try SubmissionFields(payment: confirm).json()
        let authorization = try signedAuthorization(
            shop.till.key, method: .post, path: "/v1/payments", body: body, time: shop.server.clock.now)
        return (body, authorization)
    }

    static func send(_ submission: (body: String, authorization: String), client: any TestClientProtocol)
        async throws -> TestResponse
    {
        try await client.send(
            .post, "/v1/payments", json: submission.body, headers: [.authorization: submission.authorization])
    }

    @Test(arguments: kinds) func aPaymentIsOneTransactionWithItsRequestChecks(kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { base in
            let store = CountingStore(base)
            let shop = try await Self.shop(on: store)
            let transactions = try await shop.server.withClient { client in
                _ = try shop.result(
                    try await shop.submit(try shop.confirm(.accountBalance, amount: 1_00), client: client))
                store.transactions.withLock { $0 = [] }
                let result = try shop.result(
                    try await shop.submit(try shop.confirm(.accountBalance, amount: 2_00), client: client))
                #expect(result.outcome == .approved)
                return store.transactions.withLock { $0 }
            }
            // One transaction (BEGIN … COMMIT); besides it only the terminal's look-up, a read.
            let writing = transactions.filter { $0.isolation != .singleStatement }
            #expect(writing.count == 1, "\(transactions)")
            let singles = transactions.filter { $0.isolation == .singleStatement }.flatMap(\.statements)
            #expect(singles.allSatisfy { $0.hasPrefix("SELECT") }, "\(singles)")
            let statements = writing.first?.statements ?? []
            #expect(statements.first?.hasPrefix("INSERT INTO request_nonces") == true, "\(statements)")
            #expect(statements.dropFirst().first?.hasPrefix("INSERT INTO request_rate_windows") == true)
            // The payment's intent (none here) is read once.
            #expect(statements.filter { $0.contains("FROM payment_intents") }.count == 1, "\(statements)")
            // On PostgreSQL (SQLite spells the posting in three statements): 17 statements, 20
            // round trips with BEGIN and COMMIT and the terminal's look-up; it was 19 statements,
            // 21 round trips and three commits with the nonce and the count on their own.
            if kind == .postgres {
                #expect(statements.count == 17)
                #expect(transactions.map(\.roundTrips).reduce(0, +) == 20)
            }
        }
    }

    /// The rows a payment or its request's checks write.
    static func rowCounts(_ ledger: Ledger) async throws -> [Int64] {
        try await ledger.store.transaction { db in
            var counts: [Int64] = []
            for table in ["request_nonces", "transactions", "entries", "postings", "payment_claims"] {
                counts.append(
                    try await db.query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM \(table)").first?.integer("n") ?? -1)
            }
            return counts
        }
    }

    @Test(arguments: kinds) func aReplayedPaymentIsRefusedAndChangesNothing(kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            let shop = try await Self.shop(on: store)
            try await shop.server.withClient { client in
                let submission = try Self.signedSubmission(
                    try shop.confirm(.accountBalance, amount: 3_00, tip: 0), at: shop)
                #expect(try shop.result(try await Self.send(submission, client: client)).outcome == .approved)
                let before = try await Self.rowCounts(shop.server.ledger)
                try expectError(
                    try await Self.send(submission, client: client), .unauthorized, "request_replayed",
                    "this signed request was already received once")
                #expect(try await Self.rowCounts(shop.server.ledger) == before)
            }
            #expect(try await shop.walletBalance == (try Money(minorUnits: 47_00, currency: .eur)))
        }
    }

    @Test(arguments: kinds) func aPaymentOverTheKeysLimitIsRefusedUnexecuted(kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            let shop = try await Self.shop(on: store, burst: 2)
            try await shop.server.withClient { client in
                for _ in 0..<2 {
                    _ = try shop.result(
                        try await shop.submit(try shop.confirm(.accountBalance, amount: 1_00, tip: 0), client: client))
                }
                let confirm = try shop.confirm(.accountBalance, amount: 1_00, tip: 0)
                let submission = try Self.signedSubmission(confirm, at: shop)
                try expectError(
                    try await Self.send(submission, client: client), .tooManyRequests, "rate_limited",
                    "too many requests from this signing key")
                #expect(try await shop.server.ledger.executionCount(of: confirm.paymentID) == 0)
                // Its nonce was used all the same, as a request refused on its own uses it.
                try expectError(
                    try await Self.send(submission, client: client), .unauthorized, "request_replayed",
                    "already received once")
            }
            #expect(try await shop.walletBalance == (try Money(minorUnits: 48_00, currency: .eur)))
        }
    }

    @Test(arguments: kinds) func aPaymentThatFailsStillUsesItsNonce(kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            let shop = try await Self.shop(on: store)
            try await shop.server.withClient { client in
                let first = try shop.confirm(.accountBalance, amount: 1_00)
                _ = try shop.result(try await shop.submit(first, client: client))
                // The same payment id with other terms: a conflict, its transaction rolled back.
                let conflicting = try shop.confirm(.accountBalance, amount: 2_00, paymentID: first.paymentID)
                let submission = try Self.signedSubmission(conflicting, at: shop)
                _ = try expectError(
                    try await Self.send(submission, client: client), .conflict, "payment_conflict", "other terms")
                try expectError(
                    try await Self.send(submission, client: client), .unauthorized, "request_replayed",
                    "already received once")
            }
        }
    }
}

/// A store that records each transaction its callers run: its isolation and its statements.
final class CountingStore: LedgerStore {
    struct Transaction: Sendable {
        var isolation: TransactionIsolation
        var statements: [String]

        /// Round trips to PostgreSQL: each statement, and BEGIN and COMMIT around a transaction.
        var roundTrips: Int { statements.count + (isolation == .singleStatement ? 0 : 2) }
    }

    let base: any LedgerStore
    let transactions = Mutex<[Transaction]>([])

    init(_ base: any LedgerStore) { self.base = base }

    var dialect: SQLDialect { base.dialect }

    func transaction<T: Sendable>(
        _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        try await base.transaction(isolation) { db in
            let index = transactions.withLock { list in
                list.append(Transaction(isolation: isolation, statements: []))
                return list.count - 1
            }
            return try await body(CountingTransaction(base: db, store: self, index: index))
        }
    }

    func close() async { await base.close() }

    func migrationTransaction<T: Sendable>(_ body: @Sendable (any SQLTransaction) async throws -> T)
        async throws(LedgerError) -> T
    {
        try await base.migrationTransaction(body)
    }
}

struct CountingTransaction: SQLTransaction {
    let base: any SQLTransaction
    let store: CountingStore
    let index: Int

    var forUpdate: String { base.forUpdate }
    var dialect: SQLDialect { base.dialect }

    func query(_ sql: String, _ parameters: [SQLValue]) async throws(LedgerError) -> [SQLRow] {
        store.transactions.withLock { list in
            if list.indices.contains(index) {
                list[index].statements.append(sql.split(whereSeparator: \.isWhitespace).joined(separator: " "))
            }
        }
        return try await base.query(sql, parameters)
    }
}
