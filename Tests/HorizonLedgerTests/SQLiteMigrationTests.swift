import HorizonLedger
import HorizonLedgerTestSupport
import Testing

/// SQLite rebuilds a table to change a CHECK (migrations 5 and 11), which enforced foreign keys
/// refuse when rows point at it; the store runs migrations with enforcement off and checks every
/// reference before it commits.
@Suite("SQLite migrations and foreign keys")
struct SQLiteMigrationTests {
    typealias F = Fixture

    @Test func aMigrationThatBreaksAReferenceIsRolledBackAndEnforcementComesBack() async throws {
        try await TestStores.withStore(.sqlite) { store in
            let ledger = try await Ledger.open(store)
            let (merchant, _, key) = try await F.shop(ledger)
            _ = try await ledger.settle(F.payment(wallet: key, amount: 5_00), merchant: merchant.id)
            let count = { @Sendable () async throws -> Int64 in
                try await store.transaction { db in
                    try await db.query("SELECT COUNT(*) AS n FROM entries").first?.integer("n") ?? -1
                }
            }
            let entries = try await count()
            #expect(entries >= 2)
            // Every posting would point at a missing entry: refused at the end, nothing changed.
            await #expect(throws: LedgerError.self) {
                try await store.migrationTransaction { db in try await db.query("DELETE FROM entries") }
            }
            #expect(try await count() == entries)
            // Enforcement is on again: an ordinary transaction cannot orphan a posting either.
            await #expect(throws: LedgerError.self) {
                try await store.transaction { db in try await db.query("DELETE FROM entries") }
            }
            #expect(try await count() == entries)
            #expect(try await LedgerAudit.violations(in: store) == [])
        }
    }
}
