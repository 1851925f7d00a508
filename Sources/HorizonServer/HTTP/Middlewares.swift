import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonTracing
import Hummingbird
import Logging
import NIOCore
import OpenAPIRuntime
import Synchronization
import Tracing

extension HTTPField.Name {
    static let requestID = HTTPField.Name("X-Request-Id")!
    /// The W3C trace context header, honoured only under a request's signature.
    static let traceparent = HTTPField.Name("traceparent")!
}

/// The outermost layer: gives every request an id, turns every failure into the one error
/// envelope, logs one line per request and records its metrics. Nothing below it writes an
/// error response of its own, so every error a client sees has the same shape.
struct BoundaryMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let metrics: ServerMetrics
    /// The API's paths and their methods, to tell "no such path" (404) from "not this method" (405).
    let routes: RouteTable
    /// Whose `X-Forwarded-For` names the client (none: the peer is the client).
    var trustedProxies: TrustedProxies = .none

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let id = Self.requestID(from: request)
        let client = trustedProxies.clientAddress(
            peer: context.remoteAddress?.ipAddress, forwardedFor: request.headers[values: .forwardedFor])
        var logger = context.logger
        if context.isRelayed, logger[metadataKey: "request"] != nil {
            // A wallet's request inside the gateway's: its lines stay the outer request's (its id
            // and the terminal that carried it), with the inner id beside them.
            logger[metadataKey: "relayed"] = "\(id)"
        } else {
            logger[metadataKey: "request"] = "\(id)"
            // The client every limit counts, so that a log line names the client a refusal was for.
            logger[metadataKey: "client"] = "\(client)"
        }
        var scope = RequestScope(id: id, logger: logger, signer: nil)
        scope.peer = client
        // Whatever logs through Hummingbird's context logs with the request's id and client too.
        var context = context
        context.logger = logger
        let start = ContinuousClock.now
        var response: Response
        // The error code of an answer that is not a success, for the log line.
        var code: String? = nil
        do {
            response = try await RequestScope.$current.withValue(scope) { [context] in
                try await next(request, context)
            }
            code = scope.refusal.code
        } catch {
            let apiError = Self.apiError(for: error, request: request, routes: routes)
            if apiError.code == .internalError || apiError.code == .databaseUnavailable {
                // A relayed request's error is described by its type only: its text could quote
                // what the wallet sent, which nobody but the wallet and the handler may read.
                // Any other is described without the request's headers and body (secrets).
                let described = context.isRelayed ? "\(type(of: error))" : LogRedaction.describe(error)
                logger.error("request failed", metadata: ["error": "\(described)"])
            }
            metrics.recordError(code: apiError.code.rawValue)
            code = apiError.code.rawValue
            response = apiError.response(requestID: id)
        }
        response.headers[.requestID] = id
        let duration = ContinuousClock.now - start
        // Unknown paths share one label, so a scan of random paths cannot grow the metrics.
        let route =
            response.status == .notFound || response.status == .methodNotAllowed
            ? "unmatched" : (context.endpointPath ?? "unmatched")
        metrics.recordRequest(
            method: request.method.rawValue, route: route, status: response.status.code, duration: duration)
        var metadata: Logger.Metadata = [
            "ms": "\(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)"
        ]
        // A refusal (a lock-out, a limit, a revoked key, a conflict) is logged at notice with its
        // code, so an operator sees it at the default level; the code says why, never a secret.
        let refused = Self.refusalStatuses.contains(response.status.code)
        if let code { metadata["code"] = "\(code)" }
        // A relayed request's path is logged at debug only (the gateway's inner requests).
        logger.log(
            level: context.isRelayed ? .debug : refused ? .notice : .info,
            "\(request.method.rawValue) \(request.uri.path) \(response.status.code)", metadata: metadata)
        return response
    }

    /// The statuses of a refusal: unauthenticated, forbidden, in conflict, over a limit.
    static let refusalStatuses: Set<Int> = [401, 403, 409, 429]

    /// The caller's own id when it is a sane token (so a client can correlate), else a new one.
    static func requestID(from request: Request) -> String {
        if let given = request.headers[.requestID], (8...64).contains(given.utf8.count),
            given.utf8.allSatisfy({
                $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0)
                    || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            })
        {
            return given
        }
        return "req_" + (0..<12).map { _ in UInt8.random(in: 0...255) }.hexString
    }

    /// Maps anything thrown below to the error the client sees.
    static func apiError(for error: any Error, request: Request, routes: RouteTable) -> APIError {
        switch error {
        case let error as APIError: return error
        case let error as LedgerError: return APIError(error)
        case let error as ServerError:
            // The generated code wraps what the handler threw, and reports undecodable input.
            if let inner = error.underlyingError as? APIError { return inner }
            if let inner = error.underlyingError as? LedgerError { return APIError(inner) }
            if error.underlyingError is DecodingError, error.requestBody?.length == .known(0) {
                return APIError(.invalidRequest, "the request needs a JSON body (see openapi.yaml)")
            }
            if let inner = error.underlyingError as? DecodingError { return APIError(.malformedJSON, describe(inner)) }
            return APIError(.invalidRequest, "the request does not match the API: \(error.causeDescription)")
        case let error as HTTPError where error.status == .notFound:
            let path = request.uri.path
            if let methods = routes.methods(for: path) {
                let allowed = methods.map(\.rawValue).sorted().joined(separator: ", ")
                return APIError(
                    .methodNotAllowed, "\(request.method.rawValue) is not allowed on \(path); use \(allowed)",
                    headers: [.allow: allowed])
            }
            return APIError(.notFound, "there is no \(path) in this API (see openapi.yaml; paths start with /v1/)")
        case let error as HTTPError where error.status == .contentTooLarge:
            return APIError(.payloadTooLarge, "the request body is too large")
        default:
            return APIError(
                .internalError, "the server could not complete the request; the request id identifies it in the log")
        }
    }

    /// A decoding failure in words: which field, and what was wrong with it.
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "the field \"\(path(context.codingPath + [key]))\" is missing"
        case .typeMismatch(_, let context) where context.codingPath.isEmpty,
            .valueNotFound(_, let context) where context.codingPath.isEmpty:
            return "the body must be a JSON object"
        case .typeMismatch(let type, let context):
            return "the field \"\(path(context.codingPath))\" has the wrong type (expected \(typeName(type)))"
        case .valueNotFound(let type, let context):
            return "the field \"\(path(context.codingPath))\" is null (expected \(typeName(type)))"
        case .dataCorrupted(let context):
            // Foundation reports a number that does not fit its field (12.5 or 1e30 for an
            // integer) exactly as broken JSON, with no path: the message names both causes.
            if context.codingPath.isEmpty {
                return
                    "the body is not valid JSON, or has a number where an integer is expected (amounts are whole minor units)"
            }
            // OpenAPIRuntime's words for a field the schema does not have (additionalProperties: false).
            if context.debugDescription.hasPrefix("Additional properties are disabled") {
                return "the field \"\(path(context.codingPath))\" is not part of the API (see openapi.yaml)"
            }
            return "the field \"\(path(context.codingPath))\" is invalid: \(context.debugDescription)"
        @unknown default:
            return "the body could not be read"
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Bool.Type: "true or false"
        default: "\(type)"
        }
    }
}

