import HorizonCore
import HorizonRadio
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

@Suite("Simulation clock, determinism and scale", .offTheCooperativePool)
struct SimulationTests {
    // MARK: Virtual clock

    @Test func scheduledActionsFireAtExactVirtualTimesInOrder() {
        let simulation = RadioSimulation(seed: 1)
        let fired = Box<[(String, Instant)]>([])
        simulation.schedule(after: .milliseconds(10)) { fired.value.append(("ten", simulation.now)) }
        simulation.schedule(after: .milliseconds(5)) { fired.value.append(("five-a", simulation.now)) }
        let cancelled = simulation.schedule(after: .milliseconds(7)) {
            fired.value.append(("cancelled", simulation.now))
        }
        simulation.schedule(after: .milliseconds(5)) { fired.value.append(("five-b", simulation.now)) }
        simulation.execute { fired.value.append(("now", simulation.now)) }
        simulation.schedule(after: .milliseconds(-3)) { fired.value.append(("negative", simulation.now)) }
        simulation.schedule(after: .milliseconds(3)) {
            fired.value.append(("three", simulation.now))
            // Scheduled from inside an action: relative to that action's time.
            simulation.schedule(after: .milliseconds(4)) { fired.value.append(("nested", simulation.now)) }
        }
        cancelled.cancel()
        #expect(simulation.pendingEventCount == 7)
        #expect(fired.value.isEmpty, "nothing runs until run is called")

        simulation.run(for: .milliseconds(20))
        #expect(fired.value.map(\.0) == ["now", "negative", "three", "five-a", "five-b", "nested", "ten"])
        #expect(fired.value.map { millis($0.1) } == [0, 0, 3, 5, 5, 7, 10])
        #expect(simulation.now == .zero + .milliseconds(20))
        #expect(simulation.pendingEventCount == 0)
    }

