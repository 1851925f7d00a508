import HorizonCore
import HorizonLink
import HorizonRadio
import HorizonSimulatedRadio
import Testing

// The message link runs here over the real simulated radio (`RadioSimulation`): a terminal that
// advertises and accepts, a wallet that connects, one link between them with the radio's own
// connection events, MTU, close and loss rules, and faults planned with `injectFaultOnNextLink`
// or `injectFault(_:atFrame:on:)`. Virtual times in these tests are offsets from the moment the
// link opened (the anchor of its connection events): with the default 30 ms connection interval
// and 4 packets per event, a frame sent at offset 0 arrives at offset 30 ms.

/// A mutable cell that `@Sendable` radio callbacks write into. Every callback of a simulation
/// runs on the thread that calls `run`, one at a time, so no lock is needed.
final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

/// A terminal (peripheral) and a wallet (central) of one `RadioSimulation`, linked.
struct SimulatedLinkPair {
    let simulation: RadioSimulation
    let terminal: SimulatedDevice
    let wallet: SimulatedDevice
    /// The wallet's end (central).
    let central: SimulatedLinkEndpoint
    /// The terminal's end (peripheral).
    let peripheral: SimulatedLinkEndpoint
    /// When the link came up; every offset in these tests counts from here.
    let openedAt: Instant

    /// Both devices ask for `attMTU`; `faults` are planned for the link before it opens (frame
    /// indices count both directions from 0). The terminal stops advertising once linked, so
    /// the simulation runs dry when the link has nothing left to do.
    init(attMTU: Int = 247, faults: [Int: FrameFault] = [:], seed: UInt64 = 1) throws {
        let simulation = RadioSimulation(seed: seed, recordsTrace: true)
        self.simulation = simulation
        let parameters = LinkParameters(attMTU: attMTU)
        terminal = try simulation.addDevice(
            name: "terminal", configuration: DeviceConfiguration(position: .origin, link: parameters))
        wallet = try simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 1, y: 0), link: parameters))
        let accepted = Box<[any ByteLink]>([])
        terminal.setConnectionHandler { accepted.value.append($0) }
        let flags = try AdvertisingData(structures: [AdvertisingData.flagsStructure]).encoded()
        let advertising = try terminal.startAdvertising(flags, interval: .milliseconds(100))
        for (frame, fault) in faults { simulation.injectFaultOnNextLink(fault, atFrame: frame) }
        let result = Box<Result<any ByteLink, RadioError>?>(nil)
        wallet.connect(to: terminal.address, timeout: .seconds(1)) { result.value = $0 }
        try #require(simulation.run(until: { result.value != nil }, timeout: .seconds(1)))
        advertising.stop()
        central = try #require(try result.value?.get() as? SimulatedLinkEndpoint)
        try #require(accepted.value.count == 1)
        peripheral = try #require(accepted.value.first as? SimulatedLinkEndpoint)
        openedAt = simulation.now
        try #require(central.attMTU == attMTU && peripheral.attMTU == attMTU)
    }

    /// The instant `milliseconds` after the link opened.
    func time(_ milliseconds: Int) -> Instant { openedAt + .milliseconds(milliseconds) }

    /// Runs `action` `milliseconds` after the link opened.
    func at(_ milliseconds: Int, _ action: @escaping @Sendable () -> Void) {
        simulation.schedule(after: time(milliseconds) - simulation.now, action)
    }

    /// Runs the simulation until `milliseconds` after the link opened.
    func run(until milliseconds: Int) { simulation.run(until: time(milliseconds)) }

    /// Every frame `device` put on air on this link, in order, as the simulation's trace records
    /// them (`<ms> frame #<link>.<index> <sender> <hex>[ fault=<fault>]`), dropped ones included.
    func framesOnAir(from device: SimulatedDevice) -> [[UInt8]] {
        simulation.trace.compactMap { line -> [UInt8]? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count >= 5, fields[1] == "frame", fields[2].hasPrefix("#\(central.identifier)."),
                fields[3] == device.name
            else { return nil }
            return [UInt8](hexString: String(fields[4]))
        }
    }

    /// Frames the wallet (central) put on air.
    var walletFrames: [[UInt8]] { framesOnAir(from: wallet) }
}

