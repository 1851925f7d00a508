import HorizonCore
import HorizonLedger
import HorizonProtocol
import Testing

/// Payment cards and their 3-D Secure challenges, on every store (`LedgerSuites.swift`).
extension LedgerContract {
    static func visa(token: String = "tok_a", name: String? = nil) -> NewPaymentCard {
        NewPaymentCard(
            token: token, brand: .visa, lastFour: "4242", expiryMonth: 12, expiryYear: 2030,
            cardholder: " Alice Smith ",
            name: name)
    }

    static func cardsBelongToOneWallet(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let alice = try await ledger.createWallet(name: "Alice", publicKey: F.key(1))
            let bob = try await ledger.createWallet(name: "Bob", publicKey: F.key(2))
            let (card, challenge) = try await ledger.addPaymentCard(visa(), to: alice.id, at: 100)
            #expect(challenge == nil)
            #expect(card.state == .ready && card.isActive && card.canPay)
            #expect(card.name == "Visa •••• 4242")
            #expect(card.cardholder == "Alice Smith")
            #expect(card.id.rawValue.hasPrefix("c_") && card.id.rawValue.count == 34)
            #expect(try await ledger.paymentCards(of: alice.id) == [card])
            #expect(try await ledger.paymentCards(of: bob.id).isEmpty)

            // Bob can neither read, change, remove nor pay with Alice's card: the same answer as
            // for a card that does not exist.
            await #expect(throws: CardError.notFound) { try await ledger.paymentCard(card.id, of: bob.id) }
            await #expect(throws: CardError.notFound) {
                try await ledger.updatePaymentCard(card.id, of: bob.id, active: false, name: "mine")
            }
            await #expect(throws: CardError.notFound) { try await ledger.removePaymentCard(card.id, of: bob.id) }
            #expect(try await ledger.payableCard(card.id, of: bob.id) == nil)
            #expect(try await ledger.paymentCard(card.id, of: alice.id) == card)

