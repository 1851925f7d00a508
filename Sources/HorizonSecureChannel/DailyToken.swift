import Crypto
import Foundation
import HorizonCore

/// The server's signed daily allowance for one wallet's offline payments: which wallet key may
/// spend how much in which currency until when, and which revocation data the server had when it
/// signed.
///
/// It is signed by the issuer key wallets already pin (the trust anchor that vouches for
/// terminals), so a terminal that cannot reach the server checks it with the anchor it already
/// holds. The encoding is a compact binary structure with a version byte; the decoder is strict
/// (exact lengths, no trailing bytes, a validity of at most 24 h), so a later offline acceptance
/// can rely on every field without re-checking its shape.
public struct DailyToken: Sendable, Equatable {
    public static let version: UInt8 = 1
    /// The longest validity a token may claim: a token for longer is refused on decode.
    public static let maximumValidity: Int64 = 86_400
    public static let maximumEncodedSize = 512
    public static let tokenIDLength = 16
    /// Wallet account ids are short (`w_` and 32 hex digits); the bound keeps the token small.
    public static let maximumAccountIDBytes = 64
    /// A domain label no other signature of the issuer starts with, so a token's signature can
    /// never be taken for a terminal credential's or the other way round.
    static let signatureLabel = Array("horizon/daily-token/v1".utf8)

    /// Which revocation data the server had when it signed: the number of revoked terminal keys
    /// and the SHA-256 of their key ids in the order the server lists them. A terminal or wallet
    /// holding a different list knows it is not the one this token was issued against.
    public struct RevocationState: Sendable, Equatable {
        public let count: UInt32
        public let digest: [UInt8]

        public init(count: UInt32, digest: [UInt8]) {
            self.count = count
            self.digest = digest
        }

        /// The state of a list of revoked terminal key ids, in the order given.
        public init(revokedKeyIDs: [[UInt8]]) {
            var hash = SHA256()
            for id in revokedKeyIDs {
                // Length-prefixed so that two lists with the same bytes split differently differ.
                hash.update(data: [UInt8(truncatingIfNeeded: id.count)])
                hash.update(data: id)
            }
            self.init(count: UInt32(clamping: revokedKeyIDs.count), digest: Array(hash.finalize()))
        }
    }

    public let anchorKeyID: [UInt8]
    public let tokenID: [UInt8]
    /// The wallet's registered key (X9.63, 65 bytes): only this key's signature spends the token.
    public let walletKey: [UInt8]
    public let walletAccountID: String
    /// The most the wallet may spend offline in `allowance.currency` while the token is valid.
    public let allowance: Money
    public let issuedAt: UnixTime
    public let expiresAt: UnixTime
    public let revocation: RevocationState
    public let signature: [UInt8]

    /// Issues a token signed by `issuerKey`. `tokenID` is random unless given (tests only).
    public static func issue(
        by issuerKey: P256.Signing.PrivateKey, walletKey: P256.Signing.PublicKey, walletAccountID: String,
        allowance: Money, issuedAt: UnixTime, expiresAt: UnixTime, revocation: RevocationState,
        tokenID: [UInt8]? = nil
    ) throws(DailyTokenError) -> DailyToken {
        var generator = SystemRandomNumberGenerator()
        let id = tokenID ?? (0..<tokenIDLength).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let unsigned = DailyToken(
            anchorKeyID: keyIdentifier(of: issuerKey.publicKey), tokenID: id,
            walletKey: Array(walletKey.x963Representation), walletAccountID: walletAccountID, allowance: allowance,
            issuedAt: issuedAt, expiresAt: expiresAt, revocation: revocation, signature: [])
        try unsigned.checkFields()
        let signature: [UInt8]
        do { signature = try sign(unsigned.signedBytes, with: issuerKey) } catch {
            throw .signingFailed
        }
        return DailyToken(
            anchorKeyID: unsigned.anchorKeyID, tokenID: id, walletKey: unsigned.walletKey,
            walletAccountID: walletAccountID, allowance: allowance, issuedAt: issuedAt, expiresAt: expiresAt,
            revocation: revocation, signature: signature)
    }

