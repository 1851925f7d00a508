import Foundation
import HorizonCore
import HorizonLedger

/// The plain-text receipt of a payment, as a customer who asks for one gets it by mail: who was
/// paid, the amount, tip and total in the payment's currency, when (UTC), the payment id and, for
/// a payment made for a payment intent, the merchant's order reference.
enum ReceiptMail {
    static func render(_ content: ReceiptMailContent) -> (subject: String, body: String) {
        let payment = content.transaction.result
        let id = payment.paymentID.bytes.hexString
        // Amount and tip share the currency and the range keeps their sum in bounds.
        let total = (try? payment.amount.adding(payment.tip)) ?? payment.amount
        var lines = [
            "Receipt from \(content.merchantName)",
            "",
            "Amount:    \(payment.amount.formattedAmount) \(payment.amount.currency.code)",
            "Tip:       \(payment.tip.formattedAmount) \(payment.amount.currency.code)",
            "Total:     \(total.formattedAmount) \(payment.amount.currency.code)",
            "Currency:  \(payment.amount.currency.code)",
            "Time:      \(time(payment.settledAt))",
            "Payment:   \(id)",
        ]
        if let order = content.transaction.orderReference { lines.append("Order:     \(order)") }
        lines += [
            "",
            "Paid with a Horizon wallet. Keep this mail as your receipt; the payment id identifies",
            "the payment to \(content.merchantName) and in your wallet's history.",
        ]
        return ("Your receipt from \(content.merchantName) (payment \(id))", lines.joined(separator: "\n"))
    }

    /// "2025-06-15 15:06:40 UTC".
    static func time(_ time: UnixTime) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time))) + " UTC"
    }
}
