import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol

/// The wallet's PIN, counted here rather than on the device: the device's key file is
/// encrypted under the PIN and a share only this server releases, to a proof of the PIN signed
/// by the device key. So a copied key file cannot be tried offline, and every guess, from the
/// wallet program or not, is counted against the one limit.
extension APIHandler {
    /// How wrong PIN proofs are held back.
    static let pinProofPolicy = PINProofPolicy()

    /// The lines a PIN proof signs.
    public static func pinProofBytes(deviceKey: String, time: Int64, nonce: String) -> [UInt8] {
        Array(["horizon/pin-proof/v1", deviceKey, String(time), nonce].joined(separator: "\n").utf8)
    }

    func setWalletPIN(_ input: Operations.SetWalletPIN.Input) async throws -> Operations.SetWalletPIN.Output {
        guard case .json(let setup) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        let wallet = try await signingWallet()
        let (_, device) = try Self.publicKey(base64: setup.deviceKey, field: "deviceKey")
        let (_, pinKey) = try Self.publicKey(base64: setup.pinKey, field: "pinKey")
        guard let share = Data(base64Encoded: setup.share), share.count == 32 else {
            throw APIError(.invalidRequest, "share must be 32 bytes in standard base64")
        }
        guard device != pinKey, device != RequestScope.current?.signer else {
            throw APIError(.invalidRequest, "deviceKey must be a key of its own, neither the PIN key nor the wallet's key")
        }
        do {
            try await ledger.setWalletPIN(
                wallet.id, deviceKey: device, pinKey: pinKey.bytes, share: Array(share), at: now())
        } catch .alreadyExists {
            throw APIError(.alreadyExists, "this device key already proves another wallet's PIN; make a new one")
        }
        RequestScope.current?.logger.notice("wallet PIN set", metadata: ["wallet": "\(wallet.id)"])
        return .ok(.init(body: .json(try await pinState(of: wallet.id))))
    }

    func getWalletPIN(_ input: Operations.GetWalletPIN.Input) async throws -> Operations.GetWalletPIN.Output {
        let wallet = try await signingWallet()
        return .ok(.init(body: .json(try await pinState(of: wallet.id))))
    }

    func deactivateWalletPIN(_ input: Operations.DeactivateWalletPIN.Input) async throws
        -> Operations.DeactivateWalletPIN.Output
    {
        let wallet = try await signingWallet()
        try await ledger.makeWalletPinless(wallet.id)
        RequestScope.current?.logger.notice("wallet made pinless", metadata: ["wallet": "\(wallet.id)"])
        return .ok(.init(body: .json(try await pinState(of: wallet.id))))
    }

    func proveWalletPIN(_ input: Operations.ProveWalletPIN.Input) async throws -> Operations.ProveWalletPIN.Output {
        guard case .json(let body) = input.body else { throw APIError(.unsupportedMediaType, "the body must be JSON") }
        guard let device = RequestScope.current?.signer else {
            throw APIError(
                .unauthenticated, "a PIN proof must be signed with the device key given when the PIN was set",
                headers: [.wwwAuthenticate: RequestSignature.scheme])
        }
        guard let proof = Data(base64Encoded: body.proof), proof.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: proof)
        else { throw APIError(.invalidRequest, "proof must be a raw P-256 signature (64 bytes) in standard base64") }
        guard body.nonce.utf8.count == 32, body.nonce.allSatisfy(\.isHexDigit) else {
            throw APIError(.invalidRequest, "nonce must be 32 hex digits")
        }
        let time = now()
        let window = configuration.signatureWindow
        guard body.time >= time - window, body.time <= time + window else {
            throw APIError(.requestExpired, "the proof was made at \(body.time), outside \(window) s of the server's clock")
        }
        let bytes = Self.pinProofBytes(
            deviceKey: Data(device.bytes).base64EncodedString(), time: body.time, nonce: body.nonce)
        let outcome: PINProofOutcome
        do {
            guard try await ledger.useNonce("pin-proof:" + body.nonce, for: device, window: 2 * window, at: time)
            else { throw APIError(.requestReplayed, "this PIN proof was received once already; make a new one") }
            outcome = try await ledger.provePIN(deviceKey: device, policy: Self.pinProofPolicy, at: time) { pinKey in
                guard let key = try? P256.Signing.PublicKey(x963Representation: pinKey) else { return false }
                return key.isValidSignature(signature, for: bytes)
            }
        } catch LedgerError.notFound {
            throw APIError(.pinNotSet, "no PIN was set with this device key (or its wallet's key was revoked)")
        }
        let policy = Self.pinProofPolicy
        switch outcome {
        case .proven(let share):
            metrics.record(event: "wallet_pin_proven")
            return .ok(
                .init(
                    body: .json(
                        .init(
                            result: .proven, share: Data(share).base64EncodedString(),
                            remainingBeforeBlock: Int64(policy.blockAfter), retryAfter: 0, message: "the PIN is right"))))
        case .wrong(_, let remaining, let retryAfter):
            metrics.record(event: "wallet_pin_wrong")
            RequestScope.current?.logger.notice("wrong wallet PIN", metadata: ["remaining": "\(remaining)"])
            let message: String
            if remaining == 0 {
                message = "wrong PIN; the PIN is now blocked: restore the wallet to use it again"
            } else {
                let wait = retryAfter > 0 ? "; the next try is taken in \(retryAfter) s" : ""
                message = "wrong PIN; \(remaining) more wrong \(remaining == 1 ? "PIN blocks" : "PINs block") it\(wait)"
            }
            return .ok(
                .init(
                    body: .json(
                        .init(
                            result: remaining == 0 ? .blocked : .wrong, remainingBeforeBlock: Int64(remaining),
                            retryAfter: retryAfter, message: message))))
        case .backingOff(let retryAfter, let remaining):
            return .ok(
                .init(
                    body: .json(
                        .init(
                            result: .backingOff, remainingBeforeBlock: Int64(remaining), retryAfter: retryAfter,
                            message: "too many wrong PINs: the next try is taken in \(retryAfter) s"))))
        case .blocked:
            return .ok(
                .init(
                    body: .json(
                        .init(
                            result: .blocked, remainingBeforeBlock: 0, retryAfter: 0,
                            message: "the PIN is blocked after too many wrong tries: restore the wallet to use it again"
                        ))))
        }
    }

    private func pinState(of wallet: WalletID) async throws -> Components.Schemas.WalletPINState {
        let record = try await ledger.walletPIN(of: wallet)
        let policy = Self.pinProofPolicy
        return .init(
            pinSet: record != nil, pinless: try await ledger.isWalletPinless(wallet),
            wrongProofs: Int64(record?.failures ?? 0), blocked: (record?.failures ?? 0) >= policy.blockAfter,
            retryAfter: max(0, (record?.blockedUntil ?? 0) - now()),
            pinlessPaymentLimit: ledger.options.pinlessPaymentLimit ?? 0)
    }
}
