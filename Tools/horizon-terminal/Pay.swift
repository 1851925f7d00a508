import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonServerClient
import HorizonServiceClients
import HorizonTracing
import HorizonUnixSocket
import Logging

struct Pay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Advertise a payment and wait for a nearby wallet to pay it.",
        discussion: "Shows each state as it happens. Exit code 0 only when the payment completed; Ctrl-C cancels.")

    @Argument(help: "The amount, as a person types it (e.g. 12.50).") var amount: String
    @Option(help: "ISO 4217 currency (default: the terminal's).") var currency: String?
    @Option(
        name: .customLong("register"),
        help:
            "The cashier: a register user id at the server (an activated terminal), a name in the sandbox (see register-users)."
    ) var registerUser: String?
    @Option(
        help:
            "The merchant's order reference for the sale (1 to 100 printable characters, no spaces): journaled, settled with the payment, and what `status REF` finds. A reference whose sale is in progress or paid is refused."
    ) var reference: String?
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
        try AmountArgument.checkAmountSyntax(amount)
        if let reference, !OrderReference.isValid(reference) {
            throw ValidationError("--reference: \(OrderReference.rule)")
        }
        if let currency { _ = try AmountArgument.money(amount, in: try AmountArgument.currency(currency)) }
    }

    func run() async throws {
        // Traces are exported only when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT names a collector.
        try await TracingSetup.run(
            defaultServiceName: "horizon-terminal", logger: Logs.logger("horizon.terminal", verbose: global.verbose)
        ) { try await pay() }
    }

    private func pay() async throws {
        if let controlSocket { return try await payThroughService(controlSocket) }
        let logger = Logs.logger("horizon.terminal", verbose: global.verbose)
        let files = try global.lockedTerminalFiles()
        let settings = try files.loadSettings()
        // The amount in the terminal's currency is checked before anything connects.
        let money = try AmountArgument.money(amount, in: try AmountArgument.currency(currency ?? settings.currency))
        if let refusal = settings.refusal(of: money) { throw CLIError(refusal) }
        // An activated terminal renews its credential first when half of it is used up.
        let (identity, _) = try await files.renewCredentialIfDue(
            identity: try files.loadIdentity(), now: UnixTime(Date().timeIntervalSince1970), logger: logger)
        let ledger = try await files.loadLedger(logger: logger)
        if let registerUser {
            try await checkRegisterUser(
                registerUser, server: settings.server, identity: identity, ledger: ledger, logger: logger)
        }
        let device = try await radio.open(name: "terminal", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let runtime = try await files.startTerminal(radio: device, identity: identity, ledger: ledger, logger: logger)
        if let reference, let refused = PaymentStatus.referenceRefusal(reference, journal: runtime.journal) {
            throw CLIError(refused)
        }
        let host = runtime.paymentHost(
            ledger: ledger, decisionTimeoutSeconds: timeout ?? settings.userDecisionTimeoutSeconds)
        // Wallets with bad network may send their requests through this terminal.
        let requestProxy = runtime.startRequestProxy(hosts: [host.connector])
        defer { requestProxy?.stop() }
        let console = Console()
        let cashier = registerUser.map(RegisterUser.init(name:))
        let orderReference = reference ?? ""
        let outcome = await SessionRun(
            label: "\(money)", json: json, console: console, logger: logger, service: runtime.service,
            waitForWallet: waitForWallet
        ).run(states: host.states(), observeWallets: host.observeWallets) { () async throws(HostError) in
            try await host.collect(money, registerUser: cashier, orderReference: orderReference)
        }
        try report(outcome, console: console)
    }

    /// The cashier must be one the merchant knows, once it keeps any: for an activated terminal a
    /// register user id at the server (what the merchant's transactions filter by), for the
    /// sandbox a name in its ledger. A server that does not answer is no reason to refuse a sale:
    /// the id goes as given.
    private func checkRegisterUser(
        _ registerUser: String, server: String?, identity: TerminalIdentity, ledger: InProcessLedger, logger: Logger
    ) async throws {
        let known: [String]
        if let server {
            let merchant = MerchantServiceClient(
                serverURL: try HorizonServerClient.url(server), terminalKey: identity.signingKey, timeout: .seconds(5))
            do {
                try await merchant.start()
            } catch {
                logger.notice("register user \(registerUser) not checked: the server did not answer (\(error))")
                return
            }
            known = await merchant.registerUsers.map(\.id)
        } else {
            known = try await ledger.registerUsers()
        }
        // A merchant that keeps no register users labels sales freely, as before.
        guard !known.isEmpty else { return }
        guard known.contains(registerUser) else {
            throw CLIError(
                "unknown register user '\(registerUser)'; known: \(known.joined(separator: ", ")) (add with `horizon-terminal register-users add`)"
            )
        }
    }

    /// Relays the request to a running service and its answer back, line by line.
    private func payThroughService(_ path: String) async throws {
        let connection = try ControlSocket.connection(to: path)
        defer { connection.close() }
        await connection.send(
            line: "pay \(amount)" + (reference.map { " --reference \($0)" } ?? "")
                + (registerUser.map { " \($0)" } ?? ""))
        let console = Console()
        var lines = connection.lines(maximumLength: 4096)
        while case .line(let line) = await lines.next() {
            if line.hasPrefix("state ") {
                if !json { console.status("\(amount) — \(line.dropFirst(6))") }
            } else if line.hasPrefix("paid ") {
                let fields = line.split(separator: " ").map(String.init)
                let offline = fields[safe: 6] == "offline"
                if json {
                    // paid ID AMOUNT TIP TOTAL REFERENCE online|offline CURRENCY SESSION minor units of the three
                    let code = fields[safe: 7] ?? ""
                    func money(_ index: Int) -> JSONMoney {
                        JSONMoney(minorUnits: fields[safe: index].flatMap { Int64($0) } ?? 0, currency: code)
                    }
                    try console.json(
                        PaymentSummary(
                            state: offline ? "acceptedOffline" : "completed", paymentId: fields[safe: 1] ?? "",
                            sessionId: fields[safe: 8] ?? "", amount: money(9), tip: money(10), total: money(11),
                            reference: fields[safe: 5].flatMap { Int64($0) } ?? 0, registerUser: registerUser ?? "",
                            orderReference: reference))
                } else if offline {
                    console.line(
                        "Accepted offline: \(fields[safe: 2] ?? "?") + tip \(fields[safe: 3] ?? "?") = \(fields[safe: 4] ?? "?")"
                    )
                    console.line("  payment \(fields[safe: 1] ?? "?")  forwarded to the server when it is reachable")
                } else {
                    console.line(
                        "Paid: \(fields[safe: 2] ?? "?") + tip \(fields[safe: 3] ?? "?") = \(fields[safe: 4] ?? "?")")
                    console.line(
                        "  payment \(fields[safe: 1] ?? "?")  reference \(fields[safe: 5] ?? "?")"
                            + (reference.map { "  order \($0)" } ?? ""))
                }
                return
            } else if line.hasPrefix("failed ") {
                if !json { console.line() }
                throw CommandFailure(String(line.dropFirst(7)), errorCode: JSONErrorCode.transactionFailed)
            }
        }
        throw CLIError("the terminal service closed the connection without an answer")
    }

    private func report(_ outcome: StateRelay.Outcome<PaymentOrder>, console: Console) throws {
        switch outcome.result {
        case .success(let order):
            if json {
                try console.json(PaymentSummary(order))
            } else if order.acceptedOffline {
                // Not "paid": the server has not settled it; the wallet's daily token covers it.
                console.line("Accepted offline: \(order.amount) + tip \(order.tip) = \(order.total)")
                console.line(
                    "  payment \(order.paymentID)  forwarded to the server when it is reachable (horizon-terminal offline list)"
                )
            } else {
                console.line("Paid: \(order.amount) + tip \(order.tip) = \(order.total)")
                console.line(
                    "  payment \(order.paymentID)  reference \(order.reference)  cashier \(order.registerUser.isEmpty ? "-" : order.registerUser)"
                        + (order.orderReference.isEmpty ? "" : "  order \(order.orderReference)")
                )
            }
        case .failure(let error):
            let message = outcome.message(for: error, noun: "payment", verb: "paid")
            // A start the host refused opened no session: one error line, as for bad input.
            guard outcome.lastState != nil else { throw CLIError(message) }
            // Under --json the runner prints the error object; the state is in the message.
            if !json { console.line() }
            throw CommandFailure(message, errorCode: JSONErrorCode.transactionFailed)
        }
    }
}

struct PaymentSummary: Encodable {
    /// "completed", or "acceptedOffline" (not settled by the server yet).
    let state: String
    let paymentId: String
    let sessionId: String
    let amount: JSONMoney
    let tip: JSONMoney
    let total: JSONMoney
    let reference: Int64
    let registerUser: String
    /// The merchant's order reference the sale was started with (absent without one).
    var orderReference: String? = nil
}

extension PaymentSummary {
    init(_ order: PaymentOrder) {
        self.init(
            state: order.acceptedOffline ? "acceptedOffline" : "completed", paymentId: order.paymentID.description,
            sessionId: order.sessionID.description, amount: JSONMoney(order.amount), tip: JSONMoney(order.tip),
            total: JSONMoney(order.total), reference: Int64(truncatingIfNeeded: order.reference),
            registerUser: order.registerUser, orderReference: order.orderReference.isEmpty ? nil : order.orderReference)
    }
}
