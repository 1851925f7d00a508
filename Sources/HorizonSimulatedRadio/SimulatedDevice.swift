import HorizonCore
import HorizonRadio

/// One device in a `RadioSimulation`: a terminal's or a wallet's radio. It is both a peripheral
/// (advertise, accept links) and a central (scan, connect), like a real adapter.
public final class SimulatedDevice: PeripheralRadio, CentralRadio, Sendable {
    public let simulation: RadioSimulation
    let id: Int
    public let address: PeerAddress
    public let name: String
    /// This device's view of time: the simulation's clock, with the device's wall-clock skew.
    public let clock: DeviceClock

    init(simulation: RadioSimulation, id: Int) {
        self.simulation = simulation
        self.id = id
        let device = simulation.state.withLock { $0.devices[id] }
        self.address = device.address
        self.name = device.name
        self.clock = DeviceClock(simulation: simulation, deviceID: id)
    }

    static func address(forIndex index: Int) -> String {
        "5E:1A:00:00:" + [UInt8((index >> 8) & 0xFF)].hexString.uppercased() + ":"
            + [UInt8(index & 0xFF)].hexString.uppercased()
    }

    public var scheduler: any Scheduler { clock }

    public var availability: AdapterAvailability { simulation.state.withLock { $0.devices[id].availability } }

    public var position: Position { simulation.state.withLock { $0.devices[id].configuration.position } }

    public var configuration: DeviceConfiguration { simulation.state.withLock { $0.devices[id].configuration } }

    // MARK: Peripheral

    public func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {
        simulation.state.withLock { $0.devices[id].connectionHandler = handler }
    }

    public func startAdvertising(_ advertisingData: [UInt8], interval: Duration) throws(RadioError)
        -> any AdvertisingSet
    {
        guard advertisingData.count <= AdvertisingData.legacyMaximumLength else {
            throw .advertisementTooLarge(size: advertisingData.count, maximum: AdvertisingData.legacyMaximumLength)
        }
        guard interval >= .milliseconds(20), interval <= .milliseconds(10_240) else {
            throw .invalidConfiguration("advertising interval must be 20 ms to 10.24 s")
        }
        let result: Result<Int, RadioError> = simulation.state.withLock { state in
            guard state.devices[id].availability == .poweredOn else {
                return .failure(.adapterUnavailable(state.devices[id].availability))
            }
            let setID = state.nextAdvertisingSetID
            state.nextAdvertisingSetID += 1
            state.devices[id].advertising[setID] = advertisingData
            // A random first phase, so terminals started together do not advertise in lockstep.
            let phase = simulation.withGenerator("advertising/\(id)/\(setID)", in: &state) {
                Int64($0.nextUnit() * Double(interval.nanoseconds))
            }
            simulation.record("advertise-start \(name) set=\(setID) \(advertisingData.hexString)", in: &state)
            scheduleAdvertisingEvent(setID: setID, interval: interval, at: state.now + .nanoseconds(phase), in: &state)
            return .success(setID)
        }
        let setID = try result.get()
        return SimulatedAdvertisingSet(device: self, setID: setID)
    }

    private func scheduleAdvertisingEvent(
        setID: Int, interval: Duration, at time: Instant, in state: inout SimulationState
    ) {
        simulation.push(at: time, in: &state) { [self] in
            advertisingEvent(setID: setID, interval: interval)
        }
    }

    /// One advertising event: every scanning device in range hears it, then the next is planned
    /// one interval later plus the 0-10 ms random delay the Bluetooth specification adds.
    private func advertisingEvent(setID: Int, interval: Duration) {
        let deliveries: [(@Sendable (Sighting) -> Void, Sighting)] = simulation.state.withLock { state in
            guard let data = state.devices[id].advertising[setID] else { return [] }
            var deliveries: [(@Sendable (Sighting) -> Void, Sighting)] = []
            // Scanners out of reach are skipped before their noise is drawn: in a simulation with
            // many devices most pairs are far apart, and drawing (a string-keyed generator and a
            // logarithm) for every one of them made each advertising event cost O(devices).
            let reach = simulation.audibleRange(of: id, in: state)
            let here = state.devices[id].configuration.position
            for scanner in state.devices.indices where scanner != id {
                guard let handler = state.devices[scanner].scanHandler,
                    state.devices[scanner].configuration.position.distance(to: here) <= reach
                else { continue }
                let rssi = simulation.readRSSI(from: id, to: scanner, in: &state)
                guard rssi >= simulation.pathLoss.sensitivity else { continue }
                let reported = state.devices[scanner].configuration.reportsRSSI ? Int(rssi.rounded()) : nil
                if state.trace != nil {
                    let line =
                        "sighting \(name)->\(state.devices[scanner].name) rssi=\(reported.map(String.init) ?? "none")"
                    simulation.record(line, in: &state)
                }
                deliveries.append(
                    (handler, Sighting(address: address, advertisingData: data, rssi: reported, receivedAt: state.now)))
            }
            let delay = simulation.withGenerator("advertising/\(id)/\(setID)", in: &state) {
                Int64($0.nextUnit() * 10_000_000)
            }
            scheduleAdvertisingEvent(
                setID: setID, interval: interval, at: state.now + interval + .nanoseconds(delay), in: &state)
            return deliveries
        }
        for (handler, sighting) in deliveries { handler(sighting) }
    }

    func stopAdvertising(setID: Int) {
        simulation.state.withLock { state in
            if state.devices[id].advertising.removeValue(forKey: setID) != nil {
                simulation.record("advertise-stop \(name) set=\(setID)", in: &state)
            }
        }
    }

