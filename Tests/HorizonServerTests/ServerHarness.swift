import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonServer
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// A server around a fresh SQLite ledger in a temporary directory, with a clock the test sets and
/// a low scrypt cost. The directory goes when the server does.
final class TestServer: Sendable {
    static let password = "correct horse battery"
    static let email = "owner@bakery.example"

    let directory: URL
    let databasePath: String
    let ledger: Ledger
    let issuer: Issuer
    let clock: TestClock
    let configuration: ServerConfiguration
    let metrics = ServerMetrics()
    /// One gateway key for every router of this server, as a data directory keeps it.
    let gatewayKey = GatewayKey.generate()

    init(configuration: ServerConfiguration = .testing(), store: (@Sendable (String) throws -> any LedgerStore)? = nil)
        async throws
    {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("horizon-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        databasePath = directory.appendingPathComponent("ledger.sqlite").path
        if let store {
            ledger = try await Ledger.open(try store(databasePath))
        } else {
            ledger = try await Ledger.sqlite(path: databasePath)
        }
        issuer = Issuer.generate(name: "Test Issuer")
        clock = TestClock()
        self.configuration = configuration
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
        // Background work of a router (claim recovery, sessions) may keep the ledger referenced
        // after the test; its database files are closed now, not when the last task lets go: the
        // test process would otherwise hold hundreds of descriptors of deleted files.
        Task { [ledger] in await ledger.close() }
    }

    /// The parts of a server over `ledger` (this server's own unless another is given), with
    /// the sandbox card processor unless `cardProcessor` is given.
    func parts(ledger: Ledger? = nil, metrics: ServerMetrics? = nil, cardProcessor: (any CardProcessor)? = nil)
        -> HorizonServer.Parts
    {
        let clock = clock
        return HorizonServer.Parts(
            configuration: configuration, ledger: ledger ?? self.ledger, issuer: issuer,
            metrics: metrics ?? self.metrics,
            now: { clock.now }, rateLimitClock: { clock.instant }, cardProcessor: cardProcessor,
            gatewayKey: gatewayKey)
    }

    /// Runs `body` against the router, without sockets.
    func withClient<T: Sendable>(
        ledger: Ledger? = nil, cardProcessor: (any CardProcessor)? = nil,
        _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        let application = Application(
            router: try HorizonServer.router(parts(ledger: ledger, cardProcessor: cardProcessor)), logger: .quiet)
        return try await application.test(.router, body)
    }

    /// What this server's metrics router serves at `GET /metrics` (its own listener in a process).
    func scrapeMetrics() async throws -> String {
        let application = Application(router: HorizonServer.metricsRouter(metrics), logger: .quiet)
        return try await application.test(.router) { client in
            let response = try await client.execute(uri: "/metrics", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
            return String(buffer: response.body)
        }
    }

    /// Runs `body` against `HorizonServer.application` listening on a free loopback port.
    func withLiveServer<T: Sendable>(_ body: @Sendable (any TestClientProtocol) async throws -> T) async throws -> T {
        var configuration = configuration
        configuration.listen = "127.0.0.1:0"
        var parts = parts()
        parts.configuration = configuration
        let application = try HorizonServer.application(parts, logger: .quiet)
        return try await application.test(.live, body)
    }

    /// A merchant whose admin signs in with `email` and `password`.
    @discardableResult
    func addMerchant(
        name: String = "Corner Bakery", email: String = TestServer.email, password: String = TestServer.password
    )
        async throws -> Merchant
    {
        let merchant = try await ledger.createMerchant(name: name, currency: .eur, adminEmail: email)
        try await ledger.setPasswordHash(PasswordHasher(costLog2: 10).hash(password), for: merchant.id)
        return merchant
    }

    /// What the identity tables hold, to show that a refused request changed nothing.
    func state() async throws -> DatabaseState {
        let (logins, nonces, outbox) = try await ledger.store.transaction { db in
            var logins: [DatabaseState.Login] = []
            for row in try await db.query(
                "SELECT merchant_id, password_hash, failed_attempts, locked_until FROM merchant_logins ORDER BY merchant_id"
            ) {
                logins.append(
                    .init(
                        merchant: try row.text("merchant_id"), passwordHash: try row.text("password_hash"),
                        failedAttempts: try row.integer("failed_attempts"), lockedUntil: try row.integer("locked_until")
                    ))
            }
            let nonces = try await db.query("SELECT COUNT(*) AS n FROM request_nonces").first?.integer("n") ?? -1
            let outbox = try await db.query("SELECT COUNT(*) AS n FROM outbox").first?.integer("n") ?? -1
            return (logins, nonces, outbox)
        }
        return DatabaseState(
            merchants: try await ledger.merchants(), logins: logins, terminals: try await ledger.terminals(),
            nonces: nonces, outbox: outbox)
    }

    /// Activates `key` for the merchant through the API; returns the response.
    func activate(_ key: TerminalKey, label: String = "Till 1") async throws
        -> Components.Schemas.TerminalCredentialResponse
    {
        let body = key.activation(email: Self.email, password: Self.password, label: label)
        return try await withClient { client in
            let response = try await client.send(.post, "/v1/terminals/activate", json: body)
            #expect(response.status == .created, "\(response.text)")
            return try JSONDecoder().decode(
                Components.Schemas.TerminalCredentialResponse.self, from: response.data)
        }
    }
}

extension ServerConfiguration {
    /// Low scrypt cost, a one-hour credential, a small body limit; the rest as deployed.
    static func testing(
        maximumBodyBytes: Int = 4096, rateLimitBurst: Int = 1000, rateLimitPerSecond: Double = 1000,
        loginAttemptsBeforeLock: Int = 3
    ) -> ServerConfiguration {
        ServerConfiguration(
            listen: "127.0.0.1:0", issuerName: "Test Issuer", credentialValidity: 3600,
            maximumBodyBytes: maximumBodyBytes, rateLimitBurst: rateLimitBurst, rateLimitPerSecond: rateLimitPerSecond,
            signatureWindow: 300, passwordCostLog2: 10, loginAttemptsBeforeLock: loginAttemptsBeforeLock,
            loginFirstLockSeconds: 60)
    }
}

extension Logger {
    static var quiet: Logger { Logger(label: "horizon.server.test") { _ in SwiftLogNoOpLogHandler() } }
}

/// The server's clocks (Unix seconds, and the rate limiter's instants), set by the test.
final class TestClock: Sendable {
    private let start = ContinuousClock.now
    private let elapsed = Mutex<Duration>(.zero)
    var now: Int64 { 1_750_000_000 + elapsed.withLock { $0 }.components.seconds }
    var instant: ContinuousClock.Instant { start + elapsed.withLock { $0 } }
    func advance(_ seconds: Int64) { advance(by: .seconds(seconds)) }
    func advance(by duration: Duration) { elapsed.withLock { $0 += duration } }
}

struct DatabaseState: Equatable {
    struct Login: Equatable {
        let merchant: String
        let passwordHash: String
        let failedAttempts: Int64
        let lockedUntil: Int64
    }
    let merchants: [Merchant]
    let logins: [Login]
    let terminals: [TerminalRecord]
    let nonces: Int64
    let outbox: Int64
}

/// A terminal's key, as `horizon-terminal activate` would make and use it.
struct TerminalKey: Sendable {
    let key = P256.Signing.PrivateKey()

    var publicBase64: String { key.publicKey.x963Representation.base64EncodedString() }

    /// The proof of `openapi.yaml`: a signature over the activation's lines.
    func proof(email: String, label: String, publicKey: String? = nil) throws -> String {
        let lines = ["horizon/activate/v1", email, label, publicKey ?? publicBase64].joined(separator: "\n")
        return try key.signature(for: Data(lines.utf8)).rawRepresentation.base64EncodedString()
    }

    /// An activation request's JSON; `overrides` replace (or, with nil, remove) fields.
    func activation(
        email: String = TestServer.email, password: String = TestServer.password, label: String = "Till 1",
        overrides: [String: Any?] = [:]
    ) -> String {
        var fields: [String: Any] = [
            "email": email, "password": password, "label": label, "publicKey": publicBase64,
            "proof": (try? proof(email: email, label: label)) ?? "",
        ]
        for (name, value) in overrides { fields[name] = value }
        let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// An `Authorization` header value signing this request at `time`.
    func authorization(method: String, path: String, body: String = "", time: Int64) throws -> String {
        try RequestSignature.sign(method: method, path: path, body: Data(body.utf8), with: key, time: time).headerValue
    }

    /// The 8-byte key id credentials and revocations name, in hex.
    var keyIDHex: String {
        SHA256.hash(data: key.publicKey.x963Representation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }
}

// MARK: Requests and the error envelope

extension HTTPField.Name {
    static let requestID = HTTPField.Name("X-Request-Id")!
}

extension TestClientProtocol {
    /// Sends a request; a `json` body goes with `Content-Type: application/json` unless
    /// `headers` name another type.
    func send(_ method: HTTPRequest.Method, _ uri: String, json: String? = nil, headers: HTTPFields = [:])
        async throws -> TestResponse
    {
        var headers = headers
        if json != nil, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        return try await executeRequest(
            uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }
}

struct ErrorEnvelope: Decodable, Equatable {
    struct Body: Decodable, Equatable {
        let code: String
        let message: String
        let requestId: String
    }
    let error: Body
}

/// Checks that `response` is the error envelope with this status, code and (part of the)
/// message, and that its request id is the `X-Request-Id` header's. Returns the envelope.
@discardableResult
func expectError(
    _ response: TestResponse, _ status: HTTPResponse.Status, _ code: String, _ message: String,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> ErrorEnvelope.Body {
    let text = response.text
    #expect(response.status == status, "body: \(text)", sourceLocation: sourceLocation)
    #expect(
        response.headers[.contentType] == "application/json; charset=utf-8", sourceLocation: sourceLocation)
    let envelope = try #require(
        try? JSONDecoder().decode(ErrorEnvelope.self, from: Data(text.utf8)), "not an error envelope: \(text)",
        sourceLocation: sourceLocation)
    #expect(envelope.error.code == code, "message: \(envelope.error.message)", sourceLocation: sourceLocation)
    #expect(
        envelope.error.message.contains(message), "\"\(envelope.error.message)\" lacks \"\(message)\"",
        sourceLocation: sourceLocation)
    #expect(!envelope.error.requestId.isEmpty, sourceLocation: sourceLocation)
    #expect(response.headers[.requestID] == envelope.error.requestId, sourceLocation: sourceLocation)
    return envelope.error
}

extension TestResponse {
    var text: String { String(buffer: body) }
    var data: Data { Data(body.readableBytesView) }
}

/// A store that fails like an unreachable database (what the PostgreSQL store reports for a
/// refused or lost connection) while `isDown`, and is the SQLite store otherwise.
final class OutageStore: LedgerStore {
    let inner: SQLiteLedgerStore
    private let down = Mutex(false)

    init(path: String) throws { inner = try SQLiteLedgerStore(path: path) }

    var isDown: Bool {
        get { down.withLock { $0 } }
        set { down.withLock { $0 = newValue } }
    }

    var dialect: SQLDialect { inner.dialect }

    func transaction<T: Sendable>(
        _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        if isDown { throw .unavailable("connection refused (the test took the database down)") }
        return try await inner.transaction(isolation, body)
    }

    func close() async { await inner.close() }
}
