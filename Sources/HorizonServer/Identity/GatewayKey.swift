import Crypto
import Foundation
import HorizonObliviousHTTP

/// The gateway's HPKE key: wallets seal their relayed requests to it. It is kept in
/// the data directory like the issuer key and loaded by every process, so it survives restarts
/// (wallets cache the signed configuration) and every process of a scaled-out server opens what
/// any of them published.
public struct GatewayKey: Sendable {
    public let privateKey: P256.KeyAgreement.PrivateKey

    public init(privateKey: P256.KeyAgreement.PrivateKey) { self.privateKey = privateKey }

    /// A new random key (tests, and the first start of a server).
    public static func generate() -> GatewayKey { GatewayKey(privateKey: .init()) }

    /// The configuration's key id: the first byte of the public key's SHA-256, so a wallet
    /// holding an older key's configuration is told "unknown key" rather than failing to decrypt.
    public var keyID: UInt8 {
        SHA256.hash(data: privateKey.publicKey.x963Representation).withUnsafeBytes { $0.first ?? 0 }
    }

    public var gateway: ObliviousHTTPGateway { ObliviousHTTPGateway(keyID: keyID, privateKey: privateKey) }

    /// The key in `path` (PEM), made and written there first if there is none.
    public static func loadOrCreate(at path: String) throws(ServerSetupError) -> GatewayKey {
        if FileManager.default.fileExists(atPath: path) { return try load(from: path) }
        let key = generate()
        do {
            // Never over another process's key: if two start at once, the first file wins and
            // both read it back.
            try Data(key.privateKey.pemRepresentation.utf8).write(
                to: URL(fileURLWithPath: path), options: .withoutOverwriting)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        } catch {
            guard FileManager.default.fileExists(atPath: path) else {
                throw .unwritable(
                    path: path, reason: "the gateway key could not be written: \(error.localizedDescription)")
            }
        }
        return try load(from: path)
    }

    public static func load(from path: String) throws(ServerSetupError) -> GatewayKey {
        let pem: String
        do { pem = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
        do { return GatewayKey(privateKey: try P256.KeyAgreement.PrivateKey(pemRepresentation: pem)) } catch {
            throw .unreadable(path: path, reason: "not a PEM P-256 private key (the gateway key)")
        }
    }
}
