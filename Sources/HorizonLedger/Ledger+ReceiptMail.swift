import HorizonCore
import HorizonProtocol
import HorizonStores

/// Who asks for a payment's receipt by e-mail, which decides the payments they may ask for and
/// where the mail goes.
public enum ReceiptRequester: Sendable, Equatable {
    /// The wallet that paid: the mail goes to the e-mail address it registered (and proved) with,
    /// never to an address the request names.
    case wallet(WalletID)
    /// The merchant that was paid, for a customer who gave it an address at the till.
    case merchant(MerchantID, address: String)
}

/// What a receipt mail shows: the payment as the ledger keeps it and who was paid.
public struct ReceiptMailContent: Sendable {
    public let transaction: LedgerTransaction
    public let merchantName: String
}

/// A receipt mail in the outbox.
public struct QueuedReceiptMail: Sendable, Equatable {
    public let messageID: Int64
    public let recipient: String
    /// The same receipt to the same address was still waiting to go: the request was answered
    /// with that message, and no second one was queued (a retried request sends one mail).
    public let alreadyQueued: Bool
}

/// Why no receipt mail was queued.
public enum ReceiptMailRefusal: Error, Sendable, Equatable {
    /// No such payment for this requester (another wallet's or merchant's looks the same).
    case notFound
    /// The wallet registered no e-mail address (wallets from before registration).
    case noAddress
    /// Declined payments and redemptions have no receipt to mail.
    case notAnApprovedPayment
}

extension Ledger {
    /// Queues the e-mail receipt of `payment` in the outbox, in one transaction with the check
    /// that `requester` may ask for it: a committed request is never lost, and the outbox's
    /// delivery sends it once. `deliver`: due for delivery now (a mail transport is configured).
    public func queueReceiptMail(
        for payment: PaymentID, requestedBy requester: ReceiptRequester, deliver: Bool, at time: UnixTime,
        render: @escaping @Sendable (ReceiptMailContent) -> (subject: String, body: String)
    ) async throws(LedgerError) -> Result<QueuedReceiptMail, ReceiptMailRefusal> {
        try await store.transaction { db -> Result<QueuedReceiptMail, ReceiptMailRefusal> in
            let owner: (column: String, value: String) =
                switch requester {
                case .wallet(let wallet): ("wallet_id", wallet.rawValue)
                case .merchant(let merchant, _): ("merchant_id", merchant.rawValue)
                }
            guard
                let row = try await db.query(
                    """
                    SELECT t.*, m.name AS merchant_name FROM transactions t JOIN merchants m ON m.id = t.merchant_id
                    WHERE t.payment_id = ? AND t.\(owner.column) = ?
                    """, [.blob(payment.bytes), .text(owner.value)]
                ).first
            else { return .failure(.notFound) }
            let transaction = try Self.decodeTransaction(row).transaction
            guard transaction.result.transactionType == .payment, transaction.result.outcome.isApproved else {
                return .failure(.notAnApprovedPayment)
            }
            let recipient: String
            switch requester {
            case .wallet(let wallet):
                guard let email = try await Self.accountData(wallet, in: db).email else {
                    return .failure(.noAddress)
                }
                recipient = email
            case .merchant(_, let address):
                recipient = address
            }
            let mail = render(
                ReceiptMailContent(transaction: transaction, merchantName: try row.text("merchant_name")))
            // Waiting: not delivered, and still due (or never due: the sandbox keeps it).
            if let waiting = try await db.query(
                """
                SELECT id FROM outbox WHERE channel = 'email' AND recipient = ? AND subject = ?
                AND registration_id IS NULL AND delivered_at IS NULL
                AND (deliver_at IS NOT NULL OR delivery_attempts = 0)
                ORDER BY id LIMIT 1
                """, [.text(recipient), .text(mail.subject)]
            ).first {
                return .success(
                    QueuedReceiptMail(messageID: try waiting.integer("id"), recipient: recipient, alreadyQueued: true))
            }
            guard
                let inserted = try await db.query(
                    """
                    INSERT INTO outbox(channel, recipient, subject, body, created_at, deliver_at)
                    VALUES ('email', ?, ?, ?, ?, ?) RETURNING id
                    """,
                    [
                        .text(recipient), .text(mail.subject), .text(mail.body), .integer(time),
                        deliver ? .integer(time) : .null,
                    ]
                ).first
            else { throw LedgerError.corruptRow(column: "outbox.id", reason: "no id returned") }
            return .success(
                QueuedReceiptMail(messageID: try inserted.integer("id"), recipient: recipient, alreadyQueued: false))
        }
    }
}
