import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonProtocol
import HorizonSecureChannel

/// The cryptography of one payment, terminal and wallet together, called directly on
/// swift-crypto with nothing around it: the denominator of the budget's "within 3x".
///
/// It repeats what `HandshakeInitiator`/`HandshakeResponder`, `SecureChannel` and the roles do
/// for one payment, on inputs of the same sizes (real messages, encoded as on the wire, built
/// once beforehand), and the minimum work that needs: each peer public key is decoded once.
///
/// | operation | count | where in a payment |
/// |---|---|---|
/// | ECDSA P-256 sign | 5 | offer, handshake transcript, Hello proof, confirmation, receipt |
/// | ECDSA P-256 verify | 6 | credential, transcript, offer (wallet); Hello proof, confirmation (terminal); receipt (wallet) |
/// | P-256 key generation | 3 | one ephemeral key each side, the wallet's session key (`ShortLivedKeys`, as the roles) |
/// | ECDH P-256 | 2 | one key agreement each side |
/// | HKDF-SHA256 | 4 | two direction keys each side |
/// | AES-256-GCM seal / open | 4 / 4 | Hello, Offer, Confirm, Receipt records |
/// | SHA-256 | 7 | transcript hash and confirmation code each side, the offer digest (terminal at open, wallet on receipt), the ledger's content digest |
/// | public key decoding | 5 | both ephemeral keys, the terminal's, the session and the wallet's signing keys |
/// | secure random | 2 × 32 bytes | the handshake nonces |
///
/// A terminal that settles through a server (`payment-cpu --through-server`) also signs the settlement
/// request (`HorizonSignature`: the body's SHA-256, then ECDSA over the signed lines): one more
/// signature and one more SHA-256 (`signsSettlementRequest`).
final class CryptoBaseline {
    static func inventory(signsSettlementRequest: Bool) -> [String: Int] {
        let extra = signsSettlementRequest ? 1 : 0
        return [
            "ecdsaSign": 5 + extra, "ecdsaVerify": 6, "keyGeneration": 3, "keyAgreement": 2, "hkdf": 4, "aeadSeal": 4,
            "aeadOpen": 4, "sha256": 7 + extra, "publicKeyDecoding": 5,
        ]
    }

    private let anchorKey = P256.Signing.PrivateKey()
    private let terminalKey = P256.Signing.PrivateKey()
    private let walletKey = P256.Signing.PrivateKey()
    private let credentialSignedBytes: [UInt8]
    private let credentialSignature: P256.Signing.ECDSASignature
    private let terminalKeyBytes: [UInt8]
    private let walletKeyBytes: [UInt8]
    private let credentialBytes: [UInt8]
    private let contextBytes: [UInt8]
    private let offerSignedBytes: [UInt8]
    private let helloFields: Hello
    private let confirmSignedBytes: [UInt8]
    private let receiptSignedBytes: [UInt8]
    /// Plaintexts of the four records, as the roles encode them.
    private let hello: [UInt8]
    private let offer: [UInt8]
    private let confirm: [UInt8]
    private let receipt: [UInt8]
    /// The settlement request's body and signed lines, when the terminal settles through a server.
    private let settlementRequest: (body: [UInt8], signedLines: [UInt8])?

