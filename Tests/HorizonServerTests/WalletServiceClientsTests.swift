import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import HorizonServiceClients
import HummingbirdTesting
import Testing

/// The wallet's service clients against the server listening on a loopback port:
/// account data, balances, history with paging, details, bonus/gold/coupon programs, status
/// messages; the cache answering while the server is down; a revoked key invalidating the
/// identity and clearing every client's cache.
@Suite("Wallet service clients against a live server")
struct WalletServiceClientsTests {
    /// A bakery with a till, a registered wallet that paid three times and redeemed once, a gold
    /// membership, three coupons (open, redeemed, expired), a second wallet that paid once, and
    /// a status message.
    struct Scene {
        let server: TestServer
        let bakery: Merchant
        let till: TerminalKey
        let walletKey: P256.Signing.PrivateKey
        let wallet: WalletID
        let payments: [Confirm]
        let redemption: Redeem
        let otherPayment: Confirm

        static func make() async throws -> Scene {
            let server = try await TestServer()
            let bakery = try await server.addMerchant()
            let till = TerminalKey()
            _ = try await server.activate(till)
            let ledger = server.ledger
            let walletKey = P256.Signing.PrivateKey()
            let wallet = try await ledger.createWallet(
                name: "Alice", publicKey: try PublicKeyBytes(bytes: Array(walletKey.publicKey.x963Representation))
            ).id
            try await ledger.deposit(try Money(minorUnits: 100_00, currency: .eur), to: wallet)
            let otherKey = P256.Signing.PrivateKey()
            let other = try await ledger.createWallet(
                name: "Bob", publicKey: try PublicKeyBytes(bytes: Array(otherKey.publicKey.x963Representation))
            ).id
            try await ledger.deposit(try Money(minorUnits: 10_00, currency: .eur), to: other)
            let payments = try [
                WalletSigned.confirm(by: walletKey, for: till.key.publicKey, amount: 10_00),
                WalletSigned.confirm(by: walletKey, for: till.key.publicKey, amount: 20_00, tip: 1_00),
                WalletSigned.confirm(by: walletKey, for: till.key.publicKey, amount: 5_00),
            ]
            let redemption = try WalletSigned.redeem(by: walletKey, for: till.key.publicKey, points: 15)
            let otherPayment = try WalletSigned.confirm(by: otherKey, for: till.key.publicKey, amount: 3_00)
            try await server.withClient { client in
                for payment in payments + [otherPayment] {
                    let paid = try await client.sendSigned(
                        .post, "/v1/payments", json: try SubmissionFields(payment: payment).json(), by: till.key,
                        time: server.clock.now)
                    #expect(paid.status == .ok, "\(paid.text)")
                }
                let redeemed = try await client.sendSigned(
                    .post, "/v1/redemptions", json: try SubmissionFields(redemption: redemption).json(), by: till.key,
                    time: server.clock.now)
                #expect(redeemed.status == .ok, "\(redeemed.text)")
            }
            let now = server.clock.now
            try await ledger.grantGoldMembership(
                to: wallet, at: bakery.id, tier: "Gold", validFrom: now - 86_400, validUntil: now + 300 * 86_400)
            for (code, expiresAt) in [("OPEN5", now + 86_400), ("USED3", now + 86_400), ("OLD2", now - 60)] {
                try await ledger.issueCoupon(
                    code: code, to: wallet, at: bakery.id, description: "\(code) off",
                    value: try Money(minorUnits: 2_00, currency: .eur), expiresAt: expiresAt)
            }
            try await ledger.store.transaction { db in
                try await db.query("UPDATE coupons SET redeemed_at = ? WHERE code = 'USED3'", [.integer(now - 10)])
            }
            _ = try await ledger.addStatusMessage(
                severity: .info, title: "New: gold memberships", body: "Ask at the till.", at: now)
            return Scene(
                server: server, bakery: bakery, till: till, walletKey: walletKey, wallet: wallet, payments: payments,
                redemption: redemption, otherPayment: otherPayment)
        }

        func identity(port: Int, reachability: NetworkReachability? = nil) throws -> IdentityClient {
            let clock = server.clock
            return IdentityClient(
                serverURL: try #require(URL(string: "http://127.0.0.1:\(port)")), signingKey: walletKey,
                timeout: .seconds(30), reachability: reachability, clock: { clock.now })
        }
    }

