import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonServer

@main
enum Main {
    static func main() async { await CommandRunner.main(HorizonServerCommand.self) }
}

struct HorizonServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "horizon-server",
        abstract: "The Horizon server: merchants, terminals, wallets, their accounts and every payment.",
        discussion: """
            Start with `horizon-server init` (an issuer key, the settings and an embedded SQLite database in \
            the data directory), add a merchant with `horizon-server merchants add`, then `horizon-server serve`. \
            For several server processes, pass `--database postgres://…` to init. The HTTP API is described by \
            Sources/HorizonAPI/openapi.yaml.
            """,
        version: HorizonVersion.current,
        subcommands: [
            Init.self, Serve.self, Migrate.self, Merchants.self, Terminals.self, Wallets.self, Transactions.self,
            Outbox.self, Anchor.self, Messages.self, Backup.self, Restore.self, Invitations.self,
        ])
}

/// Options every subcommand takes.
struct ServerOptions: ParsableArguments {
    @Option(
        help:
            "The server's data directory (default: $XDG_DATA_HOME/horizon/server, i.e. ~/.local/share/horizon/server).")
    var dataDir: String?

    @Option(help: "Use this database instead of server.json's: sqlite:PATH or postgres://USER@HOST/DB.")
    var database: String?

    var directory: DataDirectory { DataDirectory(explicit: dataDir, role: "server") }

    static let settingsFile = "server.json"

    /// The settings from server.json, with --database applied.
    func settings() throws -> ServerConfiguration {
        try directory.requireInitialized(marker: Self.settingsFile, initCommand: "horizon-server init")
        let data = try directory.read(Self.settingsFile)
        var settings: ServerConfiguration
        do { settings = try JSONDecoder().decode(ServerConfiguration.self, from: data) } catch {
            throw CLIError("\(directory.file(Self.settingsFile).path) is not valid settings: \(error)")
        }
        if let database { settings.database = database }
        do { try settings.validate() } catch { throw CLIError("\(error)") }
        return settings
    }

    func openLedger(_ settings: ServerConfiguration) async throws -> Ledger {
        do { return try await settings.openLedger(relativeTo: directory.path) } catch {
            throw CLIError("\(error)")
        }
    }

    func issuer(_ settings: ServerConfiguration) throws -> Issuer {
        do {
            return try Issuer.load(from: settings.issuerKeySource(in: directory.path), name: settings.issuerName)
        } catch {
            throw CLIError("\(error)")
        }
    }
}

/// Runs `body` with the ledger open and closes it after, whatever happens.
func withLedger<T: Sendable>(_ options: ServerOptions, _ body: (Ledger, ServerConfiguration) async throws -> T)
    async throws -> T
{
    let settings = try options.settings()
    let ledger = try await options.openLedger(settings)
    do {
        let result = try await body(ledger, settings)
        await ledger.close()
        return result
    } catch {
        await ledger.close()
        if let error = error as? LedgerError { throw CLIError("\(error)") }
        throw error
    }
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func dateText(_ time: Int64) -> String {
    let formatter = ISO8601DateFormatter()
    return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
}