            // Update: off, then renamed (nil keeps a field).
            let off = try await ledger.updatePaymentCard(card.id, of: alice.id, active: false, name: nil)
            #expect(!off.isActive && off.name == card.name && !off.canPay)
            #expect(try await ledger.payableCard(card.id, of: alice.id) == nil)
            let renamed = try await ledger.updatePaymentCard(card.id, of: alice.id, active: true, name: " Groceries ")
            #expect(renamed.isActive && renamed.name == "Groceries")
            #expect(try await ledger.payableCard(card.id, of: alice.id) == renamed)
            await #expect(throws: CardError.invalidText("the card's name must be 1 to 64 bytes of printable text")) {
                try await ledger.updatePaymentCard(card.id, of: alice.id, active: nil, name: "  ")
            }
            await #expect(throws: CardError.invalidText("the card's name must be 1 to 64 bytes of printable text")) {
                try await ledger.updatePaymentCard(
                    card.id, of: alice.id, active: nil, name: String(repeating: "x", count: 65))
            }
            await #expect(throws: CardError.invalidText("cardholder must be 1 to 64 bytes of printable text")) {
                var bad = visa(token: "tok_bad")
                bad.cardholder = "Alice\u{7}"
                _ = try await ledger.addPaymentCard(bad, to: alice.id)
            }

            // Removed: not listed, not payable, not changeable, not removable twice.
            let second = try await ledger.addPaymentCard(visa(token: "tok_b", name: "Travel"), to: alice.id, at: 101)
            try await ledger.removePaymentCard(card.id, of: alice.id, at: 200)
            #expect(try await ledger.paymentCards(of: alice.id) == [second.card])
            #expect(try await ledger.payableCard(card.id, of: alice.id) == nil)
            await #expect(throws: CardError.notFound) { try await ledger.removePaymentCard(card.id, of: alice.id) }
            await #expect(throws: CardError.notFound) {
                try await ledger.updatePaymentCard(card.id, of: alice.id, active: true, name: nil)
            }
            // A wallet that does not exist cannot get a card.
            await #expect(throws: CardError.ledger(.notFound("wallet w_nobody"))) {
                _ = try await ledger.addPaymentCard(visa(token: "tok_c"), to: WalletID(rawValue: "w_nobody"))
            }
        }
    }

    static func threeDSecureChallengeGatesACard(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let alice = try await ledger.createWallet(name: "Alice", publicKey: F.key(1))
            let bob = try await ledger.createWallet(name: "Bob", publicKey: F.key(2))
            let (card, opened) = try await ledger.addPaymentCard(
                visa(), to: alice.id, challengeLifetime: 600, at: 1000)
            let challenge = try #require(opened)
            #expect(card.state == .challenge && !card.canPay)
            #expect(challenge.md.hasPrefix("md_") && challenge.expiresAt == 1600 && challenge.decision == nil)
            #expect(try await ledger.payableCard(card.id, of: alice.id) == nil)

            // Not answered yet; another wallet cannot see it; the page finds it by MD alone.
            await #expect(throws: CardError.challengePending) {
                try await ledger.completeCardChallenge(
                    card: card.id, of: alice.id, md: challenge.md, paRes: "pares_x", at: 1001)
            }
            await #expect(throws: CardError.challengeNotFound) {
                try await ledger.cardChallenge(md: challenge.md, of: bob.id)
            }
            #expect(try await ledger.cardChallenge(md: challenge.md) == challenge)

            let approved = try await ledger.decideCardChallenge(md: challenge.md, approve: true, at: 1100)
            let paRes = try #require(approved.paRes)
            #expect(approved.decision == .approved && paRes.hasPrefix("pares_"))
            // A second answer does not change the first.
            #expect(try await ledger.decideCardChallenge(md: challenge.md, approve: false, at: 1101) == approved)
            #expect(try await ledger.cardChallenge(md: challenge.md, of: alice.id) == approved)

            // A PaRes that is not this challenge's; another wallet; another card's MD.
            await #expect(throws: CardError.paResInvalid) {
                try await ledger.completeCardChallenge(
                    card: card.id, of: alice.id, md: challenge.md, paRes: paRes + "0", at: 1200)
            }
            await #expect(throws: CardError.notFound) {
                try await ledger.completeCardChallenge(card: card.id, of: bob.id, md: challenge.md, paRes: paRes)
            }
            let (other, otherOpened) = try await ledger.addPaymentCard(
                visa(token: "tok_other"), to: alice.id, challengeLifetime: 600, at: 1000)
            let otherChallenge = try #require(otherOpened)
            let otherDecided = try await ledger.decideCardChallenge(md: otherChallenge.md, approve: true, at: 1100)
            await #expect(throws: CardError.challengeNotFound) {
                try await ledger.completeCardChallenge(
                    card: card.id, of: alice.id, md: otherChallenge.md, paRes: otherDecided.paRes ?? "", at: 1200)
            }
            // The other challenge's PaRes with this MD.
            await #expect(throws: CardError.paResInvalid) {
                try await ledger.completeCardChallenge(
                    card: card.id, of: alice.id, md: challenge.md, paRes: otherDecided.paRes ?? "", at: 1200)
            }
            #expect(try await ledger.payableCard(card.id, of: alice.id) == nil)

            let ready = try await ledger.completeCardChallenge(
                card: card.id, of: alice.id, md: challenge.md, paRes: paRes, at: 1200)
            #expect(ready.state == .ready && ready.canPay)
            #expect(try await ledger.payableCard(card.id, of: alice.id) == ready)
            // Completing again is answered with the card (a retry after a lost answer).
            #expect(
                try await ledger.completeCardChallenge(
                    card: card.id, of: alice.id, md: challenge.md, paRes: paRes, at: 1201) == ready)
            // The other card stays unusable: its own challenge was answered but never completed.
            #expect(try await ledger.payableCard(other.id, of: alice.id) == nil)
        }
    }

    static func failedAndAbandonedChallengesLeaveTheCardUnusable(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let alice = try await ledger.createWallet(name: "Alice", publicKey: F.key(1))
            // Failed on the page.
            let (failedCard, failedOpened) = try await ledger.addPaymentCard(
                visa(token: "tok_f"), to: alice.id, challengeLifetime: 600, at: 1000)
            let failed = try await ledger.decideCardChallenge(
                md: try #require(failedOpened).md, approve: false, at: 1010)
            #expect(failed.decision == .failed)
            await #expect(throws: CardError.challengeFailed) {
                try await ledger.completeCardChallenge(
                    card: failedCard.id, of: alice.id, md: failed.md, paRes: failed.paRes ?? "", at: 1020)
            }
            // Never answered: expired for the page and for the wallet.
            let (lateCard, lateOpened) = try await ledger.addPaymentCard(
                visa(token: "tok_l"), to: alice.id, challengeLifetime: 600, at: 1000)
            let late = try #require(lateOpened)
            await #expect(throws: CardError.challengeExpired) {
                try await ledger.decideCardChallenge(md: late.md, approve: true, at: 1600)
            }
            await #expect(throws: CardError.challengeExpired) {
                try await ledger.completeCardChallenge(
                    card: lateCard.id, of: alice.id, md: late.md, paRes: "pares_guess", at: 1600)
            }
            // Answered in time, completed too late.
            let (slowCard, slowOpened) = try await ledger.addPaymentCard(
                visa(token: "tok_s"), to: alice.id, challengeLifetime: 600, at: 1000)
            let slow = try await ledger.decideCardChallenge(md: try #require(slowOpened).md, approve: true, at: 1500)
            await #expect(throws: CardError.challengeExpired) {
                try await ledger.completeCardChallenge(
                    card: slowCard.id, of: alice.id, md: slow.md, paRes: slow.paRes ?? "", at: 1600)
            }
            await #expect(throws: CardError.challengeNotFound) {
                try await ledger.decideCardChallenge(md: "md_unknown", approve: true, at: 1000)
            }
            for card in [failedCard, lateCard, slowCard] {
                #expect(try await ledger.payableCard(card.id, of: alice.id) == nil)
                #expect(try await ledger.paymentCard(card.id, of: alice.id).state == .challenge)
            }
        }
    }

    /// The schema itself refuses what the rules never write: a card number's worth of last
    /// digits, an unknown state or brand, an active flag that is not 0 or 1.
    static func cardRowsAreCheckedByTheDatabase(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let alice = try await ledger.createWallet(name: "Alice", publicKey: F.key(1))
            let (card, _) = try await ledger.addPaymentCard(visa(), to: alice.id, at: 100)
            for assignment in [
                "last_four = '4242424242424242'", "state = 'unknown'", "brand = 'discover'", "active = 2",
                "expiry_month = 13",
            ] {
                await #expect(throws: LedgerError.self, "\(assignment)") {
                    try await ledger.store.transaction { db in
                        try await db.query(
                            "UPDATE payment_cards SET \(assignment) WHERE id = ?", [.text(card.id.rawValue)])
                    }
                }
            }
            #expect(try await ledger.paymentCards(of: alice.id) == [card])
        }
    }
}

