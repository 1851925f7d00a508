import HorizonCore
import HorizonRadio
import HorizonSimulatedRadio
import HorizonTestSupport
import Synchronization
import Testing

@Suite("Advertising and scanning", .offTheCooperativePool)
struct AdvertisingAndScanningTests {
    /// A simulation with a scanning wallet at the origin that records every sighting.
    struct Room {
        let simulation: RadioSimulation
        let wallet: SimulatedDevice
        let sightings = Box<[Sighting]>([])

        init(seed: UInt64 = 1, reportsRSSI: Bool = true) throws {
            simulation = RadioSimulation(seed: seed)
            wallet = try simulation.addDevice(
                name: "wallet", configuration: DeviceConfiguration(position: .origin, reportsRSSI: reportsRSSI))
            let box = self.sightings
            try wallet.startScanning { box.value.append($0) }
        }

        func terminal(_ name: String, at position: Position) throws -> SimulatedDevice {
            try simulation.addDevice(name: name, configuration: DeviceConfiguration(position: position))
        }

        func heard(from device: SimulatedDevice) -> [Sighting] {
            sightings.value.filter { $0.address == device.address }
        }
    }

    @Test func addressesAreAssignedInCreationOrder() throws {
        let simulation = RadioSimulation(seed: 1)
        let names = (0..<3).map { "device-\($0)" }
        let devices = try names.map { try simulation.addDevice(name: $0) }
        #expect(devices.map(\.address.rawValue) == ["5E:1A:00:00:00:00", "5E:1A:00:00:00:01", "5E:1A:00:00:00:02"])
        #expect(devices.map(\.name) == names)
        let more = try (3..<300).map { try simulation.addDevice(name: "d\($0)") }
        #expect(more.last?.address.rawValue == "5E:1A:00:00:01:2B")
        #expect(devices[1].address.description == "5E:1A:00:00:00:01")
    }

    @Test func sightingsArriveAtTheAdvertisingInterval() throws {
        let room = try Room()
        let terminal = try room.terminal("terminal", at: Position(x: 1, y: 0))
        let data = advertisingBytes(marker: 0x77)
        _ = try terminal.startAdvertising(data, interval: .milliseconds(100))
        #expect(terminal.isAdvertising)
        room.simulation.run(for: .seconds(10))
        let heard = room.heard(from: terminal)
        // One event per 100 ms plus the specification's 0-10 ms random delay, from a random phase.
        #expect((90...100).contains(heard.count), "heard \(heard.count)")
        #expect(heard.allSatisfy { $0.advertisingData == data })
        #expect(heard.allSatisfy { $0.address == terminal.address })
        #expect(heard.allSatisfy { $0.receivedAt <= room.simulation.now })
        let gaps = zip(heard.dropFirst(), heard).map { ($0.receivedAt - $1.receivedAt) }
        #expect(gaps.allSatisfy { $0 >= .milliseconds(100) && $0 <= .milliseconds(110) })
        #expect(heard.first.map { $0.receivedAt < Instant.zero + .milliseconds(100) } == true)
        #expect(room.simulation.now == .zero + .seconds(10))
    }

    @Test func slowerIntervalGivesFewerSightings() throws {
        let room = try Room()
        let fast = try room.terminal("fast", at: Position(x: 1, y: 0))
        let slow = try room.terminal("slow", at: Position(x: 0, y: 1))
        _ = try fast.startAdvertising(advertisingBytes(marker: 1), interval: .milliseconds(20))
        _ = try slow.startAdvertising(advertisingBytes(marker: 2), interval: .seconds(1))
        room.simulation.run(for: .seconds(10))
        // 20 ms + 0-10 ms: 25 ms on average.
        #expect((330...500).contains(room.heard(from: fast).count))
        #expect((9...10).contains(room.heard(from: slow).count))
    }

