extension Sequence where Element == UInt8 {
    /// Lower-case hexadecimal, two digits a byte: for logs, traces and identifiers.
    public var hexString: String {
        // ASCII bytes, one String at the end: appending Characters cost about 1,300 instructions
        // a byte (grapheme handling), and a payment formats a few ids.
        var ascii: [UInt8] = []
        ascii.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            ascii.append(Self.hexDigit(byte >> 4))
            ascii.append(Self.hexDigit(byte & 0xF))
        }
        return String(decoding: ascii, as: UTF8.self)
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x61 - 10 + nibble
    }
}

extension Array where Element == UInt8 {
    /// Parses hexadecimal text (two digits a byte, either case); nil if it is not exactly that.
    public init?(hexString: String) {
        let scalars: [Unicode.Scalar] = hexString.unicodeScalars.map { $0 }
        guard scalars.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(scalars.count / 2)
        var index = 0
        while index < scalars.count {
            guard let high = Self.nibble(scalars[index]), let low = Self.nibble(scalars[index + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = bytes
    }

    private static func nibble(_ scalar: Unicode.Scalar) -> UInt8? {
        switch scalar.value {
        case 0x30...0x39: UInt8(scalar.value - 0x30)
        case 0x41...0x46: UInt8(scalar.value - 0x41 + 10)
        case 0x61...0x66: UInt8(scalar.value - 0x61 + 10)
        default: nil
        }
    }
}
