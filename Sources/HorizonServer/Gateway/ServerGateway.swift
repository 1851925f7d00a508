import Foundation
import HTTPTypes
import HorizonObliviousHTTP
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The server's Oblivious HTTP gateway: opens a sealed wallet request a terminal
/// relays, refuses replays (recorded in the ledger's database, see `Ledger.recordGatewayRequest`)
/// and stale dates, serves the request through the server's own
/// router in this process (with every middleware, so the wallet's signature is checked as if it
/// had come directly), and seals the answer.
final class ServerGateway: Sendable {
    let gateway: ObliviousHTTPGateway
    let signedConfiguration: SignedGatewayKeyConfiguration
    /// Relays per terminal: a token bucket of a minute's worth, refilled over the minute.
    let relayLimiter: RateLimiter
    let relaysPerMinute: Int
    /// How far the inner request's date may be from the server's clock, in seconds.
    let window: Int64
    /// The router's responder, set once every route is registered.
    private let responder = Mutex<RouterResponder<ServerRequestContext>?>(nil)

    init(key: GatewayKey, issuer: Issuer, relaysPerMinute: Int, window: Int64) throws {
        gateway = key.gateway
        signedConfiguration = try SignedGatewayKeyConfiguration.sign(gateway.configuration, with: issuer.signingKey)
        relayLimiter = RateLimiter(burst: relaysPerMinute, perSecond: Double(relaysPerMinute) / 60)
        self.relaysPerMinute = relaysPerMinute
        self.window = window
    }

    func setResponder(_ responder: RouterResponder<ServerRequestContext>) { self.responder.withLock { $0 = responder } }

    /// Serves an opened inner request and returns its response, with the body collected.
    func serve(_ inner: BinaryHTTPRequest, logger: Logger) async throws -> BinaryHTTPResponse {
        guard let responder = responder.withLock({ $0 }) else {
            throw APIError(.internalError, "the gateway is not ready; retry shortly")
        }
        var fields = HTTPFields()
        for field in inner.headerFields where !Self.notForwarded.contains(field.name) {
            guard let name = HTTPField.Name(field.name) else {
                throw APIError(.invalidRequest, "the relayed request has an invalid field name")
            }
            fields.append(HTTPField(name: name, value: field.value))
        }
        fields[.contentLength] = String(inner.content.count)
        guard let method = HTTPRequest.Method(inner.method) else {
            throw APIError(.invalidRequest, "the relayed request's method is not an HTTP method")
        }
        let head = HTTPRequest(
            method: method, scheme: inner.scheme, authority: inner.authority, path: inner.path, headerFields: fields)
        let request = Request(head: head, body: .init(buffer: ByteBuffer(bytes: inner.content)))
        let response = try await responder.respond(to: request, context: ServerRequestContext(relayedWith: logger))
        let sink = ResponseSink(limit: ObliviousHTTP.maximumSealedBytes)
        try await response.body.write(CollectingBodyWriter(sink: sink))
        var headerFields: [HTTPHeaderField] = []
        for field in response.headers where !Self.notForwarded.contains(field.name.canonicalName) {
            headerFields.append(HTTPHeaderField(name: field.name.canonicalName, value: field.value))
        }
        return BinaryHTTPResponse(status: response.status.code, headerFields: headerFields, content: sink.bytes)
    }

    /// Fields that describe one connection or message framing, not the request itself.
    static let notForwarded: Set<String> = [
        "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length",
        "proxy-connection",
    ]
}

/// Collects a response body in memory, up to a limit.
final class ResponseSink: Sendable {
    let limit: Int
    private let collected = Mutex<[UInt8]>([])

    init(limit: Int) { self.limit = limit }

    var bytes: [UInt8] { collected.withLock { $0 } }

    func append(_ buffer: ByteBuffer) throws {
        try collected.withLock { collected in
            guard collected.count + buffer.readableBytes <= limit else {
                throw APIError(
                    .gatewayResponseTooLarge,
                    "the answer is larger than a relayed answer may be (\(limit) bytes sealed); ask for less (a smaller page) or send the request directly when online"
                )
            }
            collected.append(contentsOf: buffer.readableBytesView)
        }
    }
}

struct CollectingBodyWriter: ResponseBodyWriter {
    let sink: ResponseSink

    mutating func write(_ buffer: ByteBuffer) async throws { try sink.append(buffer) }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
