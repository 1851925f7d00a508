import HorizonCore
import HorizonProtocol
import HorizonStores

/// A refund's id, chosen by the client (a terminal, the dashboard) before it asks, so that a
/// retry after a lost answer names the same refund: 1 to 64 characters of `A-Z a-z 0-9 . _ : -`.
/// Unique per merchant, not across merchants, so one merchant's ids tell nothing about another's.
public struct RefundID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public static let maximumLength = 64
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// `r_` and 32 random hex digits, for a client that has no id of its own.
    public static func generate() -> RefundID { RefundID(rawValue: "r_" + randomHex()) }

    /// Whether the id has the form above (checked before anything is looked up).
    public var isWellFormed: Bool {
        !rawValue.isEmpty && rawValue.utf8.count <= Self.maximumLength
            && rawValue.unicodeScalars.allSatisfy { scalar in
                scalar.isASCII
                    && (("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                        || ".-_:".unicodeScalars.contains(scalar))
            }
    }
}

/// What a merchant asks to give back: `amount` of payment `paymentID`, under the client's `refundID`.
public struct RefundRequest: Sendable, Equatable {
    public let refundID: RefundID
    public let paymentID: PaymentID
    /// More than zero, in the payment's currency, at most what is left of its amount plus tip.
    public let amount: Money

    public init(refundID: RefundID, paymentID: PaymentID, amount: Money) {
        self.refundID = refundID
        self.paymentID = paymentID
        self.amount = amount
    }
}

/// Where a refund's money goes: back to the payment method the payment came from.
///
/// Every payment the ledger executes today is paid from the wallet's Horizon balance, so every
/// refund goes back to it. This is the seam for card payments: a refund of a
/// card payment is recorded with another destination (stored in `refunds.destination`, with
/// the method's own id in `refunds.destination_reference`), its postings go to the account the
/// card money came from, and the card processor is asked to refund with the refund id as its
/// idempotency key. `Ledger.refundDestination(of:in:)` is where a payment's method is decided.
public enum RefundDestination: String, Sendable, Equatable, Codable {
    /// The wallet's Horizon account in the payment's currency.
    case horizonBalance = "horizon_balance"
    /// The card that paid (`card_payments`): the money leaves through the external
    /// account, `destination_reference` is the card's id, and the server asks the card processor
    /// to refund the charge (`CardRefunds` in HorizonServer).
    case card
}

/// One executed refund, as stored (and as every retry with the same id and terms gets it).
public struct Refund: Sendable, Equatable {
    public let refundID: RefundID
    /// The ledger's running number for refunds.
    public let reference: Int64
    public let paymentID: PaymentID
    public let merchantID: MerchantID
    /// The wallet that paid and gets the money back.
    public let walletID: WalletID
    public let amount: Money
    public let destination: RefundDestination
    /// The payment method's own id at the destination (nil for the Horizon balance).
    public let destinationReference: String?
    /// Bonus points taken back from the wallet for this refund (see `Ledger.refund`).
    public let bonusPointsReversed: Int64
    public let createdAt: UnixTime
}

/// Why a refund was refused; nothing was changed. `code` is stable (the API sends it as the
/// error code), `description` tells a person what to do.
public enum RefundRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// The refund id is empty, too long or has characters other than `A-Z a-z 0-9 . _ : -`.
    case invalidRefundID(String)
    /// The amount is zero (money is never negative).
    case invalidAmount
    /// No payment with this id was executed for this merchant. Another merchant's payment is
    /// refused exactly like an unknown one, so a merchant learns nothing about the others.
    case paymentNotFound(PaymentID)
    /// The payment was declined (no money moved) or is a redemption (no money to give back).
    case notRefundable(PaymentID, reason: String)
    /// The amount is not in the payment's currency.
    case currencyMismatch(expected: Currency, got: Currency)
    /// The amount is more than what is left of the payment's amount plus tip after earlier refunds.
    case exceedsRemaining(remaining: Money)
    /// This refund id was used for another refund (another payment or amount); nothing was executed.
    case idempotencyConflict(RefundID)

    public var code: String {
        switch self {
        case .invalidRefundID: "refund_id_invalid"
        case .invalidAmount: "refund_amount_invalid"
        case .paymentNotFound: "payment_not_found"
        case .notRefundable: "payment_not_refundable"
        case .currencyMismatch: "currency_mismatch"
        case .exceedsRemaining: "refund_exceeds_remaining"
        case .idempotencyConflict: "idempotency_conflict"
        }
    }

    public var description: String {
        switch self {
        case .invalidRefundID(let id):
            "refund id \"\(id)\" is not 1 to \(RefundID.maximumLength) characters of A-Z a-z 0-9 . _ : -"
        case .invalidAmount: "a refund must be more than zero"
        case .paymentNotFound(let id): "no payment \(id) was executed for this merchant"
        case .notRefundable(let id, let reason): "payment \(id) cannot be refunded: \(reason)"
        case .currencyMismatch(let expected, let got):
            "the payment was in \(expected.code); a refund of it must be in \(expected.code) too, not \(got.code)"
        case .exceedsRemaining(let remaining):
            "the refund is more than what is left to refund of this payment (\(remaining))"
        case .idempotencyConflict(let id):
            "refund id \(id) was used before for another refund; nothing was refunded now (a new refund needs a new refund id)"
        }
    }
}

