import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonStores
import Logging

@main
enum Main {
    static func main() async { await CommandRunner.main(HorizonTerminal.self) }
}

struct HorizonTerminal: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "horizon-terminal",
        abstract: "A Bluetooth LE payment terminal: advertise a payment, let a nearby wallet pay it.",
        discussion: """
            Start with `horizon-terminal init`, then `horizon-terminal pay 12.50`. The sandbox ledger keeps \
            wallet accounts and every transaction in the data directory.
            """,
        subcommands: [
            Init.self, Pay.self, Redeem.self, Programs.self, Status.self, Transactions.self, JournalCommand.self,
            RegisterUsers.self, Serve.self, RadioCommand.self,
        ])
}

extension GlobalOptions {
    var terminalFiles: TerminalFiles { TerminalFiles(directory: DataDirectory(explicit: dataDir, role: "terminal")) }
}

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the terminal's key, its credential from a new sandbox trust anchor, and the ledger.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "The merchant name wallets show (from the credential).") var merchantName = "Horizon Sandbox Café"
    @Option(help: "The merchant's identifier.") var merchantID = "sandbox-merchant"
    @Option(help: "Which till this is, shown by wallets next to the merchant name (e.g. \"Till 2, Market St\").")
    var label = TerminalSettings.defaultTerminalLabel
    @Option(help: "ISO 4217 currency the terminal charges in.") var currency = "EUR"
    @Option(help: "Balance a new wallet gets on first contact, e.g. 100.00.") var startingBalance = "100.00"
    @Option(help: "Seconds the customer may take to decide.") var decisionTimeout = 60
    @Option(help: "Bonus points per whole currency unit paid.") var bonusPoints: Int64 = 1
    @Flag(help: "Replace existing keys (the ledger is kept).") var force = false
    @Flag(help: "Print the result as JSON.") var json = false

    func validate() throws {
        guard (5...3600).contains(decisionTimeout) else {
            throw ValidationError("--decision-timeout must be 5 to 3600 seconds")
        }
        guard (0...1_000_000).contains(bonusPoints) else {
            throw ValidationError("--bonus-points must be 0 to 1000000")
        }
        guard !merchantName.isEmpty, merchantName.utf8.count <= 64 else {
            throw ValidationError("--merchant-name must be 1 to 64 bytes")
        }
        guard !merchantID.isEmpty, merchantID.utf8.count <= 64 else {
            throw ValidationError("--merchant-id must be 1 to 64 bytes")
        }
        guard !label.isEmpty, label.utf8.count <= 64 else { throw ValidationError("--label must be 1 to 64 bytes") }
    }

    func run() throws {
        let currencyValue = try AmountArgument.currency(currency)
        let code = currencyValue.code
        let balance = try AmountArgument.money(startingBalance, in: currencyValue, option: "--starting-balance")
        let files = global.terminalFiles
        try files.initialize(
            settings: TerminalSettings(
                merchantID: merchantID, merchantName: merchantName, terminalLabel: label, currency: code,
                startingBalanceMinorUnits: balance.minorUnits, userDecisionTimeoutSeconds: decisionTimeout,
                bonusPointsPerMajorUnit: bonusPoints),
            force: force)
        let identity = try files.loadIdentity()
        let anchor = files.directory.file(TerminalFiles.anchorPublicKey).path
        if json {
            try Console().json([
                "dataDirectory": files.directory.path, "merchantName": merchantName, "currency": code,
                "terminalKeyID": identity.keyID.hexString, "trustAnchor": anchor,
            ])
        } else {
            print("Terminal ready in \(files.directory.path)")
            print("  merchant      \(merchantName) (\(merchantID)), charging in \(code)")
            print("  terminal key  \(identity.keyID.hexString)")
            print("  trust anchor  \(anchor)   <- wallets trust this: horizon-wallet init --trust \(anchor)")
        }
    }
}

