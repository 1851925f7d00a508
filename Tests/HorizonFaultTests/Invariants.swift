import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonRoles
import HorizonStores

/// The exactly-once invariants (`docs/guarantees.md`), checked after a run from what is on disk:
/// the merchant's ledger and each wallet's store, each opened afresh, against the requests the
/// wallets signed and what they showed (the `Book`).
struct Invariants {
    let run: FaultSimulation

    /// One executed row of the ledger's `transactions` table.
    struct Row {
        let paymentID: PaymentID
        let type: TransactionType
        let sessionID: Int64
        let walletKey: [UInt8]
        let amount: Int64
        let tip: Int64
        let item: String
        let quantity: Int64
        let approved: Bool
        let bonusEarned: Int64
        let settledAt: Int64
    }

    func check() throws -> [String] {
        var violations: [String] = []
        let ledger = try BlockingLedger(path: run.ledgerPath, configuration: FaultSimulation.ledgerConfiguration)
        // The rows as stored, not through the ledger's own decoding.
        let rows = try SQLiteDatabase(path: run.ledgerPath).query("SELECT * FROM transactions ORDER BY reference")
            .compactMap(Self.row)
        // The books themselves: postings balance, no account below zero, one entry per payment.
        for violation in try ledger.auditViolations() { violations.append("ledger audit: \(violation)") }
        let walletByKey = Dictionary(uniqueKeysWithValues: run.wallets.map { ($0.identity.publicKey.bytes, $0.index) })
        var tally = run.tally
        tally.executedPayments = rows.filter { $0.type == .payment }.count
        tally.approvedPayments = rows.filter { $0.type == .payment && $0.approved }.count
        tally.executedRedemptions = rows.filter { $0.type != .payment }.count
        tally.approvedRedemptions = rows.filter { $0.type != .payment && $0.approved }.count
        run.tally = tally

        // No double charge: a request id executes once, and only a request a wallet signed, for
        // that wallet and with its terms; one session charges a wallet at most once.
        var seen: Set<PaymentID> = []
        var chargedSessions: Set<[Int64]> = []
        for row in rows {
            if !seen.insert(row.paymentID).inserted { violations.append("request \(row.paymentID) executed twice") }
            guard let signed = run.book.signed[row.paymentID] else {
                violations.append("request \(row.paymentID) was executed but no wallet signed it")
                continue
            }
            if walletByKey[row.walletKey] != signed.wallet {
                violations.append("request \(row.paymentID) of wallet \(signed.wallet) was charged to another wallet")
            }
            switch signed.request {
            case .confirm(let confirm):
                if row.type != .payment || row.amount != confirm.amount.minorUnits || row.tip != confirm.tip.minorUnits
                {
                    violations.append("payment \(row.paymentID) executed with other terms than the wallet signed")
                }
            case .redeem(let redeem):
                if row.type != redeem.transactionType || row.item != redeem.item || row.quantity != redeem.quantity {
                    violations.append("redemption \(row.paymentID) executed with other terms than the wallet signed")
                }
            default:
                violations.append("request \(row.paymentID) is neither a confirmation nor a redemption")
            }
            if row.approved, row.type == .payment,
                !chargedSessions.insert([Int64(signed.wallet), row.sessionID]).inserted
            {
                violations.append("wallet \(signed.wallet) was charged twice in session \(row.sessionID)")
            }
        }

        // Balances conserved: what each wallet lost the merchant gained, and exactly the approved
        // payments; points moved only by approved payments and bonus redemptions; each coupon and
        // each gold period used at most once, and only by an approved redemption.
        var totalOpening: Int64 = 0
        var totalNow: Int64 = 0
        var paidToMerchant: Int64 = 0
        for wallet in run.wallets {
            let key = wallet.identity.publicKey
            guard let opening = run.openingAccounts[wallet.index], let account = try ledger.account(for: key) else {
                violations.append("\(wallet.name) has no account")
                continue
            }
            let mine = rows.filter { $0.walletKey == key.bytes && $0.approved }
            let paid = mine.filter { $0.type == .payment }.reduce(Int64(0)) { $0 + $1.amount + $1.tip }
            paidToMerchant += paid
            totalOpening += opening.balance
            totalNow += account.balance.minorUnits
            if opening.balance - account.balance.minorUnits != paid {
                violations.append(
                    "\(wallet.name): balance went from \(opening.balance) to \(account.balance.minorUnits), approved payments total \(paid)"
                )
            }
            let earned = mine.filter { $0.type == .payment }.reduce(Int64(0)) { $0 + $1.bonusEarned }
            let spent = mine.filter { $0.type == .bonusRedemption }.reduce(Int64(0)) { $0 + $1.quantity }
            if opening.points + earned - spent != account.bonusPoints {
                violations.append(
                    "\(wallet.name): \(account.bonusPoints) points, expected \(opening.points) + \(earned) - \(spent)")
            }
            for coupon in try ledger.coupons(for: key) {
                let uses = mine.filter { $0.type == .couponRedemption && $0.item == coupon.code }.count
                if uses > 1 || (uses == 1) != (coupon.redeemedAt != nil) {
                    violations.append(
                        "coupon \(coupon.code): \(uses) approved redemptions, redeemed \(coupon.redeemedAt != nil)")
                }
            }
            if let gold = try ledger.goldMembership(for: key) {
                let periods = mine.filter { $0.type == .goldRedemption }.map {
                    ($0.settledAt - gold.validFrom) / gold.benefitPeriod
                }
                if Set(periods).count != periods.count {
                    violations.append("\(wallet.name) used a gold benefit twice in one period: \(periods)")
                }
            } else if mine.contains(where: { $0.type == .goldRedemption }) {
                violations.append("\(wallet.name) redeemed a gold benefit without a membership")
            }
        }
        let merchant = try ledger.merchantBalance().minorUnits
        if merchant != paidToMerchant {
            violations.append("the merchant holds \(merchant), approved payments \(paidToMerchant)")
        }
        if totalNow + merchant != totalOpening {
            violations.append("money is not conserved: wallets \(totalNow) + merchant \(merchant) != \(totalOpening)")
        }

        // No lost confirmed payment: every approved request is on its wallet's record (a receipt,
        // or still pending: none may be pending after winding down); every receipt a wallet keeps
        // is an approved request with the same terms.
        var receiptsByWallet: [Int: [String: StoredReceipt]] = [:]
        for wallet in run.wallets {
            let store = try WalletStore(path: wallet.storePath)
            receiptsByWallet[wallet.index] = Dictionary(
                try store.receipts().map { ($0.paymentID, $0) }, uniquingKeysWith: { first, _ in first })
            let pending = try store.pending()
            if !pending.isEmpty {
                violations.append("\(wallet.name) still has \(pending.count) pending request(s) after winding down")
            }
        }
        for row in rows where row.approved {
            guard let wallet = walletByKey[row.walletKey] else { continue }
            guard let receipt = receiptsByWallet[wallet]?[row.paymentID.description] else {
                let shown =
                    run.book.completed[row.paymentID] != nil
                    ? "it showed the receipt"
                    : run.book.failures.first { $0.requestID == row.paymentID }.map { "it showed failure: \($0.error)" }
                        ?? "it showed no outcome"
                violations.append(
                    "lost: \(row.type) \(row.paymentID) was executed for wallet \(wallet), which has no record of it (\(shown))"
                )
                continue
            }
            if receipt.amountMinorUnits != row.amount || receipt.tipMinorUnits != row.tip {
                violations.append("wallet \(wallet)'s receipt for \(row.paymentID) differs from the ledger")
            }
        }
        let approvedIDs = Set(rows.filter(\.approved).map(\.paymentID.description))
        for (wallet, receipts) in receiptsByWallet {
            for id in receipts.keys where !approvedIDs.contains(id) {
                violations.append("wallet \(wallet) keeps a receipt for \(id), which the ledger did not approve")
            }
        }
        for (id, shown) in run.book.completed where !approvedIDs.contains(id.description) {
            violations.append("wallet \(shown.wallet) showed a receipt for \(id), which the ledger did not approve")
        }

        // The journals: nothing executed that its terminal had not journaled as confirmed first;
        // every confirmed request settled by the end (recovery after each restart); the answer a
        // journal keeps agrees with the ledger.
        let rowsByID = Dictionary(rows.map { ($0.paymentID, $0) }, uniquingKeysWith: { first, _ in first })
        var journaled: Set<PaymentID> = []
        for terminal in run.terminals {
            let journal = try SQLiteTerminalJournal(path: terminal.journalPath)
            for record in try journal.unsettled() {
                violations.append("\(terminal.name)'s journal still owes \(record.request.id) an execution")
            }
            let history = try journal.history()
            var order: [PaymentID: [JournalStep]] = [:]
            for (step, id) in history { if let id { order[id, default: []].append(step) } }
            for (id, steps) in order {
                journaled.insert(id)
                if steps != steps.sorted() || steps.first != .confirmed {
                    violations.append("\(terminal.name)'s journal has \(id)'s steps out of order: \(steps)")
                }
                guard let record = try journal.record(for: id) else { continue }
                switch record.answer {
                case .receipt(let receipt)?:
                    // A key no wallet registered is declined without a row (anyone can make one).
                    if receipt.outcome == .declined(.unknownWallet), rowsByID[id] == nil { continue }
                    guard let row = rowsByID[id], row.approved == (receipt.outcome == .approved) else {
                        violations.append("\(terminal.name)'s journal answers \(id) with a receipt the ledger lacks")
                        continue
                    }
                case .error?:
                    if let row = rowsByID[id], row.approved {
                        violations.append(
                            "\(terminal.name)'s journal answers \(id) with an error; the ledger charged it")
                    }
                default: break
                }
            }
        }
        for row in rows where !journaled.contains(row.paymentID) {
            violations.append("\(row.type) \(row.paymentID) was executed without a journaled confirmation")
        }

        // The rogue central left no ledger row and ended or timed out no session.
        if let rogue = run.rogue {
            let found = rogue.violations(walletKeys: rows.map(\.walletKey))
            violations += found.executed
            run.tally.rogue.endedSessions = found.ended.count
            violations += found.ended
        }

        // No wallet showed failure for a request that was executed and approved.
        for failure in run.book.failures where approvedIDs.contains(failure.requestID.description) {
            violations.append(
                "wallet \(failure.wallet) showed failure (\(failure.error)) for \(failure.requestID), which was charged"
            )
        }
        return violations
    }

    static func row(_ row: DatabaseRow) throws -> Row? {
        let rawType = try row.integer("transaction_type")
        guard let id = try? PaymentID(bytes: try row.bytes("payment_id")),
            let type = TransactionType(rawValue: UInt8(truncatingIfNeeded: rawType))
        else { return nil }
        return Row(
            paymentID: id, type: type, sessionID: try row.integer("session_id"), walletKey: try row.bytes("wallet_key"),
            amount: try row.integer("amount"), tip: try row.integer("tip"), item: try row.text("item"),
            quantity: try row.integer("quantity"), approved: try row.text("outcome") == "approved",
            bonusEarned: try row.integer("bonus_earned"), settledAt: try row.integer("settled_at"))
    }
}
