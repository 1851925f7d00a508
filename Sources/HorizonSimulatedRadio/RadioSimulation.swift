import HorizonCore
import HorizonRadio
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#else
    import Foundation
#endif

/// A deterministic, in-process Bluetooth LE world: devices with positions, advertising, scanning,
/// links with an MTU, a connection interval, latency and loss, and faults on demand.
///
/// Everything happens on one virtual clock. Nothing moves until the owner calls `run`, which
/// fires due events in time order on the caller's thread; radio callbacks and scheduled timers
/// all run there, one at a time. Noise, jitter, loss and random faults come from generators
/// seeded from `seed` and a stable label per device, pair or link, so the same seed and the same
/// calls replay the same run, byte for byte (`trace` records it).
public final class RadioSimulation: Scheduler, Sendable {
    public let seed: UInt64
    public let pathLoss: PathLossModel
    /// Wall-clock time at virtual time zero.
    public let wallClockAtStart: UnixTime

    let state: Mutex<SimulationState>

    public init(
        seed: UInt64, pathLoss: PathLossModel = PathLossModel(), wallClockAtStart: UnixTime = 1_800_000_000,
        recordsTrace: Bool = false
    ) {
        self.seed = seed
        self.pathLoss = pathLoss
        self.wallClockAtStart = wallClockAtStart
        self.state = Mutex(SimulationState(recordsTrace: recordsTrace))
    }

    // MARK: Scheduler

    public var now: Instant { state.withLock { $0.now } }