struct Pay: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Advertise a payment and wait for a nearby wallet to pay it.",
        discussion: "Shows each state as it happens. Exit code 0 only when the payment completed; Ctrl-C cancels.")

    @Argument(help: "The amount, as a person types it (e.g. 12.50).") var amount: String
    @Option(help: "ISO 4217 currency (default: the terminal's).") var currency: String?
    @Option(name: .customLong("register"), help: "The cashier's name (see register-users).") var registerUser: String?
    @Option(help: "Seconds the customer may take to decide (default: from init).") var timeout: Int?
    @Option(help: "Give up if no wallet pays within this many seconds.") var waitForWallet = 300
    @Flag(help: "Print the result as JSON.") var json = false
    @Option(help: "Ask a running `horizon-terminal serve` at this control socket to take the payment.")
    var controlSocket: String?
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func validate() throws {
        if let timeout, !(5...3600).contains(timeout) { throw ValidationError("--timeout must be 5 to 3600 seconds") }
        guard waitForWallet > 0 else { throw ValidationError("--wait-for-wallet must be positive") }
    }

    func run() throws {
        if let controlSocket { return try payThroughService(controlSocket) }
        let logger = Logs.logger("horizon.terminal", verbose: global.verbose)
        let files = global.terminalFiles
        let settings = try files.loadSettings()
        let identity = try files.loadIdentity()
        let ledger = try files.loadLedger()
        let money = try AmountArgument.money(amount, in: try AmountArgument.currency(currency ?? settings.currency))
        if let registerUser {
            let known = try ledger.registerUsers()
            guard known.isEmpty || known.contains(registerUser) else {
                throw CLIError(
                    "unknown register user '\(registerUser)'; known: \(known.joined(separator: ", ")) (add with `horizon-terminal register-users add`)"
                )
            }
        }
        let device = try radio.open(name: "terminal", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let runtime = try files.startTerminal(radio: device, identity: identity, ledger: ledger, logger: logger)
        let service = runtime.service
        let host = PaymentHost(
            service: service, processor: runtime.processor,
            configuration: PaymentHostConfiguration(
                userDecisionTimeout: .seconds(timeout ?? settings.userDecisionTimeoutSeconds),
                currency: ledger.configuration.currency, merchantPrograms: try ledger.merchantPrograms()))
        let console = Console()
        try SessionRun(label: "\(money)", json: json, console: console, logger: logger, service: service)
            .run(
                observe: host.observeState, observeWallets: host.observeWallets, cancel: host.cancel,
                waitForWallet: waitForWallet
            ) {
                guard host.start(amount: money, registerUser: registerUser.map(RegisterUser.init(name:))) else {
                    throw CLIError(host.humanizedError ?? "the payment could not start")
                }
            }
        try report(host, console: console)
    }

    /// Relays the request to a running service and its answer back, line by line.
    private func payThroughService(_ path: String) throws {
        let connection = try LineConnection.connect(to: path)
        connection.send("pay \(amount)" + (registerUser.map { " \($0)" } ?? ""))
        let console = Console()
        while let line = connection.readLine() {
            if line.hasPrefix("state ") {
                if !json { console.status("\(amount) — \(line.dropFirst(6))") }
            } else if line.hasPrefix("paid ") {
                let fields = line.split(separator: " ").map(String.init)
                if json {
                    try console.json([
                        "state": "completed", "paymentID": fields[safe: 1] ?? "", "amount": fields[safe: 2] ?? "",
                        "tip": fields[safe: 3] ?? "", "total": fields[safe: 4] ?? "",
                    ])
                } else {
                    console.line(
                        "Paid: \(fields[safe: 2] ?? "?") + tip \(fields[safe: 3] ?? "?") = \(fields[safe: 4] ?? "?")")
                    console.line("  payment \(fields[safe: 1] ?? "?")  reference \(fields[safe: 5] ?? "?")")
                }
                return
            } else if line.hasPrefix("failed ") {
                if !json { console.line() }
                throw CommandFailure(String(line.dropFirst(7)))
            }
        }
        throw CLIError("the terminal service closed the connection without an answer")
    }

    private func report(_ host: PaymentHost, console: Console) throws {
        guard host.state == .completed, let order = host.finalPaymentState?.paymentOrder else {
            let message = host.humanizedError ?? "the payment did not complete"
            if json { try console.json(["state": "\(host.state)", "error": message]) } else { console.line() }
            throw CommandFailure(message)
        }
        if json {
            try console.json(PaymentSummary(order))
        } else {
            console.line("Paid: \(order.amount) + tip \(order.tip) = \(order.total)")
            console.line(
                "  payment \(order.paymentID)  reference \(order.reference)  cashier \(order.registerUser.isEmpty ? "-" : order.registerUser)"
            )
        }
    }
}

