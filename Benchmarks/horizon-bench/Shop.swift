import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import Synchronization

/// Where the wallet keeps its pending payments during the benchmark.
enum WalletStoreKind: String, Codable, CaseIterable, Sendable {
    /// `SQLitePendingPaymentStore`, as `horizon-wallet` runs: the confirmation is stored (and
    /// synced) before it is sent, and removed when the receipt arrives.
    case sqlite
    /// `InMemoryPendingPaymentStore`, the library's default.
    case memory
}

/// How a shop is built.
struct ShopOptions {
    var seed: UInt64
    var pairCount: Int
    /// The link both sides ask for (the central's timing wins; the MTU is the smaller one).
    var link: LinkParameters
    /// Distance between neighbouring pairs, metres. At the default path loss a device hears
    /// nothing beyond about 45 m, so the default 500 m apart means separate shops, not one
    /// crowded hall (see Benchmarks/README.md).
    var spacing: Double
    /// Where ledgers and wallet stores go (SQLite files).
    var directory: URL
    var walletStore: WalletStoreKind
    /// Settle through a running server instead of each terminal's in-process ledger (one pair).
    var remote: RemoteSettlement? = nil
    /// Who settles when not through a server.
    var processor: ProcessorKind = .ledger
}

/// Who settles a shop's payments (`--processor`).
enum ProcessorKind: String, Codable, CaseIterable, Sendable {
    /// The terminal's in-process ledger (SQLite), as `horizon-terminal serve` runs it.
    case ledger
    /// `InstantProcessor`: no ledger at all.
    case instant
}

/// Approves every payment at once and keeps the results in memory: a payment's cost without
/// any ledger, so that the ledger's share can be told from the rest (roles, protocol, journal,
/// wallet store, radio). Not a processor to run a shop with: it checks nothing.
final class InstantProcessor: PaymentProcessor {
    private let results = Mutex<[PaymentID: SettlementResult]>([:])
    private let references = Atomic<UInt64>(0)

    func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
        let reference = references.add(1, ordering: .relaxed).newValue
        let result = SettlementResult(
            paymentID: request.paymentID, sessionID: request.sessionID, amount: request.amount, tip: request.tip,
            outcome: .approved(reference: reference, bonusPointsEarned: 0, bonusPointsBalance: 0), settledAt: time)
        return results.withLock { results in
            if let earlier = results[request.paymentID] { return earlier }
            results[request.paymentID] = result
            return result
        }
    }

    func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        results.withLock { $0[paymentID] }
    }
}

/// What a payment costs and carries, read off one pair after its payment finished.
struct PaymentRecord {
    /// Virtual time (the simulation's clock), milliseconds.
    let acceptanceToReceiptMilliseconds: Double
    let linkUpToReceiptMilliseconds: Double
    let startToReceiptMilliseconds: Double
    /// Real time the process spent between acceptance and receipt. The simulation's clock does
    /// not move while code runs, so this is the computing (and syncing) a real pair would add.
    let computeBetweenAcceptanceAndReceiptMilliseconds: Double
    let roundTripsFromAcceptance: Int
    let roundTripsWholeLink: Int
    let walletFrames: Int
    let terminalFrames: Int
    let walletBytes: Int
    let terminalBytes: Int
    let attMTU: Int
    /// Synced commits the payment made on each side's SQLite files (see `SyncedCommitCount`).
    var syncedCommits = SyncedCommitCount(terminalJournal: 0, wallet: nil, ledger: nil)

    var frames: Int { walletFrames + terminalFrames }
    var bytes: Int { walletBytes + terminalBytes }
}

/// Synced commits (`SyncedCommits`, counted by SQLite's WAL hook) one payment made on each
/// file, from the terminal starting it to both sides reset: what the durability rules cost.
struct SyncedCommitCount {
    let terminalJournal: Int
    /// nil when the wallet keeps its pending payments in memory (`--wallet-store memory`).
    let wallet: Int?
    /// The terminal's in-process ledger; nil when another process or nothing settles.
    let ledger: Int?
}

