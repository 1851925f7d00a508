import HorizonCore
import HorizonLink
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import Logging
import Synchronization

/// Why a relayed request has no answer. `mayHaveBeenProcessed` says whether it could have
/// reached the server: only then is retrying a decision (the server refuses replays anyway);
/// nothing here retries on its own.
public enum RequestProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `configureRequestProxyClient()` was not called.
    case notConfigured
    /// No terminal is connected over an established secure channel; nothing was sent.
    case noTerminalInReach
    /// Larger than a proxy request can be (`MessageLimits.sealedPayload`); nothing was sent.
    case tooLarge(size: Int, maximum: Int)
    /// The terminal refused it for one of its relay limits (or its size); not sent on.
    case limitReached(String)
    /// The terminal does not relay, or refused the request as malformed; not sent on.
    case refused(code: ErrorCode, reason: String)
    /// Sent, and no answer came (the terminal could not reach the server, the link ended, or
    /// the time ran out): the server may have processed it.
    case outcomeUnknown(String)

    public var mayHaveBeenProcessed: Bool {
        if case .outcomeUnknown = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .notConfigured: "The request proxy is not configured (call configureRequestProxyClient())."
        case .noTerminalInReach: "No terminal is connected to relay the request; nothing was sent."
        case .tooLarge(let size, let maximum):
            "The request is \(size) bytes; a terminal relays at most \(maximum). Nothing was sent."
        case .limitReached(let reason): "The terminal did not relay the request: \(reason)."
        case .refused(let code, let reason): "The terminal refused to relay the request (\(code)): \(reason)."
        case .outcomeUnknown(let reason):
            "No answer came through the terminal (\(reason)); the server may have processed the request."
        }
    }
}

/// What a relayed request's channel brings back to the coordinator.
public enum ProxyClientEvent: Sendable, Equatable {
    case response(ProxyEnvelope)
    case refused(ProxyError)
    /// The secure channel ended: no more answers come on it.
    case channelEnded
}

/// Hears what a connector's channels bring back (the coordinator).
public protocol ProxyClientListener: AnyObject, Sendable {
    func proxyConnector(_ connector: any ProxyClientConnector, channel: Int, received event: ProxyClientEvent)
}

/// A wallet client's link to its terminal as the request proxy uses it (the reference's
/// `ProxyClientConnector`, each client's `connector`): is a terminal connected over an
/// established secure channel, and send this request on it.
public protocol ProxyClientConnector: AnyObject, Sendable {
    /// Hops to the client's scheduler and sends `envelope` on its established secure channel if
    /// it has one; `completion` runs there, in the same turn, with the channel's id (nil: none,
    /// nothing sent). Answers arrive later through the listener, with that id.
    func sendProxyRequest(_ envelope: ProxyEnvelope, completion: @escaping @Sendable (Int?) -> Void)
    /// Where answers and the channel's end go (held weakly).
    func setProxyListener(_ listener: (any ProxyClientListener)?)
    /// Runs `action` on the client's scheduler after `delay` (the coordinator's timeouts).
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction
    /// With no established channel: connects to the nearest terminal advertising for this
    /// client, for this one request, and sends it there once the secure channel is up.
    /// `completion` gets the new channel's id, or nil when no terminal could be reached (nothing
    /// was sent). The channel closes after its answer.
    func connectAndSendProxyRequest(_ envelope: ProxyEnvelope, completion: @escaping @Sendable (Int?) -> Void)
}

extension ProxyClientConnector {
    /// A connector that cannot connect on its own relays only over channels it has.
    public func connectAndSendProxyRequest(
        _ envelope: ProxyEnvelope, completion: @escaping @Sendable (Int?) -> Void
    ) {
        completion(nil)
    }
}

/// The connector of a `PaymentClient` or `RedemptionClient`: its `SessionClient` tells it when
/// the secure channel is established and ends, and hands it the proxy answers it receives.
final class SessionProxyConnector: ProxyClientConnector {
    private struct State {
        /// The generation of the established secure channel, nil while none is.
        var channel: Int?
        weak var listener: (any ProxyClientListener)?
        /// Weak: the client owns its connector.
        weak var client: SessionClient?
        /// Channels opened for one request each, by id (negative, so never a session link's
        /// generation).
        var dialed: [Int: SecureLink] = [:]
        var lastDialedID = 0
    }

