import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadioCLISupport
import HorizonStores
import Logging
import ServiceLifecycle

/// `journal`: the journal's requests (`list`, the default) and its retention (`compact`).
struct JournalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "journal",
        abstract: "List the journal, or compact what it holds of old payments.",
        subcommands: [JournalList.self, JournalCompact.self], defaultSubcommand: JournalList.self)
}

/// `journal compact`: answered requests older than a number of days kept as one row each.
struct JournalCompact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Keep each payment answered more than DAYS ago as one row (serve does it daily).",
        discussion: """
            A compacted request keeps its terms and its answer: status queries, a wallet's retry and \
            receipts are answered as before; its intermediate steps and old offers go. Requests still \
            owed an execution are never touched. Safe while serve runs.
            """)

    @Option(name: .customLong("older-than"), help: "Days a payment's answer is kept in full (at least 1).")
    var days = JournalRetention.defaultDays
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...36_500).contains(days) else { throw ValidationError("--older-than must be 1 to 36500 days") }
    }

    func run() async throws {
        let journal = try global.terminalFiles.openJournal()
        let compaction = try JournalRetention.compact(journal, keepingDays: days)
        Console().line(
            "compacted \(compaction.requests) payments answered more than \(days) days ago; \(compaction.rowsRemoved) rows removed"
        )
    }
}

/// How long the journal keeps a payment's steps in full.
enum JournalRetention {
    static let defaultDays = 90

    static func compact(_ journal: SQLiteTerminalJournal, keepingDays days: Int) throws
        -> SQLiteTerminalJournal.Compaction
    {
        let cutoff = UnixTime(Date().timeIntervalSince1970) - Int64(days) * 86_400
        do { return try journal.compact(answeredBefore: cutoff) } catch { throw CLIError("\(error)") }
    }
}

/// `journal list`: every confirmed request and its last durable step.
struct JournalList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
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

/// Compacts the journal when `serve` starts and every day after, in its service group.
struct JournalRetentionService: Service {
    let files: TerminalFiles
    let days: Int
    let logger: Logger

    func run() async throws {
        // A shutdown cancels the wait: this service's normal end, not a failure.
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let compaction = try JournalRetention.compact(files.openJournal(), keepingDays: days)
                    if compaction.requests > 0 || compaction.rowsRemoved > 0 {
                        logger.info(
                            "journal compacted",
                            metadata: ["payments": "\(compaction.requests)", "rows": "\(compaction.rowsRemoved)"])
                    }
                } catch {
                    logger.warning("journal compaction failed; tried again tomorrow: \(error)")
                }
                guard (try? await Task.sleep(for: .seconds(86_400))) != nil else { return }
            }
        }
    }
}
