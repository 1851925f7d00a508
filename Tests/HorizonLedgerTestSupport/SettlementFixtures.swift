import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

// Settlement fixtures shared by the ledger's and the stores' tests: distinct, valid keys, ids
// and requests derived from a number, so that a test names "payment 3 of wallet 2" and the bytes
// follow. (Test code: a malformed constant here is a bug in the fixture, so it traps.)

/// A distinct, valid uncompressed P-256 point shape for wallet `number`.
public func walletKey(_ number: Int) -> PublicKeyBytes {
    let body = (0..<64).map { UInt8(truncatingIfNeeded: number &* 31 &+ $0) }
    return try! PublicKeyBytes(bytes: [PublicKeyBytes.uncompressedPrefix] + body)
}

/// A distinct payment id for `number`.
public func paymentID(_ number: Int) -> PaymentID {
    try! PaymentID(bytes: (0..<16).map { UInt8(truncatingIfNeeded: number >> (8 * ($0 % 8))) ^ UInt8($0) })
}

/// A 32-byte stand-in for the digest of a wallet's signed confirmation.
public func digest(_ number: Int) -> [UInt8] {
    (0..<32).map { UInt8(truncatingIfNeeded: number &* 131 &+ $0 &* 7) }
}

/// An amount in euro cents, for every test target (a test's literal amounts are always valid).
public func euros(_ minorUnits: Int64) -> Money {
    guard let money = try? Money(minorUnits: minorUnits, currency: .eur) else {
        preconditionFailure("\(minorUnits) cents is not an amount")
    }
    return money
}

/// The terminal key id and session every fixture request is made under.
public let terminalKey = try! TerminalKeyID(bytes: [0x7E, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE])
public let session = SessionID(rawValue: 0xDEAD_BEEF_0000_0001)!

/// A settlement request; the digest follows the payment id unless given.
public func request(
    _ id: Int, wallet: Int = 1, amount: Money, tip: Money? = nil, registerUser: String = "anna",
    digest contentDigest: [UInt8]? = nil, signedConfirmation: [UInt8] = []
) -> SettlementRequest {
    SettlementRequest(
        paymentID: paymentID(id), sessionID: session, walletKey: walletKey(wallet), terminalKeyID: terminalKey,
        amount: amount, tip: tip ?? .zero(amount.currency), registerUser: registerUser,
        contentDigest: contentDigest ?? digest(id), signedConfirmation: signedConfirmation)
}
