import HorizonCore
import HorizonProtocol
import Testing

/// Big-endian bytes of an integer, as the wire carries it.
func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    var writer = ByteWriter()
    writer.write(value)
    return writer.bytes
}

/// `count` bytes counting up from `start`, wrapping: recognisable in a hex dump.
func counting(_ count: Int, from start: UInt8) -> [UInt8] {
    (0..<count).map { start &+ UInt8(truncatingIfNeeded: $0) }
}

/// A sample message together with its wire layout written out by hand, field by field, in the
/// names the decoder reports. The layout documents the format independently of the encoder.
struct Sample: CustomTestStringConvertible {
    let name: String
    let message: SessionMessage
    let layout: [(field: String, size: Int)]

    var testDescription: String { name }

    var encoded: [UInt8] { message.encoded() }

    /// The encoding with some fields' bytes replaced (of any length).
    func bytes(replacing replacements: [String: [UInt8]]) -> [UInt8] {
        let original = encoded
        var result: [UInt8] = []
        var offset = 0
        for (field, size) in layout {
            result += replacements[field] ?? Array(original[offset..<(offset + size)])
            offset += size
        }
        return result
    }

    /// The field a decoder must report as truncated when the input stops after `length` bytes.
    func truncatedField(atLength length: Int) -> String? {
        var end = 0
        for (field, size) in layout {
            end += size
            if end > length { return field }
        }
        return nil
    }
}

/// Fixed values every test builds its messages from.
struct Fixtures {
    let sessionID: SessionID
    let terminalKeyID: TerminalKeyID
    let walletKey: PublicKeyBytes
    let paymentID: PaymentID
    let walletNonce: Nonce
    let offerNonce: Nonce
    let terminalKeyDigest: DigestBytes
    let offerDigest: DigestBytes
    let signature: SignatureBytes
    let amount: Money
    let tip: Money

    init() throws {
        sessionID = try #require(SessionID(rawValue: 0x0102_0304_0506_0708))
        terminalKeyID = try TerminalKeyID(bytes: counting(8, from: 0xA0))
        walletKey = try PublicKeyBytes(bytes: [0x04] + counting(64, from: 0x10))
        paymentID = try PaymentID(bytes: counting(16, from: 0x20))
        walletNonce = try Nonce(bytes: counting(16, from: 0x30))
        offerNonce = try Nonce(bytes: counting(16, from: 0x40))
        terminalKeyDigest = try DigestBytes(bytes: counting(32, from: 0x70))
        offerDigest = try DigestBytes(bytes: counting(32, from: 0x90))
        signature = try SignatureBytes(bytes: counting(64, from: 0x50))
        amount = try Money(minorUnits: 1250, currency: .eur)
        tip = try Money(minorUnits: 200, currency: .eur)
    }

    static let envelope: [(field: String, size: Int)] = [("version", 1), ("type", 1)]

    var hello: Hello {
        Hello(sessionID: sessionID, transactionType: .payment, sessionKey: walletKey, proof: signature)
    }

    func offer(registerUser: String = "Anna") throws -> Offer {
        try Offer(
            sessionID: sessionID, transactionType: .payment, amount: amount, registerUser: registerUser,
            item: "Free coffee", quantity: 100,
            merchantPrograms: MerchantPrograms(hasBonusProgram: true, hasCouponProgram: true), offerNonce: offerNonce,
            expiresAt: 1_750_000_000, signature: signature)
    }

    func confirm(amount: Money? = nil, tip: Money? = nil, paymentMethod: PaymentMethod = .accountBalance) throws
        -> Confirm
    {
        try Confirm(
            sessionID: sessionID, terminalKeyDigest: terminalKeyDigest, walletKey: walletKey, offerDigest: offerDigest,
            amount: amount ?? self.amount, tip: tip ?? self.tip, paymentID: paymentID, walletNonce: walletNonce,
            expiresAt: 1_750_000_060, paymentMethod: paymentMethod, signature: signature)
    }

    func receipt(outcome: ReceiptOutcome = .approved) throws -> Receipt {
        try Receipt(
            sessionID: sessionID, transactionType: .payment, paymentID: paymentID, outcome: outcome, amount: amount,
            tip: tip, transactionReference: 0xDEAD_BEEF, settledAt: 1_750_000_030, bonusPointsEarned: 14,
            bonusPointsBalance: 1_014, signature: signature)
    }

    func redeem(item: String = "SUMMER-24") throws -> Redeem {
        try Redeem(
            sessionID: sessionID, transactionType: .couponRedemption, terminalKeyDigest: terminalKeyDigest,
            walletKey: walletKey, offerDigest: offerDigest, redemptionID: paymentID, item: item, quantity: 1,
            walletNonce: walletNonce, expiresAt: 1_750_000_060, signature: signature)
    }

