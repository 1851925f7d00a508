import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonServer
import HummingbirdTesting
import Synchronization
import Testing

/// One payment id is paid one way only, and a card charge belongs to the wallet and card that
/// made it: the id is claimed in the ledger before the card processor is called, the balance
/// checks the same claim in its own transaction, and a charge left by a crash is used only by
/// its owner's retry or refunded by recovery.
@Suite("Payment claims: one payment id, one charge")
struct PaymentClaimTests {
    typealias Shop = CardPaymentTests.Shop

    static var kinds: [StoreKind] { TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite] }

    /// A shop (merchant, till, wallet with 50.00 on its balance) on `store`.
    static func shop(on store: any LedgerStore) async throws -> Shop {
        let server = try await TestServer(store: { _ in store })
        let merchant = try await server.addMerchant()
        let till = TerminalKey()
        _ = try await server.activate(till)
        let wallet = WalletDevice()
        let walletID = try await server.ledger.createWallet(name: "Alice", publicKey: wallet.publicKeyBytes).id
        try await server.ledger.deposit(try Money(minorUnits: 50_00, currency: .eur), to: walletID)
        return Shop(server: server, merchant: merchant, till: till, wallet: wallet, walletID: walletID)
    }

    /// Another wallet at the same shop, with its own balance.
    static func otherWallet(at shop: Shop) async throws -> Shop {
        let wallet = WalletDevice()
        let walletID = try await shop.server.ledger.createWallet(name: "Bob", publicKey: wallet.publicKeyBytes).id
        try await shop.server.ledger.deposit(try Money(minorUnits: 50_00, currency: .eur), to: walletID)
        return Shop(server: shop.server, merchant: shop.merchant, till: shop.till, wallet: wallet, walletID: walletID)
    }

    static func refunds(of id: PaymentID, in ledger: Ledger) async throws -> Int64 {
        try await ledger.store.transaction { db in
            try await db.query(
                "SELECT COUNT(*) AS n FROM sandbox_card_refunds WHERE charge_key = ?", [.text(id.bytes.hexString)]
            ).first?.integer("n") ?? -1
        }
    }

    /// A balance Confirm and a card Confirm with one payment id, raced 20 times over two server
    /// instances, each with its own connections to one database: exactly one is approved, and
    /// the card is charged exactly when the card won (never for an id the balance settled).
    @Test(arguments: kinds) func aBalanceAndACardConfirmWithOneIDTakeMoneyOnce(kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { store, another in
            let shop = try await Self.shop(on: store)
            let ledgerB = try await Ledger.open(try another())
            let races = 20
            let outcome = try await shop.server.withClient { clientA in
                try await shop.server.withClient(ledger: ledgerB) { clientB in
                    let card = try await shop.addCard("4242424242424242", client: clientA)
                    var balanceWins = 0
                    for race in 0..<races {
                        var generator = SystemRandomNumberGenerator()
                        let id = PaymentID.random(using: &generator)
                        let fromBalance = try shop.confirm(.accountBalance, amount: 1_00, tip: 0, paymentID: id)
                        let byCard = try shop.confirm(.card(id: card), amount: 1_00, tip: 0, paymentID: id)
                        // Alternate which server gets which method.
                        let (balanceClient, cardClient) = race % 2 == 0 ? (clientA, clientB) : (clientB, clientA)
                        async let balanceResponse = shop.submit(fromBalance, client: balanceClient)
                        async let cardResponse = shop.submit(byCard, client: cardClient)
                        let responses = [try await balanceResponse, try await cardResponse]
                        let approved = try responses.map { response -> Bool in
                            guard response.status == .ok else {
                                #expect(response.status == .conflict, "\(response.text)")
                                return false
                            }
                            let result = try JSONDecoder().decode(
                                Components.Schemas.PaymentResult.self, from: response.data)
                            return result.outcome == .approved
                        }
                        #expect(approved.filter { $0 }.count == 1, "race \(race): \(responses.map(\.text))")
                        let charges = try await shop.charges(of: byCard)
                        #expect(charges == (approved[1] ? 1 : 0), "race \(race): the card charged \(charges) times")
                        #expect(try await shop.server.ledger.executionCount(of: id) == 1)
                        if approved[0] { balanceWins += 1 }
                    }
                    return balanceWins
                }
            }
            // The balance paid the races it won, the card the others; the merchant got each once.
            #expect(try await shop.walletBalance == (euros(50_00 - Int64(outcome) * 1_00)))
            #expect(try await shop.merchantBalance == (euros(Int64(races) * 1_00)))
            #expect(try await LedgerAudit.violations(in: store).isEmpty)
            await ledgerB.close()
        }
    }

    /// The server's work after a card charge never happens (as when it is killed between the
    /// processor's charge and the ledger's commit): the sandbox charges, then the server is gone.
    final class CrashAfterCharge: CardProcessor {
        let sandbox: SandboxCardProcessor
        init(_ sandbox: SandboxCardProcessor) { self.sandbox = sandbox }

        func tokenize(_ card: CardDetails, at time: UnixTime) async throws(CardProcessorError) -> CardTokenization {
            try await sandbox.tokenize(card, at: time)
        }
        func charge(token: String, amount: Money, idempotencyKey: String, at time: UnixTime)
            async throws(CardProcessorError) -> CardCharge
        {
            _ = try await sandbox.charge(token: token, amount: amount, idempotencyKey: idempotencyKey, at: time)
            throw .unavailable("the server was killed after the charge (test)")
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

    /// Alice pays with her card and the server dies between the charge and the commit: her card
    /// is charged, nothing is executed. Returns her Confirm.
    static func crashAfterCharge(_ alice: Shop) async throws -> Confirm {
        let crashing = CrashAfterCharge(SandboxCardProcessor(ledger: alice.server.ledger))
        return try await alice.server.withClient(cardProcessor: crashing) { client in
            let card = try await alice.addCard("4242424242424242", client: client)
            let paid = try alice.confirm(.card(id: card))
            #expect(try await alice.submit(paid, client: client).status != .ok)
            #expect(try await alice.charges(of: paid) == 1)
            #expect(try await alice.server.ledger.executionCount(of: paid.paymentID) == 0)
            return paid
        }
    }

    /// After that crash, Bob's Confirm with the same payment id and amount, paying with his own
    /// card, is a conflict: he is not approved with Alice's charge, his card is not charged and
    /// no money moves. A Confirm naming a card that does not exist (or another wallet's) is a
    /// 404. Alice's retry is approved once, with the one charge.
    @Test func aChargeLeftByACrashServesOnlyItsOwnersRetry() async throws {
        let alice = try await Shop.open()
        let bob = try await Self.otherWallet(at: alice)
        let paid = try await Self.crashAfterCharge(alice)
        try await alice.server.withClient { client in
            let bobsCard = try await bob.addCard("5555555555554444", client: client)
            let stolen = try bob.confirm(.card(id: bobsCard), paymentID: paid.paymentID)
            try expectError(
                try await bob.submit(stolen, client: client), .conflict, "payment_conflict", "nothing was charged")
            #expect(try await alice.charges(of: stolen) == 1)
            #expect(try await alice.server.ledger.executionCount(of: paid.paymentID) == 0)
            #expect(try await bob.walletBalance == (euros(50_00)))
            #expect(try await alice.merchantBalance == (euros(0)))
            // The balance cannot take the id either.
            let fromBalance = try bob.confirm(.accountBalance, paymentID: paid.paymentID)
            try expectError(
                try await bob.submit(fromBalance, client: client), .conflict, "payment_conflict", "other terms")
            #expect(try await bob.walletBalance == (euros(50_00)))

            // A card id nobody has, or another wallet's card: a clear 404, before anything else.
            for card in ["c_00000000000000000000000000000000", bobsCard] {
                let unknown = try alice.confirm(.card(id: card), paymentID: paid.paymentID)
                try expectError(
                    try await alice.submit(unknown, client: client), .notFound, "card_not_found", "no such card")
            }
            #expect(try await alice.server.ledger.executionCount(of: paid.paymentID) == 0)

            // Alice's own retry: approved once, with the one charge.
            let retried = try alice.result(try await alice.submit(paid, client: client))
            #expect(retried.outcome == .approved, "\(retried)")
            #expect(try await alice.charges(of: paid) == 1)
            let again = try alice.result(try await alice.submit(paid, client: client))
            #expect(again.outcome == .approved && again.reference == retried.reference)
        }
        #expect(try await alice.merchantBalance == (euros(14_00)))
        #expect(try await alice.walletBalance == (euros(50_00)))
        #expect(try await alice.server.ledger.executionCount(of: paid.paymentID) == 1)
        #expect(try await LedgerAudit.violations(in: alice.server.ledger.store).isEmpty)
    }

    /// An abandoned charge (claimed and charged, never settled) is refunded by recovery once
    /// the grace has passed, exactly once however often recovery runs, and a decline is stored:
    /// the owner's late retry gets that decline, and the merchant is paid nothing.
    @Test func recoveryRefundsAnAbandonedChargeExactlyOnce() async throws {
        let alice = try await Shop.open()
        let paid = try await Self.crashAfterCharge(alice)
        let recovery = CardClaimRecovery(
            ledger: alice.server.ledger, cards: SandboxCardProcessor(ledger: alice.server.ledger))
        // Within the grace the claim is left alone (its terminal may still retry).
        #expect(try await recovery.run(at: alice.server.clock.now + CardClaimRecovery.grace - 1) == .init())
        #expect(try await Self.refunds(of: paid.paymentID, in: alice.server.ledger) == 0)

        alice.server.clock.advance(CardClaimRecovery.grace + 1)
        let report = try await recovery.run(at: alice.server.clock.now)
        #expect(report.refunded == [paid.paymentID])
        // Again, and from a second process's recovery: nothing more.
        let second = CardClaimRecovery(
            ledger: alice.server.ledger, cards: SandboxCardProcessor(ledger: alice.server.ledger))
        #expect(try await second.run(at: alice.server.clock.now) == .init())
        alice.server.clock.advance(CardClaimRecovery.grace + 1)
        #expect(try await recovery.run(at: alice.server.clock.now) == .init())
        #expect(try await Self.refunds(of: paid.paymentID, in: alice.server.ledger) == 1)

        try await alice.server.withClient { client in
            let late = try alice.result(try await alice.submit(paid, client: client))
            #expect(late.outcome == .declined, "\(late)")
            #expect(late.declineReason?.contains("the charge was refunded") == true)
            #expect(try await alice.charges(of: paid) == 1)
        }
        #expect(try await Self.refunds(of: paid.paymentID, in: alice.server.ledger) == 1)
        #expect(try await alice.merchantBalance == (euros(0)))
        #expect(try await alice.server.ledger.executionCount(of: paid.paymentID) == 1)
        #expect(try await LedgerAudit.violations(in: alice.server.ledger.store).isEmpty)
    }

    /// A claim whose charge never happened (the processor did not answer) is closed by
    /// recovery, without a refund; the same Confirm may still claim it and pay, nobody else.
    @Test func recoveryClosesAClaimThatWasNeverCharged() async throws {
        let alice = try await Shop.open()
        let bob = try await Self.otherWallet(at: alice)
        let processor = CardPaymentTests.UnansweringProcessor(SandboxCardProcessor(ledger: alice.server.ledger))
        let (card, paid) = try await alice.server.withClient(cardProcessor: processor) { client in
            let card = try await alice.addCard("4242424242424242", client: client)
            let paid = try alice.confirm(.card(id: card))
            #expect(try await alice.submit(paid, client: client).status == .serviceUnavailable)
            return (card, paid)
        }
        _ = card
        alice.server.clock.advance(CardClaimRecovery.grace + 1)
        let report = try await CardClaimRecovery(
            ledger: alice.server.ledger, cards: SandboxCardProcessor(ledger: alice.server.ledger)
        ).run(at: alice.server.clock.now)
        #expect(report.closed == [paid.paymentID] && report.refunded.isEmpty)
        #expect(try await Self.refunds(of: paid.paymentID, in: alice.server.ledger) == 0)
        try await alice.server.withClient { client in
            let fromBalance = try bob.confirm(.accountBalance, paymentID: paid.paymentID)
            try expectError(
                try await bob.submit(fromBalance, client: client), .conflict, "payment_conflict", "other terms")
            #expect(try alice.result(try await alice.submit(paid, client: client)).outcome == .approved)
            #expect(try await alice.charges(of: paid) == 1)
        }
    }
}
