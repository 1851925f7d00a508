import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import HummingbirdTesting
import Logging
import Testing

/// The dashboard's webhooks page: an endpoint added with chosen events shows its secret once;
/// deliveries are listed with the answer each got and can be sent again; rolling the secret and
/// deleting the endpoint ask first; another merchant's endpoints and deliveries are "not found".
@Suite("Dashboard webhooks")
struct DashboardWebhookTests {
    static func secret(in page: String) -> String? {
        guard let range = page.range(of: #"whsec_[A-Za-z0-9_-]{43}"#, options: .regularExpression) else { return nil }
        return String(page[range])
    }

    static let logger: Logger = {
        var logger = Logger(label: "webhooks.test")
        logger.logLevel = .critical
        return logger
    }()

    @Test func anEndpointIsAddedItsDeliveriesListedAndResentItsSecretRolledAndItIsDeleted() async throws {
        // The receiver is on this machine.
        var configuration = ServerConfiguration.testing()
        configuration.webhooksAllowPrivateAddresses = true
        let server = try await TestServer(configuration: configuration)
        let merchant = try await server.addMerchant()
        let wallet = try await server.ledger.createWallet(name: "Alex", publicKey: walletKey(1))
        try await server.ledger.deposit(euros(50_00), to: wallet.id)
        let receiver = WebhookReceiver()
        receiver.script([
            .init(status: .internalServerError, body: "try again later"), .init(status: .ok, body: "thanks"),
        ])
        try await receiver.run { url in
            try await server.withClient { client in
                let browser = DashboardBrowser(client)
                _ = try await browser.signIn()
                let empty = try await browser.get("/dashboard/webhooks")
                #expect(empty.status == .ok && empty.text.contains("No webhook endpoint yet"))
                // No event, or an address that is not http(s): the form comes back (the refused
                // addresses are in WebhookAddressTests).
                let noEvent = try await browser.post("/dashboard/webhooks", ["url": url], csrf: true)
                #expect(noEvent.status == .badRequest && noEvent.text.contains("Choose at least one event"))
                let clear = try await browser.post(
                    "/dashboard/webhooks", ["url": "ftp://pos.example/hooks", "event_payment_succeeded": "yes"],
                    csrf: true)
                #expect(clear.status == .badRequest && clear.text.contains("https://"))
                let added = try await browser.post(
                    "/dashboard/webhooks",
                    ["url": url, "description": "Cloud POS", "event_payment_succeeded": "yes"], csrf: true)
                #expect(added.status == .created, "\(added.text)")
                let secret = try #require(Self.secret(in: added.text), "no secret on the page")
                let endpoint = try #require(try await server.ledger.webhookEndpoints(of: merchant.id).first)
                #expect(endpoint.eventTypes == [.paymentSucceeded] && endpoint.url == url)
                let list = try await browser.get("/dashboard/webhooks")
                #expect(list.text.contains(url) && list.text.contains("Cloud POS") && !list.text.contains(secret))

                // A payment; its delivery fails, then is listed with its answer.
                _ = try await server.ledger.settle(
                    request(1, amount: euros(3_00)), merchant: merchant.id, at: server.clock.now)
                let deliverer = WebhookDeliverer(
                    ledger: server.ledger, timeout: .seconds(5), addressPolicy: .localReceivers,
                    now: { server.clock.now })
                _ = await deliverer.deliverDue(at: server.clock.now, logger: Self.logger)
                let failed = try await browser.get("/dashboard/webhooks")
                #expect(failed.text.contains("payment.succeeded") && failed.text.contains("HTTP 500"))
                #expect(failed.text.contains("try again later") && failed.text.contains("retrying at"))

                // Resent on request: due now, delivered, listed as delivered.
                let delivery = try #require(try await server.ledger.webhookDeliveries(of: merchant.id).first)
                let resent = try await browser.post(
                    "/dashboard/webhooks/resend", ["id": String(delivery.id)], csrf: true)
                #expect(resent.status == .seeOther)
                _ = await deliverer.deliverDue(at: server.clock.now, logger: Self.logger)
                let delivered = try await browser.get("/dashboard/webhooks?done=delivery-resent")
                #expect(delivered.text.contains("being sent again") && delivered.text.contains("HTTP 200"))
                #expect(delivered.text.contains("delivered") && delivered.text.contains("thanks"))
                let requests = try await receiver.waitFor(2)
                #expect(requests.count == 2)
                #expect(
                    requests.allSatisfy {
                        ReceiverSignatureCheck.verify(
                            header: $0.signature, body: $0.body, secret: secret, now: server.clock.now)
                    })

                // Roll: asked first, then a new secret shown once.
                let asked = try await browser.post("/dashboard/webhooks/roll", ["id": endpoint.id], csrf: true)
                #expect(asked.status == .ok && asked.text.contains("Roll the signing secret"))
                let rolled = try await browser.post(
                    "/dashboard/webhooks/roll", ["id": endpoint.id, "confirm": "yes"], csrf: true)
                #expect(rolled.status == .created)
                let newSecret = try #require(Self.secret(in: rolled.text))
                #expect(newSecret != secret)
                #expect(try await browser.get("/dashboard/webhooks").text.contains("the secret before the last roll"))

                // Delete: asked first; the delivery stays listed, without a resend.
                let confirm = try await browser.post("/dashboard/webhooks/delete", ["id": endpoint.id], csrf: true)
                #expect(confirm.text.contains("Delete the webhook endpoint"))
                let deleted = try await browser.post(
                    "/dashboard/webhooks/delete", ["id": endpoint.id, "confirm": "yes"], csrf: true)
                #expect(deleted.status == .seeOther)
                let after = try await browser.get("/dashboard/webhooks?done=endpoint-deleted")
                #expect(after.text.contains("No webhook endpoint yet") && after.text.contains("payment.succeeded"))
                #expect(!after.text.contains("/dashboard/webhooks/resend"))
            }
        }
    }