    init(signsSettlementRequest: Bool = false) throws {
        let credential = try TerminalCredential.issue(
            by: anchorKey, merchantID: "m-0", merchantName: "Benchmark Café 0", terminalKey: terminalKey.publicKey,
            notBefore: Shop.wallClock - 86_400, expiresAt: Shop.wallClock + 365 * 86_400)
        credentialBytes = credential.encoded()
        // The credential signs its label and body: the encoding without the trailing signature.
        credentialSignedBytes = Array("horizon/credential/v2".utf8) + credentialBytes.dropLast(64)
        credentialSignature = try P256.Signing.ECDSASignature(rawRepresentation: credential.signature)
        guard anchorKey.publicKey.isValidSignature(credentialSignature, for: credentialSignedBytes) else {
            throw BenchmarkError("the credential's signed bytes were not rebuilt correctly")
        }
        terminalKeyBytes = Array(terminalKey.publicKey.x963Representation)
        walletKeyBytes = Array(walletKey.publicKey.x963Representation)

        var random = SystemRandomNumberGenerator()
        let sessionID = SessionID.random(using: &random)
        contextBytes = (0..<8).map { UInt8(truncatingIfNeeded: sessionID.rawValue >> (56 - 8 * $0)) }
        let keyDigest = try DigestBytes(bytes: Array(SHA256.hash(data: terminalKeyBytes)))
        let walletKey = try PublicKeyBytes(bytes: walletKeyBytes)
        let anySignature = try SignatureBytes(bytes: [UInt8](repeating: 7, count: 64))
        let offerMessage = try Offer(
            sessionID: sessionID, transactionType: .payment, amount: Shop.amount, registerUser: "Ana",
            merchantPrograms: MerchantPrograms(hasBonusProgram: true), offerNonce: Nonce.random(using: &random),
            expiresAt: Shop.wallClock + 120)
        let confirmMessage = try Confirm(
            sessionID: sessionID, terminalKeyDigest: keyDigest, walletKey: walletKey,
            offerDigest: try DigestBytes(bytes: [UInt8](repeating: 3, count: 32)), amount: Shop.amount, tip: Shop.tip,
            paymentID: PaymentID.random(using: &random), walletNonce: Nonce.random(using: &random),
            expiresAt: Shop.wallClock + 120)
        let receiptMessage = try Receipt(
            sessionID: sessionID, transactionType: .payment, paymentID: confirmMessage.paymentID, outcome: .approved,
            amount: Shop.amount, tip: Shop.tip, transactionReference: 42, settledAt: Shop.wallClock,
            bonusPointsEarned: 12, bonusPointsBalance: 1200)
        offerSignedBytes = offerMessage.signedBytes
        confirmSignedBytes = confirmMessage.signedBytes
        receiptSignedBytes = receiptMessage.signedBytes
        helloFields = Hello(sessionID: sessionID, transactionType: .payment, sessionKey: walletKey)
        hello = SessionMessage.hello(helloFields.withProof(anySignature)).encoded()
        offer = SessionMessage.offer(offerMessage.withSignature(anySignature)).encoded()
        confirm = SessionMessage.confirm(confirmMessage.withSignature(anySignature)).encoded()
        receipt = SessionMessage.receipt(receiptMessage.withSignature(anySignature)).encoded()
        if signsSettlementRequest {
            // A body of the submission's size: the signed Confirm in base64 and the terms in JSON.
            let body = Array(
                ("{\"confirmation\":\"" + Data(confirm).base64EncodedString() + "\",\"paymentId\":\""
                    + confirmMessage.paymentID.bytes.hexString + "\",\"walletKey\":\""
                    + Data(walletKeyBytes).base64EncodedString()
                    + "\",\"amount\":1250,\"tip\":150,\"currency\":\"EUR\",\"registerUser\":\"Ana\"}").utf8)
            settlementRequest = (
                body,
                RequestSignature.signedBytes(
                    method: "POST", path: "/v1/payments", time: Shop.wallClock,
                    nonce: String(repeating: "0", count: 32),
                    body: body)
            )
        } else {
            settlementRequest = nil
        }
    }

    /// Sizes of the four record plaintexts, for the report.
    var recordPlaintextSizes: [String: Int] {
        ["hello": hello.count, "offer": offer.count, "confirm": confirm.count, "receipt": receipt.count]
    }

