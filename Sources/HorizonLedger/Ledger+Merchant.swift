import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores

// What a merchant sees of its own business (the merchant service and the dashboard):
// its transactions filtered and paged, one transaction with its refunds, its register users
// and terminals. Every function here takes the merchant and reads or changes only its rows.

/// Which of a merchant's transactions to list. Nil fields do not filter.
public struct TransactionFilter: Sendable, Equatable {
    /// Settled at or after (Unix seconds).
    public var from: UnixTime?
    /// Settled before (Unix seconds): `from..<to`.
    public var to: UnixTime?
    /// One kind (a payment or one kind of redemption).
    public var type: TransactionType?
    /// The register user's id the payment was made under.
    public var registerUser: String?
    /// The terminal that took it.
    public var terminalKeyID: TerminalKeyID?
    /// A transaction matching any one of these (none: no search).
    public var matching: [TransactionSearch] = []

    public init(
        from: UnixTime? = nil, to: UnixTime? = nil, type: TransactionType? = nil, registerUser: String? = nil,
        terminalKeyID: TerminalKeyID? = nil, matching: [TransactionSearch] = []
    ) {
        self.from = from
        self.to = to
        self.type = type
        self.registerUser = registerUser
        self.terminalKeyID = terminalKeyID
        self.matching = matching
    }
}

/// What a merchant searches its transactions by.
public enum TransactionSearch: Sendable, Equatable {
    case paymentID(PaymentID)
    /// The ledger's running number (the approval's reference).
    case reference(Int64)
    /// An amount in minor units: the payment's amount, or amount plus tip (what the customer paid).
    case amount(Int64)
}

/// What a merchant took in one period: approved payments (amount plus tip), declines, refunds.
public struct PeriodTotals: Sendable, Equatable {
    public let period: Range<UnixTime>
    /// Approved payments: how many, and the amounts plus tips.
    public let payments: Int64
    public let sales: Money
    public let tips: Money
    public let declined: Int64
    /// Refunds made in the period (of payments from any time).
    public let refunds: Int64
    public let refunded: Money

    /// Sales less refunds, in minor units (below zero when more was refunded than sold).
    public var netMinorUnits: Int64 { sales.minorUnits - refunded.minorUnits }
}

/// Where the next page starts: opaque to clients (`token`), made only by the ledger.
public struct TransactionCursor: Sendable, Equatable {
    /// The reference of the last transaction of the page before; the next page is older.
    let before: Int64

    init(before: Int64) { self.before = before }

    /// The cursor a client sends back; nil when the text is not a cursor this ledger made.
    public init?(token: String) {
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard token.utf8.count <= 64, let data = Data(base64Encoded: base64),
            let text = String(data: data, encoding: .utf8), text.hasPrefix("tx1:"),
            let before = Int64(text.dropFirst(4)), before > 0, String(before) == text.dropFirst(4)
        else { return nil }
        self.before = before
    }

