import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import HorizonTracing
import Tracing

/// The terminal's `PaymentProcessor` when it is activated with a server: each confirmed payment
/// goes to `POST /v1/payments` with the wallet's signed Confirm, signed by the terminal's key.
///
/// What an answer means for the terminal's promises: a result (approved or declined) is final; a
/// conflict or a refusal before execution (the server checked and executed nothing) is final;
/// anything else — unreachable, timed out, a 5xx, a rate limit, a clock the server does not
/// accept — is `unavailable`: the payment may or may not have executed, so it stays pending and
/// is asked again, never reported as failed.
///
/// An answer counts only when it carries the server's signature by `anchor`, the issuer key the
/// terminal pinned at activation: an answer without it, or signed by another key (a man in the
/// middle answering "approved" for a payment that never executed), is no answer (`unavailable`).
public struct ServerPaymentProcessor: PaymentProcessor, RedemptionProcessor {
    let client: HorizonServerClient
    let anchor: P256.Signing.PublicKey

    /// `client` must sign with the terminal's key; `anchor` is the server's issuer key.
    public init(client: HorizonServerClient, anchor: P256.Signing.PublicKey) {
        self.client = client
        self.anchor = anchor
    }

    public func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult
    {
        guard !request.signedConfirmation.isEmpty else {
            throw .refused(
                code: "confirmation_missing",
                reason: "this request was journaled without the wallet's signed confirmation (an older journal)")
        }
        let submission = Components.Schemas.PaymentSubmission(
            confirmation: Data(request.signedConfirmation).base64EncodedString(),
            paymentId: request.paymentID.bytes.hexString, sessionId: Int64(bitPattern: request.sessionID.rawValue),
            walletKey: Data(request.walletKey.bytes).base64EncodedString(), amount: request.amount.minorUnits,
            tip: request.tip.minorUnits, currency: request.amount.currency.code, registerUser: request.registerUser)
        // The payment's trace: the wallet's confirmation span (its id derived from the payment
        // id, as the wallet derives it) is the parent of the terminal's collection, whose
        // "settle with server" span the request names as the server's parent.
        let tracer = InstrumentationSystem.tracer
        let paymentID = request.paymentID.bytes
        let collect = tracer.startSpan(
            "collect payment", context: PaymentTrace.childOfConfirmation(paymentID: paymentID), ofKind: .server)
        collect.attributes["horizon.payment_id"] = paymentID.hexString
        collect.attributes["horizon.amount_minor_units"] = request.amount.minorUnits
        collect.attributes["horizon.currency"] = request.amount.currency.code
        defer { collect.end() }
        do throws(ProcessorError) {
            let settle = tracer.startSpan("settle with server", context: collect.context, ofKind: .client)
            defer { settle.end() }
            let answer: Components.Schemas.PaymentResult
            do {
                answer = try await ServiceContext.withValue(settle.context) {
                    try await client.submitPayment(submission)
                }
            } catch let error as ServerClientError {
                settle.setStatus(SpanStatus(code: .error, message: "unanswered or refused"))
                throw Self.processorError(error, id: request.paymentID)
            } catch {
                throw .unavailable("\(error)")
            }
            let result = try Self.result(answer, for: request, anchor: anchor)
            let outcome = result.outcome.isApproved ? "approved" : "declined"
            settle.attributes["horizon.outcome"] = outcome
            collect.attributes["horizon.outcome"] = outcome
            return result
        } catch {
            collect.attributes["horizon.outcome"] = error.traceOutcome
            throw error
        }
    }

