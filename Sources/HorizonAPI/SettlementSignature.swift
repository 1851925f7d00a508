import Crypto
import Foundation

/// The server's signature over a settlement answer (`PaymentResult.signature`), made with its
/// issuer (anchor) key, which a terminal pinned when it was activated. A terminal shows
/// "approved" (or "declined") only for an answer that verifies: without it, anyone on the
/// network path could answer "approved" for a payment that never executed.
public enum SettlementSignature {
    static let label = "horizon/settlement-result/v1"
    static let refusalLabel = "horizon/offline-refusal/v1"

    /// The bytes the signature covers: the label, then every field that says what happened
    /// (payment id, outcome, amounts, currency, reference, decline, bonus points, session, time,
    /// type, item, quantity, and an offline settlement's token, acceptance time and guarantee),
    /// each as its UTF-8 length, a colon and its text, so no two answers share their bytes.
    public static func signedBytes(_ result: Components.Schemas.PaymentResult) -> [UInt8] {
        func optional<T>(_ value: T?) -> String { value.map { "\($0)" } ?? "-" }
        var fields = [
            label, result.paymentId, result.outcome.rawValue, "\(result.amount)", "\(result.tip)", result.currency,
            optional(result.reference), optional(result.declineCode), optional(result.declineReason),
            optional(result.bonusPointsEarned), optional(result.bonusPointsBalance), optional(result.sessionId),
            "\(result.settledAt)", optional(result.transactionType?.rawValue), optional(result.item),
            optional(result.quantity),
        ]
        // Only offline answers have this part; online answers keep their bytes.
        if let offline = result.offline {
            fields += [offline.tokenId, "\(offline.acceptedAt)", "\(offline.guaranteed)"]
        }
        return encoded(fields)
    }

    static func encoded(_ fields: [String]) -> [UInt8] {
        Array(fields.map { "\($0.utf8.count):\($0)" }.joined(separator: "\n").utf8)
    }

    /// The bytes a refusal of a forwarded offline payment is signed over: the label, the payment
    /// id, the HTTP status, the code and the message. A terminal drops an owed offline payment as
    /// refused only on a refusal that verifies: an unsigned one could be anyone's.
    public static func refusalBytes(paymentID: String, status: Int, code: String, message: String) -> [UInt8] {
        encoded([refusalLabel, paymentID, "\(status)", code, message])
    }

    /// The signature (raw r||s, standard base64) by `key` over a refusal of `paymentID`.
    public static func refusalSignature(
        paymentID: String, status: Int, code: String, message: String, by key: P256.Signing.PrivateKey
    ) throws -> String {
        let bytes = refusalBytes(paymentID: paymentID, status: status, code: code, message: message)
        return Data(try key.signature(for: bytes).rawRepresentation).base64EncodedString()
    }

    /// Whether `signature` is `anchor`'s over this refusal of `paymentID`.
    public static func isValidRefusal(
        _ signature: String?, paymentID: String, status: Int, code: String, message: String,
        anchor: P256.Signing.PublicKey
    ) -> Bool {
        guard let signature, let raw = Data(base64Encoded: signature),
            let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
        else { return false }
        return anchor.isValidSignature(
            parsed, for: refusalBytes(paymentID: paymentID, status: status, code: code, message: message))
    }

    /// `result` with its signature by `key` (raw r||s, standard base64).
    public static func signed(_ result: Components.Schemas.PaymentResult, by key: P256.Signing.PrivateKey) throws
        -> Components.Schemas.PaymentResult
    {
        var result = result
        result.signature = nil
        result.signature = Data(try key.signature(for: signedBytes(result)).rawRepresentation).base64EncodedString()
        return result
    }

    /// Whether `result` carries a valid signature by `anchor`.
    public static func isValid(_ result: Components.Schemas.PaymentResult, anchor: P256.Signing.PublicKey) -> Bool {
        guard let text = result.signature, let raw = Data(base64Encoded: text),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
        else { return false }
        return anchor.isValidSignature(signature, for: signedBytes(result))
    }
}
