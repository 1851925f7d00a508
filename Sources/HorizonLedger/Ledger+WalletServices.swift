import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores

// The wallet's services: what a wallet may read and change about its own account.
// Every query here is scoped by the wallet id the caller's key resolves to; nothing takes another
// wallet's id from a request.

/// What a wallet key is to the ledger, for the API's answer to a signed wallet request.
public enum WalletKeyStatus: Sendable, Equatable {
    case active(Wallet)
    /// The key was the wallet's but is revoked (a restoration on another device revoked it).
    case revoked(WalletID)
    case unknown
}

/// The wallet user's data, as the reference's `WalletUserData` holds it.
public struct WalletAccountData: Sendable, Equatable {
    public let id: WalletID
    public let name: String
    public let email: String?
    public let phone: String?
    public let createdAt: UnixTime
}

/// One executed payment or redemption of a wallet, with the merchant's name.
public struct WalletHistoryEntry: Sendable, Equatable {
    public let transaction: LedgerTransaction
    public let merchantName: String
    /// What the merchant gave back of it, oldest first.
    public let refunds: [Refund]
}

/// A wallet's relation to a merchant's bonus program.
public enum BonusMembershipState: String, Sendable, Codable, CaseIterable {
    /// Taking part: payments earn points (explicitly joined, or points earned before any choice).
    case joined
    /// Left: payments earn no points there until the wallet joins again; leaving forfeited the
    /// points the wallet held.
    case left
    /// Never joined and never earned points there; the program may be joined.
    case notJoined = "not_joined"
}

/// A merchant's bonus program as one wallet sees it.
public struct BonusProgramMembership: Sendable, Equatable {
    public let merchantID: MerchantID
    public let merchantName: String
    public let currency: Currency
    /// Points a payment earns per whole currency unit; 0 when the merchant ended the program.
    public let pointsPerMajorUnit: Int64
    public let state: BonusMembershipState
    public let points: Int64
}

public struct MerchantGoldMembership: Sendable, Equatable {
    public let merchantID: MerchantID
    public let merchantName: String
    public let membership: Membership
}

public struct MerchantCoupon: Sendable, Equatable {
    public let merchantID: MerchantID
    public let merchantName: String
    public let coupon: IssuedCoupon
}

/// A message the server's operator asks every wallet app to show (the reference's
/// `CustomStatusMessageManager` shows them).
public struct StatusMessage: Sendable, Equatable {
    public enum Severity: String, Sendable, Codable, CaseIterable {
        case info, warning, critical
    }
    public let id: Int64
    public let severity: Severity
    public let title: String
    public let body: String
    public let startsAt: UnixTime
    /// Nil: shown until removed.
    public let endsAt: UnixTime?
    public let createdAt: UnixTime

    /// Whether an app should show it at `time`.
    public func isShown(at time: UnixTime) -> Bool { startsAt <= time && (endsAt.map { time < $0 } ?? true) }
}

extension Ledger {
    // MARK: Who signs

    /// Whether a key is a wallet's active key, a revoked one, or unknown.
    public func walletKeyStatus(_ key: PublicKeyBytes) async throws(LedgerError) -> WalletKeyStatus {
        try await store.transaction { db in
            guard
                let row = try await db.query(
                    "SELECT wallet_id, revoked_at FROM wallet_keys WHERE public_key = ?", [.blob(key.bytes)]
                ).first
            else { return .unknown }
            let id = WalletID(rawValue: try row.text("wallet_id"))
            if try row.optionalInteger("revoked_at") != nil { return .revoked(id) }
            return .active(try await Self.wallet(id, in: db))
        }
    }

    // MARK: Account data

    public func accountData(of wallet: WalletID) async throws(LedgerError) -> WalletAccountData {
        try await store.transaction { db in try await Self.accountData(wallet, in: db) }
    }

