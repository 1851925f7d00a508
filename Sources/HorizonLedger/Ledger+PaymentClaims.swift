import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// A payment id's claim: who holds the id and how it pays (`payment_claims`). A card payment
/// claims its id before the card processor is called; every execution inserts or checks the
/// claim in its own transaction, so one id is paid one way only, on any number of processes.
public struct PaymentClaim: Sendable {
    public enum State: String, Sendable, Equatable {
        /// Claimed by a card payment, not executed yet (the card may have been charged).
        case open
        /// Its transaction is stored.
        case settled
        /// Recovery found nothing charged: the same Confirm may claim it again.
        case closed
        /// Recovery is refunding an abandoned charge.
        case refunding
        /// Recovery refunded the charge and stored a decline for the payment id.
        case refunded
    }

    public let paymentID: PaymentID
    public let merchantID: MerchantID
    public let walletKey: PublicKeyBytes
    /// The paying wallet, for a card claim (nil when the ledger did not know it yet).
    public let walletID: WalletID?
    /// The card that pays; nil for the balance, a redemption or an offline payment.
    public let cardID: PaymentCardID?
    public let contentDigest: [UInt8]
    public let amount: Money
    public let tip: Money
    public let state: State
    public let createdAt: UnixTime
    public let updatedAt: UnixTime

    let record: Ledger.Record
}

/// What a card payment's claim on its payment id found.
public enum PaymentClaimOutcome: Sendable, Equatable {
    /// The id is this Confirm's (claimed now, or by an earlier attempt of the same Confirm): the
    /// card may be charged, or its charge looked up.
    case claimed
    /// The id was executed already: its stored result answers (or the retry conflicts); nothing
    /// may be charged.
    case executed
    /// Recovery is refunding this claim's abandoned charge: retry shortly for its decline.
    case recovering
}

extension Ledger {
    /// Claims a payment id for a card payment before its card is charged, in a transaction of
    /// its own: the id held by another Confirm (the balance, another wallet, another card, other
    /// terms) is `conflictingRetry`, and the processor must not be called.
    public func claimCardPayment(
        _ request: SettlementRequest, card: PaymentCardID, wallet: WalletID, merchant: MerchantID,
        at time: UnixTime = now()
    ) async throws(LedgerError) -> PaymentClaimOutcome {
        let record = Record(payment: request)
        return try await store.transaction(.rowLocking) { db in
            if try await Self.stored(request.paymentID, in: db) != nil { return .executed }
            if try await Self.insertClaim(
                record, merchant: merchant, wallet: wallet, card: card, state: .open, at: time, in: db)
            {
                return .claimed
            }
            guard let claim = try await Self.claim(request.paymentID, in: db) else {
                throw LedgerError.contention(attempts: 1)
            }
            guard claim.contentDigest == request.contentDigest, claim.walletKey == request.walletKey,
                claim.cardID == card, claim.walletID == nil || claim.walletID == wallet,
                claim.merchantID == merchant
            else { throw LedgerError.conflictingRetry(request.paymentID) }
            switch claim.state {
            case .open: return .claimed
            case .closed:
                // Nothing was charged when recovery looked; the same Confirm starts over.
                try await db.query(
                    "UPDATE payment_claims SET state = 'open', created_at = ?, updated_at = ? WHERE payment_id = ?",
                    [.integer(time), .integer(time), .blob(request.paymentID.bytes)])
                return .claimed
            case .settled, .refunded: return .executed
            case .refunding: return .recovering
            }
        }
    }

    /// The claim on a payment id, if any.
    public func paymentClaim(_ id: PaymentID) async throws(LedgerError) -> PaymentClaim? {
        try await store.transaction { db in try await Self.claim(id, in: db) }
    }

