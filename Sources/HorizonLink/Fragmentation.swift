import HorizonCore

/// Why the link layer refused to send or reassemble a message.
public enum LinkError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A message (to send, or declared by a peer's first fragment) above the link's limit.
    case messageTooLarge(size: Int, maximum: Int)
    /// The MTU leaves no room for a fragment's header and a byte of data.
    case mtuTooSmall(maximumPayloadSize: Int)
    /// A fragment's sequence number is not the next one: a frame was lost, repeated or reordered.
    case outOfSequence(expected: UInt8, received: UInt8)
    /// A continuation fragment arrived with no message started.
    case continuationWithoutStart
    /// A new message started before the previous one was complete (interleaved streams).
    case startInsideMessage
    /// The fragments' data does not add up to the length the first fragment declared.
    case lengthMismatch(declared: Int, received: Int)
    /// A fragment too short to carry its header.
    case malformedFragment(length: Int)
    /// The link closed, or the reassembly timeout passed, with a message half received.
    case truncatedMessage(received: Int, declared: Int)
    /// The radio refused the frame.
    case radio(RadioErrorDescription)

    public var description: String {
        switch self {
        case .messageTooLarge(let size, let maximum): "message of \(size) bytes exceeds the link limit of \(maximum)"
        case .mtuTooSmall(let size): "packets of \(size) bytes cannot carry a fragment"
        case .outOfSequence(let expected, let received):
            "fragment \(received) arrived where \(expected) was expected (lost, repeated or reordered frame)"
        case .continuationWithoutStart: "continuation fragment without a message start"
        case .startInsideMessage: "a new message started inside another (interleaved fragments)"
        case .lengthMismatch(let declared, let received):
            "message declared \(declared) bytes but its fragments carry \(received)"
        case .malformedFragment(let length): "fragment of \(length) bytes is too short for its header"
        case .truncatedMessage(let received, let declared):
            "message cut off after \(received) of \(declared) bytes"
        case .radio(let error): error.text
        }
    }
}

/// A radio error's text, carried inside `LinkError` without making the link layer's error type
/// depend on every radio's details.
public struct RadioErrorDescription: Equatable, Sendable {
    public let text: String
    public init(_ text: String) { self.text = text }
}

/// The fragment format.
///
/// Every fragment starts with one header byte: bit 7 = first fragment of a message, bit 6 = last
/// fragment, bits 0-5 = a sequence number counting fragments in this direction modulo 64, so a
/// lost, repeated or reordered frame is detected at once. A first fragment then carries the
/// message's total length (16 bits, big endian), so the receiver refuses an oversized message
/// before buffering it. The rest is message data.
public enum FragmentFormat {
    public static let firstFlag: UInt8 = 0x80
    public static let lastFlag: UInt8 = 0x40
    public static let sequenceMask: UInt8 = 0x3F
    public static let headerSize = 1
    public static let lengthSize = 2
    /// The length field's ceiling; configured limits are lower.
    public static let absoluteMaximumMessageSize = Int(UInt16.max)
}

/// Splits messages into fragments that each fit one radio packet.
public struct Fragmenter: Sendable {
    public let maximumFragmentSize: Int
    public let maximumMessageSize: Int
    private var nextSequence: UInt8 = 0

    public init(maximumFragmentSize: Int, maximumMessageSize: Int) throws(LinkError) {
        guard maximumFragmentSize > FragmentFormat.headerSize + FragmentFormat.lengthSize else {
            throw .mtuTooSmall(maximumPayloadSize: maximumFragmentSize)
        }
        self.maximumFragmentSize = maximumFragmentSize
        self.maximumMessageSize = min(maximumMessageSize, FragmentFormat.absoluteMaximumMessageSize)
    }

    public mutating func fragments(of message: [UInt8]) throws(LinkError) -> [[UInt8]] {
        guard message.count <= maximumMessageSize else {
            throw .messageTooLarge(size: message.count, maximum: maximumMessageSize)
        }
        var fragments: [[UInt8]] = []
        var offset = 0
        var first = true
        repeat {
            var fragment: [UInt8] = [0]
            var room = maximumFragmentSize - FragmentFormat.headerSize
            if first {
                fragment.append(UInt8(message.count >> 8))
                fragment.append(UInt8(message.count & 0xFF))
                room -= FragmentFormat.lengthSize
            }
            let end = min(message.count, offset + room)
            fragment.append(contentsOf: message[offset..<end])
            offset = end
            var header = nextSequence & FragmentFormat.sequenceMask
            if first { header |= FragmentFormat.firstFlag }
            if offset == message.count { header |= FragmentFormat.lastFlag }
            fragment[0] = header
            nextSequence = (nextSequence &+ 1) & FragmentFormat.sequenceMask
            fragments.append(fragment)
            first = false
        } while offset < message.count
        return fragments
    }
}

/// Reassembles fragments into messages, refusing anything out of order or out of bounds.
public struct Reassembler: Sendable {
    public let maximumMessageSize: Int
    private var expectedSequence: UInt8 = 0
    private var buffer: [UInt8] = []
    private var declaredLength: Int?
    /// When the message in progress started, for the reassembly timeout.
    public private(set) var messageStartedAt: Instant?

    public init(maximumMessageSize: Int) {
        self.maximumMessageSize = min(maximumMessageSize, FragmentFormat.absoluteMaximumMessageSize)
    }

    /// Whether a message is half received.
    public var isInsideMessage: Bool { declaredLength != nil }

    /// Takes one fragment; returns a complete message when this fragment ends one.
    public mutating func receive(_ fragment: [UInt8], at now: Instant) throws(LinkError) -> [UInt8]? {
        guard let header = fragment.first else { throw .malformedFragment(length: 0) }
        let sequence = header & FragmentFormat.sequenceMask
        guard sequence == expectedSequence else {
            throw .outOfSequence(expected: expectedSequence, received: sequence)
        }
        expectedSequence = (expectedSequence &+ 1) & FragmentFormat.sequenceMask
        var data = fragment.dropFirst()
        if header & FragmentFormat.firstFlag != 0 {
            guard declaredLength == nil else { throw .startInsideMessage }
            guard data.count >= FragmentFormat.lengthSize else { throw .malformedFragment(length: fragment.count) }
            let length = Int(data[data.startIndex]) << 8 | Int(data[data.startIndex + 1])
            guard length <= maximumMessageSize else {
                throw .messageTooLarge(size: length, maximum: maximumMessageSize)
            }
            declaredLength = length
            messageStartedAt = now
            buffer.removeAll(keepingCapacity: true)
            buffer.reserveCapacity(length)
            data = data.dropFirst(FragmentFormat.lengthSize)
        }
        guard let declared = declaredLength else { throw .continuationWithoutStart }
        guard buffer.count + data.count <= declared else {
            throw .lengthMismatch(declared: declared, received: buffer.count + data.count)
        }
        buffer.append(contentsOf: data)
        guard header & FragmentFormat.lastFlag != 0 else { return nil }
        guard buffer.count == declared else { throw .lengthMismatch(declared: declared, received: buffer.count) }
        let message = buffer
        buffer.removeAll(keepingCapacity: true)
        declaredLength = nil
        messageStartedAt = nil
        return message
    }

    /// The error for a message left incomplete (the link closed or the timeout passed), if any.
    public var incompleteMessageError: LinkError? {
        declaredLength.map { .truncatedMessage(received: buffer.count, declared: $0) }
    }
}
