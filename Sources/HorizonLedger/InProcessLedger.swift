import Foundation
import HorizonCore
import HorizonProtocol
import HorizonSettlement
import HorizonStores
import Logging

/// How a terminal's in-process ledger treats wallets and bonus points.
public struct InProcessLedgerConfiguration: Sendable, Equatable {
    /// The one currency the ledger's merchant settles in (fixed when the ledger is created).
    public var currency: Currency
    /// `.sandboxOnFirstContact` (the default: trying things out, each side needs nothing beyond
    /// `init`) or `.refuseUnknown`.
    public var enrollment: WalletEnrollment
    /// Bonus points earned per whole currency unit of the amount (tips earn none).
    public var bonusPointsPerMajorUnit: Int64
    /// The merchant the ledger is created for (used only when it is created).
    public var merchantID: String
    public var merchantName: String

    public init(
        currency: Currency = .eur, enrollment: WalletEnrollment = .sandboxOnFirstContact(startingBalance: 100_00),
        bonusPointsPerMajorUnit: Int64 = 1, merchantID: String = "in-process", merchantName: String = "Horizon terminal"
    ) {
        self.currency = currency
        self.enrollment = enrollment
        self.bonusPointsPerMajorUnit = bonusPointsPerMajorUnit
        self.merchantID = merchantID
        self.merchantName = merchantName
    }
}

/// A wallet's account in an in-process ledger, found by the wallet's key.
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

/// The single-box mode: a terminal that settles in the Horizon ledger in its
/// own process, on a SQLite file in its data directory, with no server and no HTTP. The rules are
/// the server's (`Ledger`, the same library); this type adds the one merchant such a ledger
/// holds, the processor protocols, and helpers addressed by wallet key rather than wallet id
/// (wallets here are known by their key only).
///
/// Enrolment on first contact (`WalletEnrollment.sandboxOnFirstContact`) exists only here: a
/// server never enrols an unknown key.
public final class InProcessLedger: PaymentProcessor, RedemptionProcessor, Sendable {
    public let ledger: Ledger
    public let merchant: Merchant
    public let enrollment: WalletEnrollment
    /// What opening imported from an old sandbox ledger file, if it did.
    public let migration: LegacySandboxMigration?

    public var currency: Currency { merchant.currency }
    public var path: String { (ledger.store as? SQLiteLedgerStore)?.path ?? "" }

    private init(ledger: Ledger, merchant: Merchant, enrollment: WalletEnrollment, migration: LegacySandboxMigration?) {
        self.ledger = ledger
        self.merchant = merchant
        self.enrollment = enrollment
        self.migration = migration
    }

    /// Where an old sandbox ledger found at `path` is moved before its contents are imported.
    public static func legacyBackupPath(for path: String) -> String { path + ".sandbox-v2" }

