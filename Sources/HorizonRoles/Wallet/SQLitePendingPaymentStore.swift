import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonStores

/// The wallet's pending payments in its `WalletStore`: a confirmed payment id outlives the
/// process, so a restarted wallet can still ask for it.
public final class SQLitePendingPaymentStore: PendingPaymentStore {
    public let store: WalletStore

    public init(store: WalletStore) { self.store = store }

    public func save(_ payment: PendingPayment) throws {
        try store.savePending(
            StoredPendingPayment(
                paymentID: payment.paymentID.bytes, confirmation: SessionMessage.confirm(payment.confirm).encoded(),
                terminalAddress: payment.terminalAddress.rawValue, merchantName: payment.merchantName,
                createdAt: payment.createdAt))
    }

    public func remove(_ paymentID: PaymentID) throws { try store.removePending(paymentID.bytes) }

    public func all() throws -> [PendingPayment] {
        try store.pending().compactMap { stored in
            guard case .confirm(let confirm)? = try? SessionMessage.decode(stored.confirmation) else { return nil }
            return PendingPayment(
                confirm: confirm, terminalAddress: PeerAddress(stored.terminalAddress),
                merchantName: stored.merchantName, createdAt: stored.createdAt)
        }
    }
}
