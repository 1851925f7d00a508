import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonStores
import Testing

/// The server's tables that grow with every request stop growing: a year of request nonces and
/// of expired outbox messages is pruned to what is still in its window, and each pruning
/// statement finds its rows through an index (so pruning stays cheap however much has piled up).
@Suite("Server retention", .offTheCooperativePool)
struct ServerRetentionTests {
    static let now: Int64 = 1_830_000_000
    static let year: Int64 = 365 * 86_400

    @Test func aYearOfNoncesAndExpiredMessagesIsPrunedThroughIndexes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("retention-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("horizon.sqlite").path
        let ledger = try await Ledger.sqlite(path: path)

        // One row every 10 minutes for a year, of each.
        let database = try SQLiteDatabase(path: path)
        defer { database.close() }
        try database.execute(
            """
            WITH RECURSIVE tick(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM tick WHERE n < 52559)
            INSERT INTO request_nonces(public_key, nonce, seen_at)
                SELECT x'04', 'nonce-' || n, \(Self.now - Self.year) + n * 600 FROM tick;
            WITH RECURSIVE tick(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM tick WHERE n < 52559)
            INSERT INTO outbox(channel, recipient, subject, body, created_at, registration_id, expires_at)
                SELECT 'sms', '+4915112345678', 'code', 'your code', \(Self.now - Self.year) + n * 600, 'r_' || n,
                    \(Self.now - Self.year) + n * 600 + 900 FROM tick;
            """)
        func count(_ table: String) throws -> Int64 {
            try database.query("SELECT COUNT(*) AS n FROM \(table)").first?.integer("n") ?? -1
        }
        #expect(try count("request_nonces") == 52_560 && count("outbox") == 52_560)

        // The next signed request purges what is past the 5-minute window; the minute's outbox
        // purge what has expired.
        #expect(try await ledger.useNonce("fresh", for: walletKey(1), window: 300, at: Self.now))
        try await ledger.purgeExpiredOutbox(at: Self.now)
        #expect(try count("request_nonces") <= 2)
        #expect(try count("outbox") <= 2)
        // Both statements go straight to their rows through an index, not a scan of the table.
        for (sql, index) in [
            ("DELETE FROM request_nonces WHERE seen_at < 1", "request_nonces_seen"),
            ("DELETE FROM outbox WHERE expires_at IS NOT NULL AND expires_at <= 1", "outbox_expiry"),
        ] {
            let plan = try database.query("EXPLAIN QUERY PLAN " + sql).map { try $0.text("detail") }
            #expect(
                plan.contains { $0.contains("USING INDEX \(index)") || $0.contains("USING COVERING INDEX \(index)") },
                "\(plan)")
        }
        await ledger.close()
    }
}
