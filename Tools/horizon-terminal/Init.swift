import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger
import HorizonRadioCLISupport
import HorizonStores

/// `init`: the terminal's keys, credential and ledger.
struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the terminal's key, its credential from a new sandbox trust anchor, and the ledger.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "The merchant name wallets show (from the credential).") var merchantName = "Horizon Sandbox Café"
    @Option(help: "The merchant's identifier.") var merchantID = "sandbox-merchant"
    @Option(help: "Which till this is, shown by wallets next to the merchant name (e.g. \"Till 2, Market St\").")
    var label = TerminalSettings.defaultTerminalLabel
    @Option(help: "ISO 4217 currency the terminal charges in.") var currency = "EUR"
    @Option(help: "Balance a new wallet gets on first contact, e.g. 100.00.") var startingBalance = "100.00"
    @Option(help: "Seconds the customer may take to decide.") var decisionTimeout = 60
    @Option(help: "Bonus points per whole currency unit paid.") var bonusPoints: Int64 = 1
    @Option(
        help:
            "The most one payment may be, in whole units of the terminal's currency (a sanity limit against a mistyped amount). (default: 10000)"
    ) var maxAmount: Int64?
    @Flag(help: "Replace existing keys (the ledger is kept).") var force = false
    @Flag(help: "Print the result as JSON.") var json = false

    func validate() throws {
        guard (5...3600).contains(decisionTimeout) else {
            throw ValidationError("--decision-timeout must be 5 to 3600 seconds")
        }
        guard (0...1_000_000).contains(bonusPoints) else {
            throw ValidationError("--bonus-points must be 0 to 1000000")
        }
        guard !merchantName.isEmpty, merchantName.utf8.count <= 64 else {
            throw ValidationError("--merchant-name must be 1 to 64 bytes")
        }
        guard !merchantID.isEmpty, merchantID.utf8.count <= 64 else {
            throw ValidationError("--merchant-id must be 1 to 64 bytes")
        }
        guard !label.isEmpty, label.utf8.count <= 64 else { throw ValidationError("--label must be 1 to 64 bytes") }
        if let maxAmount, !(1...1_000_000_000).contains(maxAmount) {
            throw ValidationError("--max-amount must be 1 to 1000000000 whole units of the currency")
        }
    }

    func run() async throws {
        let currencyValue = try AmountArgument.currency(currency)
        let code = currencyValue.code
        let balance = try AmountArgument.money(startingBalance, in: currencyValue, option: "--starting-balance")
        let files = global.terminalFiles
        let directory = files.directory
        let existed = FileManager.default.fileExists(atPath: directory.path)
        let hadLock = directory.exists(DataDirectory.lockFile)
        try directory.create()
        try directory.lockForLife(program: "horizon-terminal")
        let migration: LegacySandboxMigration?
        do {
            migration = try await files.initialize(
                settings: TerminalSettings(
                    merchantID: merchantID, merchantName: merchantName, terminalLabel: label, currency: code,
                    startingBalanceMinorUnits: balance.minorUnits, userDecisionTimeoutSeconds: decisionTimeout,
                    bonusPointsPerMajorUnit: bonusPoints, maximumAmountMajorUnits: maxAmount),
                force: force)
        } catch {
            // A failed init leaves the directory as it found it: gone if it made it (the lock
            // is this process's, released at exit).
            if !existed {
                try? FileManager.default.removeItem(at: directory.url)
            } else if !hadLock {
                try? FileManager.default.removeItem(at: directory.file(DataDirectory.lockFile))
            }
            throw error
        }
        let identity = try files.loadIdentity()
        let anchor = files.directory.file(TerminalFiles.anchorPublicKey).path
        if json {
            try Console().json(
                TerminalInitJSON(
                    dataDirectory: files.directory.path, merchantId: merchantID, merchantName: merchantName,
                    currency: code, terminalKeyId: identity.keyID.hexString, trustAnchor: anchor,
                    ledger: "in-process", sandboxStartingBalance: JSONMoney(balance)))
        } else {
            print("Terminal ready in \(files.directory.path)")
            print("  merchant      \(merchantName) (\(merchantID)), charging in \(code)")
            print("  terminal key  \(identity.keyID.hexString)")
            print("  trust anchor  \(anchor)   <- wallets trust this: horizon-wallet init --trust \(anchor)")
            print(
                "  ledger        in process (\(TerminalFiles.ledger)), SANDBOX: a new wallet gets \(balance) on first contact"
            )
            print("                (horizon-terminal activate --server URL settles through a Horizon server instead)")
            if let migration { print("  migrated      \(migration)") }
        }
    }
}

/// What `init --json` prints.
struct TerminalInitJSON: Encodable {
    let dataDirectory: String
    let merchantId: String
    let merchantName: String
    let currency: String
    let terminalKeyId: String
    let trustAnchor: String
    let ledger: String
    let sandboxStartingBalance: JSONMoney
}
