import Foundation
import HorizonCore
import HorizonProtocol

/// A daily token as the ledger keeps it. The ledger does not read the signed
/// bytes (the server signs and the secure channel's `DailyToken` decodes them); it keeps what
/// later rules need: whose token, how much, until when.
public struct DailyTokenRecord: Sendable, Equatable {
    public let tokenID: [UInt8]
    public let walletID: WalletID
    /// The wallet key the token names: a wallet restored on another device gets a new token.
    public let walletKey: PublicKeyBytes
    public let allowance: Money
    /// The wallet's balance in the token's currency when it was signed.
    public let balanceAtIssue: Int64
    /// The revocation data's digest when it was signed.
    public let revocationDigest: [UInt8]
    public let issuedAt: UnixTime
    public let expiresAt: UnixTime
    /// The signed token as it was handed out.
    public let token: [UInt8]
    /// When a newer token for the same key and currency replaced it (nil for the current one).
    /// A superseded token stays valid offline until it expires.
    public let supersededAt: UnixTime?

    public init(
        tokenID: [UInt8], walletID: WalletID, walletKey: PublicKeyBytes, allowance: Money, balanceAtIssue: Int64,
        revocationDigest: [UInt8], issuedAt: UnixTime, expiresAt: UnixTime, token: [UInt8],
        supersededAt: UnixTime? = nil
    ) {
        self.tokenID = tokenID
        self.walletID = walletID
        self.walletKey = walletKey
        self.allowance = allowance
        self.balanceAtIssue = balanceAtIssue
        self.revocationDigest = revocationDigest
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.token = token
        self.supersededAt = supersededAt
    }
}

extension Ledger {
    /// The newest token of `wallet` for `key` in `currency` still valid at `time`, if any.
    public func currentDailyToken(of wallet: WalletID, key: PublicKeyBytes, currency: Currency, at time: UnixTime)
        async throws(LedgerError) -> DailyTokenRecord?
    {
        try await store.transaction { db in
            try await Self.dailyTokens(
                where: "wallet_id = ? AND wallet_key = ? AND currency = ? AND expires_at > ? AND superseded_at IS NULL",
                [.text(wallet.rawValue), .blob(key.bytes), .text(currency.code), .integer(time)], in: db
            )
            .first
        }
    }

    /// Every token of `wallet` valid at some moment of [from, to), newest first: what the wallet
    /// could have spent offline in that period.
    public func dailyTokens(of wallet: WalletID, validBetween from: UnixTime, and to: UnixTime)
        async throws(LedgerError) -> [DailyTokenRecord]
    {
        try await store.transaction { db in
            try await Self.dailyTokens(
                where: "wallet_id = ? AND expires_at > ? AND issued_at < ?",
                [.text(wallet.rawValue), .integer(from), .integer(to)], in: db)
        }
    }

    /// Records a token the server signed for `record.walletID`, whose key must be one of the
    /// wallet's active keys.
    public func recordDailyToken(_ record: DailyTokenRecord) async throws(LedgerError) {
        guard record.tokenID.count == 16 else { throw .invalidArgument("a token id is 16 bytes") }
        guard record.expiresAt > record.issuedAt, record.expiresAt - record.issuedAt <= 86_400 else {
            throw .invalidArgument("a daily token is valid for at most 24 h")
        }
        try await store.transaction { db in
            _ = try await Self.wallet(record.walletID, in: db)
            guard try await Self.activeWalletID(for: record.walletKey, in: db) == record.walletID else {
                throw LedgerError.invalidArgument("the token's key is not an active key of wallet \(record.walletID)")
            }
            // The token handed out from now on; the older ones stay valid until they expire.
            try await db.query(
                """
                UPDATE daily_tokens SET superseded_at = ?
                WHERE wallet_id = ? AND wallet_key = ? AND currency = ? AND superseded_at IS NULL
                """,
                [
                    .integer(record.issuedAt), .text(record.walletID.rawValue), .blob(record.walletKey.bytes),
                    .text(record.allowance.currency.code),
                ])
            try await db.query(
                """
                INSERT INTO daily_tokens(token_id, wallet_id, wallet_key, currency, allowance, balance_at_issue,
                    revocation_digest, issued_at, expires_at, token)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .blob(record.tokenID), .text(record.walletID.rawValue), .blob(record.walletKey.bytes),
                    .text(record.allowance.currency.code), .integer(record.allowance.minorUnits),
                    .integer(record.balanceAtIssue), .blob(record.revocationDigest), .integer(record.issuedAt),
                    .integer(record.expiresAt), .blob(record.token),
                ])
        }
    }

    static func dailyTokens(where condition: String, _ parameters: [SQLValue], in db: any SQLTransaction)
        async throws(LedgerError) -> [DailyTokenRecord]
    {
        var records: [DailyTokenRecord] = []
        for row in try await db.query(
            """
            SELECT * FROM daily_tokens WHERE \(condition)
            ORDER BY issued_at DESC, CASE WHEN superseded_at IS NULL THEN 0 ELSE 1 END, token_id
            """, parameters)
        {
            let key: PublicKeyBytes
            do { key = try PublicKeyBytes(bytes: try row.bytes("wallet_key")) } catch let error as LedgerError {
                throw error
            } catch {
                throw .corruptRow(column: "daily_tokens.wallet_key", reason: "not an uncompressed P-256 public key")
            }
            let currency = try Self.currency(row.text("currency"), column: "daily_tokens.currency")
            records.append(
                DailyTokenRecord(
                    tokenID: try row.bytes("token_id"), walletID: WalletID(rawValue: try row.text("wallet_id")),
                    walletKey: key,
                    allowance: try Self.money(row.integer("allowance"), currency, column: "daily_tokens.allowance"),
                    balanceAtIssue: try row.integer("balance_at_issue"),
                    revocationDigest: try row.bytes("revocation_digest"), issuedAt: try row.integer("issued_at"),
                    expiresAt: try row.integer("expires_at"), token: try row.bytes("token"),
                    supersededAt: try row.optionalInteger("superseded_at")))
        }
        return records
    }
}
