import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonTracing
import NIOCore
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

/// What terminals and wallets call on the Horizon server: the client generated from
/// `openapi.yaml` over AsyncHTTPClient, requests signed with the device's own key, and one typed
/// error that keeps the server's code and request id.
public struct HorizonServerClient: Sendable {
    public let serverURL: URL
    let client: Client

    /// - Parameters:
    ///   - signingKey: the device's key; requests carry a `HorizonSignature` made with it.
    ///   - timeout: for each request; a server that does not answer in time is reported as such.
    public init(
        serverURL: URL, signingKey: P256.Signing.PrivateKey? = nil, timeout: Duration = .seconds(10),
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.init(serverURL: serverURL, signingKey: signingKey, transport: Self.transport(timeout), clock: clock)
    }

    /// A client over an HTTP client of the caller's: for a program that keeps many connections
    /// to one server at once (the process's own client keeps at most 8 per host, as
    /// AsyncHTTPClient does by default; a load generator simulating many terminals needs one each).
    public init(
        serverURL: URL, signingKey: P256.Signing.PrivateKey? = nil, httpClient: HTTPClient,
        timeout: Duration = .seconds(10),
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.init(
            serverURL: serverURL, signingKey: signingKey, transport: Self.transport(timeout, http: httpClient),
            clock: clock)
    }

    /// A client that sends a merchant admin's session token (`signInMerchantAdmin`) as
    /// `Authorization: Bearer` with every request: the merchant service without a terminal.
    public init(serverURL: URL, adminSessionToken: String, timeout: Duration = .seconds(10)) {
        self.serverURL = serverURL
        client = Client(
            serverURL: serverURL, transport: Self.transport(timeout),
            middlewares: [BearerTokenMiddleware(token: adminSessionToken)])
    }

    /// HTTP through the process's one client, giving up on each request after `timeout`.
    /// Plain HTTP only to this machine (see `TransportSecurity`).
    static func transport(_ timeout: Duration, http: HTTPClient? = nil) -> any ClientTransport {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        return CheckedTransport(
            base: AsyncHTTPClientTransport(
                configuration: .init(client: http ?? Self.http, timeout: .milliseconds(max(1, milliseconds)))))
    }

    /// A client over `transport` (HTTP, or the sealed relay through a terminal), signing with `signingKey`.
    init(
        serverURL: URL, signingKey: P256.Signing.PrivateKey?, transport: any ClientTransport,
        clock: @escaping @Sendable () -> Int64
    ) {
        self.serverURL = serverURL
        var middlewares: [any ClientMiddleware] = []
        if let signingKey { middlewares.append(RequestSigningMiddleware(key: signingKey, clock: clock)) }
        client = Client(serverURL: serverURL, transport: transport, middlewares: middlewares)
    }

    /// The process's one HTTP client for the server. A connection that fails is reported at once
    /// rather than retried until the request's timeout: a terminal whose server is down tells its
    /// cashier so promptly (the payment stays pending and is asked again later), and a wallet's
    /// `register` does not sit silent. Never shut down, like `HTTPClient.shared`.
    static let http = makeHTTPClient(connectionsPerServer: 8)

    /// An HTTP client configured as the process's own (failed connections reported at once, 5 s
    /// to connect) that keeps up to `connectionsPerServer` connections to each server. Shut it
    /// down (`shutdown()`) when done.
    public static func makeHTTPClient(connectionsPerServer: Int) -> HTTPClient {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(1, connectionsPerServer)
        // A host that drops the connection attempt is unreachable after 5 s, not 90 s.
        configuration.timeout.connect = .seconds(5)
        // The trace context travels under the request's signature (`RequestSigningMiddleware`);
        // AsyncHTTPClient's own injection would add a second, unsigned traceparent header.
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// Parses `--server` text: an http(s) URL with a host; `http://` only to this machine unless
    /// the lab flag is on (`TransportSecurity`).
    public static func url(_ text: String) throws(ServerClientError) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host?.isEmpty == false
        else { throw .invalidServerURL(text) }
        if let reason = TransportSecurity.refusal(for: url) { throw .insecureServerURL(reason) }
        return url
    }

    // MARK: Operations

