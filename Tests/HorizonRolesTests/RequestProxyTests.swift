import Crypto
import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Logging
import Synchronization
import Testing

@testable import HorizonRoles

/// A gateway standing in for the server's: answers each sealed request with `answer(request)`
/// (or throws), and counts what it was handed.
final class TestGateway: ProxyGateway {
    struct Unreachable: Error {}

    private let seen = Mutex<[[UInt8]]>([])
    let fails: Bool

    init(fails: Bool = false) { self.fails = fails }

    var requests: [[UInt8]] { seen.withLock { $0 } }

    static func answer(_ request: [UInt8]) -> [UInt8] { Array("answer:".utf8) + request.reversed() }

    func forward(_ sealed: [UInt8]) async throws -> [UInt8] {
        seen.withLock { $0.append(sealed) }
        if fails { throw Unreachable() }
        return Self.answer(sealed)
    }
}

/// Collects the results of `relay` calls by their order of asking.
final class RelayResults: Sendable {
    private let results = Mutex<[Int: Result<[UInt8], RequestProxyError>]>([:])

    func relay(_ sealed: [UInt8], through coordinator: RequestProxyClientCoordinator, as index: Int) {
        coordinator.relay(sealed) { [self] result in results.withLock { $0[index] = result } }
    }

    var count: Int { results.withLock { $0.count } }
    subscript(index: Int) -> Result<[UInt8], RequestProxyError>? { results.withLock { $0[index] } }
}

extension Result where Failure == RequestProxyError {
    var failure: RequestProxyError? { if case .failure(let error) = self { error } else { nil } }
    var answer: Success? { try? get() }
}

/// The request proxy on the simulated radio: a wallet relays sealed requests through
/// the terminal it is connected to, within the terminal's limits, without disturbing payments.
@Suite("Request proxy on the simulated radio", .offTheCooperativePool)
struct RequestProxyTests {
    /// A terminal relaying through `gateway`, a wallet looking at its offer, and the wallet's
    /// configured coordinator.
    static func connected(
        _ world: World, gateway: TestGateway, limits: RequestProxyLimits = RequestProxyLimits(),
        logger: Logger = .silent
    ) throws -> (TerminalRig, WalletRig, RequestProxyHostCoordinator, RequestProxyClientCoordinator) {
        let terminal = try world.terminal(logger: logger)
        let host = RequestProxyHostCoordinator(proxyHostConnectors: [terminal.host.connector])
        host.configure(gateway: gateway, limits: limits)
        let wallet = try world.wallet()
        let client = RequestProxyClientCoordinator(proxyClientConnectors: [wallet.client.connector])
        client.configureRequestProxyClient()
        return (terminal, wallet, host, client)
    }

