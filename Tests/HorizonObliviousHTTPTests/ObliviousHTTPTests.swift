import Crypto
import Foundation
import HorizonCore
import Testing

@testable import HorizonObliviousHTTP

private func bytes(_ hex: String) -> [UInt8] {
    guard let value = [UInt8](hexString: hex) else { fatalError("bad hex in a test vector") }
    return value
}

/// RFC 9458 Appendix A: the gateway key, its configuration, the request, and the response
/// sealed with the published response nonce.
enum RFC9458Example {
    static let privateKey = "3c168975674b2fa8e465970b79c8dcf09f1c741626480bd4c6162fc5b6a98e1a"
    static let keyConfiguration =
        "01002031e1f05a740102115220e9af918f738674aec95f54db6e04eb705aae8e79815500080001000100010003"
    static let request = "00034745540568747470730b6578616d706c652e636f6d012f"
    static let encapsulatedRequest =
        "010020000100014b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b4726374e469135906992e1268c594d2a10c695d858c40a026e7965e7d86b83dd440b2c0185204b4d63525"
    static let response = "0140c8"
    static let responseNonce = "c789e7151fcba46158ca84b04464910d"
    static let encapsulatedResponse = "c789e7151fcba46158ca84b04464910d86f9013e404feea014e7be4a441f234f857fbd"
}

/// RFC 9292 Figure 8 (known-length request) and Figure 13 (known-length response with a trailer).
enum RFC9292Example {
    static let request =
        "0003474554056874747073000a2f68656c6c6f2e747874406c0a757365722d6167656e74346375726c2f372e31362e33206c69626375726c2f372e31362e33204f70656e53534c2f302e392e376c207a6c69622f312e322e3304686f73740f7777772e6578616d706c652e636f6d0f6163636570742d6c616e677561676506656e2c206d690000"
    static let response =
        "0140c8001d5468697320636f6e74656e7420636f6e7461696e732043524c462e0d0a0d07747261696c65720474657874"
}

@Suite("Oblivious HTTP")
struct ObliviousHTTPTests {
    static func gateway() -> ObliviousHTTPGateway {
        ObliviousHTTPGateway(keyID: 7, privateKey: P256.KeyAgreement.PrivateKey())
    }

