import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import HummingbirdTesting
import Logging
import Synchronization
import Testing

extension WebhookAddressPolicy {
    /// For tests whose receiver runs in the test process, on this machine.
    static let localReceivers = WebhookAddressPolicy(allowsPrivateAddresses: true)
}

/// Where webhooks may go: a merchant's endpoint is refused (400, `invalid_request`) when it is not
/// http(s), carries credentials, uses http:// by default, or is or resolves to a loopback,
/// link-local, private, multicast or unspecified address, at registration and again before every
/// attempt; `webhooksAllowPrivateAddresses` lets a shop's own receiver on its network through.
@Suite("Webhook endpoint addresses")
struct WebhookAddressTests {
    /// Each refused kind, spelled as an IP literal (no DNS needed), and the words of its refusal.
    static let refused: [(url: String, reason: String)] = [
        ("ftp://pos.example/hooks", "https://"),
        ("https://user:secret@pos.example/hooks", "user name or password"),
        ("http://pos.example/hooks", "http:// only where"),
        ("https://127.0.0.1/hooks", "loopback"),
        ("https://127.8.9.10:8443/hooks", "loopback"),
        ("https://[::1]/hooks", "loopback"),
        ("https://localhost/hooks", "loopback"),
        ("https://till.localhost/hooks", "loopback"),
        ("https://[::ffff:127.0.0.1]/hooks", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://[fe80::1]/hooks", "link-local"),
        ("https://10.1.2.3/hooks", "private"),
        ("https://172.16.0.1/hooks", "private"),
        ("https://172.31.255.254/hooks", "private"),
        ("https://192.168.1.10/hooks", "private"),
        ("https://[fc00::1]/hooks", "private"),
        ("https://[fd12:3456::1]/hooks", "private"),
        ("https://224.0.0.1/hooks", "multicast"),
        ("https://239.255.255.250/hooks", "multicast"),
        ("https://[ff02::1]/hooks", "multicast"),
        ("https://0.0.0.0/hooks", "unspecified"),
        ("https://[::]/hooks", "unspecified"),
    ]

    @Test func eachKindOfAddressOutsideThePublicInternetIsNamed() throws {
        let kinds: [(String, String?)] = [
            ("127.0.0.1", "a loopback address"), ("::1", "a loopback address"),
            ("169.254.1.1", "a link-local address"), ("fe80::abcd", "a link-local address"),
            ("10.0.0.1", "a private address"), ("172.20.1.1", "a private address"),
            ("192.168.0.1", "a private address"), ("fdff::1", "a private address"),
            ("224.1.2.3", "a multicast address"), ("ff05::2", "a multicast address"),
            ("0.0.0.0", "an unspecified address"), ("::", "an unspecified address"),
            ("::ffff:10.0.0.1", "a private address"),
            // Public: just outside each range.
            ("172.15.255.255", nil), ("172.32.0.1", nil), ("11.0.0.1", nil), ("93.184.216.34", nil),
            ("2001:db8::1", nil), ("fe00::1", nil), ("fbff::1", nil), ("192.169.0.1", nil),
        ]
        for (text, kind) in kinds {
            let address = try #require(WebhookAddressPolicy.literal(text), "\(text)")
            #expect(WebhookAddressPolicy.refusal(of: address) == kind, "\(text)")
        }
        #expect(WebhookAddressPolicy.literal("pos.example") == nil)
    }

    @Test func theAPIRefusesEachKindWithItsErrorShapeAndTakesAPublicAddress() async throws {
        try await APIKeyTests.withServer(.sqlite) { server, merchant in
            try await server.withClient { client in
                let admin = try await APIKeyTests.adminToken(client)
                for (url, reason) in Self.refused {
                    let answer = try await client.send(
                        .post, "/v1/merchant/webhook-endpoints",
                        json: #"{"url": "\#(url)", "eventTypes": ["payment.succeeded"]}"#,
                        headers: APIKeyTests.bearer(admin))
                    #expect(answer.status == .badRequest, "\(url): \(answer.text)")
                    let error =
                        (try? JSONSerialization.jsonObject(with: answer.data) as? [String: Any])?["error"]
                        as? [String: Any]
                    #expect(error?["code"] as? String == "invalid_request", "\(url): \(answer.text)")
                    #expect((error?["message"] as? String)?.contains(reason) == true, "\(url): \(answer.text)")
                }
                #expect(try await server.ledger.webhookEndpoints(of: merchant.id).isEmpty)
                let made = try await client.send(
                    .post, "/v1/merchant/webhook-endpoints",
                    json: #"{"url": "https://93.184.216.34/hooks", "eventTypes": ["payment.succeeded"]}"#,
                    headers: APIKeyTests.bearer(admin))
                #expect(made.status == .created, "\(made.text)")
            }
        }
    }

    @Test func theDashboardRefusesAPrivateAddress() async throws {
        let server = try await TestServer()
        _ = try await server.addMerchant()
        try await server.withClient { client in
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn()
            let refused = try await browser.post(
                "/dashboard/webhooks", ["url": "https://192.168.1.10/hooks", "event_payment_succeeded": "yes"],
                csrf: true)
            #expect(refused.status == .badRequest && refused.text.contains("private address"), "\(refused.text)")
        }
    }

    @Test func withPrivateAddressesAllowedALocalReceiverIsRegisteredOverHTTP() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.webhooksAllowPrivateAddresses = true
        let server = try await TestServer(configuration: configuration)
        _ = try await server.addMerchant()
        try await server.withClient { client in
            let admin = try await APIKeyTests.adminToken(client)
            for url in ["http://127.0.0.1:8080/hooks", "https://192.168.1.10/hooks", "http://localhost/hooks"] {
                let made = try await client.send(
                    .post, "/v1/merchant/webhook-endpoints",
                    json: #"{"url": "\#(url)", "eventTypes": ["payment.succeeded"]}"#,
                    headers: APIKeyTests.bearer(admin))
                #expect(made.status == .created, "\(url): \(made.text)")
            }
            // Still never credentials, nor another scheme.
            for url in ["http://user:pw@127.0.0.1/hooks", "ftp://127.0.0.1/hooks"] {
                let refused = try await client.send(
                    .post, "/v1/merchant/webhook-endpoints",
                    json: #"{"url": "\#(url)", "eventTypes": ["payment.succeeded"]}"#,
                    headers: APIKeyTests.bearer(admin))
                #expect(refused.status == .badRequest, "\(url): \(refused.text)")
            }
        }
    }

