import Crypto
import HorizonCore

@testable import HorizonSecureChannel

/// A trust anchor, a terminal with a credential from it, and a wallet that trusts it.
struct PKI {
    static let now: UnixTime = 1_800_000_000
    let anchorKey = P256.Signing.PrivateKey()
    let terminalKey = P256.Signing.PrivateKey()
    let credential: TerminalCredential
    let identity: TerminalIdentity

    init(merchantName: String = "Café Horizon", notBefore: UnixTime = now - 3600, expiresAt: UnixTime = now + 86_400)
        throws
    {
        credential = try TerminalCredential.issue(
            by: anchorKey, merchantID: "m-001", merchantName: merchantName, terminalKey: terminalKey.publicKey,
            notBefore: notBefore, expiresAt: expiresAt)
        identity = try TerminalIdentity(signingKey: terminalKey, credential: credential)
    }

    var anchors: [TrustAnchor] { [TrustAnchor(publicKey: anchorKey.publicKey)] }

    func initiator(expectedKeyID: [UInt8]? = nil, context: [UInt8] = [1, 2, 3]) throws -> HandshakeInitiator {
        try HandshakeInitiator(
            trustAnchors: anchors, expectedTerminalKeyID: expectedKeyID ?? identity.keyID, context: context,
            startedAt: .zero)
    }

    func responder() -> HandshakeResponder { HandshakeResponder(identity: identity, startedAt: .zero) }

    /// Runs a whole handshake; returns (wallet channel, terminal channel).
    func establish() throws -> (wallet: SecureChannel, terminal: SecureChannel) {
        var initiator = try initiator()
        var responder = responder()
        let (serverHello, terminal) = try responder.receiveClientHello(initiator.clientHello, now: .zero)
        let wallet = try initiator.receiveServerHello(serverHello, now: .zero, wallClock: PKI.now)
        return (wallet, terminal)
    }
}

/// The parts of a ServerHello, to rebuild one as an attacker would.
struct ServerHelloParts {
    var ephemeralKey: [UInt8]
    var nonce: [UInt8]
    var terminalKey: [UInt8]
    var credential: [UInt8]
    var signature: [UInt8]

    init(_ bytes: [UInt8]) throws {
        let hello = try ServerHello.decode(bytes)
        ephemeralKey = hello.ephemeralKey
        nonce = hello.nonce
        terminalKey = hello.terminalKey
        credential = hello.credential
        signature = hello.signature
    }

    var unsigned: [UInt8] {
        var writer = ByteWriter()
        writer.write(SecureFrameType.serverHello)
        writer.write(HandshakeFormat.version)
        writer.write(raw: ephemeralKey)
        writer.write(raw: nonce)
        writer.write(raw: terminalKey)
        writer.write(lengthPrefixed: credential)
        return writer.bytes
    }

    var encoded: [UInt8] { unsigned + signature }

    /// Re-signs the transcript with `key`, as a terminal holding `key` would.
    mutating func resign(clientHello: [UInt8], with key: P256.Signing.PrivateKey) throws {
        signature = try sign(transcriptHash(clientHello: clientHello, serverHelloUnsigned: unsigned), with: key)
    }
}
