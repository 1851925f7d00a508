import HorizonCore
import HorizonProtocol

/// How wrong PIN proofs are held back: a few free, then a wait that doubles up to a ceiling, and
/// after `blockAfter` in a row no proof is taken until the account is restored to a new key.
public struct PINProofPolicy: Sendable, Equatable {
    public var freeAttempts: Int
    public var firstDelay: Int64
    public var maximumDelay: Int64
    public var blockAfter: Int

    public init(freeAttempts: Int = 3, firstDelay: Int64 = 30, maximumDelay: Int64 = 3600, blockAfter: Int = 10) {
        self.freeAttempts = freeAttempts
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        self.blockAfter = blockAfter
    }

    /// The wait after `failures` wrong proofs in a row: none for the free ones, then 30 s, 60 s…
    public func delay(afterFailures failures: Int) -> Int64 {
        guard failures >= freeAttempts else { return 0 }
        var delay = firstDelay
        for _ in 0..<min(failures - freeAttempts, 62) where delay < maximumDelay { delay *= 2 }
        return min(delay, maximumDelay)
    }
}

/// A wallet's PIN as the server keeps it (see the `wallet_pins` table).
public struct WalletPINRecord: Sendable, Equatable {
    public let walletID: WalletID
    public let deviceKey: PublicKeyBytes
    /// The public key derived from the PIN on the device: a proof verifies under it.
    public let pinKey: [UInt8]
    public let failures: Int
    public let blockedUntil: UnixTime
}

/// What a PIN proof came to.
public enum PINProofOutcome: Sendable, Equatable {
    /// The right PIN: the count is reset and the share released.
    case proven(share: [UInt8])
    /// A wrong PIN, counted: `remainingBeforeBlock` more before the account is blocked, and the
    /// wait before the next proof is taken (0: none).
    case wrong(failures: Int, remainingBeforeBlock: Int, retryAfter: Int64)
    /// No proof is taken for `retryAfter` s (a back-off); not counted.
    case backingOff(retryAfter: Int64, remainingBeforeBlock: Int)
    /// Too many wrong PINs: no proof is taken until the account is restored.
    case blocked
}

extension Ledger {
    /// Sets (or replaces) `wallet`'s PIN: the device key its proofs are signed with, the key
    /// they verify under, and the share released to a right one; wrong proofs start from zero
    /// and the wallet is no longer pinless.
    public func setWalletPIN(
        _ wallet: WalletID, deviceKey: PublicKeyBytes, pinKey: [UInt8], share: [UInt8], at time: UnixTime = now()
    ) async throws(LedgerError) {
        guard pinKey.count == 65, share.count == 32 else {
            throw .invalidArgument("a PIN key is a 65-byte P-256 point and a share 32 bytes")
        }
        try await store.transaction { db in
            // A device key names one wallet's PIN only.
            let other = try await db.query(
                "SELECT wallet_id FROM wallet_pins WHERE device_key = ? AND wallet_id <> ?",
                [.blob(deviceKey.bytes), .text(wallet.rawValue)])
            guard other.isEmpty else { throw LedgerError.alreadyExists("a PIN with this device key") }
            try await db.query(
                """
                INSERT INTO wallet_pins(wallet_id, device_key, pin_key, share, failures, blocked_until, set_at)
                VALUES (?, ?, ?, ?, 0, 0, ?)
                ON CONFLICT (wallet_id) DO UPDATE SET device_key = excluded.device_key, pin_key = excluded.pin_key,
                    share = excluded.share, failures = 0, blocked_until = 0, set_at = excluded.set_at
                """,
                [.text(wallet.rawValue), .blob(deviceKey.bytes), .blob(pinKey), .blob(share), .integer(time)])
            try await db.query("UPDATE wallets SET pinless = 0 WHERE id = ?", [.text(wallet.rawValue)])
        }
    }

    /// Drops `wallet`'s PIN: from now on it is pinless (its key protected by the device only),
    /// and its payments are limited to the pinless amount.
    public func makeWalletPinless(_ wallet: WalletID) async throws(LedgerError) {
        try await store.transaction { db in
            try await db.query("DELETE FROM wallet_pins WHERE wallet_id = ?", [.text(wallet.rawValue)])
            try await db.query("UPDATE wallets SET pinless = 1 WHERE id = ?", [.text(wallet.rawValue)])
        }
    }

    /// Drops the PIN of a wallet restored to a new key: it was the old device's (its device key,
    /// its verifier and share, its count of wrong tries), so the old PIN must no longer be
    /// proven; the new device sets one of its own, or declares itself pinless.
    static func forgetWalletPIN(_ wallet: WalletID, in db: any SQLTransaction) async throws(LedgerError) {
        try await db.query("DELETE FROM wallet_pins WHERE wallet_id = ?", [.text(wallet.rawValue)])
    }

