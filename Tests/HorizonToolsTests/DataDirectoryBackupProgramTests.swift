import Foundation
import HorizonTestSupport
import Testing

/// `horizon-terminal backup` and `horizon-wallet backup`: taken while the terminal holds its data
/// directory for a sale, the copy is a data directory the programs read back the same.
@Suite("Backups of the terminal's and the wallet's data", .serialized, .offTheCooperativePool)
struct DataDirectoryBackupProgramTests {
    @Test func aBackupTakenDuringASaleReadsBackTheSame() throws {
        let sandbox = try Sandbox()
        let terminalDir = sandbox.path("terminal")
        let walletDir = sandbox.path("wallet")
        let socket = sandbox.path("radio.sock")
        #expect(
            try Programs.run("horizon-terminal", ["init", "--data-dir", terminalDir, "--merchant-name", "Test Bakery"])
                .status == 0)
        #expect(
            try Programs.run(
                "horizon-wallet", ["init", "--data-dir", walletDir, "--trust", terminalDir + "/anchor.pub"]
            ).status
                == 0)
        func sale(_ amount: String) throws {
            let terminal = try Programs.start(
                "horizon-terminal", ["pay", amount, "--data-dir", terminalDir, "--radio-socket", socket])
            let wallet = try Programs.run(
                "horizon-wallet",
                ["pay", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
            #expect(wallet.status == 0, "\(wallet.standardError)")
            #expect(terminal.finish().status == 0)
        }
        try sale("2.00")

        // A sale waiting for its wallet holds the terminal's directory; the backup goes on.
        let waiting = try Programs.start(
            "horizon-terminal", ["pay", "3.00", "--data-dir", terminalDir, "--radio-socket", socket])
        Thread.sleep(forTimeInterval: 1)
        let terminalBackup = sandbox.path("terminal-backup")
        let backup = try Programs.run("horizon-terminal", ["backup", terminalBackup, "--data-dir", terminalDir])
        #expect(backup.status == 0, "\(backup.standardError)")
        #expect(backup.standardOutput.contains("journal.sqlite"), "\(backup.standardOutput)")
        #expect(backup.standardOutput.contains("ledger.sqlite"), "\(backup.standardOutput)")
        let wallet = try Programs.run(
            "horizon-wallet", ["pay", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
        #expect(wallet.status == 0 && waiting.finish().status == 0, "\(wallet.standardError)")

        // The copy has the first sale, keys with their modes, no lock or WAL files.
        for file in ["terminal-key.pem", "anchor-key.pem", "ledger.sqlite", "credential.bin", "journal.sqlite"] {
            let mode = try FileManager.default.attributesOfItem(atPath: terminalBackup + "/" + file)[.posixPermissions]
            #expect((mode as? NSNumber)?.intValue == 0o600, "\(file)")
        }
        let copied = try FileManager.default.contentsOfDirectory(atPath: terminalBackup)
        #expect(
            !copied.contains("lock") && !copied.contains { $0.hasSuffix("-wal") || $0.hasSuffix("-shm") }, "\(copied)")
        let fromBackup = try Programs.run("horizon-terminal", ["transactions", "--json", "--data-dir", terminalBackup])
        let amounts = JSONShapes.transactions(fromBackup.standardOutput).compactMap {
            JSONShapes.formatted($0["amount"])
        }
        #expect(amounts == ["2.00 EUR"], "\(fromBackup.standardOutput) \(fromBackup.standardError)")

        // The wallet's copy reads back its receipts as the wallet does.
        let walletBackup = sandbox.path("wallet-backup")
        let walletCopy = try Programs.run("horizon-wallet", ["backup", walletBackup, "--data-dir", walletDir])
        #expect(walletCopy.status == 0, "\(walletCopy.standardError)")
        let original = try Programs.run("horizon-wallet", ["history", "--json", "--data-dir", walletDir])
        let restored = try Programs.run("horizon-wallet", ["history", "--json", "--data-dir", walletBackup])
        #expect(restored.status == 0 && restored.standardOutput == original.standardOutput, "\(restored.standardError)")

        // Retention by command: nothing is old enough yet; the list is still the default.
        let compact = try Programs.run("horizon-terminal", ["journal", "compact", "--data-dir", terminalDir])
        #expect(compact.standardOutput == "compacted 0 payments answered more than 90 days ago; 0 rows removed\n")
        let tooShort = try Programs.run(
            "horizon-terminal", ["journal", "compact", "--older-than", "0", "--data-dir", terminalDir])
        #expect(tooShort.status == 2 && tooShort.standardError.contains("--older-than must be 1 to 36500 days"))
        let listed = try Programs.run(
            "horizon-terminal", ["journal", "--limit", "5", "--json", "--data-dir", terminalDir])
        #expect(listed.status == 0 && listed.standardOutput.contains("\"step\""), "\(listed.standardError)")

        // A backup never goes into a directory that holds something.
        let again = try Programs.run("horizon-wallet", ["backup", walletBackup, "--data-dir", walletDir])
        #expect(again.status != 0 && again.standardError.contains("is not empty"), "\(again.standardError)")
    }
}
