import Foundation
import HTTPTypes
import HorizonAPI
import HorizonTestSupport
import HorizonTracing
import HummingbirdTesting
import Logging
import Testing
import Tracing

/// The server continues a trace only where the request's signature says it belongs: a
/// `traceparent` the signer covered, never one a proxy or anyone else put beside the signature.
@Suite("Signed trace context")
struct SignedTraceContextTests {
    static let path = "/v1/terminals/credential"
    static let traceparent = HTTPField.Name("traceparent")!

    @Test func theServerContinuesOnlyATraceTheSignatureCovers() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let key = TerminalKey()
        _ = try await server.activate(key)
        let receiver = try OTLPReceiver()
        let tracer = try #require(
            TracingSetup.tracer(
                defaultServiceName: "horizon-server", environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.baseURL],
                logger: Logger(label: "test")))
        let signedParent = SpanIdentity(traceID: Array(repeating: 1, count: 16), spanID: Array(repeating: 2, count: 8))
        let unsignedParent = SpanIdentity(
            traceID: Array(repeating: 3, count: 16), spanID: Array(repeating: 4, count: 8))
        func sign(_ traceparent: String?) throws -> String {
            try RequestSignature.sign(
                method: "POST", path: Self.path, body: [UInt8](), with: key.key, time: server.clock.now,
                traceparent: traceparent
            ).headerValue
        }
        let coveringTrace = try sign(signedParent.traceparent)
        let coveringNoTrace = try sign(nil)
        let coveringTraceAgain = try sign(signedParent.traceparent)
        try await withTracer(tracer) {
            try await server.withClient { client in
                // Signed with its traceparent: accepted, and the request's span continues that trace.
                let signed = try await client.send(
                    .post, Self.path,
                    headers: [.authorization: coveringTrace, Self.traceparent: signedParent.traceparent])
                #expect(signed.status == .ok, "\(signed.text)")
                // A traceparent beside a signature that does not cover it: the request is
                // accepted as signed, and the traceparent is ignored.
                let added = try await client.send(
                    .post, Self.path,
                    headers: [.authorization: coveringNoTrace, Self.traceparent: unsignedParent.traceparent])
                #expect(added.status == .ok, "\(added.text)")
                // A signed traceparent replaced on the way: the signature no longer verifies.
                let replaced = try await client.send(
                    .post, Self.path,
                    headers: [
                        .authorization: coveringTraceAgain,
                        Self.traceparent: unsignedParent.traceparent,
                    ])
                #expect(replaced.status == .unauthorized, "\(replaced.text)")
                #expect(replaced.text.contains("signature_invalid"))
            }
        }
        await tracer.shutdown()
        let spans = try receiver.received.flatMap {
            try JSONDecoder().decode(OTLPExportRequest.self, from: $0).resourceSpans.flatMap(\.scopeSpans)
                .flatMap(\.spans)
        }
        let request = spans.filter { $0.name == "POST \(Self.path)" }
        #expect(request.count == 1, "\(spans.map(\.name))")
        #expect(request.first?.traceId == signedParent.traceID.hexString)
        #expect(request.first?.parentSpanId == signedParent.spanID.hexString)
        #expect(request.first?.kind == 2)
        #expect(!spans.contains { $0.traceId == unsignedParent.traceID.hexString })
    }
}
