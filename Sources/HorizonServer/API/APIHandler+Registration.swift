import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import OpenAPIRuntime

/// Wallet registration and restoration with one-time codes (the reference's
/// `IdentityClient`): a code goes out through `MessageSender`, only a keyed hash of
/// it is stored, and its verify creates the account or moves it to the new device's key.
extension APIHandler {
    var registrationPolicy: RegistrationPolicy { RegistrationPolicy() }

    func startWalletRegistration(_ input: Operations.StartWalletRegistration.Input) async throws
        -> Operations.StartWalletRegistration.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let (key, keyBytes) = try Self.publicKey(base64: request.publicKey, field: "publicKey")
        try Self.verifyProof(
            request.proof,
            over: WalletProof.registration(email: request.email, phone: request.phone, publicKey: request.publicKey),
            with: key, what: "registration")
        let id = RegistrationID.generate()
        var invitation: [UInt8]?
        if let typed = request.invitationCode { invitation = try await invitationCodeHash(typed) }
        // A code per channel, both needed: the holder of the phone alone cannot register the
        // e-mail, nor the reverse. Proven by link, the e-mail gets a link instead of a code.
        let smsCode = OneTimeCode.generate()
        let emailCode = OneTimeCode.generate()
        let linkToken = request.emailProof == .link ? ActivationLinkPages.newToken() : nil
        let pending: PendingRegistration
        do {
            pending = try await ledger.startRegistration(
                id: id, name: request.name, email: request.email, phone: request.phone, publicKey: keyBytes,
                codeHash: codeHash(smsCode, for: id, channel: .sms),
                emailCodeHash: linkToken == nil ? codeHash(emailCode, for: id, channel: .email) : nil,
                emailProof: linkToken.map {
                    .link(
                        tokenHash: linkTokenHash($0, for: id), lifetime: configuration.effectiveActivationLinkLifetime)
                }, invitationCodeHash: invitation, invitationRequired: configuration.invitationsRequired == true,
                policy: registrationPolicy, at: now())
        } catch {
            if case .invitation(.unknown) = error { try await recordInvitationGuess() }
            throw Self.apiError(error, kind: .registration)
        }
        let minutes = registrationPolicy.codeLifetime / 60
        var sentTo: [String] = []
        if let linkToken, let linkExpiresAt = pending.linkExpiresAt, let phone = pending.phone,
            let email = pending.email
        {
            try await sendPukAndLink(
                pending: pending, phone: phone, puk: smsCode, email: email, token: linkToken,
                linkExpiresAt: linkExpiresAt)
            metrics.record(event: "wallet_registration_started")
            RequestScope.current?.logger.notice("wallet registration started", metadata: ["registration": "\(id)"])
            return .accepted(
                .init(
                    body: .json(
                        .init(
                            registrationId: id.rawValue, expiresAt: pending.expiresAt,
                            sentTo: [
                                "sms " + OneTimeCode.mask(phone: phone), "email " + OneTimeCode.mask(email: email),
                            ],
                            activationExpiresAt: linkExpiresAt))))
        }
        // Stored first, then sent: every code that reaches someone has its registration.
        if let phone = pending.phone {
            try await send(
                .sms, to: phone, subject: "Horizon wallet code",
                body:
                    "Horizon: your wallet registration SMS code is \(smsCode) (valid \(minutes) minutes; the e-mail has another). Never share it.",
                pending: pending)
            sentTo.append("sms " + OneTimeCode.mask(phone: phone))
        }
        if let email = pending.email {
            try await send(
                .email, to: email, subject: "Your Horizon wallet code",
                body: """
                    Your Horizon wallet registration e-mail code is \(emailCode). It expires in \(minutes) minutes.
                    Registering needs this code and the one sent by SMS.
                    If you did not ask for it, ignore this mail.
                    """, pending: pending)
            sentTo.append("email " + OneTimeCode.mask(email: email))
        }
        metrics.record(event: "wallet_registration_started")
        RequestScope.current?.logger.notice("wallet registration started", metadata: ["registration": "\(id)"])
        return .accepted(
            .init(body: .json(.init(registrationId: id.rawValue, expiresAt: pending.expiresAt, sentTo: sentTo))))
    }

    func verifyWalletRegistration(_ input: Operations.VerifyWalletRegistration.Input) async throws
        -> Operations.VerifyWalletRegistration.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let result = try await verify(
            input.path.registrationId, smsCode: request.smsCode, emailCode: request.emailCode, kind: .registration)
        return .created(.init(body: .json(verified(result))))
    }

    func startWalletRestoration(_ input: Operations.StartWalletRestoration.Input) async throws
        -> Operations.StartWalletRestoration.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let (key, keyBytes) = try Self.publicKey(base64: request.publicKey, field: "publicKey")
        try Self.verifyProof(
            request.proof, over: WalletProof.restoration(email: request.email, publicKey: request.publicKey), with: key,
            what: "restoration")
        let id = RegistrationID.generate()
        // A code is made and hashed even when no account has the e-mail: the same work, the same
        // stored row and the same answer, so nothing tells whether the e-mail is registered.
        let code = OneTimeCode.generate()
        if request.reactivation == .link {
            return try await startRestorationWithReactivationLink(request, id: id, puk: code, key: keyBytes)
        }
        let pending: PendingRegistration
        do {
            pending = try await ledger.startRestoration(
                id: id, email: request.email, publicKey: keyBytes, codeHash: codeHash(code, for: id, channel: .email),
                policy: registrationPolicy, at: now())
        } catch { throw Self.apiError(error, kind: .restoration) }
        if let email = pending.email {
            try await send(
                .email, to: email, subject: "Your Horizon wallet restoration code",
                body: """
                    Your code to restore your Horizon wallet on a new device is \(code). It expires in \
                    \(registrationPolicy.codeLifetime / 60) minutes. Restoring revokes the wallet's other devices.
                    If you did not ask for it, ignore this mail.
                    """, pending: pending)
        }
        metrics.record(event: "wallet_restoration_started")
        // The masked address comes from the request, not from the account, for the same reason.
        let typed = (try? Ledger.normalizedEmail(request.email)) ?? request.email
        return .accepted(
            .init(
                body: .json(
                    .init(
                        registrationId: id.rawValue, expiresAt: pending.expiresAt,
                        sentTo: ["email " + OneTimeCode.mask(email: typed)]))))
    }

    /// The reference's restoration: the PUK goes by SMS to the account's phone (by mail for an
    /// account registered without one); the answer names both channels whatever the account, so
    /// it tells nothing about it.
    private func startRestorationWithReactivationLink(
        _ request: Components.Schemas.WalletRestorationRequest, id: RegistrationID, puk: String, key: PublicKeyBytes
    ) async throws -> Operations.StartWalletRestoration.Output {
        var generator = SystemRandomNumberGenerator()
        let placeholder = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let pending: PendingRegistration
        do {
            pending = try await ledger.startRestoration(
                id: id, email: request.email, publicKey: key, codeHash: codeHash(puk, for: id, channel: .sms),
                reactivationLink: (placeholder, configuration.effectiveActivationLinkLifetime),
                policy: registrationPolicy, at: now())
        } catch { throw Self.apiError(error, kind: .restoration) }
        let minutes = registrationPolicy.codeLifetime / 60
        if let phone = pending.phone {
            try await send(
                .sms, to: phone, subject: "Horizon wallet restoration PUK",
                body:
                    "Horizon: your wallet restoration PUK is \(puk) (valid \(minutes) minutes). Restoring revokes your other devices. Never share it.",
                pending: pending)
        } else if let email = pending.email {
            try await send(
                .email, to: email, subject: "Your Horizon wallet restoration PUK",
                body: """
                    Your PUK to restore your Horizon wallet on a new device is \(puk). It expires in \(minutes) minutes.
                    Restoring revokes the wallet's other devices. If you did not ask for it, ignore this mail.
                    """, pending: pending)
        }
        metrics.record(event: "wallet_restoration_started")
        let typed = (try? Ledger.normalizedEmail(request.email)) ?? request.email
        return .accepted(
            .init(
                body: .json(
                    .init(
                        registrationId: id.rawValue, expiresAt: pending.expiresAt,
                        sentTo: ["sms the account's phone", "email " + OneTimeCode.mask(email: typed)]))))
    }

    func verifyWalletRestoration(_ input: Operations.VerifyWalletRestoration.Input) async throws
        -> Operations.VerifyWalletRestoration.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let result = try await verify(
            input.path.registrationId, smsCode: nil, emailCode: request.code, kind: .restoration)
        return .ok(.init(body: .json(verified(result))))
    }

    // MARK: Helpers

    /// A registration needs the SMS and the e-mail code; a restoration the e-mail code alone
    /// (the channel it was sent to). Each is hashed with its channel, so one channel's code
    /// given for the other is wrong.
    private func verify(_ id: String, smsCode: String?, emailCode: String, kind: RegistrationKind) async throws
        -> RegistrationResult
    {
        func digits(_ code: String, _ field: String) throws -> String {
            try Self.oneTimeCodeDigits(code, field: field)
        }
        let registration = RegistrationID(rawValue: id)
        let hashes: (first: [UInt8], email: [UInt8]?)
        if let smsCode {
            hashes = (
                codeHash(try digits(smsCode, "smsCode"), for: registration, channel: .sms),
                codeHash(try digits(emailCode, "emailCode"), for: registration, channel: .email)
            )
        } else {
            hashes = (codeHash(try digits(emailCode, "code"), for: registration, channel: .email), nil)
        }
        let result: RegistrationResult
        do {
            result = try await ledger.verifyRegistration(
                registration, kind: kind, codeHash: hashes.first, emailCodeHash: hashes.email,
                policy: registrationPolicy, at: now())
        } catch {
            if case .codeInvalid = error { metrics.record(event: "wallet_code_refused") }
            throw Self.apiError(error, kind: kind)
        }
        metrics.record(event: kind == .registration ? "wallet_registered" : "wallet_restored")
        RequestScope.current?.logger.notice(
            kind == .registration ? "wallet registered" : "wallet restored",
            metadata: [
                "registration": "\(registration)", "wallet": "\(result.wallet.id)",
                "revokedKeys": "\(result.revokedKeys)",
            ])
        return result
    }

    private func verified(_ result: RegistrationResult) -> Components.Schemas.WalletVerified {
        .init(
            walletId: result.wallet.id.rawValue, revokedKeys: Int64(result.revokedKeys),
            anchor: issuer.anchorDescription)
    }

    /// The PUK by SMS and the activation link by mail, each message expiring with what it carries.
    private func sendPukAndLink(
        pending: PendingRegistration, phone: String, puk: String, email: String, token: String,
        linkExpiresAt: UnixTime
    ) async throws {
        let minutes = registrationPolicy.codeLifetime / 60
        let hours = configuration.effectiveActivationLinkLifetime / 3600
        let lifetime =
            hours >= 1
            ? "\(hours) hour\(hours == 1 ? "" : "s")" : "\(configuration.effectiveActivationLinkLifetime / 60) minutes"
        let link = ActivationLinkPages.link(
            base: configuration.effectivePublicURL, registration: pending.id, token: token)
        try await send(
            .sms, to: phone, subject: "Horizon wallet PUK",
            body:
                "Horizon: your wallet PUK is \(puk) (valid \(minutes) minutes). Enter it in the wallet. Never share it.",
            pending: pending)
        try await send(
            .email, to: email, subject: "Confirm your e-mail address for your Horizon wallet",
            body: """
                To finish registering your Horizon wallet, open this link and press the button on its page:
                \(link)
                The link works once and for \(lifetime). The wallet also needs the PUK texted to your phone.
                If you did not register a wallet, ignore this mail: nothing happens without the button.
                """, pending: pending, expiresAt: linkExpiresAt)
    }

    private func send(
        _ channel: OutboxMessage.Channel, to recipient: String, subject: String, body: String,
        pending: PendingRegistration, expiresAt: UnixTime? = nil
    ) async throws {
        do {
            try await messages.send(
                channel, to: recipient, subject: subject, body: body, registration: pending.id,
                expiresAt: expiresAt ?? pending.expiresAt, at: now())
        } catch {
            RequestScope.current?.logger.error(
                "a one-time code was not sent", metadata: ["error": "\(LogRedaction.describe(error))"])
            throw APIError(
                .internalError, "the code could not be sent; start again in a moment (the request id identifies this)")
        }
    }

    /// HMAC-SHA256 of the code, its registration id and the channel it was sent by, under a key
    /// derived from the issuer's private key: a copy of the database alone does not let anyone
    /// try the 10^8 codes, and a code is right for its own channel only.
    func codeHash(_ code: String, for id: RegistrationID, channel: OutboxMessage.Channel) -> [UInt8] {
        let pepper = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: issuer.signingKey.rawRepresentation),
            info: Array("horizon/one-time-code/v1".utf8), outputByteCount: 32)
        let message = Array("horizon/one-time-code/v2\n\(channel.rawValue)\n\(id.rawValue)\n\(code)".utf8)
        return Array(HMAC<SHA256>.authenticationCode(for: message, using: pepper))
    }

    static func verifyProof(_ proof: String, over bytes: [UInt8], with key: P256.Signing.PublicKey, what: String)
        throws
    {
        guard let signature = Data(base64Encoded: proof), verifySignature(Array(signature), over: bytes, with: key)
        else {
            throw APIError(
                .signatureInvalid, "proof is not the wallet key's signature over the \(what) (see openapi.yaml)")
        }
    }

    static func apiError(_ error: RegistrationError, kind: RegistrationKind) -> APIError {
        let again = kind == .registration ? "horizon-wallet register" : "horizon-wallet restore"
        switch error {
        case .notFound:
            return APIError(
                .registrationNotFound, "there is no such \(kind.rawValue); start again (\(again)) for a new code")
        case .codeInvalid(let left):
            return APIError(
                .registrationCodeInvalid,
                "the code is wrong; \(left) more wrong \(left == 1 ? "code locks" : "codes lock") this \(kind.rawValue)"
            )
        case .expired:
            return APIError(
                .registrationExpired,
                "the code has expired (codes last 10 minutes); start again (\(again)) for a new one")
        case .used:
            return APIError(.registrationUsed, "this code was used already; a code completes one \(kind.rawValue)")
        case .locked:
            return APIError(
                .registrationLocked,
                "too many wrong codes: this \(kind.rawValue) is locked; start again (\(again)) for a new code")
        case .keyAlreadyRegistered:
            return APIError(
                .alreadyExists, "this public key is registered to a wallet already; use a new key for a new wallet")
        case .emailAlreadyRegistered:
            return APIError(
                .alreadyExists,
                "a wallet with this e-mail is registered already; restore it on this device (horizon-wallet restore)")
        case .tooManyPending(let wait):
            return APIError(
                .rateLimited, "too many codes were sent to this e-mail or phone; retry in \(wait) s",
                headers: [.retryAfter: "\(wait)"])
        case .invitation(let refusal):
            let code: APIError.Code =
                switch refusal {
                case .required: .invitationRequired
                case .unknown: .invitationUnknown
                case .spent: .invitationSpent
                case .revoked: .invitationRevoked
                }
            return APIError(code, refusal.description)
        case .ledger(let error):
            return APIError(error)
        }
    }
}

/// The one-time codes: 8 decimal digits from the system's CSPRNG (getrandom on Linux).
enum OneTimeCode {
    static let digits = 8

    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = UInt32.random(in: 0..<100_000_000, using: &generator)
        let text = String(value)
        return String(repeating: "0", count: digits - text.count) + text
    }

    /// "+49••••••••678": enough for a person to recognise their number, not to learn it.
    static func mask(phone: String) -> String {
        guard phone.count > 6 else { return phone }
        return String(phone.prefix(3)) + String(repeating: "•", count: phone.count - 6) + String(phone.suffix(3))
    }

    /// "a•••@example.com".
    static func mask(email: String) -> String {
        guard let at = email.firstIndex(of: "@"), at > email.startIndex else { return "•••" }
        return String(email[..<email.index(after: email.startIndex)]) + "•••" + String(email[at...])
    }
}
