import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores
import Tracing

/// Settlement through the server: the terminal forwards what the wallet
/// signed; the server checks it against the wallet's own key and executes it once.
extension APIHandler {
    func submitPayment(_ input: Operations.SubmitPayment.Input) async throws -> Operations.SubmitPayment.Output {
        guard case .json(let submission) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let terminal = try await signingTerminal()
        let (request, method) = try Self.settlementRequest(submission, terminal: terminal)
        // Within the request's span when the terminal signed a trace context (no personal data:
        // the payment's id, amount and outcome only).
        return try await InstrumentationSystem.tracer.withSpan("settle") { span in
            span.attributes["horizon.payment_id"] = request.paymentID.bytes.hexString
            span.attributes["horizon.amount_minor_units"] = request.amount.minorUnits
            span.attributes["horizon.currency"] = request.amount.currency.code
            try await requireCurrentConfirmation(request, method: method, at: now())
            let result: SettlementResult
            switch method {
            case .accountBalance:
                // The request's replay and rate checks commit with the payment, in one transaction.
                let admission = RequestScope.current?.admission
                result = try await executeOnce("payment", request.paymentID, terminal: terminal) {
                    (ledger, time) throws(LedgerError) in
                    guard let checks = admission?.pending else {
                        return .executed(try await ledger.settle(request, merchant: terminal.merchantID, at: time))
                    }
                    let admitted = try await ledger.settle(
                        request, merchant: terminal.merchantID, at: time, admitting: checks)
                    admission?.markMade()
                    return admitted
                }
            case .card(let id):
                // The charge happens before the ledger's transaction (a processor is no database);
                // the payment id as its idempotency key makes every retry the same charge. The
                // request is checked first, on its own: a replay must not reach the processor.
                try await RequestScope.current?.admission?.admitSeparately()
                let charge = try await chargeCard(PaymentCardID(rawValue: id), for: request, terminal: terminal)
                result = try await executeOnce("payment", request.paymentID, terminal: terminal) {
                    (ledger, time) throws(LedgerError) in
                    .executed(
                        try await ledger.settleCardPayment(
                            request, card: PaymentCardID(rawValue: id), charge: charge, merchant: terminal.merchantID,
                            at: time))
                }
            }
            span.attributes["horizon.outcome"] = result.outcome.isApproved ? "approved" : "declined"
            return .ok(.init(body: .json(try signed(Self.paymentResult(result)))))
        }
    }

    func submitRedemption(_ input: Operations.SubmitRedemption.Input) async throws
        -> Operations.SubmitRedemption.Output
    {
        guard case .json(let submission) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let terminal = try await signingTerminal()
        let request = try Self.redemptionRequest(submission, terminal: terminal)
        let result = try await executeOnce("redemption", request.redemptionID, terminal: terminal) {
            (ledger, time) throws(LedgerError) in
            .executed(try await ledger.redeem(request, merchant: terminal.merchantID, at: time))
        }
        return .ok(.init(body: .json(try signed(Self.paymentResult(result)))))
    }

    /// Runs a checked payment or redemption through the ledger's exactly-once execution: a
    /// conflicting retry becomes `payment_conflict`, a request its checks refused their answer;
    /// the outcome is counted and logged.
    func executeOnce(
        _ kind: String, _ id: PaymentID, terminal: TerminalRecord,
        _ execute: (Ledger, UnixTime) async throws(LedgerError) -> Admitted<SettlementResult>
    ) async throws -> SettlementResult {
        let admitted: Admitted<SettlementResult>
        // The ledger's transaction as a span of its own (a child of the operation's, if traced).
        let span = InstrumentationSystem.tracer.startSpan("ledger transaction")
        span.attributes["horizon.payment_id"] = id.bytes.hexString
        defer { span.end() }
        do {
            admitted = try await execute(ledger, now())
        } catch {
            guard case .conflictingRetry = error else { throw error }
            span.setStatus(SpanStatus(code: .error, message: "conflicting retry"))
            metrics.record(event: "\(kind)_conflict")
            throw APIError(
                .paymentConflict,
                "\(kind) \(id) was executed before with other terms; nothing was executed now (a new \(kind) needs a new id)"
            )
        }
        guard case .executed(let result) = admitted else {
            span.setStatus(SpanStatus(code: .error, message: "request refused"))
            throw Self.refusal(of: admitted)
        }
        let outcome = result.outcome.isApproved ? "approved" : "declined"
        metrics.record(event: "\(kind)_\(outcome)")
        RequestScope.current?.logger.info(
            "\(kind) executed", metadata: ["id": "\(id)", "terminal": "\(terminal.id)", "outcome": "\(outcome)"])
        return result
    }

