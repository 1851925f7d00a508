import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Logging

/// How a confirmed request ended, as the terminal's journal has it.
enum JournaledOutcome: Sendable {
    /// Executed (approved or declined); `answer` (the signed receipt) is journaled and goes out.
    case executed(SettlementResult, answer: SessionMessage)
    /// Not executed, and never will be: the error names the id and is journaled as its answer.
    case refused(ErrorMessage, reason: String)
    /// The outcome is not on record yet (a journal write failed, or the processor, a server,
    /// could not be reached or did not answer in time: `serverUnreachable`): the error does *not*
    /// name the id, so the wallet keeps the payment pending and asks again; recovery settles it.
    case undecided(ErrorMessage, reason: String, serverUnreachable: Bool = false)
    /// The server was unreachable and the terminal accepted the payment against the
    /// wallet's daily token; the offline payment and its answer (the "accepted offline" receipt)
    /// are journaled, and it is forwarded to the server later.
    case acceptedOffline(OfflinePaymentRecord, answer: SessionMessage)
}

/// What recovery did at start.
public struct JournalRecoveryReport: Sendable, Equatable, CustomStringConvertible {
    /// Confirmed requests that now have their final answer (executed, or found executed).
    public var settled: [PaymentID] = []
    /// Confirmed requests the processor refused (their error is now the journaled answer).
    public var refused: [PaymentID] = []
    /// Requests still without an answer (the journal or the processor failed again; or a
    /// redemption with no redemption processor given), with why.
    public var unresolved: [Unresolved] = []
    /// Confirmed requests the journal holds but cannot decode: never settled automatically (their
    /// terms are unknown), reported so an operator looks at them.
    public var unreadable: [UnreadableRequest] = []

    public init() {}

    public struct Unresolved: Sendable, Equatable {
        public let id: PaymentID
        public let reason: String
    }

    /// Nothing was owed.
    public var isEmpty: Bool { settled.isEmpty && refused.isEmpty && unresolved.isEmpty && unreadable.isEmpty }

    public var description: String {
        if isEmpty { return "journal: nothing to recover" }
        var parts = ["journal: \(settled.count) confirmed request(s) settled after a restart"]
        if !refused.isEmpty { parts.append("\(refused.count) refused by the processor") }
        for item in unresolved { parts.append("\(item.id) still unresolved: \(item.reason)") }
        for item in unreadable {
            parts.append("confirmed request \(item) (journal.sqlite is damaged; it may have been charged)")
        }
        return parts.joined(separator: "; ")
    }
}

/// What the processor said about a submitted request: the part of an execution that may be slow
/// (a remote processor), run off the scheduler between the two journal writes.
enum ProcessorAnswer: Sendable {
    /// Final without a journaled answer: the submission was not journaled (refused: provably never
    /// executed; or undecided).
    case ended(JournaledOutcome)
    /// The processor executed it (approved or declined): the result to sign and journal.
    case settled(SettlementResult)
    /// The processor executed nothing, for good (a conflicting retry, or a storage failure the
    /// ledger proves left no result): the refusal to journal.
    case failed(ProcessorError)
}

/// How the executing request reaches its processor.
typealias ProcessorCall = @Sendable (JournalRequest) async throws(ProcessorError) -> SettlementResult

extension TerminalRadioService {
    static let undecidedAnswer = ErrorMessage(
        code: .internalError, message: "the terminal could not record the outcome yet; ask again later")

    // Executing a checked request journals every step before the next leaves: confirmed (from
    // here on the terminal owes it an execution), submitted, the processor, the result (the answer
    // the wallet gets, now and on every retry). The journal writes run where the caller runs (a
    // live session: the scheduler); the processor, which may be remote, is awaited between them
    // off the scheduler (`Scheduler.runExternal`).

    /// Step 1, on the scheduler: confirmed and submitted in one synced write (nothing leaves
    /// between them, and one commit instead of two keeps a payment's CPU in budget). Nil once on
    /// record, else the failure. Written before anything else can happen, so a retry or a status
    /// query arriving while the processor works finds the request confirmed ("still settling").
    func journalSubmission(_ request: JournalRequest, at now: UnixTime) -> JournalError? {
        do {
            try journal.write([.confirmed(request), .submitted(request.id)], at: now)
            return nil
        } catch {
            return error
        }
    }

