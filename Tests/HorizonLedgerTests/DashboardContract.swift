import HorizonCore
import HorizonLedger
import HorizonProtocol
import Testing

/// The merchant dashboard's ledger rules (sessions, sign-in attempts, filtered pages, the
/// merchant's programs), on every store (`LedgerSuites.swift`).
extension LedgerContract {
    static func dashboardSessionsLiveInTheDatabase(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, _, _) = try await Fixture.shop(ledger)
            let hash = [UInt8](repeating: 0xAB, count: 32)
            try await ledger.createDashboardSession(
                tokenHash: hash, merchant: merchant.id, csrfSecret: "secret", at: 5_000, expiresAt: 6_000)
            let session = try #require(try await ledger.dashboardSession(tokenHash: hash, at: 5_999))
            #expect(session.merchantID == merchant.id)
            #expect(session.csrfSecret == "secret")
            #expect(session.createdAt == 5_000 && session.expiresAt == 6_000)
            #expect(try await ledger.dashboardSession(tokenHash: hash, at: 6_000) == nil)
            #expect(try await ledger.dashboardSession(tokenHash: [UInt8](repeating: 1, count: 32), at: 5_500) == nil)
            #expect(try await ledger.dashboardSessionCount(of: merchant.id, at: 5_500) == 1)
            #expect(try await ledger.deleteDashboardSession(tokenHash: hash))
            #expect(try await ledger.deleteDashboardSession(tokenHash: hash) == false)
            #expect(try await ledger.dashboardSession(tokenHash: hash, at: 5_500) == nil)

            // Expired sessions are cleared when a new one starts.
            try await ledger.createDashboardSession(
                tokenHash: hash, merchant: merchant.id, csrfSecret: "old", at: 7_000, expiresAt: 7_100)
            try await ledger.createDashboardSession(
                tokenHash: [UInt8](repeating: 2, count: 32), merchant: merchant.id, csrfSecret: "new", at: 8_000,
                expiresAt: 9_000)
            let rows = try await ledger.store.transaction { db in
                try await db.query("SELECT csrf_secret FROM dashboard_sessions")
            }
            #expect(try rows.map { try $0.text("csrf_secret") } == ["new"])