    public var wallClock: UnixTime { wallClockAtStart + now.nanoseconds / 1_000_000_000 }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let handle = ScheduledAction()
        state.withLock { state in
            state.queue.push(time: state.now + max(delay, .zero), handle: handle, action: action)
        }
        return handle
    }

    /// How much virtual time work handed to `runExternal` takes (a remote processor settling a
    /// payment): zero by default, so it completes before anything else fires, as a synchronous
    /// call would. Longer lets a test watch the terminal serve others meanwhile. Either way its
    /// completion fires at a fixed instant of virtual time: if the work has not finished by then
    /// in real time, the simulation waits for it there, so a seed still replays exactly.
    public var externalWorkDuration: Duration {
        get { state.withLock { $0.externalWorkDuration } }
        set { state.withLock { $0.externalWorkDuration = newValue } }
    }

    public func runExternal<T: Sendable>(
        _ work: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void
    ) {
        let duration = externalWorkDuration
        guard duration > .zero else {
            completion(ExternalWork.wait(for: work))
            return
        }
        let pending = ExternalWork.start(work)
        schedule(after: duration) { completion(pending.wait()) }
    }

    // MARK: Running

    /// Isolation to an actor on the simulation: while a run fires events, its serial context is
    /// the thread that runs it, and no other thread may enter (a simulation running `live` is
    /// reached through `perform`); between runs, whoever drives it next.
    public func checkIsolated() {
        let driver = state.withLock { $0.driver }
        if let driver, pthread_equal(driver.thread, pthread_self()) == 0 {
            preconditionFailure("the simulation is running on another thread")
        }
    }

    /// Marks the calling thread as the one firing events for the length of `body`.
    private func driving<T>(_ body: () -> T) -> T {
        let thread = pthread_self()
        state.withLock { state in
            if let driver = state.driver, pthread_equal(driver.thread, thread) != 0 {
                state.driver?.depth += 1
            } else {
                state.driver = (thread, 1)
            }
        }
        defer {
            state.withLock { state in
                state.driver?.depth -= 1
                if state.driver?.depth == 0 { state.driver = nil }
            }
        }
        return body()
    }

    /// Fires every event due up to `deadline`, then leaves the clock at `deadline`.
    public func run(until deadline: Instant) {
        driving {
            while let event = popEvent(notAfter: deadline) {
                if !event.handle.isCancelled { event.action() }
            }
        }
        state.withLock { state in
            if state.now < deadline { state.now = deadline }
        }
    }

    public func run(for duration: Duration) { run(until: now + duration) }

    /// Fires events until `condition` holds (checked after each event) or `timeout` of virtual
    /// time passes. Returns whether the condition held.
    @discardableResult
    public func run(until condition: () -> Bool, timeout: Duration) -> Bool {
        let deadline = now + timeout
        if condition() { return true }
        let held = driving { () -> Bool in
            while let event = popEvent(notAfter: deadline) {
                if !event.handle.isCancelled { event.action() }
                if condition() { return true }
            }
            return false
        }
        if held { return true }
        state.withLock { state in
            if state.now < deadline { state.now = deadline }
        }
        return condition()
    }

    /// Runs the simulation in step with the real clock (`speed` virtual seconds per real second)
    /// for as long as `body` runs: how async code, such as the roles' async API, uses a simulated
    /// radio. Events fire on a task of their own (on a thread outside the cooperative pool), one at
    /// a time as always; `body`'s calls reach the simulation's serial context through
    /// `Scheduler.perform`. Not replayable byte for byte
    /// (when `body` acts depends on the machine); tests of exact timing use `run` instead.
    public func live<T: Sendable, Failure: Error>(
        speed: Double = 1, _ body: () async throws(Failure) -> T
    ) async throws(Failure) -> T {
        // The driver runs off Swift's cooperative pool: firing events may block it (a virtual
        // clock waits for `runExternal` work, such as a settlement over HTTP), and a pool thread
        // blocked there could be the one that work needs (seen: the whole-system tests hung on 2
        // cores with both pool threads held by drivers waiting for their HTTP answers).
        let driver = Task(executorPreference: QueueExecutor(label: "horizon.simulation.live")) { [self] in
            var last = ContinuousClock.now
            var target = now
            while !Task.isCancelled {
                // A starved driver (a busy machine) catches up at most one step at a time:
                // virtual time slows down with the machine instead of jumping past timeouts
                // that the code under test had no chance to beat.
                let current = ContinuousClock.now
                target = target + min(current - last, Self.liveMaximumStep) * max(speed, 0.001)
                last = current
                run(until: target)
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
        let outcome: Result<T, Failure>
        do throws(Failure) {
            outcome = .success(try await body())
        } catch {
            outcome = .failure(error)
        }
        driver.cancel()
        await driver.value
        return try outcome.get()
    }

    /// The most real time one step of `live` turns into virtual time.
    static let liveMaximumStep: Duration = .milliseconds(20)

    /// Events waiting to fire (timers, deliveries, advertising).
    public var pendingEventCount: Int { state.withLock { $0.queue.count } }

    /// When the next event is due (nil: none is waiting): how a driver on the wall clock knows
    /// how long it may sleep.
    var nextEventTime: Instant? { state.withLock { $0.queue.nextTime } }

    private func popEvent(notAfter deadline: Instant) -> EventQueue.Event? {
        state.withLock { state in
            guard let time = state.queue.nextTime, time <= deadline, let event = state.queue.pop() else {
                return nil
            }
            state.now = event.time
            return event
        }
    }

    // MARK: Devices

    /// Adds a device. Names appear in the trace; addresses are assigned in creation order.
    public func addDevice(name: String, configuration: DeviceConfiguration = DeviceConfiguration()) throws(RadioError)
        -> SimulatedDevice
    {
        try configuration.link.validate()
        let id = state.withLock { state in
            let id = state.devices.count
            let address = PeerAddress(SimulatedDevice.address(forIndex: id))
            state.devices.append(DeviceState(name: name, address: address, configuration: configuration))
            return id
        }
        return SimulatedDevice(simulation: self, id: id)
    }

    // MARK: Faults

    /// Plans `fault` for frame `frameIndex` (counted from 0 over both directions) of the next link
    /// that opens.
    public func injectFaultOnNextLink(_ fault: FrameFault, atFrame frameIndex: Int) {
        state.withLock { $0.faultsForNextLink[frameIndex] = fault }
    }

    /// Random faults for every link opened from now on, drawn per frame from each link's generator.
    public func setRandomFaults(_ probabilities: FaultProbabilities) {
        state.withLock { $0.randomFaults = probabilities }
    }

    /// Plans `fault` for frame `frameIndex` of an open link.
    public func injectFault(_ fault: FrameFault, atFrame frameIndex: Int, on link: SimulatedLinkEndpoint) {
        state.withLock { $0.links[link.linkID].plannedFaults[frameIndex] = fault }
    }

    /// Every fault applied so far: which link, which frame, what.
    public var appliedFaults: [AppliedFault] { state.withLock { $0.appliedFaults } }

    /// Frames sent so far on a link, both directions.
    public func framesSent(on link: SimulatedLinkEndpoint) -> Int {
        state.withLock { $0.links[link.linkID].framesSent }
    }

    // MARK: Traffic

    /// What a link has carried so far, per direction (frames, bytes, turns).
    public func traffic(on link: SimulatedLinkEndpoint) -> LinkTraffic {
        state.withLock { $0.links[link.linkID].traffic }
    }

    /// What every link opened so far has carried, in the order they opened (index = link id).
    /// Each names its two devices, so a caller finds a link without holding its endpoint (roles
    /// keep their links to themselves).
    public var linkTraffic: [LinkTraffic] { state.withLock { $0.links.map(\.traffic) } }

    // MARK: Trace

    /// Every radio event so far, one line each, if the simulation records a trace.
    public var trace: [String] { state.withLock { $0.trace ?? [] } }

    /// Appends a trace line. The line is built only when the simulation records a trace, so one
    /// without pays nothing for it (interpolating an enum reflects on it: a payment's link close
    /// cost more than the close itself). A line that reads `state` is built by its caller under
    /// `state.trace != nil`, since an autoclosure here cannot read the state passed inout.
    func record(_ line: @autoclosure () -> String, in state: inout SimulationState) {
        guard state.trace != nil else { return }
        let millis = Double(state.now.nanoseconds) / 1_000_000
        state.trace?.append("\(millis) \(line())")
    }

    // MARK: Randomness

    func withGenerator<T>(_ label: String, in state: inout SimulationState, _ body: (inout SeededRandom) -> T) -> T {
        var generator = state.generators[label] ?? SeededRandom(seed: seed, label: label)
        defer { state.generators[label] = generator }
        return body(&generator)
    }

    /// One RSSI reading between two devices, with noise from that pair's generator.
    func readRSSI(from sender: Int, to receiver: Int, in state: inout SimulationState) -> Double {
        let distance = state.devices[sender].configuration.position.distance(
            to: state.devices[receiver].configuration.position)
        let mean = pathLoss.meanRSSI(atDistance: distance) + state.devices[sender].configuration.transmitPowerOffset
        let deviation = pathLoss.noiseStandardDeviation
        return withGenerator("rssi/\(sender)/\(receiver)", in: &state) {
            $0.nextGaussian(mean: mean, standardDeviation: deviation)
        }
    }

    /// How far away anything `sender` transmits can still be heard: where its mean RSSI falls
    /// ten noise deviations below the sensitivity. The noise of `SeededRandom.nextGaussian`
    /// (Box-Muller on 53-bit uniforms) stays within 8.6 standard deviations of the mean, except
    /// for the one draw in 2^53 that is exactly zero, so a device further away is never heard and
    /// its reading need not be drawn. What the simulation does is unchanged and a seed still
    /// replays exactly; only that pair's noise generator is not advanced while it is out of reach.
    /// Negative when nothing can be heard at any distance.
    func audibleRange(of sender: Int, in state: SimulationState) -> Double {
        let margin =
            pathLoss.measuredPowerAtOneMetre + state.devices[sender].configuration.transmitPowerOffset
            + 10 * pathLoss.noiseStandardDeviation - pathLoss.sensitivity
        // A signal that does not fall with distance is never skipped.
        guard pathLoss.exponent > 0 else { return .infinity }
        // meanRSSI counts anything closer than 10 cm as 10 cm and falls by 10 * exponent dB per
        // decade beyond: the strongest reading is 10 * exponent above the one-metre power.
        guard margin + 10 * pathLoss.exponent >= 0 else { return -1 }
        return pow(10, margin / (10 * pathLoss.exponent))
    }

    func inRange(_ first: Int, _ second: Int, in state: SimulationState) -> Bool {
        let distance = state.devices[first].configuration.position.distance(
            to: state.devices[second].configuration.position)
        return pathLoss.isInRange(distance: distance)
    }

    func push(at time: Instant, in state: inout SimulationState, _ action: @escaping @Sendable () -> Void) {
        state.queue.push(time: time, handle: ScheduledAction(), action: action)
    }
}

/// Everything mutable in a simulation, behind one lock.
struct SimulationState {
    var now: Instant = .zero
    var queue = EventQueue()
    var devices: [DeviceState] = []
    var links: [LinkState] = []
    var generators: [String: SeededRandom] = [:]
    var faultsForNextLink: [Int: FrameFault] = [:]
    var randomFaults: FaultProbabilities = .none
    var trace: [String]?
    var nextAdvertisingSetID = 0
    var externalWorkDuration: Duration = .zero
    var appliedFaults: [AppliedFault] = []
    /// The thread inside `run` now, and how deeply (an event may run the clock itself).
    var driver: (thread: pthread_t, depth: Int)?

    init(recordsTrace: Bool) {
        trace = recordsTrace ? [] : nil
    }
}

struct DeviceState {
    let name: String
    let address: PeerAddress
    var configuration: DeviceConfiguration
    var availability: AdapterAvailability = .poweredOn
    var connectionHandler: (@Sendable (any ByteLink) -> Void)?
    var scanHandler: (@Sendable (Sighting) -> Void)?
    /// Advertising set id -> advertising data.
    var advertising: [Int: [UInt8]] = [:]
}

/// A fault the simulation applied to a frame.
public struct AppliedFault: Sendable, Equatable {
    public let linkID: Int
    public let frameIndex: Int
    public let fault: FrameFault
}

// A device's clock is the simulation's: work it runs outside its serial context takes the
// simulation's `externalWorkDuration` (declared here, beside it, rather than with the clock).
extension DeviceClock {
    public func runExternal<T: Sendable>(
        _ work: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void
    ) {
        simulation.runExternal(work, then: completion)
    }
}
