import HorizonCore

/// What a merchant's secret API key lets its holder do. A key carries only the scopes it was
/// made with; every operation that accepts a key names the scope it needs.
public enum APIKeyScope: String, Sendable, CaseIterable, Comparable {
    /// Create, read and cancel payment intents.
    case intentsWrite = "intents:write"
    /// Read transactions, their refunds and payment intents.
    case transactionsRead = "transactions:read"
    /// Refund payments.
    case refundsWrite = "refunds:write"
    /// Manage webhook endpoints; read and resend their deliveries.
    case webhooksWrite = "webhooks:write"

    public static func < (lhs: APIKeyScope, rhs: APIKeyScope) -> Bool {
        allCases.firstIndex(of: lhs) ?? 0 < allCases.firstIndex(of: rhs) ?? 0
    }

    /// Scopes from their stored or typed names (space- or comma-separated); nil if one is unknown.
    public static func parse(_ text: String) -> Set<APIKeyScope>? {
        var scopes = Set<APIKeyScope>()
        for name in text.split(whereSeparator: { $0 == " " || $0 == "," }) {
            guard let scope = APIKeyScope(rawValue: String(name)) else { return nil }
            scopes.insert(scope)
        }
        return scopes
    }
}

/// A merchant's secret API key as the ledger keeps it: never the secret, only its hash and
/// enough of its text (first and last characters) for a person to tell keys apart.
public struct APIKeyRecord: Sendable, Equatable {
    public let id: String
    public let merchantID: MerchantID
    public let name: String
    public let secretPrefix: String
    public let secretLast4: String
    public let scopes: Set<APIKeyScope>
    public let createdAt: UnixTime
    public let lastUsedAt: UnixTime?
    public let revokedAt: UnixTime?
    /// The key that replaced this one when it was rolled.
    public let replacedBy: String?

    public var isActive: Bool { revokedAt == nil }

    /// The secret as a list shows it: its prefix and last four characters.
    public var redactedSecret: String { secretPrefix + "…" + secretLast4 }
}

/// A new key's stored parts; the secret itself is given to its owner once and never stored.
public struct NewAPIKey: Sendable {
    public let id: String
    public let secretHash: [UInt8]
    public let secretPrefix: String
    public let secretLast4: String

    public init(id: String, secretHash: [UInt8], secretPrefix: String, secretLast4: String) {
        self.id = id
        self.secretHash = secretHash
        self.secretPrefix = secretPrefix
        self.secretLast4 = secretLast4
    }
}

extension Ledger {
    /// At most this many keys, active or not, per merchant: a list a person can read.
    public static let maximumAPIKeys = 100

    /// Adds a key for `merchant` with a name and scopes.
    public func createAPIKey(
        _ key: NewAPIKey, name: String, scopes: Set<APIKeyScope>, for merchant: MerchantID, at time: UnixTime
    ) async throws(LedgerError) -> APIKeyRecord {
        guard key.secretHash.count == 32 else { throw .invalidArgument("a key's hash is 32 bytes (SHA-256)") }
        guard !scopes.isEmpty else { throw .invalidArgument("a key needs at least one scope") }
        return try await store.transaction { db in
            _ = try await Self.merchant(merchant, in: db)
            let count = try await db.query(
                "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM api_keys WHERE merchant_id = ?", [.text(merchant.rawValue)]
            ).first
            guard try count?.integer("n") ?? 0 < Int64(Self.maximumAPIKeys) else {
                throw LedgerError.invalidArgument("a merchant has at most \(Self.maximumAPIKeys) API keys; revoked ones count too")
            }
            return try await Self.insertAPIKey(key, name: name, scopes: scopes, merchant: merchant, at: time, in: db)
        }
    }

    /// `merchant`'s keys, newest first, revoked ones too.
    public func apiKeys(of merchant: MerchantID) async throws(LedgerError) -> [APIKeyRecord] {
        try await store.transaction { db in
            var keys: [APIKeyRecord] = []
            for row in try await db.query(
                "SELECT * FROM api_keys WHERE merchant_id = ? ORDER BY created_at DESC, id", [.text(merchant.rawValue)])
            {
                keys.append(try Self.decodeAPIKey(row))
            }
            return keys
        }
    }

