import Foundation
import HorizonStores
import HorizonTestSupport
import Testing

@Suite("SQLite database", .offTheCooperativePool)
struct SQLiteDatabaseTests {
    /// SQLite's primary result codes that these tests meet.
    enum Code {
        static let error: Int32 = 1
        static let cantOpen: Int32 = 14
        static let constraint: Int32 = 19
    }

    func withDatabase<T>(_ body: (SQLiteDatabase) throws -> T) throws -> T {
        try withTemporaryDirectory { directory in
            let database = try SQLiteDatabase(path: directory.appendingPathComponent("test.sqlite").path)
            try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, size INTEGER)")
            return try body(database)
        }
    }

    func names(_ database: SQLiteDatabase) throws -> [String] {
        try database.query("SELECT name FROM items ORDER BY id").compactMap { try $0.value("name").text }
    }

    // MARK: Closing

    /// Descriptors this process holds on files under `directory` (SQLite keeps the database,
    /// its write-ahead log and its shared-memory index open).
    func descriptors(under directory: URL) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count { entry in
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)")
            return target?.hasPrefix(directory.path) == true
        }
    }

    @Test func closingFreesTheFilesAtOnceAndLaterCallsSaySoWithoutTouchingTheHandle() throws {
        try withTemporaryDirectory { directory in
            let database = try SQLiteDatabase(path: directory.appendingPathComponent("test.sqlite").path)
            try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY)")
            try database.query("INSERT INTO items(id) VALUES (1)")
            #expect(try descriptors(under: directory) >= 1)
            database.close()
            // The object is still referenced here; its files are not.
            #expect(try descriptors(under: directory) == 0)
            for call in [
                { try database.execute("SELECT 1") }, { _ = try database.query("SELECT 1") },
                { _ = try database.insert("INSERT INTO items(id) VALUES (2)") },
                { try database.transaction { (db) throws(DatabaseError) in _ = try db.query("SELECT 1") } },
            ] as [() throws -> Void] {
                let error = databaseError(call)
                #expect(error?.message == "the database was closed")
            }
            database.close()  // twice is harmless
        }
    }

    // MARK: Transactions

    @Test func syncedCommitsAreCountedPerFileAndUnsyncedOnesAndReadsAreNot() throws {
        try withDatabase { database in
            let before = SyncedCommits.count(at: database.path)
            try database.transaction { (db) throws(DatabaseError) in
                _ = try db.query("INSERT INTO items(name) VALUES ('a')")
                _ = try db.query("INSERT INTO items(name) VALUES ('b')")
            }
            #expect(SyncedCommits.count(at: database.path) == before + 1, "one transaction, one synced commit")
            _ = try database.insert("INSERT INTO items(name) VALUES ('c')")
            #expect(SyncedCommits.count(at: database.path) == before + 2, "a statement on its own commits synced")
            try database.transaction(synced: false) { (db) throws(DatabaseError) in
                _ = try db.query("INSERT INTO items(name) VALUES ('d')")
            }
            _ = try database.query("SELECT COUNT(*) FROM items")
            try database.transaction { (db) throws(DatabaseError) in _ = try db.query("SELECT name FROM items") }
            #expect(SyncedCommits.count(at: database.path) == before + 2, "an unsynced commit or a read is not one")
            try database.transaction { (db) throws(DatabaseError) in
                _ = try db.query("INSERT INTO items(name) VALUES ('e')")
            }
            #expect(SyncedCommits.count(at: database.path) == before + 3, "synced again after an unsynced one")
            #expect(try names(database) == ["a", "b", "c", "d", "e"])
        }
    }

    @Test func theIntegrityCheckPassesASoundFileAndNamesWhatIsWrongInADamagedOne() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("damaged.sqlite").path
            let database = try SQLiteDatabase(path: path)
            try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            try database.execute("CREATE INDEX items_by_name ON items(name)")
            for index in 0..<300 {
                _ = try database.insert("INSERT INTO items(name) VALUES (?)", [.text("item \(index)")])
            }
            #expect(try database.integrityProblem() == nil)
            let root =
                try database.query("SELECT rootpage FROM sqlite_master WHERE name = 'items_by_name'")
                .first?.integer("rootpage") ?? 0
            let pageSize = try database.query("PRAGMA page_size").first?.integer("page_size") ?? 0
            database.close()

            // The index's root page overwritten, as a bad disk or a stray write would.
            let handle = try #require(FileHandle(forUpdatingAtPath: path))
            try handle.seek(toOffset: UInt64((root - 1) * pageSize))
            try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(pageSize)))
            try handle.close()

            let reopened = try SQLiteDatabase(path: path)
            defer { reopened.close() }
            let problem = try #require(try reopened.integrityProblem())
            #expect(!problem.isEmpty && problem != "ok", "\(problem)")
        }
    }

    @Test func aTransactionCommitsAllOfItsWritesAndReturnsItsValue() throws {
        try withDatabase { database in
            let count = try database.transaction { (db) throws(DatabaseError) -> Int in
                try db.query("INSERT INTO items(name) VALUES (?)", [.text("a")])
                try db.query("INSERT INTO items(name) VALUES (?), (?)", [.text("b"), .text("c")])
                #expect(db.changes == 2)
                return try db.query("SELECT COUNT(*) AS n FROM items").first?.value("n").integer.map(Int.init) ?? -1
            }
            #expect(count == 3)
            #expect(try names(database) == ["a", "b", "c"])
        }
    }

    @Test func aTransactionThatThrowsLeavesNothingWritten() throws {
        try withDatabase { database in
            try database.query("INSERT INTO items(name) VALUES ('before')")
            #expect(throws: DatabaseError.self) {
                try database.transaction { (db) throws(DatabaseError) in
                    try db.query("INSERT INTO items(name) VALUES ('one')")
                    try db.query("UPDATE items SET size = 5")
                    try db.query("DELETE FROM items WHERE name = 'before'")
                    try db.query("SELECT * FROM no_such_table")
                    Issue.record("the statement above must throw")
                }
            }
            #expect(try names(database) == ["before"])
            #expect(try database.query("SELECT size FROM items").first?.value("size") == .null)
            // The connection is usable again: the failed transaction was rolled back, not left open.
            try database.transaction { (db) throws(DatabaseError) in
                _ = try db.query("INSERT INTO items(name) VALUES ('after')")
            }
            #expect(try names(database) == ["before", "after"])
        }
    }

    /// A migration script with its own BEGIN … COMMIT that fails half-way: nothing of it stays,
    /// and the connection takes the next transaction (it used to stay inside the script's).
    @Test func aScriptThatFailsInsideItsOwnTransactionIsRolledBack() throws {
        try withDatabase { database in
            try database.query("INSERT INTO items(name) VALUES ('before')")
            let error = databaseError {
                try database.execute(
                    """
                    BEGIN IMMEDIATE;
                    CREATE TABLE items_v2(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
                    INSERT INTO items_v2(id, name) SELECT id, name FROM items;
                    DROP TABLE items;
                    INSERT INTO no_such_table VALUES (1);
                    COMMIT;
                    """)
            }
            #expect(error?.code == Code.error)
            #expect(error?.message == "no such table: no_such_table")
            #expect(try names(database) == ["before"])
            #expect(try database.query("SELECT name FROM sqlite_master WHERE name = 'items_v2'").isEmpty)
            try database.transaction { (db) throws(DatabaseError) in
                _ = try db.query("INSERT INTO items(name) VALUES ('after')")
            }
            #expect(try names(database) == ["before", "after"])
        }
    }

    @Test func aConstraintViolationInsideATransactionRollsBackTheEarlierWrites() throws {
        try withDatabase { database in
            let error = databaseError {
                try database.transaction { (db) throws(DatabaseError) in
                    try db.query("INSERT INTO items(name) VALUES ('x')")
                    try db.query("INSERT INTO items(name) VALUES ('y')")
                    try db.query("INSERT INTO items(name) VALUES ('x')")
                }
            }
            #expect(error?.code == Code.constraint)
            #expect(error?.message == "UNIQUE constraint failed: items.name")
            let left = try names(database)
            #expect(left.isEmpty)
        }
    }

    // MARK: Errors

    @Test func constraintViolationsSurfaceWithSQLitesCode() throws {
        try withDatabase { database in
            try database.query("INSERT INTO items(id, name) VALUES (1, 'a')")
            let cases: [(String, [DatabaseValue], String)] = [
                ("INSERT INTO items(name) VALUES (?)", [.text("a")], "UNIQUE constraint failed: items.name"),
                (
                    "INSERT INTO items(id, name) VALUES (?, ?)", [.integer(1), .text("b")],
                    "UNIQUE constraint failed: items.id"
                ),
                ("INSERT INTO items(name) VALUES (?)", [.null], "NOT NULL constraint failed: items.name"),
            ]
            for (sql, parameters, message) in cases {
                expectDatabaseError(code: Code.constraint, message: message, context: sql) {
                    try database.query(sql, parameters)
                }
            }
            #expect(try names(database) == ["a"])
            // The context is the statement's first 60 characters.
            let long = "INSERT INTO items(name) VALUES ('a') -- " + String(repeating: "x", count: 100)
            expectDatabaseError(
                code: Code.constraint, message: "UNIQUE constraint failed: items.name", context: String(long.prefix(60))
            ) {
                try database.execute(long)
            }
        }
    }

    @Test func badSQLAndUnopenablePathsAreErrorsNotCrashes() throws {
        try withDatabase { database in
            expectDatabaseError(code: Code.error, message: "near \"NOT\": syntax error", context: "NOT SQL") {
                try database.execute("NOT SQL")
            }
            expectDatabaseError(code: Code.error, message: "no such table: nowhere", context: "SELECT * FROM nowhere") {
                try database.query("SELECT * FROM nowhere")
            }
        }
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("missing/dir/db.sqlite").path
            expectDatabaseError(
                code: Code.cantOpen, message: "unable to open database file", context: "opening \(path)"
            ) {
                _ = try SQLiteDatabase(path: path)
            }
        }
    }

    // MARK: Values

    @Test func integersTextBlobsAndNullRoundTrip() throws {
        try withDatabase { database in
            try database.execute("CREATE TABLE vals(k INTEGER PRIMARY KEY, i INTEGER, t TEXT, b BLOB, n BLOB)")
            let rows: [(Int64, String, [UInt8])] = [
                (0, "", [0x00]),
                (-1, "plain", [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x00]),
                (.max, "Zoë ☕ 😀 Ω", Array(0...255)),
                (.min, String(repeating: "long ", count: 2000), [UInt8](repeating: 0xAB, count: 100_000)),
                (1 << 53 + 1, "line\nbreak\ttab 'quote' \"double\"", [0xFF]),
            ]
            for (index, row) in rows.enumerated() {
                try database.query(
                    "INSERT INTO vals(k, i, t, b, n) VALUES (?, ?, ?, ?, ?)",
                    [.integer(Int64(index)), .integer(row.0), .text(row.1), .blob(row.2), .null])
            }
            let read = try database.query("SELECT i, t, b, n FROM vals ORDER BY k")
            #expect(read.count == rows.count)
            for (stored, row) in zip(read, rows) {
                #expect(try stored.value("i") == .integer(row.0))
                #expect(try stored.value("t") == .text(row.1))
                #expect(try stored.value("b") == .blob(row.2))
                #expect(try stored.value("n") == .null)
                #expect(try stored.value("i").integer == row.0)
                #expect(try stored.value("t").text == row.1)
                #expect(try stored.value("b").blob == row.2)
                #expect(
                    try stored.optionalInteger("n") == nil && stored.optionalText("n") == nil
                        && stored.optionalBytes("n") == nil)
                // A column the query did not select reads as null.
                #expect(throws: DatabaseError.self) { try stored.value("missing") }
            }
            // Types are SQLite's own: typeof() agrees with what was bound.
            let types = try database.query(
                "SELECT typeof(i) AS i, typeof(t) AS t, typeof(b) AS b, typeof(n) AS n FROM vals")
            #expect(
                try types.allSatisfy {
                    try $0.text("i") == "integer" && $0.text("t") == "text" && $0.text("b") == "blob"
                        && $0.text("n") == "null"
                })
        }
    }

    @Test func anEmptyBlobStaysABlob() throws {
        try withDatabase { database in
            try database.execute("CREATE TABLE vals(b BLOB)")
            try database.query("INSERT INTO vals(b) VALUES (?)", [.blob([])])
            let row = try database.query("SELECT b, typeof(b) AS type FROM vals").first
            #expect(try row?.value("b") == .blob([]))
            #expect(try row?.value("type") == .text("blob"))
        }
    }

    @Test func textWithAnEmbeddedNULRoundTrips() throws {
        try withDatabase { database in
            try database.execute("CREATE TABLE vals(t TEXT)")
            let text = "before\u{0}after"
            try database.query("INSERT INTO vals(t) VALUES (?)", [.text(text)])
            let row = try database.query("SELECT t, length(CAST(t AS BLOB)) AS bytes FROM vals").first
            #expect(try row?.value("t") == .text(text))
            #expect(try row?.value("bytes") == .integer(12))
        }
    }

    @Test func anInMemoryDatabaseWorksWithoutAFile() throws {
        let database = try SQLiteDatabase(path: ":memory:")
        try database.execute("CREATE TABLE t(x INTEGER)")
        try database.query("INSERT INTO t(x) VALUES (?)", [.integer(42)])
        #expect(try database.query("SELECT x FROM t").map { try $0.value("x") } == [.integer(42)])
        // WAL needs a file; an in-memory database keeps its own journal mode.
        #expect(try database.query("PRAGMA journal_mode").map { try $0.value("journal_mode") } == [.text("memory")])
    }
}
