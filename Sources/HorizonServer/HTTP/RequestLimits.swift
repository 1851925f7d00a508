import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import Hummingbird

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension HTTPField.Name {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
}

/// An IP address in binary (4 bytes for IPv4, 16 for IPv6), so that every spelling of one
/// address (`::1`, `0:0::1`, `::ffff:127.0.0.1`) is the same key.
struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    let bytes: [UInt8]

    init?(_ text: some StringProtocol) {
        let text = String(text).trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, text.utf8.count <= 64 else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let all = withUnsafeBytes(of: &v6) { Array($0) }
        // An IPv4 client seen through a dual-stack socket is the same client.
        if all.prefix(10).allSatisfy({ $0 == 0 }), all[10] == 0xFF, all[11] == 0xFF {
            bytes = Array(all.suffix(4))
        } else {
            bytes = all
        }
    }

    var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        var v6 = in6_addr()
        withUnsafeMutableBytes(of: &v6) { $0.copyBytes(from: bytes) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count)) != nil else { return bytes.hexString }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The proxies whose `X-Forwarded-For` the server believes: addresses and CIDR ranges
/// (`127.0.0.1`, `10.0.0.0/8`, `fd00::/8`). None by default: then the header is ignored.
struct TrustedProxies: Sendable {
    struct Range: Sendable {
        let network: [UInt8]
        let prefix: Int

        func contains(_ address: IPAddress) -> Bool {
            guard address.bytes.count == network.count else { return false }
            var left = prefix
            for (a, b) in zip(address.bytes, network) where left > 0 {
                let bits = min(8, left)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if a & mask != b & mask { return false }
                left -= bits
            }
            return true
        }
    }

    let ranges: [Range]

    static let none = TrustedProxies(ranges: [])

    /// Parses the setting; the error names the entry that is not an address or range.
    init(_ entries: [String]) throws(ServerSetupError) {
        var ranges: [Range] = []
        for entry in entries {
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = IPAddress(parts[0]) else {
                throw .invalidSetting("trustedProxies: \"\(entry.prefix(80))\" is not an IP address or CIDR range")
            }
            let width = address.bytes.count * 8
            var prefix = width
            if parts.count == 2 {
                guard let given = Int(parts[1]), (0...width).contains(given) else {
                    throw .invalidSetting(
                        "trustedProxies: \"\(entry.prefix(80))\" has a prefix length outside 0...\(width)")
                }
                prefix = given
            }
            ranges.append(Range(network: address.bytes, prefix: prefix))
        }
        self.ranges = ranges
    }

    private init(ranges: [Range]) { self.ranges = ranges }

    func contains(_ address: IPAddress) -> Bool { ranges.contains { $0.contains(address) } }

    /// The client's address: the direct peer's, unless the peer is a trusted proxy; then the
    /// right-most address of `X-Forwarded-For` that is not a trusted proxy (every hop left of it
    /// was written by someone nobody vouches for). "local" without a socket. Every limit and
    /// log line uses this one answer.
    func clientAddress(peer: String?, forwardedFor: [String]) -> String {
        guard let peer else { return "local" }
        guard let peerAddress = IPAddress(peer) else { return peer }
        guard contains(peerAddress) else { return peerAddress.description }
        var nearest = peerAddress
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }
        for hop in hops.reversed() {
            // A hop that is not an address ends what can be believed: the last trusted one is the client.
            guard let address = IPAddress(hop) else { return nearest.description }
            guard contains(address) else { return address.description }
            nearest = address
        }
        return nearest.description
    }
}

/// Requests per client, counted in the database in fixed windows so that every server process
/// on it shares one limit: `burst` requests per window of `burst / perSecond` seconds (at least
/// one). One statement per request; old windows are deleted by the server's maintenance.
struct RequestLimiter: Sendable {
    let ledger: Ledger
    let burst: Int
    let window: Int64
    let now: @Sendable () -> UnixTime

    init(ledger: Ledger, burst: Int, perSecond: Double, now: @escaping @Sendable () -> UnixTime) {
        self.ledger = ledger
        self.burst = max(1, burst)
        self.window = max(1, Int64((Double(max(1, burst)) / max(0.001, perSecond)).rounded(.up)))
        self.now = now
    }

    /// Counts a request of `key` (`key:…` a signing key, `session:…` an admin session,
    /// `address:…` a client address); throws `rate_limited` with the wait when it is over.
    func take(_ key: String, describedAs who: String) async throws {
        let rate = count(key)
        let count: Int
        do { count = try await ledger.countRequest(key: key, windowStart: rate.windowStart) } catch {
            // Without the database nothing can be counted; the request goes on and meets the same
            // outage if it needs the database (an answer the client can act on, not a limit).
            RequestScope.current?.logger.warning("request not counted: the database did not answer")
            return
        }
        guard count > burst else { return }
        throw refusal(describedAs: who)
    }

    /// The count a request of `key` makes now, for a transaction that makes it (see
    /// `PendingAdmission`).
    func count(_ key: String) -> RateLimitCount {
        let time = now()
        return RateLimitCount(key: key, windowStart: time - ((time % window) + window) % window, limit: burst)
    }

    /// The answer to a request over the limit: `rate_limited` with the wait until the window ends.
    func refusal(describedAs who: String) -> APIError {
        let time = now()
        let start = time - ((time % window) + window) % window
        let seconds = max(1, start + window - time)
        return APIError(
            .rateLimited, "too many requests from \(who); retry after \(seconds) s",
            headers: [.retryAfter: "\(seconds)"])
    }

    /// The key of a client address.
    static func addressKey(_ address: String) -> String { "address:" + address }
}

/// Refuses a client that sends too many requests, by its client address. A request that
/// carries a signature or an admin session is limited by `SignedRequestMiddleware` instead,
/// by the key that proved itself (or by the address, when it did not).
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let limiter: RequestLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        // The gateway's inner requests were counted as their terminal's relays. The probes
        // (`/health`, `/ready`) are not limited: a load balancer polls them from one address,
        // and they must answer while the database does not.
        if context.isRelayed || ["/health", "/ready"].contains(request.uri.path) {
            return try await next(request, context)
        }
        // The dashboard's pages answer before the signature check: limited here, whatever they carry.
        if let header = request.headers[.authorization], !request.uri.path.hasPrefix("/dashboard"),
            header.hasPrefix(RequestSignature.scheme) || header.hasPrefix(SignedRequestMiddleware.bearerPrefix)
        {
            return try await next(request, context)
        }
        let address = RequestScope.current?.peer ?? "local"
        try await limiter.take(RequestLimiter.addressKey(address), describedAs: address)
        return try await next(request, context)
    }
}
