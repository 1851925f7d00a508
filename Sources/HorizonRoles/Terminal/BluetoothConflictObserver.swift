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
public final class BluetoothConflictObserver: Sendable {
    public let scanner: SightingHub
    public let ownTerminalKeyID: TerminalKeyID?
    public let configuration: ConflictObserverConfiguration
    private let observable = ObservableState<BluetoothConflictObserverState>(.stopped)

    private struct State {
        var lastHeard: [TerminalKeyID: Instant] = [:]
        var subscription: Int?
        var timer: ScheduledAction?
    }

    private let guarded = Mutex(State())

    public init(
        scanner: SightingHub, ownTerminalKeyID: TerminalKeyID?,
        configuration: ConflictObserverConfiguration = ConflictObserverConfiguration()
    ) {
        self.scanner = scanner
        self.ownTerminalKeyID = ownTerminalKeyID
        self.configuration = configuration
    }

    public var state: BluetoothConflictObserverState { observable.value }
    public var conflictObserverState: BluetoothConflictObserverState { observable.value }
    public func states() -> AsyncStream<BluetoothConflictObserverState> { observable.stream() }
    /// Other terminals heard within the window.
    public var conflictCount: Int { guarded.withLock { $0.lastHeard.count } }
    /// The adapter's availability: powered, off, unauthorized, unsupported.
    public var availability: AdapterAvailability { scanner.radio.availability }

    /// Starts (or starts again, forgetting what was heard) observing. Runs on the radio's
    /// scheduler, where the evaluations run, as `stop` does.
    public func restart() throws(RadioError) {
        try scanner.radio.scheduler.performSynchronously { () throws(RadioError) in
            stop()
            let id = scanner.subscribe { [weak self] sighting, advertisement in self?.heard(sighting, advertisement) }
            guarded.withLock { $0.subscription = id }
            do throws(RadioError) {
                try scanner.start()
            } catch {
                stop()
                throw error
            }
            observable.set(.noConflict)
            scheduleEvaluation()
        }
    }

    /// Stops observing. On the radio's scheduler, so no evaluation due meanwhile publishes a state
    /// after `.stopped`.
    public func stop() {
        scanner.radio.scheduler.performSynchronously {
            let (subscription, timer) = guarded.withLock { state in
                defer { state = State() }
                return (state.subscription, state.timer)
            }
            if let subscription { scanner.unsubscribe(subscription) }
            timer?.cancel()
            observable.set(.stopped)
        }
    }

    private func heard(_ sighting: Sighting, _ advertisement: HorizonAdvertisement) {
        guard advertisement.terminalKeyID != ownTerminalKeyID,
            (sighting.rssi ?? 0) >= configuration.rssiThreshold
        else { return }
        guarded.withLock { $0.lastHeard[advertisement.terminalKeyID] = sighting.receivedAt }
    }

    private func scheduleEvaluation() {
        let timer = scanner.radio.scheduler.schedule(after: configuration.evaluationInterval) { [weak self] in
            guard let self, self.guarded.withLock({ $0.subscription != nil }) else { return }
            self.evaluate()
            self.scheduleEvaluation()
        }
        guarded.withLock { $0.timer = timer }
    }

    private func evaluate() {
        let now = scanner.radio.scheduler.now
        let count = guarded.withLock { state in
            state.lastHeard = state.lastHeard.filter { now - $0.value <= configuration.window }
            return state.lastHeard.count
        }
        observable.set(count > 0 ? .conflict : .noConflict)
    }
}
