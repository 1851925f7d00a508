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
