import ArgumentParser
import Crypto
import Foundation

/// What a pinless wallet key may be protected by on this device.
public enum WalletKeyProtectionChoice: String, CaseIterable, Sendable {
    /// systemd-creds when it can encrypt for this user, else the file's permissions.
    case auto
    /// A plain PEM file, 0600 in a 0700 directory.
    case file
    /// Encrypted by `systemd-creds` (the host key, and the TPM2 where there is one); refused when
    /// it cannot encrypt here.
    case systemdCreds = "systemd-creds"
}

extension WalletKeyProtectionChoice: ExpressibleByArgument {}

/// What protects a pinless key as stored.
public enum PinlessKeyProtection: Sendable, Equatable {
    case filePermissions
    case systemdCreds(SystemdCredsTool.Seal)

    /// As `status` shows it.
    public var label: String {
        switch self {
        case .filePermissions: "file permissions 0600"
        case .systemdCreds(.host): "systemd-creds (host key)"
        case .systemdCreds(.tpm2): "systemd-creds (TPM2)"
        }
    }

    /// As `status --json` names it.
    public var kind: String {
        switch self {
        case .filePermissions: "file"
        case .systemdCreds(.host): "systemd-creds-host"
        case .systemdCreds(.tpm2): "systemd-creds-tpm2"
        }
    }
}

/// The `systemd-creds` program (systemd 250 and later): encrypts a secret so that only this
/// machine opens it, with its host key (`/var/lib/systemd/credential.secret`, readable by root
/// only) and, where there is one, its TPM2. Before systemd 256 only root can encrypt or decrypt,
/// so for an unprivileged user it is normally unusable and the key stays a 0600 file.
///
/// The kernel keyring is not used: it keeps nothing across a reboot, so the key would need
/// another home anyway, and a keyring copy would only add a second place to read it from.
public struct SystemdCredsTool: Sendable {
    /// The credential's embedded name: decryption under another name is refused by systemd-creds.
    public static let credentialName = "horizon-wallet-key"
    /// Another systemd-creds to run (tests, unusual installs); empty: none is used.
    public static let environmentVariable = "HORIZON_SYSTEMD_CREDS"

    /// Which of the machine's secrets the credential is encrypted with.
    public enum Seal: String, Sendable, Equatable {
        case host
        /// The TPM2 and the host key together.
        case tpm2

        var withKey: String { self == .tpm2 ? "host+tpm2" : "host" }
    }

    public let executable: String

    public init(executable: String) { self.executable = executable }

