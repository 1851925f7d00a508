import HorizonCore
import HorizonLink
import HorizonRadio
import Synchronization

/// The link layer's framing: arbitrary fragment sequences into a `Reassembler` (checked against
/// a small reference model of the fragment format) and into a whole `MessageLink` with its
/// reassembly timer and close handling.
///
/// Input: a configuration byte (bits 0-2 the message size limit, bit 3 MessageLink instead of a
/// bare Reassembler, bits 4-5 how the link ends, bit 6 six seconds between fragments), an MTU
/// byte for the re-fragmenting round trip, then fragments as length-prefixed chunks.
enum FrameFuzz {
    static let limits = [0, 1, 16, 100, 300, LinkLimits.defaultMaximumMessageSize, 65_535, 70_000]

    static func run(_ input: [UInt8]) {
        var cursor = InputCursor(input)
        let configuration = cursor.byte()
        let limit = limits[Int(configuration & 0x07)]
        let mtu = min(517, 23 + Int(cursor.byte()) * 2)
        var fragments: [[UInt8]] = []
        while !cursor.isAtEnd { fragments.append(cursor.chunk()) }
        if configuration & 0x08 == 0 {
            reassemble(fragments, limit: limit, mtu: mtu)
        } else {
            throughMessageLink(
                fragments, limit: limit, ending: (configuration >> 4) & 0x03, slow: configuration & 0x40 != 0)
        }
    }

    /// Feeds the fragments to a Reassembler and to the reference model; after an error both
    /// start afresh (as a new link would), so one input exercises many sequences.
    static func reassemble(_ fragments: [[UInt8]], limit: Int, mtu: Int) {
        var reassembler = Reassembler(maximumMessageSize: limit)
        var model = ReferenceReassembler(maximumMessageSize: min(limit, FragmentFormat.absoluteMaximumMessageSize))
        for (index, fragment) in fragments.enumerated() {
            let now = Instant(nanoseconds: Int64(index) * 1_000_000)
            let expected = model.receive(fragment)
            do throws(LinkError) {
                let message = try reassembler.receive(fragment, at: now)
                guard case .message(let modelMessage) = expected, modelMessage == message else {
                    finding(
                        "fragment \(index): reassembler gave \(message.map { "\($0.count) bytes" } ?? "nothing"), model \(expected)"
                    )
                }
                if let message {
                    guard message.count <= reassembler.maximumMessageSize else {
                        finding(
                            "a \(message.count)-byte message passed the \(reassembler.maximumMessageSize)-byte limit")
                    }
                    roundTrip(message, limit: reassembler.maximumMessageSize, mtu: mtu)
                }
            } catch {
                guard case .error = expected else {
                    finding("fragment \(index): reassembler refused (\(error)), model \(expected)")
                }
                _ = error.description
                reassembler = Reassembler(maximumMessageSize: limit)
                model = ReferenceReassembler(maximumMessageSize: min(limit, FragmentFormat.absoluteMaximumMessageSize))
            }
            guard reassembler.isInsideMessage == (reassembler.incompleteMessageError != nil),
                reassembler.isInsideMessage == (reassembler.messageStartedAt != nil)
            else { finding("the reassembler's half-message state disagrees with itself") }
        }
    }

    /// Whatever reassembles also fragments back, at the given MTU, into fragments that
    /// reassemble to the same bytes.
    static func roundTrip(_ message: [UInt8], limit: Int, mtu: Int) {
        do throws(LinkError) {
            var fragmenter = try Fragmenter(maximumFragmentSize: mtu - 3, maximumMessageSize: limit)
            let pieces = try fragmenter.fragments(of: message)
            var reassembler = Reassembler(maximumMessageSize: limit)
            for (index, piece) in pieces.enumerated() {
                guard piece.count <= mtu - 3 else { finding("a \(piece.count)-byte fragment at MTU \(mtu)") }
                let result = try reassembler.receive(piece, at: .zero)
                if index < pieces.count - 1, result != nil { finding("a message ended before its last fragment") }
                if index == pieces.count - 1, result != message { finding("the round trip changed the message") }
            }
        } catch {
            finding("a message that reassembled does not fragment and reassemble again: \(error)")
        }
    }

