import Crypto
import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Synchronization
import Testing

/// Devices that crowd a terminal (limits against floods). Each records what happened to
/// its links in virtual time; the links are kept here so only the terminal can end them.
final class Crowd: Sendable {
    let simulation: RadioSimulation
    let terminal: PeerAddress
    private let held = Mutex<[any AnyObject & Sendable]>([])
    /// When each squatter's link went down.
    let squatterCloses = Recorder<Instant>()
    /// For each idle authenticated wallet: when its handshake completed and when its link ended.
    let idlerEstablished = Recorder<(index: Int, at: Instant)>()
    let idlerEnds = Recorder<(index: Int, at: Instant)>()
    private let rogueFrames = Mutex(0)

    init(simulation: RadioSimulation, terminal: PeerAddress) {
        self.simulation = simulation
        self.terminal = terminal
    }

    var rogueFramesSent: Int { rogueFrames.withLock { $0 } }

    private func device(_ name: String, index: Int) throws -> SimulatedDevice {
        // Within a metre or two of the terminal, around it; they only connect, never advertise.
        try simulation.addDevice(
            name: "\(name)-\(index)",
            configuration: DeviceConfiguration(
                position: Position(x: -1 - Double(index % 10) * 0.1, y: Double(index / 10) * 0.1)))
    }

    /// Wallets that connect and never start the handshake.
    func squat(_ count: Int, first: Int = 0) throws {
        for index in first..<(first + count) {
            let device = try device("squatter", index: index)
            device.connect(to: terminal, timeout: .seconds(2)) { [self] result in
                guard case .success(let link) = result else { return }
                held.withLock { $0.append(link) }
                link.setHandler(
                    ByteLinkHandler(onReceive: { _ in }, onClose: { [self] _ in squatterCloses.append(simulation.now) })
                )
            }
        }
    }

    /// Wallets that complete the handshake, naming `session`, and then say nothing; one arrives
    /// every `spacing`, slower than a handshake takes, so the cap on handshakes does not apply.
    func idle(_ count: Int, session: SessionID, anchors: [TrustAnchor], spacing: Duration) throws {
        let context = (0..<8).map { UInt8(truncatingIfNeeded: session.rawValue >> (56 - 8 * $0)) }
        for index in 0..<count {
            let device = try device("idler", index: index)
            simulation.schedule(after: spacing * index) { [self] in self.idleConnect(device, index, context, anchors) }
        }
    }

    private func idleConnect(_ device: SimulatedDevice, _ index: Int, _ context: [UInt8], _ anchors: [TrustAnchor]) {
        device.connect(to: terminal, timeout: .seconds(2)) { [self] result in
            guard case .success(let link) = result,
                let messageLink = try? MessageLink(link: link, scheduler: device.scheduler),
                let secure = try? SecureLink.initiate(
                    over: messageLink, trustAnchors: anchors, expectedTerminalKeyID: nil, context: context,
                    handler: SecureLinkHandler(
                        onEstablished: { [self] _ in idlerEstablished.append((index, simulation.now)) },
                        onMessage: { _ in }, onEnd: { [self] _ in idlerEnds.append((index, simulation.now)) }))
            else { return }
            held.withLock { $0.append(secure) }
        }
    }

    /// A rogue that sends `total` garbage frames over `parallel` connections at once, ten frames
    /// per connection, reconnecting each time the terminal throws it out.
    func flood(_ total: Int, parallel: Int = 4) throws {
        let device = try device("rogue", index: 0)
        let random = Mutex(SeededRandom(seed: 0xF100D))
        @Sendable func attack() {
            guard rogueFramesSent < total else { return }
            device.connect(to: terminal, timeout: .seconds(2)) { [self] result in
                guard case .success(let link) = result else {
                    attack()
                    return
                }
                link.setHandler(ByteLinkHandler(onReceive: { _ in }, onClose: { _ in attack() }))
                for _ in 0..<10 {
                    let sent = rogueFrames.withLock { count -> Bool in
                        guard count < total else { return false }
                        count += 1
                        return true
                    }
                    guard sent else { break }
                    let frame = random.withLock { random in
                        (0..<Int.random(in: 1...200, using: &random)).map { _ in
                            UInt8.random(in: 0...255, using: &random)
                        }
                    }
                    try? link.send(frame)
                }
            }
        }
        for _ in 0..<parallel { attack() }
    }
}

/// When the honest wallet reached each state, in virtual time.
final class Stopwatch: Sendable {
    private let times = Mutex<[PaymentClientState: Instant]>([:])

    init(_ client: PaymentClient, simulation: RadioSimulation) {
        client.observeState { [self] state in
            let now = simulation.now
            self.times.withLock { times in
                if times[state] == nil { times[state] = now }
            }
        }
    }

