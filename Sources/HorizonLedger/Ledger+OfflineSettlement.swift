import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores

/// A payment a terminal accepted while it could not reach the server, as it
/// forwards it later: the payment the wallet signed, the daily token the wallet presented, and
/// when the terminal accepted it.
public struct OfflineSettlementRequest: Sendable, Equatable {
    public let payment: SettlementRequest
    /// The id of a daily token the server issued (`recordDailyToken`).
    public let tokenID: [UInt8]
    /// When the terminal accepted the payment, by its own clock.
    public let acceptedAt: UnixTime

    public init(payment: SettlementRequest, tokenID: [UInt8], acceptedAt: UnixTime) {
        self.payment = payment
        self.tokenID = tokenID
        self.acceptedAt = acceptedAt
    }
}

/// Offline settlement, exactly once per payment id like
/// online payments, and bounded by the wallet's daily tokens.
///
/// The policy for what a wallet spends offline beyond its allowance (a wallet can spend its whole
/// allowance at each of several terminals that cannot see each other):
///
/// - **The guarantee.** The server guarantees merchants the wallet's offline payments up to one
///   allowance, in two ways at once. Per period: the approved offline payments under all the
///   wallet's tokens valid at a payment's `acceptedAt` (two are valid at once after a refresh)
///   may total at most the largest allowance among those tokens, never their sum. Per wallet:
///   the offline debt the wallet owes, what is already outstanding and what this payment would
///   add, is at most that allowance too, over all its tokens, terminals and merchants, so
///   payments held back and forwarded from several token periods cannot add up to more than one
///   allowance beyond the balance. Payments count in the order they arrive.
/// - **Within it**, a payment settles even if the wallet's balance no longer covers it: the
///   shortfall is posted to the wallet's offline debt account. A debt makes the allowance of the
///   wallet's new tokens 0 and declines its online payments until a top-up has repaid it (`fund`
///   repays debts first).
/// - **Beyond it**, a payment settles only if the wallet's balance (less any debt) covers it, as
///   an online payment; otherwise it is declined with `offlineAllowanceExceeded`: the merchant is
///   not paid, and the decline is stored and listed with the merchant's transactions.
/// - **A revoked key.** A payment accepted at or after the moment the signing key was revoked
///   (a restoration on another device revokes the lost device's key) is declined with
///   `unknownWallet`: the restored account is not charged, and the merchant who accepted it is
///   not paid, as for any payment beyond the guarantee. A payment accepted before the
///   revocation is the wallet's, within the rules above.
///
/// Bonus points are earned as for online payments. A partial guarantee is never used: a payment
/// fits the guarantee whole, or is paid by the balance whole.
extension Ledger {
    /// How far a terminal's clock may be ahead of the server's when it dates an acceptance, as
    /// `DailyToken.clockSkew`: a payment accepted this long before its token's issue is within it.
    public static let offlineClockSkew: Int64 = 300

    /// The daily token the server recorded with this id, if any.
    public func dailyToken(id: [UInt8]) async throws(LedgerError) -> DailyTokenRecord? {
        try await store.transaction { db in
            try await Self.dailyTokens(where: "token_id = ?", [.blob(id)], in: db).first
        }
    }

    /// Settles a payment accepted offline at `merchant`, once per payment id: a payment settled
    /// before (online or offline) gets its stored result; the same id with other terms is a
    /// `conflictingRetry`. The caller has checked the token's signature and the wallet's; the
    /// ledger checks the token against what it recorded.
    public func settleOffline(_ request: OfflineSettlementRequest, merchant: MerchantID, at time: UnixTime = now())
        async throws(LedgerError) -> SettlementResult
    {
        let payment = request.payment
        var record = Record(payment: payment)
        record.offlineTokenID = request.tokenID
        record.offlineAcceptedAt = request.acceptedAt
        return try await executeOnce(
            record, merchant: merchant, at: time, sameTerms: { stored in Self.isSamePayment(stored, payment) },
            execute: { (merchant, db) throws(LedgerError) in
                try await Self.executeOfflinePayment(request, at: merchant, time: time, in: db)
            })
    }

