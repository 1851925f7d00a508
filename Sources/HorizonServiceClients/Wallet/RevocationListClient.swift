import Foundation
import HorizonCore
import HorizonSecureChannel
import HorizonServerClient
import Synchronization

/// Why the revocation list was not kept.
public enum RevocationListClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The list the server sent is not the one its signed daily token names (a network in the
    /// middle dropped or added an entry, or a revocation happened between the two and a fresh
    /// token did not agree either): nothing was kept; the list kept before stays.
    case unconfirmed(listed: Int, signed: UInt32)
    case malformedAnswer(String)
    case token(DailyTokenClientError)
    case service(ServiceClientError)

    public var description: String {
        switch self {
        case .unconfirmed(let listed, let signed):
            "the server's revocation list (\(listed) terminals) is not the one its signed daily token names (\(signed)); the list kept before is used"
        case .malformedAnswer(let reason): "the server's revocation list is malformed: \(reason)"
        case .token(let error): error.description
        case .service(let error): error.description
        }
    }
}

/// The terminals the wallet's server revoked (a lost or stolen till keeps its credential until
/// it expires; the list ends it sooner). The list itself travels unsigned, so it is kept only
/// when it matches the revocation state (count and digest) inside the server's signed daily
/// token: a network in the middle can then neither hide a revoked terminal nor add one. It is
/// kept in the cache for the times the wallet cannot reach the server; `anchors(_:)` applies it.
public final class RevocationListClient: Sendable {
    static let cacheName = "revocations"
    public let identityClient: IdentityClient
    public let cache: Cache
    private let current = Mutex<Set<[UInt8]>?>(nil)

    private struct Cached: Codable {
        let terminalKeyIDs: [String]
    }

    public init(identityClient: IdentityClient, cache: Cache) {
        self.identityClient = identityClient
        self.cache = cache
    }

    /// One list per server.
    private var cacheKey: String {
        Cache.key(client: Self.cacheName, scope: "anonymous", item: identityClient.serverURL.absoluteString)
    }

    /// The revoked terminal key ids kept from the last confirmed fetch (empty when none was).
    public var revokedTerminalKeyIDs: Set<[UInt8]> {
        if let ids = current.withLock({ $0 }) { return ids }
        let kept = cache.value(Cached.self, for: cacheKey)?.value.terminalKeyIDs ?? []
        let ids = Set(kept.compactMap { [UInt8](hexString: $0) })
        current.withLock { $0 = ids }
        return ids
    }

    /// `anchors`, each refusing the kept revoked terminals.
    public func anchors(_ anchors: [TrustAnchor]) -> [TrustAnchor] {
        let revoked = revokedTerminalKeyIDs
        return revoked.isEmpty ? anchors : anchors.map { $0.revoking(revoked) }
    }

    /// Fetches the list, checks it against the daily token's signed revocation state (asking for
    /// a fresh token once when they differ: a terminal may have been revoked in between) and
    /// keeps it. Returns the revoked key ids.
    @discardableResult
    public func fetch(checkingWith tokens: DailyTokenClient) async throws(RevocationListClientError) -> Set<[UInt8]> {
        var listed: [[UInt8]] = []
        var signed = DailyToken.RevocationState(revokedKeyIDs: [])
        for attempt in 0..<2 {
            let token: StoredDailyToken
            do {
                if attempt == 0, let kept = tokens.currentToken {
                    token = kept
                } else {
                    token = try await tokens.fetchDailyToken(refresh: attempt > 0).token
                }
            } catch {
                throw .token(error)
            }
            let hexes: [String]
            do {
                hexes = try await identityClient.perform(signed: false) { client throws(ServerClientError) in
                    try await client.revocations()
                }
            } catch {
                throw .service(error)
            }
            listed = []
            for hex in hexes {
                guard let id = [UInt8](hexString: hex.lowercased()), id.count == 8 else {
                    throw .malformedAnswer("\(hex) is not a terminal key id (16 hex digits)")
                }
                listed.append(id)
            }
            signed = token.token.revocation
            if DailyToken.RevocationState(revokedKeyIDs: listed) == signed {
                let ids = Set(listed)
                current.withLock { $0 = ids }
                cache.store(Cached(terminalKeyIDs: listed.map(\.hexString)), for: cacheKey)
                return ids
            }
        }
        throw .unconfirmed(listed: listed.count, signed: signed.count)
    }
}
