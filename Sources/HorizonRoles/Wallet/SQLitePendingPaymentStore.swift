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

    /// The receipt goes into the wallet's receipts in the same transaction that removes the
    /// pending payment: an executed payment is always on record, pending or receipted.
    public func resolve(_ paymentID: PaymentID, receipt: PaymentReceipt?) throws {
        try store.resolvePending(paymentID.bytes, receipt: receipt.map(StoredReceipt.init(recording:)))
    }

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

extension StoredReceipt {
    /// A verified receipt as the wallet's store keeps it.
    public init(recording receipt: PaymentReceipt) {
        self.init(
            paymentID: receipt.paymentID.description, sessionID: receipt.sessionID.description,
            merchantName: receipt.merchantName, amountMinorUnits: receipt.amount.minorUnits,
            tipMinorUnits: receipt.tip.minorUnits, currency: receipt.amount.currency.code, reference: receipt.reference,
            settledAt: receipt.settledAt, bonusPointsEarned: receipt.bonusPointsEarned,
            bonusPointsBalance: receipt.bonusPointsBalance)
        acceptedOffline = receipt.acceptedOffline ? true : nil
    }
}