/// The files whose synced commits a pair's payment is charged with, and their counts at its start.
struct SyncedFiles {
    let journal: String
    let wallet: String?
    let ledger: String?

    func counts() -> SyncedCommitCount {
        SyncedCommitCount(
            terminalJournal: SyncedCommits.count(at: journal), wallet: wallet.map(SyncedCommits.count(at:)),
            ledger: ledger.map(SyncedCommits.count(at:)))
    }

    func since(_ start: SyncedCommitCount) -> SyncedCommitCount {
        let now = counts()
        return SyncedCommitCount(
            terminalJournal: now.terminalJournal - start.terminalJournal,
            wallet: now.wallet.map { $0 - (start.wallet ?? 0) },
            ledger: now.ledger.map { $0 - (start.ledger ?? 0) })
    }
}

/// A simulated shopping street: one trust anchor, `pairCount` terminals, each with its own
/// ledger and conflict observer (as `horizon-terminal serve` runs them), and one wallet 30 cm in
/// front of each, on one deterministic simulation. It is the set-up of the role tests
/// (`Tests/HorizonRolesTests/World.swift`), written for repeated payments: the same terminals
/// and wallets pay again and again, as in a shop.
final class Shop {
    static let wallClock: UnixTime = 1_800_000_000
    static let amount = Money.euros(1250)
    static let tip = Money.euros(150)

    let simulation: RadioSimulation
    let pairs: [Pair]
    let tally: Tally

    init(_ options: ShopOptions) throws {
        // A server's credentials and clock window are real time; a shop of its own has a fixed date.
        simulation = RadioSimulation(
            seed: options.seed,
            wallClockAtStart: options.remote == nil ? Self.wallClock : UnixTime(Date().timeIntervalSince1970))
        let anchor = P256.Signing.PrivateKey()
        guard options.remote == nil || options.pairCount == 1 else {
            throw BenchmarkError("a shop settling through a server has one pair (one activated terminal)")
        }
        let tally = Tally()
        self.tally = tally
        let simulation = simulation
        let columns = Int(Double(options.pairCount).squareRoot().rounded(.up))
        pairs = try (0..<options.pairCount).map { index in
            let origin = Position(
                x: Double(index % columns) * options.spacing, y: Double(index / columns) * options.spacing)
            return try Pair(
                index: index, at: origin, simulation: simulation, anchor: anchor, options: options, tally: tally)
        }
    }

    /// One payment on every pair at once, run to its end: both sides finished, the terminal's
    /// linger over and every link closed; then every pair is reset for the next payment.
    /// Throws if any payment did not complete.
    @discardableResult
    func payOnce() throws -> [PaymentRecord] {
        tally.reset()
        for pair in pairs { try pair.begin() }
        let finished = simulation.run(
            until: { self.tally.finishedSides == 2 * self.pairs.count }, timeout: .seconds(60))
        guard finished else {
            let stuck = pairs.filter { !$0.isFinished }.prefix(3).map(\.stateDescription)
            throw BenchmarkError("payments not finished after 60 s of virtual time: \(stuck.joined(separator: "; "))")
        }
        // The terminal keeps the link for `lingerAfterReceipt` (5 s); the close reaches the
        // wallet at the next connection event. Both are part of the payment's cost.
        simulation.run(for: PaymentHostConfiguration().lingerAfterReceipt + .seconds(1))
        var records: [PaymentRecord] = []
        records.reserveCapacity(pairs.count)
        for pair in pairs {
            records.append(try pair.finish())
        }
        return records
    }
}

/// Counts finished sides, so the run loop's stop condition costs the same for 1 or 100 pairs.
/// Every callback runs on the thread that calls `RadioSimulation.run`, one at a time.
final class Tally: @unchecked Sendable {
    private(set) var finishedSides = 0
    func sideFinished() { finishedSides += 1 }
    func reset() { finishedSides = 0 }
}