    /// URL-safe base64 of a versioned text, so that its form can change without breaking old cursors' refusal.
    public var token: String {
        Data("tx1:\(before)".utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// A transaction as the merchant lists it: with what was refunded of it so far.
public struct TransactionSummary: Sendable, Equatable {
    public let transaction: LedgerTransaction
    public let refunded: Money
}

/// One page of a merchant's transactions, newest first.
public struct TransactionPage: Sendable, Equatable {
    public let transactions: [TransactionSummary]
    /// Nil on the last page.
    public let nextCursor: TransactionCursor?
}

/// One transaction with its refunds.
public struct TransactionDetails: Sendable, Equatable {
    public let transaction: LedgerTransaction
    public let refunds: [Refund]
    /// What may still be refunded: amount plus tip less the refunds for an approved payment,
    /// zero for a decline or a redemption.
    public let refundable: Money
}

/// Why a register user's id or name was refused (the API sends `code`).
public enum RegisterUserInputError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidID(String)
    case invalidName(String)

    public var code: String {
        switch self {
        case .invalidID: "register_user_id_invalid"
        case .invalidName: "register_user_name_invalid"
        }
    }

    public var description: String {
        switch self {
        case .invalidID(let id):
            "register user id \"\(id)\" is not 1 to \(RegisterUserRules.maximumIDLength) characters of A-Z a-z 0-9 . _ : -"
        case .invalidName(let reason): "a register user's name \(reason)"
        }
    }
}

/// The rules for register users' ids and names that the merchant service and the dashboard
/// check before anything is written.
public enum RegisterUserRules {
    public static let maximumIDLength = MessageLimits.shortText
    /// Bytes of UTF-8: what a register's display shows in one line.
    public static let maximumNameBytes = 64

    /// The name, trimmed, if it is acceptable.
    public static func check(id: String, name: String?) throws(RegisterUserInputError) -> String? {
        guard RefundID(rawValue: id).isWellFormed else { throw .invalidID(id) }
        guard let name else { return nil }
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw .invalidName("must not be empty") }
        guard trimmed.utf8.count <= maximumNameBytes else {
            throw .invalidName("must be at most \(maximumNameBytes) bytes (this one is \(trimmed.utf8.count))")
        }
        guard !trimmed.containsControlOrFormatCharacters else {
            throw .invalidName("must not contain control or format characters (such as bidi overrides)")
        }
        return trimmed
    }
}

extension Ledger {
    /// A page of `merchant`'s transactions, newest first, filtered; `after` is the page before's
    /// `nextCursor`. A cursor past the end gives an empty page without a next cursor.
    public func transactions(
        of merchant: MerchantID, filter: TransactionFilter, limit: Int = 50, after cursor: TransactionCursor? = nil
    ) async throws(LedgerError) -> TransactionPage {
        guard (1...1000).contains(limit) else { throw .invalidArgument("a page holds 1 to 1000 transactions") }
        if let from = filter.from, let to = filter.to, from > to {
            throw .invalidArgument("the date range's start (\(from)) is after its end (\(to))")
        }
        var conditions = ["t.merchant_id = ?", "t.reference < ?"]
        var parameters: [SQLValue] = [.text(merchant.rawValue), .integer(cursor?.before ?? Int64.max)]
        if let from = filter.from {
            conditions.append("t.settled_at >= ?")
            parameters.append(.integer(from))
        }
        if let to = filter.to {
            conditions.append("t.settled_at < ?")
            parameters.append(.integer(to))
        }
        if let type = filter.type {
            conditions.append("t.transaction_type = ?")
            parameters.append(.integer(Int64(type.rawValue)))
        }
        if let user = filter.registerUser {
            conditions.append("t.register_user = ?")
            parameters.append(.text(user))
        }
        if let terminal = filter.terminalKeyID {
            conditions.append("t.terminal_key_id = ?")
            parameters.append(.blob(terminal.bytes))
        }
        if !filter.matching.isEmpty {
            var any: [String] = []
            for search in filter.matching {
                switch search {
                case .paymentID(let id):
                    any.append("t.payment_id = ?")
                    parameters.append(.blob(id.bytes))
                case .reference(let reference):
                    any.append("t.reference = ?")
                    parameters.append(.integer(reference))
                case .amount(let minorUnits):
                    any.append("t.amount = ? OR t.amount + t.tip = ?")
                    parameters += [.integer(minorUnits), .integer(minorUnits)]
                }
            }
            conditions.append("(" + any.joined(separator: " OR ") + ")")
        }
        // One more than asked, to know whether a next page exists.
        parameters.append(.integer(Int64(limit) + 1))
        let sql = """
            SELECT t.*, CAST((SELECT COALESCE(SUM(r.amount), 0) FROM refunds r WHERE r.payment_id = t.payment_id)
                AS BIGINT) AS refunded
            FROM transactions t WHERE \(conditions.joined(separator: " AND "))
            ORDER BY t.reference DESC LIMIT ?
            """
        let bound = parameters
        return try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            var summaries: [TransactionSummary] = []
            for row in try await db.query(sql, bound) {
                let transaction = try Self.decodeTransaction(row).transaction
                summaries.append(
                    TransactionSummary(
                        transaction: transaction,
                        refunded: try Self.money(
                            row.integer("refunded"), transaction.result.amount.currency, column: "refunded")))
            }
            guard summaries.count > limit else { return TransactionPage(transactions: summaries, nextCursor: nil) }
            summaries.removeLast()
            return TransactionPage(
                transactions: summaries,
                nextCursor: summaries.last.map { TransactionCursor(before: $0.transaction.reference) })
        }
    }

