import HorizonCore
import HorizonProtocol
import HorizonSettlement

/// The steps of one payment or redemption at the terminal, in the order they happen. Each is
/// committed and synced before the message that follows it leaves (`docs/protocol.md`
/// lists the steps and the crash each synced one covers).
public enum JournalStep: String, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    /// The signed offer went to a wallet that said hello (per session, not per payment id).
    case offered
    /// The wallet's signed request was checked and is about to be executed: from here on the
    /// terminal owes it an execution, after a crash too.
    case confirmed
    /// Handed to the processor; whether it executed is known only from the processor.
    case submitted
    /// The processor's final answer (a signed receipt, or an error naming the id) is stored; it
    /// is what the wallet gets, now and whenever it asks again.
    case result
    /// The wallet said it stored the receipt.
    case acknowledged

    public var description: String { rawValue }

    private var order: Int { Self.allCases.firstIndex(of: self) ?? 0 }
    public static func < (lhs: JournalStep, rhs: JournalStep) -> Bool { lhs.order < rhs.order }
}

/// What the terminal executes for one confirmed id: a payment or a redemption.
public enum JournalRequest: Sendable, Equatable {
    case payment(SettlementRequest)
    case redemption(RedemptionRequest)

    public var id: PaymentID {
        switch self {
        case .payment(let request): request.paymentID
        case .redemption(let request): request.redemptionID
        }
    }

    public var sessionID: SessionID {
        switch self {
        case .payment(let request): request.sessionID
        case .redemption(let request): request.sessionID
        }
    }

    public var walletKey: PublicKeyBytes {
        switch self {
        case .payment(let request): request.walletKey
        case .redemption(let request): request.walletKey
        }
    }

    /// SHA-256 of the signed request's signed bytes: what makes two requests with one id "the same".
    public var contentDigest: [UInt8] {
        switch self {
        case .payment(let request): request.contentDigest
        case .redemption(let request): request.contentDigest
        }
    }

    public var transactionType: TransactionType {
        switch self {
        case .payment: .payment
        case .redemption(let request): request.transactionType
        }
    }
}

/// One write to the journal.
public enum JournalWrite: Sendable, Equatable {
    case offered(sessionID: SessionID, transactionType: TransactionType, walletKey: PublicKeyBytes)
    case confirmed(JournalRequest)
    case submitted(PaymentID)
    /// The final answer for the id, exactly as it is sent (a receipt or an error).
    case result(PaymentID, answer: SessionMessage)
    /// Only the wallet that made the request (its key) can acknowledge it.
    case acknowledged(PaymentID, by: PublicKeyBytes)

    public var step: JournalStep {
        switch self {
        case .offered: .offered
        case .confirmed: .confirmed
        case .submitted: .submitted
        case .result: .result
        case .acknowledged: .acknowledged
        }
    }

    /// A result that is an error: the terminal's promise that the id never executes. The
    /// processor keeps no result for it (it executed nothing), so it cannot be asked again by
    /// payment id: lost in a power cut, recovery would submit the request again, and an
    /// execution that was refused for a passing reason (a storage failure) could go through.
    public var isRefusal: Bool {
        if case .result(_, answer: .error) = self { true } else { false }
    }
}

/// Where one confirmed id stands.
public struct JournalRecord: Sendable, Equatable {
    public let request: JournalRequest
    /// The latest step written for it (`confirmed` at least).
    public let step: JournalStep
    /// The stored final answer, from `result` on.
    public let answer: SessionMessage?

    public init(request: JournalRequest, step: JournalStep, answer: SessionMessage?) {
        self.request = request
        self.step = step
        self.answer = answer
    }
}

/// Why the journal could not be written or read. A terminal that cannot journal a step does not
/// send the message that follows it.
public struct JournalError: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { "the terminal journal: \(reason)" }
}

/// The terminal's durable record of every step of every payment and redemption.
public protocol TerminalJournal: Sendable {
    /// Commits and syncs steps, all or none (several at once for steps with nothing in between
    /// them that could leave: a confirmation handed straight to a local processor). Steps of one
    /// id only move forward: a step the id already passed is a no-op (a retry), a step out of
    /// order (a result before a confirmation) is an error.
    func write(_ writes: [JournalWrite], at time: UnixTime) throws(JournalError)
    /// Where this id stands; nil if it was never confirmed here.
    func record(for id: PaymentID) throws(JournalError) -> JournalRecord?
    /// Every id confirmed but without a final answer, oldest first: what recovery settles.
    func unsettled() throws(JournalError) -> [JournalRecord]
    /// Confirmed requests whose rows cannot be decoded (a damaged or hand-edited file), each as
    /// its id in hex and why: recovery reports them rather than skipping them in silence.
    func unreadable() throws(JournalError) -> [UnreadableRequest]
}

