import HorizonCore
import HorizonProtocol
import HorizonRadio
import Synchronization

/// What an advertisement says about a terminal's session.
public struct PeripheralMetaData: Sendable, Equatable, Hashable {
    public let address: PeerAddress
    public let transactionType: TransactionType
    public let sessionID: SessionID
    public let terminalKeyID: TerminalKeyID

    /// The session id as the reference SDK exposes it (`additionalIdentifier`).
    public var additionalIdentifier: String { String(sessionID.rawValue) }
}

/// One terminal session the wallet hears, with its smoothed signal strength.
public struct PeripheralTracking: Sendable, Equatable {
    public let peripheralMetaData: PeripheralMetaData
    /// Exponentially smoothed RSSI in dBm; nil when the radio reports none.
    public internal(set) var smoothedRSSI: Double?
    public internal(set) var lastRSSI: Int?
    public internal(set) var sightings: Int
    public let firstSeen: Instant
    public internal(set) var lastSeen: Instant

    /// Which terminal session this is (an address advertising a session): the same key is the
    /// same candidate, whatever its RSSI does.
    public var key: TrackingKey {
        TrackingKey(address: peripheralMetaData.address, sessionID: peripheralMetaData.sessionID)
    }
}

/// A terminal session as heard from one address.
public struct TrackingKey: Hashable, Sendable {
    public let address: PeerAddress
    public let sessionID: SessionID
}

/// Shares one radio scan among every tracker of a wallet (payment and redemptions) and the
/// terminal's conflict observer: a radio delivers sightings to one handler only.
public final class SightingHub: Sendable {
    public let radio: any CentralRadio
    private let subscribers = Mutex<[Int: @Sendable (Sighting, HorizonAdvertisement) -> Void]>([:])
    private let nextID = Mutex(0)
    private let scanning = Mutex(false)

    public init(radio: any CentralRadio) { self.radio = radio }

    /// Starts the radio scan if it is not running. On the radio's scheduler, as `stop`: a start
    /// and a stop from two threads cannot cross between the flag and the radio.
    public func start() throws(RadioError) {
        try radio.scheduler.performSynchronously { () throws(RadioError) in
            let alreadyScanning = scanning.withLock { scanning in
                defer { scanning = true }
                return scanning
            }
            guard !alreadyScanning else { return }
            do throws(RadioError) {
                try radio.startScanning { [weak self] sighting in self?.deliver(sighting) }
            } catch {
                scanning.withLock { $0 = false }
                throw error
            }
        }
    }

    public func stop() {
        radio.scheduler.performSynchronously {
            scanning.withLock { $0 = false }
            radio.stopScanning()
        }
    }

    @discardableResult
    func subscribe(_ handler: @escaping @Sendable (Sighting, HorizonAdvertisement) -> Void) -> Int {
        let id = nextID.withLock { id in
            defer { id += 1 }
            return id
        }
        subscribers.withLock { $0[id] = handler }
        return id
    }

    func unsubscribe(_ id: Int) { _ = subscribers.withLock { $0.removeValue(forKey: id) } }

    private func deliver(_ sighting: Sighting) {
        // Foreign and malformed advertisements are everyday radio noise: ignored without a word.
        guard case .horizon(let advertisement) = HorizonAdvertisement.parse(sighting.advertisingData) else { return }
        let handlers = subscribers.withLock { $0.sorted { $0.key < $1.key }.map(\.value) }
        for handler in handlers { handler(sighting, advertisement) }
    }
}

public struct FusionTrackerConfiguration: Sendable {
    /// Weight of a new reading in the smoothed RSSI (exponential moving average).
    public var smoothingFactor: Double
    /// A terminal not heard for this long is dropped (and a candidate withdrawn).
    public var fadeTimeout: Duration
    /// Terminals weaker than this are not offered: proximity payment means close.
    public var minimumRSSI: Double
    /// How much stronger the nearest terminal must be than the next to be a clear candidate,
    /// and than the current candidate to replace it (hysteresis).
    public var clearMargin: Double
    /// Sightings needed before a terminal may be offered, so one lucky reading does not count.
    public var minimumSightings: Int
    public var evaluationInterval: Duration

