import HorizonCore
import HorizonProtocol

/// A terminal's id: `t_` and 32 hex digits, made by the ledger at activation.
public struct TerminalID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    static func generate() -> TerminalID { TerminalID(rawValue: "t_" + randomHex()) }
}

/// An activated terminal key, as the server keeps it.
public struct TerminalRecord: Sendable, Equatable {
    public let id: TerminalID
    public let merchantID: MerchantID
    public let label: String
    public let publicKey: PublicKeyBytes
    /// The 8-byte key id the radio protocol names the terminal by.
    public let keyID: [UInt8]
    public let activatedAt: UnixTime
    /// When the newest credential issued to it expires.
    public let credentialExpiresAt: UnixTime
    public let revokedAt: UnixTime?

    public var isRevoked: Bool { revokedAt != nil }
}

/// A merchant admin's stored sign-in: the password hash and the lock-out state.
public struct MerchantLogin: Sendable, Equatable {
    public let merchant: Merchant
    public let passwordHash: String
    public let failedAttempts: Int
    public let lockedUntil: UnixTime
}

/// A message the server sent (in the sandbox: kept here for the CLI and tests to read).
public struct OutboxMessage: Sendable, Equatable {
    public enum Channel: String, Sendable, Codable { case sms, email }
    public let id: Int64
    public let channel: Channel
    public let recipient: String
    public let subject: String
    public let body: String
    public let createdAt: UnixTime
    /// The registration whose one-time code this carries, and when that code expires (then
    /// the message is deleted); nil for a message with no code.
    public let registration: RegistrationID?
    public let expiresAt: UnixTime?
    /// Its way to the recipient when the server delivers messages (nothing due in the sandbox).
    public let delivery: OutboxDelivery

    /// What a code's message says once the code was used or its registration locked.
    public static let redactedBody = "(a one-time code was here; removed once it could no longer be used)"
}

/// How many wrong sign-ins start a back-off, and how long it holds sign-ins back.
public struct LoginPolicy: Sendable, Equatable {
    /// Failures in a row before the first back-off.
    public var attemptsBeforeLock: Int
    /// The first back-off's length; each further failure while over the limit doubles it.
    public var firstLock: Int64
    /// The cap (15 minutes by default): a back-off never grows into a lock-out of the owner.
    public var longestLock: Int64

    public init(attemptsBeforeLock: Int = 5, firstLock: Int64 = 60, longestLock: Int64 = 900) {
        self.attemptsBeforeLock = attemptsBeforeLock
        self.firstLock = firstLock
        self.longestLock = longestLock
    }

    /// The lock after `failures` failures in a row: none below the limit, then 1, 2, 4… times the first.
    public func lock(afterFailures failures: Int) -> Int64 {
        guard failures >= attemptsBeforeLock else { return 0 }
        let doublings = min(failures - attemptsBeforeLock, 30)
        return min(firstLock << Int64(doublings), longestLock)
    }
}

// MARK: Merchant sign-in

extension Ledger {
    /// Sets (or replaces) the merchant admin's password hash and clears any lock. Every session
    /// signed in with the old password ends: a password is changed because someone else may know it.
    public func setPasswordHash(_ hash: String, for merchant: MerchantID) async throws(LedgerError) {
        try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            try await db.query("DELETE FROM dashboard_sessions WHERE merchant_id = ?", [.text(merchant.rawValue)])
            try await db.query("DELETE FROM merchant_logins WHERE merchant_id = ?", [.text(merchant.rawValue)])
            try await db.query(
                "INSERT INTO merchant_logins(merchant_id, password_hash, failed_attempts, locked_until) VALUES (?, ?, 0, 0)",
                [.text(merchant.rawValue), .text(hash)])
        }
    }

    /// The sign-in stored for this admin e-mail, or nil when no merchant (or no password) has it.
    public func login(adminEmail: String) async throws(LedgerError) -> MerchantLogin? {
        let email = try Self.canonicalEmail(adminEmail)
        return try await store.transaction { db in
            let rows = try await db.query(
                """
                SELECT m.*, l.password_hash, l.failed_attempts, l.locked_until
                FROM merchants m JOIN merchant_logins l ON l.merchant_id = m.id WHERE m.admin_email = ?
                """, [.text(email)])
            guard let row = rows.first else { return nil }
            return MerchantLogin(
                merchant: try Self.decodeMerchant(row), passwordHash: try row.text("password_hash"),
                failedAttempts: Int(try row.integer("failed_attempts")), lockedUntil: try row.integer("locked_until"))
        }
    }

    /// Records a failed sign-in and returns the lock it now carries (0: none yet).
    @discardableResult
    public func recordFailedLogin(_ merchant: MerchantID, policy: LoginPolicy, at time: UnixTime = now())
        async throws(LedgerError) -> UnixTime
    {
        try await store.transaction { db in
            // One statement increments, so concurrent failures on several processes all count.
            let rows = try await db.query(
                "UPDATE merchant_logins SET failed_attempts = failed_attempts + 1 WHERE merchant_id = ? RETURNING failed_attempts",
                [.text(merchant.rawValue)])
            guard let failures = try rows.first?.integer("failed_attempts") else {
                throw LedgerError.notFound("a password for merchant \(merchant)")
            }
            let lock = policy.lock(afterFailures: Int(failures))
            let lockedUntil = lock > 0 ? time + lock : 0
            try await db.query(
                "UPDATE merchant_logins SET locked_until = ? WHERE merchant_id = ?",
                [.integer(lockedUntil), .text(merchant.rawValue)])
            return lockedUntil
        }
    }

    /// A correct password: the failure count starts again.
    public func recordSuccessfulLogin(_ merchant: MerchantID) async throws(LedgerError) {
        try await store.transaction { db in
            try await db.query(
                "UPDATE merchant_logins SET failed_attempts = 0, locked_until = 0 WHERE merchant_id = ?",
                [.text(merchant.rawValue)])
        }
    }
}

