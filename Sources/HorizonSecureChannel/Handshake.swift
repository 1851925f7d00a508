import Crypto
import Foundation
import HorizonCore

/// Frame types of the secure channel layer (the first byte of every link message).
public enum SecureFrameType {
    public static let clientHello: UInt8 = 0x01
    public static let serverHello: UInt8 = 0x02
    public static let record: UInt8 = 0x03
}

/// The handshake, one round trip, wallet first:
///
///     ClientHello  = 0x01 | version | wallet ephemeral key (65) | wallet nonce (32) | context (≤ 64)
///     ServerHello  = 0x02 | version | terminal ephemeral key (65) | terminal nonce (32)
///                    | terminal key (65) | credential (≤ 512) | signature (64)
///
/// The terminal signs SHA-256("horizon/handshake/v3" | ClientHello | ServerHello before the
/// signature) with its credential's key, so a man in the middle who swaps either ephemeral key
/// breaks the signature. ECDH of the ephemeral keys, through HKDF-SHA256 salted with that
/// transcript hash, gives one AES-256-GCM key per direction and, with a label of its own, the
/// confirmation code both sides show (`ConfirmationCode`).
public enum HandshakeFormat {
    /// 2 since credentials carry the terminal label; 3 since the confirmation code comes from the
    /// shared secret instead of the transcript (a version 2 peer would show another code for the
    /// same connection, so the two are refused, never mixed).
    public static let version: UInt8 = 3
    public static let nonceSize = 32
    public static let publicKeySize = 65
    public static let maximumContextSize = 64
    static let transcriptLabel = Array("horizon/handshake/v3".utf8)
    static let walletToTerminalInfo = Array("horizon/v3 wallet-to-terminal".utf8)
    static let terminalToWalletInfo = Array("horizon/v3 terminal-to-wallet".utf8)
    static let confirmationCodeInfo = Array("horizon/v3 confirmation-code".utf8)
}

/// Time allowed for a handshake, measured from the link coming up.
public struct HandshakeTimeout: Sendable, Equatable {
    public var duration: Duration
    public init(_ duration: Duration = .seconds(5)) { self.duration = duration }
}

/// The wallet's side of the handshake.
public struct HandshakeInitiator: Sendable {
    public let clientHello: [UInt8]
    public let deadline: Instant
    private let ephemeralKey: P256.KeyAgreement.PrivateKey
    private let trustAnchors: [TrustAnchor]
    private let expectedTerminalKeyID: [UInt8]?
    private let context: [UInt8]
    private var finished = false

    /// - Parameters:
    ///   - expectedTerminalKeyID: the key id the advertisement carried; the terminal must match it.
    ///   - context: bytes the terminal needs to route the connection (the session id), bound into
    ///     the signed transcript.
    public init(
        trustAnchors: [TrustAnchor], expectedTerminalKeyID: [UInt8]?, context: [UInt8], startedAt: Instant,
        timeout: HandshakeTimeout = HandshakeTimeout()
    ) throws(SecureChannelError) {
        guard context.count <= HandshakeFormat.maximumContextSize else {
            throw .malformed(
                .fieldTooLong(field: "context", length: context.count, maximum: HandshakeFormat.maximumContextSize))
        }
        ephemeralKey = ShortLivedKeys.agreementKey()
        self.trustAnchors = trustAnchors
        self.expectedTerminalKeyID = expectedTerminalKeyID
        self.context = context
        deadline = startedAt + timeout.duration
        var writer = ByteWriter(capacity: 180)
        writer.write(SecureFrameType.clientHello)
        writer.write(HandshakeFormat.version)
        writer.write(raw: ephemeralKey.publicKey.x963Representation)
        writer.write(raw: SecureRandom.bytes(HandshakeFormat.nonceSize))
        writer.write(lengthPrefixed: context)
        clientHello = writer.bytes
    }

