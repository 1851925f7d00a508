import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HummingbirdTesting
import Testing

/// What a wallet signs over the radio and a terminal forwards to the server, made without a
/// radio: a Confirm or a Redeem signed by the wallet's key for one terminal's key.
enum WalletSigned {
    static func confirm(
        by wallet: P256.Signing.PrivateKey, for terminal: P256.Signing.PublicKey, amount: Int64, tip: Int64 = 0,
        currency: Currency = .eur, expiresAt: Int64 = 4_000_000_000, paymentID: PaymentID? = nil
    ) throws -> Confirm {
        var generator = SystemRandomNumberGenerator()
        let unsigned = try Confirm(
            sessionID: try #require(SessionID(rawValue: UInt64.random(in: 1...UInt64.max))),
            terminalKeyDigest: DigestBytes(bytes: Array(SHA256.hash(data: terminal.x963Representation))),
            walletKey: PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation)),
            offerDigest: DigestBytes(bytes: Array(SHA256.hash(data: Data("offer".utf8)))),
            amount: Money(minorUnits: amount, currency: currency), tip: Money(minorUnits: tip, currency: currency),
            paymentID: paymentID ?? PaymentID.random(using: &generator),
            walletNonce: Nonce(bytes: (0..<16).map { _ in UInt8.random(in: 0...255) }), expiresAt: expiresAt)
        return unsigned.withSignature(
            try SignatureBytes(bytes: Array(try wallet.signature(for: unsigned.signedBytes).rawRepresentation)))
    }

    static func redeem(
        by wallet: P256.Signing.PrivateKey, for terminal: P256.Signing.PublicKey, points: Int64,
        item: String = "Free coffee"
    ) throws -> Redeem {
        var generator = SystemRandomNumberGenerator()
        let unsigned = try Redeem(
            sessionID: try #require(SessionID(rawValue: UInt64.random(in: 1...UInt64.max))),
            transactionType: .bonusRedemption,
            terminalKeyDigest: DigestBytes(bytes: Array(SHA256.hash(data: terminal.x963Representation))),
            walletKey: PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation)),
            offerDigest: DigestBytes(bytes: [UInt8](repeating: 7, count: 32)),
            redemptionID: PaymentID.random(using: &generator), item: item, quantity: points,
            walletNonce: Nonce(bytes: (0..<16).map { _ in UInt8.random(in: 0...255) }), expiresAt: 4_000_000_000)
        return unsigned.withSignature(
            try SignatureBytes(bytes: Array(try wallet.signature(for: unsigned.signedBytes).rawRepresentation)))
    }
}

/// A submission's JSON fields as a terminal states them, so tests can replace or drop any one.
struct SubmissionFields: @unchecked Sendable {
    var fields: [String: Any]

    /// POST /v1/payments for `confirm`, every term as signed.
    init(payment confirm: Confirm, registerUser: String = "till-user-1") {
        fields = [
            "confirmation": Data(SessionMessage.confirm(confirm).encoded()).base64EncodedString(),
            "paymentId": confirm.paymentID.bytes.hexString,
            "sessionId": Int(Int64(bitPattern: confirm.sessionID.rawValue)),
            "walletKey": Data(confirm.walletKey.bytes).base64EncodedString(),
            "amount": Int(confirm.amount.minorUnits), "tip": Int(confirm.tip.minorUnits),
            "currency": confirm.amount.currency.code, "registerUser": registerUser,
        ]
    }

    /// POST /v1/redemptions for `redeem` (a bonus redemption), every term as signed.
    init(redemption redeem: Redeem, value: Int64 = 320, currency: String = "EUR") {
        fields = [
            "redemption": Data(SessionMessage.redeem(redeem).encoded()).base64EncodedString(),
            "redemptionId": redeem.redemptionID.bytes.hexString,
            "sessionId": Int(Int64(bitPattern: redeem.sessionID.rawValue)),
            "walletKey": Data(redeem.walletKey.bytes).base64EncodedString(), "transactionType": "bonus",
            "item": redeem.item, "quantity": Int(redeem.quantity), "value": Int(value), "currency": currency,
        ]
    }

    /// The JSON, with `overrides` replacing fields (nil removes one).
    func json(_ overrides: [String: Any?] = [:]) throws -> String {
        var fields = fields
        for (name, value) in overrides { fields[name] = value }
        return String(
            decoding: try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]), as: UTF8.self)
    }
}

/// An `Authorization` header signing a request with `key`; `nonce` chooses the nonce (to replay one).
func signedAuthorization(
    _ key: P256.Signing.PrivateKey, method: HTTPRequest.Method, path: String, body: String?, time: Int64,
    nonce: String? = nil
) throws -> String {
    let nonce = nonce ?? (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    let bytes = RequestSignature.signedBytes(
        method: method.rawValue, path: path, time: time, nonce: nonce, body: Data((body ?? "").utf8))
    return RequestSignature(
        publicKey: Array(key.publicKey.x963Representation), time: time, nonce: nonce,
        signature: Array(try key.signature(for: bytes).rawRepresentation)
    ).headerValue
}

extension TestClientProtocol {
    /// Sends a request signed by `key` at `time` (the server's clock, unless a test means otherwise).
    func sendSigned(
        _ method: HTTPRequest.Method, _ path: String, json: String? = nil, by key: P256.Signing.PrivateKey,
        time: Int64
    ) async throws -> TestResponse {
        try await send(
            method, path, json: json,
            headers: [.authorization: try signedAuthorization(key, method: method, path: path, body: json, time: time)])
    }
}

/// Every row of every table but `excluding`, as text: two snapshots are equal when nothing in
/// those tables changed (money, accounts, wallets, keys, terminals, transactions, ...).
func tableSnapshot(_ ledger: Ledger, excluding: Set<String>) async throws -> [String: [String]] {
    try await ledger.store.transaction { db in
        var snapshot: [String: [String]] = [:]
        let tables = try await db.query("SELECT name FROM sqlite_master WHERE type = 'table'").map {
            try $0.text("name")
        }
        // Every request counts into its client's rate window, refused or not: bookkeeping, not state.
        for table in tables
        where !excluding.contains(table) && !table.hasPrefix("sqlite_") && table != "request_rate_windows" {
            snapshot[table] = try await db.query("SELECT * FROM \(table)").map { row in
                row.columns.sorted().map { column in
                    let value =
                        (try? row.optionalText(column)).flatMap { $0 }
                        ?? (try? row.optionalInteger(column)).flatMap { $0 }.map { "\($0)" }
                        ?? (try? row.bytes(column)).map { $0.hexString } ?? "null"
                    return "\(column)=\(value)"
                }.joined(separator: "|")
            }.sorted()
        }
        return snapshot
    }
}
