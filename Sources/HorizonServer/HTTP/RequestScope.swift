import HorizonProtocol
import Hummingbird
import Logging
import NIOCore

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
}

/// The request context: Hummingbird's core storage plus the peer's address for rate limits.
public struct ServerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// Bodies are limited (and collected) by `BodyLimitMiddleware`, with the server's own setting.
    public var maxUploadSize: Int { Int.max }
}
