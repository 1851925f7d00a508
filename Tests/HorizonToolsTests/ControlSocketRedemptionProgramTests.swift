import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import Testing

/// `redeem` on `serve`'s control socket: bonus, gold and coupon redemptions with the one-shot
/// `redeem` command's arguments, one session at a time shared with `pay`.
@Suite("Redemptions through the terminal service", .offTheCooperativePool)
struct ControlSocketRedemptionProgramTests {
    /// Every line the service answers `request` with.
    private func answer(_ request: String, at control: String) throws -> [String] {
        let connection = try LineConnection.connect(to: control)
        connection.setReadTimeout(seconds: 40)
        connection.send(request)
        var lines: [String] = []
        while let line = connection.readLine() { lines.append(line) }
        return lines
    }

    @Test func bonusGoldAndCouponAreRedeemedThroughTheServiceAndBadRequestsAreRefused() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        func terminal(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-terminal", arguments + ["--data-dir", terminalDir])
        }
        #expect(try terminal(["programs", "points", "150", "--wallet-dir", walletDir]).status == 0)
        #expect(try terminal(["programs", "gold", "--wallet-dir", walletDir]).status == 0)
        #expect(try terminal(["programs", "coupon", "SUMMER", "--value", "5", "--wallet-dir", walletDir]).status == 0)
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")

        // Bad input: one error line each, and no session is started.
        for (request, expected) in [
            ("redeem", "error Missing expected argument '<kind>'"),
            ("redeem silver", "error The value 'silver' is invalid for '<kind>'"),
            ("redeem bonus --reward Coffee", "error redeem bonus needs --points (1 or more)"),
            ("redeem bonus --points abc --reward Coffee", "error The value 'abc' is invalid for '--points <points>'"),
            ("redeem bonus --points 0 --reward Coffee", "error redeem bonus needs --points (1 or more)"),
            ("redeem gold", "error redeem gold needs --benefit (1 to 64 bytes)"),
            ("redeem coupon --points 5", "error --points is for bonus redemptions"),
        ] {
            let lines = try answer(request, at: control)
            #expect(lines.count == 1, "\(request): \(lines)")
            #expect(lines.first?.hasPrefix(expected) == true, "\(request): \(lines)")
            #expect(paymentState(at: control) == "idle", "\(request) started a session")
        }

        for (request, walletArguments, expected) in [
            ("redeem bonus --points 100 --reward Coffee --register Ana", [String](), "bonus 100 Coffee"),
            ("redeem gold --benefit Dessert --register Ana", [], "gold 0 Dessert"),
            ("redeem coupon --register Ana", ["--coupon", "SUMMER"], "coupon 0 SUMMER"),
        ] {
            let register = Task { try answer(request, at: control) }
            #expect(await eventually { paymentState(at: control) == "waiting for a wallet" }, "\(request)")
            // One session at a time, shared with payments.
            #expect(try answer("pay 1", at: control) == ["failed a payment or redemption is already in progress"])
            #expect(
                try answer("redeem coupon", at: control) == ["failed a payment or redemption is already in progress"])
            let wallet = try Programs.run(
                "horizon-wallet",
                ["redeem", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"]
                    + walletArguments)
            #expect(wallet.status == 0, "\(request): \(wallet.standardError)")
            let lines = try await register.value
            #expect(lines.contains { $0.hasPrefix("state ") }, "\(lines)")
            let last = try #require(lines.last)
            #expect(last.hasPrefix("redeemed ") && last.hasSuffix(" \(expected)"), "\(lines)")
            // The journal answers for the redemption's id as for a payment's.
            let id = last.split(separator: " ")[1]
            let status = try answer("status \(id)", at: control)
            #expect(status.contains { $0.hasPrefix("result paid") }, "\(id)")
            // The cashier is journaled with the redemption, as with a payment.
            #expect(status.contains("register Ana"), "\(status)")
        }
        let shown = try terminal(["programs", "show", "--json", "--wallet-dir", walletDir])
        let report = try JSONSerialization.jsonObject(with: Data(shown.standardOutput.utf8)) as? [String: Any]
        #expect(report?["points"] as? Int == 50, "\(shown.standardOutput)")
        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning })
    }

    /// A redemption no wallet has joined is cancelled at shutdown, and its client told.
    @Test func aShutdownCancelsARedemptionNoWalletJoined() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, _, socket) = try sandbox.initializeTerminalAndWallet()
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")
        let register = Task { try answer("redeem coupon", at: control) }
        #expect(await eventually { paymentState(at: control) == "waiting for a wallet" })
        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning })
        let result = service.finish(timeout: 1)
        #expect(result.status == 0, "\(result.standardOutput) \(result.standardError)")
        #expect(
            result.standardOutput.contains("the payment no wallet had joined is cancelled"), "\(result.standardOutput)")
        let lines = try await register.value
        #expect(lines.last?.hasPrefix("failed ") == true, "\(lines)")
    }

    /// A redemption a wallet has joined finishes before the service exits at a shutdown.
    @Test func aShutdownLetsARedemptionAWalletJoinedFinish() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        #expect(
            try Programs.run(
                "horizon-terminal", ["programs", "points", "150", "--wallet-dir", walletDir, "--data-dir", terminalDir]
            ).status == 0)
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")
        let register = Task { try answer("redeem bonus --points 100 --reward Coffee", at: control) }
        let wallet = try Programs.start(
            "horizon-wallet", ["redeem", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"],
            keepInputOpen: true)
        defer { stop(wallet) }
        #expect(
            await eventually(within: .seconds(30)) { paymentState(at: control) == "awaiting the customer's decision" },
            "the offer reached the customer")
        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually { !FileManager.default.fileExists(atPath: control) }, "the control socket stays open")
        #expect(service.process.isRunning, "the service ended before the customer decided")
        wallet.type("y\n")
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning }, "still running after it")
        let result = service.finish(timeout: 1)
        #expect(result.status == 0, "\(result.standardOutput) \(result.standardError)")
        #expect(result.standardOutput.contains("finishing the payment in progress first"), "\(result.standardOutput)")
        let lines = try await register.value
        #expect(lines.last?.hasSuffix(" bonus 100 Coffee") == true, "\(lines)")
        #expect(wallet.finish(timeout: 10).status == 0)
    }
}