/// One terminal and the wallet in front of it.
final class Pair {

    /// The terminal's in-process ledger in sandbox mode, wallets starting rich enough for any
    /// number of payments (a billion euros). Opened on this (non-pool) thread.
    static func openLedger(at path: String) throws -> InProcessLedger {
        try ExternalWork.wait { () async -> Result<InProcessLedger, LedgerError> in
            do throws(LedgerError) {
                return .success(
                    try await InProcessLedger.open(
                        path: path,
                        configuration: InProcessLedgerConfiguration(
                            enrollment: .sandboxOnFirstContact(startingBalance: 100_000_000_000))))
            } catch {
                return .failure(error)
            }
        }.get()
    }
    let index: Int
    let simulation: RadioSimulation
    let terminalDevice: SimulatedDevice
    /// The in-process ledger, or the server's processor (`ShopOptions.remote`).
    let processor: any PaymentProcessor
    let service: TerminalRadioService
    let host: PaymentHost
    let conflicts: BluetoothConflictObserver
    let walletDevice: SimulatedDevice
    let client: PaymentClient
    let probe: Probe
    let syncedFiles: SyncedFiles
    private var syncedAtBegin = SyncedCommitCount(terminalJournal: 0, wallet: nil, ledger: nil)

    init(
        index: Int, at origin: Position, simulation: RadioSimulation, anchor: P256.Signing.PrivateKey,
        options: ShopOptions, tally: Tally
    ) throws {
        self.index = index
        self.simulation = simulation
        terminalDevice = try simulation.addDevice(
            name: "terminal-\(index)", configuration: DeviceConfiguration(position: origin, link: options.link))
        let identity: TerminalIdentity
        let trustAnchor: P256.Signing.PublicKey
        let ledgerPath: String?
        let walletIdentity: WalletIdentity
        if let remote = options.remote {
            // Activated with the server: its issuer's credential, its anchor, a registered wallet.
            identity = remote.enrolled.terminal
            trustAnchor = remote.enrolled.anchor
            walletIdentity = WalletIdentity(signingKey: remote.enrolled.walletKey)
            processor = remote.processor
            ledgerPath = nil
        } else {
            let key = P256.Signing.PrivateKey()
            identity = try TerminalIdentity(
                signingKey: key,
                credential: TerminalCredential.issue(
                    by: anchor, merchantID: "m-\(index)", merchantName: "Benchmark Café \(index)",
                    terminalKey: key.publicKey, notBefore: Shop.wallClock - 86_400,
                    expiresAt: Shop.wallClock + 365 * 86_400))
            trustAnchor = anchor.publicKey
            walletIdentity = WalletIdentity()
            switch options.processor {
            case .instant:
                processor = InstantProcessor()
                ledgerPath = nil
            case .ledger:
                // Wallets start rich enough for any number of payments (a billion euros).
                let path = options.directory.appendingPathComponent("ledger-\(options.seed)-\(index).sqlite").path
                processor = try Self.openLedger(at: path)
                ledgerPath = path
            }
        }
        let journalPath = options.directory.appendingPathComponent("journal-\(options.seed)-\(index).sqlite").path
        service = TerminalRadioService(
            radio: terminalDevice, identity: identity, processor: processor,
            journal: try SQLiteTerminalJournal(path: journalPath))
        host = PaymentHost(service: service, processor: processor)
        conflicts = BluetoothConflictObserver(
            scanner: SightingHub(radio: terminalDevice), ownTerminalKeyID: service.terminalKeyID)
        try conflicts.restart()

        walletDevice = try simulation.addDevice(
            name: "wallet-\(index)",
            configuration: DeviceConfiguration(position: Position(x: origin.x + 0.3, y: origin.y), link: options.link))
        let probe = Probe(simulation: simulation)
        self.probe = probe
        let pendingStore: any PendingPaymentStore
        let walletPath: String?
        switch options.walletStore {
        case .memory:
            pendingStore = InMemoryPendingPaymentStore()
            walletPath = nil
        case .sqlite:
            let path = options.directory.appendingPathComponent("wallet-\(options.seed)-\(index).sqlite").path
            pendingStore = SQLitePendingPaymentStore(store: try WalletStore(path: path))
            walletPath = path
        }
        syncedFiles = SyncedFiles(journal: journalPath, wallet: walletPath, ledger: ledgerPath)
        client = PaymentClient(
            radio: TappedCentralRadio(
                radio: walletDevice,
                linkOpened: { link in
                    probe.linkUp(link)
                    return link
                }),
            identity: walletIdentity, trustAnchors: [TrustAnchor(publicKey: trustAnchor)],
            pendingStore: pendingStore)
        Self.script(client, probe: probe, tally: tally)
        host.observeState { state in
            if state.isFinished { tally.sideFinished() }
        }
        try client.start()
    }

