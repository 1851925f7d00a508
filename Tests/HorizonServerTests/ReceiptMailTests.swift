import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import Hummingbird
import HummingbirdTesting
import Testing

/// Receipts by e-mail: asked for by the wallet that paid (to its registered address) or by the
/// merchant that was paid (to the address its customer gave), queued in the outbox with the
/// request, and delivered through a real SMTP server.
@Suite("Receipts by e-mail")
struct ReceiptMailTests {
    static let walletEmail = "wendy@example.com"

    /// A bakery with a till, a shop with its own till and API key, a wallet registered with an
    /// e-mail address that paid 12.50 EUR and a 1.00 tip for the bakery's order "order-42", and
    /// a second wallet.
    struct Shops {
        let server: TestServer
        let bakery: Merchant
        let till: TerminalKey
        let shopTill: TerminalKey
        let shopAPIKey: String
        let wallet: FundedWallet
        let otherWallet: FundedWallet
        let payment: PaymentID
        let settledAt: Int64
        /// The server's parts, whose outbox deliverer the test runs.
        let parts: HorizonServer.Parts

        static func make(transports: MessageTransports = MessageTransports()) async throws -> Shops {
            let server = try await TestServer()
            let bakery = try await server.addMerchant()
            let shop = try await server.addMerchant(
                name: "Other Shop", email: "owner@shop.example", password: "another long password")
            let till = TerminalKey()
            _ = try await server.activate(till)
            let shopTill = TerminalKey()
            let wallet = try await server.fundedWallet(100_00, name: "Wendy")
            let otherWallet = try await server.fundedWallet(100_00, name: "Otto")
            try await server.ledger.store.transaction { db in
                try await db.query(
                    "UPDATE wallets SET email = ? WHERE id = ?", [.text(walletEmail), .text(wallet.id.rawValue)])
            }
            let payment = try PaymentID(bytes: Array(repeating: 0x42, count: 16))
            _ = try await server.ledger.createPaymentIntent(
                NewPaymentIntent(
                    paymentID: payment, idempotencyKey: "order-42-attempt-1", requestDigest: [1],
                    orderReference: "order-42", amount: try Money(minorUnits: 12_50, currency: .eur), metadata: "{}",
                    terminalID: nil, expiresAt: server.clock.now + 86_400), merchant: bakery.id, at: server.clock.now
            ).get()
            let apiKey = "sk_" + String(repeating: "s", count: 43)
            _ = try await server.ledger.createAPIKey(
                NewAPIKey(
                    id: "key_shop", secretHash: Array(SHA256.hash(data: Data(apiKey.utf8))), secretPrefix: "sk_ssss",
                    secretLast4: "ssss"), name: "Shop POS", scopes: Set(APIKeyScope.allCases), for: shop.id,
                at: server.clock.now)
            let clock = server.clock
            let parts = HorizonServer.Parts(
                configuration: server.configuration, ledger: server.ledger, issuer: server.issuer,
                now: { clock.now }, rateLimitClock: { clock.instant }, transports: transports)
            let application = Application(router: try HorizonServer.router(parts), logger: .quiet)
            try await application.test(.router) { client in
                let activated = try await client.send(
                    .post, "/v1/terminals/activate",
                    json: shopTill.activation(
                        email: "owner@shop.example", password: "another long password", label: "Shop till"))
                #expect(activated.status == .created, "\(activated.text)")
                let confirm = try WalletSigned.confirm(
                    by: wallet.key, for: till.key.publicKey, amount: 12_50, tip: 1_00, paymentID: payment)
                let paid = try await client.sendSigned(
                    .post, "/v1/payments", json: try SubmissionFields(payment: confirm).json(), by: till.key,
                    time: server.clock.now)
                #expect(paid.status == .ok, "\(paid.text)")
            }
            return Shops(
                server: server, bakery: bakery, till: till, shopTill: shopTill, shopAPIKey: apiKey, wallet: wallet,
                otherWallet: otherWallet, payment: payment, settledAt: server.clock.now, parts: parts)
        }

        var walletPath: String { "/v1/wallet/transactions/\(payment.bytes.hexString)/receipt-email" }
        var merchantPath: String { "/v1/merchant/transactions/\(payment.bytes.hexString)/receipt-email" }

        func receipts() async throws -> [OutboxMessage] {
            try await server.ledger.outbox().filter { $0.subject.hasPrefix("Your receipt") }
        }
    }