/// A confirmed request the journal holds but cannot decode.
public struct UnreadableRequest: Sendable, Equatable, CustomStringConvertible {
    /// The request id's bytes in hex (the id itself may be what is damaged).
    public let id: String
    public let reason: String

    public init(id: String, reason: String) {
        self.id = id
        self.reason = reason
    }

    public var description: String { "\(id): \(reason)" }
}

extension TerminalJournal {
    /// Commits and syncs one step.
    public func write(_ write: JournalWrite, at time: UnixTime) throws(JournalError) {
        try self.write([write], at: time)
    }
}

/// The journal in its own SQLite file (WAL, `synchronous = FULL`: each step is on disk when
/// `write` returns). One append-only table, one row per step: a `confirmed` row carries the
/// request's terms, a `result` row the answer; where a request stands is its rows read in order.
/// Appending touches two pages per commit (the table's last leaf and one index leaf), which keeps
/// a synced step cheap; nothing is ever updated in place.
public final class SQLiteTerminalJournal: TerminalJournal {
    public let database: SQLiteDatabase

    /// The journal's schema history. `meta.schema_version` is kept in step too: programs from
    /// before `schema_migrations` read only that, and must keep refusing a newer journal.
    public static let schema = SchemaMigrator(
        store: "terminal journal",
        steps: [
            SchemaStep(
                version: 1, name: "steps, one row per step of a request",
                sql: """
                    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                    CREATE TABLE steps(
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
                    CREATE INDEX steps_by_request ON steps(request_id, seq) WHERE request_id IS NOT NULL;
                    INSERT INTO meta(key, value) VALUES ('schema_version', '1');
                    """),
            // The wallet's signed Confirm as it arrived, which a remote processor verifies (older
            // rows have none).
            SchemaStep(
                version: 2, name: "signed_request",
                sql: """
                    ALTER TABLE steps ADD COLUMN signed_request BLOB;
                    UPDATE meta SET value = '2' WHERE key = 'schema_version';
                    """),
            SchemaStep(
                version: 3, name: "offline_payments: payments accepted offline and their forwarding",
                sql: """
                    CREATE TABLE offline_payments(
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
                    UPDATE meta SET value = '3' WHERE key = 'schema_version';
                    """),
            // The same rules, the step's name checked by comparisons instead of `step IN (…)`:
            // SQLite checks a list of more than two values by building a temporary table (a page
            // cache of its own, allocated and freed) at every row it writes, and a payment writes
            // four or five steps. The table is rebuilt with every row and its sequence number.
            SchemaStep(
                version: 4, name: "steps: the step checked by comparisons",
                sql: """
                    CREATE TABLE steps_v4(
                        seq INTEGER PRIMARY KEY,
                        step TEXT NOT NULL CHECK (step = 'offered' OR step = 'confirmed' OR step = 'submitted'
                            OR step = 'result' OR step = 'acknowledged'),
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
                    INSERT INTO steps_v4(seq, step, session_id, request_id, transaction_type, wallet_key,
                        terminal_key_id, amount, tip, currency, register_user, item, quantity, content_digest,
                        answer, signed_request, recorded_at)
                    SELECT seq, step, session_id, request_id, transaction_type, wallet_key, terminal_key_id,
                        amount, tip, currency, register_user, item, quantity, content_digest, answer,
                        signed_request, recorded_at FROM steps;
                    DROP TABLE steps;
                    ALTER TABLE steps_v4 RENAME TO steps;
                    CREATE INDEX steps_by_request ON steps(request_id, seq) WHERE request_id IS NOT NULL;
                    UPDATE meta SET value = '4' WHERE key = 'schema_version';
                    """),
            // The merchant's order reference the register gave a payment (NULL: none), found by
            // `status REF`. The index holds only rows with one, so a sale without a reference
            // still appends to two pages.
            SchemaStep(
                version: 5, name: "steps.order_reference",
                sql: """
                    ALTER TABLE steps ADD COLUMN order_reference TEXT;
                    CREATE INDEX steps_by_order_reference ON steps(order_reference, seq)
                        WHERE order_reference IS NOT NULL;
                    UPDATE meta SET value = '5' WHERE key = 'schema_version';
                    """),
        ],
        versionBeforeRecording: { (database) throws(DatabaseError) -> Int? in
            // A journal from before `schema_migrations` names its version in `meta`.
            guard try SchemaMigrator.hasTable("meta", in: database) else { return nil }
            let stored = try database.query("SELECT value FROM meta WHERE key = 'schema_version'").first
            guard let text = try stored?.text("value"), let version = Int(text) else {
                throw DatabaseError(
                    code: -1, message: "this terminal journal names no schema version it can be migrated from",
                    context: "opening \(database.path)")
            }
            return version
        })