    /// Verifies the terminal's answer and returns the established channel.
    public mutating func receiveServerHello(_ bytes: [UInt8], now: Instant, wallClock: UnixTime)
        throws(SecureChannelError) -> SecureChannel
    {
        guard !finished else { throw .handshakeAlreadyComplete }
        guard now <= deadline else { throw .handshakeTimedOut }
        let hello = try ServerHello.decode(bytes)
        let credential = try TerminalCredential.decode(hello.credential)
        let anchor = try credential.verify(trusting: trustAnchors, at: wallClock)
        guard credential.terminalKey == hello.terminalKey else { throw .credentialKeyMismatch }
        let terminalKey = try credential.terminalPublicKey()
        if let expected = expectedTerminalKeyID, expected != credential.terminalKeyID {
            throw .terminalKeyIDMismatch(expected: expected.hexString, presented: credential.terminalKeyID.hexString)
        }
        let transcript = transcriptHash(clientHello: clientHello, serverHelloUnsigned: hello.unsignedBytes)
        guard verifySignature(hello.signature, over: transcript, with: terminalKey) else {
            throw .transcriptSignatureInvalid
        }
        let peerEphemeral: P256.KeyAgreement.PublicKey
        do {
            peerEphemeral = try P256.KeyAgreement.PublicKey(x963Representation: hello.ephemeralKey)
        } catch {
            throw .invalidPublicKey(field: "terminal ephemeral key")
        }
        let keys = try deriveKeys(ephemeralKey, peerEphemeral, transcript: transcript)
        finished = true
        return SecureChannel(
            sendKey: keys.walletToTerminal, receiveKey: keys.terminalToWallet, transcriptHash: transcript,
            confirmationCode: keys.confirmationCode, context: context, terminalCredential: credential,
            vouchingAnchor: anchor)
    }
}

/// The terminal's side of the handshake.
public struct HandshakeResponder: Sendable {
    public let deadline: Instant
    private let identity: TerminalIdentity
    private var finished = false

    public init(identity: TerminalIdentity, startedAt: Instant, timeout: HandshakeTimeout = HandshakeTimeout()) {
        self.identity = identity
        deadline = startedAt + timeout.duration
    }

    /// Answers a wallet's ClientHello; returns the ServerHello to send and the channel.
    public mutating func receiveClientHello(_ bytes: [UInt8], now: Instant) throws(SecureChannelError)
        -> (serverHello: [UInt8], channel: SecureChannel)
    {
        guard !finished else { throw .handshakeAlreadyComplete }
        guard now <= deadline else { throw .handshakeTimedOut }
        let hello = try ClientHello.decode(bytes)
        let peerEphemeral: P256.KeyAgreement.PublicKey
        do {
            peerEphemeral = try P256.KeyAgreement.PublicKey(x963Representation: hello.ephemeralKey)
        } catch {
            throw .invalidPublicKey(field: "wallet ephemeral key")
        }
        let ephemeralKey = ShortLivedKeys.agreementKey()
        var writer = ByteWriter(capacity: 420)
        writer.write(SecureFrameType.serverHello)
        writer.write(HandshakeFormat.version)
        writer.write(raw: ephemeralKey.publicKey.x963Representation)
        writer.write(raw: SecureRandom.bytes(HandshakeFormat.nonceSize))
        writer.write(raw: identity.credential.terminalKey)
        writer.write(lengthPrefixed: identity.credential.encoded())
        let transcript = transcriptHash(clientHello: bytes, serverHelloUnsigned: writer.bytes)
        writer.write(raw: try sign(transcript, with: identity.signingKey))
        let keys = try deriveKeys(ephemeralKey, peerEphemeral, transcript: transcript)
        finished = true
        let channel = SecureChannel(
            sendKey: keys.terminalToWallet, receiveKey: keys.walletToTerminal, transcriptHash: transcript,
            confirmationCode: keys.confirmationCode, context: hello.context, terminalCredential: nil,
            vouchingAnchor: nil)
        return (writer.bytes, channel)
    }
}

struct ClientHello {
    let ephemeralKey: [UInt8]
    let nonce: [UInt8]
    let context: [UInt8]

