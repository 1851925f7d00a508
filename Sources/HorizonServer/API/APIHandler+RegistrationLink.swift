import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import OpenAPIRuntime

/// A registration whose e-mail is proven by a one-time link (the reference's flow): the PUK
/// texted to the phone comes back through `submitWalletRegistrationPuk`, the link is confirmed
/// on its page (`ActivationLinkPages`), and `getWalletRegistrationActivation` says where it
/// stands. Both operations answer only the key being registered.
extension APIHandler {
    func submitWalletRegistrationPuk(_ input: Operations.SubmitWalletRegistrationPuk.Input) async throws
        -> Operations.SubmitWalletRegistrationPuk.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let key = try registeringKey()
        let id = RegistrationID(rawValue: input.path.registrationId)
        let puk = try Self.oneTimeCodeDigits(request.puk, field: "puk")
        let activation: RegistrationActivation
        do {
            activation = try await ledger.submitRegistrationPuk(
                id, pukHash: codeHash(puk, for: id, channel: .sms), key: key, policy: registrationPolicy, at: now())
        } catch {
            if case .codeInvalid = error { metrics.record(event: "wallet_code_refused") }
            throw Self.apiError(error, kind: .registration)
        }
        metrics.record(event: activation.isActive ? "wallet_registered" : "wallet_phone_proven")
        RequestScope.current?.logger.notice(
            activation.isActive ? "wallet registered" : "wallet phone proven",
            metadata: ["registration": "\(id)", "wallet": "\(activation.wallet?.rawValue ?? "-")"])
        return .ok(.init(body: .json(activationBody(id, activation))))
    }

    func getWalletRegistrationActivation(_ input: Operations.GetWalletRegistrationActivation.Input) async throws
        -> Operations.GetWalletRegistrationActivation.Output
    {
        let key = try registeringKey()
        let id = RegistrationID(rawValue: input.path.registrationId)
        do {
            let activation = try await ledger.registrationActivation(
                id, key: key, policy: registrationPolicy, at: now())
            return .ok(.init(body: .json(activationBody(id, activation))))
        } catch { throw Self.apiError(error, kind: .registration) }
    }

    /// The key that signed this request: the one being registered, if it is the registration's.
    private func registeringKey() throws -> PublicKeyBytes {
        guard let signer = RequestScope.current?.signer else {
            throw APIError(
                .unauthenticated,
                "this operation needs a request signed with the key being registered (HorizonSignature)",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        return signer
    }

    private func activationBody(_ id: RegistrationID, _ activation: RegistrationActivation)
        -> Components.Schemas.RegistrationActivation
    {
        .init(
            registrationId: id.rawValue, phoneProven: activation.phoneProven, emailProven: activation.emailProven,
            active: activation.isActive, walletId: activation.wallet?.rawValue,
            anchor: activation.isActive ? issuer.anchorDescription : nil,
            activationExpiresAt: activation.linkExpiresAt)
    }

    /// The hash of a typed invitation code, once the address is not held back for guessing.
    func invitationCodeHash(_ typed: String) async throws -> [UInt8] {
        guard let normalized = InvitationCodes.normalized(typed) else {
            throw APIError(
                .invalidRequest, "invitationCode must be 4 to 32 letters and digits (dashes and spaces are ignored)")
        }
        let time = now()
        let until = try await ledger.signInBlockedUntil(keys: [Self.guessingKey("invitation")], at: time)
        if until > time {
            throw APIError(
                .rateLimited, "too many unknown invitation codes from here; try again in \(until - time) s",
                headers: [.retryAfter: "\(until - time)"])
        }
        return InvitationCodes.hash(normalized)
    }

    /// An unknown invitation code sets the address back, like a wrong password.
    func recordInvitationGuess() async throws {
        _ = try await ledger.recordSignInFailure(
            keys: [(Self.guessingKey("invitation"), configuration.loginPolicy)], at: now())
    }

    static func oneTimeCodeDigits(_ code: String, field: String) throws -> String {
        let digits = code.filter { !$0.isWhitespace }
        guard digits.count == OneTimeCode.digits, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw APIError(.invalidRequest, "\(field) must be the \(OneTimeCode.digits) digits that were sent")
        }
        return digits
    }
}
