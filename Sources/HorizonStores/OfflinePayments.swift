import HorizonCore
import HorizonProtocol
import HorizonSettlement

/// Where a stored offline payment stands. Only forward: stored → forwarding → settled or declined.
public enum OfflinePaymentState: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Accepted offline and journaled; not yet sent to the server.
    case stored
    /// Sent (or about to be) to the server, answer not recorded yet. After a crash it is sent
    /// again with the same payment id: the server settles an id once and answers a repeat with
    /// the same outcome.
    case forwarding
    /// The server settled it (now or before).
    case settled
    /// The server refused it for good (its code and reason are kept).
    case declined

    public var description: String { rawValue }

    /// Still owed to the server (counts against the terminal's offline limits).
    public var isOutstanding: Bool { self == .stored || self == .forwarding }
}

/// A stored offline payment with where it stands.
public struct StoredOfflinePayment: Sendable, Equatable {
    public let record: OfflinePaymentRecord
    public let state: OfflinePaymentState
    /// The server's code and reason for a declined payment.
    public let declineCode: String?
    public let declineReason: String?
    /// How many times forwarding was started for it.
    public let forwardAttempts: Int
    public let updatedAt: UnixTime

    public init(
        record: OfflinePaymentRecord, state: OfflinePaymentState, declineCode: String? = nil,
        declineReason: String? = nil, forwardAttempts: Int = 0, updatedAt: UnixTime
    ) {
        self.record = record
        self.state = state
        self.declineCode = declineCode
        self.declineReason = declineReason
        self.forwardAttempts = forwardAttempts
        self.updatedAt = updatedAt
    }
}

/// What the server's final answer to a forwarded payment was, as the store keeps it.
public enum OfflinePaymentResolution: Sendable, Equatable {
    case settled
    case declined(code: String, reason: String)
}

/// The durable part of offline acceptance: the terminal's journal keeps the offline payments
/// beside the steps of every payment, so that accepting one offline (its row and its journaled
/// answer, the "accepted offline" receipt) is one synced commit.
public protocol OfflinePaymentStore: Sendable {
    /// Stores an accepted offline payment and journals `answer` as the payment's result, in one
    /// synced commit, before the answer leaves. The payment must be confirmed in the journal.
    func storeOffline(_ payment: OfflinePaymentRecord, answer: SessionMessage, at time: UnixTime)
        throws(JournalError)
    /// Every offline payment, oldest first.
    func offlinePayments() throws(JournalError) -> [StoredOfflinePayment]
    /// Marks a stored (or already forwarding) payment as being forwarded, synced, before it is sent.
    func markOfflineForwarding(_ id: PaymentID, at time: UnixTime) throws(JournalError)
    /// Records the server's final answer for a forwarding payment.
    func resolveOffline(_ id: PaymentID, _ resolution: OfflinePaymentResolution, at time: UnixTime)
        throws(JournalError)
}

extension SQLiteTerminalJournal: OfflinePaymentStore {
    public func storeOffline(_ payment: OfflinePaymentRecord, answer: SessionMessage, at time: UnixTime)
        throws(JournalError)
    {
        do {
            try database.transaction { (db) throws(DatabaseError) -> Result<Void, JournalError> in
                if let stored = try db.query(
                    "SELECT payment_id FROM offline_payments WHERE payment_id = ?", [.blob(payment.paymentID.bytes)]
                ).first, try stored.optionalBytes("payment_id") != nil {
                    return .failure(JournalError("\(payment.paymentID) is already stored as an offline payment"))
                }
                try db.query(
                    """
                    INSERT INTO offline_payments(payment_id, session_id, wallet_key, terminal_key_id, amount, tip,
                        currency, register_user, signed_confirmation, daily_token, token_id, accepted_at, state,
                        updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'stored', ?)
                    """,
                    [
                        .blob(payment.paymentID.bytes), .integer(Int64(bitPattern: payment.sessionID.rawValue)),
                        .blob(payment.walletKey.bytes), .blob(payment.terminalKeyID.bytes),
                        .integer(payment.amount.minorUnits), .integer(payment.tip.minorUnits),
                        .text(payment.amount.currency.code), .text(payment.registerUser),
                        .blob(payment.signedConfirmation), .blob(payment.dailyToken), .blob(payment.tokenID),
                        .integer(payment.acceptedAt), .integer(time),
                    ])
                return try Self.apply(.result(payment.paymentID, answer: answer), at: time, in: db)
            }.get()
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError("could not store offline payment \(payment.paymentID): \(error)")
        }
    }

