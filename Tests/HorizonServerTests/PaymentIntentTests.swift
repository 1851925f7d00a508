import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonServer
import HummingbirdTesting
import Testing

/// Payment intents over the API with a POS's secret key: created under an idempotency key
/// (replayed, or a conflict with other terms), read by id and by order reference, canceled
/// while not collected, expired; the terminal that settles the intent's id moves it to
/// succeeded or declined, refunds to refunded, and the payment carries the order reference.
@Suite("Payment intents")
struct PaymentIntentTests {
    static let stores = APIKeyTests.stores
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!

    /// The bakery with an activated till, its admin's session and a POS key with `scopes`.
    struct Shop {
        let server: TestServer
        let till: TerminalKey
        let admin: String
        let pos: String
    }

    static func withShop(
        _ kind: StoreKind, scopes: [String] = ["intents:write", "transactions:read", "refunds:write"],
        _ body: @Sendable (Shop, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await TestStores.withStore(kind) { store in
            let server = try await TestServer(store: { _ in store })
            try await server.addMerchant()
            let till = TerminalKey()
            _ = try await server.activate(till)
            try await server.withClient { client in
                let admin = try await APIKeyTests.adminToken(client)
                let pos = try await APIKeyTests.createKey(client, admin: admin, scopes: scopes).secret
                try await body(Shop(server: server, till: till, admin: admin, pos: pos), client)
            }
        }
    }

    static func create(
        _ client: any TestClientProtocol, key: String, idempotencyKey: String, json: String
    ) async throws -> TestResponse {
        try await client.send(
            .post, "/v1/merchant/payment-intents", json: json,
            headers: [.authorization: "Bearer " + key, Self.idempotencyKey: idempotencyKey])
    }

    static func intent(_ response: TestResponse) throws -> Components.Schemas.PaymentIntent {
        try JSONDecoder().decode(Components.Schemas.PaymentIntent.self, from: response.data)
    }

    static let order = #"{"amount": 1250, "currency": "EUR", "reference": "ORDER-42", "metadata": {"table": "7"}}"#

    /// The till settles the intent's payment id with a wallet's confirmation of `amount`.
    static func settle(_ shop: Shop, _ client: any TestClientProtocol, intentID: String, amount: Int64 = 1250)
        async throws -> TestResponse
    {
        let wallet = try await shop.server.fundedWallet(100_00)
        let id = try PaymentID(bytes: try #require([UInt8](hexString: intentID)))
        let confirm = try WalletSigned.confirm(
            by: wallet.key, for: shop.till.key.publicKey, amount: amount, paymentID: id)
        return try await client.sendSigned(
            .post, "/v1/payments", json: try SubmissionFields(payment: confirm).json(), by: shop.till.key,
            time: shop.server.clock.now)
    }

    @Test(arguments: stores)
    func aRetriedCreateReplaysAndOtherTermsConflict(_ kind: StoreKind) async throws {
        try await Self.withShop(kind) { shop, client in
            let first = try await Self.create(client, key: shop.pos, idempotencyKey: "order-42-a", json: Self.order)
            #expect(first.status == .created, "\(first.text)")
            let created = try Self.intent(first)
            #expect(created.status == .requiresCollection && created.reference == "ORDER-42")
            #expect(created.metadata.additionalProperties == ["table": "7"])
            #expect(created.expiresAt == shop.server.clock.now + 900)
            let again = try await Self.create(client, key: shop.pos, idempotencyKey: "order-42-a", json: Self.order)
            #expect(again.status == .ok && again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(try Self.intent(again).id == created.id)
            for other in [
                #"{"amount": 1251, "currency": "EUR", "reference": "ORDER-42", "metadata": {"table": "7"}}"#,
                #"{"amount": 1250, "currency": "EUR", "reference": "ORDER-43", "metadata": {"table": "7"}}"#,
                #"{"amount": 1250, "currency": "EUR", "reference": "ORDER-42"}"#,
            ] {
                try expectError(
                    try await Self.create(client, key: shop.pos, idempotencyKey: "order-42-a", json: other),
                    .conflict, "idempotency_conflict", "used for a payment intent with other terms")
            }
            // Another key is another intent for the same order; the reference finds both, newest first.
            shop.server.clock.advance(1)
            let second = try Self.intent(
                try await Self.create(client, key: shop.pos, idempotencyKey: "order-42-b", json: Self.order))
            #expect(second.id != created.id)
            let list = try await client.send(
                .get, "/v1/merchant/payment-intents?reference=ORDER-42", headers: [.authorization: "Bearer " + shop.pos])
            let found = try JSONDecoder().decode(Components.Schemas.PaymentIntentList.self, from: list.data)
            #expect(found.paymentIntents.map(\.id) == [second.id, created.id])
        }
    }

    @Test(arguments: stores)
    func aSettledIntentSucceedsCarriesItsReferenceAndFollowsRefunds(_ kind: StoreKind) async throws {
        try await Self.withShop(kind) { shop, client in
            let intent = try Self.intent(
                try await Self.create(client, key: shop.pos, idempotencyKey: "k1", json: Self.order))
            let paid = try await Self.settle(shop, client, intentID: intent.id)
            #expect(paid.status == .ok, "\(paid.text)")
            let read = try await client.send(
                .get, "/v1/merchant/payment-intents/\(intent.id)", headers: [.authorization: "Bearer " + shop.pos])
            let succeeded = try Self.intent(read)
            #expect(succeeded.status == .succeeded, "\(read.text)")
            #expect(succeeded.payment?.paymentId == intent.id && succeeded.payment?.orderReference == "ORDER-42")
            // The payment carries the order reference in the merchant's list and details.
            let list = try await client.send(
                .get, "/v1/merchant/transactions", headers: [.authorization: "Bearer " + shop.pos])
            let page = try JSONDecoder().decode(Components.Schemas.MerchantTransactionPage.self, from: list.data)
            #expect(page.transactions.map(\.orderReference) == ["ORDER-42"])
            // And on the dashboard: the list, the receipt and the CSV export.
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let reference = try #require(page.transactions.first?.reference)
            #expect(try await browser.get("/dashboard/transactions").text.contains(#"<span class="order">ORDER-42</span>"#))
            #expect(
                try await browser.get("/dashboard/transactions/\(reference)").text.contains(
                    #"<dd class="order">ORDER-42</dd>"#))
            let csv = try await browser.get("/dashboard/transactions.csv").text.components(separatedBy: "\r\n")
            #expect(csv.first?.hasSuffix(",order_reference") == true && csv[1].hasSuffix(",ORDER-42"), "\(csv)")
            // Cancel after collection is refused, and changes nothing.
            try expectError(
                try await client.send(
                    .post, "/v1/merchant/payment-intents/\(intent.id)/cancel",
                    headers: [.authorization: "Bearer " + shop.pos]), .conflict, "payment_intent_not_cancelable",
                "is succeeded")
            // Part refunded, then the rest.
            for (refundID, amount, status) in [("r1", 250, "partially_refunded"), ("r2", 1000, "refunded")] {
                let refund = try await client.send(
                    .post, "/v1/merchant/refunds",
                    json: #"{"refundId": "\#(refundID)", "paymentId": "\#(intent.id)", "amount": \#(amount), "currency": "EUR"}"#,
                    headers: [.authorization: "Bearer " + shop.pos])
                #expect(refund.status == .ok, "\(refund.text)")
                let now = try Self.intent(
                    try await client.send(
                        .get, "/v1/merchant/payment-intents/\(intent.id)", headers: [.authorization: "Bearer " + shop.pos]))
                #expect(now.status.rawValue == status)
            }
        }
    }

    @Test(arguments: stores)
    func aCanceledExpiredOrOtherAmountIntentIsNotExecuted(_ kind: StoreKind) async throws {
        try await Self.withShop(kind) { shop, client in
            let canceled = try Self.intent(
                try await Self.create(client, key: shop.pos, idempotencyKey: "c", json: Self.order))
            let cancel = try await client.send(
                .post, "/v1/merchant/payment-intents/\(canceled.id)/cancel", headers: [.authorization: "Bearer " + shop.pos])
            #expect(try Self.intent(cancel).status == .canceled)
            let declined = try await Self.settle(shop, client, intentID: canceled.id)
            #expect(declined.status == .ok && declined.text.contains("canceled"), "\(declined.text)")
            let other = try Self.intent(
                try await Self.create(client, key: shop.pos, idempotencyKey: "o", json: Self.order))
            let wrongAmount = try await Self.settle(shop, client, intentID: other.id, amount: 999)
            #expect(wrongAmount.text.contains("not its payment intent's"), "\(wrongAmount.text)")
            let expiring = try Self.intent(
                try await Self.create(
                    client, key: shop.pos, idempotencyKey: "e",
                    json: #"{"amount": 1250, "currency": "EUR", "reference": "ORDER-9", "expiresInSeconds": 60}"#))
            shop.server.clock.advance(61)
            let late = try await Self.settle(shop, client, intentID: expiring.id)
            #expect(late.text.contains("expired"), "\(late.text)")
            for id in [canceled.id, other.id, expiring.id] {
                let paymentID = try PaymentID(bytes: try #require([UInt8](hexString: id)))
                #expect(try await shop.server.ledger.executionCount(of: paymentID) == 0, "\(id) was executed")
            }
            let statuses = try await [canceled.id, other.id, expiring.id].asyncMap { id in
                try Self.intent(
                    try await client.send(
                        .get, "/v1/merchant/payment-intents/\(id)", headers: [.authorization: "Bearer " + shop.pos])
                ).status
            }
            #expect(statuses == [.canceled, .requiresCollection, .expired])
            try expectError(
                try await client.send(
                    .post, "/v1/merchant/payment-intents/\(expiring.id)/cancel",
                    headers: [.authorization: "Bearer " + shop.pos]), .conflict, "payment_intent_not_cancelable",
                "is expired")
        }
    }

    @Test(arguments: stores)
    func keysWithoutTheScopeOrRevokedAreRefused(_ kind: StoreKind) async throws {
        try await Self.withShop(kind, scopes: ["transactions:read"]) { shop, client in
            try expectError(
                try await Self.create(client, key: shop.pos, idempotencyKey: "x", json: Self.order), .forbidden,
                "insufficient_scope", "(intents:write)")
            let writer = try await APIKeyTests.createKey(client, admin: shop.admin, scopes: ["intents:write"])
            let intent = try Self.intent(
                try await Self.create(client, key: writer.secret, idempotencyKey: "x", json: Self.order))
            // The reader reads but cannot cancel.
            #expect(
                try await client.send(
                    .get, "/v1/merchant/payment-intents/\(intent.id)", headers: [.authorization: "Bearer " + shop.pos]
                ).status == .ok)
            try expectError(
                try await client.send(
                    .post, "/v1/merchant/payment-intents/\(intent.id)/cancel",
                    headers: [.authorization: "Bearer " + shop.pos]), .forbidden, "insufficient_scope", "intents:write")
            let refunder = try await APIKeyTests.createKey(client, admin: shop.admin, scopes: ["refunds:write"])
            try expectError(
                try await client.send(
                    .get, "/v1/merchant/payment-intents/\(intent.id)", headers: [.authorization: "Bearer " + refunder.secret]),
                .forbidden, "insufficient_scope", "intents:write or transactions:read")
            _ = try await client.send(
                .post, "/v1/merchant/api-keys/\(writer.apiKey.id)/revoke", headers: [.authorization: "Bearer " + shop.admin])
            try expectError(
                try await client.send(
                    .post, "/v1/merchant/payment-intents/\(intent.id)/cancel",
                    headers: [.authorization: "Bearer " + writer.secret]), .unauthorized, "unauthenticated",
                "revoked")
            #expect(
                try await shop.server.ledger.paymentIntent(
                    try PaymentID(bytes: try #require([UInt8](hexString: intent.id))),
                    of: shop.server.ledger.merchants()[0].id, at: shop.server.clock.now)?.status == .requiresCollection)
        }
    }

    @Test func badTermsAndBytesAreRefused() async throws {
        try await Self.withShop(.sqlite) { shop, client in
            let long = String(repeating: "k", count: 41)
            for body in [
                #"{"amount": 0, "currency": "EUR", "reference": "A"}"#,
                #"{"amount": 100, "currency": "USD", "reference": "A"}"#,
                #"{"amount": 100, "currency": "EUR", "reference": ""}"#,
                #"{"amount": 100, "currency": "EUR", "reference": "A\u0000B"}"#,
                #"{"amount": 100, "currency": "EUR", "reference": " A"}"#,
                #"{"amount": 100, "currency": "EUR", "reference": "A", "metadata": {"\#(long)": "v"}}"#,
                #"{"amount": 100, "currency": "EUR", "reference": "A", "expiresInSeconds": 5}"#,
                #"{"amount": 100, "currency": "EUR", "reference": "A", "surprise": 1}"#,
                #"{"amount": 100, "currency": "EUR""#, "\u{FF}\u{FE}",
            ] {
                let response = try await Self.create(client, key: shop.pos, idempotencyKey: "bad", json: body)
                #expect(response.status == .badRequest, "\(body): \(response.text)")
            }
            try expectError(
                try await Self.create(
                    client, key: shop.pos, idempotencyKey: "t",
                    json: #"{"amount": 100, "currency": "EUR", "reference": "A", "terminalId": "t_nobody"}"#),
                .notFound, "terminal_not_found", "no active terminal t_nobody")
            let noKey = try await client.send(
                .post, "/v1/merchant/payment-intents", json: Self.order, headers: [.authorization: "Bearer " + shop.pos])
            #expect(noKey.status == .badRequest, "\(noKey.text)")
            try expectError(
                try await client.send(
                    .get, "/v1/merchant/payment-intents/zz", headers: [.authorization: "Bearer " + shop.pos]),
                .badRequest, "invalid_request", "intentId")
            #expect(
                try await shop.server.ledger.paymentIntents(
                    reference: "A", of: shop.server.ledger.merchants()[0].id, at: shop.server.clock.now
                ).isEmpty)
        }
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async throws -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
