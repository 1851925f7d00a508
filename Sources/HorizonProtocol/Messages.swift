import HorizonCore

// The session protocol's messages. Each one's initialiser enforces the same limits the decoder
// does, so every value that can be built encodes to bytes that decode back to it, and encoding
// can neither fail nor crash.

/// Wire limits on variable-length fields, shared by initialisers and the decoder.
public enum MessageLimits: Sendable, Equatable {
    /// Register user names and redemption items: short labels shown on a small screen.
    public static let shortText = 64
    /// Human-readable explanations in cancel and error messages.
    public static let messageText = 256
    /// Sealed proxy payloads: enough for a backend request, small enough to relay in a few frames.
    public static let sealedPayload = 4096
    /// A daily token's signed bytes (`DailyToken.maximumEncodedSize`; a token is 253 bytes).
    public static let offlineToken = 512
}

/// A diagnostic or reference number in a receipt, decline or error message.
///
/// Unknown raw values are kept rather than refused, so a newer peer can add codes without
/// breaking older ones; they show as "error <n>".
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let insufficientFunds = ErrorCode(rawValue: 1)
    public static let unknownWallet = ErrorCode(rawValue: 2)
    public static let invalidAmount = ErrorCode(rawValue: 3)
    public static let unsupportedCurrency = ErrorCode(rawValue: 4)
    public static let sessionExpired = ErrorCode(rawValue: 5)
    public static let sessionNotFound = ErrorCode(rawValue: 6)
    public static let sessionTaken = ErrorCode(rawValue: 7)
    public static let badSignature = ErrorCode(rawValue: 8)
    public static let duplicatePaymentConflict = ErrorCode(rawValue: 9)
    public static let declined = ErrorCode(rawValue: 10)
    public static let timedOut = ErrorCode(rawValue: 11)
    public static let cancelled = ErrorCode(rawValue: 12)
    public static let protocolViolation = ErrorCode(rawValue: 13)
    public static let internalError = ErrorCode(rawValue: 14)
    public static let rateLimited = ErrorCode(rawValue: 15)
    public static let notFound = ErrorCode(rawValue: 16)
    public static let alreadyRedeemed = ErrorCode(rawValue: 17)
    public static let expired = ErrorCode(rawValue: 18)
    public static let insufficientPoints = ErrorCode(rawValue: 19)
    /// An offline payment beyond the wallet's offline guarantee that its balance does
    /// not cover; the server declined it and the merchant is not paid.
    public static let offlineAllowanceExceeded = ErrorCode(rawValue: 20)
    /// A relayed request: the terminal could not reach the server or got no answer
    /// from it; the request may or may not have been processed.
    public static let gatewayUnreachable = ErrorCode(rawValue: 21)
    /// A relayed request larger than the terminal relays; it was not sent on.
    public static let payloadTooLarge = ErrorCode(rawValue: 22)
    /// This terminal does not relay requests (no gateway configured); nothing was sent on.
    public static let proxyUnavailable = ErrorCode(rawValue: 23)

    /// The name of a known code, nil for a code this version does not know.
    public var name: String? {
        switch rawValue {
        case 1: "insufficientFunds"
        case 2: "unknownWallet"
        case 3: "invalidAmount"
        case 4: "unsupportedCurrency"
        case 5: "sessionExpired"
        case 6: "sessionNotFound"
        case 7: "sessionTaken"
        case 8: "badSignature"
        case 9: "duplicatePaymentConflict"
        case 10: "declined"
        case 11: "timedOut"
        case 12: "cancelled"
        case 13: "protocolViolation"
        case 14: "internalError"
        case 15: "rateLimited"
        case 16: "notFound"
        case 17: "alreadyRedeemed"
        case 18: "expired"
        case 19: "insufficientPoints"
        case 20: "offlineAllowanceExceeded"
        case 21: "gatewayUnreachable"
        case 22: "payloadTooLarge"
        case 23: "proxyUnavailable"
        default: nil
        }
    }

    public var description: String { name ?? "error \(rawValue)" }

    /// The reason in words, for people (the name is for logs and programs).
    public var explanation: String {
        switch rawValue {
        case 1: "the wallet's balance does not cover it"
        case 2: "the wallet is not known to this merchant"
        case 3: "the amount is not valid"
        case 4: "the currency is not accepted"
        case 5: "the session expired"
        case 6: "the session no longer exists"
        case 7: "another wallet is paying this sale"
        case 8: "a signature did not verify"
        case 9: "the payment id was already used for another payment"
        case 10: "it was declined"
        case 11: "it took too long"
        case 12: "it was cancelled"
        case 13: "the other side broke the protocol"
        case 14: "the terminal failed internally"
        case 15: "too many attempts; wait a little"
        case 16: "it was not found"
        case 17: "it was already redeemed"
        case 18: "it expired"
        case 19: "there are not enough bonus points"
        case 20: "it exceeds the wallet's offline allowance"
        case 21: "the terminal could not reach the server"
        case 22: "the request is too large to relay"
        case 23: "this terminal does not relay requests"
        default: "error \(rawValue)"
        }
    }
}

