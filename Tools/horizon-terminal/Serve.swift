import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import HorizonServerClient
import HorizonStores
import HorizonTracing
import Logging
import ServiceLifecycle

/// `serve`: the terminal as a long-running service (the systemd unit runs this).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the terminal as a service that takes payment and redemption requests from the register.",
        discussion: """
            Keeps the radio and the conflict observer up and listens on a control socket for one-line \
            requests, answered line by line:
              pay AMOUNT [--reference REF] [REGISTER USER]
                                           ->  state <state> ... then: paid <payment id> <amount> <tip> <total> <reference> ... [REF]
                                               or: failed <reason> (a REF whose sale is in progress or paid is refused)
              redeem bonus|gold|coupon ...  ->  state <state> ... then: redeemed <id> <kind> <points> <item>
                                               or: failed <reason>; bad arguments: one line, error <reason>
                 (the arguments of `horizon-terminal redeem`: --points, --reward, --benefit, --value, --register)
              cancel                       ->  ok | idle
              status                       ->  adapter <availability> / conflict <state> <count> / payment <state>
              status ID|REF                ->  id <payment id> / type <type> / step <journal step> / [reference <REF>] /
                                               [register <user>] / source journal / result <answer> [/ server <state>]
                                               answer: paid <amount> <tip> <total> | accepted-offline <amount> <tip> <total>
                                               | declined <reason> | failed <reason> | pending
                                               an activated terminal asks its server what the journal does not know:
                                               ... / amount <amount> <currency> / source server / result <server state>
                                               or one line: error <reason> (malformed, or unknown here)
              REF: the merchant's order reference, 1 to 100 printable characters without spaces; 32 hexadecimal
              digits are read as a payment id.
            e.g. echo "pay 12.50 Ana" | socat - UNIX-CONNECT:/run/horizon-terminal/control.sock, or \
            horizon-terminal pay 12.50 --control-socket /run/horizon-terminal/control.sock.
            SIGTERM or SIGINT shuts it down gracefully: no new requests; a payment no wallet has joined yet is \
            cancelled at the register (its client is told); one a wallet has joined finishes first, so a stop \
            or restart never breaks off a customer mid-payment; then the control socket is removed, the radio \
            is switched off; exit 0.
            The data directory is locked while it runs: another serve, pay, redeem or init on it refuses.
            """)

    @Option(help: "The control socket (default: $RUNTIME_DIRECTORY/control.sock, else <data dir>/control.sock).")
    var controlSocket: String?
    @Option(help: "Seconds a control client may take to send its request line.") var controlReadTimeout = 10
    @Option(help: "Control clients served at once; one more is refused with an error line.")
    var controlConnections = 8
    @Option(help: "Days the journal keeps a payment's steps in full; older answered ones are compacted daily.")
    var journalRetentionDays = JournalRetention.defaultDays

    func validate() throws {
        guard (1...3600).contains(controlReadTimeout) else {
            throw ValidationError("--control-read-timeout must be 1 to 3600 seconds")
        }
        guard (1...1024).contains(controlConnections) else {
            throw ValidationError("--control-connections must be 1 to 1024")
        }
        guard (1...36_500).contains(journalRetentionDays) else {
            throw ValidationError("--journal-retention-days must be 1 to 36500")
        }
    }
    @OptionGroup var global: GlobalOptions
    @OptionGroup var radio: RadioOptions

    func run() async throws {
        // Traces are exported only when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT names a collector.
        try await TracingSetup.run(
            defaultServiceName: "horizon-terminal",
            logger: Logs.logger("horizon.terminal.serve", verbose: global.verbose)
        ) { try await serve() }
    }

    private func serve() async throws {
        let logger = Logs.logger("horizon.terminal.serve", verbose: global.verbose)
        let files = try global.lockedTerminalFiles()
        let settings = try files.loadSettings()
        // An activated terminal renews its credential first when half of it is used up.
        let (identity, _) = try await files.renewCredentialIfDue(
            identity: try files.loadIdentity(), now: UnixTime(Date().timeIntervalSince1970), logger: logger)
        let ledger = try await files.loadLedger(logger: logger)
        let device = try await radio.open(name: "terminal", defaultPosition: .origin, logger: logger)
        defer { device.shutdown() }
        let runtime = try await files.startTerminal(radio: device, identity: identity, ledger: ledger, logger: logger)
        let host = runtime.paymentHost(
            ledger: ledger, decisionTimeoutSeconds: settings.userDecisionTimeoutSeconds)
        // Wallets with bad network may send their requests through this terminal.
        let requestProxy = runtime.startRequestProxy(hosts: [host.connector])
        defer { requestProxy?.stop() }
        let observer = BluetoothConflictObserver(
            scanner: SightingHub(radio: device), ownTerminalKeyID: runtime.service.terminalKeyID)
        let path =
            controlSocket
            ?? ProcessInfo.processInfo.environment["RUNTIME_DIRECTORY"].map { $0 + "/control.sock" }
            ?? files.directory.file("control.sock").path
        let listener = try ControlSocket.listen(at: path)
        let console = Console()
        // The redemption hosts share the payment host's radio service (and its request proxy).
        let redemptionConfiguration = runtime.hostConfiguration(
            ledger: ledger, decisionTimeoutSeconds: settings.userDecisionTimeoutSeconds)
        var redemptionHosts: [RedemptionTerms.Kind: RedemptionHost] = [:]
        for kind in RedemptionTerms.Kind.allCases {
            redemptionHosts[kind] = RedemptionHost.redemptionHost(
                transactionType: kind.transactionType, service: runtime.service, processor: runtime.processor,
                configuration: redemptionConfiguration)
        }
        // An activated terminal's server answers `status ID|REF` for what the journal does not know.
        let server = try files.serverClient(identity: identity)
        let controller = PaymentController(
            host: host, redemptionHosts: redemptionHosts, ledger: ledger, observer: observer, journal: runtime.journal,
            server: server, logger: logger, refusal: { settings.refusal(of: $0) })
        // Shut down in reverse order: the control socket first (its sale ends while the radio is
        // still up to tell the wallet), then the conflict observer.
        // An activated terminal keeps its credential fresh while it serves.
        let renewal: [ServiceGroupConfiguration.ServiceConfiguration] =
            settings.server == nil
            ? [] : [.init(service: CredentialRenewalService(files: files, service: runtime.service, logger: logger))]
        // An activated terminal forwards what it accepted offline once its server
        // answers again (and every five minutes, for a terminal that takes no payment meanwhile).
        var forwarding: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if settings.server != nil {
            let offline = OfflineForwarding(
                store: runtime.journal,
                forwarder: CrashInjection.forwarder(
                    wrapping: try makeOfflineForwarder(files: files, identity: identity, logger: logger)),
                clock: { UnixTime(Date().timeIntervalSince1970) })
            forwarding.append(
                .init(
                    service: OfflineForwardingService(
                        forwarding: offline, serverAnswered: runtime.serverAnswered, interval: .seconds(300),
                        logger: logger)))
        }
        // An activated terminal keeps one connection to its server, which pushes the payment
        // intents a POS addresses to it; each is sold here as a register's `pay` would.
        var collection: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let server {
            let connection = TerminalIntentConnection(
                serverURL: server.serverURL, signingKey: identity.signingKey,
                onState: { state in logger.info("payment intent connection: \(state)") })
            collection.append(
                .init(
                    service: IntentCollectionService(
                        connection: connection, server: server, controller: controller, console: console,
                        logger: logger)))
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: renewal + forwarding + collection + [
                    .init(service: JournalRetentionService(files: files, days: journalRetentionDays, logger: logger)),
                    .init(service: ConflictObserverService(observer: observer, logger: logger)),
                    .init(
                        service: ControlSocketService(
                            listener: listener, controller: controller, console: console,
                            limits: ControlSocketService.Limits(
                                connections: controlConnections, readTimeout: .seconds(controlReadTimeout)),
                            lingerWhileWalletsConnected: { [service = runtime.service] in
                                await service.lingerWhileWalletsConnected()
                            })),
                    // "ready" (which scripts wait for) is said from inside the group, once SIGTERM
                    // and SIGINT are trapped: a signal after it is a graceful shutdown, never a kill.
                    // The settling mode is said after it, so play money is never mistaken for real.
                    .init(
                        service: ReadyAnnouncement(
                            console: console,
                            lines: [
                                "terminal service ready: \(settings.merchantName), control socket \(path)",
                                settings.server.map { "settling through the Horizon server \($0)" }
                                    ?? ledger.modeDescription,
                            ])),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        console.line("terminal service stopped")
    }
}

/// Says its lines once the service group runs (its signal handlers are in place before any
/// service starts), then waits for the shutdown.
struct ReadyAnnouncement: Service {
    let console: Console
    let lines: [String]

    func run() async throws {
        for line in lines { console.line(line) }
        try? await gracefulShutdown()
    }
}

/// Keeps the conflict observer listening while the service runs (a register asks for its state
/// with `status`), and stops it when the service shuts down.
struct ConflictObserverService: Service {
    let observer: BluetoothConflictObserver
    let logger: Logger

    func run() async throws {
        do {
            try observer.restart()
        } catch {
            // Without it the service still takes payments; `status` then reports it stopped.
            logger.info("the conflict observer could not start: \(error)")
        }
        // Until the group shuts down (gracefully, or cancelled when another part failed).
        try? await gracefulShutdown()
        observer.stop()
    }
}
