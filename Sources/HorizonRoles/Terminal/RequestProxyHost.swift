import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSettlement
import Logging
import Synchronization

/// How much relaying a terminal does for wallets, so that a foreign central cannot turn it into
/// an open relay to the server. A request over a limit is answered with a `ProxyError`
/// (`payloadTooLarge` or `rateLimited`) and never reaches the gateway.
public struct RequestProxyLimits: Sendable, Equatable {
    /// The largest sealed request relayed, in bytes (default and at most
    /// `MessageLimits.sealedPayload`, 4096).
    public var maximumSealedBytes: Int
    /// Requests one connection may have at the gateway at once (default 2): a wallet needs one
    /// or two, and more would let one connection hold the gateway busy.
    public var maximumOutstandingPerConnection: Int
    /// Requests one connection may have relayed in its whole life (default 16).
    public var maximumRelaysPerConnection: Int
    /// Requests the terminal relays within `rateWindow`, across all connections and all hosts
    /// sharing the coordinator (default 30 a minute). Checked after the budgets below, so that
    /// no one central can spend it: connections that proved no wallet key share at most half.
    public var maximumRelaysPerWindow: Int
    /// Requests one proven wallet (the session key its Hello proved, on any connection) may have
    /// relayed within `rateWindow` (default 10).
    public var maximumRelaysPerWalletPerWindow: Int
    /// Requests one connection that proved no wallet key may have relayed within `rateWindow`
    /// (default 4): lower, since anyone in range can open one.
    public var maximumRelaysPerUnprovenConnectionPerWindow: Int
    public var rateWindow: Duration
    /// Refused requests after which a connection is closed (default 4): an honest wallet stops
    /// at the first refusal, so repeats are abuse.
    public var refusalsBeforeClosing: Int

    public init(
        maximumSealedBytes: Int = MessageLimits.sealedPayload, maximumOutstandingPerConnection: Int = 2,
        maximumRelaysPerConnection: Int = 16, maximumRelaysPerWindow: Int = 30, rateWindow: Duration = .seconds(60),
        refusalsBeforeClosing: Int = 4, maximumRelaysPerWalletPerWindow: Int = 10,
        maximumRelaysPerUnprovenConnectionPerWindow: Int = 4
    ) {
        self.maximumRelaysPerWalletPerWindow = max(0, maximumRelaysPerWalletPerWindow)
        self.maximumRelaysPerUnprovenConnectionPerWindow = max(0, maximumRelaysPerUnprovenConnectionPerWindow)
        self.maximumSealedBytes = min(max(0, maximumSealedBytes), MessageLimits.sealedPayload)
        self.maximumOutstandingPerConnection = max(1, maximumOutstandingPerConnection)
        self.maximumRelaysPerConnection = max(0, maximumRelaysPerConnection)
        self.maximumRelaysPerWindow = max(0, maximumRelaysPerWindow)
        self.rateWindow = rateWindow
        self.refusalsBeforeClosing = max(1, refusalsBeforeClosing)
    }
}

/// A wallet's connection as the relay's state machine sees it (`TerminalConnection`; a stand-in
/// in the machine's tests).
protocol ProxyWallet: AnyObject, Sendable {
    var id: Int { get }
    /// The wallet key the connection's Hello proved, if it said one: its relay budget.
    var sessionKey: PublicKeyBytes? { get }
    func send(_ message: SessionMessage)
    func close()
}

extension TerminalConnection: ProxyWallet {}

/// What the relay's state machine asks its driver to do.
enum RequestProxyHostAction: Sendable {
    /// Hand the sealed bytes to the gateway off the scheduler, then report `relayed`.
    case relay(requestID: UInt32, sealed: [UInt8], for: any ProxyWallet)
    case send(SessionMessage, to: any ProxyWallet)
    case close(any ProxyWallet)
    /// Sizes, counts and timing only: never the bytes.
    case log(Logger.Level, Logger.Message, Logger.Metadata)
}

/// What the gateway gave for one relayed request.
enum GatewayAnswer: Sendable {
    case answered([UInt8])
    /// No answer; `kind` names the failure's type (never its text, which might quote the bytes).
    case failed(kind: String)
}

/// The terminal's relay rules as a value: a wallet's proxy request goes in with the time, and
/// out come the actions (relay it, or answer with the limit it hit; answer the gateway's result).
/// It keeps counts and the ids outstanding, never the sealed bytes.
struct RequestProxyHostStateMachine: Sendable {
    let limits: RequestProxyLimits

    private struct ConnectionRecord {
        let wallet: any ProxyWallet
        var outstanding: Set<UInt32> = []
        var relayed = 0
        var refusals = 0
    }

