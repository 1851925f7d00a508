import HorizonCore
import HorizonProtocol

// Payments a terminal accepted while it could not reach its server: kept in the terminal's journal
// until they are forwarded to the server, which settles each payment id exactly once.

/// Everything the server needs to settle a payment the terminal accepted offline: the terms, the
/// wallet's signed Confirm exactly as it arrived (what the online path submits), and the daily
/// token the wallet presented (its signed bytes), which bounds the terminal's risk.
public struct OfflinePaymentRecord: Sendable, Equatable {
    public let paymentID: PaymentID
    public let sessionID: SessionID
    public let walletKey: PublicKeyBytes
    public let terminalKeyID: TerminalKeyID
    public let amount: Money
    public let tip: Money
    public let registerUser: String
    /// The wallet's signed Confirm (`SessionMessage.encoded()`), as `SettlementRequest.signedConfirmation`.
    public let signedConfirmation: [UInt8]
    /// The daily token's signed bytes, as the wallet presented them.
    public let dailyToken: [UInt8]
    /// The token's id, to count what this terminal accepted under one token.
    public let tokenID: [UInt8]
    public let acceptedAt: UnixTime

    public init(
        paymentID: PaymentID, sessionID: SessionID, walletKey: PublicKeyBytes, terminalKeyID: TerminalKeyID,
        amount: Money, tip: Money, registerUser: String, signedConfirmation: [UInt8], dailyToken: [UInt8],
        tokenID: [UInt8], acceptedAt: UnixTime
    ) {
        self.paymentID = paymentID
        self.sessionID = sessionID
        self.walletKey = walletKey
        self.terminalKeyID = terminalKeyID
        self.amount = amount
        self.tip = tip
        self.registerUser = registerUser
        self.signedConfirmation = signedConfirmation
        self.dailyToken = dailyToken
        self.tokenID = tokenID
        self.acceptedAt = acceptedAt
    }

    /// Amount plus tip, in minor units (both are bounded far below overflow by the wire rules).
    public var totalMinorUnits: Int64 { amount.minorUnits + tip.minorUnits }
}

/// The server's answer to a forwarded offline payment.
public enum OfflineForwardOutcome: Sendable, Equatable {
    /// Settled now.
    case settled
    /// Refused for good (the server's stable error code and its reason).
    case declined(code: String, reason: String)
    /// The server had settled this payment id before (an earlier forward whose answer was lost,
    /// or the online attempt that timed out went through after all): nothing more was charged.
    case alreadySettled
}

/// Where the terminal sends the payments it accepted offline: the server's offline
/// settlement endpoint through `HorizonServerClient`, or a fake in tests. The server settles a
/// payment id once and answers a repeat with the same outcome, so sending one again after a
/// crash is safe. Throwing means no answer (the server is still unreachable, or the call timed
/// out): the payment stays owed and is sent again later.
public protocol OfflinePaymentForwarder: Sendable {
    func forward(_ payment: OfflinePaymentRecord) async throws -> OfflineForwardOutcome
}
