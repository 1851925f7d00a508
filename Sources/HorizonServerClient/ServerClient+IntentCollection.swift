import HorizonAPI

extension HorizonServerClient {
    /// Claims a payment intent pushed to this terminal: it is now being collected here. Refused
    /// (`payment_intent_not_collectable`) when it was claimed before, canceled, expired or is
    /// another terminal's; so a pushed intent is collected once.
    public func collectPaymentIntent(id: String) async throws(ServerClientError) -> Components.Schemas.PaymentIntent {
        let output = try await call { try await client.collectPaymentIntent(path: .init(intentId: id)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }
}