/// Which redemption programmes the merchant runs, so a wallet can offer them with the payment.
///
/// On the wire one byte, bit 0 bonus, bit 1 gold, bit 2 coupon; other bits are refused rather
/// than ignored, because a peer setting them means something this version cannot honour.
public struct MerchantPrograms: Hashable, Sendable {
    public var hasBonusProgram: Bool
    public var hasGoldProgram: Bool
    public var hasCouponProgram: Bool

    public init(hasBonusProgram: Bool = false, hasGoldProgram: Bool = false, hasCouponProgram: Bool = false) {
        self.hasBonusProgram = hasBonusProgram
        self.hasGoldProgram = hasGoldProgram
        self.hasCouponProgram = hasCouponProgram
    }

    public static let none = MerchantPrograms()

    static let bonusBit: UInt8 = 0x01
    static let goldBit: UInt8 = 0x02
    static let couponBit: UInt8 = 0x04

    var wireValue: UInt8 {
        (hasBonusProgram ? Self.bonusBit : 0) | (hasGoldProgram ? Self.goldBit : 0)
            | (hasCouponProgram ? Self.couponBit : 0)
    }

    init(wireValue: UInt8, field: String) throws(WireError) {
        let known = Self.bonusBit | Self.goldBit | Self.couponBit
        guard wireValue & ~known == 0 else {
            throw .invalidValue(field: field, reason: "unknown flag bits \([wireValue & ~known].hexString)")
        }
        self.init(
            hasBonusProgram: wireValue & Self.bonusBit != 0, hasGoldProgram: wireValue & Self.goldBit != 0,
            hasCouponProgram: wireValue & Self.couponBit != 0)
    }
}

/// How a payment or redemption ended, as the terminal signs it in the receipt.
public enum ReceiptOutcome: Hashable, Sendable {
    case approved
    case declined(ErrorCode)
    /// The terminal could not reach its server and accepted the payment against the
    /// wallet's daily token; it forwards it to the server later. Not "approved": the server has
    /// not settled it yet.
    case acceptedOffline
}

/// Why a session was abandoned.
public enum CancelReason: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case userDeclined = 1
    case terminalCancelled = 2
    case timedOut = 3
    /// The terminal started a newer session (for example the cashier changed the amount).
    case superseded = 4

    public var description: String {
        switch self {
        case .userDeclined: "declined by the user"
        case .terminalCancelled: "cancelled at the terminal"
        case .timedOut: "timed out"
        case .superseded: "superseded by a newer session"
        }
    }
}

// MARK: - Messages

/// Wallet → terminal, the first message after the secure handshake: which session the wallet
/// means to join, with a key it made for this attempt alone and proof that it holds it.
///
/// The session key is fresh for every attempt, so nothing in a Hello identifies the wallet
/// across sessions or terminals (the long-term key travels first in the signed request, after
/// the person accepted). The proof signs this connection's handshake transcript, so a Hello
/// cannot be replayed on another connection, and a key the sender does not hold (or a point off
/// the curve) never gets an offer.
public struct Hello: Hashable, Sendable {
    public static let proofDomain: [UInt8] = Array("horizon/hello/v2".utf8)

