import Crypto
import Foundation
import HorizonAPI
import HorizonObliviousHTTP
import Synchronization

/// What the identity is, as the reference's `IdentityClient` tells its observers.
public enum IdentityState: Sendable, Equatable {
    /// No key yet (not registered, or the PIN was not entered).
    case notReady
    /// A key signs requests.
    case ready
    /// The server refused the key (revoked by a restoration elsewhere, or unknown): every
    /// client dropped what it cached for it.
    case invalidated(reason: String)
}

/// The reference's `IdentityClientIdentityDidGetReadyNotification` and
/// `IdentityClientDidInvalidateIdentityNotification`, as values of an `AsyncStream`.
public enum IdentityEvent: Sendable, Equatable {
    case identityDidGetReady
    case identityDidInvalidate(reason: String)
}

/// A service client that reacts to the identity: every client of this module registers itself
/// with its `IdentityClient`, which calls `reset()` when the identity is invalidated, so nothing
/// cached for a revoked key is ever shown again. A client of another file (`WalletClient`)
/// adopts it the same way.
public protocol IdentityObserver: AnyObject, Sendable {
    func identityDidGetReady() async
    /// Clears what the client cached; called when the identity is invalidated.
    func reset() async
}

extension IdentityObserver {
    public func identityDidGetReady() async {}
}

/// A service client whose only state is what it cached under its own name: `reset()` (on an
/// invalidated identity, or by the app) clears exactly that.
public protocol CachingServiceClient: IdentityObserver {
    static var cacheName: String { get }
    var cache: Cache { get }
}

extension CachingServiceClient {
    public func reset() async { cache.reset(client: Self.cacheName) }
}

/// Why a service client has no answer.
public enum ServiceClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No key signs requests yet: register (or unlock) the wallet first.
    case identityNotReady
    /// The server refused the wallet's key (revoked or unknown); the identity was invalidated
    /// and caches were cleared. The string is the server's message.
    case identityInvalidated(String)
    /// The server could not be reached, or refused the request, and nothing was cached to show.
    case server(ServerClientError)

    public var description: String {
        switch self {
        case .identityNotReady: "the wallet has no key to sign with yet; register it or enter its PIN first"
        case .identityInvalidated(let message): "the wallet's identity is no longer valid: \(message)"
        case .server(let error): error.description
        }
    }

    /// The server's stable error code, when it answered with one.
    public var code: String? {
        switch self {
        case .server(let error): error.code
        case .identityInvalidated: "identity_invalidated"
        case .identityNotReady: nil
        }
    }
}

/// The wallet's identity towards the server (the reference's `IdentityClient`, its server
/// side): the key that signs every service request, the state and its events, and the one
/// place where requests are made, so that a refused key invalidates the identity once for
/// every client and each outcome feeds `NetworkReachability`.
public final class IdentityClient: Sendable {
    public let serverURL: URL
    public let timeout: Duration
    /// Reachability fed by every request's outcome, if the app keeps one.
    public let reachability: NetworkReachability?
    let clock: @Sendable () -> Int64

    private struct Observer {
        weak var value: (any IdentityObserver)?
    }

    private struct Inner {
        var key: P256.Signing.PrivateKey?
        var state: IdentityState
        /// When set, every request goes sealed through this relay.
        var gatewayRoute: GatewayRoute?
        var observers: [Observer] = []
        var continuations: [UUID: AsyncStream<IdentityEvent>.Continuation] = [:]
    }

    private let inner: Mutex<Inner>

    /// - Parameters:
    ///   - signingKey: the wallet's registered key; without one the identity is `notReady`
    ///     until `setSigningKey(_:)`.
    ///   - clock: Unix seconds for request signatures (tests pass the server's clock).
    public init(
        serverURL: URL, signingKey: P256.Signing.PrivateKey? = nil, timeout: Duration = .seconds(10),
        reachability: NetworkReachability? = nil,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.serverURL = serverURL
        self.timeout = timeout
        self.reachability = reachability
        self.clock = clock
        inner = Mutex(Inner(key: signingKey, state: signingKey == nil ? .notReady : .ready))
    }

    public var state: IdentityState { inner.withLock { $0.state } }

    /// The public key of the identity, while it has one.
    public var publicKey: P256.Signing.PublicKey? { inner.withLock { $0.key?.publicKey } }

