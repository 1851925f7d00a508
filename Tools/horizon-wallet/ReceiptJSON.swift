import HorizonCLISupport
import HorizonStores

/// A receipt the wallet keeps, as `--json` shows it (the stored form keeps its own field names).
struct ReceiptJSON: Encodable {
    let paymentId: String
    let sessionId: String
    let merchantName: String
    let amount: JSONMoney
    let tip: JSONMoney
    let total: JSONMoney
    let reference: Int64
    let settledAt: Int64
    let bonusPointsEarned: Int64
    let bonusPointsBalance: Int64
    /// True when the terminal accepted it offline; absent otherwise.
    let acceptedOffline: Bool?

    init(_ receipt: StoredReceipt) {
        paymentId = receipt.paymentID
        sessionId = receipt.sessionID
        merchantName = receipt.merchantName
        amount = JSONMoney(minorUnits: receipt.amountMinorUnits, currency: receipt.currency)
        tip = JSONMoney(minorUnits: receipt.tipMinorUnits, currency: receipt.currency)
        total = JSONMoney(minorUnits: receipt.amountMinorUnits + receipt.tipMinorUnits, currency: receipt.currency)
        reference = Int64(truncatingIfNeeded: receipt.reference)
        settledAt = receipt.settledAt
        bonusPointsEarned = receipt.bonusPointsEarned
        bonusPointsBalance = receipt.bonusPointsBalance
        acceptedOffline = receipt.acceptedOffline
    }
}