    /// What `merchant` took in each of `periods` (each `from..<to`), in the merchant's currency.
    public func totals(of merchant: MerchantID, in periods: [Range<UnixTime>]) async throws(LedgerError)
        -> [PeriodTotals]
    {
        guard periods.count <= 400 else { throw .invalidArgument("at most 400 periods at once") }
        return try await store.transaction { db in
            let currency = try await Self.merchant(merchant, in: db).currency
            var totals: [PeriodTotals] = []
            for period in periods {
                let bounds: [SQLValue] = [
                    .text(merchant.rawValue), .integer(period.lowerBound), .integer(period.upperBound),
                ]
                guard
                    let sales = try await db.query(
                        """
                        SELECT CAST(COUNT(CASE WHEN outcome = 'approved' THEN 1 END) AS BIGINT) AS payments,
                            CAST(COUNT(CASE WHEN outcome = 'declined' THEN 1 END) AS BIGINT) AS declined,
                            CAST(COALESCE(SUM(CASE WHEN outcome = 'approved' THEN amount + tip END), 0) AS BIGINT) AS sales,
                            CAST(COALESCE(SUM(CASE WHEN outcome = 'approved' THEN tip END), 0) AS BIGINT) AS tips
                        FROM transactions
                        WHERE merchant_id = ? AND settled_at >= ? AND settled_at < ? AND transaction_type = ?
                        """, bounds + [.integer(Int64(TransactionType.payment.rawValue))]
                    ).first,
                    let refunds = try await db.query(
                        """
                        SELECT CAST(COUNT(*) AS BIGINT) AS refunds, CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS refunded
                        FROM refunds WHERE merchant_id = ? AND created_at >= ? AND created_at < ?
                        """, bounds
                    ).first
                else { throw LedgerError.corruptRow(column: "totals", reason: "no row from an aggregate") }
                totals.append(
                    PeriodTotals(
                        period: period, payments: try sales.integer("payments"),
                        sales: try Self.money(try sales.integer("sales"), currency, column: "amount"),
                        tips: try Self.money(try sales.integer("tips"), currency, column: "tip"),
                        declined: try sales.integer("declined"), refunds: try refunds.integer("refunds"),
                        refunded: try Self.money(try refunds.integer("refunded"), currency, column: "refunds.amount")))
            }
            return totals
        }
    }

    /// One transaction of `merchant` with its refunds; nil when it is unknown or another
    /// merchant's (the two are not told apart).
    public func transactionDetails(_ paymentID: PaymentID, merchant: MerchantID) async throws(LedgerError)
        -> TransactionDetails?
    {
        try await store.transaction { db in
            guard let transaction = try await Self.stored(paymentID, in: db)?.transaction,
                transaction.merchantID == merchant
            else { return nil }
            let refunds = try await Self.refunds(of: paymentID, in: db)
            let result = transaction.result
            var refundable: Int64 = 0
            if result.transactionType == .payment, result.outcome.isApproved {
                refundable =
                    result.amount.minorUnits + result.tip.minorUnits
                    - refunds.map(\.amount.minorUnits).reduce(0, +)
            }
            return TransactionDetails(
                transaction: transaction, refunds: refunds,
                refundable: try Self.money(refundable, result.amount.currency, column: "amount"))
        }
    }

    /// Renames a register user; false if the merchant has no such id.
    @discardableResult
    public func renameRegisterUser(id: String, to name: String, of merchant: MerchantID) async throws(LedgerError)
        -> Bool
    {
        guard name.utf8.count <= 200 else { throw .invalidArgument("a register user's name must be at most 200 bytes") }
        return try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            return
                !(try await db.query(
                    "UPDATE register_users SET name = ? WHERE merchant_id = ? AND user_id = ? RETURNING user_id",
                    [.text(name), .text(merchant.rawValue), .text(id)]
                ).isEmpty)
        }
    }

    /// One register user of `merchant`, or nil.
    public func registerUser(id: String, of merchant: MerchantID) async throws(LedgerError) -> RegisterUser? {
        try await store.transaction { db in
            try await db.query(
                "SELECT user_id, name, added_at FROM register_users WHERE merchant_id = ? AND user_id = ?",
                [.text(merchant.rawValue), .text(id)]
            ).first.map { row throws(LedgerError) in
                RegisterUser(
                    id: try row.text("user_id"), name: try row.text("name"), addedAt: try row.integer("added_at"))
            }
        }
    }

    /// Revokes a terminal of `merchant`: its key gets no credential any more and wallets refuse
    /// it. Nil when the merchant has no such terminal (another merchant's is not told apart);
    /// a terminal revoked before is returned as it is.
    public func revokeTerminal(_ id: TerminalID, of merchant: MerchantID, at time: UnixTime = now())
        async throws(LedgerError) -> TerminalRecord?
    {
        try await store.transaction { db in
            let scope: [SQLValue] = [.text(id.rawValue), .text(merchant.rawValue)]
            guard try await !Self.terminal(where: "id = ? AND merchant_id = ?", scope, in: db).isEmpty else {
                return nil
            }
            try await db.query(
                "UPDATE terminals SET revoked_at = ? WHERE id = ? AND merchant_id = ? AND revoked_at IS NULL",
                [.integer(time)] + scope)
            return try await Self.terminal(where: "id = ? AND merchant_id = ?", scope, in: db).first
        }
    }
}
