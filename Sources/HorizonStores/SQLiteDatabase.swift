import CSQLite
import Foundation
import Synchronization

/// Why a database operation failed.
public struct DatabaseError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public let context: String

    public init(code: Int32, message: String, context: String) {
        self.code = code
        self.message = message
        self.context = context
    }

    public var description: String { "\(context): \(message)" + (code >= 0 ? " (SQLite \(code))" : "") }
}

/// A value bound to or read from a statement.
public enum DatabaseValue: Sendable, Equatable {
    case integer(Int64)
    case text(String)
    case blob([UInt8])
    case null

    public var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
    public var text: String? { if case .text(let value) = self { value } else { nil } }
    public var blob: [UInt8]? { if case .blob(let value) = self { value } else { nil } }
}

/// A row: column values by name, read strictly (`RowDecoder`): a column the row does not have,
/// a NULL where a value must be, or a value of another type is an error naming the column, never
/// a zero or an empty string. The names are the statement's, shared by every row of one result;
/// a lookup compares names (a handful per row) rather than hashing them, and a row costs one array
/// of values, not a dictionary (a profile of a payment: row dictionaries and the SQL-keyed
/// statement cache hashed about 500 strings per payment).
public struct DatabaseRow: Sendable {
    /// Column names in result order (as SQLite reports them).
    public let columns: [String]
    /// Values in the order of `columns`.
    public let cells: [DatabaseValue]

    public init(columns: [String], cells: [DatabaseValue]) {
        self.columns = columns
        self.cells = cells
    }

    private var decoder: RowDecoder { RowDecoder(columns: columns, cells: cells) }

    /// The value of `column` (of the last such column if the result names it twice).
    public func value(_ column: String) throws(DatabaseError) -> DatabaseValue {
        try Self.reading { () throws(RowDecodingError) in try decoder.value(column) }
    }
    public func integer(_ column: String) throws(DatabaseError) -> Int64 {
        try Self.reading { () throws(RowDecodingError) in try decoder.integer(column) }
    }
    public func optionalInteger(_ column: String) throws(DatabaseError) -> Int64? {
        try Self.reading { () throws(RowDecodingError) in try decoder.optionalInteger(column) }
    }
    public func text(_ column: String) throws(DatabaseError) -> String {
        try Self.reading { () throws(RowDecodingError) in try decoder.text(column) }
    }
    public func optionalText(_ column: String) throws(DatabaseError) -> String? {
        try Self.reading { () throws(RowDecodingError) in try decoder.optionalText(column) }
    }
    public func bytes(_ column: String) throws(DatabaseError) -> [UInt8] {
        try Self.reading { () throws(RowDecodingError) in try decoder.bytes(column) }
    }
    public func optionalBytes(_ column: String) throws(DatabaseError) -> [UInt8]? {
        try Self.reading { () throws(RowDecodingError) in try decoder.optionalBytes(column) }
    }

    private static func reading<T>(_ read: () throws(RowDecodingError) -> T) throws(DatabaseError) -> T {
        do { return try read() } catch {
            throw DatabaseError(code: -1, message: error.description, context: "reading a stored row")
        }
    }

    /// The row as a dictionary by column name (the last of a repeated name wins).
    public var values: [String: DatabaseValue] {
        Dictionary(zip(columns, cells), uniquingKeysWith: { _, last in last })
    }
}

/// Why a stored row could not be read: the column and what was wrong with it.
public struct RowDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    public let column: String
    public let reason: String

    public init(column: String, reason: String) {
        self.column = column
        self.reason = reason
    }

    public var description: String { "column \(column): \(reason)" }
}

/// The one strict reader of stored rows, shared by every store (the terminal journal, the wallet
/// store and the ledger on SQLite and PostgreSQL): asking for a column the row does not have, or
/// reading it as another type, is an error; only the `optional…` readers accept NULL.
public struct RowDecoder: Sendable {
    public let columns: [String]
    public let cells: [DatabaseValue]
    /// Columns whose database type no store reads, with that type's name.
    let unreadable: [String: String]

    public init(columns: [String], cells: [DatabaseValue], unreadable: [String: String] = [:]) {
        self.columns = columns
        self.cells = cells
        self.unreadable = unreadable
    }

    public func value(_ column: String) throws(RowDecodingError) -> DatabaseValue {
        if !unreadable.isEmpty, let type = unreadable[column] {
            throw RowDecodingError(column: column, reason: "database type \(type) is not one the stores read")
        }
        guard let index = columns.lastIndex(of: column), index < cells.count else {
            throw RowDecodingError(column: column, reason: "missing")
        }
        return cells[index]
    }