    /// The version this program reads and writes.
    public static var schemaVersion: Int { schema.currentVersion }

    public init(path: String) throws(DatabaseError) {
        database = try SQLiteDatabase(path: path)
        try Self.schema.migrate(database)
    }

    public func write(_ writes: [JournalWrite], at time: UnixTime) throws(JournalError) {
        // Every step is committed before the next message leaves; only the wallet's confirmed
        // request, and a refusal, are also synced. From the confirmation on the terminal owes an
        // execution, and nothing else holds what the customer signed. A power cut may take the
        // other steps, and costs nothing: a forgotten `offered` only makes a late confirmation be
        // refused (nothing charged), and `submitted`, a receipt and `acknowledged` are asked
        // again of the processor by payment id, which answers with its stored result (recovery
        // does this for every confirmed request with no result). The next synced commit takes
        // them to disk too.
        let synced = writes.contains { $0.step == .confirmed || $0.isRefusal }
        do {
            try database.transaction(synced: synced) { (db) throws(DatabaseError) -> Result<Void, JournalError> in
                for write in writes {
                    if case .failure(let error) = try Self.apply(write, at: time, in: db) { return .failure(error) }
                }
                return .success(())
            }.get()
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError("could not write \(writes.map(\.step)): \(error)")
        }
    }

    public func record(for id: PaymentID) throws(JournalError) -> JournalRecord? {
        do {
            return try Self.record(for: id, rows: rowsQuery(id))
        } catch {
            throw JournalError("could not read \(id): \(error)")
        }
    }

    public func unsettled() throws(JournalError) -> [JournalRecord] {
        do {
            let ids = try database.query(
                """
                SELECT request_id FROM steps AS confirmed WHERE step = 'confirmed' AND NOT EXISTS (
                    SELECT 1 FROM steps AS answered WHERE answered.request_id = confirmed.request_id
                        AND answered.step = 'result')
                ORDER BY seq
                """)
            return try records(of: ids)
        } catch {
            throw JournalError("could not read the unsettled requests: \(error)")
        }
    }

    public func unreadable() throws(JournalError) -> [UnreadableRequest] {
        do {
            var unreadable: [UnreadableRequest] = []
            for row in try database.query("SELECT request_id FROM steps WHERE step = 'confirmed' ORDER BY seq") {
                let bytes = try row.optionalBytes("request_id") ?? []
                guard let id = try? PaymentID(bytes: bytes) else {
                    unreadable.append(UnreadableRequest(id: bytes.hexString, reason: "the request id is damaged"))
                    continue
                }
                if (try? Self.record(for: id, rows: try rowsQuery(id))) ?? nil == nil {
                    unreadable.append(
                        UnreadableRequest(id: bytes.hexString, reason: "its confirmed terms cannot be decoded"))
                }
            }
            return unreadable
        } catch {
            throw JournalError("could not read the confirmed requests: \(error)")
        }
    }

    /// The payments confirmed with the merchant's order reference `reference`, the newest first
    /// (a reference may be used again after a sale with it was declined or failed).
    public func records(orderReference reference: String, limit: Int = 20) throws(JournalError) -> [JournalRecord] {
        do {
            let ids = try database.query(
                """
                SELECT request_id FROM steps WHERE order_reference = ? AND (step = 'confirmed' OR step = 'result')
                GROUP BY request_id ORDER BY MAX(seq) DESC LIMIT ?
                """, [.text(reference), .integer(Int64(limit))])
            return try records(of: ids)
        } catch {
            throw JournalError("could not read the payments with order reference \(reference): \(error)")
        }
    }

    /// Confirmed requests, the most recently changed first.
    public func records(limit: Int) throws(DatabaseError) -> [JournalRecord] {
        let ids = try database.query(
            """
            SELECT request_id, MAX(seq) AS last FROM steps WHERE request_id IS NOT NULL
            GROUP BY request_id ORDER BY last DESC LIMIT ?
            """, [.integer(Int64(limit))])
        return try records(of: ids)
    }

