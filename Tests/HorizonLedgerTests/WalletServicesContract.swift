import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonStores
import Testing

/// Wallet services: the ledger's rules for what a wallet reads and changes of its
/// own, on both stores (`LedgerSuites.swift`).
extension LedgerContract {
    static func walletServicesSeeOnlyTheWallet(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            let ledger = try await Ledger.open(store)
            let (bakery, alice, aliceKey) = try await F.shop(ledger, balance: 50_00, key: 1)
            let kiosk = try await ledger.createMerchant(name: "Kiosk", currency: .eur, adminEmail: "k@kiosk.example")
            try await ledger.setBonusRule(pointsPerMajorUnit: 0, for: kiosk.id)
            let bob = try await ledger.createWallet(name: "Bob", publicKey: F.key(2))
            try await ledger.deposit(F.money(10_00), to: bob.id)
            var alicePayments: [PaymentID] = []
            for amount: Int64 in [10_00, 5_00, 2_00] {
                let request = F.payment(wallet: aliceKey, amount: amount)
                _ = try await ledger.settle(request, merchant: bakery.id)
                alicePayments.append(request.paymentID)
            }
            let bobPayment = F.payment(wallet: F.key(2), amount: 1_00)
            _ = try await ledger.settle(bobPayment, merchant: bakery.id)

            // History: newest first, by pages, the wallet's own only, with the merchant's name.
            let first = try await ledger.history(of: alice.id, limit: 2)
            #expect(first.map(\.transaction.result.paymentID) == [alicePayments[2], alicePayments[1]])
            #expect(first.allSatisfy { $0.merchantName == "Café Horizon" && $0.transaction.walletID == alice.id })
            let second = try await ledger.history(of: alice.id, limit: 2, before: first.last?.transaction.reference)
            #expect(second.map(\.transaction.result.paymentID) == [alicePayments[0]])
            #expect(try await ledger.history(of: alice.id, before: second.last?.transaction.reference).isEmpty)
            #expect(try await ledger.historyEntry(bobPayment.paymentID, of: alice.id) == nil)
            #expect(try await ledger.historyEntry(alicePayments[0], of: alice.id)?.merchantName == "Café Horizon")
            await #expect(throws: LedgerError.invalidArgument("a page holds 1 to 100 transactions")) {
                try await ledger.history(of: alice.id, limit: 0)
            }
            #expect(try await ledger.balances(of: alice.id) == [F.money(33_00)])

            // Bonus programs: the bakery's (points earned: joined), not the kiosk's (no rule).
            let programs = try await ledger.bonusPrograms(of: alice.id)
            #expect(programs.map(\.merchantID) == [bakery.id])
            #expect(programs.first?.state == .joined && programs.first?.points == 17)
            #expect(try await ledger.bonusPrograms(of: bob.id).first?.points == 1)
            // Leaving forfeits the points and earns none; joining again starts from zero.
            let left = try await ledger.setBonusMembership(.left, of: alice.id, at: bakery.id)
            #expect(left.state == .left && left.points == 0)
            let whileLeft = try await ledger.settle(F.payment(wallet: aliceKey, amount: 3_00), merchant: bakery.id)
            guard case .approved(_, let earned, let balance) = whileLeft.outcome else {
                Issue.record("expected an approval, got \(whileLeft.outcome)")
                return
            }
            #expect(earned == 0 && balance == 0)
            #expect(try await ledger.setBonusMembership(.joined, of: alice.id, at: bakery.id).state == .joined)
            let earning = try await ledger.settle(F.payment(wallet: aliceKey, amount: 4_00), merchant: bakery.id)
            guard case .approved(_, let earnedAgain, _) = earning.outcome else {
                Issue.record("expected an approval, got \(earning.outcome)")
                return
            }
            #expect(earnedAgain == 4)
            await #expect(throws: LedgerError.invalidArgument("Kiosk runs no bonus program to join")) {
                try await ledger.setBonusMembership(.joined, of: alice.id, at: kiosk.id)
            }
            #expect(try await ledger.bonusPoints(of: bob.id, at: bakery.id) == 1)

            // Gold and coupons of every merchant, with their names.
            try await ledger.grantGoldMembership(
                to: alice.id, at: kiosk.id, tier: "Gold", validFrom: 0, validUntil: 4_000_000_000)
            try await ledger.issueCoupon(
                code: "C1", to: alice.id, at: kiosk.id, description: "1 off", value: F.money(1_00),
                expiresAt: 4_000_000_000)
            #expect(try await ledger.goldMemberships(of: alice.id).map(\.merchantName) == ["Kiosk"])
            #expect(try await ledger.coupons(of: alice.id).map(\.coupon.code) == ["C1"])
            #expect(try await ledger.goldMemberships(of: bob.id).isEmpty)
            #expect(try await ledger.coupons(of: bob.id).isEmpty)

            // Account data and keys.
            #expect(try await ledger.setWalletName(" Alice B ", of: alice.id).name == "Alice B")
            await #expect(throws: LedgerError.invalidArgument("a name must be 1 to 200 bytes of printable text")) {
                try await ledger.setWalletName("  ", of: alice.id)
            }
            #expect(try await ledger.walletKeyStatus(aliceKey) == .active(try await ledger.wallet(alice.id)))
            #expect(try await ledger.walletKeyStatus(F.key(9)) == .unknown)
            try await ledger.revokeWalletKey(F.key(2))
            #expect(try await ledger.walletKeyStatus(F.key(2)) == .revoked(bob.id))

            // Status messages: shown in their window, removed on demand.
            let now: UnixTime = 2_000_000_000
            let always = try await ledger.addStatusMessage(severity: .info, title: "Hello", body: "", at: now)
            let later = try await ledger.addStatusMessage(
                severity: .warning, title: "Maintenance", body: "02:00", startsAt: now + 100, endsAt: now + 200, at: now
            )
            #expect(try await ledger.statusMessages(shownAt: now).map(\.id) == [always.id])
            #expect(try await ledger.statusMessages(shownAt: now + 150).map(\.id) == [always.id, later.id])
            #expect(try await ledger.statusMessages(shownAt: now + 200).map(\.id) == [always.id])
            #expect(try await ledger.removeStatusMessage(always.id))
            #expect(try await !ledger.removeStatusMessage(always.id))
            #expect(try await ledger.statusMessages().map(\.title) == ["Maintenance"])
            await #expect(throws: LedgerError.invalidArgument("a message must end after it starts")) {
                try await ledger.addStatusMessage(severity: .info, title: "x", body: "", startsAt: 10, endsAt: 10)
            }
            #expect(try await LedgerAudit.violations(in: store) == [])
        }
    }
}