    public func integer(_ column: String) throws(RowDecodingError) -> Int64 {
        guard let value = try optionalInteger(column) else { throw RowDecodingError(column: column, reason: "NULL") }
        return value
    }

    public func optionalInteger(_ column: String) throws(RowDecodingError) -> Int64? {
        switch try value(column) {
        case .integer(let number): return number
        case .null: return nil
        case .text, .blob: throw RowDecodingError(column: column, reason: "expected an integer")
        }
    }

    public func text(_ column: String) throws(RowDecodingError) -> String {
        guard let value = try optionalText(column) else { throw RowDecodingError(column: column, reason: "NULL") }
        return value
    }

    public func optionalText(_ column: String) throws(RowDecodingError) -> String? {
        switch try value(column) {
        case .text(let text): return text
        case .null: return nil
        case .integer, .blob: throw RowDecodingError(column: column, reason: "expected text")
        }
    }

    public func bytes(_ column: String) throws(RowDecodingError) -> [UInt8] {
        guard let value = try optionalBytes(column) else { throw RowDecodingError(column: column, reason: "NULL") }
        return value
    }

    public func optionalBytes(_ column: String) throws(RowDecodingError) -> [UInt8]? {
        switch try value(column) {
        case .blob(let bytes): return bytes
        case .null: return nil
        case .integer, .text: throw RowDecodingError(column: column, reason: "expected bytes")
        }
    }
}

/// A small, synchronous wrapper over the system's SQLite, configured for money:
/// write-ahead logging, `synchronous = FULL` (a committed transaction survives power loss),
/// foreign keys on, and one connection serialised behind a lock. Prepared statements are kept
/// and reused by their SQL text (see `StatementCache`).
public final class SQLiteDatabase: Sendable {
    /// The handle and its statement cache, only touched while the lock is held.
    private struct Connection {
        var handle: OpaquePointer?
        let statements: StatementCache
    }

    private let connection: Mutex<Connection>
    public let path: String
    /// Counts this connection's synced commits (see `SyncedCommits`); kept alive with the handle.
    private let commits: CommitCounter

