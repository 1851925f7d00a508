import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

/// Nobody in radio range can end, time out or hide a sale: each attack is performed by a
/// scripted central on the simulated radio, and the customer's wallet, arriving after it, must
/// still pay in its normal time.
@Suite("Nobody in range can end or time out a sale", .offTheCooperativePool)
struct SaleInRangeTests {
    static let connectionInterval = LinkParameters().connectionInterval

    /// Any central can complete the handshake, prove a fresh session key, and send a Confirm
    /// signed by that key, which no wallet registered: the server declines it. That ends the
    /// stranger's attempt only; the sale stays open, the customer arriving after it pays in its
    /// normal time, and the stranger's key leaves no row in the merchant's transactions.
    @Test func aStrangersConfirmationTheServerDeclinesEndsOnlyItsOwnAttempt() throws {
        let normal = try FloodLimitTests.honestPaymentAlone()
        let world = try World(seed: 71)
        let terminal = try world.terminal(ledger: InProcessLedgerConfiguration(enrollment: .refuseUnknown))
        #expect(terminal.host.start(amount: euros(1250)))
        let session = try #require(terminal.host.sessionID)
        let identity = terminal.identity
        let strangerKey = P256.Signing.PrivateKey()
        let stranger = try ScriptedCentral(
            world: world, name: "stranger", at: Position(x: -0.4, y: 0), terminal: terminal.device.address,
            session: session
        ) { connection in connection.send(.hello(connection.hello())) }
        #expect(world.run(until: { stranger.offers.count == 1 }))
        let offer = try #require(stranger.offers.first)
        let confirm = try signedConfirm(for: offer, terminal: identity, by: strangerKey)
        try #require(stranger.connection).send(.confirm(confirm))
        #expect(world.run(until: { !stranger.receipts.isEmpty }))
        #expect(stranger.receipts.first?.outcome == .declined(.unknownWallet))
        #expect(!terminal.host.state.isFinished, "the stranger's decline ended the sale")
        #expect(terminal.host.error == nil)
        guard case .requestDeclined(_, .unknownWallet, _)? = terminal.host.lastWalletNotice else {
            Issue.record("the register was told \(String(describing: terminal.host.lastWalletNotice))")
            return
        }

        let wallet = try world.wallet()
        try terminal.ledger.setBalance(100_00, for: wallet.identity.publicKey)
        let watch = Stopwatch(wallet.client, simulation: world.simulation)
        let app = ScriptedWalletApp(wallet, decision: .accept(tip: 100))
        _ = app
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
        let attacked = try #require(watch.acceptanceToReceipt)
        #expect(attacked <= normal + Self.connectionInterval, "alone \(normal), after the stranger \(attacked)")
        #expect(try terminal.ledger.merchantBalance() == euros(1350))
        // Only the customer's payment is the merchant's record; the stranger's key left none.
        let rows = try terminal.ledger.transactions()
        #expect(rows.count == 1)
        #expect(rows.first?.paymentID == wallet.client.receipt?.paymentID)
        #expect(rows.allSatisfy { $0.paymentID != confirm.paymentID })
    }

    /// One proven Hello from a throw-away key, held open and never answered, runs only its own
    /// decision time: when that runs out the squatter's attempt ends and the sale waits, as it
    /// does when nobody came; the customer arriving after that pays.
    @Test func aSquattersHelloHeldOpenRunsOnlyItsOwnClock() throws {
        let timeout = Duration.seconds(10)
        let world = try World(seed: 73)
        let terminal = try world.terminal(host: PaymentHostConfiguration(userDecisionTimeout: timeout))
        #expect(terminal.host.start(amount: euros(800)))
        let squatter = try ScriptedCentral(
            world: world, name: "squatter", at: Position(x: -0.5, y: 0), terminal: terminal.device.address,
            session: try #require(terminal.host.sessionID)
        ) { connection in connection.send(.hello(connection.hello())) }
        #expect(world.run(until: { squatter.offers.count == 1 }))
        #expect(terminal.host.state == .awaitingUserDecision)
        // Past the squatter's decision time, and long after: the sale is still open.
        world.run(for: timeout + .seconds(2))
        let cancels = squatter.received.values.compactMap { if case .cancel(let cancel) = $0 { cancel } else { nil } }
        #expect(cancels.map(\.reason) == [.timedOut])
        #expect(terminal.host.state == .waitingForWallet)
        world.run(for: .seconds(20))
        #expect(terminal.host.state == .waitingForWallet)
        #expect(terminal.host.error == nil)

        let wallet = try world.wallet()
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(world.run(until: { wallet.client.state == .offerReceived }, timeout: .seconds(2)))
        world.run(for: .seconds(5))  // the person reads the offer
        wallet.client.onHostConnected = { [client = wallet.client] in
            client.setOrderConfirmedByUser(true, tip: euros(0))
        }
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(world.run(until: { wallet.client.state.isFinished && terminal.host.state.isFinished }))
        #expect(wallet.client.state == .completed, "wallet: \(String(describing: wallet.client.error))")
        #expect(terminal.host.state == .completed, "terminal: \(String(describing: terminal.host.error))")
        #expect(try terminal.ledger.merchantBalance() == euros(800))
    }