    public let sessionID: SessionID
    public let transactionType: TransactionType
    public let sessionKey: PublicKeyBytes
    /// The session key's signature over `proofBytes(transcriptHash:)`.
    public let proof: SignatureBytes

    public init(
        sessionID: SessionID, transactionType: TransactionType, sessionKey: PublicKeyBytes,
        proof: SignatureBytes = .unsigned
    ) {
        self.sessionID = sessionID
        self.transactionType = transactionType
        self.sessionKey = sessionKey
        self.proof = proof
    }

    /// What the session key signs: the domain label, the connection's transcript hash, then the
    /// Hello's fields.
    public func proofBytes(transcriptHash: [UInt8]) -> [UInt8] {
        var writer = ByteWriter(capacity: 128)
        writer.write(raw: Self.proofDomain)
        writer.write(raw: transcriptHash)
        sessionID.write(to: &writer)
        writer.write(transactionType.rawValue)
        writer.write(raw: sessionKey.bytes)
        return writer.bytes
    }

    /// The same Hello carrying `proof`.
    public func withProof(_ proof: SignatureBytes) -> Hello {
        Hello(sessionID: sessionID, transactionType: transactionType, sessionKey: sessionKey, proof: proof)
    }
}

/// Terminal → wallet: what the person is asked to pay, signed by the terminal.
public struct Offer: Hashable, Sendable {
    /// Prefixed to `signedBytes` so an offer signature can never pass for another message's.
    public static let signatureDomain: [UInt8] = Array("horizon/offer/v2".utf8)

    public let sessionID: SessionID
    public let transactionType: TransactionType
    public let amount: Money
    public let registerUser: String
    /// What a redemption offer is for: the reward a bonus redemption buys, the coupon or the gold
    /// benefit asked for. Empty for payments.
    public let item: String
    /// Bonus points a bonus redemption costs; zero otherwise.
    public let quantity: Int64
    public let merchantPrograms: MerchantPrograms
    public let offerNonce: Nonce
    public let expiresAt: UnixTime
    /// The payment id a wallet must confirm under, when the terminal collects a payment its
    /// merchant's own system asked for (a payment intent: its id is the payment's idempotency key
    /// end to end). Nil lets the wallet choose one. On the wire it follows `expiresAt` only when
    /// present, so an offer without one is encoded as before.
    public let paymentID: PaymentID?
    public let signature: SignatureBytes

    /// Throws `fieldTooLong` for a register user or item over `MessageLimits.shortText` UTF-8
    /// bytes, `negativeAmount` for a negative quantity. Leave `signature` out to build the unsigned
    /// offer, sign its `signedBytes`, then call `withSignature(_:)`.
    public init(
        sessionID: SessionID, transactionType: TransactionType, amount: Money, registerUser: String,
        item: String = "", quantity: Int64 = 0, merchantPrograms: MerchantPrograms, offerNonce: Nonce,
        expiresAt: UnixTime, paymentID: PaymentID? = nil, signature: SignatureBytes = .unsigned
    ) throws(WireError) {
        try checkText(registerUser, field: "registerUser", maximum: MessageLimits.shortText)
        try checkText(item, field: "item", maximum: MessageLimits.shortText)
        try checkNotNegative(quantity, field: "quantity")
        self.sessionID = sessionID
        self.transactionType = transactionType
        self.amount = amount
        self.registerUser = registerUser
        self.item = item
        self.quantity = quantity
        self.merchantPrograms = merchantPrograms
        self.offerNonce = offerNonce
        self.expiresAt = expiresAt
        self.paymentID = paymentID
        self.signature = signature
    }