    /// Opens (creating if needed) the database at `path`; the file gets mode 0600.
    public init(path: String) throws(DatabaseError) {
        self.path = path
        // Create the file private before SQLite opens it, so it never exists with looser modes.
        if path != ":memory:", !FileManager.default.fileExists(atPath: path) {
            let descriptor = Glibc.open(path, O_CREAT | O_WRONLY, 0o600)
            if descriptor >= 0 { Glibc.close(descriptor) }
        }
        _ = Self.configureOnce
        var handle: OpaquePointer?
        // No mutex of SQLite's own per connection: every use of the handle is under `connection`'s
        // lock, so SQLite's (taken around each of its calls, a dozen a statement) was a second lock
        // for nothing.
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(handle)
            throw DatabaseError(code: status, message: message, context: "opening \(path)")
        }
        sqlite3_busy_timeout(handle, 5_000)
        commits = CommitCounter(path: path)
        // SQLite calls the WAL hook after each commit that wrote to the log (a transaction that
        // changed nothing writes nothing and syncs nothing). It replaces SQLite's own hook, which
        // checkpoints the log at 1000 pages; this one does the same.
        sqlite3_wal_hook(
            handle,
            { context, handle, name, pages in
                if let context { Unmanaged<CommitCounter>.fromOpaque(context).takeUnretainedValue().committed() }
                if pages >= CommitCounter.checkpointPages { sqlite3_wal_checkpoint(handle, name) }
                return SQLITE_OK
            }, Unmanaged.passUnretained(commits).toOpaque())
        connection = Mutex(Connection(handle: handle, statements: StatementCache()))
        if path != ":memory:" { chmod(path, 0o600) }
        try execute("PRAGMA journal_mode = WAL")
        try execute("PRAGMA synchronous = FULL")
        try execute("PRAGMA foreign_keys = ON")
    }

    /// Process-wide settings, made before the first connection opens (SQLite refuses them after
    /// it initializes; this program's only SQLite user is this type). Memory statistics off: they
    /// took a global mutex around every allocation, a few hundred a payment.
    private static let configureOnce: Void = { _ = csqlite_disable_memory_statistics() }()

    deinit { close() }

    /// Closes the connection now instead of when the last reference goes (an owner that may be
    /// kept alive by others, such as a task still holding it, frees the file descriptors at a
    /// known time). Every later call throws; closing twice does nothing.
    public func close() {
        connection.withLock { connection in
            guard let handle = connection.handle else { return }
            connection.statements.finalizeAll()
            sqlite3_close_v2(handle)
            connection.handle = nil
        }
    }

    /// The open handle, or the error that says the database was closed.
    private static func openHandle(_ connection: Connection, _ path: String) throws(DatabaseError) -> OpaquePointer {
        guard let handle = connection.handle else {
            throw DatabaseError(code: SQLITE_MISUSE, message: "the database was closed", context: path)
        }
        return handle
    }

    /// Runs SQL that returns no rows (several statements allowed). A script that fails inside
    /// its own `BEGIN … COMMIT` is rolled back here, not left open until the handle closes: the
    /// next transaction could not begin.
    public func execute(_ sql: String) throws(DatabaseError) {
        try connection.withLock { [path] (connection) throws(DatabaseError) in
            let handle = try Self.openHandle(connection, path)
            var error: UnsafeMutablePointer<CChar>?
            let status = sqlite3_exec(handle, sql, nil, nil, &error)
            guard status == SQLITE_OK else {
                let message = error.map { String(cString: $0) } ?? "unknown error"
                sqlite3_free(error)
                if sqlite3_get_autocommit(handle) == 0 {
                    sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
                }
                throw DatabaseError(code: status, message: message, context: String(sql.prefix(60)))
            }
        }
    }

    /// Runs one statement with bound parameters; returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [DatabaseValue] = []) throws(DatabaseError) -> [DatabaseRow] {
        try connection.withLock { [path] (connection) throws(DatabaseError) -> [DatabaseRow] in
            try Self.run(sql, parameters, on: Self.openHandle(connection, path), statements: connection.statements)
        }
    }

    /// Runs one INSERT and returns the row's rowid (its `INTEGER PRIMARY KEY`). Not `RETURNING`:
    /// SQLite collects a statement's returned rows in a temporary table, a page cache of its own
    /// allocated and freed at every run, which costs more than the insert itself.
    public func insert(_ sql: String, _ parameters: [DatabaseValue] = []) throws(DatabaseError) -> Int64 {
        try connection.withLock { [path] (connection) throws(DatabaseError) -> Int64 in
            let handle = try Self.openHandle(connection, path)
            _ = try Self.run(sql, parameters, on: handle, statements: connection.statements)
            return sqlite3_last_insert_rowid(handle)
        }
    }

    /// Runs `body` in one IMMEDIATE transaction: all of it is committed and synced, or none.
    /// With `synced: false` the commit is atomic but not synced (WAL with `synchronous = NORMAL`):
    /// it reaches the disk with the next synced commit or checkpoint, and a power cut before that
    /// loses it whole. Only for writes whose loss costs nothing.
    public func transaction<T>(synced: Bool = true, _ body: (Transaction) throws(DatabaseError) -> T)
        throws(DatabaseError) -> T
    {
        try connection.withLock { [path] (connection) throws(DatabaseError) -> T in
            let handle = try Self.openHandle(connection, path)
            let statements = connection.statements
            if !synced {
                _ = try Self.run("PRAGMA synchronous = NORMAL", [], on: handle, statements: statements)
                commits.unsynced.store(true, ordering: .relaxed)
            }
            defer {
                if !synced {
                    commits.unsynced.store(false, ordering: .relaxed)
                    _ = try? Self.run("PRAGMA synchronous = FULL", [], on: handle, statements: statements)
                }
            }
            _ = try Self.run("BEGIN IMMEDIATE", [], on: handle, statements: statements)
            do throws(DatabaseError) {
                let result = try body(Transaction(handle: handle, statements: statements))
                _ = try Self.run("COMMIT", [], on: handle, statements: statements)
                return result
            } catch {
                _ = try? Self.run("ROLLBACK", [], on: handle, statements: statements)
                throw error
            }
        }
    }

    /// SQLite's own check of every page and index (`PRAGMA integrity_check`): nil when the file is
    /// sound, else what SQLite found wrong, in its words.
    public func integrityProblem() throws(DatabaseError) -> String? {
        var findings: [String] = []
        do {
            for row in try query("PRAGMA integrity_check") { findings.append(try row.text("integrity_check")) }
        } catch  where error.code & 0xFF == SQLITE_CORRUPT {
            return error.message  // damaged where the check itself must read
        }
        if findings == ["ok"] { return nil }
        return findings.isEmpty ? "SQLite's check gave no answer" : findings.joined(separator: "; ")
    }

    /// Copies the database to `destination` with SQLite's online backup: a consistent snapshot
    /// (one read transaction), while other connections and processes go on writing (WAL). The
    /// copy is written beside `destination` and renamed into place, mode 0600, so a crash never
    /// leaves half a backup under its name. Returns the copy's size in pages.
    @discardableResult
    public func backup(to destination: String) throws(DatabaseError) -> Int {
        let partial = destination + ".partial"
        unlink(partial)
        let descriptor = Glibc.open(partial, O_CREAT | O_WRONLY | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw DatabaseError(
                code: -1, message: "cannot create \(partial): \(String(cString: strerror(errno)))",
                context: "backing up \(path)")
        }
        Glibc.close(descriptor)
        var target: OpaquePointer?
        guard sqlite3_open_v2(partial, &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
            let target
        else {
            sqlite3_close(target)
            unlink(partial)
            throw DatabaseError(code: -1, message: "cannot open \(partial)", context: "backing up \(path)")
        }
        let pages: Int
        do {
            pages = try copyPages(into: target, destination: destination)
        } catch {
            sqlite3_close(target)
            unlink(partial)
            throw error
        }
        // The copy leaves WAL mode's files behind it: one file, synced, then renamed.
        let checkpoint = sqlite3_exec(target, "PRAGMA journal_mode = DELETE", nil, nil, nil)
        sqlite3_close(target)
        guard checkpoint == SQLITE_OK, fsync(partial), rename(partial, destination) == 0 else {
            unlink(partial)
            throw DatabaseError(
                code: -1, message: "cannot finish \(destination): \(String(cString: strerror(errno)))",
                context: "backing up \(path)")
        }
        return pages
    }

    private func copyPages(into target: OpaquePointer, destination: String) throws(DatabaseError) -> Int {
        // The target handle is this call's alone (opened and closed by `backup`), used under the
        // source's lock only to read its pages into it.
        let targetAddress = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(target)))
        return try connection.withLock { [path] (connection) throws(DatabaseError) -> Int in
            let handle = try Self.openHandle(connection, path)
            let target = OpaquePointer(bitPattern: targetAddress)
            guard let backup = sqlite3_backup_init(target, "main", handle, "main") else {
                throw Self.error(target, "backup to \(destination)")
            }
            // All pages in one step: one snapshot, however much is written meanwhile.
            var status = sqlite3_backup_step(backup, -1)
            // Waiting for a writer stays on this thread: the step runs under the connection's
            // lock with SQLite's handles, whose C API blocks by nature (as its busy timeout does),
            // and suspending here would hold the lock across a suspension.
            while status == SQLITE_BUSY || status == SQLITE_LOCKED {
                usleep(10_000)
                status = sqlite3_backup_step(backup, -1)
            }
            let pages = Int(sqlite3_backup_pagecount(backup))
            sqlite3_backup_finish(backup)
            guard status == SQLITE_DONE else { throw Self.error(target, "backup to \(destination)") }
            return pages
        }
    }

    /// Flushes a file to disk.
    private func fsync(_ file: String) -> Bool {
        let descriptor = Glibc.open(file, O_RDONLY)
        guard descriptor >= 0 else { return false }
        defer { Glibc.close(descriptor) }
        return Glibc.fsync(descriptor) == 0
    }

    /// Access to the connection inside `transaction`.
    public struct Transaction {
        let handle: OpaquePointer?
        let statements: StatementCache

        @discardableResult
        public func query(_ sql: String, _ parameters: [DatabaseValue] = []) throws(DatabaseError) -> [DatabaseRow] {
            try SQLiteDatabase.run(sql, parameters, on: handle, statements: statements)
        }

        /// Rows changed by the last statement.
        public var changes: Int { Int(sqlite3_changes(handle)) }
    }

    /// Statements kept prepared now (for tests).
    var cachedStatementCount: Int { connection.withLock { $0.statements.count } }

    /// Whether a statement for `sql` is kept (for tests).
    func keepsStatement(for sql: String) -> Bool { connection.withLock { $0.statements.isKept(sql) } }

    /// Collects the SQL of every statement run from now on (`query`, `insert`, a transaction's
    /// statements; not `execute`) until `stopRecordingStatements` (for tests).
    func startRecordingStatements() { connection.withLock { $0.statements.recorded = [] } }

    /// The statements run since `startRecordingStatements`, in order; recording stops.
    func stopRecordingStatements() -> [String] {
        connection.withLock { connection in
            defer { connection.statements.recorded = nil }
            return connection.statements.recorded ?? []
        }
    }

    /// How many temporary structures SQLite's plan for `sql` builds at every run: ephemeral
    /// tables (a `RETURNING` clause's rows, an `IN (…)` list of more than two values, in a query
    /// or a CHECK), automatic indexes and sorters. Each has a page cache of its own, allocated and
    /// freed per run; a payment's statements should build none (for tests).
    func temporaryStructures(in sql: String) throws(DatabaseError) -> Int {
        try query("EXPLAIN " + sql).count { row in
            ["OpenEphemeral", "OpenAutoindex", "SorterOpen"].contains((try? row.text("opcode")) ?? "")
        }
    }

    static func run(
        _ sql: String, _ parameters: [DatabaseValue], on handle: OpaquePointer?, statements: StatementCache
    ) throws(DatabaseError) -> [DatabaseRow] {
        let lease = try statements.take(sql, on: handle)
        defer { statements.giveBack(lease) }
        let statement = lease.statement
        for (index, value) in parameters.enumerated() {
            let position = Int32(index + 1)
            let status: Int32
            switch value {
            case .integer(let number): status = sqlite3_bind_int64(statement, position, number)
            case .text(let text):
                // Bound by length, not as a C string: text may contain NUL.
                let bytes = Array(text.utf8)
                if bytes.isEmpty {
                    status = sqlite3_bind_text(statement, position, "", 0, csqlite_transient())
                } else {
                    status = bytes.withUnsafeBufferPointer { buffer in
                        buffer.withMemoryRebound(to: CChar.self) {
                            sqlite3_bind_text(statement, position, $0.baseAddress, Int32($0.count), csqlite_transient())
                        }
                    }
                }
            case .blob(let bytes):
                status = bytes.withUnsafeBytes {
                    sqlite3_bind_blob(statement, position, $0.baseAddress, Int32($0.count), csqlite_transient())
                }
            case .null: status = sqlite3_bind_null(statement, position)
            }
            guard status == SQLITE_OK else { throw error(handle, sql) }
        }
        var rows: [DatabaseRow] = []
        var columns: [String]?
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { break }
            guard status == SQLITE_ROW else { throw error(handle, sql) }
            let count = sqlite3_column_count(statement)
            // Names once per result (read at the first row: a statement re-prepared after a
            // schema change may name its columns anew).
            let names =
                columns
                ?? (0..<count).map { column in
                    sqlite3_column_name(statement, column).map { String(cString: $0) } ?? ""
                }
            columns = names
            var cells: [DatabaseValue] = []
            cells.reserveCapacity(Int(count))
            for column in 0..<count {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: cells.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_TEXT:
                    let length = Int(sqlite3_column_bytes(statement, column))
                    if let base = sqlite3_column_text(statement, column) {
                        cells.append(
                            .text(String(decoding: UnsafeBufferPointer(start: base, count: length), as: UTF8.self)))
                    } else {
                        cells.append(.text(""))
                    }
                case SQLITE_BLOB:
                    let length = Int(sqlite3_column_bytes(statement, column))
                    if let base = sqlite3_column_blob(statement, column) {
                        cells.append(.blob(Array(UnsafeRawBufferPointer(start: base, count: length))))
                    } else {
                        cells.append(.blob([]))
                    }
                default: cells.append(.null)
                }
            }
            rows.append(DatabaseRow(columns: names, cells: cells))
        }
        return rows
    }

    static func error(_ handle: OpaquePointer?, _ sql: String) -> DatabaseError {
        DatabaseError(
            code: sqlite3_errcode(handle), message: String(cString: sqlite3_errmsg(handle)),
            context: String(sql.prefix(60)))
    }
}

