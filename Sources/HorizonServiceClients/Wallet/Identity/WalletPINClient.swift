import Crypto
import Foundation
import HorizonAPI
import HorizonServerClient

/// The wallet's PIN as the reference's `IdentityClient` has it (set, change, prove, unlock,
/// deactivate), with the wrong tries counted by the server: the key file (a
/// `ServerSealedWalletKey`) opens only with the share the server releases to a right proof, so a
/// copied file gives no offline guessing and a program that skips this client gains no tries.
/// The caller stores what these calls return; nothing here writes files.
public struct WalletPINClient: Sendable {
    public let serverURL: URL
    public let timeout: Duration
    public var cost: PINStretchCost
    let clock: @Sendable () -> Int64

    public init(
        serverURL: URL, timeout: Duration = .seconds(10), cost: PINStretchCost = .standard,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.serverURL = serverURL
        self.timeout = timeout
        self.cost = cost
        self.clock = clock
    }

    private func client(signedBy key: P256.Signing.PrivateKey) -> HorizonServerClient {
        HorizonServerClient(serverURL: serverURL, signingKey: key, timeout: timeout, clock: clock)
    }

    /// Protects `key` with `pin` (the first PIN, or a new one once the old was proven): the
    /// server keeps the new PIN's verifier and share, replacing any before; returns the sealed
    /// key to store in place of the old file.
    public func setPIN(_ pin: String, for key: P256.Signing.PrivateKey) async throws(WalletPINError)
        -> ServerSealedWalletKey
    {
        let (sealed, setup) = try ServerSealedWalletKey.seal(key, pin: pin, cost: cost)
        do {
            _ = try await client(signedBy: key).setWalletPIN(
                deviceKey: Array(setup.deviceKey.x963Representation), pinKey: Array(setup.pinKey.x963Representation),
                share: setup.share)
        } catch { throw .server("the server did not take the PIN: \(error)") }
        return sealed
    }

    /// Proves `pin` to the server and opens the key with the share it releases (the reference's
    /// unlock with `awaitingUserPINUnlock`, and the proof before a change or deactivation).
    public func unlock(_ sealed: ServerSealedWalletKey, pin: String) async throws(WalletPINError)
        -> P256.Signing.PrivateKey
    {
        let stretched = try sealed.stretch(pin)
        let time = clock()
        let nonce = ServerSealedWalletKey.random(16).map { String(format: "%02x", $0) }.joined()
        let proof = try sealed.proof(stretched, time: time, nonce: nonce)
        let result: Components.Schemas.WalletPINProofResult
        do {
            result = try await client(signedBy: sealed.deviceKey).proveWalletPIN(proof: proof, time: time, nonce: nonce)
        } catch .refused(_, "pin_not_set", _, _) {
            throw .notSet
        } catch {
            throw .server("the PIN could not be checked: \(error)")
        }
        switch result.result {
        case .proven:
            guard let text = result.share, let share = Data(base64Encoded: text), share.count == 32 else {
                throw .server("the server answered a right PIN without a usable share")
            }
            return try sealed.open(stretched, share: Array(share))
        case .wrong:
            throw .wrongPIN(remainingBeforeBlock: Int(result.remainingBeforeBlock), retryAfter: result.retryAfter)
        case .backingOff: throw .backingOff(retryAfter: result.retryAfter)
        case .blocked: throw .blocked
        }
    }

    /// Proves `current`, then protects the key with `new`. Returns the key and the new file.
    public func changePIN(_ sealed: ServerSealedWalletKey, current: String, new: String) async throws(WalletPINError)
        -> (P256.Signing.PrivateKey, ServerSealedWalletKey)
    {
        _ = try ServerSealedWalletKey.validated(new)
        let key = try await unlock(sealed, pin: current)
        return (key, try await setPIN(new, for: key))
    }

    /// The reference's `deactivatePin`: proves `pin`, then tells the server the wallet is
    /// pinless from now on. Returns the key, for the caller to store protected by the device.
    public func deactivatePIN(_ sealed: ServerSealedWalletKey, pin: String) async throws(WalletPINError)
        -> P256.Signing.PrivateKey
    {
        let key = try await unlock(sealed, pin: pin)
        try await declarePinless(key)
        return key
    }

    /// Tells the server this wallet keeps its key without a PIN (a pinless registration, or a
    /// deactivated PIN): its payments are limited to the server's pinless amount.
    public func declarePinless(_ key: P256.Signing.PrivateKey) async throws(WalletPINError) {
        do { _ = try await client(signedBy: key).deactivateWalletPIN() } catch {
            throw .server("the server did not record the wallet as pinless: \(error)")
        }
    }

    /// The server's view: PIN or pinless, wrong tries, and the pinless payment limit. Signed
    /// with the wallet's key, so only an unlocked (or pinless) wallet can ask.
    public func state(_ key: P256.Signing.PrivateKey) async throws(WalletPINError) -> Components.Schemas.WalletPINState {
        do { return try await client(signedBy: key).walletPIN() } catch {
            throw .server("the server could not be asked about the PIN: \(error)")
        }
    }
}
