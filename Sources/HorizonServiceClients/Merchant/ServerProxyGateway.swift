import HorizonServerClient
import HorizonSettlement

/// The terminal's side of the request proxy: a wallet's sealed request, relayed by
/// `RequestProxyHostCoordinator`, posted to the server's gateway with the terminal's own
/// signature (`POST /v1/gateway`), and the sealed answer handed back. The terminal never opens
/// either; a failure after the bytes left is "outcome unknown" to the wallet, never retried here.
public struct ServerProxyGateway: ProxyGateway {
    public let client: HorizonServerClient

    /// - Parameter client: signed with the terminal's key (the server limits relays per terminal).
    public init(client: HorizonServerClient) { self.client = client }

    public func forward(_ sealed: [UInt8]) async throws -> [UInt8] {
        try await client.forwardToGateway(sealed)
    }
}
