import Foundation
import HorizonCore
import HorizonProtocol
import HorizonStores
import Synchronization

/// The Horizon ledger: merchants, wallets, their accounts, register users, every payment and
/// redemption, and the loyalty programs, over one `LedgerStore` (SQLite or PostgreSQL).
///
/// The rules live here, once, in SQL both databases share; each call is one store transaction,
/// so a call's changes are committed together or not at all, and (on PostgreSQL, at
/// SERIALIZABLE, or with row locks for a payment: `TransactionIsolation.rowLocking`) concurrent
/// calls from any number of processes behave as if run one at a time.
///
/// Money moves only as entries of postings that sum to zero per currency (`post`): a top-up
/// moves money from the external account to a wallet, a payment from the wallet to the
/// merchant. Wallet and merchant accounts never go below zero.
public final class Ledger: Sendable {
    public let store: any LedgerStore
    public let options: LedgerOptions
    /// When this process last deleted expired request nonces (`useNonce`).
    let lastNoncePurge = Mutex<UnixTime>(.min)

    private init(store: any LedgerStore, options: LedgerOptions) {
        self.store = store
        self.options = options
    }

    /// Opens the ledger in `store`, first migrating its schema to the current version (a new
    /// database is created, an older one upgraded; a newer one is refused).
    public static func open(_ store: any LedgerStore, options: LedgerOptions = LedgerOptions())
        async throws(LedgerError) -> Ledger
    {
        if case .sandboxOnFirstContact(let balance) = options.enrollment,
            !(0...Money.maximumMinorUnits).contains(balance)
        {
            throw .invalidConfiguration("the sandbox's starting balance must be 0 to 10^15 minor units")
        }
        try await LedgerSchema.migrate(store, at: now())
        return Ledger(store: store, options: options)
    }

    /// The embedded ledger in the SQLite file at `path`.
    public static func sqlite(path: String, options: LedgerOptions = LedgerOptions()) async throws(LedgerError)
        -> Ledger
    {
        try await open(SQLiteLedgerStore(path: path), options: options)
    }

    /// The shared ledger in PostgreSQL at `url` (see `PostgresLocation` for the forms).
    public static func postgres(url: String, options: LedgerOptions = LedgerOptions()) async throws(LedgerError)
        -> Ledger
    {
        let store = try PostgresLedgerStore(url: url)
        do {
            return try await open(store, options: options)
        } catch {
            await store.close()
            throw error
        }
    }

    public func close() async { await store.close() }

    /// Seconds since 1970, the ledger's clock for calls that do not pass a time.
    public static func now() -> UnixTime { UnixTime(Date().timeIntervalSince1970) }

    /// The schema version the database is at.
    public func schemaVersion() async throws(LedgerError) -> Int {
        try await store.transaction { db in try await LedgerSchema.version(in: db) }
    }

    // MARK: Merchants

    /// Adds a merchant with its account in `currency`. The admin e-mail is unique across merchants.
    public func createMerchant(
        name: String, currency: Currency, adminEmail: String, id: MerchantID? = nil, at time: UnixTime = now()
    ) async throws(LedgerError) -> Merchant {
        let name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, name.utf8.count <= 200, !name.containsControlOrFormatCharacters else {
            throw .invalidArgument("a merchant's name must be 1 to 200 bytes of printable text")
        }
        let email = try Self.canonicalEmail(adminEmail)
        guard Self.isPlausibleEmail(email) else {
            throw .invalidArgument("\"\(adminEmail)\" is not an e-mail address (expected name@domain)")
        }
        let id = id ?? MerchantID.generate()
        guard !id.rawValue.isEmpty, id.rawValue.utf8.count <= 64 else {
            throw .invalidArgument("a merchant id must be 1 to 64 bytes")
        }
        return try await store.transaction { db in
            if try await !db.query("SELECT id FROM merchants WHERE admin_email = ?", [.text(email)]).isEmpty {
                throw LedgerError.alreadyExists("a merchant with admin e-mail \(email)")
            }
            if try await !db.query("SELECT id FROM merchants WHERE id = ?", [.text(id.rawValue)]).isEmpty {
                throw LedgerError.alreadyExists("merchant \(id)")
            }
            try await db.query(
                "INSERT INTO merchants(id, name, currency, admin_email, created_at) VALUES (?, ?, ?, ?, ?)",
                [.text(id.rawValue), .text(name), .text(currency.code), .text(email), .integer(time)])
            // The merchant's account exists from the start, so balances read zero rather than absent.
            _ = try await Self.account(.merchant, owner: id.rawValue, currency, in: db)
            return try await Self.merchant(id, in: db)
        }
    }

