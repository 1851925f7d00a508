import Foundation
import HTTPTypes
import HorizonAPI
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import HorizonTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// Limits that survive a proxy and do not lock the owner out: request limits and sign-in
/// counters in the database (shared by every server process), keyed on the client address
/// taken from `X-Forwarded-For` only from a trusted proxy, one e-mail normalisation, and a
/// back-off that slows a guesser without locking the owner out or telling which e-mails exist.
@Suite("Request limits and sign-in back-off")
struct RequestLimitTests {
    static func session(_ email: String, _ password: String) -> String {
        let body: [String: String] = ["email": email, "password": password]
        return String(decoding: (try? JSONEncoder().encode(body)) ?? Data(), as: UTF8.self)
    }

    // MARK: Two server processes, one limit

    @Test(arguments: PaymentClaimTests.kinds) func twoServersOnOneDatabaseShareTheRequestLimit(kind: StoreKind)
        async throws
    {
        try await TestStores.withStores(kind) { store, another in
            // 3 requests per window of 3 s.
            let server = try await TestServer(
                configuration: .testing(rateLimitBurst: 3, rateLimitPerSecond: 1), store: { _ in store })
            let ledgerB = try await Ledger.open(try another())
            try await server.withClient { a in
                try await server.withClient(ledger: ledgerB) { b in
                    #expect(try await a.send(.get, "/v1/anchor").status == .ok)
                    #expect(try await b.send(.get, "/v1/anchor").status == .ok)
                    #expect(try await a.send(.get, "/v1/anchor").status == .ok)
                    // The fourth, to either process, is over the one limit.
                    let refused = try await b.send(.get, "/v1/anchor")
                    try expectError(refused, .tooManyRequests, "rate_limited", "too many requests from local")
                    try expectError(
                        try await a.send(.get, "/v1/anchor"), .tooManyRequests, "rate_limited", "retry after")
                    // The next window serves again, on both.
                    server.clock.advance(3)
                    #expect(try await b.send(.get, "/v1/anchor").status == .ok)
                    #expect(try await a.send(.get, "/v1/anchor").status == .ok)
                }
            }
            await ledgerB.close()
        }
    }

    @Test func aSigningKeyIsLimitedByItselfNotByTheAddress() async throws {
        let server = try await TestServer(configuration: .testing(rateLimitBurst: 2, rateLimitPerSecond: 0.1))
        try await server.addMerchant()
        let till = TerminalKey()
        _ = try await server.activate(till)
        try await server.withClient { client in
            func renew(_ key: TerminalKey) async throws -> TestResponse {
                let authorization = try signedAuthorization(
                    key.key, method: .post, path: "/v1/terminals/credential", body: nil, time: server.clock.now)
                return try await client.send(
                    .post, "/v1/terminals/credential", headers: [.authorization: authorization])
            }
            // The activation above spent one of the address's two; the key has its own two.
            #expect(try await renew(till).status == .ok)
            #expect(try await renew(till).status == .ok)
            try expectError(try await renew(till), .tooManyRequests, "rate_limited", "this signing key")
            // The address still has its second request.
            #expect(try await client.send(.get, "/v1/anchor").status == .ok)
        }
    }

    // MARK: X-Forwarded-For

    /// A live server (real sockets: the peer is 127.0.0.1) with `trustedProxies`.
    static func live<T: Sendable>(
        trustedProxies: [String]?, burst: Int = 2, logger: Logger = .quiet,
        _ body: @Sendable (TestServer, any TestClientProtocol) async throws -> T
    ) async throws -> T {
        var configuration = ServerConfiguration.testing(rateLimitBurst: burst, rateLimitPerSecond: 0.01)
        configuration.trustedProxies = trustedProxies
        let server = try await TestServer(configuration: configuration)
        let application = try HorizonServer.application(server.parts(), logger: logger)
        return try await application.test(.live) { client in try await body(server, client) }
    }

