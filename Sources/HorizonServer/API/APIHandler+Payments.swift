import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonStores

/// Settlement through the server (issue 14 item 6): the terminal forwards what the wallet
/// signed; the server checks it against the wallet's own key and executes it once.
extension APIHandler {
    func submitPayment(_ input: Operations.SubmitPayment.Input) async throws -> Operations.SubmitPayment.Output {
        guard case .json(let submission) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let terminal = try await signingTerminal()
        let request = try Self.settlementRequest(submission, terminal: terminal)
        let result: SettlementResult
        do {
            result = try await ledger.settle(request, merchant: terminal.merchantID, at: now())
        } catch .conflictingRetry(let id) {
            metrics.record(event: "payment_conflict")
            throw APIError(
                .paymentConflict,
                "payment \(id) was executed before with other terms; nothing was executed now (a new payment needs a new id)"
            )
        }
        metrics.record(event: result.outcome.isApproved ? "payment_approved" : "payment_declined")
        RequestScope.current?.logger.info(
            "payment settled",
            metadata: [
                "payment": "\(request.paymentID)", "terminal": "\(terminal.id)",
                "outcome": "\(result.outcome.isApproved ? "approved" : "declined")",
            ])
        return .ok(.init(body: .json(Self.paymentResult(result))))
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
        return .ok(.init(body: .json(Self.paymentResult(transaction.result))))
    }

    /// The submission as the ledger's request, after every check that it is what the wallet
    /// signed, for this terminal: the wallet's signature over the exact Confirm bytes, the
    /// terminal key the Confirm names, and each term the terminal states.
    static func settlementRequest(_ submission: Components.Schemas.PaymentSubmission, terminal: TerminalRecord)
        throws -> SettlementRequest
    {
        guard let confirmationBytes = Data(base64Encoded: submission.confirmation).map(Array.init) else {
            throw APIError(.invalidRequest, "confirmation must be standard base64")
        }
        guard confirmationBytes.count <= 1024 else {
            throw APIError(
                .invalidRequest, "confirmation is \(confirmationBytes.count) bytes; a Confirm is far smaller")
        }
        let confirm: Confirm
        do {
            guard case .confirm(let decoded) = try SessionMessage.decode(confirmationBytes) else {
                throw APIError(.invalidRequest, "confirmation is not a Confirm message")
            }
            confirm = decoded
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError(.invalidRequest, "confirmation cannot be decoded: \(error)")
        }
        guard let walletKey = try? P256.Signing.PublicKey(x963Representation: confirm.walletKey.bytes),
            verifySignature(confirm.signature.bytes, over: confirm.signedBytes, with: walletKey)
        else {
            throw APIError(.walletSignatureInvalid, "the confirmation is not signed by the wallet key it names")
        }
        guard confirm.terminalKeyDigest.bytes == Array(SHA256.hash(data: terminal.publicKey.bytes)) else {
            throw APIError(.termsMismatch, "the confirmation names another terminal's key")
        }
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
        guard submission.registerUser.utf8.count <= 64 else {
            throw APIError(.invalidRequest, "registerUser must be at most 64 bytes")
        }
        let keyID: TerminalKeyID
        do { keyID = try TerminalKeyID(bytes: terminal.keyID) } catch {
            throw APIError(.internalError, "the terminal's stored key id is damaged")
        }
        return SettlementRequest(
            paymentID: confirm.paymentID, sessionID: confirm.sessionID, walletKey: confirm.walletKey,
            terminalKeyID: keyID, amount: confirm.amount, tip: confirm.tip, registerUser: submission.registerUser,
            contentDigest: Array(SHA256.hash(data: confirm.signedBytes)), signedConfirmation: confirmationBytes)
    }

    static func paymentResult(_ result: SettlementResult) -> Components.Schemas.PaymentResult {
        var body = Components.Schemas.PaymentResult(
            paymentId: result.paymentID.bytes.hexString, outcome: result.outcome.isApproved ? .approved : .declined,
            amount: result.amount.minorUnits, tip: result.tip.minorUnits, currency: result.amount.currency.code,
            sessionId: Int64(bitPattern: result.sessionID.rawValue), settledAt: result.settledAt)
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
}