    /// The records of the ids in `rows` (a `request_id` column), in their order.
    private func records(of rows: [DatabaseRow]) throws(DatabaseError) -> [JournalRecord] {
        var records: [JournalRecord] = []
        for row in rows {
            // A damaged request is left out here and named by `unreadable()`.
            guard let id = try? PaymentID(bytes: try row.bytes("request_id")),
                let record = try? Self.record(for: id, rows: try rowsQuery(id))
            else { continue }
            records.append(record)
        }
        return records
    }

    /// The history of writes, oldest first, as (step, request id) pairs; for audits and tests.
    public func history() throws(DatabaseError) -> [(step: JournalStep, id: PaymentID?)] {
        var history: [(step: JournalStep, id: PaymentID?)] = []
        for row in try database.query("SELECT step, request_id FROM steps ORDER BY seq") {
            guard let step = JournalStep(rawValue: try row.text("step")) else { continue }
            history.append((step, try row.optionalBytes("request_id").flatMap { try? PaymentID(bytes: $0) }))
        }
        return history
    }

    // MARK: Retention

    /// What `compact` did.
    public struct Compaction: Sendable, Equatable {
        /// Settled requests now held in one row each.
        public var requests = 0
        /// Rows deleted: steps of compacted requests, and offers no request followed.
        public var rowsRemoved = 0
    }

    /// Keeps the journal from growing forever: each request answered before `cutoff` keeps one
    /// row, its `result`, which takes the confirmed terms (so a status query, a retry of the
    /// same request and a receipt are answered as before), and offers made before `cutoff` go.
    /// A request still owed an execution is never touched. Runs in batches of `batch` requests,
    /// each one transaction, so a payment waits at most one batch.
    @discardableResult
    public func compact(answeredBefore cutoff: UnixTime, batch: Int = 500) throws(JournalError) -> Compaction {
        var compaction = Compaction()
        do {
            while true {
                let (done, removed) = try database.transaction { (db) throws(DatabaseError) -> (Int, Int) in
                    let ids = try db.query(
                        """
                        SELECT request_id FROM steps
                        WHERE step = 'result' AND recorded_at < ? AND terminal_key_id IS NULL
                        ORDER BY seq LIMIT ?
                        """, [.integer(cutoff), .integer(Int64(batch))])
                    var removed = 0
                    for row in ids {
                        let id = try row.value("request_id")
                        try db.query(
                            """
                            UPDATE steps SET (terminal_key_id, amount, tip, currency, register_user, item, quantity,
                                content_digest, signed_request, order_reference) = (
                                SELECT terminal_key_id, amount, tip, currency, register_user, item, quantity,
                                    content_digest, signed_request, order_reference
                                FROM steps WHERE request_id = ? AND step = 'confirmed')
                            WHERE request_id = ? AND step = 'result'
                            """, [id, id])
                        try db.query("DELETE FROM steps WHERE request_id = ? AND step <> 'result'", [id])
                        removed += db.changes
                    }
                    return (ids.count, removed)
                }
                compaction.requests += done
                compaction.rowsRemoved += removed
                if done < batch { break }
            }
            compaction.rowsRemoved += try database.transaction { (db) throws(DatabaseError) -> Int in
                try db.query("DELETE FROM steps WHERE step = 'offered' AND recorded_at < ?", [.integer(cutoff)])
                return db.changes
            }
        } catch {
            throw JournalError("could not compact the journal: \(error)")
        }
        return compaction
    }

    // MARK: Rows

    private static let rowsSQL = "SELECT * FROM steps WHERE request_id = ? ORDER BY seq"

    private func rowsQuery(_ id: PaymentID) throws(DatabaseError) -> [DatabaseRow] {
        try database.query(Self.rowsSQL, [.blob(id.bytes)])
    }

