import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Testing

/// A terminal data directory from before HorizonLedger holds `ledger.sqlite` in the old sandbox
/// ledger's schema (HorizonStores' `SandboxLedger`, schema 2). Opening the in-process ledger
/// there migrates it: balances, points, loyalty, cashiers and every stored result carry over.
@Suite("Old sandbox ledger files are migrated")
struct LegacySandboxMigrationTests {
    /// The old schema, exactly as `SandboxLedger` created it.
    static let oldSchema = """
        CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS wallets(
            wallet_key BLOB PRIMARY KEY,
            currency TEXT NOT NULL,
            balance INTEGER NOT NULL CHECK (balance >= 0),
            bonus_points INTEGER NOT NULL DEFAULT 0 CHECK (bonus_points >= 0),
            enrolled_at INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS merchant_account(
            currency TEXT PRIMARY KEY,
            balance INTEGER NOT NULL CHECK (balance >= 0));
        CREATE TABLE IF NOT EXISTS register_users(name TEXT PRIMARY KEY, added_at INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS transactions(
            reference INTEGER PRIMARY KEY AUTOINCREMENT,
            payment_id BLOB NOT NULL UNIQUE,
            transaction_type INTEGER NOT NULL DEFAULT 1,
            item TEXT NOT NULL DEFAULT '',
            quantity INTEGER NOT NULL DEFAULT 0,
            session_id INTEGER NOT NULL,
            wallet_key BLOB NOT NULL,
            terminal_key_id BLOB NOT NULL,
            amount INTEGER NOT NULL CHECK (amount >= 0),
            tip INTEGER NOT NULL CHECK (tip >= 0),
            currency TEXT NOT NULL,
            register_user TEXT NOT NULL,
            content_digest BLOB NOT NULL,
            outcome TEXT NOT NULL CHECK (outcome IN ('approved', 'declined')),
            decline_code INTEGER,
            decline_reason TEXT,
            bonus_earned INTEGER NOT NULL DEFAULT 0,
            bonus_balance INTEGER NOT NULL DEFAULT 0,
            settled_at INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS gold_memberships(
            wallet_key BLOB PRIMARY KEY,
            tier TEXT NOT NULL,
            valid_from INTEGER NOT NULL,
            valid_until INTEGER NOT NULL,
            benefit_period INTEGER NOT NULL CHECK (benefit_period > 0),
            last_benefit_period INTEGER);
        CREATE TABLE IF NOT EXISTS coupons(
            code TEXT PRIMARY KEY,
            wallet_key BLOB NOT NULL,
            description TEXT NOT NULL,
            value INTEGER NOT NULL CHECK (value >= 0),
            expires_at INTEGER NOT NULL,
            redeemed_at INTEGER,
            redemption_id BLOB);
        """

    /// What the fixture's old ledger handed out, as the terminal's journal and the wallets hold it.
    static let payment1 = SettlementResult(
        paymentID: paymentID(1), sessionID: session, amount: euros(40_00), tip: euros(4_00),
        outcome: .approved(reference: 1, bonusPointsEarned: 120, bonusPointsBalance: 120), settledAt: settleTime)
    static let declined2 = SettlementResult(
        paymentID: paymentID(2), sessionID: session, amount: euros(500_00), tip: euros(0),
        outcome: .declined(
            code: .insufficientFunds, reason: "insufficient funds: 500.00 EUR needed, 206.00 EUR available"),
        settledAt: settleTime + 1)
    static let payment3 = SettlementResult(
        paymentID: paymentID(3), sessionID: session, amount: euros(49_00), tip: euros(1_00),
        outcome: .approved(reference: 3, bonusPointsEarned: 49, bonusPointsBalance: 49), settledAt: settleTime + 2)
    static let unknown4 = SettlementResult(
        paymentID: paymentID(4), sessionID: session, amount: euros(10_00), tip: euros(0),
        outcome: .declined(code: .unknownWallet, reason: "this wallet is not enrolled with the merchant"),
        settledAt: settleTime + 3)
    static let coupon5 = SettlementResult(
        paymentID: paymentID(5), sessionID: session, amount: euros(5_00), tip: euros(0),
        outcome: .approved(reference: 5, bonusPointsEarned: 0, bonusPointsBalance: 300), settledAt: settleTime + 4,
        transactionType: .couponRedemption, item: "C1", quantity: 0)

