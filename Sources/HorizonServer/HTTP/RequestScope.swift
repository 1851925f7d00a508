import HorizonProtocol
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// What the server knows about the request being served, for code below the HTTP layer (the
/// generated OpenAPI handlers do not see Hummingbird's context). Bound per request by the
/// middlewares, each adding what it learned.
public struct RequestScope: Sendable {
    @TaskLocal public static var current: RequestScope?

    /// The id in the error envelope, the `X-Request-Id` header and every log line of this request.
    public let id: String
    public var logger: Logger
    /// The key that signed this request, after its signature, time and nonce were checked.
    public var signer: PublicKeyBytes?
    /// An `Authorization: Bearer` token (a merchant admin's session), not checked yet: the
    /// operations that accept one look it up.
    public var bearerToken: String? = nil
    /// The client's address, for the sign-in rate limit ("local" without a socket).
    public var peer: String = "local"
    /// Why the request was refused, noted by code that answers a refusal itself (the dashboard's
    /// pages) rather than by throwing; the boundary logs it.
    public let refusal = RefusalNote()
    /// A payment submission's replay and rate checks, left for the payment's transaction.
    var admission: PendingAdmission? = nil
}

/// The code of a refusal, written below the boundary and read by it after the response.
public final class RefusalNote: Sendable {
    private let noted = Mutex<String?>(nil)

    public init() {}

    public func note(_ code: String) { noted.withLock { $0 = code } }

    public var code: String? { noted.withLock { $0 } }
}

/// The request context: Hummingbird's core storage plus the peer's address for rate limits.
public struct ServerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// A wallet's request the gateway opened: it is logged at debug only, and limited
    /// by the relay limit of the terminal that carried it rather than by a peer address.
    public let isRelayed: Bool

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
        isRelayed = false
    }

    /// The context of a request opened by the gateway: no socket of its own.
    init(relayedWith logger: Logger) {
        coreContext = .init(source: RelayedRequestSource(logger: logger))
        remoteAddress = nil
        isRelayed = true
    }

    /// Bodies are limited (and collected) by `BodyLimitMiddleware`, with the server's own setting.
    public var maxUploadSize: Int { Int.max }
}

/// Where a relayed request's context comes from: the gateway, not a connection.
struct RelayedRequestSource: RequestContextSource {
    let logger: Logger
}
