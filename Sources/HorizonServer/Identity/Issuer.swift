import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonSecureChannel

/// The server's issuer: the one private key that vouches for terminals (no
/// terminal holds an issuer key). Every process of a scaled-out server loads the same key
/// file; wallets pin its public half, the trust anchor.
public struct Issuer: Sendable {
    public let signingKey: P256.Signing.PrivateKey
    public let name: String

    public init(signingKey: P256.Signing.PrivateKey, name: String = "Horizon") {
        self.signingKey = signingKey
        self.name = name
    }

    /// A new random issuer key.
    public static func generate(name: String = "Horizon") -> Issuer { Issuer(signingKey: .init(), name: name) }

    /// The issuer in a PEM file (PKCS#8 or SEC1).
    public static func load(from path: String, name: String = "Horizon") throws(ServerSetupError) -> Issuer {
        let pem: String
        do { pem = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .unreadable(path: path, reason: "\(error.localizedDescription); run `horizon-server init` first")
        }
        do { return Issuer(signingKey: try P256.Signing.PrivateKey(pemRepresentation: pem), name: name) } catch {
            throw .unreadable(path: path, reason: "not a PEM P-256 private key")
        }
    }

    /// Writes the key as PEM, readable by its owner only; refuses to replace an existing file
    /// (replacing the issuer would orphan every wallet that pinned it).
    public func write(to path: String) throws(ServerSetupError) {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw .exists(path: path, reason: "an issuer key is there already; wallets pin it, so it is never replaced")
        }
        let created = FileManager.default.createFile(
            atPath: path, contents: Data(signingKey.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600])
        guard created else { throw .unwritable(path: path, reason: "the file could not be created") }
    }

    public var anchor: TrustAnchor { TrustAnchor(publicKey: signingKey.publicKey, name: name) }

    /// SHA-256 of the public key, in groups of four hex digits: what a person compares.
    public var fingerprint: String { Self.fingerprint(of: signingKey.publicKey) }

    public static func fingerprint(of key: P256.Signing.PublicKey) -> String {
        let hex = SHA256.hash(data: key.x963Representation).hexString
        var groups: [Substring] = []
        var rest = Substring(hex)
        while !rest.isEmpty {
            groups.append(rest.prefix(4))
            rest = rest.dropFirst(4)
        }
        return groups.joined(separator: " ")
    }

    /// The anchor as the API describes it.
    public var anchorDescription: Components.Schemas.Anchor {
        .init(
            publicKey: Data(signingKey.publicKey.x963Representation).base64EncodedString(),
            keyId: anchor.keyID.hexString, fingerprint: fingerprint, name: name)
    }

    /// A credential for a terminal key, valid from a minute ago (clocks differ) for `validity` seconds.
    public func issueCredential(
        merchantID: String, merchantName: String, terminalLabel: String, terminalKey: P256.Signing.PublicKey,
        at now: UnixTime, validity: Int64
    ) throws(SecureChannelError) -> TerminalCredential {
        try TerminalCredential.issue(
            by: signingKey, merchantID: merchantID, merchantName: String(merchantName.prefix(64)),
            terminalLabel: terminalLabel, terminalKey: terminalKey, notBefore: now - 60, expiresAt: now + validity)
    }
}

/// Why the server could not start or set itself up, with what to do.
public enum ServerSetupError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case unwritable(path: String, reason: String)
    case exists(path: String, reason: String)
    case invalidSetting(String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read \(path): \(reason)"
        case .unwritable(let path, let reason): "cannot write \(path): \(reason)"
        case .exists(let path, let reason): "\(path): \(reason)"
        case .invalidSetting(let reason): reason
        }
    }
}
