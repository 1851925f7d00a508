import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonLedger
import HorizonStores

/// `transactions`: the ledger's history.
struct Transactions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the ledger's transactions, newest first.")

    @Option(help: "How many to show.") var limit = 20
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1 to 100000") }
    }

    func run() async throws {
        let ledger = try await global.terminalFiles.loadLedger()
        let transactions = try await ledger.transactions(limit: limit).map(TransactionRow.init)
        if json {
            try Console().json(transactions)
            return
        }
        if transactions.isEmpty { print("no transactions yet") }
        for row in transactions {
            let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(row.settledAt)))
            print(
                "\(time)  \(row.outcome.padding(toLength: 8, withPad: " ", startingAt: 0))  \(row.amount) + \(row.tip) \(row.currency)  payment \(row.paymentID)\(row.reason.map { "  (\($0))" } ?? "")"
            )
        }
    }
}

struct TransactionRow: Encodable {
    let paymentID: String
    let sessionID: String
    let outcome: String
    let reason: String?
    let reference: UInt64?
    let amount: String
    let tip: String
    let currency: String
    let settledAt: Int64

    init(_ result: SettlementResult) {
        paymentID = result.paymentID.description
        sessionID = result.sessionID.description
        switch result.outcome {
        case .approved(let reference, _, _):
            outcome = "approved"
            reason = nil
            self.reference = reference
        case .declined(let code, let text):
            outcome = "declined"
            reason = "\(code): \(text)"
            reference = nil
        }
        amount = result.amount.formattedAmount
        tip = result.tip.formattedAmount
        currency = result.amount.currency.code
        settledAt = result.settledAt
    }
}