    @Test func rssiFollowsTheLogDistanceModel() throws {
        let room = try Room(seed: 99)
        let near = try room.terminal("near", at: Position(x: 1, y: 0))
        let middle = try room.terminal("middle", at: Position(x: 0, y: 3))
        let far = try room.terminal("far", at: Position(x: -6, y: -8))  // 10 m
        for terminal in [near, middle, far] {
            _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        }
        room.simulation.run(for: .seconds(10))
        let readings = [near, middle, far].map { terminal in room.heard(from: terminal).compactMap(\.rssi) }
        for (terminal, values) in zip([near, middle, far], readings) {
            #expect(values.count >= 50, "\(terminal.name): \(values.count) readings")
            #expect(values.count == room.heard(from: terminal).count, "every sighting carries RSSI")
        }
        let medians = readings.map(median)
        let model = PathLossModel()
        #expect(abs(medians[0] - -59) <= 1.5, "median at 1 m: \(medians[0])")
        #expect(abs(medians[1] - model.meanRSSI(atDistance: 3)) <= 1.5, "median at 3 m: \(medians[1])")
        #expect(abs(medians[2] - model.meanRSSI(atDistance: 10)) <= 1.5, "median at 10 m: \(medians[2])")
        #expect(medians[0] > medians[1])
        #expect(medians[1] > medians[2])
        // Noise is there: readings at one distance are not all equal.
        #expect(Set(readings[0]).count > 3)
    }

    @Test func pathLossModelValues() {
        let model = PathLossModel()
        #expect(model.meanRSSI(atDistance: 1) == -59)
        #expect(abs(model.meanRSSI(atDistance: 10) - -81) < 1e-9)
        #expect(model.meanRSSI(atDistance: 0) == model.meanRSSI(atDistance: 0.1))
        #expect(abs(model.meanRSSI(atDistance: 0.01) - -37) < 1e-9)
        #expect(model.isInRange(distance: 40))
        #expect(!model.isInRange(distance: 50))
        #expect(Position(x: 3, y: 4).distance(to: .origin) == 5)
        #expect(Position(x: 1, y: 2).description == "(1.0, 2.0)")
    }

    @Test func deviceBeyondSensitivityHearsNothing() throws {
        let room = try Room()
        let distant = try room.terminal("distant", at: Position(x: 100, y: 0))  // mean -103 dBm
        let near = try room.terminal("near", at: Position(x: 2, y: 0))
        _ = try distant.startAdvertising(advertisingBytes(), interval: .milliseconds(50))
        _ = try near.startAdvertising(advertisingBytes(), interval: .milliseconds(50))
        room.simulation.run(for: .seconds(5))
        #expect(room.heard(from: distant).isEmpty)
        #expect(room.heard(from: near).count > 50)
    }

    @Test func weakSignalsNearTheEdgeAreSometimesHeard() throws {
        let room = try Room(seed: 5)
        // At 43 m the mean is just above the -95 dBm sensitivity: noise decides, reading by reading.
        let edge = try room.terminal("edge", at: Position(x: 43, y: 0))
        _ = try edge.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        room.simulation.run(for: .seconds(10))
        let heard = room.heard(from: edge)
        #expect(heard.count > 10)
        #expect(heard.count < 90)
        #expect(heard.allSatisfy { ($0.rssi ?? .min) >= -95 })
    }

    @Test func noRSSIWhenTheControllerCannotMeasureIt() throws {
        let room = try Room(reportsRSSI: false)
        let terminal = try room.terminal("terminal", at: Position(x: 1, y: 0))
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        room.simulation.run(for: .seconds(2))
        let heard = room.heard(from: terminal)
        #expect(heard.count >= 17)
        #expect(heard.allSatisfy { $0.rssi == nil })
    }

    @Test func aScannerDoesNotHearItself() throws {
        let room = try Room()
        let other = try room.terminal("other", at: Position(x: 1, y: 0))
        _ = try room.wallet.startAdvertising(advertisingBytes(marker: 0x01), interval: .milliseconds(100))
        _ = try other.startAdvertising(advertisingBytes(marker: 0x02), interval: .milliseconds(100))
        // The other device scans too and hears the wallet.
        let otherHeard = Box<[Sighting]>([])
        try other.startScanning { otherHeard.value.append($0) }
        room.simulation.run(for: .seconds(2))
        #expect(room.heard(from: room.wallet).isEmpty)
        #expect(!room.heard(from: other).isEmpty)
        #expect(room.sightings.value.allSatisfy { $0.address == other.address })
        #expect(!otherHeard.value.isEmpty)
        #expect(otherHeard.value.allSatisfy { $0.address == room.wallet.address })
    }

