import Crypto
import Foundation
import HorizonCore

/// How terminals and wallets sign their API requests with their own P-256 keys (the
/// `HorizonSignature` scheme of `openapi.yaml`), so that no long-lived bearer secret exists:
/// the key never leaves the device, and a captured request cannot be replayed (its nonce is
/// accepted once) or reused later (its time must be within the server's window).
public struct RequestSignature: Sendable, Equatable {
    public static let scheme = "HorizonSignature"
    static let label = "horizon/request/v1"

    public let publicKey: [UInt8]  // X9.63, 65 bytes
    public let time: Int64
    public let nonce: String
    public let signature: [UInt8]  // raw r||s, 64 bytes

    public init(publicKey: [UInt8], time: Int64, nonce: String, signature: [UInt8]) {
        self.publicKey = publicKey
        self.time = time
        self.nonce = nonce
        self.signature = signature
    }

    /// The bytes a request's signature covers: the method, the path with its query, the time, the
    /// nonce and the body's SHA-256, each on its own line after the scheme's label; then, only
    /// when the request carries a W3C `traceparent` header, a line `traceparent VALUE`, so that
    /// the server continues a trace only where the signer said it belongs (a request without one
    /// signs the same bytes as before).
    public static func signedBytes(
        method: String, path: String, time: Int64, nonce: String, body: some DataProtocol, traceparent: String? = nil
    ) -> [UInt8] {
        let bodyDigest = SHA256.hash(data: body).hexString
        var lines = [label, method.uppercased(), path, String(time), nonce, bodyDigest]
        if let traceparent { lines.append("traceparent " + traceparent) }
        return Array(lines.joined(separator: "\n").utf8)
    }

    /// Signs a request with `key` at `time` with a fresh random nonce (and its `traceparent`
    /// header's value, if it has one).
    public static func sign(
        method: String, path: String, body: some DataProtocol, with key: P256.Signing.PrivateKey, time: Int64,
        traceparent: String? = nil
    ) throws -> RequestSignature {
        let nonce = (0..<16).map { _ in UInt8.random(in: 0...255) }.hexString
        let bytes = signedBytes(
            method: method, path: path, time: time, nonce: nonce, body: body, traceparent: traceparent)
        let signature = try key.signature(for: bytes)
        return RequestSignature(
            publicKey: Array(key.publicKey.x963Representation), time: time, nonce: nonce,
            signature: Array(signature.rawRepresentation))
    }

    /// The `Authorization` header's value.
    public var headerValue: String {
        "\(Self.scheme) key=\"\(Base64URL.encode(publicKey))\", time=\"\(time)\", nonce=\"\(nonce)\", signature=\"\(Base64URL.encode(signature))\""
    }

    /// Why an `Authorization` header is not a usable signature.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case notThisScheme
        case malformed(String)

        public var description: String {
            switch self {
            case .notThisScheme: "the Authorization header is not a \(RequestSignature.scheme) signature"
            case .malformed(let reason): "the \(RequestSignature.scheme) header is malformed: \(reason)"
            }
        }
    }

    /// Parses an `Authorization` header value (strictly: every field once, nothing else).
    public static func parse(_ header: String) throws(ParseError) -> RequestSignature {
        guard header.hasPrefix(scheme + " ") else { throw .notThisScheme }
        guard header.utf8.count <= 1024 else { throw .malformed("longer than 1024 bytes") }
        var fields: [String: String] = [:]
        for part in header.dropFirst(scheme.count + 1).split(separator: ",") {
            // Spaces and tabs around each field (not Foundation's trimming: every request parses this).
            let pair = Self.trimmed(part)
            guard let equals = pair.firstIndex(of: "=") else { throw .malformed("\"\(pair)\" is not name=\"value\"") }
            let name = String(pair[..<equals])
            var value = pair[pair.index(after: equals)...]
            guard value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") else {
                throw .malformed("the value of \(name) must be quoted")
            }
            value = value.dropFirst().dropLast()
            guard fields.updateValue(String(value), forKey: name) == nil else {
                throw .malformed("\(name) appears twice")
            }
        }
        guard Set(fields.keys) == ["key", "time", "nonce", "signature"] else {
            throw .malformed("expected exactly key, time, nonce and signature")
        }
        guard let keyText = fields["key"], let key = Base64URL.decode(keyText), key.count == 65 else {
            throw .malformed("key is not a base64url X9.63 P-256 public key")
        }
        guard let timeText = fields["time"], let time = Int64(timeText) else {
            throw .malformed("time is not an integer")
        }
        guard let nonce = fields["nonce"], nonce.utf8.count == 32,
            nonce.utf8.allSatisfy({
                (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0)
            })
        else {
            throw .malformed("nonce is not 32 hex digits")
        }
        guard let signatureText = fields["signature"], let signature = Base64URL.decode(signatureText),
            signature.count == 64
        else { throw .malformed("signature is not a base64url 64-byte raw ECDSA signature") }
        return RequestSignature(publicKey: key, time: time, nonce: nonce.lowercased(), signature: signature)
    }

    static func trimmed(_ text: Substring) -> Substring {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) })
        else { return "" }
        return text[first...last]
    }

    /// Whether the signature is valid for this request (the time and nonce are the server's to check).
    public func isValid(method: String, path: String, body: some DataProtocol, traceparent: String? = nil) -> Bool {
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey),
            let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return key.isValidSignature(
            parsed,
            for: Self.signedBytes(
                method: method, path: path, time: time, nonce: nonce, body: body, traceparent: traceparent))
    }
}

/// Base64url without padding (RFC 4648 section 5), byte by byte: every signed request carries
/// two such values, and Foundation's base64 with three `replacingOccurrences` over it cost a
/// terminal tens of microseconds a request.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var group = UInt32(bytes[index]) << 16
            if count > 1 { group |= UInt32(bytes[index + 1]) << 8 }
            if count > 2 { group |= UInt32(bytes[index + 2]) }
            for position in 0...count {
                output.append(alphabet[Int((group >> (18 - 6 * UInt32(position))) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes of unpadded base64url text; nil for anything else (padding, `+`, `/`, spaces,
    /// a length no encoding has).
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        for character in text.utf8 {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
            case UInt8(ascii: "-"): value = 62
            case UInt8(ascii: "_"): value = 63
            default: return nil
            }
            values.append(value)
        }
        guard values.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(values.count * 3 / 4)
        var index = 0
        while index < values.count {
            let count = min(4, values.count - index)
            var group: UInt32 = 0
            for position in 0..<4 {
                group <<= 6
                if position < count { group |= UInt32(values[index + position]) }
            }
            for position in 0..<(count - 1) {
                bytes.append(UInt8(truncatingIfNeeded: group >> (16 - 8 * UInt32(position))))
            }
            index += 4
        }
        return bytes
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
}
