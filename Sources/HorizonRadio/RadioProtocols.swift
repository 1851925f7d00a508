import HorizonCore

/// A remote device's address as the radio names it (a BlueZ device path's MAC, or a simulated one).
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
}

/// One advertisement heard by a scanning central.
public struct Sighting: Sendable, Equatable {
    public let address: PeerAddress
    /// The advertising data exactly as received (AD structures, at most 31 bytes for legacy advertising).
    public let advertisingData: [UInt8]
    /// Received signal strength in dBm; nil when the controller cannot measure it (BlueZ reports 127
    /// for virtual controllers). RSSI ranks candidates and proves nothing.
    public let rssi: Int?
    public let receivedAt: Instant

    public init(address: PeerAddress, advertisingData: [UInt8], rssi: Int?, receivedAt: Instant) {
        self.address = address
        self.advertisingData = advertisingData
        self.rssi = rssi
        self.receivedAt = receivedAt
    }
}

/// Whether the local adapter can be used, in the reference SDK's terms.
public enum AdapterAvailability: Sendable, Equatable, CustomStringConvertible {
    case poweredOn
    case poweredOff
    case unauthorized
    case unsupported
    /// The Bluetooth service itself is missing (bluetoothd not running).
    case serviceUnavailable

    public var description: String {
        switch self {
        case .poweredOn: "powered on"
        case .poweredOff: "powered off"
        case .unauthorized: "not authorized"
        case .unsupported: "no Bluetooth LE adapter"
        case .serviceUnavailable: "Bluetooth service not running"
        }
    }
}

/// Why a link ended.
public enum LinkCloseReason: Sendable, Equatable, CustomStringConvertible {
    /// This side called `close()`.
    case closedLocally
    /// The other side disconnected on purpose.
    case closedByPeer
    /// The radio contact was lost (supervision timeout, out of range, peer powered off).
    case connectionLost

    public var description: String {
        switch self {
        case .closedLocally: "closed by this device"
        case .closedByPeer: "closed by the other device"
        case .connectionLost: "radio contact lost"
        }
    }
}

/// What a link reports to its owner. Both run on the radio's scheduler.
public struct ByteLinkHandler: Sendable {
    public var onReceive: @Sendable ([UInt8]) -> Void
    public var onClose: @Sendable (LinkCloseReason) -> Void

    public init(
        onReceive: @escaping @Sendable ([UInt8]) -> Void,
        onClose: @escaping @Sendable (LinkCloseReason) -> Void
    ) {
        self.onReceive = onReceive
        self.onClose = onClose
    }
}

/// A connected, ordered, reliable byte pipe between a central and a peripheral.
///
/// On BlueZ one `send` is one ATT write (wallet to terminal) or one notification (terminal to
/// wallet), so a payload never exceeds `maximumPayloadSize` (ATT MTU - 3, at most 510). The link
/// layer above fragments messages to fit.
public protocol ByteLink: AnyObject, Sendable {
    var peer: PeerAddress { get }
    /// The negotiated ATT MTU, 23 to 517.
    var attMTU: Int { get }
    /// The largest payload one `send` carries (see the extension's default).
    var maximumPayloadSize: Int { get }
    /// Sets where received payloads and the close go. Payloads that arrive before a handler is set
    /// are held and delivered when it is.
    func setHandler(_ handler: ByteLinkHandler)
    func send(_ payload: [UInt8]) throws(RadioError)
    func close()
}

/// The longest attribute value ATT allows (Core Specification, Vol 3 Part F, 3.2.9): a
/// notification carries at most this much, whatever the MTU.
public let maximumAttributeValueLength = 512

/// The longest value a central writes in one Write Request. bluetoothd up to at least 5.66
/// (Debian 12) checks the request's length *with* its 2-byte handle against 512, so it refuses a
/// 511- or 512-byte value ("Invalid Length") even at MTU 517; later releases check the value alone.
public let maximumWrittenValueLength = 510

extension ByteLink {
    /// The largest payload one `send` carries: the ATT MTU less the 3-byte ATT header, and never
    /// more than bluetoothd takes in one write (510). Links that add bytes of their own (the
    /// BlueZ peripheral's tag) say less.
    public var maximumPayloadSize: Int { min(attMTU - 3, maximumWrittenValueLength) }
}

/// A handle on one advertising set, to stop it.
public protocol AdvertisingSet: AnyObject, Sendable {
    func stop()
}

/// The terminal's side of a radio: advertise sessions and accept wallets' links.
public protocol PeripheralRadio: AnyObject, Sendable {
    var scheduler: any Scheduler { get }
    var availability: AdapterAvailability { get }
    /// Starts advertising `advertisingData` (complete AD structures, at most 31 bytes); returns
    /// once the advertisement is registered. Suspends rather than blocks while a backend answers.
    func startAdvertising(_ advertisingData: [UInt8], interval: Duration) async throws(RadioError)
        -> any AdvertisingSet
    /// Where links opened by centrals go. Set it before advertising.
    func setConnectionHandler(_ handler: @escaping @Sendable (any ByteLink) -> Void)
}

/// The wallet's side of a radio: scan for advertisements and connect to peripherals. Terminals use
/// it too, to notice other terminals nearby.
public protocol CentralRadio: AnyObject, Sendable {
    var scheduler: any Scheduler { get }
    var availability: AdapterAvailability { get }
    /// Starts scanning; sightings go to `handler` on the scheduler. Suspends rather than blocks
    /// while a backend answers.
    func startScanning(_ handler: @escaping @Sendable (Sighting) -> Void) async throws(RadioError)
    func stopScanning()
    /// Connects to `peer`; the completion runs on the scheduler, exactly once.
    func connect(
        to peer: PeerAddress, timeout: Duration,
        completion: @escaping @Sendable (Result<any ByteLink, RadioError>) -> Void)
}

/// A device's whole radio: the terminal advertises and serves, the wallet scans and connects, and
/// both release what they hold in the backend (advertisements, GATT objects, connections) on
/// `shutdown`, which the programs call on exit and on SIGINT/SIGTERM.
public protocol DeviceRadio: PeripheralRadio, CentralRadio {
    func shutdown()
}
