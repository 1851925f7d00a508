import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HorizonServiceClients
import HummingbirdTesting
import Testing

/// `DailyTokenClient`: the daily token from a live server,
/// verified against the pinned anchor before it is kept, the same token while nothing changed,
/// a new one when it runs out or the balance changed, and a token of another issuer refused.
@Suite("Daily token against a live server")
struct DailyTokenClientTests {
    struct Scene {
        let server: TestServer
        let walletKey: P256.Signing.PrivateKey
        let wallet: WalletID

        static func make(balance: Int64 = 80_00, configuration: ServerConfiguration = .testing()) async throws -> Scene
        {
            let server = try await TestServer(configuration: configuration)
            let walletKey = P256.Signing.PrivateKey()
            let wallet = try await server.ledger.createWallet(
                name: "Alice", publicKey: try PublicKeyBytes(bytes: Array(walletKey.publicKey.x963Representation))
            ).id
            if balance > 0 {
                try await server.ledger.deposit(try Money(minorUnits: balance, currency: .eur), to: wallet)
            }
            return Scene(server: server, walletKey: walletKey, wallet: wallet)
        }

        func client(port: Int, cache: Cache = .temporaryAnonymousCache(), anchors: [TrustAnchor]? = nil)
            throws -> DailyTokenClient
        {
            let clock = server.clock
            let identity = IdentityClient(
                serverURL: try #require(URL(string: "http://127.0.0.1:\(port)")), signingKey: walletKey,
                timeout: .seconds(30), clock: { clock.now })
            return DailyTokenClient(
                identityClient: identity, cache: cache, trustAnchors: anchors ?? [server.issuer.anchor])
        }
    }

    @Test func theTokenIsVerifiedKeptAndTheSameUntilSomethingChanges() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { http in
            let client = try scene.client(port: try #require(http.port))
            #expect(client.currentToken == nil)
            let (first, issuedNow) = try await client.fetchDailyToken()
            #expect(issuedNow)
            let token = first.token
            // The policy: min(balance, 50.00) for at most 24 h, this wallet's key and account.
            #expect(token.allowance == (try Money(minorUnits: 50_00, currency: .eur)))
            #expect(token.walletAccountID == scene.wallet.rawValue)
            #expect(token.walletKey == Array(scene.walletKey.publicKey.x963Representation))
            #expect(token.issuedAt == scene.server.clock.now && token.validity == 86_400)
            #expect(client.currentToken == first)
            #expect(client.remainingAllowance == token.allowance)

            // Asking again, and refreshing with nothing changed: the very same token.
            let again = try await client.fetchDailyToken()
            #expect(!again.issuedNow && again.token.encoded == first.encoded)
            let refreshed = try await client.fetchDailyToken(refresh: true)
            #expect(!refreshed.issuedNow && refreshed.token.token.tokenID == token.tokenID)

            // Offline spending lowers what is left, and survives fetching the same token again.
            client.recordOfflineSpending(try Money(minorUnits: 12_50, currency: .eur))
            #expect(client.remainingAllowance == (try Money(minorUnits: 37_50, currency: .eur)))
            _ = try await client.fetchDailyToken()
            #expect(client.remainingAllowance == (try Money(minorUnits: 37_50, currency: .eur)))

            // The balance changed: a refresh signs a new token, bounded by the new balance.
            try await scene.server.ledger.deposit(try Money(minorUnits: 1_00, currency: .eur), to: scene.wallet)
            let afterDeposit = try await client.fetchDailyToken()
            #expect(!afterDeposit.issuedNow, "without refresh, the stored token")
            let renewed = try await client.fetchDailyToken(refresh: true)
            #expect(renewed.issuedNow && renewed.token.token.tokenID != token.tokenID)
            #expect(renewed.token.remainingAllowance.minorUnits == 50_00, "a new token starts afresh")

            // The ledger keeps both, for bounding offline spending later.
            let now = scene.server.clock.now
            let stored = try await scene.server.ledger.dailyTokens(of: scene.wallet, validBetween: now, and: now + 1)
            #expect(stored.map(\.tokenID) == [renewed.token.token.tokenID, token.tokenID])

            await client.reset()
            #expect(client.currentToken == nil)
        }
    }

