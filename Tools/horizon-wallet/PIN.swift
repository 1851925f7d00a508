import ArgumentParser
import Crypto
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonServiceClients

#if canImport(Glibc)
    import Glibc
#endif

/// Where a command that needs the wallet's key gets the PIN: `--pin-file`, else
/// `$HORIZON_WALLET_PIN`, else a prompt without echo. Asked only when a PIN is set and a try
/// is allowed.
struct PINOptions: ParsableArguments {
    static let environmentVariable = "HORIZON_WALLET_PIN"

    @Option(help: "Read the wallet's PIN from this file (for scripts; else $HORIZON_WALLET_PIN, else a prompt).")
    var pinFile: String?

    func current() throws -> String {
        try PINInput.read(
            prompt: "Wallet PIN: ", file: pinFile, option: "--pin-file", variable: Self.environmentVariable)
    }
}

/// How a pinless key is protected on this device when it is written.
struct KeyProtectionOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "How a pinless key is protected on this device: auto, file or systemd-creds.",
            discussion:
                "auto (the default) encrypts it with systemd-creds (the machine's host key, and its TPM2 where there is one) when systemd-creds can encrypt for this user, else keeps it a 0600 file; systemd-creds refuses when it cannot."
        ))
    var keyProtection: WalletKeyProtectionChoice = .auto
}

enum PINInput {
    static func read(prompt: String, file: String?, option: String, variable: String) throws -> String {
        if file == nil, let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty { return value }
        return try readSecret(prompt: prompt, file: file, what: "PIN", fileOption: "\(option) or $\(variable)")
    }

    /// A new PIN: from the file or variable as given, else typed twice at a terminal.
    static func readNew(file: String?, option: String, variable: String) throws -> String {
        let pin = try read(prompt: "New PIN: ", file: file, option: option, variable: variable)
        if file == nil, ProcessInfo.processInfo.environment[variable] == nil, isatty(STDIN_FILENO) == 1 {
            guard try read(prompt: "Repeat the new PIN: ", file: nil, option: option, variable: variable) == pin else {
                throw WalletKeyError.pinsDiffer
            }
        }
        return pin
    }
}

/// The wallet's key as its commands need it. Where a PIN is set it is asked for; a key whose PIN
/// the server counts is opened by the library (`WalletPINClient`) with the server's answer, so
/// this program only asks and shows.
enum WalletKeys {
    /// The PIN client of the server this wallet registered with; nil for a sandbox wallet.
    static func pinClient(_ files: WalletFiles) throws -> WalletPINClient? {
        guard let account = try WalletServer.account(files) else { return nil }
        return WalletPINClient(serverURL: try WalletServer.url(account.server))
    }

    static func unlock(_ files: WalletFiles, pin: () throws -> String) async throws -> P256.Signing.PrivateKey {
        try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
        let vault = files.keyVault()
        guard case .countedByServer(let sealed) = try vault.stored() else { return try vault.unlock(pin: pin) }
        let client = try serverClient(files)
        do { return try await client.unlock(sealed, pin: try pin()) } catch let error as WalletPINError {
            throw CLIError(error.description)
        }
    }

    static func serverClient(_ files: WalletFiles) throws -> WalletPINClient {
        guard let client = try pinClient(files) else {
            throw CLIError(
                "this wallet's PIN is counted by a server, but the data directory has no account (account.json) naming it"
            )
        }
        return client
    }

    /// How the key is protected, in words (`pin status`).
    static func protection(_ files: WalletFiles) throws -> (kind: String, sentence: String) {
        switch try files.keyVault().stored() {
        case .countedByServer:
            let server = try WalletServer.account(files)?.server ?? "its server"
            return (
                "pin-counted-by-server",
                "PIN set: the key is encrypted under the PIN and a share \(server) releases only to a right PIN; the server counts wrong PINs (3 free, then 30 s doubling to an hour, blocked after 10 until `horizon-wallet restore`), so a copy of the key file cannot be guessed offline"
            )
        case .sealed:
            return (
                "pin-counted-on-device",
                "PIN set, counted on this device (pin-lock.json); a registered wallet moves to a PIN the server counts with `horizon-wallet pin change`"
            )
        case .plain:
            return ("pinless", "pinless: " + DeviceKeyProtection.describe(files))
        }
    }

