import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSettlement
import HorizonSimulatedRadio
import HorizonStores
import Synchronization

// The seam that lets the fault simulation crash a role's process.
//
// A process here is one run of a terminal's or a wallet's program: the role objects, their SQLite
// connections and their radio. It reaches the radio only through a `ProcessRadio`, and the
// durable stores only through the journaled wrappers below. Crashing a process closes that gate at
// once, in the middle of whatever it was doing: its timers and radio callbacks stop firing, its
// links are torn down, its advertising and scanning stop, and its stores refuse further writes. What
// it wrote before stays on disk, which is all a restarted process finds (the files reopened by new
// objects), exactly as after a real crash.
//
// Every durable write is reported as a `DurableStep`, and the simulation may crash the process right
// after it ("crash after journal step N"): each step of the terminal's journal, the ledger's
// commit, and the wallet's writes.

/// A write that has reached disk, after which the process may crash.
enum DurableStep: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The wallet stored its signed request before sending it.
    case walletStoredRequest
    /// The wallet removed a request it got a final answer for.
    case walletResolvedRequest
    /// The wallet app stored a receipt.
    case walletStoredReceipt
    /// The terminal's ledger committed a payment or redemption (before the receipt leaves).
    case terminalExecuted
    /// The terminal's journal recorded a step.
    case terminalJournal(JournalStep)

    var description: String {
        switch self {
        case .walletStoredRequest: "wallet stored request"
        case .walletResolvedRequest: "wallet resolved request"
        case .walletStoredReceipt: "wallet stored receipt"
        case .terminalExecuted: "terminal executed"
        case .terminalJournal(let step): "terminal journal \(step)"
        }
    }
}

/// Why a store refused: its process is gone.
struct ProcessCrashed: Error, CustomStringConvertible {
    var description: String { "the process has crashed" }
}

/// One run of a program. Alive until `crash()`; then every gate it owns is shut.
final class SimulatedProcess: Sendable {
    let name: String
    let generation: Int
    private struct State {
        var alive = true
        var onDurableStep: (@Sendable (DurableStep) -> Void)?
        var teardown: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    init(name: String, generation: Int) {
        self.name = name
        self.generation = generation
    }

    var isAlive: Bool { state.withLock { $0.alive } }

    /// Called after each durable write, while the process is still alive: the place to crash it.
    func setDurableStepHandler(_ handler: @escaping @Sendable (DurableStep) -> Void) {
        state.withLock { $0.onDurableStep = handler }
    }

    /// Registers what a crash tears down (links, advertising, the scan).
    func onCrash(_ action: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            guard state.alive else { return true }
            state.teardown.append(action)
            return false
        }
        if runNow { action() }
    }

    func reportDurableStep(_ step: DurableStep) {
        guard let handler = state.withLock({ $0.alive ? $0.onDurableStep : nil }) else { return }
        handler(step)
    }

    /// Kills the process: from now on nothing it does reaches the radio or the disk.
    func crash() {
        let teardown = state.withLock { state -> [@Sendable () -> Void] in
            guard state.alive else { return [] }
            state.alive = false
            defer { state.teardown = [] }
            return state.teardown
        }
        for action in teardown { action() }
    }

    /// Runs `write` if alive, then reports `step` (which may crash the process). Throws if the
    /// process is dead, so a dead program's late writes never reach the files.
    func durable<T>(_ step: DurableStep, _ write: () throws -> T) throws -> T {
        guard isAlive else { throw ProcessCrashed() }
        let result = try write()
        reportDurableStep(step)
        return result
    }
}

/// A process's view of the device's clock: the device's time and skewed wall clock, with timers
/// that die with the process.
final class ProcessScheduler: Scheduler {
    let clock: DeviceClock
    let process: SimulatedProcess

    init(clock: DeviceClock, process: SimulatedProcess) {
        self.clock = clock
        self.process = process
    }

    var now: Instant { clock.now }
    var wallClock: UnixTime { clock.wallClock }

    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let process = process
        return clock.schedule(after: delay) {
            if process.isAlive { action() }
        }
    }
}

/// The device's radio as one process sees it: everything passes through while the process lives.
final class ProcessRadio: PeripheralRadio, CentralRadio {
    let device: SimulatedDevice
    let process: SimulatedProcess
    let processScheduler: ProcessScheduler

    init(device: SimulatedDevice, process: SimulatedProcess) {
        self.device = device
        self.process = process
        processScheduler = ProcessScheduler(clock: device.clock, process: process)
    }

    var scheduler: any Scheduler { processScheduler }
    var availability: AdapterAvailability { process.isAlive ? device.availability : .poweredOff }

    func startAdvertising(_ advertisingData: [UInt8], interval: Duration) throws(RadioError) -> any AdvertisingSet {
        guard process.isAlive else { throw .adapterUnavailable(.poweredOff) }
        let set = try device.startAdvertising(advertisingData, interval: interval)
        process.onCrash { set.stop() }
        return ProcessAdvertisingSet(set: set, process: process)
    }

    func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {
        guard process.isAlive else { return }
        let process = process
        device.setConnectionHandler { link in
            guard process.isAlive else {
                link.close()
                return
            }
            handler(ProcessLink(link: link, process: process))
        }
    }

