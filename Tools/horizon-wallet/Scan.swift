import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import Logging

struct Scan: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the terminals heard nearby, nearest first, refreshing in place.")

    @Option(help: "Seconds to scan (0: until Ctrl-C).") var seconds = 10
    @Flag(help: "Print the final list as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func validate() throws {
        guard (0...3600).contains(seconds) else { throw ValidationError("--seconds must be 0 to 3600") }
    }

    func run() async throws {
        let logger = Logs.logger("horizon.wallet", verbose: global.verbose)
        let device = try await radio.open(name: "wallet-scan", defaultPosition: Position(x: 0.3, y: 0), logger: logger)
        defer { device.shutdown() }
        let tracker = FusionTracker(
            scanner: SightingHub(radio: device), transactionTypes: Set(TransactionType.allCases))
        try tracker.start()
        let console = Console()
        let (json, seconds) = (self.json, self.seconds)
        // Ctrl-C ends the scan early; the final list is still printed.
        try? await withInterruptCancellation {
            let deadline = ContinuousClock.now + (seconds == 0 ? .seconds(86_400 * 365) : .seconds(seconds))
            var shown = 0
            while !Task.isCancelled {
                if !json {
                    let lines = Self.table(tracker.trackings)
                    console.redraw(lines, previousLineCount: console.isTerminal ? shown : 0)
                    shown = lines.count
                }
                let next = ContinuousClock.now + .milliseconds(console.isTerminal ? 500 : 2000)
                guard next < deadline else {
                    try? await Task.sleep(until: deadline)
                    return
                }
                try? await Task.sleep(until: next)
            }
        }
        if json {
            try console.json(
                tracker.trackings.enumerated().map { rank, tracking in
                    ScanRow(
                        rank: rank + 1, sessionId: tracking.peripheralMetaData.sessionID.description,
                        transactionType: tracking.peripheralMetaData.transactionType.description,
                        smoothedRSSI: tracking.smoothedRSSI.map { ($0 * 10).rounded() / 10 },
                        terminalKeyId: tracking.peripheralMetaData.terminalKeyID.description,
                        address: tracking.peripheralMetaData.address.rawValue)
                })
        }
    }

    static func table(_ trackings: [PeripheralTracking]) -> [String] {
        var lines = ["rank  session           type               RSSI      terminal key"]
        for (rank, tracking) in trackings.enumerated() {
            let meta = tracking.peripheralMetaData
            let rssi = tracking.smoothedRSSI.map { String(format: "%5.1f dBm", $0) } ?? "  unknown"
            lines.append(
                String(format: "%4d  ", rank + 1) + meta.sessionID.description + "  "
                    + meta.transactionType.description.padding(toLength: 17, withPad: " ", startingAt: 0) + "  " + rssi
                    + "  " + meta.terminalKeyID.description)
        }
        if trackings.isEmpty { lines.append("      (no terminal heard yet)") }
        return lines
    }
}

struct ScanRow: Encodable {
    let rank: Int
    let sessionId: String
    let transactionType: String
    let smoothedRSSI: Double?
    let terminalKeyId: String
    let address: String
}
