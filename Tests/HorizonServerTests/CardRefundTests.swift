import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import Synchronization
import Testing

/// A refund of a card payment goes back to the card, through the card processor,
/// once per refund id, and never more than what is left.
@Suite("Card refunds")
struct CardRefundTests {
    /// The sandbox, but its refunds fail while `failing` is set (a processor that is down).
    final class FlakyRefunds: CardProcessor {
        let sandbox: SandboxCardProcessor
        let failing = Mutex(false)
        init(_ sandbox: SandboxCardProcessor) { self.sandbox = sandbox }

        func tokenize(_ card: CardDetails, at time: UnixTime) async throws(CardProcessorError) -> CardTokenization {
            try await sandbox.tokenize(card, at: time)
        }
        func charge(token: String, amount: Money, idempotencyKey: String, at time: UnixTime)
            async throws(CardProcessorError) -> CardCharge
        {
            try await sandbox.charge(token: token, amount: amount, idempotencyKey: idempotencyKey, at: time)
        }
        func refund(chargeKey: String, amount: Money, idempotencyKey: String, at time: UnixTime)
            async throws(CardProcessorError) -> CardRefund
        {
            if failing.withLock({ $0 }) { throw .unavailable("the test took the processor down") }
            return try await sandbox.refund(
                chargeKey: chargeKey, amount: amount, idempotencyKey: idempotencyKey, at: time)
        }
        func lookup(idempotencyKey: String) async throws(CardProcessorError) -> CardCharge? {
            try await sandbox.lookup(idempotencyKey: idempotencyKey)
        }
    }

    @Test func aCardPaymentIsRefundedToItsCardOnce() async throws {
        let shop = try await CardPaymentTests.Shop.open()
        let paid = try await shop.server.withClient { client in
            let card = try await shop.addCard("4242424242424242", client: client)
            let confirm = try shop.confirm(.card(id: card))
            #expect(try shop.result(try await shop.submit(confirm, client: client)).outcome == .approved)
            return (confirm, card)
        }
        let (confirm, card) = paid
        let processor = FlakyRefunds(SandboxCardProcessor(ledger: shop.server.ledger))
        let refunds = CardRefunds(ledger: shop.server.ledger, processor: processor)
        func request(_ minorUnits: Int64, _ id: String) throws -> RefundRequest {
            RefundRequest(
                refundID: RefundID(rawValue: id), paymentID: confirm.paymentID,
                amount: try Money(minorUnits: minorUnits, currency: .eur))
        }
        func sandboxRefunds() async throws -> [String] {
            try await shop.server.ledger.store.transaction { db in
                try await db.query("SELECT idempotency_key, amount FROM sandbox_card_refunds ORDER BY idempotency_key")
                    .map { "\(try $0.text("idempotency_key"))=\(try $0.integer("amount"))" }
            }
        }
        let merchant = shop.merchant.id.rawValue
        let first = try await refunds.refund(try request(5_00, "r-1"), merchant: shop.merchant.id, at: 2_000)
        #expect(first.destination == .card && first.destinationReference == card)
        #expect(try await sandboxRefunds() == ["\(merchant)/r-1=500"])
        // The same refund id again: the stored refund, no second refund at the processor.
        #expect(try await refunds.refund(try request(5_00, "r-1"), merchant: shop.merchant.id, at: 2_001) == first)
        #expect(try await sandboxRefunds() == ["\(merchant)/r-1=500"])
        // More than is left (9.00 of 14.00): refused by the ledger, nothing sent.
        await #expect(throws: CardRefunds.Failure.self) {
            _ = try await refunds.refund(try request(9_01, "r-2"), merchant: shop.merchant.id, at: 2_002)
        }
        #expect(try await sandboxRefunds() == ["\(merchant)/r-1=500"])

        // The processor is down: the refund is recorded, the error says to retry; the retry completes it.
        processor.failing.withLock { $0 = true }
        let third = try request(4_00, "r-3")
        do throws(CardRefunds.Failure) {
            _ = try await refunds.refund(third, merchant: shop.merchant.id, at: 2_003)
            Issue.record("a refund the processor did not confirm was reported as done")
        } catch {
            guard case .processor(_, let refund) = error else {
                Issue.record("not a processor failure: \(error)")
                return
            }
            #expect(refund.refundID == RefundID(rawValue: "r-3"))
        }
        processor.failing.withLock { $0 = false }
        _ = try await refunds.refund(try request(4_00, "r-3"), merchant: shop.merchant.id, at: 2_004)
        #expect(try await sandboxRefunds() == ["\(merchant)/r-1=500", "\(merchant)/r-3=400"])

        // The wallet's balance never changed (the card paid and is refunded); the merchant kept 5.00.
        #expect(try await shop.walletBalance == (try Money(minorUnits: 50_00, currency: .eur)))
        #expect(try await shop.merchantBalance == (try Money(minorUnits: 5_00, currency: .eur)))
        #expect(try await LedgerAudit.violations(in: shop.server.ledger.store).isEmpty)
    }

    /// The merchant service's refund endpoint (what `horizon-terminal refund` and the dashboard
    /// use) sends a card payment's refund on to the card processor, once per refund id.
    @Test func theMerchantServiceRefundsACardPaymentToItsCard() async throws {
        let shop = try await CardPaymentTests.Shop.open()
        try await shop.server.withClient { client in
            let card = try await shop.addCard("4242424242424242", client: client)
            let confirm = try shop.confirm(.card(id: card))
            #expect(try shop.result(try await shop.submit(confirm, client: client)).outcome == .approved)
            let body = """
                {"refundId": "api-1", "paymentId": "\(confirm.paymentID.bytes.hexString)", "amount": 250, "currency": "EUR"}
                """
            // The merchant's admin refunds (a till's key may not pay money out).
            let tillTried = try await client.sendSigned(
                .post, "/v1/merchant/refunds", json: body, by: shop.till.key, time: shop.server.clock.now)
            #expect(tillTried.status == .forbidden && tillTried.text.contains("admin_required"), "\(tillTried.text)")
            let signIn = try await client.send(
                .post, "/v1/merchant/sessions",
                json: #"{"email": "\#(TestServer.email)", "password": "\#(TestServer.password)"}"#)
            let session = try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: signIn.data)
            for _ in 0..<2 {
                let response = try await client.send(
                    .post, "/v1/merchant/refunds", json: body, headers: [.authorization: "Bearer " + session.token])
                #expect(response.status == .ok, "\(response.text)")
                #expect(response.text.contains(#""destination" : "card""#), "\(response.text)")
            }
            let atTheProcessor = try await shop.server.ledger.store.transaction { db in
                try await db.query("SELECT idempotency_key, amount FROM sandbox_card_refunds")
                    .map { "\(try $0.text("idempotency_key"))=\(try $0.integer("amount"))" }
            }
            #expect(atTheProcessor == ["\(shop.merchant.id.rawValue)/api-1=250"])
        }
    }
}
