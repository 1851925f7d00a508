import HorizonCore
import HorizonLink
import HorizonRadio
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

@Suite("MessageLink over the simulated radio", .offTheCooperativePool)
struct MessageLinkTests {
    static let sizes = [
        0, 1, 16, 17, 18, 19, 20, 100, 181, 182, 243, 244, 245, 1000, 4096, LinkLimits.defaultMaximumMessageSize,
    ]

    // MARK: Delivery

    @Test("messages of many sizes arrive intact both ways", arguments: [23, 185, 247, 517])
    func roundTrip(attMTU: Int) throws {
        // Many messages back to back take longer than one reassembly timeout in all; each message
        // alone fits (see `maximumMessageAtMTU23`).
        let pair = try MessagePair(attMTU: attMTU, limits: LinkLimits(reassemblyTimeout: .seconds(30)))
        let toTerminal = Self.sizes.enumerated().map { message($1, seed: UInt8($0)) }
        let toWallet = Self.sizes.reversed().enumerated().map { message($1, seed: UInt8(100 + $0)) }
        for (up, down) in zip(toTerminal, toWallet) {
            try pair.wallet.send(up)
            try pair.terminal.send(down)
        }
        pair.radio.run(until: 30_000)
        #expect(pair.terminalLog.messages == toTerminal)
        #expect(pair.walletLog.messages == toWallet)
        #expect(pair.walletLog.ends.isEmpty)
        #expect(pair.terminalLog.ends.isEmpty)

        // The ATT MTU less its header, never more than bluetoothd takes in one write (510 bytes).
        let fragmentSize = min(attMTU - 3, 510)
        let fragmentCount = Self.sizes.reduce(0) { $0 + expectedFragmentCount(size: $1, fragmentSize: fragmentSize) }
        let expectedBytes = Self.sizes.reduce(0) {
            $0 + $1 + 2 + expectedFragmentCount(size: $1, fragmentSize: fragmentSize)
        }
        #expect(pair.wallet.bytesSent == expectedBytes)
        #expect(pair.terminal.bytesReceived == expectedBytes)
        #expect(pair.terminal.bytesSent == expectedBytes)
        #expect(pair.wallet.bytesReceived == expectedBytes)
        let walletFrames = pair.radio.walletFrames
        #expect(walletFrames.allSatisfy { $0.count <= fragmentSize })
        #expect(walletFrames.count == fragmentCount)
        #expect(pair.radio.simulation.framesSent(on: pair.radio.central) == 2 * fragmentCount)
    }

    @Test("fragment counts at the smallest and the usual MTU", arguments: [(23, 779), (247, 72)])
    func fragmentCounts(attMTU: Int, frames: Int) throws {
        let pair = try MessagePair(attMTU: attMTU, limits: LinkLimits(reassemblyTimeout: .seconds(30)))
        for (index, size) in Self.sizes.enumerated() { try pair.wallet.send(message(size, seed: UInt8(index))) }
        pair.radio.run(until: 30_000)
        #expect(pair.terminalLog.messages.count == Self.sizes.count)
        #expect(pair.radio.walletFrames.count == frames)
        #expect(pair.radio.walletFrames.allSatisfy { $0.count <= attMTU - 3 })
        #expect(pair.terminalLog.ends.isEmpty)
        #expect(pair.radio.simulation.framesSent(on: pair.radio.central) == frames)
    }

    @Test func fragmentsOnTheWireAtMTU23() throws {
        let pair = try MessagePair(attMTU: 23)
        let data = message(40)
        try pair.wallet.send(data)
        let first: [UInt8] = [0x80, 0x00, 0x28] + data[0..<17]
        let second: [UInt8] = [0x01] + data[17..<36]
        let third: [UInt8] = [0x42] + data[36..<40]
        #expect(pair.radio.walletFrames == [first, second, third])
        pair.radio.run(until: 29)
        #expect(pair.terminalLog.messages.isEmpty)
        pair.radio.run(until: 30)
        #expect(pair.terminalLog.messages == [data])
        #expect(pair.wallet.peer == pair.radio.central.peer)
        #expect(pair.wallet.peer == pair.radio.terminal.address)
        #expect(pair.terminal.peer == pair.radio.wallet.address)
    }

    @Test func messagesSentBeforeStartAreHeld() throws {
        let pair = try MessagePair(start: false)
        pair.terminal.start(pair.terminalLog.handler(clock: pair.radio.simulation))
        try pair.terminal.send([1, 2, 3])
        try pair.terminal.send(message(600))
        pair.radio.run(until: 1000)
        #expect(pair.walletLog.messages.isEmpty)
        pair.startWallet()
        #expect(pair.walletLog.messages == [[1, 2, 3], message(600)])
        #expect(pair.walletLog.ends.isEmpty)
    }