/// Prepared statements by SQL text, so each is parsed and planned once per connection rather
/// than at every use: the stores run a handful of fixed statements per payment, and preparing
/// them cost more than running them (a profile of a payment: about 5% of a payment's instructions).
///
/// A statement is taken out while it runs and given back reset, with its bindings cleared, so a
/// statement is never shared by two uses at once. At most `capacity` are kept; beyond that the
/// least recently used idle one is finalized to make room, so SQL built at run time cannot grow
/// the cache without bound, and statements used once (a migration's) do not crowd out the ones
/// used on every payment. (The cache used to keep the first 64 and prepare every later one
/// afresh: on the terminal's ledger that was 11 prepares, about 680 000 instructions, a payment.)
/// Only used under the connection's lock.
final class StatementCache {
    static let capacity = 64

    /// A kept statement; `inUse` while a query runs it (a query inside another's use of the
    /// same SQL gets a statement of its own, finalized after).
    fileprivate final class Entry {
        let sql: String
        let statement: OpaquePointer
        var inUse = false
        var lastUse: UInt64 = 0
        init(_ sql: String, _ statement: OpaquePointer) {
            self.sql = sql
            self.statement = statement
        }
    }
    private var statements: [String: Entry] = [:]
    private var clock: UInt64 = 0
    /// The SQL of every statement taken while recording (for tests), in order.
    var recorded: [String]?