    @Test(.enabled(if: MailCatcher.available, "\(MailCatcher.missing)"))
    func theReceiptReachesTheWalletsRegisteredAddressOnceWithEveryDetail() async throws {
        let catcher = try MailCatcher()
        let mailer = try MessageDeliveryTests.mailer(try catcher.msmtpCommand())
        let shops = try await Shops.make(transports: MessageTransports(email: mailer))
        let parts = shops.parts
        let id = shops.payment.bytes.hexString
        let application = Application(router: try HorizonServer.router(parts), logger: .quiet)
        try await application.test(.router) { client in
            let asked = try await client.sendSigned(
                .post, shops.walletPath, by: shops.wallet.key, time: shops.server.clock.now)
            #expect(asked.status == .accepted, "\(asked.text)")
            let queued = try JSONDecoder().decode(Components.Schemas.ReceiptEmailQueued.self, from: asked.data)
            #expect(queued.paymentId == id && queued.sentTo == "email w•••@example.com" && !queued.alreadyQueued)
            // Committed with the request, due for delivery, before anything was handed over.
            let waiting = try await shops.receipts()
            #expect(waiting.map(\.id) == [queued.messageId])
            #expect(waiting.first?.delivery.dueAt == shops.server.clock.now)
            #expect(try catcher.received().isEmpty)

            // A retried request while it waits: the same mail, no second one.
            let again = try await client.sendSigned(
                .post, shops.walletPath, by: shops.wallet.key, time: shops.server.clock.now)
            #expect(again.status == .accepted, "\(again.text)")
            let repeated = try JSONDecoder().decode(Components.Schemas.ReceiptEmailQueued.self, from: again.data)
            #expect(repeated.alreadyQueued && repeated.messageId == queued.messageId)
            #expect(try await shops.receipts().count == 1)

            #expect(await parts.deliverer.deliverDue(logger: .quiet).delivered == [queued.messageId])
            // Delivered once: a second pass sends nothing.
            #expect(await parts.deliverer.deliverDue(logger: .quiet).delivered.isEmpty)
            let mails = try await catcher.waitFor(1)
            #expect(mails.count == 1)
            let mail = try #require(mails.first)
            #expect(mail.rcptTos == [Self.walletEmail])
            #expect(mail.headers["Subject"] == "Your receipt from Corner Bakery (payment \(id))")
            let body = mail.body.replacingOccurrences(of: "\r\n", with: "\n")
            for line in [
                "Receipt from Corner Bakery", "Amount:    12.50 EUR", "Tip:       1.00 EUR", "Total:     13.50 EUR",
                "Currency:  EUR", "Time:      \(Self.utc(shops.settledAt)) UTC", "Payment:   \(id)",
                "Order:     order-42",
            ] {
                #expect(body.contains(line + "\n"), "\(line) in \(body)")
            }

            // Delivered: asking again sends it again (the customer lost it).
            let later = try await client.sendSigned(
                .post, shops.walletPath, by: shops.wallet.key, time: shops.server.clock.now)
            let resent = try JSONDecoder().decode(Components.Schemas.ReceiptEmailQueued.self, from: later.data)
            #expect(!resent.alreadyQueued && resent.messageId != queued.messageId)

            // The merchant sends one to the address its customer gave at the till.
            let fromTill = try await client.sendSigned(
                .post, shops.merchantPath, json: #"{"email": "customer@example.org"}"#, by: shops.till.key,
                time: shops.server.clock.now)
            #expect(fromTill.status == .accepted, "\(fromTill.text)")
            let tillReceipt = try JSONDecoder().decode(Components.Schemas.ReceiptEmailQueued.self, from: fromTill.data)
            #expect(tillReceipt.sentTo == "email c•••@example.org")
            #expect(await parts.deliverer.deliverDue(logger: .quiet).delivered.count == 2)
            let all = try await catcher.waitFor(3)
            #expect(all.count == 3)
            #expect(Set(all.dropFirst().flatMap(\.rcptTos)) == [Self.walletEmail, "customer@example.org"])
            #expect(all.allSatisfy { $0.body.contains("Order:     order-42") })
        }
    }

