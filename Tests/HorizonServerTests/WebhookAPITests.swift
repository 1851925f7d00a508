import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import HummingbirdTesting
import Logging
import Testing

/// Webhook endpoints and deliveries through the API, with an API key that has `webhooks:write`
/// (one without it is refused): added with the secret shown once, listed without it, rolled and
/// deleted; deliveries read with their answers and the body sent, and resent. Another merchant's
/// endpoints and deliveries against every operation are in `IsolationTests`.
@Suite("Webhooks through the API")
struct WebhookAPITests {
    @Test(arguments: APIKeyTests.stores)
    func aKeyWithTheScopeManagesEndpointsAndResendsDeliveries(_ kind: StoreKind) async throws {
        try await APIKeyTests.withServer(kind) { server, merchant in
            try await server.withClient { client in
                let admin = try await APIKeyTests.adminToken(client)
                let key = try await APIKeyTests.createKey(client, admin: admin, scopes: ["webhooks:write"]).secret
                let other = try await APIKeyTests.createKey(client, admin: admin, scopes: ["intents:write"]).secret
                let refused = try await client.send(
                    .get, "/v1/merchant/webhook-endpoints", headers: APIKeyTests.bearer(other))
                #expect(refused.status == .forbidden && refused.text.contains("insufficient_scope"))

                // Only https://, or http:// to this machine.
                for url in ["http://pos.example/hooks", "ftp://pos.example/", "https://user:pw@pos.example/"] {
                    let bad = try await client.send(
                        .post, "/v1/merchant/webhook-endpoints",
                        json: #"{"url": "\#(url)", "eventTypes": ["payment.succeeded"]}"#,
                        headers: APIKeyTests.bearer(key))
                    #expect(bad.status == .badRequest && bad.text.contains("invalid_request"), "\(url): \(bad.text)")
                }
                let made = try await client.send(
                    .post, "/v1/merchant/webhook-endpoints",
                    json:
                        #"{"url": "https://pos.example/hooks", "description": "POS", "eventTypes": ["payment.succeeded", "refund.succeeded"]}"#,
                    headers: APIKeyTests.bearer(key))
                #expect(made.status == .created, "\(made.text)")
                let created = try JSONDecoder().decode(Components.Schemas.CreatedWebhookEndpoint.self, from: made.data)
                #expect(
                    created.secret.hasPrefix("whsec_") && created.webhookEndpoint.url == "https://pos.example/hooks")
                #expect(Set(created.webhookEndpoint.eventTypes) == [.payment_succeeded, .refund_succeeded])
                let list = try await client.send(
                    .get, "/v1/merchant/webhook-endpoints", headers: APIKeyTests.bearer(key))
                #expect(list.status == .ok && list.text.contains(created.webhookEndpoint.id))
                #expect(!list.text.contains(created.secret))

                // A payment's delivery, failed once: read with its answer and body, then resent.
                let wallet = try await server.ledger.createWallet(name: "Alex", publicKey: walletKey(1))
                try await server.ledger.deposit(euros(20_00), to: wallet.id)
                _ = try await server.ledger.settle(
                    request(1, amount: euros(2_00)), merchant: merchant.id, at: server.clock.now)
                let claimed = try await server.ledger.claimDueWebhookDeliveries(at: server.clock.now)
                let id = try #require(claimed.first?.delivery.id)
                try await server.ledger.recordWebhookAttempt(
                    id,
                    WebhookAttempt(
                        attemptedAt: server.clock.now, status: 502, responseBody: "bad gateway",
                        latencyMilliseconds: 42, error: nil), retryAt: server.clock.now + 30)
                let deliveries = try await client.send(
                    .get, "/v1/merchant/webhook-deliveries?endpointId=\(created.webhookEndpoint.id)",
                    headers: APIKeyTests.bearer(key))
                let listed = try JSONDecoder().decode(
                    Components.Schemas.WebhookDeliveryList.self, from: deliveries.data)
                #expect(listed.webhookDeliveries.map(\.id) == [id])
                #expect(listed.webhookDeliveries.first?.state == .retrying)
                #expect(listed.webhookDeliveries.first?.lastAttempt?.status == 502)
                let one = try await client.send(
                    .get, "/v1/merchant/webhook-deliveries/\(id)", headers: APIKeyTests.bearer(key))
                let delivery = try JSONDecoder().decode(Components.Schemas.WebhookDelivery.self, from: one.data)
                #expect(delivery.attemptHistory?.first?.responseBody == "bad gateway")
                #expect(delivery.attemptHistory?.first?.latencyMs == 42)
                #expect(delivery.body?.contains(#""type":"payment.succeeded""#) == true)
                let resent = try await client.send(
                    .post, "/v1/merchant/webhook-deliveries/\(id)/resend", headers: APIKeyTests.bearer(key))
                #expect(resent.status == .accepted, "\(resent.text)")
                #expect(try await server.ledger.webhookDelivery(id, of: merchant.id)?.dueAt == server.clock.now)

                // Roll: a new secret; delete: gone from the list, the delivery stays.
                let rolled = try await client.send(
                    .post, "/v1/merchant/webhook-endpoints/\(created.webhookEndpoint.id)/roll-secret",
                    headers: APIKeyTests.bearer(key))
                let newSecret = try JSONDecoder().decode(
                    Components.Schemas.CreatedWebhookEndpoint.self, from: rolled.data)
                #expect(newSecret.secret != created.secret && newSecret.webhookEndpoint.previousSecretExpiresAt != nil)
                let deleted = try await client.send(
                    .delete, "/v1/merchant/webhook-endpoints/\(created.webhookEndpoint.id)",
                    headers: APIKeyTests.bearer(key))
                #expect(deleted.status == .ok, "\(deleted.text)")
                let again = try await client.send(
                    .delete, "/v1/merchant/webhook-endpoints/\(created.webhookEndpoint.id)",
                    headers: APIKeyTests.bearer(key))
                #expect(again.status == .notFound && again.text.contains("webhook_endpoint_not_found"))
                let empty = try await client.send(
                    .get, "/v1/merchant/webhook-endpoints", headers: APIKeyTests.bearer(admin))
                #expect(!empty.text.contains(created.webhookEndpoint.id))
                #expect(try await server.ledger.webhookDeliveries(of: merchant.id).count == 1)
            }
        }
    }
}
