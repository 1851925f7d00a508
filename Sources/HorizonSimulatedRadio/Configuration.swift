import HorizonCore
import HorizonRadio

/// A place in the simulated room, in metres.
public struct Position: Sendable, Equatable, CustomStringConvertible {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    public static let origin = Position(x: 0, y: 0)

    public func distance(to other: Position) -> Double {
        let dx = x - other.x
        let dy = y - other.y
        return (dx * dx + dy * dy).squareRoot()
    }

    public var description: String { "(\(x), \(y))" }
}

/// How signal strength falls with distance: the log-distance path-loss model,
/// `rssi = measuredPower - 10 * exponent * log10(distance) + noise`.
public struct PathLossModel: Sendable, Equatable {
    /// RSSI at one metre, dBm (a typical BLE dongle at 0 dBm transmit power).
    public var measuredPowerAtOneMetre: Double
    /// 2 in free space, 2.5 to 4 indoors.
    public var exponent: Double
    /// Standard deviation of the Gaussian noise added to every reading, dB.
    public var noiseStandardDeviation: Double
    /// Weakest signal a receiver still hears, dBm. Devices further away neither see nor link.
    public var sensitivity: Double

    public init(
        measuredPowerAtOneMetre: Double = -59, exponent: Double = 2.2, noiseStandardDeviation: Double = 2.0,
        sensitivity: Double = -95
    ) {
        self.measuredPowerAtOneMetre = measuredPowerAtOneMetre
        self.exponent = exponent
        self.noiseStandardDeviation = noiseStandardDeviation
        self.sensitivity = sensitivity
    }

    /// The expected RSSI at `distance` metres, before noise. Closer than 10 cm counts as 10 cm.
    public func meanRSSI(atDistance distance: Double) -> Double {
        measuredPowerAtOneMetre - 10 * exponent * log10(max(distance, 0.1))
    }

    public func isInRange(distance: Double) -> Bool { meanRSSI(atDistance: distance) >= sensitivity }
}

/// Timing and quality of a simulated connection, chosen by the central (as in BLE).
public struct LinkParameters: Sendable, Equatable {
    /// The ATT MTU this device asks for; a link uses the smaller of both sides' values.
    public var attMTU: Int
    /// Time between connection events; packets travel only at connection events.
    public var connectionInterval: Duration
    /// Extra one-way delay added to every packet (host and controller processing).
    public var latency: Duration
    /// Probability that one link-layer transmission fails. Like real BLE, a failed packet is
    /// retransmitted at the next connection event: loss delays, it does not lose.
    public var lossRate: Double
    /// Packets one direction carries per connection event.
    public var packetsPerEvent: Int
    /// How long after radio contact ends both sides notice.
    public var supervisionTimeout: Duration
    /// Time from a connect request to the link being up.
    public var connectionSetupTime: Duration

    public init(
        attMTU: Int = 247, connectionInterval: Duration = .milliseconds(30), latency: Duration = .zero,
        lossRate: Double = 0, packetsPerEvent: Int = 4, supervisionTimeout: Duration = .seconds(2),
        connectionSetupTime: Duration = .milliseconds(60)
    ) {
        self.attMTU = attMTU
        self.connectionInterval = connectionInterval
        self.latency = latency
        self.lossRate = lossRate
        self.packetsPerEvent = packetsPerEvent
        self.supervisionTimeout = supervisionTimeout
        self.connectionSetupTime = connectionSetupTime
    }

    /// Checks every value against what Bluetooth LE allows.
    public func validate() throws(RadioError) {
        guard (23...517).contains(attMTU) else {
            throw .invalidConfiguration("ATT MTU \(attMTU) is outside 23...517")
        }
        guard connectionInterval >= .microseconds(7500), connectionInterval <= .seconds(4) else {
            throw .invalidConfiguration("connection interval must be 7.5 ms to 4 s")
        }
        guard latency >= .zero else { throw .invalidConfiguration("latency must not be negative") }
        guard lossRate >= 0, lossRate < 1 else { throw .invalidConfiguration("loss rate must be in [0, 1)") }
        guard packetsPerEvent >= 1 else { throw .invalidConfiguration("at least one packet per event") }
        guard supervisionTimeout > .zero, connectionSetupTime >= .zero else {
            throw .invalidConfiguration("timeouts must be positive")
        }
    }
}

/// One simulated Bluetooth device.
public struct DeviceConfiguration: Sendable, Equatable {
    public var position: Position
    public var link: LinkParameters
    /// Virtual controllers (and some dongles) report no RSSI; sightings then carry nil.
    public var reportsRSSI: Bool
    /// Offset of this device's wall clock from true time, to test skew between devices.
    public var wallClockSkew: Duration
    /// How much stronger (positive) or weaker than the path-loss model's reference this device
    /// transmits, in dB: every RSSI others measure from it moves by this much.
    public var transmitPowerOffset: Double

    public init(
        position: Position = .origin, link: LinkParameters = LinkParameters(), reportsRSSI: Bool = true,
        wallClockSkew: Duration = .zero, transmitPowerOffset: Double = 0
    ) {
        self.position = position
        self.link = link
        self.reportsRSSI = reportsRSSI
        self.wallClockSkew = wallClockSkew
        self.transmitPowerOffset = transmitPowerOffset
    }
}

/// What can happen to one frame on a link, by plan or by chance.
public enum FrameFault: Sendable, Equatable, CustomStringConvertible {
    /// Radio contact ends as this frame is sent: it and everything after it are lost, and both
    /// sides see `connectionLost` after the supervision timeout.
    case cut
    /// This frame vanishes; the link stays up.
    case drop
    /// This frame arrives twice.
    case duplicate
    /// This frame arrives after the next frame sent in the same direction.
    case reorder

    public var description: String {
        switch self {
        case .cut: "cut"
        case .drop: "drop"
        case .duplicate: "duplicate"
        case .reorder: "reorder"
        }
    }
}

/// Per-frame probabilities of random faults, drawn from the link's own seeded generator.
public struct FaultProbabilities: Sendable, Equatable {
    public var cut: Double
    public var drop: Double
    public var duplicate: Double
    public var reorder: Double

    public init(cut: Double = 0, drop: Double = 0, duplicate: Double = 0, reorder: Double = 0) {
        self.cut = cut
        self.drop = drop
        self.duplicate = duplicate
        self.reorder = reorder
    }

    public static let none = FaultProbabilities()
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#else
    import Foundation
#endif
