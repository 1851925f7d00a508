import HorizonCore
import Testing

@Suite("ByteReader and ByteWriter")
struct ByteCodingTests {
    // MARK: Writer layout

    @Test func writerIsBigEndian() {
        var writer = ByteWriter()
        writer.write(UInt8(0xAB))
        writer.write(UInt16(0x0102))
        writer.write(UInt32(0x0304_0506))
        writer.write(UInt64(0x0708_090A_0B0C_0D0E))
        writer.write(Int16(-2))
        writer.write(Int32(-1))
        writer.write(Int64(-256))
        #expect(
            writer.bytes == [
                0xAB,
                0x01, 0x02,
                0x03, 0x04, 0x05, 0x06,
                0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
                0xFF, 0xFE,
                0xFF, 0xFF, 0xFF, 0xFF,
                0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00,
            ])
    }

    @Test func writerRawLengthPrefixedAndString() {
        var writer = ByteWriter(capacity: 4)
        writer.write(raw: [0x01, 0x02])
        writer.write(lengthPrefixed: [0xAA, 0xBB, 0xCC])
        writer.write(lengthPrefixed: [UInt8]())
        writer.write(string: "é!")
        #expect(writer.bytes == [0x01, 0x02, 0x00, 0x03, 0xAA, 0xBB, 0xCC, 0x00, 0x00, 0x00, 0x03, 0xC3, 0xA9, 0x21])
        var long = ByteWriter()
        long.write(lengthPrefixed: [UInt8](repeating: 7, count: 300))
        #expect(Array(long.bytes.prefix(2)) == [0x01, 0x2C])
        #expect(long.bytes.count == 302)
    }

    // MARK: Round trips

    @Test func roundTripOfEveryWidth() throws {
        let unsigned8: [UInt8] = [0, 1, 0x7F, 0x80, 0xFF]
        let unsigned16: [UInt16] = [0, 1, 0x00FF, 0x0100, 0x8000, .max]
        let unsigned32: [UInt32] = [0, 1, 0xFFFF, 0x0001_0000, 0x8000_0000, .max]
        let unsigned64: [UInt64] = [0, 1, 0xFFFF_FFFF, 0x1_0000_0000, 0x8000_0000_0000_0000, .max]
        // Every Int8, negatives included.
        let signed8: [Int8] = Array(Int8.min...Int8.max)
        let signed16: [Int16] = [0, 1, -1, -256, .min, .max, 0x00FF]
        let signed32: [Int32] = [0, -1, -65536, .min, .max, 0x0000_FFFF]
        let signed64: [Int64] = [0, 1, -1, -2, -256, -1_000_000_007, .min, .max, .min + 1, 0x0000_0000_FFFF_FFFF]

        var writer = ByteWriter()
        for value in unsigned8 { writer.write(value) }
        for value in unsigned16 { writer.write(value) }
        for value in unsigned32 { writer.write(value) }
        for value in unsigned64 { writer.write(value) }
        for value in signed8 { writer.write(value) }
        for value in signed16 { writer.write(value) }
        for value in signed32 { writer.write(value) }
        for value in signed64 { writer.write(value) }
        let expectedSize =
            unsigned8.count + 2 * unsigned16.count + 4 * unsigned32.count + 8 * unsigned64.count + signed8.count
            + 2 * signed16.count + 4 * signed32.count + 8 * signed64.count
        #expect(writer.bytes.count == expectedSize)

        var reader = ByteReader(writer.bytes)
        for value in unsigned8 { #expect(try reader.readUInt8("u8") == value) }
        for value in unsigned16 { #expect(try reader.read(UInt16.self, "u16") == value) }
        for value in unsigned32 { #expect(try reader.read(UInt32.self, "u32") == value) }
        for value in unsigned64 { #expect(try reader.read(UInt64.self, "u64") == value) }
        for value in signed8 { #expect(try reader.read(Int8.self, "i8") == value) }
        for value in signed16 { #expect(try reader.read(Int16.self, "i16") == value) }
        for value in signed32 { #expect(try reader.read(Int32.self, "i32") == value) }
        for value in signed64 { #expect(try reader.read(Int64.self, "i64") == value) }
        #expect(reader.isAtEnd)
        try reader.expectEnd()
    }

    @Test func readsKnownBigEndianValues() throws {
        var reader = ByteReader([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0x80, 0x00, 0x12, 0x34])
        #expect(try reader.read(Int64.self, "a") == -2)
        #expect(try reader.read(Int16.self, "b") == .min)
        #expect(try reader.read(UInt16.self, "c") == 0x1234)
        #expect(reader.offset == 12)
    }

    @Test func int8RoundTripsOverItsFullRange() throws {
        var writer = ByteWriter()
        for value in Int8.min...Int8.max { writer.write(value) }
        // Two's complement on the wire: -128 is 0x80, -1 is 0xFF.
        #expect(writer.bytes == (0..<256).map { UInt8(($0 + 128) % 256) })
        var reader = ByteReader(writer.bytes)
        for value in Int8.min...Int8.max { #expect(try reader.read(Int8.self, "i8") == value) }
        try reader.expectEnd()
    }

    @Test func bytesFromTheTopHalfReadAsNegativeInt8() throws {
        var reader = ByteReader([0x80, 0x81, 0xFE, 0xFF, 0x00, 0x7F])
        #expect(try reader.read(Int8.self, "a") == -128)
        #expect(try reader.read(Int8.self, "b") == -127)
        #expect(try reader.read(Int8.self, "c") == -2)
        #expect(try reader.read(Int8.self, "d") == -1)
        #expect(try reader.read(Int8.self, "e") == 0)
        #expect(try reader.read(Int8.self, "f") == 127)
        try reader.expectEnd()
    }

    @Test func signedMinimumsAndMaximumsOfEveryWidth() throws {
        var reader = ByteReader(
            [0x80, 0x7F]
                + [0x80, 0x00, 0x7F, 0xFF]
                + [0x80, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF]
                + [0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(try reader.read(Int8.self, "i8 min") == .min)
        #expect(try reader.read(Int8.self, "i8 max") == .max)
        #expect(try reader.read(Int16.self, "i16 min") == .min)
        #expect(try reader.read(Int16.self, "i16 max") == .max)
        #expect(try reader.read(Int32.self, "i32 min") == .min)
        #expect(try reader.read(Int32.self, "i32 max") == .max)
        #expect(try reader.read(Int64.self, "i64 min") == .min)
        #expect(try reader.read(Int64.self, "i64 max") == .max)
        try reader.expectEnd()

        var writer = ByteWriter()
        writer.write(Int8.min)
        writer.write(Int8.max)
        writer.write(Int16.min)
        writer.write(Int16.max)
        writer.write(Int32.min)
        writer.write(Int32.max)
        writer.write(Int64.min)
        writer.write(Int64.max)
        var again = ByteReader(writer.bytes)
        #expect(try again.read(Int8.self, "i8 min") == .min)
        #expect(try again.read(Int8.self, "i8 max") == .max)
        #expect(try again.read(Int16.self, "i16 min") == .min)
        #expect(try again.read(Int16.self, "i16 max") == .max)
        #expect(try again.read(Int32.self, "i32 min") == .min)
        #expect(try again.read(Int32.self, "i32 max") == .max)
        #expect(try again.read(Int64.self, "i64 min") == .min)
        #expect(try again.read(Int64.self, "i64 max") == .max)
        try again.expectEnd()
    }

    @Test func readUInt8MatchesGenericRead() throws {
        var a = ByteReader([0x80, 0xFF])
        var b = ByteReader([0x80, 0xFF])
        #expect(try a.readUInt8("x") == b.read(UInt8.self, "x"))
        #expect(try a.readUInt8("x") == b.read(UInt8.self, "x"))
    }

    @Test func lengthPrefixedAndStringRoundTrip() throws {
        var writer = ByteWriter()
        writer.write(lengthPrefixed: [1, 2, 3])
        writer.write(string: "Café Zoë ☕")
        writer.write(string: "")
        var reader = ByteReader(writer.bytes)
        #expect(try reader.readLengthPrefixed("blob", maximum: 3) == [1, 2, 3])
        #expect(try reader.readString("name", maximumBytes: 64) == "Café Zoë ☕")
        #expect(try reader.readString("empty", maximumBytes: 0) == "")
        try reader.expectEnd()
    }

    // MARK: Bounds

    @Test func everyReadPastTheEndNamesItsField() throws {
        #expect(throws: WireError.truncated(field: "version")) {
            var reader = ByteReader([UInt8]())
            _ = try reader.readUInt8("version")
        }
        #expect(throws: WireError.truncated(field: "port")) {
            var reader = ByteReader([0x01])
            _ = try reader.read(UInt16.self, "port")
        }
        #expect(throws: WireError.truncated(field: "id")) {
            var reader = ByteReader([0x01, 0x02, 0x03])
            _ = try reader.read(UInt32.self, "id")
        }
        #expect(throws: WireError.truncated(field: "session")) {
            var reader = ByteReader([UInt8](repeating: 0, count: 7))
            _ = try reader.read(UInt64.self, "session")
        }
        #expect(throws: WireError.truncated(field: "amount")) {
            var reader = ByteReader([UInt8](repeating: 0xFF, count: 7))
            _ = try reader.read(Int64.self, "amount")
        }
        #expect(throws: WireError.truncated(field: "nonce")) {
            var reader = ByteReader([UInt8](repeating: 0, count: 15))
            _ = try reader.readBytes(16, "nonce")
        }
        #expect(throws: WireError.truncated(field: "negative")) {
            var reader = ByteReader([0x01])
            _ = try reader.readBytes(-1, "negative")
        }
        #expect(throws: WireError.truncated(field: "name length")) {
            var reader = ByteReader([0x00])
            _ = try reader.readLengthPrefixed("name", maximum: 10)
        }
        #expect(throws: WireError.truncated(field: "name")) {
            var reader = ByteReader([0x00, 0x05, 0x41, 0x42])
            _ = try reader.readLengthPrefixed("name", maximum: 10)
        }
        #expect(throws: WireError.truncated(field: "merchant length")) {
            var reader = ByteReader([UInt8]())
            _ = try reader.readString("merchant", maximumBytes: 10)
        }
        #expect(throws: WireError.truncated(field: "merchant")) {
            var reader = ByteReader([0x00, 0x02, 0x41])
            _ = try reader.readString("merchant", maximumBytes: 10)
        }
    }

    @Test func failedReadsDoNotMoveTheOffset() throws {
        var reader = ByteReader([0x01, 0x02, 0x03])
        _ = try reader.readUInt8("a")
        #expect(throws: WireError.truncated(field: "b")) { try reader.read(UInt32.self, "b") }
        #expect(reader.offset == 1)
        #expect(reader.remaining == 2)
        #expect(throws: WireError.truncated(field: "c")) { try reader.readBytes(3, "c") }
        #expect(reader.offset == 1)
        #expect(try reader.read(UInt16.self, "d") == 0x0203)
        #expect(throws: WireError.truncated(field: "e")) { try reader.readUInt8("e") }
        #expect(reader.offset == 3)
    }

    @Test func readBytesZeroAtEndIsFine() throws {
        var reader = ByteReader([UInt8]())
        #expect(try reader.readBytes(0, "nothing") == [])
        #expect(reader.readRest() == [])
        try reader.expectEnd()
    }

    @Test func lengthPrefixedRefusesOverMaximum() {
        var writer = ByteWriter()
        writer.write(lengthPrefixed: [UInt8](repeating: 0x41, count: 11))
        let bytes = writer.bytes
        #expect(throws: WireError.fieldTooLong(field: "name", length: 11, maximum: 10)) {
            var reader = ByteReader(bytes)
            _ = try reader.readLengthPrefixed("name", maximum: 10)
        }
        #expect(throws: WireError.fieldTooLong(field: "merchant", length: 11, maximum: 10)) {
            var reader = ByteReader(bytes)
            _ = try reader.readString("merchant", maximumBytes: 10)
        }
        // The limit is checked before the bytes: a huge declared length with no data is "too long".
        #expect(throws: WireError.fieldTooLong(field: "blob", length: 65535, maximum: 100)) {
            var reader = ByteReader([0xFF, 0xFF])
            _ = try reader.readLengthPrefixed("blob", maximum: 100)
        }
        // Exactly at the limit is accepted.
        var reader = ByteReader(bytes)
        #expect((try? reader.readLengthPrefixed("name", maximum: 11)) == [UInt8](repeating: 0x41, count: 11))
    }

    @Test(
        "refuses invalid UTF-8",
        arguments: [
            [0xC3, 0x28],  // bad continuation
            [0xFF],  // never valid
            [0xE2, 0x82],  // truncated sequence
            [0xC0, 0xAF],  // overlong '/'
            [0xED, 0xA0, 0x80],  // surrogate half
            [0x41, 0x80, 0x42],  // lone continuation
        ] as [[UInt8]])
    func invalidUTF8(text: [UInt8]) {
        var writer = ByteWriter()
        writer.write(lengthPrefixed: text)
        let bytes = writer.bytes
        #expect(throws: WireError.invalidUTF8(field: "merchant")) {
            var reader = ByteReader(bytes)
            _ = try reader.readString("merchant", maximumBytes: 64)
        }
    }

    @Test func expectEndAndReadRest() throws {
        var reader = ByteReader([0x01, 0x02, 0x03, 0x04])
        _ = try reader.readUInt8("a")
        #expect(throws: WireError.trailingBytes(count: 3)) { try reader.expectEnd() }
        #expect(reader.readRest() == [0x02, 0x03, 0x04])
        #expect(reader.isAtEnd)
        #expect(reader.remaining == 0)
        try reader.expectEnd()
        #expect(reader.readRest() == [])
    }

    @Test func readerAcceptsAnyByteCollection() throws {
        let bytes: [UInt8] = [0x00, 0x01, 0x02, 0x03]
        let slice = bytes[1...]
        var reader = ByteReader(slice)
        #expect(try reader.read(UInt16.self, "x") == 0x0102)
        #expect(reader.offset == 2)
        #expect(reader.remaining == 1)
    }

    @Test func wireErrorDescriptions() {
        #expect(WireError.truncated(field: "nonce").description == "input ended inside nonce")
        #expect(WireError.trailingBytes(count: 3).description == "3 unexpected byte(s) after the end of the value")
        #expect(
            WireError.fieldTooLong(field: "name", length: 11, maximum: 10).description
                == "name is 11 bytes long; the limit is 10")
        #expect(WireError.invalidUTF8(field: "name").description == "name is not valid UTF-8")
        #expect(WireError.unknownType(0xAB).description == "unknown type tag 0xab")
    }
}