    /// A relay forwarding every byte between the wallet and a farther terminal: the payment goes
    /// through (the two ends are one secure connection, and the wallet and the register show the
    /// same code), but the relay, which saw the whole handshake in clear, cannot compute that
    /// code, so the fake register it stands for cannot show it.
    @Test func aByteRelayCannotShowTheCodeTheWalletShows() throws {
        let world = try World()
        let terminal = try world.terminal("real", at: Position(x: 2.5, y: 0))
        #expect(terminal.host.start(amount: euros(700)))
        let relay = try ByteRelay(
            world: world, at: Position(x: 0.1, y: 0), terminal: terminal, session: try #require(terminal.host.sessionID)
        )
        let wallet = try world.wallet(at: .origin)
        #expect(world.run(until: { wallet.decider.candidate?.peripheralMetaData.address == relay.device.address }))
        let app = ScriptedWalletApp(wallet, decision: .ignore)
        _ = app
        #expect(world.run(until: { wallet.client.state == .offerReceived }))
        let shown = try #require(wallet.client.offer?.confirmationCode)
        #expect(terminal.host.lastWalletNotice == .offered(shown), "the two ends show the same code")
        #expect(relay.clientHello?.first == 0x01 && relay.serverHello?.first == 0x02, "it saw both Hellos")
        let relayed = try #require(relay.codeFromTheClearTranscript)
        #expect(relayed != shown, "the relay computed the code from the clear handshake")
        wallet.client.onHostConnected = { [client = wallet.client] in
            client.setOrderConfirmedByUser(true, tip: euros(0))
        }
        wallet.decider.decideForCandidate()
        wallet.client.connectToPaymentSession()
        #expect(world.run(until: { wallet.client.state == .completed && terminal.host.state == .completed }))
    }

    /// A Confirm on an open session with no wallet connected (the only one that said hello
    /// declined and left) is refused for what it is, from a connection that never said hello,
    /// not as an expired session; nothing executes and the sale waits on.
    @Test func aConfirmOnASessionWithNoWalletIsNotCalledAnExpiredSession() throws {
        let world = try World()
        let terminal = try world.terminal()
        #expect(terminal.host.start(amount: euros(500)))
        let session = try #require(terminal.host.sessionID)
        let identity = terminal.identity
        let watcher = try ScriptedCentral(
            world: world, name: "watcher", at: Position(x: -0.4, y: 0), terminal: terminal.device.address,
            session: session
        ) { connection in connection.send(.hello(connection.hello())) }
        #expect(world.run(until: { watcher.offers.count == 1 }))
        let offer = try #require(watcher.offers.first)
        try #require(watcher.connection).send(.cancel(Cancel(sessionID: session, reason: .userDeclined)))
        #expect(world.run(until: { terminal.host.state == .waitingForWallet }))
        let silent = try ScriptedCentral(
            world: world, name: "silent", at: Position(x: -0.4, y: 0.2), terminal: terminal.device.address,
            session: session
        ) { connection in
            if let confirm = try? signedConfirm(for: offer, terminal: identity, by: P256.Signing.PrivateKey()) {
                connection.send(.confirm(confirm))
            }
        }
        #expect(world.run(until: { !silent.errors.isEmpty }))
        #expect(silent.errors.first?.code == .protocolViolation)
        #expect(terminal.host.state == .waitingForWallet)
        #expect(try terminal.ledger.transactions().isEmpty)
    }
}

