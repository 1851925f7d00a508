import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// Every line the server logs, at every level, kept for the test to search.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    var logger: Logger {
        var logger = Logger(label: "horizon.server.captured") { label in CapturingLogHandler(label: label, log: self) }
        logger.logLevel = .trace
        return logger
    }
}

struct CapturingLogHandler: LogHandler {
    let label: String
    let log: CapturedLog
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        log.append("\(event.level) \(label) [\(event.source)] \(event.message) \(all)")
    }
}

/// A store that works, is unreachable (`down`), or fails as a broken database (`broken`).
final class FaultyStore: LedgerStore {
    enum Mode { case up, down, broken }
    final class Holder: Sendable { let store = Mutex<FaultyStore?>(nil) }
    let inner: SQLiteLedgerStore
    private let state = Mutex(Mode.up)

    init(path: String) throws { inner = try SQLiteLedgerStore(path: path) }

    var mode: Mode {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }

    var dialect: SQLDialect { inner.dialect }

    func transaction<T: Sendable>(
        _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        switch mode {
        case .up: return try await inner.transaction(isolation, body)
        case .down: throw .unavailable("connection refused (the test took the database down)")
        case .broken: throw .database("the test broke the database")
        }
    }

    func close() async { await inner.close() }
}

/// Secrets never reach a log: a server logging at `trace` is driven through every family of
/// endpoints with known secrets (passwords, session tokens and cookies, `Authorization` headers,
/// one-time codes, card numbers and CVCs, private key bytes), through every kind of failure and
/// through a database outage, and none of them appears in anything it logged.
@Suite("Secrets never reach a log")
struct SecretsInLogTests {
    static let password = "Pw-8c1f-SECRET-never-logged"
    static let wrongPassword = "Pw-3e77-WRONG-never-logged"
    static let cardNumber = "4242424242424242"
    static let cvc = "987"

