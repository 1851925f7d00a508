import HorizonCore
import HorizonRadio
import HorizonSimulatedRadio
import Testing

/// A mutable cell that `@Sendable` radio callbacks write into. Every callback of a simulation
/// runs on the thread that calls `run`, one at a time, so no lock is needed.
final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

/// Advertising data of `count` bytes: flags, then manufacturer data filled with `marker`.
func advertisingBytes(marker: UInt8 = 0x42, count: Int = 11) -> [UInt8] {
    precondition(count >= 5)
    let payload = [UInt8](repeating: marker, count: count - 7)
    let data = AdvertisingData(structures: [
        AdvertisingData.flagsStructure, AdvertisingData.manufacturerStructure(companyID: 0xFFFF, payload: payload),
    ])
    return try! data.encoded()
}

/// Milliseconds of virtual time since the simulation started.
func millis(_ instant: Instant) -> Double { Double(instant.nanoseconds) / 1_000_000 }

/// What one end of a link has received, with virtual arrival times, and how it closed.
final class LinkRecorder: @unchecked Sendable {
    var received: [[UInt8]] = []
    var arrivals: [Instant] = []
    var closes: [(LinkCloseReason, Instant)] = []

    func attach(_ link: any ByteLink, clock: RadioSimulation) {
        link.setHandler(
            ByteLinkHandler(
                onReceive: { [self] payload in
                    received.append(payload)
                    arrivals.append(clock.now)
                },
                onClose: { [self] reason in closes.append((reason, clock.now)) }))
    }

    var closeReasons: [LinkCloseReason] { closes.map(\.0) }
    var arrivalMillis: [Double] { arrivals.map(millis) }
}

/// A terminal (peripheral, advertising, accepting links) and a wallet (central) linked together.
struct LinkedPair {
    let simulation: RadioSimulation
    let terminal: SimulatedDevice
    let wallet: SimulatedDevice
    /// The wallet's end (central).
    let central: SimulatedLinkEndpoint
    /// The terminal's end (peripheral).
    let peripheral: SimulatedLinkEndpoint
    let centralRecorder = LinkRecorder()
    let peripheralRecorder = LinkRecorder()
    /// Virtual time the link came up (the anchor of its connection events).
    let openedAt: Instant

    /// Builds the pair and connects at virtual time zero; the link opens after the wallet's
    /// connection setup time.
    init(
        seed: UInt64 = 1, wallet walletLink: LinkParameters = LinkParameters(),
        terminal terminalLink: LinkParameters = LinkParameters(), walletPosition: Position = Position(x: 1, y: 0),
        recordsTrace: Bool = false, prepare: (RadioSimulation) -> Void = { _ in }
    ) throws {
        let simulation = RadioSimulation(seed: seed, recordsTrace: recordsTrace)
        self.simulation = simulation
        terminal = try simulation.addDevice(
            name: "terminal", configuration: DeviceConfiguration(position: .origin, link: terminalLink))
        wallet = try simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: walletPosition, link: walletLink))
        let accepted = Box<[any ByteLink]>([])
        terminal.setConnectionHandler { link in accepted.value.append(link) }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        prepare(simulation)
        let result = Box<Result<any ByteLink, RadioError>?>(nil)
        wallet.connect(to: terminal.address, timeout: .seconds(5)) { result.value = $0 }
        let connected = simulation.run(until: { result.value != nil }, timeout: .seconds(6))
        try #require(connected)
        let link = try #require(try result.value?.get())
        central = try #require(link as? SimulatedLinkEndpoint)
        try #require(accepted.value.count == 1)
        peripheral = try #require(accepted.value.first as? SimulatedLinkEndpoint)
        openedAt = simulation.now
        centralRecorder.attach(central, clock: simulation)
        peripheralRecorder.attach(peripheral, clock: simulation)
    }

    /// Runs `action` at `offset` after the link opened.
    func at(_ offset: Duration, _ action: @escaping @Sendable () -> Void) {
        let delay = (openedAt + offset) - simulation.now
        simulation.schedule(after: delay, action)
    }

    /// Runs the simulation until `offset` after the link opened.
    func run(untilOffset offset: Duration) { simulation.run(until: openedAt + offset) }

    /// Milliseconds since the link opened.
    func offsetMillis(_ instant: Instant) -> Double { millis(instant) - millis(openedAt) }
}

/// One-byte payloads numbered from `start`.
func numbered(_ count: Int, from start: Int = 0) -> [[UInt8]] {
    (start..<(start + count)).map { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
}

/// The median of some readings.
func median(_ values: [Int]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? Double(sorted[middle]) : Double(sorted[middle - 1] + sorted[middle]) / 2
}
