import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import Logging

struct Balance: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show bonus points per merchant and, in the sandbox, the balance the ledger holds.",
        discussion: """
            Bonus points come from this wallet's receipts. The money balance lives in the terminal's in-process \
            ledger: given with --ledger, or found in a terminal data directory on this machine.
            """)

    @OptionGroup var ledger: LedgerChoice
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let files = global.walletFiles
        let publicKey = try files.loadPublicKey()
        let receipts = try files.openStore().receipts()
        var points: [String: Int64] = [:]
        for receipt in receipts.reversed() { points[receipt.merchantName] = receipt.bonusPointsBalance }
        let sandbox = try await ledger.open()
        var balance: String?
        if let sandbox {
            balance = try await sandbox.account(for: publicKey).map { "\($0.balance)" } ?? "not enrolled yet"
        }
        if json {
            try Console().json(
                BalanceReport(balance: balance, ledger: sandbox == nil ? nil : ledger.path, bonusPoints: points))
            return
        }
        print("balance       \(balance ?? "unknown (no terminal ledger on this machine; pass --ledger)")")
        if points.isEmpty { print("bonus points  none yet") }
        for (merchant, value) in points.sorted(by: { $0.key < $1.key }) {
            print("bonus points  \(value) at \(merchant)")
        }
    }
}

struct BalanceReport: Encodable {
    let balance: String?
    let ledger: String?
    let bonusPoints: [String: Int64]
}
