import Foundation
import HTTPTypes
import HorizonServer
import HummingbirdTesting
import Testing

/// Every response carries `X-Request-Id`, the same id as its error envelope's `requestId`.
@Suite("Request ids")
struct RequestIDTests {
    static var generated: Regex<Substring> { #/^req_[0-9a-f]{24}$/# }

    @Test func successesAndErrorsCarryOneRequestID() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            var ids: Set<String> = []
            for (method, path) in [
                (HTTPRequest.Method.get, "/health"), (.get, "/ready"), (.get, "/v1/anchor"),
                (.get, "/v1/revocations"),
            ] {
                let response = try await client.send(method, path)
                #expect(response.status == .ok, "\(path)")
                let id = try #require(response.headers[.requestID], "\(path)")
                #expect(id.wholeMatch(of: Self.generated) != nil, "\(id)")
                ids.insert(id)
            }
            let created = try await client.send(.post, "/v1/terminals/activate", json: TerminalKey().activation())
            #expect(created.status == .created)
            ids.insert(try #require(created.headers[.requestID]))

            // Errors from every layer: routing, body limit, decoding, the handler, the signature check.
            let errors = [
                try await client.send(.get, "/v1/nope"),
                try await client.send(.delete, "/v1/anchor"),
                try await client.send(
                    .post, "/v1/terminals/activate", json: "{", headers: [.contentType: "text/plain"]),
                try await client.send(.post, "/v1/terminals/activate", json: "{"),
                try await client.send(
                    .post, "/v1/terminals/activate", json: TerminalKey().activation(password: "wrong password!")),
                try await client.send(.post, "/v1/terminals/credential"),
                try await client.send(
                    .post, "/v1/terminals/credential", headers: [.authorization: "HorizonSignature key=\"x\""]),
            ]
            for response in errors {
                let envelope = try #require(try? JSONDecoder().decode(ErrorEnvelope.self, from: response.data))
                #expect(response.headers[.requestID] == envelope.error.requestId)
                #expect(envelope.error.requestId.wholeMatch(of: Self.generated) != nil)
                ids.insert(envelope.error.requestId)
            }
            #expect(ids.count == 5 + errors.count, "request ids are not unique")
        }
    }

    @Test func aSaneCallerIDIsEchoed() async throws {
        let server = try await TestServer()
        try await server.withClient { client in
            for id in ["trace-1234", "A1b2_C3d4-E5f6", String(repeating: "z", count: 64)] {
                let ok = try await client.send(.get, "/health", headers: [.requestID: id])
                #expect(ok.headers[.requestID] == id)
                let error = try await client.send(.get, "/v1/nope", headers: [.requestID: id])
                let envelope = try expectError(error, .notFound, "not_found", "there is no /v1/nope")
                #expect(envelope.requestId == id)
            }
        }
    }

    @Test func anUnsafeCallerIDIsReplaced() async throws {
        let server = try await TestServer()
        try await server.withClient { client in
            // Too short, too long, spaces, markup, a log-injection attempt, non-ASCII.
            for id in [
                "short", String(repeating: "z", count: 65), "has spaces in it", "<script>alert(1)</script>",
                "abc123\\u000d\\u000aforged=1", "idé-12345678",
            ] {
                let ok = try await client.send(.get, "/health", headers: [.requestID: id])
                let echoed = try #require(ok.headers[.requestID])
                #expect(echoed != id)
                #expect(echoed.wholeMatch(of: Self.generated) != nil, "\(echoed)")
                let error = try await client.send(.get, "/v1/nope", headers: [.requestID: id])
                let envelope = try expectError(error, .notFound, "not_found", "there is no /v1/nope")
                #expect(envelope.requestId.wholeMatch(of: Self.generated) != nil)
            }
        }
    }
}
