import HorizonCore

/// The type tag of each session message, the second byte of its envelope.
public enum SessionMessageType: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case hello = 0x01
    case offer = 0x02
    case confirm = 0x03
    case receipt = 0x04
    case redeem = 0x05
    case cancel = 0x06
    case error = 0x07
    case paymentStatusQuery = 0x08
    case proxyRequest = 0x09
    case proxyResponse = 0x0A
    case receiptAcknowledgement = 0x0B
    case proxyError = 0x0C
    /// The terminal, cut from its server, asks for the wallet's daily token.
    case offlineTokenRequest = 0x0D
    /// The wallet's answer, its daily token (or none).
    case offlineToken = 0x0E

    public var description: String {
        switch self {
        case .hello: "hello"
        case .offer: "offer"
        case .confirm: "confirm"
        case .receipt: "receipt"
        case .redeem: "redeem"
        case .cancel: "cancel"
        case .error: "error"
        case .paymentStatusQuery: "payment status query"
        case .proxyRequest: "proxy request"
        case .proxyResponse: "proxy response"
        case .receiptAcknowledgement: "receipt acknowledgement"
        case .proxyError: "proxy error"
        case .offlineTokenRequest: "offline token request"
        case .offlineToken: "offline token"
        }
    }
}

/// One message of the session protocol, as carried inside the secure channel.
///
/// Envelope: `[version u8 = 2][type u8][body]`. Integers are big endian, strings and byte
/// strings carry a 16-bit length, amounts are a 3-letter currency code and an Int64 of minor
/// units. Decoding is strict (no trailing bytes, no unknown values), so each message has exactly
/// one encoding and what is signed is exactly what was sent.
public enum SessionMessage: Hashable, Sendable {
    case hello(Hello)
    case offer(Offer)
    case confirm(Confirm)
    case receipt(Receipt)
    case redeem(Redeem)
    case cancel(Cancel)
    case error(ErrorMessage)
    case paymentStatusQuery(PaymentStatusQuery)
    case proxyRequest(ProxyEnvelope)
    case proxyResponse(ProxyEnvelope)
    case receiptAcknowledgement(ReceiptAcknowledgement)
    case proxyError(ProxyError)
    case offlineTokenRequest(OfflineTokenRequest)
    case offlineToken(OfflineTokenPresentation)

    /// The protocol version this code speaks. Version 2: Hello carries a per-attempt
    /// session key with proof of possession; Confirm and Redeem bind the terminal's full key
    /// digest, the wallet's long-term key and the offer's digest; status queries are signed.
    /// Version 1 peers are refused as `unsupportedVersion`, never half understood.
    public static let version: UInt8 = 2

    /// Inputs above this are refused before any parsing; the largest message (a full proxy
    /// envelope) is about half of it.
    public static let maximumEncodedSize = 8192

    public var type: SessionMessageType {
        switch self {
        case .hello: .hello
        case .offer: .offer
        case .confirm: .confirm
        case .receipt: .receipt
        case .redeem: .redeem
        case .cancel: .cancel
        case .error: .error
        case .paymentStatusQuery: .paymentStatusQuery
        case .proxyRequest: .proxyRequest
        case .proxyResponse: .proxyResponse
        case .receiptAcknowledgement: .receiptAcknowledgement
        case .proxyError: .proxyError
        case .offlineTokenRequest: .offlineTokenRequest
        case .offlineToken: .offlineToken
        }
    }

