import HorizonCore
import HorizonProtocol
import HorizonRadio
import Synchronization

/// A radio on a real-time scheduler, as BlueZ and the radio server's clients run, with nothing
/// over the air: it records what the roles ask of it, and which of those calls came from off
/// the scheduler's queue (every one should come from on it).
final class QueueRadio: PeripheralRadio, CentralRadio {
    let realTime = RealTimeScheduler(label: "horizon.test.queue-radio")

    private struct State {
        var liveAdvertisements: [Int: [UInt8]] = [:]
        var nextAdvertisement = 0
        var scanHandler: (@Sendable (Sighting) -> Void)?
        var connectAttempts = 0
        var callsOffTheScheduler: [String] = []
    }

    private let state = Mutex(State())

    var scheduler: any Scheduler { realTime }
    var availability: AdapterAvailability { .poweredOn }

    /// Advertisements started and not stopped.
    var liveAdvertisementCount: Int { state.withLock { $0.liveAdvertisements.count } }
    /// The sessions of the advertisements started and not stopped.
    var liveSessions: Set<SessionID> {
        state.withLock { state in
            Set(
                state.liveAdvertisements.values.compactMap { data in
                    guard case .horizon(let advertisement) = HorizonAdvertisement.parse(data) else { return nil }
                    return advertisement.sessionID
                })
        }
    }
    var connectAttempts: Int { state.withLock { $0.connectAttempts } }
    /// The radio calls that did not come from the scheduler's queue.
    var callsOffTheScheduler: [String] { state.withLock { $0.callsOffTheScheduler } }

    private func note(_ call: String) {
        guard !realTime.isCurrent else { return }
        state.withLock { $0.callsOffTheScheduler.append(call) }
    }

    /// Async, so callable from anywhere (a role awaits it off its scheduler): not noted.
    func startAdvertising(_ advertisingData: [UInt8], interval: Duration) async throws(RadioError)
        -> any AdvertisingSet
    {
        let id = state.withLock { state in
            defer { state.nextAdvertisement += 1 }
            state.liveAdvertisements[state.nextAdvertisement] = advertisingData
            return state.nextAdvertisement
        }
        return Advertisement { [weak self] in
            self?.note("stopAdvertising")
            _ = self?.state.withLock { $0.liveAdvertisements.removeValue(forKey: id) }
        }
    }

    func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void) {}

    /// Async, as `startAdvertising`: not noted.
    func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) async throws(RadioError) {
        state.withLock { $0.scanHandler = handler }
    }

    func stopScanning() {
        note("stopScanning")
        state.withLock { $0.scanHandler = nil }
    }

    /// Nobody answers: the attempt fails on the scheduler, as a radio reports it.
    func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void
    ) {
        note("connect")
        state.withLock { $0.connectAttempts += 1 }
        realTime.execute { completion(.failure(.peerNotFound(peer))) }
    }

    /// A terminal's advertisement heard, delivered on the scheduler as a radio delivers it.
    func hear(_ advertisement: HorizonAdvertisement, from address: PeerAddress, rssi: Int) throws {
        let data = try advertisement.advertisingData()
        realTime.execute { [self] in
            let handler = state.withLock { $0.scanHandler }
            handler?(Sighting(address: address, advertisingData: data, rssi: rssi, receivedAt: realTime.now))
        }
    }

    private final class Advertisement: AdvertisingSet {
        let onStop: @Sendable () -> Void
        init(onStop: @escaping @Sendable () -> Void) { self.onStop = onStop }
        func stop() { onStop() }
    }
}
