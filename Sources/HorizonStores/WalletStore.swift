import HorizonCore
import HorizonProtocol

/// A receipt as the wallet keeps it.
public struct StoredReceipt: Sendable, Equatable, Codable {
    public let paymentID: String
    public let sessionID: String
    public let merchantName: String
    public let amountMinorUnits: Int64
    public let tipMinorUnits: Int64
    public let currency: String
    public let reference: UInt64
    public let settledAt: Int64
    public let bonusPointsEarned: Int64
    public let bonusPointsBalance: Int64
    /// True when the terminal accepted the payment offline (the server settles it when
    /// the terminal forwards it); nil otherwise, so JSON leaves it out.
    public var acceptedOffline: Bool? = nil

    public init(
        paymentID: String, sessionID: String, merchantName: String, amountMinorUnits: Int64, tipMinorUnits: Int64,
        currency: String, reference: UInt64, settledAt: Int64, bonusPointsEarned: Int64, bonusPointsBalance: Int64
    ) {
        self.paymentID = paymentID
        self.sessionID = sessionID
        self.merchantName = merchantName
        self.amountMinorUnits = amountMinorUnits
        self.tipMinorUnits = tipMinorUnits
        self.currency = currency
        self.reference = reference
        self.settledAt = settledAt
        self.bonusPointsEarned = bonusPointsEarned
        self.bonusPointsBalance = bonusPointsBalance
    }
}

/// A signed request (a payment's confirmation, a redemption) the wallet sent without an answer
/// yet, as stored bytes.
public struct StoredPendingPayment: Sendable, Equatable {
    public let paymentID: [UInt8]
    /// The encoded `SessionMessage`, exactly as sent.
    public let request: [UInt8]
    public let terminalKeyID: [UInt8]
    public let terminalAddress: String
    public let merchantName: String
    public let createdAt: Int64

    public init(
        paymentID: [UInt8], request: [UInt8], terminalKeyID: [UInt8], terminalAddress: String, merchantName: String,
        createdAt: Int64
    ) {
        self.paymentID = paymentID
        self.request = request
        self.terminalKeyID = terminalKeyID
        self.terminalAddress = terminalAddress
        self.merchantName = merchantName
        self.createdAt = createdAt
    }
}

/// The wallet's own durable store: receipts and pending payments, in SQLite (synced commits), so a
/// pending payment id survives the wallet program ending.
public final class WalletStore: Sendable {
    public let database: SQLiteDatabase

    /// The wallet store's schema history (see `SchemaMigrator`).
    public static let schema = SchemaMigrator(
        store: "wallet store",
        steps: [
            SchemaStep(
                version: 1, name: "receipts and pending payments",
                sql: """
                    CREATE TABLE receipts(
                        payment_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, merchant TEXT NOT NULL,
                        amount INTEGER NOT NULL, tip INTEGER NOT NULL, currency TEXT NOT NULL, reference INTEGER NOT NULL,
                        settled_at INTEGER NOT NULL, bonus_earned INTEGER NOT NULL, bonus_balance INTEGER NOT NULL);
                    CREATE TABLE pending(
                        payment_id BLOB PRIMARY KEY, request BLOB NOT NULL, terminal_key_id BLOB NOT NULL,
                        terminal_address TEXT NOT NULL, merchant TEXT NOT NULL, created_at INTEGER NOT NULL);
                    """),
            // Whether a receipt is an "accepted offline" one; older receipts were all settled by
            // a server or the ledger (0).
            SchemaStep(
                version: 2, name: "receipts.accepted_offline",
                sql: """
                    ALTER TABLE receipts ADD COLUMN accepted_offline INTEGER NOT NULL DEFAULT 0
                        CHECK (accepted_offline IN (0, 1));
                    """),
        ],
        versionBeforeRecording: { (database) throws(DatabaseError) -> Int? in
            // A store from before `schema_migrations` kept no version: its receipts table says
            // which of the two schemas it has.
            guard try SchemaMigrator.hasTable("receipts", in: database) else { return nil }
            let columns = try database.query("SELECT name FROM pragma_table_info('receipts')")
                .map { (row) throws(DatabaseError) in try row.text("name") }
            return columns.contains("accepted_offline") ? 2 : 1
        })

    public init(path: String) throws(DatabaseError) {
        database = try SQLiteDatabase(path: path)
        try Self.schema.migrate(database)
    }