    /// What protects the pinless key, as `status` names it; nil once a PIN is set.
    static func deviceProtection(_ files: WalletFiles) throws -> PinlessKeyProtection? {
        try files.keyVault().pinlessProtection()
    }
}

/// What protects a pinless key on this device.
enum DeviceKeyProtection {
    static func describe(_ files: WalletFiles) -> String {
        if case .systemdCreds(let seal)? = try? files.keyVault().pinlessProtection() {
            let what =
                seal == .tpm2
                ? "this machine's TPM2 and host key" : "this machine's host key (/var/lib/systemd/credential.secret)"
            return
                "the key is protected by this device only: systemd-creds (\(seal == .tpm2 ? "TPM2" : "host key")) encrypted it with \(what), so a copy of wallet-key.pem opens on no other machine"
        }
        let key = files.directory.file(WalletFiles.walletKey).path
        let modes = (mode(of: key), mode(of: files.directory.url.path))
        let permissions =
            modes == (0o600, 0o700)
            ? "file permissions (wallet-key.pem 0600 in a 0700 directory: only this user reads it)"
            : "file permissions, but wallet-key.pem is \(octal(modes.0)) in a \(octal(modes.1)) directory: run `chmod 600 \(key)` and `chmod 700` on the data directory"
        return
            "the key is protected by this device only: \(permissions). systemd-creds could not encrypt it for this user when it was stored (before systemd 256 only root can); `horizon-wallet pin protect --key-protection systemd-creds` moves it there when it can. The kernel keyring keeps nothing across a reboot, so it is not used"
    }

    static func mode(of path: String) -> Int {
        var info = stat()
        guard stat(path, &info) == 0 else { return -1 }
        return Int(info.st_mode) & 0o777
    }

    static func octal(_ mode: Int) -> String { mode < 0 ? "missing" : "0" + String(mode, radix: 8) }
}

