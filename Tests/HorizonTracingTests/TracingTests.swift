import Crypto
import Foundation
import HorizonCore
import HorizonTestSupport
import HorizonTracing
import Logging
import Testing
import Tracing

@Suite("Payment trace ids and the OTLP exporter")
struct TracingTests {
    static let paymentID: [UInt8] = Array(0..<16)

    @Test func theTraceAndConfirmationIdsDeriveFromThePaymentIdAlone() {
        let identity = PaymentTrace.confirmation(paymentID: Self.paymentID)
        #expect(identity.traceID.count == 16 && identity.spanID.count == 8 && identity.parentSpanID == nil)
        // The first bytes of SHA-256 over a fixed label, a newline and the payment id.
        let trace = Array(SHA256.hash(data: Array("horizon/trace/v1/trace\n".utf8) + Self.paymentID).prefix(16))
        let span = Array(
            SHA256.hash(data: Array("horizon/trace/v1/wallet-confirmation\n".utf8) + Self.paymentID).prefix(8))
        #expect(identity.traceID == trace && identity.spanID == span)
        // The same on every call (wallet and terminal compute it apart); another payment, another trace.
        #expect(PaymentTrace.confirmation(paymentID: Self.paymentID) == identity)
        let other = PaymentTrace.confirmation(paymentID: Array(repeating: 7, count: 16))
        #expect(other.traceID != identity.traceID && other.spanID != identity.spanID)
    }

    @Test func aTraceparentIsWrittenAndReadAsW3CSaysAndNonsenseIsRefused() throws {
        let identity = PaymentTrace.confirmation(paymentID: Self.paymentID)
        #expect(identity.traceparent == "00-\(identity.traceID.hexString)-\(identity.spanID.hexString)-01")
        let read = try #require(SpanIdentity.parent(fromTraceparent: identity.traceparent))
        #expect(read.traceID == identity.traceID && read.spanID == identity.spanID)
        for bad in [
            "", "00-abc-def-01", "ff-\(identity.traceID.hexString)-\(identity.spanID.hexString)-01",
            "00-\(String(repeating: "0", count: 32))-\(identity.spanID.hexString)-01",
            "00-\(identity.traceID.hexString)-\(String(repeating: "0", count: 16))-01",
            "00-\(identity.traceID.hexString)-\(identity.spanID.hexString)-01-extra",
            "00-\(identity.traceID.hexString)-\(identity.spanID.hexString.dropLast())x-01",
        ] {
            #expect(SpanIdentity.parent(fromTraceparent: bad) == nil, "\(bad)")
        }
    }

    @Test func onlyAnExportedSpanIsSentOnAsTraceparent() async throws {
        // With tracing off the terminal's context names the wallet's span as parent, but its
        // requests must carry no traceparent (an older server would not verify them).
        let named = PaymentTrace.childOfConfirmation(paymentID: Self.paymentID)
        ServiceContext.withValue(named) { #expect(CurrentTrace.traceparent == nil) }
        let span = NoOpTracer().startSpan("settle with server", context: named)
        ServiceContext.withValue(span.context) { #expect(CurrentTrace.traceparent == nil) }
        let tracer = OTLPTracer(
            exporter: OTLPExporter(
                endpoint: try #require(URL(string: "http://127.0.0.1:9/v1/traces")), serviceName: "t",
                logger: Logger(label: "test")))
        let exported = tracer.startSpan("settle with server", context: named)
        ServiceContext.withValue(exported.context) {
            #expect(CurrentTrace.traceparent == exported.identity.traceparent)
        }
        #expect(exported.identity.parentSpanID == PaymentTrace.confirmationSpanID(paymentID: Self.paymentID))
        await tracer.shutdown()
    }

    @Test func spansAreEncodedAsOTLPJSONThatDecodesBackToTheirFields() throws {
        let identity = SpanIdentity(
            traceID: Array(repeating: 0xAB, count: 16), spanID: Array(1...8), parentSpanID: [9, 9, 9, 9, 9, 9, 9, 9])
        let span = FinishedSpan(
            name: "settle", identity: identity, kind: 2, startNanoseconds: 1_700_000_000_123_456_789,
            endNanoseconds: 1_700_000_000_223_456_789,
            attributes: ["horizon.amount_minor_units": .int(1250), "horizon.outcome": .string("approved")],
            status: .init(code: 1, message: nil))
        let body = OTLPExportRequest(serviceName: "horizon-server", spans: [span]).encoded()
        // The protobuf-JSON shape: camelCase, hex ids, 64-bit numbers as strings.
        let text = String(decoding: body, as: UTF8.self)
        for expected in [
            #""resource":{"attributes":[{"key":"service.name","value":{"stringValue":"horizon-server"}}]}"#,
            #""traceId":"\#(String(repeating: "ab", count: 16))""#, #""spanId":"0102030405060708""#,
            #""parentSpanId":"0909090909090909""#, #""startTimeUnixNano":"1700000000123456789""#,
            #""endTimeUnixNano":"1700000000223456789""#, #""kind":2"#,
            #"{"key":"horizon.amount_minor_units","value":{"intValue":"1250"}}"#,
            #"{"key":"horizon.outcome","value":{"stringValue":"approved"}}"#, #""status":{"code":1}"#,
        ] {
            #expect(text.contains(expected), "\(expected) in \(text)")
        }
        let decoded = try JSONDecoder().decode(OTLPExportRequest.self, from: body)
        let decodedSpan = try #require(decoded.resourceSpans.first?.scopeSpans.first?.spans.first)
        #expect(decodedSpan.traceId == identity.traceID.hexString && decodedSpan.name == "settle")
        // And the typed model reads it back whole.
        #expect(decoded == OTLPExportRequest(serviceName: "horizon-server", spans: [span]))
    }

    @Test func theEndpointComesFromTheStandardVariablesAndNothingWithoutThem() {
        #expect(TracingSetup.endpoint(environment: [:]) == nil)
        #expect(TracingSetup.tracer(defaultServiceName: "x", environment: [:], logger: Logger(label: "t")) == nil)
        #expect(
            TracingSetup.endpoint(environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"])?.absoluteString
                == "http://127.0.0.1:4318/v1/traces")
        #expect(
            TracingSetup.endpoint(environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:1/t",
            ])?.absoluteString == "http://b:1/t")
    }

