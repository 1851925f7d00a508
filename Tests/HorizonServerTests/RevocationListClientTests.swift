import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HorizonServiceClients
import Hummingbird
import HummingbirdTesting
import Testing

/// A wallet refuses the terminals its server revoked: the list is fetched, kept only when it is
/// the one the server's signed daily token names, and applied to the anchors the wallet trusts,
/// so a lost or stolen till's unexpired credential opens no payment.
@Suite("Revoked terminals are refused by wallets")
struct RevocationListClientTests {
    struct Scene {
        let server: TestServer
        let walletKey: P256.Signing.PrivateKey
        let merchant: Merchant
        let stolen: P256.Signing.PrivateKey
        let honest: P256.Signing.PrivateKey
        let stolenID: TerminalID

        static func make() async throws -> Scene {
            let server = try await TestServer()
            let merchant = try await server.addMerchant()
            let walletKey = P256.Signing.PrivateKey()
            let wallet = try await server.ledger.createWallet(
                name: "Alice", publicKey: try PublicKeyBytes(bytes: Array(walletKey.publicKey.x963Representation))
            ).id
            try await server.ledger.deposit(try Money(minorUnits: 20_00, currency: .eur), to: wallet)
            let stolen = P256.Signing.PrivateKey()
            let honest = P256.Signing.PrivateKey()
            var ids: [TerminalID] = []
            for (key, label) in [(stolen, "Till 1"), (honest, "Till 2")] {
                ids.append(
                    try await server.ledger.activateTerminal(
                        merchant: merchant.id, label: label,
                        publicKey: try PublicKeyBytes(bytes: Array(key.publicKey.x963Representation)),
                        keyID: Self.keyID(key), credentialExpiresAt: server.clock.now + 3600
                    ).id)
            }
            return Scene(
                server: server, walletKey: walletKey, merchant: merchant, stolen: stolen, honest: honest,
                stolenID: ids[0])
        }

        static func keyID(_ key: P256.Signing.PrivateKey) -> [UInt8] {
            Array(SHA256.hash(data: key.publicKey.x963Representation).prefix(8))
        }

        func clients(port: Int, cache: Cache) throws -> (DailyTokenClient, RevocationListClient) {
            let clock = server.clock
            let identity = IdentityClient(
                serverURL: try #require(URL(string: "http://127.0.0.1:\(port)")), signingKey: walletKey,
                timeout: .seconds(30), clock: { clock.now })
            return (
                DailyTokenClient(identityClient: identity, cache: cache, trustAnchors: [server.issuer.anchor]),
                RevocationListClient(identityClient: identity, cache: cache)
            )
        }

        /// A credential the server's issuer signed for `key`, still valid.
        func credential(_ key: P256.Signing.PrivateKey) throws -> TerminalCredential {
            try server.issuer.issueCredential(
                merchantID: merchant.id.rawValue, merchantName: merchant.name, terminalLabel: "Till",
                terminalKey: key.publicKey, at: server.clock.now, validity: 3600)
        }

        func revokeTheStolenTill() async throws {
            _ = try await server.ledger.revokeTerminal(stolenID, of: merchant.id, at: server.clock.now)
        }
    }

    @Test func aRevokedTerminalsUnexpiredCredentialIsRefused() async throws {
        let scene = try await Scene.make()
        let directory = scene.server.directory.appendingPathComponent("wallet-cache")
        try await scene.server.withLiveServer { http in
            let (tokens, revocations) = try scene.clients(
                port: try #require(http.port), cache: try Cache.persistentCache(directory: directory))
            // Before the list is fetched (or while nothing is revoked) the till is trusted.
            let before = revocations.anchors([scene.server.issuer.anchor])
            _ = try scene.credential(scene.stolen).verify(trusting: before, at: scene.server.clock.now)

            // The wallet holds its token from before the theft; the revocation comes after it,
            // so the list is confirmed by a fresh token the client asks for.
            try await tokens.fetchDailyToken()
            try await scene.revokeTheStolenTill()
            #expect(try await revocations.fetch(checkingWith: tokens) == [Scene.keyID(scene.stolen)])

            let anchors = revocations.anchors([scene.server.issuer.anchor])
            #expect(throws: SecureChannelError.credentialRevoked(terminalKeyID: Scene.keyID(scene.stolen).hexString)) {
                try scene.credential(scene.stolen).verify(trusting: anchors, at: scene.server.clock.now)
            }
            // The merchant's other till is trusted as before.
            _ = try scene.credential(scene.honest).verify(trusting: anchors, at: scene.server.clock.now)

            // Kept: a later run of the wallet (a new client over the same cache) refuses the till
            // without asking the server again.
            let (_, later) = try scene.clients(
                port: try #require(http.port), cache: try Cache.persistentCache(directory: directory))
            #expect(later.revokedTerminalKeyIDs == [Scene.keyID(scene.stolen)])
        }
    }

    /// A network in the middle that drops the stolen till from the list cannot make the wallet
    /// trust it: the list does not match the signed token, and nothing is kept.
    @Test func aListThatIsNotTheSignedOneIsNotKept() async throws {
        let scene = try await Scene.make()
        try await scene.revokeTheStolenTill()
        let cache = Cache.temporaryAnonymousCache()
        // The genuine token, signed over a list with the stolen till in it.
        let genuine = try await scene.server.withLiveServer { http in
            let (tokens, _) = try scene.clients(port: try #require(http.port), cache: cache)
            return try await tokens.fetchDailyToken().token
        }
        let answer = """
            {"token": "\(Data(genuine.encoded).base64EncodedString())", "tokenId": "\(genuine.token.tokenIDHex)", \
            "currency": "EUR", "allowance": \(genuine.token.allowance.minorUnits), \
            "issuedAt": \(genuine.token.issuedAt), "expiresAt": \(genuine.token.expiresAt), "issuedNow": false}
            """
        // The man in the middle answers with that token and an empty list.
        let router = Router()
        router.post("/v1/wallet/daily-token") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: answer)))
        }
        router.get("/v1/revocations") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: #"{"terminalKeyIds": []}"#)))
        }
        let forged = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await forged.test(.live) { http in
            let (tokens, revocations) = try scene.clients(port: try #require(http.port), cache: cache)
            await #expect(throws: RevocationListClientError.unconfirmed(listed: 0, signed: 1)) {
                try await revocations.fetch(checkingWith: tokens)
            }
        }
        #expect(
            RevocationListClient(
                identityClient: IdentityClient(
                    serverURL: try #require(URL(string: "http://127.0.0.1:9")), signingKey: scene.walletKey),
                cache: cache
            ).revokedTerminalKeyIDs.isEmpty)
    }
}
