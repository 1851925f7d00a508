import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores
import HorizonTestSupport
import Testing

@Suite("Sandbox ledger", .offTheCooperativePool)
struct SandboxLedgerTests {
    static let configuration = LedgerConfiguration(
        currency: .eur, enrollment: .onFirstContact(startingBalance: 250_00), bonusPointsPerMajorUnit: 3)

    // MARK: Approving

    @Test func settleApprovesEnrolsOnFirstContactAndMovesExactlyAmountPlusTip() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            #expect(try ledger.account(for: walletKey(1)) == nil)
            #expect(try ledger.merchantBalance() == .zero(.eur))
            #expect(try ledger.transactions().isEmpty)

            let first = try ledger.settle(request(1, amount: euros(12_34), tip: euros(1_50)), at: settleTime)
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
                try ledger.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(250_00 - 13_84), bonusPoints: 36))
            #expect(try ledger.merchantBalance() == euros(13_84))

            // Less than one whole euro earns no points; the balance keeps what it had.
            let second = try ledger.settle(request(2, amount: euros(99)), at: settleTime + 60)
            guard case .approved(let secondReference, 0, 36) = second.outcome else {
                Issue.record("expected an approval earning 0 points, got \(second.outcome)")
                return
            }
            #expect(secondReference > firstReference)
            #expect(try ledger.account(for: walletKey(1))?.balance == euros(250_00 - 13_84 - 99))
            #expect(try ledger.merchantBalance() == euros(13_84 + 99))

            // Another wallet is enrolled with its own starting balance.
            let third = try ledger.settle(
                request(3, wallet: 2, amount: euros(100_00), tip: euros(50_00)), at: settleTime + 120)
            guard case .approved(let thirdReference, 300, 300) = third.outcome else {
                Issue.record("expected an approval earning 300 points, got \(third.outcome)")
                return
            }
            #expect(thirdReference > secondReference)
            #expect(
                try ledger.account(for: walletKey(2))
                    == WalletAccount(walletKey: walletKey(2), balance: euros(100_00), bonusPoints: 300))
            #expect(try ledger.merchantBalance() == euros(13_84 + 99 + 150_00))

            // Newest first, exactly the results handed out.
            #expect(try ledger.transactions() == [third, second, first])
            #expect(try ledger.transactions(limit: 2) == [third, second])
            #expect(try ledger.result(for: paymentID(1)) == first)
            #expect(try ledger.result(for: paymentID(3)) == third)
            #expect(try ledger.result(for: paymentID(99)) == nil)
            for id in 1...3 { #expect(try ledger.executionCount(of: paymentID(id)) == 1) }
            #expect(try ledger.executionCount(of: paymentID(99)) == 0)
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
    func bonusPoints(amount: Int64, tip: Int64, rule: Int64, expected: Int64) throws {
        try withTemporaryDirectory { directory in
            let configuration = LedgerConfiguration(
                currency: .eur, enrollment: .onFirstContact(startingBalance: 1_000_00), bonusPointsPerMajorUnit: rule)
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: configuration)
            let result = try ledger.settle(request(1, amount: euros(amount), tip: euros(tip)), at: settleTime)
            guard case .approved(_, let earned, let balance) = result.outcome else {
                Issue.record("expected an approval, got \(result.outcome)")
                return
            }
            #expect(earned == expected)
            #expect(balance == expected)
            #expect(try ledger.account(for: walletKey(1))?.bonusPoints == expected)
            #expect(try ledger.account(for: walletKey(1))?.balance == euros(1_000_00 - amount - tip))
        }
    }

    @Test func yenHaveNoMinorUnitsSoEveryYenIsAWholeUnit() throws {
        try withTemporaryDirectory { directory in
            let configuration = LedgerConfiguration(
                currency: .jpy, enrollment: .onFirstContact(startingBalance: 10_000), bonusPointsPerMajorUnit: 2)
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: configuration)
            let yen = try Money(minorUnits: 1_200, currency: .jpy)
            let result = try ledger.settle(
                request(1, amount: yen, tip: try Money(minorUnits: 300, currency: .jpy)), at: 0)
            guard case .approved(_, 2_400, 2_400) = result.outcome else {
                Issue.record("expected 2400 points, got \(result.outcome)")
                return
            }
            #expect(try ledger.account(for: walletKey(1))?.balance == (try Money(minorUnits: 8_500, currency: .jpy)))
            #expect(try ledger.merchantBalance() == (try Money(minorUnits: 1_500, currency: .jpy)))
        }
    }

    // MARK: Exactly once

    @Test func aRetryGetsTheStoredResultAndMovesNothing() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            let payment = request(1, amount: euros(20_00), tip: euros(2_00))
            let original = try ledger.settle(payment, at: settleTime)
            #expect(original.outcome.isApproved)
            let walletAfter = try ledger.account(for: walletKey(1))
            #expect(walletAfter?.balance == euros(228_00))
            for delay in [0, 1, 3600] as [UnixTime] {
                // The retry may come much later: it still gets the first answer, time included.
                let retry = try ledger.settle(payment, at: settleTime + delay)
                #expect(retry == original)
                #expect(retry.settledAt == settleTime)
            }
            #expect(try ledger.executionCount(of: paymentID(1)) == 1)
            #expect(try ledger.account(for: walletKey(1)) == walletAfter)
            #expect(try ledger.merchantBalance() == euros(22_00))
            #expect(try ledger.transactions() == [original])
        }
    }

    @Test func theSameIDWithOtherContentIsAConflictAndMovesNothing() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            let original = try ledger.settle(request(7, amount: euros(20_00)), at: settleTime)
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
                #expect(throws: ProcessorError.conflictingRetry(paymentID(7))) {
                    try ledger.settle(conflict, at: settleTime + 5)
                }
            }
            #expect(try ledger.executionCount(of: paymentID(7)) == 1)
            #expect(try ledger.result(for: paymentID(7)) == original)
            #expect(try ledger.account(for: walletKey(1))?.balance == euros(230_00))
            #expect(try ledger.account(for: walletKey(2)) == nil)
            #expect(try ledger.merchantBalance() == euros(20_00))
            #expect(try ledger.transactions() == [original])
            #expect(
                ProcessorError.conflictingRetry(paymentID(7)).description
                    == "payment \(paymentID(7).bytes.hexString) was already executed with different content; refused")
        }
    }

    @Test func aRetryWithTheSameDigestButOtherTermsIsNotReplayed() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            let original = try ledger.settle(request(7, amount: euros(20_00)), at: settleTime)
            // The digest is the caller's word; the ledger also holds the amount, tip and wallet it
            // executed, and a retry naming other ones is not the same payment.
            let altered = [
                request(7, amount: euros(21_00), digest: digest(7)),
                request(7, amount: euros(20_00), tip: euros(5_00), digest: digest(7)),
                request(7, wallet: 2, amount: euros(20_00), digest: digest(7)),
            ]
            for retry in altered {
                #expect(throws: ProcessorError.conflictingRetry(paymentID(7))) {
                    try ledger.settle(retry, at: settleTime + 5)
                }
            }
            // Whatever it answers, nothing moves a second time.
            #expect(try ledger.executionCount(of: paymentID(7)) == 1)
            #expect(try ledger.result(for: paymentID(7)) == original)
            #expect(try ledger.account(for: walletKey(1))?.balance == euros(230_00))
            #expect(try ledger.account(for: walletKey(2)) == nil)
            #expect(try ledger.merchantBalance() == euros(20_00))
        }
    }

    // MARK: Declining

    /// Settles `payment`, expects exactly that decline, retries it and expects the identical stored
    /// result, and checks that no money moved: every wallet that existed keeps its balance and
    /// points, the merchant balance stays, and at most the paying wallet is newly enrolled.
    func expectStoredDecline(
        _ ledger: SandboxLedger, _ payment: SettlementRequest, code: ErrorCode, reason: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> SettlementResult {
        let walletsBefore = try walletRows(ledger)
        let merchantBefore = try ledger.merchantBalance()
        let result = try ledger.settle(payment, at: settleTime)
        #expect(result.outcome == .declined(code: code, reason: reason), sourceLocation: sourceLocation)
        #expect(!result.outcome.isApproved, sourceLocation: sourceLocation)
        #expect(result.paymentID == payment.paymentID, sourceLocation: sourceLocation)
        #expect(result.amount == payment.amount, sourceLocation: sourceLocation)
        #expect(result.tip == payment.tip, sourceLocation: sourceLocation)
        #expect(result.settledAt == settleTime, sourceLocation: sourceLocation)
        #expect(try ledger.result(for: payment.paymentID) == result, sourceLocation: sourceLocation)
        #expect(try ledger.settle(payment, at: settleTime + 30) == result, sourceLocation: sourceLocation)
        #expect(try ledger.executionCount(of: payment.paymentID) == 1, sourceLocation: sourceLocation)
        #expect(try ledger.merchantBalance() == merchantBefore, sourceLocation: sourceLocation)
        var walletsAfter = try walletRows(ledger)
        if walletsBefore[payment.walletKey.bytes] == nil { walletsAfter[payment.walletKey.bytes] = nil }
        #expect(walletsAfter == walletsBefore, sourceLocation: sourceLocation)
        #expect(try ledger.transactions().first == result, sourceLocation: sourceLocation)
        return result
    }

    /// Every wallet's balance and points, by key, straight from SQLite.
    func walletRows(_ ledger: SandboxLedger) throws -> [[UInt8]: [Int64]] {
        var rows: [[UInt8]: [Int64]] = [:]
        for row in try ledger.database.query("SELECT wallet_key, balance, bonus_points FROM wallets") {
            rows[row["wallet_key"].blob ?? []] = [row["balance"].integer ?? -1, row["bonus_points"].integer ?? -1]
        }
        return rows
    }

    @Test func aZeroAmountIsDeclinedAsInvalid() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            let reason = "the amount must be greater than zero"
            _ = try expectStoredDecline(ledger, request(1, amount: euros(0)), code: .invalidAmount, reason: reason)
            // A tip alone does not make a payment.
            _ = try expectStoredDecline(
                ledger, request(2, amount: euros(0), tip: euros(5_00)), code: .invalidAmount, reason: reason)
            // Amount plus tip above the system maximum (10^15 minor units) cannot be formed.
            let maximum = euros(Money.maximumMinorUnits)
            _ = try expectStoredDecline(
                ledger, request(3, amount: maximum, tip: euros(1)), code: .invalidAmount,
                reason: "amount plus tip is out of range")
            // Declined before enrolment: the wallet is still unknown.
            #expect(try ledger.account(for: walletKey(1)) == nil)
            #expect(try ledger.transactions().count == 3)
        }
    }

    @Test func anotherCurrencyIsDeclinedAsUnsupported() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            let dollars = try Money(minorUnits: 10_00, currency: .usd)
            let result = try expectStoredDecline(
                ledger, request(1, amount: dollars), code: .unsupportedCurrency,
                reason: "this terminal settles in EUR, not USD")
            #expect(result.amount == dollars)
            #expect(try ledger.account(for: walletKey(1)) == nil)
        }
    }

    @Test func aTipInAnotherCurrencyIsDeclinedAsUnsupported() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            let payment = request(1, amount: euros(10_00), tip: try Money(minorUnits: 1_00, currency: .usd))
            let result = try ledger.settle(payment, at: settleTime)
            guard case .declined(.unsupportedCurrency, let reason) = result.outcome else {
                Issue.record("expected an unsupported-currency decline, got \(result.outcome)")
                return
            }
            #expect(reason == "this terminal settles in EUR, not USD")
            #expect(try ledger.account(for: walletKey(1)) == nil)
            #expect(try ledger.merchantBalance() == .zero(.eur))
        }
    }

    @Test func aBalanceBelowAmountPlusTipIsDeclinedAndExactlyEnoughApproves() throws {
        try withTemporaryDirectory { directory in
            let configuration = LedgerConfiguration(enrollment: .onFirstContact(startingBalance: 50_00))
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: configuration)
            // 49.00 + 1.01 is one cent more than the 50.00 the wallet is enrolled with.
            let short = request(1, amount: euros(49_00), tip: euros(1_01))
            _ = try expectStoredDecline(
                ledger, short, code: .insufficientFunds,
                reason: "insufficient funds: 50.01 EUR needed, 50.00 EUR available")
            // The first contact enrolled the wallet even though the payment was declined.
            #expect(
                try ledger.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(50_00), bonusPoints: 0))
            // The amount alone fitting does not help: the tip counts.
            _ = try expectStoredDecline(
                ledger, request(2, amount: euros(50_00), tip: euros(1)), code: .insufficientFunds,
                reason: "insufficient funds: 50.01 EUR needed, 50.00 EUR available")

            // Exactly the balance approves and leaves zero.
            let exact = try ledger.settle(request(3, amount: euros(49_00), tip: euros(1_00)), at: settleTime)
            #expect(exact.outcome.isApproved)
            #expect(
                try ledger.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(0), bonusPoints: 49))
            #expect(try ledger.merchantBalance() == euros(50_00))
            // A retry of the declined payment is still the stored decline.
            #expect(try ledger.settle(short, at: settleTime + 99) == (try ledger.result(for: paymentID(1))))
            _ = try expectStoredDecline(
                ledger, request(4, amount: euros(1)), code: .insufficientFunds,
                reason: "insufficient funds: 0.01 EUR needed, 0.00 EUR available")
            #expect(try rawWalletBalances(ledger) == [0])
        }
    }

    @Test func refuseUnknownDeclinesWalletsItDoesNotKnow() throws {
        try withTemporaryDirectory { directory in
            let configuration = LedgerConfiguration(enrollment: .refuseUnknown)
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: configuration)
            let stranger = request(1, wallet: 5, amount: euros(10_00))
            _ = try expectStoredDecline(
                ledger, stranger, code: .unknownWallet, reason: "this wallet is not enrolled with the merchant")
            #expect(try ledger.account(for: walletKey(5)) == nil)
            #expect(try rawWalletBalances(ledger).isEmpty)

            // Once enrolled, a new payment goes through; the old id keeps its decline.
            try ledger.setBalance(30_00, for: walletKey(5))
            let known = try ledger.settle(request(2, wallet: 5, amount: euros(10_00)), at: settleTime)
            #expect(known.outcome.isApproved)
            #expect(try ledger.account(for: walletKey(5))?.balance == euros(20_00))
            let replay = try ledger.settle(stranger, at: settleTime + 10)
            #expect(
                replay.outcome
                    == .declined(code: .unknownWallet, reason: "this wallet is not enrolled with the merchant"))
            #expect(try ledger.account(for: walletKey(5))?.balance == euros(20_00))
        }
    }

    // MARK: Failing storage

    @Test func aWriteThatFailsHalfWayRollsEverythingBack() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: Self.configuration)
            // The money moves first, then the transaction row is written: make that last write fail.
            try ledger.database.execute(
                "CREATE TRIGGER fail_insert BEFORE INSERT ON transactions BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
            )
            let payment = request(1, amount: euros(10_00))
            do {
                _ = try ledger.settle(payment, at: settleTime)
                Issue.record("settle succeeded although its write failed")
            } catch {
                guard let error = error as? ProcessorError, case .storage(let reason) = error else {
                    Issue.record("expected a storage error, got \(error)")
                    return
                }
                // The failing statement (its first 60 characters), SQLite's message and code.
                #expect(reason.hasPrefix("INSERT INTO transactions(payment_id, transaction_type, item,"))
                #expect(reason.hasSuffix(": disk on fire (SQLite 19)"))
                #expect(error.description == "the ledger could not be written: \(reason)")
            }
            #expect(try ledger.account(for: walletKey(1)) == nil)
            #expect(try ledger.merchantBalance() == .zero(.eur))
            #expect(try ledger.executionCount(of: paymentID(1)) == 0)
            #expect(try ledger.result(for: paymentID(1)) == nil)
            // Repaired, the same payment executes once.
            try ledger.database.execute("DROP TRIGGER fail_insert")
            #expect(try ledger.settle(payment, at: settleTime + 1).outcome.isApproved)
            #expect(try ledger.account(for: walletKey(1))?.balance == euros(240_00))
        }
    }

    // MARK: Durability

    @Test func everythingSurvivesClosingAndReopening() throws {
        try withTemporaryDirectory { directory in
            let path = ledgerPath(in: directory)
            // The first ledger lives only inside this closure: it is closed when it returns.
            let (approved, declined): (SettlementResult, SettlementResult) = try {
                let ledger = try SandboxLedger(path: path, configuration: Self.configuration)
                let approved = try ledger.settle(request(1, amount: euros(40_00), tip: euros(4_00)), at: settleTime)
                let declined = try ledger.settle(request(2, amount: euros(500_00)), at: settleTime + 1)
                try ledger.addRegisterUser("zoe")
                try ledger.addRegisterUser("anna")
                return (approved, declined)
            }()
            #expect(approved.outcome.isApproved)
            #expect(!declined.outcome.isApproved)

            let reopened = try SandboxLedger(path: path, configuration: Self.configuration)
            #expect(
                try reopened.account(for: walletKey(1))
                    == WalletAccount(walletKey: walletKey(1), balance: euros(206_00), bonusPoints: 120))
            #expect(try reopened.merchantBalance() == euros(44_00))
            #expect(try reopened.transactions() == [declined, approved])
            #expect(try reopened.result(for: paymentID(1)) == approved)
            #expect(try reopened.result(for: paymentID(2)) == declined)
            #expect(try reopened.registerUsers() == ["anna", "zoe"])
            // Exactly once across the restart.
            #expect(
                try reopened.settle(request(1, amount: euros(40_00), tip: euros(4_00)), at: settleTime + 99) == approved
            )
            #expect(try reopened.executionCount(of: paymentID(1)) == 1)
            #expect(try reopened.account(for: walletKey(1))?.balance == euros(206_00))
            #expect(
                try reopened.database.query("SELECT value FROM meta WHERE key = 'schema_version'").first?["value"]
                    == .text("2"))
        }
    }

    @Test func reopeningWithAnotherCurrencyIsRefused() throws {
        try withTemporaryDirectory { directory in
            let path = ledgerPath(in: directory)
            try {
                let ledger = try SandboxLedger(path: path, configuration: Self.configuration)
                _ = try ledger.settle(request(1, amount: euros(10_00)), at: settleTime)
            }()
            // The same file opened by a terminal now configured for dollars.
            // The same file opened by a terminal now configured for dollars is refused: the
            // wallet rows hold euros, which must never be relabelled as dollars.
            #expect(
                throws: DatabaseError(
                    code: -1,
                    message: "this ledger keeps EUR, not USD; use a new data directory for another currency",
                    context: "opening \(path)")
            ) {
                try SandboxLedger(
                    path: path, configuration: LedgerConfiguration(currency: .usd, enrollment: .refuseUnknown))
            }
            // Reopened in its own currency, nothing changed.
            let euro = try SandboxLedger(path: path, configuration: Self.configuration)
            #expect(try euro.account(for: walletKey(1))?.balance == euros(240_00))
        }
    }

    @Test func theFileIsPrivateAndCommitsAreDurable() throws {
        try withTemporaryDirectory { directory in
            let path = ledgerPath(in: directory)
            let ledger = try SandboxLedger(path: path)
            _ = try ledger.settle(request(1, amount: euros(1_00)), at: settleTime)
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            // The write-ahead log and its index carry the same mode.
            for suffix in ["-wal", "-shm"] {
                let companion = try FileManager.default.attributesOfItem(atPath: path + suffix)
                #expect((companion[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(suffix)")
            }
            #expect(try ledger.database.query("PRAGMA journal_mode").map { $0["journal_mode"] } == [.text("wal")])
            #expect(try ledger.database.query("PRAGMA synchronous").map { $0["synchronous"] } == [.integer(2)])
            #expect(try ledger.database.query("PRAGMA foreign_keys").map { $0["foreign_keys"] } == [.integer(1)])
            #expect(ledger.database.path == path)
        }
    }

    // MARK: Conservation

    @Test func moneyIsConservedOverManyRandomPayments() throws {
        try withTemporaryDirectory { directory in
            let startingBalance: Int64 = 100_00
            let configuration = LedgerConfiguration(enrollment: .onFirstContact(startingBalance: startingBalance))
            let ledger = try SandboxLedger(path: ledgerPath(in: directory), configuration: configuration)
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
                let result = try ledger.settle(payment, at: settleTime + UnixTime(id))
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
                    #expect(try ledger.result(for: paymentID(earlier)) == outcomes[earlier])
                }
            }
            #expect(approved + declined == 200)
            #expect(approved > 50)
            #expect(declined > 10)

            let balances = try rawWalletBalances(ledger)
            #expect(balances.count == 10)
            #expect(balances.allSatisfy { $0 >= 0 })
            let merchant = try ledger.merchantBalance().minorUnits
            #expect(merchant == charged)
            #expect(balances.reduce(0, +) + merchant == Int64(balances.count) * startingBalance)
            var points: Int64 = 0
            for wallet in 0..<10 { points += try ledger.account(for: walletKey(wallet))?.bonusPoints ?? 0 }
            #expect(points == pointsEarned)

            let counts = try ledger.database.query("SELECT outcome, COUNT(*) AS n FROM transactions GROUP BY outcome")
            var byOutcome: [String: Int64] = [:]
            for row in counts { byOutcome[row["outcome"].text ?? "?"] = row["n"].integer }
            #expect(byOutcome == ["approved": Int64(approved), "declined": Int64(declined)])
            let stored = try allTransactions(ledger)
            #expect(stored.count == 200)
            #expect(stored.filter(\.outcome.isApproved).count == approved)
            #expect(stored.reversed().map(\.paymentID) == (0..<200).map(paymentID))
        }
    }

    // MARK: Register users

    @Test func registerUsersAreAddedListedSortedAndRemoved() throws {
        try withTemporaryDirectory { directory in
            let ledger = try SandboxLedger(path: ledgerPath(in: directory))
            #expect(try ledger.registerUsers().isEmpty)
            for name in ["zoe", "anna", "Mia", "bob", "anna", "zoe"] {
                try ledger.addRegisterUser(name, at: settleTime)
            }
            // Sorted by code point (upper case before lower), each name once.
            #expect(try ledger.registerUsers() == ["Mia", "anna", "bob", "zoe"])
            #expect(try ledger.removeRegisterUser("anna"))
            #expect(try !ledger.removeRegisterUser("anna"))
            #expect(try !ledger.removeRegisterUser("nobody"))
            #expect(try !ledger.removeRegisterUser("mia"))
            #expect(try ledger.registerUsers() == ["Mia", "bob", "zoe"])
            try ledger.addRegisterUser("anna")
            #expect(try ledger.registerUsers() == ["Mia", "anna", "bob", "zoe"])
        }
    }
}

@Suite("Sandbox ledger configuration", .offTheCooperativePool)
struct LedgerConfigurationTests {
    @Test func absurdConfigurationsAreRefusedUpFront() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cfg-\(UUID().uuidString).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(
            throws: DatabaseError(
                code: -1, message: "the starting balance must be 0 to 10^15", context: "ledger configuration")
        ) {
            try SandboxLedger(
                path: path, configuration: LedgerConfiguration(enrollment: .onFirstContact(startingBalance: -1)))
        }
        #expect(
            throws: DatabaseError(
                code: -1, message: "bonus points per unit must be 0 to 1000000", context: "ledger configuration")
        ) {
            try SandboxLedger(path: path, configuration: LedgerConfiguration(bonusPointsPerMajorUnit: -5))
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