    /// Renames the wallet user: 1 to 200 bytes of printable text, trimmed.
    public func setWalletName(_ name: String, of wallet: WalletID) async throws(LedgerError) -> WalletAccountData {
        let name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, name.utf8.count <= 200, !name.containsControlOrFormatCharacters
        else { throw .invalidArgument("a name must be 1 to 200 bytes of printable text") }
        return try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            try await db.query("UPDATE wallets SET name = ? WHERE id = ?", [.text(name), .text(wallet.rawValue)])
            return try await Self.accountData(wallet, in: db)
        }
    }

    static func accountData(_ wallet: WalletID, in db: any SQLTransaction) async throws(LedgerError)
        -> WalletAccountData
    {
        guard
            let row = try await db.query(
                "SELECT id, name, email, phone, created_at FROM wallets WHERE id = ?", [.text(wallet.rawValue)]
            ).first
        else { throw .notFound("wallet \(wallet)") }
        return WalletAccountData(
            id: WalletID(rawValue: try row.text("id")), name: try row.text("name"),
            email: try row.optionalText("email"), phone: try row.optionalText("phone"),
            createdAt: try row.integer("created_at"))
    }

    // MARK: Balances and history

    /// Every balance the wallet holds, one per currency it has an account in, by currency code.
    public func balances(of wallet: WalletID) async throws(LedgerError) -> [Money] {
        try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            var balances: [Money] = []
            for row in try await db.query(
                "SELECT currency, balance FROM accounts WHERE kind = 'wallet' AND owner_id = ? ORDER BY currency",
                [.text(wallet.rawValue)])
            {
                let currency = try Self.currency(row.text("currency"), column: "currency")
                balances.append(try Self.money(row.integer("balance"), currency, column: "balance"))
            }
            return balances
        }
    }

    /// The wallet's payments and redemptions, newest first; `before` (a reference from the
    /// previous page) pages on. An empty page means there is nothing older.
    public func history(of wallet: WalletID, limit: Int = 20, before: Int64? = nil) async throws(LedgerError)
        -> [WalletHistoryEntry]
    {
        guard (1...100).contains(limit) else { throw .invalidArgument("a page holds 1 to 100 transactions") }
        return try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            var page: [(transaction: LedgerTransaction, merchantName: String)] = []
            for row in try await db.query(
                """
                SELECT t.*, m.name AS merchant_name FROM transactions t JOIN merchants m ON m.id = t.merchant_id
                WHERE t.wallet_id = ? AND t.reference < ? ORDER BY t.reference DESC LIMIT ?
                """, [.text(wallet.rawValue), .integer(before ?? Int64.max), .integer(Int64(limit))])
            {
                page.append((try Self.decodeTransaction(row).transaction, try row.text("merchant_name")))
            }
            // One query for the whole page's refunds, not one per transaction.
            let refunds = try await Self.refunds(ofPayments: page.map(\.transaction.result.paymentID), in: db)
            return page.map {
                WalletHistoryEntry(
                    transaction: $0.transaction, merchantName: $0.merchantName,
                    refunds: refunds[$0.transaction.result.paymentID] ?? [])
            }
        }
    }

    /// One of the wallet's transactions; nil when the id is unknown or another wallet's (the two
    /// are not told apart).
    public func historyEntry(_ id: PaymentID, of wallet: WalletID) async throws(LedgerError) -> WalletHistoryEntry? {
        try await store.transaction { db in
            guard
                let row = try await db.query(
                    """
                    SELECT t.*, m.name AS merchant_name FROM transactions t JOIN merchants m ON m.id = t.merchant_id
                    WHERE t.payment_id = ? AND t.wallet_id = ?
                    """, [.blob(id.bytes), .text(wallet.rawValue)]
                ).first
            else { return nil }
            return WalletHistoryEntry(
                transaction: try Self.decodeTransaction(row).transaction, merchantName: try row.text("merchant_name"),
                refunds: try await Self.refunds(of: id, in: db))
        }
    }

    // MARK: Bonus programs

    /// Every bonus program the wallet can join (merchants whose rule earns points) and every one
    /// it has points or a choice at, by merchant name.
    public func bonusPrograms(of wallet: WalletID) async throws(LedgerError) -> [BonusProgramMembership] {
        try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            var programs: [BonusProgramMembership] = []
            for row in try await db.query(
                """
                SELECT m.id, m.name, m.currency, m.bonus_points_per_major_unit, b.points, s.state
                FROM merchants m
                LEFT JOIN bonus_points b ON b.merchant_id = m.id AND b.wallet_id = ?
                LEFT JOIN bonus_memberships s ON s.merchant_id = m.id AND s.wallet_id = ?
                WHERE m.bonus_points_per_major_unit > 0 OR b.points IS NOT NULL OR s.state IS NOT NULL
                ORDER BY m.name, m.id
                """, [.text(wallet.rawValue), .text(wallet.rawValue)])
            {
                programs.append(try Self.decodeBonusProgram(row))
            }
            return programs
        }
    }

    /// Joins or leaves a merchant's bonus program. Joining needs a program that earns points;
    /// leaving forfeits the points held there (they are not paid out and do not come back on
    /// joining again) and stops earning until the wallet joins again.
    public func setBonusMembership(
        _ state: BonusMembershipState, of wallet: WalletID, at merchant: MerchantID, time: UnixTime = now()
    ) async throws(LedgerError) -> BonusProgramMembership {
        guard state != .notJoined else {
            throw .invalidArgument("a membership can be set to joined or left, not not_joined")
        }
        return try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            let found = try await Self.merchant(merchant, in: db)
            if state == .joined, found.bonusPointsPerMajorUnit == 0 {
                throw LedgerError.invalidArgument("\(found.name) runs no bonus program to join")
            }
            try await db.query(
                """
                INSERT INTO bonus_memberships(merchant_id, wallet_id, state, changed_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (merchant_id, wallet_id) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at
                """, [.text(merchant.rawValue), .text(wallet.rawValue), .text(state.rawValue), .integer(time)])
            if state == .left, try await Self.bonusPoints(wallet, merchant, in: db) > 0 {
                try await Self.setBonusPoints(0, wallet, merchant, in: db)
            }
            guard
                let row = try await db.query(
                    """
                    SELECT m.id, m.name, m.currency, m.bonus_points_per_major_unit, b.points, s.state
                    FROM merchants m
                    LEFT JOIN bonus_points b ON b.merchant_id = m.id AND b.wallet_id = ?
                    LEFT JOIN bonus_memberships s ON s.merchant_id = m.id AND s.wallet_id = ?
                    WHERE m.id = ?
                    """, [.text(wallet.rawValue), .text(wallet.rawValue), .text(merchant.rawValue)]
                ).first
            else { throw LedgerError.notFound("merchant \(merchant)") }
            return try Self.decodeBonusProgram(row)
        }
    }

    /// The wallet's explicit choice at a merchant, if it made one.
    static func bonusMembershipState(_ wallet: WalletID, _ merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError) -> BonusMembershipState?
    {
        guard
            let row = try await db.query(
                "SELECT state FROM bonus_memberships WHERE merchant_id = ? AND wallet_id = ?",
                [.text(merchant.rawValue), .text(wallet.rawValue)]
            ).first
        else { return nil }
        return try decodeMembershipState(row.text("state"))
    }

    static func decodeMembershipState(_ text: String) throws(LedgerError) -> BonusMembershipState {
        switch text {
        case "joined": .joined
        case "left": .left
        default: throw .corruptRow(column: "state", reason: "\(text) is neither joined nor left")
        }
    }

    static func decodeBonusProgram(_ row: SQLRow) throws(LedgerError) -> BonusProgramMembership {
        let points = try row.optionalInteger("points")
        let state: BonusMembershipState =
            if let text = try row.optionalText("state") {
                try decodeMembershipState(text)
            } else {
                // No choice made: a wallet that earned points there takes part, as before choices existed.
                points == nil ? .notJoined : .joined
            }
        return BonusProgramMembership(
            merchantID: MerchantID(rawValue: try row.text("id")), merchantName: try row.text("name"),
            currency: try currency(row.text("currency"), column: "currency"),
            pointsPerMajorUnit: try row.integer("bonus_points_per_major_unit"), state: state, points: points ?? 0)
    }

    // MARK: Gold memberships and coupons

    /// The wallet's gold memberships at every merchant, by merchant name.
    public func goldMemberships(of wallet: WalletID) async throws(LedgerError) -> [MerchantGoldMembership] {
        try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            var memberships: [MerchantGoldMembership] = []
            for row in try await db.query(
                """
                SELECT g.*, m.name AS merchant_name FROM gold_memberships g JOIN merchants m ON m.id = g.merchant_id
                WHERE g.wallet_id = ? ORDER BY m.name, m.id
                """, [.text(wallet.rawValue)])
            {
                memberships.append(
                    MerchantGoldMembership(
                        merchantID: MerchantID(rawValue: try row.text("merchant_id")),
                        merchantName: try row.text("merchant_name"), membership: try Self.decodeMembership(row)))
            }
            return memberships
        }
    }

    /// The wallet's coupons at every merchant, open and redeemed, by merchant name and code.
    public func coupons(of wallet: WalletID) async throws(LedgerError) -> [MerchantCoupon] {
        try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            var coupons: [MerchantCoupon] = []
            for row in try await db.query(
                """
                SELECT c.*, m.name AS merchant_name, m.currency AS merchant_currency
                FROM coupons c JOIN merchants m ON m.id = c.merchant_id
                WHERE c.wallet_id = ? ORDER BY m.name, m.id, c.code
                """, [.text(wallet.rawValue)])
            {
                let currency = try Self.currency(row.text("merchant_currency"), column: "merchant_currency")
                coupons.append(
                    MerchantCoupon(
                        merchantID: MerchantID(rawValue: try row.text("merchant_id")),
                        merchantName: try row.text("merchant_name"), coupon: try Self.decodeCoupon(row, currency)))
            }
            return coupons
        }
    }

    // MARK: Status messages

    /// Adds a message for every wallet app, shown from `startsAt` until `endsAt` (nil: until removed).
    public func addStatusMessage(
        severity: StatusMessage.Severity, title: String, body: String, startsAt: UnixTime? = nil,
        endsAt: UnixTime? = nil, at time: UnixTime = now()
    ) async throws(LedgerError) -> StatusMessage {
        let title = title.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !title.isEmpty, title.utf8.count <= 200 else {
            throw .invalidArgument("a message's title must be 1 to 200 bytes")
        }
        guard body.utf8.count <= 2000 else { throw .invalidArgument("a message's body must be at most 2000 bytes") }
        let starts = startsAt ?? time
        if let endsAt, endsAt <= starts {
            throw .invalidArgument("a message must end after it starts")
        }
        return try await store.transaction { db in
            guard
                let row = try await db.query(
                    """
                    INSERT INTO status_messages(severity, title, body, starts_at, ends_at, created_at)
                    VALUES (?, ?, ?, ?, ?, ?) RETURNING *
                    """,
                    [
                        .text(severity.rawValue), .text(title), .text(body), .integer(starts),
                        endsAt.map { .integer($0) } ?? .null, .integer(time),
                    ]
                ).first
            else { throw LedgerError.database("inserting a status message returned no row") }
            return try Self.decodeStatusMessage(row)
        }
    }

    /// Every stored message, oldest first; with `shownAt`, only those an app shows then.
    public func statusMessages(shownAt time: UnixTime? = nil) async throws(LedgerError) -> [StatusMessage] {
        try await store.transaction { db in
            var messages: [StatusMessage] = []
            for row in try await db.query("SELECT * FROM status_messages ORDER BY id") {
                let message = try Self.decodeStatusMessage(row)
                if time.map({ message.isShown(at: $0) }) ?? true { messages.append(message) }
            }
            return messages
        }
    }

    /// Removes a message; false if there was none with this id.
    @discardableResult
    public func removeStatusMessage(_ id: Int64) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            !(try await db.query("DELETE FROM status_messages WHERE id = ? RETURNING id", [.integer(id)]).isEmpty)
        }
    }

    static func decodeStatusMessage(_ row: SQLRow) throws(LedgerError) -> StatusMessage {
        let text = try row.text("severity")
        guard let severity = StatusMessage.Severity(rawValue: text) else {
            throw .corruptRow(column: "severity", reason: "\(text) is not info, warning or critical")
        }
        return StatusMessage(
            id: try row.integer("id"), severity: severity, title: try row.text("title"), body: try row.text("body"),
            startsAt: try row.integer("starts_at"), endsAt: try row.optionalInteger("ends_at"),
            createdAt: try row.integer("created_at"))
    }
}
