import HorizonCore
import HorizonProtocol

/// Where a payment intent stands, as a POS reads it. The intent records only whether it waits,
/// is being collected, was processed or canceled; the rest comes from the transaction of its
/// payment id (approved or declined) and that payment's refunds.
public enum PaymentIntentStatus: String, Sendable, CaseIterable {
    case requiresCollection = "requires_collection"
    case collecting
    case succeeded
    case declined
    case canceled
    case expired
    case refunded
    case partiallyRefunded = "partially_refunded"
}

/// A payment a merchant's own system asked for. Its payment id is the payment's idempotency key
/// end to end: the terminal that collects it settles exactly that id.
public struct PaymentIntent: Sendable, Equatable {
    public let paymentID: PaymentID
    public let merchantID: MerchantID
    public let orderReference: String
    public let amount: Money
    /// The merchant's own key-value pairs, as the JSON object it sent.
    public let metadata: String
    public let terminalID: TerminalID?
    public let status: PaymentIntentStatus
    public let createdAt: UnixTime
    public let expiresAt: UnixTime
    public let canceledAt: UnixTime?
    /// The payment made for it, once a terminal settled its payment id.
    public let transaction: LedgerTransaction?
    /// How much of that payment was refunded.
    public let refunded: Int64
}

/// A payment intent to create: its terms, and the idempotency key it is created under.
public struct NewPaymentIntent: Sendable {
    public let paymentID: PaymentID
    public let idempotencyKey: String
    /// A digest of the create request's terms: the same key with other terms is a conflict.
    public let requestDigest: [UInt8]
    public let orderReference: String
    public let amount: Money
    public let metadata: String
    public let terminalID: TerminalID?
    public let expiresAt: UnixTime

    public init(
        paymentID: PaymentID, idempotencyKey: String, requestDigest: [UInt8], orderReference: String, amount: Money,
        metadata: String, terminalID: TerminalID?, expiresAt: UnixTime
    ) {
        self.paymentID = paymentID
        self.idempotencyKey = idempotencyKey
        self.requestDigest = requestDigest
        self.orderReference = orderReference
        self.amount = amount
        self.metadata = metadata
        self.terminalID = terminalID
        self.expiresAt = expiresAt
    }
}

/// Why a payment intent could not be created or canceled.
public enum PaymentIntentRefusal: Error, Sendable, Equatable {
    /// The idempotency key was used before with other terms.
    case idempotencyConflict
    /// The intent was collected, canceled or expired: it can no longer be canceled.
    case notCancelable(PaymentIntent)
    /// The terminal is not one of this merchant's active terminals.
    case unknownTerminal
}

extension Ledger {
    /// Creates `intent` for `merchant`, or replays the intent created before under the same
    /// idempotency key with the same terms (`replayed` true). The same key with other terms is
    /// refused (`idempotencyConflict`), and so is a terminal that is not the merchant's.
    public func createPaymentIntent(_ intent: NewPaymentIntent, merchant: MerchantID, at time: UnixTime)
        async throws(LedgerError) -> Result<(intent: PaymentIntent, replayed: Bool), PaymentIntentRefusal>
    {
        try await store.transaction { db in
            if let row = try await db.query(
                "SELECT * FROM payment_intents WHERE merchant_id = ? AND idempotency_key = ?",
                [.text(merchant.rawValue), .text(intent.idempotencyKey)]
            ).first {
                guard try row.bytes("request_digest") == intent.requestDigest else {
                    return .failure(.idempotencyConflict)
                }
                return .success((try await Self.paymentIntent(from: row, at: time, in: db), true))
            }
            _ = try await Self.merchant(merchant, in: db)
            if let terminal = intent.terminalID {
                let active = try await db.query(
                    "SELECT id FROM terminals WHERE id = ? AND merchant_id = ? AND revoked_at IS NULL",
                    [.text(terminal.rawValue), .text(merchant.rawValue)])
                guard !active.isEmpty else { return .failure(.unknownTerminal) }
            }
            try await db.query(
                """
                INSERT INTO payment_intents(payment_id, merchant_id, idempotency_key, request_digest, order_reference,
                    amount, currency, metadata, terminal_id, state, created_at, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'requires_collection', ?, ?)
                """,
                [
                    .blob(intent.paymentID.bytes), .text(merchant.rawValue), .text(intent.idempotencyKey),
                    .blob(intent.requestDigest), .text(intent.orderReference), .integer(intent.amount.minorUnits),
                    .text(intent.amount.currency.code), .text(intent.metadata),
                    intent.terminalID.map { .text($0.rawValue) } ?? .null, .integer(time), .integer(intent.expiresAt),
                ])
            let created = try await Self.paymentIntent(intent.paymentID, of: merchant, at: time, in: db)
            return .success((try created.orThrow(.notFound("payment intent")), false))
        }
    }

