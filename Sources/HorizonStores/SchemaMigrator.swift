import Foundation

/// One step of a store's schema history. Steps are never edited once released: a change is a new
/// step, so that every older file reaches the current schema by the same path.
public struct SchemaStep: Sendable {
    public let version: Int
    public let name: String
    /// SQL run inside the step's transaction (several statements allowed).
    public let sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Brings a SQLite store up to its current schema, the same way for every store on a device (the
/// terminal journal, the wallet store): `schema_migrations` records each applied step, as in the
/// ledger's database; every pending step runs in its own transaction with its record, so a crash
/// leaves the file at one step or the next, never between. A file at an older version is migrated,
/// never refused; one at a newer version than this program knows is refused, because this
/// program would not know what its newer tables mean.
public struct SchemaMigrator: Sendable {
    /// What the store is called in errors ("terminal journal").
    public let store: String
    public let steps: [SchemaStep]
    /// The version of a file written before its store recorded steps in `schema_migrations`, or
    /// nil for a new file. Asked once, the first time such a file is opened.
    public let versionBeforeRecording: @Sendable (SQLiteDatabase) throws(DatabaseError) -> Int?

    public init(
        store: String, steps: [SchemaStep],
        versionBeforeRecording: @escaping @Sendable (SQLiteDatabase) throws(DatabaseError) -> Int? = { _ in nil }
    ) {
        self.store = store
        self.steps = steps
        self.versionBeforeRecording = versionBeforeRecording
    }

    /// The version this program reads and writes.
    public var currentVersion: Int { steps.last?.version ?? 0 }

    /// The version the file is at now (0 for a new one).
    public func version(of database: SQLiteDatabase) throws(DatabaseError) -> Int {
        guard try Self.hasTable("schema_migrations", in: database) else { return 0 }
        return try database.query("SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations")
            .first.map { (row) throws(DatabaseError) in Int(try row.integer("version")) } ?? 0
    }

    /// Migrates `database` to `target` (the current version unless told).
    public func migrate(
        _ database: SQLiteDatabase, to target: Int? = nil, at time: Int64 = Int64(Date().timeIntervalSince1970)
    )
        throws(DatabaseError)
    {
        let target = target ?? currentVersion
        if try !Self.hasTable("schema_migrations", in: database) {
            let before = try versionBeforeRecording(database)
            try database.execute(
                """
                BEGIN IMMEDIATE;
                CREATE TABLE IF NOT EXISTS schema_migrations(
                    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
                \(try recordSQL(through: before ?? 0, at: time))
                COMMIT;
                """)
        }
        let version = try version(of: database)
        guard version <= currentVersion else {
            throw DatabaseError(
                code: -1,
                message: "this \(store) has schema version \(version); this program reads up to \(currentVersion): "
                    + "use the newer program that wrote it",
                context: "opening \(database.path)")
        }
        for step in steps where step.version > version && step.version <= target {
            try database.execute(
                """
                BEGIN IMMEDIATE;
                \(step.sql)
                \(Self.record(step, at: time))
                COMMIT;
                """)
        }
    }

    /// Records the steps a file from before recording already has, without running them.
    private func recordSQL(through version: Int, at time: Int64) throws(DatabaseError) -> String {
        guard version <= currentVersion else {
            throw DatabaseError(
                code: -1, message: "this \(store) has schema \(version); this program reads up to \(currentVersion)",
                context: "opening a \(store)")
        }
        return steps.filter { $0.version <= version }.map { Self.record($0, at: time) }.joined(separator: "\n")
    }

    private static func record(_ step: SchemaStep, at time: Int64) -> String {
        let name = step.name.replacingOccurrences(of: "'", with: "''")
        return "INSERT INTO schema_migrations(version, name, applied_at) VALUES (\(step.version), '\(name)', \(time));"
    }

    /// Whether the file has a table of that name.
    public static func hasTable(_ name: String, in database: SQLiteDatabase) throws(DatabaseError) -> Bool {
        try !database.query("SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(name)])
            .isEmpty
    }
}
