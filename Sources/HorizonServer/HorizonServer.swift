import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import OpenAPIHummingbird
import OpenAPIRuntime

/// The Horizon server: `openapi.yaml`'s operations on Hummingbird 2, over one ledger.
///
/// Stateless over its database: run several processes on one PostgreSQL
/// behind a load balancer. Request limits and sign-in counters are in the database too.
public enum HorizonServer {
    /// The parts a server is made of, so tests can build one around their own ledger and clock.
    public struct Parts: Sendable {
        public var configuration: ServerConfiguration
        public var ledger: Ledger
        public var issuer: Issuer
        public var metrics: ServerMetrics
        public var messages: any MessageSender
        /// Delivers the outbox through the configured mail and SMS transports (none: the sandbox).
        public var deliverer: OutboxDeliverer
        /// Sends the webhook deliveries the ledger holds.
        public var webhooks: WebhookDeliverer
        /// The card processor; the sandbox over this ledger unless given.
        public var cardProcessor: any CardProcessor
        public var now: @Sendable () -> UnixTime
        /// The rate limiter's clock (its buckets refill by the sub-second).
        public var rateLimitClock: @Sendable () -> ContinuousClock.Instant
        /// The gateway's HPKE key. `horizon-server` loads the one kept in its data
        /// directory (`GatewayKey.loadOrCreate`); without one, a new key lives as long as these parts.
        public var gatewayKey: GatewayKey
        /// Pushes payment intents to the terminals connected to this process.
        public var intentHub: TerminalIntentHub

        public init(
            configuration: ServerConfiguration, ledger: Ledger, issuer: Issuer,
            metrics: ServerMetrics = ServerMetrics(),
            messages: (any MessageSender)? = nil, now: @escaping @Sendable () -> UnixTime = { Ledger.now() },
            rateLimitClock: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
            cardProcessor: (any CardProcessor)? = nil, gatewayKey: GatewayKey? = nil,
            transports: MessageTransports = MessageTransports()
        ) {
            self.configuration = configuration
            self.ledger = ledger
            self.issuer = issuer
            self.metrics = metrics
            self.deliverer = OutboxDeliverer(ledger: ledger, transports: transports, metrics: metrics, now: now)
            self.messages = messages ?? OutboxMessageSender(ledger: ledger, deliverer: deliverer)
            self.webhooks = WebhookDeliverer(
                ledger: ledger, timeout: configuration.effectiveWebhookTimeout,
                addressPolicy: configuration.webhookAddressPolicy, metrics: metrics, now: now)
            self.cardProcessor = cardProcessor ?? SandboxCardProcessor(ledger: ledger)
            self.now = now
            self.rateLimitClock = rateLimitClock
            self.gatewayKey = gatewayKey ?? .generate()
            self.intentHub = TerminalIntentHub(ledger: ledger, now: now)
        }
    }

    /// The router. Every request passes the boundary (request id, error envelope, log line,
    /// metrics), the rate limit and the text rule; then
    /// - the API's operations on the `/v1` group (and `/health`, `/ready` on the unversioned
    ///   one), each group carrying the API's JSON-only body rule and request signatures;
    /// - the merchant dashboard's pages, a route collection of its own under `/dashboard` with its
    ///   HTML error pages (forms, not JSON; cookies, not signatures);
    /// - `GET /`, which sends a browser to the dashboard.
    public static func router(_ parts: Parts) throws -> Router<ServerRequestContext> {
        let router = Router(context: ServerRequestContext.self)
        let routes = RouteTable()
        router.add(
            middleware: BoundaryMiddleware(
                metrics: parts.metrics, routes: routes,
                trustedProxies: try TrustedProxies(parts.configuration.trustedProxies ?? [])))
        // In the database, so every server process on it shares the limit.
        let limiter = RequestLimiter(
            ledger: parts.ledger, burst: parts.configuration.rateLimitBurst,
            perSecond: parts.configuration.rateLimitPerSecond, now: parts.now)
        router.add(middleware: RateLimitMiddleware(limiter: limiter))
        // No NUL in any string, for the dashboard and the API alike, before either reads one.
        router.add(middleware: TextMiddleware(maximumBytes: parts.configuration.maximumBodyBytes))
        let gateway = try ServerGateway(
            key: parts.gatewayKey, issuer: parts.issuer,
            relaysPerMinute: parts.configuration.effectiveGatewayRelaysPerMinute,
            window: parts.configuration.signatureWindow)
        let handler = APIHandler(
            ledger: parts.ledger, issuer: parts.issuer, configuration: parts.configuration,
            passwords: PasswordHasher(costLog2: parts.configuration.passwordCostLog2), metrics: parts.metrics,
            messages: parts.messages, cards: parts.cardProcessor, now: parts.now, gateway: gateway,
            rateLimitClock: parts.rateLimitClock, intentHub: parts.intentHub)

        // The API: its body rule (JSON only, within the limit) and the signature check apply
        // to its operations alone.
        func apiGroup(_ path: RouterPath) -> RouterGroup<ServerRequestContext> {
            router.group(path)
                .add(middleware: BodyLimitMiddleware(maximumBytes: parts.configuration.maximumBodyBytes))
                .add(
                    middleware: SignedRequestMiddleware(
                        ledger: parts.ledger, window: parts.configuration.signatureWindow, clock: parts.now,
                        limiter: limiter))
        }
        let v1 = apiGroup("v1")
        try handler.registerHandlers(on: RecordingTransport(v1: v1, unversioned: apiGroup(""), routes: routes))
        ThreeDSecurePages.register(on: v1, ledger: parts.ledger, now: parts.now)
        ActivationLinkPages.register(on: v1, handler: handler)

        let dashboard = try Dashboard(api: handler, configuration: parts.configuration)
        router.addRoutes(dashboard.routes(), atPath: "/dashboard")
        // The API has nothing at its root: a person who types the server's address gets the
        // dashboard (its home page, or the sign-in when not signed in).
        router.get("/") { _, _ in Dashboard.redirect("/dashboard") }
        router.head("/") { _, _ in Dashboard.redirect("/dashboard") }

        // The gateway serves the requests it opens through this same router, every middleware
        // included; its responder is built once every route is on it.
        gateway.setResponder(router.buildResponder())
        return router
    }

