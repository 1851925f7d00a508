import Crypto
import Foundation
import HorizonCLISupport
import HorizonCore
import HorizonRadioCLISupport
import HorizonRoles
import HorizonSecureChannel
import HorizonServiceClients

extension WalletSession {
    /// The daily token client of a registered wallet, over its persistent cache (where
    /// `horizon-wallet token` keeps the token), with the key already unlocked; nil for a sandbox
    /// wallet, which has no server and so no token. `pay` presents its token to a
    /// terminal that cannot reach its server, and records what that terminal accepted offline.
    static func dailyTokenClient(
        _ files: WalletFiles, signingKey: P256.Signing.PrivateKey, anchors: [TrustAnchor]
    ) throws -> DailyTokenClient? {
        try open(files, signingKey: signingKey).map {
            DailyTokenClient(identityClient: $0.identity, cache: $0.cache, trustAnchors: anchors)
        }
    }
}

/// The remaining offline allowance as a line: what the current token still allows, or why none.
func offlineAllowanceText(_ tokens: DailyTokenClient?) -> String {
    guard let tokens else { return "none (a sandbox wallet has no daily token)" }
    return offlineAllowanceText(tokens.currentToken)
}

/// The same for a token already read (reading one verifies its signature).
func offlineAllowanceText(_ token: StoredDailyToken?) -> String {
    guard let token else {
        return "none (no valid daily token; run `horizon-wallet token` while online)"
    }
    let left = max(0, token.token.expiresAt - Int64(Date().timeIntervalSince1970))
    return
        "\(token.remainingAllowance) of \(token.token.allowance) (token valid \(left / 3600) h \(left % 3600 / 60) min more)"
}
