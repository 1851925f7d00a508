import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonObliviousHTTP
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HorizonServerClient
import HorizonServiceClients
import HorizonTestSupport
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// The gateway's server side: a wallet's requests sealed to the gateway key (Oblivious
/// HTTP) and relayed by a terminal through `POST /v1/gateway`, against a live server.
@Suite("Gateway (Oblivious HTTP) against a live server")
struct GatewayTests {
    struct Scene: Sendable {
        let server: TestServer
        let till: TerminalKey
        let tillID: String
        let wallet: FundedWallet
        let recorder = LogRecorder()

        static func make(configuration: ServerConfiguration = .testing()) async throws -> Scene {
            let server = try await TestServer(configuration: configuration)
            try await server.addMerchant()
            let till = TerminalKey()
            let tillID = try await server.activate(till).terminalId
            return Scene(server: server, till: till, tillID: tillID, wallet: try await server.fundedWallet(80_00))
        }

        /// The server listening on a free port, logging at the default level into `recorder`.
        func withLiveServer<T: Sendable>(_ body: @Sendable (URL) async throws -> T) async throws -> T {
            var parts = server.parts()
            parts.configuration.listen = "127.0.0.1:0"
            let application = try HorizonServer.application(parts, logger: recorder.logger(level: .info))
            return try await application.test(.live) { client in
                let port = try #require(client.port)
                return try await body(try #require(URL(string: "http://127.0.0.1:\(port)")))
            }
        }

        func terminal(_ url: URL, key: P256.Signing.PrivateKey? = nil) -> HorizonServerClient {
            let clock = server.clock
            return HorizonServerClient(
                serverURL: url, signingKey: key ?? till.key, timeout: .seconds(30), clock: { clock.now })
        }

        /// The key configuration as a wallet gets it: fetched, and verified against the anchor.
        func keyConfiguration(_ url: URL) async throws -> ObliviousHTTPKeyConfiguration {
            try await HorizonServerClient(serverURL: url).gatewayKeyConfiguration().verified(by: [
                server.issuer.signingKey.publicKey
            ])
        }

        /// The wallet's client with every request relayed by `relay` (by default: this till).
        func relayedWallet(
            _ url: URL, key: P256.Signing.PrivateKey? = nil, clockOffset: Int64 = 0,
            relay: (@Sendable ([UInt8]) async throws -> [UInt8])? = nil
        ) async throws -> HorizonServerClient {
            let terminal = terminal(url)
            let clock = server.clock
            return HorizonServerClient(
                serverURL: url, signingKey: key ?? wallet.key, gatewayKeyConfiguration: try await keyConfiguration(url),
                relay: relay ?? { sealed in try await terminal.forwardToGateway(sealed) },
                clock: { clock.now + clockOffset })
        }

        /// A request sealed by hand, for what the client never sends.
        func sealed(
            _ method: String, _ path: String, content: [UInt8] = [], authorization: String?,
            extraFields: [HTTPHeaderField] = [], configuration: ObliviousHTTPKeyConfiguration
        ) throws -> (sealed: [UInt8], opener: ObliviousResponseOpener) {
            var fields = [HTTPHeaderField(name: "date", value: HTTPDate.format(server.clock.now))] + extraFields
            if let authorization { fields.append(.init(name: "authorization", value: authorization)) }
            if !content.isEmpty { fields.append(.init(name: "content-type", value: "application/json")) }
            return try ObliviousHTTP.seal(
                BinaryHTTPRequest(
                    method: method, scheme: "http", authority: "localhost", path: path, headerFields: fields,
                    content: content), to: configuration)
        }
    }

