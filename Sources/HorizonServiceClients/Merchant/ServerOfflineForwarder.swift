import Crypto
import HorizonCore
import HorizonProtocol
import HorizonServerClient
import HorizonSettlement
import HorizonStores
import Logging

/// The terminal's offline forwarder: each payment it accepted offline goes to
/// `POST /v1/payments/offline`, signed with the terminal's key, with the wallet's Confirm and
/// daily token exactly as they arrived. The server settles a payment id once, so sending one again
/// after a crash or a lost answer settles nothing twice.
///
/// What an answer means: a settlement or a decline is final; a refusal before settlement (4xx, such
/// as an expired or foreign token, or `payment_conflict`) is final too and is kept as a decline;
/// anything else (unreachable, timed out, a 5xx, 401 for a clock or key the operator fixes, 429)
/// throws: the payment stays owed and is sent again on the next run.
///
/// An answer counts only when the server signed it with `anchor`, the issuer key the terminal
/// pinned at activation, settlements and refusals alike: a "settled" or a 4xx from anyone else (a
/// man in the middle) is no answer, logged at warning, and the payment stays owed, so the
/// terminal never forgets a payment the server did not receive.
public struct ServerOfflineForwarder: OfflinePaymentForwarder {
    public let client: HorizonServerClient
    public let anchor: P256.Signing.PublicKey
    let logger: Logger

    /// - Parameters:
    ///   - client: signed with the terminal's key (the one that accepted the payments).
    ///   - anchor: the server's issuer key, pinned at activation (`anchor.pub`).
    public init(client: HorizonServerClient, anchor: P256.Signing.PublicKey, logger: Logger) {
        self.client = client
        self.anchor = anchor
        self.logger = logger
    }

    public func forward(_ payment: OfflinePaymentRecord) async throws -> OfflineForwardOutcome {
        let settlement: OfflinePaymentSettlement
        do {
            settlement = try await client.submitOfflinePayment(
                paymentID: payment.paymentID, confirmation: payment.signedConfirmation, amount: payment.amount,
                tip: payment.tip, registerUser: payment.registerUser, dailyToken: payment.dailyToken,
                acceptedAt: payment.acceptedAt, anchor: anchor)
        } catch {
            if let outcome = Self.finalRefusal(error) { return outcome }
            if case .invalidResponse(let reason) = error {
                logger.warning(
                    "an answer to an offline forward is not the server's; the payment stays owed",
                    metadata: ["paymentID": "\(payment.paymentID)", "reason": "\(reason)"])
            }
            throw error
        }
        switch settlement.outcome {
        case .settled:
            // No offline part: the online attempt the terminal gave up on had settled after all.
            return settlement.offline == nil ? .alreadySettled : .settled
        case .declined(let code, let reason):
            return .declined(code: code.name ?? "\(code.rawValue)", reason: reason)
        }
    }

    /// A refusal the server will give again however often the payment is sent, as a decline;
    /// nil for one that may pass later (the payment stays owed).
    static func finalRefusal(_ error: ServerClientError) -> OfflineForwardOutcome? {
        guard case .refused(let status, let code, let message, _) = error else { return nil }
        guard HorizonServerClient.isFinalOfflineRefusal(status: status) else { return nil }
        return .declined(code: code, reason: message)
    }
}