    @Test func aWalletRelaysTwoRequestsAndThenPaysOnTheSameConnection() throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, wallet, host, client) = try Self.connected(world, gateway: gateway)
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(1250)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))

        let results = RelayResults()
        results.relay(Array("balance?".utf8), through: client, as: 0)
        results.relay(Array("history?".utf8), through: client, as: 1)
        #expect(world.run(until: { results.count == 2 }))
        #expect(results[0]?.answer == TestGateway.answer(Array("balance?".utf8)))
        #expect(results[1]?.answer == TestGateway.answer(Array("history?".utf8)))
        #expect(gateway.requests == [Array("balance?".utf8), Array("history?".utf8)])
        #expect(host.relayedCount == 2)
        #expect(!client.isUsingProxy)
        #expect(terminal.service.connectionCount == 1, "both went over the payment's connection")

        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(wallet.client.setOrderConfirmedByUser(true, tip: euros(0)))
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        #expect(try terminal.ledger.merchantBalance() == euros(1250))
        #expect(terminal.service.connectionCount <= 1)
        #expect(host.refusedCount == 0)
    }

    /// The gateway takes 3 s (virtual); the wallet confirms while its relay is out, and the
    /// payment completes as usual while the answer is still on its way.
    @Test func aPaymentGoesOnWhileARelayIsOutstanding() throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, wallet, host, client) = try Self.connected(world, gateway: gateway)
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(700)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        world.simulation.externalWorkDuration = .seconds(3)

        let results = RelayResults()
        results.relay(Array("programs?".utf8), through: client, as: 0)
        #expect(world.run(until: { host.outstandingCount == 1 }))
        #expect(client.isUsingProxy)
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(wallet.client.setOrderConfirmedByUser(true, tip: euros(0)))
        #expect(world.run(until: { terminal.host.state == .acquiringPaymentExecution }))
        #expect(results.count == 0, "the relay is still out while the payment executes")
        #expect(world.run(until: { results.count == 1 && wallet.client.state == .completed }))
        #expect(results[0]?.answer == TestGateway.answer(Array("programs?".utf8)))
        #expect(terminal.host.state == .completed)
        #expect(try terminal.ledger.merchantBalance() == euros(700))
        #expect(host.relayedCount == 1)
    }

    /// A terminal that answers the second request before the first: each answer reaches the
    /// request with its id.
    @Test func answersPairWithTheirRequestsByIDWhenTheyComeOutOfOrder() throws {
        let world = try World()
        var random = SystemRandomNumberGenerator()
        let session = SessionID.random(using: &random)
        let offer = Shared<Offer?>(nil)
        let held = Shared<[ProxyEnvelope]>([])
        let scripted = try ScriptedTerminal(world: world, name: "shuffler", at: .origin, sessionID: session) {
            connection, message in
            switch message {
            case .hello: if let offer = offer.value { connection.send(.offer(offer)) }
            case .proxyRequest(let request):
                held.value.append(request)
                guard held.value.count == 2 else { return }
                for request in held.value.reversed() {
                    if let answer = try? ProxyEnvelope(
                        requestID: request.requestID, sealed: TestGateway.answer(request.sealed))
                    {
                        connection.send(.proxyResponse(answer))
                    }
                }
            default: break
            }
        }
        offer.value = scripted.signed(try scripted.offer(500))
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        let client = RequestProxyClientCoordinator(proxyClientConnectors: [wallet.client.connector])
        client.configureRequestProxyClient()
        #expect(world.run(until: { wallet.client.state == .offerReceived }))

        let results = RelayResults()
        results.relay([1, 1, 1], through: client, as: 0)
        results.relay([2, 2, 2, 2], through: client, as: 1)
        #expect(world.run(until: { results.count == 2 }))
        #expect(results[0]?.answer == TestGateway.answer([1, 1, 1]))
        #expect(results[1]?.answer == TestGateway.answer([2, 2, 2, 2]))
        let ids = held.value.map(\.requestID)
        #expect(Set(ids).count == 2, "each request has its own id")
    }

    @Test func aGatewayFailureReachesTheWalletAsOutcomeUnknown() throws {
        let world = try World()
        let gateway = TestGateway(fails: true)
        let (terminal, wallet, host, client) = try Self.connected(world, gateway: gateway)
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(300)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))

        let results = RelayResults()
        results.relay(Array("token refresh".utf8), through: client, as: 0)
        #expect(world.run(until: { results.count == 1 }))
        let error = try #require(results[0]?.failure)
        guard case .outcomeUnknown = error else {
            Issue.record("expected outcome unknown, got \(error)")
            return
        }
        #expect(error.mayHaveBeenProcessed)
        #expect(gateway.requests.count == 1, "sent once, never again on its own")
        world.run(for: .seconds(30))
        #expect(gateway.requests.count == 1)
        // The session is undisturbed.
        #expect(wallet.client.state == .offerReceived)
        #expect(terminal.host.state == .awaitingUserDecision)
        #expect(host.relayedCount == 1)
    }

    /// Without a connected terminal nothing is sent; too large is refused before sending; a
    /// terminal that does not relay says so; one with a smaller size limit refuses by size.
    @Test func refusalsTheWalletCanTellApart() throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, wallet, host, client) = try Self.connected(
            world, gateway: gateway, limits: RequestProxyLimits(maximumSealedBytes: 100))
        let results = RelayResults()
        results.relay([0x42], through: client, as: 0)
        #expect(world.run(until: { results.count == 1 }, timeout: .seconds(1)))
        #expect(results[0]?.failure == .noTerminalInReach)
        #expect(results[0]?.failure?.mayHaveBeenProcessed == false)

        results.relay([UInt8](repeating: 1, count: MessageLimits.sealedPayload + 1), through: client, as: 1)
        #expect(
            results[1]?.failure
                == .tooLarge(size: MessageLimits.sealedPayload + 1, maximum: MessageLimits.sealedPayload))

        let unconfigured = RequestProxyClientCoordinator(proxyClientConnectors: [wallet.client.connector])
        let notConfigured = RelayResults()
        notConfigured.relay([1], through: unconfigured, as: 0)
        #expect(notConfigured[0]?.failure == .notConfigured)

        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(300)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        results.relay([UInt8](repeating: 7, count: 101), through: client, as: 2)
        #expect(world.run(until: { results.count == 3 }))
        guard case .limitReached? = results[2]?.failure else {
            Issue.record("expected a size refusal, got \(String(describing: results[2]))")
            return
        }
        #expect(gateway.requests.isEmpty)

        // A second terminal with no coordinator: `proxyUnavailable`.
        let plain = try world.terminal("plain", at: Position(x: 30, y: 0))
        #expect(plain.host.start(amount: euros(100)))
        let near = try world.wallet("near", at: Position(x: 30.3, y: 0))
        let nearApp = ScriptedWalletApp(near, decision: .ignore)
        _ = nearApp
        let nearClient = RequestProxyClientCoordinator(proxyClientConnectors: [near.client.connector])
        nearClient.configureRequestProxyClient()
        #expect(world.run(until: { near.client.state == .offerReceived }))
        results.relay([9], through: nearClient, as: 3)
        #expect(world.run(until: { results.count == 4 }))
        #expect(
            results[3]?.failure == .refused(code: .proxyUnavailable, reason: "this terminal does not relay requests"))
        #expect(host.relayedCount == 0)
        #expect(host.refusedCount == 1)
    }

    /// Foreign centrals flood proxy requests (each within the message rate): each connection gets
    /// at most its 16 relays, the terminal at most 30 a minute, the gateway sees no more, the
    /// refused get `rateLimited`, connections that keep going are closed, and a customer's
    /// payment at the same time completes.
    @Test func aForeignCentralFloodingProxyRequestsIsLimited() throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, wallet, host, _) = try Self.connected(world, gateway: gateway)
        #expect(terminal.host.start(amount: euros(900)))
        let session = try #require(terminal.host.sessionID)
        let centrals = try (0..<3).map { index in
            try ScriptedCentral(
                world: world, name: "flooder-\(index)", at: Position(x: 0.2, y: 0.1 * Double(index + 1)),
                terminal: terminal.device.address, session: session
            ) { _ in }
        }
        #expect(world.run(until: { centrals.allSatisfy { $0.isEstablished } }))
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app

        var next: UInt32 = 0
        for _ in 0..<24 {
            for central in centrals {
                next += 1
                central.connection?.send(.proxyRequest(try ProxyEnvelope(requestID: next, sealed: [0xAB, 0xCD])))
            }
            world.run(for: .milliseconds(250))
        }
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        // Connections that proved no wallet key: 4 a minute each.
        #expect(gateway.requests.count == 12, "each unproven connection's budget per minute")
        #expect(host.relayedCount == 12)
        let answered = centrals.map { central in
            central.received.values.filter { if case .proxyResponse = $0 { true } else { false } }.count
        }
        #expect(answered.allSatisfy { $0 <= 4 }, "\(answered)")
        #expect(answered.reduce(0, +) == 12)
        let refusals = centrals.flatMap { central in
            central.received.values.compactMap { if case .proxyError(let error) = $0 { error } else { nil } }
        }
        #expect(!refusals.isEmpty)
        #expect(refusals.allSatisfy { $0.code == .rateLimited })
        #expect(centrals.allSatisfy { $0.hasEnded }, "repeated refusals close the link")
        #expect(try terminal.ledger.merchantBalance() == euros(900))
    }

    /// A hog spends its relay budget (a connection with a proven Hello and one without, each
    /// sending 16): the customer's wallet, offline at the till, still gets its requests relayed.
    @Test func aHogSpendingItsBudgetDoesNotStarveTheCustomersRelays() throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, wallet, host, client) = try Self.connected(world, gateway: gateway)
        #expect(terminal.host.start(amount: euros(900)))
        let session = try #require(terminal.host.sessionID)
        let proven = try ScriptedCentral(
            world: world, name: "hog-proven", at: Position(x: 0.2, y: 0.1), terminal: terminal.device.address,
            session: session
        ) { connection in connection.send(.hello(connection.hello())) }
        let unproven = try ScriptedCentral(
            world: world, name: "hog", at: Position(x: 0.2, y: 0.2), terminal: terminal.device.address,
            session: session
        ) { _ in }
        #expect(world.run(until: { proven.offers.count == 1 && unproven.isEstablished }))
        var next: UInt32 = 0
        for _ in 0..<8 {
            for hog in [proven, unproven] {
                for _ in 0..<2 {
                    next += 1
                    hog.connection?.send(.proxyRequest(try ProxyEnvelope(requestID: next, sealed: [0xAB])))
                }
            }
            world.run(for: .milliseconds(200))
        }
        let hogRelayed = gateway.requests.count
        #expect(hogRelayed == 14, "the hog's budgets: 10 for its proven key, 4 for its other connection")

        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        let results = RelayResults()
        for index in 0..<3 {
            results.relay([UInt8(index)], through: client, as: index)
            #expect(world.run(until: { results.count == index + 1 }))
        }
        #expect((0..<3).allSatisfy { results[$0]?.answer == TestGateway.answer([UInt8($0)]) })
        #expect(gateway.requests.count == hogRelayed + 3)
        #expect(host.refusedCount > 0)
    }

    /// More than two at once on one connection: the third is refused while two are out.
    @Test func atMostTwoRelaysPerConnectionAreOutstanding() throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, _, host, _) = try Self.connected(world, gateway: gateway)
        #expect(terminal.host.start(amount: euros(900)))
        let session = try #require(terminal.host.sessionID)
        world.simulation.externalWorkDuration = .seconds(2)
        let central = try ScriptedCentral(
            world: world, name: "eager", terminal: terminal.device.address, session: session
        ) { connection in
            for id in UInt32(1)...3 {
                if let request = try? ProxyEnvelope(requestID: id, sealed: [UInt8(id)]) {
                    connection.send(.proxyRequest(request))
                }
            }
        }
        #expect(world.run(until: { central.received.count == 3 }))
        let messages = central.received.values
        #expect(
            messages.first
                == .proxyError(
                    ProxyError(
                        requestID: 3, code: .rateLimited,
                        message:
                            "2 requests are already being relayed on this connection; wait for their answers; not sent")
                ))
        #expect(
            Set(messages.dropFirst()) == [
                .proxyResponse(try ProxyEnvelope(requestID: 1, sealed: TestGateway.answer([1]))),
                .proxyResponse(try ProxyEnvelope(requestID: 2, sealed: TestGateway.answer([2]))),
            ])
        #expect(host.refusedCount == 1)
        #expect(gateway.requests.count == 2)
    }

    /// A marker in the sealed request and in the gateway's answer appears nowhere the terminal
    /// writes: not its journal's files, not a line of its log at the most verbose level.
    @Test func theTerminalsJournalAndLogsHoldNoneOfTheSealedBytes() throws {
        let world = try World()
        let gateway = TestGateway()
        let recorder = LogRecorder()
        let (terminal, wallet, host, client) = try Self.connected(
            world, gateway: gateway, logger: recorder.logger(level: .trace))
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(450)))
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        let marker = "HORIZON-PROXY-MARKER-7f3a"
        let results = RelayResults()
        results.relay(Array("GET /v1/balance \(marker)".utf8), through: client, as: 0)
        #expect(world.run(until: { results.count == 1 }))
        #expect(results[0]?.answer != nil)
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(wallet.client.setOrderConfirmedByUser(true, tip: euros(0)))
        #expect(world.run(until: { wallet.client.state == .completed }))
        world.run(for: .seconds(10))

        // As text, reversed (the answer), in hex, and as a printed byte array would show it.
        let forbidden = [
            marker, String(marker.reversed()), Array(marker.utf8).hexString,
            marker.utf8.map { "\($0)" }.joined(separator: ", "),
        ]
        let journalFiles = try FileManager.default.contentsOfDirectory(atPath: world.directory.path)
            .filter { $0.hasPrefix("terminal-journal") }
        #expect(!journalFiles.isEmpty)
        for file in journalFiles {
            let bytes = try Data(contentsOf: world.directory.appendingPathComponent(file))
            for text in forbidden.prefix(2) {
                #expect(bytes.range(of: Data(text.utf8)) == nil, "\(file) holds the relayed bytes")
            }
        }
        #expect(try !terminal.journal.history().isEmpty, "the payment was journaled")
        let lines = recorder.all
        #expect(lines.contains { $0.message == "relayed a proxy answer" })
        for line in lines {
            let text = line.message + line.metadata.map { "\($0.key)=\($0.value)" }.joined()
            for forbiddenText in forbidden { #expect(!text.contains(forbiddenText), "log: \(text)") }
        }
        #expect(host.relayedCount == 1)
    }

    /// No terminal connected: the wallet connects to the nearest advertising terminal for the
    /// request alone (no Hello, so the sale there is untouched) and the link closes after the
    /// answer; with that turned off it fails `noTerminalInReach`, nothing sent.
    @Test func withNoTerminalConnectedTheWalletConnectsForTheRequestAlone() throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, wallet, host, client) = try Self.connected(world, gateway: gateway)
        #expect(terminal.host.start(amount: euros(800)))
        #expect(world.run(until: { !wallet.client.fusionTracker.trackings.isEmpty }))

        let results = RelayResults()
        results.relay(Array("balance?".utf8), through: client, as: 0)
        #expect(world.run(until: { results.count == 1 }))
        #expect(results[0]?.answer == TestGateway.answer(Array("balance?".utf8)))
        #expect(host.relayedCount == 1)
        #expect(world.run(until: { terminal.service.connectionCount == 0 }, timeout: .seconds(5)))
        #expect(wallet.client.state == .idle)
        #expect(terminal.host.state == .waitingForWallet)

        let connectedOnly = RequestProxyClientCoordinator(
            proxyClientConnectors: [wallet.client.connector],
            configuration: RequestProxyClientConfiguration(connectsWhenNoTerminalIsConnected: false))
        connectedOnly.configureRequestProxyClient()
        results.relay([1], through: connectedOnly, as: 1)
        #expect(world.run(until: { results.count == 2 }))
        #expect(results[1]?.failure == .noTerminalInReach)
        #expect(gateway.requests.count == 1)
    }

    /// The reference's wiring: the terminal's coordinator over its payment and redemption hosts
    /// (one radio service), the wallet's over all four clients' connectors; a wallet looking at a
    /// bonus redemption relays through the redemption client's channel.
    @Test func aWalletInARedemptionRelaysThroughTheRedemptionClientsConnector() throws {
        let bench = try RedemptionBench(.bonusRedemption)
        let gateway = TestGateway()
        let host = RequestProxyHostCoordinator(proxyHostConnectors: [
            bench.terminal.host.connector, bench.host.connector,
        ])
        host.configure(gateway: gateway)
        let wallet = try bench.wallet()
        let autopilot = WalletAutopilot(coordinator: wallet.coordinator) { _, _ in .ignore }
        _ = autopilot
        let clients = wallet.coordinator
        let client = RequestProxyClientCoordinator(proxyClientConnectors: [
            clients.paymentClient.connector, clients.bonusRedemptionClient.connector,
            clients.goldRedemptionClient.connector, clients.couponRedemptionClient.connector,
        ])
        client.configureRequestProxyClient()
        #expect(bench.host.start(RedemptionOffer(item: "Free coffee", points: 100, value: euros(320))))
        #expect(bench.world.run(until: { clients.bonusRedemptionClient.state == .offerReceived }))
        #expect(clients.paymentClient.state == .idle)

        let results = RelayResults()
        results.relay(Array("points?".utf8), through: client, as: 0)
        #expect(bench.world.run(until: { results.count == 1 }))
        #expect(results[0]?.answer == TestGateway.answer(Array("points?".utf8)))
        #expect(host.relayedCount == 1)
    }

    /// One coordinator over the hosts of two terminals' radio services: one budget for both.
    @Test func hostsOfOneCoordinatorShareOneBudget() throws {
        let world = try World()
        let gateway = TestGateway()
        let first = try world.terminal("first")
        let second = try world.terminal("second", at: Position(x: 30, y: 0))
        let host = RequestProxyHostCoordinator(proxyHostConnectors: [first.host.connector, second.host.connector])
        host.configure(gateway: gateway, limits: RequestProxyLimits(maximumRelaysPerWindow: 3))
        #expect(host.limits?.maximumRelaysPerWindow == 3)
        let nearFirst = try world.wallet("near-first")
        let nearSecond = try world.wallet("near-second", at: Position(x: 30.3, y: 0))
        let apps = [ScriptedWalletApp(nearFirst, decision: .ignore), ScriptedWalletApp(nearSecond, decision: .ignore)]
        _ = apps
        let clients = [nearFirst, nearSecond].map { wallet in
            let client = RequestProxyClientCoordinator(proxyClientConnectors: [wallet.client.connector])
            client.configureRequestProxyClient()
            return client
        }
        #expect(first.host.start(amount: euros(100)))
        #expect(second.host.start(amount: euros(200)))
        #expect(
            world.run(until: {
                nearFirst.client.state == .offerReceived && nearSecond.client.state == .offerReceived
            }))
        #expect(nearSecond.client.offer?.amount == euros(200), "each wallet is at its own terminal")

        let results = RelayResults()
        results.relay([1], through: clients[0], as: 0)
        results.relay([2], through: clients[0], as: 1)
        #expect(world.run(until: { results.count == 2 }))
        results.relay([3], through: clients[1], as: 2)
        #expect(world.run(until: { results.count == 3 }))
        results.relay([4], through: clients[1], as: 3)
        #expect(world.run(until: { results.count == 4 }))
        #expect((0..<3).allSatisfy { results[$0]?.answer != nil })
        guard case .limitReached? = results[3]?.failure else {
            Issue.record("expected the shared budget to be spent, got \(String(describing: results[3]))")
            return
        }
        #expect(gateway.requests.count == 3)
        // Stopped: the terminals no longer relay.
        host.stop()
        results.relay([5], through: clients[0], as: 4)
        #expect(world.run(until: { results.count == 5 }))
        #expect(
            results[4]?.failure == .refused(code: .proxyUnavailable, reason: "this terminal does not relay requests"))
    }

    /// `relay` as async code calls it, while the simulation runs in step with the clock.
    @Test func theAsyncRelayReturnsTheAnswer() async throws {
        let world = try World()
        let gateway = TestGateway()
        let (terminal, wallet, host, client) = try Self.connected(world, gateway: gateway)
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(300)))
        let events = client.events()
        let (answer, event) = try await world.simulation.live(speed: AsyncAPITests.speed) {
            () async throws -> ([UInt8], RequestProxyEvent?) in
            try await waitUntil { wallet.client.state == .offerReceived }
            let answer = try await client.relay(Array("cards?".utf8))
            return (answer, await first(events))
        }
        #expect(answer == TestGateway.answer(Array("cards?".utf8)))
        #expect(event == .relayed(requestBytes: 6, responseBytes: TestGateway.answer(Array("cards?".utf8)).count))
        #expect(host.relayedCount == 1)
    }
}