// MARK: Terminals

extension Ledger {
    /// Activates a terminal key for a merchant. A key is activated once: activating it again
    /// (even for the same merchant) is refused, so a revoked key cannot come back.
    public func activateTerminal(
        merchant: MerchantID, label: String, publicKey: PublicKeyBytes, keyID: [UInt8], credentialExpiresAt: UnixTime,
        at time: UnixTime = now()
    ) async throws(LedgerError) -> TerminalRecord {
        let label = label.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !label.isEmpty, label.utf8.count <= 64 else {
            throw .invalidArgument("a terminal's label must be 1 to 64 bytes")
        }
        guard keyID.count == 8 else { throw .invalidArgument("a terminal key id is 8 bytes") }
        let id = TerminalID.generate()
        return try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            if try await !db.query("SELECT id FROM terminals WHERE public_key = ?", [.blob(publicKey.bytes)]).isEmpty {
                throw LedgerError.alreadyExists("a terminal with this key")
            }
            try await db.query(
                """
                INSERT INTO terminals(id, merchant_id, label, public_key, key_id, activated_at, credential_expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(id.rawValue), .text(merchant.rawValue), .text(label), .blob(publicKey.bytes), .blob(keyID),
                    .integer(time), .integer(credentialExpiresAt),
                ])
            return try await Self.terminal(where: "id = ?", [.text(id.rawValue)], in: db).first.orThrow(
                .corruptRow(column: "terminals.id", reason: "the row just written cannot be read back"))
        }
    }

    /// The terminal with this key, revoked or not.
    public func terminal(publicKey: PublicKeyBytes) async throws(LedgerError) -> TerminalRecord? {
        // Every signed request looks its terminal up: one read, no transaction around it.
        try await store.transaction(.singleStatement) { db in
            try await Self.terminal(where: "public_key = ?", [.blob(publicKey.bytes)], in: db).first
        }
    }

    public func terminal(_ id: TerminalID) async throws(LedgerError) -> TerminalRecord {
        try await store.transaction { db in
            try await Self.terminal(where: "id = ?", [.text(id.rawValue)], in: db).first.orThrow(
                .notFound("terminal \(id)"))
        }
    }

    /// A merchant's terminals (every merchant's with nil), oldest first.
    public func terminals(of merchant: MerchantID? = nil) async throws(LedgerError) -> [TerminalRecord] {
        try await store.transaction { db in
            if let merchant {
                try await Self.terminal(where: "merchant_id = ?", [.text(merchant.rawValue)], in: db)
            } else {
                try await Self.terminal(where: "1 = 1", [], in: db)
            }
        }
    }

    /// Notes the expiry of the credential just issued to a terminal, if it is not revoked;
    /// false for a revoked terminal (whose credential must then not be handed out).
    public func recordCredentialIssued(to terminal: TerminalID, expiresAt: UnixTime) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            !(try await db.query(
                "UPDATE terminals SET credential_expires_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING id",
                [.integer(expiresAt), .text(terminal.rawValue)]
            ).isEmpty)
        }
    }

    /// Revokes a terminal: it is never renewed again and appears in the revocation data.
    /// Returns false when it was revoked already.
    @discardableResult
    public func revokeTerminal(_ id: TerminalID, at time: UnixTime = now()) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            _ = try await Self.terminal(where: "id = ?", [.text(id.rawValue)], in: db).first.orThrow(
                .notFound("terminal \(id)"))
            return
                !(try await db.query(
                    "UPDATE terminals SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING id",
                    [.integer(time), .text(id.rawValue)]
                ).isEmpty)
        }
    }

    /// The key ids of every revoked terminal, which wallets refuse.
    public func revokedTerminalKeyIDs() async throws(LedgerError) -> [[UInt8]] {
        try await store.transaction { db in
            var ids: [[UInt8]] = []
            for row in try await db.query(
                "SELECT key_id FROM terminals WHERE revoked_at IS NOT NULL ORDER BY revoked_at, id")
            {
                ids.append(try row.bytes("key_id"))
            }
            return ids
        }
    }

    static func terminal(where condition: String, _ parameters: [SQLValue], in db: any SQLTransaction)
        async throws(LedgerError) -> [TerminalRecord]
    {
        var terminals: [TerminalRecord] = []
        for row in try await db.query(
            "SELECT * FROM terminals WHERE \(condition) ORDER BY activated_at, id", parameters)
        {
            let key: PublicKeyBytes
            do { key = try PublicKeyBytes(bytes: try row.bytes("public_key")) } catch let error as LedgerError {
                throw error
            } catch {
                throw .corruptRow(column: "terminals.public_key", reason: "not an uncompressed P-256 public key")
            }
            terminals.append(
                TerminalRecord(
                    id: TerminalID(rawValue: try row.text("id")),
                    merchantID: MerchantID(rawValue: try row.text("merchant_id")),
                    label: try row.text("label"), publicKey: key, keyID: try row.bytes("key_id"),
                    activatedAt: try row.integer("activated_at"),
                    credentialExpiresAt: try row.integer("credential_expires_at"),
                    revokedAt: try row.optionalInteger("revoked_at")))
        }
        return terminals
    }
}

// MARK: Outbox and request nonces

extension Ledger {
    /// Keeps a message the server sends (the sandbox `MessageSender` writes here). A message
    /// carrying a registration's one-time code names it and the code's expiry: the sandbox
    /// "delivers" the code by showing it while it can be used; once the registration is used
    /// or locked the body is blanked, and once the code expires the message is deleted.
    /// `deliver`: due for delivery now (`claimDueOutboxMessages`); the outbox stays its record.
    /// Returns the message's id.
    @discardableResult
    public func enqueue(
        _ channel: OutboxMessage.Channel, to recipient: String, subject: String, body: String,
        registration: RegistrationID? = nil, expiresAt: UnixTime? = nil, deliver: Bool = false,
        at time: UnixTime = now()
    ) async throws(LedgerError) -> Int64 {
        let (purged, id) = try await store.transaction { db in
            let purged = try await Self.purgeExpiredOutbox(at: time, in: db)
            let row = try await db.query(
                """
                INSERT INTO outbox(channel, recipient, subject, body, created_at, registration_id, expires_at, deliver_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [
                    .text(channel.rawValue), .text(recipient), .text(subject), .text(body), .integer(time),
                    registration.map { .text($0.rawValue) } ?? .null, expiresAt.map { .integer($0) } ?? .null,
                    deliver ? .integer(time) : .null,
                ]
            ).first
            guard let row else { throw LedgerError.corruptRow(column: "outbox.id", reason: "no id returned") }
            return (purged, try row.integer("id"))
        }
        if purged { await scrubDeletedCodes() }
        return id
    }

