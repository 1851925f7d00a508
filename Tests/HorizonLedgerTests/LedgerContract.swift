import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Testing

/// What every store must do, written once; `LedgerSuites.swift` runs each on SQLite and on
/// PostgreSQL.
enum LedgerContract {
    typealias F = Fixture

    // MARK: Migrations

    static func migratesAnEmptyDatabase(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            let ledger = try await Ledger.open(store)
            #expect(try await ledger.schemaVersion() == LedgerSchema.currentVersion)
            let versions = try await store.transaction { db in
                try await db.query("SELECT version, name FROM schema_migrations ORDER BY version").map {
                    try $0.integer("version")
                }
            }
            #expect(versions == Array(1...Int64(LedgerSchema.currentVersion)))
            // Opening again applies nothing and loses nothing.
            _ = try await ledger.createMerchant(name: "Kiosk", currency: .eur, adminEmail: "k@kiosk.example")
            let again = try await Ledger.open(store)
            #expect(try await again.merchants().map(\.name) == ["Kiosk"])
            #expect(try await again.schemaVersion() == LedgerSchema.currentVersion)
        }
    }

    static func migratesAnOlderDatabase(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            // A database as version 1 left it: merchants, wallets and money, no loyalty tables.
            #expect(try await LedgerSchema.migrate(store, to: 1, at: 500) == 1)
            try await store.transaction { db in
                try await db.query(
                    "INSERT INTO merchants(id, name, currency, admin_email, created_at) VALUES ('m_old', 'Old Shop', 'EUR', 'old@shop.example', 500)"
                )
                try await db.query("INSERT INTO wallets(id, name, created_at) VALUES ('w_old', 'Bob', 500)")
                try await db.query(
                    "INSERT INTO wallet_keys(public_key, wallet_id, added_at) VALUES (?, 'w_old', 500)",
                    [.blob(F.key(42).bytes)])
            }
            let ledger = try await Ledger.open(store)
            #expect(try await ledger.schemaVersion() == LedgerSchema.currentVersion)
            let merchant = try await ledger.merchant(MerchantID(rawValue: "m_old"))
            #expect(merchant.name == "Old Shop")
            #expect(merchant.bonusPointsPerMajorUnit == 1)  // the column version 2 added, at its default
            let wallet = WalletID(rawValue: "w_old")
            try await ledger.deposit(F.money(50_00), to: wallet)
            let result = try await ledger.settle(F.payment(wallet: F.key(42), amount: 12_34), merchant: merchant.id)
            guard case .approved(_, let earned, let balance) = result.outcome else {
                Issue.record("expected an approval, got \(result.outcome)")
                return
            }
            #expect(earned == 12 && balance == 12)
            #expect(try await ledger.bonusPoints(of: wallet, at: merchant.id) == 12)
            #expect(try await LedgerAudit.violations(in: store) == [])
        }
    }

    static func refusesANewerSchema(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            _ = try await Ledger.open(store)
            let future = Int64(LedgerSchema.currentVersion + 7)
            try await store.transaction { db in
                try await db.query(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, 'from the future', 0)",
                    [.integer(future)])
            }
            await #expect(throws: LedgerError.schemaTooNew(found: Int(future), supported: LedgerSchema.currentVersion))
            {
                _ = try await Ledger.open(store)
            }
        }
    }

    /// A rolling upgrade: a newer program migrated the database with an expand step (a table, a
    /// nullable column, a column with a default) while this one still serves. This program
    /// opens it as it is, pays on it, and the books hold.
    static func runsOnANewerSchemaThatOnlyExpanded(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            let older = try await Ledger.open(store)
            let shop = try await F.shop(older)
            let future = Int64(LedgerSchema.currentVersion + 1)
            try await store.transaction { db in
                try await db.query(
                    "CREATE TABLE future_receipts(payment_id \(kind == .sqlite ? "BLOB" : "BYTEA") PRIMARY KEY, note TEXT)"
                )
                try await db.query("ALTER TABLE transactions ADD COLUMN future_note TEXT")
                try await db.query(
                    "ALTER TABLE wallets ADD COLUMN future_flag \(kind == .sqlite ? "INTEGER" : "BIGINT") NOT NULL DEFAULT 0"
                )
                try await db.query(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, 'a newer program expanded', 0)",
                    [.integer(future)])
                try await db.query(
                    "INSERT INTO schema_step_kinds(version, kind) VALUES (?, 'expand')", [.integer(future)])
            }
            let ledger = try await Ledger.open(store)
            #expect(try await ledger.schemaVersion() == Int(future))
            let id = F.paymentID()
            let result = try await ledger.settle(
                F.payment(id, wallet: shop.key, amount: 4_20), merchant: shop.merchant.id)
            #expect(result.outcome.isApproved)
            let again = try await ledger.settle(
                F.payment(id, wallet: shop.key, amount: 4_20), merchant: shop.merchant.id)
            #expect(again.settledAt == result.settledAt && again.outcome == result.outcome)
            #expect(try await ledger.executionCount(of: id) == 1)
            #expect(try await ledger.balance(of: shop.wallet.id, in: .eur) == F.money(100_00 - 4_20))
            #expect(try await LedgerAudit.violations(in: store) == [])
        }
    }

    /// A newer program's contract step (or a step whose kind was not recorded) stops this one:
    /// its statements might no longer fit the tables.
    static func refusesANewerSchemaThatContracted(_ kind: StoreKind) async throws {
        try await TestStores.withStore(kind) { store in
            _ = try await Ledger.open(store)
            let current = Int64(LedgerSchema.currentVersion)
            try await store.transaction { db in
                for (offset, stepKind) in [(1, "expand"), (2, "contract"), (3, "expand")] {
                    try await db.query(
                        "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, 'newer', 0)",
                        [.integer(current + Int64(offset))])
                    try await db.query(
                        "INSERT INTO schema_step_kinds(version, kind) VALUES (?, ?)",
                        [.integer(current + Int64(offset)), .text(stepKind)])
                }
            }
            await #expect(throws: LedgerError.schemaTooNew(found: Int(current + 3), supported: Int(current))) {
                _ = try await Ledger.open(store)
            }
        }
    }

    // MARK: Merchants, wallets, register users

    static func merchantsWalletsAndRegisterUsers(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let cafe = try await ledger.createMerchant(
                name: "Café", currency: .eur, adminEmail: " Owner@Cafe.example ", at: 10)
            #expect(cafe.adminEmail == "owner@cafe.example" && cafe.currency == .eur && cafe.createdAt == 10)
            await #expect(throws: LedgerError.alreadyExists("a merchant with admin e-mail owner@cafe.example")) {
                _ = try await ledger.createMerchant(name: "Other", currency: .usd, adminEmail: "owner@cafe.example")
            }
            await #expect(throws: LedgerError.self) {
                _ = try await ledger.createMerchant(name: "No mail", currency: .usd, adminEmail: "not-an-address")
            }
            let diner = try await ledger.createMerchant(
                name: "Diner", currency: .usd, adminEmail: "d@diner.example", at: 11)
            #expect(try await ledger.merchants().map(\.id) == [cafe.id, diner.id])
            #expect(try await ledger.merchant(adminEmail: "D@Diner.example")?.id == diner.id)
            await #expect(throws: LedgerError.notFound("merchant m_nope")) {
                _ = try await ledger.merchant(MerchantID(rawValue: "m_nope"))
            }

            try await ledger.addRegisterUser(id: "007", name: "James", to: cafe.id)
            try await ledger.addRegisterUser(id: "001", name: "Ada", to: cafe.id)
            try await ledger.addRegisterUser(id: "007", name: "Other James", to: diner.id)  // ids are per merchant
            await #expect(throws: LedgerError.alreadyExists("register user 007 of merchant \(cafe.id)")) {
                try await ledger.addRegisterUser(id: "007", name: "Again", to: cafe.id)
            }
            #expect(try await ledger.registerUsers(of: cafe.id).map(\.id) == ["001", "007"])
            #expect(try await ledger.removeRegisterUser(id: "007", from: cafe.id))
            #expect(try await !ledger.removeRegisterUser(id: "007", from: cafe.id))
            #expect(try await ledger.registerUsers(of: cafe.id).map(\.name) == ["Ada"])
            #expect(try await ledger.registerUsers(of: diner.id).map(\.name) == ["Other James"])

            let wallet = try await ledger.createWallet(name: "Alice", publicKey: F.key(1))
            await #expect(throws: LedgerError.alreadyExists("a wallet with this key")) {
                _ = try await ledger.createWallet(name: "Mallory", publicKey: F.key(1))
            }
            #expect(try await ledger.wallet(forKey: F.key(1))?.id == wallet.id)
            // A restored device: a new key for the same account, the old one revoked.
            try await ledger.addWalletKey(F.key(2), to: wallet.id)
            #expect(try await ledger.revokeWalletKey(F.key(1)))
            #expect(try await !ledger.revokeWalletKey(F.key(1)))
            #expect(try await ledger.wallet(forKey: F.key(1)) == nil)
            #expect(try await ledger.wallet(forKey: F.key(2))?.id == wallet.id)
        }
    }

    // MARK: Money

    static func postingsSumToZeroPerCurrency(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let cafe = try await ledger.createMerchant(name: "Café", currency: .eur, adminEmail: "c@cafe.example")
            let diner = try await ledger.createMerchant(name: "Diner", currency: .usd, adminEmail: "d@diner.example")
            let sushi = try await ledger.createMerchant(name: "Sushi", currency: .jpy, adminEmail: "s@sushi.example")
            let alice = try await ledger.createWallet(name: "Alice", publicKey: F.key(1))
            let bob = try await ledger.createWallet(name: "Bob", publicKey: F.key(2))
            try await ledger.deposit(F.money(100_00), to: alice.id)
            try await ledger.deposit(F.money(20_00, .usd), to: alice.id)
            try await ledger.deposit(F.money(5_000, .jpy), to: alice.id)
            try await ledger.deposit(F.money(3_00), to: bob.id)
            var outcomes: [Bool] = []
            for (merchant, key, amount, tip, currency) in [
                (cafe.id, F.key(1), Int64(12_50), Int64(1_50), Currency.eur),
                (diner.id, F.key(1), 19_99, 0, .usd),
                (sushi.id, F.key(1), 1_200, 100, .jpy),
                (cafe.id, F.key(2), 3_00, 1, .eur),  // one cent short: declined
                (cafe.id, F.key(2), 3_00, 0, .eur),
                (diner.id, F.key(2), 1_00, 0, .usd),  // Bob has no dollars: declined
                (diner.id, F.key(1), 1_00, 0, .eur),  // wrong currency: declined
            ] {
                let result = try await ledger.settle(
                    F.payment(wallet: key, amount: amount, tip: tip, currency: currency), merchant: merchant)
                outcomes.append(result.outcome.isApproved)
            }
            #expect(outcomes == [true, true, true, false, true, false, false])
            #expect(try await ledger.balance(of: alice.id, in: .eur) == F.money(86_00))
            #expect(try await ledger.balance(of: alice.id, in: .usd) == F.money(1, .usd))
            #expect(try await ledger.balance(of: alice.id, in: .jpy) == F.money(3_700, .jpy))
            #expect(try await ledger.balance(of: bob.id, in: .eur) == F.money(0))
            #expect(try await ledger.balance(of: cafe.id) == F.money(17_00))
            #expect(try await ledger.balance(of: diner.id) == F.money(19_99, .usd))
            #expect(try await ledger.balance(of: sushi.id) == F.money(1_300, .jpy))

            // Straight from the stored rows: every entry's postings sum to zero per currency.
            let unbalanced = try await ledger.store.transaction { db in
                try await db.query(
                    """
                    SELECT entry_id, currency, CAST(SUM(amount) AS BIGINT) AS total FROM postings
                    GROUP BY entry_id, currency HAVING SUM(amount) <> 0
                    """
                ).count
            }
            #expect(unbalanced == 0)
            let perEntry = try await ledger.store.transaction { db in
                try await db.query(
                    "SELECT entry_id, CAST(COUNT(*) AS BIGINT) AS n FROM postings GROUP BY entry_id ORDER BY entry_id"
                ).map { try $0.integer("n") }
            }
            #expect(perEntry == [Int64](repeating: 2, count: 8))  // 4 deposits, 4 approved payments
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])

            // An unbalanced entry cannot be written through the accounts' rules either: the
            // postings' composite key ties each posting to its account's currency.
            await #expect(throws: LedgerError.self) {
                try await ledger.store.transaction { db in
                    try await db.query("INSERT INTO entries(kind, created_at) VALUES ('deposit', 0)")
                    try await db.query(
                        """
                        INSERT INTO postings(entry_id, account_id, currency, amount)
                        SELECT MAX(e.id), a.id, 'USD', 1 FROM entries e, accounts a
                        WHERE a.kind = 'wallet' AND a.currency = 'EUR' GROUP BY a.id
                        """)
                }
            }
        }
    }

    static func walletNeverGoesBelowZero(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 10_00)
            let postingsBefore = try await postingCount(ledger)
            let overdraft = try await ledger.settle(
                F.payment(wallet: key, amount: 9_00, tip: 1_01), merchant: merchant.id)
            #expect(overdraft.outcome.declineCode == .insufficientFunds)
            guard case .declined(_, let reason) = overdraft.outcome else { return }
            #expect(reason == "insufficient funds: 10.01 EUR needed, 10.00 EUR available")
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(10_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(0))
            #expect(try await postingCount(ledger) == postingsBefore)  // nothing moved

            let exact = try await ledger.settle(F.payment(wallet: key, amount: 10_00), merchant: merchant.id)
            #expect(exact.outcome.isApproved)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(0))
            let cent = try await ledger.settle(F.payment(wallet: key, amount: 1), merchant: merchant.id)
            #expect(cent.outcome.declineCode == .insufficientFunds)

            // The database itself refuses a negative wallet, whatever code tries.
            await #expect(throws: LedgerError.self) {
                try await ledger.store.transaction { db in
                    try await db.query(
                        "UPDATE accounts SET balance = -1 WHERE kind = 'wallet' AND owner_id = ?",
                        [.text(wallet.id.rawValue)])
                }
            }
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(0))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    static func postingCount(_ ledger: Ledger) async throws -> Int64 {
        try await ledger.store.transaction { db in
            try await db.query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM postings").first?.integer("n") ?? -1
        }
    }

    // MARK: Exactly once

    static func aRetryGetsTheStoredResult(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 50_00)
            let request = F.payment(wallet: key, amount: 20_00, tip: 2_00)
            let first = try await ledger.settle(request, merchant: merchant.id, at: 2_000)
            #expect(first.outcome.isApproved)
            let retry = try await ledger.settle(request, merchant: merchant.id, at: 9_999)
            #expect(retry == first)  // the stored result, settledAt and reference included
            #expect(try await ledger.result(for: request.paymentID) == first)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(28_00))
            #expect(try await ledger.executionCount(of: request.paymentID) == 1)

            // A decline is a result too: replayed even after the wallet could pay.
            let big = F.payment(wallet: key, amount: 40_00)
            let declined = try await ledger.settle(big, merchant: merchant.id, at: 3_000)
            #expect(declined.outcome.declineCode == .insufficientFunds)
            try await ledger.deposit(F.money(100_00), to: wallet.id)
            #expect(try await ledger.settle(big, merchant: merchant.id, at: 4_000) == declined)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(128_00))

            let listed = try await ledger.transactions(of: merchant.id)
            #expect(listed.map(\.result) == [declined, first])
            #expect(listed.first?.walletID == wallet.id && listed.last?.registerUser == "till-1")
            #expect(
                try await ledger.transactions(of: merchant.id, limit: 1, before: listed[0].reference).map(\.result) == [
                    first
                ])
        }
    }

    static func otherTermsAreAConflict(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 50_00)
            let other = try await ledger.createMerchant(name: "Other", currency: .eur, adminEmail: "o@other.example")
            let id = F.paymentID()
            let first = try await ledger.settle(F.payment(id, wallet: key, amount: 10_00), merchant: merchant.id)
            #expect(first.outcome.isApproved)
            let variants: [(SettlementRequest, MerchantID)] = [
                (F.payment(id, wallet: key, amount: 10_01), merchant.id),  // amount
                (F.payment(id, wallet: key, amount: 10_00, tip: 1), merchant.id),  // tip
                (F.payment(id, wallet: key, amount: 10_00, digest: 8), merchant.id),  // signed content
                (F.payment(id, wallet: F.key(9), amount: 10_00), merchant.id),  // wallet
                (F.payment(id, wallet: key, amount: 10_00), other.id),  // merchant
            ]
            for (request, at) in variants {
                await #expect(throws: LedgerError.conflictingRetry(id)) {
                    _ = try await ledger.settle(request, merchant: at)
                }
            }
            // A redemption may not reuse a payment's id either.
            await #expect(throws: LedgerError.conflictingRetry(id)) {
                _ = try await ledger.redeem(
                    F.redemption(.bonusRedemption, wallet: key, quantity: 1, id: id), merchant: merchant.id)
            }
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(40_00))
            #expect(try await ledger.executionCount(of: id) == 1)
            #expect(try await ledger.settle(F.payment(id, wallet: key, amount: 10_00), merchant: merchant.id) == first)
        }
    }

    static func concurrentDuplicatesExecuteOnce(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 30_00)
            let request = F.payment(wallet: key, amount: 25_00)
            let results = try await withThrowingTaskGroup(of: SettlementResult.self) { group in
                for _ in 0..<20 { group.addTask { try await ledger.settle(request, merchant: merchant.id) } }
                var results: [SettlementResult] = []
                for try await result in group { results.append(result) }
                return results
            }
            #expect(results.count == 20)
            #expect(results.allSatisfy { $0 == results[0] && $0.outcome.isApproved })
            #expect(try await ledger.executionCount(of: request.paymentID) == 1)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(5_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(25_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// Two stores on one database, as two server processes: each id submitted to both at once
    /// (and retried) executes once.
    static func duplicatesAcrossTwoStoresExecuteOnce(_ kind: StoreKind) async throws {
        try await TestStores.withStores(kind) { store, another in
            let first = try await Ledger.open(store)
            let secondStore = try another()
            let second = try await Ledger.open(secondStore)
            let (merchant, wallet, key) = try await F.shop(first, balance: 100_00)
            let requests = (0..<10).map { _ in F.payment(wallet: key, amount: 3_00) }
            let results = try await withThrowingTaskGroup(of: SettlementResult.self) { group in
                for request in requests {
                    for ledger in [first, second, first, second] {
                        group.addTask { try await ledger.settle(request, merchant: merchant.id) }
                    }
                }
                var results: [SettlementResult] = []
                for try await result in group { results.append(result) }
                return results
            }
            await secondStore.close()
            #expect(results.count == 40 && results.allSatisfy(\.outcome.isApproved))
            for request in requests {
                let answers = results.filter { $0.paymentID == request.paymentID }
                #expect(answers.count == 4 && answers.allSatisfy { $0 == answers[0] })
                #expect(try await first.executionCount(of: request.paymentID) == 1)
            }
            #expect(try await first.balance(of: wallet.id, in: .eur) == F.money(70_00))
            #expect(try await LedgerAudit.violations(in: store) == [])
        }
    }

    static func concurrentPaymentsNeverOverdraw(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 10_00)
            // Twenty different payments of 1.00 against 10.00: exactly ten can be approved.
            let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        try await ledger.settle(F.payment(wallet: key, amount: 1_00), merchant: merchant.id).outcome
                            .isApproved
                    }
                }
                var outcomes: [Bool] = []
                for try await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes.filter { $0 }.count == 10)
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(0))
            #expect(try await ledger.balance(of: merchant.id) == F.money(10_00))
            #expect(try await ledger.transactions(of: merchant.id).count == 20)
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// Eight wallets paying one merchant at once: every payment credits the merchant's one
    /// account row (on PostgreSQL the payments wait for its row lock instead of aborting on it),
    /// and no credit is lost.
    static func manyWalletsPayOneMerchantAtOnce(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, _, _) = try await F.shop(ledger, balance: 0)
            var wallets: [(wallet: Wallet, key: PublicKeyBytes)] = []
            for seed in UInt8(10)..<18 {
                let wallet = try await ledger.createWallet(name: "W\(seed)", publicKey: F.key(seed), at: 1_000)
                try await ledger.deposit(F.money(50_00), to: wallet.id, at: 1_000)
                wallets.append((wallet, F.key(seed)))
            }
            let approvals = try await withThrowingTaskGroup(of: Bool.self) { group in
                for (_, key) in wallets {
                    for euros in Int64(1)...5 {
                        group.addTask {
                            try await ledger.settle(F.payment(wallet: key, amount: euros * 1_00), merchant: merchant.id)
                                .outcome.isApproved
                        }
                    }
                }
                var approvals: [Bool] = []
                for try await approved in group { approvals.append(approved) }
                return approvals
            }
            #expect(approvals.count == 40 && approvals.allSatisfy { $0 })
            #expect(try await ledger.balance(of: merchant.id) == F.money(8 * 15_00))
            for (wallet, _) in wallets { #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(35_00)) }
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// One wallet paying (and earning points), being topped up and redeeming points, all at
    /// once: every cent and every point is accounted for. (On PostgreSQL the payments lock the
    /// wallet's rows while the top-ups and redemptions run SERIALIZABLE: neither may lose the
    /// other's update.)
    static func concurrentSpendingKeepsEveryCentAndPoint(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 100_00)
            try await ledger.setBonusRule(pointsPerMajorUnit: 1, for: merchant.id)
            #expect(
                try await ledger.settle(F.payment(wallet: key, amount: 50_00), merchant: merchant.id).outcome.isApproved
            )
            let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        (
                            "payment",
                            try await ledger.settle(F.payment(wallet: key, amount: 2_00), merchant: merchant.id)
                                .outcome.isApproved
                        )
                    }
                    group.addTask {
                        try await ledger.deposit(F.money(1_00), to: wallet.id)
                        return ("deposit", true)
                    }
                    group.addTask {
                        let redemption = F.redemption(.bonusRedemption, wallet: key, quantity: 3)
                        return (
                            "redemption", try await ledger.redeem(redemption, merchant: merchant.id).outcome.isApproved
                        )
                    }
                }
                var outcomes: [(String, Bool)] = []
                for try await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            // 50 points held, 2 earned by each payment and 3 spent by each redemption: all approve.
            #expect(outcomes.count == 48 && outcomes.allSatisfy(\.1))
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 50 + 16 * 2 - 16 * 3)
            #expect(
                try await ledger.balance(of: wallet.id, in: .eur) == F.money(100_00 - 50_00 - 16 * 2_00 + 16 * 1_00))
            #expect(try await ledger.balance(of: merchant.id) == F.money(82_00))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// A new key's first payments, all at once, in the sandbox: one wallet is enrolled (the
    /// losers of the race to insert it run again and find it), and every payment is paid from it.
    static func concurrentFirstContactEnrolsOnce(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(
            kind, options: LedgerOptions(enrollment: .sandboxOnFirstContact(startingBalance: 100_00))
        ) { ledger in
            let merchant = try await ledger.createMerchant(name: "Demo", currency: .eur, adminEmail: "d@demo.example")
            let approvals = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await ledger.settle(F.payment(wallet: F.key(6), amount: 5_00), merchant: merchant.id)
                            .outcome
                            .isApproved
                    }
                }
                var approvals: [Bool] = []
                for try await approved in group { approvals.append(approved) }
                return approvals
            }
            #expect(approvals.count == 10 && approvals.allSatisfy { $0 })
            let wallet = try #require(try await ledger.wallet(forKey: F.key(6)))
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(50_00))
            let wallets = try await ledger.store.transaction { db in
                try await db.query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM wallets").first?.integer("n")
            }
            #expect(wallets == 1)
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    /// A signed request's nonce is refused the second time, by every process; nonces past their
    /// window are deleted, at most once a minute per process, never one still inside it.
    static func requestNoncesAreUsedOnceAndForgottenAfterTheirWindow(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let key = F.key(3)
            func count() async throws -> Int64? {
                try await ledger.store.transaction { db in
                    try await db.query("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM request_nonces").first?.integer("n")
                }
            }
            #expect(try await ledger.useNonce("a", for: key, window: 10, at: 1_000))
            #expect(try await !ledger.useNonce("a", for: key, window: 10, at: 1_001))
            #expect(try await ledger.useNonce("a", for: F.key(4), window: 10, at: 1_001))  // per key
            // Concurrent uses of one nonce: exactly one is accepted.
            let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 { group.addTask { try await ledger.useNonce("b", for: key, window: 10, at: 1_002) } }
                var accepted = 0
                for try await ok in group where ok { accepted += 1 }
                return accepted
            }
            #expect(accepted == 1)
            // 59 s after the last purge none is due, though "a" is past its window.
            #expect(try await ledger.useNonce("c", for: key, window: 10, at: 1_059))
            #expect(try await count() == 4)
            // At 60 s it is: "a" (both keys) and "b" go, "c" (inside its window) stays and is refused.
            #expect(try await ledger.useNonce("d", for: key, window: 10, at: 1_060))
            #expect(try await count() == 2)
            #expect(try await !ledger.useNonce("c", for: key, window: 10, at: 1_061))
        }
    }

    static func unknownAndRevokedWallets(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 10_00)
            let stranger = try await ledger.settle(F.payment(wallet: F.key(77), amount: 1_00), merchant: merchant.id)
            #expect(stranger.outcome.declineCode == .unknownWallet)
            // A key anyone can make leaves no row the merchant sees, whatever it was declined for.
            #expect(try await ledger.transaction(for: stranger.paymentID) == nil)
            try await ledger.revokeWalletKey(key)
            let revoked = try await ledger.settle(F.payment(wallet: key, amount: 1_00), merchant: merchant.id)
            #expect(
                revoked.outcome
                    == .declined(code: .unknownWallet, reason: "this wallet key was revoked; register the wallet again")
            )
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(10_00))
            await #expect(throws: LedgerError.notFound("merchant m_gone")) {
                _ = try await ledger.settle(
                    F.payment(wallet: key, amount: 1_00), merchant: MerchantID(rawValue: "m_gone"))
            }
            let invalid = try await ledger.settle(F.payment(wallet: F.key(77), amount: 0), merchant: merchant.id)
            #expect(invalid.outcome.declineCode == .invalidAmount)
            #expect(try await ledger.transaction(for: invalid.paymentID) == nil)
            #expect(try await ledger.transactions(of: merchant.id).allSatisfy { $0.walletKey != F.key(77) })
            // A registered key's declines are the merchant's record, as before.
            #expect(try await ledger.transaction(for: revoked.paymentID) != nil)
        }
    }

    static func sandboxEnrolsOnFirstContact(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(
            kind, options: LedgerOptions(enrollment: .sandboxOnFirstContact(startingBalance: 100_00))
        ) {
            ledger in
            let merchant = try await ledger.createMerchant(
                name: "Demo", currency: .eur, adminEmail: "demo@demo.example")
            let result = try await ledger.settle(F.payment(wallet: F.key(5), amount: 30_00), merchant: merchant.id)
            #expect(result.outcome.isApproved)
            let wallet = try #require(try await ledger.wallet(forKey: F.key(5)))
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(70_00))
            // The demo money came in as a posted entry from the external account, balanced.
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
            let external = try await ledger.store.transaction { db in
                try await db.query("SELECT balance FROM accounts WHERE kind = 'external' AND currency = 'EUR'").first?
                    .integer("balance")
            }
            #expect(external == -100_00)
        }
    }

    // MARK: Loyalty (the rules the old sandbox ledger had, per merchant)

    static func bonusPointsAreEarnedAndRedeemed(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 100_00)
            try await ledger.setBonusRule(pointsPerMajorUnit: 2, for: merchant.id)
            // 12.99 earns 2 × 12; the tip earns nothing.
            let paid = try await ledger.settle(F.payment(wallet: key, amount: 12_99, tip: 5_00), merchant: merchant.id)
            guard case .approved(let reference, let earned, let balance) = paid.outcome else {
                Issue.record("expected an approval, got \(paid.outcome)")
                return
            }
            #expect(reference > 0 && earned == 24 && balance == 24)
            #expect(try await ledger.programs(of: merchant.id) == MerchantPrograms(hasBonusProgram: true))

            let tooMany = try await ledger.redeem(
                F.redemption(.bonusRedemption, wallet: key, quantity: 25), merchant: merchant.id)
            #expect(
                tooMany.outcome
                    == .declined(code: .insufficientPoints, reason: "not enough bonus points: 25 needed, 24 held"))
            let none = try await ledger.redeem(
                F.redemption(.bonusRedemption, wallet: key, quantity: 0), merchant: merchant.id)
            #expect(none.outcome.declineCode == .invalidAmount)
            let spend = F.redemption(.bonusRedemption, wallet: key, quantity: 20)
            let spent = try await ledger.redeem(spend, merchant: merchant.id)
            guard case .approved(_, 0, 4) = spent.outcome else {
                Issue.record("expected 4 points left, got \(spent.outcome)")
                return
            }
            #expect(try await ledger.redeem(spend, merchant: merchant.id) == spent)  // replayed, not spent twice
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 4)
            // A payment adds to the points held and reports the sum (PostgreSQL returns it from
            // the upsert, SQLite reads it after).
            let more = try await ledger.settle(F.payment(wallet: key, amount: 5_00, tip: 0), merchant: merchant.id)
            guard case .approved(_, 10, 14) = more.outcome else {
                Issue.record("expected 10 points earned and 14 held, got \(more.outcome)")
                return
            }

            try await ledger.addBonusPoints(-20, to: wallet.id, at: merchant.id)  // never below zero
            #expect(try await ledger.bonusPoints(of: wallet.id, at: merchant.id) == 0)
            try await ledger.setBonusRule(pointsPerMajorUnit: 0, for: merchant.id)
            #expect(try await ledger.programs(of: merchant.id) == MerchantPrograms())
            let payment = F.redemption(.payment, wallet: key)
            #expect(try await ledger.redeem(payment, merchant: merchant.id).outcome.declineCode == .protocolViolation)
            let stranger = F.redemption(.bonusRedemption, wallet: F.key(99), quantity: 1)
            #expect(try await ledger.redeem(stranger, merchant: merchant.id).outcome.declineCode == .unknownWallet)
            // Redemptions move no money.
            #expect(try await ledger.balance(of: wallet.id, in: .eur) == F.money(77_01))
            #expect(try await LedgerAudit.violations(in: ledger.store) == [])
        }
    }

    static func goldBenefitOncePerPeriod(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 0)
            let day: Int64 = 86_400
            func gold(at time: Int64) async throws -> SettlementOutcome {
                try await ledger.redeem(
                    F.redemption(.goldRedemption, wallet: key, item: "coffee"), merchant: merchant.id, at: time
                )
                .outcome
            }
            #expect(try await gold(at: 10 * day).declineCode == .notFound)
            try await ledger.grantGoldMembership(
                to: wallet.id, at: merchant.id, tier: "gold", validFrom: 10 * day, validUntil: 100 * day,
                benefitPeriod: 30 * day)
            #expect(try await ledger.programs(of: merchant.id).hasGoldProgram)
            #expect(try await gold(at: 9 * day).declineCode == .expired)  // not valid yet
            #expect(try await gold(at: 11 * day).isApproved)
            #expect(
                try await gold(at: 12 * day)
                    == .declined(code: .alreadyRedeemed, reason: "the gold benefit was already used this period"))
            #expect(try await gold(at: 41 * day).isApproved)  // the next period
            #expect(try await gold(at: 39 * day).declineCode == .alreadyRedeemed)  // a clock set back
            #expect(try await gold(at: 101 * day).declineCode == .expired)
            let membership = try #require(try await ledger.goldMembership(of: wallet.id, at: merchant.id))
            #expect(membership.lastBenefitPeriod == 1 && membership.tier == "gold")
            await #expect(throws: LedgerError.self) {
                try await ledger.grantGoldMembership(
                    to: wallet.id, at: merchant.id, tier: "gold", validFrom: 5, validUntil: 4)
            }
        }
    }

    static func couponsRedeemOnceBeforeTheyExpire(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, wallet, key) = try await F.shop(ledger, balance: 0)
            let bob = try await ledger.createWallet(name: "Bob", publicKey: F.key(2))
            #expect(try await ledger.programs(of: merchant.id).hasCouponProgram == false)
            try await ledger.issueCoupon(
                code: "WELCOME", to: wallet.id, at: merchant.id, description: "a free coffee", value: F.money(3_00),
                expiresAt: 5_000)
            try await ledger.issueCoupon(
                code: "OLD", to: wallet.id, at: merchant.id, description: "expired", value: F.money(1_00),
                expiresAt: 100)
            await #expect(throws: LedgerError.alreadyExists("coupon WELCOME of merchant \(merchant.id)")) {
                try await ledger.issueCoupon(
                    code: "WELCOME", to: bob.id, at: merchant.id, description: "again", value: F.money(1), expiresAt: 1)
            }
            await #expect(throws: LedgerError.self) {  // another currency than the merchant's
                try await ledger.issueCoupon(
                    code: "USD", to: bob.id, at: merchant.id, description: "", value: F.money(1, .usd), expiresAt: 1)
            }
            #expect(try await ledger.programs(of: merchant.id).hasCouponProgram)
            func coupon(_ code: String, _ walletKey: PublicKeyBytes, at time: Int64) async throws -> SettlementOutcome {
                try await ledger.redeem(
                    F.redemption(.couponRedemption, wallet: walletKey, item: code), merchant: merchant.id, at: time
                )
                .outcome
            }
            #expect(
                try await coupon("WELCOME", F.key(2), at: 1_000)
                    == .declined(code: .notFound, reason: "this wallet has no coupon WELCOME"))
            #expect(try await coupon("NOPE", key, at: 1_000).declineCode == .notFound)
            #expect(
                try await coupon("OLD", key, at: 1_000) == .declined(code: .expired, reason: "coupon OLD has expired"))
            #expect(try await coupon("WELCOME", key, at: 1_000).isApproved)
            #expect(
                try await coupon("WELCOME", key, at: 1_001)
                    == .declined(code: .alreadyRedeemed, reason: "coupon WELCOME was already redeemed"))
            let coupons = try await ledger.coupons(of: wallet.id, at: merchant.id)
            #expect(coupons.map(\.code) == ["OLD", "WELCOME"])
            #expect(coupons.last?.redeemedAt == 1_000 && coupons.last?.value == F.money(3_00))
        }
    }

    // MARK: Strict rows

    static func rowsDecodeStrictly(_ kind: StoreKind) async throws {
        try await TestStores.withLedger(kind) { ledger in
            let (merchant, _, key) = try await F.shop(ledger, balance: 10_00)
            let paid = try await ledger.settle(F.payment(wallet: key, amount: 1_00), merchant: merchant.id)
            // A row changed outside Horizon is an error to read, never a default.
            try await ledger.store.transaction { db in
                try await db.query("UPDATE transactions SET currency = 'XXX'")
            }
            await #expect(
                throws: LedgerError.corruptRow(column: "currency", reason: "XXX is not a supported ISO 4217 currency")
            ) {
                _ = try await ledger.result(for: paid.paymentID)
            }
            let row = try #require(
                try await ledger.store.transaction { db in try await db.query("SELECT 1 AS one, NULL AS absent").first
                })
            #expect(throws: LedgerError.corruptRow(column: "two", reason: "missing")) { try row.integer("two") }
            #expect(throws: LedgerError.corruptRow(column: "absent", reason: "NULL")) { try row.integer("absent") }
            #expect(throws: LedgerError.corruptRow(column: "one", reason: "expected text")) { try row.text("one") }
            #expect(try row.optionalInteger("absent") == nil)
        }
    }
}
