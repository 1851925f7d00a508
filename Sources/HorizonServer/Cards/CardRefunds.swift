import HorizonCore
import HorizonLedger

/// Refunds that reach the card a payment was made with: the ledger decides and
/// records the refund first (what is left, idempotent by the merchant's refund id); a refund
/// whose destination is a card is then sent to the card processor, against the payment's charge
/// (its idempotency key is the payment id), with the refund's own idempotency key.
///
/// If the processor fails after the ledger recorded the refund, the error says so; retrying the
/// same refund id gets the stored refund from the ledger and sends it to the processor again,
/// which applies it once. So a refund is never given twice, and a retry always completes it.
public struct CardRefunds: Sendable {
    let ledger: Ledger
    let processor: any CardProcessor

    public init(ledger: Ledger, processor: any CardProcessor) {
        self.ledger = ledger
        self.processor = processor
    }

    /// Why a card refund is not complete.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// The ledger refused it (nothing was refunded): see `RefundRefusal` in the error.
        case ledger(LedgerError)
        /// The ledger recorded `refund`, but the processor did not confirm it: retry with the same refund id.
        case processor(CardProcessorError, refund: Refund)

        public var description: String {
            switch self {
            case .ledger(let error): error.description
            case .processor(let error, let refund):
                "refund \(refund.refundID) is recorded, but the card processor did not confirm it (\(error)); retry with the same refund id"
            }
        }
    }

    /// Refunds `request` of a payment `merchant` received, to the method it was paid with.
    public func refund(_ request: RefundRequest, merchant: MerchantID, at time: UnixTime) async throws(Failure)
        -> Refund
    {
        let refund: Refund
        do { refund = try await ledger.refund(request, merchant: merchant, at: time) } catch { throw .ledger(error) }
        guard refund.destination == .card else { return refund }
        do {
            _ = try await processor.refund(
                chargeKey: refund.paymentID.bytes.hexString, amount: refund.amount,
                idempotencyKey: Self.idempotencyKey(refund), at: time)
        } catch {
            throw .processor(error, refund: refund)
        }
        return refund
    }

    /// Refund ids are unique per merchant, so the processor's key names the merchant too.
    static func idempotencyKey(_ refund: Refund) -> String {
        "\(refund.merchantID.rawValue)/\(refund.refundID.rawValue)"
    }
}
