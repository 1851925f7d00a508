import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores

/// What opening an in-process ledger imported from an old sandbox ledger file.
public struct LegacySandboxMigration: Sendable, Equatable, CustomStringConvertible {
    /// Where the old file now is (kept as it was, a backup nobody writes any more).
    public let backupPath: String
    public let wallets: Int
    public let transactions: Int
    public let registerUsers: Int
    public let memberships: Int
    public let coupons: Int

    public init(backupPath: String, wallets: Int, transactions: Int, registerUsers: Int, memberships: Int, coupons: Int)
    {
        self.backupPath = backupPath
        self.wallets = wallets
        self.transactions = transactions
        self.registerUsers = registerUsers
        self.memberships = memberships
        self.coupons = coupons
    }

    public var description: String {
        "migrated the old sandbox ledger into the Horizon ledger: \(wallets) wallets with their balances and points, \(transactions) transactions, \(registerUsers) register users, \(memberships) gold memberships, \(coupons) coupons; the old file is kept, unused, at \(backupPath)"
    }
}

/// A ledger file written by HorizonStores' `SandboxLedger` (schema 2, before HorizonLedger): tables
/// `meta`, `wallets` keyed by public key, `merchant_account`, `register_users`, `transactions`,
/// `gold_memberships`, `coupons`. Read whole into memory, then imported in one transaction.
struct LegacySandboxFile: Sendable {
    static let schemaVersion = "2"

    struct WalletRow: Sendable {
        let key: PublicKeyBytes
        let balance: Int64
        let bonusPoints: Int64
        let enrolledAt: Int64
    }

    let path: String
    let currency: Currency
    let wallets: [WalletRow]
    let merchantBalance: Int64
    let registerUsers: [(name: String, addedAt: Int64)]
    /// Raw rows, oldest first, with the old column names (which the new table shares).
    let transactions: [[String: SQLValue]]
    let memberships: [[String: SQLValue]]
    let coupons: [[String: SQLValue]]

    /// Whether `path` is a file of the old schema (it has the old `meta` table and not the new
    /// ledger's `schema_migrations`).
    static func isLegacy(at path: String) throws(LedgerError) -> Bool {
        guard path != ":memory:", FileManager.default.fileExists(atPath: path) else { return false }
        let tables = try withDatabase(path) { (db) throws(DatabaseError) in
            Set(
                try db.query("SELECT name FROM sqlite_master WHERE type = 'table'").map {
                    (row) throws(DatabaseError) in try row.text("name")
                })
        }
        return tables.contains("meta") && tables.contains("wallets") && !tables.contains("schema_migrations")
    }

