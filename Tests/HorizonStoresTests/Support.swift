import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores
import Testing

/// Runs `body` with a fresh, empty directory under the system's temporary directory and removes
/// it (and everything in it) afterwards, whatever `body` does. Databases opened inside `body`
/// should not outlive it.
func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "horizon-stores-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

/// The path of the ledger file inside `directory`.
func ledgerPath(in directory: URL) -> String { directory.appendingPathComponent("ledger.sqlite").path }

/// A distinct, valid uncompressed P-256 point shape for wallet `number`.
func walletKey(_ number: Int) -> PublicKeyBytes {
    let body = (0..<64).map { UInt8(truncatingIfNeeded: number &* 31 &+ $0) }
    return try! PublicKeyBytes(bytes: [PublicKeyBytes.uncompressedPrefix] + body)
}

/// A distinct payment id for `number`.
func paymentID(_ number: Int) -> PaymentID {
    try! PaymentID(bytes: (0..<16).map { UInt8(truncatingIfNeeded: number >> (8 * ($0 % 8))) ^ UInt8($0) })
}

/// A 32-byte stand-in for the digest of a wallet's signed confirmation.
func digest(_ number: Int) -> [UInt8] {
    (0..<32).map { UInt8(truncatingIfNeeded: number &* 131 &+ $0 &* 7) }
}

func euros(_ minorUnits: Int64) -> Money { try! Money(minorUnits: minorUnits, currency: .eur) }

let terminalKey = try! TerminalKeyID(bytes: [0x7E, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE])
let session = SessionID(rawValue: 0xDEAD_BEEF_0000_0001)!

/// A settlement request; the digest follows the payment id unless given.
func request(
    _ id: Int, wallet: Int = 1, amount: Money, tip: Money? = nil, registerUser: String = "anna",
    digest contentDigest: [UInt8]? = nil, signedConfirmation: [UInt8] = []
) -> SettlementRequest {
    SettlementRequest(
        paymentID: paymentID(id), sessionID: session, walletKey: walletKey(wallet), terminalKeyID: terminalKey,
        amount: amount, tip: tip ?? .zero(amount.currency), registerUser: registerUser,
        contentDigest: contentDigest ?? digest(id), signedConfirmation: signedConfirmation)
}

/// The time every test settles at, a Unix time in 2027.
let settleTime: UnixTime = 1_800_000_000

/// The `DatabaseError` that `body` throws, or nil (recording an issue) if it throws none.
func databaseError(
    _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) -> DatabaseError? {
    do {
        try body()
        Issue.record("expected a DatabaseError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as DatabaseError {
        return error
    } catch {
        Issue.record("expected a DatabaseError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Expects `body` to throw a `DatabaseError` with exactly these fields.
func expectDatabaseError(
    code: Int32, message: String, context: String, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    let error = databaseError(body, sourceLocation: sourceLocation)
    #expect(error?.code == code, sourceLocation: sourceLocation)
    #expect(error?.message == message, sourceLocation: sourceLocation)
    #expect(error?.context == context, sourceLocation: sourceLocation)
    #expect(error?.description == "\(context): \(message) (SQLite \(code))", sourceLocation: sourceLocation)
}
