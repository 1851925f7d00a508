/// Why a message could not be sealed, opened or decoded. Every case says what was wrong and,
/// where the caller can do something about it, what.
public enum ObliviousHTTPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The key configuration's bytes are not one RFC 9458 key configuration.
    case malformedKeyConfiguration(String)
    /// A well-formed key configuration with no algorithm this implementation speaks.
    case unsupportedKeyConfiguration(String)
    /// A binary HTTP message (RFC 9292) that is not well-formed, or that this implementation refuses.
    case malformedMessage(String)
    /// An encapsulated request whose header or length is not what RFC 9458 section 4.3 describes.
    case malformedEncapsulatedRequest(String)
    /// The request names a key the gateway does not have (an outdated key configuration).
    case unknownKey(id: UInt8)
    /// The request or response did not decrypt: altered, truncated, or sealed to another key or request.
    case decryptionFailed(String)
    /// The message is too large to be carried once sealed.
    case tooLarge(sealedBytes: Int, maximum: Int)
    /// The cryptographic library refused an operation (a key or suite it does not accept).
    case cryptography(String)

    public var description: String {
        switch self {
        case .malformedKeyConfiguration(let reason): "the gateway key configuration is malformed: \(reason)"
        case .unsupportedKeyConfiguration(let reason): "the gateway key configuration cannot be used: \(reason)"
        case .malformedMessage(let reason): "the binary HTTP message is malformed: \(reason)"
        case .malformedEncapsulatedRequest(let reason): "the sealed request is malformed: \(reason)"
        case .unknownKey(let id):
            "the sealed request is for gateway key \(id), which this server does not have; fetch the key configuration again"
        case .decryptionFailed(let what): "\(what) could not be opened (altered, truncated, or sealed for another key)"
        case .tooLarge(let sealedBytes, let maximum):
            "the message would be \(sealedBytes) bytes sealed; at most \(maximum) can be relayed. Nothing was sent: make the request smaller (e.g. a smaller page) or send it directly when online"
        case .cryptography(let reason): "the cryptographic operation failed: \(reason)"
        }
    }
}
