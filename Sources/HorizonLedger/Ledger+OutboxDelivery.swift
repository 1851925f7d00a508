import HorizonCore

/// Where an outbox message stands on its way to its recipient when the server hands messages
/// to mail or SMS (the sandbox delivers nothing: the outbox is all there is).
public struct OutboxDelivery: Sendable, Equatable {
    /// When the next attempt is due; nil when nothing more will be tried (delivered, given up,
    /// or a sandbox message).
    public let dueAt: UnixTime?
    public let deliveredAt: UnixTime?
    public let attempts: Int64
    /// The last failed attempt's reason, cleared by a delivery.
    public let lastError: String?

    public init(dueAt: UnixTime?, deliveredAt: UnixTime?, attempts: Int64, lastError: String?) {
        self.dueAt = dueAt
        self.deliveredAt = deliveredAt
        self.attempts = attempts
        self.lastError = lastError
    }
}

extension Ledger {
    /// What a delivered code's message says: the code reached its recipient, so the database
    /// need not keep it.
    public static let deliveredCodeBody = "(a one-time code was here; removed once it was delivered)"

    /// The messages due for delivery at `time`, each claimed for `lease` seconds: another
    /// server process on the same database does not take it while this one tries (its due time
    /// moves to the lease's end, so a process that dies mid-delivery leaves it to the next).
    /// A used, locked or expired code is never due.
    public func claimDueOutboxMessages(at time: UnixTime, lease: Int64 = 120, limit: Int = 20)
        async throws(LedgerError) -> [OutboxMessage]
    {
        try await store.transaction { db in
            let rows = try await db.query(
                """
                SELECT * FROM outbox WHERE deliver_at IS NOT NULL AND deliver_at <= ?
                AND (expires_at IS NULL OR expires_at > ?) ORDER BY deliver_at, id LIMIT ?
                """, [.integer(time), .integer(time), .integer(Int64(max(1, limit)))])
            var claimed: [OutboxMessage] = []
            for row in rows {
                let message = try Self.outboxMessage(row)
                let updated = try await db.query(
                    "UPDATE outbox SET deliver_at = ? WHERE id = ? AND deliver_at <= ? RETURNING id",
                    [.integer(time + lease), .integer(message.id), .integer(time)])
                if !updated.isEmpty { claimed.append(message) }
            }
            return claimed
        }
    }

    /// Records that message `id` was handed over. A code's body is blanked: the recipient has it.
    public func recordOutboxDelivered(_ id: Int64, at time: UnixTime) async throws(LedgerError) {
        try await store.transaction { db in
            try await db.query(
                """
                UPDATE outbox SET delivered_at = ?, deliver_at = NULL, delivery_error = NULL,
                delivery_attempts = delivery_attempts + 1,
                body = CASE WHEN registration_id IS NULL THEN body ELSE ? END
                WHERE id = ?
                """, [.integer(time), .text(Self.deliveredCodeBody), .integer(id)])
        }
        await scrubDeletedCodes()
    }

    /// Records a failed attempt with its reason; `retryAt` nil gives the message up.
    public func recordOutboxDeliveryFailed(_ id: Int64, reason: String, retryAt: UnixTime?)
        async throws(LedgerError)
    {
        try await store.transaction { db in
            try await db.query(
                """
                UPDATE outbox SET deliver_at = ?, delivery_error = ?, delivery_attempts = delivery_attempts + 1
                WHERE id = ? AND delivered_at IS NULL
                """, [retryAt.map { .integer($0) } ?? .null, .text(String(reason.prefix(1000))), .integer(id)])
        }
    }
}
