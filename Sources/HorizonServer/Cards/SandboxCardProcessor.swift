import HorizonCore
import HorizonLedger

/// The sandbox card processor: behaves like a real one for a fixed set of test card numbers
/// (as Stripe's test mode does) and refuses every other number, so no real card is ever
/// tokenized here. Its state (tokens, charges, lost attempts, refunds) lives in the ledger's
/// database, so several server processes and restarts agree on every idempotency key.
///
/// | Number                | Brand            | What it does                                             |
/// |-----------------------|------------------|----------------------------------------------------------|
/// | 4242 4242 4242 4242   | Visa             | approves                                                 |
/// | 5555 5555 5555 4444   | Mastercard       | approves                                                 |
/// | 3782 822463 10005     | American Express | approves                                                 |
/// | 4000 0000 0000 0002   | Visa             | declines: `card_declined`                                |
/// | 4000 0000 0000 9995   | Visa             | declines: `insufficient_funds`                           |
/// | 4000 0000 0000 3220   | Visa             | needs a 3-D Secure challenge when added, then approves   |
/// | 4000 0000 0000 0119   | Visa             | times out after charging (the answer is lost)            |
/// | 4000 0000 0000 0127   | Visa             | times out before charging, once; the retry charges       |
public struct SandboxCardProcessor: CardProcessor {
    /// What a test card does when charged.
    public enum Behaviour: String, Sendable, CaseIterable {
        case approve
        case decline
        case insufficientFunds = "insufficient_funds"
        case threeDSecure = "three_d_secure"
        case timeoutAfterCharge = "timeout_after_charge"
        case timeoutBeforeCharge = "timeout_before_charge"
    }

    /// The test numbers and what each does.
    public static let testCards: [String: Behaviour] = [
        "4242424242424242": .approve,
        "5555555555554444": .approve,
        "378282246310005": .approve,
        "4000000000000002": .decline,
        "4000000000009995": .insufficientFunds,
        "4000000000003220": .threeDSecure,
        "4000000000000119": .timeoutAfterCharge,
        "4000000000000127": .timeoutBeforeCharge,
    ]

    let ledger: Ledger

    public init(ledger: Ledger) { self.ledger = ledger }

    public func tokenize(_ card: CardDetails, at time: UnixTime) async throws(CardProcessorError) -> CardTokenization {
        guard let behaviour = Self.testCards[card.number] else {
            throw .cardNotAccepted(
                "the sandbox card processor accepts only its test card numbers (for example 4242 4242 4242 4242, "
                    + "see docs/terminal-and-wallet.md, \"Cards\"); no real card is charged on this server")
        }
        let token = "tok_" + Self.randomHex()
        _ = try await run { db in
            try await db.query(
                "INSERT INTO sandbox_card_tokens(token, behaviour, created_at) VALUES (?, ?, ?)",
                [.text(token), .text(behaviour.rawValue), .integer(time)])
        }
        return CardTokenization(token: token, requiresChallenge: behaviour == .threeDSecure)
    }

    /// What one charge transaction decided: an answer, or an answer the caller must not get.
    private enum Attempt: Sendable {
        case answered(CardCharge)
        case lost
    }