    @Test func stoppingAnAdvertisingSetStopsItsSightings() throws {
        let room = try Room()
        let terminal = try room.terminal("terminal", at: Position(x: 1, y: 0))
        let first = try terminal.startAdvertising(advertisingBytes(marker: 0xA1), interval: .milliseconds(100))
        let second = try terminal.startAdvertising(advertisingBytes(marker: 0xA2), interval: .milliseconds(100))
        room.simulation.run(for: .seconds(2))
        let heardBoth = room.heard(from: terminal)
        #expect(heardBoth.contains { $0.advertisingData == advertisingBytes(marker: 0xA1) })
        #expect(heardBoth.contains { $0.advertisingData == advertisingBytes(marker: 0xA2) })

        first.stop()
        #expect(terminal.isAdvertising)
        let stoppedAt = room.simulation.now
        room.simulation.run(for: .seconds(2))
        let afterFirstStop = room.heard(from: terminal).filter { $0.receivedAt > stoppedAt }
        #expect(!afterFirstStop.isEmpty)
        #expect(afterFirstStop.allSatisfy { $0.advertisingData == advertisingBytes(marker: 0xA2) })

        second.stop()
        second.stop()  // stopping twice is harmless
        #expect(!terminal.isAdvertising)
        let count = room.sightings.value.count
        let eventsBefore = room.simulation.pendingEventCount
        room.simulation.run(for: .seconds(5))
        #expect(room.sightings.value.count == count)
        // The stopped sets' pending events fire once more, find nothing and are not rescheduled.
        #expect(room.simulation.pendingEventCount <= eventsBefore)
        #expect(room.simulation.pendingEventCount == 0)
    }

    @Test func stoppingScanningStopsSightings() throws {
        let room = try Room()
        let terminal = try room.terminal("terminal", at: Position(x: 1, y: 0))
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        room.simulation.run(for: .seconds(1))
        #expect(room.wallet.isScanning)
        #expect(throws: RadioError.alreadyScanning) { try room.wallet.startScanning { _ in } }
        room.wallet.stopScanning()
        #expect(!room.wallet.isScanning)
        let count = room.sightings.value.count
        #expect(count > 0)
        room.simulation.run(for: .seconds(1))
        #expect(room.sightings.value.count == count)
        // Scanning again with a new handler works.
        let again = Box(0)
        try room.wallet.startScanning { _ in again.value += 1 }
        room.simulation.run(for: .seconds(1))
        #expect(again.value >= 8)
        #expect(room.sightings.value.count == count)
    }