    /// The HTTP application, listening where the configuration says, with TLS when it names a
    /// certificate. Run it in a `ServiceGroup` (it stops gracefully on SIGTERM).
    public static func application(
        _ parts: Parts, logger: Logger, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    )
        throws -> some ApplicationProtocol
    {
        let (host, port) = try parts.configuration.listenAddress()
        let server: HTTPServerBuilder
        if let certificate = parts.configuration.tlsCertificatePath, let key = parts.configuration.tlsKeyPath {
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(certificate).map {
                    NIOSSLCertificateSource.certificate($0)
                }
                let tls = TLSConfiguration.makeServerConfiguration(
                    certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
                server = try .tls(.http1(), tlsConfiguration: tls)
            } catch {
                throw ServerSetupError.unreadable(
                    path: "\(certificate) / \(key)", reason: "not a usable PEM certificate and key: \(error)")
            }
        } else {
            server = .http1()
        }
        return Application(
            router: try router(parts), server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: "horizon-server"),
            services: [
                ServerMaintenance(
                    recovery: CardClaimRecovery(ledger: parts.ledger, cards: parts.cardProcessor),
                    ledger: parts.ledger, now: parts.now, logger: logger),
                OutboxDeliveryService(deliverer: parts.deliverer, logger: logger),
                WebhookDeliveryService(deliverer: parts.webhooks, logger: logger),
                TerminalIntentHubService(hub: parts.intentHub),
            ],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger)
    }
}

extension HorizonServer {
    /// The metrics router: `GET /metrics` in Prometheus's text format, and nothing else. It is
    /// served on an address of its own (`metricsListen`), never on the API's port.
    public static func metricsRouter(_ metrics: ServerMetrics) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
        return router
    }

    /// The metrics listener where the configuration says (nil when it is `off`). Run it in the
    /// same `ServiceGroup` as the API.
    public static func metricsApplication(
        _ parts: Parts, logger: Logger, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> Application<RouterResponder<BasicRequestContext>>? {
        guard let (host, port) = try parts.configuration.metricsListenAddress() else { return nil }
        return Application(
            router: metricsRouter(parts.metrics),
            configuration: .init(address: .hostname(host, port: port), serverName: "horizon-server-metrics"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger)
    }
}

/// Registers the generated handlers on the API's groups (`/v1/…` on the `/v1` group, the
/// unversioned `/health` and `/ready` on the other) and notes each path's methods, so that the
/// boundary can answer 405 rather than 404 for a known path with another method.
struct RecordingTransport: ServerTransport {
    let v1: RouterGroup<ServerRequestContext>
    let unversioned: RouterGroup<ServerRequestContext>
    let routes: RouteTable
    static let v1Prefix = "/v1/"

    func register(
        _ handler:
            @Sendable @escaping (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (
                HTTPResponse, HTTPBody?
            ),
        method: HTTPRequest.Method, path: String
    ) throws {
        routes.add(method, path)
        if path.hasPrefix(Self.v1Prefix) {
            v1.register(handler, method: method, path: String(path.dropFirst(Self.v1Prefix.count - 1)))
        } else {
            unversioned.register(handler, method: method, path: path)
        }
    }
}
