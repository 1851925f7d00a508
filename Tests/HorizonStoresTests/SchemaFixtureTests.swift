import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonTestSupport
import Testing

@testable import HorizonStores

/// Every released schema of the device stores, as committed files (`Fixtures/*.sql`, a dump of a
/// file as that release left it, with rows), opened by today's program: migrated to the current
/// schema, every row still read back the same, and the tables exactly a new file's.
///
/// The fixtures are made once, when a schema is released, by
/// `HORIZON_WRITE_SCHEMA_FIXTURES=1 swift test --filter SchemaFixtureTests`; that writes only
/// the files that are missing, never one that exists: a released file is never edited.
@Suite("Schema fixtures of the device stores", .offTheCooperativePool)
struct SchemaFixtureTests {
    static let fixtures = RepositoryFile.root.appendingPathComponent("Tests/HorizonStoresTests/Fixtures")
    static var writing: Bool { SchemaFixture.writing }

    // MARK: The terminal journal

    /// Each released schema as a journal migrated up to it; schemas 2 and 3 also as those
    /// releases created a new journal (`-new`: the same columns in another order).
    static let journalFixtures: [(file: String, version: Int)] =
        (1...SQLiteTerminalJournal.schemaVersion).map { ("journal-schema-\($0)", $0) }
        + [("journal-schema-2-new", 2), ("journal-schema-3-new", 3)]

