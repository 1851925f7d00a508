import Crypto
import Foundation
import HorizonSecureChannel

/// PEM files for the keys each side keeps.
public enum KeyFiles {
    public static func writePrivate(_ key: P256.Signing.PrivateKey, to name: String, in directory: DataDirectory) throws
    {
        try directory.write(Data(key.pemRepresentation.utf8), to: name)
    }

    public static func writePublic(_ key: P256.Signing.PublicKey, to name: String, in directory: DataDirectory) throws {
        try directory.write(Data(key.pemRepresentation.utf8), to: name)
    }

    public static func readPrivate(_ name: String, in directory: DataDirectory) throws -> P256.Signing.PrivateKey {
        let text = String(decoding: try directory.read(name), as: UTF8.self)
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: text)
        } catch {
            throw CLIError("\(directory.file(name).path) is not a P-256 private key in PEM form")
        }
    }

    public static func readPublic(at url: URL) throws -> P256.Signing.PublicKey {
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw CLIError("cannot read the trust anchor \(url.path): \(error.localizedDescription)")
        }
        do {
            return try P256.Signing.PublicKey(pemRepresentation: text)
        } catch {
            throw CLIError("\(url.path) is not a P-256 public key in PEM form")
        }
    }
}
