import Foundation
import HorizonAPI

/// The wallet's services (`openapi.yaml` under `/v1/wallet/...`): each call is signed
/// with the key this client was made with, and the server answers about that key's wallet only.
/// A revoked key is refused with `wallet_key_revoked` (401), an unregistered one with
/// `wallet_unknown` (403).
extension HorizonServerClient {
    /// Liveness of the server (`/health`), for reachability probes; needs no key.
    public func health() async throws(ServerClientError) {
        let output = try await call { try await client.getHealth() }
        switch output {
        case .ok: return
        case .undocumented(let status, _):
            throw .invalidResponse("the server's /health answered HTTP \(status)")
        }
    }

    public func walletAccount() async throws(ServerClientError) -> Components.Schemas.WalletAccountData {
        let output = try await call { try await client.getWalletAccount() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Renames the wallet user (1 to 200 bytes); e-mail and phone stay as registered.
    public func setWalletAccount(name: String) async throws(ServerClientError)
        -> Components.Schemas.WalletAccountData
    {
        let output = try await call { try await client.setWalletAccount(body: .json(.init(name: name))) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func walletBalances() async throws(ServerClientError) -> [Components.Schemas.Amount] {
        let output = try await call { try await client.getWalletBalances() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.balances }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// A page of the wallet's transactions, newest first; pass the page's `nextCursor` for the next.
    public func walletTransactions(limit: Int? = nil, cursor: String? = nil) async throws(ServerClientError)
        -> Components.Schemas.WalletTransactionPage
    {
        let output = try await call {
            try await client.listWalletTransactions(
                query: .init(limit: limit.map { Int32(clamping: $0) }, cursor: cursor))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// One of the wallet's transactions by its payment (or redemption) id, 32 hex digits.
    public func walletTransaction(id: String) async throws(ServerClientError) -> Components.Schemas.WalletTransaction {
        let output = try await call { try await client.getWalletTransaction(path: .init(paymentId: id)) }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// Asks the server to e-mail the receipt of one of the wallet's approved payments (32 hex
    /// digits) to the address the wallet registered with; it is queued in the server's outbox.
    public func emailWalletReceipt(paymentID: String) async throws(ServerClientError)
        -> Components.Schemas.ReceiptEmailQueued
    {
        let output = try await call { try await client.emailWalletReceipt(path: .init(paymentId: paymentID)) }
        switch output {
        case .accepted(let accepted): return try Self.json { try accepted.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func walletBonusPrograms(participating: Bool = false) async throws(ServerClientError)
        -> [Components.Schemas.BonusProgram]
    {
        let output = try await call {
            try await client.listWalletBonusPrograms(query: .init(participating: participating ? true : nil))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.programs }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func setWalletBonusMembership(
        merchantID: String, state: Components.Schemas.BonusMembershipUpdate.StatePayload
    ) async throws(ServerClientError) -> Components.Schemas.BonusProgram {
        let output = try await call {
            try await client.setWalletBonusMembership(
                path: .init(merchantId: merchantID), body: .json(.init(state: state)))
        }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func walletGoldMemberships() async throws(ServerClientError) -> [Components.Schemas.GoldMembership] {
        let output = try await call { try await client.listWalletGoldMemberships() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.memberships }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    public func walletCoupons() async throws(ServerClientError) -> [Components.Schemas.Coupon] {
        let output = try await call { try await client.listWalletCoupons() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.coupons }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }

    /// The operator's messages every app should show now; needs no key.
    public func statusMessages() async throws(ServerClientError) -> [Components.Schemas.StatusMessage] {
        let output = try await call { try await client.getStatusMessages() }
        switch output {
        case .ok(let ok): return try Self.json { try ok.body.json.messages }
        case .default(let status, let error): throw try Self.refusal(status, error)
        }
    }
}