    @Test func noSecretOfAnyEndpointFailureOrOutageIsLogged() async throws {
        let holder = FaultyStore.Holder()
        let server = try await TestServer { path in
            let store = try FaultyStore(path: path)
            holder.store.withLock { $0 = store }
            return store
        }
        let store = try #require(holder.store.withLock { $0 })
        _ = try await server.addMerchant(password: Self.password)
        let log = CapturedLog()
        var secrets: [String: String] = [
            "password": Self.password, "wrong password": Self.wrongPassword,
            "card number": Self.cardNumber, "spaced card number": "4242 4242 4242 4242",
        ]
        let till = TerminalKey()
        let funded = try await server.fundedWallet(50_00)
        let device = WalletDevice()
        // Key material a client might send by mistake: the raw bytes of a private key, in base64.
        let privateKey = P256.Signing.PrivateKey().rawRepresentation.base64EncodedString()
        secrets["private key"] = privateKey
        secrets["issuer private key"] = server.issuer.signingKey.rawRepresentation.base64EncodedString()
        secrets["till private key"] = till.key.rawRepresentation.base64EncodedString()

        var configuration = server.configuration
        configuration.listen = "127.0.0.1:0"
        var parts = server.parts()
        parts.configuration = configuration
        let application = try HorizonServer.application(parts, logger: log.logger)
        let found = try await application.test(.live) { client in
            var secrets: [String: String] = [:]
            func each(_ modes: [FaultyStore.Mode] = [.up, .down, .broken], _ body: () async throws -> Void)
                async throws
            {
                for mode in modes {
                    store.mode = mode
                    try await body()
                }
                store.mode = .up
            }
            let now = server.clock.now

            // Probes and public reads, also while the database is down or broken.
            try await each {
                for path in ["/health", "/ready", "/v1/anchor", "/v1/revocations", "/v1/gateway/key-config"] {
                    _ = try await client.send(.get, path)
                }
            }

            // Terminal activation: the admin's password, right and wrong, in every failure.
            let activation = till.activation(password: Self.password)
            try await each { _ = try await client.send(.post, "/v1/terminals/activate", json: activation) }
            _ = try await client.send(
                .post, "/v1/terminals/activate", json: till.activation(password: Self.wrongPassword))
            _ = try await client.send(
                .post, "/v1/terminals/activate",
                json: till.activation(password: Self.password, overrides: ["publicKey": privateKey]))
            _ = try await client.send(
                .post, "/v1/terminals/activate", json: till.activation(password: Self.password, overrides: ["x": 1]))
            _ = try await client.send(
                .post, "/v1/terminals/activate", json: #"{"password": "\#(Self.password)", "email": 5"#)
            _ = try await client.send(
                .post, "/v1/terminals/activate", json: String(repeating: Self.password, count: 200))
            _ = try await client.send(
                .post, "/v1/terminals/activate", json: activation, headers: [.contentType: "text/plain"])
            _ = try await client.send(.post, "/v1/terminals/activate", json: activation)

            // Signed requests: their Authorization header values, in every failure.
            var headers: [String] = []
            func signed(
                _ method: HTTPRequest.Method, _ path: String, json: String? = nil, by key: P256.Signing.PrivateKey
            )
                async throws
            {
                try await each {
                    let value = try signedAuthorization(key, method: method, path: path, body: json, time: now)
                    headers.append(value)
                    _ = try await client.send(method, path, json: json, headers: [.authorization: value])
                    // The same header again (a replay) and with a broken signature.
                    _ = try await client.send(method, path, json: json, headers: [.authorization: value])
                    _ = try await client.send(
                        method, path, json: json, headers: [.authorization: String(value.dropLast(6)) + "AAAA\""])
                }
            }
            try await signed(.post, "/v1/terminals/credential", by: till.key)
            let confirm = try WalletSigned.confirm(by: funded.key, for: till.key.publicKey, amount: 1_00, tip: 0)
            try await signed(.post, "/v1/payments", json: try SubmissionFields(payment: confirm).json(), by: till.key)
            try await signed(.get, "/v1/payments/\(confirm.paymentID.bytes.hexString)", by: till.key)
            try await signed(.get, "/v1/merchant/register-users", by: till.key)
            try await signed(.get, "/v1/wallet/balances", by: funded.key)
            try await signed(.get, "/v1/wallet/account", by: funded.key)
            try await signed(.post, "/v1/wallet/daily-token", json: "{}", by: funded.key)
            let card =
                #"{"cardholder": "Alex", "cardNumber": "4242 4242 4242 4242", "expiry": "12/30", "cvc": "\#(Self.cvc)"}"#
            try await signed(.post, "/v1/wallet/cards", json: card, by: funded.key)
            try await signed(
                .post, "/v1/wallet/cards", json: card.replacingOccurrences(of: " 4242\"", with: "4242\""),
                by: funded.key)
            for header in headers { secrets["Authorization: \(header)"] = header }

            // Wallet registration and restoration: the one-time code, right and wrong.
            let started = try await client.send(
                .post, "/v1/wallets/registrations", json: try device.registration(email: "alex@example.com"))
            let sent = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: started.data)
            let message = try #require(try await server.ledger.outbox(recipient: "alex@example.com").first)
            let code = String(
                try #require(message.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }))
            secrets["one-time code"] = code
            let smsMessage = try #require(try await server.ledger.outbox(recipient: "+4915112345678").first)
            let smsCode = String(
                try #require(smsMessage.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }))
            secrets["one-time SMS code"] = smsCode
            let wrong = String(code.reversed()) == code ? "00000000" : String(code.reversed())
            secrets["wrong one-time code"] = wrong
            let verify = "/v1/wallets/registrations/\(sent.registrationId)/verify"
            let right = #"{"smsCode": "\#(smsCode)", "emailCode": "\#(code)"}"#
            try await each([.down, .broken]) {
                _ = try await client.send(.post, verify, json: right)
            }
            _ = try await client.send(.post, verify, json: #"{"smsCode": "\#(smsCode)", "emailCode": "\#(wrong)"}"#)
            _ = try await client.send(.post, verify, json: #"{"code": "\#(code)", "extra": "\#(code)"}"#)
            _ = try await client.send(.post, verify, json: right)
            try await each {
                _ = try await client.send(
                    .post, "/v1/wallets/restorations", json: try WalletDevice().restoration(email: "alex@example.com"))
            }

            // A registration proven by link: the PUK and the link's token, right and wrong, and an
            // invitation code.
            let linked = WalletDevice()
            let email = "lee@example.com"
            let phone = "+49 151 2222 3333"
            var fields: [String: String] = [
                "name": "Lee", "email": email, "phone": phone, "publicKey": linked.publicBase64, "emailProof": "link",
                "invitationCode": "SECRET-INVITE-42",
                "proof": try linked.proof(
                    WalletProof.registration(email: email, phone: phone, publicKey: linked.publicBase64)),
            ]
            secrets["invitation code"] = "SECRET-INVITE-42"
            _ = try await client.send(
                .post, "/v1/wallets/registrations",
                json: String(decoding: try JSONEncoder().encode(fields), as: UTF8.self))
            fields["invitationCode"] = nil
            let linkStarted = try await client.send(
                .post, "/v1/wallets/registrations",
                json: String(decoding: try JSONEncoder().encode(fields), as: UTF8.self))
            let linkSent = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: linkStarted.data)
            let pukMessage = try #require(try await server.ledger.outbox(recipient: "+4915122223333").first)
            let puk = String(
                try #require(pukMessage.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }))
            secrets["PUK"] = puk
            let mail = try #require(try await server.ledger.outbox(recipient: email).first)
            let query = String(
                try #require(
                    mail.body.split(whereSeparator: \.isWhitespace).first { $0.contains("/v1/wallets/activation?") }?
                        .split(separator: "?").last))
            let linkToken = String(try #require(query.split(separator: "token=").last))
            secrets["activation link token"] = linkToken
            let pukPath = "/v1/wallets/registrations/\(linkSent.registrationId)/puk"
            try await signed(.post, pukPath, json: #"{"puk": "\#(wrong)"}"#, by: linked.key)
            try await each([.down, .broken]) {
                try await signed(.post, pukPath, json: #"{"puk": "\#(puk)"}"#, by: linked.key)
            }
            try await signed(.post, pukPath, json: #"{"puk": "\#(puk)"}"#, by: linked.key)
            try await signed(.get, "/v1/wallets/registrations/\(linkSent.registrationId)", by: linked.key)
            _ = try await client.send(.get, "/v1/wallets/activation?" + query)
            for body in [query.replacingOccurrences(of: linkToken, with: String(repeating: "B", count: 43)), query] {
                _ = try await client.executeRequest(
                    uri: "/v1/wallets/activation", method: .post,
                    headers: [.contentType: "application/x-www-form-urlencoded"], body: ByteBuffer(string: body))
            }

            // The merchant admin's session: password in, token out, token as a Bearer header.
            let signIn = #"{"email": "\#(TestServer.email)", "password": "\#(Self.password)"}"#
            try await each([.down, .broken]) { _ = try await client.send(.post, "/v1/merchant/sessions", json: signIn) }
            _ = try await client.send(
                .post, "/v1/merchant/sessions",
                json: #"{"email": "\#(TestServer.email)", "password": "\#(Self.wrongPassword)"}"#)
            let session = try await client.send(.post, "/v1/merchant/sessions", json: signIn)
            let token = try JSONDecoder().decode(Components.Schemas.MerchantAdminSession.self, from: session.data).token
            secrets["admin session token"] = token
            let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
            try await each {
                _ = try await client.send(.get, "/v1/merchant/register-users", headers: bearer)
                _ = try await client.send(
                    .post, "/v1/merchant/register-users", json: #"{"id": "042", "name": "Ann"}"#, headers: bearer)
                _ = try await client.send(.get, "/v1/merchant/transactions", headers: bearer)
                _ = try await client.send(.get, "/v1/nowhere", headers: bearer)
                _ = try await client.send(.put, "/v1/anchor", headers: bearer)
            }
            _ = try await client.send(.get, "/v1/merchant/terminals", headers: [.authorization: "Bearer \(token)x"])

            // The dashboard: the password in a form, the session cookie on every page.
            let browser = DashboardBrowser(client)
            _ = try await browser.signIn(password: Self.wrongPassword)
            let (_, cookie) = try await browser.signIn(password: Self.password)
            secrets["dashboard session cookie"] = cookie
            secrets["dashboard CSRF secret"] = browser.csrf
            try await each {
                for page in ["/dashboard/transactions", "/dashboard/register-users", "/dashboard/terminals"] {
                    _ = try await browser.get(page)
                }
                _ = try await browser.post("/dashboard/register-users", ["id": "043", "name": "Bo"], csrf: true)
                _ = try await browser.post("/dashboard/register-users", ["id": "044", "name": "Cy"])
            }
            try await each([.down, .broken]) { _ = try await browser.signIn(password: Self.password) }

            // The gateway: a sealed request that is not one.
            _ = try await client.send(
                .post, "/v1/gateway", json: privateKey, headers: [.contentType: "message/ohttp-req"])
            return secrets
        }
        secrets.merge(found) { $1 }

        let text = log.text
        #expect(text.contains("request failed"), "the outage and the broken database were logged")
        #expect(text.contains("POST /v1/terminals/activate"))
        for (name, secret) in secrets.sorted(by: { $0.key < $1.key }) {
            #expect(!text.contains(secret), "the log holds the \(name)")
        }
        // No body and no credential header is logged in any form.
        for word in ["cardNumber", "\"cvc\"", "cvc:", "Authorization", "authorization", "Cookie", "cookie", "Bearer"] {
            #expect(!text.contains(word), "the log holds \(word)")
        }
        #expect(!text.contains("\(Self.cvc)\""))
    }
}