    /// The newest messages first, optionally only those to one recipient. Reading deletes
    /// nothing: `purgeExpiredOutbox` does (the server every minute, and every new code).
    public func outbox(recipient: String? = nil, limit: Int = 50) async throws(LedgerError) -> [OutboxMessage] {
        let limit = Int64(max(1, min(limit, 1000)))
        return try await store.transaction { db in
            let rows =
                if let recipient {
                    try await db.query(
                        "SELECT * FROM outbox WHERE recipient = ? ORDER BY id DESC LIMIT ?",
                        [.text(recipient), .integer(limit)])
                } else {
                    try await db.query("SELECT * FROM outbox ORDER BY id DESC LIMIT ?", [.integer(limit)])
                }
            var messages: [OutboxMessage] = []
            for row in rows { messages.append(try Self.outboxMessage(row)) }
            return messages
        }
    }

    static func outboxMessage(_ row: SQLRow) throws(LedgerError) -> OutboxMessage {
        let channelText = try row.text("channel")
        guard let channel = OutboxMessage.Channel(rawValue: channelText) else {
            throw LedgerError.corruptRow(column: "outbox.channel", reason: "\(channelText) is not sms or email")
        }
        return OutboxMessage(
            id: try row.integer("id"), channel: channel, recipient: try row.text("recipient"),
            subject: try row.text("subject"), body: try row.text("body"),
            createdAt: try row.integer("created_at"),
            registration: try row.optionalText("registration_id").map(RegistrationID.init(rawValue:)),
            expiresAt: try row.optionalInteger("expires_at"),
            delivery: OutboxDelivery(
                dueAt: try row.optionalInteger("deliver_at"), deliveredAt: try row.optionalInteger("delivered_at"),
                attempts: try row.integer("delivery_attempts"), lastError: try row.optionalText("delivery_error")))
    }

