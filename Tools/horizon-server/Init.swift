import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger
import HorizonServer

struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the issuer key, the settings (server.json) and the database, migrated to the current schema.",
        discussion: """
            The issuer key vouches for every terminal and is pinned by every wallet: it is made once and never \
            replaced (init refuses a directory that has one). Keep a copy; every process of a scaled-out \
            server needs the same file.
            """)

    @OptionGroup var options: ServerOptions

    @Option(help: "Where `serve` listens, HOST:PORT.")
    var listen = "127.0.0.1:8080"

    @Option(help: "How long a terminal credential is valid, in hours (1 to 24).")
    var credentialHours = 12

    @Option(help: "The name wallets show for this server's anchor.")
    var issuerName = "Horizon"

    @Flag(help: "Print the result as JSON.")
    var json = false

    func run() async throws {
        guard (1...24).contains(credentialHours) else {
            throw ValidationError("--credential-hours must be 1 to 24 (a credential lives at most a day)")
        }
        var settings = ServerConfiguration(
            listen: listen, database: options.database ?? "sqlite:horizon.sqlite", issuerName: issuerName,
            credentialValidity: Int64(credentialHours) * 3600)
        // Bad options are a usage error (exit 2), found before anything is written.
        do { try settings.validate() } catch { throw ValidationError("\(error)") }
        let directory = options.directory
        try directory.create()
        guard !directory.exists(ServerOptions.settingsFile) else {
            throw CLIError(
                "\(directory.path) is initialised already (server.json exists); use `migrate` to upgrade its database")
        }
        // The database first: if it cannot be opened, no issuer key is left behind to block the
        // next attempt (an issuer key is never replaced).
        let ledger = try await options.openLedger(settings)
        let version = (try? await ledger.schemaVersion()) ?? 0
        await ledger.close()
        let issuer = Issuer.generate(name: issuerName)
        do { try issuer.write(to: settings.issuerKeyFile(in: directory.path)) } catch { throw CLIError("\(error)") }
        // The gateway key, kept beside the issuer key from the start.
        do { _ = try GatewayKey.loadOrCreate(at: settings.gatewayKeyFile(in: directory.path)) } catch {
            throw CLIError("\(error)")
        }
        settings.tlsCertificatePath = nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try directory.write(try encoder.encode(settings), to: ServerOptions.settingsFile)
        let console = Console()
        if json {
            try console.json(
                InitResult(
                    dataDirectory: directory.path, database: settings.database, schemaVersion: version,
                    anchorFingerprint: issuer.fingerprint))
        } else {
            console.line("Initialised \(directory.path)")
            console.line("  database:     \(settings.database) (schema version \(version))")
            console.line("  listen:       \(settings.listen)")
            console.line("  anchor:       \(issuer.fingerprint)")
            console.line("Next: horizon-server merchants add NAME --email E --currency EUR, then horizon-server serve")
        }
    }

    struct InitResult: Encodable {
        let dataDirectory: String
        let database: String
        let schemaVersion: Int
        let anchorFingerprint: String
    }
}
