import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import Testing

/// The sandbox card processor: each test number's behaviour, idempotency
/// keys, `lookup` after a timeout, refunds, and its state shared by two "processes" (two
/// stores on one database). On both stores, like the ledger's contract.
@Suite("Sandbox card processor")
struct SandboxCardProcessorTests {
    static let euros = try! Money(minorUnits: 12_50, currency: .eur)

    static func card(_ number: String, cvc: String = "123", brand: CardBrand = .visa) -> CardDetails {
        CardDetails(
            number: number, expiryMonth: 12, expiryYear: 2030, cvc: cvc, cardholder: "Alice Smith", brand: brand)
    }

    /// SQLite, and PostgreSQL when a test database is configured (HORIZON_TEST_POSTGRES_URL).
    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]

    /// Two processors over two stores of one database, as two server processes have, and the
    /// first one's ledger (to count what the database holds).
    static func withTwoProcessors(
        _ kind: StoreKind, _ body: (SandboxCardProcessor, SandboxCardProcessor, Ledger) async throws -> Void
    ) async throws {
        try await TestStores.withStores(kind) { store, another in
            let first = try await Ledger.open(store)
            let second = try await Ledger.open(try another())
            do {
                try await body(SandboxCardProcessor(ledger: first), SandboxCardProcessor(ledger: second), first)
            } catch {
                await second.close()
                throw error
            }
            await second.close()
        }
    }

    @Test(arguments: stores)
    func eachTestNumberBehavesAsDocumented(_ kind: StoreKind) async throws {
        try await Self.withTwoProcessors(kind) { sandbox, _, _ in
            let expected: [(String, CardCharge.Outcome?, Bool)] = [
                ("4242424242424242", .charged, false),
                ("5555555555554444", .charged, false),
                ("378282246310005", .charged, false),
                (
                    "4000000000000002", .declined(code: "card_declined", reason: "the card was declined by its issuer"),
                    false
                ),
                (
                    "4000000000009995",
                    .declined(code: "insufficient_funds", reason: "the card has insufficient funds for this amount"),
                    false
                ),
                ("4000000000003220", .charged, true),
            ]
            for (number, outcome, challenge) in expected {
                let token = try await sandbox.tokenize(Self.card(number), at: 100)
                #expect(token.requiresChallenge == challenge, "\(number)")
                #expect(token.token.hasPrefix("tok_"))
                let charge = try await sandbox.charge(
                    token: token.token, amount: Self.euros, idempotencyKey: "pay-\(number)", at: 101)
                #expect(charge.outcome == outcome, "\(number)")
                #expect(try await sandbox.lookup(idempotencyKey: "pay-\(number)") == charge)
            }
            await #expect(
                throws: CardProcessorError.cardNotAccepted(
                    "the sandbox card processor accepts only its test card numbers (for example 4242 4242 4242 4242, "
                        + "see docs/terminal-and-wallet.md, \"Cards\"); no real card is charged on this server")
            ) {
                _ = try await sandbox.tokenize(Self.card("4111111111111111"), at: 100)
            }
            await #expect(throws: CardProcessorError.unknownToken) {
                _ = try await sandbox.charge(token: "tok_made_up", amount: Self.euros, idempotencyKey: "k", at: 1)
            }
            #expect(try await sandbox.lookup(idempotencyKey: "never-used") == nil)
        }
    }

    @Test(arguments: stores)
    func aKeyChargesOnceAndOtherTermsConflict(_ kind: StoreKind) async throws {
        try await Self.withTwoProcessors(kind) { first, second, ledger in
            let token = try await first.tokenize(Self.card("4242424242424242"), at: 100).token
            let charge = try await first.charge(token: token, amount: Self.euros, idempotencyKey: "p1", at: 101)
            // The other process answers the retry with the same charge.
            #expect(try await second.charge(token: token, amount: Self.euros, idempotencyKey: "p1", at: 102) == charge)
            let other = try Money(minorUnits: 13_00, currency: .eur)
            await #expect(throws: CardProcessorError.idempotencyConflict("p1")) {
                _ = try await second.charge(token: token, amount: other, idempotencyKey: "p1", at: 103)
            }
            try await Self.expectCharges(ledger, count: 1)
        }
    }

    /// Timeout after the charge: the answer is lost, `lookup` finds the charge, a retry gets it.
    @Test(arguments: stores)
    func aTimeoutAfterChargingIsFoundByLookup(_ kind: StoreKind) async throws {
        try await Self.withTwoProcessors(kind) { first, second, ledger in
            let token = try await first.tokenize(Self.card("4000000000000119"), at: 100).token
            await #expect(throws: CardProcessorError.timeout) {
                _ = try await first.charge(token: token, amount: Self.euros, idempotencyKey: "p2", at: 101)
            }
            let found = try #require(try await second.lookup(idempotencyKey: "p2"))
            #expect(found.outcome == .charged && found.amount == Self.euros)
            #expect(try await second.charge(token: token, amount: Self.euros, idempotencyKey: "p2", at: 102) == found)
            try await Self.expectCharges(ledger, count: 1)
        }
    }

    /// Timeout before the charge: nothing happened, `lookup` says so, the retry charges once.
    @Test(arguments: stores)
    func aTimeoutBeforeChargingIsRetried(_ kind: StoreKind) async throws {
        try await Self.withTwoProcessors(kind) { first, second, ledger in
            let token = try await first.tokenize(Self.card("4000000000000127"), at: 100).token
            await #expect(throws: CardProcessorError.timeout) {
                _ = try await first.charge(token: token, amount: Self.euros, idempotencyKey: "p3", at: 101)
            }
            #expect(try await second.lookup(idempotencyKey: "p3") == nil)
            try await Self.expectCharges(ledger, count: 0)
            let charge = try await second.charge(token: token, amount: Self.euros, idempotencyKey: "p3", at: 102)
            #expect(charge.outcome == .charged)
            #expect(try await first.lookup(idempotencyKey: "p3") == charge)
            // A new payment on the same card is lost once more, as its first attempt.
            await #expect(throws: CardProcessorError.timeout) {
                _ = try await first.charge(token: token, amount: Self.euros, idempotencyKey: "p4", at: 103)
            }
            try await Self.expectCharges(ledger, count: 1)
        }
    }

    @Test(arguments: stores)
    func refundsNeverExceedTheCharge(_ kind: StoreKind) async throws {
        try await Self.withTwoProcessors(kind) { first, second, ledger in
            let token = try await first.tokenize(Self.card("4242424242424242"), at: 100).token
            _ = try await first.charge(token: token, amount: Self.euros, idempotencyKey: "p5", at: 101)
            let five = try Money(minorUnits: 5_00, currency: .eur)
            let refund = try await first.refund(chargeKey: "p5", amount: five, idempotencyKey: "r1", at: 102)
            #expect(refund == CardRefund(idempotencyKey: "r1", chargeKey: "p5", amount: five))
            // The same refund id: the stored refund; with other terms: refused.
            #expect(try await second.refund(chargeKey: "p5", amount: five, idempotencyKey: "r1", at: 103) == refund)
            await #expect(throws: CardProcessorError.idempotencyConflict("r1")) {
                _ = try await second.refund(
                    chargeKey: "p5", amount: try Money(minorUnits: 1, currency: .eur), idempotencyKey: "r1", at: 103)
            }
            // 7.50 is left: 8.00 is refused, 7.50 goes through, then nothing is left.
            await #expect(
                throws: CardProcessorError.refundExceedsCharge(left: try Money(minorUnits: 7_50, currency: .eur))
            ) {
                _ = try await second.refund(
                    chargeKey: "p5", amount: try Money(minorUnits: 8_00, currency: .eur), idempotencyKey: "r2", at: 104)
            }
            _ = try await second.refund(
                chargeKey: "p5", amount: try Money(minorUnits: 7_50, currency: .eur), idempotencyKey: "r3", at: 105)
            await #expect(
                throws: CardProcessorError.refundExceedsCharge(left: try Money(minorUnits: 0, currency: .eur))
            ) {
                _ = try await first.refund(
                    chargeKey: "p5", amount: try Money(minorUnits: 1, currency: .eur), idempotencyKey: "r4", at: 106)
            }
            // A declined charge, or none, cannot be refunded.
            let declined = try await first.tokenize(Self.card("4000000000000002"), at: 100).token
            _ = try await first.charge(token: declined, amount: Self.euros, idempotencyKey: "p6", at: 101)
            await #expect(throws: CardProcessorError.chargeNotFound("p6")) {
                _ = try await first.refund(chargeKey: "p6", amount: five, idempotencyKey: "r5", at: 107)
            }
            await #expect(throws: CardProcessorError.chargeNotFound("nope")) {
                _ = try await first.refund(chargeKey: "nope", amount: five, idempotencyKey: "r6", at: 107)
            }
        }
    }

    /// How many charges the sandbox's table holds: a retry or a lost answer must not add one.
    static func expectCharges(_ ledger: Ledger, count: Int64, sourceLocation: SourceLocation = #_sourceLocation)
        async throws
    {
        let rows = try await ledger.store.transaction { db in
            try await db.query("SELECT COUNT(*) AS n FROM sandbox_card_charges").first?.integer("n")
        }
        #expect(rows == count, sourceLocation: sourceLocation)
    }
}