    /// By the wallet object's identity: connection ids repeat across the services of one
    /// coordinator. The record holds the object, so the identity is not reused meanwhile.
    private var connections: [ObjectIdentifier: ConnectionRecord] = [:]
    /// Whose window budget a relay counts against: a proven wallet key, or a connection that
    /// proved none.
    private enum Budget: Hashable {
        case wallet([UInt8])
        case connection(ObjectIdentifier)
    }
    /// When each relay within the current window started, oldest first, and whose it was.
    private var recentRelays: [(at: Instant, budget: Budget)] = []
    private(set) var relayedCount = 0
    private(set) var refusedCount = 0

    init(limits: RequestProxyLimits) { self.limits = limits }

    /// Requests at the gateway now, over all connections.
    var outstandingCount: Int { connections.values.reduce(0) { $0 + $1.outstanding.count } }

    mutating func request(_ envelope: ProxyEnvelope, from wallet: any ProxyWallet, now: Instant)
        -> [RequestProxyHostAction]
    {
        let key = ObjectIdentifier(wallet)
        var record = connections[key] ?? ConnectionRecord(wallet: wallet)
        recentRelays.removeAll { now - $0.at >= limits.rateWindow }
        // Each one's budget first, then the terminal's: one central spending its own cannot
        // starve a customer who needs the relay (unproven connections share half the cap).
        let budget: Budget = wallet.sessionKey.map { .wallet($0.bytes) } ?? .connection(key)
        let usedByBudget = recentRelays.reduce(0) { $0 + ($1.budget == budget ? 1 : 0) }
        let usedUnproven = recentRelays.reduce(0) { count, relay in
            if case .connection = relay.budget { count + 1 } else { count }
        }
        let isProven = wallet.sessionKey != nil
        let refusal: (code: ErrorCode, message: String)? =
            if envelope.sealed.count > limits.maximumSealedBytes {
                (
                    .payloadTooLarge,
                    "the request is \(envelope.sealed.count) bytes; this terminal relays at most \(limits.maximumSealedBytes); not sent"
                )
            } else if record.outstanding.contains(envelope.requestID) {
                (.protocolViolation, "request \(envelope.requestID) is already being relayed; not sent again")
            } else if record.outstanding.count >= limits.maximumOutstandingPerConnection {
                (
                    .rateLimited,
                    "\(limits.maximumOutstandingPerConnection) requests are already being relayed on this connection; wait for their answers; not sent"
                )
            } else if record.relayed >= limits.maximumRelaysPerConnection {
                (
                    .rateLimited,
                    "this connection has relayed its \(limits.maximumRelaysPerConnection) requests; connect again; not sent"
                )
            } else if isProven, usedByBudget >= limits.maximumRelaysPerWalletPerWindow {
                (
                    .rateLimited,
                    "this wallet has relayed its \(limits.maximumRelaysPerWalletPerWindow) requests per \(limits.rateWindow); try again later; not sent"
                )
            } else if !isProven, usedByBudget >= limits.maximumRelaysPerUnprovenConnectionPerWindow {
                (
                    .rateLimited,
                    "a connection without a proven wallet key relays at most \(limits.maximumRelaysPerUnprovenConnectionPerWindow) requests per \(limits.rateWindow); not sent"
                )
            } else if !isProven, usedUnproven >= limits.maximumRelaysPerWindow / 2 {
                (
                    .rateLimited,
                    "this terminal relays at most \(limits.maximumRelaysPerWindow / 2) requests per \(limits.rateWindow) for connections without a proven wallet key; not sent"
                )
            } else if recentRelays.count >= limits.maximumRelaysPerWindow {
                (
                    .rateLimited,
                    "this terminal relays at most \(limits.maximumRelaysPerWindow) requests per \(limits.rateWindow); try again later; not sent"
                )
            } else {
                nil
            }
        if let refusal {
            record.refusals += 1
            refusedCount += 1
            connections[key] = record
            var actions: [RequestProxyHostAction] = [
                .log(
                    .notice, "refused a proxy request",
                    [
                        "connection": "\(wallet.id)", "bytes": "\(envelope.sealed.count)",
                        "code": "\(refusal.code)",
                    ]),
                .send(
                    .proxyError(
                        ProxyError(requestID: envelope.requestID, code: refusal.code, message: refusal.message)),
                    to: wallet),
            ]
            if record.refusals >= limits.refusalsBeforeClosing {
                actions.append(
                    .log(
                        .notice, "closed a connection that kept sending refused proxy requests",
                        ["connection": "\(wallet.id)", "refusals": "\(record.refusals)"]))
                actions.append(.close(wallet))
            }
            return actions
        }
        record.outstanding.insert(envelope.requestID)
        record.relayed += 1
        connections[key] = record
        recentRelays.append((now, budget))
        relayedCount += 1
        return [
            .log(
                .debug, "relaying a proxy request", ["connection": "\(wallet.id)", "bytes": "\(envelope.sealed.count)"]),
            .relay(requestID: envelope.requestID, sealed: envelope.sealed, for: wallet),
        ]
    }