    @Test func theClientsReadAndChangeTheWalletsOwnAccount() async throws {
        let scene = try await Scene.make()
        let cache = Cache.temporaryAnonymousCache()
        // Speed is not under test here; a loaded machine may take seconds to answer.
        let reachability = NetworkReachability(slowThreshold: .seconds(120), probe: { nil })
        try await scene.server.withLiveServer { client in
            let identity = try scene.identity(port: try #require(client.port), reachability: reachability)
            let account = AccountDataClient(identityClient: identity, cache: cache)

            let data = try await account.accountData()
            #expect(data.isFresh)
            #expect(data.value.walletID == scene.wallet.rawValue && data.value.name == "Alice")
            var renamed = data.value
            renamed.name = "  Alice Baker "
            #expect(try await account.setAccountData(renamed).name == "Alice Baker")
            #expect(try await scene.server.ledger.wallet(scene.wallet).name == "Alice Baker")
            renamed.name = ""
            do {
                _ = try await account.setAccountData(renamed)
                Issue.record("an empty name was stored")
            } catch let error as ServiceClientError {
                #expect(error.code == "invalid_request")
                #expect("\(error)".contains("a name must be 1 to 200 bytes of printable text"))
            }

            let balances = try await account.balances()
            let spent: Int64 = 10_00 + 21_00 + 5_00
            #expect(balances.value.map(\.amount) == [100_00 - spent])
            #expect(balances.value.map(\.currency) == ["EUR"])
            #expect(reachability.reachabilityStatus == .fast)
        }
    }

    @Test func historyPagesNewestFirstWithAnOpaqueCursor() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let identity = try scene.identity(port: try #require(client.port))
            let transactions = WalletTransactionsClient(
                identityClient: identity, cache: .temporaryAnonymousCache())
            let ids = ([scene.redemption.redemptionID] + scene.payments.reversed().map(\.paymentID)).map {
                $0.bytes.hexString
            }
            let first = try await transactions.transactions(limit: 3).value
            #expect(first.transactions.map(\.paymentId) == Array(ids.prefix(3)))
            #expect(first.transactions.allSatisfy { $0.merchantName == "Corner Bakery" })
            #expect(first.transactions.first?.transactionType == .bonus)
            #expect(first.transactions.first?.quantity == 15)
            let cursor = try #require(first.nextCursor)
            let second = try await transactions.transactions(limit: 3, cursor: cursor).value
            #expect(second.transactions.map(\.paymentId) == [ids[3]])
            #expect(second.nextCursor == nil, "the last page names no next one")
            // The other wallet's payment is in no page.
            #expect(
                !(first.transactions + second.transactions).contains {
                    $0.paymentId == scene.otherPayment.paymentID.bytes.hexString
                })

            // Past the end: an empty page. A cursor the server did not give: refused, exactly.
            let pastTheEnd = try await transactions.transactions(limit: 3, cursor: "h1.1").value
            #expect(pastTheEnd.transactions.isEmpty && pastTheEnd.nextCursor == nil)
            for malformed in ["garbage", "h1.", "h1.-5", "h2.10"] {
                do {
                    _ = try await transactions.transactions(limit: 3, cursor: malformed)
                    Issue.record("cursor \(malformed) was accepted")
                } catch let error as ServiceClientError {
                    guard case .server(.refused(let status, let code, let message, _)) = error else {
                        Issue.record("\(error)")
                        continue
                    }
                    #expect(status == 400 && code == "invalid_cursor")
                    #expect(
                        message
                            == "cursor is not one this server gave; pass a page's nextCursor as it is, or start again without a cursor"
                    )
                }
            }
            do {
                _ = try await transactions.transactions(limit: 101)
                Issue.record("a page of 101 was accepted")
            } catch let error as ServiceClientError {
                #expect(error.code == "invalid_request" && "\(error)".contains("limit must be 1 to 100"))
            }

            // Details, with the merchant's name; another wallet's transaction is not found.
            let paid = try await transactions.transactionDetails(paymentID: ids[2]).value
            #expect(paid.merchantName == "Corner Bakery" && paid.merchantId == scene.bakery.id.rawValue)
            #expect(paid.amount == 20_00 && paid.tip == 1_00 && paid.outcome == .approved)
            #expect(paid.bonusPointsEarned == 20 && paid.registerUser == "till-user-1")
            #expect(paid.refunds == [], "nothing refunded yet")

