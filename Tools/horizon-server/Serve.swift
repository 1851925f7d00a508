import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger
import HorizonServer
import HorizonTracing
import Logging
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the HTTP API until SIGTERM or SIGINT (then finish the requests under way and exit 0).",
        discussion: """
            Prints `listening on http://HOST:PORT` (https with a certificate) once it accepts connections. \
            /health answers while the process runs, /ready while the database answers. The Prometheus metrics \
            are served apart from the API, at http://METRICS-ADDRESS/metrics (--metrics-listen; by default a free \
            loopback port, printed as `metrics on http://HOST:PORT/metrics`), never on the public port. Logs go to \
            standard error, one line per request with its request id.

            One-time codes stay in the outbox (`horizon-server outbox`) unless a channel is configured: \
            --mail-from hands mail to a sendmail-style command (--mail-command, default /usr/sbin/sendmail -t -i; \
            e.g. /usr/bin/msmtp -t -i), --sms-gateway posts SMS to an HTTP gateway. Either is delivered from \
            the outbox after the registration is stored, retried with back-off until the code expires; a \
            failed attempt is logged at notice and shown by `horizon-server outbox`. The same settings go in \
            server.json ("mail", "sms"), or in /etc/horizon/server.env's HORIZON_SERVER_OPTIONS for the service.
            """ + faultInjectionHelp)

    #if HORIZON_FAULT_INJECTION
        static let faultInjectionHelp = """


            For crash tests only (debug builds): HORIZON_SERVER_CRASH=before-commit|after-commit makes the \
            process SIGKILL itself inside a payment's or redemption's executing ledger transaction (before its \
            commit) or right after that commit (before answering); HORIZON_SERVER_DELAY_MS=N holds each \
            execution's answer N ms after its commit. Unset, they change nothing.
            """
    #else
        static let faultInjectionHelp = ""
    #endif

    @OptionGroup var options: ServerOptions

    @Option(help: "Listen on HOST:PORT instead of server.json's (port 0: any free port, printed).")
    var listen: String?

    @Option(
        help: """
            Serve the Prometheus metrics on HOST:PORT instead of server.json's metricsListen (default \
            127.0.0.1:0, a free loopback port); `off` serves none. Never the API's address.
            """)
    var metricsListen: String?

    @Option(help: "A PEM certificate (chain) to serve HTTPS with; needs --tls-key.")
    var tlsCertificate: String?

    @Option(help: "The PEM private key of --tls-certificate.")
    var tlsKey: String?

    @Flag(
        help: """
            A TLS-terminating proxy stands in front: mark the dashboard's cookies Secure although \
            this process speaks plain HTTP (server.json: "behindTLSProxy": true).
            """)
    var behindTLSProxy = false

    @Flag(
        help: """
            Let webhook endpoints be on loopback, link-local, private, multicast or unspecified addresses \
            and use http:// (a receiver on the shop's own network; server.json: \
            "webhooksAllowPrivateAddresses": true). Off by default: https:// to the public internet only.
            """)
    var webhooksAllowPrivateAddresses = false

    @Option(
        name: .customLong("trusted-proxy"),
        help: """
            A proxy (address or CIDR range, e.g. 10.0.0.0/8) whose X-Forwarded-For names the client; \
            repeat for more. Replaces server.json's trustedProxies. None by default: the peer is the client.
            """)
    var trustedProxies: [String] = []

    @Option(help: "Deliver mail from this address (`Name <noreply@shop.example>`) through --mail-command.")
    var mailFrom: String?

    @Option(
        help: """
            The sendmail-style command mail is handed to (the message on its standard input, the recipient \
            in its To: header), split at spaces. Default /usr/sbin/sendmail -t -i; with --mail-from only.
            """)
    var mailCommand: String?

    @Option(help: "Deliver SMS by POSTing to this HTTP gateway URL.")
    var smsGateway: String?

    @Option(
        help: """
            The SMS request body with {to} and {text} (default {"to":"{to}","text":"{text}"}); values \
            are escaped for --sms-encoding.
            """)
    var smsBody: String?

    @Option(help: "How the SMS body is encoded: json or form (default json).")
    var smsEncoding: String?

    @Option(help: "How the SMS credential is sent: bearer or basic (USER:PASSWORD; default bearer).")
    var smsAuthorization: String?

    @Option(help: "A file holding the SMS gateway's credential (or the systemd credential sms-credential).")
    var smsCredentialFile: String?

    @Option(help: "An environment variable holding the SMS gateway's credential.")
    var smsCredentialEnv: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error.")
    var logLevel = "info"

    func run() async throws {
        // Traces are exported only when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT names a collector.
        try await TracingSetup.run(defaultServiceName: "horizon-server", logger: Logger(label: "horizon.server")) {
            try await serve()
        }
    }

    private func serve() async throws {
        var settings = try options.settings()
        if let listen { settings.listen = listen }
        if let metricsListen { settings.metricsListen = metricsListen }
        settings.tlsCertificatePath = tlsCertificate ?? settings.tlsCertificatePath
        settings.tlsKeyPath = tlsKey ?? settings.tlsKeyPath
        if behindTLSProxy { settings.behindTLSProxy = true }
        if webhooksAllowPrivateAddresses { settings.webhooksAllowPrivateAddresses = true }
        if !trustedProxies.isEmpty { settings.trustedProxies = trustedProxies }
        try applyMessageOptions(to: &settings)
        do { try settings.validate() } catch { throw ValidationError("\(error)") }
        let transports: MessageTransports
        do { transports = try settings.messageTransports(in: options.directory.path) } catch {
            throw ValidationError("\(error)")
        }
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error")
        }
        let issuer = try options.issuer(settings)
        // Made on the first start of a data directory initialised before the gateway existed, then kept.
        let gatewayKey: GatewayKey
        do {
            gatewayKey = try GatewayKey.loadOrCreate(at: settings.gatewayKeySource(in: options.directory.path))
        } catch {
            throw CLIError("\(error)")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "horizon.server")
        #if HORIZON_FAULT_INJECTION
            // Crash tests only (see ServerFaultInjection): nothing changes unless the variables are set.
            let faults: ServerFaultInjection
            do { faults = try ServerFaultInjection.fromEnvironment() } catch { throw CLIError("\(error)") }
            let opened = try await options.openLedger(settings)
            let ledger: Ledger
            do { ledger = try await faults.apply(to: opened) } catch {
                await opened.close()
                throw CLIError("\(error)")
            }
            if !faults.isEmpty { logger.warning("fault injection is on: \(faults)") }
        #else
            let ledger = try await options.openLedger(settings)
        #endif
        let scheme = settings.tlsCertificatePath == nil ? "http" : "https"
        let host = (try? settings.listenAddress().host) ?? "127.0.0.1"
        do {
            let parts = HorizonServer.Parts(
                configuration: settings, ledger: ledger, issuer: issuer, gatewayKey: gatewayKey,
                transports: transports)
            let application = try HorizonServer.application(
                parts, logger: logger,
                onServerRunning: { port in
                    // Written unbuffered: scripts wait for this line to know the port.
                    FileHandle.standardOutput.write(Data("listening on \(scheme)://\(host):\(port)\n".utf8))
                })
            var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: application)]
            let metricsHost = (try? settings.metricsListenAddress()?.host) ?? "127.0.0.1"
            if let metrics = try HorizonServer.metricsApplication(
                parts, logger: logger,
                onServerRunning: { port in
                    FileHandle.standardOutput.write(Data("metrics on http://\(metricsHost):\(port)/metrics\n".utf8))
                })
            {
                services.append(.init(service: metrics))
            }
            let group = ServiceGroup(
                configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            try await group.run()
        } catch {
            await ledger.close()
            throw CLIError("\(error)")
        }
        await ledger.close()
    }
}

