import ArgumentParser
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonProtocol
import HorizonRadio
import HorizonRoles
import HorizonSecureChannel
import HorizonSimulatedRadio
import HorizonStores
import Logging

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List this wallet's receipts and pending payments.")

    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let files = global.walletFiles
        _ = try files.loadPublicKey()
        let store = try files.openStore()
        let receipts = try store.receipts()
        let pending = try SQLitePendingPaymentStore(store: store).all()
        if json {
            try Console().json(
                HistoryReport(
                    receipts: receipts,
                    pending: pending.map(PendingRow.init)))
            return
        }
        if receipts.isEmpty, pending.isEmpty { print("no payments yet") }
        for payment in pending {
            print("PENDING   \(payment.merchantName)  \(PendingRow(payment).what)  id \(payment.paymentID)")
        }
        for receipt in receipts {
            let currency = (try? Currency(code: receipt.currency)) ?? .eur
            let amount = (try? Money(minorUnits: receipt.amountMinorUnits, currency: currency)) ?? .zero(currency)
            let tip = (try? Money(minorUnits: receipt.tipMinorUnits, currency: currency)) ?? .zero(currency)
            let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(receipt.settledAt)))
            print("\(time)  \(receipt.merchantName)  \(amount) + tip \(tip)  payment \(receipt.paymentID)")
        }
    }
}

struct HistoryReport: Encodable {
    let receipts: [StoredReceipt]
    let pending: [PendingRow]
}

struct PendingRow: Encodable {
    let paymentID: String
    let kind: String
    let merchantName: String
    /// "12.50 + tip 1.50 EUR" for a payment, the coupon or reward for a redemption.
    let what: String
    let createdAt: Int64

    init(_ pending: PendingPayment) {
        paymentID = pending.paymentID.description
        merchantName = pending.merchantName
        createdAt = pending.createdAt
        if let confirm = pending.confirm {
            kind = "payment"
            what = "\(confirm.amount) + tip \(confirm.tip)"
        } else if let redeem = pending.redeem {
            kind = redeem.transactionType.description
            what = redeem.quantity > 0 ? "\(redeem.item) for \(redeem.quantity) points" : redeem.item
        } else {
            kind = "request"
            what = ""
        }
    }
}
