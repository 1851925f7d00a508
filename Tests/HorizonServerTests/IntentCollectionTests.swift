import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonServer
import HorizonServerClient
import Hummingbird
import HummingbirdTesting
import Testing

/// Server-driven collection through the server: an intent for a terminal with no connection is
/// refused; one for a connected terminal is pushed to it, by this server process or by another
/// on the same database; the terminal claims it once; a cancel from the POS tells it to stop.
@Suite("Server-driven collection")
struct IntentCollectionTests {
    static let stores = APIKeyTests.stores

    /// Two server processes over one database: their own routers and intent hubs.
    struct Pair {
        let shop: PaymentIntentTests.Shop
        let a: HorizonServer.Parts
        let b: HorizonServer.Parts
        let terminalID: TerminalID
    }

    static func withPair(_ kind: StoreKind, _ body: @Sendable (Pair) async throws -> Void) async throws {
        try await PaymentIntentTests.withShop(kind) { shop, _ in
            let terminal = try #require(
                try await shop.server.ledger.terminal(publicKey: try PublicKeyBytes(bytes: Array(shop.till.key.publicKey.x963Representation))))
            let pair = Pair(shop: shop, a: shop.server.parts(), b: shop.server.parts(), terminalID: terminal.id)
            try await body(pair)
            pair.a.intentHub.closeAll()
            pair.b.intentHub.closeAll()
        }
    }

    static func on<T: Sendable>(_ parts: HorizonServer.Parts, _ body: @Sendable (any TestClientProtocol) async throws -> T)
        async throws -> T
    {
        try await Application(router: try HorizonServer.router(parts), logger: .quiet).test(.router, body)
    }

    static func order(_ terminal: TerminalID, reference: String = "ORDER-7") -> String {
        #"{"amount": 1250, "currency": "EUR", "reference": "\#(reference)", "terminalId": "\#(terminal.rawValue)"}"#
    }

    /// The next event other than a keep-alive, within 5 s.
    static func next(_ iterator: inout AsyncStream<TerminalIntentEvent>.Iterator) async -> TerminalIntentEvent? {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            guard let event = await iterator.next() else { return nil }
            if event != .keepAlive { return event }
        }
        return nil
    }

    @Test(arguments: stores)
    func anIntentForATerminalWithoutAConnectionIsRefusedAndNothingIsCreated(_ kind: StoreKind) async throws {
        try await Self.withPair(kind) { pair in
            let response = try await Self.on(pair.a) { client in
                try await PaymentIntentTests.create(
                    client, key: pair.shop.pos, idempotencyKey: "offline-1", json: Self.order(pair.terminalID))
            }
            try expectError(response, .conflict, "terminal_offline", "is not connected to the server")
            #expect(!(try await pair.shop.server.ledger.paymentIntentExists(idempotencyKey: "offline-1", merchant: pair.shop.server.ledger.terminal(pair.terminalID).merchantID)))
            // Once it connects, the same key creates it.
            let events = try await pair.a.intentHub.open(terminal: pair.terminalID)
            let created = try await Self.on(pair.a) { client in
                try await PaymentIntentTests.create(
                    client, key: pair.shop.pos, idempotencyKey: "offline-1", json: Self.order(pair.terminalID))
            }
            #expect(created.status == .created, "\(created.text)")
            _ = events
        }
    }

    /// Created on process B, pushed by process A (where the terminal is connected), claimed
    /// once, and its cancel pushed as the end of it.
    @Test(arguments: stores)
    func anIntentCreatedOnAnotherProcessIsPushedClaimedOnceAndItsCancelIsPushed(_ kind: StoreKind) async throws {
        try await Self.withPair(kind) { pair in
            let events = try await pair.a.intentHub.open(terminal: pair.terminalID)
            var iterator = events.makeAsyncIterator()
            let created = try await Self.on(pair.b) { client in
                try PaymentIntentTests.intent(
                    try await PaymentIntentTests.create(
                        client, key: pair.shop.pos, idempotencyKey: "scale-1", json: Self.order(pair.terminalID)))
            }
            guard case .collect(let pushed)? = await Self.next(&iterator) else {
                Issue.record("the intent was not pushed")
                return
            }
            #expect(pushed.paymentID.bytes.hexString == created.id)
            #expect(pushed.orderReference == "ORDER-7" && pushed.amount.minorUnits == 1250)

            let till = pair.shop.till.key
            let time = pair.shop.server.clock.now
            let path = "/v1/terminal/payment-intents/\(created.id)/collect"
            let (first, second) = try await Self.on(pair.a) { client in
                (
                    try await client.sendSigned(.post, path, by: till, time: time),
                    try await client.sendSigned(.post, path, by: till, time: time)
                )
            }
            #expect(first.status == .ok, "\(first.text)")
            #expect(try PaymentIntentTests.intent(first).status == .collecting)
            // A duplicate push, a retry, another terminal: collected once.
            try expectError(second, .conflict, "payment_intent_not_collectable", "is collecting")

            let canceled = try await Self.on(pair.b) { client in
                try await client.send(
                    .post, "/v1/merchant/payment-intents/\(created.id)/cancel",
                    headers: [.authorization: "Bearer " + pair.shop.pos])
            }
            #expect(canceled.status == .ok, "\(canceled.text)")
            #expect(await Self.next(&iterator) == .ended(pushed.paymentID))
        }
    }

    /// The race between a cancel and the payment, decided by the ledger: a payment settled first
    /// stands and the cancel is refused; a cancel first makes the payment's settlement refused
    /// unexecuted.
    @Test(arguments: stores)
    func aCancelAfterThePaymentIsRefusedAndAPaymentAfterTheCancelIsNotExecuted(_ kind: StoreKind) async throws {
        try await Self.withPair(kind) { pair in
            let events = try await pair.a.intentHub.open(terminal: pair.terminalID)
            try await Self.on(pair.a) { client in
                let paid = try PaymentIntentTests.intent(
                    try await PaymentIntentTests.create(
                        client, key: pair.shop.pos, idempotencyKey: "race-1", json: Self.order(pair.terminalID)))
                let settled = try await PaymentIntentTests.settle(pair.shop, client, intentID: paid.id)
                #expect(settled.status == .ok, "\(settled.text)")
                let late = try await client.send(
                    .post, "/v1/merchant/payment-intents/\(paid.id)/cancel",
                    headers: [.authorization: "Bearer " + pair.shop.pos])
                try expectError(late, .conflict, "payment_intent_not_cancelable", "succeeded")

                let canceled = try PaymentIntentTests.intent(
                    try await PaymentIntentTests.create(
                        client, key: pair.shop.pos, idempotencyKey: "race-2",
                        json: Self.order(pair.terminalID, reference: "ORDER-8")))
                let cancel = try await client.send(
                    .post, "/v1/merchant/payment-intents/\(canceled.id)/cancel",
                    headers: [.authorization: "Bearer " + pair.shop.pos])
                #expect(cancel.status == .ok)
                let refused = try await PaymentIntentTests.settle(pair.shop, client, intentID: canceled.id)
                #expect(refused.text.contains("canceled"), "\(refused.text)")
                let after = try await client.send(
                    .get, "/v1/merchant/payment-intents/\(canceled.id)",
                    headers: [.authorization: "Bearer " + pair.shop.pos])
                #expect(try PaymentIntentTests.intent(after).status == .canceled)
            }
            _ = events
        }
    }

    /// A terminal whose connection closed and that did not come back (here or on another
    /// process) within the freshness window is reported `terminal.offline` to the merchant's
    /// webhooks, once; one that reconnected is not.
    @Test(arguments: stores)
    func aTerminalThatDoesNotComeBackIsReportedOfflineOnce(_ kind: StoreKind) async throws {
        try await Self.withPair(kind) { pair in
            let ledger = pair.shop.server.ledger
            let merchant = try await ledger.terminal(pair.terminalID).merchantID
            _ = try await ledger.createWebhookEndpoint(
                id: "we_till", url: "https://pos.example/hooks", description: "", eventTypes: [.terminalOffline],
                secret: "whsec_test", for: merchant, at: 1000)
            let start = pair.shop.server.clock.now
            try await ledger.terminalConnectionOpened(pair.terminalID, connection: "c1", at: start)
            #expect(!(try await ledger.terminalConnectionLapsed(pair.terminalID, connection: "c1", at: start + 5)))
            #expect(try await ledger.isTerminalConnected(pair.terminalID, at: start + 5))
            #expect(try await ledger.terminalConnectionLapsed(pair.terminalID, connection: "c1", at: start + 16))
            #expect(!(try await ledger.terminalConnectionLapsed(pair.terminalID, connection: "c1", at: start + 30)))
            #expect(!(try await ledger.isTerminalConnected(pair.terminalID, at: start + 30)))
            // Reconnected (here or elsewhere) before the old connection lapsed: not offline.
            try await ledger.terminalConnectionOpened(pair.terminalID, connection: "c2", at: start + 40)
            try await ledger.terminalConnectionOpened(pair.terminalID, connection: "c3", at: start + 41)
            #expect(!(try await ledger.terminalConnectionLapsed(pair.terminalID, connection: "c2", at: start + 60)))
            let offline = try await ledger.store.transaction { db in
                try await db.query(
                    "SELECT body FROM webhook_events WHERE event_type = 'terminal.offline'", []
                ).map { try $0.text("body") }
            }
            #expect(offline.count == 1)
            #expect(offline.first?.contains(pair.terminalID.rawValue) == true, "\(offline)")
        }
    }
}
