import Foundation
import Prometheus

/// The server's Prometheus metrics, in a registry of its own (not the process-wide
/// `MetricsSystem`), so that several servers in one test process keep separate counts.
public final class ServerMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    static let latencyBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
    ]

    public init() {}

    /// One answered request: its count by route and status, and its latency by route.
    func recordRequest(method: String, route: String, status: Int, duration: Duration) {
        registry.makeCounter(
            name: "horizon_http_requests_total",
            labels: [("method", method), ("route", route), ("status", String(status))]
        ).increment()
        registry.makeDurationHistogram(
            name: "horizon_http_request_duration_seconds", labels: [("method", method), ("route", route)],
            buckets: Self.latencyBuckets
        ).record(duration)
    }

    /// One error envelope sent, by code.
    func recordError(code: String) {
        registry.makeCounter(name: "horizon_api_errors_total", labels: [("code", code)]).increment()
    }

    /// Domain events: terminal activations, renewals, refusals.
    func record(event: String) {
        registry.makeCounter(name: "horizon_events_total", labels: [("event", event)]).increment()
    }

    /// The Prometheus text exposition of everything recorded so far.
    public func exposition() -> [UInt8] { registry.emitToBuffer() }
}
