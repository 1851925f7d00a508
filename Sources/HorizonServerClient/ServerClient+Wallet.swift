import Crypto
import Foundation
import HorizonAPI

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

    static func proof(_ bytes: [UInt8], _ key: P256.Signing.PrivateKey) throws(ServerClientError) -> String {
        do { return Data(try key.signature(for: bytes).rawRepresentation).base64EncodedString() } catch {
            throw .invalidResponse("the wallet key could not sign the proof: \(error)")
        }
    }
}