    /// The session the message belongs to, for the messages that name one.
    public var sessionID: SessionID? {
        switch self {
        case .hello(let message): message.sessionID
        case .offer(let message): message.sessionID
        case .confirm(let message): message.sessionID
        case .receipt(let message): message.sessionID
        case .redeem(let message): message.sessionID
        case .cancel(let message): message.sessionID
        case .offlineTokenRequest(let message): message.sessionID
        case .offlineToken(let message): message.sessionID
        case .error, .paymentStatusQuery, .proxyRequest, .proxyResponse, .receiptAcknowledgement, .proxyError: nil
        }
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 192)
        writer.write(Self.version)
        writer.write(type.rawValue)
        switch self {
        case .hello(let message): message.write(to: &writer)
        case .offer(let message): message.write(to: &writer)
        case .confirm(let message): message.write(to: &writer)
        case .receipt(let message): message.write(to: &writer)
        case .redeem(let message): message.write(to: &writer)
        case .cancel(let message): message.write(to: &writer)
        case .error(let message): message.write(to: &writer)
        case .paymentStatusQuery(let message): message.write(to: &writer)
        case .proxyRequest(let message), .proxyResponse(let message): message.write(to: &writer)
        case .receiptAcknowledgement(let message): message.write(to: &writer)
        case .proxyError(let message): message.write(to: &writer)
        case .offlineTokenRequest(let message): message.write(to: &writer)
        case .offlineToken(let message): message.write(to: &writer)
        }
        return writer.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(WireError) -> SessionMessage {
        guard bytes.count <= maximumEncodedSize else {
            throw .oversized(size: bytes.count, maximum: maximumEncodedSize)
        }
        var reader = ByteReader(bytes)
        let version = try reader.readUInt8("version")
        guard version == Self.version else { throw .unsupportedVersion(version) }
        let tag = try reader.readUInt8("type")
        guard let type = SessionMessageType(rawValue: tag) else { throw .unknownType(tag) }
        let message: SessionMessage
        switch type {
        case .hello: message = .hello(try Hello.read(from: &reader))
        case .offer: message = .offer(try Offer.read(from: &reader))
        case .confirm: message = .confirm(try Confirm.read(from: &reader))
        case .receipt: message = .receipt(try Receipt.read(from: &reader))
        case .redeem: message = .redeem(try Redeem.read(from: &reader))
        case .cancel: message = .cancel(try Cancel.read(from: &reader))
        case .error: message = .error(try ErrorMessage.read(from: &reader))
        case .paymentStatusQuery: message = .paymentStatusQuery(try PaymentStatusQuery.read(from: &reader))
        case .proxyRequest: message = .proxyRequest(try ProxyEnvelope.read(from: &reader))
        case .proxyResponse: message = .proxyResponse(try ProxyEnvelope.read(from: &reader))
        case .receiptAcknowledgement:
            message = .receiptAcknowledgement(try ReceiptAcknowledgement.read(from: &reader))
        case .proxyError: message = .proxyError(try ProxyError.read(from: &reader))
        case .offlineTokenRequest: message = .offlineTokenRequest(try OfflineTokenRequest.read(from: &reader))
        case .offlineToken: message = .offlineToken(try OfflineTokenPresentation.read(from: &reader))
        }
        try reader.expectEnd()
        return message
    }
}

// MARK: - Bodies