    @Test func advertisingDataOverLegacyLimitIsRefused() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        #expect(throws: RadioError.advertisementTooLarge(size: 32, maximum: 31)) {
            _ = try terminal.startAdvertising([UInt8](repeating: 0, count: 32), interval: .milliseconds(100))
        }
        #expect(!terminal.isAdvertising)
        _ = try terminal.startAdvertising(advertisingBytes(count: 31), interval: .milliseconds(100))
        #expect(terminal.isAdvertising)
    }

    @Test func advertisingIntervalLimits() throws {
        let simulation = RadioSimulation(seed: 1)
        let terminal = try simulation.addDevice(name: "terminal")
        let message = "advertising interval must be 20 ms to 10.24 s"
        #expect(throws: RadioError.invalidConfiguration(message)) {
            _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(19))
        }
        #expect(throws: RadioError.invalidConfiguration(message)) {
            _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(10_250))
        }
        #expect(throws: RadioError.invalidConfiguration(message)) {
            _ = try terminal.startAdvertising(advertisingBytes(), interval: .nanoseconds(10_240_000_001))
        }
        #expect(!terminal.isAdvertising)
        // Both ends of the range Bluetooth allows are accepted: 20 ms and 10.24 s.
        let fastest = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(20))
        fastest.stop()
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(10_240))
        #expect(terminal.isAdvertising)
    }

    @Test func theSlowestAdvertisingIntervalIsHeard() throws {
        let room = try Room()
        let terminal = try room.terminal("terminal", at: Position(x: 1, y: 0))
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(10_240))
        // A random first phase within one interval, then one interval plus 0-10 ms each time.
        room.simulation.run(for: .seconds(45))
        let times = room.heard(from: terminal).map(\.receivedAt)
        #expect((4...5).contains(times.count))
        #expect(times[0] < .zero + .milliseconds(10_240))
        for (earlier, later) in zip(times, times.dropFirst()) {
            #expect(later - earlier >= .milliseconds(10_240))
            #expect(later - earlier < .milliseconds(10_250))
        }
    }

    @Test func poweredOffDeviceCannotAdvertiseOrScan() throws {
        let room = try Room()
        let terminal = try room.terminal("terminal", at: Position(x: 1, y: 0))
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        try terminal.startScanning { _ in }
        room.simulation.run(for: .seconds(1))
        #expect(!room.heard(from: terminal).isEmpty)

        terminal.powerOff()
        #expect(terminal.availability == .poweredOff)
        #expect(!terminal.isAdvertising)
        #expect(!terminal.isScanning)
        #expect(throws: RadioError.adapterUnavailable(.poweredOff)) {
            _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        }
        #expect(throws: RadioError.adapterUnavailable(.poweredOff)) { try terminal.startScanning { _ in } }
        let count = room.sightings.value.count
        room.simulation.run(for: .seconds(1))
        #expect(room.sightings.value.count == count)

        terminal.setAvailability(.unauthorized)
        #expect(throws: RadioError.adapterUnavailable(.unauthorized)) { try terminal.startScanning { _ in } }
        terminal.setAvailability(.serviceUnavailable)
        #expect(throws: RadioError.adapterUnavailable(.serviceUnavailable)) {
            _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        }

        // Powered on again, it must start advertising again itself.
        terminal.powerOn()
        #expect(terminal.availability == .poweredOn)
        #expect(!terminal.isAdvertising)
        room.simulation.run(for: .seconds(1))
        #expect(room.sightings.value.count == count)
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        room.simulation.run(for: .seconds(1))
        #expect(room.sightings.value.count > count)
    }

    @Test func poweredOffScannerHearsNothing() throws {
        let room = try Room()
        let terminal = try room.terminal("terminal", at: Position(x: 1, y: 0))
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        room.wallet.setAvailability(.unsupported)
        #expect(!room.wallet.isScanning)
        room.simulation.run(for: .seconds(1))
        #expect(room.sightings.value.isEmpty)
        #expect(room.wallet.availability == .unsupported)
    }

    @Test func radioErrorDescriptionsSayWhatToDo() {
        #expect(
            RadioError.adapterUnavailable(.poweredOff).description
                == "the Bluetooth adapter is powered off; power it on (bluetoothctl power on)")
        #expect(
            RadioError.advertisementTooLarge(size: 32, maximum: 31).description
                == "advertising data of 32 bytes does not fit legacy advertising (31 bytes)")
        #expect(
            RadioError.payloadTooLarge(size: 245, maximum: 244).description
                == "payload of 245 bytes exceeds the link's 244 bytes per packet")
        #expect(
            RadioError.connectionTimedOut(PeerAddress("5E:1A:00:00:00:01")).description
                == "connecting to 5E:1A:00:00:00:01 timed out; move closer and try again")
        #expect(LinkCloseReason.connectionLost.description == "radio contact lost")
        #expect(AdapterAvailability.serviceUnavailable.description == "Bluetooth service not running")
    }
}

@Suite("Transmit power", .offTheCooperativePool)
struct TransmitPowerTests {
    @Test func aStrongerTransmitterIsHeardLouderByExactlyItsOffset() throws {
        let quiet = PathLossModel(noiseStandardDeviation: 0)
        let simulation = RadioSimulation(seed: 3, pathLoss: quiet)
        let normal = try simulation.addDevice(name: "normal", configuration: DeviceConfiguration(position: .origin))
        let loud = try simulation.addDevice(
            name: "loud", configuration: DeviceConfiguration(position: Position(x: 0, y: 2), transmitPowerOffset: 6))
        let listener = try simulation.addDevice(
            name: "listener", configuration: DeviceConfiguration(position: Position(x: 0, y: 1)))
        let heard = Mutex<[PeerAddress: Int]>([:])
        try listener.startScanning { sighting in heard.withLock { $0[sighting.address] = sighting.rssi } }
        _ = try normal.startAdvertising([2, 1, 6], interval: .milliseconds(100))
        _ = try loud.startAdvertising([2, 1, 6], interval: .milliseconds(100))
        simulation.run(for: .seconds(1))
        // Both are 1 m away: the same path loss, 6 dB apart.
        let readings = heard.withLock { $0 }
        #expect(readings[normal.address] == -59)
        #expect(readings[loud.address] == -53)
    }
}
