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
                paymentID: payment.paymentID.bytes, request: payment.request.encoded(),
                terminalKeyID: payment.terminalKeyID.bytes, terminalAddress: payment.terminalAddress.rawValue,
                merchantName: payment.merchantName, createdAt: payment.createdAt))
    }

    public func remove(_ paymentID: PaymentID) throws { try store.removePending(paymentID.bytes) }

    /// Every stored request that still decodes (a damaged row is skipped, never guessed at).
    public func all() throws -> [PendingPayment] {
        try store.pending().compactMap { stored in
            guard let request = try? SessionMessage.decode(stored.request),
                let keyID = try? TerminalKeyID(bytes: stored.terminalKeyID)
            else { return nil }
            return PendingPayment(
                request: request, terminalKeyID: keyID, terminalAddress: PeerAddress(stored.terminalAddress),
                merchantName: stored.merchantName, createdAt: stored.createdAt)
        }
    }
}