    private init(_ other: Offer, signature: SignatureBytes) {
        sessionID = other.sessionID
        transactionType = other.transactionType
        amount = other.amount
        registerUser = other.registerUser
        item = other.item
        quantity = other.quantity
        merchantPrograms = other.merchantPrograms
        offerNonce = other.offerNonce
        expiresAt = other.expiresAt
        paymentID = other.paymentID
        self.signature = signature
    }

    /// The same offer carrying `signature`.
    public func withSignature(_ signature: SignatureBytes) -> Offer { Offer(self, signature: signature) }

    /// What the terminal signs: the domain label, then every field but the signature, encoded
    /// exactly as on the wire.
    public var signedBytes: [UInt8] { domainSeparatedSignedFields }
}

/// How the wallet pays: from its Horizon account balance, the default, or with one
/// of its cards on the server, named by the card's id. Signed in the confirmation, so a terminal
/// cannot move a payment to another method.
public enum PaymentMethod: Hashable, Sendable, CustomStringConvertible {
    case accountBalance
    case card(id: String)

    /// The longest card id on the wire, in UTF-8 bytes (the server's are 34).
    public static let maximumCardIDBytes = 64

    static let accountBalanceTag: UInt8 = 0
    static let cardTag: UInt8 = 1

    /// Refuses a card id that is empty, too long or not printable ASCII.
    static func check(_ method: PaymentMethod) throws(WireError) {
        guard case .card(let id) = method else { return }
        guard !id.isEmpty, id.utf8.count <= maximumCardIDBytes else {
            throw .invalidValue(field: "paymentMethod", reason: "a card id is 1 to \(maximumCardIDBytes) bytes")
        }
        guard id.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw .invalidValue(field: "paymentMethod", reason: "a card id is printable ASCII without spaces")
        }
    }

    public var description: String {
        switch self {
        case .accountBalance: "account balance"
        case .card(let id): "card \(id)"
        }
    }
}

/// What `PaymentClient` asks which card to pay with (the reference's `paymentCardIDProvider`,
/// which `WalletClient` is): nil pays from the account balance.
public protocol PaymentCardIDProvider: Sendable {
    var paymentCardID: String? { get }
}

/// Wallet → terminal: the person accepted, signed by the wallet over everything the ledger
/// needs to execute the payment exactly once, and over the offer the person was shown.
public struct Confirm: Hashable, Sendable {
    /// v3: the payment method is signed too.
    public static let signatureDomain: [UInt8] = Array("horizon/confirm/v3".utf8)

    public let sessionID: SessionID
    /// SHA-256 of the terminal's full public key: a confirmation binds one terminal, not a
    /// 64-bit id another key could share.
    public let terminalKeyDigest: DigestBytes
    /// The wallet's long-term key, which signs this and which the ledger knows it by. First
    /// revealed here, after the person accepted.
    public let walletKey: PublicKeyBytes
    /// SHA-256 of the offer the person was shown, exactly as it arrived.
    public let offerDigest: DigestBytes
    public let amount: Money
    public let tip: Money
    public let paymentID: PaymentID
    public let walletNonce: Nonce
    public let expiresAt: UnixTime
    /// The account balance unless the person chose a card.
    public let paymentMethod: PaymentMethod
    public let signature: SignatureBytes

    /// Throws if the tip's currency differs from the amount's, amount plus tip exceeds
    /// `Money.maximumMinorUnits`, or a card id is malformed.
    public init(
        sessionID: SessionID, terminalKeyDigest: DigestBytes, walletKey: PublicKeyBytes, offerDigest: DigestBytes,
        amount: Money, tip: Money, paymentID: PaymentID, walletNonce: Nonce, expiresAt: UnixTime,
        paymentMethod: PaymentMethod = .accountBalance, signature: SignatureBytes = .unsigned
    ) throws(WireError) {
        try checkTip(amount: amount, tip: tip)
        try PaymentMethod.check(paymentMethod)
        self.paymentMethod = paymentMethod
        self.sessionID = sessionID
        self.terminalKeyDigest = terminalKeyDigest
        self.walletKey = walletKey
        self.offerDigest = offerDigest
        self.amount = amount
        self.tip = tip
        self.paymentID = paymentID
        self.walletNonce = walletNonce
        self.expiresAt = expiresAt
        self.signature = signature
    }

