import HorizonCore
import HorizonRadio
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

@Suite("Simulated links: faults, closing and losing contact", .offTheCooperativePool)
struct FaultTests {
    /// Sends one frame per connection interval, alternating direction (central first), so that
    /// frame k goes out at offset 40k ms and arrives at the event after it. Returns the payloads
    /// in the order they are sent: frame k is `[k]`.
    @discardableResult
    func sendAlternating(_ pair: LinkedPair, frames: Range<Int>, startingAt start: Duration = .zero) -> [[UInt8]] {
        for frame in frames {
            let payload: [UInt8] = [UInt8(frame)]
            let fromCentral = frame % 2 == 0
            pair.at(start + .milliseconds(40 * (frame - frames.lowerBound))) {
                do {
                    try (fromCentral ? pair.central : pair.peripheral).send(payload)
                } catch {
                    Issue.record("send of frame \(frame) failed: \(error)")
                }
            }
        }
        return frames.map { [UInt8($0)] }
    }

    // MARK: Cut

    @Test(
        "cut at frame N: frames from N on are lost, both sides notice after the supervision timeout",
        arguments: [0, 1, 2, 5])
    func cut(atFrame cutFrame: Int) throws {
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.cut, atFrame: cutFrame) }
        sendAlternating(pair, frames: 0..<8)
        pair.run(untilOffset: .seconds(5))

        let delivered = (0..<cutFrame).map { [UInt8($0)] }
        #expect(pair.peripheralRecorder.received == delivered.filter { $0[0] % 2 == 0 })
        #expect(pair.centralRecorder.received == delivered.filter { $0[0] % 2 == 1 })
        // Frame N went out at offset 40N ms; contact ended then.
        let lostAt = pair.openedAt + .milliseconds(40 * cutFrame)
        let noticedAt = lostAt + .seconds(2)
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
        #expect(pair.centralRecorder.closes.map(\.1) == [noticedAt])
        #expect(pair.peripheralRecorder.closes.map(\.1) == [noticedAt])
        // Later frames were counted as sent by nobody: the link stopped counting at the cut.
        #expect(pair.simulation.framesSent(on: pair.central) == cutFrame + 1)
        // Once both sides know, the link refuses to send.
        #expect(throws: RadioError.linkClosed) { try pair.central.send([0xFF]) }
        #expect(throws: RadioError.linkClosed) { try pair.peripheral.send([0xFF]) }
    }

    @Test func aCutStillDeliversEarlierFramesInFlight() throws {
        // Frames 0, 1 and 2 leave in the same instant; contact ends with frame 2. Frames 0 and 1
        // were already on their way and arrive at the next connection event; 2 never does.
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.cut, atFrame: 2) }
        pair.at(.milliseconds(100)) {
            for frame in 0..<3 { try? pair.central.send([UInt8(frame)]) }
        }
        pair.run(untilOffset: .milliseconds(2099))
        #expect(pair.peripheralRecorder.received == [[0], [1]])
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [120, 120])
        #expect(pair.centralRecorder.closes.isEmpty)
        #expect(pair.peripheralRecorder.closes.isEmpty)
        pair.run(untilOffset: .seconds(5))
        #expect(pair.peripheralRecorder.received == [[0], [1]])
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
        // Cut at offset 100 ms, noticed one supervision timeout (2 s) later on both sides.
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [2100])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [2100])
        #expect(pair.simulation.framesSent(on: pair.central) == 3)
    }

    @Test(
        "a burst in both directions cut at frame N: frames before N all arrive, none from N on",
        arguments: 0..<6)
    func cutInsideABurst(atFrame cutFrame: Int) throws {
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.cut, atFrame: cutFrame) }
        // Six frames in one instant, alternating direction: central sends the even ones.
        for frame in 0..<6 {
            try (frame % 2 == 0 ? pair.central : pair.peripheral).send([UInt8(frame)])
        }
        pair.run(untilOffset: .seconds(5))
        let delivered = (0..<cutFrame).map { [UInt8($0)] }
        #expect(pair.peripheralRecorder.received == delivered.filter { $0[0] % 2 == 0 })
        #expect(pair.centralRecorder.received == delivered.filter { $0[0] % 2 == 1 })
        #expect(pair.peripheralRecorder.arrivals.allSatisfy { pair.offsetMillis($0) == 30 })
        #expect(pair.centralRecorder.arrivals.allSatisfy { pair.offsetMillis($0) == 30 })
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [2000])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [2000])
        #expect(pair.simulation.framesSent(on: pair.central) == cutFrame + 1)
    }

    @Test func sendingAfterACutButBeforeTheTimeoutIsSilentlyLost() throws {
        let pair = try LinkedPair(wallet: LinkParameters(supervisionTimeout: .milliseconds(500))) {
            $0.injectFaultOnNextLink(.cut, atFrame: 0)
        }
        try pair.central.send([1])
        pair.run(untilOffset: .milliseconds(250))
        // The sender cannot tell yet: no error, nothing arrives.
        try pair.central.send([2])
        try pair.peripheral.send([3])
        pair.run(untilOffset: .milliseconds(499))
        #expect(pair.centralRecorder.closes.isEmpty)
        pair.run(untilOffset: .seconds(2))
        #expect(pair.peripheralRecorder.received.isEmpty)
        #expect(pair.centralRecorder.received.isEmpty)
        #expect(pair.centralRecorder.closes.map(\.1) == [pair.openedAt + .milliseconds(500)])
        #expect(pair.peripheralRecorder.closes.map(\.1) == [pair.openedAt + .milliseconds(500)])
        #expect(throws: RadioError.linkClosed) { try pair.central.send([4]) }
    }

    @Test func cutOnAnOpenLinkByInjectFault() throws {
        let pair = try LinkedPair()
        try pair.central.send([0])
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.simulation.framesSent(on: pair.central) == 1)
        pair.simulation.injectFault(.cut, atFrame: 2, on: pair.peripheral)
        pair.at(.milliseconds(100)) { try? pair.peripheral.send([1]) }
        pair.at(.milliseconds(200)) { try? pair.peripheral.send([2]) }
        pair.run(untilOffset: .seconds(3))
        #expect(pair.peripheralRecorder.received == [[0]])
        #expect(pair.centralRecorder.received == [[1]])
        #expect(pair.centralRecorder.closes.map(\.1) == [pair.openedAt + .milliseconds(2200)])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
    }

    // MARK: Drop, duplicate, reorder

    @Test func dropRemovesOneFrameAndTheLinkStaysUp() throws {
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.drop, atFrame: 1) }
        for payload in numbered(4) { try pair.central.send(payload) }
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.peripheralRecorder.received == [numbered(4)[0], numbered(4)[2], numbered(4)[3]])
        // The link carries on in both directions.
        try pair.peripheral.send([0xAA])
        try pair.central.send([0xBB])
        pair.run(untilOffset: .seconds(3))
        #expect(pair.centralRecorder.received == [[0xAA]])
        #expect(pair.peripheralRecorder.received.last == [0xBB])
        #expect(pair.centralRecorder.closes.isEmpty)
        #expect(pair.peripheralRecorder.closes.isEmpty)
        #expect(pair.simulation.framesSent(on: pair.central) == 6)
    }

    @Test func duplicateArrivesTwice() throws {
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.duplicate, atFrame: 1) }
        for payload in numbered(3) { try pair.central.send(payload) }
        pair.run(untilOffset: .milliseconds(100))
        let sent = numbered(3)
        #expect(pair.peripheralRecorder.received == [sent[0], sent[1], sent[1], sent[2]])
        // The copy takes a packet slot of its own: the four fill the first event.
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [30, 30, 30, 30])
        #expect(pair.simulation.framesSent(on: pair.central) == 3)
    }

    @Test func reorderDeliversAFrameAfterTheNextOne() throws {
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.reorder, atFrame: 1) }
        for payload in numbered(4) { try pair.central.send(payload) }
        pair.run(untilOffset: .milliseconds(100))
        let sent = numbered(4)
        #expect(pair.peripheralRecorder.received == [sent[0], sent[2], sent[1], sent[3]])
    }

    @Test func reorderWaitsForTheNextFrameInTheSameDirection() throws {
        // Frame 1 (central) is held; frame 2 goes the other way; frame 3 (central) releases it.
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.reorder, atFrame: 1) }
        pair.at(.zero) { try? pair.central.send([0]) }
        pair.at(.milliseconds(40)) { try? pair.central.send([1]) }
        pair.at(.milliseconds(80)) { try? pair.peripheral.send([2]) }
        pair.at(.milliseconds(200)) { try? pair.central.send([3]) }
        pair.run(untilOffset: .milliseconds(150))
        #expect(pair.peripheralRecorder.received == [[0]])
        #expect(pair.centralRecorder.received == [[2]])
        pair.run(untilOffset: .milliseconds(400))
        #expect(pair.peripheralRecorder.received == [[0], [3], [1]])
        #expect(pair.centralRecorder.received == [[2]])
        // The held frame travels in the same connection event as the frame that released it.
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [30, 210, 210])
        #expect(pair.centralRecorder.arrivals.map(pair.offsetMillis) == [90])
    }

    @Test func aReorderedLastFrameIsNeverDelivered() throws {
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.reorder, atFrame: 1) }
        try pair.central.send([0])
        try pair.central.send([1])
        pair.run(untilOffset: .seconds(3))
        #expect(pair.peripheralRecorder.received == [[0]])
        #expect(pair.peripheralRecorder.closes.isEmpty)
    }

    @Test func faultOnTheOtherDirectionUsesTheSharedFrameCount() throws {
        // Frame indices count both directions together: frame 3 is the peripheral's second.
        let pair = try LinkedPair { $0.injectFaultOnNextLink(.drop, atFrame: 3) }
        sendAlternating(pair, frames: 0..<6)
        pair.run(untilOffset: .seconds(1))
        #expect(pair.peripheralRecorder.received == [[0], [2], [4]])
        #expect(pair.centralRecorder.received == [[1], [5]])
    }

    @Test func plannedFaultsApplyOnlyToTheNextLink() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        let wallet = try simulation.addDevice(name: "wallet")
        let accepted = Box<[any ByteLink]>([])
        terminal.setConnectionHandler { accepted.value.append($0) }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        simulation.injectFaultOnNextLink(.drop, atFrame: 0)
        let links = Box<[any ByteLink]>([])
        wallet.connect(to: terminal.address, timeout: .seconds(1)) {
            if case .success(let l) = $0 { links.value.append(l) }
        }
        simulation.run(for: .milliseconds(100))
        wallet.connect(to: terminal.address, timeout: .seconds(1)) {
            if case .success(let l) = $0 { links.value.append(l) }
        }
        simulation.run(for: .milliseconds(100))
        try #require(links.value.count == 2 && accepted.value.count == 2)
        let recorders = [LinkRecorder(), LinkRecorder()]
        for (recorder, link) in zip(recorders, accepted.value) { recorder.attach(link, clock: simulation) }
        for link in links.value { try link.send([7]) }
        simulation.run(for: .milliseconds(100))
        #expect(recorders[0].received.isEmpty)
        #expect(recorders[1].received == [[7]])
    }

    // MARK: Closing

    @Test func closeDeliversDataInFlightThenTellsThePeer() throws {
        let pair = try LinkedPair(wallet: LinkParameters(connectionInterval: .milliseconds(30), packetsPerEvent: 2))
        pair.at(.milliseconds(10)) {
            for payload in numbered(5) { try? pair.central.send(payload) }
            pair.central.close()
        }
        pair.run(untilOffset: .milliseconds(500))
        // 5 packets at 2 per event: 30, 30, 60, 60, 90. The close follows one interval later.
        #expect(pair.peripheralRecorder.received == numbered(5))
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [30, 30, 60, 60, 90])
        #expect(pair.peripheralRecorder.closeReasons == [.closedByPeer])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [120])
        #expect(pair.centralRecorder.closeReasons == [.closedLocally])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [10])
        #expect(throws: RadioError.linkClosed) { try pair.central.send([1]) }
        #expect(throws: RadioError.linkClosed) { try pair.peripheral.send([1]) }
    }

    @Test func closeWithNothingInFlight() throws {
        let pair = try LinkedPair()
        pair.at(.milliseconds(100)) { pair.peripheral.close() }
        pair.run(untilOffset: .seconds(1))
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [100])
        #expect(pair.peripheralRecorder.closeReasons == [.closedLocally])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [130])
        #expect(pair.centralRecorder.closeReasons == [.closedByPeer])
    }

    @Test func closingSidesStopsReceivingAndIsReportedOnce() throws {
        let pair = try LinkedPair()
        // The terminal replies just as the wallet closes: the wallet no longer receives it.
        try pair.peripheral.send([1])
        pair.central.close()
        pair.central.close()
        pair.run(untilOffset: .seconds(1))
        #expect(pair.centralRecorder.received.isEmpty)
        #expect(pair.centralRecorder.closeReasons == [.closedLocally])
        #expect(pair.peripheralRecorder.closeReasons == [.closedByPeer])
        // Closing after being told changes nothing.
        pair.peripheral.close()
        pair.run(untilOffset: .seconds(2))
        #expect(pair.peripheralRecorder.closeReasons == [.closedByPeer])
        #expect(pair.centralRecorder.closeReasons == [.closedLocally])
    }

    @Test func thePeerOfAClosedLinkSendsIntoTheVoidUntilItIsTold() throws {
        let pair = try LinkedPair()
        pair.run(untilOffset: .milliseconds(100))
        pair.central.close()
        // The terminal cannot know yet: its sends neither throw nor go anywhere.
        try pair.peripheral.send([1])
        pair.run(untilOffset: .milliseconds(129))
        try pair.peripheral.send([2])
        #expect(pair.peripheralRecorder.closes.isEmpty)
        #expect(pair.simulation.framesSent(on: pair.central) == 0)
        // Told one connection interval after the close; from then on a send is refused.
        pair.run(untilOffset: .milliseconds(130))
        #expect(pair.peripheralRecorder.closeReasons == [.closedByPeer])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [130])
        #expect(throws: RadioError.linkClosed) { try pair.peripheral.send([3]) }
        // The closer refused from the moment it closed.
        #expect(throws: RadioError.linkClosed) { try pair.central.send([4]) }
        pair.run(untilOffset: .seconds(1))
        #expect(pair.centralRecorder.received.isEmpty)
        #expect(pair.centralRecorder.closeReasons == [.closedLocally])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [100])
        #expect(pair.simulation.framesSent(on: pair.central) == 0)
    }

    @Test func bothSidesClosingAtOnce() throws {
        let pair = try LinkedPair()
        pair.central.close()
        pair.peripheral.close()
        pair.run(untilOffset: .seconds(1))
        #expect(pair.centralRecorder.closeReasons == [.closedLocally])
        #expect(pair.peripheralRecorder.closeReasons == [.closedLocally])
    }

    // MARK: Losing contact

    @Test func peripheralPowerOffIsNoticedAfterTheSupervisionTimeout() throws {
        let pair = try LinkedPair()
        try pair.central.send([1])
        pair.run(untilOffset: .milliseconds(100))
        pair.terminal.powerOff()
        // Data sent towards the powered-off side goes nowhere.
        try pair.central.send([2])
        pair.run(untilOffset: .seconds(5))
        #expect(pair.peripheralRecorder.received == [[1]])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [100])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [2100])
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(throws: RadioError.linkClosed) { try pair.central.send([3]) }
        #expect(!pair.terminal.isAdvertising)
    }

    @Test func aPoweredOffDeviceRefusesToSendOnceToldWhileItsPeerSendsIntoTheVoid() throws {
        let pair = try LinkedPair()
        pair.run(untilOffset: .milliseconds(100))
        pair.terminal.powerOff()
        // The powered-off side is told at once (at this same instant) ...
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [100])
        // ... and from then on its own endpoint refuses to send.
        #expect(throws: RadioError.linkClosed) { try pair.peripheral.send([1]) }
        // The wallet cannot tell until its supervision timeout: sends neither throw nor travel.
        try pair.central.send([2])
        pair.run(untilOffset: .milliseconds(2099))
        try pair.central.send([3])
        #expect(pair.centralRecorder.closes.isEmpty)
        #expect(pair.simulation.framesSent(on: pair.central) == 0)
        pair.run(untilOffset: .milliseconds(2100))
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [2100])
        #expect(throws: RadioError.linkClosed) { try pair.central.send([4]) }
        #expect(throws: RadioError.linkClosed) { try pair.peripheral.send([5]) }
        pair.run(untilOffset: .seconds(5))
        #expect(pair.peripheralRecorder.received.isEmpty)
        #expect(pair.centralRecorder.received.isEmpty)
        #expect(pair.peripheralRecorder.closes.count == 1)
        #expect(pair.centralRecorder.closes.count == 1)
    }

    @Test func centralPowerOffIsNoticedByThePeripheral() throws {
        let pair = try LinkedPair(wallet: LinkParameters(supervisionTimeout: .seconds(1)))
        pair.at(.milliseconds(50)) { pair.wallet.powerOff() }
        pair.run(untilOffset: .seconds(3))
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [50])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [1050])
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
    }

    @Test func movingOutOfRangeWithNoTrafficLosesTheLink() throws {
        let pair = try LinkedPair()
        try pair.central.send([1])
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.peripheralRecorder.received == [[1]])
        // Nothing is sent after the move: leaving range alone ends the link.
        pair.wallet.move(to: Position(x: 100, y: 0))
        #expect(pair.wallet.position == Position(x: 100, y: 0))
        pair.run(untilOffset: .milliseconds(2099))
        #expect(pair.centralRecorder.closes.isEmpty)
        #expect(pair.peripheralRecorder.closes.isEmpty)
        pair.run(untilOffset: .seconds(5))
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [2100])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [2100])
        #expect(throws: RadioError.linkClosed) { try pair.central.send([2]) }
        #expect(throws: RadioError.linkClosed) { try pair.peripheral.send([2]) }
        #expect(pair.simulation.framesSent(on: pair.central) == 1)
    }

    @Test func theTerminalMovingAwayLosesTheLinkToo() throws {
        let pair = try LinkedPair(wallet: LinkParameters(supervisionTimeout: .milliseconds(720)))
        pair.at(.milliseconds(250)) { pair.terminal.move(to: Position(x: -100, y: 0)) }
        pair.run(untilOffset: .seconds(3))
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [970])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [970])
    }

    @Test func aFrameInFlightWhenContactEndsIsLost() throws {
        let pair = try LinkedPair()
        pair.at(.milliseconds(100)) { try? pair.central.send([1]) }  // due at offset 120
        pair.at(.milliseconds(110)) { pair.wallet.move(to: Position(x: 100, y: 0)) }
        pair.run(untilOffset: .seconds(5))
        #expect(pair.peripheralRecorder.received.isEmpty)
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [2110])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [2110])
    }

    @Test func movingWithinRangeKeepsTheLink() throws {
        let pair = try LinkedPair()
        pair.wallet.move(to: Position(x: 20, y: 0))
        pair.run(untilOffset: .milliseconds(10))
        pair.wallet.move(to: Position(x: 2, y: 0))
        try pair.central.send([1])
        pair.run(untilOffset: .seconds(3))
        #expect(pair.peripheralRecorder.received == [[1]])
        #expect(pair.centralRecorder.closes.isEmpty)
        #expect(pair.peripheralRecorder.closes.isEmpty)
    }

    @Test func leavingRangeEvenBrieflyEndsTheLink() throws {
        // Contact ends the moment the device leaves range; coming back 10 ms later does not
        // bring the link back, and a frame sent after returning goes nowhere.
        let pair = try LinkedPair()
        pair.wallet.move(to: Position(x: 100, y: 0))
        pair.run(untilOffset: .milliseconds(10))
        pair.wallet.move(to: Position(x: 2, y: 0))
        try pair.central.send([1])
        pair.run(untilOffset: .seconds(3))
        #expect(pair.peripheralRecorder.received.isEmpty)
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
        #expect(pair.centralRecorder.closes.map { pair.offsetMillis($0.1) } == [2000])
        #expect(pair.peripheralRecorder.closes.map { pair.offsetMillis($0.1) } == [2000])
    }

    // MARK: Random faults

    @Test func randomFaultsAreReproducibleFromTheSeed() throws {
        func run(seed: UInt64) throws -> (received: [[UInt8]], frames: Int) {
            let pair = try LinkedPair(seed: seed) {
                $0.setRandomFaults(FaultProbabilities(drop: 0.1, duplicate: 0.1, reorder: 0.1))
            }
            for payload in numbered(200) { try pair.central.send(payload) }
            pair.run(untilOffset: .seconds(10))
            #expect(pair.simulation.framesSent(on: pair.central) == 200)
            return (pair.peripheralRecorder.received, 200)
        }
        let first = try run(seed: 42)
        let again = try run(seed: 42)
        let other = try run(seed: 43)
        #expect(first.received == again.received)
        #expect(first.received != numbered(200), "with these odds some frames must be hit")
        #expect(first.received != other.received)
        // Drops remove, duplicates repeat, reorders swap: every delivered frame was sent.
        #expect(Set(first.received).isSubset(of: Set(numbered(200))))
    }

    @Test func randomCutsEndTheLink() throws {
        let pair = try LinkedPair(seed: 3) { $0.setRandomFaults(FaultProbabilities(cut: 0.05)) }
        for (index, payload) in numbered(400).enumerated() {
            pair.at(.milliseconds(30 * index + 10)) { try? pair.central.send(payload) }
        }
        pair.run(untilOffset: .seconds(30))
        let frames = pair.simulation.framesSent(on: pair.central)
        #expect(frames < 400)
        #expect(pair.peripheralRecorder.received == Array(numbered(400).prefix(frames - 1)))
        #expect(pair.centralRecorder.closeReasons == [.connectionLost])
        #expect(pair.peripheralRecorder.closeReasons == [.connectionLost])
    }

    @Test func randomFaultsApplyOnlyToLinksOpenedAfterwards() throws {
        let pair = try LinkedPair()
        pair.simulation.setRandomFaults(FaultProbabilities(drop: 0.5))
        for payload in numbered(100) { try pair.central.send(payload) }
        pair.run(untilOffset: .seconds(2))
        #expect(pair.peripheralRecorder.received == numbered(100))
    }

    @Test func faultDescriptions() {
        #expect(
            [FrameFault.cut, .drop, .duplicate, .reorder].map(\.description) == ["cut", "drop", "duplicate", "reorder"])
        #expect(FaultProbabilities.none == FaultProbabilities(cut: 0, drop: 0, duplicate: 0, reorder: 0))
    }
}