    @Test(arguments: journalFixtures) func aReleasedJournalIsMigratedAndReadsTheSame(
        fixtureName: String, version: Int
    ) throws {
        let fixture = Self.fixtures.appendingPathComponent(fixtureName + ".sql")
        if Self.writing, !fixtureName.hasSuffix("-new"), !FileManager.default.fileExists(atPath: fixture.path) {
            try Self.writeJournalFixture(version: version, to: fixture)
        }
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("journal.sqlite").path
            try SchemaFixture.load(fixture, into: path)
            let journal = try SQLiteTerminalJournal(path: path)
            #expect(
                try SQLiteTerminalJournal.schema.version(of: journal.database) == SQLiteTerminalJournal.schemaVersion)
            #expect(
                try journal.database.query("SELECT value FROM meta WHERE key = 'schema_version'").first?.text("value")
                    == String(SQLiteTerminalJournal.schemaVersion), "older programs still read the version in meta")
            #expect(
                try SchemaFixture.tables(of: journal.database)
                    == SchemaFixture.tables(of: SQLiteTerminalJournal(path: ":memory:").database))

            // The rows every release wrote: an answered and acknowledged payment, an unsettled
            // one, and a confirmed redemption.
            let signed: [UInt8] = version >= 2 ? [1, 2, 3] : []
            let done = try #require(try journal.record(for: paymentID(1)))
            #expect(done.request == .payment(request(1, amount: euros(500), signedConfirmation: signed)))
            #expect(done.step == .acknowledged)
            #expect(done.answer == Self.answer)
            #expect(try journal.unsettled().map(\.request.id) == [paymentID(2), paymentID(3)])
            #expect(try journal.record(for: paymentID(3))?.request == .redemption(Self.redemption(signed: signed)))
            #expect(try journal.unreadable().isEmpty)
            #expect(try journal.history().count == 7)
            if version >= 3 {
                #expect(try journal.offlinePayments().map(\.record) == [Self.offlineRecord])
            } else {
                #expect(try journal.offlinePayments().isEmpty)
            }
            // And it goes on being written.
            try journal.write(.result(paymentID(2), answer: Self.answer), at: 20)
            #expect(try journal.unsettled().map(\.request.id) == [paymentID(3)])
        }
    }

    /// A journal a newer program migrated further is refused, saying which program to use.
    @Test func aJournalFromANewerProgramIsRefused() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("journal.sqlite").path
            do {
                let journal = try SQLiteTerminalJournal(path: path)
                try journal.database.query(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (99, 'from the future', 1)")
            }
            let error = databaseError { _ = try SQLiteTerminalJournal(path: path) }
            #expect(
                error?.message
                    == "this terminal journal has schema version 99; this program reads up to 5: use the newer program that wrote it"
            )
        }
    }

    /// A crash between two steps leaves the file at one of them, and the next open goes on.
    @Test func aStepThatFailsLeavesTheFileAtThePreviousOne() throws {
        let database = try SQLiteDatabase(path: ":memory:")
        let broken = SchemaMigrator(
            store: "test store",
            steps: [
                SchemaStep(version: 1, name: "one", sql: "CREATE TABLE one(a INTEGER);"),
                SchemaStep(
                    version: 2, name: "two", sql: "CREATE TABLE two(a INTEGER); INSERT INTO nowhere VALUES (1);"),
            ])
        #expect(throws: DatabaseError.self) { try broken.migrate(database) }
        #expect(try broken.version(of: database) == 1)
        #expect(try !SchemaMigrator.hasTable("two", in: database))
        let fixed = SchemaMigrator(
            store: "test store",
            steps: [broken.steps[0], SchemaStep(version: 2, name: "two", sql: "CREATE TABLE two(a INTEGER);")])
        try fixed.migrate(database)
        #expect(try fixed.version(of: database) == 2)
        #expect(try SchemaMigrator.hasTable("two", in: database))
    }

    // MARK: The wallet store

    @Test(arguments: [1, 2]) func aReleasedWalletStoreIsMigratedAndReadsTheSame(version: Int) throws {
        let fixture = Self.fixtures.appendingPathComponent("wallet-store-schema-\(version).sql")
        if Self.writing, !FileManager.default.fileExists(atPath: fixture.path) {
            try Self.writeWalletFixture(version: version, to: fixture)
        }
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            try SchemaFixture.load(fixture, into: path)
            let store = try WalletStore(path: path)
            #expect(try WalletStore.schema.version(of: store.database) == WalletStore.schema.currentVersion)
            #expect(
                try SchemaFixture.tables(of: store.database)
                    == SchemaFixture.tables(of: WalletStore(path: ":memory:").database))
            var expected = [Self.receipt(2), Self.receipt(1)]
            if version >= 2 { expected[0].acceptedOffline = true }
            #expect(try store.receipts() == expected)
            #expect(try store.pending() == [Self.pendingPayment])
        }
    }

    /// A row that is not the table's shape is an error naming the column, never a zero.
    @Test func aDamagedRowIsAnErrorNotAZero() throws {
        let store = try WalletStore(path: ":memory:")
        try store.saveReceipt(Self.receipt(1))
        try store.database.execute("UPDATE receipts SET amount = 'lots'")
        let error = databaseError { _ = try store.receipts() }
        #expect(error?.message == "column amount: expected an integer")
        let row = DatabaseRow(columns: ["a"], cells: [.null])
        #expect(throws: DatabaseError.self) { try row.integer("missing") }
        #expect(throws: DatabaseError.self) { try row.integer("a") }
        #expect(try row.optionalInteger("a") == nil)
    }

    // MARK: Rows the fixtures hold

    static let answer = SessionMessage.error(
        ErrorMessage(code: .insufficientFunds, message: "stand-in answer", paymentID: paymentID(1)))

    static func redemption(signed: [UInt8]) -> RedemptionRequest {
        RedemptionRequest(
            redemptionID: paymentID(3), sessionID: session, walletKey: walletKey(2), terminalKeyID: terminalKey,
            transactionType: .bonusRedemption, item: "Free coffee", quantity: 40, value: euros(320),
            contentDigest: digest(3), signedRedemption: signed)
    }

    static let offlineRecord = OfflinePaymentRecord(
        paymentID: paymentID(4), sessionID: session, walletKey: walletKey(1), terminalKeyID: terminalKey,
        amount: euros(450), tip: euros(50), registerUser: "anna", signedConfirmation: [4, 5, 6],
        dailyToken: [7, 8, 9], tokenID: [10, 11], acceptedAt: 9)

    static func receipt(_ number: Int) -> StoredReceipt {
        StoredReceipt(
            paymentID: paymentID(number).description, sessionID: "\(number)", merchantName: "Corner Café",
            amountMinorUnits: 100 * Int64(number), tipMinorUnits: 10, currency: "EUR", reference: UInt64(number),
            settledAt: 1_000 + Int64(number), bonusPointsEarned: 1, bonusPointsBalance: Int64(number))
    }

    static let pendingPayment = StoredPendingPayment(
        paymentID: paymentID(5).bytes, request: [1, 2, 3], terminalKeyID: terminalKey.bytes,
        terminalAddress: "AA:BB:CC:DD:EE:FF", merchantName: "Corner Café", createdAt: 1_005)

    // MARK: Making fixtures (once per released schema)

    /// The journal as the release of `version` left it: its steps, and no `schema_migrations`
    /// (releases before it recorded their version only in `meta`).
    static func writeJournalFixture(version: Int, to file: URL) throws {
        let database = try SQLiteDatabase(path: ":memory:")
        try SQLiteTerminalJournal.schema.migrate(database, to: version)
        try database.execute("DROP TABLE schema_migrations")
        let signed: DatabaseValue = version >= 2 ? .blob([1, 2, 3]) : .null
        let signedColumn = version >= 2 ? ", signed_request" : ""
        let signedValue = version >= 2 ? ", ?" : ""
        func step(_ name: String, _ id: Int?, wallet: Int = 1, answer: SessionMessage? = nil, at time: Int64) throws {
            try database.query(
                """
                INSERT INTO steps(step, session_id, request_id, transaction_type, wallet_key, answer, recorded_at)
                VALUES (?, ?, ?, 1, ?, ?, ?)
                """,
                [
                    .text(name), .integer(Int64(bitPattern: session.rawValue)),
                    id.map { .blob(paymentID($0).bytes) } ?? .null,
                    .blob(walletKey(wallet).bytes), answer.map { .blob($0.encoded()) } ?? .null, .integer(time),
                ])
        }
        func confirmed(
            _ id: Int, type: TransactionType, wallet: Int, amount: Int64, item: String, quantity: Int64, at time: Int64
        )
            throws
        {
            try database.query(
                """
                INSERT INTO steps(step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount,
                    tip, currency, register_user, item, quantity, content_digest\(signedColumn), recorded_at)
                VALUES ('confirmed', ?, ?, ?, ?, ?, ?, 0, 'EUR', ?, ?, ?, ?\(signedValue), ?)
                """,
                [
                    .integer(Int64(bitPattern: session.rawValue)), .blob(paymentID(id).bytes),
                    .integer(Int64(type.rawValue)), .blob(walletKey(wallet).bytes), .blob(terminalKey.bytes),
                    .integer(amount), .text(type == .payment ? "anna" : ""), .text(item), .integer(quantity),
                    .blob(digest(id)),
                ] + (version >= 2 ? [signed] : []) + [.integer(time)])
        }
        try step("offered", nil, at: 1)
        try confirmed(1, type: .payment, wallet: 1, amount: 500, item: "", quantity: 0, at: 2)
        try step("submitted", 1, at: 3)
        try step("result", 1, answer: answer, at: 4)
        try step("acknowledged", 1, at: 5)
        try confirmed(2, type: .payment, wallet: 1, amount: 700, item: "", quantity: 0, at: 6)
        try confirmed(3, type: .bonusRedemption, wallet: 2, amount: 320, item: "Free coffee", quantity: 40, at: 7)
        if version >= 3 {
            let record = offlineRecord
            try database.query(
                """
                INSERT INTO offline_payments(payment_id, session_id, wallet_key, terminal_key_id, amount, tip, currency,
                    register_user, signed_confirmation, daily_token, token_id, accepted_at, state, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, 'EUR', ?, ?, ?, ?, ?, 'stored', ?)
                """,
                [
                    .blob(record.paymentID.bytes), .integer(Int64(bitPattern: record.sessionID.rawValue)),
                    .blob(record.walletKey.bytes), .blob(record.terminalKeyID.bytes),
                    .integer(record.amount.minorUnits), .integer(record.tip.minorUnits), .text(record.registerUser),
                    .blob(record.signedConfirmation), .blob(record.dailyToken), .blob(record.tokenID),
                    .integer(record.acceptedAt), .integer(record.acceptedAt),
                ])
        }
        try SchemaFixture.dump(database, to: file)
    }

    static func writeWalletFixture(version: Int, to file: URL) throws {
        let database = try SQLiteDatabase(path: ":memory:")
        try WalletStore.schema.migrate(database, to: version)
        try database.execute("DROP TABLE schema_migrations")
        for number in [1, 2] {
            let receipt = receipt(number)
            let offline: [DatabaseValue] = version >= 2 ? [.integer(number == 2 ? 1 : 0)] : []
            try database.query(
                """
                INSERT INTO receipts(payment_id, session_id, merchant, amount, tip, currency, reference, settled_at,
                    bonus_earned, bonus_balance\(version >= 2 ? ", accepted_offline" : ""))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?\(version >= 2 ? ", ?" : ""))
                """,
                [
                    .text(receipt.paymentID), .text(receipt.sessionID), .text(receipt.merchantName),
                    .integer(receipt.amountMinorUnits), .integer(receipt.tipMinorUnits), .text(receipt.currency),
                    .integer(Int64(receipt.reference)), .integer(receipt.settledAt),
                    .integer(receipt.bonusPointsEarned), .integer(receipt.bonusPointsBalance),
                ] + offline)
        }
        let pending = pendingPayment
        try database.query(
            """
            INSERT INTO pending(payment_id, request, terminal_key_id, terminal_address, merchant, created_at)
            VALUES (?, ?, ?, ?, ?, ?)
            """,
            [
                .blob(pending.paymentID), .blob(pending.request), .blob(pending.terminalKeyID),
                .text(pending.terminalAddress), .text(pending.merchantName), .integer(pending.createdAt),
            ])
        try SchemaFixture.dump(database, to: file)
    }
}
