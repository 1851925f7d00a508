import Crypto
import HorizonCore
import Tracing

/// Where a span stands in its trace: the ids OTLP and W3C `traceparent` carry.
public struct SpanIdentity: Sendable, Equatable {
    /// 16 bytes.
    public let traceID: [UInt8]
    /// 8 bytes.
    public let spanID: [UInt8]
    /// The span this one is a child of, if any (it may live in another process).
    public let parentSpanID: [UInt8]?

    public init(traceID: [UInt8], spanID: [UInt8], parentSpanID: [UInt8]? = nil) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
    }

    /// The W3C `traceparent` value naming this span as the parent (version 00, sampled).
    public var traceparent: String { "00-\(traceID.hexString)-\(spanID.hexString)-01" }

    /// The trace and span a W3C `traceparent` value names; nil for anything malformed, for the
    /// all-zero ids the specification forbids and for the reserved version ff.
    public static func parent(fromTraceparent value: String) -> SpanIdentity? {
        let parts = value.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[0] != "ff", parts[1].count == 32, parts[2].count == 16,
            parts[3].count == 2, parts[0] != "00" || parts.count == 4,
            [UInt8](hexString: String(parts[0])) != nil, [UInt8](hexString: String(parts[3])) != nil,
            let trace = [UInt8](hexString: String(parts[1])), let span = [UInt8](hexString: String(parts[2])),
            trace.contains(where: { $0 != 0 }), span.contains(where: { $0 != 0 })
        else { return nil }
        return SpanIdentity(traceID: trace, spanID: span)
    }

    static func randomTraceID() -> [UInt8] { nonZero(16) }
    static func randomSpanID() -> [UInt8] { nonZero(8) }

    private static func nonZero(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        while true {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.contains(where: { $0 != 0 }) { return bytes }
        }
    }
}

/// The ids of a payment's trace, derived from its payment id alone. The wallet and the terminal
/// share no trace context over Bluetooth (the wire stays as it is); both know the payment id,
/// so both compute the same trace id, and the terminal names the wallet's confirmation span
/// as its parent without being told its id.
public enum PaymentTrace {
    /// The first 16 bytes of SHA-256 over a fixed label and the payment id.
    public static func traceID(paymentID: [UInt8]) -> [UInt8] {
        digest("horizon/trace/v1/trace", paymentID, count: 16)
    }

    /// The span id of the wallet's "confirm payment" span: the first 8 bytes of SHA-256 over
    /// another label and the payment id.
    public static func confirmationSpanID(paymentID: [UInt8]) -> [UInt8] {
        digest("horizon/trace/v1/wallet-confirmation", paymentID, count: 8)
    }

    /// The identity of the wallet's confirmation span: the root of the payment's trace.
    public static func confirmation(paymentID: [UInt8]) -> SpanIdentity {
        SpanIdentity(traceID: traceID(paymentID: paymentID), spanID: confirmationSpanID(paymentID: paymentID))
    }

    /// A context whose spans continue the payment's trace as children of the wallet's
    /// confirmation span (the terminal's side).
    public static func childOfConfirmation(paymentID: [UInt8], in context: ServiceContext = .topLevel)
        -> ServiceContext
    {
        var context = context
        context.horizonSpan = confirmation(paymentID: paymentID)
        return context
    }

    /// A context asking the tracer to give the next span exactly the confirmation's identity
    /// (the wallet's side, which learns the payment id only from the receipt).
    public static func asConfirmation(paymentID: [UInt8]) -> ServiceContext {
        var context = ServiceContext.topLevel
        context.horizonRequestedIdentity = confirmation(paymentID: paymentID)
        return context
    }

    private static func digest(_ label: String, _ paymentID: [UInt8], count: Int) -> [UInt8] {
        var hash = SHA256()
        hash.update(data: Array(label.utf8) + [0x0A])
        hash.update(data: paymentID)
        return Array(hash.finalize().prefix(count))
    }
}

/// The current span's identity in a context (set by `OTLPTracer`'s spans, or by an incoming
/// `traceparent` the server accepted).
enum HorizonSpanKey: ServiceContextKey {
    typealias Value = SpanIdentity
    static var nameOverride: String? { "horizon-span" }
}

/// Set in the contexts of `OTLPTracer`'s spans: the span in `HorizonSpanKey` is being exported.
enum HorizonExportedSpanKey: ServiceContextKey {
    typealias Value = Bool
}

/// An identity the next span must take instead of fresh random ids.
enum HorizonRequestedIdentityKey: ServiceContextKey {
    typealias Value = SpanIdentity
}

extension ServiceContext {
    /// The identity of the span this context belongs to (a new span becomes its child).
    public var horizonSpan: SpanIdentity? {
        get { self[HorizonSpanKey.self] }
        set { self[HorizonSpanKey.self] = newValue }
    }

    var horizonRequestedIdentity: SpanIdentity? {
        get { self[HorizonRequestedIdentityKey.self] }
        set { self[HorizonRequestedIdentityKey.self] = newValue }
    }

    /// A context continuing the trace a W3C `traceparent` names (nil: `self` unchanged).
    public func continuing(traceparent: String?) -> ServiceContext {
        guard let traceparent, let parent = SpanIdentity.parent(fromTraceparent: traceparent) else { return self }
        var context = self
        context.horizonSpan = parent
        return context
    }
}

/// The trace context of the running task, for code that sends it on without a tracer of its own.
public enum CurrentTrace {
    /// The W3C `traceparent` naming the current span as parent; nil when no span is being exported.
    /// Only a span this process exports counts: with tracing off, a context that merely names a
    /// parent (as `PaymentTrace.childOfConfirmation` does) sends nothing, so requests stay
    /// byte for byte as without tracing.
    public static var traceparent: String? {
        guard let context = ServiceContext.current, context[HorizonExportedSpanKey.self] == true else { return nil }
        return context.horizonSpan?.traceparent
    }
}

extension PaymentTrace {
    /// Records the wallet's "confirm payment" span from `start` to now: under the identity the
    /// payment id derives when the wallet learned it (from the receipt), else in a trace of its
    /// own. Recorded afterwards because the id is known only at the end.
    public static func recordConfirmation(
        paymentID: [UInt8]?, startedAt start: DefaultTracerClock.Instant, amountMinorUnits: Int64?, outcome: String
    ) {
        let context = paymentID.map { asConfirmation(paymentID: $0) } ?? .topLevel
        let span = InstrumentationSystem.tracer.startSpan(
            "confirm payment", context: context, ofKind: .client, at: start)
        if let paymentID { span.attributes["horizon.payment_id"] = paymentID.hexString }
        if let amountMinorUnits { span.attributes["horizon.amount_minor_units"] = amountMinorUnits }
        span.attributes["horizon.outcome"] = outcome
        span.end()
    }
}