    @Test func aWalletsCallsGoThroughTheRelayAndGetWhatADirectCallGets() async throws {
        let scene = try await Scene.make()
        try await scene.withLiveServer { url in
            let relayed = try await scene.relayedWallet(url)
            let clock = scene.server.clock
            let direct = HorizonServerClient(
                serverURL: url, signingKey: scene.wallet.key, timeout: .seconds(30), clock: { clock.now })
            #expect(try await relayed.walletBalances() == (try await direct.walletBalances()))
            #expect(try await relayed.walletBalances().first?.amount == 80_00)
            #expect(try await relayed.walletAccount() == (try await direct.walletAccount()))
            #expect(try await relayed.walletTransactions() == (try await direct.walletTransactions()))
            #expect(try await relayed.walletBonusPrograms() == (try await direct.walletBonusPrograms()))
            #expect(try await relayed.paymentCards() == (try await direct.paymentCards()))
            // A POST with a body: the daily token, signed for this wallet and the same one directly.
            let token = try await relayed.dailyToken(currency: "EUR")
            #expect(token.issuedNow)
            let again = try await direct.dailyToken(currency: "EUR")
            #expect(!again.issuedNow && again.tokenId == token.tokenId)
        }
    }

    @Test func theServiceClientsOfAnIdentityRoutedThroughTheGatewayWorkUnchanged() async throws {
        let scene = try await Scene.make()
        try await scene.withLiveServer { url in
            let clock = scene.server.clock
            let identity = IdentityClient(
                serverURL: url, signingKey: scene.wallet.key, timeout: .seconds(30), clock: { clock.now })
            let keys = GatewayKeyConfigClient(
                identityClient: identity, cache: .temporaryAnonymousCache(), trustAnchors: [scene.server.issuer.anchor])
            let relays = Mutex(0)
            let terminal = scene.terminal(url)
            identity.routeThroughGateway(
                GatewayRoute(keyConfiguration: try await keys.keyConfiguration()) { sealed in
                    relays.withLock { $0 += 1 }
                    return try await terminal.forwardToGateway(sealed)
                })
            #expect(identity.isRoutedThroughGateway)
            let account = AccountDataClient(identityClient: identity, cache: .temporaryAnonymousCache())
            let balances = try await account.balances()
            #expect(balances.value.first?.amount == 80_00)
            _ = try await account.accountData()
            _ = try await WalletTransactionsClient(identityClient: identity, cache: .temporaryAnonymousCache())
                .transactions()
            #expect(relays.withLock { $0 } == 3)
            identity.routeThroughGateway(nil)
            _ = try await account.balances()
            #expect(relays.withLock { $0 } == 3, "direct again")
        }
    }

    @Test func theKeyConfigurationIsTheAnchorsOrRefusedAndIsKeptForOfflineUse() async throws {
        let scene = try await Scene.make()
        let cache = Cache.temporaryAnonymousCache()
        let url = try await scene.withLiveServer { url in
            let identity = IdentityClient(serverURL: url, timeout: .seconds(30))
            let client = GatewayKeyConfigClient(
                identityClient: identity, cache: cache, trustAnchors: [scene.server.issuer.anchor])
            #expect(client.currentKeyConfiguration == nil)
            let fetched = try await client.fetchKeyConfiguration()
            #expect(fetched == scene.server.gatewayKey.gateway.configuration)
            #expect(fetched.kem == .p256HKDFSHA256 && fetched.symmetricAlgorithms == [.hkdfSHA256AES128GCM])

            // Another anchor (another server, or a relay's own key signed by someone else): refused.
            let stranger = GatewayKeyConfigClient(
                identityClient: identity, cache: .temporaryAnonymousCache(),
                trustAnchors: [Issuer.generate(name: "Stranger").anchor])
            await #expect(throws: GatewayKeyConfigClientError.self) { try await stranger.fetchKeyConfiguration() }
            #expect(stranger.currentKeyConfiguration == nil)
            return url
        }
        // The server is gone: a new client reads the configuration from the cache, verified again.
        let identity = IdentityClient(serverURL: url, timeout: .seconds(1))
        let offline = GatewayKeyConfigClient(
            identityClient: identity, cache: cache, trustAnchors: [scene.server.issuer.anchor])
        #expect(offline.currentKeyConfiguration == scene.server.gatewayKey.gateway.configuration)
        #expect(try await offline.keyConfiguration() == scene.server.gatewayKey.gateway.configuration)
        let distrustful = GatewayKeyConfigClient(
            identityClient: identity, cache: cache, trustAnchors: [Issuer.generate(name: "Stranger").anchor])
        #expect(distrustful.currentKeyConfiguration == nil, "a cached configuration is verified when read back")
    }