    /// The gateway's result for a relayed request, `elapsed` after it was handed over. Dropped
    /// if the connection ended meanwhile: nobody is there to read it, and it is not kept.
    mutating func relayed(_ answer: GatewayAnswer, requestID: UInt32, for wallet: any ProxyWallet, elapsed: Duration)
        -> [RequestProxyHostAction]
    {
        let key = ObjectIdentifier(wallet)
        guard connections[key]?.outstanding.remove(requestID) != nil else {
            return [
                .log(
                    .debug, "dropped a gateway answer: its connection ended",
                    ["connection": "\(wallet.id)", "milliseconds": "\(Int64(elapsed.milliseconds))"])
            ]
        }
        switch answer {
        case .answered(let sealed):
            guard let envelope = try? ProxyEnvelope(requestID: requestID, sealed: sealed) else {
                return [
                    .log(
                        .warning, "the gateway's answer is too large to relay",
                        ["connection": "\(wallet.id)", "answerBytes": "\(sealed.count)"]),
                    .send(
                        .proxyError(
                            ProxyError(
                                requestID: requestID, code: .gatewayUnreachable,
                                message:
                                    "the server's answer is too large to relay; the request may have been processed")),
                        to: wallet),
                ]
            }
            return [
                .log(
                    .debug, "relayed a proxy answer",
                    [
                        "connection": "\(wallet.id)", "answerBytes": "\(sealed.count)",
                        "milliseconds": "\(Int64(elapsed.milliseconds))",
                    ]),
                .send(.proxyResponse(envelope), to: wallet),
            ]
        case .failed(let kind):
            return [
                .log(
                    .warning, "the gateway did not answer a proxy request",
                    [
                        "connection": "\(wallet.id)", "failure": "\(kind)",
                        "milliseconds": "\(Int64(elapsed.milliseconds))",
                    ]),
                .send(
                    .proxyError(
                        ProxyError(
                            requestID: requestID, code: .gatewayUnreachable,
                            message:
                                "the terminal could not reach the server; the request may or may not have been processed"
                        )), to: wallet),
            ]
        }
    }

    /// The connection ended: its counts go, and answers still due for it are dropped.
    mutating func connectionEnded(_ wallet: any ProxyWallet) {
        connections[ObjectIdentifier(wallet)] = nil
    }
}

/// What a host hands the coordinator: the radio service its wallets connect through (the
/// reference's `ProxyHostConnector`, each host's `connector`). Hosts sharing a service share it.
public protocol ProxyHostConnector: Sendable {
    var radioService: TerminalRadioService { get }
}

/// A payment or redemption host's connector.
public struct HostProxyConnector: ProxyHostConnector {
    public let radioService: TerminalRadioService
}

extension PaymentHost {
    /// What `RequestProxyHostCoordinator` relays wallets' requests through.
    public var connector: any ProxyHostConnector { HostProxyConnector(radioService: service) }
}

extension RedemptionHost {
    /// What `RequestProxyHostCoordinator` relays wallets' requests through.
    public var connector: any ProxyHostConnector { HostProxyConnector(radioService: service) }
}

/// What the radio service hands proxy requests and connection ends to.
protocol TerminalProxyHandler: AnyObject, Sendable {
    func proxyRequest(_ envelope: ProxyEnvelope, on connection: TerminalConnection)
    func connectionEnded(_ connection: TerminalConnection)
}

/// The terminal's request proxy (the reference SDK's `RequestProxyHostCoordinator`): wallets with
/// an established secure channel to any of the hosts may send `ProxyRequest`s; each is checked
/// against one shared budget (`RequestProxyLimits`), handed to the gateway off the radio's
/// scheduler (the payment or redemption on the same connection goes on meanwhile), and answered
/// with the gateway's sealed bytes as `ProxyResponse`, or with a `ProxyError`.
///
/// The sealed bytes are never decoded, logged, journaled or kept: the logger hears sizes, counts
/// and timing; the bytes live only until the answer is sent. Until `configure` is called, the
/// terminal answers every proxy request with `proxyUnavailable`. The radio services hold their
/// coordinator weakly: keep a reference for as long as the terminal relays.
public final class RequestProxyHostCoordinator: TerminalProxyHandler, Sendable {
    public let proxyHostConnectors: [any ProxyHostConnector]
    private let logger: Logger

    private struct Configured {
        var gateway: any ProxyGateway
        var machine: RequestProxyHostStateMachine
    }

    private let configured = Mutex<Configured?>(nil)

