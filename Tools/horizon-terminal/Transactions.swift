import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRadioCLISupport
import HorizonServiceClients
import HorizonSettlement
import HorizonStores

/// `transactions`: the merchant's history (an activated terminal's at its server, the sandbox's in its ledger).
struct Transactions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the merchant's transactions, newest first, or show one with its refunds.",
        discussion: """
            An activated terminal lists its merchant's transactions at the server, a page at a time: the last \
            line (or nextCursor in JSON) gives the --cursor of the next page. Filters: --from/--to (a date \
            2026-11-25, a time 2026-11-25T14:00:00Z, or Unix seconds; from inclusive, to exclusive), --type \
            (payment, bonus, gold, coupon) and --register-user (its id). With a payment id, shows that payment \
            with its refunds and what is left to refund. The single-box sandbox lists its own ledger (no filters).
            """)

    @Argument(help: "A payment's id: show it with its refunds.") var paymentID: String?
    @Option(help: "How many to show (a server page holds 1 to 200).") var limit = 20
    @Option(help: "The page to show: the cursor the page before printed.") var cursor: String?
    @Option(help: "Settled at or after: a date, a time (ISO 8601) or Unix seconds.") var from: String?
    @Option(help: "Settled before: a date, a time (ISO 8601) or Unix seconds.") var to: String?
    @Option(help: "Only one kind: payment, bonus, gold or coupon.") var type: String?
    @Option(help: "Only those of one register user (its id).") var registerUser: String?
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions
    @OptionGroup var admin: AdminSignInOptions

    func validate() throws {
        guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1 to 100000") }
        if let type, MerchantServiceClient.TransactionKind(rawValue: type) == nil {
            throw ValidationError("--type must be payment, bonus, gold or coupon")
        }
        _ = try Self.time(from, option: "--from")
        _ = try Self.time(to, option: "--to")
    }

    /// `text` as a point in time: Unix seconds, an ISO 8601 time, or a date (its midnight UTC).
    static func time(_ text: String?, option: String) throws -> Date? {
        guard let text else { return nil }
        if let seconds = Int64(text) { return Date(timeIntervalSince1970: TimeInterval(seconds)) }
        if let date = ISO8601DateFormatter().date(from: text) { return date }
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        if let date = day.date(from: text) { return date }
        throw ValidationError("\(option) must be a date (2026-11-25), a time (2026-11-25T14:00:00Z) or Unix seconds")
    }

    func run() async throws {
        if let merchant = try await admin.merchantService(global) {
            try await runAtServer(merchant)
            return
        }
        guard paymentID == nil, cursor == nil, from == nil, to == nil, type == nil, registerUser == nil else {
            throw CLIError(
                "the single-box sandbox lists its ledger newest first with --limit only; filters, paging and one payment's details need an activated terminal"
            )
        }
        let ledger = try await global.terminalFiles.loadLedger()
        let results = try await ledger.transactions(limit: limit)
        // The order references the register gave its sales are in the journal.
        let files = global.terminalFiles
        let journal = files.directory.exists(TerminalFiles.journal) ? try? files.openJournal() : nil
        let rows = results.map { result in
            TransactionRow(result, orderReference: Self.orderReference(of: result.paymentID, in: journal))
        }
        if json {
            try Console().json(TransactionPageJSON(transactions: rows, nextCursor: nil))
            return
        }
        if results.isEmpty { print("no transactions yet") }
        for (result, row) in zip(results, rows) {
            let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(row.settledAt)))
            // People read the decline's words; its code is for programs (--json).
            let reason: String? =
                if case .declined(_, let text) = result.outcome { text.isEmpty ? nil : text.sanitizedForDisplay } else {
                    nil
                }
            print(
                "\(time)  \(row.outcome.padding(toLength: 8, withPad: " ", startingAt: 0))  \(result.amount.formattedAmount) + \(result.tip.formattedAmount) \(result.amount.currency.code)  payment \(row.paymentId)\(row.orderReference.map { "  order \($0.sanitizedForDisplay)" } ?? "")\(reason.map { "  (\($0))" } ?? "")"
            )
        }
    }

    /// The merchant's order reference the journal holds for a payment, if any.
    static func orderReference(of id: PaymentID, in journal: SQLiteTerminalJournal?) -> String? {
        guard case .payment(let payment)? = (try? journal?.record(for: id))??.request, !payment.orderReference.isEmpty
        else { return nil }
        return payment.orderReference
    }

    private func runAtServer(_ merchant: MerchantServiceClient) async throws {
        if let paymentID {
            let details = try await merchant.run { try await $0.transaction(paymentID: paymentID.lowercased()) }
            if json {
                try Console().json(
                    TransactionDetailsJSON(
                        transaction: TransactionRow(details.transaction),
                        refunds: details.refunds.map(JSONRefund.init),
                        refundable: JSONMoney(
                            minorUnits: details.refundableAmount, currency: details.transaction.currency)))
                return
            }
            print(Self.line(details.transaction))
            for refund in details.refunds {
                print(
                    "  refund \(refund.refundId)  \(Self.amount(refund.amount, refund.currency)) \(refund.currency)"
                        .sanitizedForDisplay)
            }
            print("  refundable \(Self.amount(details.refundableAmount, details.transaction.currency))")
            return
        }
        let query = MerchantServiceClient.TransactionQuery(
            from: try Self.time(from, option: "--from"), to: try Self.time(to, option: "--to"),
            type: type.flatMap(MerchantServiceClient.TransactionKind.init(rawValue:)), registerUserID: registerUser,
            limit: min(limit, 200), cursor: cursor)
        let page = try await merchant.run { try await $0.transactions(query) }
        if json {
            try Console().json(
                TransactionPageJSON(
                    transactions: page.transactions.map(TransactionRow.init), nextCursor: page.nextCursor))
            return
        }
        if page.transactions.isEmpty { print("no transactions") }
        for transaction in page.transactions { print(Self.line(transaction)) }
        if let next = page.nextCursor { print("more: --cursor \(next)".sanitizedForDisplay) }
    }

    static func line(_ transaction: MerchantServiceClient.Transaction) -> String {
        let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(transaction.settledAt)))
        let outcome = transaction.outcome.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)
        let kind = transaction.transactionType.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0)
        var line =
            "\(time)  \(outcome)  \(kind)  \(amount(transaction.amount, transaction.currency)) + \(amount(transaction.tip, transaction.currency)) \(transaction.currency)  \(transaction.paymentId)"
        if !transaction.registerUser.isEmpty { line += "  by \(transaction.registerUser)" }
        if let reference = transaction.orderReference { line += "  order \(reference)" }
        if transaction.refundedAmount > 0 {
            line += "  refunded \(amount(transaction.refundedAmount, transaction.currency))"
        }
        if let reason = transaction.declineReason { line += "  (\(reason))" }
        // The server's text, made safe to print (no escape sequences, no bidi overrides).
        return line.sanitizedForDisplay
    }

    /// Minor units as the currency writes them (1.50 for 150 EUR cents).
    static func amount(_ minorUnits: Int64, _ code: String) -> String {
        guard let currency = try? Currency(code: code),
            let money = try? Money(minorUnits: minorUnits, currency: currency)
        else { return "\(minorUnits)" }
        return money.formattedAmount
    }
}

