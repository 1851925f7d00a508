import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger

/// A merchant's secret API key: `sk_` and 32 random bytes (URL-safe base64). Only its SHA-256 is
/// stored, so a copy of the database authenticates nobody; a list shows its first and last
/// four characters.
struct APIKeySecret: Sendable {
    static let prefix = "sk_"
    let secret: String
    let stored: NewAPIKey

    init() {
        let secret = Self.prefix + DashboardSecurity.randomToken()
        self.secret = secret
        var generator = SystemRandomNumberGenerator()
        let id = "key_" + (0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) }.hexString
        stored = NewAPIKey(
            id: id, secretHash: DashboardSecurity.hash(secret), secretPrefix: String(secret.prefix(Self.prefix.count + 4)),
            secretLast4: String(secret.suffix(4)))
    }

    /// The longest text taken for a secret: longer is no key of ours (and is not hashed).
    static let maximumLength = 128
}

extension APIHandler {
    /// The merchant whose active key `token` is, if one of `scopes` is the key's. An unknown,
    /// revoked or rolled-away key is `unauthenticated` (401); a valid key without the scope,
    /// `insufficient_scope` (403).
    func apiKeyCaller(token: String, scopes: Set<APIKeyScope>) async throws -> MerchantCaller {
        let refused = APIError(
            .unauthenticated,
            "this API key is unknown, revoked or was rolled; use the key's current secret, or make one on the dashboard's API keys page",
            headers: [.wwwAuthenticate: "Bearer"])
        guard token.utf8.count <= APIKeySecret.maximumLength else { throw refused }
        let hash = DashboardSecurity.hash(token)
        guard let key = try await ledger.apiKey(secretHash: hash, usedAt: now()), key.isActive else { throw refused }
        guard !scopes.isDisjoint(with: key.scopes) else {
            let needed = scopes.sorted().map(\.rawValue).joined(separator: " or ")
            throw APIError(
                .insufficientScope,
                scopes.isEmpty
                    ? "an API key cannot call this operation; it needs the merchant admin's session or a terminal's key"
                    : "this API key lacks the scope this operation needs (\(needed)); make a key with it on the dashboard's API keys page"
            )
        }
        return MerchantCaller(merchantID: key.merchantID, terminal: nil, apiKey: key)
    }

    func listApiKeys(_ input: Operations.ListApiKeys.Input) async throws -> Operations.ListApiKeys.Output {
        let caller = try await merchantAdmin(for: "managing API keys")
        let keys = try await ledger.apiKeys(of: caller.merchantID)
        return .ok(.init(body: .json(.init(apiKeys: keys.map(Self.apiKey)))))
    }

    func createApiKey(_ input: Operations.CreateApiKey.Input) async throws -> Operations.CreateApiKey.Output {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        let caller = try await merchantAdmin(for: "managing API keys")
        let name = try Self.checkAPIKeyName(body.name)
        let scopes = Set(body.scopes.map(Self.scope))
        guard !scopes.isEmpty else { throw APIError(.invalidRequest, "scopes must name at least one scope") }
        let secret = APIKeySecret()
        let key = try await ledger.createAPIKey(
            secret.stored, name: name, scopes: scopes, for: caller.merchantID, at: now())
        metrics.record(event: "api_key_created")
        RequestScope.current?.logger.notice("API key created", metadata: ["key": "\(key.id)", "by": "\(caller)"])
        return .created(.init(body: .json(.init(apiKey: Self.apiKey(key), secret: secret.secret))))
    }

    func rollApiKey(_ input: Operations.RollApiKey.Input) async throws -> Operations.RollApiKey.Output {
        let caller = try await merchantAdmin(for: "managing API keys")
        let secret = APIKeySecret()
        guard
            let key = try await ledger.rollAPIKey(
                input.path.keyId, of: caller.merchantID, to: secret.stored, at: now())
        else { throw Self.noAPIKey(input.path.keyId, active: true) }
        metrics.record(event: "api_key_rolled")
        RequestScope.current?.logger.notice(
            "API key rolled", metadata: ["key": "\(input.path.keyId)", "new": "\(key.id)", "by": "\(caller)"])
        return .created(.init(body: .json(.init(apiKey: Self.apiKey(key), secret: secret.secret))))
    }

    func revokeApiKey(_ input: Operations.RevokeApiKey.Input) async throws -> Operations.RevokeApiKey.Output {
        let caller = try await merchantAdmin(for: "managing API keys")
        guard let key = try await ledger.revokeAPIKey(input.path.keyId, of: caller.merchantID, at: now()) else {
            throw Self.noAPIKey(input.path.keyId, active: false)
        }
        metrics.record(event: "api_key_revoked")
        RequestScope.current?.logger.notice("API key revoked", metadata: ["key": "\(key.id)", "by": "\(caller)"])
        return .ok(.init(body: .json(Self.apiKey(key))))
    }

    /// A key's name: 1 to 64 characters of printable text, trimmed.
    static func checkAPIKeyName(_ text: String) throws -> String {
        let name = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, name.unicodeScalars.count <= 64, !name.containsControlOrFormatCharacters else {
            throw APIError(.invalidRequest, "name must be 1 to 64 characters of printable text")
        }
        return name
    }

    static func noAPIKey(_ id: String, active: Bool) -> APIError {
        APIError(.apiKeyNotFound, "this merchant has no \(active ? "active " : "")API key \(id)")
    }

    static func scope(_ scope: Components.Schemas.ApiKeyScope) -> APIKeyScope {
        switch scope {
        case .intents_colon_write: .intentsWrite
        case .transactions_colon_read: .transactionsRead
        case .refunds_colon_write: .refundsWrite
        case .webhooks_colon_write: .webhooksWrite
        }
    }

    static func scope(_ scope: APIKeyScope) -> Components.Schemas.ApiKeyScope {
        switch scope {
        case .intentsWrite: .intents_colon_write
        case .transactionsRead: .transactions_colon_read
        case .refundsWrite: .refunds_colon_write
        case .webhooksWrite: .webhooks_colon_write
        }
    }

    static func apiKey(_ key: APIKeyRecord) -> Components.Schemas.ApiKey {
        .init(
            id: key.id, name: key.name, scopes: key.scopes.sorted().map(scope), redactedSecret: key.redactedSecret,
            createdAt: key.createdAt, lastUsedAt: key.lastUsedAt, revokedAt: key.revokedAt, replacedBy: key.replacedBy)
    }
}