    static func anchor(_ client: any TestClientProtocol, forwardedFor: String?) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let forwardedFor { headers[HTTPField.Name("X-Forwarded-For")!] = forwardedFor }
        return try await client.send(.get, "/v1/anchor", headers: headers)
    }

    @Test func aSpoofedForwardedForFromAnUntrustedPeerIsIgnored() async throws {
        try await Self.live(trustedProxies: nil) { _, client in
            #expect(try await Self.anchor(client, forwardedFor: "203.0.113.1").status == .ok)
            #expect(try await Self.anchor(client, forwardedFor: "203.0.113.2").status == .ok)
            // A new made-up address each time does not help: the limit is the real peer's.
            let refused = try await Self.anchor(client, forwardedFor: "203.0.113.3")
            try expectError(refused, .tooManyRequests, "rate_limited", "too many requests from 127.0.0.1")
        }
    }

    @Test func aTrustedProxysForwardedForNamesTheClient() async throws {
        try await Self.live(trustedProxies: ["127.0.0.0/8", "10.0.0.0/8"]) { _, client in
            #expect(try await Self.anchor(client, forwardedFor: "198.51.100.7").status == .ok)
            // The right-most untrusted hop is the client: what it put to its left is not believed.
            #expect(try await Self.anchor(client, forwardedFor: "1.2.3.4, 198.51.100.7, 10.1.2.3").status == .ok)
            let refused = try await Self.anchor(client, forwardedFor: "5.6.7.8, 198.51.100.7")
            try expectError(refused, .tooManyRequests, "rate_limited", "too many requests from 198.51.100.7")
            // Another client behind the same proxy has its own limit.
            #expect(try await Self.anchor(client, forwardedFor: "198.51.100.8").status == .ok)
        }
    }

    @Test func theLogNamesTheClientTheLimitsCount() async throws {
        let recorder = LogRecorder()
        let logger = recorder.logger(level: .info)
        try await Self.live(trustedProxies: ["127.0.0.1"], burst: 1, logger: logger) { _, client async throws in
            #expect(try await Self.anchor(client, forwardedFor: "198.51.100.7").status == .ok)
            #expect(try await Self.anchor(client, forwardedFor: "198.51.100.7").status == .tooManyRequests)
        }
        let lines = recorder.all.filter { $0.message.hasPrefix("GET /v1/anchor") }
        #expect(lines.map(\.message) == ["GET /v1/anchor 200", "GET /v1/anchor 429"])
        #expect(lines.allSatisfy { $0.metadata["client"] == "198.51.100.7" }, "\(lines.map(\.metadata))")
    }

    @Test func aMisconfiguredTrustedProxyIsRefused() throws {
        var configuration = ServerConfiguration.testing()
        configuration.trustedProxies = ["10.0.0.0/33"]
        #expect(throws: ServerSetupError.self) { try configuration.validate() }
        configuration.trustedProxies = ["proxy.example"]
        #expect(throws: ServerSetupError.self) { try configuration.validate() }
        configuration.trustedProxies = ["10.0.0.0/8", "::1", "fd00::/8"]
        try configuration.validate()
    }

    // MARK: Sign-in counters

    @Test func activationIsCountedWithTheOtherSignIns() async throws {
        let server = try await TestServer(configuration: .testing(loginAttemptsBeforeLock: 3))
        try await server.addMerchant()
        try await server.withClient { client in
            // One wrong password through each door: the admin session, the dashboard, activation.
            try expectError(
                try await client.send(.post, "/v1/merchant/sessions", json: Self.session(TestServer.email, "wrong")),
                .unauthorized, "invalid_credentials", "the e-mail or the password is wrong")
            let browser = DashboardBrowser(client)
            #expect(
                try await browser.signIn(email: TestServer.email, password: "wrong").response.status == .unauthorized)
            let third = try await client.send(
                .post, "/v1/terminals/activate", json: TerminalKey().activation(password: "wrong"))
            try expectError(third, .tooManyRequests, "account_locked", "try again in 60 s")
            // Now the right password through any door waits too, activation included.
            let right = try await client.send(.post, "/v1/terminals/activate", json: TerminalKey().activation())
            try expectError(right, .tooManyRequests, "account_locked", "try again in 60 s")
            #expect(try await server.ledger.terminals().isEmpty)
        }
    }

    @Test func everySpellingOfAnEmailSharesOneCounter() async throws {
        let server = try await TestServer(configuration: .testing(loginAttemptsBeforeLock: 3))
        try await server.addMerchant()
        try await server.withClient { client in
            for variant in ["Owner@Bakery.EXAMPLE", " owner@bakery.example\n", "\towner@BAKERY.example\r\n"] {
                _ = try await client.send(.post, "/v1/merchant/sessions", json: Self.session(variant, "wrong"))
            }
            try expectError(
                try await client.send(
                    .post, "/v1/merchant/sessions", json: Self.session(TestServer.email, TestServer.password)),
                .tooManyRequests, "account_locked", "try again in 60 s")
            // A control character inside is refused, never a new spelling with a counter of its own.
            for inside in ["owner@bakery.example\u{7}", "owner\n@bakery.example", "owner@bakery.example\u{202E}"] {
                try expectError(
                    try await client.send(.post, "/v1/merchant/sessions", json: Self.session(inside, "wrong")),
                    .badRequest, "invalid_request", "control or format characters")
            }
        }
    }

    @Test func theOwnerSignsInOnceTheGuessersBackOffHasPassed() async throws {
        let server = try await TestServer(configuration: .testing(loginAttemptsBeforeLock: 3))
        try await server.addMerchant()
        try await server.withClient { client in
            // A guesser who tries whenever the back-off lets it: 60, 120, 240, 480, 900, 900 s.
            var waits: [String] = []
            for _ in 0..<8 {
                let response = try await client.send(
                    .post, "/v1/merchant/sessions", json: Self.session(TestServer.email, "guess"))
                if let wait = response.headers[.retryAfter], let seconds = Int64(wait) {
                    waits.append(wait)
                    server.clock.advance(seconds)
                }
            }
            #expect(waits == ["60", "120", "240", "480", "900", "900"])
            // Never more than the cap: once the last back-off has passed, the owner is in.
            let owner = try await client.send(
                .post, "/v1/merchant/sessions", json: Self.session(TestServer.email, TestServer.password))
            #expect(owner.status == .created, "\(owner.text)")
            // And the count starts again: one typo is a typo, not a back-off.
            try expectError(
                try await client.send(.post, "/v1/merchant/sessions", json: Self.session(TestServer.email, "typo")),
                .unauthorized, "invalid_credentials", "the e-mail or the password is wrong")
        }
    }

    @Test func unknownAndKnownEmailsAreAnsweredAlike() async throws {
        let server = try await TestServer(configuration: .testing(loginAttemptsBeforeLock: 3))
        try await server.addMerchant()
        func attempts(_ email: String) async throws -> [String] {
            try await server.withClient { client in
                var seen: [String] = []
                for _ in 0..<5 {
                    let response = try await client.send(
                        .post, "/v1/merchant/sessions", json: Self.session(email, "wrong"))
                    let envelope = try JSONDecoder().decode(ErrorEnvelope.self, from: response.data)
                    seen.append(
                        "\(response.status.code) \(envelope.error.code) \(envelope.error.message) \(response.headers[.retryAfter] ?? "-")"
                    )
                    server.clock.advance(1)
                }
                return seen
            }
        }
        let known = try await attempts(TestServer.email)
        // A day later, when the address's failures are forgotten too.
        server.clock.advance(25 * 3600)
        let unknown = try await attempts("nobody@bakery.example")
        #expect(known == unknown)
        #expect(known.first?.hasPrefix("401 invalid_credentials") == true)
        #expect(known.last?.hasPrefix("429 account_locked") == true)
    }
}