    public func merchant(_ id: MerchantID) async throws(LedgerError) -> Merchant {
        try await store.transaction { db in try await Self.merchant(id, in: db) }
    }

    /// Every merchant, oldest first.
    public func merchants() async throws(LedgerError) -> [Merchant] {
        try await store.transaction { db in
            var merchants: [Merchant] = []
            for row in try await db.query("SELECT * FROM merchants ORDER BY created_at, id") {
                merchants.append(try Self.decodeMerchant(row))
            }
            return merchants
        }
    }

    /// The merchant whose admin signs in with this e-mail.
    public func merchant(adminEmail: String) async throws(LedgerError) -> Merchant? {
        let email = try Self.canonicalEmail(adminEmail)
        return try await store.transaction { db in
            try await db.query("SELECT * FROM merchants WHERE admin_email = ?", [.text(email)]).first.map {
                try Self.decodeMerchant($0)
            }
        }
    }

    static func merchant(_ id: MerchantID, in db: any SQLTransaction) async throws(LedgerError) -> Merchant {
        guard let row = try await db.query("SELECT * FROM merchants WHERE id = ?", [.text(id.rawValue)]).first else {
            throw .notFound("merchant \(id)")
        }
        return try decodeMerchant(row)
    }

    static func decodeMerchant(_ row: SQLRow) throws(LedgerError) -> Merchant {
        Merchant(
            id: MerchantID(rawValue: try row.text("id")), name: try row.text("name"),
            currency: try currency(row.text("currency"), column: "currency"),
            adminEmail: try row.text("admin_email"),
            bonusPointsPerMajorUnit: try row.integer("bonus_points_per_major_unit"),
            createdAt: try row.integer("created_at"), timeZone: try row.text("time_zone"))
    }

    static func currency(_ code: String, column: String) throws(LedgerError) -> Currency {
        do { return try Currency(code: code) } catch {
            throw .corruptRow(column: column, reason: "\(code) is not a supported ISO 4217 currency")
        }
    }

    static func isPlausibleEmail(_ email: String) -> Bool {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        return parts.count == 2 && !parts[0].isEmpty && parts[1].contains(".") && !parts[1].hasPrefix(".")
            && !parts[1].hasSuffix(".") && email.utf8.count <= 254 && !email.contains(where: \.isWhitespace)
    }

    // MARK: Wallets

    /// Registers a wallet account and its first key.
    public func createWallet(name: String, publicKey: PublicKeyBytes, id: WalletID? = nil, at time: UnixTime = now())
        async throws(LedgerError) -> Wallet
    {
        guard name.utf8.count <= 200 else { throw .invalidArgument("a wallet's name must be at most 200 bytes") }
        let id = id ?? WalletID.generate()
        guard !id.rawValue.isEmpty, id.rawValue.utf8.count <= 64 else {
            throw .invalidArgument("a wallet id must be 1 to 64 bytes")
        }
        return try await store.transaction { db in
            try await Self.insertWallet(id: id, name: name, key: publicKey, at: time, in: db)
            return Wallet(id: id, name: name, createdAt: time)
        }
    }

