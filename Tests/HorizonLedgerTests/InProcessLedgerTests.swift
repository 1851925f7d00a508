import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonTestSupport
import Testing

@testable import HorizonLedger
@testable import HorizonStores

/// The terminal's in-process ledger, with the sandbox's enrolment on first
/// contact: the tests the old HorizonStores `SandboxLedger` had, with the same assertions, on the
/// ledger that replaced it.
@Suite("In-process ledger (sandbox)")
struct InProcessLedgerTests {
    static let configuration = InProcessLedgerConfiguration(
        currency: .eur, enrollment: .sandboxOnFirstContact(startingBalance: 250_00), bonusPointsPerMajorUnit: 3)

    // MARK: Cost

    /// SQLite gathers a `RETURNING` clause's rows, checks an `IN (…)` list of more than two values
    /// and turns `id = ? OR id = ?` into a temporary table (a page cache of its own) at every run:
    /// none of a payment's statements may build one (they cost a payment about
    /// 7 % of its CPU). A second payment of the same wallet is the steady state of a shop.
    @Test func aPaymentsStatementsBuildNoTemporaryTable() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            let database = try #require((ledger.ledger.store as? SQLiteLedgerStore)?.database)
            _ = try await ledger.settle(request(1, amount: euros(12_34), tip: euros(1_50)), at: settleTime)
            database.startRecordingStatements()
            let paid = try await ledger.settle(request(2, amount: euros(5_00)), at: settleTime + 60)
            let statements = Set(database.stopRecordingStatements())
            #expect(paid.outcome.isApproved)
            #expect(statements.contains { $0.contains("INSERT INTO transactions(") })
            #expect(statements.contains { $0.contains("INSERT INTO entries(") })
            #expect(statements.contains { $0.contains("UPDATE accounts") })
            for sql in statements {
                #expect(try database.temporaryStructures(in: sql) == 0, "\(sql)")
            }
            // The same wallet was charged both payments, the merchant credited both, once each.
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(250_00 - 13_84 - 5_00))
            #expect(try await ledger.merchantBalance() == euros(13_84 + 5_00))
        }
    }

    // MARK: Approving

    @Test func settleApprovesEnrolsOnFirstContactAndMovesExactlyAmountPlusTip() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            #expect(try await ledger.account(for: walletKey(1)) == nil)
            #expect(try await ledger.merchantBalance() == .zero(.eur))
            #expect(try await ledger.transactions().isEmpty)

            let first = try await ledger.settle(request(1, amount: euros(12_34), tip: euros(1_50)), at: settleTime)
            guard case .approved(let firstReference, let earned, let points) = first.outcome else {
                Issue.record("expected an approval, got \(first.outcome)")
                return
            }
            #expect(firstReference > 0)
            // 12 whole euros at 3 points each; the tip earns nothing.
            #expect(earned == 36)
            #expect(points == 36)
            #expect(first.outcome.isApproved)
            #expect(first.paymentID == paymentID(1))
            #expect(first.sessionID == session)
            #expect(first.amount == euros(12_34))
            #expect(first.tip == euros(1_50))
            #expect(first.settledAt == settleTime)
            // Enrolled with 250.00 on first contact, then charged 12.34 + 1.50.
            #expect(
                try await ledger.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(250_00 - 13_84), bonusPoints: 36))
            #expect(try await ledger.merchantBalance() == euros(13_84))

            // Less than one whole euro earns no points; the balance keeps what it had.
            let second = try await ledger.settle(request(2, amount: euros(99)), at: settleTime + 60)
            guard case .approved(let secondReference, 0, 36) = second.outcome else {
                Issue.record("expected an approval earning 0 points, got \(second.outcome)")
                return
            }
            #expect(secondReference > firstReference)
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(250_00 - 13_84 - 99))
            #expect(try await ledger.merchantBalance() == euros(13_84 + 99))

            // Another wallet is enrolled with its own starting balance.
            let third = try await ledger.settle(
                request(3, wallet: 2, amount: euros(100_00), tip: euros(50_00)), at: settleTime + 120)
            guard case .approved(let thirdReference, 300, 300) = third.outcome else {
                Issue.record("expected an approval earning 300 points, got \(third.outcome)")
                return
            }
            #expect(thirdReference > secondReference)
            #expect(
                try await ledger.account(for: walletKey(2))
                    == WalletAccount(walletKey: walletKey(2), balance: euros(100_00), bonusPoints: 300))
            #expect(try await ledger.merchantBalance() == euros(13_84 + 99 + 150_00))

            // Newest first, exactly the results handed out.
            #expect(try await ledger.transactions() == [third, second, first])
            #expect(try await ledger.transactions(limit: 2) == [third, second])
            #expect(try await ledger.result(for: paymentID(1)) == first)
            #expect(try await ledger.result(for: paymentID(3)) == third)
            #expect(try await ledger.result(for: paymentID(99)) == nil)
            for id in 1...3 { #expect(try await ledger.executionCount(of: paymentID(id)) == 1) }
            #expect(try await ledger.executionCount(of: paymentID(99)) == 0)
        }
    }

    @Test(
        "bonus points are whole units of the amount times the rule, tips excluded",
        arguments: [
            (Int64(0_99), Int64(5_00), Int64(1), Int64(0)),
            (1_00, 0, 1, 1),
            (1_99, 98_00, 1, 1),
            (12_34, 0, 3, 36),
            (150_00, 0, 10, 1500),
            (200_00, 50_00, 0, 0),
        ])
    func bonusPoints(amount: Int64, tip: Int64, rule: Int64, expected: Int64) async throws {
        try await withLedgerDirectory { directory in
            let configuration = InProcessLedgerConfiguration(
                currency: .eur, enrollment: .sandboxOnFirstContact(startingBalance: 1_000_00),
                bonusPointsPerMajorUnit: rule)
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory), configuration: configuration)
            let result = try await ledger.settle(request(1, amount: euros(amount), tip: euros(tip)), at: settleTime)
            guard case .approved(_, let earned, let balance) = result.outcome else {
                Issue.record("expected an approval, got \(result.outcome)")
                return
            }
            #expect(earned == expected)
            #expect(balance == expected)
            #expect(try await ledger.account(for: walletKey(1))?.bonusPoints == expected)
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(1_000_00 - amount - tip))
        }
    }

    @Test func yenHaveNoMinorUnitsSoEveryYenIsAWholeUnit() async throws {
        try await withLedgerDirectory { directory in
            let configuration = InProcessLedgerConfiguration(
                currency: .jpy, enrollment: .sandboxOnFirstContact(startingBalance: 10_000), bonusPointsPerMajorUnit: 2)
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory), configuration: configuration)
            let yen = try Money(minorUnits: 1_200, currency: .jpy)
            let result = try await ledger.settle(
                request(1, amount: yen, tip: try Money(minorUnits: 300, currency: .jpy)), at: 0)
            guard case .approved(_, 2_400, 2_400) = result.outcome else {
                Issue.record("expected 2400 points, got \(result.outcome)")
                return
            }
            #expect(
                try await ledger.account(for: walletKey(1))?.balance == (try Money(minorUnits: 8_500, currency: .jpy)))
            #expect(try await ledger.merchantBalance() == (try Money(minorUnits: 1_500, currency: .jpy)))
        }
    }

    // MARK: Exactly once

    @Test func aRetryGetsTheStoredResultAndMovesNothing() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            let payment = request(1, amount: euros(20_00), tip: euros(2_00))
            let original = try await ledger.settle(payment, at: settleTime)
            #expect(original.outcome.isApproved)
            let walletAfter = try await ledger.account(for: walletKey(1))
            #expect(walletAfter?.balance == euros(228_00))
            for delay in [0, 1, 3600] as [UnixTime] {
                // The retry may come much later: it still gets the first answer, time included.
                let retry = try await ledger.settle(payment, at: settleTime + delay)
                #expect(retry == original)
                #expect(retry.settledAt == settleTime)
            }
            #expect(try await ledger.executionCount(of: paymentID(1)) == 1)
            #expect(try await ledger.account(for: walletKey(1)) == walletAfter)
            #expect(try await ledger.merchantBalance() == euros(22_00))
            #expect(try await ledger.transactions() == [original])
        }
    }

    @Test func theSameIDWithOtherContentIsAConflictAndMovesNothing() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            let original = try await ledger.settle(request(7, amount: euros(20_00)), at: settleTime)
            let conflicts = [
                // Another confirmation digest for the same payment id.
                request(7, amount: euros(20_00), digest: digest(8)),
                // Another amount (and so another signed confirmation).
                request(7, amount: euros(21_00), digest: digest(9)),
                // Another tip, another wallet.
                request(7, amount: euros(20_00), tip: euros(1), digest: digest(10)),
                request(7, wallet: 2, amount: euros(20_00), digest: digest(11)),
            ]
            for conflict in conflicts {
                await #expect(throws: ProcessorError.conflictingRetry(paymentID(7))) {
                    try await ledger.settle(conflict, at: settleTime + 5)
                }
            }
            #expect(try await ledger.executionCount(of: paymentID(7)) == 1)
            #expect(try await ledger.result(for: paymentID(7)) == original)
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(230_00))
            #expect(try await ledger.account(for: walletKey(2)) == nil)
            #expect(try await ledger.merchantBalance() == euros(20_00))
            #expect(try await ledger.transactions() == [original])
            #expect(
                ProcessorError.conflictingRetry(paymentID(7)).description
                    == "payment \(paymentID(7).bytes.hexString) was already executed with different content; refused")
        }
    }

    @Test func aRetryWithTheSameDigestButOtherTermsIsNotReplayed() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            let original = try await ledger.settle(request(7, amount: euros(20_00)), at: settleTime)
            // The digest is the caller's word; the ledger also holds the amount, tip and wallet it
            // executed, and a retry naming other ones is not the same payment.
            let altered = [
                request(7, amount: euros(21_00), digest: digest(7)),
                request(7, amount: euros(20_00), tip: euros(5_00), digest: digest(7)),
                request(7, wallet: 2, amount: euros(20_00), digest: digest(7)),
            ]
            for retry in altered {
                await #expect(throws: ProcessorError.conflictingRetry(paymentID(7))) {
                    try await ledger.settle(retry, at: settleTime + 5)
                }
            }
            // Whatever it answers, nothing moves a second time.
            #expect(try await ledger.executionCount(of: paymentID(7)) == 1)
            #expect(try await ledger.result(for: paymentID(7)) == original)
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(230_00))
            #expect(try await ledger.account(for: walletKey(2)) == nil)
            #expect(try await ledger.merchantBalance() == euros(20_00))
        }
    }

    // MARK: Declining

    /// Settles `payment`, expects exactly that decline, retries it and expects the identical stored
    /// result, and checks that no money moved: every wallet that existed keeps its balance and
    /// points, the merchant balance stays, and at most the paying wallet is newly enrolled.
    func expectStoredDecline(
        _ ledger: InProcessLedger, _ payment: SettlementRequest, code: ErrorCode, reason: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> SettlementResult {
        let walletsBefore = try await walletRows(ledger)
        let merchantBefore = try await ledger.merchantBalance()
        let result = try await ledger.settle(payment, at: settleTime)
        #expect(result.outcome == .declined(code: code, reason: reason), sourceLocation: sourceLocation)
        #expect(!result.outcome.isApproved, sourceLocation: sourceLocation)
        #expect(result.paymentID == payment.paymentID, sourceLocation: sourceLocation)
        #expect(result.amount == payment.amount, sourceLocation: sourceLocation)
        #expect(result.tip == payment.tip, sourceLocation: sourceLocation)
        #expect(result.settledAt == settleTime, sourceLocation: sourceLocation)
        #expect(try await ledger.result(for: payment.paymentID) == result, sourceLocation: sourceLocation)
        #expect(try await ledger.settle(payment, at: settleTime + 30) == result, sourceLocation: sourceLocation)
        #expect(try await ledger.executionCount(of: payment.paymentID) == 1, sourceLocation: sourceLocation)
        #expect(try await ledger.merchantBalance() == merchantBefore, sourceLocation: sourceLocation)
        var walletsAfter = try await walletRows(ledger)
        if walletsBefore[payment.walletKey.bytes] == nil { walletsAfter[payment.walletKey.bytes] = nil }
        #expect(walletsAfter == walletsBefore, sourceLocation: sourceLocation)
        #expect(try await ledger.transactions().first == result, sourceLocation: sourceLocation)
        return result
    }

    /// Every wallet's balance and points, by key, straight from the tables.
    func walletRows(_ ledger: InProcessLedger) async throws -> [[UInt8]: [Int64]] {
        var rows: [[UInt8]: [Int64]] = [:]
        for row in try await rawQuery(
            ledger,
            """
            SELECT k.public_key, a.balance, COALESCE(b.points, 0) AS points FROM wallet_keys k
            JOIN accounts a ON a.kind = 'wallet' AND a.owner_id = k.wallet_id
            LEFT JOIN bonus_points b ON b.wallet_id = k.wallet_id
            """)
        {
            rows[try row.bytes("public_key")] = [try row.integer("balance"), try row.integer("points")]
        }
        return rows
    }

    @Test func aZeroAmountIsDeclinedAsInvalid() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            let reason = "the amount must be greater than zero"
            _ = try await expectStoredDecline(
                ledger, request(1, amount: euros(0)), code: .invalidAmount, reason: reason)
            // A tip alone does not make a payment.
            _ = try await expectStoredDecline(
                ledger, request(2, amount: euros(0), tip: euros(5_00)), code: .invalidAmount, reason: reason)
            // Amount plus tip above the system maximum (10^15 minor units) cannot be formed.
            let maximum = euros(Money.maximumMinorUnits)
            _ = try await expectStoredDecline(
                ledger, request(3, amount: maximum, tip: euros(1)), code: .invalidAmount,
                reason: "amount plus tip is out of range")
            // Declined before enrolment: the wallet is still unknown.
            #expect(try await ledger.account(for: walletKey(1)) == nil)
            #expect(try await ledger.transactions().count == 3)
        }
    }

    @Test func anotherCurrencyIsDeclinedAsUnsupported() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            let dollars = try Money(minorUnits: 10_00, currency: .usd)
            let result = try await expectStoredDecline(
                ledger, request(1, amount: dollars), code: .unsupportedCurrency,
                reason: "this merchant settles in EUR, not USD")
            #expect(result.amount == dollars)
            #expect(try await ledger.account(for: walletKey(1)) == nil)
        }
    }

    @Test func aTipInAnotherCurrencyIsDeclinedAsUnsupported() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            let payment = request(1, amount: euros(10_00), tip: try Money(minorUnits: 1_00, currency: .usd))
            let result = try await ledger.settle(payment, at: settleTime)
            guard case .declined(.unsupportedCurrency, let reason) = result.outcome else {
                Issue.record("expected an unsupported-currency decline, got \(result.outcome)")
                return
            }
            #expect(reason == "this merchant settles in EUR, not USD")
            #expect(try await ledger.account(for: walletKey(1)) == nil)
            #expect(try await ledger.merchantBalance() == .zero(.eur))
        }
    }

    @Test func aBalanceBelowAmountPlusTipIsDeclinedAndExactlyEnoughApproves() async throws {
        try await withLedgerDirectory { directory in
            let configuration = InProcessLedgerConfiguration(enrollment: .sandboxOnFirstContact(startingBalance: 50_00))
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory), configuration: configuration)
            // 49.00 + 1.01 is one cent more than the 50.00 the wallet is enrolled with.
            let short = request(1, amount: euros(49_00), tip: euros(1_01))
            _ = try await expectStoredDecline(
                ledger, short, code: .insufficientFunds,
                reason: "insufficient funds: 50.01 EUR needed, 50.00 EUR available")
            // The first contact enrolled the wallet even though the payment was declined.
            #expect(
                try await ledger.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(50_00), bonusPoints: 0))
            // The amount alone fitting does not help: the tip counts.
            _ = try await expectStoredDecline(
                ledger, request(2, amount: euros(50_00), tip: euros(1)), code: .insufficientFunds,
                reason: "insufficient funds: 50.01 EUR needed, 50.00 EUR available")

            // Exactly the balance approves and leaves zero.
            let exact = try await ledger.settle(request(3, amount: euros(49_00), tip: euros(1_00)), at: settleTime)
            #expect(exact.outcome.isApproved)
            #expect(
                try await ledger.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(0), bonusPoints: 49))
            #expect(try await ledger.merchantBalance() == euros(50_00))
            // A retry of the declined payment is still the stored decline.
            #expect(try await ledger.settle(short, at: settleTime + 99) == (try await ledger.result(for: paymentID(1))))
            _ = try await expectStoredDecline(
                ledger, request(4, amount: euros(1)), code: .insufficientFunds,
                reason: "this wallet holds no EUR")
            #expect(try await rawWalletBalances(ledger) == [0])
        }
    }

    @Test func refuseUnknownDeclinesWalletsItDoesNotKnow() async throws {
        try await withLedgerDirectory { directory in
            let configuration = InProcessLedgerConfiguration(enrollment: .refuseUnknown)
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory), configuration: configuration)
            let stranger = request(1, wallet: 5, amount: euros(10_00))
            let declined = try await ledger.settle(stranger, at: settleTime)
            #expect(
                declined.outcome
                    == .declined(
                        code: .unknownWallet, reason: "this wallet is not registered with the merchant's Horizon server"
                    ))
            // Answered, but no row: a key anyone can make must not fill the merchant's transactions.
            #expect(try await ledger.result(for: stranger.paymentID) == nil)
            #expect(try await ledger.transactions().isEmpty)
            #expect(try await ledger.account(for: walletKey(5)) == nil)
            #expect(try await rawWalletBalances(ledger).isEmpty)

            // Once enrolled, a new payment goes through.
            try await ledger.setBalance(30_00, for: walletKey(5))
            let known = try await ledger.settle(request(2, wallet: 5, amount: euros(10_00)), at: settleTime)
            #expect(known.outcome.isApproved)
            #expect(try await ledger.account(for: walletKey(5))?.balance == euros(20_00))
        }
    }

    // MARK: Failing storage

    @Test func aWriteThatFailsHalfWayRollsEverythingBack() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(
                path: ledgerPath(in: directory), configuration: Self.configuration)
            // The money moves first, then the transaction row is written: make that last write fail.
            try await rawQuery(
                ledger,
                "CREATE TRIGGER fail_insert BEFORE INSERT ON transactions BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
            )
            let payment = request(1, amount: euros(10_00))
            do throws(ProcessorError) {
                _ = try await ledger.settle(payment, at: settleTime)
                Issue.record("settle succeeded although its write failed")
            } catch {
                guard case .storage(let reason) = error else {
                    Issue.record("expected a storage error, got \(error)")
                    return
                }
                // The failing statement (its first 60 characters), SQLite's message and code.
                #expect(
                    reason.hasPrefix(
                        "the database refused the operation: INSERT INTO transactions(payment_id, merchant_id,"))
                #expect(reason.hasSuffix(": disk on fire (SQLite 19)"))
                #expect(error.description == "the ledger could not be written: \(reason)")
            }
            #expect(try await ledger.account(for: walletKey(1)) == nil)
            #expect(try await ledger.merchantBalance() == .zero(.eur))
            #expect(try await ledger.executionCount(of: paymentID(1)) == 0)
            #expect(try await ledger.result(for: paymentID(1)) == nil)
            // Repaired, the same payment executes once.
            try await rawQuery(ledger, "DROP TRIGGER fail_insert")
            #expect(try await ledger.settle(payment, at: settleTime + 1).outcome.isApproved)
            #expect(try await ledger.account(for: walletKey(1))?.balance == euros(240_00))
        }
    }

    // MARK: Durability

    @Test func everythingSurvivesClosingAndReopening() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            // The first ledger is closed before the file is opened again.
            let first = try await InProcessLedger.open(path: path, configuration: Self.configuration)
            let approved = try await first.settle(request(1, amount: euros(40_00), tip: euros(4_00)), at: settleTime)
            let declined = try await first.settle(request(2, amount: euros(500_00)), at: settleTime + 1)
            try await first.addRegisterUser("zoe")
            try await first.addRegisterUser("anna")
            await first.close()
            #expect(approved.outcome.isApproved)
            #expect(!declined.outcome.isApproved)

            let reopened = try await InProcessLedger.open(path: path, configuration: Self.configuration)
            #expect(
                try await reopened.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(206_00), bonusPoints: 120))
            #expect(try await reopened.merchantBalance() == euros(44_00))
            #expect(try await reopened.transactions() == [declined, approved])
            #expect(try await reopened.result(for: paymentID(1)) == approved)
            #expect(try await reopened.result(for: paymentID(2)) == declined)
            #expect(try await reopened.registerUsers() == ["anna", "zoe"])
            // Exactly once across the restart.
            #expect(
                try await reopened.settle(request(1, amount: euros(40_00), tip: euros(4_00)), at: settleTime + 99)
                    == approved
            )
            #expect(try await reopened.executionCount(of: paymentID(1)) == 1)
            #expect(try await reopened.account(for: walletKey(1))?.balance == euros(206_00))
            #expect(try await reopened.ledger.schemaVersion() == LedgerSchema.currentVersion)
        }
    }

    @Test func reopeningWithAnotherCurrencyIsRefused() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            let first = try await InProcessLedger.open(path: path, configuration: Self.configuration)
            _ = try await first.settle(request(1, amount: euros(10_00)), at: settleTime)
            await first.close()
            // The same file opened by a terminal now configured for dollars.
            // The same file opened by a terminal now configured for dollars is refused: the
            // wallet rows hold euros, which must never be relabelled as dollars.
            await #expect(
                throws: LedgerError.invalidConfiguration(
                    "the ledger at \(path) keeps EUR, not USD; use a new data directory for another currency")
            ) {
                try await InProcessLedger.open(
                    path: path, configuration: InProcessLedgerConfiguration(currency: .usd, enrollment: .refuseUnknown))
            }
            // Reopened in its own currency, nothing changed.
            let euro = try await InProcessLedger.open(path: path, configuration: Self.configuration)
            #expect(try await euro.account(for: walletKey(1))?.balance == euros(240_00))
        }
    }

    @Test func theFileIsPrivateAndCommitsAreDurable() async throws {
        try await withLedgerDirectory { directory in
            let path = ledgerPath(in: directory)
            let ledger = try await InProcessLedger.open(path: path)
            _ = try await ledger.settle(request(1, amount: euros(1_00)), at: settleTime)
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            // The write-ahead log and its index carry the same mode.
            for suffix in ["-wal", "-shm"] {
                let companion = try FileManager.default.attributesOfItem(atPath: path + suffix)
                #expect((companion[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(suffix)")
            }
            #expect(try await rawQuery(ledger, "PRAGMA journal_mode").map { try $0.text("journal_mode") } == ["wal"])
            #expect(try await rawQuery(ledger, "PRAGMA synchronous").map { try $0.integer("synchronous") } == [2])
            #expect(try await rawQuery(ledger, "PRAGMA foreign_keys").map { try $0.integer("foreign_keys") } == [1])
            #expect(ledger.path == path)
        }
    }

    // MARK: Conservation

    @Test func moneyIsConservedOverManyRandomPayments() async throws {
        try await withLedgerDirectory { directory in
            let startingBalance: Int64 = 100_00
            let configuration = InProcessLedgerConfiguration(
                enrollment: .sandboxOnFirstContact(startingBalance: startingBalance))
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory), configuration: configuration)
            var random = SeededRandom(seed: 2026, label: "ledger conservation")
            var approved = 0
            var declined = 0
            var charged: Int64 = 0
            var pointsEarned: Int64 = 0
            var outcomes: [Int: SettlementResult] = [:]
            for id in 0..<200 {
                let wallet = Int(random.next() % 10)
                // Up to 40.00 plus up to 5.00 tip against 100.00 each: many wallets run dry.
                let amount = Int64(random.next() % 40_01)
                let tip = random.chance(0.5) ? Int64(random.next() % 5_01) : 0
                let payment = request(id, wallet: wallet, amount: euros(amount), tip: euros(tip))
                let result = try await ledger.settle(payment, at: settleTime + UnixTime(id))
                outcomes[id] = result
                if case .approved(_, let earned, _) = result.outcome {
                    approved += 1
                    charged += amount + tip
                    pointsEarned += earned
                    #expect(earned == amount / 100)
                } else {
                    declined += 1
                }
                // Now and then a retry of an earlier payment: it must change nothing.
                if random.chance(0.2) {
                    let earlier = Int(random.next() % UInt64(id + 1))
                    #expect(try await ledger.result(for: paymentID(earlier)) == outcomes[earlier])
                }
            }
            #expect(approved + declined == 200)
            #expect(approved > 50)
            #expect(declined > 10)

            let balances = try await rawWalletBalances(ledger)
            #expect(balances.count == 10)
            #expect(balances.allSatisfy { $0 >= 0 })
            let merchant = try await ledger.merchantBalance().minorUnits
            #expect(merchant == charged)
            #expect(balances.reduce(0, +) + merchant == Int64(balances.count) * startingBalance)
            var points: Int64 = 0
            for wallet in 0..<10 { points += try await ledger.account(for: walletKey(wallet))?.bonusPoints ?? 0 }
            #expect(points == pointsEarned)

            let counts = try await rawQuery(ledger, "SELECT outcome, COUNT(*) AS n FROM transactions GROUP BY outcome")
            var byOutcome: [String: Int64] = [:]
            for row in counts { byOutcome[try row.text("outcome")] = try row.integer("n") }
            // And the books balance: every approval is an entry whose postings sum to zero.
            #expect(try await LedgerAudit.violations(in: ledger.ledger.store).isEmpty)
            #expect(byOutcome == ["approved": Int64(approved), "declined": Int64(declined)])
            let stored = try await allTransactions(ledger)
            #expect(stored.count == 200)
            #expect(stored.filter(\.outcome.isApproved).count == approved)
            #expect(stored.reversed().map(\.paymentID) == (0..<200).map(paymentID))
        }
    }

    @Test func theLedgersCheckConstraintsHoldAgainstDirectWrites() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory))
            // A wallet account below zero is refused by the table itself, whatever wrote it.
            await #expect(throws: LedgerError.self) {
                try await rawQuery(
                    ledger,
                    "INSERT INTO accounts(kind, owner_id, currency, balance) VALUES ('wallet', 'w_x', 'EUR', -1)")
            }
            await #expect(throws: LedgerError.invalidArgument("a balance must be 0 to 10^15 minor units")) {
                try await ledger.setBalance(-5, for: walletKey(2))
            }
            #expect(try await rawWalletBalances(ledger).isEmpty)
        }
    }

    // MARK: Register users

    @Test func registerUsersAreAddedListedSortedAndRemoved() async throws {
        try await withLedgerDirectory { directory in
            let ledger = try await InProcessLedger.open(path: ledgerPath(in: directory))
            #expect(try await ledger.registerUsers().isEmpty)
            for name in ["zoe", "anna", "Mia", "bob", "anna", "zoe"] {
                try await ledger.addRegisterUser(name, at: settleTime)
            }
            // Sorted by code point (upper case before lower), each name once.
            #expect(try await ledger.registerUsers() == ["Mia", "anna", "bob", "zoe"])
            #expect(try await ledger.removeRegisterUser("anna"))
            #expect(try await !ledger.removeRegisterUser("anna"))
            #expect(try await !ledger.removeRegisterUser("nobody"))
            #expect(try await !ledger.removeRegisterUser("mia"))
            #expect(try await ledger.registerUsers() == ["Mia", "bob", "zoe"])
            try await ledger.addRegisterUser("anna")
            #expect(try await ledger.registerUsers() == ["Mia", "anna", "bob", "zoe"])
        }
    }
}

