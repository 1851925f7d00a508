import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger

/// Who calls the merchant service: an active terminal (signed with its key), the merchant's
/// admin (a session from `POST /v1/merchant/sessions`, as `Authorization: Bearer`), or one of
/// the merchant's secret API keys (`Authorization: Bearer sk_…`) acting with its scopes.
struct MerchantCaller: Sendable, CustomStringConvertible {
    let merchantID: MerchantID
    /// The calling terminal; nil for an admin session or an API key.
    let terminal: TerminalRecord?
    /// The calling API key; nil for a terminal or an admin session.
    var apiKey: APIKeyRecord? = nil

    var description: String {
        if let terminal { return "terminal \(terminal.id)" }
        if let apiKey { return "API key \(apiKey.id) of \(merchantID)" }
        return "admin of \(merchantID)"
    }
}

/// The merchant's admin signs in for the merchant service without a terminal. The
/// session is a dashboard session (same table, at most the same 8 h, same sign-in limits): one
/// sign-in, whichever door it came through.
extension APIHandler {
    /// The caller of a merchant-service operation: the signing terminal if the request is signed,
    /// else the admin whose session token it carries, else an API key if the operation accepts
    /// one (`keyScopes`: any of these lets the key in; empty: no key may call it).
    func merchantCaller(keyScopes: Set<APIKeyScope> = []) async throws -> MerchantCaller {
        if RequestScope.current?.signer != nil {
            let terminal = try await signingTerminal()
            return MerchantCaller(merchantID: terminal.merchantID, terminal: terminal)
        }
        if let token = RequestScope.current?.bearerToken, token.hasPrefix(APIKeySecret.prefix) {
            return try await apiKeyCaller(token: token, scopes: keyScopes)
        }
        // Both ways in are offered: a terminal's signature, or the admin's session.
        let challenges = RequestSignature.scheme + ", Bearer"
        guard let token = RequestScope.current?.bearerToken else {
            throw APIError(
                .unauthenticated,
                "this operation needs a request signed with the terminal's key (HorizonSignature) or the merchant admin's session (Authorization: Bearer, from POST /v1/merchant/sessions)",
                headers: [.wwwAuthenticate: challenges])
        }
        guard let session = try await ledger.dashboardSession(tokenHash: DashboardSecurity.hash(token), at: now())
        else {
            throw APIError(
                .unauthenticated,
                "this operation needs a request signed with the terminal's key or a current admin session; this admin session is unknown or has ended: sign in again (POST /v1/merchant/sessions)",
                headers: [.wwwAuthenticate: challenges])
        }
        return MerchantCaller(merchantID: session.merchantID, terminal: nil)
    }

    /// The merchant's admin, for what moves money back or changes who may take payments
    /// (refunds, revoking a terminal): a terminal's key may settle payments and read its own
    /// merchant's records, but a stolen or compromised till must not be able to pay money out
    /// or lock the other tills out. A signed request is refused with `admin_required`, whatever
    /// terminal signed it.
    func merchantAdmin(for action: String, keyScope: APIKeyScope? = nil) async throws -> MerchantCaller {
        if RequestScope.current?.signer == nil, let token = RequestScope.current?.bearerToken,
            token.hasPrefix(APIKeySecret.prefix)
        {
            guard let keyScope else {
                // A valid key hears the rule; an unknown or revoked one, that it is not valid.
                _ = try await apiKeyCaller(token: token, scopes: Set(APIKeyScope.allCases))
                throw APIError(
                    .adminRequired,
                    "\(action) needs the merchant admin's session (Authorization: Bearer, from POST /v1/merchant/sessions); an API key cannot do it")
            }
            return try await apiKeyCaller(token: token, scopes: [keyScope])
        }
        if RequestScope.current?.signer != nil {
            // An unknown or revoked key hears what it hears everywhere; a valid one, the rule.
            _ = try await signingTerminal()
            throw APIError(
                .adminRequired,
                "\(action) needs the merchant admin's session (Authorization: Bearer, from POST /v1/merchant/sessions); a terminal's key cannot do it",
                headers: [.wwwAuthenticate: "Bearer"])
        }
        let caller = try await merchantCaller()
        guard caller.terminal == nil else {
            throw APIError(
                .adminRequired, "\(action) needs the merchant admin's session; a terminal's key cannot do it")
        }
        return caller
    }

    func signInMerchantAdmin(_ input: Operations.SignInMerchantAdmin.Input) async throws
        -> Operations.SignInMerchantAdmin.Output
    {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        guard !body.email.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, !body.password.isEmpty else {
            throw APIError(.invalidRequest, "the admin's e-mail and password are both needed")
        }
        let settings = DashboardSettings()
        let lifetime = body.lifetimeSeconds ?? settings.sessionLifetime
        guard (60...settings.sessionLifetime).contains(lifetime) else {
            throw APIError(
                .invalidRequest, "lifetimeSeconds must be 60 to \(settings.sessionLifetime) (8 h), not \(lifetime)")
        }
        // The dashboard's and activation's counters: every door shares one limit.
        let merchant = try await signIn(email: body.email, password: body.password)
        let (token, expiresAt) = try await startMerchantSession(for: merchant.id, lifetime: lifetime)
        metrics.record(event: "admin_sign_in")
        RequestScope.current?.logger.notice("merchant admin signed in", metadata: ["merchant": "\(merchant.id)"])
        return .created(
            .init(
                body: .json(
                    .init(
                        token: token, merchantId: merchant.id.rawValue, merchantName: merchant.name,
                        expiresAt: expiresAt))))
    }

    /// A new session of `merchant`'s admin (the dashboard's cookie or the API's bearer token),
    /// ending `lifetime` seconds from now: its token, of which only the hash is stored.
    func startMerchantSession(for merchant: MerchantID, lifetime: Int64) async throws
        -> (token: String, expiresAt: UnixTime)
    {
        let token = DashboardSecurity.randomToken()
        let time = now()
        try await ledger.createDashboardSession(
            tokenHash: DashboardSecurity.hash(token), merchant: merchant, csrfSecret: DashboardSecurity.randomToken(),
            at: time, expiresAt: time + lifetime)
        return (token, time + lifetime)
    }

    func signOutMerchantAdmin(_ input: Operations.SignOutMerchantAdmin.Input) async throws
        -> Operations.SignOutMerchantAdmin.Output
    {
        guard let token = RequestScope.current?.bearerToken,
            try await ledger.deleteDashboardSession(tokenHash: DashboardSecurity.hash(token))
        else {
            throw APIError(
                .unauthenticated, "no admin session to end: send its token as Authorization: Bearer",
                headers: [.wwwAuthenticate: "Bearer"])
        }
        return .noContent(.init())
    }
}
