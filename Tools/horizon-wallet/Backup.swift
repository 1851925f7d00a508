import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport

struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the data directory (wallet store, key, trust anchors, cache) into a new directory.",
        discussion: """
            Safe while `pay` runs: each SQLite file is copied with SQLite's online backup (one \
            consistent snapshot) and checked; other files keep their modes. The copy is a data \
            directory: to restore, stop the program and put the copy in the data directory's place \
            (or pass it as --data-dir).
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "A new or empty directory for the copy.")
    var directory: String

    func run() async throws {
        let files = global.walletFiles
        try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
        let destination = (directory as NSString).expandingTildeInPath
        let report = try DataDirectoryBackup.copy(files.directory, to: destination)
        Console().line(
            "backed up \(files.directory.path) to \(destination): \(report.databases.joined(separator: ", ")) "
                + "(online backups, checked) and \(report.files.count) other files")
    }
}
