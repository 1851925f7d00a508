import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// Payments and redemptions, executed exactly once per id (Stripe's idempotency rules): the
/// first result, approval or decline, is stored with its terms and returned to every retry; a
/// retry with other terms is refused as a conflict; concurrent requests with one id execute once,
/// because the stored row is read and written in one transaction and `payment_id` is UNIQUE.
extension Ledger {
    /// Settles one confirmed payment at `merchant`: debits the wallet (never below zero),
    /// credits the merchant, earns bonus points; or stores the decline.
    public func settle(_ request: SettlementRequest, merchant: MerchantID, at time: UnixTime = now())
        async throws(LedgerError) -> SettlementResult
    {
        switch try await settle(request, merchant: merchant, at: time, admission: nil) {
        case .executed(let result): return result
        case .refused: throw .database("a payment without request checks was refused by them")
        }
    }

    /// Settles one confirmed payment as `settle(_:merchant:at:)` does, in the same transaction
    /// as the checks of the signed request that carries it: its nonce is recorded and its
    /// signing key counted together with the payment, in one commit. A replayed or over-limit
    /// request executes nothing (an over-limit one still uses its nonce and counts, as a
    /// refused request does); a transaction that fails records neither, and the caller checks
    /// the request on its own then.
    public func settle(
        _ request: SettlementRequest, merchant: MerchantID, at time: UnixTime = now(),
        admitting admission: RequestAdmission
    ) async throws(LedgerError) -> Admitted<SettlementResult> {
        try await purgeNoncesIfDue(window: admission.nonceWindow, at: admission.time)
        return try await settle(request, merchant: merchant, at: time, admission: admission)
    }

    private func settle(
        _ request: SettlementRequest, merchant: MerchantID, at time: UnixTime, admission: RequestAdmission?
    ) async throws(LedgerError) -> Admitted<SettlementResult> {
        let record = Record(payment: request)
        let enrollment = options.enrollment
        let pinlessLimit = options.pinlessPaymentLimit
        // Row locks, not SERIALIZABLE: every payment credits the merchant's one account row,
        // which SERIALIZABLE would let only one transaction at a time update (the others abort
        // and retry). `executePayment` locks what it decides on; see `TransactionIsolation`.
        return try await store.transaction(.rowLocking) { db in
            if let admission, let refusal = try await Self.admit(admission, in: db) { return .refused(refusal) }
            return .executed(
                try await Self.runOnce(
                    record, merchant: merchant, at: time,
                    sameTerms: { stored in Self.isSamePayment(stored, request) },
                    execute: { (merchant, db) throws(LedgerError) in
                        try await Self.executePayment(
                            request, at: merchant, enrollment: enrollment, pinlessLimit: pinlessLimit, time: time,
                            in: db)
                    }, in: db))
        }
    }

    /// Redeems bonus points, this period's gold benefit or a coupon at `merchant`.
    public func redeem(_ request: RedemptionRequest, merchant: MerchantID, at time: UnixTime = now())
        async throws(LedgerError) -> SettlementResult
    {
        let record = Record(
            id: request.redemptionID, sessionID: request.sessionID, walletKey: request.walletKey,
            terminalKeyID: request.terminalKeyID, transactionType: request.transactionType, item: request.item,
            quantity: request.quantity, amount: request.value, tip: .zero(request.value.currency), registerUser: "",
            contentDigest: request.contentDigest)
        return try await executeOnce(
            record, merchant: merchant, at: time,
            sameTerms: { stored in
                stored.contentDigest == request.contentDigest && stored.transaction.walletKey == request.walletKey
                    && stored.transaction.result.transactionType == request.transactionType
                    && stored.transaction.result.sessionID == request.sessionID
                    && stored.transaction.result.item == request.item
                    && stored.transaction.result.quantity == request.quantity
            },
            execute: { (merchant, db) throws(LedgerError) in
                try await Self.executeRedemption(request, at: merchant, time: time, in: db)
            })
    }

    /// The stored result for a payment or redemption id, if it was executed.
    public func result(for id: PaymentID) async throws(LedgerError) -> SettlementResult? {
        try await transaction(for: id)?.result
    }

    /// The stored transaction for a payment or redemption id, if it was executed.
    public func transaction(for id: PaymentID) async throws(LedgerError) -> LedgerTransaction? {
        try await store.transaction { db in try await Self.stored(id, in: db)?.transaction }
    }

