import HorizonAPI

/// Where a payment stands at the server, for a terminal asked about one it may not know.
public struct ServerPaymentState: Sendable, Equatable {
    /// The payment id (an intent's id is its payment's), hex.
    public let id: String
    /// "payment", or the kind of redemption.
    public let transactionType: String
    /// The merchant's order reference, when the server keeps one for it.
    public let orderReference: String?
    public let registerUser: String
    public let amount: Int64
    public let currency: String
    /// An intent's status (requires_collection, collecting, succeeded, declined, canceled,
    /// expired, refunded, partially_refunded), or a settled payment's outcome (approved,
    /// declined, refunded, partially_refunded).
    public let state: String
}

extension HorizonServerClient {
    /// The payment intent or settled payment with this id (the merchant's: a terminal reads its
    /// merchant's); nil when the server has neither.
    public func paymentState(id: String) async throws(ServerClientError) -> ServerPaymentState? {
        switch try await call({ try await client.getPaymentIntent(path: .init(intentId: id)) }) {
        case .ok(let ok): return Self.state(try Self.json { try ok.body.json })
        case .default(404, _): break
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
        switch try await call({ try await client.getMerchantTransaction(path: .init(paymentId: id)) }) {
        case .ok(let ok): return Self.state(try Self.json { try ok.body.json.transaction })
        case .default(404, _): return nil
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// The newest of the merchant's payment intents with the order reference `reference`; nil
    /// when there is none.
    public func paymentState(orderReference reference: String) async throws(ServerClientError)
        -> ServerPaymentState?
    {
        switch try await call({ try await client.listPaymentIntents(query: .init(reference: reference)) }) {
        case .ok(let ok): return try Self.json { try ok.body.json.paymentIntents }.first.map(Self.state)
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    private static func state(_ intent: Components.Schemas.PaymentIntent) -> ServerPaymentState {
        ServerPaymentState(
            id: intent.id.lowercased(), transactionType: "payment", orderReference: intent.reference,
            registerUser: intent.payment?.registerUser ?? "", amount: intent.amount, currency: intent.currency,
            state: intent.status.rawValue)
    }

    private static func state(_ payment: Components.Schemas.MerchantTransaction) -> ServerPaymentState {
        var state = payment.outcome.rawValue
        if payment.outcome == .approved, payment.refundedAmount > 0 {
            state = payment.refundedAmount >= payment.amount + payment.tip ? "refunded" : "partially_refunded"
        }
        return ServerPaymentState(
            id: payment.paymentId.lowercased(), transactionType: payment.transactionType.rawValue,
            orderReference: payment.orderReference, registerUser: payment.registerUser, amount: payment.amount,
            currency: payment.currency, state: state)
    }
}
