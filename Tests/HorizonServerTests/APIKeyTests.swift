import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import HummingbirdTesting
import Testing

/// A merchant's secret API keys: made by its admin and shown once, stored hashed, listed by
/// prefix and last four characters, rolled and revoked; a request with a key acts with exactly
/// its scopes, and a revoked or rolled-away key is refused. Another merchant's key against
/// every operation is in `IsolationTests`.
@Suite("API keys")
struct APIKeyTests {
    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]

    /// A server on a fresh store of `kind` with the bakery as its merchant.
    static func withServer(_ kind: StoreKind, _ body: (TestServer, Merchant) async throws -> Void) async throws {
        try await TestStores.withStore(kind) { store in
            let server = try await TestServer(store: { _ in store })
            let merchant = try await server.addMerchant()
            try await body(server, merchant)
        }
    }

    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer " + token] }

    static func adminToken(_ client: any TestClientProtocol) async throws -> String {
        let response = try await client.send(
            .post, "/v1/merchant/sessions",
            json: #"{"email": "\#(TestServer.email)", "password": "\#(TestServer.password)"}"#)
        #expect(response.status == .created, "\(response.text)")
        return try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: response.data).token
    }

    static func createKey(_ client: any TestClientProtocol, admin: String, scopes: [String], name: String = "Till POS")
        async throws -> Components.Schemas.CreatedApiKey
    {
        let list = scopes.map { "\"\($0)\"" }.joined(separator: ", ")
        let response = try await client.send(
            .post, "/v1/merchant/api-keys", json: #"{"name": "\#(name)", "scopes": [\#(list)]}"#,
            headers: bearer(admin))
        #expect(response.status == .created, "\(response.text)")
        return try JSONDecoder().decode(Components.Schemas.CreatedApiKey.self, from: response.data)
    }

    @Test(arguments: stores)
    func aKeyIsShownOnceStoredHashedAndListedByItsEnds(_ kind: StoreKind) async throws {
        try await Self.withServer(kind) { server, merchant in
            try await server.withClient { client in
                let admin = try await Self.adminToken(client)
                let created = try await Self.createKey(client, admin: admin, scopes: ["transactions:read"])
                let secret = created.secret
                #expect(secret.hasPrefix("sk_") && secret.count >= 40, "\(secret)")
                #expect(created.apiKey.redactedSecret == secret.prefix(7) + "…" + secret.suffix(4))
                #expect(created.apiKey.scopes == [.transactions_colon_read])
                let list = try await client.send(.get, "/v1/merchant/api-keys", headers: Self.bearer(admin))
                #expect(list.status == .ok)
                #expect(!list.text.contains(secret), "the list shows the secret: \(list.text)")
                let keys = try JSONDecoder().decode(Components.Schemas.ApiKeyList.self, from: list.data).apiKeys
                #expect(keys.map(\.id) == [created.apiKey.id])
                // The database holds the SHA-256 of the secret, never the secret.
                let rows = try await server.ledger.store.transaction { db in
                    try await db.query("SELECT * FROM api_keys", [])
                }
                #expect(rows.count == 1)
                for row in rows {
                    #expect(try row.bytes("secret_hash") == Array(SHA256.hash(data: Data(secret.utf8))))
                    for column in row.columns where column != "secret_hash" {
                        #expect(!((try? row.text(column)) ?? "").contains(secret.dropFirst(7).dropLast(4)))
                    }
                }
                #expect(try await server.ledger.apiKeys(of: merchant.id).first?.isActive == true)
            }
        }
    }

    @Test(arguments: stores)
    func aKeyActsWithExactlyItsScopes(_ kind: StoreKind) async throws {
        try await Self.withServer(kind) { server, _ in
            try await server.withClient { client in
                let admin = try await Self.adminToken(client)
                let reader = try await Self.createKey(client, admin: admin, scopes: ["transactions:read"]).secret
                let refunder = try await Self.createKey(client, admin: admin, scopes: ["refunds:write"]).secret
                let refund = #"{"refundId": "r-1", "paymentId": "\#(String(repeating: "ab", count: 16))", "amount": 100, "currency": "EUR"}"#
                let paymentPath = "/v1/merchant/transactions/" + String(repeating: "ab", count: 16)

                // transactions:read reads, and nothing else.
                #expect(
                    try await client.send(.get, "/v1/merchant/transactions", headers: Self.bearer(reader)).status
                        == .ok)
                try expectError(
                    try await client.send(.get, paymentPath, headers: Self.bearer(reader)), .notFound,
                    "payment_not_found", "was executed for this merchant")
                try expectError(
                    try await client.send(.post, "/v1/merchant/refunds", json: refund, headers: Self.bearer(reader)),
                    .forbidden, "insufficient_scope", "lacks the scope this operation needs (refunds:write)")
                // refunds:write refunds (this payment does not exist: past the scope check), and reads nothing.
                try expectError(
                    try await client.send(.post, "/v1/merchant/refunds", json: refund, headers: Self.bearer(refunder)),
                    .notFound, "payment_not_found", "was executed for this merchant")
                try expectError(
                    try await client.send(.get, "/v1/merchant/transactions", headers: Self.bearer(refunder)),
                    .forbidden, "insufficient_scope", "(transactions:read)")
                // No key manages keys, register users, terminals or programs.
                for key in [reader, refunder] {
                    try expectError(
                        try await client.send(.get, "/v1/merchant/api-keys", headers: Self.bearer(key)), .forbidden,
                        "admin_required", "an API key cannot do it")
                    try expectError(
                        try await client.send(
                            .post, "/v1/merchant/api-keys", json: #"{"name": "mine", "scopes": ["refunds:write"]}"#,
                            headers: Self.bearer(key)), .forbidden, "admin_required", "an API key cannot do it")
                    for path in ["/v1/merchant/register-users", "/v1/merchant/terminals", "/v1/merchant/programs"] {
                        try expectError(
                            try await client.send(.get, path, headers: Self.bearer(key)), .forbidden,
                            "insufficient_scope", "an API key cannot call this operation")
                    }
                }
                #expect(try await server.ledger.apiKeys(of: server.ledger.merchants().first!.id).count == 2)
            }
        }
    }

    @Test(arguments: stores)
    func aRevokedOrRolledAwayKeyIsRefused(_ kind: StoreKind) async throws {
        try await Self.withServer(kind) { server, _ in
            try await server.withClient { client in
                let admin = try await Self.adminToken(client)
                let first = try await Self.createKey(client, admin: admin, scopes: ["transactions:read"])
                let rolled = try await client.send(
                    .post, "/v1/merchant/api-keys/\(first.apiKey.id)/roll", headers: Self.bearer(admin))
                #expect(rolled.status == .created, "\(rolled.text)")
                let second = try JSONDecoder().decode(Components.Schemas.CreatedApiKey.self, from: rolled.data)
                #expect(second.secret != first.secret && second.apiKey.id != first.apiKey.id)
                #expect(second.apiKey.name == first.apiKey.name && second.apiKey.scopes == first.apiKey.scopes)
                let refused = try await client.send(
                    .get, "/v1/merchant/transactions", headers: Self.bearer(first.secret))
                try expectError(refused, .unauthorized, "unauthenticated", "this API key is unknown, revoked or was rolled")
                #expect(refused.headers[.wwwAuthenticate] == "Bearer")
                #expect(
                    try await client.send(.get, "/v1/merchant/transactions", headers: Self.bearer(second.secret))
                        .status == .ok)
                // A rolled key cannot be rolled again; the list says what replaced it.
                try expectError(
                    try await client.send(
                        .post, "/v1/merchant/api-keys/\(first.apiKey.id)/roll", headers: Self.bearer(admin)),
                    .notFound, "api_key_not_found", "no active API key")
                let list = try JSONDecoder().decode(
                    Components.Schemas.ApiKeyList.self,
                    from: try await client.send(.get, "/v1/merchant/api-keys", headers: Self.bearer(admin)).data)
                let old = try #require(list.apiKeys.first { $0.id == first.apiKey.id })
                #expect(old.revokedAt != nil && old.replacedBy == second.apiKey.id)

                let revoked = try await client.send(
                    .post, "/v1/merchant/api-keys/\(second.apiKey.id)/revoke", headers: Self.bearer(admin))
                #expect(revoked.status == .ok, "\(revoked.text)")
                #expect(try JSONDecoder().decode(Components.Schemas.ApiKey.self, from: revoked.data).revokedAt != nil)
                try expectError(
                    try await client.send(.get, "/v1/merchant/transactions", headers: Self.bearer(second.secret)),
                    .unauthorized, "unauthenticated", "this API key is unknown, revoked or was rolled")
                // Guessed, truncated and oversized secrets are refused alike.
                for token in [
                    "sk_" + String(repeating: "A", count: 43), String(second.secret.dropLast()),
                    "sk_" + String(repeating: "x", count: 5000),
                ] {
                    try expectError(
                        try await client.send(.get, "/v1/merchant/transactions", headers: Self.bearer(token)),
                        .unauthorized, "unauthenticated", "this API key is unknown")
                }
                try expectError(
                    try await client.send(
                        .post, "/v1/merchant/api-keys/key_nothing/revoke", headers: Self.bearer(admin)),
                    .notFound, "api_key_not_found", "no API key key_nothing")
            }
        }
    }

    @Test func aKeyIsRateLimitedByItselfNotByTheAddress() async throws {
        let server = try await TestServer(configuration: .testing(rateLimitBurst: 2, rateLimitPerSecond: 0.1))
        let merchant = try await server.addMerchant()
        let secret = "sk_" + String(repeating: "Q", count: 43)
        _ = try await server.ledger.createAPIKey(
            NewAPIKey(
                id: "key_pos", secretHash: Array(SHA256.hash(data: Data(secret.utf8))), secretPrefix: "sk_QQQQ",
                secretLast4: "QQQQ"), name: "POS", scopes: [.transactionsRead], for: merchant.id, at: server.clock.now)
        try await server.withClient { client in
            for _ in 1...2 {
                #expect(
                    try await client.send(.get, "/v1/merchant/transactions", headers: Self.bearer(secret)).status
                        == .ok)
            }
            try expectError(
                try await client.send(.get, "/v1/merchant/transactions", headers: Self.bearer(secret)),
                .tooManyRequests, "rate_limited", "this API key")
            // The address has its own two requests.
            #expect(try await client.send(.get, "/v1/anchor").status == .ok)
            #expect(try await server.ledger.apiKeys(of: merchant.id).first?.lastUsedAt == server.clock.now)
        }
    }

    @Test func aKeyNeedsANameAndKnownScopes() async throws {
        let server = try await TestServer()
        try await server.addMerchant()
        try await server.withClient { client in
            let admin = try await Self.adminToken(client)
            for body in [
                #"{"name": "", "scopes": ["refunds:write"]}"#, #"{"name": "POS", "scopes": []}"#,
                #"{"name": "POS", "scopes": ["everything"]}"#, #"{"name": "P\u0007S", "scopes": ["refunds:write"]}"#,
                #"{"name": "POS"}"#,
            ] {
                let response = try await client.send(
                    .post, "/v1/merchant/api-keys", json: body, headers: Self.bearer(admin))
                #expect(response.status == .badRequest, "\(body): \(response.text)")
            }
            #expect(try await server.ledger.apiKeys(of: server.ledger.merchants().first!.id).isEmpty)
        }
    }
}
