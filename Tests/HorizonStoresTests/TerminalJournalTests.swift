import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonTestSupport
import Testing

@testable import HorizonStores

/// The terminal journal (`docs/protocol.md`): every step on disk when `write` returns, steps only
/// forward, the answer kept for retries, and what recovery must settle listed after a reopen.
@Suite("Terminal journal", .offTheCooperativePool)
struct TerminalJournalTests {
    func journalPath(in directory: URL) -> String { directory.appendingPathComponent("journal.sqlite").path }

    func answer(_ id: Int) -> SessionMessage {
        .error(ErrorMessage(code: .insufficientFunds, message: "stand-in answer \(id)", paymentID: paymentID(id)))
    }

    @Test func eachStepIsOnDiskForTheNextProgramAndOnlyUnansweredRequestsAreUnsettled() throws {
        try withTemporaryDirectory { directory in
            do {
                let journal = try SQLiteTerminalJournal(path: journalPath(in: directory))
                try journal.write(
                    .offered(sessionID: session, transactionType: .payment, walletKey: walletKey(1)), at: 1)
                try journal.write(.confirmed(.payment(request(1, amount: euros(500)))), at: 2)
                try journal.write(.confirmed(.payment(request(2, amount: euros(700), tip: euros(100)))), at: 3)
                try journal.write(.submitted(paymentID(2)), at: 4)
                try journal.write(.confirmed(.payment(request(3, amount: euros(900)))), at: 5)
                try journal.write(.submitted(paymentID(3)), at: 6)
                try journal.write(.result(paymentID(3), answer: answer(3)), at: 7)
                try journal.write(.acknowledged(paymentID(3), by: walletKey(1)), at: 8)
            }
            // A new program over the same file, as after a crash.
            let journal = try SQLiteTerminalJournal(path: journalPath(in: directory))
            let unsettled = try journal.unsettled()
            #expect(unsettled.map(\.request.id) == [paymentID(1), paymentID(2)])
            #expect(unsettled.map(\.step) == [.confirmed, .submitted])
            #expect(unsettled.last?.request == .payment(request(2, amount: euros(700), tip: euros(100))))
            let done = try #require(try journal.record(for: paymentID(3)))
            #expect(done.step == .acknowledged)
            #expect(done.answer == answer(3))
            #expect(try journal.record(for: paymentID(4)) == nil)
            let history = try journal.history()
            #expect(
                history.map(\.step) == [
                    .offered, .confirmed, .confirmed, .submitted, .confirmed, .submitted, .result, .acknowledged,
                ])
        }
    }

    /// Which steps are synced (docs/guarantees.md, "Synced writes per payment"): the confirmed
    /// request with its submission, and a refusal, which no processor can give again by payment
    /// id (it executed nothing); not the offer, nor the acknowledgement. (A receipt's result is
    /// not synced either: `JournalTests.aPaymentMakesOneSyncedCommitInTheJournalAndOneInTheLedger`.)
    @Test func theConfirmationAndARefusalAreSyncedAndTheOtherStepsAreNot() throws {
        try withTemporaryDirectory { directory in
            let path = journalPath(in: directory)
            let journal = try SQLiteTerminalJournal(path: path)
            var counted = SyncedCommits.count(at: path)
            func syncedCommits() -> Int {
                defer { counted = SyncedCommits.count(at: path) }
                return SyncedCommits.count(at: path) - counted
            }
            try journal.write(.offered(sessionID: session, transactionType: .payment, walletKey: walletKey(1)), at: 1)
            #expect(syncedCommits() == 0, "offered")
            try journal.write([.confirmed(.payment(request(1, amount: euros(500)))), .submitted(paymentID(1))], at: 2)
            #expect(syncedCommits() == 1, "confirmed with submitted")
            try journal.write(.result(paymentID(1), answer: answer(1)), at: 3)
            #expect(syncedCommits() == 1, "a refusal")
            try journal.write(.acknowledged(paymentID(1), by: walletKey(1)), at: 4)
            #expect(syncedCommits() == 0, "acknowledged")
            #expect(try journal.record(for: paymentID(1))?.step == .acknowledged)
        }
    }

    @Test func aRedemptionComesBackWithItsItemQuantityAndValue() throws {
        let journal = try SQLiteTerminalJournal(path: ":memory:")
        let redemption = RedemptionRequest(
            redemptionID: paymentID(9), sessionID: session, walletKey: walletKey(2), terminalKeyID: terminalKey,
            transactionType: .bonusRedemption, item: "Free coffee", quantity: 40, value: euros(320),
            contentDigest: digest(9))
        try journal.write(.confirmed(.redemption(redemption)), at: 1)
        #expect(try journal.record(for: paymentID(9))?.request == .redemption(redemption))
    }

    @Test func stepsOnlyMoveForwardAndARetriedStepChangesNothing() throws {
        let journal = try SQLiteTerminalJournal(path: ":memory:")
        let confirmed = JournalRequest.payment(request(1, amount: euros(500)))
        // Nothing before the confirmation.
        #expect(throws: JournalError.self) { try journal.write(.submitted(paymentID(1)), at: 1) }
        #expect(throws: JournalError.self) { try journal.write(.result(paymentID(1), answer: answer(1)), at: 1) }
        try journal.write(.confirmed(confirmed), at: 2)
        // No acknowledgement without a result.
        #expect(throws: JournalError.self) { try journal.write(.acknowledged(paymentID(1), by: walletKey(1)), at: 3) }
        try journal.write(.result(paymentID(1), answer: answer(1)), at: 4)
        // Only the wallet that made the request acknowledges it.
        #expect(throws: JournalError.self) { try journal.write(.acknowledged(paymentID(1), by: walletKey(2)), at: 4) }
        // A late `submitted` or a second result does not move it back or replace the answer.
        try journal.write(.submitted(paymentID(1)), at: 5)
        try journal.write(.result(paymentID(1), answer: answer(2)), at: 6)
        try journal.write(.confirmed(confirmed), at: 7)
        let record = try #require(try journal.record(for: paymentID(1)))
        #expect(record.step == .result)
        #expect(record.answer == answer(1))
        #expect(try journal.history().map(\.step) == [.confirmed, .result])
    }

    @Test func theSameIDWithOtherTermsIsRefused() throws {
        let journal = try SQLiteTerminalJournal(path: ":memory:")
        try journal.write(.confirmed(.payment(request(1, amount: euros(500)))), at: 1)
        #expect(throws: JournalError.self) {
            try journal.write(.confirmed(.payment(request(1, amount: euros(5_000)))), at: 2)
        }
        #expect(try journal.record(for: paymentID(1))?.request == .payment(request(1, amount: euros(500))))
    }

    /// Schema 2 keeps the wallet's signed Confirm (for the server to verify after a restart). A
    /// journal written by schema 1 is migrated on open: its requests stay readable, without one.
    @Test func aSchemaOneJournalIsMigratedAndKeepsItsRequests() throws {
        try withTemporaryDirectory { directory in
            let path = journalPath(in: directory)
            do {
                let database = try SQLiteDatabase(path: path)
                try database.execute(Self.schemaOne)
                try database.query(
                    """
                    INSERT INTO steps(step, session_id, request_id, transaction_type, wallet_key, terminal_key_id,
                        amount, tip, currency, register_user, item, quantity, content_digest, recorded_at)
                    VALUES ('confirmed', ?, ?, 1, ?, ?, 500, 0, 'EUR', 'anna', '', 0, ?, 2)
                    """,
                    [
                        .integer(Int64(bitPattern: session.rawValue)), .blob(paymentID(1).bytes),
                        .blob(walletKey(1).bytes), .blob(terminalKey.bytes), .blob(digest(1)),
                    ])
            }
            let journal = try SQLiteTerminalJournal(path: path)
            #expect(
                try journal.database.query("SELECT value FROM meta WHERE key = 'schema_version'").first?.text("value")
                    == String(SQLiteTerminalJournal.schemaVersion))
            #expect(try journal.offlinePayments().isEmpty, "schema 3's offline payments table is there")
            let old = try #require(try journal.record(for: paymentID(1)))
            #expect(old.request == .payment(request(1, amount: euros(500))))
            guard case .payment(let oldPayment) = old.request else { return }
            #expect(oldPayment.signedConfirmation.isEmpty)
            let signed = request(2, amount: euros(700), signedConfirmation: [1, 2, 3, 4])
            try journal.write(.confirmed(.payment(signed)), at: 3)
            let reopened = try SQLiteTerminalJournal(path: path)
            guard case .payment(let payment) = try reopened.record(for: paymentID(2))?.request else {
                Issue.record("the new request is not on record")
                return
            }
            #expect(payment.signedConfirmation == [1, 2, 3, 4])
        }
    }

    /// A payment writes four or five steps, each a synced commit; none of its statements may make
    /// SQLite build a temporary table per run (a `step IN (…)` CHECK did, in schema 3).
    @Test func aPaymentsStepsBuildNoTemporaryTable() throws {
        try withTemporaryDirectory { directory in
            let journal = try SQLiteTerminalJournal(path: journalPath(in: directory))
            journal.database.startRecordingStatements()
            try journal.write(.offered(sessionID: session, transactionType: .payment, walletKey: walletKey(1)), at: 1)
            try journal.write(.confirmed(.payment(request(1, amount: euros(500)))), at: 2)
            try journal.write(.submitted(paymentID(1)), at: 3)
            try journal.write(.result(paymentID(1), answer: answer(1)), at: 4)
            try journal.write(.acknowledged(paymentID(1), by: walletKey(1)), at: 5)
            _ = try journal.record(for: paymentID(1))
            let statements = Set(journal.database.stopRecordingStatements())
            #expect(statements.contains { $0.hasPrefix("INSERT INTO steps") })
            for sql in statements {
                #expect(try journal.database.temporaryStructures(in: sql) == 0, "\(sql)")
            }
            // The check itself sees what schema 3's list cost.
            try journal.database.execute("CREATE TABLE listed(step TEXT CHECK (step IN ('a', 'b', 'c')))")
            #expect(try journal.database.temporaryStructures(in: "INSERT INTO listed(step) VALUES (?)") == 1)
        }
    }

    /// Schema 4 rebuilds the steps table (the same rules, the step's name checked by comparisons):
    /// a schema-3 journal keeps every row, its sequence numbers and its unsettled requests.
    @Test func aSchemaThreeJournalIsRebuiltAndKeepsEveryStep() throws {
        try withTemporaryDirectory { directory in
            let path = journalPath(in: directory)
            let before: [[DatabaseValue]]
            do {
                let database = try SQLiteDatabase(path: path)
                try database.execute(Self.schemaThree)
                // Written through the current journal's code paths would need schema 4; these are the
                // rows schema 3 wrote: an offered step, then two requests, one answered.
                try database.execute(
                    """
                    INSERT INTO steps(seq, step, session_id, transaction_type, wallet_key, recorded_at)
                        VALUES (7, 'offered', 5, 1, x'01', 1);
                    """)
                for (seq, id, step) in [(8, 1, "confirmed"), (9, 2, "confirmed"), (10, 2, "submitted")] {
                    try database.query(
                        """
                        INSERT INTO steps(seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id,
                            amount, tip, currency, register_user, item, quantity, content_digest, signed_request,
                            recorded_at)
                        VALUES (?, ?, ?, ?, 1, ?, ?, 500, 0, 'EUR', 'anna', '', 0, ?, x'0102', ?)
                        """,
                        [
                            .integer(Int64(seq)), .text(step), .integer(Int64(bitPattern: session.rawValue)),
                            .blob(paymentID(id).bytes), .blob(walletKey(1).bytes), .blob(terminalKey.bytes),
                            .blob(digest(id)), .integer(Int64(seq)),
                        ])
                }
                before = try database.query("SELECT * FROM steps ORDER BY seq").map(\.cells)
            }
            let journal = try SQLiteTerminalJournal(path: path)
            #expect(
                try journal.database.query("SELECT value FROM meta WHERE key = 'schema_version'").first?.text("value")
                    == String(SQLiteTerminalJournal.schemaVersion))
            // Every row as it was, with the columns later schemas added empty (order_reference).
            #expect(
                try journal.database.query("SELECT * FROM steps ORDER BY seq").map(\.cells)
                    == before.map { $0 + [.null] })
            #expect(try journal.unsettled().map(\.request.id) == [paymentID(1), paymentID(2)])
            #expect(
                try journal.database.query("SELECT name FROM sqlite_master WHERE name = 'steps_by_request'").count == 1)
            #expect(
                try journal.database.temporaryStructures(
                    in:
                        "INSERT INTO steps(step, session_id, transaction_type, wallet_key, recorded_at) VALUES ('offered', 1, 1, x'01', 1)"
                ) == 0)
            // The same rules as before: an unknown step is refused, and the sequence goes on.
            #expect(throws: DatabaseError.self) {
                try journal.database.query(
                    "INSERT INTO steps(step, session_id, transaction_type, wallet_key, recorded_at) VALUES ('lost', 1, 1, x'01', 1)"
                )
            }
            try journal.write(.result(paymentID(2), answer: answer(2)), at: 11)
            #expect(try journal.database.query("SELECT MAX(seq) AS last FROM steps").first?.integer("last") == 11)
            #expect(try journal.unsettled().map(\.request.id) == [paymentID(1)])
        }
    }

    /// The schema-3 journal exactly as the release before schema 4 created it: the text of that
    /// release, not today's definitions, so a later change to a table cannot change the fixture.
    static let schemaThree = """
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS steps(
            seq INTEGER PRIMARY KEY,
            step TEXT NOT NULL CHECK (step IN ('offered', 'confirmed', 'submitted', 'result', 'acknowledged')),
            session_id INTEGER NOT NULL,
            request_id BLOB,
            transaction_type INTEGER NOT NULL,
            wallet_key BLOB NOT NULL,
            terminal_key_id BLOB,
            amount INTEGER,
            tip INTEGER,
            currency TEXT,
            register_user TEXT,
            item TEXT,
            quantity INTEGER,
            content_digest BLOB,
            answer BLOB,
            signed_request BLOB,
            recorded_at INTEGER NOT NULL,
            CHECK ((step = 'offered') = (request_id IS NULL)),
            CHECK (step != 'confirmed' OR (terminal_key_id IS NOT NULL AND amount IS NOT NULL
                AND tip IS NOT NULL AND currency IS NOT NULL AND content_digest IS NOT NULL)),
            CHECK ((step = 'result') = (answer IS NOT NULL)));
        CREATE INDEX IF NOT EXISTS steps_by_request ON steps(request_id, seq) WHERE request_id IS NOT NULL;
        CREATE TABLE IF NOT EXISTS offline_payments(
            payment_id BLOB PRIMARY KEY,
            session_id INTEGER NOT NULL,
            wallet_key BLOB NOT NULL,
            terminal_key_id BLOB NOT NULL,
            amount INTEGER NOT NULL CHECK (amount > 0),
            tip INTEGER NOT NULL CHECK (tip >= 0),
            currency TEXT NOT NULL,
            register_user TEXT NOT NULL,
            signed_confirmation BLOB NOT NULL,
            daily_token BLOB NOT NULL,
            token_id BLOB NOT NULL,
            accepted_at INTEGER NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('stored', 'forwarding', 'settled', 'declined')),
            decline_code TEXT,
            decline_reason TEXT,
            forward_attempts INTEGER NOT NULL DEFAULT 0,
            updated_at INTEGER NOT NULL,
            CHECK ((state = 'declined') = (decline_code IS NOT NULL)));
        INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '3');
        """

    /// The schema-1 journal exactly as the releases that wrote schema 1 created it.
    static let schemaOne = """
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS steps(
            seq INTEGER PRIMARY KEY,
            step TEXT NOT NULL CHECK (step IN ('offered', 'confirmed', 'submitted', 'result', 'acknowledged')),
            session_id INTEGER NOT NULL,
            request_id BLOB,
            transaction_type INTEGER NOT NULL,
            wallet_key BLOB NOT NULL,
            terminal_key_id BLOB,
            amount INTEGER,
            tip INTEGER,
            currency TEXT,
            register_user TEXT,
            item TEXT,
            quantity INTEGER,
            content_digest BLOB,
            answer BLOB,
            recorded_at INTEGER NOT NULL,
            CHECK ((step = 'offered') = (request_id IS NULL)),
            CHECK (step != 'confirmed' OR (terminal_key_id IS NOT NULL AND amount IS NOT NULL
                AND tip IS NOT NULL AND currency IS NOT NULL AND content_digest IS NOT NULL)),
            CHECK ((step = 'result') = (answer IS NOT NULL)));
        CREATE INDEX IF NOT EXISTS steps_by_request ON steps(request_id, seq) WHERE request_id IS NOT NULL;
        INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '1');
        """

    @Test func theFileIsPrivateToItsOwner() throws {
        try withTemporaryDirectory { directory in
            let path = journalPath(in: directory)
            _ = try SQLiteTerminalJournal(path: path)
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
    }
}
