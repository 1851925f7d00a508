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
    static var requests: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "horizon", subsystem: "http", metricName: "requests", unitName: "total",
            helpText: "HTTP requests answered, by method, route and status.")
    }
    static var latency: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "horizon", subsystem: "http", metricName: "request_duration", unitName: "seconds",
            helpText: "Time from request to response head, by method and route.")
    }
    static var errors: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "horizon", subsystem: "api", metricName: "errors", unitName: "total",
            helpText: "Error envelopes sent, by code.")
    }
    static var events: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "horizon", metricName: "events", unitName: "total",
            helpText: "Domain events: terminal activations and renewals, refused sign-ins, settlements.")
    }

    public init() {}

    /// One answered request: its count by route and status, and its latency by route.
    func recordRequest(method: String, route: String, status: Int, duration: Duration) {
        registry.makeCounter(
            descriptor: Self.requests, labels: [("method", method), ("route", route), ("status", String(status))]
        ).increment()
        registry.makeDurationHistogram(
            descriptor: Self.latency, labels: [("method", method), ("route", route)], buckets: Self.latencyBuckets
        ).record(duration)
    }

    /// One error envelope sent, by code.
    func recordError(code: String) {
        registry.makeCounter(descriptor: Self.errors, labels: [("code", code)]).increment()
    }

    /// Domain events: terminal activations, renewals, refusals, settlements.
    func record(event: String) {
        registry.makeCounter(descriptor: Self.events, labels: [("event", event)]).increment()
    }

    /// The Prometheus text exposition of everything recorded so far, and the process's own
    /// figures (memory, CPU, file descriptors, threads, start time) as they are now.
    public func exposition() -> [UInt8] { registry.emitToBuffer() + Array(ProcessMetrics.exposition().utf8) }
}
