import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// `horizon-wallet pay` against what is in radio range: a nearer terminal it cannot trust, and no
/// one at the keyboard.
@Suite("The wallet program in radio range", .serialized, .offTheCooperativePool)
struct RadioRangeProgramTests {
    /// A nearer terminal whose anchor the wallet does not trust (a clone, a look-alike) is refused
    /// at the handshake; the program passes it over and pays the real terminal, farther away,
    /// instead of exiting after the first refused terminal.
    @Test func aNearerTerminalRefusedAtTheHandshakeIsPassedOverAndTheRealOneIsPaid() throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let cloneDir = sandbox.path("clone")
        let initClone = try Programs.run("horizon-terminal", ["init", "--data-dir", cloneDir])
        #expect(initClone.status == 0, "\(initClone.standardError)")
        let real = try Programs.start(
            "horizon-terminal",
            ["pay", "4", "--data-dir", terminalDir, "--radio-socket", socket, "--position", "1.5,0"])
        let clone = try Programs.start(
            "horizon-terminal",
            ["pay", "4", "--data-dir", cloneDir, "--radio-socket", socket, "--position", "0.35,0"])
        defer {
            clone.interrupt()
            _ = clone.finish(timeout: 10)
        }
        // Both advertising before the wallet looks, so the clone is the nearest it hears.
        Thread.sleep(forTimeInterval: 1.5)
        let wallet = try Programs.run(
            "horizon-wallet",
            [
                "pay", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--position", "0.3,0", "--timeout",
                "30",
            ])
        let realResult = real.finish(timeout: 30)
        #expect(wallet.status == 0, "wallet: \(wallet.standardOutput) \(wallet.standardError)")
        #expect(wallet.standardOutput.contains("Passed over a terminal"), "\(wallet.standardOutput)")
        #expect(wallet.standardOutput.contains("Paid "), "\(wallet.standardOutput)")
        #expect(realResult.status == 0, "real terminal: \(realResult.standardOutput) \(realResult.standardError)")
    }

    /// With standard input at end of file (`< /dev/null`, a service, a closed pipe), the question
    /// has no answer: the wallet declines at once instead of waiting at [y/N].
    @Test(arguments: [true, false])
    func standardInputAtEndOfFileDeclines(nullDevice: Bool) throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let terminal = try Programs.start(
            "horizon-terminal", ["pay", "3", "--data-dir", terminalDir, "--radio-socket", socket])
        let started = Date()
        let wallet = try Programs.start(
            "horizon-wallet", ["pay", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"],
            inputFromNullDevice: nullDevice
        ).finish(timeout: 40)
        #expect(wallet.status == 1, "\(wallet.standardOutput) \(wallet.standardError)")
        #expect(wallet.standardError.contains("error: declined; nothing was charged"), "\(wallet.standardError)")
        #expect(Date().timeIntervalSince(started) < 25)
        terminal.interrupt()
        _ = terminal.finish(timeout: 10)
        let transactions = try Programs.run("horizon-terminal", ["transactions", "--data-dir", terminalDir])
        #expect(transactions.standardOutput.contains("no transactions yet"))
    }
}