    static let sample = BinaryHTTPRequest(
        method: "POST", scheme: "http", authority: "127.0.0.1:8080", path: "/v1/wallet/account?x=1",
        headerFields: [.init(name: "content-type", value: "application/json"), .init(name: "x-marker", value: "m")],
        content: Array(#"{"hello":"world"}"#.utf8))

    @Test func requestAndResponseRoundTripPaddedToBuckets() throws {
        let gateway = Self.gateway()
        let configuration = try ObliviousHTTPKeyConfiguration(decoding: gateway.configuration.encoded())
        let (sealed, opener) = try ObliviousHTTP.seal(Self.sample, to: configuration)
        #expect(sealed.count == 256)
        let opened = try gateway.open(sealed)
        #expect(try BinaryHTTPRequest(decoding: opened.plaintext) == Self.sample)
        let response = BinaryHTTPResponse(
            status: 201, headerFields: [.init(name: "content-type", value: "application/json")],
            content: Array(repeating: 0x41, count: 600))
        let sealedResponse = try opened.responseSealer.seal(response)
        #expect(sealedResponse.count == 1024)
        #expect(try opener.openResponse(sealedResponse) == response)
    }

    @Test func everyBucketAndTheLimit() throws {
        let gateway = Self.gateway()
        for (size, bucket) in [(10, 256), (300, 512), (800, 1024), (1500, 2048), (3900, 4096)] {
            var request = Self.sample
            request.content = Array(repeating: 0x61, count: size)
            let (sealed, _) = try ObliviousHTTP.seal(request, to: gateway.configuration)
            #expect(sealed.count == bucket, "content of \(size) bytes")
            #expect(try BinaryHTTPRequest(decoding: try gateway.open(sealed).plaintext) == request)
        }
        var tooLarge = Self.sample
        tooLarge.content = Array(repeating: 0x61, count: 4000)
        #expect {
            _ = try ObliviousHTTP.seal(tooLarge, to: gateway.configuration)
        } throws: { error in
            guard case ObliviousHTTPError.tooLarge(let sealed, 4096)? = error as? ObliviousHTTPError else {
                return false
            }
            return sealed > 4096 && "\(error)".contains("Nothing was sent")
        }
    }

    @Test func everyTruncationAndEveryFlippedBitOfARequestIsRefused() throws {
        let gateway = Self.gateway()
        let (sealed, _) = try ObliviousHTTP.seal(Self.sample, to: gateway.configuration)
        for length in 0..<sealed.count {
            #expect(throws: ObliviousHTTPError.self) { _ = try gateway.open(Array(sealed.prefix(length))) }
        }
        for index in sealed.indices {
            var altered = sealed
            altered[index] ^= 0x01
            #expect(throws: ObliviousHTTPError.self, "bit flipped at \(index)") { _ = try gateway.open(altered) }
        }
        var otherKey = sealed
        otherKey[0] = 8
        #expect(throws: ObliviousHTTPError.unknownKey(id: 8)) { _ = try gateway.open(otherKey) }
    }

    @Test func everyTruncationAndEveryFlippedBitOfAResponseIsRefused() throws {
        let gateway = Self.gateway()
        let (sealed, opener) = try ObliviousHTTP.seal(Self.sample, to: gateway.configuration)
        let response = try gateway.open(sealed).responseSealer.seal(BinaryHTTPResponse(status: 200))
        for length in 0..<response.count {
            #expect(throws: ObliviousHTTPError.self) { _ = try opener.open(Array(response.prefix(length))) }
        }
        for index in response.indices {
            var altered = response
            altered[index] ^= 0x80
            #expect(throws: ObliviousHTTPError.self) { _ = try opener.open(altered) }
        }
    }

    @Test func aResponseDoesNotOpenWithAnotherRequestsContext() throws {
        let gateway = Self.gateway()
        let (first, _) = try ObliviousHTTP.seal(Self.sample, to: gateway.configuration)
        let (_, secondOpener) = try ObliviousHTTP.seal(Self.sample, to: gateway.configuration)
        let response = try gateway.open(first).responseSealer.seal(BinaryHTTPResponse(status: 200))
        #expect(throws: ObliviousHTTPError.decryptionFailed("the sealed response")) {
            _ = try secondOpener.open(response)
        }
    }

