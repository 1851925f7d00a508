import HorizonCore

/// One header field of a binary HTTP message: a lower-case name and its value, as bytes are
/// carried (RFC 9292 section 3.6).
public struct HTTPHeaderField: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A request in binary HTTP's known-length form (RFC 9292 section 3): what a sealed request
/// carries. Trailers are neither written nor kept (the API has none); padding is trailing zeros.
public struct BinaryHTTPRequest: Sendable, Equatable {
    public var method: String
    public var scheme: String
    public var authority: String
    /// The path with its query, as it appears in the request line.
    public var path: String
    public var headerFields: [HTTPHeaderField]
    public var content: [UInt8]

    public init(
        method: String, scheme: String, authority: String, path: String, headerFields: [HTTPHeaderField] = [],
        content: [UInt8] = []
    ) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.headerFields = headerFields
        self.content = content
    }

    /// The first value of the field `name` (compared case-insensitively).
    public func value(of name: String) -> String? {
        let lowered = name.lowercased()
        return headerFields.first { $0.name == lowered }?.value
    }

    /// The known-length encoding, followed by `padding` zero bytes (RFC 9292 section 3.8).
    public func encoded(padding: Int = 0) -> [UInt8] {
        var writer = BinaryHTTPWriter()
        writer.varint(BinaryHTTPFraming.knownLengthRequest)
        writer.lengthPrefixed(Array(method.utf8))
        writer.lengthPrefixed(Array(scheme.utf8))
        writer.lengthPrefixed(Array(authority.utf8))
        writer.lengthPrefixed(Array(path.utf8))
        writer.fieldSection(headerFields)
        writer.lengthPrefixed(content)
        writer.fieldSection([])  // no trailers
        writer.bytes.append(contentsOf: repeatElement(0, count: max(0, padding)))
        return writer.bytes
    }

    /// Decodes a known-length request. Truncation is accepted only where RFC 9292 section 3.8
    /// allows it (after the control data, the header section or the content); padding must be zeros.
    public init(decoding bytes: [UInt8]) throws(ObliviousHTTPError) {
        var reader = BinaryHTTPReader(bytes)
        let framing = try reader.varint("framing indicator")
        guard framing == BinaryHTTPFraming.knownLengthRequest else {
            throw .malformedMessage(
                framing == BinaryHTTPFraming.indeterminateLengthRequest
                    ? "indeterminate-length requests are not accepted; send the known-length form"
                    : "framing indicator \(framing) is not a known-length request")
        }
        method = try reader.token("method")
        scheme = try reader.text("scheme")
        authority = try reader.text("authority")
        path = try reader.text("path")
        guard !method.isEmpty else { throw .malformedMessage("the method is empty") }
        guard path.hasPrefix("/") else { throw .malformedMessage("the path must start with /") }
        guard path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .malformedMessage("the path has characters a request line may not carry")
        }
        headerFields = try reader.optionalFieldSection("header section")
        content = try reader.optionalContent()
        _ = try reader.optionalFieldSection("trailer section")
        try reader.expectPadding()
    }
}

/// A final response in binary HTTP's known-length form. Informational (1xx) responses are read
/// and skipped; trailers are not kept.
public struct BinaryHTTPResponse: Sendable, Equatable {
    public var status: Int
    public var headerFields: [HTTPHeaderField]
    public var content: [UInt8]

    public init(status: Int, headerFields: [HTTPHeaderField] = [], content: [UInt8] = []) {
        self.status = status
        self.headerFields = headerFields
        self.content = content
    }

    public func value(of name: String) -> String? {
        let lowered = name.lowercased()
        return headerFields.first { $0.name == lowered }?.value
    }

    public func encoded(padding: Int = 0) -> [UInt8] {
        var writer = BinaryHTTPWriter()
        writer.varint(BinaryHTTPFraming.knownLengthResponse)
        writer.varint(UInt64(clamping: status))
        writer.fieldSection(headerFields)
        writer.lengthPrefixed(content)
        writer.fieldSection([])
        writer.bytes.append(contentsOf: repeatElement(0, count: max(0, padding)))
        return writer.bytes
    }

    public init(decoding bytes: [UInt8]) throws(ObliviousHTTPError) {
        var reader = BinaryHTTPReader(bytes)
        let framing = try reader.varint("framing indicator")
        guard framing == BinaryHTTPFraming.knownLengthResponse else {
            throw .malformedMessage(
                framing == BinaryHTTPFraming.indeterminateLengthResponse
                    ? "indeterminate-length responses are not accepted"
                    : "framing indicator \(framing) is not a known-length response")
        }
        var status = try reader.varint("status code")
        // Informational responses come first, each with its own header section (section 3.5.1).
        while (100...199).contains(status) {
            _ = try reader.fieldSection("informational header section")
            status = try reader.varint("status code")
        }
        guard (200...599).contains(status) else { throw .malformedMessage("status \(status) is not a final status") }
        self.status = Int(status)
        headerFields = try reader.optionalFieldSection("header section")
        content = try reader.optionalContent()
        _ = try reader.optionalFieldSection("trailer section")
        try reader.expectPadding()
    }
}

enum BinaryHTTPFraming {
    static let knownLengthRequest: UInt64 = 0
    static let knownLengthResponse: UInt64 = 1
    static let indeterminateLengthRequest: UInt64 = 2
    static let indeterminateLengthResponse: UInt64 = 3
}

