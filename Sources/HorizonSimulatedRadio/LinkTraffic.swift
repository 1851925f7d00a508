import HorizonRadio

/// What one simulated link has carried: frames and payload bytes per direction, and how often
/// the sending side changed. The benchmarks read it to report bytes on air and round
/// trips per payment; roles never see it.
///
/// A frame counts when it is put on air, whatever a fault then does to it (a dropped frame still
/// took air time); frames refused by `send` (too large, link closed locally) and frames sent after
/// radio contact was lost do not count, exactly as for `RadioSimulation.framesSent(on:)`.
/// Bytes are ATT payload bytes, the `ByteLink` payloads as sent; the ATT, L2CAP and link-layer
/// headers a real radio adds are not included.
public struct LinkTraffic: Sendable, Equatable {
    /// The link's identifier (`SimulatedLinkEndpoint.identifier`).
    public let linkID: Int
    /// The device that connected (the wallet, in a payment).
    public let central: PeerAddress
    /// The device that accepted (the terminal, in a payment).
    public let peripheral: PeerAddress
    /// The ATT MTU the link runs at.
    public let attMTU: Int
    public private(set) var centralFrames = 0
    public private(set) var peripheralFrames = 0
    public private(set) var centralBytes = 0
    public private(set) var peripheralBytes = 0
    /// How many frames were sent by the other side than the frame before (the first frame
    /// counts too). An exchange the central starts and the peripheral answers, however many
    /// frames each side needs, adds two: `turns / 2` is the number of complete round trips
    /// when the central speaks first.
    public private(set) var turns = 0
    /// Who sent the last frame: nil before the first one.
    private var lastSenderWasCentral: Bool?

    init(linkID: Int, central: PeerAddress, peripheral: PeerAddress, attMTU: Int) {
        self.linkID = linkID
        self.central = central
        self.peripheral = peripheral
        self.attMTU = attMTU
    }

    /// Whether the last frame so far came from the central (nil before the first).
    public var lastFrameWasFromCentral: Bool? { lastSenderWasCentral }

    public var frames: Int { centralFrames + peripheralFrames }
    public var bytes: Int { centralBytes + peripheralBytes }

    mutating func count(_ byteCount: Int, fromCentral: Bool) {
        if fromCentral {
            centralFrames += 1
            centralBytes += byteCount
        } else {
            peripheralFrames += 1
            peripheralBytes += byteCount
        }
        if lastSenderWasCentral != fromCentral { turns += 1 }
        lastSenderWasCentral = fromCentral
    }
}