    @Test func aReplayedSealedRequestIsRefusedAndTheWalletIsToldWhy() async throws {
        let scene = try await Scene.make()
        try await scene.withLiveServer { url in
            let terminal = scene.terminal(url)
            let answers = Mutex<[[UInt8]]>([])
            // A relay that posts the same sealed bytes twice and hands back the second answer.
            let wallet = try await scene.relayedWallet(url) { sealed in
                let first = try await terminal.forwardToGateway(sealed)
                let second = try await terminal.forwardToGateway(sealed)
                answers.withLock { $0 = [first, second] }
                return second
            }
            do {
                _ = try await wallet.walletBalances()
                Issue.record("a replayed request was served")
            } catch let error as ServerClientError {
                #expect(error.code == "gateway_request_replayed")
                guard case .refused(let status, _, let message, _) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(status == 409)
                #expect(message.contains("already received once") && message.contains("not served again"))
            }
            #expect(answers.withLock { $0.count } == 2)

            // Through another terminal it is the same replay; once its date has left the window
            // it is refused for its date, so the window need not remember it longer.
            let other = TerminalKey()
            _ = try await scene.server.activate(other, label: "Till 2")
            let configuration = try await scene.keyConfiguration(url)
            let (sealed, opener) = try scene.sealed(
                "GET", "/v1/wallet/balances",
                authorization: try signedAuthorization(
                    scene.wallet.key, method: .get, path: "/v1/wallet/balances", body: nil,
                    time: scene.server.clock.now), configuration: configuration)
            #expect(try opener.openResponse(try await terminal.forwardToGateway(sealed)).status == 200)
            let viaOther = try opener.openResponse(
                try await scene.terminal(url, key: other.key).forwardToGateway(sealed))
            #expect(viaOther.status == 409)
            #expect(String(decoding: viaOther.content, as: UTF8.self).contains("gateway_request_replayed"))
            scene.server.clock.advance(301)
            let late = try opener.openResponse(try await terminal.forwardToGateway(sealed))
            #expect(late.status == 400)
            #expect(String(decoding: late.content, as: UTF8.self).contains("gateway_request_expired"))
        }
    }

    /// What RFC 9458 and RFC 9292 forbid is refused, sealed, and not served: an expectation the
    /// gateway cannot meet (`expect: 100-continue`), a field value with whitespace around it, an
    /// invalid field name (which the rebuilt request would otherwise have dropped silently).
    @Test func aSealedRequestWithAnExpectationOrAnInvalidFieldIsRefusedNotServed() async throws {
        let scene = try await Scene.make()
        try await scene.withLiveServer { url in
            let configuration = try await scene.keyConfiguration(url)
            let terminal = scene.terminal(url)
            let cases: [(HTTPHeaderField, String)] = [
                (.init(name: "expect", value: "100-continue"), "expect"),
                (.init(name: "accept", value: " application/json"), "whitespace around its value"),
                (.init(name: "accept", value: "application/json\t"), "whitespace around its value"),
                (.init(name: "x(trace)", value: "1"), "invalid field name"),
            ]
            for (field, reason) in cases {
                let (sealed, opener) = try scene.sealed(
                    "GET", "/v1/wallet/balances",
                    authorization: try signedAuthorization(
                        scene.wallet.key, method: .get, path: "/v1/wallet/balances", body: nil,
                        time: scene.server.clock.now), extraFields: [field], configuration: configuration)
                let answer = try opener.openResponse(try await terminal.forwardToGateway(sealed))
                let text = String(decoding: answer.content, as: UTF8.self)
                #expect(answer.status == 400, "\(field.name): \(text)")
                #expect(text.contains("invalid_request") && text.contains(reason), "\(text)")
                #expect(!text.contains("8000"), "served: \(text)")
            }
            // The same request without the offending field is served.
            let (sealed, opener) = try scene.sealed(
                "GET", "/v1/wallet/balances",
                authorization: try signedAuthorization(
                    scene.wallet.key, method: .get, path: "/v1/wallet/balances", body: nil,
                    time: scene.server.clock.now), extraFields: [.init(name: "accept", value: "application/json")],
                configuration: configuration)
            #expect(try opener.openResponse(try await terminal.forwardToGateway(sealed)).status == 200)
        }
    }