    @Test func onlyTheWalletThatPaidOrTheMerchantPaidMayAskAndNothingIsQueuedForAnyoneElse() async throws {
        let shops = try await Shops.make()
        let time = shops.server.clock.now
        let application = Application(router: try HorizonServer.router(shops.parts), logger: .quiet)
        try await application.test(.router) { client in
            // Another wallet: answered as if there were no such payment.
            try expectError(
                try await client.sendSigned(.post, shops.walletPath, by: shops.otherWallet.key, time: time),
                .notFound, "transaction_not_found", "this wallet has no transaction")
            // A till's key is no wallet, and a wallet's key no till.
            try expectError(
                try await client.sendSigned(.post, shops.walletPath, by: shops.shopTill.key, time: time),
                .forbidden, "wallet_unknown", "not a registered wallet")
            try expectError(
                try await client.sendSigned(
                    .post, shops.merchantPath, json: #"{"email": "x@example.org"}"#, by: shops.wallet.key, time: time),
                .forbidden, "terminal_unknown", "not an activated terminal")
            // Another merchant's till and API key: as if there were no such payment.
            try expectError(
                try await client.sendSigned(
                    .post, shops.merchantPath, json: #"{"email": "x@example.org"}"#, by: shops.shopTill.key,
                    time: time),
                .notFound, "payment_not_found", "was executed for this merchant")
            try expectError(
                try await client.send(
                    .post, shops.merchantPath, json: #"{"email": "x@example.org"}"#,
                    headers: [.authorization: "Bearer \(shops.shopAPIKey)"]),
                .notFound, "payment_not_found", "was executed for this merchant")
            // No credential at all.
            try expectError(
                try await client.send(.post, shops.walletPath), .unauthorized, "unauthenticated",
                "signed with the wallet's key")
            try expectError(
                try await client.send(.post, shops.merchantPath, json: #"{"email": "x@example.org"}"#),
                .unauthorized, "unauthenticated", "signed with the terminal's key")
            // An address that could add a header or a recipient.
            let injected = try await client.sendSigned(
                .post, shops.merchantPath, json: #"{"email": "x@example.org\nBcc: y@example.org"}"#,
                by: shops.till.key, time: time)
            #expect(injected.status == .badRequest, "\(injected.text)")
            #expect(try await shops.receipts().isEmpty)

            // The payer itself, in the sandbox: the outbox keeps the receipt, not due anywhere.
            let own = try await client.sendSigned(.post, shops.walletPath, by: shops.wallet.key, time: time)
            #expect(own.status == .accepted, "\(own.text)")
            let kept = try #require(try await shops.receipts().first)
            #expect(kept.recipient == Self.walletEmail && kept.delivery.dueAt == nil)
            #expect(kept.body.contains("Order:     order-42"))
        }
    }

    @Test func declinedPaymentsAndWalletsWithoutAnAddressGetNoReceipt() async throws {
        let shops = try await Shops.make()
        let time = shops.server.clock.now
        let application = Application(router: try HorizonServer.router(shops.parts), logger: .quiet)
        try await application.test(.router) { client in
            // The other wallet pays more than it has: declined.
            let declined = try WalletSigned.confirm(
                by: shops.otherWallet.key, for: shops.till.key.publicKey, amount: 500_00)
            let paid = try await client.sendSigned(
                .post, "/v1/payments", json: try SubmissionFields(payment: declined).json(), by: shops.till.key,
                time: time)
            #expect(paid.status == .ok, "\(paid.text)")
            let declinedPath = "/v1/merchant/transactions/\(declined.paymentID.bytes.hexString)/receipt-email"
            try expectError(
                try await client.sendSigned(
                    .post, declinedPath, json: #"{"email": "x@example.org"}"#, by: shops.till.key, time: time),
                .conflict, "receipt_unavailable", "only approved payments")
            // The other wallet registered no address; its own approved payment has no receipt to mail.
            let small = try WalletSigned.confirm(by: shops.otherWallet.key, for: shops.till.key.publicKey, amount: 1_00)
            _ = try await client.sendSigned(
                .post, "/v1/payments", json: try SubmissionFields(payment: small).json(), by: shops.till.key, time: time
            )
            try expectError(
                try await client.sendSigned(
                    .post, "/v1/wallet/transactions/\(small.paymentID.bytes.hexString)/receipt-email",
                    by: shops.otherWallet.key, time: time),
                .conflict, "receipt_email_missing", "registered no e-mail address")
            #expect(try await shops.receipts().isEmpty)
        }
    }

    static func utc(_ time: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }
}