    /// How long a channel opened for one request stays open at most: the request's own timeout
    /// ends the wait for its answer, this ends the link if the answer never came.
    static let dialedChannelLifetime = Duration.seconds(30)

    private let scheduler: any Scheduler
    private let state = Mutex(State())

    init(scheduler: any Scheduler) { self.scheduler = scheduler }

    func attach(_ client: SessionClient) { state.withLock { $0.client = client } }

    func sendProxyRequest(_ envelope: ProxyEnvelope, completion: @escaping @Sendable (Int?) -> Void) {
        scheduler.execute { [self] in
            let (channel, client) = state.withLock { ($0.channel, $0.client) }
            guard let channel, let client, client.sendProxyMessage(.proxyRequest(envelope), generation: channel) else {
                completion(nil)
                return
            }
            completion(channel)
        }
    }

    func setProxyListener(_ listener: (any ProxyClientListener)?) { state.withLock { $0.listener = listener } }

    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        scheduler.schedule(after: delay, action)
    }

    func connectAndSendProxyRequest(_ envelope: ProxyEnvelope, completion: @escaping @Sendable (Int?) -> Void) {
        scheduler.execute { [self] in
            let client = state.withLock { $0.client }
            // The nearest session the client hears (its tracker lists them nearest first).
            guard let client, let nearest = client.fusionTracker.trackings.first?.peripheralMetaData else {
                completion(nil)
                return
            }
            let id = state.withLock { state in
                state.lastDialedID -= 1
                return state.lastDialedID
            }
            let configuration = client.configuration
            client.radio.connect(to: nearest.address, timeout: configuration.connectTimeout) { [self] result in
                guard case .success(let link) = result,
                    let messageLink = try? MessageLink(
                        link: link, scheduler: scheduler, limits: configuration.linkLimits)
                else {
                    if case .success(let link) = result { link.close() }
                    completion(nil)
                    return
                }
                open(
                    id, over: messageLink, to: nearest, anchors: client.trustAnchors,
                    configuration: configuration.secureLink, sending: envelope, completion: completion)
            }
        }
    }

    /// The secure handshake on a link opened for one request; the request leaves once it is up.
    private func open(
        _ id: Int, over messageLink: MessageLink, to terminal: PeripheralMetaData, anchors: [TrustAnchor],
        configuration: SecureLinkConfiguration, sending envelope: ProxyEnvelope,
        completion: @escaping @Sendable (Int?) -> Void
    ) {
        // Called at most once: with the channel when the request left, nil if it never did.
        let pending = Mutex<(@Sendable (Int?) -> Void)?>(completion)
        let finish: @Sendable (Int?) -> Void = { channel in pending.withLock { $0.take() }?(channel) }
        do {
            let secure = try SecureLink.initiate(
                over: messageLink, trustAnchors: anchors, expectedTerminalKeyID: terminal.terminalKeyID.bytes,
                context: TerminalRadioService.context(for: terminal.sessionID), configuration: configuration,
                handler: SecureLinkHandler(
                    onEstablished: { [weak self] _ in
                        guard let self, let secure = self.state.withLock({ $0.dialed[id] }) else {
                            finish(nil)
                            return
                        }
                        guard (try? secure.send(SessionMessage.proxyRequest(envelope).encoded())) != nil else {
                            secure.close()
                            finish(nil)
                            return
                        }
                        finish(id)
                        self.scheduler.schedule(after: Self.dialedChannelLifetime) { secure.close() }
                    },
                    onMessage: { [weak self] bytes in
                        guard let self, let message = try? SessionMessage.decode(bytes),
                            self.received(message, generation: id)
                        else { return }
                        // One request per channel: its answer is in.
                        self.state.withLock { $0.dialed[id] }?.close()
                    },
                    onEnd: { [weak self] _ in
                        finish(nil)
                        guard let self else { return }
                        _ = self.state.withLock { $0.dialed.removeValue(forKey: id) }
                        self.channelEnded(id)
                    }))
            state.withLock { $0.dialed[id] = secure }
        } catch {
            messageLink.close()
            finish(nil)
        }
    }

    // From the session client, on its scheduler.

    func channelEstablished(_ generation: Int) { state.withLock { $0.channel = generation } }

    func channelEnded(_ generation: Int) {
        let listener = state.withLock { state -> (any ProxyClientListener)? in
            if state.channel == generation { state.channel = nil }
            return state.listener
        }
        listener?.proxyConnector(self, channel: generation, received: .channelEnded)
    }

    /// A proxy answer or refusal; false for any other message (the session's).
    func received(_ message: SessionMessage, generation: Int) -> Bool {
        let event: ProxyClientEvent
        switch message {
        case .proxyResponse(let envelope): event = .response(envelope)
        case .proxyError(let error): event = .refused(error)
        default: return false
        }
        state.withLock { $0.listener }?.proxyConnector(self, channel: generation, received: event)
        return true
    }
}