    @Test func aRequestSealedToAnotherGatewayDoesNotOpen() throws {
        let (sealed, _) = try ObliviousHTTP.seal(Self.sample, to: Self.gateway().configuration)
        #expect(throws: ObliviousHTTPError.decryptionFailed("the sealed request")) {
            _ = try Self.gateway().open(sealed)
        }
    }

    // MARK: RFC 9458 Appendix A

    @Test func theRFC9458KeyConfigurationDecodesAndEncodesExactly() throws {
        let configuration = try ObliviousHTTPKeyConfiguration(decoding: bytes(RFC9458Example.keyConfiguration))
        #expect(configuration.keyID == 1)
        #expect(configuration.kem == .x25519HKDFSHA256)
        #expect(configuration.symmetricAlgorithms == [.hkdfSHA256AES128GCM, .init(kdf: 1, aead: 3)])
        #expect(configuration.encoded() == bytes(RFC9458Example.keyConfiguration))
        let key = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes(RFC9458Example.privateKey))
        #expect(Array(key.publicKey.rawRepresentation) == configuration.publicKey)
    }

    @Test func theRFC9458ExampleRequestOpensAndItsResponseComesOutExactly() throws {
        let configuration = try ObliviousHTTPKeyConfiguration(decoding: bytes(RFC9458Example.keyConfiguration))
        let gateway = ObliviousHTTPGateway(
            x25519: try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes(RFC9458Example.privateKey)),
            configuration: configuration)
        let opened = try gateway.open(bytes(RFC9458Example.encapsulatedRequest))
        #expect(opened.plaintext == bytes(RFC9458Example.request))
        let request = try BinaryHTTPRequest(decoding: opened.plaintext)
        #expect(
            request == BinaryHTTPRequest(method: "GET", scheme: "https", authority: "example.com", path: "/"))
        let sealed = try opened.responseSealer.seal(
            bytes(RFC9458Example.response), responseNonce: bytes(RFC9458Example.responseNonce))
        #expect(sealed == bytes(RFC9458Example.encapsulatedResponse))
        let response = try opened.responseSealer.matchingOpener.openResponse(bytes(RFC9458Example.encapsulatedResponse))
        #expect(response == BinaryHTTPResponse(status: 200))
        // And a request sealed by this code to the RFC's configuration opens with the RFC's key.
        let (ours, opener) = try ObliviousHTTP.seal(request, to: configuration)
        let reopened = try gateway.open(ours)
        #expect(try BinaryHTTPRequest(decoding: reopened.plaintext) == request)
        #expect(try opener.openResponse(reopened.responseSealer.seal(BinaryHTTPResponse(status: 204))).status == 204)
    }

    @Test func malformedKeyConfigurationsAreRefused() throws {
        let good = bytes(RFC9458Example.keyConfiguration)
        #expect(throws: ObliviousHTTPError.self) { _ = try ObliviousHTTPKeyConfiguration(decoding: good + [0]) }
        for length in 0..<good.count {
            #expect(throws: ObliviousHTTPError.self) {
                _ = try ObliviousHTTPKeyConfiguration(decoding: Array(good.prefix(length)))
            }
        }
        var unknownKEM = good
        unknownKEM[2] = 0x99
        #expect {
            _ = try ObliviousHTTPKeyConfiguration(decoding: unknownKEM)
        } throws: { error in
            if case ObliviousHTTPError.unsupportedKeyConfiguration = error { true } else { false }
        }
        // Only ChaCha20-Poly1305 offered: decodes, but nothing can be sealed to it.
        var onlyChaCha = Array(good.prefix(35)) + [0x00, 0x04, 0x00, 0x01, 0x00, 0x03]
        let chaCha = try ObliviousHTTPKeyConfiguration(decoding: onlyChaCha)
        #expect(
            throws: ObliviousHTTPError.unsupportedKeyConfiguration("it does not offer HKDF-SHA256 with AES-128-GCM")
        ) {
            _ = try ObliviousHTTP.seal(
                BinaryHTTPRequest(method: "GET", scheme: "https", authority: "", path: "/"), to: chaCha)
        }
        onlyChaCha[36] = 0x06
        #expect(throws: ObliviousHTTPError.self) { _ = try ObliviousHTTPKeyConfiguration(decoding: onlyChaCha) }
    }

    // MARK: RFC 9292

    @Test func theRFC9292KnownLengthRequestDecodesAndEncodesExactly() throws {
        let request = try BinaryHTTPRequest(decoding: bytes(RFC9292Example.request))
        let expected = BinaryHTTPRequest(
            method: "GET", scheme: "https", authority: "", path: "/hello.txt",
            headerFields: [
                .init(name: "user-agent", value: "curl/7.16.3 libcurl/7.16.3 OpenSSL/0.9.7l zlib/1.2.3"),
                .init(name: "host", value: "www.example.com"), .init(name: "accept-language", value: "en, mi"),
            ])
        #expect(request == expected)
        #expect(expected.encoded() == bytes(RFC9292Example.request))
        // Padding (section 3.8) and the allowed truncations mean the same request.
        #expect(try BinaryHTTPRequest(decoding: bytes(RFC9292Example.request) + [0, 0, 0, 0]) == expected)
        #expect(try BinaryHTTPRequest(decoding: bytes(RFC9292Example.request).dropLast(2).map { $0 }) == expected)
    }

    @Test func theRFC9292KnownLengthResponseDecodesAndEncodesExactly() throws {
        let response = try BinaryHTTPResponse(decoding: bytes(RFC9292Example.response))
        #expect(response.status == 200)
        #expect(response.headerFields.isEmpty)
        #expect(response.content == Array("This content contains CRLF.\r\n".utf8))
        // Trailers are read and dropped; without them the encoding ends in an empty section.
        #expect(response.encoded() == bytes("0140c8001d5468697320636f6e74656e7420636f6e7461696e732043524c462e0d0a00"))
        #expect(try BinaryHTTPResponse(decoding: bytes(RFC9458Example.response)) == BinaryHTTPResponse(status: 200))
    }

    @Test func malformedBinaryMessagesAreRefused() throws {
        let good = bytes(RFC9292Example.request)
        // Cut inside the control data or inside a field: refused.
        for length in [0, 1, 3, 8, 20, 40, 100] {
            #expect(throws: ObliviousHTTPError.self, "cut at \(length)") {
                _ = try BinaryHTTPRequest(decoding: Array(good.prefix(length)))
            }
        }
        #expect(throws: ObliviousHTTPError.malformedMessage("bytes after the message that are not zero padding")) {
            _ = try BinaryHTTPRequest(decoding: good + [0, 1])
        }
        #expect(throws: ObliviousHTTPError.self) { _ = try BinaryHTTPRequest(decoding: [0x02] + good.dropFirst()) }
        #expect(throws: ObliviousHTTPError.self) { _ = try BinaryHTTPResponse(decoding: good) }
        let upperCaseName = BinaryHTTPRequest(
            method: "GET", scheme: "https", authority: "", path: "/",
            headerFields: [.init(name: "x", value: "a\r\nb: c")])
        #expect(throws: ObliviousHTTPError.self) { _ = try BinaryHTTPRequest(decoding: upperCaseName.encoded()) }
        let badPath = BinaryHTTPRequest(method: "GET", scheme: "https", authority: "", path: "/a b")
        #expect(throws: ObliviousHTTPError.self) { _ = try BinaryHTTPRequest(decoding: badPath.encoded()) }
        // A length that claims far more than the message holds is refused without reading it.
        #expect(throws: ObliviousHTTPError.self) {
            _ = try BinaryHTTPRequest(decoding: bytes("000347455405687474707300012f") + [0xBF, 0xFF, 0xFF, 0xFF])
        }
    }

    /// A field name is a token and a field value has no whitespace around it (RFC 9110 sections
    /// 5.1 and 5.5): a message with anything else is refused, not carried with the field dropped.
    @Test func invalidFieldNamesAndValuesWithSurroundingWhitespaceAreRefused() throws {
        func request(_ name: String, _ value: String) -> [UInt8] {
            BinaryHTTPRequest(
                method: "GET", scheme: "https", authority: "", path: "/",
                headerFields: [.init(name: "date", value: "x"), .init(name: name, value: value)]
            ).encoded()
        }
        for name in ["x(y", "a,b", "x/y", "x@y", "{x}", "x;y", "x=y", "x\"y", "é", ":path", ""] {
            #expect(throws: ObliviousHTTPError.malformedMessage("header section has an invalid field name"), "\(name)") {
                _ = try BinaryHTTPRequest(decoding: request(name, "1"))
            }
        }
        for value in [" 1", "1 ", "\t1", "1\t", " "] {
            #expect(
                throws: ObliviousHTTPError.malformedMessage("header section field accept has whitespace around its value")
            ) { _ = try BinaryHTTPRequest(decoding: request("accept", value)) }
        }
        // Tokens with every allowed punctuation, inner spaces and an empty value are fine.
        let fine = try BinaryHTTPRequest(decoding: request("x-a!#$%&'*+.^_`|~9", "a b\tc"))
        #expect(fine.value(of: "x-a!#$%&'*+.^_`|~9") == "a b\tc")
        #expect(try BinaryHTTPRequest(decoding: request("accept", "")).value(of: "accept") == "")
    }
}

