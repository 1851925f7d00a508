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

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the wallet's key and store, and choose which terminal issuers to trust.",
        discussion: """
            Without --trust, the wallet trusts the sandbox anchor of a terminal initialised on this machine \
            (~/.local/share/horizon/terminal/anchor.pub), if there is one. The wallet is enrolled in a sandbox \
            ledger on its first payment there.
            """)

    @Option(help: "A terminal issuer's public key (PEM) to trust; repeat for several.") var trust: [String] = []
    @Flag(help: "Replace an existing wallet key.") var force = false
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var keyProtection: KeyProtectionOptions
    @OptionGroup var global: GlobalOptions

    func run() throws {
        var anchors = trust.map { URL(fileURLWithPath: $0) }
        var note = ""
        if anchors.isEmpty {
            let local = DataDirectory(explicit: nil, role: "terminal").file(TerminalFiles.anchorPublicKey)
            if FileManager.default.fileExists(atPath: local.path) {
                anchors = [local]
                note = " (the sandbox terminal on this machine)"
            }
        }
        let files = global.walletFiles
        // Not while a payment runs from the key this would replace.
        if FileManager.default.fileExists(atPath: files.directory.path) {
            try files.directory.lockForLife(program: "horizon-wallet")
        }
        _ = try files.initialize(trusting: anchors, force: force, keyProtection: keyProtection.keyProtection)
        let publicKey = try files.loadPublicKey()
        if json {
            try Console().json([
                "dataDirectory": files.directory.path, "walletKey": publicKey.bytes.hexString,
                "trusted": anchors.map(\.path).joined(separator: ","),
            ])
            return
        }
        print("Wallet ready in \(files.directory.path)")
        print("  wallet key  \(publicKey.bytes.prefix(8).hexString)…")
        if anchors.isEmpty {
            print("  trusts      nothing yet: run again with --force --trust <terminal data dir>/anchor.pub")
        } else {
            for anchor in anchors { print("  trusts      \(anchor.path)\(note)") }
        }
    }
}
