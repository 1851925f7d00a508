import Crypto
import Foundation
import HorizonCore

/// An 8-byte key identifier: the first bytes of SHA-256 over the key's X9.63 encoding. Short
/// enough for the 31-byte advertisement; a match only pre-selects, the signature decides.
public func keyIdentifier(of publicKey: P256.Signing.PublicKey) -> [UInt8] {
    Array(SHA256.hash(data: publicKey.x963Representation).prefix(8))
}

/// A public key wallets trust to vouch for terminals (the merchant's, or the sandbox's own).
public struct TrustAnchor: Sendable {
    public let publicKey: P256.Signing.PublicKey
    /// Computed once: serialising the key and hashing it cost more than the lookup it serves
    /// (every credential check looks its anchor up by key id).
    public let keyID: [UInt8]
    /// Who this anchor is, as the wallet shows it next to the merchant ("vouched for by …"): a
    /// wallet that trusts several anchors says which one vouched.
    public let name: String
    /// The merchant ids this anchor may vouch for; nil for any. A credential from this anchor
    /// for another merchant id is refused, so a merchant's own anchor cannot vouch for a shop
    /// pretending to be another.
    public let merchantIDs: Set<String>?
    /// Terminal key ids (`TerminalCredential.terminalKeyID`) whose credentials from this anchor
    /// are refused although unexpired: the server's revocation list, as the wallet last fetched it.
    public let revokedTerminalKeyIDs: Set<[UInt8]>

    public init(
        publicKey: P256.Signing.PublicKey, name: String = "Horizon", merchantIDs: Set<String>? = nil,
        revokedTerminalKeyIDs: Set<[UInt8]> = []
    ) {
        self.publicKey = publicKey
        keyID = keyIdentifier(of: publicKey)
        self.name = name
        self.merchantIDs = merchantIDs
        self.revokedTerminalKeyIDs = revokedTerminalKeyIDs
    }

    /// This anchor, refusing also the terminals whose key ids are in `keyIDs`.
    public func revoking(_ keyIDs: some Sequence<[UInt8]>) -> TrustAnchor {
        TrustAnchor(
            publicKey: publicKey, name: name, merchantIDs: merchantIDs,
            revokedTerminalKeyIDs: revokedTerminalKeyIDs.union(keyIDs))
    }

    /// Whether this anchor may vouch for `merchantID`.
    public func covers(merchantID: String) -> Bool { merchantIDs?.contains(merchantID) ?? true }
}

/// What a trust anchor says about a terminal: which merchant runs it, under which name, which
/// till it is (its label, e.g. "Till 2, Market St"), with which key, until when. The wallet shows
/// the merchant name and the label from here, never from the advertisement, so a look-alike
/// terminal of the same merchant elsewhere is told apart by its label.
public struct TerminalCredential: Sendable, Equatable {
    /// 2 since the terminal label.
    public static let version: UInt8 = 2
    public static let maximumEncodedSize = 512
    /// Merchant ids, names and terminal labels: short labels for a small screen.
    public static let maximumTextBytes = 64
    static let signatureLabel = Array("horizon/credential/v2".utf8)

    public let anchorKeyID: [UInt8]
    public let merchantID: String
    public let merchantName: String
    public let terminalLabel: String
    public let terminalKey: [UInt8]  // X9.63, 65 bytes
    public let notBefore: UnixTime
    public let expiresAt: UnixTime
    public let signature: [UInt8]  // raw r||s, 64 bytes

    /// Issues a credential signed by `anchor`.
    public static func issue(
        by anchor: P256.Signing.PrivateKey, merchantID: String, merchantName: String,
        terminalLabel: String = "Terminal", terminalKey: P256.Signing.PublicKey, notBefore: UnixTime,
        expiresAt: UnixTime
    ) throws(SecureChannelError) -> TerminalCredential {
        for (field, text) in [
            ("merchant id", merchantID), ("merchant name", merchantName), ("terminal label", terminalLabel),
        ]
        where text.utf8.count > maximumTextBytes {
            throw .malformed(.fieldTooLong(field: field, length: text.utf8.count, maximum: maximumTextBytes))
        }
        let unsigned = TerminalCredential(
            anchorKeyID: keyIdentifier(of: anchor.publicKey), merchantID: merchantID, merchantName: merchantName,
            terminalLabel: terminalLabel, terminalKey: Array(terminalKey.x963Representation), notBefore: notBefore,
            expiresAt: expiresAt, signature: [])
        let signature = try sign(unsigned.signedBytes, with: anchor)
        return TerminalCredential(
            anchorKeyID: unsigned.anchorKeyID, merchantID: merchantID, merchantName: merchantName,
            terminalLabel: terminalLabel, terminalKey: unsigned.terminalKey, notBefore: notBefore,
            expiresAt: expiresAt, signature: signature)
    }

    public var terminalKeyID: [UInt8] { Array(SHA256.hash(data: terminalKey).prefix(8)) }