    /// A person who accepts at once with the tip (the library's `WalletAutopilot`, every step on
    /// the simulation's clock). The probe hears acceptance first, before the app acts on it.
    private static func script(_ client: PaymentClient, probe: Probe, tally: Tally) {
        _ = WalletAutopilot(client: client, hooks: WalletAutopilot.Hooks(accepted: { _ in probe.accepted() })) { _ in
            .pay(tip: Shop.tip)
        }
        client.observeState { state in
            guard state.isFinished else { return }
            probe.finished()
            tally.sideFinished()
        }
    }

    /// Starts this pair's payment.
    func begin() throws {
        probe.reset()
        syncedAtBegin = syncedFiles.counts()
        guard host.start(amount: Shop.amount, registerUser: RegisterUser(name: "Ana")) else {
            throw BenchmarkError("terminal \(index) did not start: \(host.humanizedError ?? "no reason given")")
        }
    }

    var isFinished: Bool { host.state.isFinished && client.state.isFinished }

    var stateDescription: String {
        "pair \(index): terminal \(host.state)\(host.humanizedError.map { " (\($0))" } ?? ""), wallet \(client.state)"
            + (client.humanizedError.map { " (\($0))" } ?? "")
    }

    /// Reads the finished payment's record, then resets both sides for the next one; its synced
    /// commits are counted after the reset, so that whatever the reset writes is the payment's too.
    func finish() throws -> PaymentRecord {
        let record = Result { try finishedRecord() }
        host.stop()
        client.restart()
        client.fusionTracker.manualConnectionDecider.restart()
        var finished = try record.get()
        finished.syncedCommits = syncedFiles.since(syncedAtBegin)
        return finished
    }

    private func finishedRecord() throws -> PaymentRecord {
        guard host.state == .completed, client.state == .completed, client.receipt != nil else {
            throw BenchmarkError(
                "\(stateDescription); terminal error: \(host.humanizedError ?? "none"), wallet error: \(client.humanizedError ?? "none")"
            )
        }
        guard service.connectionCount == 0 else {
            throw BenchmarkError("pair \(index): the terminal still holds \(service.connectionCount) link(s)")
        }
        return try probe.record()
    }
}

/// Timestamps and link traffic of one payment, taken by the wallet's callbacks. Every callback
/// runs on the thread that calls `RadioSimulation.run`, one at a time, so plain fields suffice.
final class Probe: @unchecked Sendable {
    let simulation: RadioSimulation
    private var startedAt = Instant.zero
    private var linkUpAt: Instant?
    private var endpoint: SimulatedLinkEndpoint?
    private var acceptedAt: Instant?
    private var acceptedWall: Int64 = 0
    private var turnsAtAcceptance = 0
    private var receiptAt: Instant?
    private var receiptWall: Int64 = 0
    /// The link's traffic as the receipt is taken. The wallet's acknowledgement, which it sends
    /// as it takes the receipt, is its last frame then: it is not part of acceptance → receipt.
    private var trafficAtReceipt: LinkTraffic?