@Suite("In-process ledger configuration")
struct InProcessLedgerConfigurationTests {
    @Test func absurdConfigurationsAreRefusedUpFront() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cfg-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        await #expect(
            throws: LedgerError.invalidConfiguration("the sandbox's starting balance must be 0 to 10^15 minor units")
        ) {
            try await InProcessLedger.open(
                path: path,
                configuration: InProcessLedgerConfiguration(enrollment: .sandboxOnFirstContact(startingBalance: -1)))
        }
        await #expect(throws: LedgerError.invalidConfiguration("bonus points per unit must be 0 to 1000000")) {
            try await InProcessLedger.open(
                path: path, configuration: InProcessLedgerConfiguration(bonusPointsPerMajorUnit: -5))
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

// MARK: Helpers (the old HorizonStoresTests' Support.swift, for the in-process ledger)

/// Runs `body` with a fresh, empty directory, removed afterwards whatever `body` does.
func withLedgerDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "horizon-in-process-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// The path of the ledger file inside `directory` (a terminal's name for it).
func ledgerPath(in directory: URL) -> String { directory.appendingPathComponent("ledger.sqlite").path }

/// Every transaction in the ledger, newest first.
func allTransactions(_ ledger: InProcessLedger) async throws -> [SettlementResult] {
    try await ledger.transactions(limit: 100_000)
}

/// The raw balance of every wallet account, straight from the table (not through `Money`,
/// which could not even hold a negative amount).
func rawWalletBalances(_ ledger: InProcessLedger) async throws -> [Int64] {
    try await rawQuery(ledger, "SELECT balance FROM accounts WHERE kind = 'wallet'").map { try $0.integer("balance") }
}

/// Runs one statement on the ledger's store, in a transaction of its own.
@discardableResult
func rawQuery(_ ledger: InProcessLedger, _ sql: String, _ parameters: [SQLValue] = []) async throws -> [SQLRow] {
    try await ledger.ledger.store.transaction { db in try await db.query(sql, parameters) }
}

/// The time every test settles at, a Unix time in 2027.
let settleTime: UnixTime = 1_800_000_000