    /// Inside an execution's transaction, before its row is stored: takes the payment id for
    /// this way of paying. One statement when the id is free (every payment from the balance);
    /// a card's own open claim is marked settled; anything else holding the id is a conflict.
    static func settleClaim(
        _ record: Record, merchant: MerchantID, wallet: WalletID?, card: PaymentCardID?, at time: UnixTime,
        in db: any SQLTransaction
    ) async throws(LedgerError) {
        if try await insertClaim(
            record, merchant: merchant, wallet: wallet, card: card, state: .settled, at: time, in: db)
        {
            return
        }
        guard let claim = try await claim(record.id, in: db) else { throw LedgerError.contention(attempts: 1) }
        guard claim.contentDigest == record.contentDigest, claim.walletKey == record.walletKey, claim.cardID == card,
            claim.merchantID == merchant
        else { throw LedgerError.conflictingRetry(record.id) }
        switch claim.state {
        case .open, .closed:
            let updated = try await db.query(
                """
                UPDATE payment_claims SET state = 'settled', updated_at = ?
                WHERE payment_id = ? AND state IN ('open', 'closed') RETURNING payment_id
                """, [.integer(time), .blob(record.id.bytes)])
            // Recovery took it meanwhile: the retry finds its decline.
            if updated.isEmpty { throw LedgerError.contention(attempts: 1) }
        case .settled, .refunding, .refunded:
            // The same request executed by another process committed after this transaction
            // looked for a stored row (or recovery holds it): the retry replays what is stored.
            throw LedgerError.contention(attempts: 1)
        }
    }

