import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles

/// `status`: what the radio hears; `status ID|REF`: where one payment stands.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show the adapter's availability, conflicting terminals and the payment sessions nearby, or where one payment stands.",
        discussion: """
            With ID (a payment or redemption id, 32 hexadecimal digits) or REF (the merchant's order reference \
            given to `pay --reference`): the payment as the terminal's journal holds it (step, reference, \
            register user, result), and for an activated terminal the server's state of it; what the journal \
            does not know (a payment intent not collected here) is asked of the server. Exit code 1 when \
            neither knows it. With --control-socket a running `serve` answers.
            """)

    @Argument(help: "A payment id or order reference: show where that payment stands.") var payment: String?
    @Option(help: "Ask a running `horizon-terminal serve` at this control socket (with ID|REF).")
    var controlSocket: String?
    @Option(help: "Seconds to listen.") var seconds = 3
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func validate() throws {
        guard (1...600).contains(seconds) else { throw ValidationError("--seconds must be 1 to 600") }
    }

    func run() async throws {
        if let payment { return try await paymentStatus(payment) }
        if radio.radio == .bluez { return try await blueZStatus() }
        let logger = Logs.logger("horizon.terminal", verbose: global.verbose)
        let ownKey = (try? global.terminalFiles.loadIdentity()).flatMap { try? TerminalKeyID(bytes: $0.keyID) }
        let device = try await radio.open(name: "terminal-status", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let hub = SightingHub(radio: device)
        let observer = BluetoothConflictObserver(scanner: hub, ownTerminalKeyID: ownKey)
        let tracker = FusionTracker(scanner: hub, transactionTypes: Set(TransactionType.allCases))
        try observer.restart()
        try tracker.start()
        // The server is asked while the radio listens.
        let files = global.terminalFiles
        async let offline = OfflineStatus.read(files)?.checkingServer(files)
        // The report is what the radio heard in this time.
        try await Task.sleep(for: .seconds(seconds))
        let sessions = tracker.trackings.map { tracking in
            NearbySession(
                sessionId: tracking.peripheralMetaData.sessionID.description,
                transactionType: tracking.peripheralMetaData.transactionType.description,
                terminalKeyId: tracking.peripheralMetaData.terminalKeyID.description,
                smoothedRSSI: tracking.smoothedRSSI.map { ($0 * 10).rounded() / 10 },
                own: tracking.peripheralMetaData.terminalKeyID == ownKey)
        }
        let report = StatusReport(
            adapter: "\(device.availability)", radio: radio.radio.rawValue, conflict: "\(observer.state)",
            conflictCount: observer.conflictCount, sessions: sessions, offline: await offline)
        observer.stop()
        tracker.stop()
        if json {
            try Console().json(report)
        } else {
            print("adapter   \(report.adapter) (\(report.radio) radio)")
            print("conflict  \(report.conflict), \(report.conflictCount) other terminal(s) nearby")
            if let offline = report.offline {
                print(offline.serverLine)
                print(offline.summaryLine)
            }
            print("sessions  \(sessions.count) heard")
            for session in sessions {
                let rssi = session.smoothedRSSI.map { String(format: "%.0f dBm", $0) } ?? "unknown"
                print(
                    "  \(session.sessionId)  \(session.transactionType)  \(rssi)  key \(session.terminalKeyId)\(session.own ? "  (this terminal)" : "")"
                )
            }
        }
    }
}

extension Status {
    /// `status ID|REF`: the register socket's answer (see `PaymentStatus`), as text or JSON.
    func paymentStatus(_ text: String) async throws {
        let lines: [String]
        if let controlSocket {
            // The socket reads words: a reference never holds a space, so none is sent.
            guard !text.contains(where: \.isWhitespace) else {
                throw CLIError("not an order reference: \(OrderReference.rule)")
            }
            // One short answer, read to its end (the service closes the connection after it).
            let connection = try LineConnection.connect(to: controlSocket)
            connection.setReadTimeout(seconds: 30)
            connection.send("status \(text)")
            var answer: [String] = []
            while let line = connection.readLine() { answer.append(line) }
            lines = answer
        } else {
            let files = global.terminalFiles
            let server = try files.serverClient(identity: try files.loadIdentity())
            lines = await PaymentStatus.lines(of: text, journal: try files.openJournal(), server: server)
        }
        if let error = lines.first(where: { $0.hasPrefix("error ") }) ?? (lines.isEmpty ? "error no answer" : nil) {
            let message = String(error.dropFirst(6))
            // The API's codes: a malformed id or reference, or one nobody here knows.
            throw CommandFailure(
                message, code: message.hasPrefix("not a payment id") ? 2 : 1,
                errorCode: message.hasPrefix("not a payment id") ? JSONErrorCode.invalidRequest : "payment_not_found")
        }
        guard json else {
            for line in lines { print(line) }
            return
        }
        var fields: [String: String] = [:]
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            let key = parts[0] == "register" ? "registerUser" : parts[0]
            fields[key] = parts.count > 1 ? parts[1] : ""
        }
        try Console().json(fields)
    }

    /// With BlueZ: which adapter and whether it can be used (scanning arrives with the BlueZ radio).
    func blueZStatus() async throws {
        let (adapter, availability) = await RadioOptions.blueZAvailability(adapter: radio.adapter)
        let offline = await OfflineStatus.read(global.terminalFiles)?.checkingServer(global.terminalFiles)
        if json {
            try Console().json(
                BlueZStatusReport(
                    adapter: adapter ?? "", availability: "\(availability)", radio: "bluez", offline: offline))
            return
        }
        print("adapter   \(adapter ?? "none") — \(availability) (bluez radio)")
        if let offline {
            print(offline.serverLine)
            print(offline.summaryLine)
        }
        if availability != .poweredOn {
            print("          \(RadioError.adapterUnavailable(availability))")
        }
    }
}

struct NearbySession: Encodable {
    let sessionId: String
    let transactionType: String
    let terminalKeyId: String
    let smoothedRSSI: Double?
    let own: Bool
}

struct StatusReport: Encodable {
    let adapter: String
    let radio: String
    let conflict: String
    let conflictCount: Int
    let sessions: [NearbySession]
    /// Online/offline and the stored offline payments (nil without a terminal here).
    let offline: OfflineStatus?
}

struct BlueZStatusReport: Encodable {
    let adapter: String
    let availability: String
    let radio: String
    let offline: OfflineStatus?
}
