import Foundation
import HorizonCore
import HorizonLedger
// The stores (`TestStores`, `StoreKind`) live in HorizonLedgerTestSupport, shared with the
// system tests; every file of this target sees them.
@_exported import HorizonLedgerTestSupport
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Testing

/// Payments, keys and ids for the tests.
enum Fixture {
    static func key(_ seed: UInt8) -> PublicKeyBytes {

        try! PublicKeyBytes(bytes: [0x04] + [UInt8](repeating: seed, count: 64))
    }

    static func paymentID() -> PaymentID {
        var generator = SystemRandomNumberGenerator()
        return PaymentID.random(using: &generator)
    }

    static let terminal = try! TerminalKeyID(bytes: [1, 2, 3, 4, 5, 6, 7, 8])
    static let session = SessionID(rawValue: 0x5e55_1011)!

    static func money(_ minorUnits: Int64, _ currency: Currency = .eur) -> Money {
        try! Money(minorUnits: minorUnits, currency: currency)
    }

    static func payment(
        _ id: PaymentID = paymentID(), wallet: PublicKeyBytes, amount: Int64, tip: Int64 = 0,
        currency: Currency = .eur, digest: UInt8 = 7, registerUser: String = "till-1"
    ) -> SettlementRequest {
        SettlementRequest(
            paymentID: id, sessionID: session, walletKey: wallet, terminalKeyID: terminal,
            amount: money(amount, currency), tip: money(tip, currency), registerUser: registerUser,
            contentDigest: [UInt8](repeating: digest, count: 32))
    }

    static func redemption(
        _ type: TransactionType, wallet: PublicKeyBytes, item: String = "", quantity: Int64 = 0,
        id: PaymentID = paymentID()
    ) -> RedemptionRequest {
        RedemptionRequest(
            redemptionID: id, sessionID: session, walletKey: wallet, terminalKeyID: terminal, transactionType: type,
            item: item, quantity: quantity, value: .zero(.eur), contentDigest: [UInt8](repeating: 9, count: 32))
    }

    /// A EUR merchant and a wallet holding `balance` cents.
    static func shop(_ ledger: Ledger, balance: Int64 = 100_00, key seed: UInt8 = 1) async throws -> (
        merchant: Merchant, wallet: Wallet, key: PublicKeyBytes
    ) {
        let merchant = try await ledger.createMerchant(
            name: "Café Horizon", currency: .eur, adminEmail: "owner\(seed)@cafe.example", at: 1_000)
        let key = key(seed)
        let wallet = try await ledger.createWallet(name: "Alice", publicKey: key, at: 1_000)
        if balance > 0 { try await ledger.deposit(money(balance), to: wallet.id, at: 1_000) }
        return (merchant, wallet, key)
    }
}

extension SettlementOutcome {
    var declineCode: ErrorCode? { if case .declined(let code, _) = self { code } else { nil } }
}
