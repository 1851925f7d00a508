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

/// A clone and a pending payment: the wallet confirmed with the real terminal,
/// the link broke before the receipt, and a nearer clone now advertises the terminal's key id.
/// The retries must get past the clone (refused at the handshake) to the real terminal, which
/// answers with the receipt of the payment it already executed.
@Suite("A clone does not hold a pending payment", .offTheCooperativePool)
struct CloneRetryTests {
    /// Who the clone is when the wallet reaches it: either way it cannot complete the handshake
    /// for the real terminal's key id.
    enum Clone: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// A terminal identity that no anchor the wallet trusts vouched for.
        case unvouched
        /// A genuine terminal of the same anchor (another shop's, say) replaying the real
        /// terminal's advertisement: its credential is valid, its key is not the advertised one.
        case anotherVouchedTerminal

        var testDescription: String { rawValue }
    }

    /// The clone advertises far more often than the real terminal, so the latest sighting of the
    /// key id is almost always the clone's: without the refused address being set aside, every
    /// retry would go to it.
    static let cloneInterval = Duration.milliseconds(20)
    static let realInterval = Duration.seconds(1)

    /// The attack: confirm with the real terminal, cut the link before the receipt, then a clone
    /// nearer than the terminal replays its advertisement. The first retry goes to the clone (the
    /// latest sighting) and is refused at the handshake; the next goes to the real terminal, which
    /// answers from its journal: the receipt is stored, the payment was charged once.
    @Test(arguments: Clone.allCases)
    func aPendingPaymentGetsPastARefusedCloneToTheRealTerminal(clone kind: Clone) throws {
        let shop = try PendingShop(seed: 41)
        let pending = try shop.confirmAndLoseTheReceipt()
        let cut = shop.world.simulation.now

        // The cashier's next session keeps the real terminal advertising (same key id, new
        // session); the clone replays that advertisement from nearer.
        let session = try shop.openNextSession()
        let clone = try CloneTerminal(kind, in: shop, replaying: session)

        #expect(shop.world.run(until: { shop.client.state.isFinished }, timeout: .seconds(4)))
        let elapsed = shop.world.simulation.now - cut
        let tried = shop.log.peers(since: cut)
        #expect(tried == [clone.address, shop.real.device.address], "the wallet tried \(tried)")
        #expect(clone.handshakes == 1)
        #expect(clone.messages == 0, "the wallet sent the clone nothing: no Hello, no request")
        // Two retries (after 0.5 s and 1 s of back-off) and their handshakes.
        #expect(elapsed <= .seconds(2), "answered \(elapsed) after the cut")
        try shop.expectPaidOnce(pending)
    }

    /// Every address advertising the key id fails the handshake: the real terminal because the
    /// wallet's clock ran weeks ahead (its credential looks expired), the clone because it is not
    /// the terminal. Then every address gets another turn, so once the clock is right again the
    /// real terminal is reached; the real terminal failed first, so a wallet that kept the last
    /// address it tried would be stuck on the clone.
    @Test func onceEveryAddressFailedTheyAllGetAnotherTurn() throws {
        let shop = try PendingShop(seed: 43)
        let pending = try shop.confirmAndLoseTheReceipt()
        let cut = shop.world.simulation.now
        shop.walletDevice.clock.setSkew(.seconds(86_400 * 45))
        let session = try shop.openNextSession()
        let real = shop.real.device.address

        // The first retry reaches the real terminal alone, and its credential is refused.
        #expect(shop.world.run(until: { !shop.log.peers(since: cut).isEmpty }))
        #expect(shop.log.peers(since: cut) == [real])
        let clone = try CloneTerminal(.unvouched, in: shop, replaying: session)

        // Each address is tried, refused, and tried again.
        let eachTwice = shop.world.run(
            until: {
                let tried = shop.log.peers(since: cut)
                return tried.filter { $0 == real }.count >= 2 && tried.filter { $0 == clone.address }.count >= 2
            }, timeout: .seconds(30))
        #expect(eachTwice, "the wallet tried \(shop.log.peers(since: cut))")
        #expect(shop.client.state == .paymentPending)
        #expect(try shop.walletStore.receipts().isEmpty)

        // The clock is set right: the next turn of the real terminal answers the payment, within
        // two retries at the longest back-off (5 s).
        shop.walletDevice.clock.setSkew(.zero)
        let fixed = shop.world.simulation.now
        #expect(shop.world.run(until: { shop.client.state.isFinished }, timeout: .seconds(11)))
        #expect(shop.log.peers(since: cut).last == real)
        #expect(clone.messages == 0)
        #expect(shop.world.simulation.now - fixed <= .seconds(11))
        try shop.expectPaidOnce(pending)
    }
}

/// A real terminal, a wallet that keeps its pending requests and receipts in SQLite, and a log of
/// every address the wallet connects to.
private final class PendingShop: Sendable {
    let world: World
    let real: TerminalRig
    let walletDevice: SimulatedDevice
    let log: ConnectionLog
    let walletStore: WalletStore
    let store: SQLitePendingPaymentStore
    let client: PaymentClient
    let app: ScriptedWalletApp