/// The API's paths and methods, recorded as the generated code registers its handlers.
final class RouteTable: Sendable {
    private let table = Mutex<[String: [HTTPRequest.Method]]>([:])

    func add(_ method: HTTPRequest.Method, _ path: String) { table.withLock { $0[path, default: []].append(method) } }

    /// The methods served on `path`, nil for an unknown path. A `{name}` segment of a
    /// registered path matches any one segment; a literal segment wins over one, as in the
    /// router (`/v1/payments/offline` is not `/v1/payments/{paymentId}`).
    func methods(for path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return table.withLock { table in
            var best: (literals: Int, methods: [HTTPRequest.Method])?
            for (template, methods) in table {
                let pattern = template.split(separator: "/", omittingEmptySubsequences: false)
                guard pattern.count == segments.count else { continue }
                var literals = 0
                let matches = zip(pattern, segments).allSatisfy { part, segment in
                    if part.hasPrefix("{") && part.hasSuffix("}") { return !segment.isEmpty }
                    literals += 1
                    return part == segment
                }
                if matches, literals > (best?.literals ?? -1) { best = (literals, methods) }
            }
            return best?.methods
        }
    }
}

/// A token bucket per key: `burst` requests at once, refilled at `perSecond`.
final class RateLimiter: Sendable {
    struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }
    let burst: Double
    let perSecond: Double
    private let buckets = Mutex<[String: Bucket]>([:])

    init(burst: Int, perSecond: Double) {
        self.burst = Double(max(1, burst))
        self.perSecond = max(0.001, perSecond)
    }

    /// Takes a token for `key`; nil when allowed, else how long until one is available.
    func take(for key: String, at now: ContinuousClock.Instant) -> Duration? {
        buckets.withLock { buckets in
            // Forget full buckets now and then, so one-off peers do not accumulate.
            if buckets.count > 10_000 {
                buckets = buckets.filter { now - $0.value.updated < .seconds(burst / perSecond) }
            }
            var bucket = buckets[key] ?? Bucket(tokens: burst, updated: now)
            let elapsed = now - bucket.updated
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + seconds * perSecond)
            bucket.updated = now
            defer { buckets[key] = bucket }
            guard bucket.tokens >= 1 else { return .seconds((1 - bucket.tokens) / perSecond) }
            bucket.tokens -= 1
            return nil
        }
    }
}

