import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import Logging

@main
enum Main {
    static func main() async {
        await CommandRunner.main(HorizonWallet.self, radioErrorMessage: BlueZAdvice.cliMessage(for:))
    }
}

struct HorizonWallet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "horizon-wallet",
        abstract: "A Bluetooth LE wallet: find the nearest terminal, check its offer, pay it with a tip.",
        discussion: """
            Start with `horizon-wallet register --server URL …`, `horizon-wallet verify PUK` and \
            `horizon-wallet activation-status` (or, for the \
            sandbox, `horizon-wallet init --trust <terminal data dir>/anchor.pub`), then `horizon-wallet pay`. \
            The wallet trusts only terminals whose credential is signed by an anchor it pinned or was given.
            """,
        version: HorizonVersion.current,
        subcommands: [
            Init.self, Register.self, Verify.self, ActivationStatus.self, Restore.self, Reactivate.self, PIN.self,
            Scan.self, Pay.self, Redeem.self,
            History.self, EmailReceipt.self, Balance.self, Account.self, Coupons.self, Memberships.self, Points.self,
            Cards.self,
            Token.self, RadioCommand.self, Doctor.self, BackupCommand.self,
        ])
}

extension GlobalOptions {
    var walletFiles: WalletFiles { WalletFiles(directory: DataDirectory(explicit: dataDir, role: "wallet")) }

    /// The wallet's files with its data directory locked for this process, for the commands that
    /// spend from it: two payments at once from one wallet would each spend the same offline
    /// allowance and the same PIN attempts.
    func lockedWalletFiles() throws -> WalletFiles {
        let files = walletFiles
        try files.directory.requireInitialized(marker: WalletFiles.walletKey, initCommand: WalletFiles.initCommand)
        try files.directory.lockForLife(program: "horizon-wallet")
        return files
    }
}