/// Paying with a card, and refunding a card payment to its card, on every store.
extension LedgerContract {
    static func aCardPaymentIsSettledOnceAndRefundedToItsCard(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger)
            let (card, _) = try await ledger.addPaymentCard(visa(), to: wallet.id, at: 100)
            let request = F.payment(wallet: key, amount: 10_00, tip: 1_00)
            let paid = try await ledger.settleCardPayment(
                request, card: card.id, charge: .charged, merchant: merchant.id)
            guard case .approved(_, 10, 10) = paid.outcome else {
                Issue.record("a charged card payment was not approved with 10 points: \(paid.outcome)")
                return
            }
            // The card paid: the wallet's balance is untouched, the merchant has amount plus tip.
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(100_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(11_00))
            #expect(try await ledger.cardOfPayment(request.paymentID) == card.id)
            // A retry is the stored result, whatever the charge now says; other terms conflict.
            #expect(
                try await ledger.settleCardPayment(
                    request, card: card.id, charge: .notCharged(reason: "retry"), merchant: merchant.id) == paid)
            await #expect(throws: LedgerError.conflictingRetry(request.paymentID)) {
                try await ledger.settle(
                    F.payment(request.paymentID, wallet: key, amount: 10_00, tip: 2_00), merchant: merchant.id)
            }
            #expect(try await ledger.executionCount(of: request.paymentID) == 1)

            // Refunds go back to the card: out through the external account, the card named.
            let refund = try await ledger.refund(
                refundRequest(request.paymentID, 4_00, id: "card-r1"), merchant: merchant.id, at: 2_000)
            #expect(refund.destination == .card && refund.destinationReference == card.id.rawValue)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(100_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(7_00))

            // Declines and charges that did not happen are stored as declines; no money moves.
            let declined = try await ledger.settleCardPayment(
                F.payment(wallet: key, amount: 5_00), card: card.id,
                charge: .declined(code: .insufficientFunds, reason: "no funds (insufficient_funds)"),
                merchant: merchant.id)
            #expect(declined.outcome == .declined(code: .insufficientFunds, reason: "no funds (insufficient_funds)"))
            let notCharged = try await ledger.settleCardPayment(
                F.payment(wallet: key, amount: 5_00), card: card.id, charge: .notCharged(reason: "card removed"),
                merchant: merchant.id)
            #expect(notCharged.outcome == .declined(code: .declined, reason: "card removed"))
            #expect(try await ledger.balance(of: merchant.id) == F.money(7_00))

            // The bonus rule is the same whatever pays: a wallet that left the program earns no
            // points by card either (the rule once lived in the balance payment only).
            _ = try await ledger.setBonusMembership(.left, of: wallet.id, at: merchant.id)
            let afterLeaving = try await ledger.settleCardPayment(
                F.payment(wallet: key, amount: 20_00), card: card.id, charge: .charged, merchant: merchant.id)
            guard case .approved(_, 0, 0) = afterLeaving.outcome else {
                Issue.record("a wallet that left the program earned points by card: \(afterLeaving.outcome)")
                return
            }
            #expect(try await LedgerAudit.violations(in: ledger.store).isEmpty)
        }
    }
}
