import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Synchronization
import Testing

/// `serve` and the radio server run under swift-service-lifecycle: SIGTERM or SIGINT shuts them
/// down gracefully (exit 0, their sockets removed, a payment no wallet has joined cancelled at the
/// register with its client told, one a wallet has joined finished first), never by the signal's
/// default death.
@Suite("Graceful shutdown of the long-running programs", .offTheCooperativePool)
struct ServiceShutdownTests {
    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalShutsTheTerminalServiceDownGracefully(signal: Int32) async throws {
        let sandbox = try Sandbox()
        let (terminalDir, _, socket) = try sandbox.initializeTerminalAndWallet()
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { FileManager.default.fileExists(atPath: control) }, "the control socket came up")

        // A payment no wallet takes is running when the signal comes.
        let register = try Programs.start("horizon-terminal", ["pay", "3", "--control-socket", control])
        defer { stop(register) }
        #expect(await eventually { paymentState(at: control) == "waiting for a wallet" }, "the payment started")

        // When the process exited, noted by Foundation's own thread: this test's queue may be held
        // by another test meanwhile (a loaded run once measured 10 s for a fast shutdown).
        let exitedAt = Mutex<ContinuousClock.Instant?>(nil)
        service.process.terminationHandler = { _ in exitedAt.withLock { $0 = .now } }
        let signalled = ContinuousClock.now
        kill(service.process.processIdentifier, signal)
        let exited = await eventually(within: .seconds(30)) { exitedAt.withLock { $0 } != nil }
        let took = (exitedAt.withLock { $0 } ?? ContinuousClock.now) - signalled
        let result = service.finish(timeout: 1)
        #expect(exited, "still running 30 s after the signal")
        #expect(result.status == 0, "\(result.standardOutput) \(result.standardError)")
        #expect(service.process.terminationReason == .exit, "ended by the signal instead of shutting down")
        #expect(took < .seconds(5), "shutdown took \(took)")
        #expect(result.standardOutput.contains("terminal service shutting down"))
        #expect(result.standardOutput.hasSuffix("terminal service stopped\n"))
        #expect(!FileManager.default.fileExists(atPath: control), "the control socket file is left behind")

        // The register hears that its payment was cancelled, as with `cancel`.
        #expect(await eventually { !register.process.isRunning })
        let registerResult = register.finish(timeout: 1)
        #expect(registerResult.status == 1)
        #expect(registerResult.standardError.contains("error: The payment was cancelled at the register."))
    }

    /// A restart must not break off a customer: a SIGTERM while the customer decides closes the
    /// control socket at once, but the sale finishes (the register gets its paid line, the wallet
    /// its receipt), and only then does the service exit 0.
    @Test func aSignalWhileACustomerDecidesLetsTheSaleFinishFirst() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")

        let register = try Programs.start("horizon-terminal", ["pay", "4.00", "--control-socket", control, "--json"])
        defer { stop(register) }
        let wallet = try Programs.start(
            "horizon-wallet", ["pay", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"],
            keepInputOpen: true)
        defer { stop(wallet) }
        #expect(
            await eventually(within: .seconds(30)) { paymentState(at: control) == "awaiting the customer's decision" },
            "the offer reached the customer")

        kill(service.process.processIdentifier, SIGTERM)
        #expect(
            await eventually { !FileManager.default.fileExists(atPath: control) },
            "the control socket stays open for new requests")
        #expect(service.process.isRunning, "the service ended before the customer decided")

        wallet.type("y\n")
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning }, "still running after the sale")
        let result = service.finish(timeout: 1)
        #expect(result.status == 0, "\(result.standardOutput) \(result.standardError)")
        #expect(
            result.standardOutput.contains(
                "terminal service shutting down: control socket closed, finishing the payment in progress first"),
            "\(result.standardOutput)")
        let registerResult = register.finish(timeout: 10)
        #expect(registerResult.status == 0, "\(registerResult.standardError)")
        let summary = try JSONSerialization.jsonObject(with: Data(registerResult.standardOutput.utf8)) as? [String: Any]
        #expect(summary?["state"] as? String == "completed", "\(registerResult.standardOutput)")
        let walletResult = wallet.finish(timeout: 10)
        #expect(walletResult.status == 0, "\(walletResult.standardError)")
        let transactions = try Programs.run("horizon-terminal", ["transactions", "--data-dir", terminalDir, "--json"])
        #expect(transactions.standardOutput.components(separatedBy: "\"paymentId\"").count == 2, "one payment, once")
    }

    @Test func sigtermStopsTheRadioServerAndRemovesItsSocket() async throws {
        let sandbox = try Sandbox()
        let socket = sandbox.path("radio.sock")
        let server = try Programs.start("horizon-terminal", ["radio", "--socket", socket])
        defer { stop(server) }
        #expect(await eventually { FileManager.default.fileExists(atPath: socket) })
        kill(server.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(10)) { !server.process.isRunning })
        let result = server.finish(timeout: 1)
        #expect(result.status == 0, "\(result.standardError)")
        #expect(server.process.terminationReason == .exit)
        #expect(!FileManager.default.fileExists(atPath: socket))
    }
}
