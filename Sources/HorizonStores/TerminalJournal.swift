import HorizonCore
import HorizonProtocol

/// The steps of one payment or redemption at the terminal, in the order they happen. Each is
/// committed and synced before the message that follows it leaves (DESIGN.md section 5).
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
    case acknowledged(PaymentID)

    public var step: JournalStep {
        switch self {
        case .offered: .offered
        case .confirmed: .confirmed
        case .submitted: .submitted
        case .result: .result
        case .acknowledged: .acknowledged
        }
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

    /// Confirmed but without a final answer: the terminal still owes it an execution.
    public var isUnsettled: Bool { answer == nil }
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
    /// Commits and syncs one step. Steps of one id only move forward: a step the id already
    /// passed is a no-op (a retry), a step out of order (a result before a confirmation) is an error.
    func write(_ write: JournalWrite, at time: UnixTime) throws(JournalError)
    /// Where this id stands; nil if it was never confirmed here.
    func record(for id: PaymentID) throws(JournalError) -> JournalRecord?
    /// Every id confirmed but without a final answer, oldest first: what recovery settles.
    func unsettled() throws(JournalError) -> [JournalRecord]
}

/// The journal in its own SQLite file (WAL, `synchronous = FULL`: each step is on disk when
/// `write` returns). Two tables: `steps`, append-only, one row per write (the history, for audits
/// and tests), and `requests`, one row per confirmed id with its latest step and answer, which
/// recovery and retries read. Both change in one transaction.
public final class SQLiteTerminalJournal: TerminalJournal {
    public let database: SQLiteDatabase
    static let schemaVersion = 1

