import HorizonCore
import HorizonProtocol

/// A gold membership: a benefit the member may use once per period while it is valid.
public struct GoldMembership: Sendable, Equatable, Codable {
    public let tier: String
    public let validFrom: UnixTime
    public let validUntil: UnixTime
    /// Seconds in one benefit period (a month of 30 days is 2_592_000).
    public let benefitPeriod: Int64
    /// The period whose benefit was last used (periods count from `validFrom`), if any.
    public let lastBenefitPeriod: Int64?
}

/// A coupon issued to a wallet, redeemable once before it expires.
public struct Coupon: Sendable, Equatable, Codable {
    public let code: String
    public let description: String
    public let valueMinorUnits: Int64
    public let expiresAt: UnixTime
    public let redeemedAt: UnixTime?
}

extension SandboxLedger: RedemptionProcessor {
    /// Redeems bonus points, a gold benefit or a coupon, exactly once per redemption id.
    public func redeem(_ request: RedemptionRequest, at time: UnixTime) throws(ProcessorError) -> SettlementResult {
        let record = TransactionRecord(
            id: request.redemptionID, sessionID: request.sessionID, walletKey: request.walletKey,
            terminalKeyID: request.terminalKeyID, transactionType: request.transactionType, item: request.item,
            quantity: request.quantity, amount: request.value, tip: .zero(request.value.currency), registerUser: "",
            contentDigest: request.contentDigest)
        return try executeOnce(
            record, at: time,
            sameTerms: { stored, digest, walletKey in
                digest == request.contentDigest && walletKey == request.walletKey.bytes
                    && stored.transactionType == request.transactionType && stored.sessionID == request.sessionID
                    && stored.item == request.item && stored.quantity == request.quantity
            },
            execute: { (db) throws(DatabaseError) in try self.executeRedemption(request, at: time, in: db) })
    }

    private func executeRedemption(_ request: RedemptionRequest, at time: UnixTime, in db: SQLiteDatabase.Transaction)
        throws(DatabaseError) -> SettlementOutcome
    {
        let key = DatabaseValue.blob(request.walletKey.bytes)
        guard let wallet = try db.query("SELECT bonus_points FROM wallets WHERE wallet_key = ?", [key]).first else {
            return .declined(code: .unknownWallet, reason: "this wallet has no account with the merchant")
        }
        let points = wallet["bonus_points"].integer ?? 0
        switch request.transactionType {
        case .payment:
            return .declined(code: .protocolViolation, reason: "a payment is not a redemption")
        case .bonusRedemption:
            guard request.quantity > 0 else {
                return .declined(code: .invalidAmount, reason: "a bonus redemption must spend at least one point")
            }
            guard points >= request.quantity else {
                return .declined(
                    code: .insufficientPoints,
                    reason: "not enough bonus points: \(request.quantity) needed, \(points) held")
            }
            try db.query(
                "UPDATE wallets SET bonus_points = bonus_points - ? WHERE wallet_key = ?",
                [.integer(request.quantity), key])
            return .approved(reference: 0, bonusPointsEarned: 0, bonusPointsBalance: points - request.quantity)
        case .goldRedemption:
            guard let row = try db.query("SELECT * FROM gold_memberships WHERE wallet_key = ?", [key]).first,
                let from = row["valid_from"].integer, let until = row["valid_until"].integer,
                let period = row["benefit_period"].integer, period > 0
            else { return .declined(code: .notFound, reason: "this wallet has no gold membership") }
            guard time >= from, time <= until else {
                return .declined(code: .expired, reason: "the gold membership is not valid now")
            }
            let current = (time - from) / period
            // Not only the same period: terminals sharing this ledger disagree about the time (and a
            // clock may be set back), so a benefit used in a later period already covers this one.
            if let last = row["last_benefit_period"].integer, current <= last {
                return .declined(code: .alreadyRedeemed, reason: "the gold benefit was already used this period")
            }
            try db.query(
                "UPDATE gold_memberships SET last_benefit_period = ? WHERE wallet_key = ?", [.integer(current), key])
            return .approved(reference: 0, bonusPointsEarned: 0, bonusPointsBalance: points)
        case .couponRedemption:
            guard
                let row = try db.query(
                    "SELECT * FROM coupons WHERE code = ? AND wallet_key = ?", [.text(request.item), key]
                ).first
            else { return .declined(code: .notFound, reason: "this wallet has no coupon \(request.item)") }
            if row["redeemed_at"].integer != nil {
                return .declined(code: .alreadyRedeemed, reason: "coupon \(request.item) was already redeemed")
            }
            guard time <= row["expires_at"].integer ?? 0 else {
                return .declined(code: .expired, reason: "coupon \(request.item) has expired")
            }
            try db.query(
                "UPDATE coupons SET redeemed_at = ?, redemption_id = ? WHERE code = ? AND redeemed_at IS NULL",
                [.integer(time), .blob(request.redemptionID.bytes), .text(request.item)])
            return .approved(reference: 0, bonusPointsEarned: 0, bonusPointsBalance: points)
        }
    }

