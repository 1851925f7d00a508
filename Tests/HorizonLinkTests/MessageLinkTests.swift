import HorizonCore
import HorizonLink
import HorizonRadio
import Testing

/// What one message link delivered and how it ended, with virtual times.
final class MessageLog: @unchecked Sendable {
    var messages: [[UInt8]] = []
    var ends: [(MessageLinkEnd, Instant)] = []

    func handler(clock: VirtualClock) -> MessageLinkHandler {
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

/// A wallet and a terminal talking through message links over a loopback radio link.
struct MessagePair {
    let clock = VirtualClock()
    let loop: LoopbackPair
    let wallet: MessageLink
    let terminal: MessageLink
    let walletLog = MessageLog()
    let terminalLog = MessageLog()

    init(attMTU: Int = 247, limits: LinkLimits = LinkLimits(), start: Bool = true) throws {
        loop = LoopbackPair(clock: clock, attMTU: attMTU)
        wallet = try MessageLink(link: loop.central, scheduler: clock, limits: limits)
        terminal = try MessageLink(link: loop.peripheral, scheduler: clock, limits: limits)
        if start {
            wallet.start(walletLog.handler(clock: clock))
            terminal.start(terminalLog.handler(clock: clock))
        }
    }
}

/// A wallet's message link facing a terminal that writes raw frames (to break the rules).
struct RawPeer {
    let clock = VirtualClock()
    let loop: LoopbackPair
    let wallet: MessageLink
    let walletLog = MessageLog()
    let terminalRaw = RawLog()

    init(attMTU: Int = 23, limits: LinkLimits = LinkLimits()) throws {
        loop = LoopbackPair(clock: clock, attMTU: attMTU)
        wallet = try MessageLink(link: loop.central, scheduler: clock, limits: limits)
        wallet.start(walletLog.handler(clock: clock))
        terminalRaw.attach(loop.peripheral)
    }
}

let linkClosedError = LinkError.radio(RadioErrorDescription("the link is closed"))

func ms(_ value: Int) -> Instant { .zero + .milliseconds(value) }

@Suite("MessageLink")
struct MessageLinkTests {
    static let sizes = [0, 1, 16, 17, 18, 19, 20, 100, 181, 182, 243, 244, 245, 1000, 4096, 16384]

    // MARK: Delivery

    @Test("messages of many sizes arrive intact both ways", arguments: [23, 185, 247, 517])
    func roundTrip(attMTU: Int) throws {
        let pair = try MessagePair(attMTU: attMTU)
        let toTerminal = Self.sizes.enumerated().map { message($1, seed: UInt8($0)) }
        let toWallet = Self.sizes.reversed().enumerated().map { message($1, seed: UInt8(100 + $0)) }
        for (up, down) in zip(toTerminal, toWallet) {
            try pair.wallet.send(up)
            try pair.terminal.send(down)
        }
        pair.clock.run(for: .seconds(1))
        #expect(pair.terminalLog.messages == toTerminal)
        #expect(pair.walletLog.messages == toWallet)
        #expect(pair.walletLog.ends.isEmpty)
        #expect(pair.terminalLog.ends.isEmpty)

        let fragmentSize = attMTU - 3
        let expectedBytes = Self.sizes.reduce(0) {
            $0 + $1 + 2 + expectedFragmentCount(size: $1, fragmentSize: fragmentSize)
        }
        #expect(pair.wallet.bytesSent == expectedBytes)
        #expect(pair.terminal.bytesReceived == expectedBytes)
        #expect(pair.terminal.bytesSent == expectedBytes)
        #expect(pair.wallet.bytesReceived == expectedBytes)
        #expect(pair.loop.wire.sent[0].allSatisfy { $0.count <= fragmentSize })
        #expect(
            pair.loop.wire.sent[0].count
                == Self.sizes.reduce(0) { $0 + expectedFragmentCount(size: $1, fragmentSize: fragmentSize) })
    }

    @Test func fragmentsOnTheWireAtMTU23() throws {
        let pair = try MessagePair(attMTU: 23)
        let data = message(40)
        try pair.wallet.send(data)
        let first: [UInt8] = [0x80, 0x00, 0x28] + data[0..<17]
        let second: [UInt8] = [0x01] + data[17..<36]
        let third: [UInt8] = [0x42] + data[36..<40]
        #expect(pair.loop.wire.sent[0] == [first, second, third])
        pair.clock.run(for: .milliseconds(30))
        #expect(pair.terminalLog.messages == [data])
        #expect(pair.wallet.peer == pair.loop.central.peer)
    }

    @Test func messagesSentBeforeStartAreHeld() throws {
        let pair = try MessagePair(start: false)
        try pair.terminal.send([1, 2, 3])
        try pair.terminal.send(message(600))
        pair.clock.run(for: .seconds(1))
        pair.wallet.start(pair.walletLog.handler(clock: pair.clock))
        #expect(pair.walletLog.messages == [[1, 2, 3], message(600)])
    }

    @Test func refusesMessagesOverTheLimit() throws {
        let pair = try MessagePair(limits: LinkLimits(maximumMessageSize: 1000))
        #expect(throws: LinkError.messageTooLarge(size: 1001, maximum: 1000)) { try pair.wallet.send(message(1001)) }
        #expect(pair.loop.wire.framesSent == 0)
        #expect(pair.wallet.bytesSent == 0)
        // The link is still usable.
        try pair.wallet.send(message(1000))
        pair.clock.run(for: .seconds(1))
        #expect(pair.terminalLog.messages == [message(1000)])
        let defaults = try MessagePair()
        #expect(defaults.wallet.limits == LinkLimits(maximumMessageSize: 16384, reassemblyTimeout: .seconds(5)))
        #expect(throws: LinkError.messageTooLarge(size: 16385, maximum: 16384)) {
            try defaults.wallet.send(message(16385))
        }
    }

