import AsyncHTTPClient
import Foundation
import HorizonCore
import HorizonLedger
import Logging
import NIOCore
import ServiceLifecycle

/// Delivers webhooks: every event is first committed with its deliveries (in the transaction of
/// the change it reports), then POSTed here, apart from the request that caused it. A delivery
/// is claimed by moving its due time past the attempt's end, so two processes on one database
/// never send it at the same moment, and one that dies mid-attempt leaves it due again for any
/// process once the claim runs out. Anything but a 2xx is retried with back-off (30 s doubling,
/// at most 6 h apart) for three days; each attempt's status, the start of the answer's body and
/// its latency are kept.
public final class WebhookDeliverer: Sendable {
    public let ledger: Ledger
    /// How long one attempt may take, connection and answer included.
    public let timeout: Duration
    /// Where an attempt may go, checked again before each one (a name's addresses can change).
    public let addressPolicy: WebhookAddressPolicy
    let now: @Sendable () -> UnixTime
    let metrics: ServerMetrics?
    private let wakeUps: AsyncStream<Void>
    private let waker: AsyncStream<Void>.Continuation

    /// The client for every endpoint: redirects are not followed (an endpoint answers itself,
    /// as Stripe's do), and it lives as long as the program.
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))

    public init(
        ledger: Ledger, timeout: Duration = .seconds(10),
        addressPolicy: WebhookAddressPolicy = WebhookAddressPolicy(allowsPrivateAddresses: false),
        metrics: ServerMetrics? = nil, now: @escaping @Sendable () -> UnixTime = { Ledger.now() }
    ) {
        self.ledger = ledger
        self.timeout = timeout
        self.addressPolicy = addressPolicy
        self.metrics = metrics
        self.now = now
        (wakeUps, waker) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// How long a claim holds a delivery: the attempt's time and a margin, so no other process
    /// starts it while this one may still be sending.
    public var lease: Int64 { timeout.components.seconds + 5 }

    /// Asks the running loop to look for due deliveries now.
    public func wake() { waker.yield() }

    /// What one pass did: the attempts made, by delivery id.
    public struct Report: Sendable, Equatable {
        public var attempts: [Int64: WebhookAttempt] = [:]
        public var delivered: [Int64] { attempts.filter { $0.value.succeeded }.map(\.key).sorted() }
    }

    /// Sends every delivery due at `time` (claimed first), all at once so one slow endpoint does
    /// not hold up the others.
    @discardableResult
    public func deliverDue(at time: UnixTime? = nil, logger: Logger) async -> Report {
        let time = time ?? now()
        let due: [ClaimedWebhookDelivery]
        do { due = try await ledger.claimDueWebhookDeliveries(at: time, lease: lease) } catch {
            logger.warning("reading the webhook deliveries failed; trying again later", metadata: ["error": "\(error)"])
            return Report()
        }
        var report = Report()
        await withTaskGroup(of: (Int64, WebhookAttempt).self) { group in
            for claimed in due {
                group.addTask { (claimed.delivery.id, await self.attempt(claimed, at: time)) }
            }
            for await (id, attempt) in group { report.attempts[id] = attempt }
        }
        for claimed in due {
            guard let attempt = report.attempts[claimed.delivery.id] else { continue }
            let delivery = claimed.delivery
            let retryAt = attempt.succeeded ? nil : Self.retryTime(attempts: delivery.attempts + 1, after: time)
            metrics?.record(event: attempt.succeeded ? "webhook_delivered" : "webhook_delivery_failed")
            let metadata: Logger.Metadata = [
                "delivery": "\(delivery.id)", "event": "\(delivery.eventID)", "endpoint": "\(delivery.endpointID)",
                "attempt": "\(delivery.attempts + 1)", "status": "\(attempt.status.map(String.init) ?? "none")",
                "latencyMs": "\(attempt.latencyMilliseconds)",
            ]
            if attempt.succeeded {
                logger.info("webhook delivered", metadata: metadata)
            } else {
                logger.notice(
                    "a webhook was not delivered yet",
                    metadata: metadata.merging(
                        ["error": "\(attempt.error ?? "")", "retryAt": "\(retryAt.map(String.init) ?? "never")"]
                    ) { $1 })
            }
            do { try await ledger.recordWebhookAttempt(delivery.id, attempt, retryAt: retryAt) } catch {
                // Sent but not recorded: the claim runs out and it is sent again (at least once).
                logger.warning("recording a webhook attempt failed", metadata: ["error": "\(error)"])
            }
        }
        return report
    }

    /// One POST of the event's body, signed at `time`.
    func attempt(_ claimed: ClaimedWebhookDelivery, at time: UnixTime) async -> WebhookAttempt {
        // Not sent at all where its address is refused now; retried like any failure, in case
        // the name points back to a public address later.
        if let refusal = await addressRefusal(claimed.url) {
            return WebhookAttempt(
                attemptedAt: time, status: nil, responseBody: "", latencyMilliseconds: 0,
                error: "not sent: \(refusal)")
        }
        var request = HTTPClientRequest(url: claimed.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
        request.headers.add(name: "User-Agent", value: "horizon-server webhooks")
        request.headers.add(name: "Horizon-Event-Id", value: claimed.delivery.eventID)
        request.headers.add(
            name: WebhookSignature.headerName,
            value: WebhookSignature.header(body: claimed.body, secrets: claimed.secrets, at: time))
        request.body = .bytes(ByteBuffer(string: claimed.body))
        let clock = ContinuousClock()
        let start = clock.now
        func milliseconds() -> Int64 {
            let elapsed = clock.now - start
            return elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        }
        let deadline =
            NIODeadline.now()
            + .nanoseconds(
                timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
        do {
            let response = try await Self.client.execute(request, deadline: deadline)
            var body: [UInt8] = []
            // Only the start is kept; the rest is not read.
            for try await chunk in response.body {
                body += chunk.readableBytesView.prefix(Ledger.webhookResponseBodyLimit - body.count)
                if body.count >= Ledger.webhookResponseBodyLimit { break }
            }
            return WebhookAttempt(
                attemptedAt: time, status: Int(response.status.code), responseBody: Self.printable(body),
                latencyMilliseconds: milliseconds(), error: nil)
        } catch {
            return WebhookAttempt(
                attemptedAt: time, status: nil, responseBody: "", latencyMilliseconds: milliseconds(),
                error: Self.reason(error))
        }
    }

    /// Why the endpoint's address may not be sent to now, or nil.
    func addressRefusal(_ text: String) async -> String? {
        guard let url = URL(string: text), let host = url.host, !host.isEmpty,
            ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.user == nil, url.password == nil
        else { return "the address is not an http:// or https:// address without credentials" }
        if url.scheme?.lowercased() == "http", !addressPolicy.allowsPrivateAddresses {
            return "http:// is sent only where the server allows receivers on private addresses"
        }
        return await addressPolicy.refusal(ofHost: host, refuseUnresolved: false)
    }

    /// The answer's start as text a page can show: invalid UTF-8 replaced, control characters
    /// other than line breaks and tabs dropped.
    static func printable(_ bytes: [UInt8]) -> String {
        String(
            String(decoding: bytes, as: UTF8.self).unicodeScalars.filter {
                $0 == "\n" || $0 == "\t" || !($0.properties.generalCategory == .control)
            })
    }

    /// Our words for a failed attempt: never the request, which carries the signature.
    static func reason(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "no answer within the attempt's time limit"
            case .remoteConnectionClosed: return "the endpoint closed the connection without an answer"
            default: return "the request failed: \(error)"
            }
        }
        return "the endpoint could not be reached: \(type(of: error))"
    }

    /// When the next attempt is due after `attempts` failed ones: 30 s, doubling, at most 6 h
    /// apart (the ledger gives up three days after the event).
    public static func retryTime(attempts: Int64, after time: UnixTime) -> UnixTime {
        time + min(30 << min(max(attempts, 1) - 1, 20), 21_600)
    }

    /// The loop a server runs: a pass when woken, and every `interval`.
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

/// The webhook loop as a service beside the HTTP server; it stops on graceful shutdown.
struct WebhookDeliveryService: Service {
    let deliverer: WebhookDeliverer
    let logger: Logger
    var interval: Duration = .seconds(1)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await deliverer.run(logger: logger, interval: interval)
        }
    }
}