    /// Inserts the claim unless the id is claimed; whether it was inserted. One statement
    /// either way. PostgreSQL skips a taken id (`ON CONFLICT DO NOTHING`, whose `RETURNING`
    /// says which); a failed statement would end its transaction. SQLite gathers `RETURNING`
    /// rows in a temporary table at every run, so it inserts plainly: a taken id fails that
    /// statement alone, the transaction goes on, and the stored claim is what took the id.
    static func insertClaim(
        _ record: Record, merchant: MerchantID, wallet: WalletID?, card: PaymentCardID?,
        state: PaymentClaim.State, at time: UnixTime, in db: any SQLTransaction
    ) async throws(LedgerError) -> Bool {
        let insert = """
            INSERT INTO payment_claims(payment_id, merchant_id, wallet_key, wallet_id, card_id, session_id,
                terminal_key_id, transaction_type, item, quantity, amount, tip, currency, register_user,
                content_digest, state, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        let values: [SQLValue] = [
            .blob(record.id.bytes), .text(merchant.rawValue), .blob(record.walletKey.bytes),
            wallet.map { .text($0.rawValue) } ?? .null, card.map { .text($0.rawValue) } ?? .null,
            .integer(Int64(bitPattern: record.sessionID.rawValue)), .blob(record.terminalKeyID.bytes),
            .integer(Int64(record.transactionType.rawValue)), .text(record.item), .integer(record.quantity),
            .integer(record.amount.minorUnits), .integer(record.tip.minorUnits), .text(record.amount.currency.code),
            .text(record.registerUser), .blob(record.contentDigest), .text(state.rawValue), .integer(time),
            .integer(time),
        ]
        switch db.dialect {
        case .postgres:
            return
                !(try await db.query(
                    insert + " ON CONFLICT (payment_id) DO NOTHING RETURNING payment_id", values
                ).isEmpty)
        case .sqlite:
            do {
                _ = try await db.query(insert, values)
                return true
            } catch .database(let reason) {
                // Only a taken id is the answer "claimed"; any other failure is reported.
                guard try await claim(record.id, in: db) != nil else { throw LedgerError.database(reason) }
                return false
            }
        }
    }

    static func claim(_ id: PaymentID, in db: any SQLTransaction) async throws(LedgerError) -> PaymentClaim? {
        guard
            let row = try await db.query(
                "SELECT * FROM payment_claims WHERE payment_id = ?\(db.forUpdate)", [.blob(id.bytes)]
            ).first
        else { return nil }
        return try decodeClaim(row)
    }

    static func decodeClaim(_ row: SQLRow) throws(LedgerError) -> PaymentClaim {
        guard let paymentID = try? PaymentID(bytes: try row.bytes("payment_id")) else {
            throw .corruptRow(column: "payment_claims.payment_id", reason: "not \(PaymentID.byteCount) bytes")
        }
        guard let walletKey = try? PublicKeyBytes(bytes: try row.bytes("wallet_key")) else {
            throw .corruptRow(column: "payment_claims.wallet_key", reason: "not an uncompressed P-256 public key")
        }
        guard let terminalKeyID = try? TerminalKeyID(bytes: try row.bytes("terminal_key_id")) else {
            throw .corruptRow(column: "payment_claims.terminal_key_id", reason: "not \(TerminalKeyID.byteCount) bytes")
        }
        let rawSession = try row.integer("session_id")
        guard let sessionID = SessionID(rawValue: UInt64(bitPattern: rawSession)) else {
            throw .corruptRow(column: "payment_claims.session_id", reason: "zero")
        }
        let rawType = try row.integer("transaction_type")
        guard let type = UInt8(exactly: rawType).flatMap(TransactionType.init(rawValue:)) else {
            throw .corruptRow(column: "payment_claims.transaction_type", reason: "\(rawType) is not a transaction type")
        }
        let stateText = try row.text("state")
        guard let state = PaymentClaim.State(rawValue: stateText) else {
            throw .corruptRow(column: "payment_claims.state", reason: "unknown value \(stateText)")
        }
        let currency = try currency(row.text("currency"), column: "payment_claims.currency")
        let amount = try money(row.integer("amount"), currency, column: "payment_claims.amount")
        let tip = try money(row.integer("tip"), currency, column: "payment_claims.tip")
        let digest = try row.bytes("content_digest")
        let record = Record(
            id: paymentID, sessionID: sessionID, walletKey: walletKey, terminalKeyID: terminalKeyID,
            transactionType: type, item: try row.text("item"), quantity: try row.integer("quantity"), amount: amount,
            tip: tip, registerUser: try row.text("register_user"), contentDigest: digest)
        return PaymentClaim(
            paymentID: paymentID, merchantID: MerchantID(rawValue: try row.text("merchant_id")), walletKey: walletKey,
            walletID: try row.optionalText("wallet_id").map(WalletID.init(rawValue:)),
            cardID: try row.optionalText("card_id").map(PaymentCardID.init(rawValue:)), contentDigest: digest,
            amount: amount, tip: tip, state: state, createdAt: try row.integer("created_at"),
            updatedAt: try row.integer("updated_at"), record: record)
    }

    // MARK: Recovery of abandoned card claims

    /// Card claims that were not executed within `grace` seconds of being claimed (the server
    /// stopped between the processor's charge and the ledger's commit, or the terminal gave up),
    /// and recoveries that stalled as long: what `beginRecovery` may take, oldest first.
    public func abandonedCardClaims(at time: UnixTime, grace: Int64, limit: Int = 100)
        async throws(LedgerError) -> [PaymentClaim]
    {
        try await store.transaction { db in
            var claims: [PaymentClaim] = []
            for row in try await db.query(
                """
                SELECT * FROM payment_claims
                WHERE (state = 'open' OR state = 'refunding') AND updated_at < ? AND card_id IS NOT NULL
                ORDER BY updated_at LIMIT ?
                """, [.integer(time - grace), .integer(Int64(limit))])
            {
                claims.append(try Self.decodeClaim(row))
            }
            return claims
        }
    }

    /// Takes an abandoned claim for recovery (state 'refunding'), unless its payment was executed
    /// meanwhile or someone else took it within `grace`: the claim, or nil when it is not to be
    /// recovered (now). An execution that comes later finds the claim taken and cannot approve.
    public func beginRecovery(of id: PaymentID, at time: UnixTime, grace: Int64) async throws(LedgerError)
        -> PaymentClaim?
    {
        try await store.transaction(.rowLocking) { db in
            guard let claim = try await Self.claim(id, in: db), claim.cardID != nil,
                claim.state == .open || claim.state == .refunding, claim.updatedAt < time - grace
            else { return nil }
            if try await Self.stored(id, in: db) != nil {
                try await db.query(
                    "UPDATE payment_claims SET state = 'settled', updated_at = ? WHERE payment_id = ?",
                    [.integer(time), .blob(id.bytes)])
                return nil
            }
            try await db.query(
                "UPDATE payment_claims SET state = 'refunding', updated_at = ? WHERE payment_id = ?",
                [.integer(time), .blob(id.bytes)])
            return try await Self.claim(id, in: db)
        }
    }

    /// Recovery found nothing charged under the claim: it is closed (the same Confirm may claim
    /// it again; nothing else may).
    public func closeRecoveredClaim(_ id: PaymentID, at time: UnixTime) async throws(LedgerError) {
        try await store.transaction { db in
            try await db.query(
                "UPDATE payment_claims SET state = 'closed', updated_at = ? WHERE payment_id = ? AND state = 'refunding'",
                [.integer(time), .blob(id.bytes)])
        }
    }

    /// Recovery could not finish (the processor did not answer): the claim waits for the next run.
    public func releaseRecoveredClaim(_ id: PaymentID, at time: UnixTime) async throws(LedgerError) {
        try await store.transaction { db in
            try await db.query(
                "UPDATE payment_claims SET state = 'open', updated_at = ? WHERE payment_id = ? AND state = 'refunding'",
                [.integer(time), .blob(id.bytes)])
        }
    }

    /// Recovery refunded the claim's charge: the payment id's decline is stored, and every retry
    /// of the payment gets it.
    public func storeRecoveredDecline(_ id: PaymentID, reason: String, at time: UnixTime) async throws(LedgerError)
        -> SettlementResult?
    {
        try await store.transaction(.rowLocking) { db in
            guard let claim = try await Self.claim(id, in: db), claim.state == .refunding else { return nil }
            if let stored = try await Self.stored(id, in: db) { return stored.transaction.result }
            let execution = Execution.declined(.declined, reason, wallet: claim.walletID)
            _ = try await Self.insert(claim.record, execution, merchant: claim.merchantID, at: time, in: db)
            try await db.query(
                "UPDATE payment_claims SET state = 'refunded', updated_at = ? WHERE payment_id = ?",
                [.integer(time), .blob(id.bytes)])
            return SettlementResult(
                paymentID: id, sessionID: claim.record.sessionID, amount: claim.amount, tip: claim.tip,
                outcome: execution.outcome, settledAt: time, transactionType: .payment, item: "", quantity: 0)
        }
    }
}

// MARK: The gateway's replay window

extension Ledger {
    /// Records a sealed request the gateway opened, by its encapsulated key, remembered until
    /// `expiresAt`; false when it was recorded before and has not expired (a replay). One
    /// statement: the primary key decides, between any number of processes and across restarts.
    public func recordGatewayRequest(_ key: [UInt8], expiresAt: UnixTime, at time: UnixTime = now())
        async throws(LedgerError) -> Bool
    {
        try await store.transaction(.singleStatement) { db in
            !(try await db.query(
                """
                INSERT INTO gateway_replays(request_key, expires_at) VALUES (?, ?)
                ON CONFLICT (request_key) DO UPDATE SET expires_at = excluded.expires_at
                WHERE gateway_replays.expires_at < ?
                RETURNING request_key
                """, [.blob(key), .integer(expiresAt), .integer(time)]
            ).isEmpty)
        }
    }

    /// Forgets the sealed requests whose window has passed (their date check refuses them).
    public func pruneGatewayReplays(at time: UnixTime = now()) async throws(LedgerError) {
        try await store.transaction(.singleStatement) { db in
            try await db.query("DELETE FROM gateway_replays WHERE expires_at < ?", [.integer(time)])
        }
    }
}
