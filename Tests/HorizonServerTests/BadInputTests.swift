import Foundation
import HTTPTypes
import HorizonServer
import HummingbirdTesting
import NIOCore
import Testing

/// Bad input: every malformed request gets its exact error, and changes nothing.
@Suite("Bad input")
struct BadInputTests {
    /// Sends `body` as an activation and checks the error and that the database is as before.
    func expectRefusedActivation(
        _ body: String, headers: HTTPFields = [:], _ status: HTTPResponse.Status, _ code: String, _ message: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let before = try await server.state()
        let response = try await server.withClient { client in
            try await client.send(.post, "/v1/terminals/activate", json: body, headers: headers)
        }
        try expectError(response, status, code, message, sourceLocation: sourceLocation)
        #expect(try await server.state() == before, sourceLocation: sourceLocation)
    }

    @Test func malformedJSON() async throws {
        try await expectRefusedActivation(
            #"{"email": "owner@bakery.example", "password": "#, .badRequest, "malformed_json",
            "the body is not valid JSON")
    }

    @Test func aBodyThatIsNotAnObject() async throws {
        for body in ["[1, 2]", "\"text\"", "null", "42"] {
            try await expectRefusedActivation(body, .badRequest, "malformed_json", "the body must be a JSON object")
        }
    }

