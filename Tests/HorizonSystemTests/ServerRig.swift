import Crypto
import Foundation
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonSecureChannel
import HorizonServer
import HorizonServerClient
import Logging
import ServiceLifecycle

/// A real `horizon-server` in this process: Hummingbird listening on a free loopback port,
/// over an SQLite ledger in a temporary directory, with one merchant whose admin password is
/// known. Tests reach it over HTTP exactly as terminals and wallets do.
final class ServerRig: Sendable {
    static let email = "admin@corner.example"
    static let password = "correct horse battery"

    let directory: URL
    let ledger: Ledger
    let issuer: Issuer
    let merchant: Merchant
    let url: URL
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    private init(
        directory: URL, ledger: Ledger, issuer: Issuer, merchant: Merchant, url: URL, group: ServiceGroup,
        task: Task<Void, any Error>
    ) {
        self.directory = directory
        self.ledger = ledger
        self.issuer = issuer
        self.merchant = merchant
        self.url = url
        self.group = group
        self.task = task
    }

    static func start(currency: Currency = .eur) async throws -> ServerRig {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let ledger = try await Ledger.sqlite(path: directory.appendingPathComponent("server.sqlite").path)
        let merchant = try await ledger.createMerchant(name: "Corner Café", currency: currency, adminEmail: email)
        try await ledger.setPasswordHash(try PasswordHasher(costLog2: 10).hash(password), for: merchant.id)
        return try await start(ledger: ledger, issuer: Issuer.generate(), merchant: merchant, directory: directory)
    }

    /// A second server process on the same database (its own `ledger` over it), the same issuer
    /// key: what a scaled-out deployment runs behind its load balancer.
    func sibling(ledger: Ledger) async throws -> ServerRig {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try await Self.start(ledger: ledger, issuer: issuer, merchant: merchant, directory: directory)
    }

    /// A server over `ledger`, which must already hold `merchant` with the rig's password.
    static func start(ledger: Ledger, issuer: Issuer, merchant: Merchant, directory: URL) async throws -> ServerRig {
        let configuration = ServerConfiguration(
            listen: "127.0.0.1:0", rateLimitBurst: 10_000, rateLimitPerSecond: 10_000, passwordCostLog2: 10)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let application = try HorizonServer.application(
            .init(configuration: configuration, ledger: ledger, issuer: issuer), logger: Logger(label: "test.server"),
            onServerRunning: { port in continuation.yield(port) })
        let group = ServiceGroup(services: [application], logger: Logger(label: "test.server"))
        // The server runs on a queue of its own (its tasks inherit the preference): a task made
        // with `Task {}` would inherit the test's executor (the few queues the off-the-pool tests
        // share), which a test blocked on the simulated radio while it waits for this server's
        // answer would hold; and on Swift's global pool it would wait behind every other test's
        // work (its SQLite commits block the thread they run on). The stream ends if the server
        // stops (or never starts), so `start` cannot wait forever.
        let task = Task(executorPreference: QueueExecutor(label: "test.server")) {
            defer { continuation.finish() }
            try await group.run()
        }
        var port: Int?
        for await running in ports {
            port = running
            break
        }
        guard let port, let url = URL(string: "http://127.0.0.1:\(port)") else {
            task.cancel()
            throw RigError("the server did not start")
        }
        return ServerRig(
            directory: directory, ledger: ledger, issuer: issuer, merchant: merchant, url: url, group: group, task: task
        )
    }

    /// Stops serving; the ledger belongs to whoever opened it (a shared store's test).
    func stopKeepingLedgerOpen() async {
        await group.triggerGracefulShutdown()
        _ = await task.result
        try? FileManager.default.removeItem(at: directory)
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = await task.result
        await ledger.close()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A client that signs with `key` (a terminal's or a wallet's).
    func client(signingWith key: P256.Signing.PrivateKey? = nil) -> HorizonServerClient {
        HorizonServerClient(serverURL: url, signingKey: key, timeout: .seconds(30))
    }

    /// A new terminal key activated for the merchant, with the credential the server issued.
    func activateTerminal(label: String = "Till 1") async throws -> TerminalIdentity {
        let key = P256.Signing.PrivateKey()
        let response = try await client().activateTerminal(
            email: Self.email, password: Self.password, label: label, key: key)
        guard let bytes = Data(base64Encoded: response.credential) else { throw RigError("credential not base64") }
        return try TerminalIdentity(signingKey: key, credential: TerminalCredential.decode(Array(bytes)))
    }

    /// A wallet registered with the server and funded with `balance` (minor units).
    func registerWallet(balance: Int64, currency: Currency = .eur) async throws -> (P256.Signing.PrivateKey, WalletID) {
        let key = P256.Signing.PrivateKey()
        let wallet = try await ledger.createWallet(
            name: "Alex", publicKey: try PublicKeyBytes(bytes: Array(key.publicKey.x963Representation)))
        if balance > 0 { try await ledger.deposit(try Money(minorUnits: balance, currency: currency), to: wallet.id) }
        return (key, wallet.id)
    }
}

struct RigError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
