import AsyncHTTPClient
import Crypto
import Foundation
import HorizonAPI
import NIOCore
import Synchronization

/// A payment intent the server pushed to this terminal.
public struct PushedPaymentIntent: Sendable, Equatable {
    /// The intent's id: the payment id its sale settles under.
    public let id: String
    /// Minor units of `currency`.
    public let amount: Int64
    public let currency: String
    /// The merchant's order reference.
    public let reference: String
    public let expiresAt: Int64

    public init(id: String, amount: Int64, currency: String, reference: String, expiresAt: Int64) {
        self.id = id
        self.amount = amount
        self.currency = currency
        self.reference = reference
        self.expiresAt = expiresAt
    }
}

/// The rules of a terminal's one connection to its server for payment intents, without I/O:
/// when to connect again (exponential back-off with jitter, reset by a connection that worked)
/// and which pushed intents to collect (each intent once, however often it is pushed: again after
/// a reconnection, or twice by a server that repeats itself).
public struct IntentConnectionMachine: Sendable {
    public enum State: Sendable, Equatable {
        case disconnected
        case connecting(attempt: Int)
        case connected
        /// Waiting `delay` before connection attempt `attempt`.
        case backingOff(attempt: Int, delay: Duration)
    }

    public enum Action: Sendable, Equatable {
        /// Start the sale for this intent.
        case collect(PushedPaymentIntent)
        /// Stop the sale for this intent if it still runs (canceled, expired or processed).
        case stop(intentID: String)
    }

    /// The first delay after a failure; each failure in a row doubles it, up to `maximumDelay`.
    public let initialDelay: Duration
    public let maximumDelay: Duration
    /// How many intent ids are remembered as handled (the oldest are forgotten first).
    public let rememberedIntents: Int
    public private(set) var state: State = .disconnected
    /// Connection attempts that failed or dropped since the last one that worked.
    public private(set) var failures = 0
    private var handled: [String] = []
    private var handledSet: Set<String> = []

    public init(
        initialDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(30), rememberedIntents: Int = 1024
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.rememberedIntents = max(1, rememberedIntents)
    }

    /// An attempt starts now.
    public mutating func connecting() { state = .connecting(attempt: failures + 1) }

    /// The server answered with the stream: the back-off starts over.
    public mutating func connected() {
        failures = 0
        state = .connected
    }

    /// The attempt failed or the connection dropped: how long to wait before the next attempt.
    /// `jitter` (0 to 1, random in use) spreads reconnecting terminals: the wait is half the
    /// back-off plus up to the other half, so a server coming back is not met by all at once.
    public mutating func dropped(jitter: Double) -> Duration {
        failures += 1
        let ceiling = backoffCeiling(failures: failures)
        let unit = min(max(jitter, 0), 1)
        let delay = ceiling / 2 + (ceiling / 2) * unit
        state = .backingOff(attempt: failures + 1, delay: delay)
        return delay
    }

    /// The longest wait after `failures` failures in a row.
    public func backoffCeiling(failures: Int) -> Duration {
        var ceiling = initialDelay
        for _ in 1..<max(failures, 1) {
            ceiling = ceiling * 2
            if ceiling >= maximumDelay { return maximumDelay }
        }
        return min(ceiling, maximumDelay)
    }

    /// What to do about an event from the server.
    public mutating func received(_ event: TerminalIntentEvents.Event) -> [Action] {
        switch event {
        case .intent(let intent):
            guard !handledSet.contains(intent.id) else { return [] }
            handledSet.insert(intent.id)
            handled.append(intent.id)
            if handled.count > rememberedIntents { handledSet.remove(handled.removeFirst()) }
            return [
                .collect(
                    PushedPaymentIntent(
                        id: intent.id, amount: intent.amount, currency: intent.currency, reference: intent.reference,
                        expiresAt: intent.expiresAt))
            ]
        case .ended(let id): return [.stop(intentID: id)]
        case .ready, .keepAlive: return []
        }
    }

    /// The connection was given up for good (the service stops).
    public mutating func stopped() { state = .disconnected }
}

