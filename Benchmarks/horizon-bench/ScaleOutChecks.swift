import Foundation
import HorizonCore
import HorizonLedger

/// The scale-out run's verdict, read back from the database the servers wrote: what the
/// driver was told must match what is stored, and the ledger's invariants must hold.
struct ScaleOutChecks {
    let ledger: Ledger
    let merchant: MerchantID
    let records: [ScaleOutPayment]
    let participants: [ScaleOutRun.Participant]
    /// The merchant's: every wallet was topped up and paid in it.
    let currency: Currency
    /// When the database's primary was SIGKILLed, if it was (Tools/scale-out.sh --failover).
    var primaryKilledAt: Date? = nil

    struct Outcome {
        var results: [CheckResult] = []
        var executions = 0
        var conflictingAnswers = 0
        var failover: FailoverCounts?
    }

    struct Stored {
        let reference: Int64
        let outcome: String
        let amount: Int64
        let tip: Int64
        let wallet: String?
    }

    func run() async throws -> Outcome {
        var outcome = Outcome()
        func check(_ name: String, _ problems: [String]) {
            outcome.results.append(
                CheckResult(
                    name: name, passed: problems.isEmpty,
                    detail: problems.isEmpty
                        ? "ok" : "\(problems.count) problem(s): " + problems.prefix(5).joined(separator: "; ")))
        }
        let merchant = merchant
        let rows = try await ledger.store.transaction { db in
            try await db.query(
                """
                SELECT payment_id, reference, outcome, amount, tip, wallet_id FROM transactions
                WHERE merchant_id = ?
                """, [.text(merchant.rawValue)])
        }
        var stored: [String: [Stored]] = [:]
        for row in rows {
            stored[try row.bytes("payment_id").hexString, default: []].append(
                Stored(
                    reference: try row.integer("reference"), outcome: try row.text("outcome"),
                    amount: try row.integer("amount"), tip: try row.integer("tip"),
                    wallet: try row.optionalText("wallet_id")))
        }

        // Every id: answered, each answer the same approved result, stored once as answered.
        var unanswered: [String] = []
        var disagreeing: [String] = []
        var notOnce: [String] = []
        var wrongTerms: [String] = []
        for record in records {
            let id = record.paymentID
            let answered = (record.answers + record.lateAnswers).compactMap { $0 }
            if answered.isEmpty || !record.failures.isEmpty || !record.approved {
                unanswered.append(
                    "payment \(record.number) (\(id.prefix(8))…): "
                        + (record.failures.first ?? (record.approved ? "no answer" : "declined")))
            }
            let rowsForID = stored[id] ?? []
            outcome.executions += rowsForID.count
            if rowsForID.count != 1 { notOnce.append("\(id.prefix(8))… has \(rowsForID.count) transactions") }
            guard let row = rowsForID.first else { continue }
            if Set(answered).count > 1 || answered.contains(where: { $0 != row.reference }) {
                outcome.conflictingAnswers += 1
                disagreeing.append("\(id.prefix(8))… answered \(Set(answered).sorted()), stored #\(row.reference)")
            }
            if row.outcome != "approved" || row.amount != record.amount || row.tip != record.tip
                || row.wallet != record.wallet
            {
                wrongTerms.append(
                    "\(id.prefix(8))… stored \(row.outcome) \(row.amount)+\(row.tip) for \(row.wallet ?? "no wallet")")
            }
        }
        check("every payment answered and approved on every copy (retries included)", unanswered)
        check("every id executed exactly once: one transaction row per id", notOnce)
        check("every answer for an id is the stored result (same reference)", disagreeing)
        check("every transaction has the signed amount, tip and wallet, approved", wrongTerms)
        let sent = Set(records.map(\.paymentID))
        let strays = stored.keys.filter { !sent.contains($0) }
        check(
            "no transaction for the merchant beyond the ids sent",
            strays.prefix(5).map { "\($0.prefix(8))… was never sent" } + (strays.count > 5 ? ["…"] : []))

        // The books, from the rows alone.
        let totals = try await ledger.store.transaction { db in
            try await db.query(
                "SELECT currency, CAST(SUM(amount) AS BIGINT) AS total FROM postings GROUP BY currency")
        }
        var unbalanced: [String] = []
        for row in totals where try row.integer("total") != 0 {
            unbalanced.append("\(try row.text("currency")) postings sum to \(try row.integer("total"))")
        }
        check("postings sum to zero per currency", unbalanced)
        let negative = try await ledger.store.transaction { db in
            try await db.query("SELECT owner_id, balance FROM accounts WHERE kind = 'wallet' AND balance < 0")
        }
        check(
            "no negative wallet",
            try negative.map { "wallet \(try $0.text("owner_id")) at \(try $0.integer("balance"))" })

        var misdebited: [String] = []
        var owed: [String: Int64] = [:]
        for record in records { owed[record.wallet, default: 0] += record.amount + record.tip }
        for participant in participants {
            let wallet = participant.walletID.rawValue
            let paid = try await ledger.store.transaction { db in
                try await db.query(
                    """
                    SELECT CAST(COALESCE(SUM(p.amount), 0) AS BIGINT) AS paid, CAST(COUNT(*) AS BIGINT) AS postings
                    FROM postings p JOIN entries e ON e.id = p.entry_id JOIN accounts a ON a.id = p.account_id
                    WHERE a.kind = 'wallet' AND a.owner_id = ? AND e.kind = 'payment'
                    """, [.text(wallet)]
                ).first
            }
            let debited = -(try paid?.integer("paid") ?? 0)
            let balance = try await ledger.balance(of: participant.walletID, in: currency)
            let expected = owed[wallet, default: 0]
            if debited != expected || balance.minorUnits != participant.topUp - expected {
                misdebited.append(
                    "\(wallet): debited \(debited), balance \(balance.minorUnits); expected \(expected) and \(participant.topUp - expected)"
                )
            }
        }
        check("each wallet debited exactly the sum of its payments", misdebited)
        let credited = try await ledger.balance(of: merchant).minorUnits
        let total = records.reduce(Int64(0)) { $0 + $1.amount + $1.tip }
        check(
            "the merchant credited exactly the total of the payments",
            credited == total ? [] : ["merchant balance \(credited), payments total \(total)"])
        let violations = try await LedgerAudit.violations(in: ledger.store)
        check("LedgerAudit finds no violation", violations)

        if let killedAt = primaryKilledAt {
            // What a till showed as approved before the primary died must have survived it, once;
            // what it never got an answer for, it sent again with the same id, and that settled once.
            let approvedBefore = records.filter { ($0.firstApprovedAt ?? .distantFuture) < killedAt }
            let unanswered = records.filter { $0.unansweredAttempts > 0 }
            let settled = unanswered.filter { record in
                record.failures.isEmpty && record.approved && (stored[record.paymentID]?.count ?? 0) == 1
            }
            let counts = FailoverCounts(
                approvedBeforeKill: approvedBefore.count, unanswered: unanswered.count,
                retriedSettled: settled.count, retries: unanswered.reduce(0) { $0 + $1.unansweredAttempts },
                inLedger: records.filter { (stored[$0.paymentID]?.count ?? 0) >= 1 }.count,
                duplicates: records.filter { (stored[$0.paymentID]?.count ?? 0) > 1 }.count,
                auditOK: violations.isEmpty)
            outcome.failover = counts
            check(
                "every payment approved before the primary was killed is in the ledger exactly once",
                approvedBefore.filter { (stored[$0.paymentID]?.count ?? 0) != 1 }.map {
                    "\($0.paymentID.prefix(8))… has \(stored[$0.paymentID]?.count ?? 0) transactions"
                })
            check(
                "every payment left unanswered by the failover settled once when retried with its id",
                unanswered.filter { !settled.map(\.paymentID).contains($0.paymentID) }.map {
                    "\($0.paymentID.prefix(8))…: \($0.failures.first ?? "not settled once")"
                })
            check(
                "the primary was killed mid-burst (payments approved before it, and payments it left unanswered)",
                approvedBefore.isEmpty || unanswered.isEmpty
                    ? ["approved before the kill \(approvedBefore.count), unanswered \(unanswered.count)"] : [])
        }
        return outcome
    }
}

