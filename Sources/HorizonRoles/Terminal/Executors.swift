import HorizonCore
import HorizonProtocol
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores

/// A payment: the wallet's signed Confirm, settled through the `PaymentProcessor`.
struct PaymentExecutor: SessionExecutor {
    let processor: any PaymentProcessor
    /// The terminal the confirmation must name.
    let identity: TerminalIdentity
    var transactionType: TransactionType { .payment }

    func check(_ message: SessionMessage, session: HostedSession, now: UnixTime) -> RequestCheck {
        guard case .confirm(let confirm) = message else { return .unexpected }
        func refuse(_ code: ErrorCode, _ text: String) -> RequestCheck {
            .refused(ErrorMessage(code: code, message: text, paymentID: confirm.paymentID))
        }
        guard let keyID = identity.terminalKeyID, confirm.terminalKeyDigest == identity.keyDigestBytes else {
            return refuse(.badSignature, "the confirmation names another terminal")
        }
        guard confirm.offerDigest == session.offerDigest else {
            return refuse(.badSignature, "the confirmation is for another offer")
        }
        guard confirm.amount == session.terms.amount else {
            return refuse(.invalidAmount, "the confirmed amount differs from the offer")
        }
        // A payment intent's sale settles under the intent's id and no other.
        if let required = session.terms.paymentID, confirm.paymentID != required {
            return refuse(.protocolViolation, "the confirmation's payment id is not the one the offer asked for")
        }
        guard confirm.expiresAt >= now else { return refuse(.sessionExpired, "the confirmation has expired") }
        guard SignedRequest(message)?.verifies == true else {
            return refuse(.badSignature, "the confirmation's signature does not verify")
        }
        return .accepted(
            .payment(
                SettlementRequest(
                    paymentID: confirm.paymentID, sessionID: session.id, walletKey: confirm.walletKey,
                    terminalKeyID: keyID,
                    amount: confirm.amount, tip: confirm.tip, registerUser: session.terms.registerUser,
                    contentDigest: digest(confirm.signedBytes), signedConfirmation: message.encoded(),
                    orderReference: session.terms.orderReference)))
    }

    func execute(_ request: JournalRequest, at now: UnixTime) async throws(ProcessorError) -> SettlementResult {
        guard case .payment(let payment) = request else { throw .storage("a redemption is not a payment") }
        return try await processor.settle(payment, at: now)
    }

    static func errorMessage(for error: ProcessorError, id: PaymentID) -> ErrorMessage {
        let code: ErrorCode = if case .conflictingRetry = error { .duplicatePaymentConflict } else { .internalError }
        return ErrorMessage(code: code, message: error.description, paymentID: id)
    }
}

/// A bonus, gold or coupon redemption: the wallet's signed Redeem, executed by the
/// `RedemptionProcessor`.
struct RedemptionExecutor: SessionExecutor {
    let processor: any RedemptionProcessor
    let transactionType: TransactionType
    /// The terminal the redemption must name.
    let identity: TerminalIdentity

    func check(_ message: SessionMessage, session: HostedSession, now: UnixTime) -> RequestCheck {
        guard case .redeem(let redeem) = message else { return .unexpected }
        func refuse(_ code: ErrorCode, _ text: String) -> RequestCheck {
            .refused(ErrorMessage(code: code, message: text, paymentID: redeem.redemptionID))
        }
        guard redeem.transactionType == transactionType else {
            return refuse(.protocolViolation, "this session is a \(transactionType)")
        }
        guard redeem.terminalKeyDigest == identity.keyDigestBytes else {
            return refuse(.badSignature, "the redemption names another terminal")
        }
        guard redeem.offerDigest == session.offerDigest else {
            return refuse(.badSignature, "the redemption is for another offer")
        }
        // Bonus and gold redeem exactly what was offered; a coupon names the coupon the wallet holds.
        if transactionType != .couponRedemption {
            guard redeem.item == session.terms.item, redeem.quantity == session.terms.quantity else {
                return refuse(.invalidAmount, "the redemption differs from the offer")
            }
        }
        guard redeem.expiresAt >= now else { return refuse(.sessionExpired, "the redemption has expired") }
        guard SignedRequest(message)?.verifies == true else {
            return refuse(.badSignature, "the redemption's signature does not verify")
        }
        guard let keyID = identity.terminalKeyID else { return refuse(.internalError, "no terminal key") }
        return .accepted(
            .redemption(
                RedemptionRequest(
                    redemptionID: redeem.redemptionID, sessionID: session.id, walletKey: redeem.walletKey,
                    terminalKeyID: keyID,
                    transactionType: transactionType, item: redeem.item, quantity: redeem.quantity,
                    value: session.terms.amount, contentDigest: digest(redeem.signedBytes),
                    signedRedemption: message.encoded(), registerUser: session.terms.registerUser)))
    }

    func execute(_ request: JournalRequest, at now: UnixTime) async throws(ProcessorError) -> SettlementResult {
        guard case .redemption(let redemption) = request else { throw .storage("a payment is not a redemption") }
        return try await processor.redeem(redemption, at: now)
    }
}
