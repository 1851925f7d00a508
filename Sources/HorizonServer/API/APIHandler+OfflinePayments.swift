import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonSettlement
import HorizonStores

/// Offline settlement: a terminal that accepted a payment while it could not
/// reach the server forwards it; the server checks it as an online payment, its acceptance time
/// against the confirmation's signed expiry, then the daily token it was accepted under and the
/// forwarding deadline, and settles it once by the ledger's offline policy
/// (`Ledger.settleOffline`: guaranteed up to one allowance of debt per wallet, beyond that only if
/// the wallet's balance covers it, else declined with `offlineAllowanceExceeded`).
extension APIHandler {
    func submitOfflinePayment(_ input: Operations.SubmitOfflinePayment.Input) async throws
        -> Operations.SubmitOfflinePayment.Output
    {
        guard case .json(let submission) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        do { return try await settleOffline(submission) } catch let error as APIError {
            throw signedRefusal(error, paymentID: submission.paymentId)
        }
    }

    /// A final refusal (a 4xx the terminal would get again on every forward) signed with the
    /// issuer key over the payment id, status, code and message: the terminal gives up an owed
    /// payment only on a refusal it can verify, so nobody on the network path can make it forget
    /// one with a forged 4xx. Anything else stays unsigned (the payment stays owed).
    func signedRefusal(_ error: APIError, paymentID: String) -> APIError {
        let status = error.status.code
        guard (400..<500).contains(status), ![401, 408, 429].contains(status) else { return error }
        var signed = error
        do {
            signed.signature = try SettlementSignature.refusalSignature(
                paymentID: paymentID, status: status, code: error.code.rawValue, message: error.message,
                by: issuer.signingKey)
        } catch {
            return APIError(
                .internalError, "the server could not sign its answer; the request id identifies it in the log")
        }
        return signed
    }

    func settleOffline(_ submission: Components.Schemas.OfflinePaymentSubmission) async throws
        -> Operations.SubmitOfflinePayment.Output
    {
        let terminal = try await signingTerminal()
        // The payment is checked exactly as an online one: the wallet's signature over the
        // Confirm, the terminal it names, every stated term.
        let (payment, method) = try Self.settlementRequest(
            Components.Schemas.PaymentSubmission(
                confirmation: submission.confirmation, paymentId: submission.paymentId,
                sessionId: submission.sessionId, walletKey: submission.walletKey, amount: submission.amount,
                tip: submission.tip, currency: submission.currency, registerUser: submission.registerUser),
            terminal: terminal)
        guard case .accountBalance = method else {
            throw APIError(
                .invalidRequest,
                "the wallet chose a card for this payment; a card is charged online only, so an offline payment must be paid from the wallet's balance"
            )
        }
        // A payment executed before (online, the terminal having timed out on it, or by an
        // earlier forward) gets its stored result: the first outcome is the outcome, and a retry
        // must not fail on a check the first submission passed or never needed. The ledger
        // replays it (or refuses other terms) before the token would be used.
        let executedBefore = try await ledger.transaction(for: payment.paymentID) != nil
        let tokenID = executedBefore ? [] : try await checkedDailyToken(submission, payment: payment, at: now()).tokenID
        let request = OfflineSettlementRequest(payment: payment, tokenID: tokenID, acceptedAt: submission.acceptedAt)
        let result = try await executeOnce("offline_payment", payment.paymentID, terminal: terminal) {
            (ledger, time) throws(LedgerError) in
            .executed(try await ledger.settleOffline(request, merchant: terminal.merchantID, at: time))
        }
        var body = Self.paymentResult(result)
        // A payment settled online first (the terminal had timed out on it) has no offline part.
        body.offline = try await ledger.transaction(for: payment.paymentID)?.offline.map(Self.offlineAcceptance)
        return .ok(.init(body: .json(try signed(body))))
    }

