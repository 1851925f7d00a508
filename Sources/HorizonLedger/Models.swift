import Foundation
import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// A merchant's id: opaque text the ledger makes (`m_` and 32 hex digits) or is given.
public struct MerchantID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    static func generate() -> MerchantID { MerchantID(rawValue: "m_" + randomHex()) }
}

/// A wallet's account id, which outlives its keys (a restored device gets a new key, same account).
public struct WalletID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    static func generate() -> WalletID { WalletID(rawValue: "w_" + randomHex()) }
}

func randomHex() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<16).map { _ in
        let byte = UInt8.random(in: 0...255, using: &generator)
        return String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
    }.joined()
}

public struct Merchant: Sendable, Equatable {
    public let id: MerchantID
    public let name: String
    /// The one currency this merchant settles in; payments in another are declined.
    public let currency: Currency
    public let adminEmail: String
    /// Bonus points earned per whole currency unit of a payment's amount (tips earn none).
    public let bonusPointsPerMajorUnit: Int64
    public let createdAt: UnixTime
    /// The IANA time zone (such as Europe/Berlin) its days are counted in: UTC unless set.
    public var timeZone: String = "UTC"
}

public struct Wallet: Sendable, Equatable {
    public let id: WalletID
    public let name: String
    public let createdAt: UnixTime
}

/// A cashier at a merchant's register, named by an id the merchant chooses.
public struct RegisterUser: Sendable, Equatable {
    public let id: String
    public let name: String
    public let addedAt: UnixTime
}

/// One executed payment or redemption as the ledger keeps it: the result every retry gets,
/// and where it happened.
public struct LedgerTransaction: Sendable, Equatable {
    /// The ledger's running number for it (also the approval's reference).
    public let reference: Int64
    public let merchantID: MerchantID
    /// Nil when the wallet's key was not registered (the payment was declined).
    public let walletID: WalletID?
    public let walletKey: PublicKeyBytes
    public let terminalKeyID: TerminalKeyID
    public let registerUser: String
    public let result: SettlementResult
    /// How it was settled when a terminal accepted it offline; nil when online.
    public var offline: OfflineAcceptance? = nil
    /// The merchant's order reference, when the payment was made for a payment intent.
    public var orderReference: String? = nil
}

/// How a payment a terminal accepted offline was settled.
public struct OfflineAcceptance: Sendable, Equatable {
    /// The daily token the wallet presented.
    public let tokenID: [UInt8]
    /// When the terminal accepted it (the terminal's clock).
    public let acceptedAt: UnixTime
    /// Whether it settled within the wallet's offline guarantee (the server paid the merchant
    /// even if the wallet's balance fell short); false when the balance paid it beyond the
    /// guarantee, or when it was declined.
    public let guaranteed: Bool

    public init(tokenID: [UInt8], acceptedAt: UnixTime, guaranteed: Bool) {
        self.tokenID = tokenID
        self.acceptedAt = acceptedAt
        self.guaranteed = guaranteed
    }
}

/// What the ledger does with a wallet key it does not know.
public enum WalletEnrollment: Sendable, Equatable {
    /// Declined as `unknownWallet`: wallets register first (the server).
    case refuseUnknown
    /// Registered on first contact and funded with this balance, posted from the external
    /// account like any top-up: only for the single-box sandbox.
    case sandboxOnFirstContact(startingBalance: Int64)
}

/// Settings of one `Ledger` (not stored: each process opening the ledger passes its own).
public struct LedgerOptions: Sendable, Equatable {
    public var enrollment: WalletEnrollment
    /// The most, in minor units of the merchant's currency, one payment (amount and tip) of a
    /// pinless wallet may be: its key is protected by the device alone. Nil: no limit.
    public var pinlessPaymentLimit: Int64?

    /// 50.00 in the merchant's currency, as contactless cards without a PIN are commonly limited.
    public static let defaultPinlessPaymentLimit: Int64 = 5000

    public init(
        enrollment: WalletEnrollment = .refuseUnknown, pinlessPaymentLimit: Int64? = defaultPinlessPaymentLimit
    ) {
        self.enrollment = enrollment
        self.pinlessPaymentLimit = pinlessPaymentLimit
    }
}