/// What became of the payments around the moment the database's primary was killed.
struct FailoverCounts: Codable, Sendable {
    /// Payments a terminal had an approval for before the kill.
    let approvedBeforeKill: Int
    /// Payments with at least one submission that got no answer (cut, timed out, 503).
    let unanswered: Int
    /// Of those, the ones whose retries (same payment id) settled, once.
    let retriedSettled: Int
    /// Submissions sent again after getting no answer.
    let retries: Int
    /// Payments with a transaction in the ledger.
    let inLedger: Int
    /// Payments with more than one: must be 0.
    let duplicates: Int
    let auditOK: Bool
}

struct CheckResult: Codable, Sendable {
    let name: String
    let passed: Bool
    let detail: String
}

/// The JSON result of `horizon-bench scale-out`.
struct ScaleOutReport: Codable {
    let generatedAt: String
    let machine: MachineDescription
    let setup: String
    let servers: [String]
    let terminals: Int
    let payments: Int
    let copiesPerServer: Int
    let lateRetries: Int
    let timeoutEvery: Int
    let timeoutMilliseconds: Int
    /// Every submission sent, the deliberate timeouts and retries included.
    let submissions: Int
    let duplicatesSent: Int
    let deliberateTimeouts: Int
    let answers: Int
    let retriesAfterFailure: Int
    let failuresByKind: [String: Int]
    /// Transaction rows for the ids sent: must equal `payments`.
    let executions: Int
    /// Ids whose answers disagreed with each other or with the stored row: must be 0.
    let conflictingAnswers: Int
    let seconds: Double
    let paymentsPerSecond: Double
    /// From the first of an id's simultaneous copies going out to the first answer.
    let paymentLatencyMilliseconds: Summary
    /// Each answered submission, from sending to its answer.
    let requestLatencyMilliseconds: Summary
    /// The primary's failover, when the run killed it.
    let failover: FailoverCounts?
    /// The server processes' CPU over the payments (with --server-pid).
    let serverCPU: ScaleOutServerCPU?
    let checks: [CheckResult]