/// What one message link delivered and how it ended, with virtual times.
final class MessageLog: @unchecked Sendable {
    var messages: [[UInt8]] = []
    var ends: [(MessageLinkEnd, Instant)] = []

    func handler(clock: any Scheduler) -> MessageLinkHandler {
        MessageLinkHandler(
            onMessage: { [self] in messages.append($0) },
            onEnd: { [self] in ends.append(($0, clock.now)) })
    }

    var endReasons: [MessageLinkEnd] { ends.map(\.0) }
    var endTimes: [Instant] { ends.map(\.1) }
}

/// What a raw `ByteLink` end received and how it closed.
final class RawLog: @unchecked Sendable {
    var payloads: [[UInt8]] = []
    var closes: [LinkCloseReason] = []

    func attach(_ link: any ByteLink) {
        link.setHandler(
            ByteLinkHandler(onReceive: { [self] in payloads.append($0) }, onClose: { [self] in closes.append($0) }))
    }
}

/// A wallet and a terminal talking through message links over one simulated radio link.
struct MessagePair {
    let radio: SimulatedLinkPair
    let wallet: MessageLink
    let terminal: MessageLink
    let walletLog = MessageLog()
    let terminalLog = MessageLog()

    init(attMTU: Int = 247, limits: LinkLimits = LinkLimits(), faults: [Int: FrameFault] = [:], start: Bool = true)
        throws
    {
        radio = try SimulatedLinkPair(attMTU: attMTU, faults: faults)
        wallet = try MessageLink(link: radio.central, scheduler: radio.wallet.scheduler, limits: limits)
        terminal = try MessageLink(link: radio.peripheral, scheduler: radio.terminal.scheduler, limits: limits)
        if start {
            startWallet()
            terminal.start(terminalLog.handler(clock: radio.simulation))
        }
    }

    func startWallet() { wallet.start(walletLog.handler(clock: radio.simulation)) }
}

/// A wallet's message link facing a terminal that writes raw frames (to break the rules).
struct RawPeer {
    let radio: SimulatedLinkPair
    let wallet: MessageLink
    let walletLog = MessageLog()
    let terminalRaw = RawLog()

    init(attMTU: Int = 23, limits: LinkLimits = LinkLimits()) throws {
        radio = try SimulatedLinkPair(attMTU: attMTU)
        wallet = try MessageLink(link: radio.central, scheduler: radio.wallet.scheduler, limits: limits)
        wallet.start(walletLog.handler(clock: radio.simulation))
        terminalRaw.attach(radio.peripheral)
    }
}

/// A `ByteLink` with an MTU below Bluetooth LE's minimum of 23, which no radio (simulated or
/// real) opens. It only records what is sent and hands frames to its handler on request: it is
/// here to show where `MessageLink` draws its own line, below anything the radio allows.
final class UndersizedLink: ByteLink, @unchecked Sendable {
    let peer = PeerAddress("00:00:00:00:00:00")
    let attMTU: Int
    private(set) var sent: [[UInt8]] = []
    private var handler: ByteLinkHandler?

    init(attMTU: Int) { self.attMTU = attMTU }

    func setHandler(_ handler: ByteLinkHandler) { self.handler = handler }
    func send(_ payload: [UInt8]) throws(RadioError) {
        guard payload.count <= maximumPayloadSize else {
            throw .payloadTooLarge(size: payload.count, maximum: maximumPayloadSize)
        }
        sent.append(payload)
    }
    func close() {}
    func receive(_ payload: [UInt8]) { handler?.onReceive(payload) }
}

let linkClosedError = LinkError.radio(RadioErrorDescription("the link is closed"))