    init(seed: UInt64) throws {
        world = try World(seed: seed)
        real = try world.terminal(
            "real", at: Position(x: 1.2, y: 0),
            service: TerminalServiceConfiguration(advertisingInterval: CloneRetryTests.realInterval))
        walletDevice = try world.simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: .origin))
        log = ConnectionLog(walletDevice)
        walletStore = try WalletStore(path: world.directory.appendingPathComponent("wallet.sqlite").path)
        store = SQLitePendingPaymentStore(store: walletStore)
        client = PaymentClient(radio: log, identity: WalletIdentity(), trustAnchors: world.anchors, pendingStore: store)
        try client.start()
        app = ScriptedWalletApp(client: client, decision: .accept(tip: 20))
    }

    /// The wallet confirms 10.00 + 0.20 and the link breaks as the receipt is sent (the 8th of 8
    /// frames at MTU 247): the terminal executed it, the wallet holds it as pending.
    func confirmAndLoseTheReceipt() throws -> PendingPayment {
        world.simulation.injectFaultOnNextLink(.cut, atFrame: 7)
        #expect(real.host.start(amount: euros(1000)))
        #expect(world.run(until: { self.client.state == .paymentPending }))
        let pending = try #require(client.pendingPayment)
        #expect(real.host.state == .completed)
        #expect(try real.ledger.executionCount(of: pending.paymentID) == 1)
        #expect(try walletStore.receipts().isEmpty)
        #expect(try store.all().map(\.paymentID) == [pending.paymentID])
        return pending
    }

    /// The cashier stops the finished sale and opens the next one; its advertisement.
    func openNextSession() throws -> HorizonAdvertisement {
        #expect(real.host.stop())
        #expect(real.host.start(amount: euros(100)))
        return HorizonAdvertisement(
            transactionType: .payment, sessionID: try #require(real.host.sessionID),
            terminalKeyID: try #require(real.service.terminalKeyID))
    }

    /// The pending payment was answered by the real terminal: the receipt is the wallet's and
    /// stored, nothing is pending, the ledger executed it once and nothing else.
    func expectPaidOnce(_ pending: PendingPayment) throws {
        #expect(client.state == .completed, "wallet ended with \(String(describing: client.error))")
        #expect(client.receipt?.paymentID == pending.paymentID)
        #expect(client.receipt?.total == euros(1020))
        #expect(try walletStore.receipts().map(\.paymentID) == [pending.paymentID.description])
        #expect(try store.all().isEmpty)
        #expect(try real.ledger.executionCount(of: pending.paymentID) == 1)
        #expect(try real.ledger.transactions().count == 1, "the next session was not paid")
        #expect(try real.ledger.merchantBalance() == euros(1020))
        // The wallet told the real terminal it stored the answer: the request's last journal step
        // once the acknowledgement has arrived.
        world.run(for: .seconds(1))
        let steps = try real.journal.history().filter { $0.id == pending.paymentID }.map(\.step)
        #expect(steps.last == .acknowledged)
    }
}

/// A device near the wallet that replays a terminal's advertisement and answers the handshake
/// with an identity of its own.
private final class CloneTerminal: Sendable {
    let device: SimulatedDevice
    private let counts = Mutex((handshakes: 0, messages: 0))
    private let links = Mutex<[SecureLink]>([])

    init(_ kind: CloneRetryTests.Clone, in shop: PendingShop, replaying advertisement: HorizonAdvertisement) throws {
        device = try shop.world.simulation.addDevice(
            name: "clone", configuration: DeviceConfiguration(position: Position(x: 0.1, y: 0)))
        let key = P256.Signing.PrivateKey()
        let issuer = kind == .unvouched ? P256.Signing.PrivateKey() : shop.world.anchorKey
        let identity = try TerminalIdentity(
            signingKey: key,
            credential: TerminalCredential.issue(
                by: issuer, merchantID: kind == .unvouched ? "m-real" : "m-clone", merchantName: "Café Horizon",
                terminalKey: key.publicKey, notBefore: World.wallClock - 60, expiresAt: World.wallClock + 86_400))
        device.setConnectionHandler { [self, device] link in
            counts.withLock { $0.handshakes += 1 }
            guard let messageLink = try? MessageLink(link: link, scheduler: device.scheduler) else {
                link.close()
                return
            }
            let secure = SecureLink.accept(
                over: messageLink, identity: identity,
                handler: SecureLinkHandler(
                    onEstablished: { _ in }, onMessage: { [self] _ in counts.withLock { $0.messages += 1 } },
                    onEnd: { _ in }))
            links.withLock { $0.append(secure) }
        }
        _ = try device.startAdvertising(advertisement.advertisingData(), interval: CloneRetryTests.cloneInterval)
    }

    var address: PeerAddress { device.address }
    /// Connections that started a handshake with the clone.
    var handshakes: Int { counts.withLock { $0.handshakes } }
    /// Messages a wallet sent the clone over a secure link (a wallet that trusted it).
    var messages: Int { counts.withLock { $0.messages } }
}

/// The wallet's radio, recording every address the wallet connects to and when.
private final class ConnectionLog: CentralRadio {
    let device: SimulatedDevice
    private let attempts = Mutex<[(at: Instant, peer: PeerAddress)]>([])

    init(_ device: SimulatedDevice) { self.device = device }

    var scheduler: any Scheduler { device.scheduler }
    var availability: AdapterAvailability { device.availability }

    func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) throws(RadioError) {
        try device.startScanning(handler)
    }

    func stopScanning() { device.stopScanning() }

    func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        let now = device.scheduler.now
        attempts.withLock { $0.append((now, peer)) }
        device.connect(to: peer, timeout: timeout, completion: completion)
    }

    /// The addresses connected to after `instant`, in order.
    func peers(since instant: Instant) -> [PeerAddress] {
        attempts.withLock { $0.filter { $0.at > instant }.map(\.peer) }
    }
}
