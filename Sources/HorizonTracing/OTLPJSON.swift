import Foundation

/// The OTLP/HTTP JSON encoding of an `ExportTraceServiceRequest` (the protobuf-JSON mapping of
/// opentelemetry-proto): ids as lowercase hex, 64-bit times as decimal strings, enums as numbers.
/// Only what Horizon's spans use is modelled.
public struct OTLPExportRequest: Codable, Sendable, Equatable {
    public var resourceSpans: [ResourceSpans]

    public struct ResourceSpans: Codable, Sendable, Equatable {
        public var resource: Resource
        public var scopeSpans: [ScopeSpans]
    }

    public struct Resource: Codable, Sendable, Equatable {
        public var attributes: [KeyValue]
    }

    public struct ScopeSpans: Codable, Sendable, Equatable {
        public var scope: Scope
        public var spans: [Span]
    }

    public struct Scope: Codable, Sendable, Equatable {
        public var name: String
    }

    public struct Span: Codable, Sendable, Equatable {
        public var traceId: String
        public var spanId: String
        public var parentSpanId: String?
        public var name: String
        /// 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
        public var kind: Int
        public var startTimeUnixNano: String
        public var endTimeUnixNano: String
        public var attributes: [KeyValue]
        public var status: Status?
    }

    public struct Status: Codable, Sendable, Equatable {
        /// 0 unset, 1 ok, 2 error.
        public var code: Int
        public var message: String?

        public init(code: Int, message: String? = nil) {
            self.code = code
            self.message = message
        }
    }

    public struct KeyValue: Codable, Sendable, Equatable {
        public var key: String
        public var value: AnyValue
    }

    /// One of `stringValue`, `intValue` (a decimal string), `doubleValue`, `boolValue`.
    public struct AnyValue: Codable, Sendable, Equatable {
        public var stringValue: String?
        public var intValue: String?
        public var doubleValue: Double?
        public var boolValue: Bool?

        public static func string(_ value: String) -> AnyValue { AnyValue(stringValue: value) }
        public static func int(_ value: Int64) -> AnyValue { AnyValue(intValue: String(value)) }
        public static func double(_ value: Double) -> AnyValue { AnyValue(doubleValue: value) }
        public static func bool(_ value: Bool) -> AnyValue { AnyValue(boolValue: value) }
    }

    /// One resource (the service) with one scope holding `spans`.
    public init(serviceName: String, spans: [FinishedSpan]) {
        let resource = Resource(attributes: [KeyValue(key: "service.name", value: .string(serviceName))])
        let encoded = spans.map { span in
            Span(
                traceId: span.identity.traceID.lowercaseHex, spanId: span.identity.spanID.lowercaseHex,
                parentSpanId: span.identity.parentSpanID?.lowercaseHex, name: span.name, kind: span.kind,
                startTimeUnixNano: String(span.startNanoseconds), endTimeUnixNano: String(span.endNanoseconds),
                attributes: span.attributes.sorted { $0.key < $1.key }.map { KeyValue(key: $0.key, value: $0.value) },
                status: span.status)
        }
        resourceSpans = [
            ResourceSpans(resource: resource, scopeSpans: [ScopeSpans(scope: Scope(name: "horizon"), spans: encoded)])
        ]
    }

    /// The request's JSON body.
    public func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Every field is a string, number or bool: encoding cannot fail.
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }
}

/// A span once ended, as the exporter keeps it until it is sent.
public struct FinishedSpan: Sendable, Equatable {
    public var name: String
    public var identity: SpanIdentity
    public var kind: Int
    public var startNanoseconds: UInt64
    public var endNanoseconds: UInt64
    public var attributes: [String: OTLPExportRequest.AnyValue]
    public var status: OTLPExportRequest.Status?

    public init(
        name: String, identity: SpanIdentity, kind: Int, startNanoseconds: UInt64, endNanoseconds: UInt64,
        attributes: [String: OTLPExportRequest.AnyValue], status: OTLPExportRequest.Status?
    ) {
        self.name = name
        self.identity = identity
        self.kind = kind
        self.startNanoseconds = startNanoseconds
        self.endNanoseconds = endNanoseconds
        self.attributes = attributes
        self.status = status
    }
}

extension Array where Element == UInt8 {
    var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(count * 2)
        for byte in self {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
