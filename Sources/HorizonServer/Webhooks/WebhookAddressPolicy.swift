import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which machines a webhook may be sent to. A merchant names the address, and the server sends
/// from inside the operator's network: an address on this machine or that network (loopback,
/// link-local such as a cloud's metadata service, private, multicast, unspecified) would let a
/// merchant make the server post to services no one outside can reach. Checked when an endpoint
/// is registered and again before every attempt, since what a name resolves to can change.
/// `allowsPrivateAddresses` (a shop's own receiver on its network, tests) lifts the check.
public struct WebhookAddressPolicy: Sendable {
    public let allowsPrivateAddresses: Bool
    /// How long a name's resolution may take before the address counts as unresolved.
    public let resolutionTimeout: Duration

    /// What a name resolves to now (nil: no answer); the system's resolver unless given.
    let resolver: (@Sendable (String) async -> [Address]?)?

    public init(
        allowsPrivateAddresses: Bool, resolutionTimeout: Duration = .seconds(3),
        resolver: (@Sendable (String) async -> [Address]?)? = nil
    ) {
        self.allowsPrivateAddresses = allowsPrivateAddresses
        self.resolutionTimeout = resolutionTimeout
        self.resolver = resolver
    }

    /// Why a webhook may not go to `host`, or nil when it may. A name is resolved and refused
    /// when any of its addresses is; `refuseUnresolved` also refuses a name that does not
    /// resolve (before an attempt: it would go nowhere anyway; at registration a name not yet in
    /// the DNS is let through, and checked again before each attempt).
    public func refusal(ofHost host: String, refuseUnresolved: Bool) async -> String? {
        if allowsPrivateAddresses { return nil }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if let address = Self.literal(bare) { return Self.refusal(of: address).map { "\(bare) is \($0)" } }
        if bare.lowercased() == "localhost" || bare.lowercased().hasSuffix(".localhost") {
            return "\(bare) is a loopback address"
        }
        let addresses: [Address]?
        if let resolver { addresses = await resolver(bare) } else { addresses = await resolve(bare) }
        guard let addresses, !addresses.isEmpty else {
            return refuseUnresolved ? "\(bare) does not resolve" : nil
        }
        for address in addresses {
            if let reason = Self.refusal(of: address) { return "\(bare) resolves to \(address.text), \(reason)" }
        }
        return nil
    }

    /// An IPv4 (4 bytes) or IPv6 (16 bytes) address.
    public struct Address: Sendable, Equatable {
        public let bytes: [UInt8]

        public init(bytes: [UInt8]) { self.bytes = bytes }

        var text: String {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let family = bytes.count == 4 ? AF_INET : AF_INET6
            let done = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
            guard done != nil else { return "?" }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// The address `text` spells, when it is an IP literal.
    public static func literal(_ text: String) -> Address? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return Address(bytes: withUnsafeBytes(of: &v4) { Array($0) })
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return Address(bytes: withUnsafeBytes(of: &v6) { Array($0) })
        }
        return nil
    }

    /// What kind of address outside the public internet `address` is, or nil for a public one.
    public static func refusal(of address: Address) -> String? {
        let b = address.bytes
        if b.count == 4 {
            switch (b[0], b[1]) {
            case (0, _): return "an unspecified address"
            case (127, _): return "a loopback address"
            case (10, _), (172, 16...31), (192, 168): return "a private address"
            case (169, 254): return "a link-local address"
            case (224...239, _): return "a multicast address"
            case (255, 255) where b[2] == 255 && b[3] == 255: return "the broadcast address"
            default: return nil
            }
        }
        guard b.count == 16 else { return "not an IP address" }
        if b.allSatisfy({ $0 == 0 }) { return "an unspecified address" }
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return "a loopback address" }
        // An IPv4 address mapped into IPv6 (::ffff:a.b.c.d) is the IPv4 address.
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff {
            return refusal(of: Address(bytes: Array(b[12..<16])))
        }
        if b[0] == 0xff { return "a multicast address" }
        if b[0] == 0xfe && b[1] & 0xc0 == 0x80 { return "a link-local address" }
        if b[0] & 0xfe == 0xfc { return "a private address" }
        return nil
    }

    /// Every address `host` resolves to now (nil: no answer within the time limit, or none).
    /// getaddrinfo blocks, so it runs on a dispatch thread, never on the cooperative pool.
    func resolve(_ host: String) async -> [Address]? {
        let answer = FirstAnswer()
        let timeout = resolutionTimeout
        return await withCheckedContinuation { (continuation: CheckedContinuation<[Address]?, Never>) in
            answer.wait(continuation)
            DispatchQueue.global().async { answer.give(Self.lookUp(host)) }
            let nanoseconds =
                timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { answer.give(nil) }
        }
    }

    /// The lookup's answer or the time limit's, whichever comes first.
    private final class FirstAnswer: Sendable {
        private let continuation = Mutex<CheckedContinuation<[Address]?, Never>?>(nil)

        func wait(_ waiting: CheckedContinuation<[Address]?, Never>) { continuation.withLock { $0 = waiting } }

        func give(_ addresses: [Address]?) {
            continuation.withLock { pending in
                pending?.resume(returning: addresses)
                pending = nil
            }
        }
    }

    static func lookUp(_ host: String) -> [Address]? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var addresses: [Address] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let entry = next {
            if let socketAddress = entry.pointee.ai_addr {
                switch entry.pointee.ai_family {
                case AF_INET:
                    socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        var raw = v4.pointee.sin_addr
                        addresses.append(Address(bytes: withUnsafeBytes(of: &raw) { Array($0) }))
                    }
                case AF_INET6:
                    socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        var raw = v6.pointee.sin6_addr
                        addresses.append(Address(bytes: withUnsafeBytes(of: &raw) { Array($0) }))
                    }
                default: break
                }
            }
            next = entry.pointee.ai_next
        }
        return addresses
    }
}
