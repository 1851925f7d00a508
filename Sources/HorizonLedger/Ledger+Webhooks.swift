import Foundation
import HorizonCore
import HorizonProtocol

/// What a merchant's system can be told about. An endpoint names the types it listens to.
public enum WebhookEventType: String, Sendable, CaseIterable, Comparable {
    /// A payment was approved (`data.object` is the payment).
    case paymentSucceeded = "payment.succeeded"
    /// A payment was declined (`data.object` is the payment, with its decline code and reason).
    case paymentDeclined = "payment.declined"
    /// A refund was made (`data.object` is the refund).
    case refundSucceeded = "refund.succeeded"
    /// A payment intent's payment was approved (`data.object` is the intent).
    case intentSucceeded = "intent.succeeded"
    /// A payment intent was canceled (`data.object` is the intent).
    case intentCanceled = "intent.canceled"
    /// A terminal lost its connection to the server (`data.object` is the terminal).
    case terminalOffline = "terminal.offline"

    public static func < (lhs: WebhookEventType, rhs: WebhookEventType) -> Bool {
        allCases.firstIndex(of: lhs) ?? 0 < allCases.firstIndex(of: rhs) ?? 0
    }

    /// Types from their stored or typed names (space- or comma-separated); nil if one is unknown.
    public static func parse(_ text: String) -> Set<WebhookEventType>? {
        var types = Set<WebhookEventType>()
        for name in text.split(whereSeparator: { $0 == " " || $0 == "," }) {
            guard let type = WebhookEventType(rawValue: String(name)) else { return nil }
            types.insert(type)
        }
        return types
    }
}

/// A JSON value in an event's `data.object`: what a webhook's receiver reads.
public enum WebhookValue: Sendable, Equatable, Encodable {
    case string(String)
    case integer(Int64)
    case bool(Bool)
    case null
    case object([String: WebhookValue])

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let text): try container.encode(text)
        case .integer(let number): try container.encode(number)
        case .bool(let flag): try container.encode(flag)
        case .null: try container.encodeNil()
        case .object(let fields): try container.encode(fields)
        }
    }
}

/// A merchant's webhook endpoint as lists show it: never its secret.
public struct WebhookEndpoint: Sendable, Equatable {
    public let id: String
    public let merchantID: MerchantID
    public let url: String
    public let description: String
    public let eventTypes: Set<WebhookEventType>
    public let createdAt: UnixTime
    /// Until when the secret before the last roll still signs deliveries (beside the new one).
    public let previousSecretExpiresAt: UnixTime?
    public let deletedAt: UnixTime?

    public var isActive: Bool { deletedAt == nil }
}

/// One event on its way to one endpoint, with the answer to its latest attempt.
public struct WebhookDelivery: Sendable, Equatable {
    public let id: Int64
    public let eventID: String
    public let eventType: WebhookEventType
    public let endpointID: String
    public let merchantID: MerchantID
    /// When the next attempt may start; nil when delivered or given up.
    public let dueAt: UnixTime?
    /// No automatic attempt starts after this.
    public let giveUpAt: UnixTime
    public let attempts: Int64
    public let deliveredAt: UnixTime?
    public let createdAt: UnixTime
    /// The attempts' answers, newest first (only when asked for).
    public let history: [WebhookAttempt]

    public var state: State {
        if deliveredAt != nil, dueAt == nil { return .delivered }
        if dueAt == nil { return .failed }
        return attempts == 0 ? .pending : .retrying
    }

    public enum State: String, Sendable {
        case pending, retrying, delivered, failed
    }
}

/// One attempt's answer: the status (nil when none came), the start of the body, the time it
/// took, or why no answer came.
public struct WebhookAttempt: Sendable, Equatable {
    public let attemptedAt: UnixTime
    public let status: Int?
    public let responseBody: String
    public let latencyMilliseconds: Int64
    public let error: String?

