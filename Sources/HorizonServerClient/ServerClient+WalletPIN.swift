import Crypto
import Foundation
import HorizonAPI

/// The wallet's PIN as the server counts it (`openapi.yaml`, `/v1/wallet/pin`): set, read and
/// deactivated with the wallet's key; proven with the device key while the wallet's key is locked.
extension HorizonServerClient {
    /// Sets or replaces the wallet's PIN at the server. This client must sign with the wallet's key.
    public func setWalletPIN(deviceKey: [UInt8], pinKey: [UInt8], share: [UInt8]) async throws(ServerClientError)
        -> Components.Schemas.WalletPINState
    {
        let body = Components.Schemas.WalletPINSetup(
            deviceKey: Data(deviceKey).base64EncodedString(), pinKey: Data(pinKey).base64EncodedString(),
            share: Data(share).base64EncodedString())
        let output = try await call { try await client.setWalletPIN(body: .json(body)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Whether the wallet has a PIN or is pinless. This client must sign with the wallet's key.
    public func walletPIN() async throws(ServerClientError) -> Components.Schemas.WalletPINState {
        let output = try await call { try await client.getWalletPIN() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Makes the wallet pinless (the reference's deactivatePin). This client must sign with the
    /// wallet's key.
    public func deactivateWalletPIN() async throws(ServerClientError) -> Components.Schemas.WalletPINState {
        let output = try await call { try await client.deactivateWalletPIN() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Sends a PIN proof. This client must sign with the device key given when the PIN was set.
    public func proveWalletPIN(proof: [UInt8], time: Int64, nonce: String) async throws(ServerClientError)
        -> Components.Schemas.WalletPINProofResult
    {
        let body = Components.Schemas.WalletPINProof(proof: Data(proof).base64EncodedString(), time: time, nonce: nonce)
        let output = try await call { try await client.proveWalletPIN(body: .json(body)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }
}