    /// How long the token is valid, in seconds.
    public var validity: Int64 { expiresAt - issuedAt }

    public var tokenIDHex: String { tokenID.hexString }

    /// The rules every token obeys, issued or decoded.
    func checkFields() throws(DailyTokenError) {
        guard tokenID.count == Self.tokenIDLength else {
            throw .malformed(.invalidValue(field: "token id", reason: "must be \(Self.tokenIDLength) bytes"))
        }
        guard walletKey.count == 65, (try? P256.Signing.PublicKey(x963Representation: walletKey)) != nil else {
            throw .malformed(.invalidValue(field: "wallet key", reason: "not an uncompressed P-256 public key"))
        }
        guard !walletAccountID.isEmpty, walletAccountID.utf8.count <= Self.maximumAccountIDBytes else {
            throw .malformed(
                .invalidValue(
                    field: "wallet account id", reason: "must be 1 to \(Self.maximumAccountIDBytes) bytes"))
        }
        guard revocation.digest.count == 32 else {
            throw .malformed(.invalidValue(field: "revocation digest", reason: "must be 32 bytes"))
        }
        // Subtracted with overflow reported: the times come from the wire, and a trap on a
        // crafted token would let any peer crash the terminal checking it.
        let (length, overflow) = expiresAt.subtractingReportingOverflow(issuedAt)
        guard expiresAt > issuedAt, !overflow, length <= Self.maximumValidity else {
            throw .validityTooLong(issuedAt: issuedAt, expiresAt: expiresAt)
        }
    }

    var signedBytes: [UInt8] {
        var writer = ByteWriter(capacity: 256)
        writer.write(raw: Self.signatureLabel)
        writeBody(into: &writer)
        return writer.bytes
    }

