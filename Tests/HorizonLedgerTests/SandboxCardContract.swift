import HorizonCore
import HorizonLedger
import Testing

/// The sandbox card processor's state, kept by the ledger's methods, on every store
/// (`LedgerSuites.swift`): each key charges and refunds once.
extension LedgerContract {
    static func sandboxCardChargesAndRefundsOncePerKey(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let decide: @Sendable (String) -> SandboxChargeDecision? = { behaviour in
                switch behaviour {
                case "approve": .charge
                case "lose-answer": .chargeButLoseTheAnswer
                case "decline": .decline(code: "card_declined")
                case "lose-first": .loseFirstAttemptThenCharge
                default: nil
                }
            }
            for (token, behaviour) in [
                ("tok_ok", "approve"), ("tok_lost", "lose-answer"), ("tok_no", "decline"), ("tok_first", "lose-first"),
                ("tok_odd", "explode"),
            ] {
                try await ledger.addSandboxCardToken(token, behaviour: behaviour, at: 1_000)
            }
            let amount = F.money(12_50)
            let charged = SandboxCardCharge(idempotencyKey: "k1", token: "tok_ok", amount: amount, declineCode: nil)
            #expect(
                try await ledger.chargeSandboxCard(
                    token: "tok_ok", amount: amount, idempotencyKey: "k1", at: 1_001, decide: decide)
                    == .recorded(charged, answerLost: false))
            // The same key again, even with other terms, is the stored charge; nothing new is charged.
            #expect(
                try await ledger.chargeSandboxCard(
                    token: "tok_no", amount: F.money(1), idempotencyKey: "k1", at: 1_002, decide: decide)
                    == .stored(charged))
            #expect(try await ledger.sandboxCardCharge("k1") == charged)
            #expect(try await ledger.sandboxCardCharge("k-none") == nil)
            #expect(
                try await ledger.chargeSandboxCard(
                    token: "tok_none", amount: amount, idempotencyKey: "k2", at: 1_003, decide: decide)
                    == .unknownToken)
            let lost = try await ledger.chargeSandboxCard(
                token: "tok_lost", amount: amount, idempotencyKey: "k3", at: 1_004, decide: decide)
            #expect(
                lost
                    == .recorded(
                        .init(idempotencyKey: "k3", token: "tok_lost", amount: amount, declineCode: nil),
                        answerLost: true))
            let declined = try await ledger.chargeSandboxCard(
                token: "tok_no", amount: amount, idempotencyKey: "k4", at: 1_005, decide: decide)
            #expect(
                declined
                    == .recorded(
                        .init(idempotencyKey: "k4", token: "tok_no", amount: amount, declineCode: "card_declined"),
                        answerLost: false))
            // Lost once on the way in, then charged by the retry.
            #expect(
                try await ledger.chargeSandboxCard(
                    token: "tok_first", amount: amount, idempotencyKey: "k5", at: 1_006, decide: decide)
                    == .firstAttemptLost)
            #expect(try await ledger.sandboxCardCharge("k5") == nil)
            #expect(
                try await ledger.chargeSandboxCard(
                    token: "tok_first", amount: amount, idempotencyKey: "k5", at: 1_007, decide: decide)
                    == .recorded(
                        .init(idempotencyKey: "k5", token: "tok_first", amount: amount, declineCode: nil),
                        answerLost: false))
            await #expect(
                throws: LedgerError.corruptRow(column: "sandbox_card_tokens.behaviour", reason: "unknown value explode")
            ) {
                _ = try await ledger.chargeSandboxCard(
                    token: "tok_odd", amount: amount, idempotencyKey: "k6", at: 1_008, decide: decide)
            }

            // Refunds: once per key, never more than the charge, only of a charged charge.
            #expect(
                try await ledger.refundSandboxCharge(
                    chargeKey: "k1", amount: F.money(10_00), idempotencyKey: "r1", at: 2_000) == .recorded)
            #expect(
                try await ledger.refundSandboxCharge(
                    chargeKey: "k1", amount: F.money(1), idempotencyKey: "r1", at: 2_001)
                    == .stored(chargeKey: "k1", minorUnits: 10_00))
            #expect(
                try await ledger.refundSandboxCharge(
                    chargeKey: "k1", amount: F.money(2_51), idempotencyKey: "r2", at: 2_002)
                    == .exceedsCharge(left: F.money(2_50)))
            #expect(
                try await ledger.refundSandboxCharge(
                    chargeKey: "k1", amount: F.money(2_50), idempotencyKey: "r2", at: 2_003) == .recorded)
            #expect(
                try await ledger.refundSandboxCharge(
                    chargeKey: "k4", amount: F.money(1), idempotencyKey: "r3", at: 2_004) == .chargeNotFound)
            #expect(
                try await ledger.refundSandboxCharge(
                    chargeKey: "k9", amount: F.money(1), idempotencyKey: "r4", at: 2_005) == .chargeNotFound)
            #expect(
                try await ledger.refundSandboxCharge(
                    chargeKey: "k3", amount: F.money(1, .usd), idempotencyKey: "r5", at: 2_006)
                    == .currencyMismatch)
        }
    }
}
