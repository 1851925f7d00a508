import ArgumentParser
import HorizonCLISupport
import HorizonRadioCLISupport

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract:
            "Copy the data directory (journal, sandbox ledger, keys, credential and settings) into a new directory.",
        discussion: DataDirectoryBackup.discussion(running: "serve"))

    @OptionGroup var global: GlobalOptions

    @Argument(help: "A new or empty directory for the copy.")
    var directory: String

    func run() async throws {
        let files = global.terminalFiles
        try files.directory.requireInitialized(marker: TerminalFiles.settings, initCommand: TerminalFiles.initCommand)
        try DataDirectoryBackup.run(files.directory, into: directory)
    }
}
