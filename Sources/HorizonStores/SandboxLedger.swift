import HorizonCore
import HorizonProtocol

/// How the sandbox ledger treats wallets and bonus points.
public struct LedgerConfiguration: Sendable, Equatable {
    public enum Enrollment: Sendable, Equatable {
        /// A wallet the ledger does not know is enrolled on first contact with this balance
        /// (the sandbox's demo mode, so each side needs nothing beyond `init`).
        case onFirstContact(startingBalance: Int64)
        /// Unknown wallets are declined, as a production processor would.
        case refuseUnknown
    }

    public var currency: Currency
    public var enrollment: Enrollment
    /// Bonus points earned per whole currency unit of the amount (tips earn none).
    public var bonusPointsPerMajorUnit: Int64

    public init(
        currency: Currency = .eur, enrollment: Enrollment = .onFirstContact(startingBalance: 100_00),
        bonusPointsPerMajorUnit: Int64 = 1
    ) {
        self.currency = currency
        self.enrollment = enrollment
        self.bonusPointsPerMajorUnit = bonusPointsPerMajorUnit
    }
}

/// A wallet's account in the sandbox ledger.
public struct WalletAccount: Sendable, Equatable {
    public let walletKey: PublicKeyBytes
    public let balance: Money
    public let bonusPoints: Int64

    public init(walletKey: PublicKeyBytes, balance: Money, bonusPoints: Int64) {
        self.walletKey = walletKey
        self.balance = balance
        self.bonusPoints = bonusPoints
    }
}

/// The embedded payment processor: wallet accounts, a merchant account, bonus points, register
/// users and every transaction, in one SQLite file (WAL, synced commits). It needs no server,
/// survives restarts, and executes each payment id exactly once.
public final class SandboxLedger: PaymentProcessor, Sendable {
    public let database: SQLiteDatabase
    public let configuration: LedgerConfiguration
    static let schemaVersion = 2

