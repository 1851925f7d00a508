/// Appends big-endian integers and length-prefixed fields to a byte buffer.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func write(_ value: UInt8) { bytes.append(value) }

    public mutating func write<T: FixedWidthInteger>(_ value: T) {
        var bigEndian = value.bigEndian
        withUnsafeBytes(of: &bigEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func write<C: Collection>(raw: C) where C.Element == UInt8 {
        bytes.append(contentsOf: raw)
    }

    /// Writes a 16-bit length followed by the bytes. Callers enforce their own, smaller limits.
    public mutating func write<C: Collection>(lengthPrefixed value: C) where C.Element == UInt8 {
        precondition(value.count <= Int(UInt16.max), "length-prefixed field over 65535 bytes")
        write(UInt16(value.count))
        bytes.append(contentsOf: value)
    }

    public mutating func write(string: String) {
        write(lengthPrefixed: Array(string.utf8))
    }
}