    /// The answer to a request its checks refused.
    static func refusal(of admitted: Admitted<SettlementResult>) -> any Error {
        guard case .refused(let reason) = admitted, let admission = RequestScope.current?.admission else {
            return APIError(.internalError, "the request was refused by checks it did not ask for")
        }
        return admission.refusal(reason)
    }

    func getPayment(_ input: Operations.GetPayment.Input) async throws -> Operations.GetPayment.Output {
        let terminal = try await signingTerminal()
        guard let bytes = [UInt8](hexString: input.path.paymentId), let id = try? PaymentID(bytes: bytes) else {
            throw APIError(.invalidRequest, "paymentId must be 32 hex digits")
        }
        // Another merchant's payment is reported exactly like a missing one: nothing leaks.
        guard let transaction = try await ledger.transaction(for: id), transaction.merchantID == terminal.merchantID
        else {
            throw APIError(.paymentNotFound, "no payment \(id.bytes.hexString) was executed for this merchant")
        }
        var body = Self.paymentResult(transaction.result)
        body.offline = transaction.offline.map(Self.offlineAcceptance)  // Offline settlement
        return .ok(.init(body: .json(try signed(body))))
    }

    /// The submission as the ledger's request, after every check that it is what the wallet
    /// signed, for this terminal: the wallet's signature over the exact Confirm bytes, the
    /// terminal key the Confirm names, and each term the terminal states; with the payment
    /// method the wallet signed.
    static func settlementRequest(_ submission: Components.Schemas.PaymentSubmission, terminal: TerminalRecord)
        throws -> (SettlementRequest, PaymentMethod)
    {
        // The contract's limits first (the generated decoder checks types, not ranges): a stated
        // term out of range is bad input, not a disagreement with what the wallet signed.
        try requireID(submission.paymentId, field: "paymentId")
        try requireMinorUnits(submission.amount, from: 1, field: "amount")
        try requireMinorUnits(submission.tip, from: 0, field: "tip")
        try requireCurrency(submission.currency)
        guard submission.registerUser.utf8.count <= 64 else {
            throw APIError(.invalidRequest, "registerUser must be at most 64 bytes")
        }
        let confirmationBytes = try signedMessage(submission.confirmation, field: "confirmation")
        guard case .confirm(let confirm) = try decode(confirmationBytes, field: "confirmation") else {
            throw APIError(.invalidRequest, "confirmation is not a Confirm message")
        }
        try verifyWalletSignature(confirm.signature.bytes, over: confirm.signedBytes, key: confirm.walletKey)
        try requireTerminal(confirm.terminalKeyDigest, is: terminal)
        // The stated terms must be the signed ones: a terminal cannot move other money than the
        // wallet agreed to, nor say so in its submission.
        var mismatches: [String] = []
        if submission.paymentId.lowercased() != confirm.paymentID.bytes.hexString { mismatches.append("paymentId") }
        if submission.sessionId != Int64(bitPattern: confirm.sessionID.rawValue) { mismatches.append("sessionId") }
        if Data(base64Encoded: submission.walletKey).map(Array.init) != confirm.walletKey.bytes {
            mismatches.append("walletKey")
        }
        if submission.amount != confirm.amount.minorUnits { mismatches.append("amount") }
        if submission.tip != confirm.tip.minorUnits { mismatches.append("tip") }
        if submission.currency.uppercased() != confirm.amount.currency.code { mismatches.append("currency") }
        guard mismatches.isEmpty else {
            throw APIError(
                .termsMismatch,
                "\(mismatches.joined(separator: ", ")) differ(s) from what the wallet signed; nothing was executed")
        }
        let keyID = try keyID(of: terminal)
        let request = SettlementRequest(
            paymentID: confirm.paymentID, sessionID: confirm.sessionID, walletKey: confirm.walletKey,
            terminalKeyID: keyID, amount: confirm.amount, tip: confirm.tip, registerUser: submission.registerUser,
            contentDigest: Array(SHA256.hash(data: confirm.signedBytes)), signedConfirmation: confirmationBytes)
        return (request, confirm.paymentMethod)
    }