    /// Decides an offline payment's outcome by the policy above and moves the money, inside the
    /// caller's transaction.
    static func executeOfflinePayment(
        _ request: OfflineSettlementRequest, at merchant: Merchant, time: UnixTime, in db: any SQLTransaction
    ) async throws(LedgerError) -> Execution {
        let payment = request.payment
        let total: Money
        switch checkTerms(payment, at: merchant) {
        case .declined(let execution): return execution
        case .total(let checked): total = checked
        }
        let token = try await offlineToken(for: request, total: total, in: db)
        // The token names the wallet. Its key may have been revoked since (a restored phone): what
        // was accepted before the revocation is the wallet's; what was accepted after it was
        // signed by a device the person gave up, and is not charged to the restored account.
        let walletID = token.walletID
        let currency = merchant.currency
        if let revokedAt = try await keyRevocationTime(payment.walletKey, in: db), request.acceptedAt >= revokedAt {
            return .declined(
                .unknownWallet,
                "this wallet key was revoked at \(revokedAt), before the payment was accepted offline at "
                    + "\(request.acceptedAt); the wallet is not charged and the merchant is not paid for it",
                wallet: walletID)
        }

        let tokens = try await dailyTokens(
            where: "wallet_id = ? AND currency = ? AND issued_at <= ? AND expires_at > ?",
            [
                .text(walletID.rawValue), .text(currency.code), .integer(request.acceptedAt + offlineClockSkew),
                .integer(request.acceptedAt),
            ], in: db)
        let guarantee = tokens.map(\.allowance.minorUnits).max() ?? 0
        // What the approved offline payments under these tokens already used of the guarantee
        // (the payment's own token is among them, so the list is never empty).
        var used: Int64 = 0
        if !tokens.isEmpty {
            let placeholders = Array(repeating: "?", count: tokens.count).joined(separator: ", ")
            used =
                try await db.query(
                    """
                    SELECT CAST(COALESCE(SUM(amount + tip), 0) AS BIGINT) AS used FROM transactions
                    WHERE outcome = 'approved' AND offline_token_id IN (\(placeholders))
                    """, tokens.map { .blob($0.tokenID) }
                ).first?.integer("used") ?? 0
        }
        let wallet = try await account(.wallet, owner: walletID.rawValue, currency, in: db)
        let owed = try await offlineDebt(of: walletID, currency, in: db)
        // What the balance holds pays first; the server fronts the rest as the wallet's debt, which
        // with what the wallet owes already stays within the one allowance it guarantees.
        let fromWallet = min(max(wallet.balance, 0), total.minorUnits)
        let shortfall = total.minorUnits - fromWallet
        let withinPeriod = used + total.minorUnits <= guarantee
        let withinDebt = owed.minorUnits + shortfall <= guarantee
        let guaranteed = withinPeriod && withinDebt

        let merchantAccount = try await account(.merchant, owner: merchant.id.rawValue, currency, in: db)
        var legs = [Leg(account: merchantAccount.id, currency: currency, amount: total.minorUnits)]
        if guaranteed {
            if fromWallet > 0 { legs.append(Leg(account: wallet.id, currency: currency, amount: -fromWallet)) }
            if shortfall > 0 {
                let debt = try await account(.external, owner: offlineDebtOwner(walletID), currency, in: db)
                legs.append(Leg(account: debt.id, currency: currency, amount: -shortfall))
            }
        } else {
            guard wallet.balance - owed.minorUnits >= total.minorUnits else {
                let allowance = try money(guarantee, currency, column: "daily_tokens.allowance")
                let why: String
                if withinPeriod {
                    why = "the wallet already owes \(owed) for offline payments, of at most \(allowance) guaranteed"
                } else {
                    let spent = try money(min(used, Money.maximumMinorUnits), currency, column: "offline spending")
                    why = "\(spent) of \(allowance) already spent offline"
                }
                return .declined(
                    .offlineAllowanceExceeded,
                    "this offline payment of \(total) goes beyond the wallet's offline guarantee (\(why)) and the "
                        + "wallet's balance does not cover it; the merchant is not paid for it",
                    wallet: walletID)
            }
            legs.append(Leg(account: wallet.id, currency: currency, amount: -total.minorUnits))
        }
        let earned = try await pointsEarned(by: payment.amount, walletID, at: merchant, in: db)
        let points = try await earnBonusPoints(earned, walletID, merchant.id, in: db)
        let entry = try await post("payment", legs, at: time, in: db)
        return Execution(
            outcome: .approved(reference: 0, bonusPointsEarned: earned, bonusPointsBalance: points), walletID: walletID,
            entryID: entry, offlineGuaranteed: guaranteed)
    }

    /// When `key` was revoked, nil while it is active (or unknown).
    static func keyRevocationTime(_ key: PublicKeyBytes, in db: any SQLTransaction) async throws(LedgerError)
        -> UnixTime?
    {
        try await db.query("SELECT revoked_at FROM wallet_keys WHERE public_key = ?", [.blob(key.bytes)]).first?
            .optionalInteger("revoked_at")
    }

    /// The recorded token the payment was accepted under, checked against the payment: the same
    /// wallet key, its currency, valid when the terminal accepted it, an allowance covering it.
    /// The server checks all this before with its own error codes; these are the ledger's own
    /// guards, for any other caller.
    static func offlineToken(for request: OfflineSettlementRequest, total: Money, in db: any SQLTransaction)
        async throws(LedgerError) -> DailyTokenRecord
    {
        let id = request.tokenID.hexString
        guard let token = try await dailyTokens(where: "token_id = ?", [.blob(request.tokenID)], in: db).first else {
            throw .notFound("daily token \(id)")
        }
        guard token.walletKey == request.payment.walletKey else {
            throw .invalidArgument(
                "daily token \(id) belongs to another wallet key than the one that signed the payment")
        }
        guard token.allowance.currency == total.currency else {
            throw .invalidArgument(
                "daily token \(id) is in \(token.allowance.currency), the payment in \(total.currency)")
        }
        guard request.acceptedAt + offlineClockSkew >= token.issuedAt, request.acceptedAt < token.expiresAt else {
            throw .invalidArgument(
                "daily token \(id) was not valid when the payment was accepted (\(request.acceptedAt); valid "
                    + "\(token.issuedAt) to \(token.expiresAt))")
        }
        guard total.minorUnits <= token.allowance.minorUnits else {
            throw .invalidArgument("the payment's \(total) is more than daily token \(id) allows (\(token.allowance))")
        }
        return token
    }
}
