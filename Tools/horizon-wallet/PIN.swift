import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport

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

/// `pin set|change|status`: the wallet's key encrypted at rest under a PIN.
struct PIN: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Protect the wallet's key with a PIN (scrypt + AES-GCM at rest); wrong PINs block with back-off.",
        discussion: """
            Until a PIN is set the key is a plain PEM file (0600). After `pin set`, every command that signs \
            (pay, redeem, register, restore) asks for the PIN. 3 wrong PINs are free; then the wallet is blocked \
            for 30 s, 60 s, 120 s… up to an hour (BlockedWithWrongPIN); the right PIN resets the count. The \
            attempt record is pin-lock.json, MACed under a secret of its own in pin-lock.key (not derivable from \
            the key file): removing, resetting or editing either blocks for an hour rather than giving tries.
            """,
        subcommands: [SetPIN.self, ChangePIN.self, PINStatus.self])

    struct SetPIN: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set", abstract: "Encrypt the wallet's key under a first PIN (6 to 64 characters).")

        @Option(help: "Read the new PIN from this file (for scripts; else $HORIZON_WALLET_PIN, else asked twice).")
        var pinFile: String?
        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            let vault = files.keyVault()
            guard !vault.isPINSet else { throw WalletKeyError.pinAlreadySet }
            try vault.setPIN(
                try PINInput.readNew(file: pinFile, option: "--pin-file", variable: PINOptions.environmentVariable))
            if json { return try Console().json(["pinSet": true]) }
            print("The wallet's key is now encrypted under your PIN; pay, redeem, register and restore ask for it.")
        }
    }

    struct ChangePIN: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "change", abstract: "Re-encrypt the wallet's key under a new PIN (the current one first).")

        @Option(help: "Read the current PIN from this file (else $HORIZON_WALLET_PIN, else a prompt).")
        var pinFile: String?
        @Option(help: "Read the new PIN from this file (else $HORIZON_WALLET_NEW_PIN, else asked twice).")
        var newPinFile: String?
        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            let pinFile = pinFile
            let newPinFile = newPinFile
            try files.keyVault().changePIN(
                current: {
                    try PINInput.read(
                        prompt: "Current PIN: ", file: pinFile, option: "--pin-file",
                        variable: PINOptions.environmentVariable)
                },
                new: {
                    try PINInput.readNew(file: newPinFile, option: "--new-pin-file", variable: "HORIZON_WALLET_NEW_PIN")
                })
            if json { return try Console().json(["pinChanged": true]) }
            print("The wallet's PIN was changed.")
        }
    }

    struct PINStatus: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Whether a PIN is set, wrong PINs in a row, and how long the wallet is blocked.")

        @Flag(help: "Print the result as JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let files = global.walletFiles
            try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
            let state: PINLockState?
            do { state = try files.keyVault().lockState() } catch WalletKeyError.lockRecordTampered(let remaining) {
                state = PINLockState(
                    failures: PINPolicy().freeAttempts, lockedUntil: Int64(Date().timeIntervalSince1970) + remaining)
            }
            let blocked = max(0, (state?.lockedUntil ?? 0) - Int64(Date().timeIntervalSince1970))
            if json {
                return try Console().json(
                    PINStatusJSON(pinSet: state != nil, wrongPINs: state?.failures ?? 0, blockedForSeconds: blocked))
            }
            guard let state else {
                return print("no PIN: the key is stored unencrypted (set one with `horizon-wallet pin set`)")
            }
            print("PIN set; \(state.failures) wrong PIN\(state.failures == 1 ? "" : "s") in a row")
            if blocked > 0 { print("blocked for \(blocked) s more (BlockedWithWrongPIN)") }
        }
    }

    struct PINStatusJSON: Encodable {
        let pinSet: Bool
        let wrongPINs: Int
        let blockedForSeconds: Int64
    }
}