extension Hello {
    func write(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(transactionType.rawValue)
        writer.write(raw: sessionKey.bytes)
        writer.write(raw: proof.bytes)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> Hello {
        let sessionID = try SessionID.read(from: &reader, field: "sessionID")
        let transactionType = try TransactionType.read(from: &reader, field: "transactionType")
        let sessionKey = try PublicKeyBytes.read(from: &reader, field: "sessionKey")
        let proof = try SignatureBytes.read(from: &reader, field: "proof")
        return Hello(sessionID: sessionID, transactionType: transactionType, sessionKey: sessionKey, proof: proof)
    }
}

extension Offer {
    func writeSignedFields(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(transactionType.rawValue)
        writeMoney(amount, to: &writer)
        writer.write(string: registerUser)
        writer.write(string: item)
        writer.write(quantity)
        writer.write(merchantPrograms.wireValue)
        writer.write(raw: offerNonce.bytes)
        writer.write(expiresAt)
        if let paymentID { writer.write(raw: paymentID.bytes) }
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> Offer {
        let sessionID = try SessionID.read(from: &reader, field: "sessionID")
        let transactionType = try TransactionType.read(from: &reader, field: "transactionType")
        let amount = try readMoney(from: &reader, field: "amount")
        let registerUser = try reader.readString("registerUser", maximumBytes: MessageLimits.shortText)
        let item = try reader.readString("item", maximumBytes: MessageLimits.shortText)
        let quantity = try reader.read(Int64.self, "quantity")
        let programs = try MerchantPrograms(
            wireValue: try reader.readUInt8("merchantPrograms"), field: "merchantPrograms")
        let offerNonce = try Nonce.read(from: &reader, field: "offerNonce")
        let expiresAt = try reader.read(Int64.self, "expiresAt")
        // The payment id is there when room for it and the signature follows (one encoding
        // either way; anything shorter is the signature and trailing bytes).
        let paymentID =
            reader.remaining >= PaymentID.byteCount + SignatureBytes.byteCount
            ? try PaymentID.read(from: &reader, field: "paymentID") : nil
        let signature = try SignatureBytes.read(from: &reader, field: "signature")
        return try Offer(
            sessionID: sessionID, transactionType: transactionType, amount: amount, registerUser: registerUser,
            item: item, quantity: quantity, merchantPrograms: programs, offerNonce: offerNonce, expiresAt: expiresAt,
            paymentID: paymentID, signature: signature)
    }
}

extension Confirm {
    func writeSignedFields(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(raw: terminalKeyDigest.bytes)
        writer.write(raw: walletKey.bytes)
        writer.write(raw: offerDigest.bytes)
        writeMoney(amount, to: &writer)
        writeMoney(tip, to: &writer)
        writer.write(raw: paymentID.bytes)
        writer.write(raw: walletNonce.bytes)
        writer.write(expiresAt)
        switch paymentMethod {
        case .accountBalance: writer.write(PaymentMethod.accountBalanceTag)
        case .card(let id):
            writer.write(PaymentMethod.cardTag)
            writer.write(string: id)
        }
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> Confirm {
        let sessionID = try SessionID.read(from: &reader, field: "sessionID")
        let terminalKeyDigest = try DigestBytes.read(from: &reader, field: "terminalKeyDigest")
        let walletKey = try PublicKeyBytes.read(from: &reader, field: "walletKey")
        let offerDigest = try DigestBytes.read(from: &reader, field: "offerDigest")
        let amount = try readMoney(from: &reader, field: "amount")
        let tip = try readMoney(from: &reader, field: "tip")
        try checkTip(amount: amount, tip: tip)
        let paymentID = try PaymentID.read(from: &reader, field: "paymentID")
        let walletNonce = try Nonce.read(from: &reader, field: "walletNonce")
        let expiresAt = try reader.read(Int64.self, "expiresAt")
        let paymentMethod: PaymentMethod
        switch try reader.read(UInt8.self, "paymentMethod") {
        case PaymentMethod.accountBalanceTag: paymentMethod = .accountBalance
        case PaymentMethod.cardTag:
            paymentMethod = .card(
                id: try reader.readString("paymentMethod card id", maximumBytes: PaymentMethod.maximumCardIDBytes))
        case let other:
            throw .invalidValue(field: "paymentMethod", reason: "unknown payment method \(other)")
        }
        let signature = try SignatureBytes.read(from: &reader, field: "signature")
        return try Confirm(
            sessionID: sessionID, terminalKeyDigest: terminalKeyDigest, walletKey: walletKey,
            offerDigest: offerDigest, amount: amount, tip: tip, paymentID: paymentID, walletNonce: walletNonce,
            expiresAt: expiresAt, paymentMethod: paymentMethod, signature: signature)
    }
}

extension Receipt {
    static let approvedTag: UInt8 = 1
    static let declinedTag: UInt8 = 2
    static let acceptedOfflineTag: UInt8 = 3

