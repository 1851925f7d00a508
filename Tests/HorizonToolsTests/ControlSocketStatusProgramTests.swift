import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import Testing

/// `status ID` on `serve`'s control socket: a register that lost its connection mid-sale asks
/// the terminal's journal how the payment ended.
@Suite("Payment status by id on the control socket", .offTheCooperativePool)
struct ControlSocketStatusProgramTests {
    /// Every line the service answers `request` with.
    private func answer(_ request: String, at control: String) throws -> [String] {
        let connection = try LineConnection.connect(to: control)
        connection.setReadTimeout(seconds: 10)
        connection.send(request)
        var lines: [String] = []
        while let line = connection.readLine() { lines.append(line) }
        return lines
    }

    @Test func aPaymentsStatusIsAnsweredFromTheJournalAndBadIdsWithOneErrorLine() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")

        let register = try Programs.start("horizon-terminal", ["pay", "7.25", "--control-socket", control, "--json"])
        defer { stop(register) }
        let wallet = try Programs.run(
            "horizon-wallet",
            ["pay", "--tip", "0.75", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
        #expect(wallet.status == 0, "\(wallet.standardError)")
        let paid = register.finish(timeout: 30)
        #expect(paid.status == 0, "\(paid.standardError)")
        let summary = try JSONSerialization.jsonObject(with: Data(paid.standardOutput.utf8)) as? [String: Any]
        let id = try #require(summary?["paymentId"] as? String, "\(paid.standardOutput)")

        let status = try answer("status \(id)", at: control)
        #expect(status.first == "id \(id)", "\(status)")
        #expect(status.contains("type payment"), "\(status)")
        #expect(status.contains { $0.hasPrefix("step result") || $0.hasPrefix("step acknowledged") }, "\(status)")
        #expect(status.last == "result paid 7.25 0.75 8.00", "\(status)")
        #expect(status.contains("source journal"), "\(status)")
        // Either case of hexadecimal names the same payment.
        #expect(try answer("status \(id.uppercased())", at: control).last == "result paid 7.25 0.75 8.00")

        let unknown = String(repeating: "ab", count: 16)
        #expect(
            try answer("status \(unknown)", at: control)
                == ["error unknown payment id \(unknown): no payment or redemption with it here"])
        // Text that is not 32 hexadecimal digits is an order reference: unknown here.
        for other in ["xyz", "abc", String(repeating: "ab", count: 17)] {
            #expect(
                try answer("status \(other)", at: control)
                    == ["error unknown order reference \(other): no payment with it here"], "\(other)")
        }
        let malformed = String(repeating: "ab", count: 51)
        #expect(
            try answer("status \(malformed)", at: control) == [
                "error not a payment id (32 hexadecimal digits) nor an order reference (a reference is 1 to 100 characters of printable text without spaces)"
            ])
        // Plain `status` answers as before.
        #expect(paymentState(at: control) != nil)
        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning })
        let help = try Programs.run("horizon-terminal", ["serve", "--help"])
        #expect(help.standardOutput.contains("status ID"), "\(help.standardOutput)")
    }
}
