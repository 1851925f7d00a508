import HorizonCore
import HorizonProtocol
import HorizonRoles
import HorizonSimulatedRadio
import HorizonStores

/// What the simulation saw happen, kept outside every simulated process so it survives their
/// crashes: the oracle the ledger's and the wallets' files are checked against.
///
/// Only touched on the simulation's thread (`RadioSimulation.run` fires every event on the
/// caller's thread), hence the unchecked conformance.
final class Book: @unchecked Sendable {
    /// A request a wallet signed (a payment's Confirm or a redemption's Redeem).
    struct Signed {
        let wallet: Int
        let request: SessionMessage
        let terminalKeyID: TerminalKeyID
    }

    /// A request a wallet reported as failed (declined, refused, not executed).
    struct Failure {
        let wallet: Int
        let requestID: PaymentID
        let error: String
    }

    private(set) var signed: [PaymentID: Signed] = [:]
    private(set) var failures: [Failure] = []
    /// Receipts wallets showed, by request id.
    private(set) var completed: [PaymentID: (wallet: Int, receipt: PaymentReceipt)] = [:]
    /// Problems found while the run went on (a receipt for another request, a state out of order).
    private(set) var violations: [String] = []

    func recordSigned(_ pending: PendingPayment, by wallet: Int) {
        signed[pending.paymentID] = Signed(
            wallet: wallet, request: pending.request, terminalKeyID: pending.terminalKeyID)
    }

    func recordFailure(wallet: Int, requestID: PaymentID, error: String) {
        failures.append(Failure(wallet: wallet, requestID: requestID, error: error))
    }

    func recordCompleted(wallet: Int, receipt: PaymentReceipt, requestID: PaymentID?) {
        if let requestID, requestID != receipt.paymentID {
            violation("wallet \(wallet) sent \(requestID) but showed a receipt for \(receipt.paymentID)")
        }
        if let earlier = completed[receipt.paymentID], earlier.receipt != receipt {
            violation("wallet \(wallet) showed two different receipts for \(receipt.paymentID)")
        }
        completed[receipt.paymentID] = (wallet, receipt)
    }

    func violation(_ text: String) { violations.append(text) }
}

/// How often each kind of fault was applied, and what the run did, for the report.
struct FaultTally: Sendable, CustomStringConvertible {
    var runs = 0
    var terminals = 0
    var wallets = 0
    /// Sessions a wallet started on (fetching a terminal's offer), and requests asked for again.
    var walletAttempts = 0
    var resumedRequests = 0
    /// Requests a restarted terminal settled from its journal (confirmed before its crash).
    var recoveredRequests = 0
    var terminalSessions = 0
    var executedPayments = 0
    var approvedPayments = 0
    var executedRedemptions = 0
    var approvedRedemptions = 0
    var walletOutcomes: [String: Int] = [:]
    var terminalOutcomes: [String: Int] = [:]
    var linkFaults: [String: Int] = [:]
    var crashes: [String: Int] = [:]
    var movesAway = 0
    var skewChanges = 0
    var largeSkews = 0
    var declines = 0
    var ignoredOffers = 0
    var cashierCancels = 0
    var rogue = RogueTally()
    var virtualSeconds = 0.0

    mutating func add(_ other: FaultTally) {
        runs += other.runs
        terminals += other.terminals
        wallets += other.wallets
        walletAttempts += other.walletAttempts
        resumedRequests += other.resumedRequests
        recoveredRequests += other.recoveredRequests
        terminalSessions += other.terminalSessions
        executedPayments += other.executedPayments
        approvedPayments += other.approvedPayments
        executedRedemptions += other.executedRedemptions
        approvedRedemptions += other.approvedRedemptions
        walletOutcomes.merge(other.walletOutcomes, uniquingKeysWith: +)
        terminalOutcomes.merge(other.terminalOutcomes, uniquingKeysWith: +)
        linkFaults.merge(other.linkFaults, uniquingKeysWith: +)
        crashes.merge(other.crashes, uniquingKeysWith: +)
        movesAway += other.movesAway
        skewChanges += other.skewChanges
        largeSkews += other.largeSkews
        declines += other.declines
        ignoredOffers += other.ignoredOffers
        cashierCancels += other.cashierCancels
        rogue.add(other.rogue)
        virtualSeconds += other.virtualSeconds
    }

    var description: String {
        func list(_ counts: [String: Int]) -> String {
            counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        return """
            runs \(runs) (\(terminals) terminals, \(wallets) wallets, \(Int(virtualSeconds)) s of virtual time)
            wallet attempts \(walletAttempts), requests asked for again after a crash \(resumedRequests), settled by journal recovery \(recoveredRequests), terminal sessions \(terminalSessions)
            ledger: payments \(executedPayments) executed / \(approvedPayments) approved, redemptions \(executedRedemptions) executed / \(approvedRedemptions) approved
            wallet outcomes: \(list(walletOutcomes))
            terminal outcomes: \(list(terminalOutcomes))
            link faults: \(list(linkFaults))
            crashes: \(list(crashes))
            moves out of range mid-transaction \(movesAway), clock skew changes \(skewChanges) (beyond the credential's validity \(largeSkews)), declines \(declines), ignored offers \(ignoredOffers), cashier cancels \(cashierCancels)
            rogue central: \(rogue.visits) visits, \(rogue.hellos) hellos, \(rogue.offers) offers shown to it, \(rogue.cancels) cancels, \(rogue.confirms) confirms by unknown keys (\(rogue.declinedConfirms) declined), \(rogue.squats) held past the decision time (\(rogue.timedOut) timed out); sessions it ended or timed out \(rogue.endedSessions)
            """
    }
}
