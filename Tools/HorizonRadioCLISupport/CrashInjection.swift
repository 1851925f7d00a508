import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonRoles
import HorizonSettlement
import HorizonStores

// Compiled into debug builds only (Package.swift defines HORIZON_FAULT_INJECTION for the debug
// configuration): in a release build the wrappers below hand back what they are given, and no
// variable makes a program kill itself.
#if HORIZON_FAULT_INJECTION
    /// Crash tests' way to stop a program at a chosen durable step, as a power cut would: with
    /// `HORIZON_CRASH_AFTER=STEP` in its environment, the program kills itself (SIGKILL, no clean-up)
    /// right after STEP reached the disk and before anything that follows it leaves.
    ///
    /// Terminal steps: the journal's `offered`, `confirmed`, `submitted`, `result`, `acknowledged`,
    /// `settle` (the ledger's commit, between `submitted` and `result`), and `offline-forwarded`
    /// (the server answered a forwarded offline payment, the journal still says
    /// `forwarding`; the next forward sends the same payment id again). Wallet steps:
    /// `stored-request` (the signed request is stored, before it is sent) and `resolved-request`
    /// (its final answer is stored). Without the variable the stores are used as they are.
    public enum CrashInjection {
        public static let variable = "HORIZON_CRASH_AFTER"
        public static let settleStep = "settle"
        public static let storedRequestStep = "stored-request"
        public static let resolvedRequestStep = "resolved-request"
        public static let offlineForwardedStep = "offline-forwarded"
        public static let walletSteps = [storedRequestStep, resolvedRequestStep]
        public static var terminalSteps: [String] {
            JournalStep.allCases.map(\.rawValue) + [settleStep, offlineForwardedStep]
        }

        static var requestedStep: String? { ProcessInfo.processInfo.environment[variable] }

        /// Refuses an unknown step name at start rather than never crashing.
        public static func validate(for role: String) throws {
            guard let step = requestedStep else { return }
            let known = role == "wallet" ? walletSteps : terminalSteps
            guard known.contains(step) else {
                throw CLIError("\(variable)=\(step) is not a \(role) step; use one of \(known.joined(separator: ", "))")
            }
        }

        public static func processor(wrapping ledger: InProcessLedger) -> any PaymentProcessor & RedemptionProcessor {
            requestedStep == settleStep ? CrashAfterSettle(ledger: ledger) : ledger
        }

        public static func journal(wrapping journal: any TerminalJournal) -> any TerminalJournal {
            guard let step = requestedStep.flatMap(JournalStep.init(rawValue:)) else { return journal }
            return CrashingJournal(journal: journal, step: step)
        }

        /// The offline forwarder, dying after the server's answer to the first payment it forwards
        /// when `offline-forwarded` is asked for.
        public static func forwarder(wrapping forwarder: any OfflinePaymentForwarder) -> any OfflinePaymentForwarder {
            requestedStep == offlineForwardedStep ? CrashAfterForward(forwarder: forwarder) : forwarder
        }

        public static func pendingStore(wrapping store: any PendingPaymentStore) -> any PendingPaymentStore {
            guard let step = requestedStep, walletSteps.contains(step) else { return store }
            return CrashingPendingStore(store: store, step: step)
        }

        static func die(after what: String) -> Never {
            FileHandle.standardError.write(Data("crash injection: killed after \(what)\n".utf8))
            kill(getpid(), SIGKILL)
            // SIGKILL cannot be caught; this only satisfies the compiler.
            exit(137)
        }
    }

    private struct CrashAfterSettle: PaymentProcessor, RedemptionProcessor {
        let ledger: InProcessLedger

        func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
            _ = try await ledger.settle(request, at: time)
            CrashInjection.die(after: "settling \(request.paymentID)")
        }

        func redeem(_ request: RedemptionRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult {
            _ = try await ledger.redeem(request, at: time)
            CrashInjection.die(after: "redeeming \(request.redemptionID)")
        }

        func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
            try await ledger.result(for: paymentID)
        }
    }

    private struct CrashAfterForward: OfflinePaymentForwarder {
        let forwarder: any OfflinePaymentForwarder

        func forward(_ payment: OfflinePaymentRecord) async throws -> OfflineForwardOutcome {
            let outcome = try await forwarder.forward(payment)
            CrashInjection.die(after: "forwarding offline payment \(payment.paymentID) (\(outcome))")
        }
    }

    private struct CrashingJournal: TerminalJournal {
        let journal: any TerminalJournal
        let step: JournalStep

        func write(_ writes: [JournalWrite], at time: UnixTime) throws(JournalError) {
            try journal.write(writes, at: time)
            if writes.contains(where: { $0.step == step }) { CrashInjection.die(after: "journal step \(step)") }
        }

        func record(for id: PaymentID) throws(JournalError) -> JournalRecord? { try journal.record(for: id) }
        func unsettled() throws(JournalError) -> [JournalRecord] { try journal.unsettled() }
        func unreadable() throws(JournalError) -> [UnreadableRequest] { try journal.unreadable() }
    }

    private struct CrashingPendingStore: PendingPaymentStore {
        let store: any PendingPaymentStore
        let step: String

        func save(_ payment: PendingPayment) throws {
            try store.save(payment)
            if step == CrashInjection.storedRequestStep {
                CrashInjection.die(after: "storing request \(payment.paymentID)")
            }
        }

        func remove(_ paymentID: PaymentID) throws {
            try store.remove(paymentID)
            if step == CrashInjection.resolvedRequestStep {
                CrashInjection.die(after: "resolving request \(paymentID)")
            }
        }

        func resolve(_ paymentID: PaymentID, receipt: PaymentReceipt?) throws {
            try store.resolve(paymentID, receipt: receipt)
            if step == CrashInjection.resolvedRequestStep {
                CrashInjection.die(after: "resolving request \(paymentID)")
            }
        }

        func all() throws -> [PendingPayment] { try store.all() }
    }
#else
    public enum CrashInjection {
        public static func validate(for role: String) throws {}

        public static func processor(wrapping ledger: InProcessLedger) -> any PaymentProcessor & RedemptionProcessor {
            ledger
        }

        public static func journal(wrapping journal: any TerminalJournal) -> any TerminalJournal { journal }

        public static func forwarder(wrapping forwarder: any OfflinePaymentForwarder) -> any OfflinePaymentForwarder {
            forwarder
        }

        public static func pendingStore(wrapping store: any PendingPaymentStore) -> any PendingPaymentStore { store }
    }
#endif