/// QUIC variable-length integers (RFC 9000 section 16) and length-prefixed fields.
struct BinaryHTTPWriter {
    var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        switch value {
        case 0..<(1 << 6): bytes.append(UInt8(value))
        case 0..<(1 << 14): bytes.append(contentsOf: [UInt8(0x40 | (value >> 8)), UInt8(value & 0xFF)])
        case 0..<(1 << 30): append(0x8000_0000 | value, size: 4)
        default: append(0xC000_0000_0000_0000 | min(value, (1 << 62) - 1), size: 8)
        }
    }

    private mutating func append(_ value: UInt64, size: Int) {
        for index in stride(from: size - 1, through: 0, by: -1) { bytes.append(UInt8((value >> (8 * index)) & 0xFF)) }
    }

    mutating func lengthPrefixed(_ value: [UInt8]) {
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func fieldSection(_ fields: [HTTPHeaderField]) {
        var section = BinaryHTTPWriter()
        for field in fields {
            section.lengthPrefixed(Array(field.name.lowercased().utf8))
            section.lengthPrefixed(Array(field.value.utf8))
        }
        lengthPrefixed(section.bytes)
    }
}

struct BinaryHTTPReader {
    /// No field section or content we accept is larger: a sealed message is at most a few KiB.
    static let maximumLength = 1 << 20
    var reader: ByteReader

    init(_ bytes: [UInt8]) { reader = ByteReader(bytes) }

    var isAtEnd: Bool { reader.isAtEnd }

    mutating func varint(_ field: String) throws(ObliviousHTTPError) -> UInt64 {
        do {
            let first = try reader.readUInt8(field)
            let size = 1 << Int(first >> 6)
            var value = UInt64(first & 0x3F)
            for _ in 1..<size { value = (value << 8) | UInt64(try reader.readUInt8(field)) }
            return value
        } catch { throw .malformedMessage("\(error)") }
    }

    mutating func lengthPrefixed(_ field: String) throws(ObliviousHTTPError) -> [UInt8] {
        let length = try varint("\(field) length")
        guard length <= Self.maximumLength else {
            throw .malformedMessage("\(field) claims \(length) bytes; the limit is \(Self.maximumLength)")
        }
        do { return try reader.readBytes(Int(length), field) } catch { throw .malformedMessage("\(error)") }
    }

    mutating func text(_ field: String) throws(ObliviousHTTPError) -> String {
        let raw = try lengthPrefixed(field)
        guard let text = String(validating: raw, as: UTF8.self) else {
            throw .malformedMessage("\(field) is not valid UTF-8")
        }
        return text
    }

    /// A method: an HTTP token (RFC 9110 section 5.6.2).
    mutating func token(_ field: String) throws(ObliviousHTTPError) -> String {
        let value = try text(field)
        guard Self.isToken(value) else { throw .malformedMessage("\(field) is not an HTTP token") }
        return value
    }

    /// An HTTP token (RFC 9110 section 5.6.2): visible ASCII but the delimiters.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !tokenDelimiters.contains($0) }
    }

    static let tokenDelimiters = Set("\"(),/:;<=>?@[\\]{}".utf8)

    mutating func fieldSection(_ field: String) throws(ObliviousHTTPError) -> [HTTPHeaderField] {
        var section = BinaryHTTPReader(try lengthPrefixed(field))
        var fields: [HTTPHeaderField] = []
        while !section.isAtEnd {
            let name = try section.text("\(field) field name")
            let value = try section.text("\(field) field value")
            // A token in lower case (RFC 9292 section 3.6, RFC 9110 section 5.1): no pseudo-fields,
            // and nothing that would let a field smuggle another one into the request the gateway
            // rebuilds. Refused, never dropped: the wallet must not believe a field was carried.
            guard Self.isToken(name), !name.utf8.contains(where: { (0x41...0x5A).contains($0) }) else {
                throw .malformedMessage("\(field) has an invalid field name")
            }
            guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw .malformedMessage("\(field) field \(name) has control characters in its value")
            }
            // A field value has no leading or trailing whitespace (RFC 9110 section 5.5).
            guard value.utf8.first.map({ $0 != 0x20 && $0 != 0x09 }) ?? true,
                value.utf8.last.map({ $0 != 0x20 && $0 != 0x09 }) ?? true
            else { throw .malformedMessage("\(field) field \(name) has whitespace around its value") }
            fields.append(HTTPHeaderField(name: name, value: value))
        }
        return fields
    }

    /// A field section, or nothing when the message was truncated here (section 3.8).
    mutating func optionalFieldSection(_ field: String) throws(ObliviousHTTPError) -> [HTTPHeaderField] {
        isAtEnd ? [] : try fieldSection(field)
    }

    mutating func optionalContent() throws(ObliviousHTTPError) -> [UInt8] {
        isAtEnd ? [] : try lengthPrefixed("content")
    }

    /// What remains must be zeros (padding, section 3.8).
    mutating func expectPadding() throws(ObliviousHTTPError) {
        guard reader.readRest().allSatisfy({ $0 == 0 }) else {
            throw .malformedMessage("bytes after the message that are not zero padding")
        }
    }
}
