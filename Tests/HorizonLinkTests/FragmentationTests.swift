import HorizonCore
import HorizonLink
import HorizonTestSupport
import Testing

/// `count` recognisable bytes.
func message(_ count: Int, seed: UInt8 = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) }
}

/// How many fragments a message of `size` bytes needs at `fragmentSize` bytes per packet: the
/// first carries a 1-byte header and a 2-byte length, the others a 1-byte header.
func expectedFragmentCount(size: Int, fragmentSize: Int) -> Int {
    let firstRoom = fragmentSize - 3
    guard size > firstRoom else { return 1 }
    let rest = size - firstRoom
    return 1 + (rest + fragmentSize - 2) / (fragmentSize - 1)
}

@Suite("Fragmenter and Reassembler", .offTheCooperativePool)
struct FragmentationTests {
    static let sizes = [0, 1, 16, 17, 18, 19, 20, 100, 1000, 16384]
    /// ATT MTU 23, 185, 247 and 517, less the 3-byte ATT header.
    static let fragmentSizes = [20, 182, 244, 514]

    @Test("round trip", arguments: sizes, fragmentSizes)
    func roundTrip(size: Int, fragmentSize: Int) throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: fragmentSize, maximumMessageSize: 16384)
        var reassembler = Reassembler(maximumMessageSize: 16384)
        let original = message(size, seed: UInt8(fragmentSize & 0xFF))
        let fragments = try fragmenter.fragments(of: original)

        #expect(fragments.count == expectedFragmentCount(size: size, fragmentSize: fragmentSize))
        #expect(fragments.allSatisfy { $0.count <= fragmentSize })
        #expect(fragments.dropLast().allSatisfy { $0.count == fragmentSize }, "only the last fragment is short")
        #expect(fragments.reduce(0) { $0 + $1.count } == size + 2 + fragments.count)
        for (index, fragment) in fragments.enumerated() {
            let header = fragment[0]
            #expect((header & FragmentFormat.firstFlag != 0) == (index == 0))
            #expect((header & FragmentFormat.lastFlag != 0) == (index == fragments.count - 1))
            #expect(header & FragmentFormat.sequenceMask == UInt8(index % 64))
        }
        #expect(Array(fragments[0][1...2]) == [UInt8(size >> 8), UInt8(size & 0xFF)])

        var result: [UInt8]?
        for (index, fragment) in fragments.enumerated() {
            let output = try reassembler.receive(fragment, at: Instant(nanoseconds: Int64(index)))
            if index < fragments.count - 1 {
                #expect(output == nil)
                #expect(reassembler.isInsideMessage)
            } else {
                result = output
            }
        }
        #expect(result == original)
        #expect(!reassembler.isInsideMessage)
        #expect(reassembler.incompleteMessageError == nil)
        #expect(reassembler.messageStartedAt == nil)
    }

    @Test func manyMessagesInARowShareTheSequence() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 1000)
        var reassembler = Reassembler(maximumMessageSize: 1000)
        var sequences: [UInt8] = []
        for size in [0, 40, 17, 18, 500, 1, 1000, 3] {
            let original = message(size, seed: UInt8(size & 0xFF))
            var result: [UInt8]?
            for fragment in try fragmenter.fragments(of: original) {
                sequences.append(fragment[0] & FragmentFormat.sequenceMask)
                result = try reassembler.receive(fragment, at: .zero)
            }
            #expect(result == original)
        }
        #expect(sequences == (0..<sequences.count).map { UInt8($0 % 64) })
        #expect(sequences.count > 64)
    }

    // MARK: Exact layout

    @Test func formatConstants() {
        #expect(FragmentFormat.firstFlag == 0x80)
        #expect(FragmentFormat.lastFlag == 0x40)
        #expect(FragmentFormat.sequenceMask == 0x3F)
        #expect(FragmentFormat.headerSize == 1)
        #expect(FragmentFormat.lengthSize == 2)
        #expect(FragmentFormat.absoluteMaximumMessageSize == 65535)
    }

    @Test func fortyBytesInTwentyBytePackets() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 100)
        let data = message(40)
        let fragments = try fragmenter.fragments(of: data)
        #expect(fragments.count == 3)
        let first: [UInt8] = [0x80, 0x00, 0x28] + data[0..<17]
        let second: [UInt8] = [0x01] + data[17..<36]
        let third: [UInt8] = [0x42] + data[36..<40]
        #expect(fragments == [first, second, third])
        #expect(fragments.map(\.count) == [20, 20, 5])
    }

    @Test func emptyMessageIsOneFragment() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 100)
        #expect(try fragmenter.fragments(of: []) == [[0xC0, 0x00, 0x00]])
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(try reassembler.receive([0xC0, 0x00, 0x00], at: .zero) == [])
    }

    @Test func singleAndSplitBoundaries() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 100)
        // 17 bytes fill exactly one packet; 18 need a second.
        let seventeen = try fragmenter.fragments(of: message(17))
        let seventeenExpected: [UInt8] = [0xC0, 0x00, 0x11] + message(17)
        #expect(seventeen == [seventeenExpected])
        let eighteen = try fragmenter.fragments(of: message(18))
        let eighteenFirst: [UInt8] = [0x81, 0x00, 0x12] + message(17)
        #expect(eighteen == [eighteenFirst, [0x42, message(18)[17]]])
        // 17 + 19 = 36 fill exactly two packets.
        let thirtySix = try fragmenter.fragments(of: message(36))
        #expect(thirtySix.map(\.count) == [20, 20])
        #expect(thirtySix.map { $0[0] } == [0x83, 0x44])
    }

    @Test func smallestFragmentSize() throws {
        #expect(throws: LinkError.mtuTooSmall(maximumPayloadSize: 3)) {
            _ = try Fragmenter(maximumFragmentSize: 3, maximumMessageSize: 100)
        }
        #expect(throws: LinkError.mtuTooSmall(maximumPayloadSize: 0)) {
            _ = try Fragmenter(maximumFragmentSize: 0, maximumMessageSize: 100)
        }
        // Four bytes: the first fragment carries one data byte, the others three.
        var fragmenter = try Fragmenter(maximumFragmentSize: 4, maximumMessageSize: 100)
        let fragments = try fragmenter.fragments(of: [1, 2, 3, 4, 5])
        #expect(fragments == [[0x80, 0x00, 0x05, 1], [0x01, 2, 3, 4], [0x42, 5]])
    }

    @Test func sequenceWrapsAfterSixtyFourFragments() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 4, maximumMessageSize: 1000)
        // 1 + 3 * 69 = 208 bytes: 70 fragments.
        let data = message(208)
        let fragments = try fragmenter.fragments(of: data)
        #expect(fragments.count == 70)
        #expect(fragments[62][0] == 0x3E)
        #expect(fragments[63][0] == 0x3F)
        #expect(fragments[64][0] == 0x00)
        #expect(fragments[65][0] == 0x01)
        #expect(fragments[69][0] == 0x45)  // last, sequence 5
        var reassembler = Reassembler(maximumMessageSize: 1000)
        var result: [UInt8]?
        for fragment in fragments { result = try reassembler.receive(fragment, at: .zero) }
        #expect(result == data)
        // The next message continues at 6.
        #expect(try fragmenter.fragments(of: [9]) == [[0xC6, 0x00, 0x01, 9]])
    }

    // MARK: Limits

    @Test func fragmenterRefusesMessagesOverTheMaximum() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 100)
        #expect(fragmenter.maximumMessageSize == 100)
        #expect(fragmenter.maximumFragmentSize == 20)
        #expect(throws: LinkError.messageTooLarge(size: 101, maximum: 100)) {
            _ = try fragmenter.fragments(of: message(101))
        }
        // A refused message uses no sequence numbers.
        #expect(try fragmenter.fragments(of: [1]) == [[0xC0, 0x00, 0x01, 1]])
        #expect(try fragmenter.fragments(of: message(100)).count == 6)
    }

    @Test func limitsAreClampedToTheLengthField() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 514, maximumMessageSize: 1_000_000)
        #expect(fragmenter.maximumMessageSize == 65535)
        #expect(Reassembler(maximumMessageSize: 1_000_000).maximumMessageSize == 65535)
        #expect(throws: LinkError.messageTooLarge(size: 65536, maximum: 65535)) {
            _ = try fragmenter.fragments(of: [UInt8](repeating: 0, count: 65536))
        }
        let largest = message(65535)
        var reassembler = Reassembler(maximumMessageSize: 65535)
        var result: [UInt8]?
        for fragment in try fragmenter.fragments(of: largest) { result = try reassembler.receive(fragment, at: .zero) }
        #expect(result == largest)
    }

    // MARK: Reassembler errors

    @Test func refusesAnOversizedDeclaredLengthBeforeBuffering() {
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.messageTooLarge(size: 101, maximum: 100)) {
            try reassembler.receive([0x80, 0x00, 0x65, 1, 2], at: .zero)
        }
        #expect(!reassembler.isInsideMessage)
        var other = Reassembler(maximumMessageSize: 16384)
        #expect(throws: LinkError.messageTooLarge(size: 65535, maximum: 16384)) {
            try other.receive([0xC0, 0xFF, 0xFF], at: .zero)
        }
    }

    /// The three fragments of a 40-byte message in 20-byte packets.
    func threeFragments() throws -> [[UInt8]] {
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 100)
        return try fragmenter.fragments(of: message(40))
    }

    @Test func refusesADroppedFragment() throws {
        let fragments = try threeFragments()
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(try reassembler.receive(fragments[0], at: .zero) == nil)
        #expect(throws: LinkError.outOfSequence(expected: 1, received: 2)) {
            try reassembler.receive(fragments[2], at: .zero)
        }
    }

    @Test func refusesADuplicatedFragment() throws {
        let fragments = try threeFragments()
        var reassembler = Reassembler(maximumMessageSize: 100)
        _ = try reassembler.receive(fragments[0], at: .zero)
        _ = try reassembler.receive(fragments[1], at: .zero)
        #expect(throws: LinkError.outOfSequence(expected: 2, received: 1)) {
            try reassembler.receive(fragments[1], at: .zero)
        }
    }

    @Test func refusesAReorderedFragment() throws {
        let fragments = try threeFragments()
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.outOfSequence(expected: 0, received: 1)) {
            try reassembler.receive(fragments[1], at: .zero)
        }
    }

    @Test func refusesAReplayedCompleteMessage() throws {
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 100)
        let fragment = try fragmenter.fragments(of: [1, 2, 3])[0]
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(try reassembler.receive(fragment, at: .zero) == [1, 2, 3])
        #expect(throws: LinkError.outOfSequence(expected: 1, received: 0)) {
            try reassembler.receive(fragment, at: .zero)
        }
    }

    @Test func refusesAContinuationWithoutStart() {
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.continuationWithoutStart) { try reassembler.receive([0x00, 0xAA], at: .zero) }
        var lastOnly = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.continuationWithoutStart) { try lastOnly.receive([0x40, 0xAA], at: .zero) }
    }

    @Test func refusesAStartInsideAMessage() throws {
        let fragments = try threeFragments()
        var reassembler = Reassembler(maximumMessageSize: 100)
        _ = try reassembler.receive(fragments[0], at: .zero)
        // A second stream's first fragment, with the next sequence number.
        #expect(throws: LinkError.startInsideMessage) {
            try reassembler.receive([0xC1, 0x00, 0x01, 0xAA], at: .zero)
        }
    }

    @Test func refusesMoreDataThanDeclared() {
        var single = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.lengthMismatch(declared: 2, received: 3)) {
            try single.receive([0xC0, 0x00, 0x02, 1, 2, 3], at: .zero)
        }
        var notLast = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.lengthMismatch(declared: 2, received: 3)) {
            try notLast.receive([0x80, 0x00, 0x02, 1, 2, 3], at: .zero)
        }
        var split = Reassembler(maximumMessageSize: 100)
        #expect(throws: Never.self) { try split.receive([0x80, 0x00, 0x03, 1, 2], at: .zero) }
        #expect(throws: LinkError.lengthMismatch(declared: 3, received: 5)) {
            try split.receive([0x41, 3, 4, 5], at: .zero)
        }
    }

    @Test func refusesALastFragmentWithFewerBytesThanDeclared() {
        var single = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.lengthMismatch(declared: 5, received: 2)) {
            try single.receive([0xC0, 0x00, 0x05, 1, 2], at: .zero)
        }
        var split = Reassembler(maximumMessageSize: 100)
        #expect(throws: Never.self) { try split.receive([0x80, 0x00, 0x05, 1, 2], at: .zero) }
        #expect(throws: LinkError.lengthMismatch(declared: 5, received: 3)) {
            try split.receive([0x41, 3], at: .zero)
        }
    }

    @Test func refusesAnEmptyFragment() {
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.malformedFragment(length: 0)) { try reassembler.receive([], at: .zero) }
    }

    @Test func refusesAFirstFragmentTooShortForItsLength() {
        var headerOnly = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.malformedFragment(length: 1)) { try headerOnly.receive([0x80], at: .zero) }
        var oneLengthByte = Reassembler(maximumMessageSize: 100)
        #expect(throws: LinkError.malformedFragment(length: 2)) {
            try oneLengthByte.receive([0xC0, 0x00], at: .zero)
        }
    }

    @Test func incompleteMessageError() throws {
        let fragments = try threeFragments()
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(reassembler.incompleteMessageError == nil)
        #expect(reassembler.messageStartedAt == nil)
        _ = try reassembler.receive(fragments[0], at: Instant(nanoseconds: 5_000))
        #expect(reassembler.isInsideMessage)
        #expect(reassembler.messageStartedAt == Instant(nanoseconds: 5_000))
        #expect(reassembler.incompleteMessageError == .truncatedMessage(received: 17, declared: 40))
        _ = try reassembler.receive(fragments[1], at: Instant(nanoseconds: 9_000))
        #expect(reassembler.messageStartedAt == Instant(nanoseconds: 5_000), "the start, not the latest fragment")
        #expect(reassembler.incompleteMessageError == .truncatedMessage(received: 36, declared: 40))
        #expect(try reassembler.receive(fragments[2], at: .zero) == message(40))
        #expect(reassembler.incompleteMessageError == nil)
        #expect(reassembler.messageStartedAt == nil)
    }

    @Test func emptyContinuationFragmentsAreAccepted() throws {
        // A continuation may carry no data; the message still completes when its length is met.
        var reassembler = Reassembler(maximumMessageSize: 100)
        #expect(try reassembler.receive([0x80, 0x00, 0x02, 1], at: .zero) == nil)
        #expect(try reassembler.receive([0x01], at: .zero) == nil)
        #expect(try reassembler.receive([0x42, 2], at: .zero) == [1, 2])
    }

    @Test func errorDescriptions() {
        #expect(
            LinkError.outOfSequence(expected: 1, received: 2).description
                == "fragment 2 arrived where 1 was expected (lost, repeated or reordered frame)")
        #expect(
            LinkError.truncatedMessage(received: 17, declared: 40).description
                == "message cut off after 17 of 40 bytes")
        #expect(
            LinkError.messageTooLarge(size: 101, maximum: 100).description
                == "message of 101 bytes exceeds the link limit of 100")
        #expect(LinkError.radio(RadioErrorDescription("the link is closed")).description == "the link is closed")
        #expect(LinkError.malformedFragment(length: 0).description == "fragment of 0 bytes is too short for its header")
    }
}
