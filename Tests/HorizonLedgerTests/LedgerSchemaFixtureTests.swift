import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonStores
import HorizonTestSupport
import Testing

/// Every released schema of the ledger, as committed files (`Fixtures/ledger-schema-N.sql`: a
/// merchant, a wallet, a deposit and an approved payment written at schema 1, then migrated to N
/// by that release), opened by today's program: migrated to the current schema, the books
/// consistent, the money where it was, and the tables exactly a new ledger's.
@Suite("Schema fixtures of the ledger", .offTheCooperativePool)
struct LedgerSchemaFixtureTests {
    static let fixtures = RepositoryFile.root.appendingPathComponent("Tests/HorizonLedgerTests/Fixtures")
    static let merchant = MerchantID(rawValue: "m_fixture")
    static let wallet = WalletID(rawValue: "w_fixture")

    @Test(arguments: Array(1...LedgerSchema.currentVersion)) func aReleasedLedgerIsMigratedAndKeepsItsMoney(
        version: Int
    ) async throws {
        let fixture = Self.fixtures.appendingPathComponent("ledger-schema-\(version).sql")
        if SchemaFixture.writing, !FileManager.default.fileExists(atPath: fixture.path) {
            try await Self.writeFixture(version: version, to: fixture)
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-fixture-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.sqlite").path
        try SchemaFixture.load(fixture, into: path)

        let store = try SQLiteLedgerStore(path: path)
        let ledger = try await Ledger.open(store)
        #expect(try await ledger.schemaVersion() == LedgerSchema.currentVersion)
        #expect(try await LedgerAudit.violations(in: store).isEmpty)
        #expect(try await ledger.balance(of: Self.wallet, in: .eur) == euros(750))
        #expect(try await ledger.balance(of: Self.merchant) == euros(250))
        let payment = try #require(try await ledger.transaction(for: paymentID(1)))
        #expect(payment.result.amount == euros(250) && payment.walletID == Self.wallet)
        if case .approved = payment.result.outcome {} else { Issue.record("not approved: \(payment.result.outcome)") }
        #expect(try await ledger.executionCount(of: paymentID(1)) == 1)
        await ledger.close()

        let fresh = directory.appendingPathComponent("fresh.sqlite").path
        let freshStore = try SQLiteLedgerStore(path: fresh)
        _ = try await LedgerSchema.migrate(freshStore, at: 1)
        await freshStore.close()
        let migrated = try SQLiteDatabase(path: path)
        let new = try SQLiteDatabase(path: fresh)
        defer {
            migrated.close()
            new.close()
        }
        #expect(try SchemaFixture.tables(of: migrated) == SchemaFixture.tables(of: new))
    }

    /// The rows, written at schema 1 in that schema's own columns, then the release's steps.
    static func writeFixture(version: Int, to file: URL) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-fixture-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.sqlite").path
        let store = try SQLiteLedgerStore(path: path)
        _ = try await LedgerSchema.migrate(store, to: 1, at: 1_000)
        await store.close()
        let database = try SQLiteDatabase(path: path)
        try database.execute(
            """
            BEGIN;
            INSERT INTO merchants(id, name, currency, admin_email, created_at)
                VALUES ('m_fixture', 'Corner Café', 'EUR', 'owner@example.com', 1000);
            INSERT INTO wallets(id, name, created_at) VALUES ('w_fixture', 'Alex', 1000);
            INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES
                (1, 'wallet', 'w_fixture', 'EUR', 750), (2, 'merchant', 'm_fixture', 'EUR', 250),
                (3, 'external', 'external', 'EUR', -1000);
            INSERT INTO entries(id, kind, created_at) VALUES (1, 'deposit', 1001), (2, 'payment', 1002);
            INSERT INTO postings(id, entry_id, account_id, currency, amount) VALUES
                (1, 1, 1, 'EUR', 1000), (2, 1, 3, 'EUR', -1000), (3, 2, 1, 'EUR', -250), (4, 2, 2, 'EUR', 250);
            COMMIT;
            """)
        try database.query(
            "INSERT INTO wallet_keys(public_key, wallet_id, added_at) VALUES (?, 'w_fixture', 1000)",
            [.blob(walletKey(1).bytes)])
        try database.query(
            """
            INSERT INTO transactions(reference, payment_id, merchant_id, transaction_type, item, quantity, session_id,
                wallet_key, wallet_id, terminal_key_id, amount, tip, currency, register_user, content_digest, outcome,
                bonus_earned, bonus_balance, entry_id, settled_at)
            VALUES (1, ?, 'm_fixture', 1, '', 0, ?, ?, 'w_fixture', ?, 250, 0, 'EUR', 'anna', ?, 'approved', 0, 0, 2, 1002)
            """,
            [
                .blob(paymentID(1).bytes), .integer(Int64(bitPattern: session.rawValue)), .blob(walletKey(1).bytes),
                .blob(terminalKey.bytes), .blob(digest(1)),
            ])
        database.close()
        let migrating = try SQLiteLedgerStore(path: path)
        _ = try await LedgerSchema.migrate(migrating, to: version, at: 2_000)
        await migrating.close()
        let migrated = try SQLiteDatabase(path: path)
        defer { migrated.close() }
        try SchemaFixture.dump(migrated, to: file)
    }
}
