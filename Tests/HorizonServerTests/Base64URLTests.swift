import Crypto
import Foundation
import HorizonAPI
import Testing

/// The signed-request header's base64url (RFC 4648 section 5, no padding), written byte by byte.
@Suite("Base64url of signed requests")
struct Base64URLTests {
    @Test func encodesAsRFC4648SaysAndDecodesBack() {
        var generator = SystemRandomNumberGenerator()
        for count in 0...70 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected, "\(count) bytes")
            #expect(Base64URL.decode(expected) == bytes, "\(count) bytes")
        }
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
    }

    @Test func refusesWhatIsNotUnpaddedBase64url() {
        for text in ["QQ==", "+/8", "QU JD", "Q", "QUJDR", "QUJD\n", "é"] {
            #expect(Base64URL.decode(text) == nil, "\(text)")
        }
        #expect(Base64URL.decode("") == [])
    }

    @Test func theHeaderParsesStrictly() throws {
        let key = P256.Signing.PrivateKey()
        let signed = try RequestSignature.sign(
            method: "POST", path: "/v1/payments", body: [1, 2, 3], with: key, time: 7)
        // Blanks around the fields are allowed, as HTTP folds them.
        let parsed = try RequestSignature.parse(signed.headerValue.replacingOccurrences(of: ", ", with: " ,\t ") + " ")
        #expect(parsed.publicKey == Array(key.publicKey.x963Representation) && parsed.nonce == signed.nonce)
        #expect(parsed.isValid(method: "POST", path: "/v1/payments", body: [1, 2, 3]))
        let nonce = signed.nonce
        for bad in [
            String(repeating: "g", count: 32),  // not hex
            String(nonce.dropLast(2)) + "１２",  // fullwidth digits
            String(nonce.dropLast()),  // 31
        ] {
            let header = signed.headerValue.replacingOccurrences(of: "nonce=\"\(nonce)\"", with: "nonce=\"\(bad)\"")
            #expect(throws: RequestSignature.ParseError.malformed("nonce is not 32 hex digits")) {
                try RequestSignature.parse(header)
            }
        }
    }
}