    @Test func aRequestDatedOutsideTheWindowIsRefused() async throws {
        let scene = try await Scene.make()
        try await scene.withLiveServer { url in
            for offset: Int64 in [-301, 301, -100_000] {
                let wallet = try await scene.relayedWallet(url, clockOffset: offset)
                await #expect {
                    _ = try await wallet.walletBalances()
                } throws: { error in
                    (error as? ServerClientError)?.code == "gateway_request_expired"
                        && "\(error)".contains("check the device's clock")
                }
            }
            // Within the window it is served.
            let onTime = try await scene.relayedWallet(url, clockOffset: -250)
            #expect(try await onTime.walletBalances().first?.amount == 80_00)
        }
    }

    @Test func onlyAnActiveTerminalRelaysAndWhatCannotBeOpenedIsA400() async throws {
        let scene = try await Scene.make()
        try await scene.withLiveServer { url in
            let configuration = try await scene.keyConfiguration(url)
            let request = { () throws -> [UInt8] in
                try scene.sealed(
                    "GET", "/v1/wallet/balances",
                    authorization: try signedAuthorization(
                        scene.wallet.key, method: .get, path: "/v1/wallet/balances", body: nil,
                        time: scene.server.clock.now), configuration: configuration
                ).sealed
            }
            await #expect(throws: ServerClientError.self) {
                _ = try await scene.terminal(url, key: P256.Signing.PrivateKey()).forwardToGateway(try request())
            }
            let sealedRequest = try request()
            do {
                _ = try await scene.terminal(url, key: P256.Signing.PrivateKey()).forwardToGateway(sealedRequest)
            } catch let error as ServerClientError {
                #expect(error.code == "terminal_unknown")
            }
            do { _ = try await HorizonServerClient(serverURL: url).forwardToGateway(try request()) } catch {
                #expect((error as? ServerClientError)?.code == "unauthenticated")
            }
            // Garbage, and a request sealed to another gateway: refused outside, with the envelope.
            for garbage in [
                Array(repeating: UInt8(7), count: 256),
                try ObliviousHTTP.seal([1, 2, 3], to: GatewayKey.generate().gateway.configuration).sealed,
            ] {
                do {
                    _ = try await scene.terminal(url).forwardToGateway(garbage)
                    Issue.record("garbage was relayed")
                } catch let error as ServerClientError {
                    guard case .refused(400, "gateway_request_invalid", let message, let requestID) = error else {
                        Issue.record("\(error)")
                        continue
                    }
                    #expect(message.contains("cannot be opened") && !requestID.isEmpty)
                }
            }
            // Revoked: refused, and a wallet relayed by it learns the outcome is unknown.
            #expect(try await scene.server.ledger.revokeTerminal(TerminalID(rawValue: scene.tillID)))
            let afterRevocation = try request()
            do { _ = try await scene.terminal(url).forwardToGateway(afterRevocation) } catch let error
                as ServerClientError
            {
                #expect(error.code == "terminal_revoked")
            }
            let wallet = try await scene.relayedWallet(url)
            do {
                _ = try await wallet.walletBalances()
                Issue.record("a revoked terminal relayed")
            } catch let error as ServerClientError {
                guard case .relayOutcomeUnknown(let reason) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(reason.contains("terminal_revoked"))
                #expect("\(error)".contains("may or may not have acted on it"))
            }
        }
    }

    @Test func eachTerminalRelaysALimitedNumberOfRequestsAMinute() async throws {
        var configuration = ServerConfiguration.testing()
        configuration.gatewayRelaysPerMinute = 3
        let scene = try await Scene.make(configuration: configuration)
        let other = TerminalKey()
        _ = try await scene.server.activate(other, label: "Till 2")
        try await scene.withLiveServer { url in
            let relays = Mutex(0)
            let terminal = scene.terminal(url)
            let wallet = try await scene.relayedWallet(url) { sealed in
                relays.withLock { $0 += 1 }
                return try await terminal.forwardToGateway(sealed)
            }
            for _ in 0..<3 { _ = try await wallet.walletBalances() }
            do {
                _ = try await wallet.walletBalances()
                Issue.record("the fourth relay of the minute was served")
            } catch let error as ServerClientError {
                guard case .relayOutcomeUnknown(let reason) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(reason.contains("rate_limited") && reason.contains("relayed its 3 requests of this minute"))
            }
            #expect(relays.withLock { $0 } == 4, "nothing was sent again automatically")
            // Another terminal has its own allowance; the first gets its back a minute later.
            let viaOther = try await scene.relayedWallet(url) { sealed in
                try await scene.terminal(url, key: other.key).forwardToGateway(sealed)
            }
            #expect(try await viaOther.walletBalances().first?.amount == 80_00)
            scene.server.clock.advance(60)
            #expect(try await wallet.walletBalances().first?.amount == 80_00)
        }
    }

    @Test func aMarkerInTheRequestNeverAppearsInTheOuterBytesOrTheLog() async throws {
        let scene = try await Scene.make()
        let marker = "MARKER-c0ffee-7e57"
        let outer = Mutex<[[UInt8]]>([])
        try await scene.withLiveServer { url in
            let terminal = scene.terminal(url)
            let relay: @Sendable ([UInt8]) async throws -> [UInt8] = { sealed in
                let answer = try await terminal.forwardToGateway(sealed)
                outer.withLock { $0 += [sealed, answer] }
                return answer
            }
            // In the body (the account's new name) through the client ...
            let wallet = try await scene.relayedWallet(url, relay: relay)
            let account = try await wallet.setWalletAccount(name: marker)
            #expect(account.name == marker)
            // ... and in a header field of a request sealed by hand.
            let configuration = try await scene.keyConfiguration(url)
            let (sealed, opener) = try scene.sealed(
                "GET", "/v1/wallet/account",
                authorization: try signedAuthorization(
                    scene.wallet.key, method: .get, path: "/v1/wallet/account", body: nil,
                    time: scene.server.clock.now),
                extraFields: [.init(name: "x-marker", value: marker)], configuration: configuration)
            let response = try opener.openResponse(try await relay(sealed))
            #expect(response.status == 200)
            #expect(String(decoding: response.content, as: UTF8.self).contains(marker), "the inner answer has it")
        }
        let markerBytes = Array(marker.utf8)
        let carried = outer.withLock { $0 }
        #expect(carried.count == 4)
        for bytes in carried {
            #expect(ObliviousHTTP.sizeBuckets.contains(bytes.count), "padded to a bucket: \(bytes.count)")
            #expect(!contains(bytes, markerBytes))
        }
        let lines = scene.recorder.all
        #expect(lines.contains { $0.message.contains("POST /v1/gateway 200") }, "the outer requests are logged")
        for line in lines {
            let text = ([line.message] + line.metadata.map { "\($0.key)=\($0.value)" }).joined(separator: " ")
            #expect(!text.contains(marker), "the log has the marker: \(text)")
            #expect(!text.contains("/v1/wallet/account"), "an inner path at \(line.level): \(text)")
        }
    }

    @Test func aWalletCannotActAsAnotherThroughTheRelay() async throws {
        let scene = try await Scene.make()
        let other = try await scene.server.fundedWallet(5_00, name: "Bea")
        try await scene.withLiveServer { url in
            let configuration = try await scene.keyConfiguration(url)
            let terminal = scene.terminal(url)
            // Wallet A's signature for one request, put on another request by wallet B: refused inside.
            let aSignature = try signedAuthorization(
                scene.wallet.key, method: .get, path: "/v1/wallet/balances", body: nil, time: scene.server.clock.now)
            let (sealed, opener) = try scene.sealed(
                "GET", "/v1/wallet/account", authorization: aSignature, configuration: configuration)
            let refused = try opener.openResponse(try await terminal.forwardToGateway(sealed))
            #expect(refused.status == 401)
            #expect(String(decoding: refused.content, as: UTF8.self).contains("signature_invalid"))
            // Wallet B's own signature through the same terminal: wallet B's balance, not A's.
            let walletB = try await scene.relayedWallet(url, key: other.key)
            #expect(try await walletB.walletBalances().first?.amount == 5_00)
            // A request to the gateway itself is not relayed again.
            let (nested, nestedOpener) = try scene.sealed(
                "POST", "/v1/gateway", authorization: nil, configuration: configuration)
            let answer = try nestedOpener.openResponse(try await terminal.forwardToGateway(nested))
            #expect(answer.status == 400)
        }
    }

    @Test func aRequestTooLargeForTheRelayIsNotSent() async throws {
        let scene = try await Scene.make()
        try await scene.withLiveServer { url in
            let relays = Mutex(0)
            let wallet = try await scene.relayedWallet(url) { sealed in
                relays.withLock { $0 += 1 }
                return sealed
            }
            do {
                _ = try await wallet.setWalletAccount(name: String(repeating: "a", count: 5000))
                Issue.record("a request too large was relayed")
            } catch let error as ServerClientError {
                guard case .notRelayed(let reason) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(reason.contains("Nothing was sent") || reason.contains("more than a relay carries"))
            }
            #expect(relays.withLock { $0 } == 0)
        }
    }

    @Test func anAnswerTooLargeToRelayIsRefusedSealedWithWhatToDo() async throws {
        let scene = try await Scene.make()
        for index in 0..<3 {
            _ = try await scene.server.ledger.addStatusMessage(
                severity: .info, title: "Notice \(index)", body: String(repeating: "x", count: 2000),
                at: scene.server.clock.now - 10)
        }
        try await scene.withLiveServer { url in
            let wallet = try await scene.relayedWallet(url)
            do {
                _ = try await wallet.statusMessages()
                Issue.record("an answer over 4096 bytes was relayed")
            } catch let error as ServerClientError {
                #expect(error.code == "gateway_response_too_large", "\(error)")
                #expect("\(error)".contains("send the request directly when online"))
            }
            // Directly, the same answer is served whole.
            #expect(try await HorizonServerClient(serverURL: url).statusMessages().count == 3)
        }
    }

    @Test func theGatewayKeySurvivesRestartsAndIsOwnerReadableOnly() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = ServerConfiguration().gatewayKeyFile(in: directory.path)
        #expect(path.hasSuffix("/gateway-key.pem"))
        let first = try GatewayKey.loadOrCreate(at: path)
        let second = try GatewayKey.loadOrCreate(at: path)
        #expect(first.privateKey.rawRepresentation == second.privateKey.rawRepresentation)
        #expect(first.gateway.configuration == second.gateway.configuration)
        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        // What was sealed before the restart opens after it.
        let (sealed, _) = try ObliviousHTTP.seal([1, 2, 3], to: first.gateway.configuration)
        #expect(try second.gateway.open(sealed).plaintext == [1, 2, 3])
        #expect(throws: ServerSetupError.self) {
            try "not a key".write(toFile: path + ".bad", atomically: true, encoding: .utf8)
            _ = try GatewayKey.loadOrCreate(at: path + ".bad")
        }
    }

    @Test func theRelayLimitIsASetting() throws {
        var configuration = ServerConfiguration.testing()
        #expect(configuration.effectiveGatewayRelaysPerMinute == 60)
        configuration.gatewayRelaysPerMinute = 0
        #expect(throws: ServerSetupError.self) { try configuration.validate() }
        let decoded = try JSONDecoder().decode(
            ServerConfiguration.self, from: JSONEncoder().encode(ServerConfiguration.testing()))
        #expect(decoded.gatewayRelaysPerMinute == nil && decoded.gatewayKeyPath == nil, "older server.json files load")
    }
}

private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
}