extension TransactionClient {
    /// What `RequestProxyClientCoordinator` sends relayed requests through.
    public var connector: any ProxyClientConnector { core.proxyConnector }
}

/// What the app sees of the proxy: each relayed request's end.
public enum RequestProxyEvent: Sendable, Equatable {
    /// The request went through a terminal and its answer came back.
    case relayed(requestBytes: Int, responseBytes: Int)
    case failed(RequestProxyError)
}

public struct RequestProxyClientConfiguration: Sendable, Equatable {
    /// How long to wait for the answer after sending (default 20 s: the terminal's own request
    /// to the server plus a few radio round trips). After it, the outcome is unknown.
    public var timeout: Duration
    /// With no terminal connected, connect to the nearest one advertising a session of one of
    /// the clients' kinds for the request alone (default true); false fails `noTerminalInReach`.
    public var connectsWhenNoTerminalIsConnected: Bool

    public init(timeout: Duration = .seconds(20), connectsWhenNoTerminalIsConnected: Bool = true) {
        self.timeout = timeout
        self.connectsWhenNoTerminalIsConnected = connectsWhenNoTerminalIsConnected
    }
}

/// The wallet's request proxy rules as a value: which requests are out, on which connector's
/// channel, and what each event means for them. The driver does the sending and the timers.
struct RequestProxyClientStateMachine: Sendable {
    enum Action: Sendable, Equatable {
        case armTimeout(UInt32, connector: Int)
        case complete(UInt32, Result<[UInt8], RequestProxyError>)
    }

    private struct Outstanding {
        let connector: Int
        let channel: Int
    }

    private var outstanding: [UInt32: Outstanding] = [:]
    /// Request ids are unique per wallet run, so an answer never pairs with another request.
    private var nextRequestID: UInt32 = 1

    var outstandingCount: Int { outstanding.count }

    mutating func newRequestID() -> UInt32 {
        defer { nextRequestID &+= 1 }
        return nextRequestID
    }

    /// Sent on `channel` of connector number `connector`.
    mutating func sent(_ id: UInt32, connector: Int, channel: Int) -> [Action] {
        outstanding[id] = Outstanding(connector: connector, channel: channel)
        return [.armTimeout(id, connector: connector)]
    }

    /// No connector had a channel: nothing left the wallet.
    func notSent(_ id: UInt32) -> [Action] { [.complete(id, .failure(.noTerminalInReach))] }

    mutating func received(_ event: ProxyClientEvent, connector: Int, channel: Int) -> [Action] {
        switch event {
        case .response(let envelope):
            guard take(envelope.requestID, connector: connector, channel: channel) else { return [] }
            return [.complete(envelope.requestID, .success(envelope.sealed))]
        case .refused(let error):
            guard take(error.requestID, connector: connector, channel: channel) else { return [] }
            let failure: RequestProxyError =
                switch error.code {
                case .gatewayUnreachable: .outcomeUnknown(error.message)
                case .rateLimited, .payloadTooLarge: .limitReached(error.message)
                default: .refused(code: error.code, reason: error.message)
                }
            return [.complete(error.requestID, .failure(failure))]
        case .channelEnded:
            let ended = outstanding.filter { $0.value.connector == connector && $0.value.channel == channel }
            for id in ended.keys { outstanding[id] = nil }
            return ended.keys.sorted().map {
                .complete($0, .failure(.outcomeUnknown("the connection to the terminal ended before the answer")))
            }
        }
    }

