import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonStores
import Testing

/// The stores the same tests run on.
public enum StoreKind: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    public var testDescription: String { rawValue }
}

/// Where the PostgreSQL tests connect: `HORIZON_TEST_POSTGRES_URL` (Tools/lib/postgres.sh
/// starts a throw-away cluster and sets it), e.g. `postgres://horizon@127.0.0.1:55432/horizon_test`
/// or `postgres://horizon@/horizon_test?host=/tmp/horizon-pg.XXXX/socket&port=55432`.
public enum TestStores {
    public static let postgresURL: String? = {
        let value = ProcessInfo.processInfo.environment["HORIZON_TEST_POSTGRES_URL"] ?? ""
        return value.isEmpty ? nil : value
    }()

    public static var postgresConfigured: Bool { postgresURL != nil }

    /// A fresh, empty store of `kind` for `body`, removed afterwards whatever happens: a SQLite
    /// file in a new temporary directory, or a PostgreSQL schema of its own (so tests run in
    /// parallel on one database without seeing each other).
    public static func withStore<T>(_ kind: StoreKind, _ body: (any LedgerStore) async throws -> T) async throws -> T {
        try await withStores(kind) { store, _ in try await body(store) }
    }

    /// Like `withStore`, and `body` may open more stores on the same database (closing them
    /// itself), as a second server process would.
    public static func withStores<T>(
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
            let store = try PostgresLedgerStore(
                location: location, maximumConnections: 4, connectionTimeout: PostgresLedgerStore.testConnectionTimeout)
            do {
                let result = try await body(store) { [location] in
                    try PostgresLedgerStore(
                        location: location, maximumConnections: 4,
                        connectionTimeout: PostgresLedgerStore.testConnectionTimeout)
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
    public static func withLedger<T>(
        _ kind: StoreKind, options: LedgerOptions = LedgerOptions(), _ body: (Ledger) async throws -> T
    ) async throws -> T {
        try await withStore(kind) { store in
            let ledger = try await Ledger.open(store, options: options)
            return try await body(ledger)
        }
    }
}

extension PostgresLedgerStore {
    /// How long a test's store waits for its first connection. Far more than a server would:
    /// with every test running at once on a loaded two-core machine, a connection to the shared
    /// cluster once took longer than the default 10 s, failing a test that had nothing to do with
    /// time.
    public static let testConnectionTimeout: Duration = .seconds(60)

    /// For the tests' own administration (creating and dropping schemas); cannot fail for a
    /// location that parsed.
    public convenience init(unchecked location: PostgresLocation, connections: Int) {
        try! self.init(
            location: location, maximumConnections: connections, connectionTimeout: Self.testConnectionTimeout)
    }
}