extension FakeWallet: ProxyWallet {}

/// The relay's rules as values: limits, pairing, the window, closing on repeated refusals.
@Suite("Request proxy state machines")
struct RequestProxyStateMachineTests {
    static func envelope(_ id: UInt32, bytes: Int = 4) throws -> ProxyEnvelope {
        try ProxyEnvelope(requestID: id, sealed: [UInt8](repeating: 0x5A, count: bytes))
    }

    static func relays(_ actions: [RequestProxyHostAction]) -> [UInt32] {
        actions.compactMap { if case .relay(let id, _, _) = $0 { id } else { nil } }
    }

    static func refusals(_ actions: [RequestProxyHostAction]) -> [ErrorCode] {
        actions.compactMap {
            if case .send(.proxyError(let error), _) = $0 { error.code } else { nil }
        }
    }

    static func closes(_ actions: [RequestProxyHostAction]) -> Bool {
        actions.contains { if case .close = $0 { true } else { false } }
    }

    static func key(_ n: UInt8) -> PublicKeyBytes {
        (try? PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: n, count: 64))) ?? WalletIdentity().publicKey
    }

    @Test func perConnectionAndPerWindowLimitsAndTheWindowMoving() throws {
        var machine = RequestProxyHostStateMachine(
            limits: RequestProxyLimits(
                maximumOutstandingPerConnection: 1, maximumRelaysPerConnection: 2, maximumRelaysPerWindow: 3,
                rateWindow: .seconds(60), refusalsBeforeClosing: 10))
        let a = FakeWallet(1, sessionKey: Self.key(1))
        let b = FakeWallet(2, sessionKey: Self.key(2))
        var now = Instant.zero
        #expect(Self.relays(machine.request(try Self.envelope(1), from: a, now: now)) == [1])
        // One outstanding per connection.
        #expect(Self.refusals(machine.request(try Self.envelope(2), from: a, now: now)) == [.rateLimited])
        _ = machine.relayed(.answered([1]), requestID: 1, for: a, elapsed: .milliseconds(5))
        #expect(Self.relays(machine.request(try Self.envelope(3), from: a, now: now)) == [3])
        _ = machine.relayed(.answered([1]), requestID: 3, for: a, elapsed: .milliseconds(5))
        // Two per connection in its life.
        #expect(Self.refusals(machine.request(try Self.envelope(4), from: a, now: now)) == [.rateLimited])
        #expect(Self.relays(machine.request(try Self.envelope(5), from: b, now: now)) == [5])
        _ = machine.relayed(.answered([1]), requestID: 5, for: b, elapsed: .milliseconds(5))
        // Three in the window across connections.
        let c = FakeWallet(3, sessionKey: Self.key(3))
        #expect(Self.refusals(machine.request(try Self.envelope(6), from: c, now: now)) == [.rateLimited])
        now = now + .seconds(61)
        #expect(Self.relays(machine.request(try Self.envelope(7), from: c, now: now)) == [7])
        #expect(machine.relayedCount == 4)
        #expect(machine.refusedCount == 3)
    }

    /// Each one's budget comes before the terminal's cap: a proven wallet key 10 a window (on
    /// any number of connections), a connection that proved none 4, and all of those together
    /// half the cap; so a hog spending its budget leaves the rest of the cap to a customer.
    @Test func eachBudgetComesBeforeTheTerminalsCap() throws {
        var machine = RequestProxyHostStateMachine(limits: RequestProxyLimits(refusalsBeforeClosing: 100))
        var id: UInt32 = 0
        func relayed(_ wallet: FakeWallet, _ count: Int) throws -> Int {
            var relayed = 0
            for _ in 0..<count {
                id += 1
                let actions = machine.request(try Self.envelope(id), from: wallet, now: .zero)
                relayed += Self.relays(actions).count
                _ = machine.relayed(.answered([1]), requestID: id, for: wallet, elapsed: .zero)
            }
            return relayed
        }
        // One unproven connection: 4; four more: half the cap (15) in all.
        #expect(try relayed(FakeWallet(1), 10) == 4)
        #expect(try (2...5).map { try relayed(FakeWallet($0), 10) }.reduce(0, +) == 11)
        // One proven key: 10 a window, across its connections.
        let hog = Self.key(9)
        #expect(try relayed(FakeWallet(6, sessionKey: hog), 8) == 8)
        #expect(try relayed(FakeWallet(7, sessionKey: hog), 8) == 2)
        // The customer's wallet still relays, up to the terminal's cap of 30.
        #expect(try relayed(FakeWallet(8, sessionKey: Self.key(1)), 10) == 5)
        #expect(machine.relayedCount == 30)
    }

    @Test func sizeDuplicatesAndRepeatedRefusalsCloseTheLink() throws {
        var machine = RequestProxyHostStateMachine(
            limits: RequestProxyLimits(maximumSealedBytes: 8, refusalsBeforeClosing: 3))
        let wallet = FakeWallet(1)
        #expect(
            Self.refusals(machine.request(try Self.envelope(1, bytes: 9), from: wallet, now: .zero)) == [
                .payloadTooLarge
            ])
        #expect(Self.relays(machine.request(try Self.envelope(2), from: wallet, now: .zero)) == [2])
        let duplicate = machine.request(try Self.envelope(2), from: wallet, now: .zero)
        #expect(Self.refusals(duplicate) == [.protocolViolation])
        #expect(!Self.closes(duplicate))
        let third = machine.request(try Self.envelope(3, bytes: 9), from: wallet, now: .zero)
        #expect(Self.refusals(third) == [.payloadTooLarge])
        #expect(Self.closes(third))
    }

    @Test func answersForAnEndedConnectionAreDroppedAndFailuresAreOutcomeUnknown() throws {
        var machine = RequestProxyHostStateMachine(limits: RequestProxyLimits())
        let wallet = FakeWallet(1)
        _ = machine.request(try Self.envelope(1), from: wallet, now: .zero)
        _ = machine.request(try Self.envelope(2), from: wallet, now: .zero)
        let failed = machine.relayed(.failed(kind: "URLError"), requestID: 1, for: wallet, elapsed: .seconds(1))
        #expect(Self.refusals(failed) == [.gatewayUnreachable])
        machine.connectionEnded(wallet)
        let late = machine.relayed(.answered([1, 2]), requestID: 2, for: wallet, elapsed: .seconds(1))
        #expect(!late.contains { if case .send = $0 { true } else { false } })
        #expect(machine.outstandingCount == 0)
        // An oversized answer is not relayed, and the wallet hears the outcome is unknown.
        _ = machine.request(try Self.envelope(3), from: wallet, now: .zero)
        let huge = machine.relayed(
            .answered([UInt8](repeating: 0, count: MessageLimits.sealedPayload + 1)), requestID: 3, for: wallet,
            elapsed: .seconds(1))
        #expect(Self.refusals(huge) == [.gatewayUnreachable])
    }

    @Test func theWalletPairsByIDAndChannelAndFailsWhatALostChannelHeld() throws {
        var machine = RequestProxyClientStateMachine()
        let first = machine.newRequestID()
        let second = machine.newRequestID()
        #expect(first != second)
        #expect(machine.sent(first, connector: 0, channel: 7) == [.armTimeout(first, connector: 0)])
        _ = machine.sent(second, connector: 0, channel: 7)
        // The same id from another channel pairs with nothing.
        #expect(machine.received(.response(try Self.envelope(first)), connector: 1, channel: 7).isEmpty)
        #expect(machine.received(.response(try Self.envelope(first)), connector: 0, channel: 8).isEmpty)
        #expect(
            machine.received(.response(try Self.envelope(second)), connector: 0, channel: 7)
                == [.complete(second, .success(try Self.envelope(second).sealed))])
        #expect(
            machine.received(
                .refused(ProxyError(requestID: 99, code: .rateLimited)), connector: 0, channel: 7
            ).isEmpty)
        let ended = machine.received(.channelEnded, connector: 0, channel: 7)
        guard case .complete(first, .failure(.outcomeUnknown))? = ended.first else {
            Issue.record("expected outcome unknown, got \(ended)")
            return
        }
        #expect(machine.timedOut(first, after: .seconds(1)).isEmpty, "already ended")
        let third = machine.newRequestID()
        _ = machine.sent(third, connector: 0, channel: 9)
        #expect(
            machine.received(
                .refused(ProxyError(requestID: third, code: .payloadTooLarge, message: "big")), connector: 0, channel: 9
            )
                == [.complete(third, .failure(.limitReached("big")))])
        let fourth = machine.newRequestID()
        _ = machine.sent(fourth, connector: 0, channel: 9)
        #expect(
            machine.timedOut(fourth, after: .seconds(20))
                == [.complete(fourth, .failure(.outcomeUnknown("no answer within 20.0 seconds")))])
    }
}
