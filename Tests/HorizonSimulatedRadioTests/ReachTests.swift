import HorizonCore
import HorizonRadio
import HorizonSimulatedRadio
import HorizonTestSupport
import Testing

/// Advertisements reach only scanners that could hear them; scanners far out of reach are
/// skipped without drawing their noise (so a simulation of many shops does not pay for every
/// pair of devices at every advertising event), and nothing a device hears changes because of it.
@Suite("Advertising reach", .offTheCooperativePool)
struct ReachTests {
    /// A terminal at the origin advertising every 100 ms, and scanners that record what they hear.
    struct Street {
        let simulation: RadioSimulation
        let terminal: SimulatedDevice

        init(seed: UInt64 = 5, transmitPowerOffset: Double = 0) throws {
            simulation = RadioSimulation(seed: seed)
            terminal = try simulation.addDevice(
                name: "terminal", configuration: DeviceConfiguration(transmitPowerOffset: transmitPowerOffset))
            _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        }

        func scanner(_ name: String, at position: Position) throws -> (SimulatedDevice, Box<[Sighting]>) {
            let device = try simulation.addDevice(name: name, configuration: DeviceConfiguration(position: position))
            let heard = Box<[Sighting]>([])
            try device.startScanning { heard.value.append($0) }
            return (device, heard)
        }
    }

    @Test func aScannerFarOutOfReachHearsNothingUntilItComesClose() throws {
        let street = try Street()
        let (far, heard) = try street.scanner("far", at: Position(x: 1000, y: 0))
        street.simulation.run(for: .seconds(5))
        #expect(heard.value.isEmpty)
        far.move(to: Position(x: 1, y: 0))
        street.simulation.run(for: .seconds(5))
        #expect((45...50).contains(heard.value.count), "heard \(heard.value.count)")
        #expect(heard.value.allSatisfy { ($0.rssi ?? 0) > -75 })
    }

    @Test func theNoisyFringeJustBeyondRangeIsStillHeardSometimes() throws {
        // Mean RSSI about 2 dB below the -95 dBm sensitivity: only upward noise gets through.
        let street = try Street()
        let (_, heard) = try street.scanner("fringe", at: Position(x: 53.4, y: 0))
        street.simulation.run(for: .seconds(20))
        #expect((5...80).contains(heard.value.count), "heard \(heard.value.count) of about 195")
        #expect(heard.value.allSatisfy { ($0.rssi ?? 0) >= -95 })
    }

    @Test func aStrongerTransmitterReachesFurther() throws {
        // At 1 km the default transmitter is far out of reach; 40 dB stronger, it is heard.
        let strong = try Street(transmitPowerOffset: 40)
        let (_, heard) = try strong.scanner("listener", at: Position(x: 1000, y: 0))
        strong.simulation.run(for: .seconds(5))
        #expect(heard.value.count > 40)
    }

    @Test func whatANearScannerHearsDoesNotDependOnFarOnes() throws {
        func nearReadings(withFarScanners farCount: Int) throws -> [Int?] {
            let street = try Street(seed: 11)
            let (_, heard) = try street.scanner("near", at: Position(x: 2, y: 0))
            for index in 0..<farCount {
                _ = try street.scanner("far-\(index)", at: Position(x: 800 + Double(index), y: 0))
            }
            street.simulation.run(for: .seconds(3))
            return heard.value.map(\.rssi)
        }
        let alone = try nearReadings(withFarScanners: 0)
        #expect(!alone.isEmpty)
        #expect(try nearReadings(withFarScanners: 50) == alone)
    }
}

@Suite("Advertising reach: path-loss edge cases", .offTheCooperativePool)
struct ReachEdgeCaseTests {
    /// One scanner at `distance` metres of a terminal under `pathLoss`; how many sightings in 2 s.
    func sightings(at distance: Double, pathLoss: PathLossModel, transmitPowerOffset: Double = 0) throws -> Int {
        let simulation = RadioSimulation(seed: 9, pathLoss: pathLoss)
        let terminal = try simulation.addDevice(
            name: "terminal", configuration: DeviceConfiguration(transmitPowerOffset: transmitPowerOffset))
        let scanner = try simulation.addDevice(
            name: "scanner", configuration: DeviceConfiguration(position: Position(x: distance, y: 0)))
        let heard = Box(0)
        try scanner.startScanning { _ in heard.value += 1 }
        _ = try terminal.startAdvertising(advertisingBytes(), interval: .milliseconds(100))
        simulation.run(for: .seconds(2))
        return heard.value
    }

    @Test func withoutNoiseTheRangeIsExactlyTheMeanModelsRange() throws {
        let quiet = PathLossModel(noiseStandardDeviation: 0)
        // -59 - 22 log10(d) >= -95  <=>  d <= 43.3 m
        #expect(try sightings(at: 43, pathLoss: quiet) > 15)
        #expect(try sightings(at: 44, pathLoss: quiet) == 0)
    }

    @Test func aSignalThatDoesNotFadeWithDistanceIsHeardAnywhere() throws {
        let flat = PathLossModel(exponent: 0)
        #expect(try sightings(at: 100_000, pathLoss: flat) > 15)
    }

    @Test func aTransmitterTooWeakToBeHeardEvenUpCloseIsHeardByNobody() throws {
        // 10 cm away the mean is -59 + 22 - 80 = -117 dBm: more than ten deviations too weak.
        #expect(try sightings(at: 0.05, pathLoss: PathLossModel(), transmitPowerOffset: -80) == 0)
        // 40 dB weaker is faint but audible up close.
        #expect(try sightings(at: 0.05, pathLoss: PathLossModel(), transmitPowerOffset: -40) > 15)
    }
}