    func writeSignedFields(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(transactionType.rawValue)
        writer.write(raw: paymentID.bytes)
        switch outcome {
        case .approved:
            writer.write(Self.approvedTag)
        case .declined(let code):
            writer.write(Self.declinedTag)
            writer.write(code.rawValue)
        case .acceptedOffline:
            writer.write(Self.acceptedOfflineTag)
        }
        writeMoney(amount, to: &writer)
        writeMoney(tip, to: &writer)
        writer.write(transactionReference)
        writer.write(settledAt)
        writer.write(bonusPointsEarned)
        writer.write(bonusPointsBalance)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> Receipt {
        let sessionID = try SessionID.read(from: &reader, field: "sessionID")
        let transactionType = try TransactionType.read(from: &reader, field: "transactionType")
        let paymentID = try PaymentID.read(from: &reader, field: "paymentID")
        let outcome: ReceiptOutcome
        switch try reader.readUInt8("outcome") {
        case approvedTag: outcome = .approved
        case declinedTag: outcome = .declined(ErrorCode(rawValue: try reader.read(UInt16.self, "outcome code")))
        case acceptedOfflineTag: outcome = .acceptedOffline
        case let other: throw .invalidValue(field: "outcome", reason: "unknown outcome \(other)")
        }
        let amount = try readMoney(from: &reader, field: "amount")
        let tip = try readMoney(from: &reader, field: "tip")
        try checkTip(amount: amount, tip: tip)
        let transactionReference = try reader.read(UInt64.self, "transactionReference")
        let settledAt = try reader.read(Int64.self, "settledAt")
        let earned = try reader.read(Int64.self, "bonusPointsEarned")
        try checkNotNegative(earned, field: "bonusPointsEarned")
        let balance = try reader.read(Int64.self, "bonusPointsBalance")
        try checkNotNegative(balance, field: "bonusPointsBalance")
        let signature = try SignatureBytes.read(from: &reader, field: "signature")
        return try Receipt(
            sessionID: sessionID, transactionType: transactionType, paymentID: paymentID, outcome: outcome,
            amount: amount, tip: tip, transactionReference: transactionReference, settledAt: settledAt,
            bonusPointsEarned: earned, bonusPointsBalance: balance, signature: signature)
    }
}

extension Redeem {
    func writeSignedFields(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(transactionType.rawValue)
        writer.write(raw: terminalKeyDigest.bytes)
        writer.write(raw: walletKey.bytes)
        writer.write(raw: offerDigest.bytes)
        writer.write(raw: redemptionID.bytes)
        writer.write(string: item)
        writer.write(quantity)
        writer.write(raw: walletNonce.bytes)
        writer.write(expiresAt)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> Redeem {
        let sessionID = try SessionID.read(from: &reader, field: "sessionID")
        let transactionType = try TransactionType.read(from: &reader, field: "transactionType")
        try checkRedemption(transactionType, field: "transactionType")
        let terminalKeyDigest = try DigestBytes.read(from: &reader, field: "terminalKeyDigest")
        let walletKey = try PublicKeyBytes.read(from: &reader, field: "walletKey")
        let offerDigest = try DigestBytes.read(from: &reader, field: "offerDigest")
        let redemptionID = try PaymentID.read(from: &reader, field: "redemptionID")
        let item = try reader.readString("item", maximumBytes: MessageLimits.shortText)
        let quantity = try reader.read(Int64.self, "quantity")
        try checkNotNegative(quantity, field: "quantity")
        let walletNonce = try Nonce.read(from: &reader, field: "walletNonce")
        let expiresAt = try reader.read(Int64.self, "expiresAt")
        let signature = try SignatureBytes.read(from: &reader, field: "signature")
        return try Redeem(
            sessionID: sessionID, transactionType: transactionType, terminalKeyDigest: terminalKeyDigest,
            walletKey: walletKey, offerDigest: offerDigest, redemptionID: redemptionID, item: item,
            quantity: quantity, walletNonce: walletNonce, expiresAt: expiresAt, signature: signature)
    }
}

extension Cancel {
    func write(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(reason.rawValue)
        writer.write(string: message)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> Cancel {
        let sessionID = try SessionID.read(from: &reader, field: "sessionID")
        let rawReason = try reader.readUInt8("reason")
        guard let reason = CancelReason(rawValue: rawReason) else {
            throw .invalidValue(field: "reason", reason: "unknown cancel reason \(rawReason)")
        }
        let message = try reader.readString("message", maximumBytes: MessageLimits.messageText)
        return Cancel(sessionID: sessionID, reason: reason, message: message)
    }
}

extension ErrorMessage {
    func write(to writer: inout ByteWriter) {
        writer.write(code.rawValue)
        writer.write(string: message)
        if let paymentID {
            writer.write(UInt8(1))
            writer.write(raw: paymentID.bytes)
        } else {
            writer.write(UInt8(0))
        }
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> ErrorMessage {
        let code = ErrorCode(rawValue: try reader.read(UInt16.self, "code"))
        let message = try reader.readString("message", maximumBytes: MessageLimits.messageText)
        let paymentID: PaymentID?
        switch try reader.readUInt8("paymentID flag") {
        case 0: paymentID = nil
        case 1: paymentID = try PaymentID.read(from: &reader, field: "paymentID")
        case let other: throw .invalidValue(field: "paymentID", reason: "presence flag \(other), expected 0 or 1")
        }
        return ErrorMessage(code: code, message: message, paymentID: paymentID)
    }
}

extension PaymentStatusQuery {
    func write(to writer: inout ByteWriter) {
        writer.write(raw: paymentID.bytes)
        writer.write(raw: walletKey.bytes)
        writer.write(raw: proof.bytes)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> PaymentStatusQuery {
        PaymentStatusQuery(
            paymentID: try PaymentID.read(from: &reader, field: "paymentID"),
            walletKey: try PublicKeyBytes.read(from: &reader, field: "walletKey"),
            proof: try SignatureBytes.read(from: &reader, field: "proof"))
    }
}

extension ReceiptAcknowledgement {
    func write(to writer: inout ByteWriter) { writer.write(raw: paymentID.bytes) }