    /// Identity events from now on (not the current state: read `state` for that).
    public func events() -> AsyncStream<IdentityEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: IdentityEvent.self, bufferingPolicy: .unbounded)
        let id = UUID()
        inner.withLock { $0.continuations[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.inner.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Registers a client to be reset when the identity is invalidated (held weakly).
    public func addObserver(_ observer: any IdentityObserver) {
        inner.withLock { inner in
            inner.observers.removeAll { $0.value == nil }
            inner.observers.append(Observer(value: observer))
        }
    }

    /// A key is ready (registered, restored or unlocked): requests are signed with it from now on.
    public func setSigningKey(_ key: P256.Signing.PrivateKey) async {
        let (observers, continuations) = inner.withLock { inner in
            inner.key = key
            inner.state = .ready
            return (inner.observers.compactMap(\.value), Array(inner.continuations.values))
        }
        for continuation in continuations { continuation.yield(.identityDidGetReady) }
        for observer in observers { await observer.identityDidGetReady() }
    }

    /// Forgets the key while the wallet is locked: requests wait for the PIN again; nothing
    /// cached is dropped (the identity is still the same).
    public func forgetSigningKey() {
        inner.withLock { inner in
            inner.key = nil
            inner.state = .notReady
        }
    }

    /// Drops the key and resets every observing client (their caches are cleared).
    public func invalidate(reason: String) async {
        let (observers, continuations) = inner.withLock { inner in
            inner.key = nil
            inner.state = .invalidated(reason: reason)
            return (inner.observers.compactMap(\.value), Array(inner.continuations.values))
        }
        for observer in observers { await observer.reset() }
        for continuation in continuations { continuation.yield(.identityDidInvalidate(reason: reason)) }
    }

    /// A server client signing with the identity's key.
    public func signedClient() throws(ServiceClientError) -> HorizonServerClient {
        let (key, route) = inner.withLock { ($0.key, $0.gatewayRoute) }
        guard let key else {
            if case .invalidated(let reason) = state { throw .identityInvalidated(reason) }
            throw .identityNotReady
        }
        if let route { return route.client(serverURL: serverURL, signingKey: key, clock: clock) }
        return HorizonServerClient(serverURL: serverURL, signingKey: key, timeout: timeout, clock: clock)
    }

    /// A server client for the operations that need no key (health, status messages).
    public func unsignedClient() -> HorizonServerClient {
        if let route = inner.withLock({ $0.gatewayRoute }) {
            return route.client(serverURL: serverURL, signingKey: nil, clock: clock)
        }
        return HorizonServerClient(serverURL: serverURL, timeout: timeout, clock: clock)
    }

    /// Sends every request of every client of this identity sealed through `route`
    /// (a terminal relaying to the server's gateway) from now on; nil goes back to direct HTTP.
    public func routeThroughGateway(_ route: GatewayRoute?) { inner.withLock { $0.gatewayRoute = route } }

    /// Whether requests go through a relay (the wallet shows when it used the proxy).
    public var isRoutedThroughGateway: Bool { inner.withLock { $0.gatewayRoute != nil } }

    /// A short, stable name of the identity for cache keys: answers cached for one key are never
    /// served for another.
    public var cacheScope: String {
        guard let key = publicKey else { return "anonymous" }
        return Array(SHA256.hash(data: key.x963Representation)).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// Runs one signed request. A refused key (`wallet_key_revoked`, `wallet_unknown`)
    /// invalidates the identity; the outcome (answered or not) is reported to reachability.
    public func perform<T: Sendable>(
        signed: Bool = true, _ body: (HorizonServerClient) async throws(ServerClientError) -> T
    ) async throws(ServiceClientError) -> T {
        let client = signed ? try signedClient() : unsignedClient()
        let started = ContinuousClock.now
        do {
            let value = try await body(client)
            reachability?.recordSuccess(latency: ContinuousClock.now - started)
            return value
        } catch {
            switch error {
            case .unreachable, .timedOut:
                reachability?.recordFailure()
            case .refused(_, let code, let message, _):
                // The server answered: the network works, whatever it said.
                reachability?.recordSuccess(latency: ContinuousClock.now - started)
                if code == "wallet_key_revoked" || code == "wallet_unknown" {
                    await invalidate(reason: message)
                    throw .identityInvalidated(message)
                }
            case .invalidResponse, .invalidServerURL, .insecureServerURL, .cancelled, .notRelayed, .relayOutcomeUnknown:
                break
            }
            throw .server(error)
        }
    }

    /// A read that falls back to the last answer in `cache` when the server cannot be reached:
    /// the result says whether it is fresh or cached. Refusals are not hidden by the cache.
    public func fetch<T: Codable & Sendable>(
        _ item: String, for client: String, cache: Cache, signed: Bool = true,
        _ body: (HorizonServerClient) async throws(ServerClientError) -> T
    ) async throws(ServiceClientError) -> ServiceResult<T> {
        let key = Cache.key(client: client, scope: signed ? cacheScope : "anonymous", item: item)
        do {
            let value = try await perform(signed: signed, body)
            cache.store(value, for: key)
            return ServiceResult(value: value, freshness: .fresh)
        } catch {
            if case .server(let serverError) = error, serverError.isNetworkFailure,
                let cached = cache.value(T.self, for: key)
            {
                return ServiceResult(value: cached.value, freshness: .cached(storedAt: cached.storedAt))
            }
            throw error
        }
    }
}

/// An answer, and whether it came from the server just now or from the cache because the
/// server could not be reached.
public struct ServiceResult<Value: Sendable>: Sendable {
    public let value: Value
    public let freshness: Freshness

    public init(value: Value, freshness: Freshness) {
        self.value = value
        self.freshness = freshness
    }

    public var isFresh: Bool { freshness == .fresh }
}

extension ServiceResult: Equatable where Value: Equatable {}

public enum Freshness: Sendable, Equatable {
    case fresh
    /// The last known answer, stored at that time; the server could not be asked now.
    case cached(storedAt: Date)
}

extension ServerClientError {
    /// The server was not reached or did not answer: a cached answer may stand in.
    public var isNetworkFailure: Bool {
        switch self {
        case .unreachable, .timedOut: true
        default: false
        }
    }
}

/// A relay to the server's gateway and the verified key configuration requests are
/// sealed to (from `GatewayKeyConfigClient`).
public struct GatewayRoute: Sendable {
    public let keyConfiguration: ObliviousHTTPKeyConfiguration
    public let relay: @Sendable ([UInt8]) async throws -> [UInt8]

    public init(
        keyConfiguration: ObliviousHTTPKeyConfiguration, relay: @escaping @Sendable ([UInt8]) async throws -> [UInt8]
    ) {
        self.keyConfiguration = keyConfiguration
        self.relay = relay
    }

    func client(serverURL: URL, signingKey: P256.Signing.PrivateKey?, clock: @escaping @Sendable () -> Int64)
        -> HorizonServerClient
    {
        HorizonServerClient(
            serverURL: serverURL, signingKey: signingKey, gatewayKeyConfiguration: keyConfiguration, relay: relay,
            clock: clock)
    }
}
