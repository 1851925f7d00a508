import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonSecureChannel
import HorizonServerClient
import HorizonSettlement
import Synchronization

/// The day's token as the wallet keeps it: the verified token, its signed bytes (what a terminal
/// is shown), and what the wallet has spent offline against it since.
public struct StoredDailyToken: Sendable, Equatable {
    public let token: DailyToken
    public let encoded: [UInt8]
    /// Offline spending the wallet has recorded against this token (payments
    /// accepted offline lower it); the remaining allowance is the token's allowance minus this.
    public let spentOffline: Int64

    public var remainingAllowance: Money {
        (try? Money(minorUnits: max(0, token.allowance.minorUnits - spentOffline), currency: token.allowance.currency))
            ?? .zero(token.allowance.currency)
    }
}

/// Why the daily token client has no token to give.
public enum DailyTokenClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server (or the cache) gave a token that does not verify against the pinned anchor, or
    /// is not this wallet's: it is not kept.
    case invalidToken(DailyTokenError)
    /// The server's answer holds no decodable token.
    case malformedAnswer(String)
    case service(ServiceClientError)

    public var description: String {
        switch self {
        case .invalidToken(let error): "the server's daily token was refused: \(error)"
        case .malformedAnswer(let reason): "the server's daily token answer is malformed: \(reason)"
        case .service(let error): error.description
        }
    }

    public var code: String? {
        switch self {
        case .invalidToken: "daily_token_invalid"
        case .malformedAnswer: nil
        case .service(let error): error.code
        }
    }
}

/// The reference's `DailyTokenClient`: fetches the day's token when online and refreshes it
/// before it runs out, so that the wallet can pay offline. Every token is
/// verified against the anchors the wallet pinned and against the wallet's own key before it is
/// kept; the cache holds the signed bytes and is verified again when read back, so a tampered
/// cache file is never trusted.
public final class DailyTokenClient: IdentityObserver {
    static let cacheName = "daily-token"
    public let identityClient: IdentityClient
    public let cache: Cache
    /// The anchors the wallet pinned (the server's issuer key).
    public let trustAnchors: [TrustAnchor]
    /// The token's currency; nil lets the server choose the wallet's only currency.
    public let currency: String?
    private let clock: @Sendable () -> Int64

    private struct CachedToken: Codable {
        let token: Data
        let spentOffline: Int64
    }

    private let current = Mutex<StoredDailyToken?>(nil)

    public init(
        identityClient: IdentityClient, cache: Cache, trustAnchors: [TrustAnchor], currency: String? = nil,
        clock: (@Sendable () -> Int64)? = nil
    ) {
        self.identityClient = identityClient
        self.cache = cache
        self.trustAnchors = trustAnchors
        self.currency = currency
        self.clock = clock ?? identityClient.clock
        identityClient.addObserver(self)
    }

    private var cacheKey: String {
        Cache.key(client: Self.cacheName, scope: identityClient.cacheScope, item: currency ?? "default")
    }

    /// The kept token if it is still valid now (from memory, or the cache of an earlier run);
    /// nil when there is none, it expired, or it no longer verifies.
    public var currentToken: StoredDailyToken? { currentToken(at: clock()) }

    public func currentToken(at now: Int64) -> StoredDailyToken? {
        if let token = current.withLock({ $0 }), (try? verify(token.token, at: now)) != nil { return token }
        guard let cached = cache.value(CachedToken.self, for: cacheKey)?.value,
            let token = try? DailyToken.decode(Array(cached.token)), (try? verify(token, at: now)) != nil
        else { return nil }
        let stored = StoredDailyToken(token: token, encoded: Array(cached.token), spentOffline: cached.spentOffline)
        current.withLock { $0 = stored }
        return stored
    }

    /// What the wallet may still spend offline now (nil without a valid token).
    public var remainingAllowance: Money? { currentToken?.remainingAllowance }