    /// A redemption, checked as a payment is: the wallet's signature over the exact Redeem
    /// bytes, the terminal it names, and every stated term.
    static func redemptionRequest(_ submission: Components.Schemas.RedemptionSubmission, terminal: TerminalRecord)
        throws -> RedemptionRequest
    {
        try requireID(submission.redemptionId, field: "redemptionId")
        guard submission.quantity >= 0 else {
            throw APIError(.invalidRequest, "quantity must be 0 or more (got \(submission.quantity))")
        }
        try requireMinorUnits(submission.value, from: 0, field: "value")
        try requireCurrency(submission.currency)
        guard submission.item.utf8.count <= 64 else { throw APIError(.invalidRequest, "item must be at most 64 bytes") }
        let bytes = try signedMessage(submission.redemption, field: "redemption")
        guard case .redeem(let redeem) = try decode(bytes, field: "redemption") else {
            throw APIError(.invalidRequest, "redemption is not a Redeem message")
        }
        try verifyWalletSignature(redeem.signature.bytes, over: redeem.signedBytes, key: redeem.walletKey)
        try requireTerminal(redeem.terminalKeyDigest, is: terminal)
        var mismatches: [String] = []
        if submission.redemptionId.lowercased() != redeem.redemptionID.bytes.hexString {
            mismatches.append("redemptionId")
        }
        if submission.sessionId != Int64(bitPattern: redeem.sessionID.rawValue) { mismatches.append("sessionId") }
        if Data(base64Encoded: submission.walletKey).map(Array.init) != redeem.walletKey.bytes {
            mismatches.append("walletKey")
        }
        let type: TransactionType =
            switch submission.transactionType {
            case .bonus: .bonusRedemption
            case .gold: .goldRedemption
            case .coupon: .couponRedemption
            }
        if type != redeem.transactionType { mismatches.append("transactionType") }
        if submission.item != redeem.item { mismatches.append("item") }
        if submission.quantity != redeem.quantity { mismatches.append("quantity") }
        guard mismatches.isEmpty else {
            throw APIError(
                .termsMismatch,
                "\(mismatches.joined(separator: ", ")) differ(s) from what the wallet signed; nothing was executed")
        }
        let value: Money
        do {
            value = try Money(
                minorUnits: submission.value, currency: try Currency(code: submission.currency.uppercased()))
        } catch {
            throw APIError(.invalidRequest, "value and currency must be an amount in an ISO 4217 currency: \(error)")
        }
        return RedemptionRequest(
            redemptionID: redeem.redemptionID, sessionID: redeem.sessionID, walletKey: redeem.walletKey,
            terminalKeyID: try keyID(of: terminal), transactionType: redeem.transactionType, item: redeem.item,
            quantity: redeem.quantity, value: value, contentDigest: Array(SHA256.hash(data: redeem.signedBytes)),
            signedRedemption: bytes)
    }

    /// A payment or redemption id: 16 bytes in hex.
    static func requireID(_ text: String, field: String) throws {
        guard text.utf8.count == 32, [UInt8](hexString: text) != nil else {
            throw APIError(.invalidRequest, "\(field) must be 32 hex digits")
        }
    }