    static func apply(_ write: JournalWrite, at time: UnixTime, in db: SQLiteDatabase.Transaction)
        throws(DatabaseError) -> Result<Void, JournalError>
    {
        switch write {
        case .offered(let sessionID, let type, let walletKey):
            try db.query(
                """
                INSERT INTO steps(step, session_id, transaction_type, wallet_key, recorded_at)
                VALUES ('offered', ?, ?, ?, ?)
                """,
                [
                    .integer(Int64(bitPattern: sessionID.rawValue)), .integer(Int64(type.rawValue)),
                    .blob(walletKey.bytes), .integer(time),
                ])
            return .success(())
        case .confirmed(let request):
            if let stored = try record(for: request.id, rows: try db.query(rowsSQL, [.blob(request.id.bytes)])) {
                // A retry of the same request is fine; the same id with other terms is not.
                return stored.request == request
                    ? .success(()) : .failure(JournalError("\(request.id) was confirmed with other terms"))
            }
            try insertConfirmation(request, at: time, in: db)
            return .success(())
        case .submitted(let id):
            return try advance(id, to: .submitted, answer: nil, by: nil, at: time, in: db)
        case .acknowledged(let id, let walletKey):
            return try advance(id, to: .acknowledged, answer: nil, by: walletKey, at: time, in: db)
        case .result(let id, let answer):
            return try advance(id, to: .result, answer: answer, by: nil, at: time, in: db)
        }
    }

    /// The columns `advance` needs: the request's steps so far, without decoding its terms.
    private static let progressSQL = """
        SELECT step, answer IS NOT NULL AS answered, session_id, transaction_type, wallet_key FROM steps
        WHERE request_id = ? ORDER BY seq
        """

    private static func advance(
        _ id: PaymentID, to step: JournalStep, answer: SessionMessage?, by walletKey: PublicKeyBytes?,
        at time: UnixTime,
        in db: SQLiteDatabase.Transaction
    ) throws(DatabaseError) -> Result<Void, JournalError> {
        let rows = try db.query(progressSQL, [.blob(id.bytes)])
        let steps = try Self.steps(of: rows)
        // A compacted request's one row is its result, which carries the terms.
        guard let confirmed = zip(rows, steps).first(where: { $0.1 == .confirmed || $0.1 == .result })?.0 else {
            return .failure(JournalError("\(step) for \(id), which was never confirmed"))
        }
        let latest = steps.compactMap { $0 }.max() ?? .confirmed
        // Already there or past it: a retry of the step, nothing to write.
        if latest >= step { return .success(()) }
        if step == .acknowledged {
            guard try rows.map({ (row) throws(DatabaseError) in try row.optionalInteger("answered") }).contains(1)
            else {
                return .failure(JournalError("acknowledged for \(id), which has no result"))
            }
            guard let walletKey, try confirmed.bytes("wallet_key") == walletKey.bytes else {
                return .failure(JournalError("\(id) can only be acknowledged by the wallet that made it"))
            }
        }
        try db.query(
            """
            INSERT INTO steps(step, session_id, request_id, transaction_type, wallet_key, answer, recorded_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(step.rawValue), try confirmed.value("session_id"), .blob(id.bytes),
                try confirmed.value("transaction_type"), try confirmed.value("wallet_key"),
                answer.map { .blob($0.encoded()) } ?? .null, .integer(time),
            ])
        return .success(())
    }

    private static func insertConfirmation(
        _ request: JournalRequest, at time: UnixTime, in db: SQLiteDatabase.Transaction
    ) throws(DatabaseError) {
        let terminalKeyID: TerminalKeyID
        let amount: Money
        let tip: Money
        var registerUser = ""
        var item = ""
        var quantity: Int64 = 0
        let digest: [UInt8]
        var signedRequest: DatabaseValue = .null
        var orderReference: DatabaseValue = .null
        switch request {
        case .payment(let payment):
            terminalKeyID = payment.terminalKeyID
            amount = payment.amount
            tip = payment.tip
            registerUser = payment.registerUser
            digest = payment.contentDigest
            if !payment.signedConfirmation.isEmpty { signedRequest = .blob(payment.signedConfirmation) }
            if !payment.orderReference.isEmpty { orderReference = .text(payment.orderReference) }
        case .redemption(let redemption):
            terminalKeyID = redemption.terminalKeyID
            amount = redemption.value
            tip = .zero(redemption.value.currency)
            registerUser = redemption.registerUser
            item = redemption.item
            quantity = redemption.quantity
            digest = redemption.contentDigest
            if !redemption.signedRedemption.isEmpty { signedRequest = .blob(redemption.signedRedemption) }
        }
        try db.query(
            """
            INSERT INTO steps(step, session_id, request_id, transaction_type, wallet_key, terminal_key_id, amount, tip,
                currency, register_user, item, quantity, content_digest, signed_request, order_reference, recorded_at)
            VALUES ('confirmed', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .integer(Int64(bitPattern: request.sessionID.rawValue)), .blob(request.id.bytes),
                .integer(Int64(request.transactionType.rawValue)), .blob(request.walletKey.bytes),
                .blob(terminalKeyID.bytes), .integer(amount.minorUnits), .integer(tip.minorUnits),
                .text(amount.currency.code), .text(registerUser), .text(item), .integer(quantity), .blob(digest),
                signedRequest, orderReference, .integer(time),
            ])
    }

