import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import OpenAPIRuntime

/// The reference's restoration and reactivation: the restoration's PUK (texted to the
/// account's phone) comes back through `submitWalletRestorationPuk`, which mails a one-time
/// reactivation token; `reactivateWallet` takes it and moves the account to the new device's
/// key, revoking the others at that moment. Both answer only the key the restoration was
/// started with, and only keyed hashes of the PUK and the token are stored.
extension APIHandler {
    func submitWalletRestorationPuk(_ input: Operations.SubmitWalletRestorationPuk.Input) async throws
        -> Operations.SubmitWalletRestorationPuk.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let key = try restoringKey()
        let id = RegistrationID(rawValue: input.path.registrationId)
        let puk = try Self.oneTimeCodeDigits(request.puk, field: "puk")
        let token = ActivationLinkPages.newToken()
        let lifetime = configuration.effectiveActivationLinkLifetime
        let accepted: RestorationPukAccepted
        do {
            accepted = try await ledger.submitRestorationPuk(
                id, pukHash: codeHash(puk, for: id, channel: .sms), key: key,
                tokenHash: reactivationTokenHash(token, for: id), lifetime: lifetime, policy: registrationPolicy,
                at: now())
        } catch {
            if case .codeInvalid = error { metrics.record(event: "wallet_code_refused") }
            throw Self.apiError(error, kind: .restoration)
        }
        let hours = lifetime / 3600
        let valid = hours >= 1 ? "\(hours) hour\(hours == 1 ? "" : "s")" : "\(lifetime / 60) minutes"
        do {
            // Stored first, then sent; it expires with the token it carries.
            try await messages.send(
                .email, to: accepted.email, subject: "Reactivate your Horizon wallet on your new device",
                body: """
                    Your Horizon wallet is being restored on a new device. Its reactivation token is:
                    \(token)
                    On that device run: horizon-wallet reactivate \(token)
                    It works once, on that device only, for \(valid). Reactivating revokes the wallet's other \
                    devices at once; your balance, history and loyalty stay with the account.
                    If you did not ask for this, ignore this mail: nothing changes without the token.
                    """, registration: id, expiresAt: accepted.reactivationExpiresAt, at: now())
        } catch {
            RequestScope.current?.logger.error(
                "a reactivation token was not sent", metadata: ["error": "\(LogRedaction.describe(error))"])
            throw APIError(
                .internalError,
                "the reactivation token could not be sent; start the restoration again in a moment (the request id identifies this)"
            )
        }
        metrics.record(event: "wallet_restoration_phone_proven")
        RequestScope.current?.logger.notice("wallet restoration phone proven", metadata: ["registration": "\(id)"])
        return .ok(
            .init(
                body: .json(
                    .init(
                        registrationId: id.rawValue, sentTo: ["email " + OneTimeCode.mask(email: accepted.email)],
                        reactivationExpiresAt: accepted.reactivationExpiresAt))))
    }

    func reactivateWallet(_ input: Operations.ReactivateWallet.Input) async throws
        -> Operations.ReactivateWallet.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let key = try restoringKey()
        let id = RegistrationID(rawValue: input.path.registrationId)
        guard ActivationLinkPages.isWellFormedToken(request.token) else {
            throw APIError(.invalidRequest, "token must be the 43 characters of the reactivation mail")
        }
        let result: RegistrationResult
        do {
            result = try await ledger.reactivateWallet(
                id, tokenHash: reactivationTokenHash(request.token, for: id), key: key, policy: registrationPolicy,
                at: now())
        } catch {
            if case .codeInvalid = error { metrics.record(event: "wallet_code_refused") }
            throw Self.apiError(error, kind: .restoration)
        }
        metrics.record(event: "wallet_restored")
        RequestScope.current?.logger.notice(
            "wallet reactivated",
            metadata: [
                "registration": "\(id)", "wallet": "\(result.wallet.id)", "revokedKeys": "\(result.revokedKeys)",
            ])
        return .ok(
            .init(
                body: .json(
                    .init(
                        walletId: result.wallet.id.rawValue, revokedKeys: Int64(result.revokedKeys),
                        anchor: issuer.anchorDescription))))
    }

    /// The key that signed this request: the restoration's own, checked by the ledger.
    private func restoringKey() throws -> PublicKeyBytes {
        guard let signer = RequestScope.current?.signer else {
            throw APIError(
                .unauthenticated,
                "this operation needs a request signed with the new device's key, the one the restoration was started with (HorizonSignature)",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        return signer
    }

    /// A reactivation token's keyed hash, apart from activation links' (a token of one kind is
    /// never right for the other).
    func reactivationTokenHash(_ token: String, for id: RegistrationID) -> [UInt8] {
        linkTokenHash("reactivation\n" + token, for: id)
    }
}
