import Foundation
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonObliviousHTTP
import HorizonServer
import HorizonServerClient
import Hummingbird
import HummingbirdTesting
import Testing

/// The gateway's replay window is in the database: a sealed request one server process served
/// is refused by every other process on the same database, and by a server restarted on it.
@Suite("Gateway replays across processes and restarts")
struct GatewayReplayTests {
    /// A live server over `ledger` (this scene's server's parts: issuer, gateway key, clock).
    static func live<T: Sendable>(
        _ scene: GatewayTests.Scene, ledger: Ledger, _ body: @Sendable (URL) async throws -> T
    ) async throws -> T {
        var parts = scene.server.parts(ledger: ledger)
        parts.configuration.listen = "127.0.0.1:0"
        let application = try HorizonServer.application(parts, logger: .quiet)
        return try await application.test(.live) { client in
            let port = try #require(client.port)
            return try await body(try #require(URL(string: "http://127.0.0.1:\(port)")))
        }
    }

    static func isReplayRefusal(_ response: BinaryHTTPResponse) -> Bool {
        response.status == 409 && String(decoding: response.content, as: UTF8.self).contains("gateway_request_replayed")
    }

    @Test(arguments: PaymentClaimTests.kinds) func aReplayIsRefusedByAnotherServerAndAfterARestart(kind: StoreKind)
        async throws
    {
        try await TestStores.withStores(kind) { store, another in
            let server = try await TestServer(store: { _ in store })
            try await server.addMerchant()
            let till = TerminalKey()
            let tillID = try await server.activate(till).terminalId
            let scene = GatewayTests.Scene(
                server: server, till: till, tillID: tillID, wallet: try await server.fundedWallet(80_00))
            let ledgerB = try await Ledger.open(try another())
            let (sealed, opener) = try await Self.live(scene, ledger: server.ledger) { urlA in
                try await Self.live(scene, ledger: ledgerB) { urlB in
                    let configuration = try await scene.keyConfiguration(urlA)
                    let (sealed, opener) = try scene.sealed(
                        "GET", "/v1/wallet/balances",
                        authorization: try signedAuthorization(
                            scene.wallet.key, method: .get, path: "/v1/wallet/balances", body: nil,
                            time: server.clock.now), configuration: configuration)
                    let served = try opener.openResponse(try await scene.terminal(urlA).forwardToGateway(sealed))
                    #expect(served.status == 200)
                    // The same sealed bytes to the other process: refused as a replay.
                    let replayed = try opener.openResponse(try await scene.terminal(urlB).forwardToGateway(sealed))
                    #expect(Self.isReplayRefusal(replayed), "\(String(decoding: replayed.content, as: UTF8.self))")
                    return (sealed, opener)
                }
            }
            await ledgerB.close()
            // A restart: a new ledger on the same database (for SQLite, the file reopened).
            let restarted = try await Ledger.open(try another())
            try await Self.live(scene, ledger: restarted) { url in
                let replayed = try opener.openResponse(try await scene.terminal(url).forwardToGateway(sealed))
                #expect(Self.isReplayRefusal(replayed), "\(String(decoding: replayed.content, as: UTF8.self))")
            }
            await restarted.close()
        }
    }
}