    /// The cryptography of one payment, both sides. Throws if any check fails, which would mean
    /// this replay is not doing the work it claims to.
    func runOnce() throws {
        // Terminal, opening the session: signs the offer.
        let offerSignature = try terminalKey.signature(for: offerSignedBytes)

        // Wallet, on connecting: ephemeral key and ClientHello.
        let walletEphemeral = ShortLivedKeys.agreementKey()
        var clientHello: [UInt8] = [0x01, 2]
        clientHello += walletEphemeral.publicKey.x963Representation
        clientHello += SecureRandom.bytes(32)
        clientHello += [0, UInt8(contextBytes.count)] + contextBytes

        // Terminal, on the ClientHello: ephemeral key, signed transcript, keys.
        let walletEphemeralPublic = try P256.KeyAgreement.PublicKey(
            x963Representation: clientHello[2..<(2 + 65)])
        let terminalEphemeral = ShortLivedKeys.agreementKey()
        var serverHello: [UInt8] = [0x02, 2]
        serverHello += terminalEphemeral.publicKey.x963Representation
        serverHello += SecureRandom.bytes(32)
        serverHello += terminalKeyBytes
        serverHello += [UInt8(credentialBytes.count >> 8), UInt8(credentialBytes.count & 0xFF)] + credentialBytes
        let terminalTranscript = Self.transcript(clientHello, serverHello)
        let transcriptSignature = try terminalKey.signature(for: terminalTranscript)
        let terminalKeys = try Self.deriveKeys(terminalEphemeral, walletEphemeralPublic, terminalTranscript)

        // Wallet, on the ServerHello: credential, terminal key, transcript, keys.
        guard anchorKey.publicKey.isValidSignature(credentialSignature, for: credentialSignedBytes) else {
            throw BenchmarkError("credential signature")
        }
        let terminalPublic = try P256.Signing.PublicKey(x963Representation: terminalKeyBytes)
        let walletTranscript = Self.transcript(clientHello, serverHello)
        guard terminalPublic.isValidSignature(transcriptSignature, for: walletTranscript) else {
            throw BenchmarkError("transcript signature")
        }
        let terminalEphemeralPublic = try P256.KeyAgreement.PublicKey(
            x963Representation: serverHello[2..<(2 + 65)])
        let walletKeys = try Self.deriveKeys(walletEphemeral, terminalEphemeralPublic, walletTranscript)
        _ = Self.confirmationCode(walletTranscript)

        // Hello (wallet → terminal) with a fresh session key and its proof over the transcript;
        // the terminal decodes the key, checks the proof, shows its code.
        let sessionKey = ShortLivedKeys.signingKey()
        let proofBytes = helloFields.proofBytes(transcriptHash: walletTranscript)
        let proof = try sessionKey.signature(for: proofBytes)
        _ = try Self.open(Self.seal(hello, walletKeys.walletToTerminal, counter: 1), terminalKeys.walletToTerminal)
        let sessionPublic = try P256.Signing.PublicKey(x963Representation: sessionKey.publicKey.x963Representation)
        guard sessionPublic.isValidSignature(proof, for: proofBytes) else { throw BenchmarkError("hello proof") }
        _ = Self.confirmationCode(terminalTranscript)

        // Offer (terminal → wallet): its signature, and its digest, which the confirmation binds
        // (the terminal computed its own when it opened the session).
        _ = SHA256.hash(data: offer)
        _ = try Self.open(Self.seal(offer, terminalKeys.terminalToWallet, counter: 1), walletKeys.terminalToWallet)
        guard terminalPublic.isValidSignature(offerSignature, for: offerSignedBytes) else {
            throw BenchmarkError("offer signature")
        }
        _ = SHA256.hash(data: offer)

        // Confirm: the wallet signs and seals; the terminal opens, verifies, digests for the ledger.
        let confirmSignature = try walletKey.signature(for: confirmSignedBytes)
        _ = try Self.open(Self.seal(confirm, walletKeys.walletToTerminal, counter: 2), terminalKeys.walletToTerminal)
        let walletPublic = try P256.Signing.PublicKey(x963Representation: walletKeyBytes)
        guard walletPublic.isValidSignature(confirmSignature, for: confirmSignedBytes) else {
            throw BenchmarkError("confirmation signature")
        }
        _ = SHA256.hash(data: confirmSignedBytes)

        // Receipt: the terminal signs and seals; the wallet opens and verifies.
        let receiptSignature = try terminalKey.signature(for: receiptSignedBytes)
        _ = try Self.open(Self.seal(receipt, terminalKeys.terminalToWallet, counter: 2), walletKeys.terminalToWallet)
        guard terminalPublic.isValidSignature(receiptSignature, for: receiptSignedBytes) else {
            throw BenchmarkError("receipt signature")
        }

        // Through a server: the terminal digests the request's body and signs the request.
        if let settlementRequest {
            _ = SHA256.hash(data: settlementRequest.body)
            _ = try terminalKey.signature(for: settlementRequest.signedLines)
        }
    }

    private static func transcript(_ clientHello: [UInt8], _ serverHello: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: Array("horizon/handshake/v2".utf8))
        hasher.update(data: clientHello)
        hasher.update(data: serverHello)
        return Array(hasher.finalize())
    }

    private static func confirmationCode(_ transcript: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: Array("horizon/confirmation-code/v2".utf8))
        hasher.update(data: transcript)
        return Array(hasher.finalize().prefix(4))
    }

    /// ECDH, then HKDF-SHA256 salted with the transcript hash, one key per direction, exactly
    /// as the handshake derives them.
    private static func deriveKeys(
        _ own: P256.KeyAgreement.PrivateKey, _ peer: P256.KeyAgreement.PublicKey, _ transcript: [UInt8]
    ) throws -> (walletToTerminal: SymmetricKey, terminalToWallet: SymmetricKey) {
        let shared = try own.sharedSecretFromKeyAgreement(with: peer)
        return (
            shared.hkdfDerivedSymmetricKey(
                using: SHA256.self, salt: transcript, sharedInfo: Array("horizon/v1 wallet-to-terminal".utf8),
                outputByteCount: 32),
            shared.hkdfDerivedSymmetricKey(
                using: SHA256.self, salt: transcript, sharedInfo: Array("horizon/v1 terminal-to-wallet".utf8),
                outputByteCount: 32)
        )
    }

    private static func seal(_ plaintext: [UInt8], _ key: SymmetricKey, counter: UInt64) throws -> [UInt8] {
        let header = [0x03] + Self.bigEndian(counter)
        let box = try AES.GCM.seal(
            plaintext, using: key, nonce: try AES.GCM.Nonce(data: [0, 0, 0, 0] + Self.bigEndian(counter)),
            authenticating: header)
        return header + box.ciphertext + box.tag
    }

    private static func open(_ record: [UInt8], _ key: SymmetricKey) throws -> [UInt8] {
        let box = try AES.GCM.SealedBox(
            nonce: try AES.GCM.Nonce(data: [0, 0, 0, 0] + record[1..<9]), ciphertext: record[9..<(record.count - 16)],
            tag: record[(record.count - 16)...])
        return Array(try AES.GCM.open(box, using: key, authenticating: record[..<9]))
    }

    private static func bigEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }
}