    public init(path: String) throws(DatabaseError) {
        database = try SQLiteDatabase(path: path)
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS steps(
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                step TEXT NOT NULL CHECK (step IN ('offered', 'confirmed', 'submitted', 'result', 'acknowledged')),
                session_id INTEGER NOT NULL,
                request_id BLOB,
                transaction_type INTEGER NOT NULL,
                wallet_key BLOB NOT NULL,
                recorded_at INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS requests(
                request_id BLOB PRIMARY KEY,
                step TEXT NOT NULL CHECK (step IN ('confirmed', 'submitted', 'result', 'acknowledged')),
                session_id INTEGER NOT NULL,
                transaction_type INTEGER NOT NULL,
                wallet_key BLOB NOT NULL,
                terminal_key_id BLOB NOT NULL,
                amount INTEGER NOT NULL,
                tip INTEGER NOT NULL,
                currency TEXT NOT NULL,
                register_user TEXT NOT NULL,
                item TEXT NOT NULL,
                quantity INTEGER NOT NULL,
                content_digest BLOB NOT NULL,
                answer BLOB,
                confirmed_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL);
            CREATE INDEX IF NOT EXISTS requests_unsettled ON requests(confirmed_at) WHERE answer IS NULL;
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '\(Self.schemaVersion)');
            """)
        let version = try database.query("SELECT value FROM meta WHERE key = 'schema_version'").first?["value"].text
        guard version == String(Self.schemaVersion) else {
            throw DatabaseError(
                code: -1,
                message: "this journal has schema \(version ?? "?"); this program reads \(Self.schemaVersion)",
                context: "opening \(path)")
        }
    }

    public func write(_ write: JournalWrite, at time: UnixTime) throws(JournalError) {
        do {
            try database.transaction { (db) throws(DatabaseError) -> Result<Void, JournalError> in
                switch write {
                case .offered(let sessionID, let type, let walletKey):
                    try Self.appendStep(
                        .offered, sessionID: sessionID, id: nil, type: type, walletKey: walletKey, at: time, in: db)
                    return .success(())
                case .confirmed(let request):
                    if let stored = try Self.read(request.id, in: db) {
                        // A retry of the same request is fine; the same id with other terms is not.
                        return stored.request == request
                            ? .success(()) : .failure(JournalError("\(request.id) was confirmed with other terms"))
                    }
                    try Self.insert(request, at: time, in: db)
                    try Self.appendStep(
                        .confirmed, sessionID: request.sessionID, id: request.id, type: request.transactionType,
                        walletKey: request.walletKey, at: time, in: db)
                    return .success(())
                case .submitted(let id), .acknowledged(let id):
                    return try Self.advance(id, to: write.step, answer: nil, at: time, in: db)
                case .result(let id, let answer):
                    return try Self.advance(id, to: .result, answer: answer, at: time, in: db)
                }
            }.get()
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError("could not write \(write.step): \(error)")
        }
    }

    public func record(for id: PaymentID) throws(JournalError) -> JournalRecord? {
        do {
            return try database.transaction { (db) throws(DatabaseError) in try Self.read(id, in: db) }
        } catch {
            throw JournalError("could not read \(id): \(error)")
        }
    }

    public func unsettled() throws(JournalError) -> [JournalRecord] {
        do {
            return try database.query("SELECT * FROM requests WHERE answer IS NULL ORDER BY confirmed_at, rowid")
                .compactMap(Self.decode)
        } catch {
            throw JournalError("could not read the unsettled requests: \(error)")
        }
    }

    /// Confirmed requests, the most recently changed first.
    public func records(limit: Int) throws(DatabaseError) -> [JournalRecord] {
        try database.query(
            "SELECT * FROM requests ORDER BY updated_at DESC, rowid DESC LIMIT ?", [.integer(Int64(limit))]
        )
        .compactMap(Self.decode)
    }

    /// The history of writes, oldest first, as (step, request id) pairs; for audits and tests.
    public func history() throws(DatabaseError) -> [(step: JournalStep, id: PaymentID?)] {
        try database.query("SELECT step, request_id FROM steps ORDER BY seq").compactMap { row in
            guard let step = row["step"].text.flatMap(JournalStep.init(rawValue:)) else { return nil }
            return (step, row["request_id"].blob.flatMap { try? PaymentID(bytes: $0) })
        }
    }

    // MARK: Rows

    private static func advance(
        _ id: PaymentID, to step: JournalStep, answer: SessionMessage?, at time: UnixTime,
        in db: SQLiteDatabase.Transaction
    ) throws(DatabaseError) -> Result<Void, JournalError> {
        guard let stored = try read(id, in: db) else {
            return .failure(JournalError("\(step) for \(id), which was never confirmed"))
        }
        // Already there or past it: a retry of the step, nothing to write.
        if stored.step >= step { return .success(()) }
        if step == .acknowledged, stored.answer == nil {
            return .failure(JournalError("acknowledged for \(id), which has no result"))
        }
        if let answer {
            try db.query(
                "UPDATE requests SET step = ?, answer = ?, updated_at = ? WHERE request_id = ?",
                [.text(step.rawValue), .blob(answer.encoded()), .integer(time), .blob(id.bytes)])
        } else {
            try db.query(
                "UPDATE requests SET step = ?, updated_at = ? WHERE request_id = ?",
                [.text(step.rawValue), .integer(time), .blob(id.bytes)])
        }
        try appendStep(
            step, sessionID: stored.request.sessionID, id: id, type: stored.request.transactionType,
            walletKey: stored.request.walletKey, at: time, in: db)
        return .success(())
    }

    private static func appendStep(
        _ step: JournalStep, sessionID: SessionID, id: PaymentID?, type: TransactionType, walletKey: PublicKeyBytes,
        at time: UnixTime, in db: SQLiteDatabase.Transaction
    ) throws(DatabaseError) {
        try db.query(
            """
            INSERT INTO steps(step, session_id, request_id, transaction_type, wallet_key, recorded_at)
            VALUES (?, ?, ?, ?, ?, ?)
            """,
            [
                .text(step.rawValue), .integer(Int64(bitPattern: sessionID.rawValue)),
                id.map { .blob($0.bytes) } ?? .null,
                .integer(Int64(type.rawValue)), .blob(walletKey.bytes), .integer(time),
            ])
    }

    private static func insert(_ request: JournalRequest, at time: UnixTime, in db: SQLiteDatabase.Transaction)
        throws(DatabaseError)
    {
        let terminalKeyID: TerminalKeyID
        let amount: Money
        let tip: Money
        var registerUser = ""
        var item = ""
        var quantity: Int64 = 0
        let digest: [UInt8]
        switch request {
        case .payment(let payment):
            terminalKeyID = payment.terminalKeyID
            amount = payment.amount
            tip = payment.tip
            registerUser = payment.registerUser
            digest = payment.contentDigest
        case .redemption(let redemption):
            terminalKeyID = redemption.terminalKeyID
            amount = redemption.value
            tip = .zero(redemption.value.currency)
            item = redemption.item
            quantity = redemption.quantity
            digest = redemption.contentDigest
        }
        try db.query(
            """
            INSERT INTO requests(request_id, step, session_id, transaction_type, wallet_key, terminal_key_id, amount,
                tip, currency, register_user, item, quantity, content_digest, answer, confirmed_at, updated_at)
            VALUES (?, 'confirmed', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)
            """,
            [
                .blob(request.id.bytes), .integer(Int64(bitPattern: request.sessionID.rawValue)),
                .integer(Int64(request.transactionType.rawValue)), .blob(request.walletKey.bytes),
                .blob(terminalKeyID.bytes), .integer(amount.minorUnits), .integer(tip.minorUnits),
                .text(amount.currency.code), .text(registerUser), .text(item), .integer(quantity), .blob(digest),
                .integer(time), .integer(time),
            ])
    }

    private static func read(_ id: PaymentID, in db: SQLiteDatabase.Transaction) throws(DatabaseError)
        -> JournalRecord?
    {
        try db.query("SELECT * FROM requests WHERE request_id = ?", [.blob(id.bytes)]).first.flatMap(decode)
    }

    private static func decode(_ row: DatabaseRow) -> JournalRecord? {
        guard let idBytes = row["request_id"].blob, let id = try? PaymentID(bytes: idBytes),
            let step = row["step"].text.flatMap(JournalStep.init(rawValue:)),
            let session = row["session_id"].integer, let sessionID = SessionID(rawValue: UInt64(bitPattern: session)),
            let typeValue = row["transaction_type"].integer,
            let type = TransactionType(rawValue: UInt8(truncatingIfNeeded: typeValue)),
            let keyBytes = row["wallet_key"].blob, let walletKey = try? PublicKeyBytes(bytes: keyBytes),
            let keyIDBytes = row["terminal_key_id"].blob, let terminalKeyID = try? TerminalKeyID(bytes: keyIDBytes),
            let code = row["currency"].text, let currency = try? Currency(code: code),
            let amount = try? Money(minorUnits: row["amount"].integer ?? -1, currency: currency),
            let tip = try? Money(minorUnits: row["tip"].integer ?? -1, currency: currency),
            let digest = row["content_digest"].blob
        else { return nil }
        let request: JournalRequest
        if type == .payment {
            request = .payment(
                SettlementRequest(
                    paymentID: id, sessionID: sessionID, walletKey: walletKey, terminalKeyID: terminalKeyID,
                    amount: amount, tip: tip, registerUser: row["register_user"].text ?? "", contentDigest: digest))
        } else {
            request = .redemption(
                RedemptionRequest(
                    redemptionID: id, sessionID: sessionID, walletKey: walletKey, terminalKeyID: terminalKeyID,
                    transactionType: type, item: row["item"].text ?? "", quantity: row["quantity"].integer ?? 0,
                    value: amount, contentDigest: digest))
        }
        let answer = row["answer"].blob.flatMap { try? SessionMessage.decode($0) }
        return JournalRecord(request: request, step: step, answer: answer)
    }
}