    public init(attemptedAt: UnixTime, status: Int?, responseBody: String, latencyMilliseconds: Int64, error: String?) {
        self.attemptedAt = attemptedAt
        self.status = status
        self.responseBody = responseBody
        self.latencyMilliseconds = latencyMilliseconds
        self.error = error
    }

    /// A 2xx answer: the receiver took the event.
    public var succeeded: Bool { status.map { (200..<300).contains($0) } ?? false }
}

/// A delivery a process claimed: what to send, where, and the secrets to sign it with.
public struct ClaimedWebhookDelivery: Sendable {
    public let delivery: WebhookDelivery
    public let url: String
    public let body: String
    /// The endpoint's current secret first, then the one before the last roll while it is valid.
    public let secrets: [String]
}

extension Ledger {
    /// At most this many endpoints, deleted ones aside, per merchant.
    public static let maximumWebhookEndpoints = 16
    /// How long after its event a delivery is retried: three days.
    public static let webhookRetryPeriod: Int64 = 3 * 86_400
    /// How long a rolled secret keeps signing beside the new one, so receivers can switch.
    public static let webhookPreviousSecretLifetime: Int64 = 86_400
    /// The longest stored start of a receiver's answer.
    public static let webhookResponseBodyLimit = 1_000

    /// Adds an endpoint for `merchant`. `secret` is the one the caller shows its owner once.
    public func createWebhookEndpoint(
        id: String, url: String, description: String, eventTypes: Set<WebhookEventType>, secret: String,
        for merchant: MerchantID, at time: UnixTime
    ) async throws(LedgerError) -> WebhookEndpoint {
        guard !eventTypes.isEmpty else { throw .invalidArgument("an endpoint listens to at least one event type") }
        return try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            let count = try await db.query(
                "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM webhook_endpoints WHERE merchant_id = ? AND deleted_at IS NULL",
                [.text(merchant.rawValue)]
            ).first
            guard try count?.integer("n") ?? 0 < Int64(Self.maximumWebhookEndpoints) else {
                throw LedgerError.invalidArgument(
                    "a merchant has at most \(Self.maximumWebhookEndpoints) webhook endpoints")
            }
            try await db.query(
                """
                INSERT INTO webhook_endpoints(id, merchant_id, url, description, event_types, secret, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(id), .text(merchant.rawValue), .text(url), .text(description),
                    .text(Self.typeNames(eventTypes)), .text(secret), .integer(time),
                ])
            return try await Self.webhookEndpoint(id, of: merchant, in: db).orThrow(.notFound("webhook endpoint \(id)"))
        }
    }

    /// `merchant`'s endpoints, newest first; deleted ones only when asked for.
    public func webhookEndpoints(of merchant: MerchantID, includingDeleted: Bool = false) async throws(LedgerError)
        -> [WebhookEndpoint]
    {
        try await store.transaction { db in
            var endpoints: [WebhookEndpoint] = []
            for row in try await db.query(
                "SELECT * FROM webhook_endpoints WHERE merchant_id = ? ORDER BY created_at DESC, id",
                [.text(merchant.rawValue)])
            {
                let endpoint = try Self.decodeWebhookEndpoint(row)
                if includingDeleted || endpoint.isActive { endpoints.append(endpoint) }
            }
            return endpoints
        }
    }

    /// `merchant`'s endpoint `id` (another merchant's is nil, like one that does not exist).
    public func webhookEndpoint(_ id: String, of merchant: MerchantID) async throws(LedgerError) -> WebhookEndpoint? {
        try await store.transaction { db in try await Self.webhookEndpoint(id, of: merchant, in: db) }
    }

    /// Gives `merchant`'s active endpoint `id` a new secret; the old one keeps signing beside it
    /// for `webhookPreviousSecretLifetime`. Nil when the merchant has no such active endpoint.
    public func rollWebhookSecret(_ id: String, of merchant: MerchantID, to secret: String, at time: UnixTime)
        async throws(LedgerError) -> WebhookEndpoint?
    {
        try await store.transaction { db in
            let rolled = try await db.query(
                """
                UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_expires_at = ?, secret = ?
                WHERE id = ? AND merchant_id = ? AND deleted_at IS NULL RETURNING id
                """,
                [
                    .integer(time + Self.webhookPreviousSecretLifetime), .text(secret), .text(id),
                    .text(merchant.rawValue),
                ])
            guard !rolled.isEmpty else { return nil }
            return try await Self.webhookEndpoint(id, of: merchant, in: db)
        }
    }

    /// Deletes `merchant`'s endpoint `id`: no new event goes to it, its pending deliveries stop,
    /// and its secrets are forgotten; its deliveries stay listed. Nil when there is no such
    /// active endpoint.
    public func deleteWebhookEndpoint(_ id: String, of merchant: MerchantID, at time: UnixTime)
        async throws(LedgerError) -> WebhookEndpoint?
    {
        try await store.transaction { db in
            let deleted = try await db.query(
                """
                UPDATE webhook_endpoints SET deleted_at = ?, secret = '', previous_secret = NULL,
                previous_secret_expires_at = NULL
                WHERE id = ? AND merchant_id = ? AND deleted_at IS NULL RETURNING id
                """, [.integer(time), .text(id), .text(merchant.rawValue)])
            guard !deleted.isEmpty else { return nil }
            try await db.query("UPDATE webhook_deliveries SET due_at = NULL WHERE endpoint_id = ?", [.text(id)])
            return try await Self.webhookEndpoint(id, of: merchant, in: db)
        }
    }

    /// THE entry point for events: records `type` for `merchant` with `object` as its
    /// `data.object`, and a delivery due now to each of the merchant's endpoints listening to it,
    /// inside the caller's transaction, so the event exists exactly when the change it reports
    /// committed. Nothing is written (nil) when no endpoint listens. Returns the event's id.
    static func recordWebhookEvent(
        _ type: WebhookEventType, merchant: MerchantID, object: [String: WebhookValue], at time: UnixTime,
        in db: any SQLTransaction
    ) async throws(LedgerError) -> String? {
        var listening: [String] = []
        for row in try await db.query(
            "SELECT id, event_types FROM webhook_endpoints WHERE merchant_id = ? AND deleted_at IS NULL ORDER BY id",
            [.text(merchant.rawValue)])
        where WebhookEventType.parse(try row.text("event_types"))?.contains(type) == true {
            listening.append(try row.text("id"))
        }
        guard !listening.isEmpty else { return nil }
        var generator = SystemRandomNumberGenerator()
        let id = "evt_" + (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }.hexString
        let body = try Self.webhookEventBody(id: id, type: type, merchant: merchant, object: object, at: time)
        try await db.query(
            "INSERT INTO webhook_events(id, merchant_id, event_type, body, created_at) VALUES (?, ?, ?, ?, ?)",
            [.text(id), .text(merchant.rawValue), .text(type.rawValue), .text(body), .integer(time)])
        for endpoint in listening {
            try await db.query(
                """
                INSERT INTO webhook_deliveries(event_id, endpoint_id, merchant_id, due_at, give_up_at, created_at)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(id), .text(endpoint), .text(merchant.rawValue), .integer(time),
                    .integer(time + Self.webhookRetryPeriod), .integer(time),
                ])
        }
        return id
    }

    /// Records an event that changes nothing else in the ledger (a terminal going offline), in a
    /// transaction of its own. An event caused by a change in the ledger is recorded in that
    /// change's transaction instead (`recordWebhookEvent(_:merchant:object:at:in:)`).
    @discardableResult
    public func recordWebhookEvent(
        _ type: WebhookEventType, merchant: MerchantID, object: [String: WebhookValue], at time: UnixTime
    ) async throws(LedgerError) -> String? {
        try await store.transaction { db in
            try await Self.recordWebhookEvent(type, merchant: merchant, object: object, at: time, in: db)
        }
    }

    /// The body every endpoint receives for an event: its id, type, creation time, merchant and
    /// `data.object`, as JSON with sorted keys.
    static func webhookEventBody(
        id: String, type: WebhookEventType, merchant: MerchantID, object: [String: WebhookValue], at time: UnixTime
    ) throws(LedgerError) -> String {
        let event: [String: WebhookValue] = [
            "id": .string(id), "type": .string(type.rawValue), "created": .integer(time),
            "merchant": .string(merchant.rawValue), "data": .object(["object": .object(object)]),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do { return String(decoding: try encoder.encode(event), as: UTF8.self) } catch {
            throw .invalidArgument("an event's body cannot be written as JSON: \(error)")
        }
    }

    /// The deliveries due at `time`, each claimed for `lease` seconds: another server process on
    /// the same database does not take it while this one tries (its due time moves to the
    /// lease's end, so a process that dies mid-delivery leaves it to the next attempt, by any
    /// process). A delivery due past its give-up time is given up here.
    public func claimDueWebhookDeliveries(at time: UnixTime, lease: Int64 = 60, limit: Int = 20)
        async throws(LedgerError) -> [ClaimedWebhookDelivery]
    {
        try await store.transaction { db in
            let rows = try await db.query(
                """
                SELECT d.*, e.event_type, e.body, p.url, p.secret, p.previous_secret, p.previous_secret_expires_at
                FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
                JOIN webhook_endpoints p ON p.id = d.endpoint_id
                WHERE d.due_at IS NOT NULL AND d.due_at <= ? AND p.deleted_at IS NULL
                ORDER BY d.due_at, d.id LIMIT ?
                """, [.integer(time), .integer(Int64(max(1, limit)))])
            var claimed: [ClaimedWebhookDelivery] = []
            for row in rows {
                let delivery = try Self.decodeWebhookDelivery(row, history: [])
                guard delivery.giveUpAt > time else {
                    try await db.query(
                        "UPDATE webhook_deliveries SET due_at = NULL WHERE id = ?", [.integer(delivery.id)])
                    continue
                }
                // Conditional on the due time read: of two processes, one moves it and the other
                // finds nothing to update.
                let updated = try await db.query(
                    "UPDATE webhook_deliveries SET due_at = ? WHERE id = ? AND due_at = ? RETURNING id",
                    [.integer(time + lease), .integer(delivery.id), .integer(delivery.dueAt ?? time)])
                guard !updated.isEmpty else { continue }
                var secrets = [try row.text("secret")]
                if let previous = try row.optionalText("previous_secret"),
                    (try row.optionalInteger("previous_secret_expires_at") ?? 0) > time
                {
                    secrets.append(previous)
                }
                claimed.append(
                    ClaimedWebhookDelivery(
                        delivery: delivery, url: try row.text("url"), body: try row.text("body"), secrets: secrets))
            }
            return claimed
        }
    }

    /// Records an attempt's answer. A 2xx ends the delivery; anything else makes it due again at
    /// `retryAt`, or gives it up when that is nil or past its give-up time.
    public func recordWebhookAttempt(_ deliveryID: Int64, _ attempt: WebhookAttempt, retryAt: UnixTime?)
        async throws(LedgerError)
    {
        try await store.transaction { db in
            try await db.query(
                """
                INSERT INTO webhook_attempts(delivery_id, attempted_at, status, response_body, latency_ms, error)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .integer(deliveryID), .integer(attempt.attemptedAt),
                    attempt.status.map { .integer(Int64($0)) } ?? .null,
                    .text(String(attempt.responseBody.prefix(Self.webhookResponseBodyLimit))),
                    .integer(attempt.latencyMilliseconds),
                    attempt.error.map { .text(String($0.prefix(1000))) } ?? .null,
                ])
            if attempt.succeeded {
                try await db.query(
                    "UPDATE webhook_deliveries SET due_at = NULL, delivered_at = ?, attempts = attempts + 1 WHERE id = ?",
                    [.integer(attempt.attemptedAt), .integer(deliveryID)])
            } else {
                let giveUpAt = try await db.query(
                    "SELECT give_up_at FROM webhook_deliveries WHERE id = ?", [.integer(deliveryID)]
                ).first.map { row throws(LedgerError) in try row.integer("give_up_at") }
                let due: SQLValue = retryAt.flatMap { $0 < (giveUpAt ?? 0) ? .integer($0) : nil } ?? .null
                try await db.query(
                    "UPDATE webhook_deliveries SET attempts = attempts + 1, due_at = ? WHERE id = ?",
                    [due, .integer(deliveryID)])
            }
        }
    }

    /// Makes `merchant`'s delivery `id` due now, whatever its state (a person asked for it again);
    /// retries then run for another `webhookRetryPeriod`. Nil when the merchant has no such
    /// delivery or its endpoint was deleted.
    public func resendWebhookDelivery(_ id: Int64, of merchant: MerchantID, at time: UnixTime)
        async throws(LedgerError) -> WebhookDelivery?
    {
        try await store.transaction { db in
            let updated = try await db.query(
                """
                UPDATE webhook_deliveries SET due_at = ?, give_up_at = ?
                WHERE id = ? AND merchant_id = ?
                AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE deleted_at IS NULL) RETURNING id
                """,
                [.integer(time), .integer(time + Self.webhookRetryPeriod), .integer(id), .text(merchant.rawValue)])
            guard !updated.isEmpty else { return nil }
            return try await Self.webhookDelivery(id, of: merchant, in: db)
        }
    }

    /// `merchant`'s deliveries, newest first, optionally of one endpoint, each with its latest
    /// attempt's answer.
    public func webhookDeliveries(of merchant: MerchantID, endpoint: String? = nil, limit: Int = 50)
        async throws(LedgerError) -> [WebhookDelivery]
    {
        guard (1...200).contains(limit) else { throw .invalidArgument("a page holds 1 to 200 deliveries") }
        return try await store.transaction { db in
            var parameters: [SQLValue] = [.text(merchant.rawValue)]
            if let endpoint { parameters.append(.text(endpoint)) }
            parameters.append(.integer(Int64(limit)))
            var deliveries: [WebhookDelivery] = []
            for row in try await db.query(
                """
                SELECT d.*, e.event_type FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
                WHERE d.merchant_id = ? \(endpoint == nil ? "" : "AND d.endpoint_id = ?")
                ORDER BY d.created_at DESC, d.id DESC LIMIT ?
                """, parameters)
            {
                let id = try row.integer("id")
                deliveries.append(
                    try Self.decodeWebhookDelivery(row, history: try await Self.webhookAttempts(id, limit: 1, in: db)))
            }
            return deliveries
        }
    }

    /// `merchant`'s delivery `id` with every attempt's answer, newest first; nil for none.
    public func webhookDelivery(_ id: Int64, of merchant: MerchantID) async throws(LedgerError) -> WebhookDelivery? {
        try await store.transaction { db in try await Self.webhookDelivery(id, of: merchant, in: db) }
    }

    /// The body sent for `merchant`'s event `id`; nil for none.
    public func webhookEventBody(_ id: String, of merchant: MerchantID) async throws(LedgerError) -> String? {
        try await store.transaction { db in
            try await db.query(
                "SELECT body FROM webhook_events WHERE id = ? AND merchant_id = ?",
                [.text(id), .text(merchant.rawValue)]
            ).first.map { row throws(LedgerError) in try row.text("body") }
        }
    }

    /// How long finished deliveries (delivered or given up), their answers and their events are
    /// kept: 30 days, as Stripe keeps events.
    public static let webhookHistoryRetention: Int64 = 30 * 86_400

    /// Forgets deliveries that finished and were made before `time`, their attempts, and the
    /// events left without a delivery. A delivery still due is kept, however old.
    public func pruneWebhookHistory(before time: UnixTime) async throws(LedgerError) {
        try await store.transaction { db in
            let old = "SELECT id FROM webhook_deliveries WHERE due_at IS NULL AND created_at < ?"
            try await db.query("DELETE FROM webhook_attempts WHERE delivery_id IN (\(old))", [.integer(time)])
            try await db.query(
                "DELETE FROM webhook_deliveries WHERE due_at IS NULL AND created_at < ?", [.integer(time)])
            try await db.query(
                """
                DELETE FROM webhook_events WHERE created_at < ?
                AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id)
                """, [.integer(time)])
        }
    }

    static func webhookDelivery(_ id: Int64, of merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError) -> WebhookDelivery?
    {
        guard
            let row = try await db.query(
                """
                SELECT d.*, e.event_type FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
                WHERE d.id = ? AND d.merchant_id = ?
                """, [.integer(id), .text(merchant.rawValue)]
            ).first
        else { return nil }
        return try decodeWebhookDelivery(row, history: try await webhookAttempts(id, limit: 100, in: db))
    }

    static func webhookAttempts(_ deliveryID: Int64, limit: Int, in db: any SQLTransaction)
        async throws(LedgerError) -> [WebhookAttempt]
    {
        var attempts: [WebhookAttempt] = []
        for row in try await db.query(
            "SELECT * FROM webhook_attempts WHERE delivery_id = ? ORDER BY id DESC LIMIT ?",
            [.integer(deliveryID), .integer(Int64(limit))])
        {
            attempts.append(
                WebhookAttempt(
                    attemptedAt: try row.integer("attempted_at"),
                    status: try row.optionalInteger("status").map(Int.init),
                    responseBody: try row.text("response_body"), latencyMilliseconds: try row.integer("latency_ms"),
                    error: try row.optionalText("error")))
        }
        return attempts
    }

    static func webhookEndpoint(_ id: String, of merchant: MerchantID, in db: any SQLTransaction)
        async throws(LedgerError) -> WebhookEndpoint?
    {
        try await db.query(
            "SELECT * FROM webhook_endpoints WHERE id = ? AND merchant_id = ?", [.text(id), .text(merchant.rawValue)]
        ).first.map { row throws(LedgerError) in try decodeWebhookEndpoint(row) }
    }

    static func typeNames(_ types: Set<WebhookEventType>) -> String {
        types.sorted().map(\.rawValue).joined(separator: " ")
    }

    static func decodeWebhookEndpoint(_ row: SQLRow) throws(LedgerError) -> WebhookEndpoint {
        let names = try row.text("event_types")
        guard let types = WebhookEventType.parse(names) else {
            throw .corruptRow(column: "event_types", reason: "\(names) names an event type this version does not know")
        }
        return WebhookEndpoint(
            id: try row.text("id"), merchantID: MerchantID(rawValue: try row.text("merchant_id")),
            url: try row.text("url"), description: try row.text("description"), eventTypes: types,
            createdAt: try row.integer("created_at"),
            previousSecretExpiresAt: try row.optionalInteger("previous_secret_expires_at"),
            deletedAt: try row.optionalInteger("deleted_at"))
    }

    static func decodeWebhookDelivery(_ row: SQLRow, history: [WebhookAttempt]) throws(LedgerError)
        -> WebhookDelivery
    {
        let name = try row.text("event_type")
        guard let type = WebhookEventType(rawValue: name) else {
            throw .corruptRow(column: "event_type", reason: "\(name) is not an event type this version knows")
        }
        return WebhookDelivery(
            id: try row.integer("id"), eventID: try row.text("event_id"), eventType: type,
            endpointID: try row.text("endpoint_id"), merchantID: MerchantID(rawValue: try row.text("merchant_id")),
            dueAt: try row.optionalInteger("due_at"), giveUpAt: try row.integer("give_up_at"),
            attempts: try row.integer("attempts"), deliveredAt: try row.optionalInteger("delivered_at"),
            createdAt: try row.integer("created_at"), history: history)
    }
}

extension Ledger {
    /// The events a stored payment causes, in its transaction: `payment.succeeded` or
    /// `payment.declined`, and `intent.succeeded` when it paid one of the merchant's intents.
    /// Redemptions move no money and cause none.
    static func recordPaymentEvents(_ id: PaymentID, merchant: MerchantID, at time: UnixTime, in db: any SQLTransaction)
        async throws(LedgerError)
    {
        // Most merchants have no endpoint: one indexed read, and the payment goes on.
        guard
            !(try await db.query(
                "SELECT id FROM webhook_endpoints WHERE merchant_id = ? AND deleted_at IS NULL LIMIT 1",
                [.text(merchant.rawValue)]
            ).isEmpty),
            let payment = try await stored(id, in: db)?.transaction, payment.result.transactionType == .payment
        else { return }
        let approved = payment.result.outcome.isApproved
        _ = try await recordWebhookEvent(
            approved ? .paymentSucceeded : .paymentDeclined, merchant: merchant, object: paymentObject(payment),
            at: time, in: db)
        if approved, let intent = try await paymentIntent(id, of: merchant, at: time, in: db) {
            _ = try await recordWebhookEvent(
                .intentSucceeded, merchant: merchant, object: intentObject(intent), at: time, in: db)
        }
    }

    /// A payment as an event's `data.object`: the fields the API's merchant transaction has.
    static func paymentObject(_ payment: LedgerTransaction) -> [String: WebhookValue] {
        let result = payment.result
        var object: [String: WebhookValue] = [
            "object": .string("payment"), "paymentId": .string(result.paymentID.bytes.hexString),
            "reference": .integer(payment.reference),
            "outcome": .string(result.outcome.isApproved ? "approved" : "declined"),
            "amount": .integer(result.amount.minorUnits), "tip": .integer(result.tip.minorUnits),
            "currency": .string(result.amount.currency.code), "registerUser": .string(payment.registerUser),
            "terminalKeyId": .string(payment.terminalKeyID.bytes.hexString), "settledAt": .integer(result.settledAt),
            "orderReference": payment.orderReference.map(WebhookValue.string) ?? .null,
            "offline": .bool(payment.offline != nil),
        ]
        if case .declined(let code, let reason) = result.outcome {
            object["declineCode"] = .integer(Int64(code.rawValue))
            object["declineReason"] = .string(reason)
        }
        return object
    }

    /// A payment intent as an event's `data.object`: the fields the API's payment intent has.
    static func intentObject(_ intent: PaymentIntent) -> [String: WebhookValue] {
        let metadata = (try? JSONDecoder().decode([String: String].self, from: Data(intent.metadata.utf8))) ?? [:]
        return [
            "object": .string("payment_intent"), "id": .string(intent.paymentID.bytes.hexString),
            "status": .string(intent.status.rawValue), "amount": .integer(intent.amount.minorUnits),
            "currency": .string(intent.amount.currency.code), "reference": .string(intent.orderReference),
            "metadata": .object(metadata.mapValues(WebhookValue.string)),
            "terminalId": intent.terminalID.map { .string($0.rawValue) } ?? .null,
            "createdAt": .integer(intent.createdAt), "expiresAt": .integer(intent.expiresAt),
            "canceledAt": intent.canceledAt.map(WebhookValue.integer) ?? .null,
        ]
    }

    /// A refund as an event's `data.object`: the fields the API's refund has.
    static func refundObject(_ refund: Refund) -> [String: WebhookValue] {
        [
            "object": .string("refund"), "refundId": .string(refund.refundID.rawValue),
            "reference": .integer(refund.reference), "paymentId": .string(refund.paymentID.bytes.hexString),
            "amount": .integer(refund.amount.minorUnits), "currency": .string(refund.amount.currency.code),
            "destination": .string(refund.destination.rawValue), "createdAt": .integer(refund.createdAt),
        ]
    }
}
