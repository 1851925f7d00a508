import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonProtocol

/// What the server did with a payment a terminal accepted offline.
public struct OfflinePaymentSettlement: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        /// The merchant is paid: the server's reference, and the bonus points as for an online payment.
        case settled(reference: Int64, bonusPointsEarned: Int64, bonusPointsBalance: Int64)
        /// Not paid, for good (e.g. `offlineAllowanceExceeded`: beyond the wallet's offline
        /// guarantee, and its balance does not cover it).
        case declined(code: ErrorCode, reason: String)
    }

    /// How the server settled it offline.
    public struct Offline: Sendable, Equatable {
        /// The daily token's id, hex.
        public let tokenID: String
        public let acceptedAt: Int64
        /// Whether it settled within the wallet's offline guarantee (paid even if the wallet's
        /// balance fell short); false when the balance paid it, or it was declined.
        public let guaranteed: Bool

        public init(tokenID: String, acceptedAt: Int64, guaranteed: Bool) {
            self.tokenID = tokenID
            self.acceptedAt = acceptedAt
            self.guaranteed = guaranteed
        }
    }

    public let paymentID: PaymentID
    public let outcome: Outcome
    public let settledAt: Int64
    /// Nil when the server had settled this payment online before (the terminal timed out on the
    /// online attempt and kept it offline): the online result is the result.
    public let offline: Offline?
}

extension HorizonServerClient {
    /// Whether a refusal of a forwarded offline payment with this status is final (the server
    /// would give it again however often the payment is sent): a 4xx but 401 (a clock or key the
    /// operator fixes), 408 and 429. The server signs exactly these.
    public static func isFinalOfflineRefusal(status: Int) -> Bool {
        (400..<500).contains(status) && ![401, 408, 429].contains(status)
    }

    /// Forwards a payment the terminal accepted offline to `POST /v1/payments/offline`, signed by
    /// the terminal's key (this client's). The server settles it once per payment id: sending it
    /// again, after a crash or a timeout, returns the first result and moves nothing.
    ///
    /// - Parameters:
    ///   - confirmation: the wallet's signed Confirm exactly as it arrived over the radio; the
    ///     session and the wallet key the server is told are read from it.
    ///   - dailyToken: the wallet's daily token as the wallet presented it (`DailyToken.encoded()`).
    ///   - acceptedAt: when the terminal accepted the payment, by its clock.
    ///   - anchor: the server's issuer key, pinned at activation. A settlement counts only when
    ///     the server signed it with this key, and a final refusal only when the server signed it
    ///     too: a man in the middle's "settled" or 4xx would make the terminal forget a payment the
    ///     server never received.
    /// - Throws: `ServerClientError`: a refusal (`.refused`, with the server's code such as
    ///   `daily_token_expired` or `payment_conflict`) means nothing was settled; unreachable or
    ///   timed out means the payment may or may not have settled, and the same call is repeated;
    ///   so does `.invalidResponse`, which an answer or final refusal not signed by `anchor` is.
    public func submitOfflinePayment(
        paymentID: PaymentID, confirmation: [UInt8], amount: Money, tip: Money, registerUser: String = "",
        dailyToken: [UInt8], acceptedAt: Int64, anchor: P256.Signing.PublicKey
    ) async throws(ServerClientError) -> OfflinePaymentSettlement {
        // A confirmation that is not a Confirm is sent as it is: the server refuses it with its
        // own code (`invalid_request`), as for every other term it checks.
        var sessionID: Int64 = 0
        var walletKey = ""
        if case .confirm(let confirm)? = try? SessionMessage.decode(confirmation) {
            sessionID = Int64(bitPattern: confirm.sessionID.rawValue)
            walletKey = Data(confirm.walletKey.bytes).base64EncodedString()
        }
        let submission = Components.Schemas.OfflinePaymentSubmission(
            confirmation: Data(confirmation).base64EncodedString(), paymentId: paymentID.bytes.hexString,
            sessionId: sessionID, walletKey: walletKey, amount: amount.minorUnits, tip: tip.minorUnits,
            currency: amount.currency.code, registerUser: registerUser,
            dailyToken: Data(dailyToken).base64EncodedString(), acceptedAt: acceptedAt)
        let output = try await call { try await client.submitOfflinePayment(body: .json(submission)) }
        let answer: Components.Schemas.PaymentResult
        switch output {
        case .ok(let ok): answer = try Self.json { try ok.body.json }
        case .default(let status, let error):
            let envelope = try Self.json { try error.body.json }.error
            guard
                !Self.isFinalOfflineRefusal(status: status)
                    || SettlementSignature.isValidRefusal(
                        envelope.signature, paymentID: paymentID.bytes.hexString, status: status,
                        code: envelope.code, message: envelope.message, anchor: anchor)
            else {
                throw .invalidResponse(
                    "a refusal (\(status) \(envelope.code)) not signed by the anchor pinned at activation (unsigned, or forged on the way); it is not an outcome: the payment stays owed and is forwarded again"
                )
            }
            throw try Self.refusal(status, error)
        }
        do { _ = try ServerPaymentProcessor.verified(answer, about: paymentID, anchor: anchor) } catch {
            throw .invalidResponse("\(error)")
        }
        let outcome: OfflinePaymentSettlement.Outcome
        switch answer.outcome {
        case .approved:
            guard let reference = answer.reference else {
                throw .invalidResponse("an approved payment without its reference")
            }
            outcome = .settled(
                reference: reference, bonusPointsEarned: answer.bonusPointsEarned ?? 0,
                bonusPointsBalance: answer.bonusPointsBalance ?? 0)
        case .declined:
            guard let code = answer.declineCode.flatMap(UInt16.init(exactly:)) else {
                throw .invalidResponse("a declined payment without a decline code")
            }
            outcome = .declined(
                code: ErrorCode(rawValue: code), reason: answer.declineReason ?? "declined by the server")
        }
        return OfflinePaymentSettlement(
            paymentID: paymentID, outcome: outcome, settledAt: answer.settledAt,
            offline: answer.offline.map {
                OfflinePaymentSettlement.Offline(
                    tokenID: $0.tokenId, acceptedAt: $0.acceptedAt, guaranteed: $0.guaranteed)
            })
    }
}
