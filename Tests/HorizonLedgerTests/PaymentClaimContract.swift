import HorizonCore
import HorizonLedger
import HorizonProtocol
import Testing

/// A payment id's claim, in the ledger, on every store: a card payment's claim keeps every other
/// way of paying (the balance, a redemption, another wallet or card, other terms) off its id, and
/// recovery takes an abandoned claim so that a late execution cannot approve it.
@Suite("Payment claims in the ledger")
struct PaymentClaimContract {
    typealias F = Fixture

    static var kinds: [StoreKind] { TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite] }

    @Test(arguments: kinds) func aCardsClaimKeepsEveryOtherWayOfPayingOffItsID(kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, alice, aliceKey) = try await F.shop(ledger)
            let bob = try await ledger.createWallet(name: "Bob", publicKey: F.key(2), at: 1_000)
            try await ledger.deposit(F.money(100_00), to: bob.id, at: 1_000)
            let card = try await ledger.addPaymentCard(LedgerContract.visa(token: "tok_a"), to: alice.id).card
            let other = try await ledger.addPaymentCard(LedgerContract.visa(token: "tok_b"), to: alice.id).card
            let bobsCard = try await ledger.addPaymentCard(LedgerContract.visa(token: "tok_c"), to: bob.id).card

            let id = F.paymentID()
            let byCard = F.payment(id, wallet: aliceKey, amount: 5_00, digest: 1)
            #expect(
                try await ledger.claimCardPayment(byCard, card: card.id, wallet: alice.id, merchant: merchant.id)
                    == .claimed)
            // The same Confirm again (a retry after a lost answer): still its claim.
            #expect(
                try await ledger.claimCardPayment(byCard, card: card.id, wallet: alice.id, merchant: merchant.id)
                    == .claimed)
            // Another card, another wallet's card, other terms: a conflict, before any charge.
            await #expect(throws: LedgerError.conflictingRetry(id)) {
                _ = try await ledger.claimCardPayment(byCard, card: other.id, wallet: alice.id, merchant: merchant.id)
            }
            let bobs = F.payment(id, wallet: F.key(2), amount: 5_00, digest: 2)
            await #expect(throws: LedgerError.conflictingRetry(id)) {
                _ = try await ledger.claimCardPayment(bobs, card: bobsCard.id, wallet: bob.id, merchant: merchant.id)
            }
            // The balance and a redemption cannot take the id either; nothing moved.
            let fromBalance = F.payment(id, wallet: aliceKey, amount: 5_00, digest: 3)
            await #expect(throws: LedgerError.conflictingRetry(id)) {
                _ = try await ledger.settle(fromBalance, merchant: merchant.id)
            }
            await #expect(throws: LedgerError.conflictingRetry(id)) {
                _ = try await ledger.redeem(
                    F.redemption(.bonusRedemption, wallet: aliceKey, item: "coffee", quantity: 1, id: id),
                    merchant: merchant.id)
            }
            #expect(try await ledger.executionCount(of: id) == 0)
            #expect(try await ledger.balance(of: alice.id, in: .eur) == F.money(100_00))

            // The card's own execution settles it; a claim on an id the balance paid is executed.
            let paid = try await ledger.settleCardPayment(
                byCard, card: card.id, charge: .charged, merchant: merchant.id)
            #expect(paid.outcome.isApproved)
            #expect(try await ledger.paymentClaim(id)?.state == .settled)
            let second = F.paymentID()
            let settled = try await ledger.settle(
                F.payment(second, wallet: aliceKey, amount: 2_00, digest: 4), merchant: merchant.id)
            #expect(settled.outcome.isApproved)
            #expect(
                try await ledger.claimCardPayment(
                    F.payment(second, wallet: aliceKey, amount: 2_00, digest: 5), card: card.id, wallet: alice.id,
                    merchant: merchant.id) == .executed)
            #expect(try await ledger.balance(of: alice.id, in: .eur) == F.money(98_00))
        }
    }

    @Test(arguments: kinds) func recoveryTakesAnAbandonedClaimSoALateExecutionCannotApprove(kind: StoreKind)
        async throws
    {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, alice, aliceKey) = try await F.shop(ledger)
            let card = try await ledger.addPaymentCard(LedgerContract.visa(token: "tok_a"), to: alice.id).card
            let id = F.paymentID()
            let byCard = F.payment(id, wallet: aliceKey, amount: 5_00, digest: 1)
            _ = try await ledger.claimCardPayment(
                byCard, card: card.id, wallet: alice.id, merchant: merchant.id, at: 10_000)
            #expect(try await ledger.abandonedCardClaims(at: 10_000 + 600, grace: 900).isEmpty)
            #expect(try await ledger.abandonedCardClaims(at: 10_000 + 901, grace: 900).map(\.paymentID) == [id])
            let taken = try #require(try await ledger.beginRecovery(of: id, at: 10_000 + 901, grace: 900))
            #expect(taken.state == .refunding)
            // Taken once: a second recovery within the grace gets nothing.
            #expect(try await ledger.beginRecovery(of: id, at: 10_000 + 902, grace: 900) == nil)
            // The late execution of the charge cannot approve a claim being refunded.
            await #expect(throws: LedgerError.self) {
                _ = try await ledger.settleCardPayment(byCard, card: card.id, charge: .charged, merchant: merchant.id)
            }
            #expect(try await ledger.executionCount(of: id) == 0)
            let decline = try #require(
                try await ledger.storeRecoveredDecline(id, reason: "refunded", at: 10_000 + 903))
            #expect(!decline.outcome.isApproved)
            #expect(try await ledger.paymentClaim(id)?.state == .refunded)
            // Every retry gets the decline; the merchant was paid nothing.
            let replayed = try await ledger.settleCardPayment(
                byCard, card: card.id, charge: .charged, merchant: merchant.id)
            #expect(replayed.outcome == decline.outcome)
            #expect(try await ledger.balance(of: merchant.id) == F.money(0))
        }
    }
}