    @Test func theAllowanceIsTheBalanceBelowTheCapAndTheCapIsConfigurable() async throws {
        let poor = try await Scene.make(balance: 20_00)
        try await poor.server.withLiveServer { http in
            let token = try await poor.client(port: try #require(http.port)).fetchDailyToken().token.token
            #expect(token.allowance.minorUnits == 20_00)
        }
        var configuration = ServerConfiguration.testing()
        configuration.offlineAllowanceMajorUnits = 10
        configuration.dailyTokenValidity = 3600
        let capped = try await Scene.make(balance: 80_00, configuration: configuration)
        try await capped.server.withLiveServer { http in
            let token = try await capped.client(port: try #require(http.port)).fetchDailyToken().token.token
            #expect(token.allowance.minorUnits == 10_00 && token.validity == 3600)
        }
    }

    @Test func anExpiredTokenIsReplacedAndOneNearItsEndRenewed() async throws {
        let scene = try await Scene.make()
        try await scene.server.withLiveServer { http in
            let client = try scene.client(port: try #require(http.port))
            let first = try await client.refreshIfNeeded()
            #expect(first.fetched)
            let original = first.token.token

            // Early in its life: kept, no request.
            scene.server.clock.advance(3600)
            let early = try await client.refreshIfNeeded()
            #expect(!early.fetched && early.token.token.tokenID == original.tokenID)

            // Less than a quarter left (6 h of 24): renewed, though nothing else changed.
            scene.server.clock.advance(86_400 - 3600 - 6 * 3600 + 1)
            let late = try await client.refreshIfNeeded()
            #expect(late.fetched && late.token.token.tokenID != original.tokenID)
            #expect(late.token.token.expiresAt == scene.server.clock.now + 86_400)

            // Expired: not offered any more, and replaced by the next refresh.
            scene.server.clock.advance(86_400)
            #expect(client.currentToken == nil)
            let replaced = try await client.refreshIfNeeded()
            #expect(replaced.fetched && replaced.token.token.tokenID != late.token.token.tokenID)
            #expect(client.currentToken?.token.tokenID == replaced.token.token.tokenID)
        }
    }

    @Test func aTokenSignedByAnotherKeyIsRefused() async throws {
        let scene = try await Scene.make()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("horizon-token-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        try await scene.server.withLiveServer { http in
            let port = try #require(http.port)
            // A wallet that pinned another anchor refuses this server's token, and keeps nothing.
            let stranger = TrustAnchor(publicKey: P256.Signing.PrivateKey().publicKey, name: "Someone else")
            let foreign = try scene.client(
                port: port, cache: try .persistentCache(directory: directory), anchors: [stranger])
            do {
                _ = try await foreign.fetchDailyToken()
                Issue.record("a token of an issuer the wallet did not pin was kept")
            } catch let error as DailyTokenClientError {
                #expect(error.code == "daily_token_invalid")
                guard case .invalidToken(.unknownIssuer) = error else {
                    Issue.record("\(error)")
                    return
                }
            }
            #expect(foreign.currentToken == nil)

            // A token kept by a wallet that trusts the server is not trusted when read back by
            // one that does not (the cache is verified on every read, not only on fetch).
            let trusting = try scene.client(port: port, cache: try .persistentCache(directory: directory))
            try await trusting.fetchDailyToken()
            let rereadTrusting = try scene.client(port: port, cache: try .persistentCache(directory: directory))
            #expect(rereadTrusting.currentToken?.token.walletAccountID == scene.wallet.rawValue)
            let rereadForeign = try scene.client(
                port: port, cache: try .persistentCache(directory: directory), anchors: [stranger])
            #expect(rereadForeign.currentToken == nil)
        }
    }

    @Test func theCurrencyMustBeKnown() async throws {
        let empty = try await Scene.make(balance: 0)
        try await empty.server.withLiveServer { http in
            let client = try empty.client(port: try #require(http.port))
            do {
                _ = try await client.fetchDailyToken()
                Issue.record("a token without a currency was issued")
            } catch let error as DailyTokenClientError {
                #expect(error.code == "invalid_request")
                #expect(
                    "\(error)".contains(
                        "this wallet holds no currency yet; name the token's currency (e.g. \"currency\": \"EUR\")"))
            }
            let euros = DailyTokenClient(
                identityClient: client.identityClient, cache: .temporaryAnonymousCache(),
                trustAnchors: [empty.server.issuer.anchor], currency: "EUR")
            #expect(try await euros.fetchDailyToken().token.token.allowance.minorUnits == 0)
            let unknown = DailyTokenClient(
                identityClient: client.identityClient, cache: .temporaryAnonymousCache(),
                trustAnchors: [empty.server.issuer.anchor], currency: "XXX")
            do {
                _ = try await unknown.fetchDailyToken()
                Issue.record("an unsupported currency was accepted")
            } catch let error as DailyTokenClientError {
                #expect(error.code == "invalid_request" && "\(error)".contains("currency XXX is not a supported"))
            }
        }
    }
}