            // The merchant gives back 5.25 of it: the wallet's details and its page show it.
            let refund = try await scene.server.ledger.refund(
                RefundRequest(
                    refundID: RefundID(rawValue: "r-1"), paymentID: scene.payments[1].paymentID,
                    amount: try Money(minorUnits: 5_25, currency: .eur)), merchant: scene.bakery.id)
            let refunded = try await transactions.transactionDetails(paymentID: ids[2]).value
            #expect(
                refunded.refunds == [
                    .init(
                        refundId: "r-1", amount: 5_25, currency: "EUR", destination: "horizon_balance",
                        bonusPointsReversed: refund.bonusPointsReversed, refundedAt: refund.createdAt)
                ])
            #expect(refund.bonusPointsReversed == 5, "floor(20 points × 5.25 / 21.00)")
            let page = try await transactions.transactions(limit: 3).value
            #expect(page.transactions.first { $0.paymentId == ids[2] }?.refunds?.map(\.amount) == [5_25])
            do {
                _ = try await transactions.transactionDetails(paymentID: scene.otherPayment.paymentID.bytes.hexString)
                Issue.record("another wallet's transaction was shown")
            } catch let error as ServiceClientError {
                #expect(error.code == "transaction_not_found")
            }
        }
    }

    @Test func bonusProgramsAreJoinedAndLeftAndGoldAndCouponsListed() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let identity = try scene.identity(port: try #require(client.port))
            let cache = Cache.temporaryAnonymousCache()
            let bonus = BonusProgramClient(identityClient: identity, cache: cache)
            // 10 + 20 + 5 points earned, 15 redeemed.
            let all = try await bonus.allBonusPrograms().value
            #expect(all.map(\.merchantName) == ["Corner Bakery"])
            #expect(all.first?.points == 20 && all.first?.state == .joined)
            #expect(try await bonus.participatingBonusPrograms().value.map(\.points) == [20])

            // Leaving forfeits the points and stops earning; joining again starts from zero.
            let left = try await bonus.updateBonusProgramMembership(merchantID: scene.bakery.id.rawValue, state: .left)
            #expect(left.state == .left && left.points == 0)
            #expect(try await bonus.participatingBonusPrograms().value.isEmpty)
            #expect(try await bonus.allBonusPrograms().value.first?.state == .left)
            let whileLeft = try WalletSigned.confirm(by: scene.walletKey, for: scene.till.key.publicKey, amount: 7_00)
            try await scene.server.withClient { router in
                let paid = try await router.sendSigned(
                    .post, "/v1/payments", json: try SubmissionFields(payment: whileLeft).json(), by: scene.till.key,
                    time: scene.server.clock.now)
                let result = try JSONDecoder().decode(Components.Schemas.PaymentResult.self, from: paid.data)
                #expect(result.outcome == .approved && result.bonusPointsEarned == 0)
            }
            let joined = try await bonus.updateBonusProgramMembership(
                merchantID: scene.bakery.id.rawValue, state: .joined)
            #expect(joined.state == .joined && joined.points == 0)
            do {
                _ = try await bonus.updateBonusProgramMembership(merchantID: "m_nobody", state: .joined)
                Issue.record("an unknown merchant's program was joined")
            } catch let error as ServiceClientError {
                #expect(error.code == "not_found" && "\(error)".contains("merchant m_nobody does not exist"))
            }

            let gold = try await GoldProgramMembershipsClient(identityClient: identity, cache: cache).memberships()
            #expect(gold.value.map(\.tier) == ["Gold"])
            #expect(gold.value.first?.benefitAvailable == true && gold.value.first?.merchantName == "Corner Bakery")

            let coupons = CouponProgramClient(identityClient: identity, cache: cache)
            let everyCoupon = try await coupons.coupons().value
            #expect(everyCoupon.map(\.code) == ["OLD2", "OPEN5", "USED3"])
            #expect(everyCoupon.map(\.status) == [.expired, .open, .redeemed])
            #expect(try await coupons.openCoupons().value.map(\.code) == ["OPEN5"])
            #expect(try await coupons.redeemedCoupons().value.map(\.code) == ["USED3"])

            let messages = CustomStatusMessageManager(identityClient: identity, cache: cache)
            let current = try await messages.currentMessages().value
            #expect(current.map(\.title) == ["New: gold memberships"] && current.first?.severity == .info)
            messages.dismiss(messageID: try #require(current.first?.id))
            #expect(try await messages.messagesToShow().value.isEmpty)
        }
    }

    @Test func theCacheAnswersWhileTheServerIsDownAndSaysSo() async throws {
        let scene = try await Scene.make()
        let directory = scene.server.directory.appendingPathComponent("wallet-cache")
        // Speed is not under test here; a loaded machine may take seconds to answer.
        let reachability = NetworkReachability(slowThreshold: .seconds(120), probe: { nil })
        let port = try await scene.server.withLiveServer { client in
            let port = try #require(client.port)
            let identity = try scene.identity(port: port, reachability: reachability)
            let cache = try Cache.persistentCache(directory: directory)
            _ = try await AccountDataClient(identityClient: identity, cache: cache).balances()
            _ = try await CouponProgramClient(identityClient: identity, cache: cache).coupons()
            return port
        }
        // The server is gone; a new process (a new cache object on the same directory) still
        // shows the last answers, marked as cached.
        let identity = try scene.identity(port: port, reachability: reachability)
        let cache = try Cache.persistentCache(directory: directory)
        let mightWorkAgain = reachability.networkMightWorkAgain()
        let balances = try await AccountDataClient(identityClient: identity, cache: cache).balances()
        guard case .cached = balances.freshness else {
            Issue.record("expected a cached answer, got \(balances.freshness)")
            return
        }
        #expect(balances.value.map(\.amount) == [64_00])
        #expect(reachability.reachabilityStatus == .unreachable)
        #expect(try await CouponProgramClient(identityClient: identity, cache: cache).coupons().value.count == 3)
        // Nothing cached for gold memberships: the failure is said as such.
        do {
            _ = try await GoldProgramMembershipsClient(identityClient: identity, cache: cache).memberships()
            Issue.record("an answer without server or cache")
        } catch {
            guard case .server(let serverError) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(serverError.isNetworkFailure)
        }
        // The server answers again: fresh, and the network-might-work-again event fires.
        try await scene.server.withLiveServer { client in
            let identity = try scene.identity(port: try #require(client.port), reachability: reachability)
            let fresh = try await AccountDataClient(identityClient: identity, cache: cache).balances()
            #expect(fresh.isFresh)
            var events = mightWorkAgain.makeAsyncIterator()
            #expect(await events.next() != nil)
            #expect(reachability.reachabilityStatus == .fast)
        }
    }

    @Test func aRevokedKeyInvalidatesTheIdentityAndClearsEveryCache() async throws {
        let scene = try await Scene.make()
        let cache = Cache.temporaryAnonymousCache()
        try await scene.server.withLiveServer { client in
            let identity = try scene.identity(port: try #require(client.port))
            let events = identity.events()
            let account = AccountDataClient(identityClient: identity, cache: cache)
            let transactions = WalletTransactionsClient(identityClient: identity, cache: cache)
            _ = try await account.accountData()
            _ = try await transactions.transactions()
            let scope = identity.cacheScope
            #expect(
                cache.value(
                    WalletTransactionPage.self,
                    for: Cache.key(client: "wallet-transactions", scope: scope, item: "page/20/first")) != nil)

            #expect(
                try await scene.server.ledger.revokeWalletKey(
                    try PublicKeyBytes(bytes: Array(scene.walletKey.publicKey.x963Representation))))
            do {
                _ = try await account.accountData()
                Issue.record("a revoked key was served")
            } catch let error as ServiceClientError {
                guard case .identityInvalidated(let message) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(message.contains("this wallet key was revoked"))
            }
            guard case .invalidated = identity.state else {
                Issue.record("the identity is \(identity.state)")
                return
            }
            var iterator = events.makeAsyncIterator()
            guard case .identityDidInvalidate = await iterator.next() else {
                Issue.record("no invalidation event")
                return
            }
            // Every client's cache for the revoked key is gone, and no request is signed any more.
            #expect(
                cache.value(
                    WalletTransactionPage.self,
                    for: Cache.key(client: "wallet-transactions", scope: scope, item: "page/20/first")) == nil)
            #expect(
                cache.value(
                    Components.Schemas.WalletAccountData.self,
                    for: Cache.key(client: "account-data", scope: scope, item: "account")) == nil)
            do {
                _ = try await transactions.transactions()
                Issue.record("an invalidated identity still signs")
            } catch let error as ServiceClientError {
                #expect(
                    error
                        == .identityInvalidated(
                            "this wallet key was revoked (the wallet was restored on another device); restore the wallet here with `horizon-wallet restore`"
                        ))
            }
            // A new key (a restoration) makes the identity ready again.
            await identity.setSigningKey(P256.Signing.PrivateKey())
            #expect(identity.state == .ready)
            guard case .identityDidGetReady = await iterator.next() else {
                Issue.record("no ready event")
                return
            }
            do {
                _ = try await account.accountData()
                Issue.record("an unregistered key was served")
            } catch let error as ServiceClientError {
                guard case .identityInvalidated(let message) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(message.contains("the signing key is not a registered wallet"))
            }
        }
    }

    @Test func aClientWithoutAKeySaysSo() async throws {
        let identity = IdentityClient(serverURL: try #require(URL(string: "http://127.0.0.1:9")))
        #expect(identity.state == .notReady)
        do {
            _ = try await AccountDataClient(identityClient: identity, cache: .temporaryAnonymousCache()).accountData()
            Issue.record("a request without a key")
        } catch {
            #expect(error == .identityNotReady)
        }
    }
}
