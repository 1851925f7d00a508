import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Synchronization

/// What one forwarding run did.
public struct OfflineForwardReport: Sendable, Equatable, CustomStringConvertible {
    public struct Declined: Sendable, Equatable {
        public let paymentID: PaymentID
        public let code: String
        public let reason: String
    }

    public var settled: [PaymentID] = []
    public var declined: [Declined] = []
    /// Why the run stopped before the end (the server did not answer), if it did.
    public var interruption: String?
    /// Payments still owed to the server after the run.
    public var outstanding = 0
    /// Another run was under way; this one did nothing.
    public var skipped = false

    public init() {}

    public var description: String {
        if skipped { return "offline payments: a forwarding run is already under way" }
        var parts = ["offline payments: \(settled.count) settled"]
        if !declined.isEmpty {
            parts.append(
                "\(declined.count) declined ("
                    + declined.map { "\($0.paymentID): \($0.code) \($0.reason)" }.joined(
                        separator: "; ") + ")")
        }
        parts.append("\(outstanding) still to forward")
        if let interruption { parts.append("stopped: \(interruption)") }
        return parts.joined(separator: ", ")
    }
}

/// Forwards stored offline payments to the server, oldest first, each exactly once: the state
/// goes to `forwarding` (synced) before the payment is sent, and to `settled` or `declined` when
/// the answer is in. A crash between the two leaves `forwarding`, and the next run sends the
/// same payment id again; the server's idempotency makes it settle once. A run stops at the first
/// payment the server does not answer (it is unreachable again): the rest waits for the next run.
public final class OfflineForwarding: Sendable {
    public let store: any OfflinePaymentStore
    public let forwarder: any OfflinePaymentForwarder
    private let clock: @Sendable () -> UnixTime
    private let running = Mutex(false)

    public init(
        store: any OfflinePaymentStore, forwarder: any OfflinePaymentForwarder,
        clock: @escaping @Sendable () -> UnixTime
    ) {
        self.store = store
        self.forwarder = forwarder
        self.clock = clock
    }

    /// Forwards every payment still owed. Throws only if the journal cannot be read or written
    /// (then nothing after the failing payment is sent).
    public func forwardStored() async throws(JournalError) -> OfflineForwardReport {
        // One run at a time: the periodic run and the one after a successful server call may
        // meet. A second sender would be harmless to the money (same ids) but not to the states.
        guard
            running.withLock({ running in
                defer { running = true }
                return !running
            })
        else {
            var report = OfflineForwardReport()
            report.skipped = true
            return report
        }
        defer { running.withLock { $0 = false } }
        var report = OfflineForwardReport()
        let owed = try store.offlinePayments().filter { $0.state.isOutstanding }
        for (index, payment) in owed.enumerated() {
            let id = payment.record.paymentID
            try store.markOfflineForwarding(id, at: clock())
            let outcome: OfflineForwardOutcome
            do {
                outcome = try await forwarder.forward(payment.record)
            } catch {
                report.interruption = "\(error)"
                report.outstanding = owed.count - index
                return report
            }
            switch outcome {
            case .settled, .alreadySettled:
                try store.resolveOffline(id, .settled, at: clock())
                report.settled.append(id)
            case .declined(let code, let reason):
                try store.resolveOffline(id, .declined(code: code, reason: reason), at: clock())
                report.declined.append(.init(paymentID: id, code: code, reason: reason))
            }
        }
        return report
    }

    /// Whether anything is owed to the server.
    public func hasOutstanding() throws(JournalError) -> Bool {
        try store.offlinePayments().contains { $0.state.isOutstanding }
    }
}

/// The stored offline payments in brief, for `horizon-terminal status`.
public struct OfflinePaymentsSummary: Sendable, Equatable {
    /// Payments not yet forwarded (stored or forwarding).
    public let outstandingCount: Int
    /// Their amounts plus tips, per currency code.
    public let outstandingTotals: [String: Int64]
    /// When the oldest of them was accepted.
    public let oldestAcceptedAt: UnixTime?
    public let settledCount: Int
    public let declinedCount: Int

    public init(_ payments: [StoredOfflinePayment]) {
        let outstanding = payments.filter { $0.state.isOutstanding }
        outstandingCount = outstanding.count
        outstandingTotals = outstanding.reduce(into: [:]) { totals, payment in
            totals[payment.record.amount.currency.code, default: 0] += payment.record.totalMinorUnits
        }
        oldestAcceptedAt = outstanding.map(\.record.acceptedAt).min()
        settledCount = payments.count { $0.state == .settled }
        declinedCount = payments.count { $0.state == .declined }
    }
}

/// A processor that tells, after each call, whether its server answered: any answer (a result, a
/// decline, a refusal) means reachable; `unavailable` means not. The terminal records when it
/// last reached its server (`horizon-terminal status`) and forwards its offline payments after
/// a call that got through.
public final class ServerReachabilityProcessor: PaymentProcessor, RedemptionProcessor {
    public let base: any PaymentProcessor & RedemptionProcessor
    private let report: @Sendable (_ reachable: Bool) -> Void

    public init(
        base: any PaymentProcessor & RedemptionProcessor, report: @escaping @Sendable (_ reachable: Bool) -> Void
    ) {
        self.base = base
        self.report = report
    }

    public func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError)
        -> SettlementResult
    {
        try await observed { () async throws(ProcessorError) in try await base.settle(request, at: time) }
    }

    public func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        try await observed { () async throws(ProcessorError) in try await base.result(for: paymentID) }
    }

    public func redeem(_ request: RedemptionRequest, at time: UnixTime) async throws(ProcessorError)
        -> SettlementResult
    {
        try await observed { () async throws(ProcessorError) in try await base.redeem(request, at: time) }
    }

    private func observed<T>(_ call: () async throws(ProcessorError) -> T) async throws(ProcessorError) -> T {
        do {
            let value = try await call()
            report(true)
            return value
        } catch {
            if case .unavailable = error { report(false) } else { report(true) }
            throw error
        }
    }
}
