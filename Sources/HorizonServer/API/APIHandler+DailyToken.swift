import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel

/// The wallet's daily token: a server-signed allowance
/// for offline payments, signed by the issuer key wallets and terminals already trust.
extension APIHandler {
    func issueDailyToken(_ input: Operations.IssueDailyToken.Input) async throws
        -> Operations.IssueDailyToken.Output
    {
        guard case .json(let request) = input.body else {
            throw APIError(.unsupportedMediaType, "the body must be JSON")
        }
        let wallet = try await signingWallet()
        // signingWallet() has checked that a signer exists and is this wallet's active key.
        guard let signer = RequestScope.current?.signer else {
            throw APIError(.unauthenticated, "this operation needs a request signed with the wallet's key")
        }
        let walletKey = try Self.publicKey(bytes: signer.bytes)
        let balances = try await ledger.balances(of: wallet.id)
        let currency = try Self.tokenCurrency(request.currency, balances: balances)
        let time = now()
        // What the wallet could spend: its balance less an offline debt, so that a
        // wallet in debt gets an allowance of 0 until a top-up has repaid it.
        let owed = try await ledger.offlineDebt(of: wallet.id, in: currency)
        let balance = (balances.first { $0.currency == currency }?.minorUnits ?? 0) - owed.minorUnits
        let revocation = DailyToken.RevocationState(revokedKeyIDs: try await ledger.revokedTerminalKeyIDs())

        if let stored = try await ledger.currentDailyToken(of: wallet.id, key: signer, currency: currency, at: time) {
            // The same token while it is valid: a refresh signs a new one only when something the
            // token states changed (the balance bounding the allowance, or the revocation data),
            // or when less than a quarter of its validity is left (the wallet renews it before it
            // runs out, so it is not left without one while offline).
            let changed = stored.balanceAtIssue != balance || stored.revocationDigest != revocation.digest
            let endingSoon = (stored.expiresAt - time) * 4 < stored.expiresAt - stored.issuedAt
            if request.refresh != true || !(changed || endingSoon) {
                return .ok(.init(body: .json(Self.tokenResponse(stored, issuedNow: false))))
            }
        }

        let allowance = try Money(
            minorUnits: max(0, min(balance, configuration.offlineAllowanceCap(in: currency))), currency: currency)
        let token: DailyToken
        do {
            token = try DailyToken.issue(
                by: issuer.signingKey, walletKey: walletKey, walletAccountID: wallet.id.rawValue, allowance: allowance,
                issuedAt: time,
                expiresAt: time + min(configuration.effectiveDailyTokenValidity, DailyToken.maximumValidity),
                revocation: revocation)
        } catch {
            throw APIError(.internalError, "no daily token can be signed: \(error)")
        }
        let record = DailyTokenRecord(
            tokenID: token.tokenID, walletID: wallet.id, walletKey: signer, allowance: allowance,
            balanceAtIssue: balance, revocationDigest: revocation.digest, issuedAt: token.issuedAt,
            expiresAt: token.expiresAt, token: token.encoded())
        try await ledger.recordDailyToken(record)
        metrics.record(event: "daily_token_issued")
        RequestScope.current?.logger.info(
            "daily token issued", metadata: ["wallet": "\(wallet.id)", "token": "\(token.tokenIDHex)"])
        return .ok(.init(body: .json(Self.tokenResponse(record, issuedNow: true))))
    }

    /// The currency asked for, or the wallet's only one.
    static func tokenCurrency(_ code: String?, balances: [Money]) throws -> Currency {
        if let code {
            do { return try Currency(code: code) } catch {
                throw APIError(.invalidRequest, "currency \(code) is not a supported ISO 4217 code")
            }
        }
        guard balances.count == 1, let only = balances.first else {
            throw APIError(
                .invalidRequest,
                balances.isEmpty
                    ? "this wallet holds no currency yet; name the token's currency (e.g. \"currency\": \"EUR\")"
                    : "this wallet holds several currencies; name the token's currency (e.g. \"currency\": \"EUR\")")
        }
        return only.currency
    }

    static func tokenResponse(_ record: DailyTokenRecord, issuedNow: Bool) -> Components.Schemas.DailyTokenResponse {
        .init(
            token: Data(record.token).base64EncodedString(), tokenId: record.tokenID.hexString,
            currency: record.allowance.currency.code, allowance: record.allowance.minorUnits,
            issuedAt: record.issuedAt, expiresAt: record.expiresAt, issuedNow: issuedNow)
    }
}