struct PaymentSummary: Encodable {
    let state = "completed"
    let paymentID: String
    let sessionID: String
    let amount: String
    let tip: String
    let total: String
    let currency: String
    let reference: UInt64
    let registerUser: String

    init(_ order: PaymentOrder) {
        paymentID = order.paymentID.description
        sessionID = order.sessionID.description
        amount = order.amount.formattedAmount
        tip = order.tip.formattedAmount
        total = order.total.formattedAmount
        currency = order.currency.code
        reference = order.reference
        registerUser = order.registerUser
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the adapter's availability, conflicting terminals and the payment sessions nearby.")

    @Option(help: "Seconds to listen.") var seconds = 3
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func validate() throws {
        guard (1...600).contains(seconds) else { throw ValidationError("--seconds must be 1 to 600") }
    }

    func run() throws {
        if radio.radio == .bluez { return try blueZStatus() }
        let logger = Logs.logger("horizon.terminal", verbose: global.verbose)
        let ownKey = (try? global.terminalFiles.loadIdentity()).flatMap { try? TerminalKeyID(bytes: $0.keyID) }
        let device = try radio.open(name: "terminal-status", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let hub = SightingHub(radio: device)
        let observer = BluetoothConflictObserver(scanner: hub, ownTerminalKeyID: ownKey)
        let tracker = FusionTracker(scanner: hub, transactionTypes: Set(TransactionType.allCases))
        try observer.restart()
        try tracker.start()
        Thread.sleep(forTimeInterval: Double(seconds))
        let sessions = tracker.trackings.map { tracking in
            NearbySession(
                sessionID: tracking.peripheralMetaData.sessionID.description,
                transactionType: tracking.peripheralMetaData.transactionType.description,
                terminalKeyID: tracking.peripheralMetaData.terminalKeyID.description,
                smoothedRSSI: tracking.smoothedRSSI.map { ($0 * 10).rounded() / 10 },
                own: tracking.peripheralMetaData.terminalKeyID == ownKey)
        }
        let report = StatusReport(
            adapter: "\(device.availability)", radio: radio.radio.rawValue, conflict: "\(observer.state)",
            conflictCount: observer.conflictCount, sessions: sessions)
        observer.stop()
        tracker.stop()
        if json {
            try Console().json(report)
        } else {
            print("adapter   \(report.adapter) (\(report.radio) radio)")
            print("conflict  \(report.conflict), \(report.conflictCount) other terminal(s) nearby")
            print("sessions  \(sessions.count) heard")
            for session in sessions {
                let rssi = session.smoothedRSSI.map { String(format: "%.0f dBm", $0) } ?? "unknown"
                print(
                    "  \(session.sessionID)  \(session.transactionType)  \(rssi)  key \(session.terminalKeyID)\(session.own ? "  (this terminal)" : "")"
                )
            }
        }
    }
}

extension Status {
    /// With BlueZ: which adapter and whether it can be used (scanning arrives with the BlueZ radio).
    func blueZStatus() throws {
        let result = Box<(String?, AdapterAvailability)>((nil, .unsupported))
        let done = DispatchSemaphore(value: 0)
        let requested = radio.adapter
        Task {
            result.value = await RadioOptions.blueZAvailability(adapter: requested)
            done.signal()
        }
        done.wait()
        let (adapter, availability) = result.value
        if json {
            try Console().json(["adapter": adapter ?? "", "availability": "\(availability)", "radio": "bluez"])
            return
        }
        print("adapter   \(adapter ?? "none") — \(availability) (bluez radio)")
        if availability != .poweredOn {
            print("          \(RadioError.adapterUnavailable(availability))")
        }
    }
}

/// A value handed from a task back to synchronous code.
final class Box<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

struct NearbySession: Encodable {
    let sessionID: String
    let transactionType: String
    let terminalKeyID: String
    let smoothedRSSI: Double?
    let own: Bool
}

struct StatusReport: Encodable {
    let adapter: String
    let radio: String
    let conflict: String
    let conflictCount: Int
    let sessions: [NearbySession]
}

struct Transactions: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the ledger's transactions, newest first.")

    @Option(help: "How many to show.") var limit = 20
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1 to 100000") }
    }