    var signedBytes: [UInt8] {
        var writer = ByteWriter(capacity: 200)
        writer.write(raw: Self.signatureLabel)
        writeBody(into: &writer)
        return writer.bytes
    }

    private func writeBody(into writer: inout ByteWriter) {
        writer.write(Self.version)
        writer.write(raw: anchorKeyID)
        writer.write(string: merchantID)
        writer.write(string: merchantName)
        writer.write(string: terminalLabel)
        writer.write(raw: terminalKey)
        writer.write(notBefore)
        writer.write(expiresAt)
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 220)
        writeBody(into: &writer)
        writer.write(raw: signature)
        return writer.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws(SecureChannelError) -> TerminalCredential {
        guard bytes.count <= maximumEncodedSize else {
            throw .malformed(.oversized(size: bytes.count, maximum: maximumEncodedSize))
        }
        var reader = ByteReader(bytes)
        let version = try wire { () throws(WireError) in try reader.readUInt8("credential version") }
        guard version == Self.version else { throw .unsupportedVersion(version) }
        return try wire { () throws(WireError) -> TerminalCredential in
            let credential = TerminalCredential(
                anchorKeyID: try reader.readBytes(8, "anchor key id"),
                merchantID: try reader.readString("merchant id", maximumBytes: maximumTextBytes),
                merchantName: try reader.readString("merchant name", maximumBytes: maximumTextBytes),
                terminalLabel: try reader.readString("terminal label", maximumBytes: maximumTextBytes),
                terminalKey: try reader.readBytes(65, "terminal key"),
                notBefore: try reader.read(Int64.self, "not before"),
                expiresAt: try reader.read(Int64.self, "expires at"),
                signature: try reader.readBytes(64, "credential signature"))
            try reader.expectEnd()
            return credential
        }
    }

    /// Checks the anchor's signature, its scope and the validity period; returns the anchor that
    /// vouched.
    @discardableResult
    public func verify(trusting anchors: [TrustAnchor], at now: UnixTime) throws(SecureChannelError) -> TrustAnchor {
        guard let anchor = anchors.first(where: { $0.keyID == anchorKeyID }) else {
            throw .unknownTrustAnchor(keyID: anchorKeyID.hexString)
        }
        guard verifySignature(signature, over: signedBytes, with: anchor.publicKey) else {
            throw .credentialSignatureInvalid
        }
        guard anchor.covers(merchantID: merchantID) else {
            throw .merchantOutsideAnchorScope(merchantID: merchantID, anchor: anchor.name)
        }
        if !anchor.revokedTerminalKeyIDs.isEmpty, anchor.revokedTerminalKeyIDs.contains(terminalKeyID) {
            throw .credentialRevoked(terminalKeyID: terminalKeyID.hexString)
        }
        guard now >= notBefore else { throw .credentialNotYetValid(notBefore: notBefore, now: now) }
        guard now <= expiresAt else { throw .credentialExpired(expiresAt: expiresAt, now: now) }
        return anchor
    }

    /// SHA-256 of the full terminal key, which confirmations bind.
    public var terminalKeyDigest: [UInt8] { Array(SHA256.hash(data: terminalKey)) }

    /// The terminal key as a verifying key.
    public func terminalPublicKey() throws(SecureChannelError) -> P256.Signing.PublicKey {
        do {
            return try P256.Signing.PublicKey(x963Representation: terminalKey)
        } catch {
            throw .invalidPublicKey(field: "credential terminal key")
        }
    }
}

/// A terminal's long-term identity: its signing key and the credential for it.
public struct TerminalIdentity: Sendable {
    public let signingKey: P256.Signing.PrivateKey
    public let credential: TerminalCredential
    /// Computed once: the terminal names itself by it several times per payment, and each
    /// computation serialises the public key and hashes it.
    public let keyID: [UInt8]
    /// SHA-256 of the full key, which every confirmation binds: computed once, as `keyID`.
    public let keyDigest: [UInt8]

    public init(signingKey: P256.Signing.PrivateKey, credential: TerminalCredential) throws(SecureChannelError) {
        guard credential.terminalKey == Array(signingKey.publicKey.x963Representation) else {
            throw .credentialKeyMismatch
        }
        self.signingKey = signingKey
        self.credential = credential
        keyID = keyIdentifier(of: signingKey.publicKey)
        keyDigest = credential.terminalKeyDigest
    }
}

/// Signs `bytes` (ECDSA P-256 over SHA-256) and returns the raw 64-byte signature.
public func sign(_ bytes: [UInt8], with key: P256.Signing.PrivateKey) throws(SecureChannelError) -> [UInt8] {
    do {
        return Array(try key.signature(for: bytes).rawRepresentation)
    } catch {
        throw .cryptoFailure("signing failed")
    }
}

/// Verifies a raw 64-byte ECDSA P-256 signature over `bytes`. Malformed signatures are invalid.
public func verifySignature(_ signature: [UInt8], over bytes: [UInt8], with key: P256.Signing.PublicKey) -> Bool {
    guard signature.count == 64,
        let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
    else { return false }
    return key.isValidSignature(parsed, for: bytes)
}
