import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger
import HorizonServer

struct Merchants: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Add and list merchants, set their admin's password (the admin activates the merchant's terminals and signs in to the dashboard with e-mail and password).",
        subcommands: [Add.self, List.self, Passwd.self, TimeZoneCommand.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a merchant with its admin's e-mail and password (asked twice, or --password-file).")

        @OptionGroup var options: ServerOptions

        @Argument(help: "The merchant's name as wallets show it (at most 64 bytes in terminal credentials).")
        var name: String

        @Option(help: "The admin's e-mail: the sign-in for terminal activation and the dashboard.")
        var email: String

        @Option(help: "The merchant's currency, ISO 4217 (EUR, USD, JPY…).")
        var currency: String

        @Option(help: "Read the password from this file (first line) instead of asking.")
        var passwordFile: String?

        @Flag(help: "Print the new merchant as JSON.")
        var json = false

        func run() async throws {
            let currency = try AmountArgument.currency(currency)
            let settings = try options.settings()
            let hash = try newPasswordHash(for: email, file: passwordFile, settings: settings)
            let merchant = try await withLedger(options) { ledger, _ in
                let merchant = try await ledger.createMerchant(name: name, currency: currency, adminEmail: email)
                try await ledger.setPasswordHash(hash, for: merchant.id)
                return merchant
            }
            let console = Console()
            if json {
                try console.json(MerchantJSON(merchant))
            } else {
                console.line(
                    "Added merchant \(merchant.name) (\(merchant.id)), \(merchant.currency.code), admin \(merchant.adminEmail)"
                )
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every merchant, oldest first.")

        @OptionGroup var options: ServerOptions

        @Flag(help: "Print them as JSON.")
        var json = false

        func run() async throws {
            let merchants = try await withLedger(options) { ledger, _ in try await ledger.merchants() }
            let console = Console()
            if json {
                try console.json(merchants.map(MerchantJSON.init))
                return
            }
            if merchants.isEmpty {
                console.line("No merchants yet: horizon-server merchants add NAME --email E --currency EUR")
            }
            for merchant in merchants {
                console.line("\(merchant.id)  \(merchant.currency.code)  \(merchant.name)  <\(merchant.adminEmail)>")
            }
        }
    }
}

extension Merchants {
    struct Passwd: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a merchant admin's password (asked twice, or --password-file); its signed-in sessions end.")

        @OptionGroup var options: ServerOptions

        @Argument(help: "The merchant: its id (m_…, as `merchants list` shows it) or its admin's e-mail.")
        var merchant: String

        @Option(help: "Read the new password from this file (first line) instead of asking.")
        var passwordFile: String?

        func run() async throws {
            let settings = try options.settings()
            let found = try await findMerchant(merchant, options)
            // Asked before the hash is stored, so a mistyped repeat changes nothing.
            let hash = try newPasswordHash(for: found.adminEmail, file: passwordFile, settings: settings)
            try await withLedger(options) { ledger, _ in try await ledger.setPasswordHash(hash, for: found.id) }
            Console().line(
                "Set the password of \(found.adminEmail) (\(found.name), \(found.id)); its dashboard sessions were ended."
            )
        }
    }

    struct TimeZoneCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "time-zone",
            abstract: "Set the time zone the merchant's dashboard counts its days in and shows its times in.")

        @OptionGroup var options: ServerOptions

        @Argument(help: "The merchant: its id (m_…, as `merchants list` shows it) or its admin's e-mail.")
        var merchant: String

        @Argument(help: "An IANA time zone, such as Europe/Berlin or UTC.")
        var zone: String

        func validate() throws {
            guard TimeZone(identifier: zone) != nil else {
                throw ValidationError(
                    "\(zone) is not a time zone this machine knows (an IANA name such as Europe/Berlin)")
            }
        }

        func run() async throws {
            let found = try await findMerchant(merchant, options)
            try await withLedger(options) { ledger, _ in try await ledger.setTimeZone(zone, for: found.id) }
            Console().line("\(found.name) (\(found.id)) counts its days in \(zone)")
        }
    }
}

/// A merchant by id or admin e-mail, or an error that says how to list them.
func findMerchant(_ merchant: String, _ options: ServerOptions) async throws -> Merchant {
    let found = try await withLedger(options) { ledger, _ in
        if merchant.contains("@") { return try await ledger.merchant(adminEmail: merchant) }
        do { return try await ledger.merchant(MerchantID(rawValue: merchant)) } catch LedgerError.notFound {
            return nil
        }
    }
    guard let found else { throw CLIError("no merchant \(merchant) here (`horizon-server merchants list` shows them)") }
    return found
}

/// The hash of a new admin password: from `file`, or typed twice at a terminal.
func newPasswordHash(for email: String, file: String?, settings: ServerConfiguration) throws -> String {
    let password = try readNewSecret(
        prompt: "New password for \(email): ", repeatPrompt: "Repeat the new password: ", file: file)
    do { return try PasswordHasher(costLog2: settings.passwordCostLog2).hash(password) } catch {
        throw CLIError("\(error)")
    }
}

struct MerchantJSON: Encodable {
    let merchantId: String
    let name: String
    let currency: String
    let adminEmail: String
    let createdAt: Int64

    init(_ merchant: Merchant) {
        merchantId = merchant.id.rawValue
        name = merchant.name
        currency = merchant.currency.code
        adminEmail = merchant.adminEmail
        createdAt = merchant.createdAt
    }
}
