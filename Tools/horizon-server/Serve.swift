import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger
import HorizonServer
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

    @Option(
        name: .customLong("trusted-proxy"),
        help: """
            A proxy (address or CIDR range, e.g. 10.0.0.0/8) whose X-Forwarded-For names the client; \
            repeat for more. Replaces server.json's trustedProxies. None by default: the peer is the client.
            """)
    var trustedProxies: [String] = []

    @Option(help: "Log level: trace, debug, info, notice, warning, error.")
    var logLevel = "info"

    func run() async throws {
        var settings = try options.settings()
        if let listen { settings.listen = listen }
        if let metricsListen { settings.metricsListen = metricsListen }
        settings.tlsCertificatePath = tlsCertificate ?? settings.tlsCertificatePath
        settings.tlsKeyPath = tlsKey ?? settings.tlsKeyPath
        if behindTLSProxy { settings.behindTLSProxy = true }
        if !trustedProxies.isEmpty { settings.trustedProxies = trustedProxies }
        do { try settings.validate() } catch { throw ValidationError("\(error)") }
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
                configuration: settings, ledger: ledger, issuer: issuer, gatewayKey: gatewayKey)
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
