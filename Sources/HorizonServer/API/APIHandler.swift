import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import OpenAPIRuntime

/// The server's operations: the `APIProtocol` generated from `openapi.yaml`, over the ledger.
/// Failures are thrown as `APIError`; `BoundaryMiddleware` writes them as the error envelope.
struct APIHandler: APIProtocol {
    let ledger: Ledger
    let issuer: Issuer
    let configuration: ServerConfiguration
    let passwords: PasswordHasher
    let metrics: ServerMetrics
    let messages: any MessageSender
    /// Tokenizes, charges and refunds cards (the sandbox processor unless a test gives another).
    let cards: any CardProcessor
    let now: @Sendable () -> UnixTime
    /// The Oblivious HTTP gateway, and the clock of its per-terminal relay limit.
    let gateway: ServerGateway
    let rateLimitClock: @Sendable () -> ContinuousClock.Instant
    /// Pushes payment intents to the terminals connected to this process.
    let intentHub: TerminalIntentHub

    // MARK: Operations

    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        .ok(.init(body: .json(.init(status: .ok))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        do {
            let ledger = ledger
            let version = try await Readiness.within(Readiness.deadline) { try await ledger.schemaVersion() }
            return .ok(.init(body: .json(.init(status: .ready, schemaVersion: Int64(version)))))
        } catch {
            RequestScope.current?.logger.warning("not ready", metadata: ["error": "\(LogRedaction.describe(error))"])
            let apiError = APIError(.databaseUnavailable, "the database cannot be reached; retry shortly")
            metrics.recordError(code: apiError.code.rawValue)
            return .serviceUnavailable(.init(body: .json(apiError.envelope(requestID: RequestScope.current?.id ?? ""))))
        }
    }

    func getAnchor(_ input: Operations.GetAnchor.Input) async throws -> Operations.GetAnchor.Output {
        .ok(.init(body: .json(issuer.anchorDescription)))
    }

    func getRevocations(_ input: Operations.GetRevocations.Input) async throws -> Operations.GetRevocations.Output {
        let ids = try await ledger.revokedTerminalKeyIDs().map { $0.hexString }
        return .ok(.init(body: .json(.init(terminalKeyIds: ids))))
    }

    func activateTerminal(_ input: Operations.ActivateTerminal.Input) async throws -> Operations.ActivateTerminal.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        // The limits of openapi.yaml's ActivationRequest (the generated decoder does not check lengths).
        guard request.email.utf8.count <= 254 else {
            throw APIError(.invalidRequest, "email must be at most 254 bytes")
        }
        guard request.password.utf8.count <= 1024 else {
            throw APIError(.invalidRequest, "password must be at most 1024 bytes")
        }
        let label = request.label.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !label.isEmpty, label.utf8.count <= TerminalCredential.maximumTextBytes,
            !label.containsControlOrFormatCharacters
        else {
            throw APIError(
                .invalidRequest, "label must be 1 to \(TerminalCredential.maximumTextBytes) bytes of printable text")
        }
        let (terminalKey, keyBytes) = try Self.publicKey(base64: request.publicKey, field: "publicKey")
        let proofBytes = Array(
            ["horizon/activate/v1", request.email, request.label, request.publicKey].joined(separator: "\n").utf8)
        guard let proof = Data(base64Encoded: request.proof),
            verifySignature(Array(proof), over: proofBytes, with: terminalKey)
        else {
            throw APIError(
                .signatureInvalid, "proof is not the terminal key's signature over the activation (see openapi.yaml)")
        }
        let merchant = try await signIn(email: request.email, password: request.password)
        let time = now()
        let credential: TerminalCredential
        do {
            credential = try issuer.issueCredential(
                merchantID: merchant.id.rawValue, merchantName: merchant.name, terminalLabel: label,
                terminalKey: terminalKey, at: time, validity: configuration.credentialValidity)
        } catch {
            throw APIError(.invalidRequest, "no credential can be issued: \(error)")
        }
        let terminal = try await ledger.activateTerminal(
            merchant: merchant.id, label: label, publicKey: keyBytes, keyID: credential.terminalKeyID,
            credentialExpiresAt: credential.expiresAt, at: time)
        metrics.record(event: "terminal_activated")
        RequestScope.current?.logger.notice(
            "terminal activated", metadata: ["terminal": "\(terminal.id)", "merchant": "\(merchant.id)"])
        return .created(.init(body: .json(response(for: terminal, merchant: merchant, credential: credential))))
    }

    func renewTerminalCredential(_ input: Operations.RenewTerminalCredential.Input) async throws
        -> Operations.RenewTerminalCredential.Output
    {
        let terminal = try await signingTerminal()
        let merchant = try await ledger.merchant(terminal.merchantID)
        let terminalKey = try Self.publicKey(bytes: terminal.publicKey.bytes)
        let credential: TerminalCredential
        do {
            credential = try issuer.issueCredential(
                merchantID: merchant.id.rawValue, merchantName: merchant.name, terminalLabel: terminal.label,
                terminalKey: terminalKey, at: now(), validity: configuration.credentialValidity)
        } catch {
            throw APIError(.internalError, "no credential can be issued: \(error)")
        }
        // Recorded only if still active: a revocation that raced this renewal wins.
        guard try await ledger.recordCredentialIssued(to: terminal.id, expiresAt: credential.expiresAt) else {
            throw Self.revoked(terminal)
        }
        metrics.record(event: "terminal_renewed")
        return .ok(.init(body: .json(response(for: terminal, merchant: merchant, credential: credential))))
    }