/// Collects the body up to the server's limit (413 beyond it) and refuses bodies that are not
/// JSON (415), so handlers and the signature check see the whole body, once.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let maximumBytes: Int

    /// The whole body, or 413: a declared length over the limit before anything is read, a
    /// stream that grows over it as soon as it does. A live connection's body can be read only
    /// once, so whoever reads it first answers for it.
    static func collect(_ request: inout Request, upTo maximumBytes: Int) async throws -> ByteBuffer {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > maximumBytes {
            throw APIError(.payloadTooLarge, "the request body is \(length) bytes; the limit is \(maximumBytes)")
        }
        do {
            return try await request.collectBody(upTo: maximumBytes)
        } catch {
            throw APIError(.payloadTooLarge, "the request body is over the limit of \(maximumBytes) bytes")
        }
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var request = request
        let body = try await Self.collect(&request, upTo: maximumBytes)
        // The body is whole now: below, its length is known (also when it came chunked), so an
        // operation that needs a body can tell "none" from "not JSON".
        var head = request.head
        head.headerFields[.contentLength] = String(body.readableBytes)
        head.headerFields[.transferEncoding] = nil
        request = Request(head: head, body: .init(buffer: body))
        if body.readableBytes > 0 {
            let type = request.headers[.contentType]?.lowercased() ?? ""
            // The media type itself, without parameters such as charset ("application/jsonp" is not JSON).
            let mediaType = type.split(separator: ";", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces) ?? ""
            // The 3-D Secure and activation pages are HTML forms a browser posts.
            let isForm =
                mediaType == "application/x-www-form-urlencoded"
                && (ThreeDSecurePages.acceptsForms(path: request.uri.path)
                    || request.uri.path == ActivationLinkPages.path)
            // The gateway's sealed requests (RFC 9458).
            let isSealed = mediaType == "message/ohttp-req" && request.uri.path == "/v1/gateway"
            guard mediaType == "application/json" || isForm || isSealed else {
                throw APIError(
                    .unsupportedMediaType,
                    "the body must be JSON with Content-Type: application/json (got \(type.isEmpty ? "none" : type))")
            }
        }
        return try await next(request, context)
    }
}

