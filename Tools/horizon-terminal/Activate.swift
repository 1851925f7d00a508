import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport

/// `activate`: the terminal's key, activated with a Horizon server for a merchant.
struct Activate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Activate this terminal with a Horizon server: a new key, a credential from the server's issuer.",
        discussion: """
            Asks for the merchant admin's password (or reads --password-file). Payments then settle on the \
            server; the credential (valid for hours, set by the server) is renewed by `pay` and `serve` \
            when less than half of it is left. Wallets trust the server's anchor (written to anchor.pub).
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: "The Horizon server, e.g. http://127.0.0.1:8080.") var server: String
    @Option(help: "The merchant admin's e-mail.") var email: String
    @Option(help: "Which till this is, shown by wallets next to the merchant name.")
    var label = TerminalSettings.defaultTerminalLabel
    @Option(help: "Read the password from this file instead of asking.") var passwordFile: String?
    @Option(help: "Seconds the customer may take to decide.") var decisionTimeout = 60
    @Option(
        help:
            "The most one payment may be, in whole units of the terminal's currency (a sanity limit against a mistyped amount). (default: as before, or 10000)"
    ) var maxAmount: Int64?
    @Flag(
        help:
            "Activate even when the data directory holds a terminal already activated or a sandbox one that took payments (a new key; the journal and sandbox ledger are kept). Not needed right after `init`."
    ) var force = false
    @Flag(help: "Print the result as JSON.") var json = false

    func validate() throws {
        guard (5...3600).contains(decisionTimeout) else {
            throw ValidationError("--decision-timeout must be 5 to 3600 seconds")
        }
        guard !label.isEmpty, label.utf8.count <= 64 else { throw ValidationError("--label must be 1 to 64 bytes") }
        if let maxAmount, !(1...1_000_000_000).contains(maxAmount) {
            throw ValidationError("--max-amount must be 1 to 1000000000 whole units of the currency")
        }
    }

    func run() async throws {
        let password = try readSecret(prompt: "Password for \(email): ", file: passwordFile)
        let files = global.terminalFiles
        let directory = files.directory
        let existed = FileManager.default.fileExists(atPath: directory.path)
        try directory.create()
        try directory.lockForLife(program: "horizon-terminal")
        // A refused activation leaves no empty directory behind.
        var activated = false
        defer { if !activated, !existed { try? FileManager.default.removeItem(at: directory.url) } }
        let (settings, response) = try await files.activate(
            server: server, email: email, password: password, label: label, decisionTimeoutSeconds: decisionTimeout,
            maximumAmountMajorUnits: maxAmount, force: force)
        activated = true
        let expires = Date(timeIntervalSince1970: TimeInterval(response.expiresAt))
        if json {
            try Console().json(
                ActivationJSON(
                    dataDirectory: files.directory.path, server: settings.server ?? server,
                    terminalId: response.terminalId, merchantId: response.merchantId,
                    merchantName: response.merchantName, label: response.label, currency: response.currency,
                    credentialExpiresAt: response.expiresAt, anchorFingerprint: response.anchor.fingerprint))
        } else {
            print("Terminal \(response.terminalId) activated in \(files.directory.path)")
            print("  merchant      \(response.merchantName) (\(response.merchantId)), charging in \(response.currency)")
            print("  label         \(response.label)")
            print("  credential    valid until \(ISO8601DateFormatter().string(from: expires)), renewed while online")
            print("  server anchor \(response.anchor.fingerprint)")
        }
    }
}

/// What `activate --json` prints (times in Unix seconds, as everywhere).
struct ActivationJSON: Encodable {
    let dataDirectory: String
    let server: String
    let terminalId: String
    let merchantId: String
    let merchantName: String
    let label: String
    let currency: String
    let credentialExpiresAt: Int64
    let anchorFingerprint: String
}
