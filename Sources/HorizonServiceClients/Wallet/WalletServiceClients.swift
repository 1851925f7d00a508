import Foundation
import HorizonAPI

// The wallet's service clients of the reference SDK, each an async layer over the
// signed `/v1/wallet/...` API through its `IdentityClient`: reads fall back to the last answer
// in the `Cache` while the server cannot be reached (the result says so), changes need the
// server, and each client clears its cache in `reset()`, which the identity calls when it is
// invalidated.

/// The wallet user's data (the reference's `WalletUserData`). Only `name` can be changed here;
/// e-mail and phone stay as registered.
public struct WalletUserData: Sendable, Equatable, Codable {
    public let walletID: String
    public var name: String
    public let email: String?
    public let phone: String?
    public let createdAt: Int64

    init(_ data: Components.Schemas.WalletAccountData) {
        walletID = data.walletId
        name = data.name
        email = data.email
        phone = data.phone
        createdAt = data.createdAt
    }
}

public typealias WalletBalance = Components.Schemas.Amount
public typealias WalletTransaction = Components.Schemas.WalletTransaction
public typealias WalletTransactionPage = Components.Schemas.WalletTransactionPage
public typealias ReceiptEmailQueued = Components.Schemas.ReceiptEmailQueued
public typealias BonusProgram = Components.Schemas.BonusProgram
public typealias GoldProgramMembership = Components.Schemas.GoldMembership
public typealias Coupon = Components.Schemas.Coupon
public typealias CustomStatusMessage = Components.Schemas.StatusMessage

/// The reference's `BonusProgramMembershipState`, as a wallet can set it.
public enum BonusProgramMembershipState: String, Sendable, Equatable {
    case joined
    /// Leaving forfeits the points held at the merchant; payments there earn none until joining again.
    case left
}

/// The reference's `AccountDataClient`: the wallet user's data, and the balance per currency.
public final class AccountDataClient: CachingServiceClient {
    public static let cacheName = "account-data"
    public let identityClient: IdentityClient
    public let cache: Cache

    public init(identityClient: IdentityClient, cache: Cache) {
        self.identityClient = identityClient
        self.cache = cache
        identityClient.addObserver(self)
    }

    /// The reference's `enqueueGetAccountData`.
    public func accountData() async throws(ServiceClientError) -> ServiceResult<WalletUserData> {
        let result = try await identityClient.fetch("account", for: Self.cacheName, cache: cache) {
            client throws(ServerClientError) in try await client.walletAccount()
        }
        return ServiceResult(value: WalletUserData(result.value), freshness: result.freshness)
    }

    /// The reference's `enqueueSetAccountDataWithWalletUserData`: stores `data.name`; answers
    /// the data as the server now holds it (and caches it).
    public func setAccountData(_ data: WalletUserData) async throws(ServiceClientError) -> WalletUserData {
        let stored = try await identityClient.perform { client throws(ServerClientError) in
            try await client.setWalletAccount(name: data.name)
        }
        cache.store(stored, for: Cache.key(client: Self.cacheName, scope: identityClient.cacheScope, item: "account"))
        return WalletUserData(stored)
    }

    /// The wallet's balance in each currency it holds.
    public func balances() async throws(ServiceClientError) -> ServiceResult<[WalletBalance]> {
        try await identityClient.fetch("balances", for: Self.cacheName, cache: cache) {
            client throws(ServerClientError) in try await client.walletBalances()
        }
    }

}

/// The reference's `WalletTransactionsClient`: the wallet's transactions and their details.
public final class WalletTransactionsClient: CachingServiceClient {
    public static let cacheName = "wallet-transactions"
    public let identityClient: IdentityClient
    public let cache: Cache

    public init(identityClient: IdentityClient, cache: Cache) {
        self.identityClient = identityClient
        self.cache = cache
        identityClient.addObserver(self)
    }

    /// A page of transactions, newest first; pass `page.nextCursor` for the next page (nil when
    /// it was the last). A cursor the server did not give is refused (`invalid_cursor`).
    public func transactions(limit: Int = 20, cursor: String? = nil) async throws(ServiceClientError)
        -> ServiceResult<WalletTransactionPage>
    {
        try await identityClient.fetch("page/\(limit)/\(cursor ?? "first")", for: Self.cacheName, cache: cache) {
            client throws(ServerClientError) in try await client.walletTransactions(limit: limit, cursor: cursor)
        }
    }

    /// One transaction by its payment (or redemption) id, 32 hex digits.
    public func transactionDetails(paymentID: String) async throws(ServiceClientError)
        -> ServiceResult<WalletTransaction>
    {
        try await identityClient.fetch("details/\(paymentID)", for: Self.cacheName, cache: cache) {
            client throws(ServerClientError) in try await client.walletTransaction(id: paymentID)
        }
    }

    /// Asks the server to e-mail the receipt of one of the wallet's approved payments to the
    /// address the wallet registered with (never cached: each call is a request).
    public func emailReceipt(paymentID: String) async throws(ServiceClientError) -> ReceiptEmailQueued {
        try await identityClient.perform { client throws(ServerClientError) in
            try await client.emailWalletReceipt(paymentID: paymentID)
        }
    }

}

