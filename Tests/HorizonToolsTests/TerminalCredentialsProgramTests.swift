import Foundation
import HorizonTestSupport
import Testing

/// The terminal's signing key as a systemd credential (`LoadCredentialEncrypted=terminal-key.pem:…`
/// puts it in `$CREDENTIALS_DIRECTORY`): the terminal signs with it, and its data directory need
/// not hold it.
@Suite("The terminal's key from systemd credentials", .serialized, .offTheCooperativePool)
struct TerminalCredentialsProgramTests {
    @Test func aTerminalWhoseKeyIsACredentialTakesAPayment() throws {
        let sandbox = try Sandbox()
        let terminalDir = sandbox.path("terminal")
        let walletDir = sandbox.path("wallet")
        let credentials = sandbox.path("credentials")
        let socket = sandbox.path("radio.sock")
        let initTerminal = try Programs.run(
            "horizon-terminal", ["init", "--data-dir", terminalDir, "--merchant-name", "Test Bakery"])
        #expect(initTerminal.status == 0, "\(initTerminal.standardError)")
        let initWallet = try Programs.run(
            "horizon-wallet", ["init", "--data-dir", walletDir, "--trust", terminalDir + "/anchor.pub"])
        #expect(initWallet.status == 0, "\(initWallet.standardError)")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try FileManager.default.moveItem(
            atPath: terminalDir + "/terminal-key.pem", toPath: credentials + "/terminal-key.pem")

        // Without the credential there is no key to sign with.
        let keyless = try Programs.run(
            "horizon-terminal", ["pay", "1.00", "--data-dir", terminalDir, "--radio-socket", socket])
        #expect(keyless.status != 0)
        #expect(keyless.standardError.contains("terminal-key.pem"), "\(keyless.standardError)")

        // With it, the wallet verifies the terminal's credential, which names that key, and pays.
        let terminal = try Programs.start(
            "horizon-terminal", ["pay", "12.50", "--data-dir", terminalDir, "--radio-socket", socket],
            environment: ["CREDENTIALS_DIRECTORY": credentials])
        let wallet = try Programs.run(
            "horizon-wallet",
            ["pay", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
        let terminalResult = terminal.finish()
        #expect(wallet.status == 0, "wallet: \(wallet.standardOutput) \(wallet.standardError)")
        #expect(terminalResult.status == 0, "terminal: \(terminalResult.standardError)")
        #expect(wallet.standardOutput.contains("Paid Test Bakery: 12.50 EUR"))
        #expect(!FileManager.default.fileExists(atPath: terminalDir + "/terminal-key.pem"))
    }
}
