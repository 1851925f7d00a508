import Foundation
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Synchronization

/// A terminal session's states, in the reference SDK's order (payment and redemption hosts alike).
public enum HostState: Sendable, Equatable, CustomStringConvertible {
    case idle
    /// Advertising the session; no wallet connected.
    case waitingForWallet
    case walletConnected
    /// The offer is on a wallet's screen; each wallet's decision is bounded by
    /// `userDecisionTimeout` from its own offer, which ends only that wallet's attempt.
    case awaitingUserDecision
    case acquiringPaymentExecution
    case completed
    case completedWithError

    public var description: String {
        switch self {
        case .idle: "idle"
        case .waitingForWallet: "waiting for a wallet"
        case .walletConnected: "wallet connected"
        case .awaitingUserDecision: "awaiting the customer's decision"
        case .acquiringPaymentExecution: "executing"
        case .completed: "completed"
        case .completedWithError: "completed with error"
        }
    }

    public var isFinished: Bool { self == .completed || self == .completedWithError }
}

public typealias PaymentHostState = HostState
public typealias RedemptionHostState = HostState

/// The cashier operating the register.
public struct RegisterUser: Sendable, Equatable, Hashable {
    public let name: String
    public init(name: String) { self.name = name }
}

/// What was paid, as the terminal shows it at the end.
public struct PaymentOrder: Sendable, Equatable {
    public let sessionID: SessionID
    public let paymentID: PaymentID
    public let amount: Money
    public let tip: Money
    public let registerUser: String
    public let reference: UInt64
    public let bonusPointsEarned: Int64
    /// Accepted offline against the wallet's daily token, not settled by the server
    /// yet (`reference` is 0 until then).
    public var acceptedOffline = false
    /// The merchant's order reference the sale was started with; empty if none.
    public var orderReference = ""

    public var currency: Currency { amount.currency }
    /// Amount plus tip (both are bounded far below overflow).
    public var total: Money { (try? amount.adding(tip)) ?? amount }
}

/// The final state of a completed payment (`PaymentHost.finalPaymentState`).
public struct FinalPaymentState: Sendable, Equatable {
    public let paymentOrder: PaymentOrder
}

/// Why a session ended without a payment or redemption, or could not start.
public enum HostError: Error, Sendable, Equatable, CustomStringConvertible {
    case alreadyRunning
    case invalidAmount
    case invalidRedemption(String)
    case unsupportedCurrency(String)
    case radio(RadioError)
    /// Not given for a session any more: each wallet's decision time ends only its own attempt
    /// (`WalletNotice.decisionTimedOut`). Kept so that code matching on it still compiles.
    case decisionTimedOut(Duration)
    case cancelled
    /// A request's decline; ends a session only when its outcome came in after the session was
    /// stopped (an open session hears `WalletNotice.requestDeclined` and waits on).
    case declined(code: ErrorCode, reason: String)
    /// Nothing was executed: the session could not open, or a refused request's outcome came in
    /// after the session was stopped (an open session hears `WalletNotice.requestDeclined`).
    case processorFailure(String)
    /// The request was confirmed but its outcome could not be recorded (the journal or the
    /// signing failed after the processor was asked): it may be charged. The terminal settles it
    /// for good when it restarts, and the wallet keeps it pending until then.
    case outcomeUnknown(String)
    /// The server that settles payments could not be reached or did not answer in time, after
    /// the wallet confirmed: the request is pending (it may have executed on the server) and is
    /// settled, once, when the terminal recovers its journal with the server reachable.
    case serverUnreachable(String)

    /// A sentence for the cashier about a payment.
    public var description: String { humanized(noun: "payment") }

    /// A sentence for the cashier, naming what the session was ("payment", "bonus redemption").
    public func humanized(noun: String) -> String {
        switch self {
        case .alreadyRunning: "A \(noun) is already in progress; stop it first."
        case .invalidAmount: "The amount must be greater than zero."
        case .invalidRedemption(let reason): "This \(noun) cannot start: \(reason)."
        case .unsupportedCurrency(let code): "This terminal does not accept \(code)."
        case .radio(let error): "Bluetooth is not available: \(error)."
        case .decisionTimedOut(let timeout):
            "The customer did not decide within \(Int(timeout.milliseconds / 1000)) seconds."
        case .cancelled: "The \(noun) was cancelled at the register."
        case .declined(_, let reason): "The \(noun) was declined: \(reason)."
        case .processorFailure(let reason): "The \(noun) could not be processed: \(reason). Nothing was charged."
        case .outcomeUnknown(let reason):
            "The \(noun)'s outcome could not be recorded: \(reason). It may be charged: it is settled when the terminal's journal is recovered, and must not be taken again before that."
        case .serverUnreachable(let reason):
            "The \(noun) is pending: \(reason). It may have gone through on the server; it is settled, once, when the terminal reaches the server again, and must not be taken again before that."
        }
    }
}

/// A finished payment session, as announced on both sides.
public struct FinishedPayment: Sendable, Equatable {
    public let sessionID: SessionID
    /// The order, when the payment went through.
    public let order: PaymentOrder?
    /// Why it did not, otherwise.
    public let error: HostError?
    /// Set when the terminal accepted the payment offline (`order` is nil then: the
    /// server has not settled it yet).
    public var acceptedOffline: OfflinePaymentRecord? = nil
}

public typealias PaymentHostError = HostError

extension Notification.Name {
    /// Posted by a `PaymentHost` when a session ends, paid or not; `object` is the host,
    /// `userInfo["finishedPayment"]` the `FinishedPayment`.
    public static let paymentHostFinishedAPayment = Notification.Name("PaymentHostFinishedAPaymentNotification")
}
