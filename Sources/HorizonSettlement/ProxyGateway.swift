/// Where a terminal sends the sealed requests wallets ask it to relay: the server's
/// gateway. The bytes are sealed between the wallet and the server; the terminal neither reads
/// nor keeps them. An implementation posts them (terminal-signed) and returns the sealed answer,
/// or throws when it got none: the request may then have been processed or not.
public protocol ProxyGateway: Sendable {
    func forward(_ sealed: [UInt8]) async throws -> [UInt8]
}