    public func offlinePayments() throws(JournalError) -> [StoredOfflinePayment] {
        let rows: [DatabaseRow]
        do {
            rows = try database.query("SELECT * FROM offline_payments ORDER BY accepted_at, rowid")
        } catch {
            throw JournalError("could not read the offline payments: \(error)")
        }
        var payments: [StoredOfflinePayment] = []
        for row in rows {
            // Strict: a row that does not decode is an error, never skipped (it is owed money).
            guard let payment = try? Self.decodeOffline(row) else {
                let id = (try? row.bytes("payment_id"))?.hexString ?? "?"
                throw JournalError("offline payment \(id) cannot be decoded (journal.sqlite is damaged)")
            }
            payments.append(payment)
        }
        return payments
    }

    public func markOfflineForwarding(_ id: PaymentID, at time: UnixTime) throws(JournalError) {
        try updateOffline(
            id, from: ["stored", "forwarding"],
            sql: """
                UPDATE offline_payments SET state = 'forwarding', forward_attempts = forward_attempts + 1,
                    updated_at = ? WHERE payment_id = ? AND state IN ('stored', 'forwarding')
                """, [.integer(time), .blob(id.bytes)])
    }

    public func resolveOffline(_ id: PaymentID, _ resolution: OfflinePaymentResolution, at time: UnixTime)
        throws(JournalError)
    {
        switch resolution {
        case .settled:
            try updateOffline(
                id, from: ["forwarding"],
                sql: """
                    UPDATE offline_payments SET state = 'settled', updated_at = ?
                    WHERE payment_id = ? AND state = 'forwarding'
                    """, [.integer(time), .blob(id.bytes)])
        case .declined(let code, let reason):
            try updateOffline(
                id, from: ["forwarding"],
                sql: """
                    UPDATE offline_payments SET state = 'declined', decline_code = ?, decline_reason = ?,
                        updated_at = ? WHERE payment_id = ? AND state = 'forwarding'
                    """, [.text(code), .text(reason), .integer(time), .blob(id.bytes)])
        }
    }

    /// Runs one state change, synced; refuses a change from a state it does not start from.
    private func updateOffline(_ id: PaymentID, from states: [String], sql: String, _ parameters: [DatabaseValue])
        throws(JournalError)
    {
        do {
            try database.transaction { (db) throws(DatabaseError) -> Result<Void, JournalError> in
                let current = try db.query(
                    "SELECT state FROM offline_payments WHERE payment_id = ?", [.blob(id.bytes)]
                ).first?.text("state")
                guard let current else { return .failure(JournalError("\(id) is not an offline payment")) }
                guard states.contains(current) else {
                    return .failure(
                        JournalError("offline payment \(id) is \(current), not \(states.joined(separator: " or "))"))
                }
                try db.query(sql, parameters)
                return .success(())
            }.get()
        } catch let error as JournalError {
            throw error
        } catch {
            throw JournalError("could not update offline payment \(id): \(error)")
        }
    }