/// `pin set|change|unlock|deactivate|status`: the reference's PIN calls. For a registered wallet
/// the server counts wrong PINs; the library does the work, this program asks and shows.
struct PIN: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Protect the wallet's key with a PIN whose wrong tries the server counts, or go pinless.",
        discussion: """
            Until a PIN is set the wallet is pinless: its key is a plain PEM file (0600 in a 0700 directory) and the \
            server limits each of its payments (pinlessPaymentLimit, 50.00 by default). After `pin set` on a \
            registered wallet the key is encrypted under the PIN and a share the server releases only to a right PIN \
            (scrypt + AES-GCM): the server counts wrong PINs, 3 free, then 30 s, 60 s… up to an hour \
            (BlockedWithWrongPIN), and after 10 the PIN is blocked until `horizon-wallet restore`. A copy of the key \
            file cannot be guessed offline. A wallet without a server counts its wrong PINs on the device \
            (pin-lock.json).
            """,
        subcommands: [
            SetPIN.self, ChangePIN.self, UnlockPIN.self, DeactivatePIN.self, PINStatus.self, ProtectPinless.self,
        ])

    struct SetPIN: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set", abstract: "Encrypt the wallet's key under a first PIN (6 to 64 characters).")

        @Option(help: "Read the new PIN from this file (for scripts; else $HORIZON_WALLET_PIN, else asked twice).")
        var pinFile: String?
        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            let vault = files.keyVault()
            guard case .plain(let key) = try vault.stored() else { throw WalletKeyError.pinAlreadySet }
            let pin = try PINInput.readNew(
                file: pinFile, option: "--pin-file", variable: PINOptions.environmentVariable)
            if let client = try WalletKeys.pinClient(files) {
                do { try vault.store(try await client.setPIN(pin, for: key)) } catch let error as WalletPINError {
                    throw CLIError(error.description)
                }
            } else {
                try vault.setPIN(pin)
            }
            if json { return try Console().json(["pinSet": true]) }
            print("The wallet's key is now encrypted under your PIN; pay, redeem and the account commands ask for it.")
            print(try WalletKeys.protection(files).sentence)
        }
    }

    struct ChangePIN: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "change", abstract: "Re-encrypt the wallet's key under a new PIN (the current one first).")

        @Option(help: "Read the current PIN from this file (else $HORIZON_WALLET_PIN, else a prompt).")
        var pinFile: String?
        @Option(help: "Read the new PIN from this file (else $HORIZON_WALLET_NEW_PIN, else asked twice).")
        var newPinFile: String?
        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            let vault = files.keyVault()
            let current = {
                try PINInput.read(
                    prompt: "Current PIN: ", file: pinFile, option: "--pin-file",
                    variable: PINOptions.environmentVariable)
            }
            let new = {
                try PINInput.readNew(file: newPinFile, option: "--new-pin-file", variable: "HORIZON_WALLET_NEW_PIN")
            }
            switch (try vault.stored(), try WalletKeys.pinClient(files)) {
            case (.plain, _): throw WalletKeyError.pinNotSet
            case (.countedByServer(let sealed), _):
                let client = try WalletKeys.serverClient(files)
                let currentPIN = try current()
                let newPIN = try new()
                do { try vault.store(try await client.changePIN(sealed, current: currentPIN, new: newPIN).1) } catch let
                    error as WalletPINError
                { throw CLIError(error.description) }
            case (.sealed, let client?):
                // A PIN counted on the device moves to one the server counts.
                let key = try vault.unlock(pin: current)
                do { try vault.store(try await client.setPIN(try new(), for: key)) } catch let error as WalletPINError {
                    throw CLIError(error.description)
                }
            case (.sealed, nil):
                try vault.changePIN(current: current, new: new)
            }
            if json { return try Console().json(["pinChanged": true]) }
            print("The wallet's PIN was changed.")
        }
    }

    struct UnlockPIN: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unlock",
            abstract: "Prove the PIN now (the reference's unlock): a right PIN clears the count of wrong ones.")

        @OptionGroup var pin: PINOptions
        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            guard files.keyVault().isPINSet else { throw WalletKeyError.pinNotSet }
            _ = try await WalletKeys.unlock(files, pin: pin.current)
            if json { return try Console().json(["unlocked": true]) }
            print("The PIN is right: the wallet is unlocked and its count of wrong PINs is cleared.")
        }
    }

    struct DeactivatePIN: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "deactivate",
            abstract:
                "Remove the PIN (the reference's deactivatePin): the wallet becomes pinless, its payments limited.")

        @OptionGroup var pin: PINOptions
        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var keyProtection: KeyProtectionOptions
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            let vault = files.keyVault()
            let key: P256.Signing.PrivateKey
            do {
                switch (try vault.stored(), try WalletKeys.pinClient(files)) {
                case (.plain, _): throw WalletKeyError.pinNotSet
                case (.countedByServer(let sealed), _):
                    key = try await WalletKeys.serverClient(files).deactivatePIN(sealed, pin: try pin.current())
                case (.sealed, let client):
                    key = try vault.unlock(pin: pin.current)
                    try await client?.declarePinless(key)
                }
            } catch let error as WalletPINError {
                throw CLIError(error.description)
            }
            try vault.storePinless(key, protection: keyProtection.keyProtection)
            if json { return try Console().json(["pinless": true]) }
            print("The PIN is removed: the wallet is pinless.")
            print(try WalletKeys.protection(files).sentence)
        }
    }

    struct PINStatus: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "PIN or pinless, what protects the key, and (for a PIN counted here) wrong PINs and the block.")

        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            let (kind, sentence) = try WalletKeys.protection(files)
            let device = try WalletKeys.deviceProtection(files)
            // A pinless key needs no PIN, so the server can be asked whether it limits the wallet.
            var serverLimit: Int64?
            var serverSentence: String?
            if case .plain(let key) = try files.keyVault().stored(), let client = try WalletKeys.pinClient(files) {
                do {
                    let state = try await client.state(key)
                    if state.pinless {
                        serverLimit = state.pinlessPaymentLimit
                        serverSentence =
                            state.pinlessPaymentLimit > 0
                            ? "the server limits each payment to \(state.pinlessPaymentLimit) minor units (pinless)"
                            : "the server knows the wallet is pinless and sets no limit"
                    } else {
                        serverSentence =
                            "the server was not told this wallet is pinless (`register --pinless` and `pin deactivate` do), so it does not limit its payments"
                    }
                } catch {
                    serverSentence = "the server could not be asked: \(error)"
                }
            }
            var state: PINLockState?
            if kind == "pin-counted-on-device" {
                do { state = try files.keyVault().lockState() } catch WalletKeyError.lockRecordTampered(let remaining) {
                    state = PINLockState(
                        failures: PINPolicy().freeAttempts, lockedUntil: Int64(Date().timeIntervalSince1970) + remaining
                    )
                }
            }
            let blocked = max(0, (state?.lockedUntil ?? 0) - Int64(Date().timeIntervalSince1970))
            if json {
                return try Console().json(
                    PINStatusJSON(
                        pinSet: kind != "pinless", pinless: kind == "pinless", protection: kind,
                        keyProtection: device?.label ?? "PIN", keyProtectionKind: device?.kind ?? "pin",
                        wrongPINs: state?.failures ?? 0, blockedForSeconds: blocked,
                        pinlessPaymentLimit: serverLimit))
            }
            if let device { print("key protection: \(device.label)") }
            print(sentence)
            if let serverSentence { print(serverSentence) }
            guard let state else { return }
            print("\(state.failures) wrong PIN\(state.failures == 1 ? "" : "s") in a row")
            if blocked > 0 { print("blocked for \(blocked) s more (BlockedWithWrongPIN)") }
        }
    }

    struct PINStatusJSON: Encodable {
        let pinSet: Bool
        let pinless: Bool
        let protection: String
        /// What protects the key on this device: "file permissions 0600", "systemd-creds (host
        /// key)", "systemd-creds (TPM2)", or "PIN" once one is set.
        let keyProtection: String
        let keyProtectionKind: String
        let wrongPINs: Int
        let blockedForSeconds: Int64
        /// What the server limits each payment of this pinless wallet to (minor units), if it does.
        let pinlessPaymentLimit: Int64?
    }
}

extension PIN {
    /// `pin protect`: a pinless key stored again under another device protection; how an
    /// existing 0600 file moves to systemd-creds (never done without being asked).
    struct ProtectPinless: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "protect",
            abstract:
                "Store the pinless key again under another device protection (e.g. move a 0600 file to systemd-creds)."
        )

        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var keyProtection: KeyProtectionOptions
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            // Not while a payment runs from the key this replaces.
            try files.directory.lockForLife(program: "horizon-wallet")
            let vault = files.keyVault()
            guard case .plain(let key) = try vault.stored() else {
                throw CLIError(
                    "this wallet's key is protected by a PIN; device protection is for a pinless key (`horizon-wallet pin deactivate --key-protection ...`)"
                )
            }
            let protection = try vault.storePinless(key, protection: keyProtection.keyProtection)
            if json {
                return try Console().json(["keyProtection": protection.label, "keyProtectionKind": protection.kind])
            }
            print("The pinless key is now protected by \(protection.label).")
        }
    }
}