    /// The key whose secret hashes to `secretHash`, revoked or not (the caller refuses a revoked
    /// one), noting when it was last used (at most once a minute, so requests do not all write).
    public func apiKey(secretHash: [UInt8], usedAt time: UnixTime) async throws(LedgerError) -> APIKeyRecord? {
        try await store.transaction { db in
            guard
                let row = try await db.query("SELECT * FROM api_keys WHERE secret_hash = ?", [.blob(secretHash)]).first
            else { return nil }
            let key = try Self.decodeAPIKey(row)
            if key.isActive, (key.lastUsedAt ?? Int64.min) < time - 60 {
                try await db.query("UPDATE api_keys SET last_used_at = ? WHERE id = ?", [.integer(time), .text(key.id)])
            }
            return key
        }
    }

    /// Revokes `merchant`'s key `id`; nil when the merchant has no such key (another merchant's
    /// key is not found). Revoking a revoked key changes nothing and returns it.
    public func revokeAPIKey(_ id: String, of merchant: MerchantID, at time: UnixTime) async throws(LedgerError)
        -> APIKeyRecord?
    {
        try await store.transaction { db in
            try await db.query(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND merchant_id = ? AND revoked_at IS NULL",
                [.integer(time), .text(id), .text(merchant.rawValue)])
            return try await Self.apiKey(id, of: merchant, in: db)
        }
    }

    /// Replaces `merchant`'s active key `id` by `key` with the same name and scopes: the old
    /// secret is refused from now on. Nil when the merchant has no such active key.
    public func rollAPIKey(_ id: String, of merchant: MerchantID, to key: NewAPIKey, at time: UnixTime)
        async throws(LedgerError) -> APIKeyRecord?
    {
        guard key.secretHash.count == 32 else { throw .invalidArgument("a key's hash is 32 bytes (SHA-256)") }
        return try await store.transaction { db in
            guard
                let row = try await db.query(
                    """
                    UPDATE api_keys SET revoked_at = ?, replaced_by = ?
                    WHERE id = ? AND merchant_id = ? AND revoked_at IS NULL RETURNING *
                    """, [.integer(time), .text(key.id), .text(id), .text(merchant.rawValue)]
                ).first
            else { return nil }
            let old = try Self.decodeAPIKey(row)
            return try await Self.insertAPIKey(
                key, name: old.name, scopes: old.scopes, merchant: merchant, at: time, in: db)
        }
    }

    static func insertAPIKey(
        _ key: NewAPIKey, name: String, scopes: Set<APIKeyScope>, merchant: MerchantID, at time: UnixTime,
        in db: any SQLTransaction
    ) async throws(LedgerError) -> APIKeyRecord {
        try await db.query(
            """
            INSERT INTO api_keys(id, merchant_id, name, secret_hash, secret_prefix, secret_last4, scopes, created_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(key.id), .text(merchant.rawValue), .text(name), .blob(key.secretHash), .text(key.secretPrefix),
                .text(key.secretLast4), .text(scopes.sorted().map(\.rawValue).joined(separator: " ")), .integer(time),
            ])
        return try await apiKey(key.id, of: merchant, in: db).orThrow(.notFound("API key \(key.id)"))
    }

    static func apiKey(_ id: String, of merchant: MerchantID, in db: any SQLTransaction) async throws(LedgerError)
        -> APIKeyRecord?
    {
        try await db.query(
            "SELECT * FROM api_keys WHERE id = ? AND merchant_id = ?", [.text(id), .text(merchant.rawValue)]
        ).first.map { row throws(LedgerError) in try decodeAPIKey(row) }
    }

    static func decodeAPIKey(_ row: SQLRow) throws(LedgerError) -> APIKeyRecord {
        let names = try row.text("scopes")
        guard let scopes = APIKeyScope.parse(names) else {
            throw .corruptRow(column: "scopes", reason: "\(names) names a scope this version does not know")
        }
        return APIKeyRecord(
            id: try row.text("id"), merchantID: MerchantID(rawValue: try row.text("merchant_id")),
            name: try row.text("name"), secretPrefix: try row.text("secret_prefix"),
            secretLast4: try row.text("secret_last4"), scopes: scopes, createdAt: try row.integer("created_at"),
            lastUsedAt: try row.optionalInteger("last_used_at"), revokedAt: try row.optionalInteger("revoked_at"),
            replacedBy: try row.optionalText("replaced_by"))
    }
}