    /// The same fragments through a MessageLink: each message delivered once, in order, nothing
    /// after the end, the end reported once, and a framing failure closes the link.
    static func throughMessageLink(_ fragments: [[UInt8]], limit: Int, ending: UInt8, slow: Bool) {
        let scheduler = ManualScheduler(wallClockAtStart: 1_800_000_000)
        let link = FakeLink(attMTU: 247)
        let messageLink: MessageLink
        do {
            messageLink = try MessageLink(
                link: link, scheduler: scheduler,
                limits: LinkLimits(maximumMessageSize: limit, reassemblyTimeout: .seconds(10)))
        } catch {
            finding("a MessageLink could not be made at MTU 247: \(error)")
        }
        let log = Mutex<(messages: [[UInt8]], ends: [MessageLinkEnd], messageAfterEnd: Bool)>(([], [], false))
        messageLink.start(
            MessageLinkHandler(
                onMessage: { message in
                    log.withLock { log in
                        if !log.ends.isEmpty { log.messageAfterEnd = true }
                        log.messages.append(message)
                    }
                },
                onEnd: { end in log.withLock { $0.ends.append(end) } }))
        var expected: [[UInt8]] = []
        var reference = Reassembler(maximumMessageSize: limit)
        var referenceFailed = false
        for fragment in fragments {
            if slow { scheduler.advance(by: .seconds(6)) }
            if !referenceFailed, !link.isClosed {
                do throws(LinkError) {
                    if let message = try reference.receive(fragment, at: scheduler.now) { expected.append(message) }
                } catch {
                    referenceFailed = true
                }
            }
            link.deliver(fragment)
        }
        switch ending {
        case 1: scheduler.advance(by: .seconds(11))
        case 2: link.peerClosed(.closedByPeer)
        case 3: messageLink.close()
        default: break
        }
        defer {
            link.tearDown()
            scheduler.tearDown()
        }
        let (messages, ends, messageAfterEnd) = log.withLock { ($0.messages, $0.ends, $0.messageAfterEnd) }
        guard !messageAfterEnd else { finding("a message was delivered after the link ended") }
        guard ends.count <= 1 else { finding("the link's end was reported \(ends.count) times") }
        if !slow, messages != expected {
            finding("the MessageLink delivered \(messages.count) message(s), a bare Reassembler \(expected.count)")
        }
        if case .failed? = ends.first, !link.isClosed { finding("a framing failure left the link open") }
        if messageLink.bytesReceived > fragments.reduce(0, { $0 + $1.count }) {
            finding("the link counted more bytes than arrived")
        }
    }

    static func seeds() -> [[UInt8]] {
        var seeds: [[UInt8]] = []
        let messages: [[UInt8]] = [[], [0x42], Array(0..<200), (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }]
        for (mtuByte, mtu) in [(0, 23), (112, 247)] {
            for (index, message) in messages.enumerated() {
                guard var fragmenter = try? Fragmenter(maximumFragmentSize: mtu - 3, maximumMessageSize: 8_256),
                    let pieces = try? fragmenter.fragments(of: message)
                else { continue }
                // Raw reassembly with the default limit, and the same through a MessageLink.
                seeds.append([0x05, UInt8(mtuByte)] + chunked(pieces))
                seeds.append([0x0D | UInt8(index % 4) << 4, UInt8(mtuByte)] + chunked(pieces))
            }
        }
        // Two messages back to back, then one cut short; and the classic breakages.
        if var fragmenter = try? Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 8_256),
            let first = try? fragmenter.fragments(of: Array(repeating: 0x11, count: 50)),
            let second = try? fragmenter.fragments(of: Array(repeating: 0x22, count: 30))
        {
            seeds.append([0x05, 0] + chunked(first + second))
            seeds.append([0x05, 0] + chunked(first + Array(second.dropLast())))
            seeds.append([0x1D, 0] + chunked(first + Array(second.dropLast())))
            seeds.append([0x05, 0] + chunked([first[1]] + first))
            seeds.append([0x05, 0] + chunked(first + [first[0]]))
            seeds.append([0x4D, 0] + chunked(first))
        }
        seeds.append([0x02, 0] + chunked([[0xC0, 0x00, 0x11], [0xC1, 0xFF, 0xFF]]))
        return seeds
    }
}

/// The fragment format of `FragmentFormat`, written again from its description as a plain
/// state machine: the oracle the Reassembler is compared with.
struct ReferenceReassembler {
    enum Outcome: CustomStringConvertible {
        case message([UInt8]?)
        case error

        var description: String {
            switch self {
            case .message(let message?): "a \(message.count)-byte message"
            case .message(nil): "no message yet"
            case .error: "an error"
            }
        }
    }

    let maximumMessageSize: Int
    var sequence = 0
    var message: [UInt8]?
    var declared = 0

    init(maximumMessageSize: Int) { self.maximumMessageSize = maximumMessageSize }

    mutating func receive(_ fragment: [UInt8]) -> Outcome {
        guard !fragment.isEmpty else { return .error }
        let header = Int(fragment[0])
        guard header % 64 == sequence else { return .error }
        sequence = (sequence + 1) % 64
        let isFirst = header >= 128
        let isLast = (header / 64) % 2 == 1
        var data = Array(fragment[1...])
        if isFirst {
            if message != nil { return .error }
            if data.count < 2 { return .error }
            declared = Int(data[0]) * 256 + Int(data[1])
            if declared > maximumMessageSize { return .error }
            data.removeFirst(2)
            message = []
        }
        guard var current = message else { return .error }
        current += data
        if current.count > declared { return .error }
        message = current
        guard isLast else { return .message(nil) }
        message = nil
        return current.count == declared ? .message(current) : .error
    }
}