    @Test func theSettingIsOffByDefaultAndReadFromServerJSON() throws {
        #expect(ServerConfiguration().webhookAddressPolicy.allowsPrivateAddresses == false)
        var configuration = try JSONDecoder().decode(
            ServerConfiguration.self, from: JSONEncoder().encode(ServerConfiguration()))
        #expect(configuration.webhooksAllowPrivateAddresses == nil)
        configuration.webhooksAllowPrivateAddresses = true
        let read = try JSONDecoder().decode(ServerConfiguration.self, from: JSONEncoder().encode(configuration))
        #expect(read.webhookAddressPolicy.allowsPrivateAddresses)
    }

    /// A name public when registered that resolves to a private address later (DNS rebinding) is
    /// not sent to: the attempt is recorded as failed, unsent, and retried; the receiver gets
    /// nothing. With private addresses allowed the same delivery goes through.
    @Test func aNameThatResolvesToAPrivateAddressByDeliveryTimeIsNotSentTo() async throws {
        let answer = DNSAnswer("93.184.216.34")
        let policy = WebhookAddressPolicy(allowsPrivateAddresses: false, resolver: { _ in answer.addresses })
        let url = "https://pos.example/hooks"
        #expect(await policy.refusal(ofHost: "pos.example", refuseUnresolved: true) == nil)
        answer.set("10.0.0.7")
        #expect(
            await policy.refusal(ofHost: "pos.example", refuseUnresolved: true)
                == "pos.example resolves to 10.0.0.7, a private address")

        try await TestStores.withLedger(.sqlite) { ledger in
            let receiver = WebhookReceiver()
            try await receiver.run { local in
                let shop = try await ledger.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
                for (id, address) in [("we_rebound", url), ("we_local", local)] {
                    _ = try await ledger.createWebhookEndpoint(
                        id: id, url: address, description: "", eventTypes: [.terminalOffline],
                        secret: "whsec_x", for: shop.id, at: 1_000)
                }
                _ = try await ledger.recordWebhookEvent(
                    .terminalOffline, merchant: shop.id, object: ["terminalId": .string("t_1")], at: 1_000)
                let deliverer = WebhookDeliverer(
                    ledger: ledger, timeout: .seconds(2), addressPolicy: policy, now: { 1_000 })
                let report = await deliverer.deliverDue(logger: WebhookDeliveryTests.logger)
                #expect(report.attempts.count == 2 && report.delivered.isEmpty)
                for attempt in report.attempts.values {
                    #expect(attempt.status == nil && attempt.error?.hasPrefix("not sent:") == true, "\(attempt)")
                }
                #expect(report.attempts.values.contains { $0.error?.contains("10.0.0.7, a private address") == true })
                #expect(report.attempts.values.contains { $0.error?.contains("http://") == true })
                #expect(receiver.requests.isEmpty)
                // Retried like any failure: with local receivers allowed, the local one gets it.
                let allowing = WebhookDeliverer(
                    ledger: ledger, timeout: .seconds(2), addressPolicy: .localReceivers, now: { 1_000 + 3_600 })
                let retried = await allowing.deliverDue(logger: WebhookDeliveryTests.logger)
                #expect(retried.delivered.count == 1, "\(retried)")
                #expect(try await receiver.waitFor(1).count == 1)
            }
        }
    }
}

/// What a test's resolver answers for every name, changed as the test goes.
final class DNSAnswer: Sendable {
    private let address: Mutex<String>

    init(_ address: String) { self.address = Mutex(address) }

    func set(_ address: String) { self.address.withLock { $0 = address } }

    var addresses: [WebhookAddressPolicy.Address]? {
        WebhookAddressPolicy.literal(address.withLock { $0 }).map { [$0] }
    }
}