    static func insertWallet(
        id: WalletID, name: String, key: PublicKeyBytes, at time: UnixTime, in db: any SQLTransaction
    )
        async throws(LedgerError)
    {
        if try await !db.query("SELECT wallet_id FROM wallet_keys WHERE public_key = ?", [.blob(key.bytes)]).isEmpty {
            throw .alreadyExists("a wallet with this key")
        }
        if try await !db.query("SELECT id FROM wallets WHERE id = ?", [.text(id.rawValue)]).isEmpty {
            throw .alreadyExists("wallet \(id)")
        }
        try await db.query(
            "INSERT INTO wallets(id, name, created_at) VALUES (?, ?, ?)",
            [.text(id.rawValue), .text(name), .integer(time)])
        try await db.query(
            "INSERT INTO wallet_keys(public_key, wallet_id, added_at) VALUES (?, ?, ?)",
            [.blob(key.bytes), .text(id.rawValue), .integer(time)])
    }

    /// Adds a key to a wallet (a restored device); the wallet's other keys stay until revoked.
    public func addWalletKey(_ key: PublicKeyBytes, to wallet: WalletID, at time: UnixTime = now())
        async throws(LedgerError)
    {
        try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            if try await !db.query("SELECT wallet_id FROM wallet_keys WHERE public_key = ?", [.blob(key.bytes)]).isEmpty
            {
                throw LedgerError.alreadyExists("a wallet with this key")
            }
            try await db.query(
                "INSERT INTO wallet_keys(public_key, wallet_id, added_at) VALUES (?, ?, ?)",
                [.blob(key.bytes), .text(wallet.rawValue), .integer(time)])
        }
    }

    /// Revokes a key: payments signed with it are declined as from an unknown wallet from now on.
    /// Returns false when the key was unknown or revoked already.
    @discardableResult
    public func revokeWalletKey(_ key: PublicKeyBytes, at time: UnixTime = now()) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            !(try await db.query(
                "UPDATE wallet_keys SET revoked_at = ? WHERE public_key = ? AND revoked_at IS NULL RETURNING wallet_id",
                [.integer(time), .blob(key.bytes)]
            ).isEmpty)
        }
    }

    /// The wallet a key belongs to, if the key is registered and not revoked.
    public func wallet(forKey key: PublicKeyBytes) async throws(LedgerError) -> Wallet? {
        try await store.transaction { db in
            guard let id = try await Self.activeWalletID(for: key, in: db) else { return nil }
            return try await Self.wallet(id, in: db)
        }
    }

    public func wallet(_ id: WalletID) async throws(LedgerError) -> Wallet {
        try await store.transaction { db in try await Self.wallet(id, in: db) }
    }

    static func wallet(_ id: WalletID, in db: any SQLTransaction) async throws(LedgerError) -> Wallet {
        guard let row = try await db.query("SELECT * FROM wallets WHERE id = ?", [.text(id.rawValue)]).first else {
            throw .notFound("wallet \(id)")
        }
        return Wallet(
            id: WalletID(rawValue: try row.text("id")), name: try row.text("name"),
            createdAt: try row.integer("created_at"))
    }

    static func activeWalletID(for key: PublicKeyBytes, in db: any SQLTransaction) async throws(LedgerError)
        -> WalletID?
    {
        try await db.query(
            "SELECT wallet_id FROM wallet_keys WHERE public_key = ? AND revoked_at IS NULL", [.blob(key.bytes)]
        ).first.map { row throws(LedgerError) in WalletID(rawValue: try row.text("wallet_id")) }
    }

    // MARK: Accounts and postings

    enum AccountKind: String {
        case wallet, merchant, external
    }

    /// The external account's owner: money that entered from outside (cards, cash, the sandbox).
    static let externalOwner = "external"

    /// The owner of a wallet's offline debt account: an external account of its own
    /// per wallet and currency, at or below zero. The money the server fronts to merchants for a
    /// guaranteed offline payment beyond the wallet's balance enters from outside the wallets'
    /// money, like a top-up, and the wallet owes it back: its next top-ups repay it first
    /// (`fund`). Keeping the debt out of the wallet's own account keeps that account at or above
    /// zero (its CHECK), so every balance stays a `Money`.
    static func offlineDebtOwner(_ wallet: WalletID) -> String { "offline_debt:" + wallet.rawValue }

    /// The id and balance of an account, created at zero if it does not exist yet. `locking`
    /// locks its row in a `.rowLocking` transaction, for a rule that decides on the balance.
    static func account(
        _ kind: AccountKind, owner: String, _ currency: Currency, locking: Bool = false, in db: any SQLTransaction
    ) async throws(LedgerError) -> (id: Int64, balance: Int64) {
        // Read first: the account exists for every payment but a wallet's or merchant's first,
        // and an insert that does nothing is still a statement (a round trip on PostgreSQL).
        if let existing = try await existingAccount(kind, owner: owner, currency, locking: locking, in: db) {
            return existing
        }
        try await db.query(
            """
            INSERT INTO accounts(kind, owner_id, currency, balance) VALUES (?, ?, ?, 0)
            ON CONFLICT (kind, owner_id, currency) DO NOTHING
            """, [.text(kind.rawValue), .text(owner), .text(currency.code)])
        guard let created = try await existingAccount(kind, owner: owner, currency, locking: locking, in: db) else {
            throw .database("the \(kind.rawValue) account of \(owner) in \(currency) vanished")
        }
        return created
    }

    /// One leg of an entry: `amount` (signed minor units) to or from an account.
    struct Leg {
        let account: Int64
        let currency: Currency
        let amount: Int64
    }

    /// Records one movement of money: an entry and its postings, and the accounts' new balances.
    /// The legs must sum to zero per currency; a caller that breaks this is a bug, refused
    /// before anything is written.
    static func post(_ kind: String, _ legs: [Leg], at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> Int64
    {
        var sums: [String: Int64] = [:]
        for leg in legs {
            let (sum, overflow) = sums[leg.currency.code, default: 0].addingReportingOverflow(leg.amount)
            guard !overflow, leg.amount != 0 else { throw .invalidArgument("a posting of \(leg.amount) is refused") }
            sums[leg.currency.code] = sum
        }
        guard legs.count >= 2, sums.values.allSatisfy({ $0 == 0 }) else {
            throw .invalidArgument("refused an unbalanced entry (\(kind)): postings must sum to zero per currency")
        }
        let entryID = try await db.insert(
            "INSERT INTO entries(kind, created_at) VALUES (?, ?)", [.text(kind), .integer(time)], returning: "id")
        // Every leg in one statement, and every balance in another: each statement is a round
        // trip to PostgreSQL, and a payment is mostly round trips.
        var postings: [SQLValue] = []
        postings.reserveCapacity(4 * legs.count)
        // An account's change is the sum of its legs (a CASE takes the first match only).
        var changes: [(account: Int64, amount: Int64)] = []
        for leg in legs {
            postings += [.integer(entryID), .integer(leg.account), .text(leg.currency.code), .integer(leg.amount)]
            if let index = changes.firstIndex(where: { $0.account == leg.account }) {
                let (sum, overflow) = changes[index].amount.addingReportingOverflow(leg.amount)
                guard !overflow else { throw .invalidArgument("a posting of \(leg.amount) is refused") }
                changes[index].amount = sum
            } else {
                changes.append((leg.account, leg.amount))
            }
        }
        try await db.query(
            "INSERT INTO postings(entry_id, account_id, currency, amount) VALUES "
                + Array(repeating: "(?, ?, ?, ?)", count: legs.count).joined(separator: ", "), postings)
        // The accounts' CHECK refuses a wallet or merchant below zero even if a rule forgot to.
        // A posting to an account that does not exist is refused by the postings' foreign key
        // above. PostgreSQL: every balance in one statement (one round trip). SQLite: one
        // statement per account, because it turns `id = ? OR id = ?` (or `IN (…)`) into a
        // temporary table built and dropped at each run, which costs more than the statements.
        if db.dialect == .sqlite {
            for change in changes {
                try await db.query(
                    "UPDATE accounts SET balance = balance + ? WHERE id = ?",
                    [.integer(change.amount), .integer(change.account)])
            }
        } else {
            try await db.query(
                "UPDATE accounts SET balance = balance + CASE id "
                    + Array(repeating: "WHEN ? THEN ? ", count: changes.count).joined() + "END WHERE "
                    + Array(repeating: "id = ?", count: changes.count).joined(separator: " OR "),
                changes.flatMap { [SQLValue.integer($0.account), .integer($0.amount)] }
                    + changes.map { .integer($0.account) })
        }
        return entryID
    }

    /// Tops up a wallet from the external account (a card payment or cash that was taken). The
    /// first top-up of a wallet registered with an invitation that carries a bonus also credits
    /// the bonus, once. Returns the deposit entry's id.
    @discardableResult
    public func deposit(_ money: Money, to wallet: WalletID, at time: UnixTime = now()) async throws(LedgerError)
        -> Int64
    {
        guard money.minorUnits > 0 else { throw .invalidArgument("a deposit must be more than zero") }
        return try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            let entry = try await Self.fund(wallet, with: money, kind: "deposit", at: time, in: db)
            _ = try await Self.grantInvitationBonus(to: wallet, at: time, in: db)
            return entry
        }
    }

    /// Moves `money` from the external account to the wallet. An offline debt in that currency
    /// is repaid first: the server fronted that money to merchants, so a top-up
    /// clears it before the wallet can spend again.
    @discardableResult
    static func fund(_ wallet: WalletID, with money: Money, kind: String, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> Int64
    {
        let debt = try await existingAccount(.external, owner: offlineDebtOwner(wallet), money.currency, in: db)
        let repaid = min(money.minorUnits, -(debt?.balance ?? 0))
        let credited = money.minorUnits - repaid
        let target = try await account(.wallet, owner: wallet.rawValue, money.currency, in: db)
        guard target.balance <= Money.maximumMinorUnits - credited else {
            throw LedgerError.invalidArgument("a wallet holds at most 10^15 minor units; this deposit would exceed it")
        }
        let source = try await account(.external, owner: externalOwner, money.currency, in: db)
        var legs = [Leg(account: source.id, currency: money.currency, amount: -money.minorUnits)]
        // A posting of zero is refused, so each leg is there only when it moves something.
        if let debt, repaid > 0 { legs.append(Leg(account: debt.id, currency: money.currency, amount: repaid)) }
        if credited > 0 { legs.append(Leg(account: target.id, currency: money.currency, amount: credited)) }
        return try await post(kind, legs, at: time, in: db)
    }

    /// The id and balance of an account if it exists (without creating it, unlike `account`).
    static func existingAccount(
        _ kind: AccountKind, owner: String, _ currency: Currency, locking: Bool = false, in db: any SQLTransaction
    ) async throws(LedgerError) -> (id: Int64, balance: Int64)? {
        guard
            let row = try await db.query(
                "SELECT id, balance FROM accounts WHERE kind = ? AND owner_id = ? AND currency = ?"
                    + (locking ? db.forUpdate : ""),
                [.text(kind.rawValue), .text(owner), .text(currency.code)]
            ).first
        else { return nil }
        return (try row.integer("id"), try row.integer("balance"))
    }

    /// What the wallet owes in `currency` for guaranteed offline payments beyond its balance;
    /// zero when it owes nothing. Its next top-ups repay it first.
    public func offlineDebt(of wallet: WalletID, in currency: Currency) async throws(LedgerError) -> Money {
        try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            return try await Self.offlineDebt(of: wallet, currency, in: db)
        }
    }

    static func offlineDebt(of wallet: WalletID, _ currency: Currency, in db: any SQLTransaction)
        async throws(LedgerError) -> Money
    {
        // Locked in a `.rowLocking` payment: it decides on the debt, which a top-up may be repaying.
        let debt = try await existingAccount(
            .external, owner: offlineDebtOwner(wallet), currency, locking: true, in: db)
        let balance = debt?.balance ?? 0
        return try money(-balance, currency, column: "offline debt")
    }

    /// A wallet's balance in one currency (zero when it has no account in it).
    public func balance(of wallet: WalletID, in currency: Currency) async throws(LedgerError) -> Money {
        try await store.transaction { db in
            _ = try await Self.wallet(wallet, in: db)
            return try await Self.storedBalance(.wallet, owner: wallet.rawValue, currency, in: db)
        }
    }

    /// What a merchant has received, in its currency.
    public func balance(of merchant: MerchantID) async throws(LedgerError) -> Money {
        try await store.transaction { db in
            let merchant = try await Self.merchant(merchant, in: db)
            return try await Self.storedBalance(.merchant, owner: merchant.id.rawValue, merchant.currency, in: db)
        }
    }

    static func storedBalance(_ kind: AccountKind, owner: String, _ currency: Currency, in db: any SQLTransaction)
        async throws(LedgerError) -> Money
    {
        let row = try await db.query(
            "SELECT balance FROM accounts WHERE kind = ? AND owner_id = ? AND currency = ?",
            [.text(kind.rawValue), .text(owner), .text(currency.code)]
        ).first
        return try money(row?.integer("balance") ?? 0, currency, column: "balance")
    }

    static func money(_ minorUnits: Int64, _ currency: Currency, column: String) throws(LedgerError) -> Money {
        do { return try Money(minorUnits: minorUnits, currency: currency) } catch {
            throw .corruptRow(column: column, reason: "\(minorUnits) is outside 0 to 10^15")
        }
    }

    // MARK: Register users

    /// Adds a cashier with the merchant's own id for them (unique per merchant).
    public func addRegisterUser(id: String, name: String, to merchant: MerchantID, at time: UnixTime = now())
        async throws(LedgerError)
    {
        guard !id.isEmpty, id.utf8.count <= MessageLimits.shortText else {
            throw .invalidArgument("a register user's id must be 1 to \(MessageLimits.shortText) bytes")
        }
        guard name.utf8.count <= 200 else { throw .invalidArgument("a register user's name must be at most 200 bytes") }
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            let inserted = try await db.query(
                """
                INSERT INTO register_users(merchant_id, user_id, name, added_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (merchant_id, user_id) DO NOTHING RETURNING user_id
                """, [.text(merchant.rawValue), .text(id), .text(name), .integer(time)])
            if inserted.isEmpty { throw LedgerError.alreadyExists("register user \(id) of merchant \(merchant)") }
        }
    }

    /// Removes a cashier; false if the merchant had no such id.
    @discardableResult
    public func removeRegisterUser(id: String, from merchant: MerchantID) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            return
                !(try await db.query(
                    "DELETE FROM register_users WHERE merchant_id = ? AND user_id = ? RETURNING user_id",
                    [.text(merchant.rawValue), .text(id)]
                ).isEmpty)
        }
    }

    /// A merchant's cashiers, by id.
    public func registerUsers(of merchant: MerchantID) async throws(LedgerError) -> [RegisterUser] {
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            var users: [RegisterUser] = []
            for row in try await db.query(
                "SELECT user_id, name, added_at FROM register_users WHERE merchant_id = ? ORDER BY user_id",
                [.text(merchant.rawValue)])
            {
                users.append(
                    RegisterUser(
                        id: try row.text("user_id"), name: try row.text("name"), addedAt: try row.integer("added_at")))
            }
            return users
        }
    }
}
