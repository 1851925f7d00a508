import Foundation
import Testing

@testable import HorizonLedger

/// The rule that lets a rolling upgrade run the previous program on a migrated schema: a step
/// marked `expand` may only add. Anything that drops, renames, rebuilds, tightens or rewrites
/// rows is a `contract` step, and the previous program refuses a schema that has one.
@Suite struct SchemaStepKindTests {
    @Test func everyExpandStepOnlyAdds() {
        var offending: [String] = []
        for migration in LedgerSchema.migrations where migration.kind == .expand {
            for dialect in [SQLDialect.sqlite, .postgres] {
                for statement in migration.statements(for: dialect)
                where !Self.onlyAdds(dialect.render(statement)) {
                    offending.append("\(migration.version) (\(dialect)): \(statement.prefix(80))")
                }
            }
        }
        #expect(
            offending.isEmpty,
            "mark these steps .contract, or split what they add from what they change:\n\(offending.joined(separator: "\n"))"
        )
    }

    @Test func theRuleTellsAddingFromChanging() {
        let adding = [
            "CREATE TABLE t(id TEXT PRIMARY KEY)", "CREATE INDEX t_a ON t(a)", "CREATE UNIQUE INDEX t_b ON t(b)",
            "ALTER TABLE t ADD COLUMN note TEXT", "ALTER TABLE t ADD COLUMN n INTEGER NOT NULL DEFAULT 0",
            "  alter table t\n   add column x BLOB REFERENCES u(id)",
        ]
        let changing = [
            "DROP TABLE t", "DROP INDEX t_a", "ALTER TABLE t RENAME TO u", "ALTER TABLE t RENAME COLUMN a TO b",
            "ALTER TABLE t DROP COLUMN a", "ALTER TABLE t ADD COLUMN n INTEGER NOT NULL",
            "ALTER TABLE t ALTER COLUMN a SET NOT NULL", "ALTER TABLE t DROP CONSTRAINT t_check",
            "UPDATE t SET a = 1", "DELETE FROM t", "INSERT INTO t SELECT * FROM u",
        ]
        #expect(adding.allSatisfy(Self.onlyAdds))
        #expect(changing.allSatisfy { !Self.onlyAdds($0) })
    }

    /// A statement the previous program's statements keep working with: a new table or index, or
    /// a new column that is nullable or has a default (its INSERTs do not name it).
    static func onlyAdds(_ statement: String) -> Bool {
        let words = statement.uppercased().split(whereSeparator: \.isWhitespace).map(String.init)
        if words.starts(with: ["CREATE", "TABLE"]) || words.starts(with: ["CREATE", "INDEX"])
            || words.starts(with: ["CREATE", "UNIQUE", "INDEX"])
        {
            return true
        }
        guard words.count > 5, words.starts(with: ["ALTER", "TABLE"]), words[3] == "ADD", words[4] == "COLUMN" else {
            return false
        }
        let column = words[5...].joined(separator: " ")
        return !column.contains("NOT NULL") || column.contains("DEFAULT")
    }
}
