import Foundation
import HorizonCore

/// A mail address with an optional display name: `noreply@shop.example` or
/// `Café Horizon <noreply@shop.example>`. The address itself is plain ASCII without spaces,
/// commas or angle brackets: a sendmail `-t` reads recipients from the headers, so anything
/// that could add a header or a recipient is refused, not escaped.
public struct MailAddress: Sendable, Equatable, CustomStringConvertible {
    public let displayName: String?
    public let address: String

    public init(displayName: String? = nil, address: String) throws(MessageDeliveryError) {
        guard Self.isSafeAddress(address) else {
            throw .refused("\"\(Self.shown(address))\" is not a mail address this server sends to (ASCII name@domain)")
        }
        if let displayName {
            guard !displayName.unicodeScalars.contains(where: Self.isControl) else {
                throw .refused("a mail display name must not contain line breaks or control characters")
            }
        }
        self.displayName = displayName.flatMap { $0.isEmpty ? nil : $0 }
        self.address = address
    }

    /// Reads `Name <address>` or a bare address (the `from` setting).
    public init(parsing text: String) throws(MessageDeliveryError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix(">"), let open = trimmed.lastIndex(of: "<") {
            let name = trimmed[..<open].trimmingCharacters(in: .whitespaces)
            let unquoted =
                name.count >= 2 && name.hasPrefix("\"") && name.hasSuffix("\"")
                ? String(name.dropFirst().dropLast()) : name
            try self.init(
                displayName: unquoted,
                address: String(trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)]))
        } else {
            try self.init(address: trimmed)
        }
    }

    public var description: String { displayName.map { "\($0) <\(address)>" } ?? address }

    /// The header form: a non-ASCII name as an RFC 2047 encoded word, an ASCII one quoted.
    var headerValue: String {
        guard let displayName else { return address }
        if displayName.unicodeScalars.allSatisfy({ $0.isASCII }) {
            let escaped = displayName.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "\"", with: "\\\"")
            return "\"\(escaped)\" <\(address)>"
        }
        return MailMessage.encodedWords(displayName).joined(separator: "\n ") + "\n <\(address)>"
    }

    var domain: String { String(address[address.index(after: address.lastIndex(of: "@") ?? address.startIndex)...]) }

    static func isSafeAddress(_ address: String) -> Bool {
        let forbidden = Set("()<>,;:\\\"[] ".unicodeScalars)
        let parts = address.split(separator: "@", omittingEmptySubsequences: false)
        return address.utf8.count <= 254 && parts.count == 2 && !parts[0].isEmpty && parts[1].contains(".")
            && !parts[1].hasPrefix(".") && !parts[1].hasSuffix(".") && !address.hasPrefix("-")
            && address.unicodeScalars.allSatisfy { $0.isASCII && !isControl($0) && !forbidden.contains($0) }
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value)
            || scalar == "\u{2028}" || scalar == "\u{2029}"
    }

    /// Enough of a refused value to recognise it, with its line breaks shown as escapes.
    static func shown(_ text: String) -> String {
        String(text.prefix(80)).unicodeScalars.map { isControl($0) ? $0.escaped(asASCII: true) : String($0) }.joined()
    }
}

/// A plain-text mail as RFC 5322 and MIME want it: From, To, Subject, Date, Message-ID,
/// MIME-Version, a UTF-8 `text/plain` body in quoted-printable (7-bit safe through any MTA).
/// Lines end in LF, as a sendmail-style command reads them (the MTA writes CRLF on the wire).
public struct MailMessage: Sendable {
    public let from: MailAddress
    public let to: MailAddress
    public let subject: String
    public let body: String
    public let date: UnixTime
    public let messageID: String

    /// Refuses a subject with a line break or control character: it would start a header of its own.
    public init(
        from: MailAddress, to: MailAddress, subject: String, body: String, date: UnixTime, messageID: String? = nil
    ) throws(MessageDeliveryError) {
        guard !subject.unicodeScalars.contains(where: MailAddress.isControl) else {
            throw .refused("a mail subject must not contain line breaks or control characters")
        }
        self.from = from
        self.to = to
        self.subject = subject
        self.body = body
        self.date = date
        var random = SystemRandomNumberGenerator()
        let unique = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &random)) }.joined()
        self.messageID = messageID ?? "<\(date).\(unique)@\(from.domain)>"
    }

    /// The message as a sendmail-style command reads it on standard input.
    public func rendered() -> [UInt8] {
        let subjectValue =
            subject.unicodeScalars.allSatisfy({ $0.isASCII })
            ? subject : Self.encodedWords(subject).joined(separator: "\n ")
        let headers = [
            "From: \(from.headerValue)",
            "To: \(to.headerValue)",
            "Subject: \(subjectValue)",
            "Date: \(Self.rfc5322Date(date))",
            "Message-ID: \(messageID)",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: quoted-printable",
        ]
        return Array((headers.joined(separator: "\n") + "\n\n" + Self.quotedPrintable(body) + "\n").utf8)
    }

    /// RFC 2047 `=?utf-8?B?…?=` words of at most 60 characters (a header line stays under 78
    /// with its name), split between characters.
    static func encodedWords(_ text: String) -> [String] {
        var words: [String] = []
        var chunk: [UInt8] = []
        // 36 bytes make 48 base64 characters: with `=?utf-8?B?` and `?=`, 60.
        for character in text {
            let bytes = Array(String(character).utf8)
            if chunk.count + bytes.count > 36, !chunk.isEmpty {
                words.append("=?utf-8?B?\(Data(chunk).base64EncodedString())?=")
                chunk = []
            }
            chunk += bytes
        }
        if !chunk.isEmpty || words.isEmpty { words.append("=?utf-8?B?\(Data(chunk).base64EncodedString())?=") }
        return words
    }

    /// Quoted-printable (RFC 2045): printable ASCII as it is, every other byte as `=XX`, lines
    /// kept under 76 characters by soft breaks. A line starting with `.` or `From ` is safe too:
    /// the first character is encoded, so no MTA or mailbox format misreads it.
    static func quotedPrintable(_ text: String) -> String {
        let lines = text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .split(separator: "\n", omittingEmptySubsequences: false)
        return lines.map { line -> String in
            let bytes = Array(line.utf8)
            var output = ""
            var length = 0
            for (index, byte) in bytes.enumerated() {
                let isLast = index == bytes.count - 1
                let plain =
                    (byte >= 33 && byte <= 126 && byte != UInt8(ascii: "="))
                    || (byte == UInt8(ascii: " ") && !isLast)
                let first =
                    index == 0 && (byte == UInt8(ascii: ".") || (byte == UInt8(ascii: "F") && line.hasPrefix("From ")))
                let piece = plain && !first ? String(UnicodeScalar(byte)) : String(format: "=%02X", byte)
                if length + piece.count > 75 {
                    output += "=\n"
                    length = 0
                }
                output += piece
                length += piece.count
            }
            return output
        }.joined(separator: "\n")
    }

    /// `Sat, 28 Nov 2026 12:03:30 +0000`, in English whatever the locale.
    static func rfc5322Date(_ time: UnixTime) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(secondsFromGMT: 0)
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }
}
