import HorizonCore
import HorizonLedger

/// The sandbox card processor: behaves like a real one for a fixed set of test card numbers
/// (as Stripe's test mode does) and refuses every other number, so no real card is ever
/// tokenized here. Its state (tokens, charges, lost attempts, refunds) lives in the ledger's
/// database, kept through the ledger's own methods (`Ledger.chargeSandboxCard` and its
/// neighbours), so several server processes and restarts agree on every idempotency key.
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
        try await run { () throws(LedgerError) in
            try await ledger.addSandboxCardToken(token, behaviour: behaviour.rawValue, at: time)
        }
        return CardTokenization(token: token, requiresChallenge: behaviour == .threeDSecure)
    }

    public func charge(token: String, amount: Money, idempotencyKey: String, at time: UnixTime)
        async throws(CardProcessorError) -> CardCharge
    {
        let attempt = try await run { () throws(LedgerError) in
            try await ledger.chargeSandboxCard(token: token, amount: amount, idempotencyKey: idempotencyKey, at: time) {
                Behaviour(rawValue: $0).map(Self.decision)
            }
        }
        switch attempt {
        case .stored(let stored):
            guard stored.token == token, stored.amount == amount else { throw .idempotencyConflict(idempotencyKey) }
            return Self.charge(stored)
        case .recorded(_, answerLost: true): throw .timeout
        case .recorded(let recorded, answerLost: false): return Self.charge(recorded)
        case .unknownToken: throw .unknownToken
        case .firstAttemptLost: throw .timeout
        }
    }

    public func refund(chargeKey: String, amount: Money, idempotencyKey: String, at time: UnixTime)
        async throws(CardProcessorError) -> CardRefund
    {
        let attempt = try await run { () throws(LedgerError) in
            try await ledger.refundSandboxCharge(
                chargeKey: chargeKey, amount: amount, idempotencyKey: idempotencyKey, at: time)
        }
        switch attempt {
        case .stored(let storedCharge, let minorUnits):
            guard storedCharge == chargeKey, minorUnits == amount.minorUnits else {
                throw .idempotencyConflict(idempotencyKey)
            }
            return CardRefund(idempotencyKey: idempotencyKey, chargeKey: chargeKey, amount: amount)
        case .recorded: return CardRefund(idempotencyKey: idempotencyKey, chargeKey: chargeKey, amount: amount)
        case .chargeNotFound: throw .chargeNotFound(chargeKey)
        case .currencyMismatch: throw .idempotencyConflict(idempotencyKey)
        case .exceedsCharge(let left): throw .refundExceedsCharge(left: left)
        }
    }

    public func lookup(idempotencyKey: String) async throws(CardProcessorError) -> CardCharge? {
        try await run { () throws(LedgerError) in try await ledger.sandboxCardCharge(idempotencyKey) }.map(Self.charge)
    }

    // MARK: What the test cards do

    private static func decision(_ behaviour: Behaviour) -> SandboxChargeDecision {
        switch behaviour {
        case .approve, .threeDSecure: .charge
        case .timeoutAfterCharge: .chargeButLoseTheAnswer
        case .decline: .decline(code: "card_declined")
        case .insufficientFunds: .decline(code: "insufficient_funds")
        case .timeoutBeforeCharge: .loseFirstAttemptThenCharge
        }
    }

    private static func charge(_ stored: SandboxCardCharge) -> CardCharge {
        CardCharge(
            idempotencyKey: stored.idempotencyKey, token: stored.token, amount: stored.amount,
            outcome: stored.declineCode.map { .declined(code: $0, reason: reason(for: $0)) } ?? .charged)
    }

    private static func reason(for code: String) -> String {
        code == "insufficient_funds"
            ? "the card has insufficient funds for this amount" : "the card was declined by its issuer"
    }

    /// The ledger's answer; a database failure is the processor being unavailable.
    private func run<T: Sendable>(_ body: () async throws(LedgerError) -> T) async throws(CardProcessorError) -> T {
        do { return try await body() } catch { throw .unavailable("its database failed: \(error)") }
    }

    static func randomHex() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
        }.joined()
    }
}