    /// A stored offline payment; nil if a value is damaged, an error if the row is not this table's.
    private static func decodeOffline(_ row: DatabaseRow) throws(DatabaseError) -> StoredOfflinePayment? {
        let idBytes = try row.bytes("payment_id")
        let session = try row.integer("session_id")
        let keyBytes = try row.bytes("wallet_key")
        let keyIDBytes = try row.bytes("terminal_key_id")
        let code = try row.text("currency")
        let amountUnits = try row.integer("amount")
        let tipUnits = try row.integer("tip")
        let registerUser = try row.text("register_user")
        let confirmation = try row.bytes("signed_confirmation")
        let token = try row.bytes("daily_token")
        let tokenID = try row.bytes("token_id")
        let acceptedAt = try row.integer("accepted_at")
        let stateName = try row.text("state")
        let attempts = try row.integer("forward_attempts")
        let updatedAt = try row.integer("updated_at")
        let declineCode = try row.optionalText("decline_code")
        let declineReason = try row.optionalText("decline_reason")
        guard let paymentID = try? PaymentID(bytes: idBytes),
            let sessionID = SessionID(rawValue: UInt64(bitPattern: session)),
            let walletKey = try? PublicKeyBytes(bytes: keyBytes),
            let terminalKeyID = try? TerminalKeyID(bytes: keyIDBytes),
            let currency = try? Currency(code: code),
            let amount = try? Money(minorUnits: amountUnits, currency: currency),
            let tip = try? Money(minorUnits: tipUnits, currency: currency),
            let state = OfflinePaymentState(rawValue: stateName)
        else { return nil }
        return StoredOfflinePayment(
            record: OfflinePaymentRecord(
                paymentID: paymentID, sessionID: sessionID, walletKey: walletKey, terminalKeyID: terminalKeyID,
                amount: amount, tip: tip, registerUser: registerUser, signedConfirmation: confirmation,
                dailyToken: token, tokenID: tokenID, acceptedAt: acceptedAt),
            state: state, declineCode: declineCode, declineReason: declineReason,
            forwardAttempts: Int(attempts), updatedAt: updatedAt)
    }
}

/// When the terminal last reached its server, and when a call last failed to (the
/// terminal's status says whether it is online). Kept in the journal's `meta` table.
public struct ServerContact: Sendable, Equatable {
    public let lastReached: UnixTime?
    public let lastUnreachable: UnixTime?

    public init(lastReached: UnixTime?, lastUnreachable: UnixTime?) {
        self.lastReached = lastReached
        self.lastUnreachable = lastUnreachable
    }

    /// Online when the latest call got an answer (never contacted: offline as far as is known).
    public var isOnline: Bool {
        guard let lastReached else { return false }
        return lastUnreachable.map { lastReached >= $0 } ?? true
    }
}

extension SQLiteTerminalJournal {
    static let lastReachedKey = "server_last_reached"
    static let lastUnreachableKey = "server_last_unreachable"

    /// Records that a server call got an answer (`reachable`) or none. Not synced: losing it in a
    /// power cut costs only a stale status line.
    public func recordServerContact(reachable: Bool, at time: UnixTime) throws(JournalError) {
        let key = reachable ? Self.lastReachedKey : Self.lastUnreachableKey
        do {
            _ = try database.transaction(synced: false) { (db) throws(DatabaseError) in
                try db.query(
                    "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    [.text(key), .text(String(time))])
            }
        } catch {
            throw JournalError("could not record the server contact: \(error)")
        }
    }

    public func serverContact() throws(JournalError) -> ServerContact {
        do {
            let rows = try database.query(
                "SELECT key, value FROM meta WHERE key IN (?, ?)",
                [.text(Self.lastReachedKey), .text(Self.lastUnreachableKey)])
            let values = Dictionary(
                try rows.map { (row) throws(DatabaseError) in (try row.text("key"), try row.text("value")) },
                uniquingKeysWith: { _, last in last })
            func time(_ key: String) -> UnixTime? { values[key].flatMap { UnixTime($0) } }
            return ServerContact(lastReached: time(Self.lastReachedKey), lastUnreachable: time(Self.lastUnreachableKey))
        } catch {
            throw JournalError("could not read the server contact: \(error)")
        }
    }
}
