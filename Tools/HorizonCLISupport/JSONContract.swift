import ArgumentParser
import Foundation
import HorizonCore
import HorizonProtocol

/// An amount as every `--json` output shows it: integer minor units (exact), the ISO 4217 code,
/// and the text a person reads. `{"minorUnits": 1250, "currency": "EUR", "formatted": "12.50 EUR"}`.
public struct JSONMoney: Codable, Hashable, Sendable {
    public let minorUnits: Int64
    public let currency: String
    public let formatted: String

    public init(_ money: Money) {
        self.init(minorUnits: money.minorUnits, currency: money.currency.code, formatted: money.description)
    }

    public init(minorUnits: Int64, currency: String, formatted: String) {
        self.minorUnits = minorUnits
        self.currency = currency
        self.formatted = formatted
    }

    /// The amount without its code, for text that names the currency once: "12.50".
    public var formattedAmount: String {
        formatted.hasSuffix(" \(currency)") ? String(formatted.dropLast(currency.count + 1)) : formatted
    }

    /// Minor units and a currency code as stored; an unknown code still prints, without decimals.
    public init(minorUnits: Int64, currency code: String) {
        if let currency = try? Currency(code: code), let money = try? Money(minorUnits: minorUnits, currency: currency)
        {
            self.init(money)
        } else {
            self.init(minorUnits: minorUnits, currency: code, formatted: "\(minorUnits) \(code)")
        }
    }
}

/// A failure under `--json`: the HTTP API's error envelope, `{"error": {"code", "message"}}`,
/// printed on standard output (where a program reading `--json` looks) with the usual exit code.
public struct JSONErrorEnvelope: Codable, Sendable {
    public struct Body: Codable, Sendable {
        public let code: String
        public let message: String
    }

    public let error: Body

    public init(code: String, message: String) { error = Body(code: code, message: message) }
}

/// The codes of local failures: the API's where one fits, and the programs' own otherwise.
public enum JSONErrorCode {
    /// Bad arguments (exit 2), as the API's.
    public static let invalidRequest = "invalid_request"
    /// The work ran and failed for a reason without a code of its own (exit 1).
    public static let commandFailed = "command_failed"
    /// The Bluetooth radio could not be used.
    public static let radioUnavailable = "radio_unavailable"
    /// A payment or redemption that ran and did not complete (declined, cancelled, timed out).
    public static let transactionFailed = "transaction_failed"
}

extension CommandLine {
    /// Whether the command line asks for JSON (errors then print as `JSONErrorEnvelope`).
    static var wantsJSON: Bool { arguments.dropFirst().contains("--json") }
}

/// Prints `envelope` on standard output, one JSON object.
func printJSONError(_ envelope: JSONErrorEnvelope) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    guard let data = try? encoder.encode(envelope) else { return }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// A refund as every `--json` output shows it.
public struct JSONRefund: Codable, Hashable, Sendable {
    public let refundId: String
    public let paymentId: String
    public let amount: JSONMoney
    /// Where the money went: `horizon_balance` or `card`.
    public let destination: String
    public let bonusPointsReversed: Int64
    public let createdAt: Int64

    public init(
        refundId: String, paymentId: String, amount: JSONMoney, destination: String, bonusPointsReversed: Int64,
        createdAt: Int64
    ) {
        self.refundId = refundId
        self.paymentId = paymentId.lowercased()
        self.amount = amount
        self.destination = destination
        self.bonusPointsReversed = bonusPointsReversed
        self.createdAt = createdAt
    }
}

/// A transaction's kind as the API spells it: payment, bonus, gold or coupon.
public enum TransactionKindName {
    public static func name(_ type: TransactionType) -> String {
        switch type {
        case .payment: "payment"
        case .bonusRedemption: "bonus"
        case .goldRedemption: "gold"
        case .couponRedemption: "coupon"
        }
    }
}
