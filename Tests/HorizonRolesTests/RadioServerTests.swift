import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonRadio
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

// On the cooperative pool: the radios wait on no thread, and the tests await their conditions.
@Suite("The simulated radio between processes (over its Unix socket)", .serialized)
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

    @Test func aTerminalAndAWalletOnSeparateConnectionsPay() async throws {
        let running = try RunningServer()
        let world = try World()
        let terminalRadio = try await RemoteSimulatedRadio(
            socketPath: running.path, name: "terminal", position: .origin)
        let walletRadio = try await RemoteSimulatedRadio(
            socketPath: running.path, name: "wallet", position: Position(x: 0.3, y: 0))
        #expect(terminalRadio.address != walletRadio.address)

        let terminal = try world.terminal(radio: terminalRadio)
        let client = PaymentClient(radio: walletRadio, identity: WalletIdentity(), trustAnchors: world.anchors)
        let app = ScriptedWalletApp(client: client, decision: .accept(tip: 100))
        _ = app
        try client.start()
        #expect(terminal.host.start(amount: euros(2500)))
        #expect(await waitReal(seconds: 20) { client.state.isFinished && terminal.host.state.isFinished })
        #expect(client.state == .completed)
        #expect(terminal.host.state == .completed)
        #expect(client.receipt?.total == euros(2600))
        #expect(try terminal.ledger.merchantBalance() == euros(2600))
        #expect(running.server.clientCount == 2)
    }

    @Test func aClientThatGoesAwayIsAPoweredOffDevice() async throws {
        let running = try RunningServer()
        let left = try await RemoteSimulatedRadio(socketPath: running.path, name: "left", position: .origin)
        let right = try await RemoteSimulatedRadio(
            socketPath: running.path, name: "right", position: Position(x: 1, y: 0))
        let closes = Recorder<LinkCloseReason>()
        left.setConnectionHandler { _ in }
        _ = try left.startAdvertising([2, 1, 6], interval: .milliseconds(50))
        let connected = Recorder<Result<any ByteLink, RadioError>>()
        right.connect(to: left.address, timeout: .seconds(2)) { connected.append($0) }
        #expect(await waitReal(seconds: 5) { connected.count == 1 })
        let link = try requireValue(connected.values.first).get()
        link.setHandler(ByteLinkHandler(onReceive: { _ in }, onClose: { closes.append($0) }))
        left.disconnect()
        // The peer notices after the supervision timeout (2 s).
        #expect(await waitReal(seconds: 6) { closes.count == 1 })
        #expect(closes.values == [.connectionLost])
        #expect(await waitReal(seconds: 2) { running.server.clientCount == 1 })
    }

    @Test func aDeviceAnswersItsOwnRequestsAsTheServerWould() async throws {
        let running = try RunningServer()
        let left = try await RemoteSimulatedRadio(socketPath: running.path, name: "left", position: .origin)
        let right = try await RemoteSimulatedRadio(
            socketPath: running.path, name: "right", position: Position(x: 1, y: 0))
        #expect(throws: RadioError.invalidConfiguration("advertising interval must be 20 ms to 10.24 s")) {
            try left.startAdvertising([2, 1, 6], interval: .milliseconds(10))
        }
        let heard = Recorder<[UInt8]>()
        try right.startScanning { heard.append($0.advertisingData) }
        #expect(throws: RadioError.alreadyScanning) { try right.startScanning { _ in } }
        // The sets are numbered here as the server numbers them: stopping the first stops that one.
        let first = try left.startAdvertising([2, 1, 6, 2, 0xFF, 1], interval: .milliseconds(20))
        _ = try left.startAdvertising([2, 1, 6, 2, 0xFF, 2], interval: .milliseconds(20))
        #expect(await waitReal(seconds: 5) { Set(heard.values).count == 2 })
        first.stop()
        try await Task.sleep(for: .milliseconds(200))
        let afterStop = heard.count
        #expect(await waitReal(seconds: 5) { heard.count >= afterStop + 5 })
        #expect(heard.values[(afterStop + 1)...].allSatisfy { $0 == [2, 1, 6, 2, 0xFF, 2] })
        left.disconnect()
        right.disconnect()
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

    @Test func requestsFailClearlyWithoutAServer() async throws {
        await #expect(throws: RadioError.adapterUnavailable(.serviceUnavailable)) {
            try await RemoteSimulatedRadio(socketPath: "/nonexistent/radio.sock", name: "x", position: .origin)
        }
    }
}

/// Polls `condition` in real time.
func waitReal(seconds: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

func requireValue<T>(_ value: T?) throws -> T {
    guard let value else { throw CancellationError() }
    return value
}
