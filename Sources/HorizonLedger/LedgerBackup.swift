import Foundation
import HorizonStores

/// Backups of an embedded (SQLite) ledger, and the check a backup passes before it is trusted.
public enum LedgerBackup {
    /// What a check of a ledger file found.
    public struct Summary: Sendable, Equatable, CustomStringConvertible {
        public let schemaVersion: Int
        public let transactions: Int

        public var description: String { "schema \(schemaVersion), \(transactions) transactions, audit clean" }
    }

    /// Copies the ledger at `path` to `destination` with SQLite's online backup: one consistent
    /// snapshot while payments go on (WAL), renamed into place when complete. Returns the pages
    /// copied.
    @discardableResult
    public static func copy(sqliteAt path: String, to destination: String) throws(LedgerError) -> Int {
        guard FileManager.default.fileExists(atPath: path) else {
            throw .invalidArgument("there is no database at \(path)")
        }
        do {
            let database = try SQLiteDatabase(path: path)
            defer { database.close() }
            return try database.backup(to: destination)
        } catch {
            throw .unavailable("the copy of \(path) to \(destination) failed: \(error)")
        }
    }

    /// Reads a SQLite ledger file as it is (never migrated): SQLite's integrity check, its schema
    /// version, and the ledger's audit (postings sum to zero, balances equal their postings, one
    /// entry per executed payment). Throws what is wrong with it.
    public static func check(sqliteAt path: String) async throws(LedgerError) -> Summary {
        guard FileManager.default.fileExists(atPath: path) else {
            throw .invalidArgument("there is no file at \(path)")
        }
        do {
            let database = try SQLiteDatabase(path: path)
            defer { database.close() }
            if let problem = try database.integrityProblem() {
                throw LedgerError.invalidArgument("\(path) is damaged: \(problem)")
            }
        } catch let error as LedgerError {
            throw error
        } catch {
            throw .invalidArgument("\(path) is not a file SQLite can read: \(error)")
        }
        let store = try SQLiteLedgerStore(path: path)
        do throws(LedgerError) {
            let summary = try await store.transaction(.serializable) { db in
                guard
                    try await !db.query(
                        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
                    ).isEmpty
                else {
                    throw LedgerError.invalidArgument("\(path) is not a Horizon ledger (it has no schema_migrations)")
                }
                let version = try await LedgerSchema.version(in: db)
                let count = try await db.query("SELECT COUNT(*) AS n FROM transactions").first?.integer("n") ?? 0
                return Summary(schemaVersion: version, transactions: Int(count))
            }
            let violations = try await LedgerAudit.violations(in: store)
            await store.close()
            guard violations.isEmpty else {
                throw LedgerError.invalidArgument("\(path) does not add up: \(violations.joined(separator: "; "))")
            }
            return summary
        } catch {
            await store.close()
            throw error
        }
    }

    /// Whether the PostgreSQL database at `url` already holds a ledger (its `schema_migrations`
    /// table), read without migrating anything.
    public static func holdsLedger(postgresURL url: String) async throws(LedgerError) -> Bool {
        let store = try PostgresLedgerStore(url: url)
        do throws(LedgerError) {
            let count = try await store.transaction(.serializable) { db in
                try await db.query(
                    """
                    SELECT COUNT(*) AS n FROM information_schema.tables
                    WHERE table_name = 'schema_migrations' AND table_schema = current_schema()
                    """
                ).first?.integer("n") ?? 0
            }
            await store.close()
            return count > 0
        } catch {
            await store.close()
            throw error
        }
    }
}