    mutating func timedOut(_ id: UInt32, after timeout: Duration) -> [Action] {
        guard outstanding.removeValue(forKey: id) != nil else { return [] }
        return [.complete(id, .failure(.outcomeUnknown("no answer within \(timeout)")))]
    }

    /// Removes the request if it is out on that channel: an id from elsewhere pairs with nothing.
    private mutating func take(_ id: UInt32, connector: Int, channel: Int) -> Bool {
        guard let entry = outstanding[id], entry.connector == connector, entry.channel == channel else { return false }
        outstanding[id] = nil
        return true
    }
}

/// The wallet's request proxy (the reference SDK's `RequestProxyClientCoordinator`): when the
/// network is bad (`shouldUseProxyDueToNetworkProblem`), the app's sealed backend requests go
/// through the terminal a payment or redemption client is connected to, as `ProxyRequest`s over
/// its secure channel, and `relay` returns the sealed answer.
///
/// It relays over a client's established channel when there is one; with none, it connects to
/// the nearest terminal advertising a session the clients hear, for that request alone (the
/// channel closes after the answer), or fails with `noTerminalInReach` when none can be reached
/// (or `connectsWhenNoTerminalIsConnected` is off). A request is sent once; after sending, no
/// answer within the timeout, a gateway failure or a lost link are `outcomeUnknown`, never
/// retried here.
public final class RequestProxyClientCoordinator: ProxyClientListener, Sendable {
    public let proxyClientConnectors: [any ProxyClientConnector]
    public let configuration: RequestProxyClientConfiguration
    private let logger: Logger

    private struct State {
        var machine = RequestProxyClientStateMachine()
        var isConfigured = false
        var waiters: [UInt32: (size: Int, completion: @Sendable (Result<[UInt8], RequestProxyError>) -> Void)] = [:]
        var timers: [UInt32: ScheduledAction] = [:]
        var shouldUseProxy: @Sendable () -> Bool = { false }
    }

    private let state = Mutex(State())
    private let usingProxy = ObservableState(false)
    private let broadcaster = EventBroadcaster<RequestProxyEvent>()

    public init(
        proxyClientConnectors: [any ProxyClientConnector],
        configuration: RequestProxyClientConfiguration = RequestProxyClientConfiguration(), logger: Logger = .silent
    ) {
        self.proxyClientConnectors = proxyClientConnectors
        self.configuration = configuration
        self.logger = logger
    }

    /// Listens to every connector's answers; `relay` works from now on.
    public func configureRequestProxyClient() {
        for connector in proxyClientConnectors { connector.setProxyListener(self) }
        state.withLock { $0.isConfigured = true }
    }

    /// Whether the network is bad enough to send requests through a terminal (the reference's
    /// property): false until the app sets it; `useNetworkReachability` in HorizonRadioCLISupport
    /// sets it to "the server is not answering fast".
    public var shouldUseProxyDueToNetworkProblem: @Sendable () -> Bool {
        get { state.withLock { $0.shouldUseProxy } }
        set { state.withLock { $0.shouldUseProxy = newValue } }
    }

    /// Whether the app's requests should go through a terminal now: configured, and
    /// `shouldUseProxyDueToNetworkProblem` says the network is bad.
    public var shouldUseProxy: Bool {
        let (configured, problem) = state.withLock { ($0.isConfigured, $0.shouldUseProxy) }
        return configured && problem()
    }

    /// Whether a relayed request is waiting for its answer now.
    public var isUsingProxy: Bool { usingProxy.value }
    /// The current value of `isUsingProxy`, then each change.
    public func usingProxyChanges() -> AsyncStream<Bool> { usingProxy.stream() }
    /// Each relayed request's end, for the app to show ("used the proxy").
    public func events() -> AsyncStream<RequestProxyEvent> { broadcaster.stream() }

