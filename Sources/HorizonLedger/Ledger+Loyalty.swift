import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// A gold membership at one merchant: a benefit the member may use once per period while valid.
public struct Membership: Sendable, Equatable, Codable {
    public let tier: String
    public let validFrom: UnixTime
    public let validUntil: UnixTime
    /// Seconds in one benefit period (a month of 30 days is 2_592_000).
    public let benefitPeriod: Int64
    /// The period whose benefit was last used (periods count from `validFrom`), if any.
    public let lastBenefitPeriod: Int64?
}

/// A coupon a merchant issued to a wallet, redeemable once before it expires.
public struct IssuedCoupon: Sendable, Equatable {
    public let code: String
    public let description: String
    public let value: Money
    public let expiresAt: UnixTime
    public let redeemedAt: UnixTime?
}

/// The loyalty rules, per merchant (they were the old sandbox ledger's, before HorizonLedger):
/// the same outcomes and decline codes.
extension Ledger {
    // MARK: The redemption rule

    static func executeRedemption(
        _ request: RedemptionRequest, at merchant: Merchant, time: UnixTime, in db: any SQLTransaction
    ) async throws(LedgerError) -> Execution {
        func approve(_ points: Int64, _ wallet: WalletID) -> Execution {
            Execution(
                outcome: .approved(reference: 0, bonusPointsEarned: 0, bonusPointsBalance: points), walletID: wallet,
                entryID: nil)
        }
        guard let wallet = try await activeWalletID(for: request.walletKey, in: db) else {
            return .declined(.unknownWallet, "this wallet has no account with the merchant")
        }
        let points = try await bonusPoints(wallet, merchant.id, in: db)
        let scope: [SQLValue] = [.text(merchant.id.rawValue), .text(wallet.rawValue)]
        switch request.transactionType {
        case .payment:
            return .declined(.protocolViolation, "a payment is not a redemption", wallet: wallet)
        case .bonusRedemption:
            guard request.quantity > 0 else {
                return .declined(.invalidAmount, "a bonus redemption must spend at least one point", wallet: wallet)
            }
            guard points >= request.quantity else {
                return .declined(
                    .insufficientPoints, "not enough bonus points: \(request.quantity) needed, \(points) held",
                    wallet: wallet)
            }
            try await setBonusPoints(points - request.quantity, wallet, merchant.id, in: db)
            return approve(points - request.quantity, wallet)
        case .goldRedemption:
            guard
                let row = try await db.query(
                    "SELECT * FROM gold_memberships WHERE merchant_id = ? AND wallet_id = ?", scope
                ).first
            else { return .declined(.notFound, "this wallet has no gold membership", wallet: wallet) }
            let membership = try decodeMembership(row)
            guard time >= membership.validFrom, time <= membership.validUntil else {
                return .declined(.expired, "the gold membership is not valid now", wallet: wallet)
            }
            let current = (time - membership.validFrom) / membership.benefitPeriod
            // Not only the same period: terminals sharing this ledger disagree about the time (and a
            // clock may be set back), so a benefit used in a later period already covers this one.
            if let last = membership.lastBenefitPeriod, current <= last {
                return .declined(.alreadyRedeemed, "the gold benefit was already used this period", wallet: wallet)
            }
            try await db.query(
                "UPDATE gold_memberships SET last_benefit_period = ? WHERE merchant_id = ? AND wallet_id = ?",
                [.integer(current)] + scope)
            return approve(points, wallet)
        case .couponRedemption:
            guard
                let row = try await db.query(
                    "SELECT * FROM coupons WHERE merchant_id = ? AND code = ? AND wallet_id = ?",
                    [.text(merchant.id.rawValue), .text(request.item), .text(wallet.rawValue)]
                ).first
            else { return .declined(.notFound, "this wallet has no coupon \(request.item)", wallet: wallet) }
            let coupon = try decodeCoupon(row, merchant.currency)
            if coupon.redeemedAt != nil {
                return .declined(.alreadyRedeemed, "coupon \(request.item) was already redeemed", wallet: wallet)
            }
            guard time <= coupon.expiresAt else {
                return .declined(.expired, "coupon \(request.item) has expired", wallet: wallet)
            }
            try await db.query(
                """
                UPDATE coupons SET redeemed_at = ?, redemption_id = ?
                WHERE merchant_id = ? AND code = ? AND redeemed_at IS NULL
                """,
                [.integer(time), .blob(request.redemptionID.bytes), .text(merchant.id.rawValue), .text(request.item)])
            return approve(points, wallet)
        }
    }

    static func bonusPoints(_ wallet: WalletID, _ merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError) -> Int64
    {
        try await db.query(
            "SELECT points FROM bonus_points WHERE merchant_id = ? AND wallet_id = ?",
            [.text(merchant.rawValue), .text(wallet.rawValue)]
        ).first?.integer("points") ?? 0
    }