    /// `logger` defaults to the first connector's service's.
    public init(proxyHostConnectors: [any ProxyHostConnector], logger: Logger? = nil) {
        self.proxyHostConnectors = proxyHostConnectors
        self.logger = logger ?? proxyHostConnectors.first?.radioService.logger ?? .silent
    }

    /// Starts relaying through `gateway` within `limits`, shared by every connector's wallets.
    /// Calling it again replaces the gateway and the limits; counts start afresh, and answers
    /// still due from the previous gateway are dropped.
    public func configure(gateway: any ProxyGateway, limits: RequestProxyLimits = RequestProxyLimits()) {
        configured.withLock { $0 = Configured(gateway: gateway, machine: RequestProxyHostStateMachine(limits: limits)) }
        var seen: Set<ObjectIdentifier> = []
        for connector in proxyHostConnectors where seen.insert(ObjectIdentifier(connector.radioService)).inserted {
            connector.radioService.setProxyHandler(self)
        }
        logger.info(
            "relaying wallets' requests",
            metadata: [
                "maximumBytes": "\(limits.maximumSealedBytes)", "perConnection": "\(limits.maximumRelaysPerConnection)",
                "perWindow": "\(limits.maximumRelaysPerWindow)", "window": "\(limits.rateWindow)",
            ])
    }

    /// Stops relaying: proxy requests are answered `proxyUnavailable` again.
    public func stop() {
        var seen: Set<ObjectIdentifier> = []
        for connector in proxyHostConnectors where seen.insert(ObjectIdentifier(connector.radioService)).inserted {
            connector.radioService.setProxyHandler(nil)
        }
        configured.withLock { $0 = nil }
    }

    public var limits: RequestProxyLimits? { configured.withLock { $0?.machine.limits } }
    /// Requests handed to the gateway so far (since the last `configure`).
    public var relayedCount: Int { configured.withLock { $0?.machine.relayedCount ?? 0 } }
    /// Requests refused for a limit so far (since the last `configure`).
    public var refusedCount: Int { configured.withLock { $0?.machine.refusedCount ?? 0 } }
    /// Requests at the gateway now.
    public var outstandingCount: Int { configured.withLock { $0?.machine.outstandingCount ?? 0 } }

    // MARK: From the radio service, on its scheduler

    func proxyRequest(_ envelope: ProxyEnvelope, on connection: TerminalConnection) {
        let now = connection.secureLink.link.scheduler.now
        guard
            let (gateway, actions) = configured.withLock({
                configured -> (any ProxyGateway, [RequestProxyHostAction])? in
                guard let gateway = configured?.gateway,
                    let actions = configured?.machine.request(envelope, from: connection, now: now)
                else { return nil }
                return (gateway, actions)
            })
        else {
            connection.send(Self.unavailable(envelope.requestID))
            return
        }
        perform(actions, gateway: gateway, scheduler: connection.secureLink.link.scheduler)
    }

    func connectionEnded(_ connection: TerminalConnection) {
        configured.withLock { $0?.machine.connectionEnded(connection) }
    }

    static func unavailable(_ requestID: UInt32) -> SessionMessage {
        .proxyError(
            ProxyError(requestID: requestID, code: .proxyUnavailable, message: "this terminal does not relay requests"))
    }

    // MARK: Actions

    private func perform(_ actions: [RequestProxyHostAction], gateway: any ProxyGateway, scheduler: any Scheduler) {
        for action in actions {
            switch action {
            case .send(let message, let wallet): wallet.send(message)
            case .close(let wallet): wallet.close()
            case .log(let level, let message, let metadata): logger.log(level: level, message, metadata: metadata)
            case .relay(let requestID, let sealed, let wallet):
                relay(sealed, requestID: requestID, for: wallet, through: gateway, scheduler: scheduler)
            }
        }
    }

    /// Awaits the gateway off the scheduler; its answer comes back on it. The sealed bytes are
    /// captured by the work alone and released with it.
    private func relay(
        _ sealed: [UInt8], requestID: UInt32, for wallet: any ProxyWallet, through gateway: any ProxyGateway,
        scheduler: any Scheduler
    ) {
        let started = ContinuousClock.now
        let startedVirtual = scheduler.now
        scheduler.runExternal {
            () async -> GatewayAnswer in
            do {
                return .answered(try await gateway.forward(sealed))
            } catch {
                return .failed(kind: "\(type(of: error))")
            }
        } then: { [weak self] answer in
            guard let self else { return }
            // Real time for a real gateway; a virtual clock's own time in a simulation.
            let elapsed = max(ContinuousClock.now - started, scheduler.now - startedVirtual)
            guard
                let actions = self.configured.withLock({
                    $0?.machine.relayed(answer, requestID: requestID, for: wallet, elapsed: elapsed)
                })
            else { return }
            self.perform(actions, gateway: gateway, scheduler: scheduler)
        }
    }
}
