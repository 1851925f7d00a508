import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonTestSupport
import Logging
import Synchronization
import Testing

/// The roles log through the `Logger` the app injects, with levels and the session and payment
/// ids as metadata; without one they are silent.
@Suite("Logging", .offTheCooperativePool)
struct LoggingTests {
    @Test func bothSidesLogAPaymentWithItsSessionAndPaymentIDs() throws {
        let world = try World()
        let terminalLines = LogRecorder()
        let walletLines = LogRecorder()
        let device = try world.simulation.addDevice(name: "terminal")
        let terminal = try world.terminal(radio: device, logger: terminalLines.logger(level: .info))
        let walletDevice = try world.simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 0.3, y: 0)))
        let client = PaymentClient(
            radio: walletDevice, identity: WalletIdentity(), trustAnchors: world.anchors,
            logger: walletLines.logger(level: .debug))
        try client.start()
        let app = ScriptedWalletApp(client: client, decision: .accept(tip: 100))
        #expect(terminal.host.start(amount: euros(1_250)))
        #expect(world.run(until: { client.state == .completed && terminal.host.state.isFinished }))
        let receipt = try #require(client.receipt)
        let session = "\(receipt.sessionID)"
        let payment = "\(receipt.paymentID)"

        let opened = try #require(terminalLines.first("session opened"))
        #expect(opened.level == .info)
        #expect(opened.metadata["session"] == session)
        #expect(opened.metadata["amount"] == "12.50 EUR")
        let settled = try #require(terminalLines.first("settled"))
        #expect(settled.metadata["session"] == session)
        #expect(settled.metadata["payment"] == payment)
        // Debug lines are below the terminal's level: not recorded.
        #expect(terminalLines.first("secure channel established") == nil)

        let sent = try #require(walletLines.first("request signed, stored and sent"))
        #expect(sent.metadata["payment"] == payment)
        #expect(sent.metadata["session"] == session)
        #expect(sent.metadata["type"] == "payment")
        withExtendedLifetime(app) {}
    }
}