    public init(
        smoothingFactor: Double = 0.3, fadeTimeout: Duration = .seconds(2), minimumRSSI: Double = -80,
        clearMargin: Double = 6, minimumSightings: Int = 3, evaluationInterval: Duration = .milliseconds(100)
    ) {
        self.smoothingFactor = smoothingFactor
        self.fadeTimeout = fadeTimeout
        self.minimumRSSI = minimumRSSI
        self.clearMargin = clearMargin
        self.minimumSightings = minimumSightings
        self.evaluationInterval = evaluationInterval
    }
}

/// Follows every terminal session the wallet hears for some transaction types, smooths their
/// RSSI, and offers the nearest clear one to its `manualConnectionDecider`. Two terminals about
/// equally near are a conflict: no candidate until one is clearly nearer.
public final class FusionTracker: Sendable {
    public let scanner: SightingHub
    public let transactionTypes: Set<TransactionType>
    public let configuration: FusionTrackerConfiguration
    public let manualConnectionDecider: ManualConnectionDecider

    private struct State {
        var trackings: [TrackingKey: PeripheralTracking] = [:]
        var candidate: TrackingKey?
        var conflict = false
        var subscription: Int?
        var timer: ScheduledAction?
    }

    private let state = Mutex(State())

    public init(
        scanner: SightingHub, transactionTypes: Set<TransactionType>,
        configuration: FusionTrackerConfiguration = FusionTrackerConfiguration()
    ) {
        self.scanner = scanner
        self.transactionTypes = transactionTypes
        self.configuration = configuration
        self.manualConnectionDecider = ManualConnectionDecider(scheduler: scanner.radio.scheduler)
    }

    var scheduler: any Scheduler { scanner.radio.scheduler }

    /// Every session heard recently, nearest first.
    public var trackings: [PeripheralTracking] {
        state.withLock { Array($0.trackings.values) }.sorted(by: Self.nearerFirst)
    }

    /// True while two or more terminals are too close in strength to choose between.
    public var isConflict: Bool { state.withLock { $0.conflict } }

    /// Starts following sightings (and the shared scan, if not running), on the radio's
    /// scheduler, where the evaluations run.
    public func start() throws(RadioError) {
        try scheduler.performSynchronously { () throws(RadioError) in
            let subscribed = state.withLock { $0.subscription != nil }
            guard !subscribed else { return }
            let id = scanner.subscribe { [weak self] sighting, advertisement in self?.heard(sighting, advertisement) }
            state.withLock { $0.subscription = id }
            scheduleEvaluation()
            try scanner.start()
        }
    }

    /// Stops following sightings and withdraws the candidate, on the radio's scheduler.
    public func stop() {
        scheduler.performSynchronously {
            let (subscription, timer) = state.withLock { state in
                defer {
                    state.subscription = nil
                    state.timer = nil
                    state.trackings = [:]
                    state.candidate = nil
                }
                return (state.subscription, state.timer)
            }
            if let subscription { scanner.unsubscribe(subscription) }
            timer?.cancel()
            manualConnectionDecider.offer(nil)
        }
    }

    /// Every address heard advertising a terminal key, to find a terminal again for a pending
    /// payment (the wallet's state machine picks the latest one that has not failed the
    /// handshake: a clone may advertise the same key id from another address).
    func trackings(terminalKeyID: TerminalKeyID) -> [PeripheralTracking] {
        state.withLock { state in
            state.trackings.values.filter { $0.peripheralMetaData.terminalKeyID == terminalKeyID }
        }
    }

