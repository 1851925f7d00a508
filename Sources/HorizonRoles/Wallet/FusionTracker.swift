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
///
/// Its subscribers and whether it scans live in `SightingHubDriver`, an actor on the radio's
/// scheduler; `start` and `stop` hop there, and the trackers (actors on the same scheduler)
/// subscribe from there.
public final class SightingHub: Sendable {
    public let radio: any CentralRadio
    private let driver: SightingHubDriver

    public init(radio: any CentralRadio) {
        self.radio = radio
        driver = SightingHubDriver(radio: radio)
    }

    /// Starts the radio scan if it is not running. On the radio's scheduler, as `stop`: a start
    /// and a stop from two threads cannot cross between the flag and the radio.
    ///
    /// The radio starts scanning without holding the scheduler (`runRadioCall`: on BlueZ a few
    /// D-Bus calls). Throws what is known before this returns: an unusable adapter, or the error
    /// of a radio that answered at once (a simulated one). A radio that fails later leaves the
    /// hub stopped, and `scanFailure` says why.
    public func start() throws(RadioError) {
        let failure = radio.scheduler.performSynchronously { driver.assumeIsolated { $0.start() } }
        if let failure { throw failure }
    }

    /// Why the radio last refused to scan (nil: it never did, or scans since). Read on any thread.
    public var scanFailure: RadioError? { driver.failure.withLock { $0 } }

    public func stop() {
        radio.scheduler.performSynchronously { driver.assumeIsolated { $0.stop() } }
    }

    /// Adds a subscriber; call on the radio's scheduler.
    @discardableResult
    func subscribe(_ handler: @escaping @Sendable (Sighting, HorizonAdvertisement) -> Void) -> Int {
        driver.assumeIsolated { $0.subscribe(handler) }
    }

    /// Removes a subscriber; call on the radio's scheduler.
    func unsubscribe(_ id: Int) { driver.assumeIsolated { $0.unsubscribe(id) } }
}