    @Test func runUntilStopsAtTheDeadline() {
        let simulation = RadioSimulation(seed: 1)
        let fired = Box<[Instant]>([])
        for delay in [100, 200, 300] {
            simulation.schedule(after: .milliseconds(delay)) { fired.value.append(simulation.now) }
        }
        simulation.run(until: .zero + .milliseconds(200))
        #expect(
            fired.value == [.zero + .milliseconds(100), .zero + .milliseconds(200)], "an event at the deadline fires")
        #expect(simulation.now == .zero + .milliseconds(200))
        #expect(simulation.pendingEventCount == 1)
        // Running to an earlier instant does not move the clock back.
        simulation.run(until: .zero + .milliseconds(50))
        #expect(simulation.now == .zero + .milliseconds(200))
        simulation.run(for: .seconds(1))
        #expect(fired.value.count == 3)
        #expect(simulation.now == .zero + .milliseconds(1200))
    }

    @Test func runUntilConditionReturnsTrueWhenItHolds() {
        let simulation = RadioSimulation(seed: 1)
        let flag = Box(false)
        let after = Box(false)
        simulation.schedule(after: .milliseconds(250)) { flag.value = true }
        simulation.schedule(after: .milliseconds(250)) { after.value = true }
        let held = simulation.run(until: { flag.value }, timeout: .seconds(1))
        #expect(held)
        #expect(simulation.now == .zero + .milliseconds(250))
        // It stops right after the event that made the condition true.
        #expect(!after.value)
        #expect(simulation.pendingEventCount == 1)
        // A condition that already holds returns at once.
        #expect(simulation.run(until: { true }, timeout: .seconds(1)))
        #expect(simulation.now == .zero + .milliseconds(250))
    }

    @Test func runUntilConditionReturnsFalseAtTimeout() {
        let simulation = RadioSimulation(seed: 1)
        let count = Box(0)
        for delay in stride(from: 100, through: 2000, by: 100) {
            simulation.schedule(after: .milliseconds(delay)) { count.value += 1 }
        }
        let held = simulation.run(until: { count.value > 100 }, timeout: .milliseconds(1050))
        #expect(!held)
        #expect(simulation.now == .zero + .milliseconds(1050))
        #expect(count.value == 10)
        #expect(simulation.pendingEventCount == 10)
        // With nothing to do at all, the clock still moves to the deadline.
        let idle = RadioSimulation(seed: 1)
        #expect(!idle.run(until: { false }, timeout: .seconds(3)))
        #expect(idle.now == .zero + .seconds(3))
    }

    @Test func wallClockAndDeviceSkew() throws {
        let simulation = RadioSimulation(seed: 1, wallClockAtStart: 1_800_000_000)
        let exact = try simulation.addDevice(name: "exact")
        let behind = try simulation.addDevice(
            name: "behind", configuration: DeviceConfiguration(wallClockSkew: .seconds(-90)))
        #expect(simulation.wallClock == 1_800_000_000)
        #expect(exact.clock.wallClock == 1_800_000_000)
        #expect(behind.clock.wallClock == 1_799_999_910)
        simulation.run(for: .milliseconds(2500))
        #expect(simulation.wallClock == 1_800_000_002)
        #expect(behind.clock.wallClock == 1_799_999_912)
        behind.clock.setSkew(.seconds(30))
        #expect(behind.clock.wallClock == 1_800_000_032)
        #expect(behind.configuration.wallClockSkew == .seconds(30))
        #expect(exact.clock.wallClock == 1_800_000_002)
        // Device schedulers share the virtual clock.
        #expect(behind.scheduler.now == simulation.now)
        #expect(behind.clock.now == .zero + .milliseconds(2500))
        #expect(RadioSimulation(seed: 1).wallClock == 1_800_000_000, "the default start")
    }

    @Test func deviceSchedulersRunOnTheSimulation() throws {
        let simulation = RadioSimulation(seed: 1)
        let device = try simulation.addDevice(name: "device")
        let fired = Box<[Instant]>([])
        device.scheduler.schedule(after: .milliseconds(40)) { fired.value.append(simulation.now) }
        let cancelled = device.clock.schedule(after: .milliseconds(20)) { fired.value.append(.zero) }
        cancelled.cancel()
        device.scheduler.execute { fired.value.append(simulation.now) }
        simulation.run(for: .milliseconds(100))
        #expect(fired.value == [.zero, .zero + .milliseconds(40)])
    }

    // MARK: Determinism

    /// Two terminals, two wallets, scanning, one link with traffic both ways and random faults.
    func scenarioTrace(seed: UInt64) throws -> [String] {
        let simulation = RadioSimulation(seed: seed, recordsTrace: true)
        let terminals = try (0..<2).map { index in
            try simulation.addDevice(
                name: "terminal-\(index)",
                configuration: DeviceConfiguration(position: Position(x: Double(index) * 3, y: 0)))
        }
        let wallets = try (0..<2).map { index in
            try simulation.addDevice(
                name: "wallet-\(index)",
                configuration: DeviceConfiguration(
                    position: Position(x: 1, y: 1 + Double(index)), link: LinkParameters(lossRate: 0.2)))
        }
        let accepted = Box<[any ByteLink]>([])
        for (index, terminal) in terminals.enumerated() {
            terminal.setConnectionHandler { accepted.value.append($0) }
            _ = try terminal.startAdvertising(advertisingBytes(marker: UInt8(index)), interval: .milliseconds(100))
        }
        let received = Box<[[UInt8]]>([])
        for wallet in wallets { try wallet.startScanning { _ in } }
        simulation.setRandomFaults(FaultProbabilities(drop: 0.1, duplicate: 0.1, reorder: 0.1))
        simulation.run(for: .milliseconds(500))
        let link = Box<(any ByteLink)?>(nil)
        wallets[0].connect(to: terminals[1].address, timeout: .seconds(2)) { link.value = try? $0.get() }
        simulation.run(until: { link.value != nil }, timeout: .seconds(3))
        let central = try #require(link.value)
        let peripheral = try #require(accepted.value.first)
        let handler = ByteLinkHandler(onReceive: { received.value.append($0) }, onClose: { _ in })
        central.setHandler(handler)
        peripheral.setHandler(handler)
        for index in 0..<10 {
            try central.send([UInt8(index), 0xC0])
            try peripheral.send([UInt8(index), 0x9E])
            simulation.run(for: .milliseconds(45))
        }
        wallets[1].move(to: Position(x: 5, y: 5))
        simulation.run(for: .seconds(1))
        central.close()
        simulation.run(for: .milliseconds(500))
        return simulation.trace
    }

    @Test func sameSeedReplaysTheSameTrace() throws {
        let first = try scenarioTrace(seed: 2024)
        let second = try scenarioTrace(seed: 2024)
        #expect(!first.isEmpty)
        #expect(first == second)
        for kind in ["advertise-start", "sighting", "connect-request", "link-open", "frame", "move", "link-close"] {
            #expect(first.contains { $0.split(separator: " ").dropFirst().first.map(String.init) == kind }, "\(kind)")
        }
        #expect(first.contains { $0.contains("fault=") }, "the random fault profile hit at least one frame")
    }

    @Test func differentSeedGivesADifferentTrace() throws {
        let first = try scenarioTrace(seed: 2024)
        let other = try scenarioTrace(seed: 2025)
        #expect(!other.isEmpty)
        #expect(first != other)
    }

    @Test func traceLinesCarryTimeAndEvent() throws {
        let pair = try LinkedPair(recordsTrace: true)
        try pair.central.send([0xAB, 0xCD])
        pair.run(untilOffset: .milliseconds(100))
        let trace = pair.simulation.trace
        #expect(trace.first == "0.0 advertise-start terminal set=0 \(advertisingBytes().hexString)")
        #expect(trace.contains("0.0 connect-request wallet->5E:1A:00:00:00:00"))
        #expect(trace.contains("60.0 link-open #0 wallet->terminal mtu=247"))
        #expect(trace.contains("60.0 frame #0.0 wallet abcd"))
        #expect(RadioSimulation(seed: 1).trace.isEmpty, "no trace unless asked for")
    }

    // MARK: Scale

    @Test func twentyTerminalsAndTwentyWallets() throws {
        let simulation = RadioSimulation(seed: 7)
        let count = 20
        var terminals: [SimulatedDevice] = []
        var wallets: [SimulatedDevice] = []
        for index in 0..<count {
            // Terminals 1.5 m apart along a counter; each wallet stands 0.5 m from its own.
            let x = Double(index) * 1.5
            terminals.append(
                try simulation.addDevice(
                    name: "terminal-\(index)", configuration: DeviceConfiguration(position: Position(x: x, y: 0))))
            wallets.append(
                try simulation.addDevice(
                    name: "wallet-\(index)", configuration: DeviceConfiguration(position: Position(x: x, y: 0.5))))
        }
        let terminalInbox = Box([[[UInt8]]](repeating: [], count: count))
        let walletInbox = Box([[[UInt8]]](repeating: [], count: count))
        let sightings = Box([Set<PeerAddress>](repeating: [], count: count))
        for (index, terminal) in terminals.enumerated() {
            terminal.setConnectionHandler { link in
                link.setHandler(
                    ByteLinkHandler(
                        onReceive: { payload in
                            terminalInbox.value[index].append(payload)
                            try? link.send([0x7E, UInt8(index)] + payload)
                        }, onClose: { _ in }))
            }
            _ = try terminal.startAdvertising(advertisingBytes(marker: UInt8(index)), interval: .milliseconds(100))
        }
        for (index, wallet) in wallets.enumerated() {
            try wallet.startScanning { sightings.value[index].insert($0.address) }
        }
        simulation.run(for: .seconds(1))
        // Every wallet hears every terminal (all within 29 m).
        #expect(sightings.value.allSatisfy { $0.count == count })

        let links = Box([(any ByteLink)?](repeating: nil, count: count))
        for (index, wallet) in wallets.enumerated() {
            wallet.stopScanning()
            wallet.connect(to: terminals[index].address, timeout: .seconds(2)) { result in
                guard let link = try? result.get() else {
                    Issue.record("wallet \(index) did not connect")
                    return
                }
                links.value[index] = link
                link.setHandler(ByteLinkHandler(onReceive: { walletInbox.value[index].append($0) }, onClose: { _ in }))
                try? link.send([0x57, UInt8(index)])
            }
        }
        let done = simulation.run(until: { walletInbox.value.allSatisfy { $0.count == 1 } }, timeout: .seconds(5))
        #expect(done)
        for index in 0..<count {
            #expect(terminalInbox.value[index] == [[0x57, UInt8(index)]])
            #expect(walletInbox.value[index] == [[0x7E, UInt8(index), 0x57, UInt8(index)]])
            #expect(links.value[index]?.peer == terminals[index].address)
        }
    }
}
