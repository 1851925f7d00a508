import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import Testing

/// Webhooks in the ledger: an event and its deliveries are written in the transaction of the
/// change that caused it, only to the merchant's endpoints listening to it; deliveries are
/// claimed by moving their due time, so two processes never hold one at once; retries stop at
/// the give-up time or when the endpoint is deleted; a resend makes one due again.
@Suite("Webhooks: events and their outbox in the ledger")
struct WebhookOutboxTests {
    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]

    struct Event: Decodable {
        struct Data: Decodable { let object: [String: JSONValue] }
        let id: String
        let type: String
        let created: Int64
        let merchant: String
        let data: Data
    }

    enum JSONValue: Decodable, Equatable {
        case string(String)
        case number(Int64)
        case bool(Bool)
        case null
        case object([String: JSONValue])
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let text = try? container.decode(String.self) {
                self = .string(text)
            } else if let flag = try? container.decode(Bool.self) {
                self = .bool(flag)
            } else if let number = try? container.decode(Int64.self) {
                self = .number(number)
            } else {
                self = .object(try container.decode([String: JSONValue].self))
            }
        }
    }

    static func event(_ ledger: Ledger, _ delivery: WebhookDelivery) async throws -> Event {
        let body = try #require(try await ledger.webhookEventBody(delivery.eventID, of: delivery.merchantID))
        return try JSONDecoder().decode(Event.self, from: Data(body.utf8))
    }

    @Test(arguments: stores)
    func eventsGoOnlyToTheMerchantsEndpointsThatListen(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let bakery = try await ledger.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
            let florist = try await ledger.createMerchant(name: "Florist", currency: .eur, adminEmail: "o@f.example")
            let wallet = try await ledger.createWallet(name: "Alex", publicKey: walletKey(1))
            try await ledger.deposit(euros(100_00), to: wallet.id)
            let payments = try await ledger.createWebhookEndpoint(
                id: "we_payments", url: "https://pos.example/hooks", description: "POS",
                eventTypes: [.paymentSucceeded, .intentSucceeded], secret: "whsec_a", for: bakery.id, at: 1_000)
            let refunds = try await ledger.createWebhookEndpoint(
                id: "we_refunds", url: "https://books.example/hooks", description: "",
                eventTypes: [.refundSucceeded, .intentCanceled], secret: "whsec_b", for: bakery.id, at: 1_000)
            _ = try await ledger.createWebhookEndpoint(
                id: "we_florist", url: "https://florist.example/hooks", description: "",
                eventTypes: Set(WebhookEventType.allCases), secret: "whsec_c", for: florist.id, at: 1_000)
            #expect(
                try await ledger.webhookEndpoints(of: bakery.id).map(\.id).sorted() == ["we_payments", "we_refunds"])

            // An approved payment: one event, to the endpoint listening to payment.succeeded.
            let paid = try await ledger.settle(request(1, amount: euros(12_50)), merchant: bakery.id, at: 1_001)
            #expect(paid.outcome.isApproved)
            var deliveries = try await ledger.webhookDeliveries(of: bakery.id)
            #expect(deliveries.map(\.endpointID) == ["we_payments"])
            #expect(deliveries.first?.dueAt == 1_001 && deliveries.first?.giveUpAt == 1_001 + 3 * 86_400)
            let event = try await Self.event(ledger, try #require(deliveries.first))
            #expect(event.type == "payment.succeeded" && event.merchant == bakery.id.rawValue && event.created == 1_001)
            #expect(event.id.hasPrefix("evt_") && event.id == deliveries.first?.eventID)
            #expect(event.data.object["paymentId"] == .string(paymentID(1).bytes.hexString))
            #expect(event.data.object["amount"] == .number(12_50) && event.data.object["currency"] == .string("EUR"))

            // The retry replays the stored result and records no second event.
            _ = try await ledger.settle(request(1, amount: euros(12_50)), merchant: bakery.id, at: 1_002)
            #expect(try await ledger.webhookDeliveries(of: bakery.id).count == 1)

            // A declined payment: nobody listens to payment.declined.
            let declined = try await ledger.settle(
                request(2, amount: euros(1_000_00)), merchant: bakery.id, at: 1_003)
            #expect(!declined.outcome.isApproved)
            #expect(try await ledger.webhookDeliveries(of: bakery.id).count == 1)

            // A refund, and a canceled intent: to the other endpoint.
            _ = try await ledger.refund(
                RefundRequest(refundID: .generate(), paymentID: paymentID(1), amount: euros(2_50)),
                merchant: bakery.id, at: 1_004)
            let intent = NewPaymentIntent(
                paymentID: paymentID(3), idempotencyKey: "k3", requestDigest: [3], orderReference: "ORDER-3",
                amount: euros(5_00), metadata: #"{"table":"4"}"#, terminalID: nil, expiresAt: 9_000)
            _ = try await ledger.createPaymentIntent(intent, merchant: bakery.id, at: 1_005).get()
            _ = try await ledger.cancelPaymentIntent(paymentID(3), of: bakery.id, at: 1_006)
            // Canceling again changes nothing and tells nobody again.
            _ = try await ledger.cancelPaymentIntent(paymentID(3), of: bakery.id, at: 1_007)
            deliveries = try await ledger.webhookDeliveries(of: bakery.id)
            #expect(deliveries.map(\.eventType) == [.intentCanceled, .refundSucceeded, .paymentSucceeded])
            #expect(deliveries.filter { $0.endpointID == refunds.id }.count == 2)
            let canceled = try await Self.event(ledger, deliveries[0])
            #expect(canceled.data.object["reference"] == .string("ORDER-3"))
            #expect(canceled.data.object["metadata"] == .object(["table": .string("4")]))

            // An intent's payment: payment.succeeded and intent.succeeded.
            let collected = NewPaymentIntent(
                paymentID: paymentID(4), idempotencyKey: "k4", requestDigest: [4], orderReference: "ORDER-4",
                amount: euros(3_00), metadata: "{}", terminalID: nil, expiresAt: 9_000)
            _ = try await ledger.createPaymentIntent(collected, merchant: bakery.id, at: 1_008).get()
            _ = try await ledger.settle(request(4, amount: euros(3_00)), merchant: bakery.id, at: 1_009)
            deliveries = try await ledger.webhookDeliveries(of: bakery.id, endpoint: payments.id)
            #expect(Set(deliveries.prefix(2).map(\.eventType)) == [.paymentSucceeded, .intentSucceeded])
            let succeeded = try await Self.event(
                ledger, try #require(deliveries.first { $0.eventType == .intentSucceeded }))
            #expect(succeeded.data.object["status"] == .string("succeeded"))

            // The florist's endpoint heard nothing of the bakery, and sees none of its deliveries.
            #expect(try await ledger.webhookDeliveries(of: florist.id).isEmpty)
            #expect(try await ledger.webhookDelivery(deliveries[0].id, of: florist.id) == nil)
            #expect(try await ledger.resendWebhookDelivery(deliveries[0].id, of: florist.id, at: 1_010) == nil)
            #expect(try await ledger.deleteWebhookEndpoint(payments.id, of: florist.id, at: 1_010) == nil)
            #expect(try await ledger.rollWebhookSecret(payments.id, of: florist.id, to: "x", at: 1_010) == nil)
            #expect(try await ledger.webhookEventBody(deliveries[0].eventID, of: florist.id) == nil)
        }
    }

    @Test(arguments: stores)
    func retriesStopAtTheGiveUpTimeOrWhenTheEndpointIsDeleted(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let bakery = try await ledger.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
            let endpoint = try await ledger.createWebhookEndpoint(
                id: "we_1", url: "https://pos.example/hooks", description: "", eventTypes: [.terminalOffline],
                secret: "whsec_now", for: bakery.id, at: 1_000)
            let first = try #require(
                try await ledger.recordWebhookEvent(
                    .terminalOffline, merchant: bakery.id, object: ["terminalId": .string("t_1")], at: 1_000))

            // Claimed for the lease: not due again to anyone until it runs out.
            var claimed = try await ledger.claimDueWebhookDeliveries(at: 1_000, lease: 60)
            #expect(claimed.map(\.delivery.eventID) == [first] && claimed.first?.secrets == ["whsec_now"])
            #expect(try await ledger.claimDueWebhookDeliveries(at: 1_059).isEmpty)
            // The process died mid-attempt: after the lease, any process takes it again.
            claimed = try await ledger.claimDueWebhookDeliveries(at: 1_060, lease: 60)
            let id = try #require(claimed.first?.delivery.id)

            // A failed attempt is recorded with its answer and due at the retry time.
            try await ledger.recordWebhookAttempt(
                id,
                WebhookAttempt(
                    attemptedAt: 1_060, status: 503, responseBody: "busy", latencyMilliseconds: 12, error: nil),
                retryAt: 1_090)
            var delivery = try #require(try await ledger.webhookDelivery(id, of: bakery.id))
            #expect(delivery.state == .retrying && delivery.dueAt == 1_090 && delivery.attempts == 1)
            #expect(delivery.history.first?.status == 503 && delivery.history.first?.responseBody == "busy")
            #expect(try await ledger.claimDueWebhookDeliveries(at: 1_089).isEmpty)

            // A retry time past the give-up time gives it up.
            _ = try await ledger.claimDueWebhookDeliveries(at: 1_090)
            try await ledger.recordWebhookAttempt(
                id,
                WebhookAttempt(
                    attemptedAt: 1_090, status: nil, responseBody: "", latencyMilliseconds: 10_000,
                    error: "no answer"), retryAt: 1_000 + 3 * 86_400)
            delivery = try #require(try await ledger.webhookDelivery(id, of: bakery.id))
            #expect(delivery.state == .failed && delivery.dueAt == nil && delivery.history.count == 2)

            // A resend makes it due now, for three more days; a 2xx ends it.
            let resent = try #require(try await ledger.resendWebhookDelivery(id, of: bakery.id, at: 5_000))
            #expect(resent.dueAt == 5_000 && resent.giveUpAt == 5_000 + 3 * 86_400)
            claimed = try await ledger.claimDueWebhookDeliveries(at: 5_000)
            #expect(claimed.count == 1)
            try await ledger.recordWebhookAttempt(
                id,
                WebhookAttempt(
                    attemptedAt: 5_000, status: 204, responseBody: "", latencyMilliseconds: 3, error: nil),
                retryAt: nil)
            delivery = try #require(try await ledger.webhookDelivery(id, of: bakery.id))
            #expect(delivery.state == .delivered && delivery.deliveredAt == 5_000 && delivery.attempts == 3)

            // A rolled secret signs beside the new one for a day.
            _ = try #require(try await ledger.rollWebhookSecret(endpoint.id, of: bakery.id, to: "whsec_new", at: 6_000))
            _ = try await ledger.recordWebhookEvent(.terminalOffline, merchant: bakery.id, object: [:], at: 6_000)
            claimed = try await ledger.claimDueWebhookDeliveries(at: 6_000)
            #expect(claimed.first?.secrets == ["whsec_new", "whsec_now"])
            try await ledger.recordWebhookAttempt(
                try #require(claimed.first?.delivery.id),
                WebhookAttempt(attemptedAt: 6_000, status: 200, responseBody: "", latencyMilliseconds: 1, error: nil),
                retryAt: nil)
            _ = try await ledger.recordWebhookEvent(
                .terminalOffline, merchant: bakery.id, object: [:], at: 6_000 + 86_400)
            claimed = try await ledger.claimDueWebhookDeliveries(at: 6_000 + 86_400)
            #expect(claimed.map(\.secrets) == [["whsec_new"]])

            // A deleted endpoint gets nothing more, and its pending deliveries stop.
            _ = try await ledger.recordWebhookEvent(.terminalOffline, merchant: bakery.id, object: [:], at: 100_000)
            _ = try #require(try await ledger.deleteWebhookEndpoint(endpoint.id, of: bakery.id, at: 100_001))
            #expect(try await ledger.claimDueWebhookDeliveries(at: 200_000).isEmpty)
            #expect(
                try await ledger.recordWebhookEvent(.terminalOffline, merchant: bakery.id, object: [:], at: 100_002)
                    == nil)
            #expect(try await ledger.webhookEndpoints(of: bakery.id).isEmpty)
            #expect(try await ledger.webhookDeliveries(of: bakery.id).count == 4)

            // Finished deliveries older than the retention are forgotten, with their answers and events.
            try await ledger.pruneWebhookHistory(before: 6_000)
            let kept = try await ledger.webhookDeliveries(of: bakery.id)
            #expect(kept.count == 3 && !kept.contains { $0.id == id })
            #expect(try await ledger.webhookEventBody(first, of: bakery.id) == nil)
            try await ledger.pruneWebhookHistory(before: 1_000_000)
            #expect(try await ledger.webhookDeliveries(of: bakery.id).isEmpty)
        }
    }

    /// Two server processes (two stores of one database) claim at the same moment, many times:
    /// every delivery is claimed by exactly one of them.
    @Test(arguments: stores)
    func twoProcessesNeverClaimOneDelivery(_ kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { store, another in
            let first = try await Ledger.open(store)
            let second = try await Ledger.open(try another())
            let bakery = try await first.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
            _ = try await first.createWebhookEndpoint(
                id: "we_1", url: "https://pos.example/hooks", description: "", eventTypes: [.terminalOffline],
                secret: "whsec", for: bakery.id, at: 1_000)
            for round in 0..<10 {
                let time = Int64(2_000 + round * 1_000)
                for _ in 0..<6 {
                    _ = try await first.recordWebhookEvent(.terminalOffline, merchant: bakery.id, object: [:], at: time)
                }
                // A lease longer than the test, so a claim never runs out here.
                async let a = first.claimDueWebhookDeliveries(at: time, lease: 1_000_000, limit: 4)
                async let b = second.claimDueWebhookDeliveries(at: time, lease: 1_000_000, limit: 4)
                async let c = first.claimDueWebhookDeliveries(at: time, lease: 1_000_000, limit: 4)
                let claims = try await [a, b, c].flatMap { $0.map(\.delivery.id) }
                #expect(Set(claims).count == claims.count, "round \(round): one delivery claimed twice: \(claims)")
                // Whatever is left is claimed later; nothing is lost.
                let rest = try await second.claimDueWebhookDeliveries(at: time, lease: 1_000_000, limit: 20)
                    .map(\.delivery.id)
                #expect(Set(claims + rest).count == 6 && Set(claims).isDisjoint(with: rest), "round \(round)")
            }
            await second.close()
        }
    }
}