    var passed: Bool { checks.allSatisfy(\.passed) }

    func table() -> String {
        var lines = [
            "Scale-out: \(servers.count) server processes, \(terminals) terminals, one database (\(setup))",
            "  payments            \(payments) in \(seconds.formatted(1)) s: \(paymentsPerSecond.formatted(1)) payments/s",
            "  submissions         \(submissions) (duplicates sent \(duplicatesSent); deliberate timeouts \(deliberateTimeouts); retries after a failure \(retriesAfterFailure))",
            "  answers             \(answers); executions \(executions); conflicting answers \(conflictingAnswers)",
            "  failures by kind    "
                + (failuresByKind.isEmpty
                    ? "none"
                    : failuresByKind.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(
                        separator: ", ")),
            "  payment latency     p50 \(paymentLatencyMilliseconds.median.formatted(1)) ms, p99 \(paymentLatencyMilliseconds.p99.formatted(1)) ms, max \(paymentLatencyMilliseconds.max.formatted(1)) ms",
            "  request latency     p50 \(requestLatencyMilliseconds.median.formatted(1)) ms, p99 \(requestLatencyMilliseconds.p99.formatted(1)) ms",
        ]
        if let serverCPU {
            lines.append(
                "  server CPU          \(serverCPU.milliseconds.formatted(1)) ms over the payments: \(serverCPU.millisecondsPerPayment.formatted(3)) ms per payment"
            )
        }
        if let failover {
            lines.append(
                "  failover            approved before the kill \(failover.approvedBeforeKill); unanswered \(failover.unanswered); "
                    + "retried \(failover.retries) times, settled \(failover.retriedSettled); in ledger \(failover.inLedger); "
                    + "duplicates \(failover.duplicates); audit \(failover.auditOK ? "ok" : "FAILED")")
        }
        lines.append("Checks (from the database):")
        for check in checks {
            lines.append("  \(check.passed ? "PASS" : "FAIL")  \(check.name)\(check.passed ? "" : ": \(check.detail)")")
        }
        lines.append(passed ? "scale-out: every check passed" : "scale-out: FAILED")
        return lines.joined(separator: "\n")
    }
}

/// The CPU time (user and system, every thread) the server processes spent from just before the
/// first payment to just after the last, against the payments settled.
struct ScaleOutServerCPU: Codable {
    let processes: Int
    let milliseconds: Double
    let millisecondsPerPayment: Double

    /// Nil when a process could not be read at either end (it ended, or was replaced mid-run).
    init?(before: [Int64?], after: [Int64?], payments: Int) {
        guard !before.isEmpty, payments > 0 else { return nil }
        var nanoseconds: Int64 = 0
        for (start, end) in zip(before, after) {
            guard let start, let end, end >= start else { return nil }
            nanoseconds += end - start
        }
        processes = before.count
        milliseconds = Double(nanoseconds) / 1_000_000
        millisecondsPerPayment = milliseconds / Double(payments)
    }
}
