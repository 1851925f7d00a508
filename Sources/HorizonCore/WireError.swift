/// Why a sequence of bytes received from a peer could not be decoded.
///
/// Every decoder in the stack (link fragments, handshake, session messages, advertisements)
/// throws this one type, so a caller can report any bad input the same way and never crashes.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The input ended before `field` was complete.
    case truncated(field: String)
    /// Bytes were left over after a complete value.
    case trailingBytes(count: Int)
    /// The input is larger than the limit for its kind.
    case oversized(size: Int, maximum: Int)
    /// A variable-length field is longer than its limit.
    case fieldTooLong(field: String, length: Int, maximum: Int)
    /// The peer speaks a protocol version we do not.
    case unsupportedVersion(UInt8)
    /// A type tag we do not know.
    case unknownType(UInt8)
    /// A text field is not valid UTF-8.
    case invalidUTF8(field: String)
    /// An amount below zero.
    case negativeAmount(field: String)
    /// An amount above `Money.maximumMinorUnits`, or a sum that would overflow.
    case amountOutOfRange(field: String)
    /// A currency code that is not three letters A-Z, or that we do not support.
    case unsupportedCurrency(String)
    /// Any other field whose value is not allowed.
    case invalidValue(field: String, reason: String)

    public var description: String {
        switch self {
        case .truncated(let field): "input ended inside \(field)"
        case .trailingBytes(let count): "\(count) unexpected byte(s) after the end of the value"
        case .oversized(let size, let maximum): "input of \(size) bytes exceeds the limit of \(maximum) bytes"
        case .fieldTooLong(let field, let length, let maximum):
            "\(field) is \(length) bytes long; the limit is \(maximum)"
        case .unsupportedVersion(let version): "unsupported protocol version \(version)"
        case .unknownType(let tag): "unknown type tag 0x\(String(tag, radix: 16))"
        case .invalidUTF8(let field): "\(field) is not valid UTF-8"
        case .negativeAmount(let field): "\(field) is negative"
        case .amountOutOfRange(let field): "\(field) is out of range"
        case .unsupportedCurrency(let code): "unsupported currency '\(code)'"
        case .invalidValue(let field, let reason): "invalid \(field): \(reason)"
        }
    }
}