    public func anchor() async throws(ServerClientError) -> Components.Schemas.Anchor {
        let output = try await call { try await client.getAnchor() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func revocations() async throws(ServerClientError) -> [String] {
        let output = try await call { try await client.getRevocations() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.terminalKeyIds }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Activates `key` as a terminal of the merchant whose admin signs in with `email`/`password`.
    public func activateTerminal(email: String, password: String, label: String, key: P256.Signing.PrivateKey)
        async throws(ServerClientError) -> Components.Schemas.TerminalCredentialResponse
    {
        let publicKey = Data(key.publicKey.x963Representation).base64EncodedString()
        let proofBytes = Array(["horizon/activate/v1", email, label, publicKey].joined(separator: "\n").utf8)
        let proof: String
        do { proof = Data(try key.signature(for: proofBytes).rawRepresentation).base64EncodedString() } catch {
            throw .invalidResponse("the terminal key could not sign the activation: \(error)")
        }
        let body = Components.Schemas.ActivationRequest(
            email: email, password: password, label: label, publicKey: publicKey, proof: proof)
        let output = try await call { try await client.activateTerminal(body: .json(body)) }
        switch output {
        case .created(let created): return try Self.json { try created.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// A fresh credential for the terminal whose key signs this client's requests.
    public func renewTerminalCredential() async throws(ServerClientError)
        -> Components.Schemas.TerminalCredentialResponse
    {
        let output = try await call { try await client.renewTerminalCredential() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Submits a confirmed payment; the server executes it once and answers its result.
    public func submitPayment(_ submission: Components.Schemas.PaymentSubmission) async throws(ServerClientError)
        -> Components.Schemas.PaymentResult
    {
        let output = try await call { try await client.submitPayment(body: .json(submission)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Submits a confirmed redemption; executed once, as payments.
    public func submitRedemption(_ submission: Components.Schemas.RedemptionSubmission)
        async throws(ServerClientError) -> Components.Schemas.PaymentResult
    {
        let output = try await call { try await client.submitRedemption(body: .json(submission)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// The stored result of a payment of this terminal's merchant; nil if it was never executed.
    public func payment(id: String) async throws(ServerClientError) -> Components.Schemas.PaymentResult? {
        let output = try await call { try await client.getPayment(path: .init(paymentId: id)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error):
            let refusal = try Self.refusal(status, error)
            if refusal.code == "payment_not_found" { return nil }
            throw refusal
        }
    }

    // MARK: Plumbing

    /// Runs one call, turning transport failures into `unreachable` or `timedOut`.
    func call<T>(_ body: () async throws -> T) async throws(ServerClientError) -> T {
        do {
            return try await body()
        } catch let error as ClientError {
            throw Self.transportError(error.underlyingError, server: serverURL)
        } catch {
            throw Self.transportError(error, server: serverURL)
        }
    }

    static func transportError(_ error: any Error, server: URL) -> ServerClientError {
        // The relay transport says itself whether the request left the device.
        if let error = error as? ServerClientError { return error }
        if let error = error as? HTTPClientError {
            if error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
                return .timedOut
            }
        }
        if error is DecodingError { return .invalidResponse("the server's answer does not match the API: \(error)") }
        if error is CancellationError { return .cancelled }
        return .unreachable(unreachableSentence(String(describing: error), server: server))
    }

    /// What a person can act on, from the network library's text (errno numbers, NIO and TLS
    /// error names): the cause in a word or two and what to check.
    static func unreachableSentence(_ text: String, server: URL) -> String {
        let address = server.absoluteString
        let host = server.host ?? address
        func has(_ words: String...) -> Bool { words.contains { text.localizedCaseInsensitiveContains($0) } }
        if has("errno: 111", "connection refused") {
            return "the server at \(address) does not answer (connection refused; is it running?)"
        }
        if has("errno: 101", "network is unreachable", "errno: 113", "no route to host") {
            return "the server at \(address) cannot be reached (no route to it; check the network)"
        }
        if has(
            "NIOConnectionError", "SocketAddressError", "unknown(host", "unknown host", "lookup", "resolve", "EAI_",
            "getaddrinfo", "NXDOMAIN")
        {
            return "the server's host name \(host) is not known (DNS; check the address)"
        }
        if has("SSL", "TLS", "handshake", "certificate") {
            return
                "the server at \(address) failed the TLS handshake (check that it serves https with a certificate this machine trusts)"
        }
        if has("timed out", "timeout", "errno: 110") {
            return "the server at \(address) did not answer in time (connection timed out; check the network)"
        }
        if has("reset", "errno: 104", "remoteConnectionClosed", "closed") {
            return "the server at \(address) closed the connection (try again)"
        }
        return "the server at \(address) cannot be reached (check the address and the network)"
    }

    static func json<T>(_ body: () throws -> T) throws(ServerClientError) -> T {
        do { return try body() } catch { throw .invalidResponse("unexpected content: \(error)") }
    }

    static func refusal(_ status: Int, _ error: Components.Responses._Error) throws(ServerClientError)
        -> ServerClientError
    {
        let envelope = try json { try error.body.json }
        return .refused(
            status: status, code: envelope.error.code, message: envelope.error.message,
            requestID: envelope.error.requestId)
    }
}

/// Why a call to the server did not give an answer the caller can use.
public enum ServerClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server could not be reached (refused, DNS, TLS, reset): a sentence naming the server,
    /// the cause and what to check.
    case unreachable(String)
    /// The server did not answer in time; whether it acted is unknown.
    case timedOut
    /// The server answered with an error envelope.
    case refused(status: Int, code: String, message: String, requestID: String)
    /// The server answered something that is not the API.
    case invalidResponse(String)
    case invalidServerURL(String)
    /// `http://` to another machine without the lab flag: nothing was sent.
    case insecureServerURL(String)
    case cancelled
    /// A request for the relay (a terminal and the server's gateway) was not sent:
    /// it could not be sealed or is too large. Nothing left the device; fixing the cause and
    /// calling again is safe.
    case notRelayed(String)
    /// The sealed request was handed to the relay, but no answer that opens came back.
    /// The server may or may not have acted on it; nothing is sent again automatically.
    case relayOutcomeUnknown(String)

    /// Made safe to print: the server's words (and what the network returned) may hold escape
    /// sequences or bidi overrides.
    public var description: String { plainDescription.sanitizedForDisplay }

    private var plainDescription: String {
        switch self {
        case .unreachable(let sentence): sentence
        case .timedOut: "the server did not answer in time"
        case .refused(let status, let code, let message, let requestID):
            "the server refused (\(status) \(code)): \(message) [request \(requestID)]"
        case .invalidResponse(let reason): "the server's answer cannot be used: \(reason)"
        case .invalidServerURL(let text): "\(text) is not a server URL (expected http://HOST:PORT or https://HOST)"
        case .insecureServerURL(let reason): reason
        case .cancelled: "cancelled"
        case .notRelayed(let reason): "the request was not sent through the relay: \(reason)"
        case .relayOutcomeUnknown(let reason):
            "the relayed request got no usable answer (\(reason)); the server may or may not have acted on it, so it was not sent again: check the result (e.g. the balance or the history) before repeating it"
        }
    }

    /// The server's stable error code, when it answered with one.
    public var code: String? { if case .refused(_, let code, _, _) = self { code } else { nil } }
}

/// Sends a merchant admin's session token with every request.
struct BearerTokenMiddleware: ClientMiddleware {
    let token: String

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer " + token
        return try await next(request, body, baseURL)
    }
}

/// Signs every request with the device's key (`HorizonSignature`, see `RequestSignature`).
struct RequestSigningMiddleware: ClientMiddleware {
    let key: P256.Signing.PrivateKey
    let clock: @Sendable () -> Int64

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        let bytes: [UInt8] = if let body { Array(try await Data(collecting: body, upTo: 1 << 20)) } else { [] }
        // The server verifies the path it receives: the base URL's path and the operation's.
        let base = baseURL.path.hasSuffix("/") ? String(baseURL.path.dropLast()) : baseURL.path
        let path = base + (request.path ?? "/")
        // The current span, if a tracer is exporting one, goes along as the request's parent
        // and under the signature: the server continues only a trace the signer named.
        let traceparent = CurrentTrace.traceparent
        if let traceparent { request.headerFields[.traceparent] = traceparent }
        let signature = try RequestSignature.sign(
            method: request.method.rawValue, path: path, body: bytes, with: key, time: clock(),
            traceparent: traceparent)
        request.headerFields[.authorization] = signature.headerValue
        return try await next(request, body == nil ? nil : HTTPBody(bytes), baseURL)
    }
}

extension HTTPField.Name {
    /// The W3C trace context header.
    static let traceparent = HTTPField.Name("traceparent")!
}
