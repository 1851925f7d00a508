import Crypto

/// A gateway key configuration signed by the server's issuer key, the anchor wallets pin: a
/// wallet seals only to a configuration its anchor vouches for, so a relay cannot substitute
/// its own key and read what it carries.
public struct SignedGatewayKeyConfiguration: Sendable, Equatable {
    /// The domain label the signature covers first, so that no other signed structure of the
    /// issuer (credentials, daily tokens) can pass for a key configuration.
    public static let label = "horizon/ohttp-key-config/v1"

    public let configuration: ObliviousHTTPKeyConfiguration
    /// ECDSA P-256 / SHA-256, raw r||s (64 bytes).
    public let signature: [UInt8]

    public init(configuration: ObliviousHTTPKeyConfiguration, signature: [UInt8]) {
        self.configuration = configuration
        self.signature = signature
    }

    /// The bytes signed: the label, a zero byte, the encoded configuration.
    public static func signedBytes(_ configuration: ObliviousHTTPKeyConfiguration) -> [UInt8] {
        Array(label.utf8) + [0] + configuration.encoded()
    }

    /// Signs `configuration` with the issuer's key.
    public static func sign(_ configuration: ObliviousHTTPKeyConfiguration, with issuerKey: P256.Signing.PrivateKey)
        throws(ObliviousHTTPError) -> SignedGatewayKeyConfiguration
    {
        do {
            let signature = try issuerKey.signature(for: signedBytes(configuration))
            return SignedGatewayKeyConfiguration(
                configuration: configuration, signature: Array(signature.rawRepresentation))
        } catch {
            throw .cryptography("signing the gateway key configuration failed: \(error)")
        }
    }

    /// The configuration, if one of `anchors` signed it and it offers the suite we seal with.
    public func verified(by anchors: [P256.Signing.PublicKey]) throws(ObliviousHTTPError)
        -> ObliviousHTTPKeyConfiguration
    {
        let bytes = Self.signedBytes(configuration)
        guard let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
            anchors.contains(where: { $0.isValidSignature(parsed, for: bytes) })
        else {
            throw .unsupportedKeyConfiguration(
                "it is not signed by the server's anchor this wallet pinned; it was not used (a relay or another server may have changed it)"
            )
        }
        _ = try configuration.recipientKey()
        return configuration
    }
}
