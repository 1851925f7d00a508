import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import Logging
import Synchronization
import Testing

/// Webhooks sent by the server's deliverer to a receiver in the test process, on a virtual
/// clock: signed, retried with back-off after a failure and a time-out, their answers recorded;
/// and two server processes on one database never send one delivery at the same moment.
@Suite("Webhook delivery")
struct WebhookDeliveryTests {
    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]
    static let logger: Logger = {
        var logger = Logger(label: "webhooks.test")
        logger.logLevel = .critical
        return logger
    }()

    @Test func theBackOffDoublesFrom30SecondsToAtMost6Hours() {
        let delays = (1...14).map { WebhookDeliverer.retryTime(attempts: Int64($0), after: 0) }
        #expect(delays.prefix(4) == [30, 60, 120, 240])
        #expect(delays.last == 21_600 && delays == delays.sorted())
    }

    @Test func theAttemptsTimeLimitIsOneTo30SecondsAndSetsTheClaim() async throws {
        for (seconds, valid) in [(0, false), (1, true), (30, true), (31, false)] as [(Int64, Bool)] {
            var configuration = ServerConfiguration()
            configuration.webhookTimeout = seconds
            #expect(((try? configuration.validate()) != nil) == valid, "webhookTimeout \(seconds)")
        }
        #expect(ServerConfiguration().effectiveWebhookTimeout == .seconds(10))
        try await TestStores.withLedger(.sqlite) { ledger in
            #expect(WebhookDeliverer(ledger: ledger, timeout: .seconds(3)).lease == 8)
        }
    }

    @Test(arguments: stores)
    func aReceiverThatFailsThenTimesOutThenSucceedsGetsTheEventSignedOnce(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let receiver = WebhookReceiver()
            receiver.script([
                .init(status: .internalServerError, body: "nope, not now"),
                .init(status: .ok, body: "late", delay: .seconds(4)),
                .init(status: .ok, body: String(repeating: "x", count: 5_000)),
            ])
            try await receiver.run { url in
                let shop = try await ledger.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
                let secret = WebhookSignature.newSecret()
                _ = try await ledger.createWebhookEndpoint(
                    id: "we_1", url: url, description: "POS", eventTypes: [.paymentSucceeded], secret: secret,
                    for: shop.id, at: 1_000)
                let wallet = try await ledger.createWallet(name: "Alex", publicKey: walletKey(1))
                try await ledger.deposit(euros(50_00), to: wallet.id)
                let start = Ledger.now()
                _ = try await ledger.settle(request(1, amount: euros(4_20)), merchant: shop.id, at: start)
                let deliverer = WebhookDeliverer(
                    ledger: ledger, timeout: .seconds(1), addressPolicy: .localReceivers, now: { start })

                // 500: recorded, due again 30 s later and not before.
                var report = await deliverer.deliverDue(at: start, logger: Self.logger)
                #expect(report.attempts.values.map(\.status) == [500])
                #expect(await deliverer.deliverDue(at: start + 29, logger: Self.logger).attempts.isEmpty)
                // No answer within the time limit: recorded, due again 60 s later.
                report = await deliverer.deliverDue(at: start + 30, logger: Self.logger)
                let timedOut = try #require(report.attempts.values.first)
                #expect(timedOut.status == nil && timedOut.error?.contains("time limit") == true)
                #expect(timedOut.latencyMilliseconds >= 900 && timedOut.latencyMilliseconds < 4_000)
                #expect(await deliverer.deliverDue(at: start + 89, logger: Self.logger).attempts.isEmpty)
                // 200: delivered, and never sent again.
                report = await deliverer.deliverDue(at: start + 90, logger: Self.logger)
                #expect(report.delivered.count == 1)
                #expect(await deliverer.deliverDue(at: start + 100_000, logger: Self.logger).attempts.isEmpty)

                let delivery = try #require(try await ledger.webhookDeliveries(of: shop.id).first)
                let full = try #require(try await ledger.webhookDelivery(delivery.id, of: shop.id))
                #expect(full.state == .delivered && full.attempts == 3 && full.deliveredAt == start + 90)
                #expect(full.history.map(\.status) == [200, nil, 500])
                #expect(full.history.last?.responseBody == "nope, not now")
                #expect(full.history.first?.responseBody.count == Ledger.webhookResponseBodyLimit)

                // Every request: the same event and body, signed at its own attempt's time, and
                // verified by the receiver's own implementation of the scheme.
                let requests = try await receiver.waitFor(3)
                #expect(requests.count == 3)
                #expect(Set(requests.map(\.body)).count == 1 && Set(requests.map(\.eventID)) == [delivery.eventID])
                #expect(
                    requests.map { ReceiverSignatureCheck.timestamp($0.signature) } == [start, start + 30, start + 90])
                for (request, time) in zip(requests, [start, start + 30, start + 90]) {
                    #expect(request.contentType?.hasPrefix("application/json") == true)
                    #expect(
                        ReceiverSignatureCheck.verify(
                            header: request.signature, body: request.body, secret: secret, now: time))
                    #expect(
                        !ReceiverSignatureCheck.verify(
                            header: request.signature, body: request.body, secret: "whsec_other", now: time))
                    #expect(
                        !ReceiverSignatureCheck.verify(
                            header: request.signature, body: request.body + " ", secret: secret, now: time))
                    // Replayed past the tolerance: refused.
                    #expect(
                        !ReceiverSignatureCheck.verify(
                            header: request.signature, body: request.body, secret: secret, now: time + 301))
                }
                let event = try JSONDecoder().decode(WebhookOutboxEvent.self, from: Data(requests[0].body.utf8))
                #expect(event.id == delivery.eventID && event.type == "payment.succeeded")
            }
        }
    }

    @Test func aReceiverThatNeverAnswers2xxIsTriedForThreeDaysThenGivenUp() async throws {
        try await TestStores.withLedger(.sqlite) { ledger in
            let receiver = WebhookReceiver()
            receiver.script([.init(status: .serviceUnavailable, body: "down")])
            try await receiver.run { url in
                let shop = try await ledger.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
                _ = try await ledger.createWebhookEndpoint(
                    id: "we_1", url: url, description: "", eventTypes: [.terminalOffline], secret: "whsec_x",
                    for: shop.id, at: 1_000)
                let start: Int64 = 1_000_000
                _ = try await ledger.recordWebhookEvent(.terminalOffline, merchant: shop.id, object: [:], at: start)
                let deliverer = WebhookDeliverer(
                    ledger: ledger, timeout: .seconds(2), addressPolicy: .localReceivers, now: { start })
                var time = start
                var attemptTimes: [Int64] = []
                while let due = try await ledger.webhookDeliveries(of: shop.id).first?.dueAt, attemptTimes.count < 100 {
                    time = due
                    let report = await deliverer.deliverDue(at: time, logger: Self.logger)
                    if !report.attempts.isEmpty { attemptTimes.append(time) }
                }
                let gaps = zip(attemptTimes.dropFirst(), attemptTimes).map { $0 - $1 }
                #expect(gaps.prefix(3) == [30, 60, 120] && gaps.max() == 21_600)
                #expect(attemptTimes.last.map { $0 < start + 3 * 86_400 && $0 >= start + 3 * 86_400 - 21_600 } == true)
                let delivery = try #require(try await ledger.webhookDeliveries(of: shop.id).first)
                #expect(delivery.state == .failed && delivery.attempts == Int64(attemptTimes.count))
                #expect(receiver.requests.count == attemptTimes.count)
            }
        }
    }

    /// Two server processes (two ledgers on one database, each with its deliverer) run their
    /// passes at the same moments while the receiver answers slowly: every event arrives once.
    @Test(arguments: stores)
    func twoServerProcessesNeverSendOneDeliveryTwice(_ kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { store, another in
            let first = try await Ledger.open(store)
            let second = try await Ledger.open(try another())
            let receiver = WebhookReceiver()
            receiver.script([.init(status: .ok, body: "ok", delay: .milliseconds(100))])
            try await receiver.run { url in
                let shop = try await first.createMerchant(name: "Bakery", currency: .eur, adminEmail: "o@b.example")
                _ = try await first.createWebhookEndpoint(
                    id: "we_1", url: url, description: "", eventTypes: [.terminalOffline], secret: "whsec_x",
                    for: shop.id, at: 1_000)
                let start = Ledger.now()
                var events: Set<String> = []
                for number in 0..<30 {
                    let id = try await first.recordWebhookEvent(
                        .terminalOffline, merchant: shop.id, object: ["n": .integer(Int64(number))], at: start)
                    events.insert(try #require(id))
                }
                let deliverers = [first, second, first, second].map {
                    WebhookDeliverer(ledger: $0, timeout: .seconds(5), addressPolicy: .localReceivers, now: { start })
                }
                for round in 0..<4 {
                    await withTaskGroup(of: Void.self) { group in
                        for deliverer in deliverers {
                            group.addTask { await deliverer.deliverDue(at: start + Int64(round), logger: Self.logger) }
                        }
                    }
                }
                let received = receiver.requests.compactMap(\.eventID)
                #expect(received.count == 30, "each of 30 events once, got \(received.count) requests")
                #expect(Set(received) == events)
                let deliveries = try await first.webhookDeliveries(of: shop.id)
                #expect(deliveries.allSatisfy { $0.state == .delivered && $0.attempts == 1 })
            }
            await second.close()
        }
    }
}

/// The envelope every webhook body has.
struct WebhookOutboxEvent: Decodable {
    let id: String
    let type: String
    let created: Int64
    let merchant: String
}