    @Test func childSpansJoinTheirParentsTraceAndAreSentToTheCollector() async throws {
        let receiver = try OTLPReceiver()
        let tracer = try #require(
            TracingSetup.tracer(
                defaultServiceName: "horizon-terminal",
                environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.baseURL, "OTEL_SERVICE_NAME": "till-1"],
                logger: Logger(label: "test")))
        let confirmation = PaymentTrace.confirmation(paymentID: Self.paymentID)
        let collect = tracer.startSpan(
            "collect payment", context: PaymentTrace.childOfConfirmation(paymentID: Self.paymentID), ofKind: .server)
        let settle = tracer.startSpan("settle with server", context: collect.context, ofKind: .client)
        settle.end()
        collect.end()
        await tracer.shutdown()
        let spans = try receiver.received.flatMap { body in
            try JSONDecoder().decode(OTLPExportRequest.self, from: body).resourceSpans.flatMap { resource in
                #expect(resource.resource.attributes.first?.value.stringValue == "till-1")
                return resource.scopeSpans.flatMap(\.spans)
            }
        }
        let byName = Dictionary(spans.map { ($0.name, $0) }) { first, _ in first }
        #expect(spans.count == 2)
        #expect(Set(spans.map(\.traceId)) == [confirmation.traceID.hexString])
        #expect(byName["collect payment"]?.parentSpanId == confirmation.spanID.hexString)
        #expect(byName["settle with server"]?.parentSpanId == byName["collect payment"]?.spanId)
    }

    @Test func aDeadCollectorCostsASpanNothingAndIsReportedOnce() async throws {
        // A port nothing listens on (discard, never served here): connections are refused.
        let url = try #require(URL(string: "http://127.0.0.1:9/v1/traces"))
        let logs = LogRecorder()
        let exporter = OTLPExporter(
            endpoint: url, serviceName: "horizon-wallet", logger: logs.logger(level: .info), interval: .zero)
        let tracer = OTLPTracer(exporter: exporter)
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for _ in 0..<100 { tracer.startSpan("confirm payment", context: .topLevel).end() }
        }
        #expect(elapsed < .milliseconds(500), "ending spans took \(elapsed)")
        try await Task.sleep(for: .milliseconds(300))
        tracer.forceFlush()
        let started = clock.now
        await tracer.shutdown()
        // A bound for a loaded machine: blocking on the dead collector would take 100 × 2 s.
        #expect(clock.now - started < .seconds(20))
        let warnings = logs.all.filter { $0.message.contains("traces could not be exported") }
        #expect(warnings.count == 1, "\(logs.all.map(\.message))")
    }
}