    @Test func refusesALinkTooSmallForAFragment() throws {
        let clock = VirtualClock()
        let tiny = LoopbackPair(clock: clock, attMTU: 6)
        #expect(throws: LinkError.mtuTooSmall(maximumPayloadSize: 3)) {
            _ = try MessageLink(link: tiny.central, scheduler: clock)
        }
        // Seven bytes leave room for one data byte in a first fragment: it works, slowly.
        let small = LoopbackPair(clock: clock, attMTU: 7)
        let sender = try MessageLink(link: small.central, scheduler: clock)
        let receiver = try MessageLink(link: small.peripheral, scheduler: clock)
        let log = MessageLog()
        receiver.start(log.handler(clock: clock))
        sender.start(MessageLog().handler(clock: clock))
        try sender.send(message(100))
        clock.run(for: .seconds(1))
        #expect(log.messages == [message(100)])
        #expect(small.wire.sent[0].count == 34)  // 1 + 3 * 33
    }

    // MARK: Framing violations

    struct Garbage: Sendable, CustomTestStringConvertible {
        let name: String
        let frames: [[UInt8]]
        let error: LinkError
        var testDescription: String { name }
    }

    static let garbage = [
        Garbage(name: "wrong sequence", frames: [[0x05, 0xFF]], error: .outOfSequence(expected: 0, received: 5)),
        Garbage(name: "empty frame", frames: [[]], error: .malformedFragment(length: 0)),
        Garbage(name: "continuation first", frames: [[0x00, 0x01]], error: .continuationWithoutStart),
        Garbage(
            name: "huge length", frames: [[0xC0, 0xFF, 0xFF]], error: .messageTooLarge(size: 65535, maximum: 16384)),
        Garbage(name: "no length", frames: [[0x80]], error: .malformedFragment(length: 1)),
        Garbage(
            name: "too much data", frames: [[0xC0, 0x00, 0x01, 1, 2]], error: .lengthMismatch(declared: 1, received: 2)),
        Garbage(
            name: "too little data", frames: [[0xC0, 0x00, 0x03, 1, 2]],
            error: .lengthMismatch(declared: 3, received: 2)),
        Garbage(
            name: "interleaved start", frames: [[0x80, 0x00, 0x05, 1, 2], [0x81, 0x00, 0x01, 9]],
            error: .startInsideMessage),
        Garbage(
            name: "valid message, then a repeat", frames: [[0xC0, 0x00, 0x01, 7], [0xC0, 0x00, 0x01, 7]],
            error: .outOfSequence(expected: 1, received: 0)),
    ]

    @Test("a framing violation ends the link once", arguments: garbage)
    func framingViolation(_ sample: Garbage) throws {
        let peer = try RawPeer()
        for frame in sample.frames { try peer.loop.peripheral.send(frame) }
        // More garbage right behind it changes nothing.
        try peer.loop.peripheral.send([0x3F, 0x3F])
        peer.clock.run(for: .seconds(1))
        #expect(peer.walletLog.endReasons == [.failed(sample.error)])
        #expect(peer.walletLog.endTimes == [ms(30)])
        let validFirst = sample.name.hasPrefix("valid")
        #expect(peer.walletLog.messages == (validFirst ? [[7]] : []))
        // The wallet closed the link: the terminal hears it after the wallet's close.
        #expect(peer.terminalRaw.closes == [.closedByPeer])
        #expect(throws: RadioError.linkClosed) { try peer.loop.peripheral.send([0xC0, 0x00, 0x00]) }
        #expect(throws: linkClosedError) { try peer.wallet.send([1]) }
        peer.clock.run(for: .seconds(10))
        #expect(peer.walletLog.ends.count == 1)
    }

    @Test func aViolationAfterGoodMessagesKeepsWhatWasDelivered() throws {
        let peer = try RawPeer()
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 16384)
        for fragment in try fragmenter.fragments(of: message(50)) { try peer.loop.peripheral.send(fragment) }
        // Sequence 3 comes next; 4 is a skipped frame.
        try peer.loop.peripheral.send([0xC4, 0x00, 0x00])
        peer.clock.run(for: .seconds(1))
        #expect(peer.walletLog.messages == [message(50)])
        #expect(peer.walletLog.endReasons == [.failed(.outOfSequence(expected: 3, received: 4))])
    }

    // MARK: Losing frames

    @Test func linkCutMidMessageReportsATruncatedMessage() throws {
        let pair = try MessagePair(attMTU: 23)
        pair.loop.wire.faults[1] = .cut
        try pair.terminal.send(message(50))  // 17 + 19 + 14 bytes
        pair.clock.run(for: .seconds(3))
        #expect(pair.walletLog.messages.isEmpty)
        #expect(pair.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 50))])
        #expect(pair.walletLog.endTimes == [ms(2000)])
        #expect(pair.terminalLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.terminalLog.endTimes == [ms(2000)])
        #expect(throws: linkClosedError) { try pair.terminal.send([1]) }
    }

    @Test func aDroppedFragmentFollowedByAnotherIsOutOfSequence() throws {
        let pair = try MessagePair(attMTU: 23)
        pair.loop.wire.faults[1] = .drop
        try pair.terminal.send(message(50))
        pair.clock.run(for: .seconds(1))
        #expect(pair.walletLog.messages.isEmpty)
        #expect(pair.walletLog.endReasons == [.failed(.outOfSequence(expected: 1, received: 2))])
        #expect(pair.walletLog.endTimes == [ms(30)])
        // The wallet closed the link in response.
        #expect(pair.terminalLog.endReasons == [.closed(.closedByPeer)])
        #expect(pair.terminalLog.endTimes == [ms(60)])
    }

    @Test func aDroppedLastFragmentTimesOut() throws {
        let timeout = Duration.seconds(1)
        let pair = try MessagePair(attMTU: 23, limits: LinkLimits(reassemblyTimeout: timeout))
        pair.loop.wire.faults[1] = .drop
        try pair.terminal.send(message(30))  // 17 + 13 bytes: the last fragment is lost
        pair.clock.run(for: .milliseconds(1029))
        #expect(pair.walletLog.ends.isEmpty)
        pair.clock.run(for: .seconds(5))
        // The first fragment arrived at 30 ms; the timeout counts from there.
        #expect(pair.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 30))])
        #expect(pair.walletLog.endTimes == [ms(1030)])
        #expect(pair.terminalLog.endReasons == [.closed(.closedByPeer)])
        #expect(pair.terminalLog.endTimes == [ms(1060)])
        #expect(pair.walletLog.messages.isEmpty)
    }

    @Test func theReassemblyTimeoutCountsFromEachMessagesStart() throws {
        let timeout = Duration.seconds(1)
        let pair = try MessagePair(attMTU: 23, limits: LinkLimits(reassemblyTimeout: timeout))
        // Message A (frames 0, 1) completes at 30 ms; message B (frames 2, 3) starts at 930 ms and
        // loses its last fragment. A's timer at 1030 ms must not end B early.
        pair.loop.wire.faults[3] = .drop
        try pair.terminal.send(message(30))
        pair.clock.schedule(after: .milliseconds(900)) { try? pair.terminal.send(message(30, seed: 1)) }
        pair.clock.run(for: .seconds(5))
        #expect(pair.walletLog.messages == [message(30)])
        #expect(pair.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 30))])
        #expect(pair.walletLog.endTimes == [ms(1930)])
    }

    @Test func completeMessagesNeverTimeOut() throws {
        let pair = try MessagePair(attMTU: 23, limits: LinkLimits(reassemblyTimeout: .milliseconds(100)))
        for index in 0..<5 {
            pair.clock.schedule(after: .milliseconds(70 * index)) { try? pair.terminal.send(message(200)) }
        }
        pair.clock.run(for: .seconds(5))
        #expect(pair.walletLog.messages == Array(repeating: message(200), count: 5))
        #expect(pair.walletLog.ends.isEmpty)
        #expect(pair.clock.pendingCount == 0)
    }

    // MARK: Closing

    @Test func cleanCloseByTheTerminal() throws {
        let pair = try MessagePair()
        try pair.terminal.send([1])
        try pair.terminal.send(message(1000))
        try pair.terminal.send([3])
        pair.terminal.close()
        #expect(throws: linkClosedError) { try pair.terminal.send([4]) }
        pair.clock.run(for: .seconds(5))
        #expect(pair.walletLog.messages == [[1], message(1000), [3]])
        #expect(pair.walletLog.endReasons == [.closed(.closedByPeer)])
        #expect(pair.walletLog.endTimes == [ms(30)])
        #expect(pair.terminalLog.endReasons == [.closed(.closedLocally)])
        #expect(pair.terminalLog.endTimes == [ms(0)])
        #expect(throws: linkClosedError) { try pair.wallet.send([5]) }
        pair.wallet.close()
        pair.clock.run(for: .seconds(1))
        #expect(pair.walletLog.ends.count == 1)
    }

    @Test func cleanCloseByTheWallet() throws {
        let pair = try MessagePair()
        try pair.wallet.send(message(300))
        pair.clock.run(for: .seconds(1))
        pair.wallet.close()
        pair.clock.run(for: .seconds(1))
        #expect(pair.terminalLog.messages == [message(300)])
        #expect(pair.walletLog.endReasons == [.closed(.closedLocally)])
        #expect(pair.terminalLog.endReasons == [.closed(.closedByPeer)])
    }

    @Test func aCloseInsideAMessageIsATruncation() throws {
        let peer = try RawPeer()
        try peer.loop.peripheral.send([0x80, 0x00, 0x1E] + message(17))
        peer.loop.peripheral.close()
        peer.clock.run(for: .seconds(1))
        #expect(peer.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 30))])
        #expect(peer.walletLog.endTimes == [ms(30)])
        #expect(peer.terminalRaw.closes == [.closedLocally])
    }

    @Test func lostContactBetweenMessages() throws {
        let pair = try MessagePair()
        try pair.wallet.send([1])
        pair.clock.run(for: .milliseconds(100))
        pair.loop.wire.faults[1] = .cut
        try pair.wallet.send([2])
        pair.clock.run(for: .seconds(3))
        #expect(pair.terminalLog.messages == [[1]])
        #expect(pair.terminalLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.walletLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.walletLog.endTimes == [ms(2100)])
    }

    @Test func endDescriptions() {
        #expect(MessageLinkEnd.closed(.closedByPeer).description == "link closed by the other device")
        #expect(
            MessageLinkEnd.failed(.continuationWithoutStart).description
                == "link failed: continuation fragment without a message start")
    }
}
