import HorizonCore
import HorizonProtocol

/// What the terminal asks its processor to execute: one confirmed payment.
public struct SettlementRequest: Sendable, Equatable {
    public let paymentID: PaymentID
    public let sessionID: SessionID
    public let walletKey: PublicKeyBytes
    public let terminalKeyID: TerminalKeyID
    public let amount: Money
    public let tip: Money
    public let registerUser: String
    /// A digest of the wallet's signed confirmation: a retry must carry the same one.
    public let contentDigest: [UInt8]
    /// The wallet's signed Confirm exactly as it arrived (`SessionMessage.encoded()`), which a
    /// remote processor (the server) verifies against the wallet's registered key: a terminal
    /// cannot charge a wallet for anything the wallet did not sign. Empty where nobody needs it.
    public let signedConfirmation: [UInt8]
    /// The merchant's order reference the register gave the sale (not signed by the wallet, as
    /// the register user); empty when it gave none.
    public let orderReference: String

    public init(
        paymentID: PaymentID, sessionID: SessionID, walletKey: PublicKeyBytes, terminalKeyID: TerminalKeyID,
        amount: Money, tip: Money, registerUser: String, contentDigest: [UInt8], signedConfirmation: [UInt8] = [],
        orderReference: String = ""
    ) {
        self.paymentID = paymentID
        self.sessionID = sessionID
        self.walletKey = walletKey
        self.terminalKeyID = terminalKeyID
        self.amount = amount
        self.tip = tip
        self.registerUser = registerUser
        self.contentDigest = contentDigest
        self.signedConfirmation = signedConfirmation
        self.orderReference = orderReference
    }
}

/// How a payment was settled.
public enum SettlementOutcome: Sendable, Equatable {
    case approved(reference: UInt64, bonusPointsEarned: Int64, bonusPointsBalance: Int64)
    case declined(code: ErrorCode, reason: String)

    public var isApproved: Bool { if case .approved = self { true } else { false } }
}

/// The stored, final result for one payment or redemption id. A retry gets exactly this again.
public struct SettlementResult: Sendable, Equatable {
    public let paymentID: PaymentID
    public let sessionID: SessionID
    public let amount: Money
    public let tip: Money
    public let outcome: SettlementOutcome
    public let settledAt: UnixTime
    /// `.payment`, or the kind of redemption.
    public let transactionType: TransactionType
    /// A redemption's coupon code, reward or membership; empty for payments.
    public let item: String
    /// Bonus points a redemption spent; zero otherwise.
    public let quantity: Int64

    public init(
        paymentID: PaymentID, sessionID: SessionID, amount: Money, tip: Money, outcome: SettlementOutcome,
        settledAt: UnixTime, transactionType: TransactionType = .payment, item: String = "", quantity: Int64 = 0
    ) {
        self.paymentID = paymentID
        self.sessionID = sessionID
        self.amount = amount
        self.tip = tip
        self.outcome = outcome
        self.settledAt = settledAt
        self.transactionType = transactionType
        self.item = item
        self.quantity = quantity
    }
}

/// What the terminal asks to execute for a redemption: spend points, use the gold benefit of
/// this period, or redeem a coupon.
public struct RedemptionRequest: Sendable, Equatable {
    public let redemptionID: PaymentID
    public let sessionID: SessionID
    public let walletKey: PublicKeyBytes
    public let terminalKeyID: TerminalKeyID
    public let transactionType: TransactionType
    public let item: String
    public let quantity: Int64
    /// The value of what is redeemed, as the offer stated it (informational; no money moves).
    public let value: Money
    public let contentDigest: [UInt8]
    /// The wallet's signed Redeem exactly as it arrived, for a remote processor to verify
    /// (as `SettlementRequest.signedConfirmation`). Empty where nobody needs it.
    public let signedRedemption: [UInt8]
    /// The register user who rang up the redemption (not signed by the wallet); empty if none.
    public let registerUser: String

    public init(
        redemptionID: PaymentID, sessionID: SessionID, walletKey: PublicKeyBytes, terminalKeyID: TerminalKeyID,
        transactionType: TransactionType, item: String, quantity: Int64, value: Money, contentDigest: [UInt8],
        signedRedemption: [UInt8] = [], registerUser: String = ""
    ) {
        self.redemptionID = redemptionID
        self.sessionID = sessionID
        self.walletKey = walletKey
        self.terminalKeyID = terminalKeyID
        self.transactionType = transactionType
        self.item = item
        self.quantity = quantity
        self.value = value
        self.contentDigest = contentDigest
        self.signedRedemption = signedRedemption
        self.registerUser = registerUser
    }
}

/// Where the terminal redeems loyalty: each redemption id at most once, a retry gets the stored
/// result. Async like `PaymentProcessor`, for the same reason.
public protocol RedemptionProcessor: Sendable {
    func redeem(_ request: RedemptionRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult
    func result(for id: PaymentID) async throws(ProcessorError) -> SettlementResult?
}

/// Why a processor could not give a result at all (as opposed to declining the payment).
public enum ProcessorError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The payment id was executed before with different content; nothing was executed now.
    case conflictingRetry(PaymentID)
    case storage(String)
    /// A remote processor did not answer (unreachable, timed out): whether it executed is
    /// unknown, so the request stays open and is asked again, never reported as failed.
    case unavailable(String)
    /// A remote processor refused the request for good without executing it (an unknown or
    /// revoked wallet, a revoked terminal, a confirmation that does not verify).
    case refused(code: String, reason: String)

    public var description: String {
        switch self {
        case .conflictingRetry(let id): "payment \(id) was already executed with different content; refused"
        case .storage(let reason): "the ledger could not be written: \(reason)"
        case .unavailable(let reason): "the server is unreachable (\(reason)); the payment stays pending and is retried"
        case .refused(let code, let reason): "the server refused the payment (\(code)): \(reason)"
        }
    }
}

/// Where the terminal settles payments. Implementations execute each payment id at most once
/// and answer a retry with the stored result.
///
/// Async because a processor may be remote (the server, over HTTP): the terminal awaits it off
/// its radio's scheduler (`Scheduler.runExternal`), which keeps serving other wallets meanwhile.
/// The in-process ledger (HorizonLedger's `InProcessLedger`) is async for the same reason the
/// server's client is: both run the same `Ledger`, whose stores suspend rather than block.
public protocol PaymentProcessor: Sendable {
    func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult
    func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult?
}
