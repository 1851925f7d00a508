import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An `IdentityKeyVault` in one file whose PIN the server counts: pinless, the key as PEM; with a
/// PIN, a `ServerSealedWalletKey` that opens only with the share `WalletPINClient` gets for a
/// right PIN. The file is written 0600 by one rename (never half), in a directory made 0700.
public struct ServerCountedFileVault: ServerCountedKeyVault {
    public let file: URL
    public let pins: WalletPINClient

    public init(file: URL, pins: WalletPINClient) {
        self.file = file
        self.pins = pins
    }

    public func stored() throws -> StoredIdentity {
        guard let text = try read() else { return .none }
        return ServerSealedWalletKey.isSealed(pem: text) ? .pinProtected : .pinless
    }

    /// Stores `key` pinless (a PIN goes through `protect`, which asks the server).
    public func store(_ key: P256.Signing.PrivateKey, pin: String?) throws {
        guard pin == nil else { throw WalletPINError.unacceptablePIN("a PIN is set through the server (protect)") }
        try write(key.pemRepresentation)
    }

    /// The pinless key; a PIN-protected one opens only through `unlock`.
    public func load(pin: String?) throws -> P256.Signing.PrivateKey? {
        guard let text = try read(), !ServerSealedWalletKey.isSealed(pem: text) else { return nil }
        return try P256.Signing.PrivateKey(pemRepresentation: text)
    }

    public func discard() throws {
        if FileManager.default.fileExists(atPath: file.path) { try FileManager.default.removeItem(at: file) }
    }

    public func unlock(pin: String) async throws(WalletPINError) -> P256.Signing.PrivateKey {
        let text: String?
        do { text = try read() } catch { throw .damaged("\(error)") }
        guard let text, ServerSealedWalletKey.isSealed(pem: text) else { throw .notSet }
        return try await pins.unlock(try ServerSealedWalletKey.decode(pem: text), pin: pin)
    }

    public func protect(_ key: P256.Signing.PrivateKey, pin: String?) async throws(WalletPINError) {
        let text: String
        if let pin {
            text = try await pins.setPIN(pin, for: key).pem
        } else {
            try await pins.declarePinless(key)
            text = key.pemRepresentation
        }
        do { try write(text) } catch { throw .damaged("the key file could not be written: \(error)") }
    }

    private func read() throws -> String? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        return try String(contentsOf: file, encoding: .utf8)
    }

    private func write(_ text: String) throws {
        let directory = file.deletingLastPathComponent()
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = directory.appendingPathComponent(".\(file.lastPathComponent).tmp")
        guard
            FileManager.default.createFile(
                atPath: temporary.path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else { throw WalletPINError.damaged("cannot write \(temporary.path)") }
        // rename(2) replaces the old file atomically: a reader sees the old or the new, never half.
        guard rename(temporary.path, file.path) == 0 else {
            throw WalletPINError.damaged("cannot replace \(file.path): error \(errno)")
        }
    }
}
