import Foundation
import HorizonAPI

/// A wallet's payment cards (`openapi.yaml`, `/v1/wallet/cards...`), signed with the wallet's
/// key (the client's `signingKey`). `WalletClient` in HorizonServiceClients is the app's layer.
extension HorizonServerClient {
    public func paymentCards() async throws(ServerClientError) -> [Components.Schemas.PaymentCard] {
        let output = try await call { try await client.getPaymentCards() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.cards }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Adds a card; the answer has `paymentDetails` when it needs a 3-D Secure challenge.
    public func addPaymentCard(_ request: Components.Schemas.AddPaymentCardRequest) async throws(ServerClientError)
        -> Components.Schemas.AddPaymentCardResult
    {
        let output = try await call { try await client.addPaymentCard(body: .json(request)) }
        switch output {
        case .created(let created): return try Self.json { try created.body.json }
        case .accepted(let accepted): return try Self.json { try accepted.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Completes adding a card with its challenge's MD and PaRes.
    public func executeAddPaymentCard(cardID: String, md: String, paRes: String) async throws(ServerClientError)
        -> Components.Schemas.PaymentCard
    {
        let output = try await call {
            try await client.executeAddPaymentCard(
                path: .init(cardId: cardID), body: .json(.init(md: md, paRes: paRes)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// The state of a 3-D Secure challenge of one of this wallet's cards.
    public func cardChallenge(md: String) async throws(ServerClientError) -> Components.Schemas.CardChallengeStatus {
        let output = try await call { try await client.getCardChallenge(path: .init(md: md)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func updatePaymentCard(cardID: String, active: Bool?, name: String?) async throws(ServerClientError)
        -> Components.Schemas.PaymentCard
    {
        let output = try await call {
            try await client.updatePaymentCard(
                path: .init(cardId: cardID), body: .json(.init(active: active, name: name)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func removePaymentCard(cardID: String) async throws(ServerClientError) {
        let output = try await call { try await client.removePaymentCard(path: .init(cardId: cardID)) }
        switch output {
        case .noContent: return
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }
}