    /// Whether any advertising set is active.
    public var isAdvertising: Bool { simulation.state.withLock { !$0.devices[id].advertising.isEmpty } }

    // MARK: Central

    public func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) throws(RadioError) {
        let error: RadioError? = simulation.state.withLock { state in
            guard state.devices[id].availability == .poweredOn else {
                return .adapterUnavailable(state.devices[id].availability)
            }
            guard state.devices[id].scanHandler == nil else { return .alreadyScanning }
            state.devices[id].scanHandler = handler
            return nil
        }
        if let error { throw error }
    }

    public func stopScanning() {
        simulation.state.withLock { $0.devices[id].scanHandler = nil }
    }

    public var isScanning: Bool { simulation.state.withLock { $0.devices[id].scanHandler != nil } }

    public func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        simulation.state.withLock { state in
            guard state.devices[id].availability == .poweredOn else {
                let error = RadioError.adapterUnavailable(state.devices[id].availability)
                simulation.push(at: state.now, in: &state) { completion(.failure(error)) }
                return
            }
            let setup = state.devices[id].configuration.link.connectionSetupTime
            simulation.record("connect-request \(name)->\(peer)", in: &state)
            simulation.push(at: state.now + setup, in: &state) { [self] in
                completeConnect(to: peer, timeout: timeout, setup: setup, completion: completion)
            }
        }
    }

    private func completeConnect(
        to peer: PeerAddress, timeout: Duration, setup: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        let outcome:
            (
                central: SimulatedLinkEndpoint, peripheral: SimulatedLinkEndpoint,
                accept: @Sendable (any ByteLink) -> Void
            )? =
                simulation.state.withLock { state in
                    guard state.devices[id].availability == .poweredOn,
                        let target = state.devices.firstIndex(where: { $0.address == peer }),
                        state.devices[target].availability == .poweredOn,
                        !state.devices[target].advertising.isEmpty,
                        let accept = state.devices[target].connectionHandler,
                        simulation.inRange(id, target, in: state)
                    else {
                        // A real central keeps trying until its timeout; the peer is not there.
                        let remaining = max(timeout - setup, .zero)
                        simulation.record("connect-failed \(name)->\(peer)", in: &state)
                        simulation.push(at: state.now + remaining, in: &state) {
                            completion(.failure(.connectionTimedOut(peer)))
                        }
                        return nil
                    }
                    let (central, peripheral) = simulation.openLink(central: id, peripheral: target, in: &state)
                    return (central, peripheral, accept)
                }
        guard let outcome else { return }
        outcome.accept(outcome.peripheral)
        completion(.success(outcome.central))
    }

    // MARK: World

    /// Moves the device. Later RSSI readings and range checks use the new position.
    public func move(to position: Position) {
        simulation.state.withLock { state in
            state.devices[id].configuration.position = position
            simulation.record("move \(name) to \(position)", in: &state)
            // Connected devices exchange packets every connection event, so leaving range ends
            // a link even when no data flows.
            for linkID in state.links.indices where state.links[linkID].involves(id) {
                let link = state.links[linkID]
                if link.status == .open, !simulation.inRange(link.devices[0], link.devices[1], in: state) {
                    simulation.loseLink(linkID, in: &state, notifyImmediately: nil)
                }
            }
        }
    }

    /// Switches the device off, as a crash or a pulled dongle does: advertising and scanning stop,
    /// its own links report `connectionLost` at once and its peers after their supervision timeout.
    public func powerOff() { setAvailability(.poweredOff) }

    /// Switches the device back on. Advertising and scanning must be started again.
    public func powerOn() { setAvailability(.poweredOn) }

    /// Sets what the adapter reports, e.g. `.unauthorized`, to exercise availability handling.
    public func setAvailability(_ availability: AdapterAvailability) {
        simulation.state.withLock { state in
            state.devices[id].availability = availability
            simulation.record("availability \(name) \(availability)", in: &state)
            guard availability != .poweredOn else { return }
            state.devices[id].advertising.removeAll()
            state.devices[id].scanHandler = nil
            for linkID in state.links.indices where state.links[linkID].involves(id) {
                simulation.loseLink(linkID, in: &state, notifyImmediately: state.links[linkID].side(of: id))
            }
        }
    }
}

/// A device's clock: the simulation's virtual time, and its wall clock with the device's skew.
public final class DeviceClock: Scheduler, Sendable {
    let simulation: RadioSimulation
    let deviceID: Int

    init(simulation: RadioSimulation, deviceID: Int) {
        self.simulation = simulation
        self.deviceID = deviceID
    }

    public var now: Instant { simulation.now }

    public var wallClock: UnixTime {
        let skew = simulation.state.withLock { $0.devices[deviceID].configuration.wallClockSkew }
        return simulation.wallClock + skew.nanoseconds / 1_000_000_000
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        simulation.schedule(after: delay, action)
    }

    /// The simulation's context is the device's (see `RadioSimulation.checkIsolated`).
    public func checkIsolated() { simulation.checkIsolated() }

    /// Sets how far this device's wall clock is off.
    public func setSkew(_ skew: Duration) {
        simulation.state.withLock { $0.devices[deviceID].configuration.wallClockSkew = skew }
    }
}

final class SimulatedAdvertisingSet: AdvertisingSet, Sendable {
    let device: SimulatedDevice
    let setID: Int

    init(device: SimulatedDevice, setID: Int) {
        self.device = device
        self.setID = setID
    }

    func stop() { device.stopAdvertising(setID: setID) }
}
