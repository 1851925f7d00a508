import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonStores
import Testing

/// The stores the same tests run on.
enum StoreKind: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// Where the PostgreSQL tests connect: `HORIZON_TEST_POSTGRES_URL` (Tools/lib/postgres.sh
/// starts a throw-away cluster and sets it), e.g. `postgres://horizon@127.0.0.1:55432/horizon_test`
/// or `postgres://horizon@/horizon_test?host=/tmp/horizon-pg.XXXX/socket&port=55432`.
enum TestStores {
    static let postgresURL: String? = {
        let value = ProcessInfo.processInfo.environment["HORIZON_TEST_POSTGRES_URL"] ?? ""
        return value.isEmpty ? nil : value
    }()

    static var postgresConfigured: Bool { postgresURL != nil }

    /// A fresh, empty store of `kind` for `body`, removed afterwards whatever happens: a SQLite
    /// file in a new temporary directory, or a PostgreSQL schema of its own (so tests run in
    /// parallel on one database without seeing each other).
    static func withStore<T>(_ kind: StoreKind, _ body: (any LedgerStore) async throws -> T) async throws -> T {
        try await withStores(kind) { store, _ in try await body(store) }
    }

    /// Like `withStore`, and `body` may open more stores on the same database (closing them
    /// itself), as a second server process would.
    static func withStores<T>(
        _ kind: StoreKind, _ body: (any LedgerStore, @Sendable () throws -> any LedgerStore) async throws -> T
    ) async throws -> T {
        switch kind {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "horizon-ledger-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("ledger.sqlite").path
            let store = try SQLiteLedgerStore(path: path)
            do {
                let result = try await body(store) { try SQLiteLedgerStore(path: path) }
                await store.close()
                return result
            } catch {
                await store.close()
                throw error
            }
        case .postgres:
            let url = try #require(postgresURL, "HORIZON_TEST_POSTGRES_URL is not set")
            var location = try PostgresLocation(url: url)
            let schema = "ledger_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = PostgresLedgerStore(unchecked: location, connections: 1)
            try await admin.transaction { db in try await db.query("CREATE SCHEMA \(schema)") }
            location.schema = schema
            let store = try PostgresLedgerStore(location: location, maximumConnections: 4)
            do {
                let result = try await body(store) { [location] in
                    try PostgresLedgerStore(location: location, maximumConnections: 4)
                }
                await store.close()
                try await admin.transaction { db in try await db.query("DROP SCHEMA \(schema) CASCADE") }
                await admin.close()
                return result
            } catch {
                await store.close()
                _ = try? await admin.transaction { db in try await db.query("DROP SCHEMA \(schema) CASCADE") }
                await admin.close()
                throw error
            }
        }
    }

    /// A ledger opened (migrated) on a fresh store of `kind`.
    static func withLedger<T>(
        _ kind: StoreKind, options: LedgerOptions = LedgerOptions(), _ body: (Ledger) async throws -> T
    ) async throws -> T {
        try await withStore(kind) { store in
            let ledger = try await Ledger.open(store, options: options)
            return try await body(ledger)
        }
    }
}

extension PostgresLedgerStore {
    /// For the tests' own administration (creating and dropping schemas); cannot fail for a
    /// location that parsed.
    convenience init(unchecked location: PostgresLocation, connections: Int) {

        try! self.init(location: location, maximumConnections: connections)
    }
}

/// Payments, keys and ids for the tests.
enum Fixture {
    static func key(_ seed: UInt8) -> PublicKeyBytes {

        try! PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: seed, count: 64))
    }

    static func paymentID() -> PaymentID {
        var generator = SystemRandomNumberGenerator()
        return PaymentID.random(using: &generator)
    }

    static let terminal = try! TerminalKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8])
    static let session = SessionID(rawValue: 0x5e55_1011)!

    static func money(_ minorUnits: Int64, _ currency: Currency = .eur) -> Money {
        try! Money(minorUnits: minorUnits, currency: currency)
    }

    static func payment(
        _ id: PaymentID = paymentID(), wallet: PublicKeyBytes, amount: Int64, tip: Int64 = 0,
        currency: Currency = .eur, digest: UInt8 = 7, registerUser: String = "till-1"
    ) -> SettlementRequest {
        SettlementRequest(
            paymentID: id, sessionID: session, walletKey: wallet, terminalKeyID: terminal,
            amount: money(amount, currency), tip: money(tip, currency), registerUser: registerUser,
            contentDigest: [UInt8](repeating: digest, count: 32))
    }

    static func redemption(
        _ type: TransactionType, wallet: PublicKeyBytes, item: String = "", quantity: Int64 = 0,
        id: PaymentID = paymentID()
    ) -> RedemptionRequest {
        RedemptionRequest(
            redemptionID: id, sessionID: session, walletKey: wallet, terminalKeyID: terminal, transactionType: type,
            item: item, quantity: quantity, value: .zero(.eur), contentDigest: [UInt8](repeating: 9, count: 32))
    }

    /// A EUR merchant and a wallet holding `balance` cents.
    static func shop(_ ledger: Ledger, balance: Int64 = 100_00, key seed: UInt8 = 1) async throws -> (
        merchant: Merchant, wallet: Wallet, key: PublicKeyBytes
    ) {
        let merchant = try await ledger.createMerchant(
            name: "Café Horizon", currency: .eur, adminEmail: "owner\(seed)@cafe.example", at: 1_000)
        let key = key(seed)
        let wallet = try await ledger.createWallet(name: "Alice", publicKey: key, at: 1_000)
        if balance > 0 { try await ledger.deposit(money(balance), to: wallet.id, at: 1_000) }
        return (merchant, wallet, key)
    }
}

extension SettlementOutcome {
    var declineCode: ErrorCode? { if case .declined(let code, _) = self { code } else { nil } }
}