/// A fake register in front of a distant terminal: it advertises the terminal's session nearer
/// to the wallet, and forwards every message between the wallet and the terminal unchanged (so
/// the handshake, the transcript and the payment go through). It sees both Hellos in clear and
/// computes what a code derived from them would be, the code it would show on its own screen.
final class ByteRelay: @unchecked Sendable {
    let device: SimulatedDevice
    private let lock = NSLock()
    private var toWallet: MessageLink?
    private var toTerminal: MessageLink?
    private var queued: [[UInt8]] = []
    private(set) var clientHello: [UInt8]?
    private(set) var serverHello: [UInt8]?

    init(world: World, at position: Position, terminal: TerminalRig, session: SessionID) throws {
        device = try world.simulation.addDevice(name: "relay", configuration: DeviceConfiguration(position: position))
        let keyID = try #require(terminal.service.terminalKeyID)
        let target = terminal.device.address
        device.setConnectionHandler { [self, device] link in
            guard let wallet = try? MessageLink(link: link, scheduler: device.scheduler) else { return }
            lock.withLock { toWallet = wallet }
            wallet.start(
                MessageLinkHandler(
                    onMessage: { [self] message in
                        let forward: MessageLink? = lock.withLock {
                            if clientHello == nil { clientHello = message }
                            if toTerminal == nil { queued.append(message) }
                            return toTerminal
                        }
                        try? forward?.send(message)
                    }, onEnd: { [self] _ in lock.withLock { toTerminal }?.close() }))
            device.connect(to: target, timeout: .seconds(2)) { [self, device] result in
                guard case .success(let link) = result,
                    let terminalSide = try? MessageLink(link: link, scheduler: device.scheduler)
                else { return }
                terminalSide.start(
                    MessageLinkHandler(
                        onMessage: { [self] message in
                            let forward: MessageLink? = lock.withLock {
                                if serverHello == nil { serverHello = message }
                                return toWallet
                            }
                            try? forward?.send(message)
                        }, onEnd: { [self] _ in lock.withLock { toWallet }?.close() }))
                let backlog: [[UInt8]] = lock.withLock {
                    toTerminal = terminalSide
                    defer { queued = [] }
                    return queued
                }
                for message in backlog { try? terminalSide.send(message) }
            }
        }
        _ = try device.startAdvertising(
            HorizonAdvertisement(transactionType: .payment, sessionID: session, terminalKeyID: keyID)
                .advertisingData(), interval: .milliseconds(50))
    }

    /// The code as a function of the clear handshake: the transcript hash (over the version's
    /// own label) through the code's hash, as versions before 3 derived it.
    var codeFromTheClearTranscript: ConfirmationCode? {
        lock.withLock {
            guard let clientHello, let serverHello, clientHello.count > 1, serverHello.count > 64 else { return nil }
            var transcript = SHA256()
            transcript.update(data: Array("horizon/handshake/v\(clientHello[1])".utf8))
            transcript.update(data: clientHello)
            transcript.update(data: Array(serverHello.dropLast(64)))  // the signature comes last
            var code = SHA256()
            code.update(data: Array("horizon/confirmation-code/v2".utf8))
            code.update(data: Array(transcript.finalize()))
            return ConfirmationCode(derivedBytes: Array(code.finalize().prefix(4)))
        }
    }
}

/// A Confirm for `offer`, signed by `key`, as any central that saw the offer can make one.
func signedConfirm(for offer: Offer, terminal: TerminalIdentity, by key: P256.Signing.PrivateKey) throws -> Confirm {
    var random = SystemRandomNumberGenerator()
    let unsigned = try Confirm(
        sessionID: offer.sessionID, terminalKeyDigest: try DigestBytes(bytes: terminal.keyDigest),
        walletKey: publicKey(key),
        offerDigest: try DigestBytes(bytes: Array(SHA256.hash(data: SessionMessage.offer(offer).encoded()))),
        amount: offer.amount, tip: .zero(offer.amount.currency), paymentID: PaymentID.random(using: &random),
        walletNonce: Nonce.random(using: &random), expiresAt: World.wallClock + 3_600)
    return unsigned.withSignature(sign(unsigned.signedBytes, with: key))
}