    /// Whether `wallet` said it keeps its key without a PIN.
    public func isWalletPinless(_ wallet: WalletID) async throws(LedgerError) -> Bool {
        try await store.transaction(.singleStatement) { db in try await Self.isPinless(wallet, in: db) }
    }

    static func isPinless(_ wallet: WalletID, in db: any SQLTransaction) async throws(LedgerError) -> Bool {
        try await db.query("SELECT pinless FROM wallets WHERE id = ?", [.text(wallet.rawValue)]).first?
            .integer("pinless") == 1
    }

    /// The PIN whose proofs `deviceKey` signs, if any (of an active wallet key's wallet).
    public func walletPIN(deviceKey: PublicKeyBytes) async throws(LedgerError) -> WalletPINRecord? {
        try await store.transaction(.singleStatement) { db in try await Self.pinRecord(deviceKey, in: db) }
    }

    /// The PIN of `wallet`, if one is set.
    public func walletPIN(of wallet: WalletID) async throws(LedgerError) -> WalletPINRecord? {
        try await store.transaction(.singleStatement) { db in
            try await db.query(
                "SELECT wallet_id, device_key, pin_key, failures, blocked_until FROM wallet_pins WHERE wallet_id = ?",
                [.text(wallet.rawValue)]
            ).first.map { row throws(LedgerError) in try Self.pinRecord(row) }
        }
    }

    static func pinRecord(_ deviceKey: PublicKeyBytes, in db: any SQLTransaction) async throws(LedgerError)
        -> WalletPINRecord?
    {
        try await db.query(
            "SELECT wallet_id, device_key, pin_key, failures, blocked_until FROM wallet_pins WHERE device_key = ?",
            [.blob(deviceKey.bytes)]
        ).first.map { row throws(LedgerError) in try pinRecord(row) }
    }

    static func pinRecord(_ row: SQLRow) throws(LedgerError) -> WalletPINRecord {
        let device: PublicKeyBytes
        do { device = try PublicKeyBytes(bytes: try row.bytes("device_key")) } catch {
            throw .corruptRow(column: "device_key", reason: "\(error)")
        }
        return WalletPINRecord(
            walletID: WalletID(rawValue: try row.text("wallet_id")), deviceKey: device,
            pinKey: try row.bytes("pin_key"), failures: Int(try row.integer("failures")),
            blockedUntil: try row.integer("blocked_until"))
    }

    /// Takes one PIN proof signed by `deviceKey`: refused unproven while backing off or blocked;
    /// otherwise `isValid` is asked about the stored PIN key and the answer counted, in the same
    /// transaction, so concurrent guesses are each counted and none slips past a block.
    public func provePIN(
        deviceKey: PublicKeyBytes, policy: PINProofPolicy, at time: UnixTime = now(),
        isValid: @escaping @Sendable (_ pinKey: [UInt8]) -> Bool
    ) async throws(LedgerError) -> PINProofOutcome {
        try await store.transaction { db in
            guard
                let row = try await db.query(
                    "SELECT wallet_id, device_key, pin_key, share, failures, blocked_until FROM wallet_pins WHERE device_key = ?",
                    [.blob(deviceKey.bytes)]
                ).first
            else { throw LedgerError.notFound("a PIN for this device key") }
            let record = try Self.pinRecord(row)
            guard try await Self.activeWalletKeyCount(record.walletID, in: db) > 0 else {
                throw LedgerError.notFound("a PIN for this device key")
            }
            if record.failures >= policy.blockAfter { return .blocked }
            if record.blockedUntil > time {
                return .backingOff(
                    retryAfter: record.blockedUntil - time,
                    remainingBeforeBlock: max(0, policy.blockAfter - record.failures))
            }
            if isValid(record.pinKey) {
                try await db.query(
                    "UPDATE wallet_pins SET failures = 0, blocked_until = 0 WHERE wallet_id = ?",
                    [.text(record.walletID.rawValue)])
                return .proven(share: try row.bytes("share"))
            }
            let failures = record.failures + 1
            let delay = failures >= policy.blockAfter ? 0 : policy.delay(afterFailures: failures)
            try await db.query(
                "UPDATE wallet_pins SET failures = ?, blocked_until = ? WHERE wallet_id = ?",
                [.integer(Int64(failures)), .integer(delay > 0 ? time + delay : 0), .text(record.walletID.rawValue)])
            return .wrong(
                failures: failures, remainingBeforeBlock: max(0, policy.blockAfter - failures), retryAfter: delay)
        }
    }

    private static func activeWalletKeyCount(_ wallet: WalletID, in db: any SQLTransaction) async throws(LedgerError)
        -> Int64
    {
        try await db.query(
            "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM wallet_keys WHERE wallet_id = ? AND revoked_at IS NULL",
            [.text(wallet.rawValue)]
        ).first?.integer("n") ?? 0
    }
}
