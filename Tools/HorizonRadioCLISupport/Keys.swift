import Crypto
import Foundation
import HorizonCLISupport
import HorizonCore
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

    /// Reads the key `name` from systemd's credentials (`$CREDENTIALS_DIRECTORY/name`, put
    /// there by `LoadCredential=` or `LoadCredentialEncrypted=`) when the service has it, else
    /// from the data directory.
    public static func readPrivate(_ name: String, in directory: DataDirectory) throws -> P256.Signing.PrivateKey {
        let path: String
        let data: Data
        if let credential = SystemdCredentials.file(name) {
            path = credential
            do { data = try Data(contentsOf: URL(fileURLWithPath: credential)) } catch {
                throw CLIError("cannot read the credential \(credential): \(error.localizedDescription)")
            }
        } else {
            path = directory.file(name).path
            data = try directory.read(name)
        }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: String(decoding: data, as: UTF8.self))
        } catch {
            throw CLIError("\(path) is not a P-256 private key in PEM form")
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