    /// Opens (creating if needed) the in-process ledger in the SQLite file at `path`.
    ///
    /// A file written by the old sandbox ledger (HorizonStores' schema 2, before HorizonLedger) is
    /// migrated: it is moved to `legacyBackupPath(for:)` and its wallets, balances, bonus points,
    /// memberships, coupons, register users and every transaction (so a retry still gets its
    /// stored result) are imported in the same transaction that creates the merchant. A crash
    /// before that commit leaves the backup, and the next open imports it again from the start.
    public static func open(
        path: String, configuration: InProcessLedgerConfiguration = InProcessLedgerConfiguration(),
        logger: Logger? = nil
    ) async throws(LedgerError) -> InProcessLedger {
        guard (0...1_000_000).contains(configuration.bonusPointsPerMajorUnit) else {
            throw .invalidConfiguration("bonus points per unit must be 0 to 1000000")
        }
        // Checked before the file is created (`Ledger.open` checks too, after).
        if case .sandboxOnFirstContact(let balance) = configuration.enrollment,
            !(0...Money.maximumMinorUnits).contains(balance)
        {
            throw .invalidConfiguration("the sandbox's starting balance must be 0 to 10^15 minor units")
        }
        let backup = legacyBackupPath(for: path)
        // An old file is read whole (and so checked) before it moves; the import happens below,
        // only into a ledger that has no merchant yet.
        let legacy: LegacySandboxFile?
        if try LegacySandboxFile.isLegacy(at: path) {
            legacy = try LegacySandboxFile.load(at: path, for: configuration)
            try LegacySandboxFile.move(from: path, to: backup)
        } else {
            legacy = nil
        }
        let ledger = try await Ledger.sqlite(path: path, options: LedgerOptions(enrollment: configuration.enrollment))
        do {
            let (merchant, migration) = try await ledger.store.transaction { db in
                if let existing = try await Self.onlyMerchant(in: db) {
                    guard existing.currency == configuration.currency else {
                        throw LedgerError.invalidConfiguration(
                            "the ledger at \(path) keeps \(existing.currency.code), not \(configuration.currency.code); use a new data directory for another currency"
                        )
                    }
                    try await Self.setBonusRule(configuration.bonusPointsPerMajorUnit, existing.id, in: db)
                    return (try await Ledger.merchant(existing.id, in: db), LegacySandboxMigration?.none)
                }
                let id = MerchantID(rawValue: configuration.merchantID)
                try await Self.createMerchant(id, configuration, in: db)
                // A backup without a merchant: a crash came between the move and the import's commit.
                var migration: LegacySandboxMigration?
                if let file = try legacy
                    ?? (FileManager.default.fileExists(atPath: backup)
                        ? LegacySandboxFile.load(at: backup, for: configuration) : nil)
                {
                    migration = try await file.import(into: id, backupPath: backup, in: db)
                }
                try await Self.setBonusRule(configuration.bonusPointsPerMajorUnit, id, in: db)
                return (try await Ledger.merchant(id, in: db), migration)
            }
            let opened = InProcessLedger(
                ledger: ledger, merchant: merchant, enrollment: configuration.enrollment, migration: migration)
            if let migration { logger?.notice("\(migration)") }
            logger?.info("\(opened.modeDescription)")
            return opened
        } catch {
            await ledger.close()
            throw error
        }
    }

    /// Opens an existing in-process ledger without changing it (no merchant is created, no rule
    /// set, nobody enrolled): for reading it from another program, such as the wallet's CLI.
    public static func openExisting(path: String) async throws(LedgerError) -> InProcessLedger {
        guard FileManager.default.fileExists(atPath: path) else { throw .notFound("a ledger at \(path)") }
        if try LegacySandboxFile.isLegacy(at: path) {
            throw .invalidConfiguration(
                "\(path) is an old sandbox ledger; run `horizon-terminal transactions` once with its data directory to migrate it"
            )
        }
        let ledger = try await Ledger.sqlite(path: path)
        let found: Merchant?
        do {
            found = try await ledger.store.transaction { db in try await Self.onlyMerchant(in: db) }
        } catch {
            await ledger.close()
            throw error
        }
        guard let merchant = found else {
            await ledger.close()
            throw .notFound("the merchant of the ledger at \(path)")
        }
        return InProcessLedger(ledger: ledger, merchant: merchant, enrollment: .refuseUnknown, migration: nil)
    }

    public func close() async { await ledger.close() }

    /// One line saying how this ledger settles, for logs and `status`.
    public var modeDescription: String {
        switch enrollment {
        case .sandboxOnFirstContact(let balance):
            "in-process ledger \(path) (merchant \(merchant.id), \(currency.code)); SANDBOX: a wallet key it has never seen is enrolled on first contact with \(Money.unchecked(balance, currency)) of play money"
        case .refuseUnknown:
            "in-process ledger \(path) (merchant \(merchant.id), \(currency.code)); wallets it does not know are declined"
        }
    }

    static func onlyMerchant(in db: any SQLTransaction) async throws(LedgerError) -> Merchant? {
        let rows = try await db.query("SELECT * FROM merchants ORDER BY created_at, id LIMIT 2")
        guard rows.count <= 1 else {
            throw .invalidConfiguration("this ledger holds several merchants: it is a server's, not a terminal's")
        }
        return try rows.first.map { row throws(LedgerError) in try Ledger.decodeMerchant(row) }
    }

    static func createMerchant(
        _ id: MerchantID, _ configuration: InProcessLedgerConfiguration, in db: any SQLTransaction
    )
        async throws(LedgerError)
    {
        let name = configuration.merchantName.isEmpty ? "Horizon terminal" : configuration.merchantName
        guard !id.rawValue.isEmpty, id.rawValue.utf8.count <= 64, name.utf8.count <= 200 else {
            throw .invalidConfiguration("a merchant id must be 1 to 64 bytes and a name at most 200")
        }
        // Nobody signs in to an in-process ledger; the e-mail only fills the column.
        try await db.query(
            "INSERT INTO merchants(id, name, currency, admin_email, created_at) VALUES (?, ?, ?, ?, ?)",
            [
                .text(id.rawValue), .text(name), .text(configuration.currency.code),
                .text("in-process@terminal.invalid"), .integer(Ledger.now()),
            ])
        _ = try await Ledger.account(.merchant, owner: id.rawValue, configuration.currency, in: db)
    }