    /// The daily token of an offline payment, after every check that the payment may be
    /// settled under it; each refusal has its own code, and nothing is recorded.
    func checkedDailyToken(
        _ submission: Components.Schemas.OfflinePaymentSubmission, payment: SettlementRequest, at time: UnixTime
    ) async throws -> DailyTokenRecord {
        guard let bytes = Data(base64Encoded: submission.dailyToken).map(Array.init) else {
            throw APIError(.invalidRequest, "dailyToken must be standard base64")
        }
        let token: DailyToken
        do { token = try DailyToken.decode(bytes) } catch {
            throw APIError(.invalidRequest, "dailyToken cannot be decoded: \(error)")
        }
        let (latest, overflow) = time.addingReportingOverflow(DailyToken.clockSkew)
        guard overflow || submission.acceptedAt <= latest else {
            throw APIError(
                .acceptedAtInFuture,
                "acceptedAt (\(submission.acceptedAt)) is later than the server's time (\(time)) by more than \(DailyToken.clockSkew) s; check the terminal's clock"
            )
        }
        // The acceptance time is bound to the expiry the wallet signed: no terminal can date a
        // payment into another token's period.
        let expiresAt = try Self.confirmationExpiry(of: payment)
        let (earliest, underflow) = expiresAt.subtractingReportingOverflow(DailyToken.offlineConfirmationWindow)
        guard submission.acceptedAt <= expiresAt, underflow || submission.acceptedAt >= earliest else {
            throw APIError(
                .acceptedAtOutsideConfirmation,
                "acceptedAt (\(submission.acceptedAt)) must lie within \(DailyToken.offlineConfirmationWindow) s before the expiry the wallet signed in its confirmation (\(expiresAt)); nothing was settled"
            )
        }
        // The token as the wallet presented it, checked at the time the terminal accepted the
        // payment: a payment forwarded a day later was still accepted under a valid token.
        let walletKey = try Self.publicKey(bytes: payment.walletKey.bytes)
        do {
            try token.verify(trusting: [issuer.anchor], at: submission.acceptedAt, walletKey: walletKey)
        } catch .unknownIssuer, .signatureInvalid {
            throw APIError(
                .dailyTokenUnknown, "the daily token is not signed by this server's issuer key; nothing was settled")
        } catch .otherWallet {
            throw APIError(
                .dailyTokenOtherWallet,
                "the daily token belongs to another wallet than the one that signed the payment; nothing was settled")
        } catch .expired(let expiresAt, _) {
            throw APIError(
                .dailyTokenExpired,
                "the daily token expired at \(expiresAt), before the payment was accepted at \(submission.acceptedAt); nothing was settled"
            )
        } catch .notYetValid(let issuedAt, _) {
            throw APIError(
                .dailyTokenNotYetValid,
                "the daily token is valid only from \(issuedAt), after the payment was accepted at \(submission.acceptedAt); check the terminal's clock"
            )
        } catch {
            throw APIError(.invalidRequest, "dailyToken cannot be used: \(error)")
        }
        // Signed by this issuer is not enough: the server settles only under tokens it recorded,
        // byte for byte (what bounds the wallet's offline spending is the recorded allowance).
        guard let record = try await ledger.dailyToken(id: token.tokenID), record.token == bytes else {
            throw APIError(
                .dailyTokenUnknown, "this server issued no daily token \(token.tokenIDHex); nothing was settled")
        }
        // Forwarded in time: the token's validity plus the grace, after which what the wallet
        // spent offline under it is settled for good.
        let (deadline, endless) = record.expiresAt.addingReportingOverflow(DailyToken.forwardGrace)
        guard endless || time <= deadline else {
            throw APIError(
                .offlineForwardTooLate,
                "the daily token expired at \(record.expiresAt); payments accepted under it may be forwarded for \(DailyToken.forwardGrace / 3_600) h after that (until \(deadline)), and it is now \(time); nothing was settled and the merchant is not paid for it"
            )
        }
        guard token.allowance.currency == payment.amount.currency else {
            throw APIError(
                .currencyMismatch,
                "the daily token is in \(token.allowance.currency), the payment in \(payment.amount.currency); nothing was settled"
            )
        }
        guard let total = try? payment.amount.adding(payment.tip), total.minorUnits <= token.allowance.minorUnits
        else {
            throw APIError(
                .offlineAmountExceedsToken,
                "amount plus tip is more than the daily token's allowance (\(token.allowance)); a terminal accepts offline only what the token covers"
            )
        }
        return record
    }

    static func offlineAcceptance(_ offline: OfflineAcceptance) -> Components.Schemas.OfflineAcceptance {
        .init(tokenId: offline.tokenID.hexString, acceptedAt: offline.acceptedAt, guaranteed: offline.guaranteed)
    }
}