    /// The systemd-creds to use, if there is an executable one.
    public static func installed(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> SystemdCredsTool?
    {
        let candidates =
            environment[environmentVariable].map { [$0] } ?? ["/usr/bin/systemd-creds", "/bin/systemd-creds"]
        return candidates.first { !$0.isEmpty && FileManager.default.isExecutableFile(atPath: $0) }
            .map(SystemdCredsTool.init)
    }

    /// Whether firmware, driver and system all support a TPM2 (`systemd-creds has-tpm2` exits 0).
    public func hasTPM2() -> Bool { (try? run(["has-tpm2"], input: Data()).status) == 0 }

    /// The secret encrypted as a base64 credential named `credentialName`.
    public func encrypt(_ secret: Data, seal: Seal) throws(WalletKeyError) -> String {
        let result = try run(
            ["encrypt", "--name=\(Self.credentialName)", "--with-key=\(seal.withKey)", "-", "-"], input: secret)
        let text = String(decoding: result.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, !text.isEmpty else {
            throw .deviceProtectionUnavailable(
                "`systemd-creds encrypt --with-key=\(seal.withKey)` failed: \(Self.firstLine(result.errors))")
        }
        return text
    }

    /// The secret in a credential `encrypt` made on this machine.
    public func decrypt(_ credential: String) throws(WalletKeyError) -> Data {
        let result = try run(["decrypt", "--name=\(Self.credentialName)", "-", "-"], input: Data(credential.utf8))
        guard result.status == 0 else {
            throw .damaged(
                path: "",
                reason:
                    "systemd-creds could not decrypt it (\(Self.firstLine(result.errors))): it was altered, or made on another machine or for another user"
            )
        }
        return result.output
    }

    /// The last line systemd-creds wrote that is not its warning about unencrypted media.
    static func firstLine(_ errors: String) -> String {
        let lines = errors.split(whereSeparator: \.isNewline).map(String.init)
            .filter { !$0.contains("not located on encrypted media") }
        return lines.last ?? "no reason given"
    }

    private func run(_ arguments: [String], input: Data) throws(WalletKeyError) -> (
        status: Int32, output: Data, errors: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let (stdin, stdout, stderr) = (Pipe(), Pipe(), Pipe())
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        do { try process.run() } catch {
            throw .deviceProtectionUnavailable("\(executable) could not be started: \(error.localizedDescription)")
        }
        // A key and its credential are far smaller than a pipe's buffer: writing all first cannot block.
        try? stdin.fileHandleForWriting.write(contentsOf: input)
        try? stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        let errors = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, output, String(decoding: errors, as: UTF8.self))
    }
}

/// A pinless wallet key encrypted by systemd-creds, armoured in the wallet's key file:
///
///     -----BEGIN HORIZON DEVICE-SEALED WALLET KEY-----
///     Sealed-With: host | tpm2
///     <systemd-creds' base64 credential>
///     -----END HORIZON DEVICE-SEALED WALLET KEY-----
///
/// The seal line only says what was asked for; systemd-creds alone decides what opens it.
public struct DeviceSealedWalletKey: Sendable, Equatable {
    public static let pemLabel = "HORIZON DEVICE-SEALED WALLET KEY"

    public let seal: SystemdCredsTool.Seal
    public let credential: String

    public init(seal: SystemdCredsTool.Seal, credential: String) {
        self.seal = seal
        self.credential = credential
    }

    public static func isSealed(pem text: String) -> Bool { text.contains("-----BEGIN \(pemLabel)-----") }

    /// Encrypts `key` with the chosen seal.
    public static func seal(_ key: P256.Signing.PrivateKey, seal: SystemdCredsTool.Seal, with tool: SystemdCredsTool)
        throws(WalletKeyError) -> DeviceSealedWalletKey
    {
        DeviceSealedWalletKey(seal: seal, credential: try tool.encrypt(Data(key.rawRepresentation), seal: seal))
    }

    public func open(with tool: SystemdCredsTool) throws(WalletKeyError) -> P256.Signing.PrivateKey {
        let raw = try tool.decrypt(credential)
        do { return try P256.Signing.PrivateKey(rawRepresentation: raw) } catch {
            throw .damaged(path: "", reason: "the decrypted credential is not a P-256 private key")
        }
    }

    public var pem: String {
        var body = ""
        var rest = Substring(credential)
        while !rest.isEmpty {
            body += rest.prefix(64) + "\n"
            rest = rest.dropFirst(64)
        }
        return
            "-----BEGIN \(Self.pemLabel)-----\nSealed-With: \(seal.rawValue)\n\(body)-----END \(Self.pemLabel)-----\n"
    }

    public static func decode(pem text: String) throws(WalletKeyError) -> DeviceSealedWalletKey {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = lines.firstIndex(of: "-----BEGIN \(pemLabel)-----"),
            let end = lines.firstIndex(of: "-----END \(pemLabel)-----"), begin + 2 < end,
            lines[begin + 1].hasPrefix("Sealed-With: "),
            let seal = SystemdCredsTool.Seal(rawValue: String(lines[begin + 1].dropFirst("Sealed-With: ".count)))
        else { throw .damaged(path: "", reason: "not a readable \(pemLabel) block") }
        let credential = lines[(begin + 2)..<end].joined()
        guard credential.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+/=".contains($0)) }) else {
            throw .damaged(path: "", reason: "its credential is not base64")
        }
        return DeviceSealedWalletKey(seal: seal, credential: credential)
    }
}