    /// One sample of every message type (and both shapes of the optional and the outcome).
    func samples() throws -> [Sample] {
        let header = Self.envelope
        let signedTail: [(field: String, size: Int)] = [("expiresAt", 8), ("signature", 64)]
        return [
            Sample(
                name: "hello", message: .hello(hello),
                layout: header + [("sessionID", 8), ("transactionType", 1), ("sessionKey", 65), ("proof", 64)]),
            Sample(
                name: "offer", message: .offer(try offer()),
                layout: header + [
                    ("sessionID", 8), ("transactionType", 1), ("amount currency", 3), ("amount", 8),
                    ("registerUser length", 2), ("registerUser", 4), ("item length", 2), ("item", 11),
                    ("quantity", 8), ("merchantPrograms", 1), ("offerNonce", 16),
                ] + signedTail),
            Sample(
                name: "confirm", message: .confirm(try confirm()),
                layout: header + [
                    ("sessionID", 8), ("terminalKeyDigest", 32), ("walletKey", 65), ("offerDigest", 32),
                    ("amount currency", 3), ("amount", 8), ("tip currency", 3), ("tip", 8), ("paymentID", 16),
                    ("walletNonce", 16), ("expiresAt", 8), ("paymentMethod", 1), ("signature", 64),
                ]),
            Sample(
                name: "confirm with a card", message: .confirm(try confirm(paymentMethod: .card(id: "c_card"))),
                layout: header + [
                    ("sessionID", 8), ("terminalKeyDigest", 32), ("walletKey", 65), ("offerDigest", 32),
                    ("amount currency", 3), ("amount", 8), ("tip currency", 3), ("tip", 8), ("paymentID", 16),
                    ("walletNonce", 16), ("expiresAt", 8), ("paymentMethod", 1), ("paymentMethod card id length", 2),
                    ("paymentMethod card id", 6), ("signature", 64),
                ]),
            Sample(
                name: "receipt approved", message: .receipt(try receipt()),
                layout: header + [
                    ("sessionID", 8), ("transactionType", 1), ("paymentID", 16), ("outcome", 1),
                    ("amount currency", 3), ("amount", 8), ("tip currency", 3), ("tip", 8),
                    ("transactionReference", 8), ("settledAt", 8), ("bonusPointsEarned", 8),
                    ("bonusPointsBalance", 8), ("signature", 64),
                ]),
            Sample(
                name: "receipt declined", message: .receipt(try receipt(outcome: .declined(.insufficientFunds))),
                layout: header + [
                    ("sessionID", 8), ("transactionType", 1), ("paymentID", 16), ("outcome", 1),
                    ("outcome code", 2), ("amount currency", 3), ("amount", 8), ("tip currency", 3), ("tip", 8),
                    ("transactionReference", 8), ("settledAt", 8), ("bonusPointsEarned", 8),
                    ("bonusPointsBalance", 8), ("signature", 64),
                ]),
            Sample(
                name: "receipt accepted offline", message: .receipt(try receipt(outcome: .acceptedOffline)),
                layout: header + [
                    ("sessionID", 8), ("transactionType", 1), ("paymentID", 16), ("outcome", 1),
                    ("amount currency", 3), ("amount", 8), ("tip currency", 3), ("tip", 8),
                    ("transactionReference", 8), ("settledAt", 8), ("bonusPointsEarned", 8),
                    ("bonusPointsBalance", 8), ("signature", 64),
                ]),
            Sample(
                name: "redeem", message: .redeem(try redeem()),
                layout: header + [
                    ("sessionID", 8), ("transactionType", 1), ("terminalKeyDigest", 32), ("walletKey", 65),
                    ("offerDigest", 32), ("redemptionID", 16), ("item length", 2), ("item", 9), ("quantity", 8),
                    ("walletNonce", 16),
                ] + signedTail),
            Sample(
                name: "cancel",
                message: .cancel(Cancel(sessionID: sessionID, reason: .userDeclined, message: "changed my mind")),
                layout: header + [("sessionID", 8), ("reason", 1), ("message length", 2), ("message", 15)]),
            Sample(
                name: "error with payment id",
                message: .error(ErrorMessage(code: .badSignature, message: "bad", paymentID: paymentID)),
                layout: header + [
                    ("code", 2), ("message length", 2), ("message", 3), ("paymentID flag", 1), ("paymentID", 16),
                ]),
            Sample(
                name: "error without payment id",
                message: .error(ErrorMessage(code: .sessionTaken, message: "taken")),
                layout: header + [("code", 2), ("message length", 2), ("message", 5), ("paymentID flag", 1)]),
            Sample(
                name: "payment status query",
                message: .paymentStatusQuery(
                    PaymentStatusQuery(paymentID: paymentID, walletKey: walletKey, proof: signature)),
                layout: header + [("paymentID", 16), ("walletKey", 65), ("proof", 64)]),
            Sample(
                name: "proxy request",
                message: .proxyRequest(try ProxyEnvelope(requestID: 7, sealed: counting(10, from: 0x60))),
                layout: header + [("requestID", 4), ("sealed length", 2), ("sealed", 10)]),
            Sample(
                name: "proxy response", message: .proxyResponse(try ProxyEnvelope(requestID: 0xFFFF_FFFF, sealed: [])),
                layout: header + [("requestID", 4), ("sealed length", 2), ("sealed", 0)]),
            Sample(
                name: "proxy error",
                message: .proxyError(ProxyError(requestID: 9, code: .payloadTooLarge, message: "big")),
                layout: header + [("requestID", 4), ("code", 2), ("message length", 2), ("message", 3)]),
            Sample(
                name: "receipt acknowledgement",
                message: .receiptAcknowledgement(ReceiptAcknowledgement(paymentID: paymentID)),
                layout: header + [("paymentID", 16)]),
            Sample(
                name: "offline token request",
                message: .offlineTokenRequest(OfflineTokenRequest(sessionID: sessionID, paymentID: paymentID)),
                layout: header + [("sessionID", 8), ("paymentID", 16)]),
            Sample(
                name: "offline token",
                message: .offlineToken(
                    try OfflineTokenPresentation(
                        sessionID: sessionID, paymentID: paymentID, token: counting(12, from: 0x70))),
                layout: header + [("sessionID", 8), ("paymentID", 16), ("token length", 2), ("token", 12)]),
        ]
    }
}