    @Test func wrongTypes() async throws {
        let key = TerminalKey()
        try await expectRefusedActivation(
            key.activation(overrides: ["email": 5]), .badRequest, "malformed_json",
            #"the field "email" has the wrong type (expected a string)"#)
        try await expectRefusedActivation(
            key.activation(overrides: ["label": ["Till", 1]]), .badRequest, "malformed_json",
            #"the field "label" has the wrong type (expected a string)"#)
        try await expectRefusedActivation(
            key.activation(overrides: ["proof": NSNull()]), .badRequest, "malformed_json",
            #"the field "proof" is null (no field of the API takes null"#)
    }

    @Test func missingFields() async throws {
        for field in ["email", "password", "label", "publicKey", "proof"] {
            try await expectRefusedActivation(
                TerminalKey().activation(overrides: [field: nil]), .badRequest, "malformed_json",
                "the field \"\(field)\" is missing")
        }
    }

    @Test func unknownExtraFields() async throws {
        try await expectRefusedActivation(
            TerminalKey().activation(overrides: ["merchantId": "m_other"]), .badRequest, "malformed_json",
            #"the field "merchantId" is not part of the API"#)
    }

    @Test func emptyBody() async throws {
        try await expectRefusedActivation("", .badRequest, "invalid_request", "the request needs a JSON body")
    }

    @Test func wrongContentType() async throws {
        let body = TerminalKey().activation()
        try await expectRefusedActivation(
            body, headers: [.contentType: "text/plain"], .unsupportedMediaType, "unsupported_media_type",
            "the body must be JSON with Content-Type: application/json (got text/plain)")
        try await expectRefusedActivation(
            body, headers: [.contentType: "application/jsonp"], .unsupportedMediaType, "unsupported_media_type",
            "(got application/jsonp)")
        try await expectRefusedActivation(
            body, headers: [.contentType: "application/x-www-form-urlencoded"], .unsupportedMediaType,
            "unsupported_media_type", "(got application/x-www-form-urlencoded)")
    }

    @Test func jsonWithACharsetIsAccepted() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let response = try await server.withClient { client in
            try await client.send(
                .post, "/v1/terminals/activate", json: TerminalKey().activation(),
                headers: [.contentType: "application/json; charset=utf-8"])
        }
        #expect(response.status == .created, "\(response.text)")
    }

    @Test func oversizedBodyWithContentLength() async throws {
        let padding = String(repeating: "x", count: 5000)
        try await expectRefusedActivation(
            TerminalKey().activation(overrides: ["password": padding]), .contentTooLarge, "payload_too_large",
            "bytes; the limit is 4096")
    }

    @Test func passwordAndEmailLongerThanTheContractAllows() async throws {
        try await expectRefusedActivation(
            TerminalKey().activation(overrides: ["password": String(repeating: "p", count: 1025)]), .badRequest,
            "invalid_request", "password must be at most 1024 bytes")
        let email = String(repeating: "a", count: 250) + "@b.example"
        let key = TerminalKey()
        try await expectRefusedActivation(
            key.activation(email: email), .badRequest, "invalid_request", "email must be at most 254 bytes")
    }

    @Test func unknownPath() async throws {
        let server = try await TestServer()
        // `/` is not among them: it sends a browser to the dashboard (DashboardTests).
        for path in ["/v1/nope", "/v2/anchor", "/v1/anchor/extra", "/v1"] {
            let response = try await server.withClient { client in try await client.send(.get, path) }
            try expectError(response, .notFound, "not_found", "there is no \(path) in this API")
        }
    }

    @Test func wrongMethodOnAKnownPath() async throws {
        let server = try await TestServer()
        let cases: [(HTTPRequest.Method, String, String)] = [
            (.delete, "/v1/anchor", "GET"), (.post, "/health", "GET"), (.get, "/v1/terminals/activate", "POST"),
            (.put, "/v1/terminals/credential", "POST"), (.patch, "/v1/revocations", "GET"),
            // A literal path next to a templated one answers for itself, not for the template.
            (.options, "/v1/payments/offline", "POST"), (.get, "/v1/payments/offline", "POST"),
            (.delete, "/v1/payments/offline", "POST"),
            (.options, "/v1/payments/" + String(repeating: "ab", count: 16), "GET"),
        ]
        for (method, path, allowed) in cases {
            let response = try await server.withClient { client in try await client.send(method, path) }
            try expectError(
                response, .methodNotAllowed, "method_not_allowed",
                "\(method.rawValue) is not allowed on \(path); use \(allowed)")
            #expect(response.headers[.allow] == allowed)
        }
    }

    @Test func labelTooLongEmptyOrWithControlCharacters() async throws {
        for label in [
            String(repeating: "L", count: 65), String(repeating: "é", count: 33), "   ", "Till\u{7}2", "Till\n2",
            "Till\u{1B}[2J",
        ] {
            try await expectRefusedActivation(
                TerminalKey().activation(label: label), .badRequest, "invalid_request",
                "label must be 1 to 64 bytes of printable text")
        }
    }

    @Test func aLabelOfExactly64BytesIsAccepted() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        let response = try await server.activate(TerminalKey(), label: String(repeating: "L", count: 64))
        #expect(response.label == String(repeating: "L", count: 64))
    }

    @Test func publicKeyNotBase64OrNotAP256Point() async throws {
        let key = TerminalKey()
        try await expectRefusedActivation(
            key.activation(overrides: ["publicKey": "not base64!"]), .badRequest, "invalid_request",
            "publicKey must be a P-256 public key, X9.63 (65 bytes), in standard base64")
        try await expectRefusedActivation(
            key.activation(overrides: ["publicKey": Data(repeating: 4, count: 33).base64EncodedString()]), .badRequest,
            "invalid_request", "publicKey must be a P-256 public key, X9.63 (65 bytes)")
        let offCurve = Data([0x04] + [UInt8](repeating: 0x01, count: 64)).base64EncodedString()
        try await expectRefusedActivation(
            key.activation(overrides: ["publicKey": offCurve]), .badRequest, "invalid_request",
            "the public key is not a point on P-256")
    }

    @Test func badProofSignature() async throws {
        let key = TerminalKey()
        let other = TerminalKey()
        // Signed over another e-mail, by another key, not base64, and another key's proof.
        try await expectRefusedActivation(
            key.activation(overrides: ["proof": try key.proof(email: "someone@else.example", label: "Till 1")]),
            .unauthorized, "signature_invalid", "proof is not the terminal key's signature over the activation")
        try await expectRefusedActivation(
            key.activation(overrides: ["proof": try other.proof(email: TestServer.email, label: "Till 1")]),
            .unauthorized, "signature_invalid", "proof is not the terminal key's signature")
        try await expectRefusedActivation(
            key.activation(overrides: ["proof": "%%%"]), .unauthorized, "signature_invalid",
            "proof is not the terminal key's signature")
        try await expectRefusedActivation(
            key.activation(overrides: ["proof": Data(count: 64).base64EncodedString()]), .unauthorized,
            "signature_invalid", "proof is not the terminal key's signature")
    }
}

/// Bodies over the limit sent without a length (chunked), on a real socket.
@Suite("Bad input on a live server")
struct LiveBadInputTests {
    @Test func oversizedChunkedBody() async throws {
        let server = try await TestServer(configuration: .testing(maximumBodyBytes: 1024))
        try await server.addMerchant()
        let before = try await server.state()
        let response = try await server.withLiveServer { client in
            let port = try #require(client.port)
            var request =
                "POST /v1/terminals/activate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            request += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            let chunk = String(repeating: "x", count: 300)
            for _ in 0..<5 { request += String(300, radix: 16) + "\r\n" + chunk + "\r\n" }
            request += "0\r\n\r\n"
            return try await RawHTTP.exchange(port: port, Array(request.utf8))
        }
        #expect(response.status == 413, "\(response.body)")
        let envelope = try JSONDecoder().decode(ErrorEnvelope.self, from: Data(response.body.utf8))
        #expect(envelope.error.code == "payload_too_large")
        #expect(envelope.error.message == "the request body is over the limit of 1024 bytes")
        #expect(response.headers["x-request-id"] == envelope.error.requestId)
        #expect(try await server.state() == before)
    }

    @Test func aPostWithNoBodyAtAll() async throws {
        // As `curl -X POST` sends it: no Content-Length, no Transfer-Encoding, no Content-Type.
        let server = try await TestServer()
        let response = try await server.withLiveServer { client in
            let port = try #require(client.port)
            let request = "POST /v1/terminals/activate HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            return try await RawHTTP.exchange(port: port, Array(request.utf8))
        }
        #expect(response.status == 400, "\(response.body)")
        let envelope = try JSONDecoder().decode(ErrorEnvelope.self, from: Data(response.body.utf8))
        #expect(envelope.error.code == "invalid_request")
        #expect(envelope.error.message == "the request needs a JSON body (see openapi.yaml)")
        #expect(response.headers["x-request-id"] == envelope.error.requestId)
    }

    @Test func aChunkedBodyUnderTheLimitIsServed() async throws {
        let server = try await TestServer(configuration: .testing(maximumBodyBytes: 1024))
        try await server.addMerchant()
        let body = TerminalKey().activation()
        let response = try await server.withLiveServer { client in
            let port = try #require(client.port)
            var request =
                "POST /v1/terminals/activate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            request += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            request += String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n0\r\n\r\n"
            return try await RawHTTP.exchange(port: port, Array(request.utf8))
        }
        #expect(response.status == 201, "\(response.body)")
        #expect(try await server.ledger.terminals().count == 1)
    }
}
