import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol

/// Receipts by e-mail: the wallet that paid asks for its own (to its registered address), or the
/// merchant that was paid sends one to the address its customer gave. Either way the mail is
/// queued in the outbox in the request's transaction and delivered from there.
extension APIHandler {
    func emailWalletReceipt(_ input: Operations.EmailWalletReceipt.Input) async throws
        -> Operations.EmailWalletReceipt.Output
    {
        let wallet = try await signingWallet()
        let id = try Self.paymentID(input.path.paymentId)
        let queued = try await queueReceipt(id, requestedBy: .wallet(wallet.id)) {
            switch $0 {
            case .notFound:
                // Another wallet's payment is answered exactly like a missing one.
                APIError(.transactionNotFound, "this wallet has no transaction \(id.bytes.hexString)")
            case .noAddress:
                APIError(
                    .receiptEmailMissing,
                    "this wallet registered no e-mail address; receipts go to the registered address only")
            case .notAnApprovedPayment:
                Self.receiptUnavailable(id)
            }
        }
        return .accepted(.init(body: .json(queued)))
    }

    func emailMerchantReceipt(_ input: Operations.EmailMerchantReceipt.Input) async throws
        -> Operations.EmailMerchantReceipt.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let caller = try await merchantCaller(keyScopes: [.transactionsRead])
        let id = try Self.paymentID(input.path.paymentId)
        let address = request.email
        // What the mail transport would refuse is refused here, before anything is queued.
        guard (try? MailAddress(address: address)) != nil else {
            throw APIError(.invalidRequest, "email must be a plain ASCII address (name@domain)")
        }
        let queued = try await queueReceipt(id, requestedBy: .merchant(caller.merchantID, address: address)) {
            switch $0 {
            case .notFound, .noAddress: Self.noPayment(id)
            case .notAnApprovedPayment: Self.receiptUnavailable(id)
            }
        }
        return .accepted(.init(body: .json(queued)))
    }

    private func queueReceipt(
        _ id: PaymentID, requestedBy requester: ReceiptRequester, refusal: (ReceiptMailRefusal) -> APIError
    ) async throws -> Components.Schemas.ReceiptEmailQueued {
        let deliver = messages.delivers(.email)
        let queued: QueuedReceiptMail
        switch try await ledger.queueReceiptMail(
            for: id, requestedBy: requester, deliver: deliver, at: now(), render: ReceiptMail.render)
        {
        case .success(let mail): queued = mail
        case .failure(let reason): throw refusal(reason)
        }
        if deliver && !queued.alreadyQueued { messages.queued() }
        metrics.record(event: queued.alreadyQueued ? "receipt_mail_already_queued" : "receipt_mail_queued")
        RequestScope.current?.logger.info(
            "receipt mail queued",
            metadata: [
                "payment": "\(id.bytes.hexString)", "outbox": "\(queued.messageID)",
                "alreadyQueued": "\(queued.alreadyQueued)",
            ])
        return .init(
            paymentId: id.bytes.hexString, messageId: queued.messageID,
            sentTo: "email " + OneTimeCode.mask(email: queued.recipient), alreadyQueued: queued.alreadyQueued)
    }

    static func receiptUnavailable(_ id: PaymentID) -> APIError {
        APIError(
            .receiptUnavailable,
            "payment \(id.bytes.hexString) was declined or is a redemption: only approved payments have a receipt to mail"
        )
    }
}