    /// Writes an old sandbox ledger at `path`, rows as the old code wrote them: wallet 1 paid
    /// 44.00 (of 250.00) and was declined once, wallet 2 paid its whole 50.00, wallet 9 was
    /// refused as unknown, wallet 3 holds loyalty only and redeemed coupon C1.
    static func writeOldLedger(at path: String, merchantBalance: Int64 = 94_00) throws {
        let db = try SQLiteDatabase(path: path)
        try db.execute(oldSchema)
        try db.query("INSERT INTO meta(key, value) VALUES ('schema_version', '2'), ('currency', 'EUR')")
        for (wallet, balance, points, enrolled) in [(1, 206_00, 120, 100), (2, 0, 49, 101), (3, 0, 300, 102)] {
            try db.query(
                "INSERT INTO wallets(wallet_key, currency, balance, bonus_points, enrolled_at) VALUES (?, 'EUR', ?, ?, ?)",
                [
                    .blob(walletKey(wallet).bytes), .integer(Int64(balance)), .integer(Int64(points)),
                    .integer(Int64(enrolled)),
                ])
        }
        try db.query("INSERT INTO merchant_account(currency, balance) VALUES ('EUR', ?)", [.integer(merchantBalance)])
        try db.query("INSERT INTO register_users(name, added_at) VALUES ('zoe', 5), ('anna', 6)")
        let rows: [(SettlementResult, wallet: Int, user: String)] = [
            (payment1, 1, "anna"), (declined2, 1, "anna"), (payment3, 2, "zoe"), (unknown4, 9, "zoe"), (coupon5, 3, ""),
        ]
        for (result, wallet, user) in rows {
            var code: DatabaseValue = .null
            var reason: DatabaseValue = .null
            var earned: Int64 = 0
            var balance: Int64 = 0
            switch result.outcome {
            case .approved(_, let e, let b):
                earned = e
                balance = b
            case .declined(let c, let r):
                code = .integer(Int64(c.rawValue))
                reason = .text(r)
            }
            try db.query(
                """
                INSERT INTO transactions(payment_id, transaction_type, item, quantity, session_id, wallet_key,
                    terminal_key_id, amount, tip, currency, register_user, content_digest, outcome, decline_code,
                    decline_reason, bonus_earned, bonus_balance, settled_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .blob(result.paymentID.bytes), .integer(Int64(result.transactionType.rawValue)), .text(result.item),
                    .integer(result.quantity), .integer(Int64(bitPattern: result.sessionID.rawValue)),
                    .blob(walletKey(wallet).bytes), .blob(terminalKey.bytes), .integer(result.amount.minorUnits),
                    .integer(result.tip.minorUnits), .text("EUR"), .text(user), .blob(digestOf(result)),
                    .text(result.outcome.isApproved ? "approved" : "declined"), code, reason, .integer(earned),
                    .integer(balance), .integer(result.settledAt),
                ])
        }
        try db.query(
            """
            INSERT INTO gold_memberships(wallet_key, tier, valid_from, valid_until, benefit_period, last_benefit_period)
            VALUES (?, 'Gold', 1000, 100000, 100, 2)
            """, [.blob(walletKey(3).bytes)])
        try db.query(
            """
            INSERT INTO coupons(code, wallet_key, description, value, expires_at, redeemed_at, redemption_id)
            VALUES ('C1', ?, '5 EUR off', 500, ?, ?, ?), ('C2', ?, 'a coffee', 300, ?, NULL, NULL)
            """,
            [
                .blob(walletKey(3).bytes), .integer(settleTime + 86_400), .integer(settleTime + 4),
                .blob(paymentID(5).bytes), .blob(walletKey(3).bytes), .integer(settleTime + 86_400),
            ])
    }

    /// The confirmation digest the fixture stored for a result (one per payment id).
    static func digestOf(_ result: SettlementResult) -> [UInt8] {
        digest(1000 + Int(result.paymentID.bytes[0]))
    }

    static let configuration = InProcessLedgerConfiguration(
        currency: .eur, enrollment: .sandboxOnFirstContact(startingBalance: 250_00), bonusPointsPerMajorUnit: 3)

    /// The request whose stored result is `result` (same digest, wallet and terms).
    static func retry(of result: SettlementResult, wallet: Int) -> SettlementRequest {
        SettlementRequest(
            paymentID: result.paymentID, sessionID: result.sessionID, walletKey: walletKey(wallet),
            terminalKeyID: terminalKey, amount: result.amount, tip: result.tip, registerUser: "anna",
            contentDigest: digestOf(result))
    }

    @Test func everythingTheOldLedgerHeldCarriesOverAndRetriesGetTheirStoredResults() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            try Self.writeOldLedger(at: path)

            let ledger = try await InProcessLedger.open(path: path, configuration: Self.configuration)
            let backup = InProcessLedger.legacyBackupPath(for: path)
            #expect(
                ledger.migration
                    == LegacySandboxMigration(
                        backupPath: backup, wallets: 3, transactions: 5, registerUsers: 2, memberships: 1, coupons: 2))
            #expect(FileManager.default.fileExists(atPath: backup))
            #expect(try await ledger.ledger.schemaVersion() == LedgerSchema.currentVersion)

            // Balances and points, and nobody enrolled who was not.
            #expect(
                try await ledger.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(206_00), bonusPoints: 120))
            #expect(
                try await ledger.account(for: walletKey(2))
                    == WalletAccount(walletKey: walletKey(2), balance: euros(0), bonusPoints: 49))
            #expect(
                try await ledger.account(for: walletKey(3))
                    == WalletAccount(walletKey: walletKey(3), balance: euros(0), bonusPoints: 300))
            #expect(try await ledger.account(for: walletKey(9)) == nil)
            #expect(try await ledger.merchantBalance() == euros(94_00))

            // Every stored result, with its reference, newest first.
            #expect(
                try await ledger.transactions()
                    == [Self.coupon5, Self.unknown4, Self.payment3, Self.declined2, Self.payment1])
            // A retry after the upgrade gets the old answer and moves nothing; other terms are refused.
            #expect(
                try await ledger.settle(Self.retry(of: Self.payment1, wallet: 1), at: settleTime + 50) == Self.payment1)
            #expect(
                try await ledger.settle(Self.retry(of: Self.unknown4, wallet: 9), at: settleTime + 50) == Self.unknown4)
            let same = Self.retry(of: Self.payment1, wallet: 1)
            let otherAmount = SettlementRequest(
                paymentID: same.paymentID, sessionID: same.sessionID, walletKey: same.walletKey,
                terminalKeyID: same.terminalKeyID, amount: euros(41_00), tip: same.tip, registerUser: same.registerUser,
                contentDigest: same.contentDigest)
            await #expect(throws: ProcessorError.conflictingRetry(paymentID(1))) {
                try await ledger.settle(otherAmount, at: settleTime + 50)
            }
            #expect(try await ledger.executionCount(of: paymentID(1)) == 1)
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(206_00))

            // Cashiers and loyalty.
            #expect(try await ledger.registerUsers() == ["anna", "zoe"])
            let gold = try await ledger.goldMembership(for: walletKey(3))
            #expect(gold?.lastBenefitPeriod == 2 && gold?.benefitPeriod == 100 && gold?.tier == "Gold")
            let coupons = try await ledger.coupons(for: walletKey(3))
            #expect(coupons.map(\.code) == ["C1", "C2"])
            #expect(coupons.map(\.value) == [euros(5_00), euros(3_00)])
            #expect(coupons.map { $0.redeemedAt != nil } == [true, false])
            func redeemCoupon(_ code: String, id: Int) async throws -> SettlementResult {
                try await ledger.redeem(
                    RedemptionRequest(
                        redemptionID: paymentID(id), sessionID: session, walletKey: walletKey(3),
                        terminalKeyID: terminalKey, transactionType: .couponRedemption, item: code, quantity: 0,
                        value: euros(0), contentDigest: digest(id)),
                    at: settleTime + 60)
            }
            #expect(
                try await redeemCoupon("C1", id: 20).outcome
                    == .declined(code: .alreadyRedeemed, reason: "coupon C1 was already redeemed"))
            #expect(try await redeemCoupon("C2", id: 21).outcome.isApproved)
            #expect(
                try await ledger.merchantPrograms()
                    == MerchantPrograms(
                        hasBonusProgram: true, hasGoldProgram: true, hasCouponProgram: true))

            // New payments go on from there, with new references.
            let next = try await ledger.settle(request(6, wallet: 1, amount: euros(6_00)), at: settleTime + 70)
            guard case .approved(let reference, 18, 138) = next.outcome else {
                Issue.record("expected an approval earning 18 points, got \(next.outcome)")
                return
            }
            #expect(reference > 5)
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(200_00))
            #expect(try await ledger.merchantBalance() == euros(100_00))
            // The books balance: the old money is posted as the sandbox's play money, each old
            // approval as a payment entry.
            #expect(try await LedgerAudit.violations(in: ledger.ledger.store).isEmpty)
            await ledger.close()

            // Opened again, nothing is imported twice.
            let reopened = try await InProcessLedger.open(path: path, configuration: Self.configuration)
            #expect(reopened.migration == nil)
            #expect(try await reopened.account(for: walletKey(1))?.balance == euros(200_00))
            #expect(try await reopened.transactions(limit: 1000).count == 8)
        }
    }

    @Test func aMigrationInterruptedBeforeItsCommitIsDoneAgainFromTheBackup() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            let backup = InProcessLedger.legacyBackupPath(for: path)
            // As a crash leaves it: the old file moved aside, the new schema created, nothing imported.
            try Self.writeOldLedger(at: backup)
            await (try await Ledger.sqlite(path: path)).close()

            let ledger = try await InProcessLedger.open(path: path, configuration: Self.configuration)
            #expect(ledger.migration?.transactions == 5)
            #expect(try await ledger.merchantBalance() == euros(94_00))
            #expect(try await ledger.result(for: paymentID(3)) == Self.payment3)
        }
    }

    @Test func anOldLedgerThatDoesNotAddUpIsRefusedAndLeftAsItWas() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            try Self.writeOldLedger(at: path, merchantBalance: 1_00)
            await #expect(
                throws: LedgerError.invalidConfiguration(
                    "cannot migrate the old sandbox ledger \(path): its merchant balance (100) is not the sum of its approved payments (9400); nothing was changed"
                )
            ) {
                try await InProcessLedger.open(path: path, configuration: Self.configuration)
            }
            // The old file is where it was, whole, to be repaired and migrated again.
            #expect(!FileManager.default.fileExists(atPath: InProcessLedger.legacyBackupPath(for: path)))
            let old = try SQLiteDatabase(path: path)
            #expect(try old.query("SELECT COUNT(*) AS n FROM transactions").first?.value("n") == .integer(5))
        }
    }

    @Test func anOldLedgerInAnotherCurrencyIsRefusedWithWhatToDo() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            try Self.writeOldLedger(at: path)
            var dollars = Self.configuration
            dollars.currency = .usd
            await #expect(
                throws: LedgerError.invalidConfiguration(
                    "cannot migrate the old sandbox ledger \(path): it keeps EUR and this terminal is set up for USD; set the terminal up in EUR (horizon-terminal init --force --currency EUR keeps the ledger); nothing was changed"
                )
            ) {
                try await InProcessLedger.open(path: path, configuration: dollars)
            }
            #expect(!FileManager.default.fileExists(atPath: InProcessLedger.legacyBackupPath(for: path)))
        }
    }

    @Test func aDevelopmentSchemaIsRefusedBeforeAnythingMoves() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            try Self.writeOldLedger(at: path)
            try SQLiteDatabase(path: path).query("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
            await #expect(
                throws: LedgerError.invalidConfiguration(
                    "\(path) is a sandbox ledger of schema 1 from a development version, which cannot be migrated; move it away to start a new ledger"
                )
            ) {
                try await InProcessLedger.open(path: path, configuration: Self.configuration)
            }
            #expect(!FileManager.default.fileExists(atPath: InProcessLedger.legacyBackupPath(for: path)))
        }
    }
}