    /// Deletes the messages whose code has expired (the server runs this every minute).
    public func purgeExpiredOutbox(at time: UnixTime = now()) async throws(LedgerError) {
        let purged = try await store.transaction { db in try await Self.purgeExpiredOutbox(at: time, in: db) }
        if purged { await scrubDeletedCodes() }
    }

    /// True when it deleted something.
    @discardableResult
    static func purgeExpiredOutbox(at time: UnixTime, in db: any SQLTransaction) async throws(LedgerError) -> Bool {
        try await !db.query(
            "DELETE FROM outbox WHERE expires_at IS NOT NULL AND expires_at <= ? RETURNING id", [.integer(time)]
        ).isEmpty
    }

    /// Blanks the code of a registration's messages: it was used, or can no longer be.
    static func redactOutbox(for registration: RegistrationID, in db: any SQLTransaction) async throws(LedgerError) {
        try await db.query(
            "UPDATE outbox SET body = ?, deliver_at = NULL WHERE registration_id = ?",
            [.text(OutboxMessage.redactedBody), .text(registration.rawValue)])
    }

    /// A blanked or deleted code can still sit in SQLite's write-ahead log, which is reused
    /// but not cleared: a truncating checkpoint copies the blanked pages into the database
    /// (where `secure_delete` zeroes freed space) and empties the log. Best effort: a reader
    /// in another process can make it wait for the next one.
    func scrubDeletedCodes() async {
        guard store.dialect == .sqlite else { return }
        _ = try? await store.transaction(.singleStatement) { db in
            try await db.query("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    /// Records a signed request's nonce for its key; false when that key used it before (a
    /// replay). Nonces older than `window` seconds are forgotten: requests that old are refused
    /// by their timestamp anyway.
    ///
    /// Every signed request comes here, so this is one statement on its own: the UNIQUE key
    /// decides, even between processes. The forgetting runs at most once a
    /// `noncePurgeInterval` per process, in a statement of its own (deleting on every request
    /// took a transaction each, and the deletes of concurrent requests conflicted).
    public func useNonce(_ nonce: String, for key: PublicKeyBytes, window: Int64, at time: UnixTime = now())
        async throws(LedgerError) -> Bool
    {
        try await purgeNoncesIfDue(window: window, at: time)
        return try await store.transaction(.singleStatement) { db in
            try await Self.insertNonce(nonce, for: key, at: time, in: db)
        }
    }

    /// Deletes the nonces older than `window` seconds, at most once a `noncePurgeInterval` per
    /// process.
    func purgeNoncesIfDue(window: Int64, at time: UnixTime) async throws(LedgerError) {
        let purgeDue = lastNoncePurge.withLock { last in
            // The first call (`last` is .min) overflows, and is due; so is a clock set back.
            let (elapsed, overflow) = time.subtractingReportingOverflow(last)
            guard overflow || elapsed >= Self.noncePurgeInterval || elapsed < 0 else { return false }
            last = time
            return true
        }
        guard purgeDue else { return }
        try await store.transaction(.singleStatement) { db in
            try await db.query("DELETE FROM request_nonces WHERE seen_at < ?", [.integer(time - window)])
        }
    }

    /// Records a nonce for its key in the caller's transaction; false when the key used it before.
    static func insertNonce(_ nonce: String, for key: PublicKeyBytes, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError) -> Bool
    {
        let inserted = try await db.query(
            """
            INSERT INTO request_nonces(public_key, nonce, seen_at) VALUES (?, ?, ?)
            ON CONFLICT (public_key, nonce) DO NOTHING RETURNING nonce
            """, [.blob(key.bytes), .text(nonce), .integer(time)])
        return !inserted.isEmpty
    }

    /// How often, in seconds, one process deletes the nonces that are past their window.
    static let noncePurgeInterval: Int64 = 60
}

extension Optional {
    func orThrow(_ error: LedgerError) throws(LedgerError) -> Wrapped {
        guard let self else { throw error }
        return self
    }
}