    static func setBonusRule(_ points: Int64, _ merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError)
    {
        try await db.query(
            "UPDATE merchants SET bonus_points_per_major_unit = ? WHERE id = ?",
            [.integer(points), .text(merchant.rawValue)])
    }

    // MARK: PaymentProcessor, RedemptionProcessor

    public func settle(_ request: SettlementRequest, at time: UnixTime) async throws(ProcessorError)
        -> SettlementResult
    {
        do { return try await ledger.settle(request, merchant: merchant.id, at: time) } catch {
            throw Self.processorError(error)
        }
    }

    public func redeem(_ request: RedemptionRequest, at time: UnixTime) async throws(ProcessorError)
        -> SettlementResult
    {
        do { return try await ledger.redeem(request, merchant: merchant.id, at: time) } catch {
            throw Self.processorError(error)
        }
    }

    public func result(for paymentID: PaymentID) async throws(ProcessorError) -> SettlementResult? {
        do { return try await ledger.result(for: paymentID) } catch { throw Self.processorError(error) }
    }

    static func processorError(_ error: LedgerError) -> ProcessorError {
        if case .conflictingRetry(let id) = error { return .conflictingRetry(id) }
        return .storage(error.description)
    }

    // MARK: Accounts, by wallet key

    /// The wallet a key belongs to; with `enrolling`, a new one (zero balance) for an unknown key.
    func walletID(for key: PublicKeyBytes, enrolling: Bool, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> WalletID?
    {
        if let id = try await Ledger.activeWalletID(for: key, in: db) { return id }
        guard enrolling else { return nil }
        let id = WalletID.generate()
        try await Ledger.insertWallet(id: id, name: "sandbox wallet", key: key, at: time, in: db)
        return id
    }

    /// Sets a wallet's balance (enrolling the key if needed), for set-up and tests: the
    /// difference is posted from (or back to) the external account, so the books still balance.
    public func setBalance(_ balance: Int64, for walletKey: PublicKeyBytes, at time: UnixTime = 0)
        async throws(LedgerError)
    {
        guard (0...Money.maximumMinorUnits).contains(balance) else {
            throw .invalidArgument("a balance must be 0 to 10^15 minor units")
        }
        let currency = self.currency
        let target = try Ledger.money(balance, currency, column: "balance")
        try await ledger.store.transaction { db in
            guard let wallet = try await self.walletID(for: walletKey, enrolling: true, at: time, in: db) else {
                return
            }
            let account = try await Ledger.account(.wallet, owner: wallet.rawValue, currency, in: db)
            let difference = target.minorUnits - account.balance
            guard difference != 0 else { return }
            let external = try await Ledger.account(.external, owner: Ledger.externalOwner, currency, in: db)
            _ = try await Ledger.post(
                "deposit",
                [
                    Ledger.Leg(account: external.id, currency: currency, amount: -difference),
                    Ledger.Leg(account: account.id, currency: currency, amount: difference),
                ], at: time, in: db)
        }
    }

    /// A wallet's balance and points, or nil when its key is not enrolled.
    public func account(for walletKey: PublicKeyBytes) async throws(LedgerError) -> WalletAccount? {
        let merchant = self.merchant
        return try await ledger.store.transaction { db in
            guard let wallet = try await Ledger.activeWalletID(for: walletKey, in: db) else { return nil }
            return WalletAccount(
                walletKey: walletKey,
                balance: try await Ledger.storedBalance(.wallet, owner: wallet.rawValue, merchant.currency, in: db),
                bonusPoints: try await Ledger.bonusPoints(wallet, merchant.id, in: db))
        }
    }

    /// What the merchant has received.
    public func merchantBalance() async throws(LedgerError) -> Money {
        try await ledger.balance(of: merchant.id)
    }

    /// Transactions, newest first.
    public func transactions(limit: Int = 50) async throws(LedgerError) -> [SettlementResult] {
        let merchant = self.merchant.id
        return try await ledger.store.transaction { db in
            var results: [SettlementResult] = []
            for row in try await db.query(
                "SELECT * FROM transactions WHERE merchant_id = ? ORDER BY reference DESC LIMIT ?",
                [.text(merchant.rawValue), .integer(Int64(max(0, limit)))])
            {
                results.append(try Ledger.decodeTransaction(row).transaction.result)
            }
            return results
        }
    }

    /// How many transactions carry this id (0 or 1).
    public func executionCount(of paymentID: PaymentID) async throws(LedgerError) -> Int {
        try await ledger.executionCount(of: paymentID)
    }

    // MARK: Register users (the cashiers), by name

    /// Adds a cashier; adding one that exists changes nothing.
    public func addRegisterUser(_ name: String, at time: UnixTime = 0) async throws(LedgerError) {
        do {
            try await ledger.addRegisterUser(id: name, name: name, to: merchant.id, at: time)
        } catch .alreadyExists {
            return
        }
    }

    /// Removes a cashier; false if there was none with this name (names are case-sensitive).
    public func removeRegisterUser(_ name: String) async throws(LedgerError) -> Bool {
        try await ledger.removeRegisterUser(id: name, from: merchant.id)
    }

    public func registerUsers() async throws(LedgerError) -> [String] {
        try await ledger.registerUsers(of: merchant.id).map(\.id)
    }

    // MARK: Loyalty programs, by wallet key (an unknown key is enrolled with a zero balance)

    public func addBonusPoints(_ points: Int64, for walletKey: PublicKeyBytes, at time: UnixTime = 0)
        async throws(LedgerError)
    {
        let wallet = try await enrolledWallet(walletKey, at: time)
        try await ledger.addBonusPoints(points, to: wallet, at: merchant.id)
    }

    public func grantGoldMembership(
        to walletKey: PublicKeyBytes, tier: String, validFrom: UnixTime, validUntil: UnixTime,
        benefitPeriod: Int64 = 30 * 86_400
    ) async throws(LedgerError) {
        guard validUntil >= validFrom, benefitPeriod > 0 else {
            throw .invalidArgument("a membership needs a valid period and a positive benefit period")
        }
        let wallet = try await enrolledWallet(walletKey, at: validFrom)
        try await ledger.grantGoldMembership(
            to: wallet, at: merchant.id, tier: tier, validFrom: validFrom, validUntil: validUntil,
            benefitPeriod: benefitPeriod)
    }

    public func issueCoupon(
        code: String, to walletKey: PublicKeyBytes, description: String, value: Money, expiresAt: UnixTime,
        at time: UnixTime = 0
    ) async throws(LedgerError) {
        guard !code.isEmpty, code.utf8.count <= MessageLimits.shortText else {
            throw .invalidArgument("a coupon code must be 1 to \(MessageLimits.shortText) bytes")
        }
        let wallet = try await enrolledWallet(walletKey, at: time)
        try await ledger.issueCoupon(
            code: code, to: wallet, at: merchant.id, description: description, value: value, expiresAt: expiresAt)
    }

    public func goldMembership(for walletKey: PublicKeyBytes) async throws(LedgerError) -> Membership? {
        guard let wallet = try await ledger.wallet(forKey: walletKey) else { return nil }
        return try await ledger.goldMembership(of: wallet.id, at: merchant.id)
    }

    public func coupons(for walletKey: PublicKeyBytes) async throws(LedgerError) -> [IssuedCoupon] {
        guard let wallet = try await ledger.wallet(forKey: walletKey) else { return [] }
        return try await ledger.coupons(of: wallet.id, at: merchant.id)
    }

    /// The loyalty programs this merchant runs, as offers advertise them.
    public func merchantPrograms() async throws(LedgerError) -> MerchantPrograms {
        try await ledger.programs(of: merchant.id)
    }

    private func enrolledWallet(_ key: PublicKeyBytes, at time: UnixTime) async throws(LedgerError) -> WalletID {
        try await ledger.store.transaction { db in
            try await self.walletID(for: key, enrolling: true, at: time, in: db)
                .orThrow(LedgerError.notFound("a wallet with this key"))
        }
    }
}

extension Money {
    /// An amount read back from the ledger, whose CHECK constraints keep it in range.
    static func unchecked(_ minorUnits: Int64, _ currency: Currency) -> Money {
        (try? Money(minorUnits: minorUnits, currency: currency)) ?? .zero(currency)
    }
}