    var count: Int { statements.count }

    /// A statement taken for one use; give it back with `giveBack`.
    struct Lease {
        let statement: OpaquePointer?
        fileprivate let entry: Entry?
    }

    /// The statement for `sql`: the kept one (one lookup by the SQL text), or a new one, kept
    /// in place of the least recently used idle one when the cache is full.
    func take(_ sql: String, on handle: OpaquePointer?) throws(DatabaseError) -> Lease {
        clock &+= 1
        recorded?.append(sql)
        let existing = statements[sql]
        if let entry = existing, !entry.inUse {
            entry.inUse = true
            entry.lastUse = clock
            return Lease(statement: entry.statement, entry: entry)
        }
        var prepared: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &prepared, nil) == SQLITE_OK, let statement = prepared else {
            sqlite3_finalize(prepared)
            throw SQLiteDatabase.error(handle, sql)
        }
        // The same SQL busy in an outer use: this one is for the inner use only.
        guard existing == nil, makeRoom() else { return Lease(statement: statement, entry: nil) }
        let entry = Entry(sql, statement)
        entry.inUse = true
        entry.lastUse = clock
        statements[sql] = entry
        return Lease(statement: statement, entry: entry)
    }

    /// True when there is room for one more, after finalizing the least recently used idle
    /// statement if the cache was full (false only when every kept statement is in use).
    private func makeRoom() -> Bool {
        guard statements.count >= Self.capacity else { return true }
        var oldest: Entry?
        for entry in statements.values where !entry.inUse && entry.lastUse < (oldest?.lastUse ?? .max) {
            oldest = entry
        }
        guard let oldest else { return false }
        statements[oldest.sql] = nil
        sqlite3_finalize(oldest.statement)
        return true
    }

    /// Whether `sql` has a kept statement (for tests).
    func isKept(_ sql: String) -> Bool { statements[sql] != nil }

    /// Resets the statement (whatever its last step returned) and clears its bindings for the
    /// next use; one that is not kept is finalized.
    func giveBack(_ lease: Lease) {
        guard let statement = lease.statement else { return }
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        if let entry = lease.entry {
            entry.inUse = false
        } else {
            sqlite3_finalize(statement)
        }
    }

    func finalizeAll() {
        for entry in statements.values { sqlite3_finalize(entry.statement) }
        statements.removeAll()
    }
}

/// Synced commits made on each database file by this process, counted by SQLite's WAL hook (a
/// commit that wrote to the log while `synchronous = FULL`; an unsynced transaction's commit, and
/// one that changed nothing, are not counted). How many a payment costs is a durability rule, so tests and benchmarks measure
/// it rather than assume it.
public enum SyncedCommits {
    private static let counts = Mutex<[String: Int]>([:])

    /// Synced commits on the database at `path` since this process started.
    public static func count(at path: String) -> Int { counts.withLock { $0[path] ?? 0 } }

    fileprivate static func record(_ path: String) { counts.withLock { $0[path, default: 0] += 1 } }
}

/// The WAL hook's context: which file, and whether the running transaction is unsynced.
private final class CommitCounter: Sendable {
    /// SQLite's default: the log is checkpointed once it holds this many pages.
    static let checkpointPages: Int32 = 1000

    let path: String
    let unsynced = Atomic<Bool>(false)

    init(path: String) { self.path = path }

    func committed() {
        if !unsynced.load(ordering: .relaxed) { SyncedCommits.record(path) }
    }
}
