import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonRadio
import HorizonRoles
import HorizonStores
import Logging

/// `serve`: the terminal as a long-running service (the systemd unit runs this).
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the terminal as a service that takes payment requests from the register.",
        discussion: """
            Keeps the radio and the conflict observer up and listens on a control socket for one-line \
            requests, answered line by line:
              pay AMOUNT [REGISTER USER]   ->  state <state> ... then: paid <payment id> <amount> <tip> <total> <reference>
                                               or: failed <reason>
              cancel                       ->  ok | idle
              status                       ->  adapter <availability> / conflict <state> <count> / payment <state>
            e.g. echo "pay 12.50 Ana" | socat - UNIX-CONNECT:/run/horizon-terminal/control.sock, or \
            horizon-terminal pay 12.50 --control-socket /run/horizon-terminal/control.sock.
            """)

    @Option(help: "The control socket (default: $RUNTIME_DIRECTORY/control.sock, else <data dir>/control.sock).")
    var controlSocket: String?
    @Option(help: "Seconds a control client may take to send its request line.") var controlReadTimeout = 10
    @Option(help: "Control clients served at once; one more is refused with an error line.")
    var controlConnections = 8

    func validate() throws {
        guard (1...3600).contains(controlReadTimeout) else {
            throw ValidationError("--control-read-timeout must be 1 to 3600 seconds")
        }
        guard (1...1024).contains(controlConnections) else {
            throw ValidationError("--control-connections must be 1 to 1024")
        }
    }
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func run() throws {
        let logger = Logs.logger("horizon.terminal.serve", verbose: global.verbose)
        let files = global.terminalFiles
        let settings = try files.loadSettings()
        let identity = try files.loadIdentity()
        let ledger = try files.loadLedger()
        let device = try radio.open(name: "terminal", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let runtime = try files.startTerminal(radio: device, identity: identity, ledger: ledger, logger: logger)
        let service = runtime.service
        let host = PaymentHost(
            service: service, processor: runtime.processor,
            configuration: PaymentHostConfiguration(
                userDecisionTimeout: .seconds(settings.userDecisionTimeoutSeconds),
                currency: ledger.configuration.currency, merchantPrograms: try ledger.merchantPrograms()))
        let observer = BluetoothConflictObserver(
            scanner: SightingHub(radio: device), ownTerminalKeyID: service.terminalKeyID)
        try? observer.restart()
        let path =
            controlSocket
            ?? ProcessInfo.processInfo.environment["RUNTIME_DIRECTORY"].map { $0 + "/control.sock" }
            ?? files.directory.file("control.sock").path
        let listener = try LineListener(path: path)
        let controller = PaymentController(host: host, ledger: ledger, observer: observer, logger: logger)
        let interrupt = InterruptHandler(queue: DispatchQueue(label: "horizon.serve.signals")) { _ in
            host.cancel()
            listener.close()
        }
        Console().line("terminal service ready: \(settings.merchantName), control socket \(path)")
        let active = ActiveCount()
        while let connection = listener.accept() {
            guard active.enter(limit: controlConnections) else {
                connection.send("error too many control connections (\(controlConnections)); try again")
                continue
            }
            connection.setReadTimeout(seconds: controlReadTimeout)
            Thread {
                controller.serve(connection)
                active.leave()
            }.start()
        }
        withExtendedLifetime(interrupt) {}
    }
}

/// Control clients being served now, bounded.
final class ActiveCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func enter(limit: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard count < limit else { return false }
        count += 1
        return true
    }

    func leave() {
        lock.lock()
        count -= 1
        lock.unlock()
    }
}

/// Runs one payment at a time for the control socket's clients.
final class PaymentController: @unchecked Sendable {
    let host: PaymentHost
    let ledger: SandboxLedger
    let observer: BluetoothConflictObserver
    let logger: Logger
    private let busy = NSLock()

    init(host: PaymentHost, ledger: SandboxLedger, observer: BluetoothConflictObserver, logger: Logger) {
        self.host = host
        self.ledger = ledger
        self.observer = observer
        self.logger = logger
    }

    /// Control requests are short: a longer line is refused rather than buffered.
    static let maximumLineLength = 1024

    func serve(_ connection: LineConnection) {
        guard let line = connection.readLine(maximumLength: Self.maximumLineLength) else {
            if connection.lineTooLong {
                connection.send("error request longer than \(Self.maximumLineLength) bytes")
            }
            return
        }
        let request = line.trimmingCharacters(in: .whitespaces)
        let words = request.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        logger.info("control request: \(request.sanitizedForDisplay)")
        switch words.first {
        case "pay"?:
            guard words.count >= 2 else {
                connection.send("failed usage: pay AMOUNT [REGISTER USER]")
                return
            }
            pay(amount: words[1], registerUser: words.count > 2 ? words[2...].joined(separator: " ") : nil, connection)
        case "cancel"?:
            let running = !host.state.isFinished && host.state != .idle
            if running { host.cancel() }
            connection.send(running ? "ok" : "idle")
        case "status"?:
            connection.send("adapter \(observer.availability)")
            connection.send("conflict \(observer.state) \(observer.conflictCount)")
            connection.send("payment \(host.state)")
        default:
            connection.send("error unknown command; use pay AMOUNT [REGISTER USER], cancel or status")
        }
    }

    private func pay(amount text: String, registerUser: String?, _ connection: LineConnection) {
        guard busy.try() else {
            connection.send("failed a payment is already in progress")
            return
        }
        defer { busy.unlock() }
        let amount: Money
        do {
            amount = try Money.parse(text, currency: ledger.configuration.currency)
        } catch {
            connection.send("failed \(error)")
            return
        }
        // Relay every state from a clean start until the session ends.
        _ = host.stop()
        let finished = DispatchSemaphore(value: 0)
        let states = host.states()
        let relay = Task {
            for await state in states where state != .idle {
                connection.send("state \(state)")
                if state.isFinished { break }
            }
            finished.signal()
        }
        guard host.start(amount: amount, registerUser: registerUser.map(RegisterUser.init(name:))) else {
            relay.cancel()
            connection.send("failed \(host.humanizedError ?? "the payment could not start")")
            return
        }
        finished.wait()
        if host.state == .completed, let order = host.finalPaymentState?.paymentOrder {
            connection.send(
                "paid \(order.paymentID) \(order.amount.formattedAmount) \(order.tip.formattedAmount) \(order.total.formattedAmount) \(order.reference)"
            )
        } else {
            connection.send("failed \(host.humanizedError ?? "the payment did not complete")")
        }
    }
}
