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
import Synchronization
import Testing

/// One terminal and one wallet 30 cm apart, the wallet's pending payments in a SQLite store, and an
/// app that accepts every offer.
final class PaymentRig: @unchecked Sendable {
    let simulation: RadioSimulation
    let directory: URL
    let ledger: BlockingLedger
    let host: PaymentHost
    let client: PaymentClient
    var autopilot: WalletAutopilot?
    let walletIdentity = WalletIdentity()
    let storePath: String

    init(seed: UInt64, recordsTrace: Bool = false, pendingStore: (String) throws -> any PendingPaymentStore) throws {
        simulation = RadioSimulation(
            seed: seed, wallClockAtStart: FaultSimulation.wallClock, recordsTrace: recordsTrace)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "horizon-regression-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        storePath = directory.appendingPathComponent("wallet.sqlite").path
        let anchor = P256.Signing.PrivateKey()
        let key = P256.Signing.PrivateKey()
        let identity = try TerminalIdentity(
            signingKey: key,
            credential: .issue(
                by: anchor, merchantID: "m-1", merchantName: "Regression Café", terminalKey: key.publicKey,
                notBefore: FaultSimulation.wallClock - 60, expiresAt: FaultSimulation.wallClock + 86_400))
        ledger = try BlockingLedger(
            path: directory.appendingPathComponent("ledger.sqlite").path,
            configuration: FaultSimulation.ledgerConfiguration)
        let service = TerminalRadioService(
            radio: try simulation.addDevice(name: "terminal"), identity: identity, processor: ledger,
            journal: try SQLiteTerminalJournal(path: directory.appendingPathComponent("journal.sqlite").path))
        host = PaymentHost(service: service, processor: ledger)
        client = PaymentClient(
            radio: try simulation.addDevice(
                name: "wallet", configuration: DeviceConfiguration(position: Position(x: 0.3, y: 0))),
            identity: walletIdentity, trustAnchors: [TrustAnchor(publicKey: anchor.publicKey)],
            pendingStore: try pendingStore(storePath))
        autopilot = WalletAutopilot(client: client) { _ in .pay(tip: euros(150)) }
        try client.start()
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// Forwards to a real store and, each time a pending payment ends, reads the wallet's file afresh:
/// what a crash at that very moment would leave behind.
final class SnapshottingStore: PendingPaymentStore {
    struct Snapshot: Sendable {
        let pending: [[UInt8]]
        let receipts: [StoredReceipt]
    }

    let inner: SQLitePendingPaymentStore
    let path: String
    let snapshots = Mutex<[Snapshot]>([])

    init(path: String) throws {
        self.path = path
        inner = SQLitePendingPaymentStore(store: try WalletStore(path: path))
    }

    func save(_ payment: PendingPayment) throws { try inner.save(payment) }
    func all() throws -> [PendingPayment] { try inner.all() }

    func remove(_ paymentID: PaymentID) throws {
        try inner.remove(paymentID)
        try snapshot()
    }

    func resolve(_ paymentID: PaymentID, receipt: PaymentReceipt?) throws {
        try inner.resolve(paymentID, receipt: receipt)
        try snapshot()
    }

    private func snapshot() throws {
        let store = try WalletStore(path: path)
        let snapshot = Snapshot(pending: try store.pending().map(\.paymentID), receipts: try store.receipts())
        snapshots.withLock { $0.append(snapshot) }
    }
}

/// Bugs the fault simulation found, each pinned down by one focused case.
@Suite("Fault simulation regressions", .offTheCooperativePool)
struct RegressionTests {
    /// Seeds 9 and 10 of the CI set: a wallet program that ended right after its pending payment
    /// was removed, before the app stored the receipt, kept no record of a payment that was
    /// charged. The receipt must be on file no later than the pending request leaves it.
    @Test func aChargedPaymentIsOnTheWalletsFileTheMomentItsPendingRequestEnds() throws {
        var store: SnapshottingStore?
        let rig = try PaymentRig(seed: 41) { path in
            let snapshotting = try SnapshottingStore(path: path)
            store = snapshotting
            return snapshotting
        }
        try rig.ledger.setBalance(100_00, for: rig.walletIdentity.publicKey)
        #expect(rig.host.start(amount: euros(1_250)))
        #expect(rig.simulation.run(until: { rig.client.state.isFinished }, timeout: .seconds(30)))
        let receipt = try #require(rig.client.receipt)
        let snapshots = try #require(store).snapshots.withLock { $0 }
        #expect(snapshots.count == 1)
        let atResolution = try #require(snapshots.first)
        #expect(atResolution.pending.isEmpty)
        #expect(atResolution.receipts.map(\.paymentID) == [receipt.paymentID.description])
        #expect(atResolution.receipts.first?.amountMinorUnits == 1_250)
        #expect(atResolution.receipts.first?.tipMinorUnits == 150)
        #expect(try rig.ledger.executionCount(of: receipt.paymentID) == 1)
    }

    /// A declined payment leaves no receipt, and its pending request goes.
    @Test func aDeclinedPaymentLeavesNoReceiptAndNoPendingRequest() throws {
        var store: SnapshottingStore?
        let rig = try PaymentRig(seed: 42) { path in
            let snapshotting = try SnapshottingStore(path: path)
            store = snapshotting
            return snapshotting
        }
        try rig.ledger.setBalance(5_00, for: rig.walletIdentity.publicKey)
        #expect(rig.host.start(amount: euros(1_250)))
        #expect(rig.simulation.run(until: { rig.client.state.isFinished }, timeout: .seconds(30)))
        #expect(
            rig.client.error
                == .declined(code: .insufficientFunds, reason: "the wallet's balance does not cover 14.00 EUR"))
        let snapshots = try #require(store).snapshots.withLock { $0 }
        let atResolution = try #require(snapshots.first)
        #expect(atResolution.pending.isEmpty)
        #expect(atResolution.receipts.isEmpty)
    }

    /// Seed 8 of the CI set: the wallet's Hello was dropped on the air, the terminal never sent an
    /// offer, and the wallet stayed in `fetchingOffer` for the rest of the run (nothing bounded
    /// the wait, and the idle link stayed up). It must give the link up and may try again.
    @Test func aWalletWhoseHelloIsLostGivesUpAndTriesAgain() throws {
        let rig = try PaymentRig(seed: 43, recordsTrace: true) { path in
            SQLitePendingPaymentStore(store: try WalletStore(path: path))
        }
        try rig.ledger.setBalance(100_00, for: rig.walletIdentity.publicKey)
        // At MTU 247 the handshake takes frames 0 (ClientHello) to 2 (ServerHello); 3 is the Hello.
        rig.simulation.injectFaultOnNextLink(.drop, atFrame: 3)
        #expect(rig.host.start(amount: euros(700)))
        let finished = rig.simulation.run(until: { rig.client.state.isFinished }, timeout: .seconds(60))
        #expect(finished, "the wallet is still \(rig.client.state)")
        let dropped = rig.simulation.trace.first { $0.contains("fault=drop") }
        #expect(dropped?.contains(" wallet ") == true, "the dropped frame: \(dropped ?? "none")")
        #expect(rig.client.error == .connectionLost)
        #expect(try rig.ledger.transactions().isEmpty)
        // Nothing was signed, so the same session is offered again and the payment goes through.
        rig.client.restart()
        rig.client.fusionTracker.manualConnectionDecider.restart()
        #expect(rig.simulation.run(until: { rig.client.state.isFinished }, timeout: .seconds(60)))
        #expect(rig.client.state == .completed)
        #expect(rig.host.state == .completed)
    }
}
