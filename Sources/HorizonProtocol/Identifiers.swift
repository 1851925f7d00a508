import HorizonCore

/// What a session is for. It travels in the advertisement so that a wallet can route a terminal
/// to the right decider (payment, or one of the three redemptions) before connecting.
public enum TransactionType: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case payment = 1
    case bonusRedemption = 2
    case goldRedemption = 3
    case couponRedemption = 4

    /// Redemptions spend points, memberships or coupons instead of money.
    public var isRedemption: Bool { self != .payment }

    public var description: String {
        switch self {
        case .payment: "payment"
        case .bonusRedemption: "bonus redemption"
        case .goldRedemption: "gold redemption"
        case .couponRedemption: "coupon redemption"
        }
    }

    /// Reads one byte, refusing values this version does not know.
    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> TransactionType {
        let raw = try reader.readUInt8(field)
        guard let type = TransactionType(rawValue: raw) else {
            throw .invalidValue(field: field, reason: "unknown transaction type \(raw)")
        }
        return type
    }
}

/// One advertised session of one terminal.
///
/// Zero is reserved so that an all-zero (blank or corrupted) advertisement never names a session.
public struct SessionID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    /// Nil for zero, which never names a session.
    public init?(rawValue: UInt64) {
        guard rawValue != 0 else { return nil }
        self.rawValue = rawValue
    }

    /// A fresh, never-zero identifier: 64 random bits make a collision between nearby terminals
    /// negligible.
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> SessionID {
        // Not `UInt64.random(in: 1...)`: its rejection loop never ends on a generator stuck at
        // zero. Mapping zero to one costs a bias of 2^-64.
        let value = generator.next()
        return SessionID(nonZero: value == 0 ? 1 : value)
    }

    private init(nonZero: UInt64) { rawValue = nonZero }

    /// Sixteen lower-case hex digits, the form logs and CLIs show.
    public var description: String {
        let digits = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> SessionID {
        let raw = try reader.read(UInt64.self, field)
        guard let id = SessionID(rawValue: raw) else { throw .invalidValue(field: field, reason: "must not be zero") }
        return id
    }

    func write(to writer: inout ByteWriter) { writer.write(rawValue) }
}

/// Eight bytes naming a terminal's signing key (a digest prefix the crypto layer computes):
/// short enough for the advertisement, long enough to tell terminals apart in a shop.
public struct TerminalKeyID: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 8
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireError) {
        try checkLength(bytes, Self.byteCount, field: "terminalKeyID")
        self.bytes = bytes
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { bytes.hexString }

    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> TerminalKeyID {
        TerminalKeyID(unchecked: try reader.readBytes(byteCount, field))
    }
}

/// A payment's identity, made by the wallet and stored before it is sent, so that a retry after
/// a broken link names the same payment and the ledger executes it at most once. Redemptions use
/// the same type for their redemption id.
public struct PaymentID: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 16
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireError) {
        try checkLength(bytes, Self.byteCount, field: "paymentID")
        self.bytes = bytes
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> PaymentID {
        PaymentID(unchecked: generator.bytes(byteCount))
    }

    public var description: String { bytes.hexString }

    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> PaymentID {
        PaymentID(unchecked: try reader.readBytes(byteCount, field))
    }
}

/// 16 random bytes each side contributes to a signed message, so a signature cannot be replayed
/// into another session or another offer.
public struct Nonce: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 16
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireError) {
        try checkLength(bytes, Self.byteCount, field: "nonce")
        self.bytes = bytes
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> Nonce {
        Nonce(unchecked: generator.bytes(byteCount))
    }

    public var description: String { bytes.hexString }

    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> Nonce {
        Nonce(unchecked: try reader.readBytes(byteCount, field))
    }
}

/// A SHA-256 digest (of a terminal's key, of an offer): computed in the crypto layer, carried here.
public struct DigestBytes: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 32
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireError) {
        try checkLength(bytes, Self.byteCount, field: "digest")
        self.bytes = bytes
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { bytes.hexString }

    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> DigestBytes {
        DigestBytes(unchecked: try reader.readBytes(byteCount, field))
    }
}

/// A raw P-256 ECDSA signature, r || s, 32 bytes each. This layer only carries it: signing and
/// verifying happen in the crypto layer, over a message's `signedBytes`.
public struct SignatureBytes: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 64
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireError) {
        try checkLength(bytes, Self.byteCount, field: "signature")
        self.bytes = bytes
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// Sixty-four zero bytes: the signature of a message not signed yet, so that its
    /// `signedBytes` can be computed. It never verifies.
    public static let unsigned = SignatureBytes(unchecked: [UInt8](repeating: 0, count: byteCount))

    public var description: String { bytes.hexString }

    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> SignatureBytes {
        SignatureBytes(unchecked: try reader.readBytes(byteCount, field))
    }
}

/// A P-256 public key as an uncompressed X9.63 point (0x04 || x || y).
///
/// Only the shape is checked here; whether the point is on the curve is the crypto layer's
/// business, which has to parse it anyway.
public struct PublicKeyBytes: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 65
    /// The X9.63 prefix of an uncompressed point.
    public static let uncompressedPrefix: UInt8 = 0x04
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireError) {
        try self.init(checking: bytes, field: "publicKey")
    }

    private init(checking bytes: [UInt8], field: String) throws(WireError) {
        try checkLength(bytes, Self.byteCount, field: field)
        guard bytes.first == Self.uncompressedPrefix else {
            throw .invalidValue(field: field, reason: Self.prefixReason(bytes.first ?? 0))
        }
        self.bytes = bytes
    }

    /// Why a key with this first byte is refused.
    static func prefixReason(_ firstByte: UInt8) -> String {
        "not an uncompressed P-256 point (first byte \([firstByte].hexString), expected 04)"
    }

    public var description: String { bytes.hexString }

    static func read(from reader: inout ByteReader, field: String) throws(WireError) -> PublicKeyBytes {
        try PublicKeyBytes(checking: try reader.readBytes(byteCount, field), field: field)
    }
}

// MARK: - Helpers

private func checkLength(_ bytes: [UInt8], _ expected: Int, field: String) throws(WireError) {
    guard bytes.count == expected else {
        throw .invalidValue(field: field, reason: "expected \(expected) bytes, got \(bytes.count)")
    }
}
