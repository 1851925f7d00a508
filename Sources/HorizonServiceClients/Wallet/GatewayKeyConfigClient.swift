import Foundation
import HorizonObliviousHTTP
import HorizonSecureChannel
import HorizonServerClient
import Synchronization

/// Why there is no gateway key configuration to seal to.
public enum GatewayKeyConfigClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server's configuration is not signed by an anchor the wallet pinned (or offers no
    /// suite we speak): it was not kept, and nothing will be sealed to it.
    case untrusted(ObliviousHTTPError)
    case service(ServiceClientError)

    public var description: String {
        switch self {
        case .untrusted(let error): "the server's gateway key was refused: \(error)"
        case .service(let error): error.description
        }
    }
}

/// The gateway key configuration a wallet seals relayed requests to: fetched when
/// online, verified against the pinned anchors, kept in the cache so that it is there when the
/// network is not, and verified again whenever it is read back from the cache.
public final class GatewayKeyConfigClient: Sendable {
    static let cacheName = "gateway-key-config"
    public let identityClient: IdentityClient
    public let cache: Cache
    public let trustAnchors: [TrustAnchor]
    private let current = Mutex<ObliviousHTTPKeyConfiguration?>(nil)

    private struct Cached: Codable {
        let keyConfig: Data
        let signature: Data
    }

    public init(identityClient: IdentityClient, cache: Cache, trustAnchors: [TrustAnchor]) {
        self.identityClient = identityClient
        self.cache = cache
        self.trustAnchors = trustAnchors
    }

    /// One configuration per server, the same for every identity.
    private var cacheKey: String {
        Cache.key(client: Self.cacheName, scope: "anonymous", item: identityClient.serverURL.absoluteString)
    }

    /// The verified configuration kept from an earlier fetch (this process or the cache); nil if none.
    public var currentKeyConfiguration: ObliviousHTTPKeyConfiguration? {
        if let configuration = current.withLock({ $0 }) { return configuration }
        guard let cached = cache.value(Cached.self, for: cacheKey)?.value,
            let configuration = try? ObliviousHTTPKeyConfiguration(decoding: Array(cached.keyConfig)),
            let verified = try? SignedGatewayKeyConfiguration(
                configuration: configuration, signature: Array(cached.signature)
            ).verified(by: trustAnchors.map(\.publicKey))
        else { return nil }
        current.withLock { $0 = verified }
        return verified
    }

    /// Fetches the configuration from the server, verifies it against the pinned anchors and keeps it.
    @discardableResult
    public func fetchKeyConfiguration() async throws(GatewayKeyConfigClientError) -> ObliviousHTTPKeyConfiguration {
        let signed: SignedGatewayKeyConfiguration
        do {
            signed = try await identityClient.perform(signed: false) { client throws(ServerClientError) in
                try await client.gatewayKeyConfiguration()
            }
        } catch {
            throw .service(error)
        }
        let verified: ObliviousHTTPKeyConfiguration
        do { verified = try signed.verified(by: trustAnchors.map(\.publicKey)) } catch { throw .untrusted(error) }
        current.withLock { $0 = verified }
        cache.store(
            Cached(keyConfig: Data(signed.configuration.encoded()), signature: Data(signed.signature)), for: cacheKey)
        return verified
    }

    /// The kept configuration, or a fetched one when none is kept.
    public func keyConfiguration() async throws(GatewayKeyConfigClientError) -> ObliviousHTTPKeyConfiguration {
        if let configuration = currentKeyConfiguration { return configuration }
        return try await fetchKeyConfiguration()
    }

    /// Forgets the configuration (e.g. after the gateway answered "unknown key").
    public func reset() {
        current.withLock { $0 = nil }
        cache.reset(client: Self.cacheName)
    }
}