    // MARK: Programs (set up by the merchant)

    /// Adds (or removes, with a negative number) bonus points, enrolling the wallet with a zero
    /// balance if needed. Points never go below zero.
    public func addBonusPoints(_ points: Int64, for walletKey: PublicKeyBytes, at time: UnixTime = 0)
        throws(DatabaseError)
    {
        try database.transaction { (db) throws(DatabaseError) in
            try db.query(
                "INSERT OR IGNORE INTO wallets(wallet_key, currency, balance, bonus_points, enrolled_at) VALUES (?, ?, 0, 0, ?)",
                [.blob(walletKey.bytes), .text(configuration.currency.code), .integer(time)])
            try db.query(
                "UPDATE wallets SET bonus_points = MAX(0, bonus_points + ?) WHERE wallet_key = ?",
                [.integer(points), .blob(walletKey.bytes)])
        }
    }

    /// Grants (or replaces) a gold membership.
    public func grantGoldMembership(
        to walletKey: PublicKeyBytes, tier: String, validFrom: UnixTime, validUntil: UnixTime,
        benefitPeriod: Int64 = 30 * 86_400
    ) throws(DatabaseError) {
        guard validUntil >= validFrom, benefitPeriod > 0 else {
            throw DatabaseError(
                code: -1, message: "a membership needs a valid period and a positive benefit period",
                context: "gold membership")
        }
        try database.transaction { (db) throws(DatabaseError) in
            try db.query(
                "INSERT OR IGNORE INTO wallets(wallet_key, currency, balance, bonus_points, enrolled_at) VALUES (?, ?, 0, 0, ?)",
                [.blob(walletKey.bytes), .text(configuration.currency.code), .integer(validFrom)])
            try db.query(
                """
                INSERT OR REPLACE INTO gold_memberships(wallet_key, tier, valid_from, valid_until, benefit_period,
                    last_benefit_period) VALUES (?, ?, ?, ?, ?, NULL)
                """,
                [
                    .blob(walletKey.bytes), .text(tier), .integer(validFrom), .integer(validUntil),
                    .integer(benefitPeriod),
                ])
        }
    }

    /// Issues a coupon to a wallet. Codes are unique.
    public func issueCoupon(
        code: String, to walletKey: PublicKeyBytes, description: String, value: Money, expiresAt: UnixTime,
        at time: UnixTime = 0
    ) throws(DatabaseError) {
        guard !code.isEmpty, code.utf8.count <= MessageLimits.shortText else {
            throw DatabaseError(code: -1, message: "a coupon code must be 1 to 64 bytes", context: "coupon")
        }
        try database.transaction { (db) throws(DatabaseError) in
            try db.query(
                "INSERT OR IGNORE INTO wallets(wallet_key, currency, balance, bonus_points, enrolled_at) VALUES (?, ?, 0, 0, ?)",
                [.blob(walletKey.bytes), .text(configuration.currency.code), .integer(time)])
            try db.query(
                "INSERT INTO coupons(code, wallet_key, description, value, expires_at) VALUES (?, ?, ?, ?, ?)",
                [
                    .text(code), .blob(walletKey.bytes), .text(description), .integer(value.minorUnits),
                    .integer(expiresAt),
                ])
        }
    }

    public func goldMembership(for walletKey: PublicKeyBytes) throws(DatabaseError) -> GoldMembership? {
        try database.query("SELECT * FROM gold_memberships WHERE wallet_key = ?", [.blob(walletKey.bytes)]).first.map {
            GoldMembership(
                tier: $0["tier"].text ?? "", validFrom: $0["valid_from"].integer ?? 0,
                validUntil: $0["valid_until"].integer ?? 0, benefitPeriod: $0["benefit_period"].integer ?? 1,
                lastBenefitPeriod: $0["last_benefit_period"].integer)
        }
    }

    public func coupons(for walletKey: PublicKeyBytes) throws(DatabaseError) -> [Coupon] {
        try database.query("SELECT * FROM coupons WHERE wallet_key = ? ORDER BY code", [.blob(walletKey.bytes)]).map {
            Coupon(
                code: $0["code"].text ?? "", description: $0["description"].text ?? "",
                valueMinorUnits: $0["value"].integer ?? 0, expiresAt: $0["expires_at"].integer ?? 0,
                redeemedAt: $0["redeemed_at"].integer)
        }
    }

    /// The loyalty programs this merchant runs, as offers advertise them: bonus points when the
    /// rule earns any, gold and coupons once any were granted.
    public func merchantPrograms() throws(DatabaseError) -> MerchantPrograms {
        let gold = try database.query("SELECT COUNT(*) AS n FROM gold_memberships").first?["n"].integer ?? 0
        let coupons = try database.query("SELECT COUNT(*) AS n FROM coupons").first?["n"].integer ?? 0
        return MerchantPrograms(
            hasBonusProgram: configuration.bonusPointsPerMajorUnit > 0, hasGoldProgram: gold > 0,
            hasCouponProgram: coupons > 0)
    }
}
