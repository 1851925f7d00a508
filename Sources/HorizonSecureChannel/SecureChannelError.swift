import HorizonCore

/// Why the secure channel refused a peer or a frame. Each case is one rule of the secure
/// channel (`docs/protocol.md`).
public enum SecureChannelError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(WireError)
    case unexpectedMessage(expected: String, received: UInt8)
    case unsupportedVersion(UInt8)
    case invalidPublicKey(field: String)
    case unknownTrustAnchor(keyID: String)
    case credentialSignatureInvalid
    /// The anchor that signed the credential may not vouch for that merchant id.
    case merchantOutsideAnchorScope(merchantID: String, anchor: String)
    case credentialExpired(expiresAt: UnixTime, now: UnixTime)
    case credentialNotYetValid(notBefore: UnixTime, now: UnixTime)
    /// The server revoked this terminal's key (a lost or stolen till): its credential is refused
    /// before it expires.
    case credentialRevoked(terminalKeyID: String)
    /// The credential names a different terminal key than the one the terminal presented.
    case credentialKeyMismatch
    /// The terminal is not the one whose key id the advertisement carried.
    case terminalKeyIDMismatch(expected: String, presented: String)
    /// The terminal's signature over the handshake does not verify (a man in the middle, or a
    /// terminal without the private key of its credential).
    case transcriptSignatureInvalid
    case handshakeTimedOut
    case handshakeAlreadyComplete
    /// A record failed AES-GCM authentication (tampered, or sealed with another key).
    case authenticationFailed
    /// A record's counter was seen before.
    case replayed(counter: UInt64)
    /// A record's counter is too far behind the highest accepted one.
    case outsideReplayWindow(counter: UInt64, highest: UInt64)
    case counterExhausted
    case cryptoFailure(String)

    public var description: String {
        switch self {
        case .malformed(let error): "malformed handshake or record: \(error)"
        case .unexpectedMessage(let expected, let received):
            "expected \(expected), received frame type 0x\(String(received, radix: 16))"
        case .unsupportedVersion(let version): "peer uses secure channel version \(version)"
        case .invalidPublicKey(let field): "\(field) is not a valid P-256 public key"
        case .unknownTrustAnchor(let keyID):
            "terminal credential is signed by unknown trust anchor \(keyID); this wallet does not trust that issuer"
        case .credentialSignatureInvalid: "terminal credential signature does not verify"
        case .merchantOutsideAnchorScope(let merchantID, let anchor):
            "trust anchor \(anchor) may not vouch for merchant \(merchantID)"
        case .credentialExpired(let expiresAt, let now):
            "terminal credential expired at \(expiresAt) (now \(now)); the merchant must renew it"
        case .credentialRevoked(let keyID):
            "this terminal's credential was revoked by its server (terminal key \(keyID)); do not pay here"
        case .credentialNotYetValid(let notBefore, let now):
            "terminal credential is valid only from \(notBefore) (now \(now)); check the clock"
        case .credentialKeyMismatch: "terminal credential belongs to a different terminal key"
        case .terminalKeyIDMismatch(let expected, let presented):
            "terminal presented key \(presented) but advertised \(expected)"
        case .transcriptSignatureInvalid: "terminal's handshake signature does not verify"
        case .handshakeTimedOut: "the secure handshake did not finish in time"
        case .handshakeAlreadyComplete: "the handshake is already complete"
        case .authenticationFailed: "a record failed authentication (tampered or wrong key)"
        case .replayed(let counter): "record \(counter) was already received (replay)"
        case .outsideReplayWindow(let counter, let highest):
            "record \(counter) is too old (highest accepted \(highest))"
        case .counterExhausted: "record counter exhausted; reconnect"
        case .cryptoFailure(let reason): "cryptographic operation failed: \(reason)"
        }
    }
}