    /// `merchant`'s intent with this payment id; nil for none (another merchant's is none).
    public func paymentIntent(_ id: PaymentID, of merchant: MerchantID, at time: UnixTime) async throws(LedgerError)
        -> PaymentIntent?
    {
        try await store.transaction { db in try await Self.paymentIntent(id, of: merchant, at: time, in: db) }
    }

    /// `merchant`'s intents with this order reference, newest first (a reference may be retried).
    public func paymentIntents(reference: String, of merchant: MerchantID, limit: Int = 20, at time: UnixTime)
        async throws(LedgerError) -> [PaymentIntent]
    {
        guard (1...100).contains(limit) else { throw .invalidArgument("a page holds 1 to 100 intents") }
        return try await store.transaction { db in
            var intents: [PaymentIntent] = []
            for row in try await db.query(
                """
                SELECT * FROM payment_intents WHERE merchant_id = ? AND order_reference = ?
                ORDER BY created_at DESC, payment_id LIMIT ?
                """, [.text(merchant.rawValue), .text(reference), .integer(Int64(limit))])
            {
                intents.append(try await Self.paymentIntent(from: row, at: time, in: db))
            }
            return intents
        }
    }

    /// Cancels `merchant`'s intent while no payment was made for it; nil when there is no such
    /// intent. Canceling a canceled intent answers it again; a collected or expired one is refused.
    public func cancelPaymentIntent(_ id: PaymentID, of merchant: MerchantID, at time: UnixTime)
        async throws(LedgerError) -> Result<PaymentIntent, PaymentIntentRefusal>?
    {
        try await store.transaction { db in
            guard let intent = try await Self.paymentIntent(id, of: merchant, at: time, in: db) else { return nil }
            switch intent.status {
            case .canceled: return .success(intent)
            case .requiresCollection, .collecting:
                // Conditional on the state, so a settlement that claimed the intent first wins.
                let canceled = try await db.query(
                    """
                    UPDATE payment_intents SET state = 'canceled', canceled_at = ?
                    WHERE payment_id = ? AND merchant_id = ? AND state IN ('requires_collection', 'collecting')
                    RETURNING payment_id
                    """, [.integer(time), .blob(id.bytes), .text(merchant.rawValue)])
                let now = try await Self.paymentIntent(id, of: merchant, at: time, in: db)
                guard let now else { return nil }
                guard !canceled.isEmpty else { return .failure(.notCancelable(now)) }
                _ = try await Self.recordWebhookEvent(
                    .intentCanceled, merchant: merchant, object: Self.intentObject(now), at: time, in: db)
                return .success(now)
            case .succeeded, .declined, .expired, .refunded, .partiallyRefunded:
                return .failure(.notCancelable(intent))
            }
        }
    }

    /// Marks `merchant`'s waiting intent as being collected by a terminal; false when it is not
    /// waiting (collected, canceled or expired).
    public func startCollecting(_ id: PaymentID, of merchant: MerchantID, at time: UnixTime) async throws(LedgerError)
        -> Bool
    {
        try await store.transaction { db in
            !(try await db.query(
                """
                UPDATE payment_intents SET state = 'collecting'
                WHERE payment_id = ? AND merchant_id = ? AND state = 'requires_collection' AND expires_at > ?
                RETURNING payment_id
                """, [.blob(id.bytes), .text(merchant.rawValue), .integer(time)]
            ).isEmpty)
        }
    }

