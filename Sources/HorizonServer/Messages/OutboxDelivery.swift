import HorizonCore
import HorizonLedger
import Logging
import ServiceLifecycle

/// Delivers the outbox: every message is first committed to the outbox (after the registration
/// it carries a code for, never inside its transaction), then handed to its channel's transport
/// here, apart from the request. A failed attempt is logged at notice, kept on the message
/// (`horizon-server outbox` shows it) and tried again with back-off until the code expires; a
/// server that stops mid-delivery leaves the message due for the next attempt, by any process.
public final class OutboxDeliverer: Sendable {
    public let ledger: Ledger
    public let transports: MessageTransports
    let now: @Sendable () -> UnixTime
    let metrics: ServerMetrics?
    private let wakeUps: AsyncStream<Void>
    private let waker: AsyncStream<Void>.Continuation
    /// Attempts before a message without an expiry (a receipt) is given up.
    public static let maximumAttempts: Int64 = 8

    public init(
        ledger: Ledger, transports: MessageTransports, metrics: ServerMetrics? = nil,
        now: @escaping @Sendable () -> UnixTime = { Ledger.now() }
    ) {
        self.ledger = ledger
        self.transports = transports
        self.metrics = metrics
        self.now = now
        (wakeUps, waker) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Whether a message on `channel` is delivered (else it stays in the outbox, the sandbox).
    public func delivers(_ channel: OutboxMessage.Channel) -> Bool { transports.transport(for: channel) != nil }

    /// Asks the running delivery loop to look at the outbox now (a message was just committed).
    public func wake() { waker.yield() }

    /// What one pass did.
    public struct Report: Sendable, Equatable {
        public var delivered: [Int64] = []
        public var failed: [Int64: MessageDeliveryError] = [:]
    }

    /// Delivers every message due at `time` (claimed first, so two processes never send one
    /// message at the same moment).
    @discardableResult
    public func deliverDue(at time: UnixTime? = nil, logger: Logger) async -> Report {
        var report = Report()
        guard !transports.isEmpty else { return report }
        let time = time ?? now()
        let due: [OutboxMessage]
        do { due = try await ledger.claimDueOutboxMessages(at: time) } catch {
            logger.warning(
                "reading the outbox for delivery failed; trying again later", metadata: ["error": "\(error)"])
            return report
        }
        for message in due {
            guard let transport = transports.transport(for: message.channel) else {
                // Configured off since it was queued: the outbox keeps it, as the sandbox does.
                try? await ledger.recordOutboxDeliveryFailed(
                    message.id, reason: "no \(message.channel.rawValue) delivery is configured", retryAt: nil)
                continue
            }
            do {
                try await transport.deliver(
                    to: message.recipient, subject: message.subject, body: message.body, at: time)
            } catch {
                report.failed[message.id] = error
                let retryAt = Self.retryTime(for: message, after: time, error: error)
                metrics?.record(event: "message_delivery_failed")
                logger.notice(
                    retryAt == nil ? "a message was not delivered and is given up" : "a message was not delivered yet",
                    metadata: [
                        "outbox": "\(message.id)", "channel": "\(message.channel.rawValue)",
                        "attempt": "\(message.delivery.attempts + 1)", "error": "\(error)",
                        "retryAt": "\(retryAt.map(String.init) ?? "never")",
                    ])
                do {
                    try await ledger.recordOutboxDeliveryFailed(message.id, reason: "\(error)", retryAt: retryAt)
                } catch {
                    logger.warning("recording a failed delivery failed", metadata: ["error": "\(error)"])
                }
                continue
            }
            report.delivered.append(message.id)
            metrics?.record(event: "message_delivered")
            logger.info(
                "message delivered", metadata: ["outbox": "\(message.id)", "channel": "\(message.channel.rawValue)"])
            do { try await ledger.recordOutboxDelivered(message.id, at: now()) } catch {
                // Sent but not recorded: the lease runs out and it is sent again (at least once).
                logger.warning("recording a delivery failed", metadata: ["error": "\(error)"])
            }
        }
        return report
    }

    /// 30 s, doubling to 15 min; never past the code's expiry (the message is useless then),
    /// never after a refusal, and not beyond `maximumAttempts`.
    static func retryTime(for message: OutboxMessage, after time: UnixTime, error: MessageDeliveryError) -> UnixTime? {
        retryTime(attempts: message.delivery.attempts, expiresAt: message.expiresAt, after: time, error: error)
    }

    /// `attempts`: those made before the one that just failed.
    public static func retryTime(
        attempts: Int64, expiresAt: UnixTime?, after time: UnixTime, error: MessageDeliveryError
    )
        -> UnixTime?
    {
        let attempts = attempts + 1
        guard !error.isPermanent, attempts < maximumAttempts else { return nil }
        let retryAt = time + min(30 << min(attempts - 1, 10), 900)
        if let expiresAt, retryAt >= expiresAt { return nil }
        return retryAt
    }

    /// The loop a server runs: a pass when a message is queued, and every `interval` for the
    /// retries (and for messages another process queued and could not send).
    func run(logger: Logger, interval: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [waker] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    waker.yield()
                }
            }
            for await _ in wakeUps {
                if Task.isCancelled { break }
                await deliverDue(logger: logger)
            }
            group.cancelAll()
        }
    }
}

/// The delivery loop as a service beside the HTTP server; it stops on graceful shutdown.
struct OutboxDeliveryService: Service {
    let deliverer: OutboxDeliverer
    let logger: Logger
    var interval: Duration = .seconds(15)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await deliverer.run(logger: logger, interval: interval)
        }
    }
}