/// Refunds: a merchant gives back all or part of an approved payment of its
/// own, as many times as it likes until nothing is left of the amount plus tip.
///
/// Each refund is one entry (merchant account → the payment's method, today the wallet's
/// account), one `refunds` row, and the bonus points it takes back, in one store transaction;
/// what is left is read and written in that transaction, so concurrent refunds of one payment
/// (from any number of processes) never give back more than it was.
extension Ledger {
    /// Refunds `request.amount` of a payment `merchant` received, once per refund id.
    ///
    /// A retry with the same refund id and the same payment and amount gets the stored refund
    /// (nothing moves again); the same id with other terms is refused (`idempotencyConflict`).
    ///
    /// Bonus points: a payment that earned `E` points and was `T` (amount plus tip) gives back,
    /// once refunds of it total `R`, `floor(E × R / T)` points in all; each refund takes back
    /// what that total grew by. Rounding down favours the customer, and the refund that leaves
    /// nothing takes back exactly `E`. Points the wallet has spent already are not taken twice:
    /// its balance stops at zero, and `Refund.bonusPointsReversed` says what was taken.
    ///
    /// Refusals are `LedgerError.refundRefused` with a `RefundRefusal`.
    public func refund(_ request: RefundRequest, merchant: MerchantID, at time: UnixTime = now())
        async throws(LedgerError) -> Refund
    {
        guard request.refundID.isWellFormed else {
            throw .refundRefused(.invalidRefundID(request.refundID.rawValue))
        }
        guard request.amount.minorUnits > 0 else { throw .refundRefused(.invalidAmount) }
        return try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            if let stored = try await Self.storedRefund(request.refundID, merchant: merchant, in: db) {
                guard stored.paymentID == request.paymentID, stored.amount == request.amount else {
                    throw LedgerError.refundRefused(.idempotencyConflict(request.refundID))
                }
                return stored
            }
            guard let payment = try await Self.stored(request.paymentID, in: db)?.transaction,
                payment.merchantID == merchant
            else { throw LedgerError.refundRefused(.paymentNotFound(request.paymentID)) }
            let result = payment.result
            guard result.transactionType == .payment else {
                throw LedgerError.refundRefused(
                    .notRefundable(request.paymentID, reason: "it is a redemption, which moved no money"))
            }
            guard case .approved(_, let earned, _) = result.outcome, let walletID = payment.walletID else {
                throw LedgerError.refundRefused(
                    .notRefundable(request.paymentID, reason: "it was declined, so no money moved"))
            }
            let currency = result.amount.currency
            guard request.amount.currency == currency else {
                throw LedgerError.refundRefused(.currencyMismatch(expected: currency, got: request.amount.currency))
            }
            let total = result.amount.minorUnits + result.tip.minorUnits
            let before = try await Self.refundedMinorUnits(of: request.paymentID, in: db)
            let remaining = total - before
            guard request.amount.minorUnits <= remaining else {
                throw LedgerError.refundRefused(
                    .exceedsRemaining(remaining: try Self.money(remaining, currency, column: "amount")))
            }
            let after = before + request.amount.minorUnits
            let due =
                Self.proportionalPoints(earned, part: after, of: total)
                - Self.proportionalPoints(earned, part: before, of: total)
            let held = try await Self.bonusPoints(walletID, merchant, in: db)
            let reversed = min(due, held)
            if reversed > 0 { try await Self.setBonusPoints(held - reversed, walletID, merchant, in: db) }

            let (destination, destinationReference) = try await Self.refundDestination(of: payment, in: db)
            let source = try await Self.account(.merchant, owner: merchant.rawValue, currency, in: db)
            let target: (id: Int64, balance: Int64)
            switch destination {
            case .horizonBalance: target = try await Self.account(.wallet, owner: walletID.rawValue, currency, in: db)
            case .card: target = try await Self.account(.external, owner: Self.externalOwner, currency, in: db)
            }
            let entryID = try await Self.post(
                "refund",
                [
                    Leg(account: source.id, currency: currency, amount: -request.amount.minorUnits),
                    Leg(account: target.id, currency: currency, amount: request.amount.minorUnits),
                ], at: time, in: db)
            let rows = try await db.query(
                """
                INSERT INTO refunds(merchant_id, refund_id, payment_id, wallet_id, amount, currency, destination,
                    destination_reference, bonus_reversed, entry_id, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *
                """,
                [
                    .text(merchant.rawValue), .text(request.refundID.rawValue), .blob(request.paymentID.bytes),
                    .text(walletID.rawValue), .integer(request.amount.minorUnits), .text(currency.code),
                    .text(destination.rawValue), destinationReference.map { .text($0) } ?? .null, .integer(reversed),
                    .integer(entryID), .integer(time),
                ])
            guard let row = rows.first else { throw LedgerError.database("inserting a refund returned no row") }
            let refund = try Self.decodeRefund(row)
            _ = try await Self.recordWebhookEvent(
                .refundSucceeded, merchant: merchant, object: Self.refundObject(refund), at: time, in: db)
            return refund
        }
    }

    /// The refunds of a payment `merchant` received, oldest first. Another merchant's payment
    /// is refused like an unknown one (`RefundRefusal.paymentNotFound`).
    public func refunds(of paymentID: PaymentID, merchant: MerchantID) async throws(LedgerError) -> [Refund] {
        try await store.transaction { db in
            guard let payment = try await Self.stored(paymentID, in: db)?.transaction, payment.merchantID == merchant
            else { throw LedgerError.refundRefused(.paymentNotFound(paymentID)) }
            return try await Self.refunds(of: paymentID, in: db)
        }
    }

    /// One refund of `merchant` by its refund id, or nil.
    public func refund(_ id: RefundID, merchant: MerchantID) async throws(LedgerError) -> Refund? {
        try await store.transaction { db in try await Self.storedRefund(id, merchant: merchant, in: db) }
    }

    /// Where the refund of `payment` goes: the method it was paid with, and that method's id.
    /// A card payment (`card_payments`) goes back to its card; any other to the Horizon balance.
    static func refundDestination(of payment: LedgerTransaction, in db: any SQLTransaction)
        async throws(LedgerError) -> (RefundDestination, reference: String?)
    {
        guard
            let row = try await db.query(
                "SELECT card_id FROM card_payments WHERE payment_id = ?", [.blob(payment.result.paymentID.bytes)]
            ).first
        else { return (.horizonBalance, nil) }
        return (.card, try row.text("card_id"))
    }

    /// `floor(points × part / whole)` without overflow (points and amounts are each below 2^63).
    static func proportionalPoints(_ points: Int64, part: Int64, of whole: Int64) -> Int64 {
        guard points > 0, part > 0, whole > 0 else { return 0 }
        if part >= whole { return points }
        let product = points.multipliedFullWidth(by: part)
        // part < whole, so the quotient is below `points` and fits.
        return whole.dividingFullWidth(product).quotient
    }

    static func refundedMinorUnits(of paymentID: PaymentID, in db: any SQLTransaction) async throws(LedgerError)
        -> Int64
    {
        let row = try await db.query(
            "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS total FROM refunds WHERE payment_id = ?",
            [.blob(paymentID.bytes)]
        ).first
        return try row?.integer("total") ?? 0
    }

    static func refunds(of paymentID: PaymentID, in db: any SQLTransaction) async throws(LedgerError) -> [Refund] {
        var refunds: [Refund] = []
        for row in try await db.query(
            "SELECT * FROM refunds WHERE payment_id = ? ORDER BY reference", [.blob(paymentID.bytes)])
        {
            refunds.append(try decodeRefund(row))
        }
        return refunds
    }

    /// The refunds of each of `payments` (oldest first per payment), in one query.
    static func refunds(ofPayments payments: [PaymentID], in db: any SQLTransaction) async throws(LedgerError)
        -> [PaymentID: [Refund]]
    {
        guard !payments.isEmpty else { return [:] }
        var refunds: [PaymentID: [Refund]] = [:]
        let placeholders = Array(repeating: "?", count: payments.count).joined(separator: ", ")
        for row in try await db.query(
            "SELECT * FROM refunds WHERE payment_id IN (\(placeholders)) ORDER BY reference",
            payments.map { .blob($0.bytes) })
        {
            let refund = try decodeRefund(row)
            refunds[refund.paymentID, default: []].append(refund)
        }
        return refunds
    }

    static func storedRefund(_ id: RefundID, merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError) -> Refund?
    {
        try await db.query(
            "SELECT * FROM refunds WHERE merchant_id = ? AND refund_id = ?",
            [.text(merchant.rawValue), .text(id.rawValue)]
        ).first.map { row throws(LedgerError) in try decodeRefund(row) }
    }

    /// A stored refund, every column checked.
    static func decodeRefund(_ row: SQLRow) throws(LedgerError) -> Refund {
        let paymentIDBytes = try row.bytes("payment_id")
        guard let paymentID = try? PaymentID(bytes: paymentIDBytes) else {
            throw .corruptRow(column: "payment_id", reason: "not \(PaymentID.byteCount) bytes")
        }
        let rawDestination = try row.text("destination")
        guard let destination = RefundDestination(rawValue: rawDestination) else {
            throw .corruptRow(column: "destination", reason: "\(rawDestination) is not a refund destination")
        }
        let amount = try money(
            row.integer("amount"), currency(row.text("currency"), column: "currency"), column: "amount")
        guard amount.minorUnits > 0 else { throw .corruptRow(column: "amount", reason: "not more than zero") }
        let reversed = try row.integer("bonus_reversed")
        guard reversed >= 0 else { throw .corruptRow(column: "bonus_reversed", reason: "\(reversed) is negative") }
        return Refund(
            refundID: RefundID(rawValue: try row.text("refund_id")), reference: try row.integer("reference"),
            paymentID: paymentID, merchantID: MerchantID(rawValue: try row.text("merchant_id")),
            walletID: WalletID(rawValue: try row.text("wallet_id")), amount: amount, destination: destination,
            destinationReference: try row.optionalText("destination_reference"), bonusPointsReversed: reversed,
            createdAt: try row.integer("created_at"))
    }
}
