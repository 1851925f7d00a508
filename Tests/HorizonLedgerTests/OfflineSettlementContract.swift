import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Testing

/// Offline settlement: payments terminals accepted offline settle once per id,
/// bounded by the wallet's daily tokens (the policy of `Ledger+OfflineSettlement.swift`), on
/// both stores (`LedgerSuites.swift`).
extension LedgerContract {
    /// Token times: issued at 1 000 for 24 h; payments accepted a little later.
    static let tokenIssuedAt: Int64 = 1_000

    static func offlineToken(
        _ ledger: Ledger, _ id: UInt8, wallet: WalletID, key: PublicKeyBytes, allowance: Int64 = 50_00,
        issuedAt: Int64 = tokenIssuedAt, validity: Int64 = 86_400
    ) async throws -> [UInt8] {
        let tokenID = [UInt8](repeating: id, count: 16)
        try await ledger.recordDailyToken(
            DailyTokenRecord(
                tokenID: tokenID, walletID: wallet, walletKey: key, allowance: F.money(allowance),
                balanceAtIssue: allowance, revocationDigest: [UInt8](repeating: 7, count: 32), issuedAt: issuedAt,
                expiresAt: issuedAt + validity, token: [id, 1, 2, 3]))
        return tokenID
    }

    static func offline(
        _ payment: SettlementRequest, token: [UInt8], acceptedAt: Int64 = tokenIssuedAt + 600
    ) -> OfflineSettlementRequest {
        OfflineSettlementRequest(payment: payment, tokenID: token, acceptedAt: acceptedAt)
    }

    /// A wallet spends its allowance at two terminals offline: the first arrivals are
    /// guaranteed (paid even beyond the balance, as the wallet's debt); the excess settles only
    /// when the balance covers it, else it is declined and the merchant is not paid.
    static func offlinePaymentsAreGuaranteedUpToOneAllowance(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            // Without enough balance: 30.00 on the account, a token for 50.00.
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 30_00)
            let token = try await offlineToken(ledger, 1, wallet: wallet.id, key: key)
            let first = F.payment(wallet: key, amount: 35_00, tip: 5_00, digest: 1)
            let second = F.payment(wallet: key, amount: 20_00, digest: 2)
            let third = F.payment(wallet: key, amount: 10_00, digest: 3)

