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
import Synchronization
import Testing

/// A payment the wallet signed for one of its cards is charged through the
/// card processor, with the payment id as the idempotency key, and settled once; a processor
/// timeout is resolved by asking what happened before any retry; the balance stays the default.
@Suite("Paying with a card")
struct CardPaymentTests {
    struct Shop {
        let server: TestServer
        let merchant: Merchant
        let till: TerminalKey
        let wallet: WalletDevice
        let walletID: WalletID

        static func open() async throws -> Shop {
            let server = try await TestServer()
            let merchant = try await server.addMerchant()
            let till = TerminalKey()
            _ = try await server.activate(till)
            let wallet = WalletDevice()
            let walletID = try await server.ledger.createWallet(name: "Alice", publicKey: wallet.publicKeyBytes).id
            try await server.ledger.deposit(try Money(minorUnits: 50_00, currency: .eur), to: walletID)
            return Shop(server: server, merchant: merchant, till: till, wallet: wallet, walletID: walletID)
        }

        /// Adds a sandbox test card through the API; its id.
        func addCard(_ number: String, client: any TestClientProtocol) async throws -> String {
            let response = try await client.sendSigned(
                .post, "/v1/wallet/cards", json: CardTests.addCard(number: number), by: wallet.key,
                time: server.clock.now)
            #expect(response.status == .created, "\(response.text)")
            return try JSONDecoder().decode(Components.Schemas.AddPaymentCardResult.self, from: response.data).card.id
        }

        /// A Confirm the wallet signs for `method`, with `paymentID` (a new one unless given).
        func confirm(_ method: PaymentMethod, amount: Int64 = 12_50, tip: Int64 = 1_50, paymentID: PaymentID? = nil)
            throws -> Confirm
        {
            var generator = SystemRandomNumberGenerator()
            let unsigned = try Confirm(
                sessionID: try #require(SessionID(rawValue: UInt64.random(in: 1...UInt64.max))),
                terminalKeyDigest: DigestBytes(bytes: Array(SHA256.hash(data: till.key.publicKey.x963Representation))),
                walletKey: wallet.publicKeyBytes,
                offerDigest: DigestBytes(bytes: Array(SHA256.hash(data: Data("offer".utf8)))),
                amount: Money(minorUnits: amount, currency: .eur), tip: Money(minorUnits: tip, currency: .eur),
                paymentID: paymentID ?? PaymentID.random(using: &generator),
                walletNonce: Nonce(bytes: (0..<16).map { _ in UInt8.random(in: 0...255) }), expiresAt: 4_000_000_000,
                paymentMethod: method)
            return unsigned.withSignature(
                try SignatureBytes(bytes: Array(try wallet.key.signature(for: unsigned.signedBytes).rawRepresentation)))
        }

        /// The till submits `confirm`; the response.
        func submit(_ confirm: Confirm, client: any TestClientProtocol) async throws -> TestResponse {
            try await client.sendSigned(
                .post, "/v1/payments", json: try SubmissionFields(payment: confirm).json(), by: till.key,
                time: server.clock.now)
        }

        func result(_ response: TestResponse) throws -> Components.Schemas.PaymentResult {
            #expect(response.status == .ok, "\(response.text)")
            var result = try JSONDecoder().decode(Components.Schemas.PaymentResult.self, from: response.data)
            // The server signs each answer anew (ECDSA is randomised): what repeats is the content.
            #expect(result.signature != nil)
            result.signature = nil
            return result
        }

        /// How many charges the sandbox processor holds for a payment (its idempotency key).
        func charges(of confirm: Confirm) async throws -> Int64 {
            try await server.ledger.store.transaction { db in
                try await db.query(
                    "SELECT COUNT(*) AS n FROM sandbox_card_charges WHERE idempotency_key = ? AND outcome = 'charged'",
                    [.text(confirm.paymentID.bytes.hexString)]
                ).first?.integer("n") ?? -1
            }
        }

        var walletBalance: Money { get async throws { try await server.ledger.balance(of: walletID, in: .eur) } }
        var merchantBalance: Money { get async throws { try await server.ledger.balance(of: merchant.id) } }
    }