    static func setBonusPoints(_ points: Int64, _ wallet: WalletID, _ merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError)
    {
        try await db.query(
            """
            INSERT INTO bonus_points(merchant_id, wallet_id, points) VALUES (?, ?, ?)
            ON CONFLICT (merchant_id, wallet_id) DO UPDATE SET points = excluded.points
            """, [.text(merchant.rawValue), .text(wallet.rawValue), .integer(points)])
    }

    /// Adds `earned` points (saturating at `Money.maximumMinorUnits`) and returns the new sum.
    /// The upsert adds to the stored value rather than writing back one read before: in a
    /// `.rowLocking` payment another transaction may change the row meanwhile, and the upsert
    /// waits for it and adds to what it left (the row is then this transaction's until it
    /// ends, so the sum read after it is this one's). On PostgreSQL the upsert returns the sum
    /// (`RETURNING`, one round trip less); SQLite reads it after, because it builds a temporary
    /// table for `RETURNING`, which cost the terminal's in-process ledger more than the read.
    static func earnBonusPoints(_ earned: Int64, _ wallet: WalletID, _ merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError) -> Int64
    {
        let maximum = SQLValue.integer(Money.maximumMinorUnits)
        let upsert = """
            INSERT INTO bonus_points(merchant_id, wallet_id, points) VALUES (?, ?, ?)
            ON CONFLICT (merchant_id, wallet_id) DO UPDATE SET points = CASE
                WHEN bonus_points.points > ? - excluded.points THEN ?
                ELSE bonus_points.points + excluded.points END
            """
        let parameters: [SQLValue] = [
            .text(merchant.rawValue), .text(wallet.rawValue), .integer(earned), maximum, maximum,
        ]
        switch db.dialect {
        case .postgres:
            guard let row = try await db.query(upsert + "\nRETURNING points", parameters).first else {
                throw .database("the bonus points upsert returned no row")
            }
            return try row.integer("points")
        case .sqlite:
            try await db.query(upsert, parameters)
            return try await bonusPoints(wallet, merchant, in: db)
        }
    }

    static func decodeMembership(_ row: SQLRow) throws(LedgerError) -> Membership {
        let period = try row.integer("benefit_period")
        guard period > 0 else { throw .corruptRow(column: "benefit_period", reason: "\(period) is not positive") }
        return Membership(
            tier: try row.text("tier"), validFrom: try row.integer("valid_from"),
            validUntil: try row.integer("valid_until"), benefitPeriod: period,
            lastBenefitPeriod: try row.optionalInteger("last_benefit_period"))
    }

    static func decodeCoupon(_ row: SQLRow, _ currency: Currency) throws(LedgerError) -> IssuedCoupon {
        IssuedCoupon(
            code: try row.text("code"), description: try row.text("description"),
            value: try money(row.integer("value"), currency, column: "value"), expiresAt: try row.integer("expires_at"),
            redeemedAt: try row.optionalInteger("redeemed_at"))
    }

    // MARK: Programs (set up by the merchant)