    private init(_ other: Confirm, signature: SignatureBytes) {
        sessionID = other.sessionID
        terminalKeyDigest = other.terminalKeyDigest
        walletKey = other.walletKey
        offerDigest = other.offerDigest
        amount = other.amount
        tip = other.tip
        paymentID = other.paymentID
        walletNonce = other.walletNonce
        expiresAt = other.expiresAt
        paymentMethod = other.paymentMethod
        self.signature = signature
    }

    /// The same confirmation carrying `signature`.
    public func withSignature(_ signature: SignatureBytes) -> Confirm { Confirm(self, signature: signature) }

    /// What the wallet signs: the domain label, then every field but the signature.
    public var signedBytes: [UInt8] { domainSeparatedSignedFields }
}

/// Terminal → wallet: the signed result of a payment or redemption.
public struct Receipt: Hashable, Sendable {
    public static let signatureDomain: [UInt8] = Array("horizon/receipt/v2".utf8)

    public let sessionID: SessionID
    public let transactionType: TransactionType
    public let paymentID: PaymentID
    public let outcome: ReceiptOutcome
    public let amount: Money
    public let tip: Money
    /// The processor's reference for the transaction, for support and refunds.
    public let transactionReference: UInt64
    public let settledAt: UnixTime
    public let bonusPointsEarned: Int64
    public let bonusPointsBalance: Int64
    public let signature: SignatureBytes

    /// Throws for a tip in another currency, amount plus tip out of range, or negative points.
    public init(
        sessionID: SessionID, transactionType: TransactionType, paymentID: PaymentID, outcome: ReceiptOutcome,
        amount: Money, tip: Money, transactionReference: UInt64, settledAt: UnixTime, bonusPointsEarned: Int64,
        bonusPointsBalance: Int64, signature: SignatureBytes = .unsigned
    ) throws(WireError) {
        try checkTip(amount: amount, tip: tip)
        try checkNotNegative(bonusPointsEarned, field: "bonusPointsEarned")
        try checkNotNegative(bonusPointsBalance, field: "bonusPointsBalance")
        self.sessionID = sessionID
        self.transactionType = transactionType
        self.paymentID = paymentID
        self.outcome = outcome
        self.amount = amount
        self.tip = tip
        self.transactionReference = transactionReference
        self.settledAt = settledAt
        self.bonusPointsEarned = bonusPointsEarned
        self.bonusPointsBalance = bonusPointsBalance
        self.signature = signature
    }

    private init(_ other: Receipt, signature: SignatureBytes) {
        sessionID = other.sessionID
        transactionType = other.transactionType
        paymentID = other.paymentID
        outcome = other.outcome
        amount = other.amount
        tip = other.tip
        transactionReference = other.transactionReference
        settledAt = other.settledAt
        bonusPointsEarned = other.bonusPointsEarned
        bonusPointsBalance = other.bonusPointsBalance
        self.signature = signature
    }

    /// The same receipt carrying `signature`.
    public func withSignature(_ signature: SignatureBytes) -> Receipt { Receipt(self, signature: signature) }

    /// What the terminal signs: the domain label, then every field but the signature.
    public var signedBytes: [UInt8] { domainSeparatedSignedFields }
}

/// Wallet → terminal: spend bonus points, a gold membership or a coupon, signed by the wallet
/// over the offer the person was shown, like `Confirm`.
public struct Redeem: Hashable, Sendable {
    public static let signatureDomain: [UInt8] = Array("horizon/redeem/v2".utf8)