    @Test func anApprovedCardPaysTheMerchantOnceAndTheBalanceStaysTheDefault() async throws {
        let shop = try await Shop.open()
        try await shop.server.withClient { client in
            let card = try await shop.addCard("4242424242424242", client: client)
            let paid = try shop.confirm(.card(id: card))
            let result = try shop.result(try await shop.submit(paid, client: client))
            #expect(result.outcome == .approved && result.reference != nil, "\(result)")
            // The card paid: the wallet's balance is untouched, the merchant has the money.
            #expect(try await shop.walletBalance == (euros(50_00)))
            #expect(try await shop.merchantBalance == (euros(14_00)))
            #expect(try await shop.server.ledger.cardOfPayment(paid.paymentID) == PaymentCardID(rawValue: card))
            // A retry: the stored result, no second charge.
            let again = try shop.result(try await shop.submit(paid, client: client))
            #expect(again == result)
            #expect(try await shop.charges(of: paid) == 1)
            #expect(try await shop.server.ledger.executionCount(of: paid.paymentID) == 1)

            // The same payment id signed for the balance instead: other terms.
            let switched = try shop.confirm(.accountBalance, paymentID: paid.paymentID)
            try expectError(
                try await shop.submit(switched, client: client), .conflict, "payment_conflict",
                "was executed before with other terms")

            // The account balance still pays, and is what a Confirm names by default.
            let fromBalance = try shop.confirm(.accountBalance)
            #expect(try shop.result(try await shop.submit(fromBalance, client: client)).outcome == .approved)
            #expect(try await shop.walletBalance == (euros(36_00)))
            #expect(try await shop.server.ledger.cardOfPayment(fromBalance.paymentID) == nil)
        }
        #expect(try await LedgerAudit.violations(in: shop.server.ledger.store).isEmpty)
    }

    @Test func aDeclinedCardDeclinesThePaymentWithTheProcessorsReason() async throws {
        let shop = try await Shop.open()
        try await shop.server.withClient { client in
            let declining = try await shop.addCard("4000000000000002", client: client)
            let poor = try await shop.addCard("4000000000009995", client: client)
            let declined = try shop.result(
                try await shop.submit(try shop.confirm(.card(id: declining)), client: client))
            #expect(declined.outcome == .declined && declined.declineCode == Int32(ErrorCode.declined.rawValue))
            #expect(declined.declineReason == "the card was declined by its issuer (card_declined)")
            let short = try shop.result(try await shop.submit(try shop.confirm(.card(id: poor)), client: client))
            #expect(short.outcome == .declined && short.declineCode == Int32(ErrorCode.insufficientFunds.rawValue))
            #expect(short.declineReason == "the card has insufficient funds for this amount (insufficient_funds)")
        }
        #expect(try await shop.merchantBalance == (euros(0)))
        #expect(try await shop.walletBalance == (euros(50_00)))
    }

    /// The processor charged, and its answer was lost: `lookup` finds the charge; approved, charged once.
    @Test func aTimeoutAfterTheChargeIsApprovedAndChargedOnce() async throws {
        let shop = try await Shop.open()
        try await shop.server.withClient { client in
            let card = try await shop.addCard("4000000000000119", client: client)
            let confirm = try shop.confirm(.card(id: card))
            let result = try shop.result(try await shop.submit(confirm, client: client))
            #expect(result.outcome == .approved, "\(result)")
            #expect(try await shop.charges(of: confirm) == 1)
            #expect(try shop.result(try await shop.submit(confirm, client: client)) == result)
            #expect(try await shop.charges(of: confirm) == 1)
        }
        #expect(try await shop.merchantBalance == (euros(14_00)))
    }

    /// The processor lost the request before charging: `lookup` finds nothing; the retry charges once.
    @Test func aTimeoutBeforeTheChargeIsChargedOnceAfterTheRetry() async throws {
        let shop = try await Shop.open()
        try await shop.server.withClient { client in
            let card = try await shop.addCard("4000000000000127", client: client)
            let confirm = try shop.confirm(.card(id: card))
            let result = try shop.result(try await shop.submit(confirm, client: client))
            #expect(result.outcome == .approved, "\(result)")
            #expect(try await shop.charges(of: confirm) == 1)
            let lost = try await shop.server.ledger.store.transaction { db in
                try await db.query(
                    "SELECT COUNT(*) AS n FROM sandbox_card_lost_attempts WHERE idempotency_key = ?",
                    [.text(confirm.paymentID.bytes.hexString)]
                ).first?.integer("n")
            }
            #expect(lost == 1, "the first attempt was not lost: the retry path did not run")
        }
        #expect(try await shop.merchantBalance == (euros(14_00)))
    }

