import AsyncHTTPClient
import Crypto
import Foundation
import HorizonAPI
import NIOCore

/// A wallet's registration and restoration (`openapi.yaml`, `/v1/wallets/...`): the start sends
/// a one-time code to the person, the verify completes it with that code.
extension HorizonServerClient {
    /// Starts registering `key` as a new wallet: the server texts a code to `phone` and mails
    /// another to `email`; the verify needs both.
    public func registerWallet(name: String, email: String, phone: String, key: P256.Signing.PrivateKey)
        async throws(ServerClientError) -> Components.Schemas.OneTimeCodeSent
    {
        let publicKey = Data(key.publicKey.x963Representation).base64EncodedString()
        let proof = try Self.proof(WalletProof.registration(email: email, phone: phone, publicKey: publicKey), key)
        let body = Components.Schemas.WalletRegistrationRequest(
            name: name, email: email, phone: phone, publicKey: publicKey, proof: proof)
        let output = try await call { try await client.startWalletRegistration(body: .json(body)) }
        switch output {
        case .accepted(let accepted): return try Self.json { try accepted.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Completes a registration with the two codes the person received, one by SMS and one by mail.
    public func verifyWalletRegistration(id: String, smsCode: String, emailCode: String)
        async throws(ServerClientError) -> Components.Schemas.WalletVerified
    {
        let output = try await call {
            try await client.verifyWalletRegistration(
                path: .init(registrationId: id), body: .json(.init(smsCode: smsCode, emailCode: emailCode)))
        }
        switch output {
        case .created(let created): return try Self.json { try created.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Starts registering `key` with the e-mail proven by a one-time link (the reference's flow):
    /// the server texts a PUK to `phone` and mails a link to `email`; `invitationCode` is the
    /// operator's, if the person has one.
    public func registerWalletWithActivationLink(
        name: String, email: String, phone: String, invitationCode: String?, key: P256.Signing.PrivateKey
    ) async throws(ServerClientError) -> Components.Schemas.OneTimeCodeSent {
        let publicKey = Data(key.publicKey.x963Representation).base64EncodedString()
        let proof = try Self.proof(WalletProof.registration(email: email, phone: phone, publicKey: publicKey), key)
        let body = Components.Schemas.WalletRegistrationRequest(
            name: name, email: email, phone: phone, publicKey: publicKey, proof: proof, invitationCode: invitationCode,
            emailProof: .link)
        let output = try await call { try await client.startWalletRegistration(body: .json(body)) }
        switch output {
        case .accepted(let accepted): return try Self.json { try accepted.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Gives back the PUK of a registration proven by link. This client must sign with the key
    /// being registered.
    public func submitRegistrationPuk(id: String, puk: String) async throws(ServerClientError)
        -> Components.Schemas.RegistrationActivation
    {
        let output = try await call {
            try await client.submitWalletRegistrationPuk(path: .init(registrationId: id), body: .json(.init(puk: puk)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Where a registration proven by link stands. This client must sign with the key being
    /// registered.
    public func registrationActivation(id: String) async throws(ServerClientError)
        -> Components.Schemas.RegistrationActivation
    {
        let output = try await call {
            try await client.getWalletRegistrationActivation(path: .init(registrationId: id))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Confirms an activation link as the button on its page does: its registration and token
    /// are posted to this client's server (whatever host the link names). Throws `.refused`
    /// with the page's status when the server refuses it.
    public func confirmActivationLink(_ link: String, timeout: Duration = .seconds(10)) async throws(ServerClientError)
    {
        guard let components = URLComponents(string: link),
            let registration = components.queryItems?.first(where: { $0.name == "registration" })?.value,
            let token = components.queryItems?.first(where: { $0.name == "token" })?.value,
            registration.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }),
            token.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else {
            throw .invalidResponse("this is not an activation link (it names no registration and token)")
        }
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        var request = HTTPClientRequest(
            url: serverURL.appendingPathComponent("v1/wallets/activation").absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: "registration=\(registration)&token=\(token)"))
        let status: UInt
        do {
            let response = try await Self.http.execute(request, timeout: .milliseconds(max(1, milliseconds)))
            _ = try await response.body.collect(upTo: 64 * 1024)
            status = response.status.code
        } catch {
            throw Self.transportError(error, server: serverURL)
        }
        guard status == 200 else {
            let (code, message): (String, String) =
                switch status {
                case 409: ("registration_used", "this activation link was used already")
                case 410: ("registration_expired", "this activation link has expired")
                case 403: ("registration_locked", "this registration is locked after too many wrong codes or links")
                case 429: ("rate_limited", "too many wrong activation links from here; wait and retry")
                default: ("registration_not_found", "no registration has this activation link")
                }
            throw .refused(status: Int(status), code: code, message: message, requestID: "")
        }
    }

    /// Starts restoring the account registered with `email` onto `key` (a new device): the code
    /// goes to the account's e-mail, if there is such an account (the answer is the same if not).
    public func restoreWallet(email: String, key: P256.Signing.PrivateKey) async throws(ServerClientError)
        -> Components.Schemas.OneTimeCodeSent
    {
        let publicKey = Data(key.publicKey.x963Representation).base64EncodedString()
        let proof = try Self.proof(WalletProof.restoration(email: email, publicKey: publicKey), key)
        let body = Components.Schemas.WalletRestorationRequest(email: email, publicKey: publicKey, proof: proof)
        let output = try await call { try await client.startWalletRestoration(body: .json(body)) }
        switch output {
        case .accepted(let accepted): return try Self.json { try accepted.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Completes a restoration: the new key is the account's, every older key is revoked.
    public func verifyWalletRestoration(id: String, code: String) async throws(ServerClientError)
        -> Components.Schemas.WalletVerified
    {
        let output = try await call {
            try await client.verifyWalletRestoration(path: .init(registrationId: id), body: .json(.init(code: code)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Starts the reference's restoration of the account registered with `email` onto `key`:
    /// a PUK is texted to the account's phone (the answer is the same if no account has the
    /// e-mail); then `submitRestorationPuk`, then `reactivateWallet` with the mailed token.
    public func restoreWalletWithReactivationLink(email: String, key: P256.Signing.PrivateKey)
        async throws(ServerClientError) -> Components.Schemas.OneTimeCodeSent
    {
        let publicKey = Data(key.publicKey.x963Representation).base64EncodedString()
        let proof = try Self.proof(WalletProof.restoration(email: email, publicKey: publicKey), key)
        let body = Components.Schemas.WalletRestorationRequest(
            email: email, publicKey: publicKey, proof: proof, reactivation: .link)
        let output = try await call { try await client.startWalletRestoration(body: .json(body)) }
        switch output {
        case .accepted(let accepted): return try Self.json { try accepted.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Gives back a restoration's PUK; the server mails the reactivation token. This client must
    /// sign with the key the restoration was started with.
    public func submitRestorationPuk(id: String, puk: String) async throws(ServerClientError)
        -> Components.Schemas.RestorationPukAccepted
    {
        let output = try await call {
            try await client.submitWalletRestorationPuk(path: .init(registrationId: id), body: .json(.init(puk: puk)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Reactivates the account on this client's key with the mailed token: every other key of
    /// the account is revoked. This client must sign with the key the restoration was started with.
    public func reactivateWallet(id: String, token: String) async throws(ServerClientError)
        -> Components.Schemas.WalletVerified
    {
        let output = try await call {
            try await client.reactivateWallet(path: .init(registrationId: id), body: .json(.init(token: token)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    static func proof(_ bytes: [UInt8], _ key: P256.Signing.PrivateKey) throws(ServerClientError) -> String {
        do { return Data(try key.signature(for: bytes).rawRepresentation).base64EncodedString() } catch {
            throw .invalidResponse("the wallet key could not sign the proof: \(error)")
        }
    }
}
