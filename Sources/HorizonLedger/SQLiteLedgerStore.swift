import HorizonStores
import Synchronization

/// The embedded store: one SQLite file (WAL, `synchronous = FULL`, foreign keys on) through
/// HorizonStores' `SQLiteDatabase`, for a server or terminal with no database server.
///
/// One connection serves the process. A transaction holds it from `BEGIN IMMEDIATE` to
/// `COMMIT` across the body's suspension points, so transactions of this process run one after
/// another (an `AsyncSerialLock`, not a thread lock: a waiting task suspends instead of blocking
/// one of the few cooperative threads). Other processes on the same file wait on SQLite's own
/// write lock (`BEGIN IMMEDIATE` with the wrapper's 5 s busy timeout).
public final class SQLiteLedgerStore: LedgerStore {
    public let path: String
    let database: SQLiteDatabase
    private let lock = AsyncSerialLock()

    public var dialect: SQLDialect { .sqlite }

    /// Opens (creating if needed, mode 0600) the database file at `path`.
    public init(path: String) throws(LedgerError) {
        self.path = path
        do {
            database = try SQLiteDatabase(path: path)
            // Deleted and overwritten rows are zeroed in the file, not left in free space: the
            // outbox's one-time codes must not outlive their use.
            try database.execute("PRAGMA secure_delete = ON")
        } catch {
            throw .unavailable("cannot open the SQLite ledger at \(path): \(error.message)")
        }
    }

    /// Every isolation is the same here: transactions run one at a time. A single statement
    /// runs without BEGIN and COMMIT (SQLite commits it on its own, as durably).
    @discardableResult
    public func transaction<T: Sendable>(
        _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        await lock.lock()
        defer { lock.unlock() }
        let connection = Connection(database: database)
        if isolation == .singleStatement {
            do { return try await body(connection) } catch { throw ledgerError(error) }
        }
        return try await Self.inTransaction(connection, body)
    }

    /// A migration rebuilds tables (SQLite cannot change a CHECK in place), and dropping a table
    /// that foreign keys point at is refused while they are enforced, even when the rebuilt table
    /// keeps every row. So SQLite's own procedure for it: enforcement off for the migration (the
    /// pragma only takes effect outside a transaction), every reference checked before the
    /// commit (`PRAGMA foreign_key_check`; a migration that broke one is rolled back whole),
    /// enforcement on again after.
    public func migrationTransaction<T: Sendable>(_ body: @Sendable (any SQLTransaction) async throws -> T)
        async throws(LedgerError) -> T
    {
        await lock.lock()
        defer { lock.unlock() }
        let connection = Connection(database: database)
        try connection.run("PRAGMA foreign_keys = OFF")
        defer { try? connection.run("PRAGMA foreign_keys = ON") }
        return try await Self.inTransaction(connection) { db in
            let result = try await body(db)
            let broken = try await db.query("PRAGMA foreign_key_check")
            if let first = broken.first {
                let table = (try? first.text("table")) ?? "?"
                let parent = (try? first.text("parent")) ?? "?"
                throw LedgerError.database(
                    "the migration would leave \(broken.count) rows referring to missing rows, the first in \(table) (to \(parent))"
                )
            }
            return result
        }
    }

    /// Runs `body` between BEGIN IMMEDIATE and COMMIT; nothing of a failed body stays.
    private static func inTransaction<T: Sendable>(
        _ connection: Connection, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        try connection.run("BEGIN IMMEDIATE")
        do {
            let result = try await body(connection)
            try connection.run("COMMIT")
            return result
        } catch {
            try? connection.run("ROLLBACK")
            throw ledgerError(error)
        }
    }

    public func close() async {
        // After the lock: no transaction of this process is still running. Later calls throw.
        await lock.lock()
        database.close()
        lock.unlock()
    }

    struct Connection: SQLTransaction {
        let database: SQLiteDatabase

        func run(_ sql: String) throws(LedgerError) {
            do { try database.query(sql) } catch { throw Self.map(error) }
        }

        var dialect: SQLDialect { .sqlite }

        func insert(_ sql: String, _ parameters: [SQLValue], returning column: String)
            async throws(LedgerError) -> Int64
        {
            do { return try database.insert(sql, parameters) } catch { throw Self.map(error) }
        }

        func query(_ sql: String, _ parameters: [SQLValue]) async throws(LedgerError) -> [SQLRow] {
            let rows: [DatabaseRow]
            do { rows = try database.query(sql, parameters) } catch { throw Self.map(error) }
            return rows.map { SQLRow(columns: $0.columns, cells: $0.cells) }
        }

        static func map(_ error: DatabaseError) -> LedgerError {
            // SQLITE_BUSY (5) and SQLITE_LOCKED (6): another process held the file past the busy
            // timeout; nothing was written, so retrying is safe.
            if error.code == 5 || error.code == 6 { return .contention(attempts: 1) }
            return .database(error.description)
        }
    }
}

/// A lock for async code: `lock()` suspends the task (never a thread) until the lock is free;
/// waiters get it in the order they asked.
final class AsyncSerialLock: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func lock() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let acquired = state.withLock { state -> Bool in
                if state.locked {
                    state.waiters.append(continuation)
                    return false
                }
                state.locked = true
                return true
            }
            if acquired { continuation.resume() }
        }
    }

    func unlock() {
        // The lock passes straight to the first waiter (it stays locked), so no newcomer jumps
        // the queue.
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