    func run() throws {
        let ledger = try global.terminalFiles.loadLedger()
        let transactions = try ledger.transactions(limit: limit).map(TransactionRow.init)
        if json {
            try Console().json(transactions)
            return
        }
        if transactions.isEmpty { print("no transactions yet") }
        for row in transactions {
            let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(row.settledAt)))
            print(
                "\(time)  \(row.outcome.padding(toLength: 8, withPad: " ", startingAt: 0))  \(row.amount) + \(row.tip) \(row.currency)  payment \(row.paymentID)\(row.reason.map { "  (\($0))" } ?? "")"
            )
        }
    }
}

struct JournalCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "journal",
        abstract: "List the journal: each confirmed payment or redemption and the last step on record.",
        discussion: """
            Steps: confirmed (the terminal owes it an execution), submitted (handed to the ledger), result (the \
            answer is stored), acknowledged (the wallet stored it). A request left at confirmed or submitted by a \
            crash is settled, once and with the same id, the next time a terminal command starts.
            """)

    @Option(help: "How many to show.") var limit = 20
    @Flag(help: "Only requests still owed an execution.") var unsettled = false
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1 to 100000") }
    }

    func run() throws {
        let journal = try global.terminalFiles.openJournal()
        let records = try unsettled ? Array(journal.unsettled().prefix(limit)) : journal.records(limit: limit)
        let rows = records.map(JournalRow.init)
        if json {
            try Console().json(rows)
            return
        }
        if rows.isEmpty { print(unsettled ? "nothing unsettled" : "the journal is empty") }
        for row in rows {
            print(
                "\(row.step.padding(toLength: 12, withPad: " ", startingAt: 0))  \(row.type)  \(row.amount) + \(row.tip)  \(row.id)  \(row.answer ?? "no answer yet")"
            )
        }
    }
}

struct JournalRow: Encodable {
    let id: String
    let type: String
    let step: String
    let amount: String
    let tip: String
    let answer: String?

    init(_ record: JournalRecord) {
        id = record.request.id.description
        type = "\(record.request.transactionType)"
        step = record.step.rawValue
        switch record.request {
        case .payment(let payment):
            amount = payment.amount.description
            tip = payment.tip.description
        case .redemption(let redemption):
            amount = redemption.value.description
            tip = Money.zero(redemption.value.currency).description
        }
        switch record.answer {
        case .receipt(let receipt)?:
            if case .declined(let code) = receipt.outcome {
                answer = "receipt: declined (\(code))"
            } else {
                answer = "receipt: approved"
            }
        case .error(let error)?: answer = "error: \(error.code)"
        default: answer = nil
        }
    }
}

struct TransactionRow: Encodable {
    let paymentID: String
    let sessionID: String
    let outcome: String
    let reason: String?
    let reference: UInt64?
    let amount: String
    let tip: String
    let currency: String
    let settledAt: Int64

    init(_ result: SettlementResult) {
        paymentID = result.paymentID.description
        sessionID = result.sessionID.description
        switch result.outcome {
        case .approved(let reference, _, _):
            outcome = "approved"
            reason = nil
            self.reference = reference
        case .declined(let code, let text):
            outcome = "declined"
            reason = "\(code): \(text)"
            reference = nil
        }
        amount = result.amount.formattedAmount
        tip = result.tip.formattedAmount
        currency = result.amount.currency.code
        settledAt = result.settledAt
    }
}

struct RegisterUsers: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register-users", abstract: "Manage the cashiers (register users) payments are attributed to.",
        subcommands: [List.self, Add.self, Remove.self], defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List register users.")
        @Flag(help: "Print JSON.") var json = false
        @OptionGroup var global: GlobalOptions

        func run() throws {
            let users = try global.terminalFiles.loadLedger().registerUsers()
            if json {
                try Console().json(users)
            } else if users.isEmpty {
                print("no register users")
            } else {
                for user in users { print(user) }
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a register user.")
        @Argument(help: "The cashier's name.") var name: String
        @OptionGroup var global: GlobalOptions

        func validate() throws {
            guard !name.isEmpty, name.utf8.count <= 64 else { throw ValidationError("a name must be 1 to 64 bytes") }
        }

        func run() throws {
            try global.terminalFiles.loadLedger().addRegisterUser(name, at: UnixTime(Date().timeIntervalSince1970))
            print("added \(name)")
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a register user.")
        @Argument(help: "The cashier's name.") var name: String
        @OptionGroup var global: GlobalOptions

        func run() throws {
            guard try global.terminalFiles.loadLedger().removeRegisterUser(name) else {
                throw CLIError("no register user named '\(name)'")
            }
            print("removed \(name)")
        }
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