@Suite("Signed gateway key configuration")
struct SignedGatewayKeyConfigurationTests {
    @Test func aConfigurationVerifiesOnlyAgainstTheAnchorThatSignedIt() throws {
        let issuer = P256.Signing.PrivateKey()
        let configuration = ObliviousHTTPKeyConfiguration(keyID: 3, publicKey: P256.KeyAgreement.PrivateKey().publicKey)
        let signed = try SignedGatewayKeyConfiguration.sign(configuration, with: issuer)
        #expect(try signed.verified(by: [issuer.publicKey]) == configuration)
        #expect(throws: ObliviousHTTPError.self) { _ = try signed.verified(by: [P256.Signing.PrivateKey().publicKey]) }
        // Another key put under the issuer's signature is refused.
        let swapped = SignedGatewayKeyConfiguration(
            configuration: ObliviousHTTPKeyConfiguration(keyID: 3, publicKey: P256.KeyAgreement.PrivateKey().publicKey),
            signature: signed.signature)
        #expect(throws: ObliviousHTTPError.self) { _ = try swapped.verified(by: [issuer.publicKey]) }
        #expect(
            SignedGatewayKeyConfiguration.signedBytes(configuration).starts(
                with: Array("horizon/ohttp-key-config/v1\u{0}".utf8)))
    }
}