/// The reference's `BonusProgramClient`: every merchant's bonus program the wallet can join, the
/// ones it takes part in, and joining or leaving one.
public final class BonusProgramClient: CachingServiceClient {
    public static let cacheName = "bonus-programs"
    public let identityClient: IdentityClient
    public let cache: Cache

    public init(identityClient: IdentityClient, cache: Cache) {
        self.identityClient = identityClient
        self.cache = cache
        identityClient.addObserver(self)
    }

    /// The reference's `allBonusProgramsVehicle`: every program, with the wallet's state and points.
    public func allBonusPrograms() async throws(ServiceClientError) -> ServiceResult<[BonusProgram]> {
        try await identityClient.fetch("all", for: Self.cacheName, cache: cache) { client throws(ServerClientError) in
            try await client.walletBonusPrograms()
        }
    }

    /// The reference's `participatingBonusProgramsVehicle`: the programs the wallet takes part in.
    public func participatingBonusPrograms() async throws(ServiceClientError) -> ServiceResult<[BonusProgram]> {
        try await identityClient.fetch("participating", for: Self.cacheName, cache: cache) {
            client throws(ServerClientError) in try await client.walletBonusPrograms(participating: true)
        }
    }

    /// The reference's `updateBonusProgramMembership:withParticipationState:`. The cached lists
    /// are dropped: they no longer say what the server holds.
    public func updateBonusProgramMembership(merchantID: String, state: BonusProgramMembershipState)
        async throws(ServiceClientError) -> BonusProgram
    {
        let program = try await identityClient.perform { client throws(ServerClientError) in
            try await client.setWalletBonusMembership(merchantID: merchantID, state: state == .joined ? .joined : .left)
        }
        cache.reset(client: Self.cacheName)
        return program
    }

}

/// The reference's `GoldProgramMembershipsClient`: the wallet's gold memberships.
public final class GoldProgramMembershipsClient: CachingServiceClient {
    public static let cacheName = "gold-memberships"
    public let identityClient: IdentityClient
    public let cache: Cache

    public init(identityClient: IdentityClient, cache: Cache) {
        self.identityClient = identityClient
        self.cache = cache
        identityClient.addObserver(self)
    }

    public func memberships() async throws(ServiceClientError) -> ServiceResult<[GoldProgramMembership]> {
        try await identityClient.fetch("all", for: Self.cacheName, cache: cache) { client throws(ServerClientError) in
            try await client.walletGoldMemberships()
        }
    }

}

/// The reference's `CouponProgramClient`: the wallet's coupons, open and redeemed.
public final class CouponProgramClient: CachingServiceClient {
    public static let cacheName = "coupons"
    public let identityClient: IdentityClient
    public let cache: Cache

    public init(identityClient: IdentityClient, cache: Cache) {
        self.identityClient = identityClient
        self.cache = cache
        identityClient.addObserver(self)
    }

    /// Every coupon (status open, redeemed or expired).
    public func coupons() async throws(ServiceClientError) -> ServiceResult<[Coupon]> {
        try await identityClient.fetch("all", for: Self.cacheName, cache: cache) { client throws(ServerClientError) in
            try await client.walletCoupons()
        }
    }

    /// The coupons that can still be redeemed.
    public func openCoupons() async throws(ServiceClientError) -> ServiceResult<[Coupon]> {
        let all = try await coupons()
        return ServiceResult(value: all.value.filter { $0.status == .open }, freshness: all.freshness)
    }

    public func redeemedCoupons() async throws(ServiceClientError) -> ServiceResult<[Coupon]> {
        let all = try await coupons()
        return ServiceResult(value: all.value.filter { $0.status == .redeemed }, freshness: all.freshness)
    }

}

/// The reference's `CustomStatusMessageManager`: the messages the server's operator asks the app
/// to show (`horizon-server messages add`), less the ones the person dismissed. The messages are
/// the same for every wallet, so they need no key and are cached for no identity.
public final class CustomStatusMessageManager: CachingServiceClient {
    public static let cacheName = "status-messages"
    public let identityClient: IdentityClient
    public let cache: Cache

    public init(identityClient: IdentityClient, cache: Cache) {
        self.identityClient = identityClient
        self.cache = cache
        identityClient.addObserver(self)
    }

    /// Every message the server asks apps to show now.
    public func currentMessages() async throws(ServiceClientError) -> ServiceResult<[CustomStatusMessage]> {
        try await identityClient.fetch("current", for: Self.cacheName, cache: cache, signed: false) {
            client throws(ServerClientError) in try await client.statusMessages()
        }
    }

    /// The current messages the person has not dismissed.
    public func messagesToShow() async throws(ServiceClientError) -> ServiceResult<[CustomStatusMessage]> {
        let current = try await currentMessages()
        let dismissed = dismissedIDs()
        return ServiceResult(value: current.value.filter { !dismissed.contains($0.id) }, freshness: current.freshness)
    }

    /// The person saw the message and closed it: it is not shown again (kept in the cache, so a
    /// persistent cache remembers it across launches).
    public func dismiss(messageID: Int64) {
        cache.store(dismissedIDs().union([messageID]), for: dismissedKey)
    }

    private var dismissedKey: String { Cache.key(client: Self.cacheName, scope: "anonymous", item: "dismissed") }

    private func dismissedIDs() -> Set<Int64> { cache.value(Set<Int64>.self, for: dismissedKey)?.value ?? [] }

}