    public func savePending(_ payment: StoredPendingPayment) throws(DatabaseError) {
        try database.query(
            """
            INSERT OR REPLACE INTO pending(payment_id, request, terminal_key_id, terminal_address, merchant, created_at)
            VALUES (?, ?, ?, ?, ?, ?)
            """,
            [
                .blob(payment.paymentID), .blob(payment.request), .blob(payment.terminalKeyID),
                .text(payment.terminalAddress),
                .text(payment.merchantName), .integer(payment.createdAt),
            ])
    }

    /// Not synced (see `resolvePending`).
    public func removePending(_ paymentID: [UInt8]) throws(DatabaseError) {
        try database.transaction(synced: false) { (db) throws(DatabaseError) in
            try db.query("DELETE FROM pending WHERE payment_id = ?", [.blob(paymentID)])
        }
    }

    public func pending() throws(DatabaseError) -> [StoredPendingPayment] {
        try database.query("SELECT * FROM pending ORDER BY created_at").map { (row) throws(DatabaseError) in
            StoredPendingPayment(
                paymentID: try row.bytes("payment_id"), request: try row.bytes("request"),
                terminalKeyID: try row.bytes("terminal_key_id"), terminalAddress: try row.text("terminal_address"),
                merchantName: try row.text("merchant"), createdAt: try row.integer("created_at"))
        }
    }

    /// Stores a receipt the app keeps beside its pending request's end. Committed but not synced,
    /// like `resolvePending`: the receipt is already on record there, or (if that write failed)
    /// its request is still pending and the wallet asks for it again by payment id. A synced
    /// commit here was a second one for every payment of `horizon-wallet`.
    public func saveReceipt(_ receipt: StoredReceipt) throws(DatabaseError) {
        try database.transaction(synced: false) { (db) throws(DatabaseError) in try Self.insert(receipt, in: db) }
    }

    /// Ends a pending request: its receipt (if it went through) is stored and the request removed
    /// in one transaction, so no crash can leave an executed payment with neither a pending
    /// request nor a receipt on record. Committed but not synced: a power cut that takes it
    /// leaves the request pending (the synced `savePending`), and the wallet asks for its answer
    /// again by payment id, which the terminal and the server keep.
    public func resolvePending(_ paymentID: [UInt8], receipt: StoredReceipt?) throws(DatabaseError) {
        try database.transaction(synced: false) { (db) throws(DatabaseError) in
            if let receipt { try Self.insert(receipt, in: db) }
            try db.query("DELETE FROM pending WHERE payment_id = ?", [.blob(paymentID)])
        }
    }

    private static func insert(_ receipt: StoredReceipt, in db: SQLiteDatabase.Transaction) throws(DatabaseError) {
        try db.query(
            """
            INSERT OR REPLACE INTO receipts(payment_id, session_id, merchant, amount, tip, currency, reference,
                settled_at, bonus_earned, bonus_balance, accepted_offline) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(receipt.paymentID), .text(receipt.sessionID), .text(receipt.merchantName),
                .integer(receipt.amountMinorUnits), .integer(receipt.tipMinorUnits), .text(receipt.currency),
                .integer(Int64(bitPattern: receipt.reference)), .integer(receipt.settledAt),
                .integer(receipt.bonusPointsEarned), .integer(receipt.bonusPointsBalance),
                .integer(receipt.acceptedOffline == true ? 1 : 0),
            ])
    }

    /// Receipts, newest first.
    public func receipts() throws(DatabaseError) -> [StoredReceipt] {
        try database.query("SELECT * FROM receipts ORDER BY settled_at DESC, rowid DESC").map {
            (row) throws(DatabaseError) in
            var receipt = StoredReceipt(
                paymentID: try row.text("payment_id"), sessionID: try row.text("session_id"),
                merchantName: try row.text("merchant"), amountMinorUnits: try row.integer("amount"),
                tipMinorUnits: try row.integer("tip"), currency: try row.text("currency"),
                reference: UInt64(bitPattern: try row.integer("reference")), settledAt: try row.integer("settled_at"),
                bonusPointsEarned: try row.integer("bonus_earned"), bonusPointsBalance: try row.integer("bonus_balance")
            )
            if try row.integer("accepted_offline") == 1 { receipt.acceptedOffline = true }
            return receipt
        }
    }
}
