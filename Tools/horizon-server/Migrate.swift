import ArgumentParser
import HorizonCLISupport
import HorizonLedger

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bring the database's schema to this program's version (serve does it too, on start).",
        discussion: "Safe to run while other processes serve: migrations take a lock and run one at a time.")

    @OptionGroup var options: ServerOptions

    func run() async throws {
        try await withLedger(options) { ledger, settings in
            let version = try await ledger.schemaVersion()
            Console().line("\(settings.database): schema version \(version) (current: \(LedgerSchema.currentVersion))")
        }
    }
}
