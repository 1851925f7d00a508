import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// The expiry the wallet signed in its confirmation (`Confirm.expiresAt`), as the server holds a
/// terminal to it: a terminal cannot charge a wallet days after the person paid.
extension APIHandler {
    /// How long after its confirmation's expiry a payment may still be submitted online: 24 h.
    /// A terminal that crashed between the confirmation and the server's answer resubmits the
    /// same payment id when it starts again (its journal's recovery), or a day later after a
    /// server outage; later than that it is refused and nothing is charged. A payment executed
    /// before is always answered with its stored result, however late the retry.
    static let confirmationRecoveryGrace: Int64 = 86_400

    /// The expiry the wallet signed in the payment's confirmation.
    static func confirmationExpiry(of request: SettlementRequest) throws -> UnixTime {
        guard case .confirm(let confirm) = try decode(request.signedConfirmation, field: "confirmation") else {
            throw APIError(.invalidRequest, "confirmation is not a Confirm message")
        }
        return confirm.expiresAt
    }

    /// Refuses a payment submitted later than its confirmation's expiry plus the recovery grace,
    /// unless it is a retry of one that was executed (or, for a card, charged) before: those are
    /// answered by the stored result, or resumed, as for any retry.
    func requireCurrentConfirmation(_ request: SettlementRequest, method: PaymentMethod, at time: UnixTime)
        async throws
    {
        let expiresAt = try Self.confirmationExpiry(of: request)
        let (deadline, overflow) = expiresAt.addingReportingOverflow(Self.confirmationRecoveryGrace)
        guard !overflow, time > deadline else { return }
        // Only a late submission pays for these look-ups; a payment in time costs none.
        if try await ledger.transaction(for: request.paymentID) != nil { return }
        if case .card = method {
            let charge: CardCharge?
            do { charge = try await cards.lookup(idempotencyKey: request.paymentID.bytes.hexString) } catch {
                throw Self.apiError(error)
            }
            if charge != nil { return }
        }
        throw APIError(
            .confirmationExpired,
            "the wallet's confirmation expired at \(expiresAt); a payment may be submitted until "
                + "\(Self.confirmationRecoveryGrace / 3_600) h after that (until \(deadline)), and it is now \(time); "
                + "nothing was charged")
    }
}
