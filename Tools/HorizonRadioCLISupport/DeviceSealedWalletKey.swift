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

    /// Runs systemd-creds with `input` on its standard input. posix_spawn and waitpid, not
    /// Foundation's `Process`: its exit monitoring needs a run-loop socket pair, which failed
    /// under load and left the wallet waiting for good on a child that had already exited.
    private func run(_ arguments: [String], input: Data) throws(WalletKeyError) -> (
        status: Int32, output: Data, errors: String
    ) {
        _ = Self.ignoreBrokenPipes
        var pipes: [[Int32]] = []
        for _ in 0..<3 {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else {
                for descriptor in pipes.joined() { close(descriptor) }
                throw .deviceProtectionUnavailable("\(executable) could not be started: \(String(cString: strerror(errno)))")
            }
            // Not inherited by the child (which gets its ends as 0, 1 and 2) nor by any other.
            for descriptor in ends { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
            pipes.append(ends)
        }
        let (stdin, stdout, stderr) = (pipes[0], pipes[1], pipes[2])
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdout[1], 1)
        posix_spawn_file_actions_adddup2(&actions, stderr[1], 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, executable, &actions, nil, argv, environ)
        for descriptor in [stdin[0], stdout[1], stderr[1]] { close(descriptor) }
        guard spawned == 0 else {
            for descriptor in [stdin[1], stdout[0], stderr[0]] { close(descriptor) }
            throw .deviceProtectionUnavailable("\(executable) could not be started: \(String(cString: strerror(spawned)))")
        }
        // A key and its credential are far smaller than a pipe's buffer: writing all, then
        // reading the output and then the errors, cannot block on the child.
        var offset = 0
        while offset < input.count {
            let count = input[input.startIndex + offset..<input.endIndex].withUnsafeBytes {
                write(stdin[1], $0.baseAddress, $0.count)
            }
            if count < 0, errno == EINTR { continue }
            if count <= 0 { break }  // EPIPE: it exited without reading everything
            offset += count
        }
        close(stdin[1])
        let output = Self.readAll(stdout[0])
        let errors = Self.readAll(stderr[0])
        var status: Int32 = 0
        while waitpid(child, &status, 0) == -1, errno == EINTR {}
        // The exit status, or 128 + the signal that ended it, as a shell reports it.
        let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return (code, output, String(decoding: errors, as: UTF8.self))
    }

    /// Reads `descriptor` to its end and closes it.
    private static func readAll(_ descriptor: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        close(descriptor)
        return data
    }

    /// A write to a child that exited without reading its input must fail with EPIPE, not end
    /// the wallet with SIGPIPE.
    private static let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()
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