    static func read(from reader: inout ByteReader) throws(WireError) -> ReceiptAcknowledgement {
        ReceiptAcknowledgement(paymentID: try PaymentID.read(from: &reader, field: "paymentID"))
    }
}

extension ProxyError {
    func write(to writer: inout ByteWriter) {
        writer.write(requestID)
        writer.write(code.rawValue)
        writer.write(string: message)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> ProxyError {
        let requestID = try reader.read(UInt32.self, "requestID")
        let code = ErrorCode(rawValue: try reader.read(UInt16.self, "code"))
        let message = try reader.readString("message", maximumBytes: MessageLimits.messageText)
        return ProxyError(requestID: requestID, code: code, message: message)
    }
}

extension ProxyEnvelope {
    func write(to writer: inout ByteWriter) {
        writer.write(requestID)
        writer.write(lengthPrefixed: sealed)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> ProxyEnvelope {
        let requestID = try reader.read(UInt32.self, "requestID")
        let sealed = try reader.readLengthPrefixed("sealed", maximum: MessageLimits.sealedPayload)
        return try ProxyEnvelope(requestID: requestID, sealed: sealed)
    }
}

extension OfflineTokenRequest {
    func write(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(raw: paymentID.bytes)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> OfflineTokenRequest {
        OfflineTokenRequest(
            sessionID: try SessionID.read(from: &reader, field: "sessionID"),
            paymentID: try PaymentID.read(from: &reader, field: "paymentID"))
    }
}

extension OfflineTokenPresentation {
    func write(to writer: inout ByteWriter) {
        sessionID.write(to: &writer)
        writer.write(raw: paymentID.bytes)
        writer.write(lengthPrefixed: token)
    }

