import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import Synchronization

/// Batches ended spans in memory and POSTs them as OTLP/HTTP JSON to a collector. Ending a
/// span only appends to the batch under a lock; sending happens on a task of its own, at most
/// `interval` later, so a slow or dead collector never delays a payment. A failed export is
/// logged once (not again until one succeeds) and its spans are dropped: traces are best effort.
public final class OTLPExporter: Sendable {
    public let endpoint: URL
    public let serviceName: String
    let logger: Logger
    let timeout: Duration
    let interval: Duration
    /// Spans beyond this many waiting are dropped (a collector that is down must not grow memory).
    static let maximumWaiting = 4096
    private let client: HTTPClient
    private struct State {
        var waiting: [FinishedSpan] = []
        var scheduled = false
        var sends: [Int: Task<Void, Never>] = [:]
        var nextSend = 0
        var failing = false
        var stopped = false
    }
    private let state = Mutex(State())

    public init(
        endpoint: URL, serviceName: String, logger: Logger, timeout: Duration = .seconds(2),
        interval: Duration = .milliseconds(200)
    ) {
        self.endpoint = endpoint
        self.serviceName = serviceName
        self.logger = logger
        self.timeout = timeout
        self.interval = interval
        var configuration = HTTPClient.Configuration.singletonConfiguration
        // The export's own requests are not traced (that would trace the tracing, forever).
        configuration.tracing.tracer = nil
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    func add(_ span: FinishedSpan) {
        let schedule = state.withLock { state -> Bool in
            guard !state.stopped, state.waiting.count < Self.maximumWaiting else { return false }
            state.waiting.append(span)
            guard !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        if schedule { startSend(after: interval) }
    }

    /// Sends what is waiting now rather than after the interval.
    func flushSoon() { startSend(after: .zero) }

    private func startSend(after delay: Duration) {
        state.withLock { state in
            let number = state.nextSend
            state.nextSend += 1
            state.sends[number] = Task { [self] in
                if delay > .zero { try? await Task.sleep(for: delay) }
                await sendWaiting()
                _ = self.state.withLock { $0.sends.removeValue(forKey: number) }
            }
        }
    }

    private func sendWaiting() async {
        let batch = state.withLock { state -> [FinishedSpan] in
            state.scheduled = false
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        guard !batch.isEmpty else { return }
        let body = OTLPExportRequest(serviceName: serviceName, spans: batch).encoded()
        var request = HTTPClientRequest(url: endpoint.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let problem: String?
        do {
            let response = try await client.execute(request, timeout: .nanoseconds(timeout.nanoseconds))
            _ = try? await response.body.collect(upTo: 1 << 16)
            problem = (200..<300).contains(Int(response.status.code)) ? nil : "answered \(response.status.code)"
        } catch {
            problem = "\(error)"
        }
        let report = state.withLock { state -> Bool in
            defer { state.failing = problem != nil }
            return problem != nil && !state.failing
        }
        if report, let problem {
            logger.warning(
                "traces could not be exported to \(endpoint.absoluteString) (\(problem)); spans are dropped until it answers"
            )
        }
    }

    /// Sends what is waiting, waits for every send under way, and shuts the HTTP client down.
    public func shutdown() async {
        flushSoon()
        while true {
            let sends = state.withLock { state -> [Task<Void, Never>] in Array(state.sends.values) }
            if sends.isEmpty { break }
            for send in sends { await send.value }
        }
        state.withLock { $0.stopped = true }
        try? await client.shutdown()
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