    public func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        let answer: Components.Schemas.PaymentResult?
        do {
            answer = try await client.payment(id: paymentID.bytes.hexString)
        } catch {
            throw Self.processorError(error, id: paymentID)
        }
        guard let answer else { return nil }
        return try Self.result(answer, for: nil, id: paymentID, anchor: anchor)
    }

    /// A bonus, gold or coupon redemption, with the wallet's signed Redeem, to `POST /v1/redemptions`.
    public func redeem(_ request: RedemptionRequest, at time: UnixTime) async throws(ProcessorError) -> SettlementResult
    {
        guard !request.signedRedemption.isEmpty else {
            throw .refused(
                code: "redemption_missing",
                reason: "this request was journaled without the wallet's signed redemption (an older journal)")
        }
        let type: Components.Schemas.RedemptionSubmission.TransactionTypePayload
        switch request.transactionType {
        case .bonusRedemption: type = .bonus
        case .goldRedemption: type = .gold
        case .couponRedemption: type = .coupon
        case .payment: throw .refused(code: "not_a_redemption", reason: "a payment is not a redemption")
        }
        let submission = Components.Schemas.RedemptionSubmission(
            redemption: Data(request.signedRedemption).base64EncodedString(),
            redemptionId: request.redemptionID.bytes.hexString,
            sessionId: Int64(bitPattern: request.sessionID.rawValue),
            walletKey: Data(request.walletKey.bytes).base64EncodedString(), transactionType: type, item: request.item,
            quantity: request.quantity, value: request.value.minorUnits, currency: request.value.currency.code)
        let answer: Components.Schemas.PaymentResult
        do {
            answer = try await client.submitRedemption(submission)
        } catch {
            throw Self.processorError(error, id: request.redemptionID)
        }
        return try Self.result(
            answer, for: nil, id: request.redemptionID, sessionID: request.sessionID, anchor: anchor)
    }

    static func processorError(_ error: ServerClientError, id: PaymentID) -> ProcessorError {
        switch error {
        case .refused(let status, let code, let message, _):
            if code == "payment_conflict" { return .conflictingRetry(id) }
            // Refused before execution, for good; 401 (a clock or key problem the operator fixes)
            // and 429 are not final: the payment waits for the next attempt.
            if (400..<500).contains(status), status != 401, status != 429 {
                return .refused(code: code, reason: message)
            }
            return .unavailable("\(code): \(message)")
        case .unreachable, .timedOut, .invalidResponse, .cancelled, .invalidServerURL, .insecureServerURL, .notRelayed,
            .relayOutcomeUnknown:
            return .unavailable(error.description)
        }
    }

    /// The payment `answer` is about, if it counts as the server's answer: signed by `anchor`
    /// (the issuer key the terminal pinned at activation) and about `expected` when one is
    /// expected. Every settlement answer the terminal acts on (online, recovery, offline forward)
    /// passes here; anything else is no answer (`unavailable`), never an outcome.
    public static func verified(
        _ answer: Components.Schemas.PaymentResult, about expected: PaymentID?, anchor: P256.Signing.PublicKey
    ) throws(ProcessorError) -> PaymentID {
        guard SettlementSignature.isValid(answer, anchor: anchor) else {
            throw .unavailable(
                "the server's answer is not signed by the anchor pinned at activation (unsigned, or forged on the way); it is not an outcome: the payment stays pending and is asked again"
            )
        }
        let paymentID: PaymentID
        if let expected {
            paymentID = expected
        } else {
            do { paymentID = try PaymentID(bytes: [UInt8](hexString: answer.paymentId) ?? []) } catch {
                throw .unavailable("the server's answer cannot be read: \(error)")
            }
        }
        guard answer.paymentId == paymentID.bytes.hexString else {
            throw .unavailable("the server answered for another payment id")
        }
        return paymentID
    }

    static func result(
        _ answer: Components.Schemas.PaymentResult, for request: SettlementRequest?, id: PaymentID? = nil,
        sessionID knownSession: SessionID? = nil, anchor: P256.Signing.PublicKey
    ) throws(ProcessorError) -> SettlementResult {
        let paymentID = try verified(answer, about: request?.paymentID ?? id, anchor: anchor)
        do {
            let currency = try Currency(code: answer.currency)
            guard
                let sessionID = request?.sessionID ?? knownSession
                    ?? answer.sessionId.flatMap({ SessionID(rawValue: UInt64(bitPattern: $0)) })
            else { throw ProcessorError.unavailable("the server's answer has no session id") }
            let outcome: SettlementOutcome
            switch answer.outcome {
            case .approved:
                outcome = .approved(
                    reference: UInt64(bitPattern: answer.reference ?? 0),
                    bonusPointsEarned: answer.bonusPointsEarned ?? 0,
                    bonusPointsBalance: answer.bonusPointsBalance ?? 0)
            case .declined:
                outcome = .declined(
                    code: ErrorCode(rawValue: UInt16(clamping: answer.declineCode ?? 0)),
                    reason: answer.declineReason ?? "declined by the server")
            }
            let type: TransactionType =
                switch answer.transactionType {
                case .bonus: .bonusRedemption
                case .gold: .goldRedemption
                case .coupon: .couponRedemption
                case .payment, nil: .payment
                }
            return SettlementResult(
                paymentID: paymentID, sessionID: sessionID,
                amount: try Money(minorUnits: answer.amount, currency: currency),
                tip: try Money(minorUnits: answer.tip, currency: currency), outcome: outcome,
                settledAt: answer.settledAt, transactionType: type, item: answer.item ?? "",
                quantity: answer.quantity ?? 0)
        } catch let error as ProcessorError {
            throw error
        } catch {
            throw .unavailable("the server's answer cannot be read: \(error)")
        }
    }
}

extension ProcessorError {
    /// What a span records of a failed settlement: the kind only, no reason text.
    var traceOutcome: String {
        switch self {
        case .unavailable: "pending"
        case .refused: "refused"
        case .conflictingRetry: "conflict"
        case .storage: "failed"
        }
    }
}
