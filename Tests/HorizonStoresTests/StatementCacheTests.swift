import Foundation
import HorizonTestSupport
import Testing

@testable import HorizonStores

/// Prepared statements are kept and reused by SQL text (preparing cost more than running);
/// reuse must never
/// carry anything from one use to the next.
@Suite("SQLite statement cache", .offTheCooperativePool)
struct StatementCacheTests {
    func withDatabase<T>(_ body: (SQLiteDatabase) throws -> T) throws -> T {
        try withTemporaryDirectory { directory in
            let database = try SQLiteDatabase(path: directory.appendingPathComponent("cache.sqlite").path)
            try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, size INTEGER)")
            return try body(database)
        }
    }

    @Test func theSameStatementIsPreparedOnceAndGivesFreshResultsEachTime() throws {
        try withDatabase { database in
            for index in 0..<5 {
                try database.query(
                    "INSERT INTO items(name, size) VALUES (?, ?)", [.text("item-\(index)"), .integer(Int64(index))])
            }
            for index in 0..<5 {
                let rows = try database.query("SELECT name, size FROM items WHERE size = ?", [.integer(Int64(index))])
                #expect(try rows.map { try $0.value("name").text } == ["item-\(index)"])
            }
            #expect(database.cachedStatementCount == 2)
        }
    }

    @Test func bindingsDoNotLeakIntoTheNextUse() throws {
        try withDatabase { database in
            let first = try database.query("SELECT ?1 AS a, ?2 AS b", [.integer(1), .integer(2)])
            #expect(try first.first?.value("a") == .integer(1))
            #expect(try first.first?.value("b") == .integer(2))
            // Fewer values this time: the second parameter is NULL again, not the old 2.
            let second = try database.query("SELECT ?1 AS a, ?2 AS b", [.integer(3)])
            #expect(try second.first?.value("a") == .integer(3))
            #expect(try second.first?.value("b") == .null)
        }
    }

    @Test func aStatementThatFailedIsUsableAgain() throws {
        try withDatabase { database in
            let insert = "INSERT INTO items(name) VALUES (?)"
            try database.query(insert, [.text("same")])
            #expect(throws: DatabaseError.self) { try database.query(insert, [.text("same")]) }
            try database.query(insert, [.text("other")])
            #expect(try database.query("SELECT COUNT(*) AS n FROM items").first?.value("n") == .integer(2))
        }
    }

    @Test func statementsInsideTransactionsAreReusedAndARollbackLeavesThemUsable() throws {
        try withDatabase { database in
            let insert = "INSERT INTO items(name) VALUES (?)"
            #expect(throws: DatabaseError.self) {
                try database.transaction { (db) throws(DatabaseError) in
                    try db.query(insert, [.text("rolled back")])
                    try db.query(insert, [.text("rolled back")])
                }
            }
            try database.transaction { (db) throws(DatabaseError) in
                try db.query(insert, [.text("kept")])
            }
            try database.query(insert, [.text("outside")])
            #expect(
                try database.query("SELECT name FROM items ORDER BY id").map { try $0.value("name").text } == [
                    "kept", "outside",
                ])
        }
    }

    @Test func atMostCapacityStatementsAreKept() throws {
        try withDatabase { database in
            for index in 0..<(StatementCache.capacity + 10) {
                let rows = try database.query("SELECT \(index) AS n")
                #expect(try rows.first?.value("n") == .integer(Int64(index)))
            }
            #expect(database.cachedStatementCount == StatementCache.capacity)
            // Statements beyond the capacity still work, each in place of the least recently used.
            let beyond = StatementCache.capacity + 5
            #expect(try database.query("SELECT \(beyond) AS n").first?.value("n") == .integer(Int64(beyond)))
        }
    }

    /// Statements run once (a migration's, SQL built at run time) must not crowd out the ones in
    /// use: the terminal's ledger once prepared 11 statements afresh on every payment because
    /// the first 64 ever seen kept their places.
    @Test func theLeastRecentlyUsedStatementMakesRoomNotTheNewOne() throws {
        try withDatabase { database in
            let hot = "SELECT COUNT(*) AS n FROM items"
            for index in 0..<(StatementCache.capacity * 3) {
                try database.query("SELECT \(index) AS once")
                if index >= StatementCache.capacity, index % 8 == 0 {
                    #expect(try database.query(hot).first?.value("n") == .integer(0))
                }
            }
            #expect(database.cachedStatementCount == StatementCache.capacity)
            #expect(database.keepsStatement(for: hot), "the statement used all along was evicted")
            #expect(database.keepsStatement(for: "SELECT \(StatementCache.capacity * 3 - 1) AS once"))
            #expect(!database.keepsStatement(for: "SELECT 1 AS once"), "the oldest one-off statement is still kept")
        }
    }

    @Test func rowsReadByNameLikeADictionary() throws {
        try withDatabase { database in
            let rows = try database.query(
                "SELECT ?1 AS a, ?2 AS b, ?3 AS a UNION ALL SELECT 4, NULL, 6", [.integer(1), .text("two"), .blob([3])])
            #expect(rows.count == 2)
            #expect(rows[0].columns == ["a", "b", "a"])
            // A repeated name reads as its last column, as a dictionary of the row would.
            #expect(try rows[0].value("a") == .blob([3]))
            #expect(try rows[0].value("b") == .text("two"))
            #expect(throws: DatabaseError.self) { try rows[0].value("missing") }
            #expect(rows[0].values == ["a": .blob([3]), "b": .text("two")])
            #expect(try rows[1].value("a") == .integer(6))
            #expect(try rows[1].value("b") == .null)
        }
    }
}
