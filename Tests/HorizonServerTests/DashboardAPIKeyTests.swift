import Crypto
import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import HorizonServer
import HummingbirdTesting
import Testing

/// The dashboard's API keys page: a key made with chosen scopes shows its secret once, the list
/// shows only its ends, and rolling or revoking asks first; another merchant's key is "not found".
@Suite("Dashboard API keys")
struct DashboardAPIKeyTests {
    /// The secret on a page: `sk_` and its 43 URL-safe base64 characters.
    static func secret(in page: String) -> String? {
        guard let range = page.range(of: #"sk_[A-Za-z0-9_-]{43}"#, options: .regularExpression) else { return nil }
        return String(page[range])
    }

    @Test func aKeyIsMadeShownOnceRolledAndRevokedAfterAConfirmation() async throws {
        let server = try await TestServer()
        let merchant = try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let empty = try await browser.get("/dashboard/api-keys")
            #expect(empty.status == .ok && empty.text.contains("No API key yet"))
            // Without a scope, the form comes back with the name kept.
            let refused = try await browser.post("/dashboard/api-keys", ["name": "Cloud POS"], csrf: true)
            #expect(refused.status == .badRequest && refused.text.contains("Choose at least one scope"))
            #expect(refused.text.contains(#"value="Cloud POS""#))
            let made = try await browser.post(
                "/dashboard/api-keys", ["name": "Cloud POS", "scope_intents": "yes", "scope_transactions": "yes"],
                csrf: true)
            #expect(made.status == .created, "\(made.text)")
            let secret = try #require(Self.secret(in: made.text), "no secret on the page")
            let key = try #require(try await server.ledger.apiKeys(of: merchant.id).first)
            #expect(key.scopes == [.intentsWrite, .transactionsRead])
            #expect(Array(SHA256.hash(data: Data(secret.utf8))) == (try await server.ledger.store.transaction { db in
                try await db.query("SELECT secret_hash FROM api_keys", []).first?.bytes("secret_hash")
            }))
            // The list never shows the secret again: its ends only.
            let list = try await browser.get("/dashboard/api-keys")
            #expect(!list.text.contains(secret))
            #expect(list.text.contains(String(secret.prefix(7)) + "…" + String(secret.suffix(4))))
            #expect(list.text.contains("intents:write, transactions:read"))

            // Roll: asked first, then a new secret; the old one is refused by the API.
            let asked = try await browser.post("/dashboard/api-keys/roll", ["id": key.id], csrf: true)
            #expect(asked.status == .ok && asked.text.contains("Roll the API key Cloud POS"))
            #expect(try await server.ledger.apiKeys(of: merchant.id).count == 1)
            let rolled = try await browser.post("/dashboard/api-keys/roll", ["id": key.id, "confirm": "yes"], csrf: true)
            #expect(rolled.status == .created)
            let newSecret = try #require(Self.secret(in: rolled.text))
            #expect(newSecret != secret)
            let old = try await client.send(
                .get, "/v1/merchant/transactions", headers: [.authorization: "Bearer " + secret])
            #expect(old.status == .unauthorized)
            let new = try await client.send(
                .get, "/v1/merchant/transactions", headers: [.authorization: "Bearer " + newSecret])
            #expect(new.status == .ok)

            // Revoke: asked first, then refused everywhere.
            let newKey = try #require(try await server.ledger.apiKeys(of: merchant.id).first { $0.isActive })
            let confirm = try await browser.post("/dashboard/api-keys/revoke", ["id": newKey.id], csrf: true)
            #expect(confirm.text.contains("Revoke the API key Cloud POS"))
            let revoked = try await browser.post(
                "/dashboard/api-keys/revoke", ["id": newKey.id, "confirm": "yes"], csrf: true)
            #expect(revoked.status == .seeOther)
            #expect(
                try await client.send(
                    .get, "/v1/merchant/transactions", headers: [.authorization: "Bearer " + newSecret]
                ).status == .unauthorized)
            let after = try await browser.get("/dashboard/api-keys?done=key-revoked")
            #expect(after.text.contains("The API key was revoked") && after.text.contains("rolled"))
        }
    }

    @Test func anotherMerchantsKeyIsNotFoundAndFormsNeedTheirToken() async throws {
        let server = try await TestServer()
        let bakery = try await server.addMerchant()
        let florist = try await server.addMerchant(name: "Florist", email: "owner@florist.example")
        _ = try await server.ledger.createAPIKey(
            NewAPIKey(id: "key_florist", secretHash: Array(repeating: 7, count: 32), secretPrefix: "sk_flor",
                secretLast4: "wxyz"), name: "Florist POS", scopes: [.refundsWrite], for: florist.id,
            at: server.clock.now)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            #expect(!(try await browser.get("/dashboard/api-keys").text.contains("Florist POS")))
            for path in ["/dashboard/api-keys/roll", "/dashboard/api-keys/revoke"] {
                for fields in [["id": "key_florist"], ["id": "key_florist", "confirm": "yes"]] {
                    let response = try await browser.post(path, fields, csrf: true)
                    #expect(response.status == .notFound, "\(path) \(fields)")
                    #expect(!response.text.contains("Florist POS"))
                }
            }
            let forged = try await browser.post(
                "/dashboard/api-keys", ["name": "Forged", "scope_refunds": "yes"], csrf: false)
            #expect(forged.status == .forbidden)
            #expect(try await server.ledger.apiKeys(of: florist.id).allSatisfy(\.isActive))
            #expect(try await server.ledger.apiKeys(of: bakery.id).isEmpty)
        }
    }
}
