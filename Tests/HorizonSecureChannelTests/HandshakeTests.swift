import Crypto
import HorizonCore
import HorizonTestSupport
import Testing

@testable import HorizonSecureChannel

@Suite("Handshake", .offTheCooperativePool)
struct HandshakeTests {
    @Test func completesAndBothSidesAgree() throws {
        let pki = try PKI()
        var (wallet, terminal) = try pki.establish()
        #expect(wallet.transcriptHash == terminal.transcriptHash)
        #expect(terminal.context == [1, 2, 3])
        #expect(wallet.terminalCredential?.merchantName == "Café Horizon")
        #expect(terminal.terminalCredential == nil)
        let record = try wallet.seal(Array("confirm".utf8))
        #expect(try terminal.open(record) == Array("confirm".utf8))
        let reply = try terminal.seal(Array("receipt".utf8))
        #expect(try wallet.open(reply) == Array("receipt".utf8))
    }

    @Test func manInTheMiddleSwappingTheTerminalsEphemeralKeyIsRefused() throws {
        let pki = try PKI()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        var parts = try ServerHelloParts(serverHello)
        parts.ephemeralKey = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        #expect(throws: SecureChannelError.transcriptSignatureInvalid) {
            try initiator.receiveServerHello(parts.encoded, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func manInTheMiddleSwappingTheWalletsEphemeralKeyIsRefused() throws {
        let pki = try PKI()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        // The attacker forwards a ClientHello carrying its own key; the terminal signs that.
        var forged = initiator.clientHello
        let attackerKey = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        forged.replaceSubrange(2..<67, with: attackerKey)
        let (serverHello, _) = try responder.receiveClientHello(forged, now: .zero)
        #expect(throws: SecureChannelError.transcriptSignatureInvalid) {
            try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func credentialFromAnUnknownAnchorIsRefused() throws {
        let pki = try PKI()
        let rogueAnchor = P256.Signing.PrivateKey()
        let rogueCredential = try TerminalCredential.issue(
            by: rogueAnchor, merchantID: "m-001", merchantName: "Café Horizon", terminalKey: pki.terminalKey.publicKey,
            notBefore: PKI.now - 10, expiresAt: PKI.now + 10)
        var responder = HandshakeResponder(
            identity: try TerminalIdentity(signingKey: pki.terminalKey, credential: rogueCredential), startedAt: .zero)
        var initiator = try pki.initiator()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        #expect(
            throws: SecureChannelError.unknownTrustAnchor(keyID: keyIdentifier(of: rogueAnchor.publicKey).hexString)
        ) {
            try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func expiredCredentialIsRefused() throws {
        let pki = try PKI(notBefore: PKI.now - 100, expiresAt: PKI.now - 1)
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        #expect(throws: SecureChannelError.credentialExpired(expiresAt: PKI.now - 1, now: PKI.now)) {
            try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func credentialNotYetValidIsRefused() throws {
        let pki = try PKI(notBefore: PKI.now + 60, expiresAt: PKI.now + 600)
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        #expect(throws: SecureChannelError.credentialNotYetValid(notBefore: PKI.now + 60, now: PKI.now)) {
            try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func credentialOfAnotherTerminalKeyIsRefused() throws {
        // The attacker copies a real terminal's credential but holds only its own key, with which
        // it signs a perfectly valid transcript.
        let pki = try PKI()
        let attackerKey = P256.Signing.PrivateKey()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        var parts = try ServerHelloParts(serverHello)
        parts.terminalKey = Array(attackerKey.publicKey.x963Representation)
        try parts.resign(clientHello: initiator.clientHello, with: attackerKey)
        #expect(throws: SecureChannelError.credentialKeyMismatch) {
            try initiator.receiveServerHello(parts.encoded, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func copiedCredentialWithoutItsPrivateKeyCannotSign() throws {
        let pki = try PKI()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        var parts = try ServerHelloParts(serverHello)
        try parts.resign(clientHello: initiator.clientHello, with: P256.Signing.PrivateKey())
        #expect(throws: SecureChannelError.transcriptSignatureInvalid) {
            try initiator.receiveServerHello(parts.encoded, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func terminalOtherThanTheAdvertisedOneIsRefused() throws {
        // A rogue terminal with its own valid credential answers a session another terminal advertised.
        let advertised = try PKI()
        let rogue = try PKI()
        var initiator = try HandshakeInitiator(
            trustAnchors: [TrustAnchor(publicKey: rogue.anchorKey.publicKey)],
            expectedTerminalKeyID: advertised.identity.keyID, context: [], startedAt: .zero)
        var responder = rogue.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        #expect(
            throws: SecureChannelError.terminalKeyIDMismatch(
                expected: advertised.identity.keyID.hexString, presented: rogue.identity.keyID.hexString)
        ) {
            try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func tamperedCredentialIsRefused() throws {
        let pki = try PKI()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        var parts = try ServerHelloParts(serverHello)
        // Rename the merchant inside the credential (same length, so it still decodes).
        var credential = parts.credential
        let name = Array("Café Horizon".utf8)
        let at = try #require(credential.firstRange(of: name))
        let evil = Array("Evil Horizon!".utf8)
        #expect(evil.count == name.count)
        credential.replaceSubrange(at, with: evil)
        parts.credential = credential
        try parts.resign(clientHello: initiator.clientHello, with: pki.terminalKey)
        #expect(throws: SecureChannelError.credentialSignatureInvalid) {
            try initiator.receiveServerHello(parts.encoded, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func everyTruncationOfTheServerHelloIsRefused() throws {
        let pki = try PKI()
        var responder = pki.responder()
        let probe = try pki.initiator()
        let (serverHello, _) = try responder.receiveClientHello(probe.clientHello, now: .zero)
        for length in 0..<serverHello.count {
            var initiator = try pki.initiator()
            #expect(throws: SecureChannelError.self) {
                try initiator.receiveServerHello(Array(serverHello.prefix(length)), now: .zero, wallClock: PKI.now)
            }
        }
        var initiator = try pki.initiator()
        #expect(throws: SecureChannelError.malformed(.truncated(field: "handshake signature"))) {
            try initiator.receiveServerHello(Array(serverHello.dropLast()), now: .zero, wallClock: PKI.now)
        }
        #expect(throws: SecureChannelError.malformed(.truncated(field: "frame type"))) {
            try initiator.receiveServerHello([], now: .zero, wallClock: PKI.now)
        }
    }

    @Test func everyTruncationOfTheClientHelloIsRefused() throws {
        let pki = try PKI()
        let initiator = try pki.initiator()
        for length in 0..<initiator.clientHello.count {
            var responder = pki.responder()
            #expect(throws: SecureChannelError.self) {
                try responder.receiveClientHello(Array(initiator.clientHello.prefix(length)), now: .zero)
            }
        }
        var responder = pki.responder()
        #expect(throws: SecureChannelError.malformed(.truncated(field: "wallet nonce"))) {
            try responder.receiveClientHello(Array(initiator.clientHello.prefix(80)), now: .zero)
        }
    }

    @Test func trailingBytesWrongTypeAndVersionAreRefused() throws {
        let pki = try PKI()
        let initiator = try pki.initiator()
        var responder = pki.responder()
        #expect(throws: SecureChannelError.malformed(.trailingBytes(count: 1))) {
            try responder.receiveClientHello(initiator.clientHello + [0], now: .zero)
        }
        var wrongType = initiator.clientHello
        wrongType[0] = SecureFrameType.record
        #expect(throws: SecureChannelError.unexpectedMessage(expected: "ClientHello", received: 0x03)) {
            try responder.receiveClientHello(wrongType, now: .zero)
        }
        var wrongVersion = initiator.clientHello
        wrongVersion[1] = 9
        #expect(throws: SecureChannelError.unsupportedVersion(9)) {
            try responder.receiveClientHello(wrongVersion, now: .zero)
        }
    }

    /// A byte relay (a fake register forwarding a distant terminal) sees every handshake byte:
    /// both Hellos, so the whole transcript. The code must not be computable from them: both
    /// ends show the same code, and the transcript's hash (what the code was derived from before
    /// version 3) gives the relay another one on every connection.
    @Test func aByteRelaySeesEveryHandshakeByteButCannotComputeTheCode() throws {
        let pki = try PKI()
        func codeFromTheWire(_ clientHello: [UInt8], _ serverHello: [UInt8]) throws -> ConfirmationCode {
            let unsigned = try ServerHello.decode(serverHello).unsignedBytes
            var hasher = SHA256()
            hasher.update(data: Array("horizon/confirmation-code/v2".utf8))
            hasher.update(data: transcriptHash(clientHello: clientHello, serverHelloUnsigned: unsigned))
            return ConfirmationCode(derivedBytes: Array(hasher.finalize().prefix(4)))
        }
        var relayed = 0
        var codes: Set<ConfirmationCode> = []
        for _ in 0..<20 {
            var initiator = try pki.initiator()
            var responder = pki.responder()
            let clientHello = initiator.clientHello
            let (serverHello, terminal) = try responder.receiveClientHello(clientHello, now: .zero)
            let wallet = try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
            #expect(wallet.confirmationCode == terminal.confirmationCode)
            #expect(
                wallet.transcriptHash
                    == transcriptHash(
                        clientHello: clientHello, serverHelloUnsigned: try ServerHello.decode(serverHello).unsignedBytes
                    ))
            if try codeFromTheWire(clientHello, serverHello) == wallet.confirmationCode { relayed += 1 }
            codes.insert(wallet.confirmationCode)
        }
        #expect(relayed == 0, "a relay computed the code from the transcript on \(relayed) of 20 connections")
        #expect(codes.count >= 19, "every connection gets a new code")
    }

    /// Version 3 derives the code from the shared secret; a version 2 peer would show another
    /// code for the same connection, so either side refuses the other's version instead.
    @Test func aVersion2PeerIsRefusedOnEitherSide() throws {
        #expect(HandshakeFormat.version == 3)
        let pki = try PKI()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        var oldClientHello = initiator.clientHello
        oldClientHello[1] = 2
        #expect(throws: SecureChannelError.unsupportedVersion(2)) {
            try responder.receiveClientHello(oldClientHello, now: .zero)
        }
        var fresh = pki.responder()
        var (serverHello, _) = try fresh.receiveClientHello(initiator.clientHello, now: .zero)
        serverHello[1] = 2
        #expect(throws: SecureChannelError.unsupportedVersion(2)) {
            try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func ephemeralKeyNotOnTheCurveIsRefused() throws {
        let pki = try PKI()
        var forged = try pki.initiator().clientHello
        forged.replaceSubrange(3..<67, with: [UInt8](repeating: 0x42, count: 64))
        var responder = pki.responder()
        #expect(throws: SecureChannelError.invalidPublicKey(field: "wallet ephemeral key")) {
            try responder.receiveClientHello(forged, now: .zero)
        }
    }

    @Test func handshakeAfterTheDeadlineIsRefusedOnBothSides() throws {
        let pki = try PKI()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let late = Instant.zero + .seconds(5) + .nanoseconds(1)
        #expect(throws: SecureChannelError.handshakeTimedOut) {
            try responder.receiveClientHello(initiator.clientHello, now: late)
        }
        var onTime = pki.responder()
        let (serverHello, _) = try onTime.receiveClientHello(initiator.clientHello, now: .zero + .seconds(5))
        #expect(throws: SecureChannelError.handshakeTimedOut) {
            try initiator.receiveServerHello(serverHello, now: late, wallClock: PKI.now)
        }
    }

    @Test func aHandshakeAnswersOnlyOnce() throws {
        let pki = try PKI()
        var initiator = try pki.initiator()
        var responder = pki.responder()
        let (serverHello, _) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        #expect(throws: SecureChannelError.handshakeAlreadyComplete) {
            try responder.receiveClientHello(initiator.clientHello, now: .zero)
        }
        _ = try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        #expect(throws: SecureChannelError.handshakeAlreadyComplete) {
            try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        }
    }

    @Test func identityRefusesACredentialForAnotherKey() throws {
        let pki = try PKI()
        #expect(throws: SecureChannelError.credentialKeyMismatch) {
            try TerminalIdentity(signingKey: P256.Signing.PrivateKey(), credential: pki.credential)
        }
    }

    @Test func credentialRoundTripsAndRefusesMalformedEncodings() throws {
        let pki = try PKI()
        let encoded = pki.credential.encoded()
        #expect(try TerminalCredential.decode(encoded) == pki.credential)
        #expect(throws: SecureChannelError.malformed(.trailingBytes(count: 2))) {
            try TerminalCredential.decode(encoded + [0, 0])
        }
        #expect(throws: SecureChannelError.unsupportedVersion(1)) {
            try TerminalCredential.decode([1] + encoded.dropFirst())
        }
        #expect(throws: SecureChannelError.malformed(.oversized(size: 600, maximum: 512))) {
            try TerminalCredential.decode([UInt8](repeating: 1, count: 600))
        }
        #expect(throws: SecureChannelError.malformed(.truncated(field: "credential signature"))) {
            try TerminalCredential.decode(Array(encoded.dropLast()))
        }
    }

    @Test func contextOverItsLimitIsRefused() throws {
        let pki = try PKI()
        #expect(throws: SecureChannelError.malformed(.fieldTooLong(field: "context", length: 65, maximum: 64))) {
            try HandshakeInitiator(
                trustAnchors: pki.anchors, expectedTerminalKeyID: nil, context: [UInt8](repeating: 0, count: 65),
                startedAt: .zero)
        }
    }
}
