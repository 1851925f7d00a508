import Foundation
import HorizonCore
import HorizonRadio
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores
import HorizonTestSupport
import Testing

/// The crash seam behaves like a process dying: nothing it set going fires afterwards, its links
/// go down for the peer, its scan and advertising stop, and the next run can use the device.
@Suite("The simulated process crash", .offTheCooperativePool)
struct ProcessSeamTests {
    @Test func aCrashedProcessFiresNoTimerKeepsNoLinkAndFreesTheDevice() throws {
        let simulation = RadioSimulation(seed: 5)
        let terminalDevice = try simulation.addDevice(name: "terminal")
        let walletDevice = try simulation.addDevice(
            name: "wallet", configuration: DeviceConfiguration(position: Position(x: 0.3, y: 0)))
        let first = SimulatedProcess(name: "terminal", generation: 1)
        let radio = ProcessRadio(device: terminalDevice, process: first)
        let fired = Recorder<String>()
        radio.scheduler.schedule(after: .seconds(1)) { fired.append("timer") }
        radio.setConnectionHandler { link in
            link.setHandler(
                ByteLinkHandler(onReceive: { _ in fired.append("received") }, onClose: { _ in fired.append("closed") }))
        }
        _ = try radio.startAdvertising([0x02, 0x01, 0x06], interval: .milliseconds(100))
        try radio.startScanning { _ in fired.append("sighting") }

        // The wallet connects; the terminal process dies with the link up.
        let peerEnds = Recorder<LinkCloseReason>()
        let walletLink = Recorder<any ByteLink>()
        walletDevice.connect(to: terminalDevice.address, timeout: .seconds(5)) { result in
            guard case .success(let link) = result else { return }
            link.setHandler(ByteLinkHandler(onReceive: { _ in }, onClose: { peerEnds.append($0) }))
            walletLink.append(link)
        }
        #expect(simulation.run(until: { walletLink.count == 1 }, timeout: .seconds(2)))
        first.crash()
        try walletLink.last?.send([1, 2, 3])
        simulation.run(for: .seconds(5))
        #expect(fired.values.isEmpty)
        #expect(peerEnds.values == [.closedByPeer])
        #expect(!terminalDevice.isAdvertising)
        #expect(!terminalDevice.isScanning)
        #expect(throws: RadioError.self) {
            try radio.startAdvertising([0x02, 0x01, 0x06], interval: .milliseconds(100))
        }

        // The next run of the program gets the device back.
        let second = ProcessRadio(device: terminalDevice, process: SimulatedProcess(name: "terminal", generation: 2))
        try second.startScanning { _ in }
        _ = try second.startAdvertising([0x02, 0x01, 0x06], interval: .milliseconds(100))
        #expect(terminalDevice.isScanning && terminalDevice.isAdvertising)
        radio.stopScanning()  // the dead run's late call must not stop the new run's scan
        #expect(terminalDevice.isScanning)
    }

    @Test func aCrashedProcessWritesNothingMoreAndTheCrashComesRightAfterTheDurableStep() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "horizon-seam-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let process = SimulatedProcess(name: "wallet", generation: 1)
        let steps = Recorder<DurableStep>()
        process.setDurableStepHandler { step in
            steps.append(step)
            process.crash()
        }
        let path = directory.appendingPathComponent("wallet.sqlite").path
        let store = try WalletStore(path: path)
        let receipt = StoredReceipt(
            paymentID: "01", sessionID: "02", merchantName: "M", amountMinorUnits: 1, tipMinorUnits: 0, currency: "EUR",
            reference: 1, settledAt: 0, bonusPointsEarned: 0, bonusPointsBalance: 0)
        try process.durable(.walletStoredReceipt) { try store.saveReceipt(receipt) }
        #expect(steps.values == [.walletStoredReceipt])
        #expect(!process.isAlive)
        #expect(throws: ProcessCrashed.self) {
            try process.durable(.walletStoredReceipt) { try store.saveReceipt(receipt) }
        }
        // What was written before the crash is on disk for the next run.
        #expect(try WalletStore(path: path).receipts().map(\.paymentID) == ["01"])
    }
}