    func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) throws(RadioError) {
        guard process.isAlive else { throw .adapterUnavailable(.poweredOff) }
        let process = process
        try device.startScanning { sighting in
            if process.isAlive { handler(sighting) }
        }
        let device = device
        process.onCrash { device.stopScanning() }
    }

    func stopScanning() {
        // A dead process must not stop the scan of the run that replaced it.
        if process.isAlive { device.stopScanning() }
    }

    func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        guard process.isAlive else { return }
        let process = process
        device.connect(to: peer, timeout: timeout) { result in
            guard process.isAlive else {
                if case .success(let link) = result { link.close() }
                return
            }
            completion(result.map { ProcessLink(link: $0, process: process) })
        }
    }
}

final class ProcessAdvertisingSet: AdvertisingSet {
    let set: any AdvertisingSet
    let process: SimulatedProcess

    init(set: any AdvertisingSet, process: SimulatedProcess) {
        self.set = set
        self.process = process
    }

    func stop() { if process.isAlive { set.stop() } }
}

/// A link owned by a process: when the process crashes the operating system closes it, and the
/// dead program's handlers hear nothing more.
final class ProcessLink: ByteLink {
    let link: any ByteLink
    let process: SimulatedProcess

    init(link: any ByteLink, process: SimulatedProcess) {
        self.link = link
        self.process = process
        process.onCrash { [link] in link.close() }
    }

    var peer: PeerAddress { link.peer }
    var attMTU: Int { link.attMTU }

    func setHandler(_ handler: ByteLinkHandler) {
        let process = process
        link.setHandler(
            ByteLinkHandler(
                onReceive: { payload in if process.isAlive { handler.onReceive(payload) } },
                onClose: { reason in if process.isAlive { handler.onClose(reason) } }))
    }

    func send(_ payload: [UInt8]) throws(RadioError) {
        guard process.isAlive else { throw .linkClosed }
        try link.send(payload)
    }

    func close() { if process.isAlive { link.close() } }
}

/// The ledger as a terminal process reaches it: each execution is a durable step.
final class JournaledLedger: PaymentProcessor, RedemptionProcessor {
    let ledger: BlockingLedger
    let process: SimulatedProcess

    init(ledger: BlockingLedger, process: SimulatedProcess) {
        self.ledger = ledger
        self.process = process
    }

    func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
        guard process.isAlive else { throw .storage("the terminal process has crashed") }
        let result = try await ledger.settle(request, at: time)
        process.reportDurableStep(.terminalExecuted)
        return result
    }

    func redeem(_ request: RedemptionRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
        guard process.isAlive else { throw .storage("the terminal process has crashed") }
        let result = try await ledger.redeem(request, at: time)
        process.reportDurableStep(.terminalExecuted)
        return result
    }

    func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        guard process.isAlive else { throw .storage("the terminal process has crashed") }
        return try await ledger.result(for: paymentID)
    }
}

/// The terminal's journal as a terminal process reaches it: each write is a durable step.
final class ProcessJournal: TerminalJournal {
    let journal: SQLiteTerminalJournal
    let process: SimulatedProcess

    init(journal: SQLiteTerminalJournal, process: SimulatedProcess) {
        self.journal = journal
        self.process = process
    }

    func write(_ writes: [JournalWrite], at time: UnixTime) throws(JournalError) {
        guard process.isAlive else { throw JournalError("the terminal process has crashed") }
        try journal.write(writes, at: time)
        for write in writes { process.reportDurableStep(.terminalJournal(write.step)) }
    }

    func record(for id: PaymentID) throws(JournalError) -> JournalRecord? {
        guard process.isAlive else { throw JournalError("the terminal process has crashed") }
        return try journal.record(for: id)
    }

    func unsettled() throws(JournalError) -> [JournalRecord] {
        guard process.isAlive else { throw JournalError("the terminal process has crashed") }
        return try journal.unsettled()
    }

    func unreadable() throws(JournalError) -> [UnreadableRequest] {
        guard process.isAlive else { throw JournalError("the terminal process has crashed") }
        return try journal.unreadable()
    }
}

/// The wallet's pending requests as a wallet process reaches them: saving and resolving are
/// durable steps, and every request signed is told to the simulation's bookkeeping.
final class JournaledPendingStore: PendingPaymentStore {
    let store: SQLitePendingPaymentStore
    let process: SimulatedProcess
    let onSave: @Sendable (PendingPayment) -> Void

    init(
        store: SQLitePendingPaymentStore, process: SimulatedProcess,
        onSave: @escaping @Sendable (PendingPayment) -> Void
    ) {
        self.store = store
        self.process = process
        self.onSave = onSave
    }

    func save(_ payment: PendingPayment) throws {
        guard process.isAlive else { throw ProcessCrashed() }
        try store.save(payment)
        onSave(payment)
        process.reportDurableStep(.walletStoredRequest)
    }

    func remove(_ paymentID: PaymentID) throws {
        try process.durable(.walletResolvedRequest) { try store.remove(paymentID) }
    }

    func resolve(_ paymentID: PaymentID, receipt: PaymentReceipt?) throws {
        try process.durable(.walletResolvedRequest) { try store.resolve(paymentID, receipt: receipt) }
    }

    func all() throws -> [PendingPayment] {
        guard process.isAlive else { throw ProcessCrashed() }
        return try store.all()
    }
}