    public let sessionID: SessionID
    /// Always a redemption type.
    public let transactionType: TransactionType
    /// SHA-256 of the terminal's full public key.
    public let terminalKeyDigest: DigestBytes
    /// The wallet's long-term key, which signs this.
    public let walletKey: PublicKeyBytes
    /// SHA-256 of the offer the person was shown.
    public let offerDigest: DigestBytes
    public let redemptionID: PaymentID
    /// The coupon code or membership id; may be empty for bonus points.
    public let item: String
    /// Points for a bonus redemption; a count otherwise.
    public let quantity: Int64
    public let walletNonce: Nonce
    public let expiresAt: UnixTime
    public let signature: SignatureBytes

    /// Throws for a payment type, an item over `MessageLimits.shortText` bytes, or a negative
    /// quantity.
    public init(
        sessionID: SessionID, transactionType: TransactionType, terminalKeyDigest: DigestBytes,
        walletKey: PublicKeyBytes, offerDigest: DigestBytes, redemptionID: PaymentID, item: String, quantity: Int64,
        walletNonce: Nonce, expiresAt: UnixTime, signature: SignatureBytes = .unsigned
    ) throws(WireError) {
        try checkRedemption(transactionType, field: "transactionType")
        try checkText(item, field: "item", maximum: MessageLimits.shortText)
        try checkNotNegative(quantity, field: "quantity")
        self.sessionID = sessionID
        self.transactionType = transactionType
        self.terminalKeyDigest = terminalKeyDigest
        self.walletKey = walletKey
        self.offerDigest = offerDigest
        self.redemptionID = redemptionID
        self.item = item
        self.quantity = quantity
        self.walletNonce = walletNonce
        self.expiresAt = expiresAt
        self.signature = signature
    }

    private init(_ other: Redeem, signature: SignatureBytes) {
        sessionID = other.sessionID
        transactionType = other.transactionType
        terminalKeyDigest = other.terminalKeyDigest
        walletKey = other.walletKey
        offerDigest = other.offerDigest
        redemptionID = other.redemptionID
        item = other.item
        quantity = other.quantity
        walletNonce = other.walletNonce
        expiresAt = other.expiresAt
        self.signature = signature
    }

    /// The same redemption carrying `signature`.
    public func withSignature(_ signature: SignatureBytes) -> Redeem { Redeem(self, signature: signature) }

    /// What the wallet signs: the domain label, then every field but the signature.
    public var signedBytes: [UInt8] { domainSeparatedSignedFields }
}

/// Either way: the sender abandons the session.
public struct Cancel: Hashable, Sendable {
    public let sessionID: SessionID
    public let reason: CancelReason
    public let message: String

    /// A `message` over `MessageLimits.messageText` UTF-8 bytes is shortened at a character
    /// boundary: it is diagnostic text, and refusing it would lose the cancellation itself.
    public init(sessionID: SessionID, reason: CancelReason, message: String = "") {
        self.sessionID = sessionID
        self.reason = reason
        self.message = truncatedText(message, maximum: MessageLimits.messageText)
    }
}

/// Either way: something went wrong, optionally about one payment.
public struct ErrorMessage: Hashable, Sendable {
    public let code: ErrorCode
    public let message: String
    public let paymentID: PaymentID?

    /// A `message` over `MessageLimits.messageText` UTF-8 bytes is shortened at a character
    /// boundary, as in `Cancel`.
    public init(code: ErrorCode, message: String = "", paymentID: PaymentID? = nil) {
        self.code = code
        self.message = truncatedText(message, maximum: MessageLimits.messageText)
        self.paymentID = paymentID
    }
}

/// Wallet → terminal: the stored result of a payment the wallet confirmed before the link
/// broke, so a "pending" payment resolves without risking a second charge.
///
/// Only the wallet that signed the request gets its answer: the query carries that wallet's key
/// and its signature over this connection's transcript and the id, so naming an id is not enough.
public struct PaymentStatusQuery: Hashable, Sendable {
    public static let proofDomain: [UInt8] = Array("horizon/status/v2".utf8)

    public let paymentID: PaymentID
    public let walletKey: PublicKeyBytes
    public let proof: SignatureBytes

    public init(paymentID: PaymentID, walletKey: PublicKeyBytes, proof: SignatureBytes = .unsigned) {
        self.paymentID = paymentID
        self.walletKey = walletKey
        self.proof = proof
    }

