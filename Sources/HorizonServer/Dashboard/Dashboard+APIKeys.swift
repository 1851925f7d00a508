import HTTPTypes
import HorizonCore
import HorizonLedger
import Hummingbird

/// The API keys page: the merchant's secret keys for its own systems, made with chosen scopes
/// (the secret shown once, on the page that answers the form), rolled and revoked after a
/// confirmation, as the API's admin operations do.
extension Dashboard {
    /// The scopes the form offers, with the checkbox each has and what it allows.
    static let scopeChoices: [(scope: APIKeyScope, field: String, meaning: String)] = [
        (.intentsWrite, "scope_intents", "create, read and cancel payment intents"),
        (.transactionsRead, "scope_transactions", "read transactions, refunds and payment intents"),
        (.refundsWrite, "scope_refunds", "refund payments"),
        (.webhooksWrite, "scope_webhooks", "manage webhook endpoints, read and resend their deliveries"),
    ]

    func apiKeysPage(_ request: Request) async throws -> Response {
        guard let signedIn = try await session(of: request) else { return Self.redirect("/dashboard/sign-in") }
        return try await apiKeys(signedIn, notice: Self.notice(request))
    }

    func apiKeys(
        _ signedIn: SignedIn, notice: String? = nil, problem: String? = nil, status: HTTPResponse.Status = .ok,
        newName: String = "", checked: Set<APIKeyScope> = []
    ) async throws -> Response {
        let keys = try await ledger.apiKeys(of: signedIn.merchant.id)
        var layout = Layout.signedIn("API keys", signedIn, current: \.onAPIKeys, notice: notice)
        layout.problem = problem
        let clock = MerchantClock(identifier: signedIn.merchant.timeZone)
        return try page(
            "api-keys",
            APIKeysPage(
                layout: layout, csrf: signedIn.session.csrfSecret, zone: clock.name,
                keys: keys.map { key in
                    APIKeyRow(
                        id: key.id, name: key.name, secret: key.redactedSecret,
                        scopes: key.scopes.sorted().map(\.rawValue).joined(separator: ", "),
                        created: clock.format(key.createdAt), lastUsed: key.lastUsedAt.map(clock.format) ?? "never",
                        status: key.revokedAt.map { "\(key.replacedBy == nil ? "revoked" : "rolled") \(clock.format($0))" }
                            ?? "active",
                        active: key.isActive)
                }, newName: newName,
                scopes: Self.scopeChoices.map {
                    ScopeChoice(field: $0.field, scope: $0.scope.rawValue, meaning: $0.meaning, checked: checked.contains($0.scope))
                }), status: status)
    }

    func createAPIKey(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        let name = form.text("name") ?? ""
        let scopes = Set(Self.scopeChoices.filter { form[$0.field] == "yes" }.map(\.scope))
        func refuse(_ problem: String) async throws -> Response {
            try await apiKeys(signedIn, problem: problem, status: .badRequest, newName: name, checked: scopes)
        }
        let checkedName: String
        do { checkedName = try APIHandler.checkAPIKeyName(name) } catch {
            return try await refuse("Give the key a name of 1 to 64 characters of printable text.")
        }
        guard !scopes.isEmpty else { return try await refuse("Choose at least one scope for the key.") }
        let secret = APIKeySecret()
        let key = try await ledger.createAPIKey(
            secret.stored, name: checkedName, scopes: scopes, for: signedIn.merchant.id, at: now())
        RequestScope.current?.logger.notice("API key created on the dashboard", metadata: ["key": "\(key.id)"])
        return try secretPage(signedIn, key: key, secret: secret.secret, title: "The new API key")
    }

    func rollAPIKey(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        // Another merchant's key is "not found", exactly like one that does not exist.
        guard let id = form["id"], let key = try await activeKey(id, of: signedIn) else {
            return try await apiKeys(signedIn, problem: "That key does not exist or is no longer active.", status: .notFound)
        }
        guard form["confirm"] == "yes" else {
            return try confirmation(
                signedIn, key: key, question: "Roll the API key \(key.name) (\(key.redactedSecret))?",
                consequence:
                    "A new secret with the same name and scopes is made and shown once; the current secret is refused from now on, so put the new one into your system right away.",
                action: "/dashboard/api-keys/roll", button: "Roll \(key.name)")
        }
        let secret = APIKeySecret()
        guard let new = try await ledger.rollAPIKey(key.id, of: signedIn.merchant.id, to: secret.stored, at: now()) else {
            return try await apiKeys(signedIn, problem: "That key is no longer active.", status: .notFound)
        }
        RequestScope.current?.logger.notice(
            "API key rolled on the dashboard", metadata: ["key": "\(key.id)", "new": "\(new.id)"])
        return try secretPage(signedIn, key: new, secret: secret.secret, title: "The rolled API key")
    }

    func revokeAPIKey(_ request: Request) async throws -> Response {
        let signedIn = try await requireSession(request)
        let form = try await checkedForm(request, signedIn)
        guard let id = form["id"], let key = try await activeKey(id, of: signedIn) else {
            return try await apiKeys(signedIn, problem: "That key does not exist or is no longer active.", status: .notFound)
        }
        guard form["confirm"] == "yes" else {
            return try confirmation(
                signedIn, key: key, question: "Revoke the API key \(key.name) (\(key.redactedSecret))?",
                consequence: "Every request with its secret is refused from now on. This cannot be undone.",
                action: "/dashboard/api-keys/revoke", button: "Revoke \(key.name)")
        }
        _ = try await ledger.revokeAPIKey(key.id, of: signedIn.merchant.id, at: now())
        RequestScope.current?.logger.notice("API key revoked on the dashboard", metadata: ["key": "\(key.id)"])
        return Self.redirect("/dashboard/api-keys?done=key-revoked")
    }

    private func activeKey(_ id: String, of signedIn: SignedIn) async throws -> APIKeyRecord? {
        try await ledger.apiKeys(of: signedIn.merchant.id).first { $0.id == id && $0.isActive }
    }

    private func confirmation(
        _ signedIn: SignedIn, key: APIKeyRecord, question: String, consequence: String, action: String,
        button: String
    ) throws -> Response {
        try page(
            "confirm",
            ConfirmPage(
                layout: .signedIn("Confirm", signedIn, current: \.onAPIKeys, notice: nil), question: question,
                consequence: consequence, action: action,
                fields: [
                    FormField(name: "csrf", value: signedIn.session.csrfSecret), FormField(name: "id", value: key.id),
                    FormField(name: "confirm", value: "yes"),
                ], button: button, cancelURL: "/dashboard/api-keys"))
    }

    private func secretPage(_ signedIn: SignedIn, key: APIKeyRecord, secret: String, title: String) throws -> Response {
        try page(
            "api-key-secret",
            APIKeySecretPage(
                layout: .signedIn(title, signedIn, current: \.onAPIKeys, notice: nil), name: key.name,
                scopes: key.scopes.sorted().map(\.rawValue).joined(separator: ", "), secret: secret),
            status: .created)
    }
}

struct APIKeysPage {
    var layout: Layout
    var csrf: String
    var zone: String
    var keys: [APIKeyRow]
    var newName: String
    var scopes: [ScopeChoice]
}

struct APIKeyRow {
    var id: String
    var name: String
    var secret: String
    var scopes: String
    var created: String
    var lastUsed: String
    var status: String
    var active: Bool
}

struct ScopeChoice {
    var field: String
    var scope: String
    var meaning: String
    var checked: Bool
}

struct APIKeySecretPage {
    var layout: Layout
    var name: String
    var scopes: String
    var secret: String
}
