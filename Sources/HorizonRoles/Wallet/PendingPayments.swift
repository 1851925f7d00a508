import HorizonCore
import HorizonProtocol
import HorizonRadio
import Synchronization

/// A payment or redemption the wallet signed and sent, with no final answer yet.
public struct PendingPayment: Sendable, Equatable {
    /// The signed request exactly as sent: a `.confirm` or a `.redeem`.
    public let request: SessionMessage
    /// The payment id (or redemption id) the terminal executes at most once.
    public let paymentID: PaymentID
    public let sessionID: SessionID
    public let terminalKeyID: TerminalKeyID
    public let terminalAddress: PeerAddress
    public let merchantName: String
    public let createdAt: UnixTime

    /// Nil unless `request` is a confirmation or a redemption request.
    public init?(
        request: SessionMessage, terminalKeyID: TerminalKeyID, terminalAddress: PeerAddress, merchantName: String,
        createdAt: UnixTime
    ) {
        guard let paymentID = SessionHost.requestID(of: request), let sessionID = request.sessionID else { return nil }
        self.request = request
        self.paymentID = paymentID
        self.sessionID = sessionID
        self.terminalKeyID = terminalKeyID
        self.terminalAddress = terminalAddress
        self.merchantName = merchantName
        self.createdAt = createdAt
    }

    public var confirm: Confirm? { if case .confirm(let confirm) = request { confirm } else { nil } }
    public var redeem: Redeem? { if case .redeem(let redeem) = request { redeem } else { nil } }

    /// The same request, to be asked for at another address of the same terminal.
    func retargeted(to address: PeerAddress) -> PendingPayment { PendingPayment(copying: self, address: address) }

    private init(copying other: PendingPayment, address: PeerAddress) {
        request = other.request
        paymentID = other.paymentID
        sessionID = other.sessionID
        terminalKeyID = other.terminalKeyID
        terminalAddress = address
        merchantName = other.merchantName
        createdAt = other.createdAt
    }
}

/// Where a wallet keeps its pending payments. The payment id is saved here before the
/// confirmation leaves, so the wallet can always ask again for it.
public protocol PendingPaymentStore: Sendable {
    func save(_ payment: PendingPayment) throws
    func remove(_ paymentID: PaymentID) throws
    func all() throws -> [PendingPayment]
    /// Ends a pending payment with its final answer: the verified receipt if it went through, nil
    /// if it was declined or never executed. A durable store records the receipt and drops the
    /// payment in one step, so a crash in between cannot lose a payment that was charged.
    func resolve(_ paymentID: PaymentID, receipt: PaymentReceipt?) throws
}

extension PendingPaymentStore {
    /// Stores that keep no receipts just forget the payment.
    public func resolve(_ paymentID: PaymentID, receipt: PaymentReceipt?) throws { try remove(paymentID) }
}

/// A pending-payment store in memory, for tests and embedded use.
public final class InMemoryPendingPaymentStore: PendingPaymentStore {
    private let payments = Mutex<[PaymentID: PendingPayment]>([:])

    public init() {}

    public func save(_ payment: PendingPayment) throws { payments.withLock { $0[payment.paymentID] = payment } }
    public func remove(_ paymentID: PaymentID) throws { _ = payments.withLock { $0.removeValue(forKey: paymentID) } }
    public func all() throws -> [PendingPayment] {
        payments.withLock { Array($0.values) }.sorted { $0.createdAt < $1.createdAt }
    }
}
