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
    /// nonce and the body's SHA-256, each on its own line after the scheme's label.
    public static func signedBytes(method: String, path: String, time: Int64, nonce: String, body: some DataProtocol)
        -> [UInt8]
    {
        let bodyDigest = SHA256.hash(data: body).hexString
        return Array([label, method.uppercased(), path, String(time), nonce, bodyDigest].joined(separator: "\n").utf8)
    }

    /// Signs a request with `key` at `time` with a fresh random nonce.
    public static func sign(
        method: String, path: String, body: some DataProtocol, with key: P256.Signing.PrivateKey, time: Int64
    ) throws -> RequestSignature {
        let nonce = (0..<16).map { _ in UInt8.random(in: 0...255) }.hexString
        let bytes = signedBytes(method: method, path: path, time: time, nonce: nonce, body: body)
        let signature = try key.signature(for: bytes)
        return RequestSignature(
            publicKey: Array(key.publicKey.x963Representation), time: time, nonce: nonce,
            signature: Array(signature.rawRepresentation))
    }

    /// The `Authorization` header's value.
    public var headerValue: String {
        "\(Self.scheme) key=\"\(base64URL(publicKey))\", time=\"\(time)\", nonce=\"\(nonce)\", signature=\"\(base64URL(signature))\""
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
            let pair = part.trimmingCharacters(in: .whitespaces)
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
        guard let keyText = fields["key"], let key = fromBase64URL(keyText), key.count == 65 else {
            throw .malformed("key is not a base64url X9.63 P-256 public key")
        }
        guard let timeText = fields["time"], let time = Int64(timeText) else {
            throw .malformed("time is not an integer")
        }
        guard let nonce = fields["nonce"], nonce.count == 32, nonce.allSatisfy(\.isHexDigit) else {
            throw .malformed("nonce is not 32 hex digits")
        }
        guard let signatureText = fields["signature"], let signature = fromBase64URL(signatureText),
            signature.count == 64
        else { throw .malformed("signature is not a base64url 64-byte raw ECDSA signature") }
        return RequestSignature(publicKey: key, time: time, nonce: nonce.lowercased(), signature: signature)
    }

    /// Whether the signature is valid for this request (the time and nonce are the server's to check).
    public func isValid(method: String, path: String, body: some DataProtocol) -> Bool {
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey),
            let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        else { return false }
        return key.isValidSignature(
            parsed, for: Self.signedBytes(method: method, path: path, time: time, nonce: nonce, body: body))
    }
}

func base64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

func fromBase64URL(_ text: String) -> [UInt8]? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    guard !base64.contains("=") else { return nil }
    base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
    return Data(base64Encoded: base64).map { Array($0) }
}