    /// Where a request stands, from its rows in order: the terms from its `confirmed` row, the
    /// answer from its `result` row, the step from its last row. Nil if it was never confirmed.
    /// Each row's step, nil for a name this program does not know.
    private static func steps(of rows: [DatabaseRow]) throws(DatabaseError) -> [JournalStep?] {
        try rows.map { (row) throws(DatabaseError) in JournalStep(rawValue: try row.text("step")) }
    }

    /// Where a request stands, from its rows in order: the terms from its `confirmed` row, the
    /// answer from its `result` row, the step from its last row. Nil if it was never confirmed or
    /// its terms do not decode; an error if a row is not the journal's shape.
    private static func record(for id: PaymentID, rows: [DatabaseRow]) throws(DatabaseError) -> JournalRecord? {
        let steps = try steps(of: rows)
        let compacted = try compactedRow(rows, steps)
        guard let confirmed = zip(rows, steps).first(where: { $0.1 == .confirmed })?.0 ?? compacted,
            let request = try decodeRequest(id, confirmed)
        else { return nil }
        let step = steps.compactMap { $0 }.max() ?? .confirmed
        let answer = try zip(rows, steps).first(where: { $0.1 == .result })?.0.optionalBytes("answer")
            .flatMap { try? SessionMessage.decode($0) }
        return JournalRecord(request: request, step: step, answer: answer)
    }

    /// The one row `compact` leaves of a settled request: its result, carrying the terms.
    private static func compactedRow(_ rows: [DatabaseRow], _ steps: [JournalStep?]) throws(DatabaseError)
        -> DatabaseRow?
    {
        guard let result = zip(rows, steps).first(where: { $0.1 == .result })?.0,
            try result.optionalBytes("terminal_key_id") != nil
        else { return nil }
        return result
    }

    /// A confirmed row's terms. Columns only a payment or only a redemption fills are NULL in
    /// the other (and `signed_request` in rows from before it was kept).
    private static func decodeRequest(_ id: PaymentID, _ row: DatabaseRow) throws(DatabaseError) -> JournalRequest? {
        // The row's shape is read strictly (an error); its values are checked as the types they
        // hold (nil: damaged terms, which `unreadable()` names).
        let session = try row.integer("session_id")
        let typeValue = try row.integer("transaction_type")
        let walletKeyBytes = try row.bytes("wallet_key")
        let terminalKeyIDBytes = try row.bytes("terminal_key_id")
        let currencyCode = try row.text("currency")
        let amountUnits = try row.integer("amount")
        let tipUnits = try row.integer("tip")
        let digest = try row.bytes("content_digest")
        guard let sessionID = SessionID(rawValue: UInt64(bitPattern: session)),
            let type = TransactionType(rawValue: UInt8(truncatingIfNeeded: typeValue)),
            let walletKey = try? PublicKeyBytes(bytes: walletKeyBytes),
            let terminalKeyID = try? TerminalKeyID(bytes: terminalKeyIDBytes),
            let currency = try? Currency(code: currencyCode),
            let amount = try? Money(minorUnits: amountUnits, currency: currency),
            let tip = try? Money(minorUnits: tipUnits, currency: currency)
        else { return nil }
        if type == .payment {
            return .payment(
                SettlementRequest(
                    paymentID: id, sessionID: sessionID, walletKey: walletKey, terminalKeyID: terminalKeyID,
                    amount: amount, tip: tip, registerUser: try row.optionalText("register_user") ?? "",
                    contentDigest: digest, signedConfirmation: try row.optionalBytes("signed_request") ?? [],
                    orderReference: try row.optionalText("order_reference") ?? ""))
        }
        return .redemption(
            RedemptionRequest(
                redemptionID: id, sessionID: sessionID, walletKey: walletKey, terminalKeyID: terminalKeyID,
                transactionType: type, item: try row.optionalText("item") ?? "",
                quantity: try row.optionalInteger("quantity") ?? 0, value: amount, contentDigest: digest,
                signedRedemption: try row.optionalBytes("signed_request") ?? [],
                registerUser: try row.optionalText("register_user") ?? ""))
    }
}
