import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadioCLISupport
import HorizonStores

/// `journal`: every confirmed request and its last durable step.
struct JournalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "journal",
        abstract: "List the journal: each confirmed payment or redemption and the last step on record.",
        discussion: """
            Steps: confirmed (the terminal owes it an execution), submitted (handed to the ledger), result (the \
            answer is stored), acknowledged (the wallet stored it). A request left at confirmed or submitted by a \
            crash is settled, once and with the same id, the next time a terminal command starts.
            """)

    @Option(help: "How many to show.") var limit = 20
    @Flag(help: "Only requests still owed an execution.") var unsettled = false
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1 to 100000") }
    }

    func run() async throws {
        let journal = try global.terminalFiles.openJournal()
        let records = try unsettled ? Array(journal.unsettled().prefix(limit)) : journal.records(limit: limit)
        let rows = records.map(JournalRow.init)
        if json {
            try Console().json(rows)
            return
        }
        if rows.isEmpty { print(unsettled ? "nothing unsettled" : "the journal is empty") }
        for row in rows {
            print(
                "\(row.step.padding(toLength: 12, withPad: " ", startingAt: 0))  \(row.type)  \(row.amount.formatted) + \(row.tip.formatted)  \(row.paymentId)  \(row.answer ?? "no answer yet")"
            )
        }
    }
}

struct JournalRow: Encodable {
    let paymentId: String
    let type: String
    let step: String
    let amount: JSONMoney
    let tip: JSONMoney
    let answer: String?

    init(_ record: JournalRecord) {
        paymentId = record.request.id.description
        type = "\(record.request.transactionType)"
        step = record.step.rawValue
        switch record.request {
        case .payment(let payment):
            amount = JSONMoney(payment.amount)
            tip = JSONMoney(payment.tip)
        case .redemption(let redemption):
            amount = JSONMoney(redemption.value)
            tip = JSONMoney(Money.zero(redemption.value.currency))
        }
        switch record.answer {
        case .receipt(let receipt)?:
            if case .declined(let code) = receipt.outcome {
                answer = "receipt: declined (\(code))"
            } else {
                answer = "receipt: approved"
            }
        case .error(let error)?: answer = "error: \(error.code)"
        default: answer = nil
        }
    }
}