    private func heard(_ sighting: Sighting, _ advertisement: HorizonAdvertisement) {
        guard transactionTypes.contains(advertisement.transactionType) else { return }
        let key = TrackingKey(address: sighting.address, sessionID: advertisement.sessionID)
        let alpha = configuration.smoothingFactor
        state.withLock { state in
            if var tracking = state.trackings[key] {
                if let rssi = sighting.rssi {
                    tracking.smoothedRSSI =
                        tracking.smoothedRSSI.map { $0 + alpha * (Double(rssi) - $0) } ?? Double(rssi)
                }
                tracking.lastRSSI = sighting.rssi
                tracking.sightings += 1
                tracking.lastSeen = sighting.receivedAt
                state.trackings[key] = tracking
            } else {
                state.trackings[key] = PeripheralTracking(
                    peripheralMetaData: PeripheralMetaData(
                        address: sighting.address, transactionType: advertisement.transactionType,
                        sessionID: advertisement.sessionID, terminalKeyID: advertisement.terminalKeyID),
                    smoothedRSSI: sighting.rssi.map(Double.init), lastRSSI: sighting.rssi, sightings: 1,
                    firstSeen: sighting.receivedAt, lastSeen: sighting.receivedAt)
            }
        }
    }

    private func scheduleEvaluation() {
        let timer = scheduler.schedule(after: configuration.evaluationInterval) { [weak self] in
            guard let self else { return }
            self.evaluate()
            if self.state.withLock({ $0.subscription != nil }) { self.scheduleEvaluation() }
        }
        state.withLock { $0.timer = timer }
    }

    /// Drops faded sessions and picks the candidate, with hysteresis.
    func evaluate() {
        let now = scheduler.now
        let ignored = manualConnectionDecider.ignoredSessions
        let ignoredTrackings = manualConnectionDecider.ignoredTrackings
        let configuration = configuration
        let candidate: PeripheralTracking?? = state.withLock { state in
            state.trackings = state.trackings.filter { now - $0.value.lastSeen <= configuration.fadeTimeout }
            // Nothing heard, and the decider already told so (the candidate is what it was last
            // offered, and only this tracker offers to it): nothing to choose, nothing to say.
            // (A wallet scans between payments too; this runs ten times a second.)
            if state.trackings.isEmpty, state.candidate == nil, !state.conflict { return .none }
            let heard = state.trackings.values.filter { tracking in
                !ignored.contains(tracking.peripheralMetaData.sessionID) && !ignoredTrackings.contains(tracking.key)
                    && (tracking.smoothedRSSI.map { $0 >= configuration.minimumRSSI } ?? true)
            }.sorted(by: Self.nearerFirst)
            let eligible = heard.filter { $0.sightings >= configuration.minimumSightings }
            let chosen = Self.choose(
                from: eligible, rivals: heard, current: state.candidate, margin: configuration.clearMargin)
            state.conflict = chosen == nil && heard.count > 1 && !eligible.isEmpty
            state.candidate = chosen?.key
            return .some(chosen)
        }
        if let candidate { manualConnectionDecider.offer(candidate) }
    }

    /// The nearest eligible session, if it is clearly nearer than every rival: any other session
    /// heard, even one without its sightings yet, so that of two terminals about equally near the
    /// one heard first does not win the race to its sightings. A current candidate stays until
    /// another is clearly nearer (hysteresis).
    static func choose(
        from eligible: [PeripheralTracking], rivals: [PeripheralTracking], current: TrackingKey?, margin: Double
    ) -> PeripheralTracking? {
        guard let best = eligible.first else { return nil }
        if let current, let incumbent = eligible.first(where: { $0.key == current }) {
            // Keep the candidate unless another is clearly stronger.
            guard best.key != current, let bestRSSI = best.smoothedRSSI, let incumbentRSSI = incumbent.smoothedRSSI,
                bestRSSI >= incumbentRSSI + margin
            else { return incumbent }
            return best
        }
        guard let rival = rivals.first(where: { $0.key != best.key }) else { return best }
        // Without signal strengths two terminals cannot be told apart.
        guard let bestRSSI = best.smoothedRSSI, let rivalRSSI = rival.smoothedRSSI, bestRSSI - rivalRSSI >= margin
        else { return nil }
        return best
    }

    static func nearerFirst(_ lhs: PeripheralTracking, _ rhs: PeripheralTracking) -> Bool {
        switch (lhs.smoothedRSSI, rhs.smoothedRSSI) {
        case (let l?, let r?) where l != r: l > r
        case (.some, nil): true
        case (nil, .some): false
        default: lhs.peripheralMetaData.address.rawValue < rhs.peripheralMetaData.address.rawValue
        }
    }
}
