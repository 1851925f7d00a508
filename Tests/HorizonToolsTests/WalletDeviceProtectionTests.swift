import Crypto
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import Testing

/// A pinless wallet key protected by the device: encrypted by systemd-creds where it can encrypt
/// for this user (run for real here: as root on systemd 252 with the host key), else a 0600
/// file; what a damaged credential or a readable plain file gets.
@Suite("Pinless wallet key protected by the device", .serialized)
struct WalletDeviceProtectionTests {
    /// Whether systemd-creds encrypts and decrypts for this user on this machine.
    static let systemdCredsUsable: Bool = {
        guard let tool = SystemdCredsTool.installed(environment: [:]),
            let credential = try? tool.encrypt(Data("probe".utf8), seal: .host)
        else { return false }
        return (try? tool.decrypt(credential)) == Data("probe".utf8)
    }()
    static let skipReason: Comment =
        "systemd-creds cannot encrypt for this user here (not installed, or an unprivileged user before systemd 256)"

    @Test(.enabled(if: systemdCredsUsable, skipReason))
    func systemdCredsEncryptsThePinlessKeyForThisMachine() throws {
        let wallet = try TestWallet()
        let vault = wallet.vault
        let protection = try vault.storePinless(wallet.key, protection: .systemdCreds)
        let tool = try #require(SystemdCredsTool.installed(environment: [:]))
        #expect(protection == .systemdCreds(tool.hasTPM2() ? .tpm2 : .host))
        #expect(try vault.pinlessProtection() == protection)
        let text = try String(contentsOfFile: wallet.path(WalletFiles.walletKey), encoding: .utf8)
        #expect(text.hasPrefix("-----BEGIN HORIZON DEVICE-SEALED WALLET KEY-----\nSealed-With: "))
        #expect(!text.contains("PRIVATE KEY"))
        let mode =
            try FileManager.default.attributesOfItem(atPath: wallet.path(WalletFiles.walletKey))[
                .posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        // The key opens without a PIN on this machine, and a PIN can be set on it as on a plain one.
        guard case .plain(let opened) = try vault.stored() else {
            Issue.record("a device-sealed key reads as pinless")
            return
        }
        #expect(opened.rawRepresentation == wallet.key.rawRepresentation)
        #expect(try vault.publicKey().rawRepresentation == wallet.key.publicKey.rawRepresentation)
        #expect(!vault.isPINSet)
        try vault.setPIN("135790")
        #expect(try vault.pinlessProtection() == nil)
        #expect(try vault.unlock(pin: { "135790" }).rawRepresentation == wallet.key.rawRepresentation)
    }

    @Test(.enabled(if: systemdCredsUsable, skipReason))
    func anAlteredOrForeignCredentialIsRefusedInWords() throws {
        let wallet = try TestWallet()
        let vault = wallet.vault
        try vault.storePinless(wallet.key, protection: .systemdCreds)
        let path = wallet.path(WalletFiles.walletKey)
        let original = try String(contentsOfFile: path, encoding: .utf8)
        let sealed = try DeviceSealedWalletKey.decode(pem: original)

        // One character of the credential changed: systemd-creds' authentication fails.
        var characters = Array(sealed.credential)
        characters[60] = characters[60] == "A" ? "B" : "A"
        try wallet.writeText(DeviceSealedWalletKey(seal: sealed.seal, credential: String(characters)).pem)
        expectDamaged(vault, path, "systemd-creds could not decrypt it")

        // A credential of this machine under another name (another program's secret) is not taken.
        let tool = try #require(SystemdCredsTool.installed(environment: [:]))
        let foreign = try Self.encrypt(Data(wallet.key.rawRepresentation), name: "another-secret", tool: tool)
        try wallet.writeText(DeviceSealedWalletKey(seal: .host, credential: foreign).pem)
        expectDamaged(vault, path, "systemd-creds could not decrypt it")

        // A credential that decrypts to something that is no key.
        try wallet.writeText(DeviceSealedWalletKey.seal(wallet.key, seal: .host, with: tool).pem)
        let notAKey = try tool.encrypt(Data("not a key".utf8), seal: .host)
        try wallet.writeText(DeviceSealedWalletKey(seal: .host, credential: notAKey).pem)
        expectDamaged(vault, path, "not a P-256 private key")

        // Garbage between the armour lines, and an unknown seal.
        try wallet.writeText(original.replacingOccurrences(of: "Sealed-With: ", with: "Sealed-With: x"))
        expectDamaged(vault, path, "not a readable HORIZON DEVICE-SEALED WALLET KEY block")
        try wallet.writeText(DeviceSealedWalletKey(seal: .host, credential: "%%%%").pem)
        expectDamaged(vault, path, "its credential is not base64")

        // Back as it was, it opens again.
        try wallet.writeText(original)
        #expect(try vault.unlock(pin: { "" }).rawRepresentation == wallet.key.rawRepresentation)
    }

    @Test func withoutUsableSystemdCredsAutoKeepsA0600FileAndSystemdCredsIsRefused() throws {
        let wallet = try TestWallet()
        for tool in [nil, SystemdCredsTool(executable: "/bin/false")] {
            var vault = wallet.vault
            vault.systemdCreds = tool
            #expect(try vault.storePinless(wallet.key, protection: .auto) == .filePermissions)
            #expect(try vault.pinlessProtection() == .filePermissions)
            let text = try String(contentsOfFile: wallet.path(WalletFiles.walletKey), encoding: .utf8)
            #expect(text == wallet.key.pemRepresentation)
            #expect(throws: WalletKeyError.self) { try vault.storePinless(wallet.key, protection: .systemdCreds) }
            // Refused, the plain key is left as it was.
            #expect(try vault.unlock(pin: { "" }).rawRepresentation == wallet.key.rawRepresentation)
        }
        var missing = wallet.vault
        missing.systemdCreds = nil
        do {
            try missing.storePinless(wallet.key, protection: .systemdCreds)
            Issue.record("systemd-creds was asked for and is missing: refused")
        } catch let error as WalletKeyError {
            #expect(error.description.contains("use --key-protection file"), "\(error)")
        }
        // `file` never runs systemd-creds.
        #expect(try wallet.vault.storePinless(wallet.key, protection: .file) == .filePermissions)
    }

    @Test(.enabled(if: systemdCredsUsable, skipReason))
    func aDeviceSealedKeyWithoutSystemdCredsIsRefusedInWords() throws {
        let wallet = try TestWallet()
        try wallet.vault.storePinless(wallet.key, protection: .systemdCreds)
        var vault = wallet.vault
        vault.systemdCreds = nil
        #expect(
            throws: WalletKeyError.deviceProtectionUnavailable(
                "the key is encrypted by systemd-creds, which is not installed")
        ) { try vault.unlock(pin: { "" }) }
    }

