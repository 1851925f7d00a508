import HorizonCore
import HorizonProtocol
import Synchronization

/// Runs the person's decisions on `scheduler` (the radio's, where the client that follows them
/// runs), or on the caller's thread when there is none (a decider on its own).
private func deciding<T>(on scheduler: (any Scheduler)?, _ body: () -> T) -> T {
    guard let scheduler else { return body() }
    return scheduler.performSynchronously(body)
}

/// The decider's states, as in the reference SDK.
public enum ManualConnectionDeciderState: Sendable, Equatable, CustomStringConvertible {
    case waitingForCandidate
    /// A terminal is clearly nearest; the app may show it and call `startDeciding()`.
    case candidateAvailable
    /// The app owns the candidate; the person is looking at the offer.
    case deciding
    case accepted
    case rejected

    public var description: String {
        switch self {
        case .waitingForCandidate: "waiting for candidate"
        case .candidateAvailable: "candidate available"
        case .deciding: "deciding"
        case .accepted: "accepted"
        case .rejected: "rejected"
        }
    }
}

/// The decider API the reference SDK's views use, shared by single deciders and collections.
public protocol ManualConnectionDeciderProtocol: AnyObject, Sendable {
    var state: ManualConnectionDeciderState { get }
    var candidate: PeripheralTracking? { get }
    func states() -> AsyncStream<ManualConnectionDeciderState>
    /// The key of the candidate while one is available (`candidateAvailable`), nil otherwise:
    /// what `candidates()` follows.
    var availableCandidate: ObservableState<TrackingKey?> { get }
    func observeState(_ observer: @escaping @Sendable (ManualConnectionDeciderState) -> Void)
    /// Takes ownership of the current candidate. False if there is none.
    @discardableResult func startDeciding() -> Bool
    /// The person accepts. False unless deciding.
    @discardableResult func decideForCandidate() -> Bool
    /// The person declines; that session is ignored from now on. False unless deciding or a
    /// candidate is available.
    @discardableResult func decideAgainstCandidate() -> Bool
    /// Back to waiting after completion.
    func restart()
}

/// Offers one candidate at a time and records the person's decision about it.
public final class ManualConnectionDecider: ManualConnectionDeciderProtocol {
    private let observable = ObservableState<ManualConnectionDeciderState>(.waitingForCandidate)
    public let availableCandidate = ObservableState<TrackingKey?>(nil)
    /// Where decisions are taken: the radio's scheduler of the tracker that offers candidates,
    /// which changes the candidate there; nil for a decider on its own (the caller's thread).
    private let scheduler: (any Scheduler)?

    private struct State {
        var candidate: PeripheralTracking?
        /// The tracker's latest offer, kept while a decision freezes `candidate`.
        var offered: PeripheralTracking?
        var ignoredSessions: Set<SessionID> = []
        var ignoredTrackings: Set<TrackingKey> = []
    }

    private let guarded = Mutex(State())

    /// A decider whose decisions run on `scheduler` (see `Scheduler.performSynchronously`), the
    /// serial context of the client that acts on them; `FusionTracker` passes its radio's.
    public init(scheduler: (any Scheduler)? = nil) {
        self.scheduler = scheduler
        observable.observe { [weak self] _ in self?.refreshAvailableCandidate() }
    }

    private func refreshAvailableCandidate() {
        let key = observable.value == .candidateAvailable ? guarded.withLock { $0.candidate?.key } : nil
        availableCandidate.set(key)
    }

    public var state: ManualConnectionDeciderState { observable.value }
    public var candidate: PeripheralTracking? { guarded.withLock { $0.candidate } }
    public func states() -> AsyncStream<ManualConnectionDeciderState> { observable.stream() }
    public func observeState(_ observer: @escaping @Sendable (ManualConnectionDeciderState) -> Void) {
        observable.observe(observer)
    }

    var ignoredSessions: Set<SessionID> { guarded.withLock { $0.ignoredSessions } }
    var ignoredTrackings: Set<TrackingKey> { guarded.withLock { $0.ignoredTrackings } }

    @discardableResult
    public func startDeciding() -> Bool {
        deciding(on: scheduler) {
            let ok = guarded.withLock { $0.candidate != nil } && observable.value == .candidateAvailable
            if ok { observable.set(.deciding) }
            return ok
        }
    }

    @discardableResult
    public func decideForCandidate() -> Bool {
        deciding(on: scheduler) {
            guard observable.value == .deciding else { return false }
            observable.set(.accepted)
            return true
        }
    }

    @discardableResult
    public func decideAgainstCandidate() -> Bool {
        deciding(on: scheduler) {
            guard observable.value == .deciding || observable.value == .candidateAvailable else { return false }
            guarded.withLock { state in
                if let session = state.candidate?.peripheralMetaData.sessionID { state.ignoredSessions.insert(session) }
            }
            observable.set(.rejected)
            return true
        }
    }