    public func charge(token: String, amount: Money, idempotencyKey: String, at time: UnixTime)
        async throws(CardProcessorError) -> CardCharge
    {
        let attempt: Result<Attempt, CardProcessorError> = try await run { db in
            if let stored = try await Self.charge(idempotencyKey, in: db) {
                guard stored.token == token, stored.amount == amount else {
                    return .failure(.idempotencyConflict(idempotencyKey))
                }
                return .success(.answered(stored))
            }
            guard
                let row = try await db.query(
                    "SELECT behaviour FROM sandbox_card_tokens WHERE token = ?", [.text(token)]
                ).first
            else { return .failure(.unknownToken) }
            let text = try row.text("behaviour")
            guard let behaviour = Behaviour(rawValue: text) else {
                throw LedgerError.corruptRow(column: "sandbox_card_tokens.behaviour", reason: "unknown value \(text)")
            }
            var outcome = CardCharge.Outcome.charged
            var lost = false
            switch behaviour {
            case .approve, .threeDSecure: break
            case .decline: outcome = .declined(code: "card_declined", reason: "the card was declined by its issuer")
            case .insufficientFunds:
                outcome = .declined(
                    code: "insufficient_funds", reason: "the card has insufficient funds for this amount")
            case .timeoutAfterCharge: lost = true
            case .timeoutBeforeCharge:
                // The first attempt for a key is lost on the way in: nothing is charged, and
                // only the lost attempt is remembered, so the retry goes through.
                let first = try await db.query(
                    """
                    INSERT INTO sandbox_card_lost_attempts(idempotency_key, created_at) VALUES (?, ?)
                    ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key
                    """, [.text(idempotencyKey), .integer(time)])
                if !first.isEmpty { return .success(.lost) }
            }
            var code: SQLValue = .null
            if case .declined(let declineCode, _) = outcome { code = .text(declineCode) }
            try await db.query(
                """
                INSERT INTO sandbox_card_charges(idempotency_key, token, amount, currency, outcome, decline_code, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(idempotencyKey), .text(token), .integer(amount.minorUnits), .text(amount.currency.code),
                    .text(outcome == .charged ? "charged" : "declined"), code, .integer(time),
                ])
            let charge = CardCharge(idempotencyKey: idempotencyKey, token: token, amount: amount, outcome: outcome)
            return .success(lost ? .lost : .answered(charge))
        }
        switch try attempt.get() {
        case .answered(let charge): return charge
        case .lost: throw .timeout
        }
    }

    public func refund(chargeKey: String, amount: Money, idempotencyKey: String, at time: UnixTime)
        async throws(CardProcessorError) -> CardRefund
    {
        let outcome: Result<CardRefund, CardProcessorError> = try await run { db in
            if let row = try await db.query(
                "SELECT charge_key, amount FROM sandbox_card_refunds WHERE idempotency_key = ?", [.text(idempotencyKey)]
            ).first {
                let stored = CardRefund(
                    idempotencyKey: idempotencyKey, chargeKey: try row.text("charge_key"),
                    amount: try Self.money(try row.integer("amount"), amount.currency.code))
                guard stored.chargeKey == chargeKey, stored.amount.minorUnits == amount.minorUnits else {
                    return .failure(.idempotencyConflict(idempotencyKey))
                }
                return .success(stored)
            }
            guard let charge = try await Self.charge(chargeKey, in: db), charge.outcome == .charged else {
                return .failure(.chargeNotFound(chargeKey))
            }
            guard charge.amount.currency == amount.currency else {
                return .failure(.idempotencyConflict(idempotencyKey))
            }
            let refunded =
                try await db.query(
                    "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS total FROM sandbox_card_refunds WHERE charge_key = ?",
                    [.text(chargeKey)]
                ).first?.integer("total") ?? 0
            let left = charge.amount.minorUnits - refunded
            guard amount.minorUnits <= left else {
                return .failure(.refundExceedsCharge(left: try Self.money(left, amount.currency.code)))
            }
            try await db.query(
                "INSERT INTO sandbox_card_refunds(idempotency_key, charge_key, amount, created_at) VALUES (?, ?, ?, ?)",
                [.text(idempotencyKey), .text(chargeKey), .integer(amount.minorUnits), .integer(time)])
            return .success(CardRefund(idempotencyKey: idempotencyKey, chargeKey: chargeKey, amount: amount))
        }
        return try outcome.get()
    }

    public func lookup(idempotencyKey: String) async throws(CardProcessorError) -> CardCharge? {
        try await run { db in try await Self.charge(idempotencyKey, in: db) }
    }

    // MARK: Storage

    /// One transaction on the ledger's store; a database failure is the processor being unavailable.
    private func run<T: Sendable>(_ body: @Sendable (any SQLTransaction) async throws -> T)
        async throws(CardProcessorError) -> T
    {
        do { return try await ledger.store.transaction(body) } catch {
            throw .unavailable("its database failed: \(error)")
        }
    }

    private static func charge(_ key: String, in db: any SQLTransaction) async throws(LedgerError) -> CardCharge? {
        guard
            let row = try await db.query(
                "SELECT * FROM sandbox_card_charges WHERE idempotency_key = ?", [.text(key)]
            ).first
        else { return nil }
        let outcomeText = try row.text("outcome")
        let outcome: CardCharge.Outcome
        switch outcomeText {
        case "charged": outcome = .charged
        case "declined":
            let code = try row.optionalText("decline_code") ?? "card_declined"
            outcome = .declined(code: code, reason: reason(for: code))
        default:
            throw .corruptRow(column: "sandbox_card_charges.outcome", reason: "unknown value \(outcomeText)")
        }
        return CardCharge(
            idempotencyKey: key, token: try row.text("token"),
            amount: try money(try row.integer("amount"), try row.text("currency")), outcome: outcome)
    }

    private static func reason(for code: String) -> String {
        code == "insufficient_funds"
            ? "the card has insufficient funds for this amount" : "the card was declined by its issuer"
    }

    private static func money(_ minorUnits: Int64, _ code: String) throws(LedgerError) -> Money {
        do { return try Money(minorUnits: minorUnits, currency: try Currency(code: code)) } catch {
            throw .corruptRow(column: "sandbox card amount", reason: "\(minorUnits) \(code) is not an amount")
        }
    }

    static func randomHex() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
        }.joined()
    }
}
