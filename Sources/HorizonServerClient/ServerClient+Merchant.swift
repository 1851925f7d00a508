import Foundation
import HorizonAPI

/// The merchant service (`openapi.yaml`, `/v1/merchant/...`), signed with the terminal's key:
/// what `MerchantServiceClient` and `horizon-terminal`'s merchant commands call.
extension HorizonServerClient {
    /// Signs the merchant's admin in (`POST /v1/merchant/sessions`): a session token for
    /// `init(serverURL:adminSessionToken:)`, good for `lifetimeSeconds` (60 s to 8 h, the
    /// default) or until `signOutMerchantAdmin`.
    /// Refusals: `invalid_credentials`, `account_locked`, `rate_limited`.
    public func signInMerchantAdmin(email: String, password: String, lifetimeSeconds: Int64? = nil)
        async throws(ServerClientError) -> Components.Schemas.MerchantAdminSession
    {
        let output = try await call {
            try await client.signInMerchantAdmin(
                body: .json(.init(email: email, password: password, lifetimeSeconds: lifetimeSeconds)))
        }
        switch output {
        case .created(let created): return try Self.json { try created.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Ends the admin session this client carries.
    public func signOutMerchantAdmin() async throws(ServerClientError) {
        let output = try await call { try await client.signOutMerchantAdmin() }
        switch output {
        case .noContent: return
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func registerUsers() async throws(ServerClientError) -> [Components.Schemas.RegisterUser] {
        let output = try await call { try await client.listRegisterUsers() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.registerUsers }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func addRegisterUser(id: String, name: String) async throws(ServerClientError)
        -> Components.Schemas.RegisterUser
    {
        let output = try await call { try await client.addRegisterUser(body: .json(.init(id: id, name: name))) }
        switch output {
        case .created(let created): return try Self.json { try created.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func renameRegisterUser(id: String, name: String) async throws(ServerClientError)
        -> Components.Schemas.RegisterUser
    {
        let output = try await call {
            try await client.renameRegisterUser(path: .init(userId: id), body: .json(.init(name: name)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func removeRegisterUser(id: String) async throws(ServerClientError) {
        let output = try await call { try await client.removeRegisterUser(path: .init(userId: id)) }
        switch output {
        case .noContent: return
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// One page of the merchant's transactions, newest first (see `openapi.yaml` for the filters).
    public func merchantTransactions(
        limit: Int? = nil, cursor: String? = nil, from: Int64? = nil, to: Int64? = nil,
        type: Components.Schemas.TransactionKind? = nil, registerUser: String? = nil
    ) async throws(ServerClientError) -> Components.Schemas.MerchantTransactionPage {
        let query = Operations.ListMerchantTransactions.Input.Query(
            limit: limit.map { Int32(clamping: $0) }, cursor: cursor, from: from, to: to, _type: type,
            registerUser: registerUser)
        let output = try await call { try await client.listMerchantTransactions(query: query) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func merchantTransaction(paymentID: String) async throws(ServerClientError)
        -> Components.Schemas.MerchantTransactionDetails
    {
        let output = try await call { try await client.getMerchantTransaction(path: .init(paymentId: paymentID)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func refunds(paymentID: String) async throws(ServerClientError) -> [Components.Schemas.Refund] {
        let output = try await call { try await client.listRefunds(path: .init(paymentId: paymentID)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.refunds }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Refunds `amount` minor units of a payment, once per `refundID` (a retry with the same id
    /// and terms gets the stored refund).
    public func createRefund(refundID: String, paymentID: String, amount: Int64, currency: String)
        async throws(ServerClientError) -> Components.Schemas.Refund
    {
        let body = Components.Schemas.RefundCreation(
            refundId: refundID, paymentId: paymentID, amount: amount, currency: currency)
        let output = try await call { try await client.createRefund(body: .json(body)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func merchantPrograms() async throws(ServerClientError) -> Components.Schemas.MerchantPrograms {
        let output = try await call { try await client.getMerchantPrograms() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func merchantTerminals() async throws(ServerClientError) -> [Components.Schemas.MerchantTerminal] {
        let output = try await call { try await client.listMerchantTerminals() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.terminals }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func revokeTerminal(id: String) async throws(ServerClientError) -> Components.Schemas.MerchantTerminal {
        let output = try await call { try await client.revokeMerchantTerminal(path: .init(terminalId: id)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }
}
