import Crypto
import HorizonCore
import HorizonProtocol
import HorizonSecureChannel

/// Fixed keys and values every target and seed uses. The keys are derived from labels, not
/// drawn, so seeds written by one run (a ServerHello, a signed offer) are valid in every later
/// run and the corpus in the repository stays meaningful.
final class FuzzWorld: Sendable {
    static let shared = FuzzWorld()
    static let wallClock: UnixTime = 1_800_000_000

    let anchorKey: P256.Signing.PrivateKey
    let terminalKey: P256.Signing.PrivateKey
    let walletKey: P256.Signing.PrivateKey
    let identity: TerminalIdentity
    let sessionID: SessionID
    let terminalKeyID: TerminalKeyID

    private init() {
        do {
            anchorKey = try Self.key("horizon-fuzz trust anchor")
            terminalKey = try Self.key("horizon-fuzz terminal")
            walletKey = try Self.key("horizon-fuzz wallet")
            identity = try TerminalIdentity(
                signingKey: terminalKey,
                credential: .issue(
                    by: anchorKey, merchantID: "m-fuzz", merchantName: "Fuzz Café", terminalKey: terminalKey.publicKey,
                    notBefore: Self.wallClock - 86_400, expiresAt: Self.wallClock + 86_400))
            guard let sessionID = SessionID(rawValue: 0x0102_0304_0506_0708) else { finding("session id") }
            self.sessionID = sessionID
            terminalKeyID = try TerminalKeyID(bytes: identity.keyID)
        } catch {
            finding("the fuzz world could not be set up: \(error)")
        }
    }

    /// A P-256 key from a label (a SHA-256 digest is a valid scalar with overwhelming odds).
    static func key(_ label: String) throws -> P256.Signing.PrivateKey {
        try P256.Signing.PrivateKey(rawRepresentation: Array(SHA256.hash(data: Array(label.utf8))))
    }

    var anchors: [TrustAnchor] { [TrustAnchor(publicKey: anchorKey.publicKey)] }

    /// The routing context a wallet binds into its handshake: the session id, big endian.
    var context: [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: sessionID.rawValue >> (56 - 8 * $0)) } }

    func signature(_ bytes: [UInt8], with key: P256.Signing.PrivateKey) -> SignatureBytes {
        do {
            return try SignatureBytes(bytes: try sign(bytes, with: key))
        } catch {
            finding("signing failed: \(error)")
        }
    }

    /// One of every message, signed for real where the protocol signs.
    func sampleMessages() -> [SessionMessage] {
        do {
            let walletPublic = try PublicKeyBytes(bytes: Array(walletKey.publicKey.x963Representation))
            let amount = try Money(minorUnits: 1250, currency: .eur)
            let tip = try Money(minorUnits: 150, currency: .eur)
            let paymentID = try PaymentID(bytes: Array(0x20..<0x30))
            let walletNonce = try Nonce(bytes: Array(0x30..<0x40))
            let offerNonce = try Nonce(bytes: Array(0x40..<0x50))
            let offerDigest = try DigestBytes(bytes: Array(0x60..<0x80))
            let terminalKeyDigest = try DigestBytes(
                bytes: Array(SHA256.hash(data: terminalKey.publicKey.x963Representation)))
            let offer = try Offer(
                sessionID: sessionID, transactionType: .payment, amount: amount, registerUser: "Ana",
                merchantPrograms: MerchantPrograms(hasBonusProgram: true), offerNonce: offerNonce,
                expiresAt: Self.wallClock + 120)
            let redemptionOffer = try Offer(
                sessionID: sessionID, transactionType: .bonusRedemption, amount: amount, registerUser: "",
                item: "Free coffee", quantity: 100,
                merchantPrograms: MerchantPrograms(hasBonusProgram: true, hasGoldProgram: true, hasCouponProgram: true),
                offerNonce: offerNonce, expiresAt: Self.wallClock + 120)
            let confirm = try Confirm(
                sessionID: sessionID, terminalKeyDigest: terminalKeyDigest, walletKey: walletPublic,
                offerDigest: offerDigest, amount: amount, tip: tip, paymentID: paymentID, walletNonce: walletNonce,
                expiresAt: Self.wallClock + 120)
            // The same confirmation paying with a card: the method is signed too.
            let cardConfirm = try Confirm(
                sessionID: sessionID, terminalKeyDigest: terminalKeyDigest, walletKey: walletPublic,
                offerDigest: offerDigest, amount: amount, tip: tip, paymentID: paymentID, walletNonce: walletNonce,
                expiresAt: Self.wallClock + 120, paymentMethod: .card(id: "c_0123456789abcdef0123456789abcdef"))
            let receipt = try Receipt(
                sessionID: sessionID, transactionType: .payment, paymentID: paymentID, outcome: .approved,
                amount: amount, tip: tip, transactionReference: 42, settledAt: Self.wallClock, bonusPointsEarned: 12,
                bonusPointsBalance: 112)
            let declined = try Receipt(
                sessionID: sessionID, transactionType: .payment, paymentID: paymentID,
                outcome: .declined(.insufficientFunds), amount: amount, tip: tip, transactionReference: 0,
                settledAt: Self.wallClock, bonusPointsEarned: 0, bonusPointsBalance: 0)
            let redeem = try Redeem(
                sessionID: sessionID, transactionType: .couponRedemption, terminalKeyDigest: terminalKeyDigest,
                walletKey: walletPublic, offerDigest: offerDigest, redemptionID: paymentID, item: "SUMMER-24",
                quantity: 1, walletNonce: walletNonce, expiresAt: Self.wallClock + 120)
            let hello = Hello(sessionID: sessionID, transactionType: .payment, sessionKey: walletPublic)
            let transcript = [UInt8](repeating: 0x5A, count: 32)
            let query = PaymentStatusQuery(paymentID: paymentID, walletKey: walletPublic)
            return [
                .hello(hello.withProof(signature(hello.proofBytes(transcriptHash: transcript), with: walletKey))),
                .offer(offer.withSignature(signature(offer.signedBytes, with: terminalKey))),
                .offer(redemptionOffer.withSignature(signature(redemptionOffer.signedBytes, with: terminalKey))),
                .confirm(confirm.withSignature(signature(confirm.signedBytes, with: walletKey))),
                .confirm(cardConfirm.withSignature(signature(cardConfirm.signedBytes, with: walletKey))),
                .receipt(receipt.withSignature(signature(receipt.signedBytes, with: terminalKey))),
                .receipt(declined.withSignature(signature(declined.signedBytes, with: terminalKey))),
                .redeem(redeem.withSignature(signature(redeem.signedBytes, with: walletKey))),
                .cancel(Cancel(sessionID: sessionID, reason: .timedOut, message: "no decision in time")),
                .error(ErrorMessage(code: .sessionNotFound, message: "nothing was charged", paymentID: paymentID)),
                .error(ErrorMessage(code: .sessionTaken, message: "taken")),
                .paymentStatusQuery(
                    query.withProof(signature(query.proofBytes(transcriptHash: transcript), with: walletKey))),
                .receiptAcknowledgement(ReceiptAcknowledgement(paymentID: paymentID)),
                .proxyRequest(try ProxyEnvelope(requestID: 7, sealed: Array(0..<40))),
                .proxyResponse(try ProxyEnvelope(requestID: 7, sealed: [])),
                .proxyError(ProxyError(requestID: 7, code: .gatewayUnreachable, message: "no answer")),
            ]
        } catch {
            finding("the sample messages could not be built: \(error)")
        }
    }
}