    static func decode(_ bytes: [UInt8]) throws(SecureChannelError) -> ClientHello {
        var reader = ByteReader(bytes)
        try readHeader(&reader, expecting: SecureFrameType.clientHello, named: "ClientHello")
        return try wire { () throws(WireError) -> ClientHello in
            let hello = ClientHello(
                ephemeralKey: try reader.readBytes(HandshakeFormat.publicKeySize, "wallet ephemeral key"),
                nonce: try reader.readBytes(HandshakeFormat.nonceSize, "wallet nonce"),
                context: try reader.readLengthPrefixed("context", maximum: HandshakeFormat.maximumContextSize))
            try reader.expectEnd()
            return hello
        }
    }
}

struct ServerHello {
    let ephemeralKey: [UInt8]
    let nonce: [UInt8]
    let terminalKey: [UInt8]
    let credential: [UInt8]
    let signature: [UInt8]
    /// Everything the signature covers: the frame up to the signature.
    let unsignedBytes: [UInt8]

    static func decode(_ bytes: [UInt8]) throws(SecureChannelError) -> ServerHello {
        var reader = ByteReader(bytes)
        try readHeader(&reader, expecting: SecureFrameType.serverHello, named: "ServerHello")
        return try wire { () throws(WireError) -> ServerHello in
            let ephemeralKey = try reader.readBytes(HandshakeFormat.publicKeySize, "terminal ephemeral key")
            let nonce = try reader.readBytes(HandshakeFormat.nonceSize, "terminal nonce")
            let terminalKey = try reader.readBytes(HandshakeFormat.publicKeySize, "terminal key")
            let credential = try reader.readLengthPrefixed(
                "credential", maximum: TerminalCredential.maximumEncodedSize)
            let signedLength = reader.offset
            let signature = try reader.readBytes(64, "handshake signature")
            try reader.expectEnd()
            return ServerHello(
                ephemeralKey: ephemeralKey, nonce: nonce, terminalKey: terminalKey, credential: credential,
                signature: signature, unsignedBytes: Array(bytes[..<signedLength]))
        }
    }
}

/// Reads a handshake frame's type and version, refusing the wrong ones.
private func readHeader(_ reader: inout ByteReader, expecting type: UInt8, named name: String)
    throws(SecureChannelError)
{
    let received = try wire { () throws(WireError) in try reader.readUInt8("frame type") }
    guard received == type else { throw .unexpectedMessage(expected: name, received: received) }
    let version = try wire { () throws(WireError) in try reader.readUInt8("handshake version") }
    guard version == HandshakeFormat.version else { throw .unsupportedVersion(version) }
}

/// Runs a decoding step, reporting byte-level failures as `.malformed`.
func wire<T>(_ body: () throws(WireError) -> T) throws(SecureChannelError) -> T {
    do {
        return try body()
    } catch {
        throw .malformed(error)
    }
}

func transcriptHash(clientHello: [UInt8], serverHelloUnsigned: [UInt8]) -> [UInt8] {
    var hasher = SHA256()
    hasher.update(data: HandshakeFormat.transcriptLabel)
    hasher.update(data: clientHello)
    hasher.update(data: serverHelloUnsigned)
    return Array(hasher.finalize())
}

/// The direction keys and the confirmation code, all from the ECDH secret: only the two ends of
/// the connection can compute any of them (the transcript, the salt, travels in clear).
func deriveKeys(
    _ own: P256.KeyAgreement.PrivateKey, _ peer: P256.KeyAgreement.PublicKey, transcript: [UInt8]
) throws(SecureChannelError) -> (
    walletToTerminal: SymmetricKey, terminalToWallet: SymmetricKey, confirmationCode: ConfirmationCode
) {
    let shared: SharedSecret
    do {
        shared = try own.sharedSecretFromKeyAgreement(with: peer)
    } catch {
        throw .cryptoFailure("key agreement failed")
    }
    return (
        shared.hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: transcript, sharedInfo: HandshakeFormat.walletToTerminalInfo, outputByteCount: 32),
        shared.hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: transcript, sharedInfo: HandshakeFormat.terminalToWalletInfo, outputByteCount: 32),
        ConfirmationCode(
            derivedBytes: shared.hkdfDerivedSymmetricKey(
                using: SHA256.self, salt: transcript, sharedInfo: HandshakeFormat.confirmationCodeInfo,
                outputByteCount: 4
            ).withUnsafeBytes { Array($0) })
    )
}