    /// An amount in minor units within what the system handles (`Money.maximumMinorUnits`).
    static func requireMinorUnits(_ value: Int64, from minimum: Int64, field: String) throws {
        guard value >= minimum, value <= Money.maximumMinorUnits else {
            throw APIError(
                .invalidRequest, "\(field) must be \(minimum) to \(Money.maximumMinorUnits) minor units (got \(value))")
        }
    }

    /// A currency code the ledger settles (upper or lower case).
    static func requireCurrency(_ code: String) throws {
        guard (try? Currency(code: code.uppercased())) != nil else {
            throw APIError(
                .invalidRequest,
                "currency must be an ISO 4217 code this server settles (got \"\(code)\"), e.g. EUR")
        }
    }

    static func signedMessage(_ base64: String, field: String) throws -> [UInt8] {
        guard let bytes = Data(base64Encoded: base64).map(Array.init) else {
            throw APIError(.invalidRequest, "\(field) must be standard base64")
        }
        guard bytes.count <= 1024 else {
            throw APIError(.invalidRequest, "\(field) is \(bytes.count) bytes; a signed request is far smaller")
        }
        return bytes
    }

    static func decode(_ bytes: [UInt8], field: String) throws -> SessionMessage {
        do { return try SessionMessage.decode(bytes) } catch {
            throw APIError(.invalidRequest, "\(field) cannot be decoded: \(error)")
        }
    }

    static func verifyWalletSignature(_ signature: [UInt8], over bytes: [UInt8], key: PublicKeyBytes) throws {
        guard let walletKey = try? P256.Signing.PublicKey(x963Representation: key.bytes),
            verifySignature(signature, over: bytes, with: walletKey)
        else {
            throw APIError(.walletSignatureInvalid, "the request is not signed by the wallet key it names")
        }
    }

    static func requireTerminal(_ digest: DigestBytes, is terminal: TerminalRecord) throws {
        guard digest.bytes == Array(SHA256.hash(data: terminal.publicKey.bytes)) else {
            throw APIError(.termsMismatch, "the wallet signed for another terminal's key")
        }
    }

    static func keyID(of terminal: TerminalRecord) throws -> TerminalKeyID {
        do { return try TerminalKeyID(bytes: terminal.keyID) } catch {
            throw APIError(.internalError, "the terminal's stored key id is damaged")
        }
    }

    /// `body` signed with the issuer key (`SettlementSignature`): a terminal shows an outcome
    /// only when this signature verifies with the anchor it pinned, so nobody on the network
    /// path can answer "approved" for a payment that never executed.
    func signed(_ body: Components.Schemas.PaymentResult) throws -> Components.Schemas.PaymentResult {
        do { return try SettlementSignature.signed(body, by: issuer.signingKey) } catch {
            throw APIError(
                .internalError, "the server could not sign its answer; the request id identifies it in the log")
        }
    }

    static func paymentResult(_ result: SettlementResult) -> Components.Schemas.PaymentResult {
        var body = Components.Schemas.PaymentResult(
            paymentId: result.paymentID.bytes.hexString, outcome: result.outcome.isApproved ? .approved : .declined,
            amount: result.amount.minorUnits, tip: result.tip.minorUnits, currency: result.amount.currency.code,
            sessionId: Int64(bitPattern: result.sessionID.rawValue), settledAt: result.settledAt,
            transactionType: Self.typeName(result.transactionType),
            item: result.transactionType == .payment ? nil : result.item,
            quantity: result.transactionType == .payment ? nil : result.quantity)
        switch result.outcome {
        case .approved(let reference, let earned, let balance):
            body.reference = Int64(bitPattern: reference)
            body.bonusPointsEarned = earned
            body.bonusPointsBalance = balance
        case .declined(let code, let reason):
            body.declineCode = Int32(code.rawValue)
            body.declineReason = reason
        }
        return body
    }

    static func typeName(_ type: TransactionType) -> Components.Schemas.PaymentResult.TransactionTypePayload {
        switch type {
        case .payment: .payment
        case .bonusRedemption: .bonus
        case .goldRedemption: .gold
        case .couponRedemption: .coupon
        }
    }
}