    /// Before a payment or redemption with an intent's payment id executes: claims the intent
    /// for it (with the order reference the payment's row carries), or the refusal to answer
    /// (not stored, so the intent keeps its state).
    static func claimIntent(_ record: Record, merchant: MerchantID, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> IntentClaim
    {
        guard
            let row = try await db.query(
                "SELECT * FROM payment_intents WHERE payment_id = ?", [.blob(record.id.bytes)]
            ).first
        else { return .none }
        func refused(_ code: ErrorCode, _ reason: String) -> IntentClaim {
            var execution = Execution.declined(code, reason)
            execution.isStored = false
            return .refused(execution)
        }
        guard try row.text("merchant_id") == merchant.rawValue else {
            return refused(.declined, "this payment id belongs to another merchant's payment intent")
        }
        let state = try row.text("state")
        let expiresAt = try row.integer("expires_at")
        switch state {
        case "canceled": return refused(.cancelled, "the payment intent was canceled")
        case "requires_collection" where expiresAt <= time: return refused(.expired, "the payment intent expired")
        case "requires_collection", "collecting": break
        default: return refused(.declined, "the payment intent was already processed")
        }
        guard record.transactionType == .payment, record.amount.minorUnits == (try row.integer("amount")),
            record.amount.currency.code == (try row.text("currency"))
        else {
            return refused(.invalidAmount, "the payment's amount is not its payment intent's")
        }
        let claimed = try await db.query(
            """
            UPDATE payment_intents SET state = 'processed'
            WHERE payment_id = ? AND state IN ('requires_collection', 'collecting') RETURNING payment_id
            """, [.blob(record.id.bytes)])
        guard !claimed.isEmpty else { return refused(.cancelled, "the payment intent was canceled") }
        return .claimed(orderReference: try row.text("order_reference"))
    }

    /// What a payment id found among the payment intents.
    enum IntentClaim {
        /// No intent has this id: an ordinary payment.
        case none
        /// The payment pays this intent, which carries its order reference.
        case claimed(orderReference: String)
        /// The intent refuses the payment (another merchant's, canceled, expired, processed,
        /// another amount): answered, not executed.
        case refused(Execution)
    }

    /// Gives the intent back its state when the payment that claimed it left no row (a decline
    /// for an unknown wallet key: the intent can still be collected).
    static func releaseIntent(_ id: PaymentID, in db: any SQLTransaction) async throws(LedgerError) {
        try await db.query(
            "UPDATE payment_intents SET state = 'collecting' WHERE payment_id = ? AND state = 'processed'",
            [.blob(id.bytes)])
    }

    static func paymentIntent(_ id: PaymentID, of merchant: MerchantID, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> PaymentIntent?
    {
        guard
            let row = try await db.query(
                "SELECT * FROM payment_intents WHERE payment_id = ? AND merchant_id = ?",
                [.blob(id.bytes), .text(merchant.rawValue)]
            ).first
        else { return nil }
        return try await paymentIntent(from: row, at: time, in: db)
    }

    static func paymentIntent(from row: SQLRow, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> PaymentIntent
    {
        let idBytes = try row.bytes("payment_id")
        guard let id = try? PaymentID(bytes: idBytes) else {
            throw .corruptRow(column: "payment_id", reason: "not \(PaymentID.byteCount) bytes")
        }
        let merchant = MerchantID(rawValue: try row.text("merchant_id"))
        let currency = try currency(row.text("currency"), column: "currency")
        let amount = try money(row.integer("amount"), currency, column: "amount")
        let state = try row.text("state")
        let expiresAt = try row.integer("expires_at")
        // The payment made for it decides, whatever the intent recorded.
        var transaction = try await stored(id, in: db)?.transaction
        if transaction?.merchantID != merchant { transaction = nil }
        var refunded: Int64 = 0
        let status: PaymentIntentStatus
        if let transaction {
            refunded = try await refunds(of: id, in: db).map(\.amount.minorUnits).reduce(0, +)
            let total = transaction.result.amount.minorUnits + transaction.result.tip.minorUnits
            if !transaction.result.outcome.isApproved {
                status = .declined
            } else if refunded >= total {
                status = .refunded
            } else {
                status = refunded > 0 ? .partiallyRefunded : .succeeded
            }
        } else {
            switch state {
            case "canceled": status = .canceled
            case "requires_collection" where expiresAt <= time: status = .expired
            case "requires_collection": status = .requiresCollection
            case "collecting", "processed": status = .collecting
            default: throw .corruptRow(column: "state", reason: "\(state) is not a payment intent's state")
            }
        }
        return PaymentIntent(
            paymentID: id, merchantID: merchant, orderReference: try row.text("order_reference"), amount: amount,
            metadata: try row.text("metadata"), terminalID: try row.optionalText("terminal_id").map(TerminalID.init),
            status: status, createdAt: try row.integer("created_at"), expiresAt: expiresAt,
            canceledAt: try row.optionalInteger("canceled_at"), transaction: transaction, refunded: refunded)
    }
}