    public init(path: String, configuration: LedgerConfiguration = LedgerConfiguration()) throws(DatabaseError) {
        if case .onFirstContact(let startingBalance) = configuration.enrollment,
            !(0...Money.maximumMinorUnits).contains(startingBalance)
        {
            throw DatabaseError(
                code: -1, message: "the starting balance must be 0 to 10^15", context: "ledger configuration")
        }
        guard (0...1_000_000).contains(configuration.bonusPointsPerMajorUnit) else {
            throw DatabaseError(
                code: -1, message: "bonus points per unit must be 0 to 1000000", context: "ledger configuration")
        }
        database = try SQLiteDatabase(path: path)
        self.configuration = configuration
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS wallets(
                wallet_key BLOB PRIMARY KEY,
                currency TEXT NOT NULL,
                balance INTEGER NOT NULL CHECK (balance >= 0),
                bonus_points INTEGER NOT NULL DEFAULT 0 CHECK (bonus_points >= 0),
                enrolled_at INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS merchant_account(
                currency TEXT PRIMARY KEY,
                balance INTEGER NOT NULL CHECK (balance >= 0));
            CREATE TABLE IF NOT EXISTS register_users(name TEXT PRIMARY KEY, added_at INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS transactions(
                reference INTEGER PRIMARY KEY AUTOINCREMENT,
                payment_id BLOB NOT NULL UNIQUE,
                transaction_type INTEGER NOT NULL DEFAULT 1,
                item TEXT NOT NULL DEFAULT '',
                quantity INTEGER NOT NULL DEFAULT 0,
                session_id INTEGER NOT NULL,
                wallet_key BLOB NOT NULL,
                terminal_key_id BLOB NOT NULL,
                amount INTEGER NOT NULL CHECK (amount >= 0),
                tip INTEGER NOT NULL CHECK (tip >= 0),
                currency TEXT NOT NULL,
                register_user TEXT NOT NULL,
                content_digest BLOB NOT NULL,
                outcome TEXT NOT NULL CHECK (outcome IN ('approved', 'declined')),
                decline_code INTEGER,
                decline_reason TEXT,
                bonus_earned INTEGER NOT NULL DEFAULT 0,
                bonus_balance INTEGER NOT NULL DEFAULT 0,
                settled_at INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS gold_memberships(
                wallet_key BLOB PRIMARY KEY,
                tier TEXT NOT NULL,
                valid_from INTEGER NOT NULL,
                valid_until INTEGER NOT NULL,
                benefit_period INTEGER NOT NULL CHECK (benefit_period > 0),
                last_benefit_period INTEGER);
            CREATE TABLE IF NOT EXISTS coupons(
                code TEXT PRIMARY KEY,
                wallet_key BLOB NOT NULL,
                description TEXT NOT NULL,
                value INTEGER NOT NULL CHECK (value >= 0),
                expires_at INTEGER NOT NULL,
                redeemed_at INTEGER,
                redemption_id BLOB);
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '\(Self.schemaVersion)');
            """)
        let version = try database.query("SELECT value FROM meta WHERE key = 'schema_version'").first?["value"].text
        guard version == String(Self.schemaVersion) else {
            throw DatabaseError(
                code: -1,
                message:
                    "this ledger has schema \(version ?? "?") from a development version; use a new data directory (schema \(Self.schemaVersion))",
                context: "opening \(path)")
        }
        // A ledger keeps one currency for life: reopening it for another would relabel balances.
        try database.query(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('currency', ?)", [.text(configuration.currency.code)])
        let stored = try database.query("SELECT value FROM meta WHERE key = 'currency'").first?["value"].text
        guard stored == configuration.currency.code else {
            throw DatabaseError(
                code: -1,
                message:
                    "this ledger keeps \(stored ?? "another currency"), not \(configuration.currency.code); use a new data directory for another currency",
                context: "opening \(path)")
        }
    }

    // MARK: PaymentProcessor

    public func settle(_ request: SettlementRequest, at time: UnixTime) throws(ProcessorError) -> SettlementResult {
        let record = TransactionRecord(
            id: request.paymentID, sessionID: request.sessionID, walletKey: request.walletKey,
            terminalKeyID: request.terminalKeyID, transactionType: .payment, item: "", quantity: 0,
            amount: request.amount, tip: request.tip, registerUser: request.registerUser,
            contentDigest: request.contentDigest)
        return try executeOnce(
            record, at: time,
            sameTerms: { stored, digest, walletKey in
                // A retry must be the same payment in every term, not only the same digest.
                digest == request.contentDigest && walletKey == request.walletKey.bytes
                    && stored.transactionType == .payment && stored.sessionID == request.sessionID
                    && stored.amount == request.amount && stored.tip == request.tip
            },
            execute: { (db) throws(DatabaseError) in try self.execute(request, at: time, in: db) })
    }

    public func result(for paymentID: PaymentID) throws(ProcessorError) -> SettlementResult? {
        do {
            return try database.transaction { (db) throws(DatabaseError) in
                try Self.storedResult(paymentID, in: db)?.result
            }
        } catch {
            throw .storage(error.description)
        }
    }

    /// Decides the outcome and moves the money, inside the caller's transaction.
    private func execute(_ request: SettlementRequest, at time: UnixTime, in db: SQLiteDatabase.Transaction)
        throws(DatabaseError) -> SettlementOutcome
    {
        guard request.amount.minorUnits > 0 else {
            return .declined(code: .invalidAmount, reason: "the amount must be greater than zero")
        }
        for money in [request.amount, request.tip] where money.currency != configuration.currency {
            return .declined(
                code: .unsupportedCurrency,
                reason: "this terminal settles in \(configuration.currency.code), not \(money.currency.code)")
        }
        guard let total = try? request.amount.adding(request.tip) else {
            return .declined(code: .invalidAmount, reason: "amount plus tip is out of range")
        }
        let key = DatabaseValue.blob(request.walletKey.bytes)
        var balance: Int64
        var points: Int64
        if let row = try db.query("SELECT balance, bonus_points FROM wallets WHERE wallet_key = ?", [key]).first {
            balance = row["balance"].integer ?? 0
            points = row["bonus_points"].integer ?? 0
        } else {
            switch configuration.enrollment {
            case .refuseUnknown:
                return .declined(code: .unknownWallet, reason: "this wallet is not enrolled with the merchant")
            case .onFirstContact(let startingBalance):
                try db.query(
                    "INSERT INTO wallets(wallet_key, currency, balance, bonus_points, enrolled_at) VALUES (?, ?, ?, 0, ?)",
                    [key, .text(configuration.currency.code), .integer(startingBalance), .integer(time)])
                balance = startingBalance
                points = 0
            }
        }
        guard balance >= total.minorUnits else {
            return .declined(
                code: .insufficientFunds,
                reason:
                    "insufficient funds: \(total) needed, \(Money.unchecked(balance, configuration.currency)) available"
            )
        }
        var unit: Int64 = 1
        for _ in 0..<configuration.currency.exponent { unit *= 10 }
        // Saturating: points are a reward, and an absurd rule must not crash a payment.
        let (product, overflow) = (request.amount.minorUnits / unit).multipliedReportingOverflow(
            by: configuration.bonusPointsPerMajorUnit)
        let earned = overflow ? Money.maximumMinorUnits : min(product, Money.maximumMinorUnits)
        balance -= total.minorUnits
        points = min(points + earned, Money.maximumMinorUnits)
        try db.query(
            "UPDATE wallets SET balance = ?, bonus_points = ? WHERE wallet_key = ?",
            [.integer(balance), .integer(points), key])
        try db.query(
            """
            INSERT INTO merchant_account(currency, balance) VALUES (?, ?)
            ON CONFLICT(currency) DO UPDATE SET balance = balance + excluded.balance
            """, [.text(configuration.currency.code), .integer(total.minorUnits)])
        return .approved(reference: 0, bonusPointsEarned: earned, bonusPointsBalance: points)
    }

    /// The columns every executed payment or redemption writes.
    struct TransactionRecord {
        let id: PaymentID
        let sessionID: SessionID
        let walletKey: PublicKeyBytes
        let terminalKeyID: TerminalKeyID
        let transactionType: TransactionType
        let item: String
        let quantity: Int64
        let amount: Money
        let tip: Money
        let registerUser: String
        let contentDigest: [UInt8]
    }

    static func insert(
        _ record: TransactionRecord, outcome: SettlementOutcome, at time: UnixTime, in db: SQLiteDatabase.Transaction
    ) throws(DatabaseError) -> UInt64 {
        var code: DatabaseValue = .null
        var reason: DatabaseValue = .null
        var earned: Int64 = 0
        var balance: Int64 = 0
        switch outcome {
        case .approved(_, let bonusEarned, let bonusBalance):
            earned = bonusEarned
            balance = bonusBalance
        case .declined(let errorCode, let text):
            code = .integer(Int64(errorCode.rawValue))
            reason = .text(text)
        }
        let rows = try db.query(
            """
            INSERT INTO transactions(payment_id, transaction_type, item, quantity, session_id, wallet_key,
                terminal_key_id, amount, tip, currency, register_user, content_digest, outcome, decline_code,
                decline_reason, bonus_earned, bonus_balance, settled_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING reference
            """,
            [
                .blob(record.id.bytes), .integer(Int64(record.transactionType.rawValue)), .text(record.item),
                .integer(record.quantity), .integer(Int64(bitPattern: record.sessionID.rawValue)),
                .blob(record.walletKey.bytes), .blob(record.terminalKeyID.bytes), .integer(record.amount.minorUnits),
                .integer(record.tip.minorUnits), .text(record.amount.currency.code), .text(record.registerUser),
                .blob(record.contentDigest), .text(outcome.isApproved ? "approved" : "declined"), code, reason,
                .integer(earned), .integer(balance), .integer(time),
            ])
        return UInt64(rows.first?["reference"].integer ?? 0)
    }

    /// Runs one exactly-once execution: a stored result is replayed (if `sameTerms` agrees it is
    /// the same request) or refused as a conflicting retry; otherwise `execute` decides and the
    /// outcome is stored, all in one transaction.
    func executeOnce(
        _ record: TransactionRecord, at time: UnixTime,
        sameTerms: @escaping (SettlementResult, [UInt8], [UInt8]) -> Bool,
        execute: @escaping (SQLiteDatabase.Transaction) throws(DatabaseError) -> SettlementOutcome
    ) throws(ProcessorError) -> SettlementResult {
        do {
            return try database.transaction { (db) throws(DatabaseError) -> Result<SettlementResult, ProcessorError> in
                if let stored = try Self.storedResult(record.id, in: db) {
                    return sameTerms(stored.result, stored.digest, stored.walletKey)
                        ? .success(stored.result) : .failure(.conflictingRetry(record.id))
                }
                let outcome = try execute(db)
                let reference = try Self.insert(record, outcome: outcome, at: time, in: db)
                let final: SettlementOutcome
                if case .approved(_, let earned, let balance) = outcome {
                    final = .approved(reference: reference, bonusPointsEarned: earned, bonusPointsBalance: balance)
                } else {
                    final = outcome
                }
                return .success(
                    SettlementResult(
                        paymentID: record.id, sessionID: record.sessionID, amount: record.amount, tip: record.tip,
                        outcome: final, settledAt: time, transactionType: record.transactionType, item: record.item,
                        quantity: record.quantity))
            }.get()
        } catch let error as ProcessorError {
            throw error
        } catch {
            throw .storage(String(describing: error))
        }
    }

    private static func storedResult(_ paymentID: PaymentID, in db: SQLiteDatabase.Transaction)
        throws(DatabaseError) -> (result: SettlementResult, digest: [UInt8], walletKey: [UInt8])?
    {
        guard let row = try db.query("SELECT * FROM transactions WHERE payment_id = ?", [.blob(paymentID.bytes)]).first
        else { return nil }
        return decodeTransaction(row).map { ($0, row["content_digest"].blob ?? [], row["wallet_key"].blob ?? []) }
    }

    static func decodeTransaction(_ row: DatabaseRow) -> SettlementResult? {
        guard let idBytes = row["payment_id"].blob, let paymentID = try? PaymentID(bytes: idBytes),
            let session = row["session_id"].integer, let sessionID = SessionID(rawValue: UInt64(bitPattern: session)),
            let code = row["currency"].text, let currency = try? Currency(code: code),
            let amount = try? Money(minorUnits: row["amount"].integer ?? -1, currency: currency),
            let tip = try? Money(minorUnits: row["tip"].integer ?? -1, currency: currency)
        else { return nil }
        let outcome: SettlementOutcome
        if row["outcome"].text == "approved" {
            outcome = .approved(
                reference: UInt64(row["reference"].integer ?? 0), bonusPointsEarned: row["bonus_earned"].integer ?? 0,
                bonusPointsBalance: row["bonus_balance"].integer ?? 0)
        } else {
            outcome = .declined(
                code: ErrorCode(rawValue: UInt16(truncatingIfNeeded: row["decline_code"].integer ?? 0)),
                reason: row["decline_reason"].text ?? "")
        }
        return SettlementResult(
            paymentID: paymentID, sessionID: sessionID, amount: amount, tip: tip, outcome: outcome,
            settledAt: row["settled_at"].integer ?? 0,
            transactionType: TransactionType(rawValue: UInt8(truncatingIfNeeded: row["transaction_type"].integer ?? 1))
                ?? .payment,
            item: row["item"].text ?? "", quantity: row["quantity"].integer ?? 0)
    }

    // MARK: Accounts

    /// Enrols (or tops up to) a wallet with `balance`, for set-up and tests.
    public func setBalance(_ balance: Int64, for walletKey: PublicKeyBytes, at time: UnixTime = 0) throws(DatabaseError)
    {
        try database.query(
            """
            INSERT INTO wallets(wallet_key, currency, balance, bonus_points, enrolled_at) VALUES (?, ?, ?, 0, ?)
            ON CONFLICT(wallet_key) DO UPDATE SET balance = excluded.balance
            """, [.blob(walletKey.bytes), .text(configuration.currency.code), .integer(balance), .integer(time)])
    }

    public func account(for walletKey: PublicKeyBytes) throws(DatabaseError) -> WalletAccount? {
        guard
            let row = try database.query(
                "SELECT balance, bonus_points FROM wallets WHERE wallet_key = ?", [.blob(walletKey.bytes)]
            ).first
        else { return nil }
        return WalletAccount(
            walletKey: walletKey, balance: Money.unchecked(row["balance"].integer ?? 0, configuration.currency),
            bonusPoints: row["bonus_points"].integer ?? 0)
    }

    /// What the merchant has received.
    public func merchantBalance() throws(DatabaseError) -> Money {
        let row = try database.query(
            "SELECT balance FROM merchant_account WHERE currency = ?", [.text(configuration.currency.code)]
        ).first
        return Money.unchecked(row?["balance"].integer ?? 0, configuration.currency)
    }

    /// Transactions, newest first.
    public func transactions(limit: Int = 50) throws(DatabaseError) -> [SettlementResult] {
        try database.query("SELECT * FROM transactions ORDER BY reference DESC LIMIT ?", [.integer(Int64(limit))])
            .compactMap(Self.decodeTransaction)
    }

    /// How many payments with this id were executed (0 or 1, by the schema's UNIQUE constraint).
    public func executionCount(of paymentID: PaymentID) throws(DatabaseError) -> Int {
        let row = try database.query(
            "SELECT COUNT(*) AS n FROM transactions WHERE payment_id = ?", [.blob(paymentID.bytes)]
        ).first
        return Int(row?["n"].integer ?? 0)
    }

    // MARK: Register users (the cashiers)

    public func addRegisterUser(_ name: String, at time: UnixTime = 0) throws(DatabaseError) {
        try database.query(
            "INSERT OR IGNORE INTO register_users(name, added_at) VALUES (?, ?)", [.text(name), .integer(time)])
    }

    public func removeRegisterUser(_ name: String) throws(DatabaseError) -> Bool {
        try database.transaction { (db) throws(DatabaseError) -> Bool in
            try db.query("DELETE FROM register_users WHERE name = ?", [.text(name)])
            return db.changes > 0
        }
    }

    public func registerUsers() throws(DatabaseError) -> [String] {
        try database.query("SELECT name FROM register_users ORDER BY name").compactMap { $0["name"].text }
    }
}

extension Money {
    /// An amount read back from the ledger, whose CHECK constraints keep it in range.
    static func unchecked(_ minorUnits: Int64, _ currency: Currency) -> Money {
        (try? Money(minorUnits: minorUnits, currency: currency)) ?? .zero(currency)
    }
}
