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

/// Wallet registration and restoration through the HTTP router: codes read from the outbox,
/// the clock set by the test, every refusal checked for its exact status, code and message.
@Suite("Wallet registration and restoration")
struct WalletRegistrationTests {
    @Test func aWalletRegistersWithTheCodeSentToItsPhone() async throws {
        let server = try await RegistrationServer()
        let device = WalletDevice()
        try await server.withClient { client in
            let start = try await client.postJSON("/v1/wallets/registrations", device.registration())
            #expect(start.status == .accepted, "\(start.bodyText)")
            let sent = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: start.bodyData)
            #expect(sent.expiresAt == server.now + 600)
            #expect(sent.sentTo == ["sms +49••••••••678", "email a•••@example.com"])

            // A code by SMS and another by mail; only their keyed hashes are stored.
            let code = SentCodes(
                sms: try await server.code(to: "+4915112345678"), email: try await server.code(to: "alice@example.com"))
            #expect(code.sms != code.email)
            #expect(try await server.storedRegistrationText().contains(code.sms) == false)
            #expect(try await server.storedRegistrationText().contains(code.email) == false)

            let verify = try await client.postJSON(
                "/v1/wallets/registrations/\(sent.registrationId)/verify", code.json)
            #expect(verify.status == .created, "\(verify.bodyText)")
            let verified = try JSONDecoder().decode(Components.Schemas.WalletVerified.self, from: verify.bodyData)
            #expect(verified.anchor == server.issuer.anchorDescription)
            #expect(verified.revokedKeys == 0)
            let wallet = try #require(try await server.ledger.wallet(forKey: device.publicKeyBytes))
            #expect(wallet.id.rawValue == verified.walletId)
            #expect(wallet.name == "Alice")
            #expect(
                try await server.ledger.walletContact(wallet.id)
                    == WalletContact(email: "alice@example.com", phone: "+4915112345678"))
        }
    }

    @Test func aWrongCodeIsRefusedAndCounted() async throws {
        let server = try await RegistrationServer()
        try await server.withClient { client in
            let (id, code) = try await server.startRegistration(WalletDevice(), client)
            let response = try await client.postJSON(
                "/v1/wallets/registrations/\(id)/verify",
                SentCodes(sms: otherCode(than: code.sms), email: code.email).json)
            try expectRegistrationError(
                response, .badRequest, "registration_code_invalid",
                "the code is wrong; 4 more wrong codes lock this registration")
        }
    }

    @Test func eachChannelProvesItsOwnHolder() async throws {
        let server = try await RegistrationServer()
        let device = WalletDevice()
        try await server.withClient { client in
            let (id, code) = try await server.startRegistration(device, client)
            let path = "/v1/wallets/registrations/\(id)/verify"
            // The phone's holder alone, or the mailbox's alone, cannot register.
            let smsOnly = try await client.postJSON(path, #"{"smsCode": "\#(code.sms)"}"#)
            try expectRegistrationError(smsOnly, .badRequest, "malformed_json", #"the field "emailCode" is missing"#)
            let emailOnly = try await client.postJSON(path, #"{"emailCode": "\#(code.email)"}"#)
            try expectRegistrationError(emailOnly, .badRequest, "malformed_json", #"the field "smsCode" is missing"#)
            // A code given for the other channel is wrong, and counted.
            for (wrong, left) in [
                (SentCodes(sms: code.email, email: code.sms), 4), (SentCodes(sms: code.sms, email: code.sms), 3),
                (SentCodes(sms: code.email, email: code.email), 2),
            ] {
                let response = try await client.postJSON(path, wrong.json)
                try expectRegistrationError(
                    response, .badRequest, "registration_code_invalid",
                    "the code is wrong; \(left) more wrong codes lock this registration")
            }
            #expect(try await server.ledger.wallet(forKey: device.publicKeyBytes) == nil)
            let right = try await client.postJSON(path, code.json)
            #expect(right.status == .created, "\(right.bodyText)")
        }
    }

    @Test func theOutboxKeepsNoCodeAfterUseOrExpiry() async throws {
        let server = try await RegistrationServer()
        try await server.withClient { client in
            // Deliverable: the outbox shows both codes.
            let (id, used) = try await server.startRegistration(WalletDevice(), client)
            #expect(try await server.ledger.outbox().map(\.body).filter { $0.contains(used.sms) }.count == 1)
            let verify = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", used.json)
            #expect(verify.status == .created, "\(verify.bodyText)")
            // Used: the messages say so, and no byte of the database holds either code.
            #expect(
                try await server.ledger.outbox().map(\.body) == Array(repeating: OutboxMessage.redactedBody, count: 2))
            for code in [used.sms, used.email] {
                #expect(try server.databaseBytesContain(code) == false, "code \(code) after use")
            }

            // Expired: the messages are deleted by the next code sent (and by the server's
            // minute), and no byte of the database holds the codes.
            let (_, expired) = try await server.startRegistration(WalletDevice(), client, email: "bob@example.com")
            server.advance(600)
            _ = try await server.startRegistration(WalletDevice(), client, email: "carol@example.com")
            let left = try await server.ledger.outbox()
            #expect(!left.contains { $0.recipient == "bob@example.com" })
            #expect(left.filter { $0.recipient == "carol@example.com" }.count == 1)
            for code in [expired.sms, expired.email] {
                #expect(try server.databaseBytesContain(code) == false, "code \(code) after expiry")
            }
            server.advance(600)
            try await server.ledger.purgeExpiredOutbox(at: server.now)
            #expect(try await server.ledger.outbox().isEmpty)
        }
    }

    @Test func anExpiredCodeIsRefused() async throws {
        let server = try await RegistrationServer()
        try await server.withClient { client in
            let (id, code) = try await server.startRegistration(WalletDevice(), client)
            server.advance(600)
            let response = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", code.json)
            try expectRegistrationError(
                response, .gone, "registration_expired",
                "the code has expired (codes last 10 minutes); start again (horizon-wallet register) for a new one")
        }
    }

    @Test func aCodeCompletesOneRegistration() async throws {
        let server = try await RegistrationServer()
        try await server.withClient { client in
            let (id, code) = try await server.startRegistration(WalletDevice(), client)
            let first = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", code.json)
            #expect(first.status == .created)
            let again = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", code.json)
            try expectRegistrationError(
                again, .conflict, "registration_used", "this code was used already; a code completes one registration")
        }
    }

    @Test func fiveWrongCodesLockTheRegistration() async throws {
        let server = try await RegistrationServer()
        let device = WalletDevice()
        try await server.withClient { client in
            let (id, code) = try await server.startRegistration(device, client)
            let wrong = SentCodes(sms: code.sms, email: otherCode(than: code.email)).json
            for (left, noun) in [(4, "codes lock"), (3, "codes lock"), (2, "codes lock"), (1, "code locks")] {
                let response = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", wrong)
                try expectRegistrationError(
                    response, .badRequest, "registration_code_invalid",
                    "the code is wrong; \(left) more wrong \(noun) this registration")
            }
            let locked =
                "too many wrong codes: this registration is locked; start again (horizon-wallet register) for a new code"
            let fifth = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", wrong)
            try expectRegistrationError(fifth, .forbidden, "registration_locked", locked)
            let right = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", code.json)
            try expectRegistrationError(right, .forbidden, "registration_locked", locked)
            #expect(try await server.ledger.wallet(forKey: device.publicKeyBytes) == nil)
        }
    }

    @Test func restorationMovesTheAccountToTheNewDeviceAndRevokesTheOldKey() async throws {
        let server = try await RegistrationServer()
        let old = WalletDevice()
        let new = WalletDevice()
        try await server.withClient { client in
            let walletID = try await server.register(old, client)
            let start = try await client.postJSON(
                "/v1/wallets/restorations", new.restoration(email: "Alice@Example.com"))
            #expect(start.status == .accepted, "\(start.bodyText)")
            let sent = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: start.bodyData)
            #expect(sent.sentTo == ["email a•••@example.com"])
            let code = try await server.code(to: "alice@example.com")

            let verify = try await client.postJSON(
                "/v1/wallets/restorations/\(sent.registrationId)/verify", #"{"code": "\#(code)"}"#)
            #expect(verify.status == .ok, "\(verify.bodyText)")
            let verified = try JSONDecoder().decode(Components.Schemas.WalletVerified.self, from: verify.bodyData)
            #expect(verified.walletId == walletID && verified.revokedKeys == 1)
            #expect(try await server.ledger.wallet(forKey: old.publicKeyBytes) == nil)
            #expect(try await server.ledger.wallet(forKey: new.publicKeyBytes)?.id.rawValue == walletID)

            // A registration's id is not a restoration's, and the other way round.
            let crossed = try await client.postJSON(
                "/v1/wallets/registrations/\(sent.registrationId)/verify", SentCodes(sms: code, email: code).json)
            try expectRegistrationError(
                crossed, .notFound, "registration_not_found",
                "there is no such registration; start again (horizon-wallet register) for a new code")
        }
    }

    @Test func restorationDoesNotTellWhichEmailsHaveWallets() async throws {
        let server = try await RegistrationServer()
        try await server.withClient { client in
            _ = try await server.register(WalletDevice(), client)
            let messagesBefore = try await server.ledger.outbox().count
            let known = try await client.postJSON(
                "/v1/wallets/restorations", WalletDevice().restoration(email: "alice@example.com"))
            let unknown = try await client.postJSON(
                "/v1/wallets/restorations", WalletDevice().restoration(email: "bob@example.com"))
            #expect(known.status == .accepted && unknown.status == .accepted)
            let a = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: known.bodyData)
            let b = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: unknown.bodyData)
            #expect(a.expiresAt == b.expiresAt)
            #expect(a.sentTo == ["email a•••@example.com"] && b.sentTo == ["email b•••@example.com"])
            #expect(a.registrationId.count == b.registrationId.count)
            #expect(try keys(of: known.bodyData) == keys(of: unknown.bodyData))
            // Only the registered e-mail got a message.
            let messages = try await server.ledger.outbox()
            #expect(messages.count == messagesBefore + 1)
            #expect(messages.first?.recipient == "alice@example.com")
            // Its verify answers like a wrong code, whatever code is tried.
            let verify = try await client.postJSON(
                "/v1/wallets/restorations/\(b.registrationId)/verify", #"{"code": "12345678"}"#)
            try expectRegistrationError(
                verify, .badRequest, "registration_code_invalid",
                "the code is wrong; 4 more wrong codes lock this restoration")
        }
    }

    @Test func badInputIsRefusedWithItsReason() async throws {
        let server = try await RegistrationServer()
        let device = WalletDevice()
        try await server.withClient { client in
            let malformedKey = try await client.postJSON(
                "/v1/wallets/registrations", device.registration(overrides: ["publicKey": "bm90IGEga2V5"]))
            try expectRegistrationError(
                malformedKey, .badRequest, "invalid_request",
                "publicKey must be a P-256 public key, X9.63 (65 bytes), in standard base64")

            let otherProof = try device.proof(
                WalletProof.registration(
                    email: "mallory@example.com", phone: "+4915112345678", publicKey: device.publicBase64))
            let badProof = try await client.postJSON(
                "/v1/wallets/registrations", device.registration(overrides: ["proof": otherProof]))
            try expectRegistrationError(
                badProof, .unauthorized, "signature_invalid",
                "proof is not the wallet key's signature over the registration (see openapi.yaml)")

            let missing = try await client.postJSON(
                "/v1/wallets/registrations", device.registration(overrides: ["phone": nil]))
            try expectRegistrationError(missing, .badRequest, "malformed_json", #"the field "phone" is missing"#)

            let badPhone = try await client.postJSON(
                "/v1/wallets/registrations", device.registration(phone: "12345"))
            try expectRegistrationError(
                badPhone, .badRequest, "invalid_request",
                #""12345" is not a phone number in international form"#)

            let badEmail = try await client.postJSON(
                "/v1/wallets/registrations", device.registration(email: "alice.example.com"))
            try expectRegistrationError(
                badEmail, .badRequest, "invalid_request",
                #""alice.example.com" is not an e-mail address (expected name@domain)"#)

            let (id, _) = try await server.startRegistration(device, client)
            let letters = try await client.postJSON(
                "/v1/wallets/registrations/\(id)/verify", SentCodes(sms: "12ab5678", email: "12345678").json)
            try expectRegistrationError(
                letters, .badRequest, "invalid_request", "smsCode must be the 8 digits that were sent")

            let unknown = try await client.postJSON(
                "/v1/wallets/registrations/r_00000000000000000000000000000000/verify",
                SentCodes(sms: "12345678", email: "12345678").json)
            try expectRegistrationError(
                unknown, .notFound, "registration_not_found",
                "there is no such registration; start again (horizon-wallet register) for a new code")

            let get = try await client.executeRequest(
                uri: "/v1/wallets/registrations/\(id)/verify", method: .get, headers: [:], body: nil)
            try expectRegistrationError(
                get, .methodNotAllowed, "method_not_allowed",
                "GET is not allowed on /v1/wallets/registrations/\(id)/verify; use POST")

            _ = try await server.register(WalletDevice(), client, email: "carol@example.com")
            let registered = WalletDevice()
            _ = try await server.register(registered, client, email: "dave@example.com")
            let again = try await client.postJSON(
                "/v1/wallets/registrations", registered.registration(email: "erin@example.com"))
            try expectRegistrationError(
                again, .conflict, "already_exists",
                "this public key is registered to a wallet already; use a new key for a new wallet")
        }
    }
}

// MARK: Harness

/// A server around a fresh SQLite ledger with a clock the test moves.
final class RegistrationServer: Sendable {
    let directory: URL
    let ledger: Ledger
    let issuer = Issuer.generate(name: "Registration Test Issuer")
    private let clock = Mutex<Int64>(1_750_000_000)

    init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("horizon-reg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        ledger = try await Ledger.sqlite(path: directory.appendingPathComponent("ledger.sqlite").path)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    var now: Int64 { clock.withLock { $0 } }
    func advance(_ seconds: Int64) { clock.withLock { $0 += seconds } }

    func withClient<T: Sendable>(_ body: @Sendable (any TestClientProtocol) async throws -> T) async throws -> T {
        let parts = HorizonServer.Parts(
            configuration: ServerConfiguration(rateLimitBurst: 1000, rateLimitPerSecond: 1000, passwordCostLog2: 10),
            ledger: ledger, issuer: issuer, now: { [self] in now })
        let application = Application(
            router: try HorizonServer.router(parts),
            logger: Logger(label: "horizon.registration.test") { _ in SwiftLogNoOpLogHandler() })
        return try await application.test(.router, body)
    }

    /// The newest one-time code sent to `recipient`, from the sandbox outbox.
    func code(to recipient: String) async throws -> String {
        let message = try #require(try await ledger.outbox(recipient: recipient).first, "nothing sent to \(recipient)")
        let digits = message.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 }
        return String(try #require(digits, "no 8-digit code in \"\(message.body)\""))
    }

    /// Whether the database's files (with its write-ahead log) hold `text` anywhere, deleted
    /// rows and free pages included.
    func databaseBytesContain(_ text: String) throws -> Bool {
        let needle = Data(text.utf8)
        return try ["ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-journal"].contains { name in
            let url = directory.appendingPathComponent(name)
            guard FileManager.default.fileExists(atPath: url.path) else { return false }
            return try Data(contentsOf: url).range(of: needle) != nil
        }
    }

    /// Every stored registration's columns as text, to show that no code is among them.
    func storedRegistrationText() async throws -> String {
        try await ledger.store.transaction { db in
            try await db.query("SELECT * FROM wallet_registrations").map { row in
                row.columns.sorted().map { column in
                    (try? row.text(column)) ?? (try? row.optionalInteger(column)).flatMap { $0 }.map { "\($0)" }
                        ?? String(decoding: (try? row.bytes(column)) ?? [], as: UTF8.self)
                }.joined(separator: "|")
            }.joined(separator: "\n")
        }
    }

    /// Starts a registration for `device`; its id and the codes sent (to the default phone).
    func startRegistration(
        _ device: WalletDevice, _ client: any TestClientProtocol, email: String = "alice@example.com"
    )
        async throws -> (id: String, code: SentCodes)
    {
        let response = try await client.postJSON("/v1/wallets/registrations", device.registration(email: email))
        #expect(response.status == .accepted, "\(response.bodyText)")
        let sent = try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: response.bodyData)
        return (
            sent.registrationId, SentCodes(sms: try await code(to: "+4915112345678"), email: try await code(to: email))
        )
    }

    /// Registers `device`; returns the wallet id.
    func register(_ device: WalletDevice, _ client: any TestClientProtocol, email: String = "alice@example.com")
        async throws -> String
    {
        let (id, code) = try await startRegistration(device, client, email: email)
        let response = try await client.postJSON("/v1/wallets/registrations/\(id)/verify", code.json)
        #expect(response.status == .created, "\(response.bodyText)")
        return try JSONDecoder().decode(Components.Schemas.WalletVerified.self, from: response.bodyData).walletId
    }
}

/// A registration's two codes, one per channel, and the verify's JSON for them.
struct SentCodes: Sendable {
    let sms: String
    let email: String
    var json: String { #"{"smsCode": "\#(sms)", "emailCode": "\#(email)"}"# }
}

/// A wallet's key, as `horizon-wallet register` makes and uses it.
struct WalletDevice: Sendable {
    let key = P256.Signing.PrivateKey()

    var publicBase64: String { key.publicKey.x963Representation.base64EncodedString() }
    var publicKeyBytes: PublicKeyBytes { try! PublicKeyBytes(bytes: Array(key.publicKey.x963Representation)) }

    func proof(_ bytes: [UInt8]) throws -> String {
        try key.signature(for: bytes).rawRepresentation.base64EncodedString()
    }

    /// A registration's JSON; `overrides` replace (or, with nil, remove) fields.
    func registration(
        name: String = "Alice", email: String = "alice@example.com", phone: String = "+49 151 1234 5678",
        overrides: [String: String?] = [:]
    ) throws -> String {
        var fields: [String: String] = [
            "name": name, "email": email, "phone": phone, "publicKey": publicBase64,
            "proof": try proof(WalletProof.registration(email: email, phone: phone, publicKey: publicBase64)),
        ]
        for (name, value) in overrides { fields[name] = value }
        return String(decoding: try JSONEncoder().encode(fields), as: UTF8.self)
    }

    func restoration(email: String) throws -> String {
        let fields = [
            "email": email, "publicKey": publicBase64,
            "proof": try proof(WalletProof.restoration(email: email, publicKey: publicBase64)),
        ]
        return String(decoding: try JSONEncoder().encode(fields), as: UTF8.self)
    }
}

extension TestClientProtocol {
    /// POSTs `json` to `uri`.
    fileprivate func postJSON(_ uri: String, _ json: String) async throws -> TestResponse {
        try await executeRequest(
            uri: uri, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: json))
    }
}

extension TestResponse {
    fileprivate var bodyText: String { String(buffer: body) }
    fileprivate var bodyData: Data { Data(body.readableBytesView) }
}

/// A code of 8 digits that is not `code`.
private func otherCode(than code: String) -> String { code == "00000000" ? "00000001" : "00000000" }

private func keys(of data: Data) throws -> [String] {
    (try JSONSerialization.jsonObject(with: data) as? [String: Any])?.keys.sorted() ?? []
}

/// The response is the error envelope with this status and code, and its message contains `message`.
private func expectRegistrationError(
    _ response: TestResponse, _ status: HTTPResponse.Status, _ code: String, _ message: String,
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    struct Envelope: Decodable {
        struct Body: Decodable {
            let code: String
            let message: String
            let requestId: String
        }
        let error: Body
    }
    #expect(response.status == status, "\(response.bodyText)", sourceLocation: sourceLocation)
    let envelope = try #require(
        try? JSONDecoder().decode(Envelope.self, from: response.bodyData),
        "not an error envelope: \(response.bodyText)",
        sourceLocation: sourceLocation)
    #expect(envelope.error.code == code, "\(envelope.error.message)", sourceLocation: sourceLocation)
    #expect(
        envelope.error.message.contains(message), "\"\(envelope.error.message)\" lacks \"\(message)\"",
        sourceLocation: sourceLocation)
    #expect(!envelope.error.requestId.isEmpty, sourceLocation: sourceLocation)
}
