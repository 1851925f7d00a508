import HorizonCore
import HorizonProtocol
import HorizonRadio
import Synchronization

public enum BluetoothConflictObserverState: Sendable, Equatable, CustomStringConvertible {
    case stopped
    case noConflict
    /// Other terminals nearby advertise sessions: a wallet between them may not find a clear
    /// candidate, so the cashier should move apart or take turns.
    case conflict

    public var description: String {
        switch self {
        case .stopped: "stopped"
        case .noConflict: "no conflict"
        case .conflict: "conflict"
        }
    }
}

public struct ConflictObserverConfiguration: Sendable {
    /// Terminals heard at least this strongly count as nearby (unknown RSSI counts too).
    public var rssiThreshold: Int
    /// A terminal not heard for this long no longer counts.
    public var window: Duration
    public var evaluationInterval: Duration

    public init(
        rssiThreshold: Int = -80, window: Duration = .seconds(3), evaluationInterval: Duration = .milliseconds(500)
    ) {
        self.rssiThreshold = rssiThreshold
        self.window = window
        self.evaluationInterval = evaluationInterval
    }
}

/// Listens for other terminals advertising sessions nearby and reports the adapter's availability,
/// as the reference SDK's `BluetoothConflictObserver` does for its payment and redemption hosts.
///
/// The reference's synchronous API over `ConflictObserverDriver`, an actor on the radio's
/// scheduler: each command enters the scheduler's context (`performSynchronously`) and runs
/// there on the driver's state, which sightings and evaluations change on the same context.
public final class BluetoothConflictObserver: Sendable {
    public let scanner: SightingHub
    public let ownTerminalKeyID: TerminalKeyID?
    public let configuration: ConflictObserverConfiguration
    private let observable = ObservableState<BluetoothConflictObserverState>(.stopped)
    private let driver: ConflictObserverDriver

    public init(
        scanner: SightingHub, ownTerminalKeyID: TerminalKeyID?,
        configuration: ConflictObserverConfiguration = ConflictObserverConfiguration()
    ) {
        self.scanner = scanner
        self.ownTerminalKeyID = ownTerminalKeyID
        self.configuration = configuration
        driver = ConflictObserverDriver(
            scanner: scanner, ownTerminalKeyID: ownTerminalKeyID, configuration: configuration,
            observable: observable)
    }

    public var state: BluetoothConflictObserverState { observable.value }
    public var conflictObserverState: BluetoothConflictObserverState { observable.value }
    public func states() -> AsyncStream<BluetoothConflictObserverState> { observable.stream() }
    /// Other terminals heard within the window.
    public var conflictCount: Int { driver.heardCount.load(ordering: .relaxed) }
    /// The adapter's availability: powered, off, unauthorized, unsupported.
    public var availability: AdapterAvailability { scanner.radio.availability }

    /// Starts (or starts again, forgetting what was heard) observing. Runs on the radio's
    /// scheduler, where the evaluations run, as `stop` does.
    public func restart() throws(RadioError) {
        try scanner.radio.scheduler.performSynchronously { () throws(RadioError) in
            try driver.assumeIsolated { driver in Result { () throws(RadioError) in try driver.restart() } }.get()
        }
    }

    /// Stops observing. On the radio's scheduler, so no evaluation due meanwhile publishes a state
    /// after `.stopped`.
    public func stop() {
        scanner.radio.scheduler.performSynchronously { driver.assumeIsolated { $0.stop() } }
    }
}

/// The observer's state and its events, on the radio's scheduler: an actor whose executor is
/// that scheduler, entered with `assumeIsolated` from the commands (which hop there first), the
/// sightings and the evaluation timer (which arrive there).
private actor ConflictObserverDriver {
    let scanner: SightingHub
    let ownTerminalKeyID: TerminalKeyID?
    let configuration: ConflictObserverConfiguration
    let observable: ObservableState<BluetoothConflictObserverState>
    /// The terminals heard within the window, for readers on any thread.
    let heardCount = Atomic<Int>(0)

    private var lastHeard: [TerminalKeyID: Instant] = [:]
    private var subscription: Int?
    private var timer: ScheduledAction?

    nonisolated var unownedExecutor: UnownedSerialExecutor { scanner.radio.scheduler.asUnownedSerialExecutor() }

    init(
        scanner: SightingHub, ownTerminalKeyID: TerminalKeyID?, configuration: ConflictObserverConfiguration,
        observable: ObservableState<BluetoothConflictObserverState>
    ) {
        self.scanner = scanner
        self.ownTerminalKeyID = ownTerminalKeyID
        self.configuration = configuration
        self.observable = observable
    }

    func restart() throws(RadioError) {
        stop()
        subscription = scanner.subscribe { [weak self] sighting, advertisement in
            self?.assumeIsolated { $0.heard(sighting, advertisement) }
        }
        do throws(RadioError) {
            try scanner.start()
        } catch {
            stop()
            throw error
        }
        observable.set(.noConflict)
        scheduleEvaluation()
    }

    func stop() {
        if let subscription { scanner.unsubscribe(subscription) }
        timer?.cancel()
        lastHeard = [:]
        subscription = nil
        timer = nil
        heardCount.store(0, ordering: .relaxed)
        observable.set(.stopped)
    }

    private func heard(_ sighting: Sighting, _ advertisement: HorizonAdvertisement) {
        guard advertisement.terminalKeyID != ownTerminalKeyID,
            (sighting.rssi ?? 0) >= configuration.rssiThreshold
        else { return }
        lastHeard[advertisement.terminalKeyID] = sighting.receivedAt
        heardCount.store(lastHeard.count, ordering: .relaxed)
    }

    private func scheduleEvaluation() {
        timer = scanner.radio.scheduler.schedule(after: configuration.evaluationInterval) { [weak self] in
            self?.assumeIsolated { driver in
                guard driver.subscription != nil else { return }
                driver.evaluate()
                driver.scheduleEvaluation()
            }
        }
    }

    private func evaluate() {
        let now = scanner.radio.scheduler.now
        lastHeard = lastHeard.filter { now - $0.value <= configuration.window }
        heardCount.store(lastHeard.count, ordering: .relaxed)
        observable.set(lastHeard.isEmpty ? .noConflict : .conflict)
    }
}