    static func read(from reader: inout ByteReader) throws(WireError) -> OfflineTokenPresentation {
        let sessionID = try SessionID.read(from: &reader, field: "sessionID")
        let paymentID = try PaymentID.read(from: &reader, field: "paymentID")
        let token = try reader.readLengthPrefixed("token", maximum: MessageLimits.offlineToken)
        return try OfflineTokenPresentation(sessionID: sessionID, paymentID: paymentID, token: token)
    }
}

// MARK: - Field helpers

/// Writes an amount as its 3-letter currency code and Int64 minor units.
func writeMoney(_ money: Money, to writer: inout ByteWriter) {
    writer.write(raw: Array(money.currency.code.utf8))
    writer.write(money.minorUnits)
}

/// Reads an amount, naming `field` in every error so a bad tip is told from a bad amount.
func readMoney(from reader: inout ByteReader, field: String) throws(WireError) -> Money {
    let code = try reader.readBytes(3, "\(field) currency")
    guard code.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
        throw .unsupportedCurrency(escapedCurrencyCode(code))
    }
    let currency = try Currency(code: String(decoding: code, as: UTF8.self))
    let minorUnits = try reader.read(Int64.self, field)
    guard minorUnits >= 0 else { throw .negativeAmount(field: field) }
    guard minorUnits <= Money.maximumMinorUnits else { throw .amountOutOfRange(field: field) }
    return try Money(minorUnits: minorUnits, currency: currency)
}

/// A currency code from the wire as printable text: bytes outside printable ASCII (and the
/// backslash) become `\xNN`, so a hostile code cannot inject control characters into logs.
func escapedCurrencyCode(_ bytes: [UInt8]) -> String {
    var text = ""
    for byte in bytes {
        if byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") {
            text.append(Character(Unicode.Scalar(byte)))
        } else {
            text += "\\x" + [byte].hexString
        }
    }
    return text
}

/// A tip must be in the amount's currency and the two together within range.
func checkTip(amount: Money, tip: Money) throws(WireError) {
    guard tip.currency == amount.currency else {
        throw .invalidValue(
            field: "tip", reason: "currency \(tip.currency.code) differs from the amount's \(amount.currency.code)")
    }
    // Both are at most 10^15, so the sum cannot overflow Int64.
    guard amount.minorUnits + tip.minorUnits <= Money.maximumMinorUnits else {
        throw .amountOutOfRange(field: "tip")
    }
}

func checkNotNegative(_ value: Int64, field: String) throws(WireError) {
    guard value >= 0 else { throw .negativeAmount(field: field) }
}

func checkRedemption(_ type: TransactionType, field: String) throws(WireError) {
    guard type.isRedemption else { throw .invalidValue(field: field, reason: "\(type) is not a redemption") }
}

func checkText(_ text: String, field: String, maximum: Int) throws(WireError) {
    let length = text.utf8.count
    guard length <= maximum else { throw .fieldTooLong(field: field, length: length, maximum: maximum) }
}

/// The longest prefix of whole characters that fits `maximum` UTF-8 bytes.
func truncatedText(_ text: String, maximum: Int) -> String {
    guard text.utf8.count > maximum else { return text }
    var result = ""
    var length = 0
    for character in text {
        let size = character.utf8.count
        guard length + size <= maximum else { break }
        result.append(character)
        length += size
    }
    return result
}

/// A message the sender signs: its signed fields, then the signature.
protocol SignedFields {
    static var signatureDomain: [UInt8] { get }
    var signature: SignatureBytes { get }
    func writeSignedFields(to writer: inout ByteWriter)
}

extension SignedFields {
    func write(to writer: inout ByteWriter) {
        writeSignedFields(to: &writer)
        writer.write(raw: signature.bytes)
    }

    /// The domain label, then every field but the signature, exactly as on the wire.
    var domainSeparatedSignedFields: [UInt8] {
        var writer = ByteWriter(capacity: 160)
        writer.write(raw: Self.signatureDomain)
        writeSignedFields(to: &writer)
        return writer.bytes
    }
}

extension Offer: SignedFields {}
extension Confirm: SignedFields {}
extension Receipt: SignedFields {}
extension Redeem: SignedFields {}