    @Test func refusesMessagesOverTheLimit() throws {
        let pair = try MessagePair(limits: LinkLimits(maximumMessageSize: 1000))
        #expect(throws: LinkError.messageTooLarge(size: 1001, maximum: 1000)) { try pair.wallet.send(message(1001)) }
        #expect(pair.radio.simulation.framesSent(on: pair.radio.central) == 0)
        #expect(pair.wallet.bytesSent == 0)
        // The link is still usable.
        try pair.wallet.send(message(1000))
        pair.radio.run(until: 1000)
        #expect(pair.terminalLog.messages == [message(1000)])
        let defaults = try MessagePair()
        #expect(defaults.wallet.limits == LinkLimits(maximumMessageSize: 8256, reassemblyTimeout: .seconds(10)))
        #expect(throws: LinkError.messageTooLarge(size: 8257, maximum: 8256)) {
            try defaults.wallet.send(message(8257))
        }
    }

    @Test func refusesALinkTooSmallForAFragment() throws {
        // Bluetooth LE's smallest ATT MTU is 23, and the radio refuses anything below it ...
        let simulation = RadioSimulation(seed: 1)
        #expect(throws: RadioError.invalidConfiguration("ATT MTU 22 is outside 23...517")) {
            _ = try simulation.addDevice(
                name: "tiny", configuration: DeviceConfiguration(link: LinkParameters(attMTU: 22)))
        }
        // ... while the message link's own floor is lower: a packet must hold a first fragment's
        // 3-byte header and one data byte.
        #expect(throws: LinkError.mtuTooSmall(maximumPayloadSize: 3)) {
            _ = try MessageLink(link: UndersizedLink(attMTU: 6), scheduler: simulation)
        }
        // Seven bytes leave room for one data byte in a first fragment: it works, slowly.
        let outgoing = UndersizedLink(attMTU: 7)
        let incoming = UndersizedLink(attMTU: 7)
        let sender = try MessageLink(link: outgoing, scheduler: simulation)
        let receiver = try MessageLink(link: incoming, scheduler: simulation)
        let log = MessageLog()
        receiver.start(log.handler(clock: simulation))
        sender.start(MessageLog().handler(clock: simulation))
        try sender.send(message(100))
        #expect(outgoing.sent.count == 34)  // 1 + 3 * 33
        #expect(outgoing.sent.allSatisfy { $0.count <= 4 })
        for frame in outgoing.sent { incoming.receive(frame) }
        #expect(log.messages == [message(100)])
        #expect(log.ends.isEmpty)
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
            name: "huge length", frames: [[0xC0, 0xFF, 0xFF]], error: .messageTooLarge(size: 65535, maximum: 8256)),
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
        for frame in sample.frames { try peer.radio.peripheral.send(frame) }
        // More garbage right behind it changes nothing.
        try peer.radio.peripheral.send([0x3F, 0x3F])
        peer.radio.run(until: 1000)
        #expect(peer.walletLog.endReasons == [.failed(sample.error)])
        // Every frame went out at offset 0 and arrived in the first connection event.
        #expect(peer.walletLog.endTimes == [peer.radio.time(30)])
        let validFirst = sample.name.hasPrefix("valid")
        #expect(peer.walletLog.messages == (validFirst ? [[7]] : []))
        // The wallet closed the link: the terminal hears it at the next connection event.
        #expect(peer.terminalRaw.closes == [.closedByPeer])
        #expect(throws: RadioError.linkClosed) { try peer.radio.peripheral.send([0xC0, 0x00, 0x00]) }
        #expect(throws: linkClosedError) { try peer.wallet.send([1]) }
        peer.radio.run(until: 10_000)
        #expect(peer.walletLog.ends.count == 1)
        #expect(peer.terminalRaw.closes == [.closedByPeer])
    }

    @Test func aViolationAfterGoodMessagesKeepsWhatWasDelivered() throws {
        let peer = try RawPeer()
        var fragmenter = try Fragmenter(maximumFragmentSize: 20, maximumMessageSize: 16384)
        for fragment in try fragmenter.fragments(of: message(50)) { try peer.radio.peripheral.send(fragment) }
        // Sequence 3 comes next; 4 is a skipped frame.
        try peer.radio.peripheral.send([0xC4, 0x00, 0x00])
        peer.radio.run(until: 1000)
        #expect(peer.walletLog.messages == [message(50)])
        #expect(peer.walletLog.endReasons == [.failed(.outOfSequence(expected: 3, received: 4))])
        #expect(peer.walletLog.endTimes == [peer.radio.time(30)])
    }

    // MARK: Losing frames

    @Test func linkCutMidMessageReportsATruncatedMessage() throws {
        // Frames 0, 1 and 2 leave in the same instant; the cut at frame 1 still lets frame 0,
        // already in flight, arrive.
        let pair = try MessagePair(attMTU: 23, faults: [1: .cut])
        try pair.terminal.send(message(50))  // 17 + 19 + 14 bytes
        pair.radio.run(until: 3000)
        #expect(pair.walletLog.messages.isEmpty)
        #expect(pair.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 50))])
        #expect(pair.walletLog.endTimes == [pair.radio.time(2000)])
        #expect(pair.terminalLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(2000)])
        #expect(pair.wallet.bytesReceived == 20)
        #expect(throws: linkClosedError) { try pair.terminal.send([1]) }
    }

    @Test func aDroppedFragmentFollowedByAnotherIsOutOfSequence() throws {
        let pair = try MessagePair(attMTU: 23, faults: [1: .drop])
        try pair.terminal.send(message(50))
        pair.radio.run(until: 1000)
        #expect(pair.walletLog.messages.isEmpty)
        #expect(pair.walletLog.endReasons == [.failed(.outOfSequence(expected: 1, received: 2))])
        #expect(pair.walletLog.endTimes == [pair.radio.time(30)])
        // The wallet closed the link in response; the terminal hears it one interval later.
        #expect(pair.terminalLog.endReasons == [.closed(.closedByPeer)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(60)])
    }

    @Test func aDroppedLastFragmentTimesOut() throws {
        let timeout = Duration.seconds(1)
        let pair = try MessagePair(attMTU: 23, limits: LinkLimits(reassemblyTimeout: timeout), faults: [1: .drop])
        try pair.terminal.send(message(30))  // 17 + 13 bytes: the last fragment is lost
        pair.radio.run(until: 1029)
        #expect(pair.walletLog.ends.isEmpty)
        pair.radio.run(until: 6000)
        // The first fragment arrived at 30 ms; the timeout counts from there.
        #expect(pair.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 30))])
        #expect(pair.walletLog.endTimes == [pair.radio.time(1030)])
        #expect(pair.terminalLog.endReasons == [.closed(.closedByPeer)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(1060)])
        #expect(pair.walletLog.messages.isEmpty)
    }

    @Test func theReassemblyTimeoutCountsFromEachMessagesStart() throws {
        let timeout = Duration.seconds(1)
        // Message A (frames 0, 1) completes at 30 ms; message B (frames 2, 3) starts at 930 ms and
        // loses its last fragment. A's timer at 1030 ms must not end B early.
        let pair = try MessagePair(attMTU: 23, limits: LinkLimits(reassemblyTimeout: timeout), faults: [3: .drop])
        try pair.terminal.send(message(30))
        pair.radio.at(900) { try? pair.terminal.send(message(30, seed: 1)) }
        pair.radio.run(until: 1929)
        #expect(pair.walletLog.messages == [message(30)])
        #expect(pair.walletLog.ends.isEmpty)
        pair.radio.run(until: 5000)
        #expect(pair.walletLog.messages == [message(30)])
        #expect(pair.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 30))])
        #expect(pair.walletLog.endTimes == [pair.radio.time(1930)])
    }

    @Test func completeMessagesNeverTimeOut() throws {
        // 200 bytes at MTU 23 are 11 fragments, spread over 3 or 4 connection events (at most
        // 90 ms from first to last) by the 4-packets-per-event limit: always inside 100 ms.
        let pair = try MessagePair(attMTU: 23, limits: LinkLimits(reassemblyTimeout: .milliseconds(100)))
        for index in 0..<5 {
            pair.radio.at(70 * index) { try? pair.terminal.send(message(200)) }
        }
        pair.radio.run(until: 5000)
        #expect(pair.walletLog.messages == Array(repeating: message(200), count: 5))
        #expect(pair.walletLog.ends.isEmpty)
        #expect(pair.radio.simulation.pendingEventCount == 0)
    }

    @Test func maximumMessageAtMTU23() throws {
        // The largest message at the smallest MTU, with the default limits: 435 frames at four per
        // 30 ms connection event arrive by 3270 ms, inside the 10 s reassembly timeout.
        let pair = try MessagePair(attMTU: 23)
        let size = LinkLimits.defaultMaximumMessageSize
        #expect(expectedFragmentCount(size: size, fragmentSize: 20) == 435)
        try pair.terminal.send(message(size))
        pair.radio.run(until: 3269)
        #expect(pair.walletLog.messages.isEmpty)
        pair.radio.run(until: 3270)
        #expect(pair.walletLog.messages == [message(size)])
        pair.radio.run(until: 20_000)
        #expect(pair.walletLog.ends.isEmpty)
    }

    // MARK: Closing

    @Test func cleanCloseByTheTerminal() throws {
        let pair = try MessagePair()
        try pair.terminal.send([1])
        try pair.terminal.send(message(1000))  // 5 frames
        try pair.terminal.send([3])
        pair.terminal.close()
        #expect(throws: linkClosedError) { try pair.terminal.send([4]) }
        pair.radio.run(until: 5000)
        #expect(pair.walletLog.messages == [[1], message(1000), [3]])
        // Seven frames at four per event arrive at 30 and 60 ms; the close follows one interval
        // after the last of them.
        #expect(pair.walletLog.endReasons == [.closed(.closedByPeer)])
        #expect(pair.walletLog.endTimes == [pair.radio.time(90)])
        #expect(pair.terminalLog.endReasons == [.closed(.closedLocally)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(0)])
        #expect(throws: linkClosedError) { try pair.wallet.send([5]) }
        pair.wallet.close()
        pair.radio.run(until: 6000)
        #expect(pair.walletLog.ends.count == 1)
        #expect(pair.terminalLog.ends.count == 1)
    }

    @Test func cleanCloseByTheWallet() throws {
        let pair = try MessagePair()
        try pair.wallet.send(message(300))
        pair.radio.run(until: 1000)
        pair.wallet.close()
        pair.radio.run(until: 2000)
        #expect(pair.terminalLog.messages == [message(300)])
        #expect(pair.walletLog.endReasons == [.closed(.closedLocally)])
        #expect(pair.walletLog.endTimes == [pair.radio.time(1000)])
        #expect(pair.terminalLog.endReasons == [.closed(.closedByPeer)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(1030)])
    }

    @Test func aCloseInsideAMessageIsATruncation() throws {
        let peer = try RawPeer()
        try peer.radio.peripheral.send([0x80, 0x00, 0x1E] + message(17))
        peer.radio.peripheral.close()
        peer.radio.run(until: 1000)
        // The fragment arrives at 30 ms, the close one interval later.
        #expect(peer.walletLog.endReasons == [.failed(.truncatedMessage(received: 17, declared: 30))])
        #expect(peer.walletLog.endTimes == [peer.radio.time(60)])
        #expect(peer.terminalRaw.closes == [.closedLocally])
    }

    @Test func lostContactBetweenMessages() throws {
        let pair = try MessagePair()
        try pair.wallet.send([1])
        pair.radio.run(until: 100)
        pair.radio.simulation.injectFault(.cut, atFrame: 1, on: pair.radio.central)
        try pair.wallet.send([2])
        pair.radio.run(until: 3000)
        #expect(pair.terminalLog.messages == [[1]])
        #expect(pair.terminalLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.walletLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.walletLog.endTimes == [pair.radio.time(2100)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(2100)])
    }

    @Test func walkingAwayWithNothingToSayEndsBothLinks() throws {
        let pair = try MessagePair()
        try pair.wallet.send([1])
        pair.radio.run(until: 100)
        pair.radio.wallet.move(to: Position(x: 500, y: 0))
        pair.radio.run(until: 2099)
        #expect(pair.walletLog.ends.isEmpty)
        pair.radio.run(until: 3000)
        #expect(pair.terminalLog.messages == [[1]])
        #expect(pair.walletLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.terminalLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.walletLog.endTimes == [pair.radio.time(2100)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(2100)])
    }

    @Test func aPeerPoweringOffMidMessage() throws {
        // 80 bytes are 5 fragments: 4 arrive at 30 ms, the fifth is due at 60 ms. The terminal's
        // radio dies at 40 ms: it hears at once, the wallet after the supervision timeout,
        // holding 17 + 3 * 19 bytes of a message.
        let pair = try MessagePair(attMTU: 23)
        try pair.terminal.send(message(80))
        pair.radio.at(40) { pair.radio.terminal.powerOff() }
        pair.radio.run(until: 3000)
        #expect(pair.terminalLog.endReasons == [.closed(.connectionLost)])
        #expect(pair.terminalLog.endTimes == [pair.radio.time(40)])
        #expect(pair.walletLog.endReasons == [.failed(.truncatedMessage(received: 74, declared: 80))])
        #expect(pair.walletLog.endTimes == [pair.radio.time(2040)])
        #expect(pair.walletLog.messages.isEmpty)
    }

    @Test func endDescriptions() {
        #expect(MessageLinkEnd.closed(.closedByPeer).description == "link closed by the other device")
        #expect(
            MessageLinkEnd.failed(.continuationWithoutStart).description
                == "link failed: continuation fragment without a message start")
    }
}