    // MARK: Authentication

    /// The merchant whose admin this is, after the sign-in limits and the password: one door for
    /// the dashboard, the API's admin session and terminal activation, so they share every counter.
    ///
    /// The e-mail is normalised (`Ledger.canonicalEmail`) before anything is counted, so no
    /// spelling of it has a counter of its own. Every attempt counts against the client address
    /// (`rate_limited` over the window); every wrong one, for a known e-mail or not, sets back the
    /// e-mail and the address (`account_locked` while either waits), with the same answers and
    /// the same scrypt work whether the e-mail exists or not. A back-off ends by itself, so the
    /// owner is never locked out for good.
    func signIn(email typedEmail: String, password: String) async throws -> Merchant {
        let email: String
        do { email = try Ledger.canonicalEmail(typedEmail) } catch {
            throw APIError(.invalidRequest, "the e-mail cannot contain control or format characters")
        }
        let time = now()
        let address = RequestScope.current?.peer ?? "local"
        let settings = DashboardSettings(configuration)
        // Counted before the password is checked, so a flood costs no scrypt work.
        let addressKey = "address:" + address
        let counts = try await ledger.recordSignInAttempt(keys: [addressKey], window: settings.signInWindow, at: time)
        if (counts[addressKey] ?? 0) > settings.signInsPerAddress {
            throw APIError(
                .rateLimited,
                "too many sign-in attempts from here; wait \((settings.signInWindow + 59) / 60) minutes",
                headers: [.retryAfter: "\(settings.signInWindow)"])
        }
        let backoffKeys = ["email:" + email, "address:" + address]
        let blockedUntil = try await ledger.signInBlockedUntil(keys: backoffKeys, at: time)
        if blockedUntil > time { throw Self.heldBack(for: blockedUntil - time) }
        let login = try await ledger.login(adminEmail: email)
        // An unknown e-mail costs the same scrypt work as a known one, so timing does not tell.
        let verified = passwords.verify(password, against: login?.passwordHash ?? decoyHash)
        guard let login, verified else {
            metrics.record(event: "sign_in_refused")
            // An address may be shared (an office, a carrier's NAT): it gets twice the tries.
            let account = configuration.loginPolicy
            var shared = account
            shared.attemptsBeforeLock = 2 * account.attemptsBeforeLock
            let until = try await ledger.recordSignInFailure(
                keys: [(backoffKeys[0], account), (backoffKeys[1], shared)], at: time)
            if until > time { throw Self.heldBack(for: until - time) }
            throw APIError(.invalidCredentials, "the e-mail or the password is wrong")
        }
        // A right password forgets the failures (the window counter still bounds the address).
        try await ledger.clearSignInFailures(keys: backoffKeys)
        return login.merchant
    }

    /// The answer while a back-off holds sign-ins back: the same for any e-mail, known or not.
    static func heldBack(for seconds: Int64) -> APIError {
        APIError(
            .accountLocked,
            "too many wrong sign-ins for this e-mail or from this address; try again in \(seconds) s",
            headers: [.retryAfter: "\(seconds)"])
    }

    /// A well-formed hash at the current cost that no password matches, for the unknown-e-mail path.
    var decoyHash: String {
        "scrypt$\(passwords.costLog2)$8$1$" + Data(count: 16).base64EncodedString() + "$"
            + Data(count: 32).base64EncodedString()
    }

    /// The active terminal that signed this request.
    func signingTerminal() async throws -> TerminalRecord {
        guard let signer = RequestScope.current?.signer else {
            throw APIError(
                .unauthenticated, "this operation needs a request signed with the terminal's key (HorizonSignature)",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        guard let terminal = try await ledger.terminal(publicKey: signer) else {
            throw APIError(
                .terminalUnknown, "the signing key is not an activated terminal; run `horizon-terminal activate`")
        }
        guard !terminal.isRevoked else { throw Self.revoked(terminal) }
        return terminal
    }

    static func revoked(_ terminal: TerminalRecord) -> APIError {
        APIError(
            .terminalRevoked,
            "terminal \(terminal.id) was revoked by its merchant; it gets no credential. Activate a new key if this is a mistake"
        )
    }

    // MARK: Helpers

    func response(for terminal: TerminalRecord, merchant: Merchant, credential: TerminalCredential)
        -> Components.Schemas.TerminalCredentialResponse
    {
        .init(
            terminalId: terminal.id.rawValue, merchantId: merchant.id.rawValue, merchantName: credential.merchantName,
            currency: merchant.currency.code,
            label: terminal.label, credential: Data(credential.encoded()).base64EncodedString(),
            notBefore: credential.notBefore, expiresAt: credential.expiresAt, anchor: issuer.anchorDescription)
    }

    static func publicKey(base64: String, field: String) throws -> (P256.Signing.PublicKey, PublicKeyBytes) {
        guard let data = Data(base64Encoded: base64), data.count == PublicKeyBytes.byteCount else {
            throw APIError(.invalidRequest, "\(field) must be a P-256 public key, X9.63 (65 bytes), in standard base64")
        }
        let key = try publicKey(bytes: Array(data))
        do { return (key, try PublicKeyBytes(bytes: Array(data))) } catch {
            throw APIError(.invalidRequest, "\(field) is not an uncompressed P-256 public key")
        }
    }

    static func publicKey(bytes: [UInt8]) throws -> P256.Signing.PublicKey {
        do { return try P256.Signing.PublicKey(x963Representation: bytes) } catch {
            throw APIError(.invalidRequest, "the public key is not a point on P-256")
        }
    }
}