/// Checks a `HorizonSignature` Authorization header: the signature over this request, its time
/// within the window, its nonce unused (in the database, so a replay to another server process
/// is refused too). A request without one goes on unauthenticated; an operation that needs a
/// signer refuses it there.
struct SignedRequestMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let ledger: Ledger
    /// How far a request's time may be from the server's, in seconds.
    let window: Int64
    static let bearerPrefix = "Bearer "
    let clock: @Sendable () -> Int64
    /// The request limit of a signed request or an admin session: by the key or session that
    /// proved itself, by the client address when it did not (nil: none, as for relayed requests).
    var limiter: RequestLimiter? = nil

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let limiter = context.isRelayed ? nil : limiter
        let address = RequestScope.current?.peer ?? "local"
        guard let header = request.headers[.authorization], header.hasPrefix(RequestSignature.scheme) else {
            // A merchant admin's session token is looked up by the operations that take one.
            if let header = request.headers[.authorization], header.hasPrefix(Self.bearerPrefix),
                var scope = RequestScope.current
            {
                let token = String(header.dropFirst(Self.bearerPrefix.count))
                if let limiter {
                    let hash = DashboardSecurity.hash(token)
                    // A merchant's API key is limited by itself, wherever its requests come from.
                    if token.hasPrefix(APIKeySecret.prefix), token.utf8.count <= APIKeySecret.maximumLength,
                        let key = try await ledger.apiKey(secretHash: hash, usedAt: clock()), key.isActive
                    {
                        try await limiter.take("apikey:" + key.id, describedAs: "this API key")
                    } else if try await ledger.dashboardSession(tokenHash: hash, at: clock()) != nil {
                        try await limiter.take("session:" + hash.hexString, describedAs: "this admin session")
                    } else {
                        try await limiter.take(RequestLimiter.addressKey(address), describedAs: address)
                    }
                }
                scope.bearerToken = token
                return try await RequestScope.$current.withValue(scope) { try await next(request, context) }
            }
            return try await next(request, context)
        }
        let key: PublicKeyBytes
        let signedTraceparent: String?
        let nonce: String
        let receivedAt: Int64
        var request = request
        // A payment makes its checks in its own transaction: see `PendingAdmission`.
        let admitsInTransaction =
            request.method == .post && request.uri.path == "/v1/payments" && RequestScope.current != nil
        do {
            (key, signedTraceparent, nonce, receivedAt) = try await verify(
                header, request: &request, usingNonce: !admitsInTransaction)
        } catch {
            // A request that did not prove a key counts against its address.
            try await limiter?.take(RequestLimiter.addressKey(address), describedAs: address)
            throw error
        }
        let rateKey = "key:" + key.bytes.hexString
        let rateDescription = "this signing key"
        guard admitsInTransaction, var scope = RequestScope.current else {
            try await limiter?.take(rateKey, describedAs: rateDescription)
            guard var scope = RequestScope.current else { return try await next(request, context) }
            scope.signer = key
            return try await serve(request, context: context, scope: scope, traceparent: signedTraceparent, next: next)
        }
        let admission = PendingAdmission(
            RequestAdmission(
                nonce: nonce, key: key, time: receivedAt, nonceWindow: 2 * window,
                rateLimit: limiter?.count(rateKey)),
            separately: { [self] in
                try await useNonce(nonce, for: key, at: receivedAt)
                try await limiter?.take(rateKey, describedAs: rateDescription)
            },
            refusal: { [limiter] reason in
                switch reason {
                case .replayed: Self.replayed()
                case .overLimit:
                    limiter?.refusal(describedAs: rateDescription)
                        ?? APIError(.rateLimited, "too many requests from \(rateDescription)")
                }
            })
        scope.signer = key
        scope.admission = admission
        do {
            let response = try await serve(
                request, context: context, scope: scope, traceparent: signedTraceparent, next: next)
            try await admission.admitSeparately()
            return response
        } catch {
            // A replay counts against its address, as every request that proved no new key does.
            func countingReplay(_ error: any Error) async throws -> any Error {
                if (error as? APIError)?.code == .requestReplayed {
                    try await limiter?.take(RequestLimiter.addressKey(address), describedAs: address)
                }
                return error
            }
            // An operation that failed before its transaction committed the checks: they are
            // made now, and their refusal answers instead (as it would have before the operation).
            do { try await admission.admitSeparately() } catch { throw try await countingReplay(error) }
            throw try await countingReplay(error)
        }
    }

    /// Serves a verified request, within its signer's trace when the signature covers one.
    private func serve(
        _ request: Request, context: Context, scope: RequestScope, traceparent signedTraceparent: String?,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let traceparent = signedTraceparent else {
            return try await RequestScope.$current.withValue(scope) { try await next(request, context) }
        }
        // The signer's trace continues here: the request's span, then what its operation opens.
        let parent = ServiceContext.topLevel.continuing(traceparent: traceparent)
        return try await InstrumentationSystem.tracer.withSpan(
            "\(request.method.rawValue) \(request.uri.path)", context: parent, ofKind: .server
        ) { span in
            span.attributes["http.request.method"] = request.method.rawValue
            span.attributes["url.path"] = request.uri.path
            let response = try await RequestScope.$current.withValue(scope) { try await next(request, context) }
            span.attributes["http.response.status_code"] = Int64(response.status.code)
            return response
        }
    }

    /// The key that signed this request, after its signature, time and nonce (unless the
    /// operation uses it: `usingNonce` false) were checked, and the request's `traceparent` if
    /// the signature covers it. A traceparent the signature does
    /// not cover (added by a proxy, or by anyone) is ignored, never trusted: the request is
    /// checked as signed without it.
    private func verify(_ header: String, request: inout Request, usingNonce: Bool) async throws -> (
        key: PublicKeyBytes, traceparent: String?, nonce: String, time: Int64
    ) {
        let signature: RequestSignature
        do { signature = try RequestSignature.parse(header) } catch {
            throw APIError(.unauthenticated, "\(error)", headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        let now = clock()
        // The caller chooses the time (any Int64): compare without arithmetic that could overflow.
        guard signature.time >= now - window, signature.time <= now + window else {
            let distance = signature.time.subtractingReportingOverflow(now)
            let seconds = distance.overflow ? "more than \(Int64.max)" : "\(distance.partialValue.magnitude)"
            throw APIError(
                .requestExpired,
                "the request was signed at \(signature.time), \(seconds) s from the server's clock (\(now)); the limit is \(window) s: check the device's clock",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        let body = try await request.collectBody(upTo: Int.max)
        let path = request.uri.description
        var signedTraceparent: String? = nil
        if let traceparent = request.headers[.traceparent],
            signature.isValid(
                method: request.method.rawValue, path: path, body: body.readableBytesView, traceparent: traceparent)
        {
            signedTraceparent = traceparent
        } else if !signature.isValid(method: request.method.rawValue, path: path, body: body.readableBytesView) {
            throw APIError(
                .signatureInvalid,
                "the request's signature does not verify for \(request.method.rawValue) \(path) and its body",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        let key: PublicKeyBytes
        do { key = try PublicKeyBytes(bytes: signature.publicKey) } catch {
            throw APIError(
                .unauthenticated, "the signing key is not an uncompressed P-256 public key",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        if usingNonce { try await useNonce(signature.nonce, for: key, at: now) }
        return (key, signedTraceparent, signature.nonce, now)
    }

    /// Records a request's nonce; a nonce its key used before is a replay, refused.
    private func useNonce(_ nonce: String, for key: PublicKeyBytes, at time: Int64) async throws {
        guard try await ledger.useNonce(nonce, for: key, window: 2 * window, at: time) else { throw Self.replayed() }
    }

    static func replayed() -> APIError {
        APIError(
            .requestReplayed, "this signed request was already received once; sign each request anew",
            headers: [.wwwAuthenticate: RequestSignature.scheme])
    }
}
