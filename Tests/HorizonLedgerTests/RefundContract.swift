import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonStores
import Testing

/// Refunds, on every store (`LedgerSuites.swift`).
extension LedgerContract {
    static func refundRequest(_ payment: PaymentID, _ minorUnits: Int64, id: String, _ currency: Currency = .eur)
        -> RefundRequest
    {
        RefundRequest(refundID: RefundID(rawValue: id), paymentID: payment, amount: F.money(minorUnits, currency))
    }

    /// A shop, a wallet with 100.00 and an approved payment of 10.00 plus 1.00 tip (10 points earned).
    static func paidShop(_ ledger: Ledger) async throws -> (
        merchant: Merchant, wallet: Wallet, key: PublicKeyBytes, payment: PaymentID
    ) {
        let (merchant, wallet, key) = try await F.shop(ledger)
        let paid = try await ledger.settle(F.payment(wallet: key, amount: 10_00, tip: 1_00), merchant: merchant.id)
        guard case .approved(_, 10, 10) = paid.outcome else {
            throw LedgerError.invalidArgument("the fixture's payment was not approved with 10 points: \(paid.outcome)")
        }
        return (merchant, wallet, key, paid.paymentID)
    }

    static func refundsGiveBackUntilNothingIsLeft(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, _, payment) = try await paidShop(ledger)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(89_00))

            let first = try await ledger.refund(
                refundRequest(payment, 4_00, id: "r-1"), merchant: merchant.id, at: 2_000)
            #expect(first.amount == F.money(4_00) && first.walletID == wallet.id && first.paymentID == payment)
            #expect(first.destination == .horizonBalance && first.destinationReference == nil)
            #expect(first.createdAt == 2_000)
            // floor(10 × 4.00 / 11.00) = 3 points back.
            #expect(first.bonusPointsReversed == 3)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(93_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(7_00))
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 7)

            // The rest (the tip included): 7.00 → floor(10 × 11 / 11) − 3 = 7 points, all of them.
            let second = try await ledger.refund(refundRequest(payment, 7_00, id: "r-2"), merchant: merchant.id)
            #expect(second.bonusPointsReversed == 7)
            #expect(second.reference > first.reference)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(100_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(0))
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 0)
            #expect(
                try await ledger.refunds(of: payment, merchant: merchant.id).map(\.refundID.rawValue) == ["r-1", "r-2"])
            #expect(try await ledger.refund(RefundID(rawValue: "r-2"), merchant: merchant.id) == second)
            // The wallet's own history shows what came back.
            #expect(try await ledger.history(of: wallet.id).first?.refunds == [first, second])
            #expect(try await ledger.historyEntry(payment, of: wallet.id)?.refunds == [first, second])

            await #expect(throws: LedgerError.refundRefused(.exceedsRemaining(remaining: F.money(0)))) {
                _ = try await ledger.refund(refundRequest(payment, 1, id: "r-3"), merchant: merchant.id)
            }
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
            let kinds = try await ledger.store.transaction { db in
                try await db.query("SELECT e.kind FROM refunds r JOIN entries e ON e.id = r.entry_id").map {
                    try $0.text("kind")
                }
            }
            #expect(kinds == ["refund", "refund"])

            // The audit reads the rows alone: a refund changed outside the rules is reported.
            try await ledger.store.transaction { db in
                try await db.query("UPDATE refunds SET amount = amount + 1 WHERE refund_id = 'r-2'")
            }
            let violations = try await LedgerAudit.violations(in: ledger.store)
            #expect(violations.contains { $0.hasPrefix("a payment's refunds total more than its amount plus tip") })
            #expect(violations.contains { $0.hasPrefix("a refund's entry did not move its amount") })
        }
    }

    static func refundsAreIdempotentByRefundID(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key, payment) = try await paidShop(ledger)
            let first = try await ledger.refund(refundRequest(payment, 2_50, id: "till-7:0001"), merchant: merchant.id)
            let postings = try await postingCount(ledger)
            // The same id and terms: the stored refund, nothing moves again.
            let replay = try await ledger.refund(refundRequest(payment, 2_50, id: "till-7:0001"), merchant: merchant.id)
            #expect(replay == first)
            #expect(try await postingCount(ledger) == postings)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(91_50))

            // The same id with another amount or another payment: refused, nothing moves.
            await #expect(throws: LedgerError.refundRefused(.idempotencyConflict(RefundID(rawValue: "till-7:0001")))) {
                _ = try await ledger.refund(refundRequest(payment, 2_00, id: "till-7:0001"), merchant: merchant.id)
            }
            let other = try await ledger.settle(F.payment(wallet: key, amount: 5_00), merchant: merchant.id)
            await #expect(throws: LedgerError.refundRefused(.idempotencyConflict(RefundID(rawValue: "till-7:0001")))) {
                _ = try await ledger.refund(
                    refundRequest(other.paymentID, 2_50, id: "till-7:0001"), merchant: merchant.id)
            }
            #expect(try await postingCount(ledger) == postings + 2)  // only the second payment's

            // Refund ids are per merchant: another merchant's same id is its own refund.
            let diner = try await ledger.createMerchant(name: "Diner", currency: .eur, adminEmail: "d@diner.example")
            let dinerPaid = try await ledger.settle(F.payment(wallet: key, amount: 3_00), merchant: diner.id)
            let dinerRefund = try await ledger.refund(
                refundRequest(dinerPaid.paymentID, 3_00, id: "till-7:0001"), merchant: diner.id)
            #expect(dinerRefund.merchantID == diner.id && dinerRefund.amount == F.money(3_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    static func refundRefusalsHaveExactCodes(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, _, key, payment) = try await paidShop(ledger)
            let diner = try await ledger.createMerchant(name: "Diner", currency: .eur, adminEmail: "d@diner.example")
            let declined = try await ledger.settle(F.payment(wallet: key, amount: 500_00), merchant: merchant.id)
            #expect(!declined.outcome.isApproved)
            let redeemed = try await ledger.redeem(
                F.redemption(.bonusRedemption, wallet: key, quantity: 1), merchant: merchant.id)
            #expect(redeemed.outcome.isApproved)
            let unknown = F.paymentID()
            let postings = try await postingCount(ledger)

            let cases: [(RefundRequest, MerchantID, RefundRefusal, String)] = [
                (
                    refundRequest(payment, 11_01, id: "a"), merchant.id,
                    .exceedsRemaining(remaining: F.money(11_00)), "refund_exceeds_remaining"
                ),
                (refundRequest(payment, 1_00, id: "b"), diner.id, .paymentNotFound(payment), "payment_not_found"),
                (refundRequest(unknown, 1_00, id: "c"), merchant.id, .paymentNotFound(unknown), "payment_not_found"),
                (
                    refundRequest(declined.paymentID, 1_00, id: "d"), merchant.id,
                    .notRefundable(declined.paymentID, reason: "it was declined, so no money moved"),
                    "payment_not_refundable"
                ),
                (
                    refundRequest(redeemed.paymentID, 1_00, id: "e"), merchant.id,
                    .notRefundable(redeemed.paymentID, reason: "it is a redemption, which moved no money"),
                    "payment_not_refundable"
                ),
                (refundRequest(payment, 0, id: "f"), merchant.id, .invalidAmount, "refund_amount_invalid"),
                (
                    refundRequest(payment, 1_00, id: "g", .usd), merchant.id,
                    .currencyMismatch(expected: .eur, got: .usd), "currency_mismatch"
                ),
                (refundRequest(payment, 1_00, id: ""), merchant.id, .invalidRefundID(""), "refund_id_invalid"),
                (
                    refundRequest(payment, 1_00, id: "with space"), merchant.id, .invalidRefundID("with space"),
                    "refund_id_invalid"
                ),
                (
                    refundRequest(payment, 1_00, id: String(repeating: "x", count: 65)), merchant.id,
                    .invalidRefundID(String(repeating: "x", count: 65)), "refund_id_invalid"
                ),
            ]
            for (request, merchantID, refusal, code) in cases {
                await #expect(throws: LedgerError.refundRefused(refusal)) {
                    _ = try await ledger.refund(request, merchant: merchantID)
                }
                #expect(refusal.code == code)
            }
            await #expect(throws: LedgerError.refundRefused(.paymentNotFound(payment))) {
                _ = try await ledger.refunds(of: payment, merchant: diner.id)
            }
            await #expect(throws: LedgerError.notFound("merchant m_gone")) {
                _ = try await ledger.refund(
                    refundRequest(payment, 1_00, id: "h"), merchant: MerchantID(rawValue: "m_gone"))
            }
            #expect(try await postingCount(ledger) == postings)
            #expect(try await ledger.refunds(of: payment, merchant: merchant.id) == [])
            // A refused id was not used up: it refunds once the terms are right.
            let refund = try await ledger.refund(refundRequest(payment, 11_00, id: "a"), merchant: merchant.id)
            #expect(refund.amount == F.money(11_00))
        }
    }

    static func refundedPointsRoundDownAndStopAtZero(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key, payment) = try await paidShop(ledger)
            // Three refunds of 3.00, 3.00, 5.00 of 11.00 with 10 points: cumulative floors 2, 5, 10.
            var reversed: [Int64] = []
            for (index, amount) in [Int64(3_00), 3_00, 5_00].enumerated() {
                reversed.append(
                    try await ledger.refund(refundRequest(payment, amount, id: "p\(index)"), merchant: merchant.id)
                        .bonusPointsReversed)
            }
            #expect(reversed == [2, 3, 5])
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 0)

            // Points spent before the refund are not taken below zero.
            let paid = try await ledger.settle(F.payment(wallet: key, amount: 20_00), merchant: merchant.id)
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 20)
            let spent = try await ledger.redeem(
                F.redemption(.bonusRedemption, wallet: key, quantity: 15), merchant: merchant.id)
            #expect(spent.outcome.isApproved)
            let refund = try await ledger.refund(refundRequest(paid.paymentID, 20_00, id: "all"), merchant: merchant.id)
            #expect(refund.bonusPointsReversed == 5)
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 0)
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    static func concurrentRefundsNeverExceedThePayment(_ kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { store, another in
            let ledger = try await Ledger.open(store)
            let second = try await Ledger.open(try another())
            let (merchant, wallet, _, payment) = try await paidShop(ledger)
            // Twenty refunds of 1.00 of an 11.00 payment, through two stores (two processes):
            // exactly eleven are executed; the others are refused, none overdraws.
            let results = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<20 {
                    let target = index.isMultiple(of: 2) ? ledger : second
                    group.addTask {
                        do {
                            _ = try await target.refund(
                                refundRequest(payment, 1_00, id: "c\(index)"), merchant: merchant.id)
                            return "refunded"
                        } catch LedgerError.refundRefused(let refusal) {
                            return refusal.code
                        }
                    }
                }
                // And one refund id sent five times at once: executed once.
                for _ in 0..<5 {
                    group.addTask {
                        do {
                            _ = try await second.refund(refundRequest(payment, 1_00, id: "same"), merchant: merchant.id)
                            return "same"
                        } catch LedgerError.refundRefused(let refusal) {
                            return refusal.code
                        }
                    }
                }
                var results: [String] = []
                for try await result in group { results.append(result) }
                return results
            }
            let refunds = try await ledger.refunds(of: payment, merchant: merchant.id)
            #expect(refunds.count == 11)
            #expect(refunds.map(\.amount.minorUnits).reduce(0, +) == 11_00)
            #expect(
                results.filter { $0 == "refunded" }.count
                    + (refunds.contains { $0.refundID.rawValue == "same" } ? 1 : 0) == 11)
            #expect(Set(results).isSubset(of: ["refunded", "same", "refund_exceeds_remaining"]))
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(100_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(0))
            #expect(try await LedgerAudit.violations(in: store) == [])
            await second.close()
        }
    }

    static func refundsMigrateAVersion4Database(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            #expect(try await LedgerSchema.migrate(store, to: 4, at: 500) == 4)
            try await store.transaction { db in
                try await db.query("INSERT INTO entries(kind, created_at) VALUES ('deposit', 501)")
                try await db.query("INSERT INTO entries(kind, created_at) VALUES ('payment', 502)")
            }
            // Version 4 knows no refund entries.
            await #expect(throws: LedgerError.self) {
                try await store.transaction { db in
                    try await db.query("INSERT INTO entries(kind, created_at) VALUES ('refund', 503)")
                }
            }
            let ledger = try await Ledger.open(store)
            #expect(try await ledger.schemaVersion() == LedgerSchema.currentVersion)
            let entries = try await store.transaction { db in
                try await db.query("SELECT id, kind FROM entries ORDER BY id").map {
                    "\(try $0.integer("id")) \(try $0.text("kind"))"
                }
            }
            #expect(entries == ["1 deposit", "2 payment"])
            let (merchant, _, _, payment) = try await paidShop(ledger)
            _ = try await ledger.refund(refundRequest(payment, 1_00, id: "after-migration"), merchant: merchant.id)
            let newest = try await store.transaction { db in
                try await db.query("SELECT id, kind FROM entries ORDER BY id").map { try $0.integer("id") }
            }
            // The rebuilt table keeps the old ids and counts on after them (deposit, payment,
            // refund); PostgreSQL's sequence may skip the number the refused insert drew.
            #expect(newest.count == 5 && newest.prefix(2) == [1, 2])
            #expect(zip(newest, newest.dropFirst()).allSatisfy { $0 < $1 })
        }
    }
}
