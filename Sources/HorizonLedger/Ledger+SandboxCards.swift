import HorizonCore

/// One charge as the sandbox card processor recorded it under its idempotency key.
public struct SandboxCardCharge: Sendable, Equatable {
    public let idempotencyKey: String
    public let token: String
    public let amount: Money
    /// Nil when the card was charged; the decline's code (`card_declined`, …) when it was not.
    public let declineCode: String?

    public init(idempotencyKey: String, token: String, amount: Money, declineCode: String?) {
        self.idempotencyKey = idempotencyKey
        self.token = token
        self.amount = amount
        self.declineCode = declineCode
    }
}

/// What the sandbox processor decides for a new charge, from what its token was made to do.
public enum SandboxChargeDecision: Sendable, Equatable {
    case charge
    /// Charged, but the answer is lost on the way back (the caller sees a timeout; a lookup or
    /// retry under the key finds the charge).
    case chargeButLoseTheAnswer
    case decline(code: String)
    /// The first attempt under a key is lost before charging (nothing is charged, the attempt
    /// is remembered); a retry under the same key is charged.
    case loseFirstAttemptThenCharge
}

/// What became of a charge attempt.
public enum SandboxChargeAttempt: Sendable, Equatable {
    /// The key was charged (or declined) before: that charge, whatever this attempt's terms.
    case stored(SandboxCardCharge)
    /// Recorded now; `answerLost` when the decision was to lose the answer.
    case recorded(SandboxCardCharge, answerLost: Bool)
    case unknownToken
    /// The first attempt was lost on the way in; nothing was charged.
    case firstAttemptLost
}

/// What became of a refund attempt.
public enum SandboxRefundAttempt: Sendable, Equatable {
    /// A refund under this key exists: its charge and amount in minor units, whatever this
    /// attempt's terms.
    case stored(chargeKey: String, minorUnits: Int64)
    case recorded
    /// No charge under that key was charged (unknown, or declined).
    case chargeNotFound
    /// The refund's currency is not the charge's.
    case currencyMismatch
    /// More than what is left of the charge (`left`).
    case exceedsCharge(left: Money)
}

/// The sandbox card processor's state (tokens, charges, lost attempts, refunds by idempotency
/// key) in the ledger's database, so that every server process and restart agrees. A real
/// processor keeps this on its side; only the sandbox needs it here, and only through these
/// methods: each decision is one transaction.
extension Ledger {
    public func addSandboxCardToken(_ token: String, behaviour: String, at time: UnixTime)
        async throws(LedgerError)
    {
        try await store.transaction { db in
            try await db.query(
                "INSERT INTO sandbox_card_tokens(token, behaviour, created_at) VALUES (?, ?, ?)",
                [.text(token), .text(behaviour), .integer(time)])
        }
    }

    public func sandboxCardCharge(_ idempotencyKey: String) async throws(LedgerError) -> SandboxCardCharge? {
        try await store.transaction { db in try await Self.sandboxCharge(idempotencyKey, in: db) }
    }

    /// A charge under `idempotencyKey`, once: the stored one when the key was used before, else
    /// what `decide` makes of the token's behaviour (nil: a behaviour it does not know, a
    /// corrupt row).
    public func chargeSandboxCard(
        token: String, amount: Money, idempotencyKey: String, at time: UnixTime,
        decide: @escaping @Sendable (_ behaviour: String) -> SandboxChargeDecision?
    ) async throws(LedgerError) -> SandboxChargeAttempt {
        try await store.transaction { db in
            if let stored = try await Self.sandboxCharge(idempotencyKey, in: db) { return .stored(stored) }
            guard
                let row = try await db.query(
                    "SELECT behaviour FROM sandbox_card_tokens WHERE token = ?", [.text(token)]
                ).first
            else { return .unknownToken }
            let behaviour = try row.text("behaviour")
            guard let decision = decide(behaviour) else {
                throw LedgerError.corruptRow(
                    column: "sandbox_card_tokens.behaviour", reason: "unknown value \(behaviour)")
            }
            var declineCode: String?
            switch decision {
            case .charge, .chargeButLoseTheAnswer: break
            case .decline(let code): declineCode = code
            case .loseFirstAttemptThenCharge:
                let first = try await db.query(
                    """
                    INSERT INTO sandbox_card_lost_attempts(idempotency_key, created_at) VALUES (?, ?)
                    ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key
                    """, [.text(idempotencyKey), .integer(time)])
                if !first.isEmpty { return .firstAttemptLost }
            }
            try await db.query(
                """
                INSERT INTO sandbox_card_charges(idempotency_key, token, amount, currency, outcome, decline_code, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(idempotencyKey), .text(token), .integer(amount.minorUnits), .text(amount.currency.code),
                    .text(declineCode == nil ? "charged" : "declined"), declineCode.map { .text($0) } ?? .null,
                    .integer(time),
                ])
            return .recorded(
                SandboxCardCharge(
                    idempotencyKey: idempotencyKey, token: token, amount: amount, declineCode: declineCode),
                answerLost: decision == .chargeButLoseTheAnswer)
        }
    }

    /// A refund of a charged charge under `idempotencyKey`, once, never more than was charged.
    public func refundSandboxCharge(chargeKey: String, amount: Money, idempotencyKey: String, at time: UnixTime)
        async throws(LedgerError) -> SandboxRefundAttempt
    {
        try await store.transaction { db in
            if let row = try await db.query(
                "SELECT charge_key, amount FROM sandbox_card_refunds WHERE idempotency_key = ?", [.text(idempotencyKey)]
            ).first {
                return .stored(chargeKey: try row.text("charge_key"), minorUnits: try row.integer("amount"))
            }
            guard let charge = try await Self.sandboxCharge(chargeKey, in: db), charge.declineCode == nil else {
                return .chargeNotFound
            }
            guard charge.amount.currency == amount.currency else { return .currencyMismatch }
            let refunded =
                try await db.query(
                    "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS total FROM sandbox_card_refunds WHERE charge_key = ?",
                    [.text(chargeKey)]
                ).first?.integer("total") ?? 0
            let left = charge.amount.minorUnits - refunded
            guard amount.minorUnits <= left else {
                return .exceedsCharge(
                    left: try Self.money(left, amount.currency, column: "sandbox_card_refunds.amount"))
            }
            try await db.query(
                "INSERT INTO sandbox_card_refunds(idempotency_key, charge_key, amount, created_at) VALUES (?, ?, ?, ?)",
                [.text(idempotencyKey), .text(chargeKey), .integer(amount.minorUnits), .integer(time)])
            return .recorded
        }
    }

    static func sandboxCharge(_ key: String, in db: any SQLTransaction) async throws(LedgerError)
        -> SandboxCardCharge?
    {
        guard
            let row = try await db.query(
                "SELECT * FROM sandbox_card_charges WHERE idempotency_key = ?", [.text(key)]
            ).first
        else { return nil }
        let outcome = try row.text("outcome")
        let declineCode: String?
        switch outcome {
        case "charged": declineCode = nil
        case "declined": declineCode = try row.optionalText("decline_code") ?? "card_declined"
        default: throw .corruptRow(column: "sandbox_card_charges.outcome", reason: "unknown value \(outcome)")
        }
        return SandboxCardCharge(
            idempotencyKey: key, token: try row.text("token"),
            amount: try money(
                try row.integer("amount"),
                try currency(try row.text("currency"), column: "sandbox_card_charges.currency"),
                column: "sandbox_card_charges.amount"),
            declineCode: declineCode)
    }
}