    @Test func anotherMerchantsEndpointsAndDeliveriesAreNotFoundAndFormsNeedTheirToken() async throws {
        let server = try await TestServer()
        let bakery = try await server.addMerchant()
        let florist = try await server.addMerchant(name: "Florist", email: "owner@florist.example")
        _ = try await server.ledger.createWebhookEndpoint(
            id: "we_florist", url: "https://florist.example/hooks", description: "Florist POS",
            eventTypes: [.terminalOffline], secret: "whsec_florist", for: florist.id, at: server.clock.now)
        _ = try await server.ledger.recordWebhookEvent(
            .terminalOffline, merchant: florist.id, object: [:], at: server.clock.now)
        let delivery = try #require(try await server.ledger.webhookDeliveries(of: florist.id).first)
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let page = try await browser.get("/dashboard/webhooks")
            #expect(!page.text.contains("florist.example") && page.text.contains("No delivery yet"))
            for (path, id) in [
                ("/dashboard/webhooks/roll", "we_florist"), ("/dashboard/webhooks/delete", "we_florist"),
                ("/dashboard/webhooks/resend", String(delivery.id)),
            ] {
                for fields in [["id": id], ["id": id, "confirm": "yes"]] {
                    let response = try await browser.post(path, fields, csrf: true)
                    #expect(response.status == .notFound, "\(path) \(fields)")
                    #expect(!response.text.contains("florist.example"))
                }
            }
            let forged = try await browser.post(
                "/dashboard/webhooks", ["url": "https://pos.example/hooks", "event_payment_succeeded": "yes"],
                csrf: false)
            #expect(forged.status == .forbidden)
            #expect(try await server.ledger.webhookEndpoints(of: bakery.id).isEmpty)
            #expect(try await server.ledger.webhookEndpoints(of: florist.id).count == 1)
            #expect(try await server.ledger.webhookDelivery(delivery.id, of: florist.id)?.attempts == 0)
        }
    }
}
