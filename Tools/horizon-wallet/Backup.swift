import ArgumentParser
import HorizonCLISupport
import HorizonRadioCLISupport

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the data directory (wallet store, key, trust anchors, cache) into a new directory.",
        discussion: DataDirectoryBackup.discussion(running: "pay"))

    @OptionGroup var global: GlobalOptions

    @Argument(help: "A new or empty directory for the copy.")
    var directory: String

    func run() async throws {
        let files = global.walletFiles
        try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
        try DataDirectoryBackup.run(files.directory, into: directory)
    }
}
