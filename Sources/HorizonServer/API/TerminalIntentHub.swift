import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import Logging
import ServiceLifecycle
import Synchronization

/// What the server pushes to a terminal over its event stream.
public enum TerminalIntentEvent: Sendable, Equatable {
    /// An intent waits for this terminal: collect it.
    case collect(TerminalIntent)
    /// An intent pushed before was canceled, expired or processed: stop its sale if it still runs.
    case ended(PaymentID)
    /// Nothing happened for a while; keeps the connection (and its proxies) from idling out.
    case keepAlive
}

/// Pushes payment intents to the terminals connected to this server process.
///
/// Each connected terminal has one event stream. The table of intents is the truth: one loop
/// per process reads, for every terminal connected here at once, the intents that wait for them
/// and where the intents it pushed stand, and pushes what is new. It reads at once when an
/// intent is created or canceled in this process, and every `interval` otherwise, so an intent
/// created on another server process over the same database reaches the terminal within
/// `interval` (a short poll rather than PostgreSQL's LISTEN/NOTIFY: it works the same on the
/// embedded SQLite ledger, needs no dedicated listening connection beside the ledger's pool, and
/// loses nothing when a connection drops, since a notification missed is still a row read on the
/// next tick; it costs one indexed query per process per interval, whatever the number of
/// terminals, and only while a terminal is connected).
public final class TerminalIntentHub: Sendable {
    struct Connection {
        let terminal: TerminalID
        let continuation: AsyncStream<TerminalIntentEvent>.Continuation
        /// Intents pushed on this connection and not yet ended.
        var pushed: Set<PaymentID> = []
        var lastEvent: ContinuousClock.Instant
    }

    struct State {
        var connections: [String: Connection] = [:]
        var loop: Task<Void, Never>?
        var wake: AsyncStream<Void>.Continuation?
        var closed = false
    }

    let ledger: Ledger
    let now: @Sendable () -> UnixTime
    /// How often the table is read while terminals are connected.
    let interval: Duration
    /// How long a connection may stay silent before a keep-alive is sent.
    let keepAliveInterval: Duration
    let logger: Logger
    /// How long after its connection closed a terminal that did not come back is reported offline.
    let offlineAfter: Duration
    private let state = Mutex(State())

    public init(
        ledger: Ledger, now: @escaping @Sendable () -> UnixTime, interval: Duration = .milliseconds(100),
        keepAliveInterval: Duration = .seconds(10),
        offlineAfter: Duration = .seconds(Ledger.terminalConnectionFreshness + 1),
        logger: Logger = Logger(label: "horizon.server.intents")
    ) {
        self.offlineAfter = offlineAfter
        self.ledger = ledger
        self.now = now
        self.interval = interval
        self.keepAliveInterval = keepAliveInterval
        self.logger = logger
    }

    /// The terminals connected to this process now.
    public var connectedTerminals: [TerminalID] {
        state.withLock { Array(Set($0.connections.values.map(\.terminal))) }
    }

    /// Opens `terminal`'s event stream (recorded in the ledger, so every process knows it is
    /// connected). The stream ends when the process shuts down; the connection is forgotten when
    /// its reader goes away.
    public func open(terminal: TerminalID) async throws -> AsyncStream<TerminalIntentEvent> {
        let id = UUID().uuidString
        try await ledger.terminalConnectionOpened(terminal, connection: id, at: now())
        let (stream, continuation) = AsyncStream.makeStream(
            of: TerminalIntentEvent.self, bufferingPolicy: .bufferingNewest(256))
        continuation.onTermination = { [weak self] _ in self?.close(id, terminal: terminal) }
        let accepted = state.withLock { state in
            guard !state.closed else { return false }
            state.connections[id] = Connection(terminal: terminal, continuation: continuation, lastEvent: .now)
            if state.loop == nil {
                let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
                state.wake = wake
                state.loop = Task { [weak self] in await self?.run(wakes) }
            }
            return true
        }
        guard accepted else {
            continuation.finish()
            return stream
        }
        wakeUp()
        return stream
    }

    /// Reads the table now (an intent was created or canceled in this process).
    public func wakeUp() { _ = state.withLock { $0.wake?.yield() } }

