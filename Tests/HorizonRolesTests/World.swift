import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Logging
import Synchronization

/// A simulated shop: one trust anchor, terminals with their own ledgers, wallets that trust the
/// anchor. Everything runs on one seeded simulation.
final class World: @unchecked Sendable {
    static let wallClock: UnixTime = 1_800_000_000
    let simulation: RadioSimulation
    let anchorKey = P256.Signing.PrivateKey()
    let directory: URL
    /// Every database a terminal of this world opened, closed with the world (the simulation's
    /// tasks may hold a terminal for a while after the test).
    private let opened = Mutex<(ledgers: [BlockingLedger], journals: [SQLiteTerminalJournal])>(([], []))

    init(seed: UInt64 = 7, pathLoss: PathLossModel = PathLossModel()) throws {
        simulation = RadioSimulation(seed: seed, pathLoss: pathLoss, wallClockAtStart: Self.wallClock)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("horizon-roles-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
        let (ledgers, journals) = opened.withLock { $0 }
        for journal in journals { journal.database.close() }
        Task { for ledger in ledgers { await ledger.inProcess.close() } }
    }

    var anchors: [TrustAnchor] { [TrustAnchor(publicKey: anchorKey.publicKey)] }

    func terminal(
        _ name: String = "terminal", at position: Position = .origin,
        ledger: InProcessLedgerConfiguration = InProcessLedgerConfiguration(),
        host: PaymentHostConfiguration = PaymentHostConfiguration(), link: LinkParameters = LinkParameters(),
        merchantName: String = "Café Horizon", label: String = "Till 1",
        radio: (any PeripheralRadio & CentralRadio)? = nil,
        service serviceConfiguration: TerminalServiceConfiguration = TerminalServiceConfiguration(),
        logger: Logger = .silent
    ) throws -> TerminalRig {
        let device: any PeripheralRadio & CentralRadio =
            try radio
            ?? simulation.addDevice(name: name, configuration: DeviceConfiguration(position: position, link: link))
        let key = P256.Signing.PrivateKey()
        let identity = try TerminalIdentity(
            signingKey: key,
            credential: TerminalCredential.issue(
                by: anchorKey, merchantID: "m-\(name)", merchantName: merchantName, terminalLabel: label,
                terminalKey: key.publicKey,
                notBefore: Self.wallClock - 86_400 * 365 * 5, expiresAt: Self.wallClock + 86_400 * 30))
        let ledger = try BlockingLedger(
            path: directory.appendingPathComponent("\(name).sqlite").path, configuration: ledger)
        let journal = try SQLiteTerminalJournal(path: directory.appendingPathComponent("\(name)-journal.sqlite").path)
        opened.withLock {
            $0.ledgers.append(ledger)
            $0.journals.append(journal)
        }
        let service = TerminalRadioService(
            radio: device, identity: identity, processor: ledger, journal: journal, configuration: serviceConfiguration,
            logger: logger)
        let paymentHost = PaymentHost(service: service, processor: ledger, configuration: host)
        let observer = BluetoothConflictObserver(
            scanner: SightingHub(radio: device), ownTerminalKeyID: service.terminalKeyID)
        return TerminalRig(
            radio: device, identity: identity, ledger: ledger, journal: journal, service: service, host: paymentHost,
            conflicts: observer
        )
    }

    func wallet(
        _ name: String = "wallet", at position: Position = Position(x: 0.3, y: 0),
        link: LinkParameters = LinkParameters(),
        configuration: PaymentClientConfiguration = PaymentClientConfiguration(), reportsRSSI: Bool = true,
        anchors: [TrustAnchor]? = nil
    ) throws -> WalletRig {
        let device = try simulation.addDevice(
            name: name, configuration: DeviceConfiguration(position: position, link: link, reportsRSSI: reportsRSSI))
        let identity = WalletIdentity()
        let client = PaymentClient(
            radio: device, identity: identity, trustAnchors: anchors ?? self.anchors, configuration: configuration)
        try client.start()
        return WalletRig(device: device, identity: identity, client: client)
    }

    /// Runs until `condition` holds; false after `timeout` of virtual time.
    @discardableResult
    func run(until condition: () -> Bool, timeout: Duration = .seconds(30)) -> Bool {
        simulation.run(until: condition, timeout: timeout)
    }

    func run(for duration: Duration) { simulation.run(for: duration) }
}

struct TerminalRig {
    let radio: any PeripheralRadio & CentralRadio
    /// The in-process simulated device, for tests that move or switch off the terminal.
    var device: SimulatedDevice {
        guard let device = radio as? SimulatedDevice else { preconditionFailure("this terminal runs on another radio") }
        return device
    }
    let identity: TerminalIdentity
    let ledger: BlockingLedger
    let journal: SQLiteTerminalJournal
    let service: TerminalRadioService
    let host: PaymentHost
    let conflicts: BluetoothConflictObserver
}

struct WalletRig {
    let device: SimulatedDevice
    let identity: WalletIdentity
    let client: PaymentClient

    var decider: ManualConnectionDecider { client.fusionTracker.manualConnectionDecider }
}

/// The reference app's wallet screen, scripted: the library's `WalletAutopilot` answering every
/// offer the same way, every step on the simulation's clock.
final class ScriptedWalletApp: Sendable {
    enum Decision: Sendable {
        case accept(tip: Int64)
        case decline, ignore
    }
    let client: PaymentClient
    let decision: Decision
    let autopilot: WalletAutopilot

    convenience init(_ wallet: WalletRig, decision: Decision) {
        self.init(client: wallet.client, decision: decision)
    }

    init(client: PaymentClient, decision: Decision) {
        self.client = client
        self.decision = decision
        autopilot = WalletAutopilot(client: client) { offer in
            switch decision {
            case .accept(let tip):
                guard let money = try? Money(minorUnits: tip, currency: offer.amount.currency) else { return .decline }
                return .pay(tip: money)
            case .decline: return .decline
            case .ignore: return .ignore
            }
        }
    }
}
