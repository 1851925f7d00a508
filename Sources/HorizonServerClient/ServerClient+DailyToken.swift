import Foundation
import HorizonAPI

/// The wallet's daily token (`POST /v1/wallet/daily-token`), signed with the
/// key this client was made with.
extension HorizonServerClient {
    /// The signing wallet's current daily token. `currency` may be nil when the wallet holds
    /// exactly one; with `refresh`, the server signs a new token if the balance or the
    /// revocation data changed since the stored one.
    public func dailyToken(currency: String? = nil, refresh: Bool = false) async throws(ServerClientError)
        -> Components.Schemas.DailyTokenResponse
    {
        let output = try await call {
            try await client.issueDailyToken(body: .json(.init(currency: currency, refresh: refresh)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }
}