/// A terminal's one connection to its server for payment intents: the signed event stream of
/// `TerminalIntentEvents.path`, kept open and reconnected with back-off (`IntentConnectionMachine`).
public final class TerminalIntentConnection: Sendable {
    public let serverURL: URL
    let signingKey: P256.Signing.PrivateKey
    let http: HTTPClient
    let clock: @Sendable () -> Int64
    let jitter: @Sendable () -> Double
    /// A connection silent for this long is taken as dead (the server sends keep-alives more often).
    let silenceLimit: Duration
    private let machine: Mutex<IntentConnectionMachine>
    /// Told of every change of the connection's state (connected, backing off...).
    let onState: @Sendable (IntentConnectionMachine.State) -> Void

    public init(
        serverURL: URL, signingKey: P256.Signing.PrivateKey, machine: IntentConnectionMachine = .init(),
        http: HTTPClient? = nil, silenceLimit: Duration = .seconds(30),
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        jitter: @escaping @Sendable () -> Double = { Double.random(in: 0...1) },
        onState: @escaping @Sendable (IntentConnectionMachine.State) -> Void = { _ in }
    ) {
        self.serverURL = serverURL
        self.signingKey = signingKey
        self.http = http ?? HorizonServerClient.http
        self.clock = clock
        self.jitter = jitter
        self.silenceLimit = silenceLimit
        self.machine = Mutex(machine)
        self.onState = onState
    }

    public var state: IntentConnectionMachine.State { machine.withLock { $0.state } }

    /// Keeps the connection until the task is cancelled, handing each action to `handle` in order.
    /// `handle` must return promptly (start a sale in a task of its own): events are read, and a
    /// cancellation seen, only between its calls.
    public func run(_ handle: @escaping @Sendable (IntentConnectionMachine.Action) async -> Void) async {
        while !Task.isCancelled {
            onState(machine.withLock { $0.connecting(); return $0.state })
            do {
                try await stream(handle)
            } catch {
                if Task.isCancelled { break }
            }
            let (delay, state) = machine.withLock { machine in
                let delay = machine.dropped(jitter: jitter())
                return (delay, machine.state)
            }
            onState(state)
            do { try await Task.sleep(for: delay) } catch { break }
        }
        onState(machine.withLock { $0.stopped(); return $0.state })
    }

    /// Why a connection ended.
    public enum StreamError: Error, Equatable {
        case refused(status: Int, body: String)
        case silent
        case ended
    }

    /// One connection: open, read events until it ends or goes silent.
    func stream(_ handle: @escaping @Sendable (IntentConnectionMachine.Action) async -> Void) async throws {
        let base = serverURL.path.hasSuffix("/") ? String(serverURL.path.dropLast()) : serverURL.path
        let path = base + TerminalIntentEvents.path
        let signature = try RequestSignature.sign(method: "GET", path: path, body: [], with: signingKey, time: clock())
        var root = serverURL.absoluteString
        if root.hasSuffix("/") { root.removeLast() }
        var request = HTTPClientRequest(url: root + TerminalIntentEvents.path)
        request.method = .GET
        request.headers.add(name: "Authorization", value: signature.headerValue)
        request.headers.add(name: "Accept", value: "text/event-stream")
        let response = try await http.execute(request, timeout: .seconds(10))
        guard response.status == .ok else {
            let body = try? await response.body.collect(upTo: 64 * 1024)
            throw StreamError.refused(
                status: Int(response.status.code), body: body.map { String(buffer: $0) } ?? "")
        }
        let lastHeard = LastHeard()
        let body = response.body
        let (onState, silenceLimit) = (self.onState, self.silenceLimit)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var parser = TerminalIntentEvents.Parser()
                for try await chunk in body {
                    lastHeard.instant.withLock { $0 = .now }
                    for event in try parser.feed(chunk.readableBytesView) {
                        if case .ready = event { onState(self.machine.withLock { $0.connected(); return $0.state }) }
                        for action in self.machine.withLock({ $0.received(event) }) { await handle(action) }
                    }
                }
                throw StreamError.ended
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(1))
                    if ContinuousClock.now - lastHeard.instant.withLock({ $0 }) > silenceLimit { throw StreamError.silent }
                }
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }
}

/// When the stream last said anything.
private final class LastHeard: Sendable {
    let instant = Mutex(ContinuousClock.now)
}