extension Serve {
    /// The mail and SMS options over server.json's `mail` and `sms`.
    func applyMessageOptions(to settings: inout ServerConfiguration) throws {
        if let mailFrom {
            settings.mail = MailSettings(
                from: mailFrom, command: mailCommand.map(MailSettings.command) ?? settings.mail?.command,
                timeoutSeconds: settings.mail?.timeoutSeconds)
        } else if let mailCommand {
            guard settings.mail != nil else {
                throw ValidationError("--mail-command needs --mail-from (or server.json's mail.from)")
            }
            settings.mail?.command = MailSettings.command(mailCommand)
        }
        let smsOptions = [smsBody, smsEncoding, smsAuthorization, smsCredentialFile, smsCredentialEnv]
        if let smsGateway {
            settings.sms = settings.sms ?? SMSSettings(url: smsGateway)
            settings.sms?.url = smsGateway
        } else if smsOptions.contains(where: { $0 != nil }), settings.sms == nil {
            throw ValidationError("the --sms-… options need --sms-gateway (or server.json's sms.url)")
        }
        if let smsEncoding {
            guard let encoding = SMSGatewayTransport.Encoding(rawValue: smsEncoding) else {
                throw ValidationError("--sms-encoding must be json or form")
            }
            settings.sms?.encoding = encoding
        }
        if let smsBody { settings.sms?.bodyTemplate = smsBody }
        if let smsAuthorization { settings.sms?.authorization = smsAuthorization }
        if let smsCredentialFile {
            settings.sms?.credentialFile = smsCredentialFile
            settings.sms?.credentialEnvironment = nil
        }
        if let smsCredentialEnv {
            settings.sms?.credentialEnvironment = smsCredentialEnv
            settings.sms?.credentialFile = nil
        }
    }
}
