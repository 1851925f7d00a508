import Foundation
import Logging
import Tracing

/// Turns tracing on for a program when a collector is configured, with the standard
/// OpenTelemetry variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, used as given)
/// or `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL; `/v1/traces` is appended), and
/// `OTEL_SERVICE_NAME` (else the program's name). Without an endpoint nothing is bootstrapped:
/// the library's no-op tracer costs a task-local read per span and nothing is sent.
public enum TracingSetup {
    /// The exporter's endpoint the environment configures, if any.
    public static func endpoint(environment: [String: String]) -> URL? {
        if let traces = environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], !traces.isEmpty {
            return URL(string: traces)
        }
        guard let base = environment["OTEL_EXPORTER_OTLP_ENDPOINT"], !base.isEmpty else { return nil }
        return URL(string: base.hasSuffix("/") ? base + "v1/traces" : base + "/v1/traces")
    }

    /// A tracer for `defaultServiceName` if the environment names a collector (nil otherwise).
    public static func tracer(
        defaultServiceName: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger
    ) -> OTLPTracer? {
        guard let endpoint = endpoint(environment: environment) else { return nil }
        guard endpoint.scheme == "http" || endpoint.scheme == "https", endpoint.host != nil else {
            logger.warning("OTLP endpoint \(endpoint.absoluteString) is not an http(s) URL; traces are not exported")
            return nil
        }
        let name = environment["OTEL_SERVICE_NAME"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultServiceName
        return OTLPTracer(exporter: OTLPExporter(endpoint: endpoint, serviceName: name, logger: logger))
    }

    /// Bootstraps the process's tracer once (`InstrumentationSystem.bootstrap`) when a collector
    /// is configured; the program calls `shutdown()` on what it returns before it exits.
    public static func bootstrap(defaultServiceName: String, logger: Logger) -> OTLPTracer? {
        guard let tracer = tracer(defaultServiceName: defaultServiceName, logger: logger) else { return nil }
        InstrumentationSystem.bootstrap(tracer)
        return tracer
    }
}

extension TracingSetup {
    /// Runs a program's command with tracing bootstrapped when a collector is configured, and
    /// sends the spans still waiting when it ends (however it ends).
    public static func run<T>(
        defaultServiceName: String, logger: Logger, _ body: () async throws -> T
    ) async throws -> T {
        let tracer = bootstrap(defaultServiceName: defaultServiceName, logger: logger)
        do {
            let result = try await body()
            await tracer?.shutdown()
            return result
        } catch {
            await tracer?.shutdown()
            throw error
        }
    }
}
