import HorizonCore
import HorizonProtocol

/// A payment intent as the terminal it is addressed to sees it: what to collect, and whether it
/// still waits for collection.
public struct TerminalIntent: Sendable, Equatable {
    public enum Stage: String, Sendable {
        /// Waiting for its terminal (`requires_collection`, not expired).
        case waiting
        /// A terminal started collecting it.
        case collecting
        /// Canceled, expired, or processed (a payment was made for it, approved or declined).
        case ended
    }

    public let paymentID: PaymentID
    public let merchantID: MerchantID
    public let terminalID: TerminalID
    public let amount: Money
    public let orderReference: String
    public let expiresAt: UnixTime
    public let stage: Stage
}

/// The one connection a terminal keeps to the server for its intents, as the servers share it:
/// each server process records the terminals connected to it (and refreshes them while they stay),
/// so any process can tell whether a terminal is connected anywhere.
extension Ledger {
    /// How long a connection's record counts without a refresh: a server process refreshes its
    /// connections well within it, and the record of a process that died ends with it.
    public static let terminalConnectionFreshness: Int64 = 15

    /// Records `terminal`'s connection `connection` (one id per connection) as open; it replaces
    /// an older connection of the terminal's, which then no longer counts.
    public func terminalConnectionOpened(_ terminal: TerminalID, connection: String, at time: UnixTime)
        async throws(LedgerError)
    {
        try await store.transaction { db in
            try await db.query(
                """
                INSERT INTO terminal_connections(terminal_id, connection_id, seen_at) VALUES (?, ?, ?)
                ON CONFLICT (terminal_id) DO UPDATE SET connection_id = excluded.connection_id, seen_at = excluded.seen_at
                """, [.text(terminal.rawValue), .text(connection), .integer(time)])
        }
    }

    /// Refreshes the records of these connections (those still current for their terminal).
    public func terminalConnectionsSeen(_ connections: [(terminal: TerminalID, connection: String)], at time: UnixTime)
        async throws(LedgerError)
    {
        guard !connections.isEmpty else { return }
        try await store.transaction { db in
            for (terminal, connection) in connections {
                try await db.query(
                    "UPDATE terminal_connections SET seen_at = ? WHERE terminal_id = ? AND connection_id = ?",
                    [.integer(time), .text(terminal.rawValue), .text(connection)])
            }
        }
    }

    /// Records the connection closed, unless a newer one of the terminal's replaced it.
    public func terminalConnectionClosed(_ terminal: TerminalID, connection: String) async throws(LedgerError) {
        try await store.transaction { db in
            try await db.query(
                "DELETE FROM terminal_connections WHERE terminal_id = ? AND connection_id = ?",
                [.text(terminal.rawValue), .text(connection)])
        }
    }

    /// The connection closed and nothing refreshed or replaced it since (the terminal did not come
    /// back, here or on another process): its record goes and `terminal.offline` is recorded for
    /// the merchant's webhooks, once (true). False while the terminal is connected again.
    public func terminalConnectionLapsed(_ terminal: TerminalID, connection: String, at time: UnixTime)
        async throws(LedgerError) -> Bool
    {
        try await store.transaction { db in
            let gone = try await db.query(
                """
                DELETE FROM terminal_connections WHERE terminal_id = ? AND connection_id = ? AND seen_at <= ?
                RETURNING terminal_id
                """,
                [.text(terminal.rawValue), .text(connection), .integer(time - Self.terminalConnectionFreshness)])
            guard !gone.isEmpty,
                let row = try await db.query(
                    "SELECT merchant_id, label FROM terminals WHERE id = ?", [.text(terminal.rawValue)]
                ).first
            else { return false }
            let merchant = MerchantID(rawValue: try row.text("merchant_id"))
            _ = try await Self.recordWebhookEvent(
                .terminalOffline, merchant: merchant,
                object: [
                    "id": .string(terminal.rawValue), "object": .string("terminal"),
                    "label": .string(try row.text("label")), "status": .string("offline"),
                ], at: time, in: db)
            return true
        }
    }

    /// Whether `terminal` keeps a connection to some server process now.
    public func isTerminalConnected(_ terminal: TerminalID, at time: UnixTime) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            !(try await db.query(
                "SELECT terminal_id FROM terminal_connections WHERE terminal_id = ? AND seen_at > ?",
                [.text(terminal.rawValue), .integer(time - Self.terminalConnectionFreshness)]
            ).isEmpty)
        }
    }

    /// Whether `merchant` created an intent under this idempotency key (a retried create is
    /// answered from it whatever its terminal's connection is now).
    public func paymentIntentExists(idempotencyKey: String, merchant: MerchantID) async throws(LedgerError) -> Bool {
        try await store.transaction { db in
            !(try await db.query(
                "SELECT payment_id FROM payment_intents WHERE merchant_id = ? AND idempotency_key = ?",
                [.text(merchant.rawValue), .text(idempotencyKey)]
            ).isEmpty)
        }
    }

    /// The intents waiting for any of `terminals`, and where each of `following` stands (intents
    /// pushed to a terminal, to tell it when one is canceled or processed): one query for all the
    /// terminals a server process holds, however many.
    public func terminalIntents(for terminals: [TerminalID], following: [PaymentID], at time: UnixTime)
        async throws(LedgerError) -> [TerminalIntent]
    {
        guard !terminals.isEmpty || !following.isEmpty else { return [] }
        return try await store.transaction { db in
            var conditions: [String] = []
            var arguments: [SQLValue] = []
            if !terminals.isEmpty {
                conditions.append(
                    "(terminal_id IN (\(Self.placeholders(terminals.count))) AND state = 'requires_collection' AND expires_at > ?)"
                )
                arguments += terminals.map { .text($0.rawValue) } + [.integer(time)]
            }
            if !following.isEmpty {
                conditions.append("payment_id IN (\(Self.placeholders(following.count)))")
                arguments += following.map { .blob($0.bytes) }
            }
            var intents: [TerminalIntent] = []
            for row in try await db.query(
                """
                SELECT payment_id, merchant_id, terminal_id, amount, currency, order_reference, state, expires_at
                FROM payment_intents WHERE terminal_id IS NOT NULL AND (\(conditions.joined(separator: " OR ")))
                ORDER BY created_at, payment_id
                """, arguments)
            {
                intents.append(try Self.terminalIntent(from: row, at: time))
            }
            return intents
        }
    }

    static func terminalIntent(from row: SQLRow, at time: UnixTime) throws(LedgerError) -> TerminalIntent {
        let idBytes = try row.bytes("payment_id")
        guard let id = try? PaymentID(bytes: idBytes) else {
            throw .corruptRow(column: "payment_id", reason: "not \(PaymentID.byteCount) bytes")
        }
        let currency = try currency(row.text("currency"), column: "currency")
        let expiresAt = try row.integer("expires_at")
        let state = try row.text("state")
        let stage: TerminalIntent.Stage
        switch state {
        case "requires_collection" where expiresAt > time: stage = .waiting
        case "collecting": stage = .collecting
        default: stage = .ended
        }
        return TerminalIntent(
            paymentID: id, merchantID: MerchantID(rawValue: try row.text("merchant_id")),
            terminalID: TerminalID(rawValue: try row.text("terminal_id")),
            amount: try money(row.integer("amount"), currency, column: "amount"),
            orderReference: try row.text("order_reference"), expiresAt: expiresAt, stage: stage)
    }

    private static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}
