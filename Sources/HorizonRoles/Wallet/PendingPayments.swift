import HorizonCore
import HorizonProtocol
import HorizonRadio
import Synchronization

/// A payment the wallet confirmed and has no final answer for yet.
public struct PendingPayment: Sendable, Equatable {
    public let confirm: Confirm
    public let terminalAddress: PeerAddress
    public let merchantName: String
    public let createdAt: UnixTime

    public var paymentID: PaymentID { confirm.paymentID }
    public var sessionID: SessionID { confirm.sessionID }
    public var terminalKeyID: TerminalKeyID { confirm.terminalKeyID }
}

/// Where a wallet keeps its pending payments. The payment id is saved here before the
/// confirmation leaves, so the wallet can always ask again for it.
public protocol PendingPaymentStore: Sendable {
    func save(_ payment: PendingPayment) throws
    func remove(_ paymentID: PaymentID) throws
    func all() throws -> [PendingPayment]
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