    private func writeBody(into writer: inout ByteWriter) {
        writer.write(Self.version)
        writer.write(raw: anchorKeyID)
        writer.write(raw: tokenID)
        writer.write(raw: walletKey)
        writer.write(string: walletAccountID)
        writer.write(raw: Array(allowance.currency.code.utf8))
        writer.write(allowance.minorUnits)
        writer.write(issuedAt)
        writer.write(expiresAt)
        writer.write(revocation.count)
        writer.write(raw: revocation.digest)
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 280)
        writeBody(into: &writer)
        writer.write(raw: signature)
        return writer.bytes
    }

    /// Decodes a token strictly: the exact layout, a known currency, a non-negative allowance,
    /// a validity of at most 24 h, nothing after the signature. It does not check the signature
    /// (`verify` does, against the anchors the caller trusts).
    public static func decode(_ bytes: [UInt8]) throws(DailyTokenError) -> DailyToken {
        guard bytes.count <= maximumEncodedSize else {
            throw .malformed(.oversized(size: bytes.count, maximum: maximumEncodedSize))
        }
        var reader = ByteReader(bytes)
        let token: DailyToken
        do {
            let version = try reader.readUInt8("token version")
            guard version == Self.version else { throw DailyTokenError.unsupportedVersion(version) }
            let anchorKeyID = try reader.readBytes(8, "anchor key id")
            let tokenID = try reader.readBytes(tokenIDLength, "token id")
            let walletKey = try reader.readBytes(65, "wallet key")
            let account = try reader.readString("wallet account id", maximumBytes: maximumAccountIDBytes)
            let codeBytes = try reader.readBytes(3, "currency")
            guard let code = String(validating: codeBytes, as: UTF8.self) else {
                throw WireError.invalidUTF8(field: "currency")
            }
            let currency = try Currency(code: code)
            let minorUnits = try reader.read(Int64.self, "allowance")
            guard minorUnits >= 0 else { throw WireError.negativeAmount(field: "allowance") }
            let allowance = try Money(minorUnits: minorUnits, currency: currency)
            let issuedAt = try reader.read(Int64.self, "issued at")
            let expiresAt = try reader.read(Int64.self, "expires at")
            let revocationCount = try reader.read(UInt32.self, "revocation count")
            let revocationDigest = try reader.readBytes(32, "revocation digest")
            let signature = try reader.readBytes(64, "token signature")
            try reader.expectEnd()
            token = DailyToken(
                anchorKeyID: anchorKeyID, tokenID: tokenID, walletKey: walletKey, walletAccountID: account,
                allowance: allowance, issuedAt: issuedAt, expiresAt: expiresAt,
                revocation: RevocationState(count: revocationCount, digest: revocationDigest), signature: signature)
        } catch let error as WireError {
            throw .malformed(error)
        } catch let error as DailyTokenError {
            throw error
        } catch {
            throw .malformed(.invalidValue(field: "token", reason: "\(error)"))
        }
        try token.checkFields()
        return token
    }

    /// Checks the issuer's signature with a trusted anchor, and that the token is valid at `now`;
    /// with `walletKey`, that it is this wallet's token. Returns the anchor that signed.
    @discardableResult
    public func verify(trusting anchors: [TrustAnchor], at now: UnixTime, walletKey: P256.Signing.PublicKey? = nil)
        throws(DailyTokenError) -> TrustAnchor
    {
        try checkFields()
        guard let anchor = anchors.first(where: { $0.keyID == anchorKeyID }) else {
            throw .unknownIssuer(keyID: anchorKeyID.hexString)
        }
        guard verifySignature(signature, over: signedBytes, with: anchor.publicKey) else {
            throw .signatureInvalid
        }
        if let walletKey, Array(walletKey.x963Representation) != self.walletKey { throw .otherWallet }
        guard now.addingReportingOverflow(Self.clockSkew).overflow || now + Self.clockSkew >= issuedAt else {
            throw .notYetValid(issuedAt: issuedAt, now: now)
        }
        guard now < expiresAt else { throw .expired(expiresAt: expiresAt, now: now) }
        return anchor
    }

    /// Clocks of phones and terminals differ: a token issued a little in the future is accepted.
    public static let clockSkew: Int64 = 300

    /// How far before the wallet-signed confirmation's expiry (`Confirm.expiresAt`) a payment
    /// may be accepted offline: the acceptance time a terminal states lies within
    /// [expiresAt - 600 s, expiresAt]. A wallet signs a confirmation valid for 120 s by default;
    /// the rest is room for the wallet's and the terminal's clocks to differ. The wallet's
    /// signature so pins when the payment happened: a terminal cannot date it into another
    /// token's period.
    public static let offlineConfirmationWindow: Int64 = 600

    /// How long after its token's expiry an offline payment may still be forwarded: 72 h, so a
    /// terminal that stayed offline over a weekend still forwards what it took. Later forwards
    /// are refused and the merchant is not paid for them.
    public static let forwardGrace: Int64 = 72 * 3_600
}

/// Why a daily token was refused.
public enum DailyTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(WireError)
    case unsupportedVersion(UInt8)
    /// The token claims a validity above 24 h (or ends before it starts).
    case validityTooLong(issuedAt: UnixTime, expiresAt: UnixTime)
    case unknownIssuer(keyID: String)
    /// The signature does not verify: altered, signed by another key, or under another label.
    case signatureInvalid
    /// The token names another wallet key.
    case otherWallet
    case notYetValid(issuedAt: UnixTime, now: UnixTime)
    case expired(expiresAt: UnixTime, now: UnixTime)
    case signingFailed

    public var description: String {
        switch self {
        case .malformed(let error): "the daily token is malformed: \(error)"
        case .unsupportedVersion(let version):
            "the daily token has version \(version), which this program does not know; update it"
        case .validityTooLong(let issuedAt, let expiresAt):
            "the daily token claims a validity from \(issuedAt) to \(expiresAt); a token is valid for at most 24 h"
        case .unknownIssuer(let keyID):
            "the daily token is signed by issuer \(keyID), not by the anchor this wallet pinned"
        case .signatureInvalid: "the daily token's signature does not verify (altered, or not the issuer's)"
        case .otherWallet: "the daily token belongs to another wallet key"
        case .notYetValid(let issuedAt, let now):
            "the daily token is valid only from \(issuedAt) (now \(now)); check the clock"
        case .expired(let expiresAt, let now): "the daily token expired at \(expiresAt) (now \(now)); fetch a new one"
        case .signingFailed: "the daily token could not be signed"
        }
    }
}