    @Test func aPlainKeyFileOthersMayReadIsRefusedWithAdvice() throws {
        let wallet = try TestWallet()
        let path = wallet.path(WalletFiles.walletKey)
        for mode in [0o640, 0o604, 0o660] {
            #expect(chmod(path, mode_t(mode)) == 0)
            #expect(throws: WalletKeyError.exposedKeyFile(path: path, mode: mode)) {
                try wallet.vault.unlock(pin: { "" })
            }
        }
        let advice = WalletKeyError.exposedKeyFile(path: path, mode: 0o644).description
        #expect(advice.contains("mode 0644") && advice.contains("chmod 600 \(path)"), "\(advice)")
        #expect(chmod(path, 0o600) == 0)
        #expect(try wallet.vault.unlock(pin: { "" }).rawRepresentation == wallet.key.rawRepresentation)
        // A key sealed under a PIN is encrypted: its mode is not what protects it.
        try wallet.vault.setPIN("135790")
        #expect(chmod(path, 0o644) == 0)
        #expect(try wallet.vault.unlock(pin: { "135790" }).rawRepresentation == wallet.key.rawRepresentation)
    }

    // MARK: The program

    @Test(.enabled(if: systemdCredsUsable, skipReason))
    func theWalletChoosesSystemdCredsByItselfAndStatusSaysSo() throws {
        let directory = "/tmp/hz-devkey-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let initialized = try Programs.run("horizon-wallet", ["init", "--data-dir", directory])
        #expect(initialized.status == 0, "\(initialized.standardError)")
        let text = try String(contentsOfFile: directory + "/wallet-key.pem", encoding: .utf8)
        #expect(text.contains("DEVICE-SEALED WALLET KEY"))
        let label =
            try #require(SystemdCredsTool.installed(environment: [:])).hasTPM2()
            ? "systemd-creds (TPM2)" : "systemd-creds (host key)"
        let status = try Self.status(directory)
        #expect(status["keyProtection"] as? String == label)
        #expect(status["pinless"] as? Bool == true)
        let words = try Programs.run("horizon-wallet", ["pin", "status", "--data-dir", directory])
        #expect(words.standardOutput.contains("key protection: \(label)"), "\(words.standardOutput)")
        #expect(words.standardOutput.contains("opens on no other machine"), "\(words.standardOutput)")
        // The key works for what needs it (its public key through init's JSON, a PIN set on it).
        let pinFile = directory + "-pin"
        defer { try? FileManager.default.removeItem(atPath: pinFile) }
        try "135790\n".write(toFile: pinFile, atomically: true, encoding: .utf8)
        let set = try Programs.run("horizon-wallet", ["pin", "set", "--pin-file", pinFile, "--data-dir", directory])
        #expect(set.status == 0, "\(set.standardError)")
        #expect(try Self.status(directory)["keyProtection"] as? String == "PIN")
    }

    @Test func aPlainFileMovesToSystemdCredsOnlyWhenAsked() throws {
        let directory = "/tmp/hz-devkey-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let initialized = try Programs.run(
            "horizon-wallet", ["init", "--key-protection", "file", "--data-dir", directory])
        #expect(initialized.status == 0, "\(initialized.standardError)")
        #expect(try Self.status(directory)["keyProtection"] as? String == "file permissions 0600")
        let words = try Programs.run("horizon-wallet", ["pin", "status", "--data-dir", directory])
        #expect(words.standardOutput.contains("key protection: file permissions 0600"), "\(words.standardOutput)")
        // Without systemd-creds, asking for it is refused and the file stays as it was.
        let refused = try Programs.run(
            "horizon-wallet", ["pin", "protect", "--key-protection", "systemd-creds", "--data-dir", directory],
            environment: [SystemdCredsTool.environmentVariable: "/nonexistent/systemd-creds"])
        #expect(refused.status != 0)
        #expect(refused.standardError.contains("use --key-protection file"), "\(refused.standardError)")
        #expect(try Self.status(directory)["keyProtection"] as? String == "file permissions 0600")
        guard Self.systemdCredsUsable else { return }
        let moved = try Programs.run(
            "horizon-wallet",
            ["pin", "protect", "--key-protection", "systemd-creds", "--json", "--data-dir", directory])
        #expect(moved.status == 0, "\(moved.standardError)")
        #expect(try Self.status(directory)["keyProtectionKind"] as? String != "file")
        // And back.
        let back = try Programs.run(
            "horizon-wallet", ["pin", "protect", "--key-protection", "file", "--data-dir", directory])
        #expect(back.status == 0, "\(back.standardError)")
        #expect(try Self.status(directory)["keyProtection"] as? String == "file permissions 0600")
    }

    @Test func initWithoutSystemdCredsFallsBackToTheFileAndAReadableFileIsRefused() throws {
        let directory = "/tmp/hz-devkey-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = [SystemdCredsTool.environmentVariable: ""]
        let initialized = try Programs.run(
            "horizon-wallet", ["init", "--data-dir", directory], environment: environment)
        #expect(initialized.status == 0, "\(initialized.standardError)")
        #expect(try Self.status(directory)["keyProtection"] as? String == "file permissions 0600")
        #expect(chmod(directory + "/wallet-key.pem", 0o644) == 0)
        let refused = try Programs.run("horizon-wallet", ["pin", "status", "--data-dir", directory])
        #expect(refused.status != 0)
        #expect(refused.standardError.contains("has mode 0644"), "\(refused.standardError)")
        #expect(refused.standardError.contains("chmod 600"), "\(refused.standardError)")
    }

    static func status(_ directory: String) throws -> [String: Any] {
        let result = try Programs.run("horizon-wallet", ["pin", "status", "--json", "--data-dir", directory])
        #expect(result.status == 0, "\(result.standardError)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
    }

    static func encrypt(_ secret: Data, name: String, tool: SystemdCredsTool) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool.executable)
        process.arguments = ["encrypt", "--name=\(name)", "--with-key=host", "-", "-"]
        let (input, output) = (Pipe(), Pipe())
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        try input.fileHandleForWriting.write(contentsOf: secret)
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func expectDamaged(_ vault: WalletKeyVault, _ path: String, _ reason: String) {
        do {
            _ = try vault.unlock(pin: { "" })
            Issue.record("a damaged credential was used")
        } catch let error as WalletKeyError {
            guard case .damaged(let named, let said) = error else {
                Issue.record("expected damaged, got \(error)")
                return
            }
            #expect(named == path)
            #expect(said.contains(reason), "\(said)")
            #expect(error.description.contains("horizon-wallet restore"))
        } catch {
            Issue.record("expected WalletKeyError, got \(error)")
        }
    }
}

extension TestWallet {
    func writeText(_ text: String) throws { try directory.write(Data(text.utf8), to: WalletFiles.walletKey) }
}