/// One transaction as `--json` shows it, from the sandbox's ledger or the server's list.
struct TransactionRow: Encodable {
    let paymentId: String
    let sessionId: String?
    let transactionType: String
    let outcome: String
    let reason: String?
    let reference: Int64?
    let amount: JSONMoney
    let tip: JSONMoney
    /// What was refunded of it so far (activated terminals: the server knows).
    let refunded: JSONMoney?
    let registerUser: String?
    /// The merchant's order reference (an intent's, or the one the register gave the sale).
    let orderReference: String?
    let terminalKeyId: String?
    let settledAt: Int64

    init(_ result: SettlementResult, orderReference: String? = nil) {
        self.orderReference = orderReference
        paymentId = result.paymentID.description
        sessionId = result.sessionID.description
        transactionType = TransactionKindName.name(result.transactionType)
        switch result.outcome {
        case .approved(let reference, _, _):
            outcome = "approved"
            reason = nil
            self.reference = Int64(truncatingIfNeeded: reference)
        case .declined(let code, let text):
            outcome = "declined"
            reason = "\(code): \(text)"
            reference = nil
        }
        amount = JSONMoney(result.amount)
        tip = JSONMoney(result.tip)
        refunded = nil
        registerUser = nil
        terminalKeyId = nil
        settledAt = result.settledAt
    }

    init(_ transaction: MerchantServiceClient.Transaction) {
        orderReference = transaction.orderReference
        paymentId = transaction.paymentId.lowercased()
        sessionId = nil
        transactionType = transaction.transactionType.rawValue
        outcome = transaction.outcome.rawValue
        reason = transaction.declineReason
        reference = transaction.outcome == .approved ? transaction.reference : nil
        amount = JSONMoney(minorUnits: transaction.amount, currency: transaction.currency)
        tip = JSONMoney(minorUnits: transaction.tip, currency: transaction.currency)
        refunded = JSONMoney(minorUnits: transaction.refundedAmount, currency: transaction.currency)
        registerUser = transaction.registerUser.isEmpty ? nil : transaction.registerUser
        terminalKeyId = transaction.terminalKeyId
        settledAt = transaction.settledAt
    }
}

struct TransactionPageJSON: Encodable {
    let transactions: [TransactionRow]
    /// The `--cursor` of the next page; absent on the last.
    let nextCursor: String?
}

struct TransactionDetailsJSON: Encodable {
    let transaction: TransactionRow
    let refunds: [JSONRefund]
    let refundable: JSONMoney
}