    /// Ends every stream (the process shuts down: its terminals reconnect to another).
    public func closeAll() {
        let (connections, loop) = state.withLock { state in
            state.closed = true
            defer {
                state.connections = [:]
                state.loop = nil
                state.wake?.finish()
                state.wake = nil
            }
            return (Array(state.connections.values), state.loop)
        }
        loop?.cancel()
        for connection in connections { connection.continuation.finish() }
    }

    /// Forgets a connection whose reader went away. Its record in the ledger stays until it is
    /// stale (`Ledger.terminalConnectionFreshness`): a terminal reconnecting at once (its stream
    /// ended after its `wait`, or a process shut down) is not reported offline in between.
    private func close(_ id: String, terminal: TerminalID) {
        let removed = state.withLock { state in state.connections.removeValue(forKey: id) != nil }
        guard removed else { return }
        // A terminal that does not come back before its record is stale went offline:
        // `terminal.offline` for the merchant's webhooks (once; not when it reconnected anywhere).
        let (ledger, now, logger, lapse) = (ledger, now, logger, offlineAfter)
        Task {
            try? await Task.sleep(for: lapse)
            do {
                if try await ledger.terminalConnectionLapsed(terminal, connection: id, at: now()) {
                    logger.info("terminal offline", metadata: ["terminal": "\(terminal)"])
                }
            } catch {
                logger.warning("a terminal's lapsed connection could not be recorded: \(error)")
            }
        }
    }

    private func run(_ wakes: AsyncStream<Void>) async {
        // One waiter for both: a wake-up from this process, or the interval.
        let ticks = AsyncStream<Void> { continuation in
            let task = Task {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await _ in wakes { continuation.yield() }
                        continuation.finish()
                    }
                    group.addTask { [interval] in
                        while !Task.isCancelled {
                            try? await Task.sleep(for: interval)
                            continuation.yield()
                        }
                    }
                    await group.next()
                    group.cancelAll()
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        var lastRefresh = ContinuousClock.now
        for await _ in ticks {
            if Task.isCancelled { return }
            do {
                try await tick()
                if ContinuousClock.now - lastRefresh >= .seconds(Ledger.terminalConnectionFreshness / 3) {
                    lastRefresh = .now
                    let connections = state.withLock { $0.connections.map { ($0.value.terminal, $0.key) } }
                    try await ledger.terminalConnectionsSeen(
                        connections.map { (terminal: $0.0, connection: $0.1) }, at: now())
                }
            } catch {
                logger.warning("payment intents could not be read for the connected terminals: \(error)")
            }
        }
    }

    /// Pushes what is new since the last read to every connection.
    func tick() async throws {
        let (terminals, following) = state.withLock { state in
            (
                Array(Set(state.connections.values.map(\.terminal))),
                Array(state.connections.values.reduce(into: Set<PaymentID>()) { $0.formUnion($1.pushed) })
            )
        }
        guard !terminals.isEmpty else { return }
        let intents = try await ledger.terminalIntents(for: terminals, following: following, at: now())
        let instant = ContinuousClock.now
        state.withLock { state in
            for key in Array(state.connections.keys) {
                guard var connection = state.connections[key] else { continue }
                for intent in intents where intent.terminalID == connection.terminal {
                    switch intent.stage {
                    case .waiting where !connection.pushed.contains(intent.paymentID):
                        connection.pushed.insert(intent.paymentID)
                        connection.continuation.yield(.collect(intent))
                        connection.lastEvent = instant
                    case .ended where connection.pushed.contains(intent.paymentID):
                        connection.pushed.remove(intent.paymentID)
                        connection.continuation.yield(.ended(intent.paymentID))
                        connection.lastEvent = instant
                    default: break
                    }
                }
                if instant - connection.lastEvent >= keepAliveInterval {
                    connection.continuation.yield(.keepAlive)
                    connection.lastEvent = instant
                }
                state.connections[key] = connection
            }
        }
    }
}

/// Ends the terminals' event streams when the server shuts down gracefully, so the HTTP server's
/// drain is not held open by them (each terminal reconnects, to another process if need be).
struct TerminalIntentHubService: Service {
    let hub: TerminalIntentHub

    func run() async throws {
        try? await gracefulShutdown()
        hub.closeAll()
    }
}