    /// Asks the server for the day's token (the same one while it is valid; with `refresh`, a new
    /// one if the balance or the revocation data changed), verifies it and keeps it. Returns the
    /// token and whether the server signed it just now.
    @discardableResult
    public func fetchDailyToken(refresh: Bool = false) async throws(DailyTokenClientError)
        -> (token: StoredDailyToken, issuedNow: Bool)
    {
        let answer: Components.Schemas.DailyTokenResponse
        do {
            answer = try await identityClient.perform { client throws(ServerClientError) in
                try await client.dailyToken(currency: currency, refresh: refresh)
            }
        } catch {
            throw .service(error)
        }
        guard let bytes = Data(base64Encoded: answer.token) else {
            throw .malformedAnswer("token is not base64")
        }
        let token: DailyToken
        do {
            token = try DailyToken.decode(Array(bytes))
            try verify(token, at: clock())
        } catch {
            throw .invalidToken(error)
        }
        // Offline spending recorded against the same token carries over; a new token starts afresh.
        let spent = current.withLock { $0?.token.tokenID == token.tokenID ? $0?.spentOffline ?? 0 : 0 }
        let stored = StoredDailyToken(token: token, encoded: Array(bytes), spentOffline: spent)
        keep(stored)
        return (stored, answer.issuedNow)
    }

    /// Fetches a token when there is none, or less than a quarter of its validity is left.
    /// Returns the token to use and whether it was fetched now; nil when none is valid and the
    /// server cannot give one (the caller pays online or not at all).
    public func refreshIfNeeded(now: Int64? = nil) async throws(DailyTokenClientError)
        -> (token: StoredDailyToken, fetched: Bool)
    {
        let time = now ?? clock()
        if let token = currentToken(at: time), !Self.needsRefresh(token.token, at: time) {
            return (token, false)
        }
        // The server signs a new token on a refresh when its stored one is in its last quarter
        // too, so this gets a token good for a whole validity again.
        let fetched = try await fetchDailyToken(refresh: true)
        return (fetched.token, true)
    }

    /// Whether less than a quarter of the token's validity is left at `now`.
    public static func needsRefresh(_ token: DailyToken, at now: Int64) -> Bool {
        // A verified token's times are within 24 h of each other; `now` is the caller's clock,
        // so the subtraction is guarded all the same.
        let (left, overflow) = token.expiresAt.subtractingReportingOverflow(now)
        return overflow || left < (token.validity + 3) / 4
    }

    /// Records `amount` spent offline against the current token (a payment a terminal
    /// accepted offline).
    public func recordOfflineSpending(_ amount: Money) {
        // From the cache when this run has not read the token yet: a payment accepted offline may
        // be answered only in a later run (it was pending when the link broke).
        guard let token = current.withLock({ $0 }) ?? currentToken, amount.currency == token.token.allowance.currency
        else { return }
        keep(
            StoredDailyToken(
                token: token.token, encoded: token.encoded, spentOffline: token.spentOffline + amount.minorUnits))
    }

    public func reset() async {
        current.withLock { $0 = nil }
        cache.reset(client: Self.cacheName)
    }

    private func keep(_ stored: StoredDailyToken) {
        current.withLock { $0 = stored }
        cache.store(CachedToken(token: Data(stored.encoded), spentOffline: stored.spentOffline), for: cacheKey)
    }

    private func verify(_ token: DailyToken, at now: Int64) throws(DailyTokenError) {
        guard let key = identityClient.publicKey else { throw .otherWallet }
        try token.verify(trusting: trustAnchors, at: now, walletKey: key)
    }
}

/// The payment client asks it for the token when a terminal cannot reach its server,
/// and records what the terminal accepted offline against it.
extension DailyTokenClient: OfflineTokenProvider {
    /// The current token's signed bytes, as the server issued them; nil without a valid one.
    public var presentableDailyToken: [UInt8]? { currentToken?.encoded }
}
