import Foundation
import HorizonCore
import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonTestSupport
import Testing

@testable import HorizonStores

/// The journal stops growing forever: a year of payments compacted to one row each, the answers
/// read back unchanged, requests still owed an execution untouched, and the space reused.
@Suite("Journal retention", .offTheCooperativePool)
struct JournalRetentionTests {
    static let day: Int64 = 86_400
    static let perDay = 8

    func answer(_ id: Int) -> SessionMessage {
        .error(ErrorMessage(code: .insufficientFunds, message: "answer \(id)", paymentID: paymentID(id)))
    }

    /// Payments `first..<first+days*perDay`, one day after another from `start`, each with its
    /// five steps; every 50th is left confirmed only (a crash before it was submitted).
    func writeDays(_ days: Range<Int>, starting start: Int64, into journal: SQLiteTerminalJournal) throws {
        for day in days {
            try journal.database.transaction { (db) throws(DatabaseError) in
                for slot in 0..<Self.perDay {
                    let number = day * Self.perDay + slot + 1
                    let time = start + Int64(day) * Self.day + Int64(slot) * 60
                    var writes: [JournalWrite] = [
                        .offered(sessionID: session, transactionType: .payment, walletKey: walletKey(1)),
                        .confirmed(
                            .payment(request(number, amount: euros(Int64(100 + number)), signedConfirmation: [1, 2]))),
                    ]
                    if number % 50 != 0 {
                        writes += [
                            .submitted(paymentID(number)), .result(paymentID(number), answer: answer(number)),
                            .acknowledged(paymentID(number), by: walletKey(1)),
                        ]
                    }
                    for write in writes { _ = try SQLiteTerminalJournal.apply(write, at: time, in: db) }
                }
            }
        }
    }

    func rows(_ journal: SQLiteTerminalJournal) throws -> Int {
        Int(try journal.database.query("SELECT COUNT(*) AS n FROM steps").first?.integer("n") ?? -1)
    }

    func pages(_ journal: SQLiteTerminalJournal) throws -> Int64 {
        try journal.database.query("PRAGMA page_count").first?.integer("page_count") ?? -1
    }

    @Test func aYearOfPaymentsIsCompactedToOneRowEachAndReadsTheSame() throws {
        try withTemporaryDirectory { directory in
            let journal = try SQLiteTerminalJournal(path: directory.appendingPathComponent("journal.sqlite").path)
            let start: Int64 = 1_800_000_000
            try writeDays(0..<365, starting: start, into: journal)
            let payments = 365 * Self.perDay
            let unanswered = payments / 50
            #expect(try rows(journal) == payments * 2 + (payments - unanswered) * 3)
            let samples = [1, 2, 50, 777, 1_500, 2_919, 2_920]
            let before = try samples.map { try journal.record(for: paymentID($0)) }
            let unsettledBefore = try journal.unsettled().map(\.request.id)

            // Keep 30 days in full; everything answered before is compacted.
            let now = start + 365 * Self.day
            let cutoff = now - 30 * Self.day
            let compaction = try journal.compact(answeredBefore: cutoff, batch: 97)
            let old = 335 * Self.perDay
            let oldAnswered = old - old / 50
            #expect(compaction.requests == oldAnswered)
            // Old: one row per answered payment, the confirmed row of an unanswered one (no offer);
            // the last 30 days as they were.
            let recent = payments - old
            let recentAnswered = recent - (payments / 50 - old / 50)
            #expect(try rows(journal) == oldAnswered + old / 50 + recent * 2 + recentAnswered * 3)

            // The same answers and terms; a compacted request reads as answered.
            for (sample, record) in zip(samples, before) {
                let now = try journal.record(for: paymentID(sample))
                #expect(now?.request == record?.request && now?.answer == record?.answer, "payment \(sample)")
                if record?.step == .acknowledged { #expect(now?.step == .result || now?.step == .acknowledged) }
            }
            #expect(try journal.unsettled().map(\.request.id) == unsettledBefore)
            #expect(try journal.unreadable().isEmpty)
            // A retry of a compacted request is the same request; other terms are still refused.
            let first = request(1, amount: euros(101), signedConfirmation: [1, 2])
            try journal.write(.confirmed(.payment(first)), at: now)
            #expect(throws: JournalError.self) {
                try journal.write(.confirmed(.payment(request(1, amount: euros(9_999)))), at: now)
            }
            try journal.write(.acknowledged(paymentID(1), by: walletKey(1)), at: now)
            // Compacting again finds nothing more.
            #expect(try journal.compact(answeredBefore: cutoff) == .init())

            // A month later, compacted again: the file reuses what was freed instead of growing
            // by what a month of full steps takes.
            let pagesAfterCompaction = try pages(journal)
            try writeDays(365..<395, starting: start, into: journal)
            _ = try journal.compact(answeredBefore: now)
            let pagesAfterAMonth = try pages(journal)
            #expect(pagesAfterAMonth <= pagesAfterCompaction + 2, "\(pagesAfterAMonth) > \(pagesAfterCompaction)")
        }
    }
}
