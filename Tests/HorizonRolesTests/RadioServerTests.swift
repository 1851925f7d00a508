import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonRadio
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

@Suite("The simulated radio between processes (over its Unix socket)", .serialized, .offTheCooperativePool)
struct RadioServerTests {
    /// A server on a private socket, served by a task until the test ends.
    final class RunningServer: Sendable {
        let server: RadioServer
        let path: String

        init() throws {
            path =
                FileManager.default.temporaryDirectory.appendingPathComponent(
                    "radio-\(UUID().uuidString.prefix(8)).sock"
                )
                .path
            server = try RadioServer(socketPath: path)
            Task { [server] in await server.run() }
        }

        deinit { server.stop() }
    }

    @Test func aTerminalAndAWalletOnSeparateConnectionsPay() throws {
        let running = try RunningServer()
        let world = try World()
        let terminalRadio = try RemoteSimulatedRadio(socketPath: running.path, name: "terminal", position: .origin)
        let walletRadio = try RemoteSimulatedRadio(
            socketPath: running.path, name: "wallet", position: Position(x: 0.3, y: 0))
        #expect(terminalRadio.address != walletRadio.address)

        let terminal = try world.terminal(radio: terminalRadio)
        let client = PaymentClient(radio: walletRadio, identity: WalletIdentity(), trustAnchors: world.anchors)
        let app = ScriptedWalletApp(client: client, decision: .accept(tip: 100))
        _ = app
        try client.start()
        #expect(terminal.host.start(amount: euros(2500)))
        #expect(waitReal(seconds: 20) { client.state.isFinished && terminal.host.state.isFinished })
        #expect(client.state == .completed)
        #expect(terminal.host.state == .completed)
        #expect(client.receipt?.total == euros(2600))
        #expect(try terminal.ledger.merchantBalance() == euros(2600))
        #expect(running.server.clientCount == 2)
    }

    @Test func aClientThatGoesAwayIsAPoweredOffDevice() throws {
        let running = try RunningServer()
        let left = try RemoteSimulatedRadio(socketPath: running.path, name: "left", position: .origin)
        let right = try RemoteSimulatedRadio(socketPath: running.path, name: "right", position: Position(x: 1, y: 0))
        let closes = Recorder<LinkCloseReason>()
        left.setConnectionHandler { _ in }
        _ = try left.startAdvertising([2, 1, 6], interval: .milliseconds(50))
        let connected = Recorder<Result<any ByteLink, RadioError>>()
        right.connect(to: left.address, timeout: .seconds(2)) { connected.append($0) }
        #expect(waitReal(seconds: 5) { connected.count == 1 })
        let link = try requireValue(connected.values.first).get()
        link.setHandler(ByteLinkHandler(onReceive: { _ in }, onClose: { closes.append($0) }))
        left.disconnect()
        // The peer notices after the supervision timeout (2 s).
        #expect(waitReal(seconds: 6) { closes.count == 1 })
        #expect(closes.values == [.connectionLost])
        #expect(waitReal(seconds: 2) { running.server.clientCount == 1 })
    }

    @Test func onlyOneServerServesASocket() throws {
        let running = try RunningServer()
        #expect(
            throws: RadioError.backend(
                name: "radio-server", message: "another simulated radio already serves \(running.path)")
        ) {
            try RadioServer(socketPath: running.path)
        }
        // The loser did not take the socket away: the first server still answers.
        #expect(try RemoteSimulatedRadio.probe(socketPath: running.path))
        running.server.stop()
        running.server.stop()  // idempotent
        // Once released, the path can be served again.
        let again = try RadioServer(socketPath: running.path)
        again.stop()
    }

    @Test func requestsFailClearlyWithoutAServer() throws {
        #expect(throws: RadioError.adapterUnavailable(.serviceUnavailable)) {
            try RemoteSimulatedRadio(socketPath: "/nonexistent/radio.sock", name: "x", position: .origin)
        }
    }
}

/// Polls `condition` in real time.
func waitReal(seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return condition()
}

func requireValue<T>(_ value: T?) throws -> T {
    guard let value else { throw CancellationError() }
    return value
}
