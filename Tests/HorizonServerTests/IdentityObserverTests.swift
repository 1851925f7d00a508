import Crypto
import Foundation
import HorizonServiceClients
import Testing

/// The clients follow the identity (the reference's `IdentityObserver`): `WalletClient`, the
/// loyalty clients and the daily-token client refuse to act before it is ready, drop what they
/// hold when it is invalidated, and go on once a key is ready again.
extension WalletServiceClientsTests {
    struct Clients {
        let identity: IdentityClient
        let cache: Cache
        let wallet: WalletClient
        let bonus: BonusProgramClient
        let gold: GoldProgramMembershipsClient
        let coupons: CouponProgramClient
        let tokens: DailyTokenClient

        init(_ scene: Scene, port: Int?, key: P256.Signing.PrivateKey?) throws {
            let clock = scene.server.clock
            let port = try #require(port)
            identity = IdentityClient(
                serverURL: try #require(URL(string: "http://127.0.0.1:\(port)")), signingKey: key,
                timeout: .seconds(30), clock: { clock.now })
            cache = .temporaryAnonymousCache()
            wallet = WalletClient(identityClient: identity)
            bonus = BonusProgramClient(identityClient: identity, cache: cache)
            gold = GoldProgramMembershipsClient(identityClient: identity, cache: cache)
            coupons = CouponProgramClient(identityClient: identity, cache: cache)
            tokens = DailyTokenClient(
                identityClient: identity, cache: cache, trustAnchors: [scene.server.issuer.anchor])
        }

        /// Each client's answer, or the error it refused with.
        func refusals() async -> [ServiceClientError?] {
            var errors: [ServiceClientError?] = []
            do { _ = try await wallet.getWallet() } catch { errors.append(error) }
            do { _ = try await bonus.allBonusPrograms() } catch { errors.append(error) }
            do { _ = try await gold.memberships() } catch { errors.append(error) }
            do { _ = try await coupons.coupons() } catch { errors.append(error) }
            do { _ = try await tokens.fetchDailyToken() } catch {
                guard case .service(let refusal) = error else {
                    errors.append(nil)
                    return errors
                }
                errors.append(refusal)
            }
            return errors
        }
    }

    @Test func everyClientRefusesBeforeTheIdentityIsReadyAndGoesOnOnceItIs() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let clients = try Clients(scene, port: client.port, key: nil)
            #expect(clients.identity.state == .notReady)
            #expect(await clients.refusals() == Array(repeating: .identityNotReady, count: 5))
            #expect(clients.tokens.currentToken == nil)
            #expect(clients.wallet.paymentCardID == nil)

            // Unlocked (or registered): the same clients act with the key from now on.
            await clients.identity.setSigningKey(scene.walletKey)
            #expect(await clients.refusals() == [])
            #expect(try await clients.gold.memberships().value.count == 1)
            #expect(try await clients.coupons.coupons().value.count == 3)
            #expect(clients.tokens.currentToken != nil)
            #expect(try await clients.wallet.getWallet() == [])

            // Locked again: refused again, though nothing is dropped (the identity is the same).
            clients.identity.forgetSigningKey()
            #expect(await clients.refusals() == Array(repeating: .identityNotReady, count: 5))
        }
    }

    @Test func anInvalidatedIdentityEmptiesEveryClientAndALaterKeyResumes() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { client in
            let clients = try Clients(scene, port: client.port, key: scene.walletKey)
            guard
                case .added(let card) = try await clients.wallet.addPaymentCard(
                    cardholder: "Alice Smith", cardNumber: "4242 4242 4242 4242", cvc: "123", expDate: "12/30")
            else {
                Issue.record("the approving test card needed a challenge")
                return
            }
            clients.wallet.selectPaymentCard(id: card.id)
            #expect(clients.wallet.paymentCardID == card.id)
            #expect(await clients.refusals() == [])
            let scope = clients.identity.cacheScope
            func cached() -> [Bool] {
                [
                    clients.cache.value(
                        [BonusProgram].self,
                        for: Cache.key(client: BonusProgramClient.cacheName, scope: scope, item: "all"))
                        != nil,
                    clients.cache.value(
                        [GoldProgramMembership].self,
                        for: Cache.key(client: GoldProgramMembershipsClient.cacheName, scope: scope, item: "all"))
                        != nil,
                    clients.cache.value(
                        [Coupon].self, for: Cache.key(client: CouponProgramClient.cacheName, scope: scope, item: "all"))
                        != nil,
                ]
            }
            #expect(cached() == [true, true, true])
            #expect(clients.tokens.currentToken != nil)

            // Invalidated (the key was revoked by a restoration elsewhere): nothing of it is kept.
            await clients.identity.invalidate(reason: "restored on another device")
            #expect(clients.wallet.cards == [] && clients.wallet.paymentCardID == nil)
            #expect(cached() == [false, false, false])
            #expect(clients.tokens.currentToken == nil)
            #expect(
                await clients.refusals()
                    == Array(repeating: .identityInvalidated("restored on another device"), count: 5))

            // The account's key again (a restoration here): every client answers fresh.
            await clients.identity.setSigningKey(scene.walletKey)
            #expect(await clients.refusals() == [])
            #expect(try await clients.wallet.getWallet().map(\.id) == [card.id])
            #expect(try await clients.coupons.coupons().isFresh)
            #expect(clients.tokens.currentToken != nil)
        }
    }
}
