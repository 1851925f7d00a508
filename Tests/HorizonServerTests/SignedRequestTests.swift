import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonLedger
import HorizonSecureChannel
import HorizonServer
import HummingbirdTesting
import Testing

/// `HorizonSignature` requests on POST /v1/terminals/credential: the renewal of a terminal's
/// credential, signed by its key with a time and a nonce.
@Suite("Signed requests")
struct SignedRequestTests {
    static let path = "/v1/terminals/credential"

    /// A server with one merchant and one activated terminal.
    func activatedTerminal() async throws -> (TestServer, TerminalKey, Components.Schemas.TerminalCredentialResponse) {
        let server = try await TestServer()
        try await server.addMerchant()
        let key = TerminalKey()
        let response = try await server.activate(key)
        return (server, key, response)
    }

    func renew(_ server: TestServer, authorization: String?, body: String? = nil, ledger: Ledger? = nil) async throws
        -> TestResponse
    {
        try await server.withClient(ledger: ledger) { client in
            var headers: HTTPFields = [:]
            if let authorization { headers[.authorization] = authorization }
            return try await client.send(.post, Self.path, json: body, headers: headers)
        }
    }

    @Test func aValidRenewalReturnsAFreshCredential() async throws {
        let (server, key, first) = try await activatedTerminal()
        server.clock.advance(1800)
        let response = try await renew(
            server, authorization: try key.authorization(method: "POST", path: Self.path, time: server.clock.now))
        #expect(response.status == .ok, "\(response.text)")
        let renewed = try JSONDecoder().decode(Components.Schemas.TerminalCredentialResponse.self, from: response.data)
        #expect(renewed.terminalId == first.terminalId)
        #expect(renewed.merchantId == first.merchantId)
        #expect(renewed.label == first.label)
        #expect(renewed.expiresAt == server.clock.now + 3600)
        #expect(renewed.expiresAt > first.expiresAt)
        #expect(renewed.credential != first.credential)
        let credential = try TerminalCredential.decode(Array(try #require(Data(base64Encoded: renewed.credential))))
        _ = try credential.verify(trusting: [server.issuer.anchor], at: server.clock.now)
        #expect(credential.terminalKey == Array(key.key.publicKey.x963Representation))
        #expect(try await server.ledger.terminals().first?.credentialExpiresAt == renewed.expiresAt)
    }

    @Test func noSignatureIsUnauthenticated() async throws {
        let (server, _, _) = try await activatedTerminal()
        let before = try await server.state()
        for authorization in [nil, "Bearer abc.def.ghi", "Basic b3duZXI6cGFzc3dvcmQ="] {
            let response = try await renew(server, authorization: authorization)
            try expectError(
                response, .unauthorized, "unauthenticated",
                "this operation needs a request signed with the terminal's key (HorizonSignature)")
            #expect(response.headers[.wwwAuthenticate] == "HorizonSignature")
        }
        #expect(try await server.state() == before)
    }

    @Test func malformedSignatureHeaders() async throws {
        let (server, key, _) = try await activatedTerminal()
        let valid = try RequestSignature.sign(
            method: "POST", path: Self.path, body: Data(), with: key.key, time: server.clock.now)
        let good = valid.headerValue
        let keyField = good.split(separator: ",")[0]
        let cases: [(String, String)] = [
            ("HorizonSignature", "the Authorization header is not a HorizonSignature signature"),
            ("HorizonSignature key=\"abc\"", "expected exactly key, time, nonce and signature"),
            (good + ", extra=\"1\"", "expected exactly key, time, nonce and signature"),
            (good.replacingOccurrences(of: "time=\"", with: "time=\"x"), "time is not an integer"),
            (good.replacingOccurrences(of: "nonce=\"", with: "nonce=\"zz"), "nonce is not 32 hex digits"),
            (
                good.replacingOccurrences(of: keyField, with: "HorizonSignature key=\"AAAA\""),
                "key is not a base64url X9.63 P-256 public key"
            ),
            (
                good.replacingOccurrences(of: "signature=\"", with: "signature=\"AA"),
                "signature is not a base64url 64-byte raw ECDSA signature"
            ),
            (good + ", time=\"1\"", "time appears twice"),
            (good.replacingOccurrences(of: "\"", with: ""), "must be quoted"),
            ("HorizonSignature " + String(repeating: "k", count: 1100), "longer than 1024 bytes"),
        ]
        let before = try await server.state()
        for (header, message) in cases {
            let response = try await renew(server, authorization: header)
            try expectError(response, .unauthorized, "unauthenticated", message)
            #expect(response.headers[.wwwAuthenticate] == "HorizonSignature", "\(header)")
        }
        #expect(try await server.state() == before)
    }

    @Test func anAlteredRequestDoesNotVerify() async throws {
        let (server, key, _) = try await activatedTerminal()
        let other = TerminalKey()
        let now = server.clock.now
        let before = try await server.state()
        // Signed for another path, another method, another body, or by another key than it names.
        let forAnotherPath = try key.authorization(method: "POST", path: "/v1/terminals/activate", time: now)
        let forAnotherMethod = try key.authorization(method: "GET", path: Self.path, time: now)
        let forAnotherBody = try key.authorization(method: "POST", path: Self.path, body: "{}", time: now)
        let byAnotherKey = try other.authorization(method: "POST", path: Self.path, time: now).replacingOccurrences(
            of: String(try other.authorization(method: "POST", path: Self.path, time: now).split(separator: ",")[0]),
            with: String(try key.authorization(method: "POST", path: Self.path, time: now).split(separator: ",")[0]))
        for header in [forAnotherPath, forAnotherMethod, byAnotherKey] {
            let response = try await renew(server, authorization: header)
            try expectError(
                response, .unauthorized, "signature_invalid",
                "the request's signature does not verify for POST /v1/terminals/credential and its body")
            #expect(response.headers[.wwwAuthenticate] == "HorizonSignature")
        }
        let altered = try await renew(server, authorization: forAnotherBody, body: #"{"x": 1}"#)
        try expectError(altered, .unauthorized, "signature_invalid", "does not verify")
        // A query the signature did not cover.
        let withQuery = try await server.withClient { client in
            try await client.send(
                .post, Self.path + "?merchant=other",
                headers: [.authorization: try key.authorization(method: "POST", path: Self.path, time: now)])
        }
        try expectError(
            withQuery, .unauthorized, "signature_invalid",
            "does not verify for POST /v1/terminals/credential?merchant=other")
        // Nothing was recorded: no nonce used, no credential issued.
        #expect(try await server.state() == before)
    }

    @Test func aTimeOutsideTheWindowIsExpired() async throws {
        let (server, key, _) = try await activatedTerminal()
        let now = server.clock.now
        let before = try await server.state()
        for time in [now - 301, now + 301, now - 86_400, Int64.min, Int64.max, -1] {
            let response = try await renew(
                server, authorization: try key.authorization(method: "POST", path: Self.path, time: time))
            try expectError(response, .unauthorized, "request_expired", "the limit is 300 s: check the device's clock")
            #expect(response.headers[.wwwAuthenticate] == "HorizonSignature")
        }
        let message = try expectError(
            try await renew(
                server, authorization: try key.authorization(method: "POST", path: Self.path, time: now - 301)),
            .unauthorized, "request_expired", "the request was signed at \(now - 301), 301 s from the server's clock")
        #expect(message.message.contains("(\(now))"))
        #expect(try await server.state() == before)
        // The edges of the window are inside it.
        for time in [now - 300, now + 300] {
            let response = try await renew(
                server, authorization: try key.authorization(method: "POST", path: Self.path, time: time))
            #expect(response.status == .ok, "\(response.text)")
        }
    }

    @Test func theSameSignedRequestTwiceIsAReplay() async throws {
        let (server, key, _) = try await activatedTerminal()
        let header = try key.authorization(method: "POST", path: Self.path, time: server.clock.now)
        let first = try await renew(server, authorization: header)
        #expect(first.status == .ok, "\(first.text)")
        let afterFirst = try await server.state()
        server.clock.advance(200)
        let second = try await renew(server, authorization: header)
        try expectError(
            second, .unauthorized, "request_replayed",
            "this signed request was already received once; sign each request anew")
        #expect(second.headers[.wwwAuthenticate] == "HorizonSignature")
        // The replay issued nothing: the credential's recorded expiry is the first renewal's.
        #expect(try await server.state() == afterFirst)
    }

    @Test func aReplayToAnotherServerOnTheSameDatabaseIsRefused() async throws {
        let (server, key, _) = try await activatedTerminal()
        // A second process: its own connection to the same file, its own router.
        let secondLedger = try await Ledger.sqlite(path: server.databasePath)
        let header = try key.authorization(method: "POST", path: Self.path, time: server.clock.now)
        let first = try await renew(server, authorization: header)
        #expect(first.status == .ok, "\(first.text)")
        let second = try await renew(server, authorization: header, ledger: secondLedger)
        try expectError(second, .unauthorized, "request_replayed", "this signed request was already received once")
        // And the other way round, with a fresh request first served by the second server.
        let another = try key.authorization(method: "POST", path: Self.path, time: server.clock.now)
        #expect(try await renew(server, authorization: another, ledger: secondLedger).status == .ok)
        try expectError(
            try await renew(server, authorization: another), .unauthorized, "request_replayed", "already received once")
        await secondLedger.close()
    }

    @Test func aKeyThatIsNoTerminalIsUnknown() async throws {
        let (server, _, _) = try await activatedTerminal()
        let stranger = TerminalKey()
        let before = try await server.state()
        let response = try await renew(
            server, authorization: try stranger.authorization(method: "POST", path: Self.path, time: server.clock.now))
        try expectError(
            response, .forbidden, "terminal_unknown",
            "the signing key is not an activated terminal; run `horizon-terminal activate`")
        let after = try await server.state()
        #expect(after.terminals == before.terminals)
        #expect(after.logins == before.logins)
    }

    @Test func aRevokedTerminalIsRefusedAndListed() async throws {
        let (server, key, activated) = try await activatedTerminal()
        let other = TerminalKey()
        _ = try await server.activate(other, label: "Till 2")
        let empty = try await server.withClient { client in try await client.send(.get, "/v1/revocations") }
        #expect(try JSONDecoder().decode(Components.Schemas.Revocations.self, from: empty.data).terminalKeyIds == [])

        #expect(
            try await server.ledger.revokeTerminal(TerminalID(rawValue: activated.terminalId), at: server.clock.now))
        let before = try await server.state()
        let response = try await renew(
            server, authorization: try key.authorization(method: "POST", path: Self.path, time: server.clock.now))
        try expectError(
            response, .forbidden, "terminal_revoked",
            "terminal \(activated.terminalId) was revoked by its merchant; it gets no credential")
        #expect(try await server.state().terminals == before.terminals)

        let listed = try await server.withClient { client in try await client.send(.get, "/v1/revocations") }
        #expect(listed.status == .ok)
        let revocations = try JSONDecoder().decode(Components.Schemas.Revocations.self, from: listed.data)
        #expect(revocations.terminalKeyIds == [key.keyIDHex])
        #expect(!revocations.terminalKeyIds.contains(other.keyIDHex))
        // The other terminal still renews.
        let renewed = try await renew(
            server, authorization: try other.authorization(method: "POST", path: Self.path, time: server.clock.now))
        #expect(renewed.status == .ok)
    }
}
