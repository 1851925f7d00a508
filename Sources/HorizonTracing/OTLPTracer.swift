import Foundation
import Synchronization
import Tracing

/// A `Tracer` whose ended spans go to an `OTLPExporter`. A span started in a context holding a
/// span identity (its parent, here or in another process) joins that trace; otherwise it starts
/// a new trace. Span events and links are not recorded.
public final class OTLPTracer: Tracer, Sendable {
    public typealias Span = OTLPSpan
    let exporter: OTLPExporter

    public init(exporter: OTLPExporter) { self.exporter = exporter }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> OTLPSpan {
        var context = context()
        let identity: SpanIdentity
        if let requested = context.horizonRequestedIdentity {
            identity = requested
            context.horizonRequestedIdentity = nil
        } else if let parent = context.horizonSpan {
            identity = SpanIdentity(
                traceID: parent.traceID, spanID: SpanIdentity.randomSpanID(), parentSpanID: parent.spanID)
        } else {
            identity = SpanIdentity(traceID: SpanIdentity.randomTraceID(), spanID: SpanIdentity.randomSpanID())
        }
        context.horizonSpan = identity
        context[HorizonExportedSpanKey.self] = true
        return OTLPSpan(
            name: operationName, context: context, identity: identity, kind: kind,
            start: instant().nanosecondsSinceEpoch, exporter: exporter)
    }

    /// Sends what has ended so far (the exporter sends on its own as well).
    public func forceFlush() { exporter.flushSoon() }

    public func extract<Carrier, Extract>(
        _ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract
    ) where Extract: Extractor, Extract.Carrier == Carrier {
        if let value = extractor.extract(key: "traceparent", from: carrier),
            let parent = SpanIdentity.parent(fromTraceparent: value)
        {
            context.horizonSpan = parent
        }
    }

    public func inject<Carrier, Inject>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject: Injector, Inject.Carrier == Carrier {
        guard let span = context.horizonSpan else { return }
        injector.inject(span.traceparent, forKey: "traceparent", into: &carrier)
    }

    /// Sends every ended span and stops the exporter: at a program's end.
    public func shutdown() async { await exporter.shutdown() }
}

/// A span of `OTLPTracer`: mutable until it ends, then handed to the exporter once.
public final class OTLPSpan: Tracing.Span, Sendable {
    public let context: ServiceContext
    public let identity: SpanIdentity
    private let kind: SpanKind
    private let start: UInt64
    private let exporter: OTLPExporter
    private struct State {
        var name: String
        var attributes = SpanAttributes()
        var status: SpanStatus?
        var ended = false
    }
    private let state: Mutex<State>

    init(
        name: String, context: ServiceContext, identity: SpanIdentity, kind: SpanKind, start: UInt64,
        exporter: OTLPExporter
    ) {
        self.context = context
        self.identity = identity
        self.kind = kind
        self.start = start
        self.exporter = exporter
        state = Mutex(State(name: name))
    }

    public var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { if !$0.ended { $0.name = newValue } } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { if !$0.ended { $0.attributes = newValue } } }
    }

    public var isRecording: Bool { state.withLock { !$0.ended } }

    public func setStatus(_ status: SpanStatus) { state.withLock { if !$0.ended { $0.status = status } } }

    public func addEvent(_ event: SpanEvent) {}

    public func addLink(_ link: SpanLink) {}

    /// Marks the span failed with the error's type only: an error's text may carry personal data.
    public func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        let type = String(describing: Swift.type(of: error))
        state.withLock {
            guard !$0.ended else { return }
            $0.status = SpanStatus(code: .error, message: type)
            $0.attributes["error.type"] = type
        }
    }

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        let end = instant().nanosecondsSinceEpoch
        let finished: FinishedSpan? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            var values: [String: OTLPExportRequest.AnyValue] = [:]
            // SpanAttributes is not a Sequence: forEach is its only iteration.
            // swift-format-ignore: ReplaceForEachWithForLoop
            state.attributes.forEach { key, value in values[key] = Self.value(value) }
            return FinishedSpan(
                name: state.name, identity: identity, kind: Self.kindNumber(kind), startNanoseconds: start,
                endNanoseconds: max(end, start), attributes: values,
                status: state.status.map {
                    OTLPExportRequest.Status(code: $0.code == .ok ? 1 : 2, message: $0.message)
                })
        }
        if let finished { exporter.add(finished) }
    }

    static func kindNumber(_ kind: SpanKind) -> Int {
        switch kind {
        case .internal: 1
        case .server: 2
        case .client: 3
        case .producer: 4
        case .consumer: 5
        }
    }

    static func value(_ attribute: SpanAttribute) -> OTLPExportRequest.AnyValue {
        switch attribute {
        case .int32(let value): .int(Int64(value))
        case .int64(let value): .int(value)
        case .double(let value): .double(value)
        case .bool(let value): .bool(value)
        case .string(let value): .string(value)
        case .stringConvertible(let value): .string(value.description)
        default: .string("\(attribute)")
        }
    }
}
