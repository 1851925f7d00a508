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
}
