import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonServiceClients
import HorizonSimulatedRadio
import HorizonStores
import Logging

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List this wallet's transactions (from its server) and its pending payments.",
        discussion: """
            A registered wallet asks its server, newest first, a page at a time (--limit, then --cursor with the \
            cursor the page names). A sandbox wallet, with no server, lists the receipts it keeps itself.
            """)

    @Option(help: "Transactions per page, 1 to 100.") var limit = 20
    @Option(help: "The cursor a previous page printed, for the next page.") var cursor: String?
    @Option(help: "Show one transaction in full, by its payment id (32 hex digits).") var details: String?
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var pin: PINOptions
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: TerminalRelayOptions

    func validate() throws {
        guard (1...100).contains(limit) else { throw ValidationError("--limit must be 1 to 100") }
    }

    func run() async throws {
        let files = global.walletFiles
        _ = try files.loadPublicKey()
        let store = try files.openStore()
        // A payment with a receipt is settled: not listed as pending as well.
        let pending = HistoryMerge.unsettled(
            try SQLitePendingPaymentStore(store: store).all(), id: { "\($0.paymentID)" },
            settled: try store.receipts().map(\.paymentID))
        guard try WalletSession.account(files) != nil else {
            if cursor != nil || details != nil { throw CLIError(WalletSession.sandboxAdvice) }
            return try localReceipts(store.receipts(), pending: pending)
        }
        let session = try await WalletSession.open(files, pin: pin, relay: relay, verbose: global.verbose)
        defer { session.finish(json: json) }
        let client = WalletTransactionsClient(identityClient: session.identity, cache: session.cache)
        if let details {
            let result = try await session.call { () async throws(ServiceClientError) in
                try await client.transactionDetails(paymentID: details.lowercased())
            }
            if json { return try Console().json(TransactionJSON(result.value)) }
            let row = TransactionJSON(result.value)
            for (label, value) in row.lines { print(label.padding(toLength: 14, withPad: " ", startingAt: 0) + value) }
            if let note = WalletSession.note(result) { print(note) }
            return
        }
        // The wallet's own receipts and pending payments are shown whatever the server does: a
        // payment still pending must never disappear from the history because the network is down.
        let receipts = try store.receipts()
        let result: ServiceResult<WalletTransactionPage>?
        let unreachable: String?
        do {
            result = try await client.transactions(limit: limit, cursor: cursor)
            unreachable = nil
        } catch {
            guard case .server(let serverError) = error, serverError.isNetworkFailure else {
                throw CLIError(session.describe(error))
            }
            result = nil
            unreachable = session.describe(error)
        }
        if json {
            return try Console().json(
                ServerHistoryReport(
                    transactions: result?.value.transactions.map(TransactionJSON.init),
                    nextCursor: result?.value.nextCursor, pending: pending.map(PendingRow.init),
                    receipts: receipts.map(ReceiptJSON.init),
                    freshness: result.map(FreshnessJSON.init), serverError: unreachable))
        }
        guard let result else {
            FileHandle.standardError.write(
                Data(
                    "note: \(unreachable ?? "the server cannot be reached"); these are the receipts this wallet keeps itself\n"
                        .utf8))
            return try localReceipts(receipts, pending: pending)
        }
        let page = result.value
        let pendingHere = HistoryMerge.unsettled(
            pending, id: { "\($0.paymentID)" }, settled: page.transactions.map(\.paymentId))
        for payment in pendingHere {
            print("PENDING   \(payment.merchantName)  \(PendingRow(payment).what)  id \(payment.paymentID)")
        }
        if page.transactions.isEmpty, pendingHere.isEmpty {
            print(cursor == nil ? "no transactions yet" : "no more transactions")
        }
        // What a terminal accepted offline is not on the server until that terminal
        // forwards it; the wallet's own receipt says so meanwhile.
        if cursor == nil {
            let onServer = Set(page.transactions.map { $0.paymentId.lowercased() })
            for receipt in receipts where receipt.acceptedOffline == true && !onServer.contains(receipt.paymentID) {
                print(
                    "OFFLINE   \(receipt.merchantName)  \(Self.what(receipt))  id \(receipt.paymentID)  (accepted offline)"
                )
            }
        }
        for transaction in page.transactions { print(TransactionJSON(transaction).summary) }
        if let next = page.nextCursor { print("more: horizon-wallet history --cursor \(next)") }
        if let note = WalletSession.note(result) { print(note) }
    }

    /// A sandbox wallet's own receipts (its own store; no server to ask).
    private func localReceipts(_ receipts: [StoredReceipt], pending: [PendingPayment]) throws {
        if json {
            try Console().json(
                HistoryReport(receipts: receipts.map(ReceiptJSON.init), pending: pending.map(PendingRow.init)))
            return
        }
        if receipts.isEmpty, pending.isEmpty { print("no payments yet") }
        for payment in pending {
            print("PENDING   \(payment.merchantName)  \(PendingRow(payment).what)  id \(payment.paymentID)")
        }
        for receipt in receipts {
            let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(receipt.settledAt)))
            let offline = receipt.acceptedOffline == true ? "  (accepted offline)" : ""
            print("\(time)  \(receipt.merchantName)  \(Self.what(receipt))  payment \(receipt.paymentID)\(offline)")
        }
    }

    /// "12.50 EUR + tip 1.50 EUR" for a stored receipt.
    private static func what(_ receipt: StoredReceipt) -> String {
        let currency = (try? Currency(code: receipt.currency)) ?? .eur
        let amount = (try? Money(minorUnits: receipt.amountMinorUnits, currency: currency)) ?? .zero(currency)
        let tip = (try? Money(minorUnits: receipt.tipMinorUnits, currency: currency)) ?? .zero(currency)
        return "\(amount) + tip \(tip)"
    }
}

