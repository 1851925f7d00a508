import Foundation
import HorizonStores

/// Committed files of released schemas (a dump of a store as a release left it, with rows), for
/// the tests that open each with today's program. Made once, when a schema is released, with
/// `HORIZON_WRITE_SCHEMA_FIXTURES=1` (which writes only missing files); never edited after.
public enum SchemaFixture {
    public static var writing: Bool { ProcessInfo.processInfo.environment["HORIZON_WRITE_SCHEMA_FIXTURES"] == "1" }

    /// The file as SQL: its tables and indexes as SQLite keeps their text, then every row.
    public static func dump(_ database: SQLiteDatabase, to file: URL) throws {
        var lines = ["-- A released schema with its rows; never edited (see SchemaFixture)."]
        let objects = try database.query(
            """
            SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite!_%' ESCAPE '!'
            ORDER BY type = 'index', rowid
            """)
        for object in objects { lines.append(try object.text("sql") + ";") }
        for table in objects where try table.text("type") == "table" {
            let name = try table.text("name")
            for row in try database.query("SELECT * FROM \(name) ORDER BY rowid") {
                let values = row.cells.map(Self.literal)
                lines.append(
                    "INSERT INTO \(name)(\(row.columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")));"
                )
            }
        }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
    }

    public static func literal(_ value: DatabaseValue) -> String {
        switch value {
        case .integer(let integer): return String(integer)
        case .text(let text): return "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let bytes): return "X'" + bytes.map { String(format: "%02X", $0) }.joined() + "'"
        case .null: return "NULL"
        }
    }

    public static func load(_ fixture: URL, into path: String) throws {
        let sql = try String(contentsOf: fixture, encoding: .utf8)
        let database = try SQLiteDatabase(path: path)
        // Rows go in table by table, in the order the tables were made: a table rebuilt by a
        // later step may be referred to by one made before it.
        try database.execute("PRAGMA foreign_keys = OFF; BEGIN;\n" + sql + "\nCOMMIT; PRAGMA foreign_keys = ON;")
        database.close()
    }

    /// Every table's columns (name, type, NOT NULL, default, key) and every index's name, table
    /// and columns: what a program reading the file depends on.
    public static func tables(of database: SQLiteDatabase) throws -> [String] {
        var shape: [String] = []
        for object in try database.query(
            "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name")
        {
            let name = try object.text("name")
            if try object.text("type") == "table" {
                for column in try database.query("SELECT * FROM pragma_table_info(?) ORDER BY cid", [.text(name)]) {
                    shape.append(
                        "\(name).\(try column.text("name")) \(try column.text("type")) notnull=\(try column.integer("notnull")) "
                            + "default=\(try column.optionalText("dflt_value") ?? "-") pk=\(try column.integer("pk"))")
                }
            } else {
                let columns = try database.query("SELECT name FROM pragma_index_info(?) ORDER BY seqno", [.text(name)])
                    .map { try $0.optionalText("name") ?? "?" }
                shape.append("index \(name) on \(try object.text("tbl_name"))(\(columns.joined(separator: ", ")))")
            }
        }
        return shape
    }
}
