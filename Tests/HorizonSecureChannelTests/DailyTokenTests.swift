import Crypto
import HorizonCore
import Testing

@testable import HorizonSecureChannel

/// The daily token's codec and verification: what a terminal without the
/// server relies on, so every malformed or foreign token must be refused.
@Suite struct DailyTokenTests {
    static let now: UnixTime = 1_800_000_000
    let issuerKey = P256.Signing.PrivateKey()
    let walletKey = P256.Signing.PrivateKey()
    var anchors: [TrustAnchor] { [TrustAnchor(publicKey: issuerKey.publicKey)] }

    func token(validity: Int64 = 86_400, allowance: Int64 = 5000) throws -> DailyToken {
        try DailyToken.issue(
            by: issuerKey, walletKey: walletKey.publicKey, walletAccountID: "w_0123456789abcdef0123456789abcdef",
            allowance: try Money(minorUnits: allowance, currency: .eur), issuedAt: Self.now,
            expiresAt: Self.now + validity, revocation: .init(revokedKeyIDs: [[1, 2, 3, 4, 5, 6, 7, 8]]))
    }

    @Test func roundTrips() throws {
        let token = try token()
        let decoded = try DailyToken.decode(token.encoded())
        #expect(decoded == token)
        #expect(decoded.tokenID.count == 16)
        #expect(decoded.allowance == (try Money(minorUnits: 5000, currency: .eur)))
        #expect(decoded.revocation.count == 1)
        try decoded.verify(trusting: anchors, at: Self.now + 10, walletKey: walletKey.publicKey)
    }

    @Test func tokenIDsAreRandom() throws {
        #expect(try token().tokenID != token().tokenID)
    }

    @Test func everyTruncationIsRefused() throws {
        let bytes = try token().encoded()
        for length in 0..<bytes.count {
            #expect(throws: DailyTokenError.self) { try DailyToken.decode(Array(bytes.prefix(length))) }
        }
        #expect(throws: DailyTokenError.malformed(.trailingBytes(count: 1))) {
            try DailyToken.decode(bytes + [0])
        }
    }

    @Test func everyFlippedBitIsRefused() throws {
        let bytes = try token().encoded()
        for index in bytes.indices {
            for bit in 0..<8 {
                var altered = bytes
                altered[index] ^= 1 << bit
                // Either the decoder refuses the shape, or the signature no longer verifies.
                #expect(throws: DailyTokenError.self) {
                    try DailyToken.decode(altered).verify(trusting: anchors, at: Self.now + 10)
                }
            }
        }
    }

    @Test func anotherIssuerIsRefused() throws {
        let token = try token()
        let other = [TrustAnchor(publicKey: P256.Signing.PrivateKey().publicKey)]
        #expect(throws: DailyTokenError.unknownIssuer(keyID: token.anchorKeyID.hexString)) {
            try token.verify(trusting: other, at: Self.now)
        }
        // A forger who copies the pinned anchor's key id still has no valid signature.
        let forged = try DailyToken.issue(
            by: P256.Signing.PrivateKey(), walletKey: walletKey.publicKey, walletAccountID: token.walletAccountID,
            allowance: token.allowance, issuedAt: token.issuedAt, expiresAt: token.expiresAt,
            revocation: token.revocation)
        var bytes = forged.encoded()
        bytes.replaceSubrange(1..<9, with: token.anchorKeyID)
        #expect(throws: DailyTokenError.signatureInvalid) {
            try DailyToken.decode(bytes).verify(trusting: anchors, at: Self.now)
        }
    }

    @Test func aSignatureUnderAnotherDomainIsRefused() throws {
        let token = try token()
        // The same body signed without the token's label (as another kind of signed object
        // would be) does not verify as a token.
        var body = token.encoded()
        body.removeLast(64)
        var resigned = body
        resigned += try sign(body, with: issuerKey)
        #expect(throws: DailyTokenError.signatureInvalid) {
            try DailyToken.decode(resigned).verify(trusting: anchors, at: Self.now)
        }
        var credentialLabelled = Array("horizon/credential/v2".utf8)
        credentialLabelled += body
        #expect(throws: DailyTokenError.signatureInvalid) {
            try DailyToken.decode(body + (try sign(credentialLabelled, with: issuerKey)))
                .verify(trusting: anchors, at: Self.now)
        }
    }

    @Test func aValidityAbove24HoursIsRefused() throws {
        #expect(throws: DailyTokenError.validityTooLong(issuedAt: Self.now, expiresAt: Self.now + 86_401)) {
            try token(validity: 86_401)
        }
        // A token claiming more (signed by the issuer, so only the rule stops it) is refused on decode.
        let valid = try token()
        var body = valid.encoded()
        body.removeLast(64)
        let expiresOffset = body.count - 32 - 4 - 8
        var writer = ByteWriter()
        writer.write(Self.now + 2 * 86_400)
        body.replaceSubrange(expiresOffset..<(expiresOffset + 8), with: writer.bytes)
        let signed = try sign(DailyToken.signatureLabel + body, with: issuerKey)
        #expect(throws: DailyTokenError.validityTooLong(issuedAt: Self.now, expiresAt: Self.now + 2 * 86_400)) {
            try DailyToken.decode(body + signed)
        }
    }

    @Test func expiryAndWalletAreChecked() throws {
        let token = try token(validity: 3600)
        #expect(throws: DailyTokenError.expired(expiresAt: Self.now + 3600, now: Self.now + 3600)) {
            try token.verify(trusting: anchors, at: Self.now + 3600)
        }
        #expect(throws: DailyTokenError.notYetValid(issuedAt: Self.now, now: Self.now - 301)) {
            try token.verify(trusting: anchors, at: Self.now - 301)
        }
        #expect(throws: DailyTokenError.otherWallet) {
            try token.verify(trusting: anchors, at: Self.now, walletKey: P256.Signing.PrivateKey().publicKey)
        }
    }

    @Test func theRevocationStateDependsOnTheList() {
        let one = DailyToken.RevocationState(revokedKeyIDs: [[1, 2], [3]])
        let other = DailyToken.RevocationState(revokedKeyIDs: [[1], [2, 3]])
        #expect(one.count == 2)
        #expect(one.digest != other.digest)
        #expect(DailyToken.RevocationState(revokedKeyIDs: []).count == 0)
    }
}