    init(simulation: RadioSimulation) { self.simulation = simulation }

    func reset() {
        startedAt = simulation.now
        linkUpAt = nil
        endpoint = nil
        acceptedAt = nil
        receiptAt = nil
    }

    func linkUp(_ link: any ByteLink) {
        endpoint = link as? SimulatedLinkEndpoint
        linkUpAt = simulation.now
    }

    func accepted() {
        acceptedAt = simulation.now
        acceptedWall = Clocks.wall()
        turnsAtAcceptance = endpoint.map { simulation.traffic(on: $0).turns } ?? 0
    }

    func finished() {
        receiptAt = simulation.now
        receiptWall = Clocks.wall()
        trafficAtReceipt = endpoint.map { simulation.traffic(on: $0) }
    }

    func record() throws -> PaymentRecord {
        guard let endpoint, let linkUpAt, let acceptedAt, let receiptAt else {
            throw BenchmarkError("a payment finished without a link, an acceptance or a receipt")
        }
        let traffic = trafficAtReceipt ?? simulation.traffic(on: endpoint)
        // A wallet frame after the receipt's last frame is the acknowledgement: not a turn toward it.
        let turns = traffic.turns - (traffic.lastFrameWasFromCentral == true ? 1 : 0)
        return PaymentRecord(
            acceptanceToReceiptMilliseconds: (receiptAt - acceptedAt).milliseconds,
            linkUpToReceiptMilliseconds: (receiptAt - linkUpAt).milliseconds,
            startToReceiptMilliseconds: (receiptAt - startedAt).milliseconds,
            computeBetweenAcceptanceAndReceiptMilliseconds: Double(receiptWall - acceptedWall) / 1_000_000,
            // The wallet speaks first on a link and the terminal answers: two turns a round trip.
            roundTripsFromAcceptance: (turns - turnsAtAcceptance + 1) / 2,
            roundTripsWholeLink: (turns + 1) / 2,
            walletFrames: traffic.centralFrames, terminalFrames: traffic.peripheralFrames,
            walletBytes: traffic.centralBytes, terminalBytes: traffic.peripheralBytes, attMTU: traffic.attMTU)
    }
}

/// The wallet's radio, passed through, except that the benchmark hears of each connect and sees
/// (and may wrap) each link it opens: the roles keep their links to themselves. One tap serves
/// the simulated and the BlueZ radio.
final class TappedCentralRadio: CentralRadio {
    let radio: any CentralRadio
    let connectRequested: @Sendable () -> Void
    let linkOpened: @Sendable (any ByteLink) -> any ByteLink
    let sighted: @Sendable (Sighting) -> Void

    init(
        radio: any CentralRadio, connectRequested: @escaping @Sendable () -> Void = {},
        sighted: @escaping @Sendable (Sighting) -> Void = { _ in },
        linkOpened: @escaping @Sendable (any ByteLink) -> any ByteLink
    ) {
        self.radio = radio
        self.connectRequested = connectRequested
        self.sighted = sighted
        self.linkOpened = linkOpened
    }

    var scheduler: any Scheduler { radio.scheduler }
    var availability: AdapterAvailability { radio.availability }

    func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) async throws(RadioError) {
        try await radio.startScanning { [sighted] sighting in
            sighted(sighting)
            handler(sighting)
        }
    }

    func stopScanning() { radio.stopScanning() }

    func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        connectRequested()
        radio.connect(to: peer, timeout: timeout) { [linkOpened] result in
            completion(result.map(linkOpened))
        }
    }
}

extension Money {
    /// Cents of euros; the amounts here are constants well inside `Money`'s range.
    static func euros(_ cents: Int64) -> Money { (try? Money(minorUnits: cents, currency: .eur)) ?? .zero(.eur) }
}