    /// Sends `sealed` through the connected terminal and returns the sealed answer.
    public func relay(_ sealed: [UInt8]) async throws(RequestProxyError) -> [UInt8] {
        let result = await withCheckedContinuation { continuation in
            relay(sealed) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// `relay` with a completion, which runs once, on the connector's scheduler (or at once when
    /// nothing could be sent).
    public func relay(_ sealed: [UInt8], completion: @escaping @Sendable (Result<[UInt8], RequestProxyError>) -> Void) {
        let id = state.withLock { $0.isConfigured ? $0.machine.newRequestID() : nil }
        guard let id else {
            finish(.failure(.notConfigured), size: sealed.count, completion)
            return
        }
        let request: ProxyEnvelope
        do {
            request = try ProxyEnvelope(requestID: id, sealed: sealed)
        } catch {
            finish(
                .failure(.tooLarge(size: sealed.count, maximum: MessageLimits.sealedPayload)), size: sealed.count,
                completion)
            return
        }
        state.withLock { $0.waiters[id] = (sealed.count, completion) }
        usingProxy.set(true)
        send(request, from: 0)
    }

    /// Tries connector `index` and, if it has no channel, the next ones in turn; with none,
    /// connects for this request (`connect`).
    private func send(_ request: ProxyEnvelope, from index: Int) {
        guard index < proxyClientConnectors.count else {
            if configuration.connectsWhenNoTerminalIsConnected {
                connect(request, from: 0)
            } else {
                apply(state.withLock { $0.machine.notSent(request.requestID) })
            }
            return
        }
        proxyClientConnectors[index].sendProxyRequest(request) { [self] channel in
            guard let channel else {
                send(request, from: index + 1)
                return
            }
            logger.debug(
                "sent a request through the terminal",
                metadata: ["request": "\(request.requestID)", "bytes": "\(request.sealed.count)"])
            apply(state.withLock { $0.machine.sent(request.requestID, connector: index, channel: channel) })
        }
    }

    /// Asks connector `index`, then the next ones, to connect to the nearest terminal for this
    /// request alone.
    private func connect(_ request: ProxyEnvelope, from index: Int) {
        guard index < proxyClientConnectors.count else {
            apply(state.withLock { $0.machine.notSent(request.requestID) })
            return
        }
        proxyClientConnectors[index].connectAndSendProxyRequest(request) { [self] channel in
            guard let channel else {
                connect(request, from: index + 1)
                return
            }
            logger.debug(
                "sent a request through the terminal",
                metadata: ["request": "\(request.requestID)", "bytes": "\(request.sealed.count)"])
            apply(state.withLock { $0.machine.sent(request.requestID, connector: index, channel: channel) })
        }
    }

    public func proxyConnector(_ connector: any ProxyClientConnector, channel: Int, received event: ProxyClientEvent) {
        guard let index = proxyClientConnectors.firstIndex(where: { $0 === connector }) else { return }
        apply(state.withLock { $0.machine.received(event, connector: index, channel: channel) })
    }

    private func apply(_ actions: [RequestProxyClientStateMachine.Action]) {
        for action in actions {
            switch action {
            case .armTimeout(let id, let index):
                let timeout = configuration.timeout
                let timer = proxyClientConnectors[index].schedule(after: timeout) { [weak self] in
                    guard let self else { return }
                    self.apply(self.state.withLock { $0.machine.timedOut(id, after: timeout) })
                }
                state.withLock { $0.timers[id] = timer }
            case .complete(let id, let result):
                let (waiter, timer, idle) = state.withLock { state in
                    (
                        state.waiters.removeValue(forKey: id), state.timers.removeValue(forKey: id),
                        state.machine.outstandingCount == 0 && state.waiters.isEmpty
                    )
                }
                timer?.cancel()
                if idle { usingProxy.set(false) }
                guard let waiter else { continue }
                finish(result, size: waiter.size, waiter.completion)
            }
        }
    }

    private func finish(
        _ result: Result<[UInt8], RequestProxyError>, size: Int,
        _ completion: @Sendable (Result<[UInt8], RequestProxyError>) -> Void
    ) {
        switch result {
        case .success(let answer): broadcaster.send(.relayed(requestBytes: size, responseBytes: answer.count))
        case .failure(let error):
            logger.notice("a request through the terminal failed", metadata: ["error": "\(error)"])
            broadcaster.send(.failed(error))
        }
        completion(result)
    }
}
