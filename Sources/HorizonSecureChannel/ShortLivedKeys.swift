import Crypto
import HorizonCore

/// P-256 keys that live for one connection or one attempt: the handshake's ephemeral keys and
/// the wallet's session key.
///
/// swift-crypto's `PrivateKey()` runs BoringSSL's FIPS pairwise-consistency test after each
/// draw (one more ECDSA signature and verification) and, by default, draws again until the
/// public key is "compact representable" (about every other draw). Together that was a fifth of
/// a payment's CPU, for keys sent in the full x9.63 form and thrown away within a second.
///
/// These keys come from the same distribution as BoringSSL's `EC_KEY_generate_key`: a scalar of
/// 32 bytes from the system's secure generator, drawn again unless 0 < k < n (BoringSSL refuses
/// the others when the scalar is set), then one fixed-base multiplication for the public key.
/// The scalar's bytes live in a `SymmetricKey`, which zeroes them when released.
public enum ShortLivedKeys {
    /// Draws before falling back to swift-crypto's own generation. An out-of-range scalar has a
    /// probability of about 2⁻³², so the fallback exists only so that a broken generator cannot
    /// crash the process.
    static let maximumDraws = 16

    /// A fresh key for one ECDH.
    public static func agreementKey() -> P256.KeyAgreement.PrivateKey {
        agreementKey(drawing: drawScalar)
    }

    /// A fresh key that signs for one attempt.
    public static func signingKey() -> P256.Signing.PrivateKey {
        signingKey(drawing: drawScalar)
    }

    /// 32 bytes in one system call, copied into a `SymmetricKey` and wiped from the stack.
    static func drawScalar() -> SymmetricKey {
        withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { buffer in
            SecureRandom.fill(buffer)
            defer { buffer.initializeMemory(as: UInt8.self, repeating: 0) }
            return SymmetricKey(data: UnsafeRawBufferPointer(buffer))
        }
    }

    static func agreementKey(drawing draw: () -> SymmetricKey) -> P256.KeyAgreement.PrivateKey {
        firstValidKey(
            drawing: draw, { try P256.KeyAgreement.PrivateKey(rawRepresentation: $0) },
            orElse: { P256.KeyAgreement.PrivateKey(compactRepresentable: false) })
    }

    static func signingKey(drawing draw: () -> SymmetricKey) -> P256.Signing.PrivateKey {
        firstValidKey(
            drawing: draw, { try P256.Signing.PrivateKey(rawRepresentation: $0) },
            orElse: { P256.Signing.PrivateKey(compactRepresentable: false) })
    }

    /// The key of the first drawn scalar that `make` accepts (BoringSSL refuses 0 and n or more);
    /// `fallback` after `maximumDraws` refusals.
    private static func firstValidKey<Key>(
        drawing draw: () -> SymmetricKey, _ make: (SymmetricKey) throws -> Key, orElse fallback: () -> Key
    ) -> Key {
        for _ in 0..<maximumDraws {
            if let key = try? make(draw()) { return key }
        }
        return fallback()
    }
}