    /// How many bonus points a payment earns per whole currency unit of its amount (0 to 10^6;
    /// 0 ends the bonus program for new payments).
    public func setBonusRule(pointsPerMajorUnit: Int64, for merchant: MerchantID) async throws(LedgerError) {
        guard (0...1_000_000).contains(pointsPerMajorUnit) else {
            throw .invalidArgument("bonus points per unit must be 0 to 1000000")
        }
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            try await db.query(
                "UPDATE merchants SET bonus_points_per_major_unit = ? WHERE id = ?",
                [.integer(pointsPerMajorUnit), .text(merchant.rawValue)])
        }
    }

    /// Sets the IANA time zone (such as Europe/Berlin) the merchant's days are counted in. The
    /// ledger checks the name's shape; whether the zone exists is the caller's to check (it
    /// depends on the time zone database of the machine that shows the days).
    public func setTimeZone(_ identifier: String, for merchant: MerchantID) async throws(LedgerError) {
        guard (1...64).contains(identifier.utf8.count),
            identifier.utf8.allSatisfy({
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
                    || "/_+-".utf8.contains($0)
            })
        else { throw .invalidArgument("a time zone is an IANA name such as Europe/Berlin") }
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            try await db.query(
                "UPDATE merchants SET time_zone = ? WHERE id = ?", [.text(identifier), .text(merchant.rawValue)])
        }
    }

    /// Adds (or removes, with a negative number) bonus points. Points never go below zero.
    public func addBonusPoints(_ points: Int64, to wallet: WalletID, at merchant: MerchantID) async throws(LedgerError)
    {
        guard abs(points) <= Money.maximumMinorUnits else { throw .invalidArgument("at most 10^15 points at once") }
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            _ = try await Self.wallet(wallet, in: db)
            let held = try await Self.bonusPoints(wallet, merchant, in: db)
            try await Self.setBonusPoints(
                min(max(0, held + points), Money.maximumMinorUnits), wallet, merchant, in: db)
        }
    }

    /// A wallet's bonus points at a merchant (zero if it never earned any).
    public func bonusPoints(of wallet: WalletID, at merchant: MerchantID) async throws(LedgerError) -> Int64 {
        try await store.transaction { db in try await Self.bonusPoints(wallet, merchant, in: db) }
    }

    /// Grants (or replaces) a gold membership.
    public func grantGoldMembership(
        to wallet: WalletID, at merchant: MerchantID, tier: String, validFrom: UnixTime, validUntil: UnixTime,
        benefitPeriod: Int64 = 30 * 86_400
    ) async throws(LedgerError) {
        guard validUntil >= validFrom, benefitPeriod > 0 else {
            throw .invalidArgument("a membership needs a valid period and a positive benefit period")
        }
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            _ = try await Self.wallet(wallet, in: db)
            try await db.query(
                """
                INSERT INTO gold_memberships(merchant_id, wallet_id, tier, valid_from, valid_until, benefit_period,
                    last_benefit_period) VALUES (?, ?, ?, ?, ?, ?, NULL)
                ON CONFLICT (merchant_id, wallet_id) DO UPDATE SET tier = excluded.tier,
                    valid_from = excluded.valid_from, valid_until = excluded.valid_until,
                    benefit_period = excluded.benefit_period, last_benefit_period = NULL
                """,
                [
                    .text(merchant.rawValue), .text(wallet.rawValue), .text(tier), .integer(validFrom),
                    .integer(validUntil), .integer(benefitPeriod),
                ])
        }
    }

    public func goldMembership(of wallet: WalletID, at merchant: MerchantID) async throws(LedgerError) -> Membership? {
        try await store.transaction { db in
            try await db.query(
                "SELECT * FROM gold_memberships WHERE merchant_id = ? AND wallet_id = ?",
                [.text(merchant.rawValue), .text(wallet.rawValue)]
            ).first.map { row throws(LedgerError) in try Self.decodeMembership(row) }
        }
    }

    /// Issues a coupon worth `value` (in the merchant's currency). Codes are unique per merchant.
    public func issueCoupon(
        code: String, to wallet: WalletID, at merchant: MerchantID, description: String, value: Money,
        expiresAt: UnixTime
    ) async throws(LedgerError) {
        guard !code.isEmpty, code.utf8.count <= MessageLimits.shortText else {
            throw .invalidArgument("a coupon code must be 1 to \(MessageLimits.shortText) bytes")
        }
        try await store.transaction { db in
            let found = try await Self.merchant(merchant, in: db)
            guard value.currency == found.currency else {
                throw LedgerError.invalidArgument(
                    "a coupon of merchant \(merchant) is worth \(found.currency.code), not \(value.currency.code)")
            }
            _ = try await Self.wallet(wallet, in: db)
            let inserted = try await db.query(
                """
                INSERT INTO coupons(merchant_id, code, wallet_id, description, value, expires_at)
                VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (merchant_id, code) DO NOTHING RETURNING code
                """,
                [
                    .text(merchant.rawValue), .text(code), .text(wallet.rawValue), .text(description),
                    .integer(value.minorUnits), .integer(expiresAt),
                ])
            if inserted.isEmpty { throw LedgerError.alreadyExists("coupon \(code) of merchant \(merchant)") }
        }
    }

    /// A wallet's coupons at a merchant, by code.
    public func coupons(of wallet: WalletID, at merchant: MerchantID) async throws(LedgerError) -> [IssuedCoupon] {
        try await store.transaction { db in
            let found = try await Self.merchant(merchant, in: db)
            var coupons: [IssuedCoupon] = []
            for row in try await db.query(
                "SELECT * FROM coupons WHERE merchant_id = ? AND wallet_id = ? ORDER BY code",
                [.text(merchant.rawValue), .text(wallet.rawValue)])
            {
                coupons.append(try Self.decodeCoupon(row, found.currency))
            }
            return coupons
        }
    }

    /// The loyalty programs a merchant runs, as offers advertise them: bonus points when the
    /// rule earns any, gold and coupons once any were granted.
    public func programs(of merchant: MerchantID) async throws(LedgerError) -> MerchantPrograms {
        try await store.transaction { db in
            let found = try await Self.merchant(merchant, in: db)
            let scope: [SQLValue] = [.text(merchant.rawValue)]
            let gold =
                try await db.query(
                    "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM gold_memberships WHERE merchant_id = ?", scope
                ).first?.integer("n") ?? 0
            let coupons =
                try await db.query(
                    "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM coupons WHERE merchant_id = ?", scope
                ).first?.integer("n") ?? 0
            return MerchantPrograms(
                hasBonusProgram: found.bonusPointsPerMajorUnit > 0, hasGoldProgram: gold > 0,
                hasCouponProgram: coupons > 0)
        }
    }
}
