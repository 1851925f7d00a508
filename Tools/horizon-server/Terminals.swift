import ArgumentParser
import HorizonCLISupport
import HorizonLedger

struct Terminals: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List and revoke activated terminals.", subcommands: [List.self, Revoke.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List terminals, oldest first.")

        @OptionGroup var options: ServerOptions

        @Option(help: "Only this merchant's terminals (its id).")
        var merchant: String?

        @Flag(help: "Print them as JSON.")
        var json = false

        func run() async throws {
            let terminals = try await withLedger(options) { ledger, _ in
                try await ledger.terminals(of: merchant.map(MerchantID.init(rawValue:)))
            }
            let console = Console()
            if json {
                try console.json(terminals.map(TerminalJSON.init))
                return
            }
            if terminals.isEmpty { console.line("No terminals yet: horizon-terminal activate --server URL --email E") }
            for terminal in terminals {
                let state =
                    terminal.revokedAt.map { "revoked \(dateText($0))" }
                    ?? "active, credential until \(dateText(terminal.credentialExpiresAt))"
                console.line(
                    "\(terminal.id)  \(terminal.merchantID)  \"\(terminal.label)\"  key \(hex(terminal.keyID))  \(state)"
                )
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a terminal: it gets no further credential, and wallets receive its key id as revoked.")

        @OptionGroup var options: ServerOptions

        @Argument(help: "The terminal's id (t_…), as `terminals list` shows it.")
        var terminal: String

        func run() async throws {
            let id = TerminalID(rawValue: terminal)
            let changed = try await withLedger(options) { ledger, _ in try await ledger.revokeTerminal(id) }
            Console().line(changed ? "Revoked \(id)." : "\(id) was revoked already.")
        }
    }
}

struct TerminalJSON: Encodable {
    let terminalId: String
    let merchantId: String
    let label: String
    let keyId: String
    let activatedAt: Int64
    let credentialExpiresAt: Int64
    let revokedAt: Int64?

    init(_ terminal: TerminalRecord) {
        terminalId = terminal.id.rawValue
        merchantId = terminal.merchantID.rawValue
        label = terminal.label
        keyId = hex(terminal.keyID)
        activatedAt = terminal.activatedAt
        credentialExpiresAt = terminal.credentialExpiresAt
        revokedAt = terminal.revokedAt
    }
}