/// One transaction as the server reports it, for JSON and for the lines printed.
struct TransactionJSON: Encodable {
    let paymentId: String
    let type: String
    let outcome: String
    let merchantId: String
    let merchantName: String
    let amount: JSONMoney
    let tip: JSONMoney
    let settledAt: Int64
    let reference: Int64?
    let item: String?
    let quantity: Int64?
    let bonusPointsEarned: Int64?
    let declineReason: String?
    let registerUser: String?
    /// What the merchant gave back, oldest first.
    let refunds: [RefundJSON]

    struct RefundJSON: Encodable {
        let refundId: String
        let amount: JSONMoney
        let destination: String
        let bonusPointsReversed: Int64
        let refundedAt: Int64
    }

    init(_ transaction: WalletTransaction) {
        paymentId = transaction.paymentId
        type = transaction.transactionType.rawValue
        outcome = transaction.outcome.rawValue
        merchantId = transaction.merchantId
        merchantName = transaction.merchantName
        amount = JSONMoney(minorUnits: transaction.amount, currency: transaction.currency)
        tip = JSONMoney(minorUnits: transaction.tip, currency: transaction.currency)
        settledAt = transaction.settledAt
        reference = transaction.reference
        item = transaction.item
        quantity = transaction.quantity
        bonusPointsEarned = transaction.bonusPointsEarned
        declineReason = transaction.declineReason
        registerUser = transaction.registerUser
        refunds = (transaction.refunds ?? []).map { refund in
            RefundJSON(
                refundId: refund.refundId, amount: JSONMoney(minorUnits: refund.amount, currency: refund.currency),
                destination: refund.destination, bonusPointsReversed: refund.bonusPointsReversed,
                refundedAt: refund.refundedAt)
        }
    }

    var what: String {
        switch type {
        case "payment": "\(amount.formattedAmount) + tip \(tip.formattedAmount) \(amount.currency)"
        case "bonus": "\(item ?? "") for \(quantity ?? 0) points"
        default: "\(type) \(item ?? "")"
        }
    }

    var summary: String {
        let refunded = refunds.isEmpty ? "" : "  refunded \(refunds.map(\.amount.formatted).joined(separator: ", "))"
        return
            "\(timeText(settledAt))  \(merchantName)  \(what)  \(outcome)\(declineReason.map { " (\($0))" } ?? "")\(refunded)  id \(paymentId)"
    }

    var lines: [(String, String)] {
        var lines: [(String, String)] = [
            ("payment id", paymentId), ("type", type), ("outcome", outcome),
            ("merchant", "\(merchantName) (\(merchantId))"),
            ("what", what), ("settled", timeText(settledAt)),
        ]
        if let reference { lines.append(("reference", "\(reference)")) }
        if let bonusPointsEarned, type == "payment" { lines.append(("points earned", "\(bonusPointsEarned)")) }
        if let registerUser { lines.append(("served by", registerUser)) }
        if let declineReason { lines.append(("declined", declineReason)) }
        for refund in refunds {
            lines.append(
                (
                    "refunded",
                    "\(refund.amount.formatted) on \(timeText(refund.refundedAt)) to \(refund.destination)"
                        + (refund.bonusPointsReversed > 0 ? ", \(refund.bonusPointsReversed) points taken back" : "")
                        + "  (refund \(refund.refundId))"
                ))
        }
        return lines
    }
}

/// A registered wallet's history: the server's page (nil when the server could not be reached
/// and nothing was cached, with `serverError` saying so), and what the wallet keeps itself.
struct ServerHistoryReport: Encodable {
    let transactions: [TransactionJSON]?
    let nextCursor: String?
    let pending: [PendingRow]
    let receipts: [ReceiptJSON]
    let freshness: FreshnessJSON?
    let serverError: String?
}

struct HistoryReport: Encodable {
    let receipts: [ReceiptJSON]
    let pending: [PendingRow]
}

struct PendingRow: Encodable {
    let paymentId: String
    let kind: String
    let merchantName: String
    /// "12.50 + tip 1.50 EUR" for a payment, the coupon or reward for a redemption.
    let what: String
    let createdAt: Int64

    init(_ pending: PendingPayment) {
        paymentId = pending.paymentID.description
        merchantName = pending.merchantName
        createdAt = pending.createdAt
        if let confirm = pending.confirm {
            kind = "payment"
            what = "\(confirm.amount) + tip \(confirm.tip)"
        } else if let redeem = pending.redeem {
            kind = redeem.transactionType.description
            what = redeem.quantity > 0 ? "\(redeem.item) for \(redeem.quantity) points" : redeem.item
        } else {
            kind = "request"
            what = ""
        }
    }
}