/// The hub's subscribers and scan, on the radio's scheduler (its executor), where sightings arrive.
private actor SightingHubDriver {
    let radio: any CentralRadio
    private var subscribers: [Int: @Sendable (Sighting, HorizonAdvertisement) -> Void] = [:]
    private var nextID = 0
    private var scanning = false
    /// Starts so far: an answer for an older start (stopped since) leaves the newer one alone.
    private var starts = 0
    /// The last refusal, and which start it answered.
    nonisolated let failure = Mutex<RadioError?>(nil)
    private var failedStart: Int?

    nonisolated var unownedExecutor: UnownedSerialExecutor { radio.scheduler.asUnownedSerialExecutor() }

    init(radio: any CentralRadio) { self.radio = radio }

    /// Starts the scan; returns a refusal known before it returns (see `SightingHub.start`).
    func start() -> RadioError? {
        guard !scanning else { return nil }
        let availability = radio.availability
        guard availability == .poweredOn else { return .adapterUnavailable(availability) }
        scanning = true
        starts += 1
        let start = starts
        let radio = radio
        radio.scheduler.runRadioCall { [weak self] () async -> RadioError? in
            do throws(RadioError) {
                try await radio.startScanning { [weak self] sighting in self?.assumeIsolated { $0.deliver(sighting) } }
                return nil
            } catch {
                return error
            }
        } then: { [weak self] refusal in
            self?.assumeIsolated { $0.answered(start, refusal) }
        }
        return failedStart == start ? failure.withLock({ $0 }) : nil
    }

    private func answered(_ start: Int, _ refusal: RadioError?) {
        guard let refusal else {
            if start == starts { failure.withLock { $0 = nil } }
            return
        }
        failedStart = start
        failure.withLock { $0 = refusal }
        if start == starts { scanning = false }
    }

    func stop() {
        scanning = false
        radio.stopScanning()
    }

    func subscribe(_ handler: @escaping @Sendable (Sighting, HorizonAdvertisement) -> Void) -> Int {
        defer { nextID += 1 }
        subscribers[nextID] = handler
        return nextID
    }

    func unsubscribe(_ id: Int) { subscribers[id] = nil }

    private func deliver(_ sighting: Sighting) {
        // Foreign and malformed advertisements are everyday radio noise: ignored without a word.
        guard case .horizon(let advertisement) = HorizonAdvertisement.parse(sighting.advertisingData) else { return }
        let handlers = subscribers.sorted { $0.key < $1.key }.map(\.value)
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
///
/// The reference's synchronous API over `FusionTrackerDriver`, an actor on the radio's
/// scheduler: `start` and `stop` enter the scheduler's context and run there on the driver's
/// state, which sightings and evaluations change on the same context. Readers on other threads
/// (a program's table of what it hears) read what the driver last published.
public final class FusionTracker: Sendable {
    public let scanner: SightingHub
    public let transactionTypes: Set<TransactionType>
    public let configuration: FusionTrackerConfiguration
    public let manualConnectionDecider: ManualConnectionDecider
    private let published: FusionTrackerSnapshot
    private let driver: FusionTrackerDriver

    public init(
        scanner: SightingHub, transactionTypes: Set<TransactionType>,
        configuration: FusionTrackerConfiguration = FusionTrackerConfiguration()
    ) {
        self.scanner = scanner
        self.transactionTypes = transactionTypes
        self.configuration = configuration
        let decider = ManualConnectionDecider(scheduler: scanner.radio.scheduler)
        self.manualConnectionDecider = decider
        let published = FusionTrackerSnapshot()
        self.published = published
        driver = FusionTrackerDriver(
            scanner: scanner, transactionTypes: transactionTypes, configuration: configuration, decider: decider,
            published: published)
    }

    var scheduler: any Scheduler { scanner.radio.scheduler }

    /// Every session heard recently, nearest first.
    public var trackings: [PeripheralTracking] {
        published.read { Array($0.trackings.values) }.sorted(by: Self.nearerFirst)
    }

    /// True while two or more terminals are too close in strength to choose between.
    public var isConflict: Bool { published.read { $0.conflict } }

    /// Starts following sightings (and the shared scan, if not running), on the radio's
    /// scheduler, where the evaluations run.
    public func start() throws(RadioError) {
        try scheduler.performSynchronously { () throws(RadioError) in
            try driver.assumeIsolated { driver in Result { () throws(RadioError) in try driver.start() } }.get()
        }
    }

    /// Stops following sightings and withdraws the candidate, on the radio's scheduler.
    public func stop() {
        scheduler.performSynchronously { driver.assumeIsolated { $0.stop() } }
    }

    /// Every address heard advertising a terminal key, to find a terminal again for a pending
    /// payment (the wallet's state machine picks the latest one that has not failed the
    /// handshake: a clone may advertise the same key id from another address).
    func trackings(terminalKeyID: TerminalKeyID) -> [PeripheralTracking] {
        published.read { published in
            published.trackings.values.filter { $0.peripheralMetaData.terminalKeyID == terminalKeyID }
        }
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

/// What the tracker's driver last decided, copied out for readers on any thread; written only
/// by the driver, after each change.
private final class FusionTrackerSnapshot: Sendable {
    struct Contents {
        var trackings: [TrackingKey: PeripheralTracking] = [:]
        var conflict = false
    }

    private let contents = Mutex(Contents())

    func read<T>(_ body: (Contents) -> T) -> T { contents.withLock { body($0) } }

    func publish(trackings: [TrackingKey: PeripheralTracking], conflict: Bool) {
        contents.withLock { $0 = Contents(trackings: trackings, conflict: conflict) }
    }
}

/// The tracker's state and its events, on the radio's scheduler: an actor whose executor is that
/// scheduler, entered with `assumeIsolated` from `start` and `stop` (which hop there first), the
/// sightings and the evaluation timer (which arrive there).
private actor FusionTrackerDriver {
    let scanner: SightingHub
    let transactionTypes: Set<TransactionType>
    let configuration: FusionTrackerConfiguration
    let decider: ManualConnectionDecider
    let published: FusionTrackerSnapshot

    private var trackings: [TrackingKey: PeripheralTracking] = [:]
    private var candidate: TrackingKey?
    private var conflict = false
    private var subscription: Int?
    private var timer: ScheduledAction?

    nonisolated var unownedExecutor: UnownedSerialExecutor { scanner.radio.scheduler.asUnownedSerialExecutor() }

    init(
        scanner: SightingHub, transactionTypes: Set<TransactionType>, configuration: FusionTrackerConfiguration,
        decider: ManualConnectionDecider, published: FusionTrackerSnapshot
    ) {
        self.scanner = scanner
        self.transactionTypes = transactionTypes
        self.configuration = configuration
        self.decider = decider
        self.published = published
    }

    var scheduler: any Scheduler { scanner.radio.scheduler }

    func start() throws(RadioError) {
        guard subscription == nil else { return }
        subscription = scanner.subscribe { [weak self] sighting, advertisement in
            self?.assumeIsolated { $0.heard(sighting, advertisement) }
        }
        scheduleEvaluation()
        try scanner.start()
    }

    func stop() {
        if let subscription { scanner.unsubscribe(subscription) }
        timer?.cancel()
        subscription = nil
        timer = nil
        trackings = [:]
        candidate = nil
        publish()
        decider.offer(nil)
    }

    private func publish() { published.publish(trackings: trackings, conflict: conflict) }

    private func heard(_ sighting: Sighting, _ advertisement: HorizonAdvertisement) {
        guard transactionTypes.contains(advertisement.transactionType) else { return }
        let key = TrackingKey(address: sighting.address, sessionID: advertisement.sessionID)
        let alpha = configuration.smoothingFactor
        if var tracking = trackings[key] {
            if let rssi = sighting.rssi {
                tracking.smoothedRSSI = tracking.smoothedRSSI.map { $0 + alpha * (Double(rssi) - $0) } ?? Double(rssi)
            }
            tracking.lastRSSI = sighting.rssi
            tracking.sightings += 1
            tracking.lastSeen = sighting.receivedAt
            trackings[key] = tracking
        } else {
            trackings[key] = PeripheralTracking(
                peripheralMetaData: PeripheralMetaData(
                    address: sighting.address, transactionType: advertisement.transactionType,
                    sessionID: advertisement.sessionID, terminalKeyID: advertisement.terminalKeyID),
                smoothedRSSI: sighting.rssi.map(Double.init), lastRSSI: sighting.rssi, sightings: 1,
                firstSeen: sighting.receivedAt, lastSeen: sighting.receivedAt)
        }
        publish()
    }

    private func scheduleEvaluation() {
        timer = scheduler.schedule(after: configuration.evaluationInterval) { [weak self] in
            self?.assumeIsolated { driver in
                driver.evaluate()
                if driver.subscription != nil { driver.scheduleEvaluation() }
            }
        }
    }

    /// Drops faded sessions and picks the candidate, with hysteresis.
    private func evaluate() {
        let now = scheduler.now
        let ignored = decider.ignoredSessions
        let ignoredTrackings = decider.ignoredTrackings
        let configuration = configuration
        let before = trackings.count
        trackings = trackings.filter { now - $0.value.lastSeen <= configuration.fadeTimeout }
        // Nothing heard, and the decider already told so (the candidate is what it was last
        // offered, and only this tracker offers to it): nothing to choose, nothing to say.
        // (A wallet scans between payments too; this runs ten times a second.)
        if trackings.isEmpty, candidate == nil, !conflict {
            if before != 0 { publish() }
            return
        }
        let heard = trackings.values.filter { tracking in
            !ignored.contains(tracking.peripheralMetaData.sessionID) && !ignoredTrackings.contains(tracking.key)
                && (tracking.smoothedRSSI.map { $0 >= configuration.minimumRSSI } ?? true)
        }.sorted(by: FusionTracker.nearerFirst)
        let eligible = heard.filter { $0.sightings >= configuration.minimumSightings }
        let chosen = FusionTracker.choose(
            from: eligible, rivals: heard, current: candidate, margin: configuration.clearMargin)
        conflict = chosen == nil && heard.count > 1 && !eligible.isEmpty
        candidate = chosen?.key
        publish()
        decider.offer(chosen)
    }
}