    /// What the wallet key signs: the domain label, the connection's transcript hash, the id.
    public func proofBytes(transcriptHash: [UInt8]) -> [UInt8] {
        Self.proofDomain + transcriptHash + paymentID.bytes + walletKey.bytes
    }

    /// The same query carrying `proof`.
    public func withProof(_ proof: SignatureBytes) -> PaymentStatusQuery {
        PaymentStatusQuery(paymentID: paymentID, walletKey: walletKey, proof: proof)
    }
}

/// Wallet → terminal: the wallet has stored the receipt (or the final answer) for this payment or
/// redemption id, so the terminal's journal can mark it acknowledged. Losing it costs nothing:
/// the terminal keeps answering that id from its journal.
public struct ReceiptAcknowledgement: Hashable, Sendable {
    public let paymentID: PaymentID

    public init(paymentID: PaymentID) { self.paymentID = paymentID }
}

/// A backend request or response the terminal relays for a wallet without network. The bytes
/// are sealed (HPKE) between wallet and backend elsewhere; the terminal cannot read or alter them.
public struct ProxyEnvelope: Hashable, Sendable {
    /// Pairs a response with its request.
    public let requestID: UInt32
    public let sealed: [UInt8]

    /// Throws `fieldTooLong` for more than `MessageLimits.sealedPayload` bytes.
    public init(requestID: UInt32, sealed: [UInt8]) throws(WireError) {
        guard sealed.count <= MessageLimits.sealedPayload else {
            throw .fieldTooLong(field: "sealed", length: sealed.count, maximum: MessageLimits.sealedPayload)
        }
        self.requestID = requestID
        self.sealed = sealed
    }
}

/// Terminal → wallet: why the relayed request `requestID` has no answer, in place of
/// its `ProxyResponse`. The code says what the wallet may conclude: `rateLimited`,
/// `payloadTooLarge` and `proxyUnavailable` mean the request never left the terminal;
/// `gatewayUnreachable` means it may have reached the server, so its outcome is unknown.
public struct ProxyError: Hashable, Sendable {
    public let requestID: UInt32
    public let code: ErrorCode
    public let message: String

    /// A `message` over `MessageLimits.messageText` UTF-8 bytes is shortened at a character
    /// boundary, as in `ErrorMessage`.
    public init(requestID: UInt32, code: ErrorCode, message: String = "") {
        self.requestID = requestID
        self.code = code
        self.message = truncatedText(message, maximum: MessageLimits.messageText)
    }
}

/// Terminal → wallet: the server is unreachable; to be accepted offline, the payment
/// this wallet confirmed needs its daily token. Sent only then, so an online payment costs no
/// byte and no round trip more.
public struct OfflineTokenRequest: Hashable, Sendable {
    public let sessionID: SessionID
    public let paymentID: PaymentID

    public init(sessionID: SessionID, paymentID: PaymentID) {
        self.sessionID = sessionID
        self.paymentID = paymentID
    }
}

/// Wallet → terminal: the wallet's daily token for the payment it confirmed, its
/// signed bytes as the server issued them; empty when the wallet has no valid token (the terminal
/// then refuses at once instead of waiting). It travels inside this connection's secure channel,
/// after the Confirm the wallet key signed: the terminal accepts only a token of that key.
public struct OfflineTokenPresentation: Hashable, Sendable {
    public let sessionID: SessionID
    public let paymentID: PaymentID
    public let token: [UInt8]

    /// Throws `fieldTooLong` for more than `MessageLimits.offlineToken` bytes.
    public init(sessionID: SessionID, paymentID: PaymentID, token: [UInt8]) throws(WireError) {
        guard token.count <= MessageLimits.offlineToken else {
            throw .fieldTooLong(field: "token", length: token.count, maximum: MessageLimits.offlineToken)
        }
        self.sessionID = sessionID
        self.paymentID = paymentID
        self.token = token
    }
}