    public func restart() {
        deciding(on: scheduler) {
            let next: ManualConnectionDeciderState = guarded.withLock { state in
                // A rejected session stays ignored; anything else may be offered again.
                if let offered = state.offered, !state.ignoredSessions.contains(offered.peripheralMetaData.sessionID),
                    !state.ignoredTrackings.contains(offered.key)
                {
                    state.candidate = offered
                    return .candidateAvailable
                }
                state.candidate = nil
                return .waitingForCandidate
            }
            observable.set(next)
            refreshAvailableCandidate()
        }
    }

    /// Never offers this session again (it is finished: paid, declined, cancelled, expired).
    func ignore(session: SessionID) {
        guarded.withLock { _ = $0.ignoredSessions.insert(session) }
    }

    /// Never offers this terminal session (this address and session id) again: used when the
    /// terminal failed authentication, so a rogue copy of a session cannot hide the real one.
    func ignore(_ key: TrackingKey) {
        guarded.withLock { _ = $0.ignoredTrackings.insert(key) }
    }

    /// The tracker's current choice. It moves the candidate only while nobody is deciding.
    func offer(_ tracking: PeripheralTracking?) {
        let next: ManualConnectionDeciderState? = guarded.withLock { state in
            state.offered = tracking
            switch observable.value {
            case .waitingForCandidate, .candidateAvailable:
                state.candidate = tracking
                return tracking == nil ? .waitingForCandidate : .candidateAvailable
            case .deciding, .accepted, .rejected:
                return nil
            }
        }
        if let next { observable.set(next) }
        // Another terminal may have become the candidate without a change of state.
        refreshAvailableCandidate()
    }
}

/// Several deciders (payment, bonus, gold, coupon) seen as one: it offers one candidate at a
/// time, the nearest, and forwards the person's decisions to the decider that owns it.
public final class ManualConnectionDeciderCollection: ManualConnectionDeciderProtocol {
    public let deciders: [any ManualConnectionDeciderProtocol]
    private let observable = ObservableState<ManualConnectionDeciderState>(.waitingForCandidate)
    public let availableCandidate = ObservableState<TrackingKey?>(nil)
    /// Where a decision picks its decider and forwards to it, in one step: the deciders' common
    /// scheduler (the coordinator's radio's); nil leaves each decider to enter its own.
    private let scheduler: (any Scheduler)?

    public static func collection(with deciders: [any ManualConnectionDeciderProtocol])
        -> ManualConnectionDeciderCollection
    {
        ManualConnectionDeciderCollection(deciders: deciders)
    }

    /// The deciders seen as one; `scheduler` is theirs when they share one (see `scheduler`).
    public init(deciders: [any ManualConnectionDeciderProtocol], scheduler: (any Scheduler)? = nil) {
        self.deciders = deciders
        self.scheduler = scheduler
        for decider in deciders {
            decider.observeState { [weak self] _ in self?.refresh() }
            decider.availableCandidate.observe { [weak self] _ in self?.refresh() }
        }
        refresh()
    }

    /// The decider whose candidate the collection shows now.
    public var activeDecider: (any ManualConnectionDeciderProtocol)? {
        if let busy = deciders.first(where: { [.deciding, .accepted, .rejected].contains($0.state) }) { return busy }
        return
            deciders.filter { $0.state == .candidateAvailable && $0.candidate != nil }
            .max { lhs, rhs in
                guard let l = lhs.candidate, let r = rhs.candidate else { return false }
                return FusionTracker.nearerFirst(r, l)
            }
    }

    public var state: ManualConnectionDeciderState { activeDecider?.state ?? .waitingForCandidate }
    public var candidate: PeripheralTracking? { activeDecider?.candidate }
    public func states() -> AsyncStream<ManualConnectionDeciderState> { observable.stream() }
    public func observeState(_ observer: @escaping @Sendable (ManualConnectionDeciderState) -> Void) {
        observable.observe(observer)
    }

    @discardableResult public func startDeciding() -> Bool {
        deciding(on: scheduler) { activeDecider?.startDeciding() ?? false }
    }
    @discardableResult public func decideForCandidate() -> Bool {
        deciding(on: scheduler) { activeDecider?.decideForCandidate() ?? false }
    }
    @discardableResult public func decideAgainstCandidate() -> Bool {
        deciding(on: scheduler) { activeDecider?.decideAgainstCandidate() ?? false }
    }

    public func restart() {
        deciding(on: scheduler) {
            for decider in deciders
            where decider.state != .waitingForCandidate && decider.state != .candidateAvailable {
                decider.restart()
            }
        }
    }

    private func refresh() {
        let active = activeDecider
        observable.set(active?.state ?? .waitingForCandidate)
        availableCandidate.set(active?.availableCandidate.value)
    }
}
