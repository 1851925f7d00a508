import HorizonCore
import HorizonRadio
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

@Suite("Simulated links: traffic counters (frames, bytes, turns)", .offTheCooperativePool)
struct TrafficTests {
    @Test func countsFramesBytesAndTurnsPerDirection() throws {
        let pair = try LinkedPair()
        #expect(pair.simulation.traffic(on: pair.central).frames == 0)
        #expect(pair.simulation.traffic(on: pair.central).turns == 0)

        // A request in two frames, an answer in one, then a second request: three turns.
        try pair.central.send([UInt8](repeating: 1, count: 10))
        try pair.central.send([UInt8](repeating: 2, count: 20))
        pair.run(untilOffset: .milliseconds(100))
        try pair.peripheral.send([UInt8](repeating: 3, count: 5))
        pair.run(untilOffset: .milliseconds(200))
        try pair.central.send([UInt8](repeating: 4, count: 7))

        let traffic = pair.simulation.traffic(on: pair.peripheral)
        #expect(traffic == pair.simulation.traffic(on: pair.central))
        #expect(traffic.linkID == pair.central.identifier)
        #expect(traffic.central == pair.wallet.address)
        #expect(traffic.peripheral == pair.terminal.address)
        #expect(traffic.attMTU == 247)
        #expect(traffic.centralFrames == 3)
        #expect(traffic.centralBytes == 37)
        #expect(traffic.peripheralFrames == 1)
        #expect(traffic.peripheralBytes == 5)
        #expect(traffic.frames == pair.simulation.framesSent(on: pair.central))
        #expect(traffic.bytes == 42)
        #expect(traffic.turns == 3)

        // The answer to the second request completes the second round trip.
        try pair.peripheral.send([9])
        #expect(pair.simulation.traffic(on: pair.central).turns == 4)
    }

    @Test func refusedFramesAndFramesAfterClosingDoNotCount() throws {
        let pair = try LinkedPair(wallet: LinkParameters(attMTU: 23), terminal: LinkParameters(attMTU: 23))
        try pair.central.send([UInt8](repeating: 0, count: 20))
        #expect(throws: RadioError.payloadTooLarge(size: 21, maximum: 20)) {
            try pair.central.send([UInt8](repeating: 0, count: 21))
        }
        pair.central.close()
        #expect(throws: RadioError.linkClosed) { try pair.central.send([1]) }
        pair.run(untilOffset: .seconds(1))
        // The peer was told of the close: its frames go nowhere and count as nothing.
        #expect(throws: RadioError.linkClosed) { try pair.peripheral.send([1]) }

        let traffic = pair.simulation.traffic(on: pair.central)
        #expect(traffic.centralFrames == 1)
        #expect(traffic.centralBytes == 20)
        #expect(traffic.peripheralFrames == 0)
        #expect(traffic.turns == 1)
    }

    @Test func faultedFramesStillCountAsSent() throws {
        let pair = try LinkedPair { simulation in
            simulation.injectFaultOnNextLink(.drop, atFrame: 0)
            simulation.injectFaultOnNextLink(.duplicate, atFrame: 1)
        }
        try pair.central.send([1, 2, 3])
        try pair.central.send([4, 5])
        pair.run(untilOffset: .milliseconds(100))
        #expect(pair.peripheralRecorder.received == [[4, 5], [4, 5]])
        let traffic = pair.simulation.traffic(on: pair.central)
        #expect(traffic.centralFrames == 2)
        #expect(traffic.centralBytes == 5)
    }

    @Test func everyLinkIsListedInOpeningOrderWithItsDevices() throws {
        let simulation = RadioSimulation(seed: 3)
        let terminal = try simulation.addDevice(name: "terminal")
        let wallets = try (0..<3).map { index in
            try simulation.addDevice(
                name: "wallet-\(index)", configuration: DeviceConfiguration(position: Position(x: 1, y: 0)))
        }
        let accepted = Box<[any ByteLink]>([])
        terminal.setConnectionHandler { link in accepted.value.append(link) }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        let links = Box<[any ByteLink]>([])
        for wallet in wallets {
            wallet.connect(to: terminal.address, timeout: .seconds(5)) { result in
                if case .success(let link) = result { links.value.append(link) }
            }
        }
        #expect(simulation.run(until: { links.value.count == 3 }, timeout: .seconds(1)))
        for (index, link) in links.value.enumerated() {
            try link.send([UInt8](repeating: 0, count: index + 1))
        }

        let traffic = simulation.linkTraffic
        #expect(traffic.map(\.linkID) == [0, 1, 2])
        #expect(traffic.map(\.central) == wallets.map(\.address))
        #expect(traffic.allSatisfy { $0.peripheral == terminal.address })
        #expect(traffic.map(\.centralBytes) == [1, 2, 3])
        #expect(traffic.map(\.frames) == [1, 1, 1])
    }
}