            let firstResult = try await ledger.settleOffline(offline(first, token: token), merchant: merchant.id)
            guard case .approved(_, let earned, _) = firstResult.outcome else {
                Issue.record("the first arrival is guaranteed: \(firstResult.outcome)")
                return
            }
            #expect(earned == 35, "bonus points as for an online payment")
            // The balance paid 30.00, the server fronted 10.00 as the wallet's debt.
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(0))
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(10_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(40_00))
            #expect(
                try await ledger.transaction(for: first.paymentID)?.offline
                    == OfflineAcceptance(tokenID: token, acceptedAt: tokenIssuedAt + 600, guaranteed: true))

            // 40.00 + 20.00 is beyond the 50.00 guarantee, and the balance covers nothing.
            let declined = try await ledger.settleOffline(
                offline(second, token: token, acceptedAt: tokenIssuedAt + 700), merchant: merchant.id)
            #expect(declined.outcome.declineCode == .offlineAllowanceExceeded)
            guard case .declined(_, let reason) = declined.outcome else { return }
            #expect(
                reason
                    == "this offline payment of 20.00 EUR goes beyond the wallet's offline guarantee (40.00 EUR of 50.00 EUR already spent offline) and the wallet's balance does not cover it; the merchant is not paid for it"
            )
            #expect(try await ledger.balance(of: merchant.id) == F.money(40_00), "the merchant is not paid")
            #expect(
                try await ledger.transaction(for: second.paymentID)?.offline
                    == OfflineAcceptance(tokenID: token, acceptedAt: tokenIssuedAt + 700, guaranteed: false))
            // 40.00 + 10.00 fits the guarantee whole: paid, all of it as debt.
            #expect(
                try await ledger.settleOffline(offline(third, token: token), merchant: merchant.id).outcome.isApproved)
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(20_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(50_00))

            // The debt: online payments decline until a top-up repaid it, which it does first.
            let online = try await ledger.settle(F.payment(wallet: key, amount: 1_00, digest: 4), merchant: merchant.id)
            #expect(online.outcome.declineCode == .insufficientFunds)
            try await ledger.deposit(F.money(15_00), to: wallet.id)
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(5_00))
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(0))
            try await ledger.deposit(F.money(25_00), to: wallet.id)
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(0))
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(20_00))
            #expect(
                try await ledger.settle(F.payment(wallet: key, amount: 1_00, digest: 5), merchant: merchant.id).outcome
                    .isApproved)
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])

            // With enough balance: the excess beyond the guarantee is paid by the balance, as online.
            let (shop, rich, richKey) = try await F.shop(ledger, balance: 100_00, key: 2)
            let richToken = try await offlineToken(ledger, 2, wallet: rich.id, key: richKey)
            let payments = [40_00, 20_00, 10_00].enumerated().map { index, amount in
                F.payment(wallet: richKey, amount: Int64(amount), digest: UInt8(10 + index))
            }
            var guaranteed: [Bool] = []
            for payment in payments {
                let result = try await ledger.settleOffline(offline(payment, token: richToken), merchant: shop.id)
                #expect(result.outcome.isApproved)
                guaranteed.append(
                    try #require(try await ledger.transaction(for: payment.paymentID)?.offline).guaranteed)
            }
            #expect(guaranteed == [true, false, false])
            #expect(try await ledger.balance(of: rich.id, in: .eur) == F.money(30_00))
            #expect(try await ledger.offlineDebt(of: rich.id, in: .eur) == F.money(0))
            #expect(try await ledger.balance(of: shop.id) == F.money(70_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// Two tokens valid at once (after a refresh) give one guarantee: the largest allowance, not
    /// the sum.
    static func overlappingTokensDoNotDoubleTheGuarantee(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 0)
            let older = try await offlineToken(ledger, 1, wallet: wallet.id, key: key, allowance: 50_00)
            let newer = try await offlineToken(
                ledger, 2, wallet: wallet.id, key: key, allowance: 30_00, issuedAt: tokenIssuedAt + 100)
            let underOlder = F.payment(wallet: key, amount: 40_00, digest: 1)
            let underNewer = F.payment(wallet: key, amount: 30_00, digest: 2)
            let last = F.payment(wallet: key, amount: 10_00, digest: 3)
            #expect(
                try await ledger.settleOffline(offline(underOlder, token: older), merchant: merchant.id).outcome
                    .isApproved)
            // Each within its own token, but 40.00 + 30.00 exceeds the largest allowance (50.00).
            let refused = try await ledger.settleOffline(offline(underNewer, token: newer), merchant: merchant.id)
            #expect(refused.outcome.declineCode == .offlineAllowanceExceeded)
            #expect(
                try await ledger.settleOffline(offline(last, token: newer), merchant: merchant.id).outcome.isApproved)
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(50_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(50_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// The backdating attack: a merchant holds five offline payments of a wallet with 50.00, one
    /// per token period (tokens of an hour that never overlap, each allowing 50.00), and forwards
    /// them together. Each fits its own period's guarantee, but the wallet's debt is bounded over
    /// all of them: the balance and one allowance are paid, nothing more. A top-up repays the
    /// debt, and the guarantee is there again.
    static func offlineDebtIsBoundedPerWalletAcrossTokenPeriods(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 50_00)
            var results: [SettlementResult] = []
            for period in 0..<5 {
                let issuedAt = tokenIssuedAt + Int64(period) * 3_600
                let token = try await offlineToken(
                    ledger, UInt8(period + 1), wallet: wallet.id, key: key, issuedAt: issuedAt, validity: 3_600)
                let payment = F.payment(wallet: key, amount: 50_00, digest: UInt8(period + 1))
                results.append(
                    try await ledger.settleOffline(
                        offline(payment, token: token, acceptedAt: issuedAt + 600), merchant: merchant.id))
            }
            #expect(results.map(\.outcome.isApproved) == [true, true, false, false, false])
            #expect(results.dropFirst(2).allSatisfy { $0.outcome.declineCode == .offlineAllowanceExceeded })
            guard case .declined(_, let reason) = results[2].outcome else { return }
            #expect(
                reason
                    == "this offline payment of 50.00 EUR goes beyond the wallet's offline guarantee (the wallet already owes 50.00 EUR for offline payments, of at most 50.00 EUR guaranteed) and the wallet's balance does not cover it; the merchant is not paid for it"
            )
            #expect(try await ledger.balance(of: merchant.id) == F.money(100_00), "the balance and one allowance")
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(50_00))
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(0))

            // Existing debt counts: even a small payment in a fresh period is beyond the guarantee.
            let fresh = try await offlineToken(
                ledger, 9, wallet: wallet.id, key: key, issuedAt: tokenIssuedAt + 5 * 3_600, validity: 3_600)
            let small = F.payment(wallet: key, amount: 1_00, digest: 9)
            #expect(
                try await ledger.settleOffline(
                    offline(small, token: fresh, acceptedAt: tokenIssuedAt + 5 * 3_600 + 60), merchant: merchant.id
                ).outcome.declineCode == .offlineAllowanceExceeded)
            // Repaid by a top-up (10.00 left on the balance): guaranteed again, up to one allowance.
            try await ledger.deposit(F.money(60_00), to: wallet.id)
            let afterTopUp = F.payment(wallet: key, amount: 40_00, digest: 10)
            #expect(
                try await ledger.settleOffline(
                    offline(afterTopUp, token: fresh, acceptedAt: tokenIssuedAt + 5 * 3_600 + 120),
                    merchant: merchant.id
                ).outcome.isApproved)
            #expect(try await ledger.transaction(for: afterTopUp.paymentID)?.offline?.guaranteed == true)
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(30_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(140_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// A lost phone: the person restores the wallet on a new device, which revokes the old key.
    /// A payment the old device made offline before the revocation is the wallet's; one accepted
    /// at or after it is not charged to the restored account, and the merchant is not paid.
    static func offlinePaymentsAfterTheKeyWasRevokedAreNotCharged(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, lost) = try await F.shop(ledger, balance: 100_00)
            let token = try await offlineToken(ledger, 1, wallet: wallet.id, key: lost)
            let revokedAt = tokenIssuedAt + 1_200
            try await ledger.addWalletKey(F.key(2), to: wallet.id, at: revokedAt)
            #expect(try await ledger.revokeWalletKey(lost, at: revokedAt))

            let before = F.payment(wallet: lost, amount: 20_00, digest: 1)
            #expect(
                try await ledger.settleOffline(
                    offline(before, token: token, acceptedAt: revokedAt - 1), merchant: merchant.id
                ).outcome.isApproved)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(80_00))

            for (index, acceptedAt) in [revokedAt, revokedAt + 600].enumerated() {
                let after = F.payment(wallet: lost, amount: 30_00, digest: UInt8(2 + index))
                let result = try await ledger.settleOffline(
                    offline(after, token: token, acceptedAt: acceptedAt), merchant: merchant.id)
                #expect(result.outcome.declineCode == .unknownWallet)
                guard case .declined(_, let reason) = result.outcome else { continue }
                #expect(
                    reason
                        == "this wallet key was revoked at \(revokedAt), before the payment was accepted offline at \(acceptedAt); the wallet is not charged and the merchant is not paid for it"
                )
                #expect(try await ledger.transaction(for: after.paymentID)?.offline?.guaranteed == false)
            }
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(80_00))
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(0))
            #expect(try await ledger.balance(of: merchant.id) == F.money(20_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// The payment id is the key, whichever way the payment came first: a repeat gets the first
    /// result, the same id with other terms is a conflict, nothing is posted twice.
    static func offlinePaymentsExecuteOnce(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 100_00)
            let token = try await offlineToken(ledger, 1, wallet: wallet.id, key: key)

            // Online first (the terminal timed out and kept it offline), then forwarded offline.
            let payment = F.payment(wallet: key, amount: 12_00, digest: 1)
            let online = try await ledger.settle(payment, merchant: merchant.id)
            #expect(try await ledger.settleOffline(offline(payment, token: token), merchant: merchant.id) == online)
            #expect(try await ledger.transaction(for: payment.paymentID)?.offline == nil)

            // Offline, again offline, then online: the first result each time.
            let forwarded = F.payment(wallet: key, amount: 8_00, digest: 2)
            let first = try await ledger.settleOffline(offline(forwarded, token: token), merchant: merchant.id)
            #expect(first.outcome.isApproved)
            #expect(try await ledger.settleOffline(offline(forwarded, token: token), merchant: merchant.id) == first)
            #expect(try await ledger.settle(forwarded, merchant: merchant.id) == first)
            for id in [payment.paymentID, forwarded.paymentID] { #expect(try await ledger.executionCount(of: id) == 1) }
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(80_00))

            // The same id with another amount or another signed confirmation: refused, nothing moved.
            let otherAmount = F.payment(forwarded.paymentID, wallet: key, amount: 9_00, digest: 2)
            let otherDigest = F.payment(forwarded.paymentID, wallet: key, amount: 8_00, digest: 9)
            for other in [otherAmount, otherDigest] {
                await #expect(throws: LedgerError.conflictingRetry(forwarded.paymentID)) {
                    try await ledger.settleOffline(offline(other, token: token), merchant: merchant.id)
                }
            }
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(80_00))

            // Concurrent submissions of one id (two forwards racing): one execution.
            let raced = F.payment(wallet: key, amount: 5_00, digest: 3)
            let results = try await withThrowingTaskGroup(of: SettlementResult.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await ledger.settleOffline(offline(raced, token: token), merchant: merchant.id)
                    }
                }
                var results: [SettlementResult] = []
                for try await result in group { results.append(result) }
                return results
            }
            #expect(results.count == 10 && results.allSatisfy { $0 == results[0] && $0.outcome.isApproved })
            #expect(try await ledger.executionCount(of: raced.paymentID) == 1)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(75_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// Payments from several terminals arriving at once never guarantee more than one allowance.
    static func concurrentOfflinePaymentsStayWithinTheGuarantee(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 0)
            let token = try await offlineToken(ledger, 1, wallet: wallet.id, key: key)
            let payments = (0..<10).map { F.payment(wallet: key, amount: 10_00, digest: UInt8($0)) }
            let results = try await withThrowingTaskGroup(of: SettlementResult.self) { group in
                for payment in payments {
                    group.addTask {
                        try await ledger.settleOffline(offline(payment, token: token), merchant: merchant.id)
                    }
                }
                var results: [SettlementResult] = []
                for try await result in group { results.append(result) }
                return results
            }
            #expect(results.filter(\.outcome.isApproved).count == 5)
            #expect(results.filter { $0.outcome.declineCode == .offlineAllowanceExceeded }.count == 5)
            #expect(try await ledger.offlineDebt(of: wallet.id, in: .eur) == F.money(50_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(50_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// The ledger's own guards on the token (the server checks first, with its own codes).
    static func offlineTokenGuards(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 100_00)
            let other = try await ledger.createWallet(name: "Bob", publicKey: F.key(2))
            let token = try await offlineToken(ledger, 1, wallet: wallet.id, key: key)
            let bobsToken = try await offlineToken(ledger, 2, wallet: other.id, key: F.key(2))
            let payment = F.payment(wallet: key, amount: 10_00)
            let hex = token.hexString
            await #expect(throws: LedgerError.notFound("daily token \([UInt8](repeating: 9, count: 16).hexString)")) {
                try await ledger.settleOffline(
                    offline(payment, token: [UInt8](repeating: 9, count: 16)), merchant: merchant.id)
            }
            await #expect(
                throws: LedgerError.invalidArgument(
                    "daily token \(bobsToken.hexString) belongs to another wallet key than the one that signed the payment"
                )
            ) {
                try await ledger.settleOffline(offline(payment, token: bobsToken), merchant: merchant.id)
            }
            await #expect(
                throws: LedgerError.invalidArgument(
                    "daily token \(hex) was not valid when the payment was accepted (87400; valid 1000 to 87400)")
            ) {
                try await ledger.settleOffline(
                    offline(payment, token: token, acceptedAt: 87_400), merchant: merchant.id)
            }
            await #expect(
                throws: LedgerError.invalidArgument(
                    "the payment's 50.01 EUR is more than daily token \(hex) allows (50.00 EUR)")
            ) {
                try await ledger.settleOffline(
                    offline(F.payment(wallet: key, amount: 50_00, tip: 1), token: token), merchant: merchant.id)
            }
            #expect(try await ledger.executionCount(of: payment.paymentID) == 0)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(100_00))
        }
    }

    /// Migration 10 keeps every account and transaction; a wallet still never goes below zero, a
    /// debt above zero is an audit violation, offline columns set in part are an error to read.
    static func offlineSettlementMigratesAVersion9Database(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            // A database as version 9 left it: a wallet funded with 20.00 by one balanced entry.
            #expect(try await LedgerSchema.migrate(store, to: 9, at: 500) == 9)
            let key = F.key(1)
            try await store.transaction { db in
                try await db.query(
                    "INSERT INTO merchants(id, name, currency, admin_email, created_at) VALUES ('m_old', 'Old Shop', 'EUR', 'old@shop.example', 500)"
                )
                try await db.query("INSERT INTO wallets(id, name, created_at) VALUES ('w_old', 'Bob', 500)")
                try await db.query(
                    "INSERT INTO wallet_keys(public_key, wallet_id, added_at) VALUES (?, 'w_old', 500)",
                    [.blob(key.bytes)])
                try await db.query(
                    "INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (7, 'external', 'external', 'EUR', -2000)"
                )
                try await db.query(
                    "INSERT INTO accounts(id, kind, owner_id, currency, balance) VALUES (8, 'wallet', 'w_old', 'EUR', 2000)"
                )
                try await db.query("INSERT INTO entries(id, kind, created_at) VALUES (3, 'deposit', 500)")
                try await db.query(
                    "INSERT INTO postings(entry_id, account_id, currency, amount) VALUES (3, 7, 'EUR', -2000)")
                try await db.query(
                    "INSERT INTO postings(entry_id, account_id, currency, amount) VALUES (3, 8, 'EUR', 2000)")
            }
            let ledger = try await Ledger.open(store)
            #expect(try await ledger.schemaVersion() == LedgerSchema.currentVersion)
            let wallet = WalletID(rawValue: "w_old")
            #expect(try await ledger.balance(of: wallet, in: .eur) == F.money(20_00))
            #expect(try await LedgerAudit.violations(in: store) == [])
            // Version 11 rebuilt SQLite's entries (the kind checked by comparisons): the entry keeps
            // its id under its postings, and a kind outside the list is still refused.
            let entries = try await store.transaction { db in
                try await db.query("SELECT id, kind FROM entries ORDER BY id").map {
                    "\(try $0.integer("id")) \(try $0.text("kind"))"
                }
            }
            #expect(entries == ["3 deposit"])
            await #expect(throws: LedgerError.self) {
                try await store.transaction { db in
                    try await db.query("INSERT INTO entries(id, kind, created_at) VALUES (1000, 'gift', 501)")
                }
            }
            let merchant = try await ledger.createMerchant(name: "Café", currency: .eur, adminEmail: "c@cafe.example")
            let paid = try await ledger.settle(F.payment(wallet: key, amount: 5_00), merchant: merchant.id)
            #expect(paid.outcome.isApproved)
            #expect(try await ledger.transaction(for: paid.paymentID)?.offline == nil)
            let token = try await offlineToken(ledger, 1, wallet: wallet, key: key)
            let fronted = F.payment(wallet: key, amount: 25_00, digest: 2)
            #expect(
                try await ledger.settleOffline(offline(fronted, token: token), merchant: merchant.id).outcome.isApproved
            )
            #expect(try await ledger.offlineDebt(of: wallet, in: .eur) == F.money(10_00))
            #expect(try await LedgerAudit.violations(in: store) == [])
            // The wallet's own account still never goes below zero; the debt is an account of its own.
            await #expect(throws: LedgerError.self) {
                try await ledger.store.transaction { db in
                    try await db.query("UPDATE accounts SET balance = -1 WHERE kind = 'wallet'")
                }
            }
            // A debt above zero (changed outside Horizon, so its postings no longer add up either)
            // is found by the audit.
            try await ledger.store.transaction { db in
                try await db.query(
                    "UPDATE accounts SET balance = balance + 1001 WHERE owner_id = 'offline_debt:w_old'")
                try await db.query("UPDATE accounts SET balance = balance - 1001 WHERE kind = 'merchant'")
            }
            let violations = try await LedgerAudit.violations(in: store)
            #expect(violations.contains { $0.hasPrefix("an offline debt account is above zero") }, "\(violations)")
            try await ledger.store.transaction { db in
                try await db.query(
                    "UPDATE transactions SET offline_guaranteed = NULL WHERE offline_token_id IS NOT NULL")
            }
            await #expect(
                throws: LedgerError.corruptRow(
                    column: "offline_token_id", reason: "the offline columns are set in part")
            ) {
                _ = try await ledger.transaction(for: fronted.paymentID)
            }
        }
    }
}
