import HorizonCore
import HorizonRadio
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

@Suite("Simulated links: connecting, MTU, timing, ordering", .offTheCooperativePool)
struct LinkTests {
    // MARK: Connecting

    @Test func connectOpensLinksOnBothSidesAfterTheSetupTime() throws {
        let pair = try LinkedPair()
        #expect(pair.openedAt == .zero + .milliseconds(60))
        #expect(pair.central.peer == pair.terminal.address)
        #expect(pair.peripheral.peer == pair.wallet.address)
        #expect(pair.central.identifier == pair.peripheral.identifier)
        #expect(pair.central.attMTU == 247)
        #expect(pair.central.maximumPayloadSize == 244)
        #expect(pair.simulation.framesSent(on: pair.central) == 0)
    }

    static let mtus = [23, 185, 247, 517]

    @Test("MTU is the smaller of both sides'", arguments: mtus, mtus)
    func mtuIsTheMinimum(centralMTU: Int, peripheralMTU: Int) throws {
        let pair = try LinkedPair(
            wallet: LinkParameters(attMTU: centralMTU), terminal: LinkParameters(attMTU: peripheralMTU))
        let expected = min(centralMTU, peripheralMTU)
        #expect(pair.central.attMTU == expected)
        #expect(pair.peripheral.attMTU == expected)
        // The MTU less the ATT header, and never more than bluetoothd 5.66 takes in one write
        // (510 bytes: it refuses a 512-byte value at MTU 517 with "Invalid Length").
        let maximum = min(expected - 3, 510)
        #expect(pair.central.maximumPayloadSize == maximum)
        #expect(pair.peripheral.maximumPayloadSize == maximum)

        // The largest payload fits, one byte more does not, in either direction.
        let largest = [UInt8](repeating: 0xAB, count: maximum)
        try pair.central.send(largest)
        try pair.peripheral.send(largest)
        #expect(throws: RadioError.payloadTooLarge(size: maximum + 1, maximum: maximum)) {
            try pair.central.send(largest + [0])
        }
        #expect(throws: RadioError.payloadTooLarge(size: maximum + 1, maximum: maximum)) {
            try pair.peripheral.send(largest + [0])
        }
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.peripheralRecorder.received == [largest])
        #expect(pair.centralRecorder.received == [largest])
        // Refused payloads are not frames.
        #expect(pair.simulation.framesSent(on: pair.central) == 2)
    }

    @Test func emptyPayloadIsDelivered() throws {
        let pair = try LinkedPair()
        try pair.central.send([])
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.peripheralRecorder.received == [[]])
    }

    @Test(
        "invalid link parameters are refused by addDevice",
        arguments: [
            (LinkParameters(attMTU: 22), "ATT MTU 22 is outside 23...517"),
            (LinkParameters(attMTU: 518), "ATT MTU 518 is outside 23...517"),
            (LinkParameters(connectionInterval: .milliseconds(5)), "connection interval must be 7.5 ms to 4 s"),
            (LinkParameters(connectionInterval: .microseconds(7499)), "connection interval must be 7.5 ms to 4 s"),
            (LinkParameters(connectionInterval: .milliseconds(4001)), "connection interval must be 7.5 ms to 4 s"),
            (LinkParameters(latency: .milliseconds(-1)), "latency must not be negative"),
            (LinkParameters(lossRate: 1), "loss rate must be in [0, 1)"),
            (LinkParameters(lossRate: -0.1), "loss rate must be in [0, 1)"),
            (LinkParameters(packetsPerEvent: 0), "at least one packet per event"),
            (LinkParameters(supervisionTimeout: .zero), "timeouts must be positive"),
            (LinkParameters(connectionSetupTime: .milliseconds(-1)), "timeouts must be positive"),
        ])
    func invalidConfiguration(parameters: LinkParameters, reason: String) {
        let simulation = RadioSimulation(seed: 1)
        #expect(throws: RadioError.invalidConfiguration(reason)) {
            _ = try simulation.addDevice(name: "bad", configuration: DeviceConfiguration(link: parameters))
        }
        #expect(
            RadioError.invalidConfiguration(reason).description == "invalid radio configuration: \(reason)")
    }

    @Test func boundaryParametersAreAccepted() throws {
        let simulation = RadioSimulation(seed: 1)
        for parameters in [
            LinkParameters(attMTU: 23), LinkParameters(attMTU: 517),
            LinkParameters(connectionInterval: .microseconds(7500)), LinkParameters(connectionInterval: .seconds(4)),
            LinkParameters(lossRate: 0.999), LinkParameters(packetsPerEvent: 1),
            LinkParameters(connectionSetupTime: .zero),
        ] {
            let device = try simulation.addDevice(name: "ok", configuration: DeviceConfiguration(link: parameters))
            #expect(device.configuration.link == parameters)
        }
    }

    @Test func connectToADeviceThatIsNotAdvertisingTimesOut() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        let wallet = try simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 1, y: 0)))
        let accepted = Box(0)
        terminal.setConnectionHandler { _ in accepted.value += 1 }
        let result = Box<(Result<any ByteLink, RadioError>, Instant)?>(nil)
        wallet.connect(to: terminal.address, timeout: .seconds(3)) { result.value = ($0, simulation.now) }
        simulation.run(for: .milliseconds(2999))
        #expect(result.value == nil, "still trying until the timeout")
        simulation.run(for: .seconds(1))
        let (outcome, time) = try #require(result.value)
        #expect(time == .zero + .seconds(3))
        #expect(throws: RadioError.connectionTimedOut(terminal.address)) { try outcome.get() }
        #expect(accepted.value == 0)
    }

    @Test func connectToADeviceOutOfRangeTimesOut() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(
            name: "terminal", configuration: DeviceConfiguration(position: Position(x: 60, y: 0)))
        let wallet = try simulation.addDevice(name: "wallet")
        terminal.setConnectionHandler { _ in Issue.record("an out-of-range central must not connect") }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        let result = Box<(Result<any ByteLink, RadioError>, Instant)?>(nil)
        wallet.connect(to: terminal.address, timeout: .milliseconds(1500)) { result.value = ($0, simulation.now) }
        let finished = simulation.run(until: { result.value != nil }, timeout: .seconds(5))
        #expect(finished)
        let (outcome, time) = try #require(result.value)
        #expect(time == .zero + .milliseconds(1500))
        #expect(throws: RadioError.connectionTimedOut(terminal.address)) { try outcome.get() }
    }

    @Test func connectToAnUnknownAddressOrWithoutAcceptorTimesOut() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        let wallet = try simulation.addDevice(name: "wallet")
        // Advertising, but nobody set a connection handler.
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        let nobody = PeerAddress("5E:1A:00:00:99:99")
        let results = Box<[(Result<any ByteLink, RadioError>, Instant)]>([])
        wallet.connect(to: nobody, timeout: .seconds(1)) { results.value.append(($0, simulation.now)) }
        wallet.connect(to: terminal.address, timeout: .seconds(2)) { results.value.append(($0, simulation.now)) }
        simulation.run(for: .seconds(3))
        try #require(results.value.count == 2)
        #expect(results.value[0].1 == .zero + .seconds(1))
        #expect(throws: RadioError.connectionTimedOut(nobody)) { try results.value[0].0.get() }
        #expect(results.value[1].1 == .zero + .seconds(2))
        #expect(throws: RadioError.connectionTimedOut(terminal.address)) { try results.value[1].0.get() }
    }

    @Test func connectWhilePoweredOffFailsAtOnce() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        let wallet = try simulation.addDevice(name: "wallet")
        terminal.setConnectionHandler { _ in Issue.record("no link expected") }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        simulation.run(for: .milliseconds(500))
        wallet.powerOff()
        let result = Box<(Result<any ByteLink, RadioError>, Instant)?>(nil)
        wallet.connect(to: terminal.address, timeout: .seconds(2)) { result.value = ($0, simulation.now) }
        #expect(result.value == nil, "the completion runs on the scheduler, not inside connect")
        simulation.run(for: .milliseconds(1))
        let (outcome, time) = try #require(result.value)
        #expect(time == .zero + .milliseconds(500))
        #expect(throws: RadioError.adapterUnavailable(.poweredOff)) { try outcome.get() }
    }

    @Test func connectToAPoweredOffPeripheralTimesOut() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        let wallet = try simulation.addDevice(name: "wallet")
        terminal.setConnectionHandler { _ in Issue.record("no link expected") }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        let result = Box<Result<any ByteLink, RadioError>?>(nil)
        wallet.connect(to: terminal.address, timeout: .seconds(1)) { result.value = $0 }
        // The terminal goes away during the connection setup.
        simulation.run(for: .milliseconds(30))
        terminal.powerOff()
        simulation.run(for: .seconds(2))
        let outcome = try #require(result.value)
        #expect(throws: RadioError.connectionTimedOut(terminal.address)) { try outcome.get() }
    }

    // MARK: Timing

    @Test func deliveryHappensAtTheNextConnectionEventStrictlyAfterSending() throws {
        let pair = try LinkedPair(wallet: LinkParameters(connectionInterval: .milliseconds(30)))
        // Link opened at 60 ms; connection events at 60 + 30k ms.
        #expect(pair.openedAt == .zero + .milliseconds(60))
        try pair.central.send([1])  // at offset 0, itself an event: next one is at 30
        pair.at(.milliseconds(10)) { try? pair.central.send([2]) }  // -> 30
        pair.at(.milliseconds(30)) { try? pair.central.send([3]) }  // exactly at an event -> 60
        pair.at(.milliseconds(59)) { try? pair.peripheral.send([4]) }  // -> 60
        pair.at(.milliseconds(61)) { try? pair.peripheral.send([5]) }  // -> 90
        pair.at(.milliseconds(200)) { try? pair.central.send([6]) }  // -> 210
        pair.run(untilOffset: .milliseconds(300))
        #expect(pair.peripheralRecorder.received == [[1], [2], [3], [6]])
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [30, 30, 60, 210])
        #expect(pair.centralRecorder.received == [[4], [5]])
        #expect(pair.centralRecorder.arrivals.map(pair.offsetMillis) == [60, 90])
    }

    @Test func latencyIsAddedToEveryPacket() throws {
        let pair = try LinkedPair(
            wallet: LinkParameters(connectionInterval: .milliseconds(30), latency: .milliseconds(7)))
        try pair.central.send([1])
        pair.at(.milliseconds(45)) { try? pair.peripheral.send([2]) }
        pair.run(untilOffset: .milliseconds(200))
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [37])
        #expect(pair.centralRecorder.arrivals.map(pair.offsetMillis) == [67])
    }

    @Test func theCentralChoosesTheTiming() throws {
        // The peripheral's interval is ignored; the central's 50 ms applies to both directions.
        let pair = try LinkedPair(
            wallet: LinkParameters(connectionInterval: .milliseconds(50)),
            terminal: LinkParameters(connectionInterval: .milliseconds(10)))
        try pair.peripheral.send([1])
        try pair.central.send([2])
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.centralRecorder.arrivals.map(pair.offsetMillis) == [50])
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [50])
    }

    @Test func packetsPerEventLimitsEachEvent() throws {
        let pair = try LinkedPair(wallet: LinkParameters(connectionInterval: .milliseconds(30), packetsPerEvent: 2))
        let payloads = numbered(5)
        for payload in payloads { try pair.central.send(payload) }
        // The other direction has its own budget.
        for payload in numbered(3, from: 100) { try pair.peripheral.send(payload) }
        // A packet sent later joins the queue behind the earlier ones.
        pair.at(.milliseconds(40)) { try? pair.central.send([0xEE]) }
        pair.run(untilOffset: .milliseconds(300))
        #expect(pair.peripheralRecorder.received == payloads + [[0xEE]])
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [30, 30, 60, 60, 90, 90])
        #expect(pair.centralRecorder.received == numbered(3, from: 100))
        #expect(pair.centralRecorder.arrivals.map(pair.offsetMillis) == [30, 30, 60])
    }

    @Test func defaultFourPacketsPerEvent() throws {
        let pair = try LinkedPair()
        for payload in numbered(9) { try pair.central.send(payload) }
        pair.run(untilOffset: .milliseconds(200))
        #expect(pair.peripheralRecorder.arrivals.map(pair.offsetMillis) == [30, 30, 30, 30, 60, 60, 60, 60, 90])
    }

    @Test func manyPayloadsKeepTheirOrder() throws {
        let pair = try LinkedPair()
        let toPeripheral = numbered(500)
        let toCentral = numbered(500, from: 1000)
        for (index, (up, down)) in zip(toPeripheral, toCentral).enumerated() {
            pair.at(.milliseconds(index % 37)) {
                try? pair.central.send(up)
                try? pair.peripheral.send(down)
            }
        }
        pair.run(untilOffset: .seconds(10))
        #expect(pair.peripheralRecorder.received.count == 500)
        #expect(pair.centralRecorder.received.count == 500)
        // Sent in order of time then scheduling order; the link keeps exactly that order.
        let sendOrder = (0..<500).sorted { ($0 % 37, $0) < ($1 % 37, $1) }
        #expect(pair.peripheralRecorder.received == sendOrder.map { toPeripheral[$0] })
        #expect(pair.centralRecorder.received == sendOrder.map { toCentral[$0] })
        #expect(pair.peripheralRecorder.arrivals == pair.peripheralRecorder.arrivals.sorted())
        #expect(pair.simulation.framesSent(on: pair.central) == 1000)
    }

    @Test func lossDelaysButNeverLosesOrReorders() throws {
        let interval = Duration.milliseconds(30)
        let lossy = try LinkedPair(wallet: LinkParameters(connectionInterval: interval, lossRate: 0.3))
        let clean = try LinkedPair(wallet: LinkParameters(connectionInterval: interval))
        let payloads = numbered(1000)
        for payload in payloads {
            try lossy.central.send(payload)
            try clean.central.send(payload)
        }
        let done = lossy.simulation.run(
            until: { lossy.peripheralRecorder.received.count == payloads.count }, timeout: .seconds(120))
        #expect(done)
        clean.run(untilOffset: .seconds(20))
        #expect(lossy.peripheralRecorder.received == payloads)
        #expect(clean.peripheralRecorder.received == payloads)
        // Without loss: 4 per event, 250 events. Retransmissions push the last one later.
        #expect(clean.peripheralRecorder.arrivals.last.map(clean.offsetMillis) == Double(250 * 30))
        let lossyLast = try #require(lossy.peripheralRecorder.arrivals.last.map(lossy.offsetMillis))
        #expect(lossyLast > Double(250 * 30))
        // Every arrival is still on a connection event.
        #expect(
            lossy.peripheralRecorder.arrivals.allSatisfy {
                (lossy.offsetMillis($0)).truncatingRemainder(dividingBy: 30) == 0
            })
        #expect(lossy.peripheralRecorder.arrivals == lossy.peripheralRecorder.arrivals.sorted())
    }

    @Test func lossIsReproducibleFromTheSeed() throws {
        func arrivals(seed: UInt64) throws -> [Instant] {
            let pair = try LinkedPair(seed: seed, wallet: LinkParameters(lossRate: 0.4))
            for payload in numbered(200) { try pair.central.send(payload) }
            pair.run(untilOffset: .seconds(30))
            #expect(pair.peripheralRecorder.received == numbered(200))
            return pair.peripheralRecorder.arrivals
        }
        let first = try arrivals(seed: 17)
        #expect(try arrivals(seed: 17) == first)
        #expect(try arrivals(seed: 18) != first)
    }

    @Test func payloadsArrivingBeforeAHandlerIsSetAreHeld() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        let wallet = try simulation.addDevice(name: "wallet")
        let accepted = Box<(any ByteLink)?>(nil)
        terminal.setConnectionHandler { accepted.value = $0 }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        let result = Box<Result<any ByteLink, RadioError>?>(nil)
        wallet.connect(to: terminal.address, timeout: .seconds(1)) { result.value = $0 }
        simulation.run(until: { result.value != nil }, timeout: .seconds(2))
        let central = try #require(try result.value?.get())
        try central.send([1])
        try central.send([2])
        central.close()
        simulation.run(for: .seconds(1))
        // Only now does the terminal look at its link.
        let peripheral = try #require(accepted.value)
        let recorder = LinkRecorder()
        recorder.attach(peripheral, clock: simulation)
        #expect(recorder.received == [[1], [2]])
        #expect(recorder.closeReasons == [.closedByPeer])
    }
}