    subscript(_ state: PaymentClientState) -> Instant? { times.withLock { $0[state] } }

    /// From the wallet's connect (the person took the candidate) to the verified receipt.
    var acceptanceToReceipt: Duration? {
        guard let start = self[.connecting], let end = self[.completed] else { return nil }
        return end - start
    }
}

@Suite("Limits against floods", .offTheCooperativePool)
struct FloodLimitTests {
    static let cap = 8
    static let connectionInterval = LinkParameters().connectionInterval
    /// The honest wallet comes into range this long after the session opens, in the middle of
    /// the flood (the payment itself takes a fraction of a second).
    static let walletArrives = Duration.seconds(1)

    /// The honest wallet alone on the same seed, for its normal time.
    static func honestPaymentAlone() throws -> Duration {
        let world = try World(seed: 71)
        let terminal = try world.terminal()
        #expect(terminal.host.start(amount: euros(1250)))
        world.run(for: Self.walletArrives)
        let wallet = try world.wallet()
        let watch = Stopwatch(wallet.client, simulation: world.simulation)
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 100))
        _ = app
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        return try #require(watch.acceptanceToReceipt)
    }

    /// 100 wallets connect and never start the handshake while a rogue sends 1,000 garbage frames;
    /// the honest wallet pays in its normal time, and the terminal never holds more than the cap
    /// of unauthenticated connections (plus the honest one once authenticated).
    @Test func anHonestWalletPaysInItsNormalTimeThroughHandshakeSquattersAndGarbage() throws {
        let normal = try Self.honestPaymentAlone()

        let world = try World(seed: 71)
        let terminal = try world.terminal(service: TerminalServiceConfiguration(maximumPendingHandshakes: Self.cap))
        let crowd = Crowd(simulation: world.simulation, terminal: terminal.device.address)
        #expect(terminal.host.start(amount: euros(1250)))
        let start = world.simulation.now
        // Half the squatters at once, the rest trickling in, one every 50 ms, until 1.5 s after
        // the honest wallet arrives; the rogue floods from the start.
        try crowd.squat(50)
        for index in 0..<50 {
            world.simulation.schedule(after: .milliseconds(50) * (index + 1)) {
                try? crowd.squat(1, first: 50 + index)
            }
        }
        try crowd.flood(1000, parallel: 2)
        var most = 0
        let sample = { most = max(most, terminal.service.connectionCount) }
        world.run(
            until: {
                sample()
                return false
            }, timeout: Self.walletArrives)
        let wallet = try world.wallet()
        let watch = Stopwatch(wallet.client, simulation: world.simulation)
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 100))
        _ = app

        let paid = world.run(
            until: {
                sample()
                return wallet.client.state == .completed && terminal.host.state == .completed
            }, timeout: .seconds(10))
        #expect(paid, "wallet \(wallet.client.state), terminal \(terminal.host.state)")
        let framesWhenPaid = crowd.rogueFramesSent
        let squattersClosedWhenPaid = crowd.squatterCloses.count
        // The cashier opens the next session (so the terminal stays reachable) and the flood goes
        // on to its end: 1,000 frames sent, every squatter gone.
        #expect(terminal.host.stop())
        #expect(terminal.host.start(amount: euros(500)))
        let floodOver = world.run(
            until: {
                sample()
                return crowd.rogueFramesSent >= 1000 && crowd.squatterCloses.count == 100
                    && terminal.service.pendingHandshakeCount == 0
            }, timeout: .seconds(30))
        #expect(floodOver, "rogue frames \(crowd.rogueFramesSent), squatters closed \(crowd.squatterCloses.count)")

        let flooded = try #require(watch.acceptanceToReceipt)
        print("acceptance to receipt: alone \(normal), flooded \(flooded); connections at most \(most)")
        print(
            "when the receipt arrived: \(framesWhenPaid) rogue frames sent, \(squattersClosedWhenPaid) squatters closed;"
                + " evicted handshakes in all \(terminal.service.evictedHandshakeCount)")
        #expect(flooded <= normal + Self.connectionInterval)
        #expect(most <= Self.cap + 1)
        #expect(framesWhenPaid > 0 && framesWhenPaid < 1000, "the flood ran during the payment")
        #expect(terminal.service.evictedHandshakeCount > 0)
        // Every squatter is gone within the handshake deadline of its arrival (the last arrives
        // at 2.5 s), most of them at once by eviction.
        let lastClose = try #require(crowd.squatterCloses.values.max())
        #expect(lastClose - start <= .milliseconds(2500) + .seconds(5) + .milliseconds(200))
        #expect(terminal.host.state == .waitingForWallet)
        let receipt = try #require(wallet.client.receipt)
        #expect(try terminal.ledger.executionCount(of: receipt.paymentID) == 1)
        #expect(try terminal.ledger.transactions().count == 1)
        #expect(try terminal.ledger.merchantBalance() == euros(1350))
    }

    /// 100 wallets complete the handshake for the session and then say nothing: each is closed at
    /// the idle timeout. The honest wallet, whose person takes longer than the idle timeout to
    /// decide, is not cut (the session waits on it) and pays.
    @Test func idleAuthenticatedWalletsAreClosedAtTheIdleTimeoutButADecidingCustomerIsNot() throws {
        let idleTimeout = Duration.seconds(30)
        let world = try World(seed: 72)
        let terminal = try world.terminal(
            host: PaymentHostConfiguration(userDecisionTimeout: .seconds(60)),
            service: TerminalServiceConfiguration(idleTimeout: idleTimeout))
        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(terminal.host.start(amount: euros(800)))
        let session = try #require(terminal.host.sessionID)
        let crowd = Crowd(simulation: world.simulation, terminal: terminal.device.address)
        try crowd.idle(100, session: session, anchors: world.anchors, spacing: .milliseconds(100))

        #expect(world.run(until: { wallet.client.state == .offerReceived && crowd.idlerEstablished.count == 100 }))
        #expect(terminal.service.connectionCount == 101)
        // The person looks at the offer for 40 s, longer than the idle timeout.
        world.run(for: .seconds(40))
        #expect(crowd.idlerEnds.count == 100)
        #expect(terminal.service.idleClosureCount == 100, "only the idle wallets were cut")
        #expect(terminal.service.connectionCount == 1)
        #expect(terminal.host.state == .awaitingUserDecision)
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(wallet.client.setOrderConfirmedByUser(true, tip: euros(0)))
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))

        // Each idle link ended at its idle timeout, give or take a connection event either way.
        let ends = Dictionary(crowd.idlerEnds.values.map { ($0.index, $0.at) }, uniquingKeysWith: min)
        let lived = crowd.idlerEstablished.values.compactMap { established in
            ends[established.index].map { $0 - established.at }
        }
        #expect(lived.count == 100)
        let slack = Self.connectionInterval * 2
        #expect(lived.allSatisfy { $0 >= idleTimeout - slack && $0 <= idleTimeout + slack }, "\(lived.prefix(3))")
        print("idle links lived \(lived.min().map { "\($0)" } ?? "-") to \(lived.max().map { "\($0)" } ?? "-")")
        let receipt = try #require(wallet.client.receipt)
        #expect(try terminal.ledger.executionCount(of: receipt.paymentID) == 1)
        #expect(try terminal.ledger.merchantBalance() == euros(800))
    }

    /// A client that keeps one session key and opens sessions without paying is refused with
    /// `rateLimited` once over `maximumSessionsPerWallet`; the honest wallet, with a fresh key for
    /// every attempt, is never limited and pays in the same minute. (A Hello takes no
    /// session, so this bounds a key's work, not anybody's money.)
    @Test func aKeyOverItsSessionRateIsRefusedWhileTheHonestWalletPays() throws {
        let world = try World(seed: 73)
        let terminal = try world.terminal(
            service: TerminalServiceConfiguration(maximumSessionsPerWallet: 3, sessionRateWindow: .seconds(60)))
        let key = P256.Signing.PrivateKey()
        var heard: [[SessionMessage]] = []
        for index in 0..<4 {
            #expect(terminal.host.start(amount: euros(100 + Int64(index))))
            let central = try ScriptedCentral(
                world: world, name: "same-key-\(index)", terminal: terminal.device.address,
                session: try #require(terminal.host.sessionID)
            ) { connection in connection.send(.hello(connection.hello(key: key))) }
            world.run(for: .seconds(2))
            central.close()
            heard.append(central.received.values)
            #expect(terminal.host.stop())
        }
        func offered(_ messages: [SessionMessage]) -> Bool {
            messages.contains { if case .offer = $0 { true } else { false } }
        }
        #expect(heard.prefix(3).allSatisfy(offered), "three sessions with one key")
        #expect(!offered(heard[3]))
        #expect(heard[3].contains { if case .error(let error) = $0 { error.code == .rateLimited } else { false } })
        #expect(terminal.service.rateLimitedHelloCount == 1)

        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 0))
        _ = app
        for cents: Int64 in [200, 300, 400] {
            #expect(terminal.host.start(amount: euros(cents)))
            #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
            #expect(terminal.host.stop())
            wallet.client.restart()
            wallet.decider.restart()
        }
        #expect(try terminal.ledger.transactions().count == 3)
        #expect(try terminal.ledger.merchantBalance() == euros(900))
    }
}
