import HorizonCore
import HorizonProtocol

/// A signed-in merchant dashboard browser, as the database keeps it (the token itself is not kept).
public struct DashboardSession: Sendable, Equatable {
    public let merchantID: MerchantID
    /// The secret every form of this session carries; a POST without it is refused.
    public let csrfSecret: String
    public let createdAt: UnixTime
    public let expiresAt: UnixTime
}

/// A gold membership with the wallet that holds it, for the merchant's list.
public struct MemberRecord: Sendable, Equatable {
    public let walletID: WalletID
    public let walletName: String
    public let membership: Membership
}

/// A coupon with the wallet it was issued to, for the merchant's list.
public struct CouponRecord: Sendable, Equatable {
    public let walletID: WalletID
    public let walletName: String
    public let coupon: IssuedCoupon
}

// MARK: Dashboard sessions

extension Ledger {
    /// Stores a new session for `merchant`; the caller keeps the token and gives only its hash.
    /// Expired sessions of any merchant are deleted on the way, so the table does not grow.
    public func createDashboardSession(
        tokenHash: [UInt8], merchant: MerchantID, csrfSecret: String, at time: UnixTime, expiresAt: UnixTime
    ) async throws(LedgerError) {
        guard tokenHash.count == 32 else { throw .invalidArgument("a session token hash is 32 bytes (SHA-256)") }
        guard expiresAt > time else { throw .invalidArgument("a session must expire after it starts") }
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            try await db.query("DELETE FROM dashboard_sessions WHERE expires_at <= ?", [.integer(time)])
            try await db.query(
                """
                INSERT INTO dashboard_sessions(token_hash, merchant_id, csrf_secret, created_at, expires_at)
                VALUES (?, ?, ?, ?, ?)
                """,
                [
                    .blob(tokenHash), .text(merchant.rawValue), .text(csrfSecret), .integer(time),
                    .integer(expiresAt),
                ])
        }
    }

    /// The unexpired session whose token hashes to `tokenHash`, or nil.
    public func dashboardSession(tokenHash: [UInt8], at time: UnixTime) async throws(LedgerError) -> DashboardSession? {
        try await store.transaction { db in
            guard
                let row = try await db.query(
                    "SELECT * FROM dashboard_sessions WHERE token_hash = ? AND expires_at > ?",
                    [.blob(tokenHash), .integer(time)]
                ).first
            else { return nil }
            return DashboardSession(
                merchantID: MerchantID(rawValue: try row.text("merchant_id")), csrfSecret: try row.text("csrf_secret"),
                createdAt: try row.integer("created_at"), expiresAt: try row.integer("expires_at"))
        }
    }

    /// Ends a session (sign-out); false when there was none.
    @discardableResult
    public func deleteDashboardSession(tokenHash: [UInt8]) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            !(try await db.query(
                "DELETE FROM dashboard_sessions WHERE token_hash = ? RETURNING merchant_id", [.blob(tokenHash)]
            ).isEmpty)
        }
    }

    /// How many unexpired sessions a merchant has (for tests and audits).
    public func dashboardSessionCount(of merchant: MerchantID, at time: UnixTime) async throws(LedgerError) -> Int {
        try await store.transaction { db in
            let row = try await db.query(
                "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM dashboard_sessions WHERE merchant_id = ? AND expires_at > ?",
                [.text(merchant.rawValue), .integer(time)]
            ).first
            return Int(try row?.integer("n") ?? 0)
        }
    }

    /// Records one sign-in attempt under each key and returns, per key, the attempts within the
    /// last `window` seconds including this one. Attempts older than the window are deleted.
    /// In the database, so every server process counts the same attempts.
    public func recordSignInAttempt(keys: [String], window: Int64, at time: UnixTime) async throws(LedgerError)
        -> [String: Int]
    {
        guard window > 0 else { throw .invalidArgument("the sign-in window must be positive") }
        return try await store.transaction { db in
            try await db.query(
                "DELETE FROM dashboard_sign_in_attempts WHERE attempted_at <= ?", [.integer(time - window)])
            var counts: [String: Int] = [:]
            for key in keys {
                try await db.query(
                    "INSERT INTO dashboard_sign_in_attempts(attempt_key, attempted_at) VALUES (?, ?)",
                    [.text(key), .integer(time)])
                let row = try await db.query(
                    """
                    SELECT CAST(COUNT(*) AS BIGINT) AS n FROM dashboard_sign_in_attempts
                    WHERE attempt_key = ? AND attempted_at > ?
                    """, [.text(key), .integer(time - window)]
                ).first
                counts[key] = Int(try row?.integer("n") ?? 0)
            }
            return counts
        }
    }
}

// MARK: What the dashboard lists

extension Ledger {
    /// One transaction of `merchant` by its reference; nil when it is not this merchant's.
    public func transaction(reference: Int64, of merchant: MerchantID) async throws(LedgerError) -> LedgerTransaction? {
        try await store.transaction { db in
            try await db.query(
                "SELECT * FROM transactions WHERE reference = ? AND merchant_id = ?",
                [.integer(reference), .text(merchant.rawValue)]
            ).first.map { row throws(LedgerError) in try Self.decodeTransaction(row).transaction }
        }
    }

    /// Every gold membership a merchant granted, by wallet name.
    public func goldMemberships(of merchant: MerchantID) async throws(LedgerError) -> [MemberRecord] {
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            var members: [MemberRecord] = []
            for row in try await db.query(
                """
                SELECT g.*, w.name AS wallet_name FROM gold_memberships g JOIN wallets w ON w.id = g.wallet_id
                WHERE g.merchant_id = ? ORDER BY w.name, g.wallet_id
                """, [.text(merchant.rawValue)])
            {
                members.append(
                    MemberRecord(
                        walletID: WalletID(rawValue: try row.text("wallet_id")),
                        walletName: try row.text("wallet_name"), membership: try Self.decodeMembership(row)))
            }
            return members
        }
    }

    /// Every coupon a merchant issued, by code.
    public func coupons(of merchant: MerchantID) async throws(LedgerError) -> [CouponRecord] {
        try await store.transaction { db in
            let found = try await Self.merchant(merchant, in: db)
            var coupons: [CouponRecord] = []
            for row in try await db.query(
                """
                SELECT c.*, w.name AS wallet_name FROM coupons c JOIN wallets w ON w.id = c.wallet_id
                WHERE c.merchant_id = ? ORDER BY c.code
                """, [.text(merchant.rawValue)])
            {
                coupons.append(
                    CouponRecord(
                        walletID: WalletID(rawValue: try row.text("wallet_id")),
                        walletName: try row.text("wallet_name"), coupon: try Self.decodeCoupon(row, found.currency)))
            }
            return coupons
        }
    }
}