            await #expect(throws: LedgerError.invalidArgument("a session token hash is 32 bytes (SHA-256)")) {
                try await ledger.createDashboardSession(
                    tokenHash: [1, 2], merchant: merchant.id, csrfSecret: "x", at: 1, expiresAt: 2)
            }
            await #expect(throws: LedgerError.notFound("merchant m_nobody")) {
                try await ledger.createDashboardSession(
                    tokenHash: hash, merchant: MerchantID(rawValue: "m_nobody"), csrfSecret: "x", at: 1, expiresAt: 2)
            }
        }
    }

    static func signInAttemptsAreCountedPerKeyWithinTheWindow(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            #expect(
                try await ledger.recordSignInAttempt(keys: ["email:a", "address:1"], window: 100, at: 1_000)
                    == ["email:a": 1, "address:1": 1])
            #expect(
                try await ledger.recordSignInAttempt(keys: ["email:a", "address:1"], window: 100, at: 1_050)
                    == ["email:a": 2, "address:1": 2])
            #expect(
                try await ledger.recordSignInAttempt(keys: ["email:b", "address:1"], window: 100, at: 1_099)
                    == ["email:b": 1, "address:1": 3])
            // The first attempt is 100 s old now: out of the window, and deleted.
            #expect(try await ledger.recordSignInAttempt(keys: ["email:a"], window: 100, at: 1_100) == ["email:a": 2])
            let stored = try await ledger.store.transaction { db in
                try await db.query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM dashboard_sign_in_attempts").first?
                    .integer("n")
            }
            #expect(stored == 5)
        }
    }

    static func transactionPagesAreFilteredAndScopedToTheMerchant(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, _, key) = try await Fixture.shop(ledger, balance: 100_00)
            let (other, _, otherKey) = try await Fixture.shop(ledger, balance: 100_00, key: 2)
            for index in 0..<5 {
                _ = try await ledger.settle(
                    Fixture.payment(wallet: key, amount: 100 + Int64(index), registerUser: index < 2 ? "anna" : "ben"),
                    merchant: merchant.id, at: 10_000 + Int64(index) * 86_400)
            }
            _ = try await ledger.settle(Fixture.payment(wallet: otherKey, amount: 999), merchant: other.id, at: 10_000)
            _ = try await ledger.redeem(
                Fixture.redemption(.bonusRedemption, wallet: key, item: "Coffee", quantity: 1), merchant: merchant.id,
                at: 10_000 + 5 * 86_400)

            let all = try await ledger.transactions(of: merchant.id, filter: TransactionFilter(), limit: 4)
            #expect(all.transactions.map(\.transaction.result.amount.minorUnits).prefix(4) == [0, 104, 103, 102])
            let next = try #require(all.nextCursor)
            let rest = try await ledger.transactions(
                of: merchant.id, filter: TransactionFilter(), limit: 4, after: next)
            #expect(rest.transactions.map(\.transaction.result.amount.minorUnits) == [101, 100])
            #expect(rest.nextCursor == nil)

            let payments = try await ledger.transactions(
                of: merchant.id, filter: TransactionFilter(type: .payment), limit: 10)
            #expect(payments.transactions.count == 5)
            let anna = try await ledger.transactions(
                of: merchant.id, filter: TransactionFilter(registerUser: "anna"), limit: 10)
            #expect(anna.transactions.map(\.transaction.result.amount.minorUnits) == [101, 100])
            let days = try await ledger.transactions(
                of: merchant.id, filter: TransactionFilter(from: 10_000 + 86_400, to: 10_000 + 3 * 86_400),
                limit: 10)
            #expect(days.transactions.map(\.transaction.result.amount.minorUnits) == [102, 101])
            #expect(
                try await ledger.transactions(of: merchant.id, filter: TransactionFilter(), limit: 10)
                    .transactions.allSatisfy { $0.transaction.merchantID == merchant.id })

            let otherReference = try #require(
                try await ledger.transactions(of: other.id, filter: TransactionFilter(), limit: 10).transactions
                    .first?
                    .transaction.reference)
            #expect(try await ledger.transaction(reference: otherReference, of: merchant.id) == nil)
            #expect(try await ledger.transaction(reference: otherReference, of: other.id)?.merchantID == other.id)
            await #expect(throws: LedgerError.invalidArgument("a page holds 1 to 1000 transactions")) {
                try await ledger.transactions(of: merchant.id, filter: TransactionFilter(), limit: 0)
            }
        }
    }

    static func theMerchantsMembershipsAndCouponsAreListed(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, _) = try await Fixture.shop(ledger)
            let (other, otherWallet, _) = try await Fixture.shop(ledger, key: 2)
            try await ledger.grantGoldMembership(
                to: wallet.id, at: merchant.id, tier: "Gold", validFrom: 1_000, validUntil: 5_000)
            try await ledger.grantGoldMembership(
                to: otherWallet.id, at: other.id, tier: "Other", validFrom: 1_000, validUntil: 5_000)
            try await ledger.issueCoupon(
                code: "B", to: wallet.id, at: merchant.id, description: "second", value: Fixture.money(200),
                expiresAt: 9_000)
            try await ledger.issueCoupon(
                code: "A", to: wallet.id, at: merchant.id, description: "first", value: Fixture.money(100),
                expiresAt: 9_000)
            try await ledger.issueCoupon(
                code: "X", to: otherWallet.id, at: other.id, description: "other's", value: Fixture.money(100),
                expiresAt: 9_000)
            let members = try await ledger.goldMemberships(of: merchant.id)
            #expect(members.map(\.membership.tier) == ["Gold"])
            #expect(members.first?.walletName == "Alice")
            #expect(members.first?.walletID == wallet.id)
            let coupons = try await ledger.coupons(of: merchant.id)
            #expect(coupons.map(\.coupon.code) == ["A", "B"])
            #expect(coupons.first?.coupon.value == Fixture.money(100))
        }
    }
}
