import Crypto
import Foundation
import HTTPTypes
import HorizonCore
import HorizonLedger
import Hummingbird
import NIOCore

/// The page a registration's activation link opens: `GET` shows what it is for and a button,
/// and only the button's `POST` confirms the address. Mail scanners and previews that fetch
/// every link in a mail therefore activate nothing. A link confirms once; wrong tokens count
/// against the registration (its own limit) and against the client's address (the sign-in
/// back-off), so guessing is bounded both ways.
enum ActivationLinkPages {
    static let path = "/v1/wallets/activation"

    /// The link mailed for `registration`: its id and the token, in the query (so the server's
    /// log, which names paths only, never holds a token).
    static func link(base: String, registration: RegistrationID, token: String) -> String {
        "\(base)\(path)?registration=\(registration.rawValue)&token=\(token)"
    }

    /// A new token: 32 random bytes, base64url without padding (43 characters).
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func isWellFormedToken(_ token: String) -> Bool {
        token.utf8.count == 43
            && token.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D
                    || $0 == 0x5F
            }
    }

    static func register(on v1: RouterGroup<ServerRequestContext>, handler: APIHandler) {
        let inGroup = RouterPath(String(path.dropFirst("/v1".count)))
        v1.get(inGroup) { request, _ in
            let query = ThreeDSecurePages.fields(request.uri.query ?? "")
            guard let registration = query["registration"], let token = query["token"],
                RegistrationID.isWellFormed(registration), isWellFormedToken(token)
            else { return incomplete() }
            return ThreeDSecurePages.page(
                .ok, title: "Confirm your e-mail address",
                body: """
                    <p>A Horizon wallet is being registered with this e-mail address. Confirm that it is yours
                    to finish the registration; the wallet also needs the PUK texted to your phone.</p>
                    <p>If you did not register a wallet, close this page: nothing happens without the button.</p>
                    <form id="activation" method="post" action="\(path)">
                    <input type="hidden" name="registration" value="\(ThreeDSecurePages.escape(registration))">
                    <input type="hidden" name="token" value="\(ThreeDSecurePages.escape(token))">
                    <button type="submit" id="confirm">Confirm my e-mail address</button>
                    </form>
                    """)
        }
        v1.post(inGroup) { request, _ in
            let form = try await ThreeDSecurePages.formFields(request)
            guard let registration = form["registration"], let token = form["token"],
                RegistrationID.isWellFormed(registration), isWellFormedToken(token)
            else { return incomplete() }
            return try await handler.confirmActivationLink(RegistrationID(rawValue: registration), token: token)
        }
    }

    static func incomplete() -> Response {
        ThreeDSecurePages.page(
            .badRequest, title: "Incomplete link",
            body: "<p>This link is not whole. Open the link in the activation mail again, unchanged "
                + "(copy all of it if your mail program split it).</p>")
    }
}

extension APIHandler {
    /// HMAC-SHA256 of an activation link's token with its registration id, under the key the
    /// one-time codes use: the database alone does not let anyone check a token.
    func linkTokenHash(_ token: String, for id: RegistrationID) -> [UInt8] {
        let pepper = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: issuer.signingKey.rawRepresentation),
            info: Array("horizon/one-time-code/v1".utf8), outputByteCount: 32)
        let message = Array("horizon/activation-link/v1\n\(id.rawValue)\n\(token)".utf8)
        return Array(HMAC<SHA256>.authenticationCode(for: message, using: pepper))
    }

    /// The sign-in back-off key of wrong activation tokens and invitation codes from an address.
    static func guessingKey(_ what: String) -> String { "\(what):address:" + (RequestScope.current?.peer ?? "local") }

    /// The page's POST: the token checked, the answer a page a person reads.
    func confirmActivationLink(_ id: RegistrationID, token: String) async throws -> Response {
        let time = now()
        let backoff = Self.guessingKey("activation-link")
        let blockedUntil = try await ledger.signInBlockedUntil(keys: [backoff], at: time)
        if blockedUntil > time {
            return ThreeDSecurePages.page(
                .tooManyRequests, title: "Too many wrong links",
                body: "<p>Too many wrong activation links were opened from here. "
                    + "Try again in \(blockedUntil - time) seconds.</p>")
        }
        do {
            let activation = try await ledger.confirmActivationLink(
                id, tokenHash: linkTokenHash(token, for: id), policy: registrationPolicy, at: time)
            metrics.record(event: "wallet_email_confirmed")
            RequestScope.current?.logger.notice(
                "wallet e-mail confirmed", metadata: ["registration": "\(id)", "active": "\(activation.isActive)"])
            return ThreeDSecurePages.page(
                .ok, title: activation.isActive ? "Your wallet is active" : "E-mail address confirmed",
                body: activation.isActive
                    ? "<p id=\"result\">Your e-mail address is confirmed and your wallet is active. "
                        + "Return to the wallet.</p>"
                    : "<p id=\"result\">Your e-mail address is confirmed. Enter the PUK texted to your phone "
                        + "in the wallet to finish.</p>")
        } catch {
            if case .codeInvalid = error {
                _ = try await ledger.recordSignInFailure(keys: [(backoff, configuration.loginPolicy)], at: time)
            }
            if case .notFound = error {
                _ = try await ledger.recordSignInFailure(keys: [(backoff, configuration.loginPolicy)], at: time)
            }
            return Self.activationRefusal(error)
        }
    }

    static func activationRefusal(_ error: RegistrationError) -> Response {
        let (status, title, text): (HTTPResponse.Status, String, String) =
            switch error {
            case .used:
                (.conflict, "Link already used", "This link confirmed the address already; a link works once.")
            case .expired:
                (
                    .gone, "Link expired",
                    "This link has expired. Start the registration again in the wallet for a new one."
                )
            case .locked:
                (
                    .forbidden, "Registration locked",
                    "Too many wrong codes or links: this registration is locked. Start again in the wallet."
                )
            case .notFound, .codeInvalid:
                (
                    .notFound, "Unknown link",
                    "No registration has this link. Open the link in the activation mail, unchanged."
                )
            case .keyAlreadyRegistered, .emailAlreadyRegistered:
                (
                    .conflict, "Already registered",
                    "A wallet with this e-mail address or key is registered already; restore it in the wallet instead."
                )
            case .invitation(let refusal): (.gone, "Invitation not valid", refusal.description)
            case .tooManyPending, .ledger:
                (.serviceUnavailable, "Not available", "The address cannot be confirmed now; try again in a moment.")
            }
        return ThreeDSecurePages.page(
            status, title: title, body: "<p id=\"result\">\(ThreeDSecurePages.escape(text))</p>")
    }
}