    /// Step 2, off the scheduler: the processor, and what a failure means. Asks the processor
    /// only if the submission is on record.
    func askProcessor(_ request: JournalRequest, submissionFailure: JournalError?, execute: ProcessorCall) async
        -> ProcessorAnswer
    {
        let id = request.id
        if let failure = submissionFailure {
            // A failed write may still have reached the disk (a commit or sync that reported an
            // error after writing): "nothing was charged" only once a re-read of the journal and
            // the ledger proves the id never executed; otherwise the answer stays open.
            guard await provablyNeverExecuted(id) else {
                return .ended(.undecided(Self.undecidedAnswer, reason: failure.description))
            }
            return .ended(
                .refused(
                    ErrorMessage(
                        code: .internalError,
                        message: "the terminal could not record the request; nothing was charged", paymentID: id),
                    reason: failure.description))
        }
        do {
            return .settled(try await execute(request))
        } catch {
            // A conflicting retry executed nothing (the processor's contract). An unreachable
            // server may have executed it: never final, asked again. A storage failure may have
            // come after the ledger's commit: final only if the ledger has no result.
            if case .unavailable(let reason) = error {
                return .ended(.undecided(Self.undecidedAnswer, reason: reason, serverUnreachable: true))
            }
            if case .storage = error, !(await provablyNeverExecuted(id, journalRecorded: true)) {
                return .ended(.undecided(Self.undecidedAnswer, reason: error.description))
            }
            return .failed(error)
        }
    }

    /// Step 3, on the scheduler: the answer signed and journaled, as the wallet will get it.
    func journalAnswer(_ processorAnswer: ProcessorAnswer, for id: PaymentID, at now: UnixTime) -> JournaledOutcome {
        let answer: SessionMessage
        let outcome: JournaledOutcome
        switch processorAnswer {
        case .ended(let final):
            return final
        case .settled(let settled):
            guard let receipt = ReceiptFactory.receipt(for: settled, identity: identity) else {
                return .undecided(Self.undecidedAnswer, reason: "the receipt could not be signed")
            }
            answer = .receipt(receipt)
            outcome = .executed(settled, answer: answer)
        case .failed(let error):
            let refusal = PaymentExecutor.errorMessage(for: error, id: id)
            answer = .error(refusal)
            outcome = .refused(refusal, reason: refusal.message)
        }
        do {
            try journal.write(.result(id, answer: answer), at: now)
        } catch {
            return .undecided(Self.undecidedAnswer, reason: error.description)
        }
        return outcome
    }

    /// Whether re-reading proves `id` never executed: the ledger, readable, has no result for it,
    /// and (unless the caller knows the confirmation is journaled) neither has the journal.
    func provablyNeverExecuted(_ id: PaymentID, journalRecorded: Bool = false) async -> Bool {
        if !journalRecorded {
            guard case .success(nil) = Result(catching: { () throws(JournalError) in try journal.record(for: id) })
            else { return false }
        }
        do throws(ProcessorError) {
            return try await processor.result(for: id) == nil
        } catch {
            return false
        }
    }

    /// Settles, once and with the same id, every request the journal has confirmed but without a
    /// final answer: what a crash left between the confirmation and the receipt. A request the
    /// processor already executed (the crash came after its commit) gets the stored result back,
    /// so nothing is charged twice. Call it at start, before sessions open; it throws only if
    /// the journal cannot be read at all.
    ///
    /// The journal's synced writes and a processor that blocks its thread (an in-process ledger's
    /// commit) run on a queue of their own, not on the cooperative pool.
    public func recoverJournal(redemptions: (any RedemptionProcessor)?) async throws(JournalError)
        -> JournalRecoveryReport
    {
        try await withTaskExecutorPreference(QueueExecutor(label: "horizon.journal-recovery")) {
            () async throws(JournalError) -> JournalRecoveryReport in
            try await recover(redemptions: redemptions)
        }
    }

    /// Each request in turn: journaled as submitted, asked of its processor, its answer
    /// journaled. Sessions are not open yet, so nothing else touches these ids meanwhile.
    private func recover(redemptions: (any RedemptionProcessor)?) async throws(JournalError) -> JournalRecoveryReport {
        var report = JournalRecoveryReport()
        report.unreadable = try journal.unreadable()
        let unsettled = try journal.unsettled()
        let now = scheduler.wallClock
        for record in unsettled {
            let request = record.request
            if case .redemption = request, redemptions == nil {
                report.unresolved.append(.init(id: request.id, reason: "no redemption processor to settle it with"))
                continue
            }
            let failure = journalSubmission(request, at: now)
            let processor = processor
            let answer = await askProcessor(request, submissionFailure: failure) {
                (request) async throws(ProcessorError) -> SettlementResult in
                switch request {
                case .payment(let payment): return try await processor.settle(payment, at: now)
                case .redemption(let redemption):
                    guard let redemptions else { throw .storage("no redemption processor") }
                    return try await redemptions.redeem(redemption, at: now)
                }
            }
            let outcome = journalAnswer(answer, for: request.id, at: now)
            switch outcome {
            case .executed:
                logger.with(payment: request.id).notice("recovery: a confirmed request was settled")
                report.settled.append(request.id)
            case .acceptedOffline:
                // Recovery asks only the processor; offline acceptance happens in a live session.
                report.settled.append(request.id)
            case .refused:
                logger.with(payment: request.id).notice("recovery: a confirmed request was refused; never executed")
                report.refused.append(request.id)
            case .undecided(_, let reason, _):
                logger.with(payment: request.id).error("recovery: still unresolved", metadata: ["reason": "\(reason)"])
                report.unresolved.append(.init(id: request.id, reason: reason))
            }
        }
        return report
    }
}
