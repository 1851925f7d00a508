import Crypto
import HorizonCore
import HorizonProtocol
import HorizonSecureChannel

/// A wallet's long-term identity: the P-256 key that signs its confirmations and that the
/// ledger knows it by.
public struct WalletIdentity: Sendable {
    public let signingKey: P256.Signing.PrivateKey

    public init(signingKey: P256.Signing.PrivateKey = P256.Signing.PrivateKey()) { self.signingKey = signingKey }

    public var publicKey: PublicKeyBytes {
        // A P-256 key's X9.63 form is always 65 bytes starting with 0x04.
        (try? PublicKeyBytes(bytes: Array(signingKey.publicKey.x963Representation)))
            ?? PublicKeyBytes.placeholderNeverUsed
    }
}

extension PublicKeyBytes {
    fileprivate static var placeholderNeverUsed: PublicKeyBytes {
        // Unreachable for a real key; keeps library code free of force unwraps.
        (try? PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: 0, count: 64))) ?? { preconditionFailure() }()
    }
}

/// Signs `bytes` and wraps the signature for a message.
func signatureBytes(for bytes: [UInt8], with key: P256.Signing.PrivateKey) throws -> SignatureBytes {
    try SignatureBytes(bytes: try sign(bytes, with: key))
}

/// Verifies a message signature with a key given as X9.63 bytes.
func verify(_ signature: SignatureBytes, over bytes: [UInt8], publicKey: [UInt8]) -> Bool {
    guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey) else { return false }
    return verifySignature(signature.bytes, over: bytes, with: key)
}

/// SHA-256 over bytes, for content digests.
func digest(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

extension TerminalIdentity {
    var terminalKeyID: TerminalKeyID? { try? TerminalKeyID(bytes: keyID) }
}

/// SHA-256 over bytes, as the wire's digest type.
func digestBytes(_ bytes: [UInt8]) -> DigestBytes {
    // SHA-256 is always 32 bytes, which is all the initialiser checks.
    (try? DigestBytes(bytes: digest(bytes))) ?? DigestBytes.placeholderNeverUsed
}

/// The digest a confirmation binds: SHA-256 of the offer exactly as it was encoded on the wire,
/// signature included, so a confirmation is for that one offer and no other.
func offerDigest(_ offer: Offer) -> DigestBytes { digestBytes(SessionMessage.offer(offer).encoded()) }

/// The key a wallet names, if it is a point on P-256 (any 65 bytes starting 0x04 pass the wire's
/// shape check; only parsing finds a point off the curve).
func validatedKey(_ key: PublicKeyBytes) -> P256.Signing.PublicKey? {
    try? P256.Signing.PublicKey(x963Representation: key.bytes)
}

extension DigestBytes {
    fileprivate static var placeholderNeverUsed: DigestBytes {
        (try? DigestBytes(bytes: [UInt8](repeating: 0, count: 32))) ?? { preconditionFailure() }()
    }
}

extension TerminalIdentity {
    /// SHA-256 of the terminal's full key: what confirmations and redemptions bind.
    var keyDigestBytes: DigestBytes {
        (try? DigestBytes(bytes: keyDigest)) ?? DigestBytes.placeholderNeverUsed
    }
}

extension TerminalCredential {
    /// SHA-256 of the terminal's full key, as the wire carries it.
    var keyDigestBytes: DigestBytes { digestBytes(terminalKey) }
}

extension WalletIdentity {
    /// A key for one attempt only: what the wallet says hello with, so that nothing stable
    /// reaches a terminal before the person accepts.
    static func sessionKey() -> (key: P256.Signing.PrivateKey, bytes: PublicKeyBytes) {
        let key = ShortLivedKeys.signingKey()
        return (key, WalletIdentity(signingKey: key).publicKey)
    }
}

/// A wallet's signed request (a payment's Confirm or a redemption's Redeem), as the terminal
/// checks it: who signed it, whether the signature verifies, and its content digest.
struct SignedRequest {
    let id: PaymentID
    let walletKey: PublicKeyBytes
    let signedBytes: [UInt8]
    let signature: SignatureBytes

    init?(_ message: SessionMessage) {
        switch message {
        case .confirm(let confirm):
            (id, walletKey, signedBytes, signature) = (
                confirm.paymentID, confirm.walletKey, confirm.signedBytes, confirm.signature
            )
        case .redeem(let redeem):
            (id, walletKey, signedBytes, signature) = (
                redeem.redemptionID, redeem.walletKey, redeem.signedBytes, redeem.signature
            )
        default: return nil
        }
    }

    /// Signed by the wallet key it names (a point on the curve).
    var verifies: Bool {
        guard let key = validatedKey(walletKey) else { return false }
        return verifySignature(signature.bytes, over: signedBytes, with: key)
    }

    var contentDigest: [UInt8] { digest(signedBytes) }
}