    /// Moves the old file (and its WAL files, which hold committed data until a checkpoint)
    /// aside, so the new ledger can take its name.
    static func move(from path: String, to backup: String) throws(LedgerError) {
        if FileManager.default.fileExists(atPath: backup) {
            throw .invalidConfiguration(
                "both \(path) and \(backup) hold an old sandbox ledger; keep the one you want at \(backup), move the other away, and retry"
            )
        }
        do {
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.moveItem(atPath: path + suffix, toPath: backup + suffix)
            }
            try FileManager.default.moveItem(atPath: path, toPath: backup)
        } catch {
            throw .unavailable("cannot move the old sandbox ledger \(path) to \(backup): \(error)")
        }
    }

    /// Reads the whole old ledger. Anything this version cannot read is refused, never read as zero.
    static func read(at path: String) throws(LedgerError) -> LegacySandboxFile {
        try withDatabase(path) { (db) throws(DatabaseError) -> Result<LegacySandboxFile, LedgerError> in
            func meta(_ key: String) throws(DatabaseError) -> String? {
                try db.query("SELECT value FROM meta WHERE key = ?", [.text(key)]).first?.text("value")
            }
            let version = try meta("schema_version")
            guard version == schemaVersion else {
                return .failure(
                    .invalidConfiguration(
                        "\(path) is a sandbox ledger of schema \(version ?? "?") from a development version, which cannot be migrated; move it away to start a new ledger"
                    ))
            }
            guard let code = try meta("currency"), let currency = try? Currency(code: code) else {
                return .failure(.corruptRow(column: "meta.currency", reason: "missing or not a supported currency"))
            }
            var wallets: [WalletRow] = []
            for row in try db.query("SELECT * FROM wallets ORDER BY enrolled_at, wallet_key") {
                guard let key = try? PublicKeyBytes(bytes: try row.bytes("wallet_key")) else {
                    return .failure(.corruptRow(column: "wallets", reason: "a wallet row cannot be read"))
                }
                wallets.append(
                    WalletRow(
                        key: key, balance: try row.integer("balance"), bonusPoints: try row.integer("bonus_points"),
                        enrolledAt: try row.integer("enrolled_at")))
            }
            let merchant =
                try db.query("SELECT balance FROM merchant_account WHERE currency = ?", [.text(code)]).first?
                .integer("balance") ?? 0
            let users = try db.query("SELECT name, added_at FROM register_users ORDER BY name").map {
                (row) throws(DatabaseError) -> (name: String, addedAt: Int64) in
                (try row.text("name"), try row.integer("added_at"))
            }
            return .success(
                LegacySandboxFile(
                    path: path, currency: currency, wallets: wallets, merchantBalance: merchant, registerUsers: users,
                    transactions: try db.query("SELECT * FROM transactions ORDER BY reference").map(Self.values),
                    memberships: try db.query("SELECT * FROM gold_memberships").map(Self.values),
                    coupons: try db.query("SELECT * FROM coupons ORDER BY code").map(Self.values)))
        }.get()
    }

    /// Reads the old file and refuses one that cannot be imported for this terminal, before
    /// anything changes: money that does not add up, or another currency than the terminal's.
    static func load(at path: String, for configuration: InProcessLedgerConfiguration) throws(LedgerError)
        -> LegacySandboxFile
    {
        let file = try read(at: path)
        try file.checkConsistent()
        guard file.currency == configuration.currency else {
            throw file.refusal(
                "it keeps \(file.currency.code) and this terminal is set up for \(configuration.currency.code); set the terminal up in \(file.currency.code) (horizon-terminal init --force --currency \(file.currency.code) keeps the ledger)"
            )
        }
        return file
    }

    static func isApprovedPayment(_ row: [String: SQLValue]) -> Bool {
        row["outcome"] == .text("approved") && row["transaction_type"] == .integer(1)
    }

    /// Refuses a file whose money does not add up, before anything moves: the merchant holds
    /// exactly what the approved payments brought (nothing else ever credited it).
    func checkConsistent() throws(LedgerError) {
        var total: Int64 = 0
        for row in transactions where Self.isApprovedPayment(row) {
            guard case .integer(let amount) = row["amount"], case .integer(let tip) = row["tip"], amount >= 0, tip >= 0
            else { throw refusal("an approved payment has no amount") }
            total += amount + tip
        }
        guard total == merchantBalance else {
            throw refusal(
                "its merchant balance (\(merchantBalance)) is not the sum of its approved payments (\(total))")
        }
    }

    /// A refusal that names the file and says that nothing was changed.
    func refusal(_ reason: String) -> LedgerError {
        .invalidConfiguration("cannot migrate the old sandbox ledger \(path): \(reason); nothing was changed")
    }

    private static func values(_ row: DatabaseRow) -> [String: SQLValue] {
        row.values.mapValues { value in
            switch value {
            case .integer(let number): .integer(number)
            case .text(let text): .text(text)
            case .blob(let bytes): .blob(bytes)
            case .null: .null
            }
        }
    }

    /// Opens the old file only for the length of `body`: the connection closes when the wrapper
    /// goes, before the file is moved or the new ledger opens.
    private static func withDatabase<T>(_ path: String, _ body: (SQLiteDatabase) throws(DatabaseError) -> T)
        throws(LedgerError) -> T
    {
        do {
            let database = try SQLiteDatabase(path: path)
            return try body(database)
        } catch {
            throw .unavailable("cannot read the old sandbox ledger \(path): \(error.description)")
        }
    }

    /// Writes everything into the new ledger for `merchant`, inside the caller's transaction.
    ///
    /// Money is rebuilt as postings, so the new books audit clean: each wallet is funded from the
    /// external account with what it holds plus what it paid (kind `enrollment`: the sandbox's
    /// play money), then every approved payment is posted again, wallet to merchant, and linked
    /// to its transaction. The old merchant balance must be what those payments add up to.
    func `import`(into merchant: MerchantID, backupPath: String, in db: any SQLTransaction)
        async throws(LedgerError) -> LegacySandboxMigration
    {
        // Inside the transaction: a refusal here rolls the whole import back.
        func refuse(_ reason: String) -> LedgerError {
            .invalidConfiguration(
                "cannot migrate the old sandbox ledger \(backupPath): \(reason); nothing was imported")
        }
        var walletIDs: [PublicKeyBytes: WalletID] = [:]
        func wallet(_ key: PublicKeyBytes, at time: Int64) async throws(LedgerError) -> WalletID {
            if let id = walletIDs[key] { return id }
            let id = WalletID.generate()
            try await Ledger.insertWallet(id: id, name: "sandbox wallet", key: key, at: time, in: db)
            walletIDs[key] = id
            return id
        }
        func key(_ row: [String: SQLValue], _ column: String) throws(LedgerError) -> PublicKeyBytes {
            guard case .blob(let bytes) = row[column], let key = try? PublicKeyBytes(bytes: bytes) else {
                throw refuse("a row's \(column) is not a wallet key")
            }
            return key
        }
        func integer(_ row: [String: SQLValue], _ column: String) throws(LedgerError) -> Int64 {
            guard case .integer(let value) = row[column] else { throw refuse("a row's \(column) is not a number") }
            return value
        }
        func fund(_ wallet: WalletID, _ minorUnits: Int64, at time: Int64) async throws(LedgerError) {
            guard minorUnits > 0 else { return }
            guard minorUnits <= Money.maximumMinorUnits else { throw refuse("a wallet held more than 10^15") }
            try await Ledger.fund(
                wallet, with: try Ledger.money(minorUnits, currency, column: "balance"), kind: "enrollment", at: time,
                in: db)
        }

        // What each wallet paid, to fund it with before the payments are posted again.
        var paid: [PublicKeyBytes: Int64] = [:]
        for row in transactions where Self.isApprovedPayment(row) {
            paid[try key(row, "wallet_key"), default: 0] += try integer(row, "amount") + integer(row, "tip")
        }
        var funded: Set<PublicKeyBytes> = []
        for row in wallets {
            let id = try await wallet(row.key, at: row.enrolledAt)
            try await fund(id, row.balance + paid[row.key, default: 0], at: row.enrolledAt)
            funded.insert(row.key)
            if row.bonusPoints > 0 { try await Ledger.setBonusPoints(row.bonusPoints, id, merchant, in: db) }
        }
        // A payer missing from `wallets` (which the old ledger never wrote) holds nothing now.
        for (key, total) in paid where !funded.contains(key) {
            let time = Ledger.now()
            try await fund(try await wallet(key, at: time), total, at: time)
        }

        let merchantAccount = try await Ledger.account(.merchant, owner: merchant.rawValue, currency, in: db)
        for row in transactions {
            var values = row
            let walletKey = try key(row, "wallet_key")
            values["merchant_id"] = .text(merchant.rawValue)
            values["wallet_id"] = walletIDs[walletKey].map { .text($0.rawValue) } ?? .null
            values["entry_id"] = .null
            if Self.isApprovedPayment(row), let walletID = walletIDs[walletKey] {
                let total = try integer(row, "amount") + integer(row, "tip")
                let account = try await Ledger.account(.wallet, owner: walletID.rawValue, currency, in: db)
                values["entry_id"] = .integer(
                    try await Ledger.post(
                        "payment",
                        [
                            Ledger.Leg(account: account.id, currency: currency, amount: -total),
                            Ledger.Leg(account: merchantAccount.id, currency: currency, amount: total),
                        ], at: try integer(row, "settled_at"), in: db))
            }
            try await insert(into: "transactions", Self.transactionColumns, values, in: db)
        }

        for row in memberships {
            var values = row
            values["merchant_id"] = .text(merchant.rawValue)
            values["wallet_id"] = .text(
                try await wallet(try key(row, "wallet_key"), at: integer(row, "valid_from")).rawValue)
            try await insert(into: "gold_memberships", Self.membershipColumns, values, in: db)
        }
        for row in coupons {
            var values = row
            values["merchant_id"] = .text(merchant.rawValue)
            values["wallet_id"] = .text(try await wallet(try key(row, "wallet_key"), at: Ledger.now()).rawValue)
            try await insert(into: "coupons", Self.couponColumns, values, in: db)
        }
        for user in registerUsers {
            try await db.query(
                "INSERT INTO register_users(merchant_id, user_id, name, added_at) VALUES (?, ?, ?, ?)",
                [.text(merchant.rawValue), .text(user.name), .text(user.name), .integer(user.addedAt)])
        }
        return LegacySandboxMigration(
            backupPath: backupPath, wallets: walletIDs.count, transactions: transactions.count,
            registerUsers: registerUsers.count, memberships: memberships.count, coupons: coupons.count)

    }

    static let transactionColumns = [
        "reference", "payment_id", "merchant_id", "transaction_type", "item", "quantity", "session_id", "wallet_key",
        "wallet_id", "terminal_key_id", "amount", "tip", "currency", "register_user", "content_digest", "outcome",
        "decline_code", "decline_reason", "bonus_earned", "bonus_balance", "entry_id", "settled_at",
    ]
    static let membershipColumns = [
        "merchant_id", "wallet_id", "tier", "valid_from", "valid_until", "benefit_period", "last_benefit_period",
    ]
    static let couponColumns = [
        "merchant_id", "code", "wallet_id", "description", "value", "expires_at", "redeemed_at", "redemption_id",
    ]

    private func insert(
        into table: String, _ columns: [String], _ values: [String: SQLValue], in db: any SQLTransaction
    ) async throws(LedgerError) {
        let placeholders = Array(repeating: "?", count: columns.count).joined(separator: ", ")
        try await db.query(
            "INSERT INTO \(table)(\(columns.joined(separator: ", "))) VALUES (\(placeholders))",
            columns.map { values[$0] ?? .null })
    }
}
