/// Reads big-endian integers and length-prefixed fields from untrusted bytes.
///
/// Every read checks bounds and throws `WireError.truncated` naming the field, so decoders built
/// on it cannot read out of range whatever a peer sends.
public struct ByteReader: Sendable {
    private let bytes: [UInt8]
    public private(set) var offset: Int

    public init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.bytes = Array(bytes)
        self.offset = 0
    }

    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { remaining == 0 }

    public mutating func readUInt8(_ field: String) throws(WireError) -> UInt8 {
        guard remaining >= 1 else { throw .truncated(field: field) }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func read<T: FixedWidthInteger>(_: T.Type, _ field: String) throws(WireError) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw .truncated(field: field) }
        // Accumulate unsigned, then reinterpret: a signed type's top bit is its sign, not an overflow.
        var value: UInt64 = 0
        for index in 0..<size {
            value = (value << 8) | UInt64(bytes[offset + index])
        }
        offset += size
        return T(truncatingIfNeeded: value)
    }

    public mutating func readBytes(_ count: Int, _ field: String) throws(WireError) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw .truncated(field: field) }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    /// Reads a 16-bit length and that many bytes, refusing lengths above `maximum`.
    public mutating func readLengthPrefixed(_ field: String, maximum: Int) throws(WireError) -> [UInt8] {
        let length = Int(try read(UInt16.self, "\(field) length"))
        guard length <= maximum else { throw .fieldTooLong(field: field, length: length, maximum: maximum) }
        return try readBytes(length, field)
    }

    public mutating func readString(_ field: String, maximumBytes: Int) throws(WireError) -> String {
        let raw = try readLengthPrefixed(field, maximum: maximumBytes)
        guard let text = String(validating: raw, as: UTF8.self) else { throw .invalidUTF8(field: field) }
        return text
    }

    public mutating func readRest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }

    /// Throws if anything is left: strict decoders refuse trailing bytes.
    public func expectEnd() throws(WireError) {
        guard remaining == 0 else { throw .trailingBytes(count: remaining) }
    }
}