    @Test func aCardThatCannotPayIsDeclinedAndNothingIsCharged() async throws {
        let shop = try await Shop.open()
        try await shop.server.withClient { client in
            // Removed, switched off, waiting for 3-D Secure: declined; another wallet's, unknown: 404.
            let removed = try await shop.addCard("4242424242424242", client: client)
            _ = try await client.sendSigned(
                .delete, "/v1/wallet/cards/\(removed)", by: shop.wallet.key, time: shop.server.clock.now)
            let off = try await shop.addCard("5555555555554444", client: client)
            _ = try await client.sendSigned(
                .patch, "/v1/wallet/cards/\(off)", json: #"{"active": false}"#, by: shop.wallet.key,
                time: shop.server.clock.now)
            let pending = try await client.sendSigned(
                .post, "/v1/wallet/cards", json: CardTests.addCard(number: "4000000000003220"), by: shop.wallet.key,
                time: shop.server.clock.now)
            let challenged = try JSONDecoder().decode(
                Components.Schemas.AddPaymentCardResult.self, from: pending.data
            ).card.id
            let stranger = WalletDevice()
            _ = try await shop.server.ledger.createWallet(name: "Bob", publicKey: stranger.publicKeyBytes)
            let strangers = try await client.sendSigned(
                .post, "/v1/wallet/cards", json: CardTests.addCard(), by: stranger.key, time: shop.server.clock.now)
            let strangersCard = try JSONDecoder().decode(
                Components.Schemas.AddPaymentCardResult.self, from: strangers.data
            ).card.id
            for card in [removed, off, challenged] {
                let confirm = try shop.confirm(.card(id: card))
                let result = try shop.result(try await shop.submit(confirm, client: client))
                #expect(result.outcome == .declined && result.declineCode == Int32(ErrorCode.declined.rawValue))
                #expect(result.declineReason?.contains("card \(card) cannot pay") == true, "\(result)")
                #expect(try await shop.charges(of: confirm) == 0)
            }
            // A card the wallet never had (another wallet's, or an unknown id) is a clear 404,
            // the same for both, and nothing is executed or charged.
            for card in [strangersCard, "c_00000000000000000000000000000000"] {
                let confirm = try shop.confirm(.card(id: card))
                try expectError(
                    try await shop.submit(confirm, client: client), .notFound, "card_not_found", "no such card")
                #expect(try await shop.server.ledger.executionCount(of: confirm.paymentID) == 0)
                #expect(try await shop.charges(of: confirm) == 0)
            }
        }
        #expect(try await shop.merchantBalance == (euros(0)))
    }

    /// The sandbox, but every charge is lost on the way in (nothing charged) while `down` is set.
    final class UnansweringProcessor: CardProcessor {
        let sandbox: SandboxCardProcessor
        let down = Mutex(true)
        let attempts = Mutex(0)
        init(_ sandbox: SandboxCardProcessor) { self.sandbox = sandbox }

        func tokenize(_ card: CardDetails, at time: UnixTime) async throws(CardProcessorError) -> CardTokenization {
            try await sandbox.tokenize(card, at: time)
        }
        func charge(token: String, amount: Money, idempotencyKey: String, at time: UnixTime)
            async throws(CardProcessorError) -> CardCharge
        {
            attempts.withLock { $0 += 1 }
            if down.withLock({ $0 }) { throw .timeout }
            return try await sandbox.charge(token: token, amount: amount, idempotencyKey: idempotencyKey, at: time)
        }
        func refund(chargeKey: String, amount: Money, idempotencyKey: String, at time: UnixTime)
            async throws(CardProcessorError) -> CardRefund
        {
            try await sandbox.refund(chargeKey: chargeKey, amount: amount, idempotencyKey: idempotencyKey, at: time)
        }
        func lookup(idempotencyKey: String) async throws(CardProcessorError) -> CardCharge? {
            try await sandbox.lookup(idempotencyKey: idempotencyKey)
        }
    }

    /// A processor that never answers: asked what happened, then retried once; still nothing
    /// known, so nothing is recorded (the terminal keeps the payment pending); once it answers,
    /// the same payment id is charged once and approved.
    @Test func aProcessorThatDoesNotAnswerLeavesThePaymentUnrecordedUntilItDoes() async throws {
        let shop = try await Shop.open()
        let processor = UnansweringProcessor(SandboxCardProcessor(ledger: shop.server.ledger))
        try await shop.server.withClient(cardProcessor: processor) { client in
            let card = try await shop.addCard("4242424242424242", client: client)
            let confirm = try shop.confirm(.card(id: card))
            try expectError(
                try await shop.submit(confirm, client: client), .serviceUnavailable, "card_processor_unavailable",
                "nothing was recorded, retry with the same payment id")
            #expect(processor.attempts.withLock { $0 } == 2, "not one retry after asking what happened")
            #expect(try await shop.server.ledger.executionCount(of: confirm.paymentID) == 0)
            #expect(try await shop.charges(of: confirm) == 0)

            processor.down.withLock { $0 = false }
            #expect(try shop.result(try await shop.submit(confirm, client: client)).outcome == .approved)
            #expect(try await shop.charges(of: confirm) == 1)
            #expect(try await shop.server.ledger.executionCount(of: confirm.paymentID) == 1)
        }
    }
}
