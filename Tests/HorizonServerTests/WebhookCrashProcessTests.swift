import Foundation
import HorizonCore
import HorizonLedger
import HorizonServer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real `horizon-server` SIGKILLed while its webhook request waits for the receiver's answer;
/// restarted, it sends the delivery again once the claim of the killed process ran out: the
/// event arrives at least once, and is recorded as delivered.
@Suite("A server killed mid-delivery of a webhook", .serialized)
struct WebhookCrashProcessTests {
    @Test func theRestartedServerDeliversTheEventTheKilledOneWasSending() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let initialised = try ServerProcess.run(["init", "--data-dir", data])
        #expect(initialised.status == 0, "\(initialised.errors)")
        // One second a try, so the killed process's claim (the try and 5 s) runs out soon.
        let settingsPath = data + "/server.json"
        var settings = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: settingsPath)))
                as? [String: Any])
        settings["webhookTimeout"] = 1
        // The receiver is on this machine.
        settings["webhooksAllowPrivateAddresses"] = true
        try JSONSerialization.data(withJSONObject: settings).write(to: URL(fileURLWithPath: settingsPath))

        let receiver = WebhookReceiver()
        // The first request hangs past the server's life; the next are answered.
        receiver.script([.init(status: .ok, body: "too late", delay: .seconds(15)), .init(status: .ok, body: "thanks")])
        try await receiver.run { url in
            let ledger = try await Ledger.sqlite(path: data + "/horizon.sqlite")
            let shop = try await ledger.createMerchant(
                name: "Corner Café", currency: .eur, adminEmail: "o@cafe.example")
            let secret = WebhookSignature.newSecret()
            _ = try await ledger.createWebhookEndpoint(
                id: "we_crash", url: url, description: "", eventTypes: [.terminalOffline], secret: secret,
                for: shop.id, at: Ledger.now())
            let event = try #require(
                try await ledger.recordWebhookEvent(
                    .terminalOffline, merchant: shop.id, object: ["terminalId": .string("t_1")], at: Ledger.now()))

            let (first, _) = try CardCrashProcessTests.serve(data)
            defer { first.kill() }
            let sent = try await receiver.waitFor(1)
            #expect(sent.first?.eventID == event, "the first server sent the event")
            first.kill()
            #expect(first.wait(timeout: 10) == SIGKILL)
            var delivery = try #require(try await ledger.webhookDeliveries(of: shop.id).first)
            #expect(delivery.deliveredAt == nil && delivery.attempts == 0, "killed before any answer was recorded")

            let (second, _) = try CardCrashProcessTests.serve(data)
            defer { second.kill() }
            let requests = try await receiver.waitFor(2, timeout: .seconds(30))
            #expect(requests.count >= 2 && requests.allSatisfy { $0.eventID == event })
            for request in requests {
                #expect(
                    ReceiverSignatureCheck.verify(
                        header: request.signature, body: request.body, secret: secret, now: Ledger.now()))
            }
            for _ in 0..<100 {
                delivery = try #require(try await ledger.webhookDeliveries(of: shop.id).first)
                if delivery.state == .delivered { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(delivery.state == .delivered && delivery.history.first?.responseBody == "thanks")
            second.signal(SIGTERM)
            _ = second.wait(timeout: 10)
            await ledger.close()
        }
    }
}
