import HorizonCore
import HorizonLedger

/// A card as the person typed it, after the server's checks. It lives only for the call that
/// hands it to the processor: it is never stored, and it prints without its number and CVC, so
/// that no log line, error or debugger description can carry them.
public struct CardDetails: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Digits only.
    public let number: String
    public let expiryMonth: Int
    /// Four digits.
    public let expiryYear: Int
    public let cvc: String
    public let cardholder: String
    public let brand: CardBrand

    public init(number: String, expiryMonth: Int, expiryYear: Int, cvc: String, cardholder: String, brand: CardBrand) {
        self.number = number
        self.expiryMonth = expiryMonth
        self.expiryYear = expiryYear
        self.cvc = cvc
        self.cardholder = cardholder
        self.brand = brand
    }

    public var lastFour: String { String(number.suffix(4)) }

    public var description: String {
        "\(brand.displayName) •••• \(lastFour), expires \(expiryMonth)/\(expiryYear)"
    }
    public var debugDescription: String { description }
}

/// What the processor answers for a card: the token that stands for it from now on.
public struct CardTokenization: Sendable, Equatable {
    public let token: String
    /// The issuer wants a 3-D Secure challenge before the card is used.
    public let requiresChallenge: Bool

    public init(token: String, requiresChallenge: Bool) {
        self.token = token
        self.requiresChallenge = requiresChallenge
    }
}

/// A charge as the processor recorded it under its idempotency key.
public struct CardCharge: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        case charged
        /// `code` is the processor's stable reason (`card_declined`, `insufficient_funds`);
        /// `reason` says it to a person.
        case declined(code: String, reason: String)
    }

    public let idempotencyKey: String
    public let token: String
    public let amount: Money
    public let outcome: Outcome

    public init(idempotencyKey: String, token: String, amount: Money, outcome: Outcome) {
        self.idempotencyKey = idempotencyKey
        self.token = token
        self.amount = amount
        self.outcome = outcome
    }
}

/// A refund as the processor recorded it under its idempotency key.
public struct CardRefund: Sendable, Equatable {
    public let idempotencyKey: String
    public let chargeKey: String
    public let amount: Money

    public init(idempotencyKey: String, chargeKey: String, amount: Money) {
        self.idempotencyKey = idempotencyKey
        self.chargeKey = chargeKey
        self.amount = amount
    }
}

/// Why the processor gave no answer.
public enum CardProcessorError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The processor did not answer in time. The request may or may not have been applied:
    /// ask `lookup(idempotencyKey:)` before trying again, so that nothing is charged twice.
    case timeout
    /// The processor cannot be reached or failed; nothing is known to have happened.
    case unavailable(String)
    /// The processor refuses this card (for the sandbox: a number that is not one of its test cards).
    case cardNotAccepted(String)
    /// The token is not one this processor issued.
    case unknownToken
    /// This idempotency key was used before with other terms; nothing was done now.
    case idempotencyConflict(String)
    /// A refund names a charge that does not exist or was not charged.
    case chargeNotFound(String)
    /// A refund would return more than what is left of its charge.
    case refundExceedsCharge(left: Money)

    public var description: String {
        switch self {
        case .timeout: "the card processor did not answer in time; what happened is not known yet"
        case .unavailable(let reason): "the card processor is unavailable: \(reason)"
        case .cardNotAccepted(let reason): reason
        case .unknownToken: "the card processor does not know this card's token"
        case .idempotencyConflict(let key):
            "idempotency key \(key) was used before with other terms; nothing was done (a new request needs a new key)"
        case .chargeNotFound(let key): "no charge was made under idempotency key \(key)"
        case .refundExceedsCharge(let left): "the refund is more than what is left of the charge (\(left))"
        }
    }
}

/// The seam between the server and a card processor. Every charge and
/// refund carries an idempotency key: the processor applies a key once and answers every retry
/// with what it did; after a timeout, `lookup` says whether the charge was applied, so the
/// server never charges twice and never reports a charge that was not made.
public protocol CardProcessor: Sendable {
    /// Exchanges a card for a token (and says whether it needs a 3-D Secure challenge).
    func tokenize(_ card: CardDetails, at time: UnixTime) async throws(CardProcessorError) -> CardTokenization
    /// Charges `amount` to the card behind `token`, once per `idempotencyKey`.
    func charge(token: String, amount: Money, idempotencyKey: String, at time: UnixTime)
        async throws(CardProcessorError) -> CardCharge
    /// Returns `amount` of the charge made under `chargeKey`, once per `idempotencyKey`.
    func refund(chargeKey: String, amount: Money, idempotencyKey: String, at time: UnixTime)
        async throws(CardProcessorError) -> CardRefund
    /// What happened to the charge with this idempotency key: nil when it was never applied.
    func lookup(idempotencyKey: String) async throws(CardProcessorError) -> CardCharge?
}