    /// A merchant's transactions, newest first; `before` pages on by reference.
    public func transactions(of merchant: MerchantID, limit: Int = 50, before: Int64? = nil)
        async throws(LedgerError) -> [LedgerTransaction]
    {
        guard (1...1000).contains(limit) else { throw .invalidArgument("a page holds 1 to 1000 transactions") }
        return try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            var result: [LedgerTransaction] = []
            for row in try await db.query(
                "SELECT * FROM transactions WHERE merchant_id = ? AND reference < ? ORDER BY reference DESC LIMIT ?",
                [.text(merchant.rawValue), .integer(before ?? Int64.max), .integer(Int64(limit))])
            {
                result.append(try Self.decodeTransaction(row).transaction)
            }
            return result
        }
    }

    /// How many transactions carry this id: 0 or 1, by the UNIQUE constraint (for tests and audits).
    public func executionCount(of id: PaymentID) async throws(LedgerError) -> Int {
        try await store.transaction { db in
            let row = try await db.query(
                "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM transactions WHERE payment_id = ?", [.blob(id.bytes)]
            ).first
            return Int(try row?.integer("n") ?? 0)
        }
    }

    /// Whether a stored transaction is this payment: a retry must be the same payment in every
    /// term, not only the same digest. Online and offline submissions of one payment compare
    /// equal (a terminal that timed out online may forward the same payment offline).
    static func isSamePayment(_ stored: Stored, _ request: SettlementRequest) -> Bool {
        stored.contentDigest == request.contentDigest && stored.transaction.walletKey == request.walletKey
            && stored.transaction.result.transactionType == .payment
            && stored.transaction.result.sessionID == request.sessionID
            && stored.transaction.result.amount == request.amount && stored.transaction.result.tip == request.tip
    }

    // MARK: Exactly once

    /// The columns every executed payment or redemption writes.
    struct Record: Sendable {
        let id: PaymentID
        let sessionID: SessionID
        let walletKey: PublicKeyBytes
        let terminalKeyID: TerminalKeyID
        let transactionType: TransactionType
        let item: String
        let quantity: Int64
        let amount: Money
        let tip: Money
        let registerUser: String
        let contentDigest: [UInt8]
        /// The daily token and the time of an offline acceptance; nil when online.
        var offlineTokenID: [UInt8]? = nil
        var offlineAcceptedAt: UnixTime? = nil
    }

    /// What a rule decided, and what it touched.
    struct Execution: Sendable {
        let outcome: SettlementOutcome
        let walletID: WalletID?
        let entryID: Int64?
        /// Whether an offline payment settled within the wallet's offline guarantee.
        var offlineGuaranteed = false
        /// False for a decline that is answered but leaves no row: a key nobody registered is
        /// anyone's to make, and its refusals must not fill the merchant's transactions.
        var isStored = true

        /// A decline to store: no money moved.
        static func declined(_ code: ErrorCode, _ reason: String, wallet: WalletID? = nil) -> Execution {
            Execution(outcome: .declined(code: code, reason: reason), walletID: wallet, entryID: nil)
        }

        /// A decline for a key no wallet ever registered: answered, not stored (a retry asks again).
        static func unknownKey(_ reason: String) -> Execution {
            var execution = declined(.unknownWallet, reason)
            execution.isStored = false
            return execution
        }
    }

    /// A payment's terms checked against the merchant before any wallet is looked at: its total,
    /// or the decline to store.
    enum CheckedTerms {
        case total(Money)
        case declined(Execution)
    }

    /// The rules every payment's terms meet, whatever pays it (the balance or a card): a positive
    /// amount, amount and tip in the merchant's currency, and a total within range.
    static func checkTerms(_ request: SettlementRequest, at merchant: Merchant) -> CheckedTerms {
        guard request.amount.minorUnits > 0 else {
            return .declined(.declined(.invalidAmount, "the amount must be greater than zero"))
        }
        for money in [request.amount, request.tip] where money.currency != merchant.currency {
            return .declined(
                .declined(
                    .unsupportedCurrency,
                    "this merchant settles in \(merchant.currency.code), not \(money.currency.code)"))
        }
        guard let total = try? request.amount.adding(request.tip) else {
            return .declined(.declined(.invalidAmount, "amount plus tip is out of range"))
        }
        return .total(total)
    }

    /// The bonus points a payment of `amount` earns `wallet` at `merchant`, whatever pays it:
    /// the merchant's rule per whole unit of the amount, saturating (points are a reward, and an
    /// absurd rule must not crash a payment); none while the wallet has left the program.
    static func pointsEarned(by amount: Money, _ wallet: WalletID, at merchant: Merchant, in db: any SQLTransaction)
        async throws(LedgerError) -> Int64
    {
        guard try await bonusMembershipState(wallet, merchant.id, in: db) != .left else { return 0 }
        let unit = merchant.currency.minorUnitsPerMajorUnit
        let (product, overflow) = (amount.minorUnits / unit).multipliedReportingOverflow(
            by: merchant.bonusPointsPerMajorUnit)
        return overflow ? Money.maximumMinorUnits : min(product, Money.maximumMinorUnits)
    }

    struct Stored: Sendable {
        let transaction: LedgerTransaction
        let contentDigest: [UInt8]
    }

    /// Replays the stored result (same terms, same merchant), refuses a conflicting retry, or
    /// runs `execute` and stores its outcome, all in one transaction. Exactly once holds at any
    /// isolation: `payment_id` is UNIQUE, so of two transactions that both found no stored row
    /// one inserts and the other fails (contention), and its retry replays the first's row.
    func executeOnce(
        _ record: Record, merchant merchantID: MerchantID, at time: UnixTime,
        isolation: TransactionIsolation = .serializable, card: PaymentCardID? = nil,
        sameTerms: @escaping @Sendable (Stored) -> Bool,
        execute: @escaping @Sendable (Merchant, any SQLTransaction) async throws(LedgerError) -> Execution
    ) async throws(LedgerError) -> SettlementResult {
        try await store.transaction(isolation) { db in
            try await Self.runOnce(
                record, merchant: merchantID, at: time, card: card, sameTerms: sameTerms, execute: execute, in: db)
        }
    }

    /// The body of `executeOnce`, inside the caller's transaction.
    static func runOnce(
        _ record: Record, merchant merchantID: MerchantID, at time: UnixTime, card: PaymentCardID? = nil,
        sameTerms: (Stored) -> Bool,
        execute: (Merchant, any SQLTransaction) async throws(LedgerError) -> Execution, in db: any SQLTransaction
    ) async throws(LedgerError) -> SettlementResult {
        if let stored = try await Self.stored(record.id, in: db) {
            guard stored.transaction.merchantID == merchantID, sameTerms(stored) else {
                throw LedgerError.conflictingRetry(record.id)
            }
            return stored.transaction.result
        }
        let merchant = try await Self.merchant(merchantID, in: db)
        // A payment id that is a payment intent's pays that intent, or is refused unexecuted.
        let execution: Execution
        var orderReference: String? = nil
        let claim = try await Self.claimIntent(record, merchant: merchantID, at: time, in: db)
        if case .refused(let refusal) = claim {
            execution = refusal
        } else {
            if case .claimed(let reference) = claim { orderReference = reference }
            execution = try await execute(merchant, db)
            if !execution.isStored { try await Self.releaseIntent(record.id, in: db) }
        }
        guard execution.isStored else {
            return SettlementResult(
                paymentID: record.id, sessionID: record.sessionID, amount: record.amount, tip: record.tip,
                outcome: execution.outcome, settledAt: time, transactionType: record.transactionType,
                item: record.item, quantity: record.quantity)
        }
        // The id's claim, in this transaction: a card payment that claimed the id first (or
        // the balance, if this is the card) makes this a conflict before anything commits.
        try await Self.settleClaim(
            record, merchant: merchantID, wallet: execution.walletID, card: card, at: time, in: db)
        let reference = try await Self.insert(
            record, execution, merchant: merchantID, orderReference: .known(orderReference), at: time, in: db)
        try await Self.recordPaymentEvents(record.id, merchant: merchantID, at: time, in: db)
        let outcome: SettlementOutcome
        if case .approved(_, let earned, let balance) = execution.outcome {
            outcome = .approved(
                reference: UInt64(reference), bonusPointsEarned: earned, bonusPointsBalance: balance)
        } else {
            outcome = execution.outcome
        }
        return SettlementResult(
            paymentID: record.id, sessionID: record.sessionID, amount: record.amount, tip: record.tip,
            outcome: outcome, settledAt: time, transactionType: record.transactionType, item: record.item,
            quantity: record.quantity)
    }

    /// A payment's order reference, from its payment intent: known already when the intent was
    /// read in this transaction, or read when the row is written.
    enum OrderReference {
        case known(String?)
        case fromIntent
    }

    static func insert(
        _ record: Record, _ execution: Execution, merchant: MerchantID,
        orderReference knownReference: OrderReference = .fromIntent, at time: UnixTime, in db: any SQLTransaction
    ) async throws(LedgerError) -> Int64 {
        var code: SQLValue = .null
        var reason: SQLValue = .null
        var earned: Int64 = 0
        var balance: Int64 = 0
        switch execution.outcome {
        case .approved(_, let bonusEarned, let bonusBalance):
            earned = bonusEarned
            balance = bonusBalance
        case .declined(let errorCode, let text):
            code = .integer(Int64(errorCode.rawValue))
            reason = .text(text)
        }
        // The offline columns are all set for a payment accepted offline, all NULL otherwise.
        var offline: [SQLValue] = [.null, .null, .null]
        if let tokenID = record.offlineTokenID, let acceptedAt = record.offlineAcceptedAt {
            offline = [.blob(tokenID), .integer(acceptedAt), .integer(execution.offlineGuaranteed ? 1 : 0)]
        }
        // A payment made for one of this merchant's intents carries the intent's order reference.
        let orderReference: SQLValue
        switch knownReference {
        case .known(let reference): orderReference = reference.map { .text($0) } ?? .null
        case .fromIntent:
            orderReference =
                try await db.query(
                    "SELECT order_reference FROM payment_intents WHERE payment_id = ? AND merchant_id = ?",
                    [.blob(record.id.bytes), .text(merchant.rawValue)]
                ).first.map { row throws(LedgerError) in .text(try row.text("order_reference")) } ?? .null
        }
        return try await db.insert(
            """
            INSERT INTO transactions(payment_id, merchant_id, transaction_type, item, quantity, session_id,
                wallet_key, wallet_id, terminal_key_id, amount, tip, currency, register_user, content_digest,
                outcome, decline_code, decline_reason, bonus_earned, bonus_balance, entry_id, settled_at,
                offline_token_id, offline_accepted_at, offline_guaranteed, order_reference)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .blob(record.id.bytes), .text(merchant.rawValue), .integer(Int64(record.transactionType.rawValue)),
                .text(record.item), .integer(record.quantity), .integer(Int64(bitPattern: record.sessionID.rawValue)),
                .blob(record.walletKey.bytes), execution.walletID.map { .text($0.rawValue) } ?? .null,
                .blob(record.terminalKeyID.bytes), .integer(record.amount.minorUnits), .integer(record.tip.minorUnits),
                .text(record.amount.currency.code), .text(record.registerUser), .blob(record.contentDigest),
                .text(execution.outcome.isApproved ? "approved" : "declined"), code, reason, .integer(earned),
                .integer(balance), execution.entryID.map { .integer($0) } ?? .null, .integer(time),
            ] + offline + [orderReference], returning: "reference")
    }

    static func stored(_ id: PaymentID, in db: any SQLTransaction) async throws(LedgerError) -> Stored? {
        guard let row = try await db.query("SELECT * FROM transactions WHERE payment_id = ?", [.blob(id.bytes)]).first
        else { return nil }
        return try decodeTransaction(row)
    }

    /// A stored transaction, every column checked: a value this version cannot read is an error.
    static func decodeTransaction(_ row: SQLRow) throws(LedgerError) -> Stored {
        let paymentIDBytes = try row.bytes("payment_id")
        guard let paymentID = try? PaymentID(bytes: paymentIDBytes) else {
            throw .corruptRow(column: "payment_id", reason: "not \(PaymentID.byteCount) bytes")
        }
        let rawSession = try row.integer("session_id")
        guard let sessionID = SessionID(rawValue: UInt64(bitPattern: rawSession)) else {
            throw .corruptRow(column: "session_id", reason: "zero")
        }
        let currency = try currency(row.text("currency"), column: "currency")
        let amount = try money(row.integer("amount"), currency, column: "amount")
        let tip = try money(row.integer("tip"), currency, column: "tip")
        let rawType = try row.integer("transaction_type")
        guard let type = UInt8(exactly: rawType).flatMap(TransactionType.init(rawValue:)) else {
            throw .corruptRow(column: "transaction_type", reason: "\(rawType) is not a transaction type")
        }
        let reference = try row.integer("reference")
        let outcome: SettlementOutcome
        switch try row.text("outcome") {
        case "approved":
            outcome = .approved(
                reference: UInt64(reference), bonusPointsEarned: try row.integer("bonus_earned"),
                bonusPointsBalance: try row.integer("bonus_balance"))
        case "declined":
            let rawCode = try row.integer("decline_code")
            guard let code = UInt16(exactly: rawCode) else {
                throw .corruptRow(column: "decline_code", reason: "\(rawCode) is not an error code")
            }
            outcome = .declined(code: ErrorCode(rawValue: code), reason: try row.text("decline_reason"))
        case let other:
            throw .corruptRow(column: "outcome", reason: "\(other) is neither approved nor declined")
        }
        let walletKeyBytes = try row.bytes("wallet_key")
        guard let walletKey = try? PublicKeyBytes(bytes: walletKeyBytes) else {
            throw .corruptRow(column: "wallet_key", reason: "not an uncompressed P-256 public key")
        }
        let terminalKeyIDBytes = try row.bytes("terminal_key_id")
        guard let terminalKeyID = try? TerminalKeyID(bytes: terminalKeyIDBytes) else {
            throw .corruptRow(column: "terminal_key_id", reason: "not \(TerminalKeyID.byteCount) bytes")
        }
        let result = SettlementResult(
            paymentID: paymentID, sessionID: sessionID, amount: amount, tip: tip, outcome: outcome,
            settledAt: try row.integer("settled_at"), transactionType: type, item: try row.text("item"),
            quantity: try row.integer("quantity"))
        return Stored(
            transaction: LedgerTransaction(
                reference: reference, merchantID: MerchantID(rawValue: try row.text("merchant_id")),
                walletID: try row.optionalText("wallet_id").map(WalletID.init(rawValue:)), walletKey: walletKey,
                terminalKeyID: terminalKeyID, registerUser: try row.text("register_user"), result: result,
                offline: try decodeOffline(row), orderReference: try row.optionalText("order_reference")),
            contentDigest: try row.bytes("content_digest"))
    }

    /// The offline columns: all NULL for an online payment, all set for an offline one.
    static func decodeOffline(_ row: SQLRow) throws(LedgerError) -> OfflineAcceptance? {
        let tokenID = try row.optionalBytes("offline_token_id")
        let acceptedAt = try row.optionalInteger("offline_accepted_at")
        let guaranteed = try row.optionalInteger("offline_guaranteed")
        switch (tokenID, acceptedAt, guaranteed) {
        case (nil, nil, nil): return nil
        case (let tokenID?, let acceptedAt?, let guaranteed?):
            guard tokenID.count == 16 else {
                throw .corruptRow(column: "offline_token_id", reason: "not 16 bytes")
            }
            guard guaranteed == 0 || guaranteed == 1 else {
                throw .corruptRow(column: "offline_guaranteed", reason: "\(guaranteed) is neither 0 nor 1")
            }
            return OfflineAcceptance(tokenID: tokenID, acceptedAt: acceptedAt, guaranteed: guaranteed == 1)
        default:
            throw .corruptRow(column: "offline_token_id", reason: "the offline columns are set in part")
        }
    }

    // MARK: The payment rule

    /// Whether any wallet ever registered this key (revoked or not).
    static func isRegisteredKey(_ key: PublicKeyBytes, in db: any SQLTransaction) async throws(LedgerError) -> Bool {
        try await !db.query("SELECT wallet_id FROM wallet_keys WHERE public_key = ?", [.blob(key.bytes)]).isEmpty
    }

    /// Decides the outcome and moves the money, inside the caller's transaction. In a
    /// `.rowLocking` transaction it locks the wallet's account (and its offline debt) before it
    /// reads the balance, so one wallet's payments, top-ups and refunds take turns; it adds to
    /// the merchant's account and the bonus points relative to their stored values, and credits
    /// the merchant last, so that the row every payment waits for is held shortest.
    static func executePayment(
        _ request: SettlementRequest, at merchant: Merchant, enrollment: WalletEnrollment,
        pinlessLimit: Int64? = nil, time: UnixTime, in db: any SQLTransaction
    ) async throws(LedgerError) -> Execution {
        let total: Money
        switch checkTerms(request, at: merchant) {
        case .declined(var execution):
            // A key nobody registered leaves no row, whatever it was declined for (the sandbox
            // takes every key as a wallet, so it keeps them all).
            if enrollment == .refuseUnknown {
                execution.isStored = try await isRegisteredKey(request.walletKey, in: db)
            }
            return execution
        case .total(let checked): total = checked
        }
        let walletID: WalletID
        if let known = try await activeWalletID(for: request.walletKey, in: db) {
            walletID = known
        } else {
            let keyKnown = try await isRegisteredKey(request.walletKey, in: db)
            switch enrollment {
            case .sandboxOnFirstContact(let startingBalance) where !keyKnown:
                // The sandbox: a new key becomes a wallet funded from the external account, so
                // even demo money is posted and balanced.
                walletID = WalletID.generate()
                try await insertWallet(id: walletID, name: "sandbox wallet", key: request.walletKey, at: time, in: db)
                if startingBalance > 0 {
                    _ = try await fund(
                        walletID, with: money(startingBalance, merchant.currency, column: "starting balance"),
                        kind: "enrollment", at: time, in: db)
                }
            default:
                guard keyKnown else {
                    return .unknownKey("this wallet is not registered with the merchant's Horizon server")
                }
                return .declined(.unknownWallet, "this wallet key was revoked; register the wallet again")
            }
        }
        if let pinlessLimit, total.minorUnits > pinlessLimit, try await isPinless(walletID, in: db) {
            return .declined(
                .declined,
                "this wallet has no PIN: a payment above \(try money(pinlessLimit, merchant.currency, column: "limit")) needs one; set a PIN in the wallet (horizon-wallet pin set) and pay again",
                wallet: walletID)
        }
        let wallet = try await account(.wallet, owner: walletID.rawValue, merchant.currency, locking: true, in: db)
        // An offline debt is owed before anything new is spent: online payments
        // decline until a top-up has repaid it.
        let owed = try await offlineDebt(of: walletID, merchant.currency, in: db)
        if owed.minorUnits > 0 {
            guard wallet.balance - owed.minorUnits >= total.minorUnits else {
                return .declined(
                    .insufficientFunds,
                    "insufficient funds: the wallet owes \(owed) for offline payments; top it up before paying again",
                    wallet: walletID)
            }
        }
        // A wallet funded in another currency only: say that, not "0.00 EUR available".
        guard wallet.balance > 0 || total.minorUnits == 0 else {
            return .declined(
                .insufficientFunds, "this wallet holds no \(merchant.currency.code)", wallet: walletID)
        }
        guard wallet.balance >= total.minorUnits else {
            return .declined(
                .insufficientFunds,
                "insufficient funds: \(total) needed, \(try money(wallet.balance, merchant.currency, column: "balance")) available",
                wallet: walletID)
        }
        let earned = try await pointsEarned(by: request.amount, walletID, at: merchant, in: db)
        let points = try await earnBonusPoints(earned, walletID, merchant.id, in: db)
        let merchantAccount = try await account(.merchant, owner: merchant.id.rawValue, merchant.currency, in: db)
        let entry = try await post(
            "payment",
            [
                Leg(account: wallet.id, currency: merchant.currency, amount: -total.minorUnits),
                Leg(account: merchantAccount.id, currency: merchant.currency, amount: total.minorUnits),
            ], at: time, in: db)
        return Execution(
            outcome: .approved(reference: 0, bonusPointsEarned: earned, bonusPointsBalance: points), walletID: walletID,
            entryID: entry)
    }
}

extension Ledger.Record {
    /// The columns of a payment (no item, no quantity), whatever pays it.
    init(payment request: SettlementRequest) {
        self.init(
            id: request.paymentID, sessionID: request.sessionID, walletKey: request.walletKey,
            terminalKeyID: request.terminalKeyID, transactionType: .payment, item: "", quantity: 0,
            amount: request.amount, tip: request.tip, registerUser: request.registerUser,
            contentDigest: request.contentDigest)
    }
}
