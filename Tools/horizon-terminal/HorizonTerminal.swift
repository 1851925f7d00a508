import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import HorizonStores
import Logging

@main
enum Main {
    static func main() async {
        await CommandRunner.main(HorizonTerminal.self, radioErrorMessage: BlueZAdvice.cliMessage(for:))
    }
}

struct HorizonTerminal: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "horizon-terminal",
        abstract: "A Bluetooth LE payment terminal: advertise a payment, let a nearby wallet pay it.",
        discussion: """
            Start with `horizon-terminal init`, then `horizon-terminal pay 12.50`: a single box, with the Horizon \
            ledger in process (ledger.sqlite in the data directory) in SANDBOX mode, where a wallet it has never \
            seen is enrolled on first contact with play money. `horizon-terminal activate --server URL` settles \
            through a Horizon server instead.
            """,
        version: HorizonVersion.current,
        subcommands: [
            Init.self, Activate.self, Pay.self, Redeem.self, Programs.self, Status.self, Transactions.self,
            JournalCommand.self, OfflineCommand.self,
            RegisterUsers.self, RefundCommand.self, Serve.self, RadioCommand.self, Doctor.self, BackupCommand.self,
        ])
}

extension GlobalOptions {
    var terminalFiles: TerminalFiles { TerminalFiles(directory: DataDirectory(explicit: dataDir, role: "terminal")) }

    /// The terminal's files with its data directory locked for this process, for the commands
    /// that write it: a second one on the same directory refuses instead of racing the first.
    func lockedTerminalFiles() throws -> TerminalFiles {
        let files = terminalFiles
        try files.directory.requireInitialized(marker: TerminalFiles.settings, initCommand: TerminalFiles.initCommand)
        try files.directory.lockForLife(program: "horizon-terminal")
        return files
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
