import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonLedgerTestSupport
import HorizonServer
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// Registration with both channels proven on their own: the PUK texted to the phone, given back
/// by the wallet signing with the key it registers; the one-time link mailed to the address,
/// confirmed on the page it opens (GET shows a button, only its POST confirms). On SQLite, and on
/// PostgreSQL when a test database is configured.
@Suite("Registration by PUK and activation link")
struct RegistrationLinkTests {
    static let stores: [StoreKind] = TestStores.postgresConfigured ? [.sqlite, .postgres] : [.sqlite]

    @Test(arguments: stores)
    func theWalletIsActiveOnlyOnceThePukAndTheLinkAreBothProven(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let device = WalletDevice()
            let sent = try await server.start(device, client)
            #expect(sent.activationExpiresAt == server.now + 86_400)
            let (puk, link) = try await server.pukAndLink()
            #expect(
                link.hasPrefix("http://127.0.0.1:0/v1/wallets/activation?registration=\(sent.registrationId)&token="))
            var status = try await server.status(sent.registrationId, device, client)
            #expect(!status.phoneProven && !status.emailProven && !status.active && status.walletId == nil)

            // A mail scanner's GET shows the page and confirms nothing.
            let page = try await client.send(.get, LinkServer.localPath(link))
            #expect(page.status == .ok)
            #expect(page.text.contains(#"<button type="submit" id="confirm">"#))
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            status = try await server.status(sent.registrationId, device, client)
            #expect(!status.emailProven)

            // The PUK alone proves the phone, not the wallet.
            let afterPuk = try await server.submitPuk(puk, sent.registrationId, device, client)
            #expect(afterPuk.status == .ok, "\(afterPuk.text)")
            status = try await server.status(sent.registrationId, device, client)
            #expect(status.phoneProven && !status.emailProven && !status.active)
            #expect(try await server.ledger.wallet(forKey: device.publicKeyBytes) == nil)
            // The PUK's message is blanked; the link's stays until used.
            #expect(
                try await server.ledger.outbox(recipient: "+4915112345678").first?.body == OutboxMessage.redactedBody)

            let confirmed = try await server.confirm(link, client)
            #expect(confirmed.status == .ok)
            #expect(confirmed.text.contains("Your wallet is active"))
            status = try await server.status(sent.registrationId, device, client)
            #expect(status.phoneProven && status.emailProven && status.active)
            let wallet = try #require(try await server.ledger.wallet(forKey: device.publicKeyBytes))
            #expect(status.walletId == wallet.id.rawValue)
            #expect(status.anchor?.publicKey == server.issuer.anchorDescription.publicKey)
            #expect(
                try await server.ledger.outbox(recipient: "alice@example.com").first?.body == OutboxMessage.redactedBody
            )
        }
    }

    @Test(arguments: stores)
    func theLinkMayComeFirstAndThePukCompletes(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let device = WalletDevice()
            let sent = try await server.start(device, client)
            let (puk, link) = try await server.pukAndLink()
            let confirmed = try await server.confirm(link, client)
            #expect(confirmed.text.contains("E-mail address confirmed"))
            var status = try await server.status(sent.registrationId, device, client)
            #expect(!status.phoneProven && status.emailProven && !status.active)
            let response = try await server.submitPuk(puk, sent.registrationId, device, client)
            let body = try JSONDecoder().decode(Components.Schemas.RegistrationActivation.self, from: response.data)
            #expect(body.active && body.walletId != nil)
            // Giving the right PUK again answers the state; it registers nothing more.
            let again = try await server.submitPuk(puk, sent.registrationId, device, client)
            #expect(again.status == .ok)
            status = try await server.status(sent.registrationId, device, client)
            #expect(status.active && status.walletId == body.walletId)
            #expect(try await server.ledger.walletsWithContacts().count == 1)
        }
    }

    @Test(arguments: stores)
    func anotherWalletsKeyCannotReadOrCompleteTheRegistration(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let device = WalletDevice()
            let sent = try await server.start(device, client)
            let (puk, _) = try await server.pukAndLink()
            // A registered wallet's key and a stranger's: answered like an unknown registration.
            let other = WalletDevice()
            _ = try await server.ledger.createWallet(name: "Mallory", publicKey: other.publicKeyBytes)
            for key in [other, WalletDevice()] {
                try expectError(
                    try await server.submitPuk(puk, sent.registrationId, key, client), .notFound,
                    "registration_not_found", "there is no such registration")
                try expectError(
                    try await server.statusResponse(sent.registrationId, key, client), .notFound,
                    "registration_not_found", "there is no such registration")
            }
            // Unsigned: refused before anything is looked up.
            try expectError(
                try await client.send(
                    .post, "/v1/wallets/registrations/\(sent.registrationId)/puk", json: #"{"puk": "\#(puk)"}"#),
                .unauthorized, "unauthenticated", "signed with the key being registered")
            try expectError(
                try await client.send(.get, "/v1/wallets/registrations/\(sent.registrationId)"), .unauthorized,
                "unauthenticated", "signed with the key being registered")
            // None of it counted against the registration, and nothing was proven.
            let status = try await server.status(sent.registrationId, device, client)
            #expect(!status.phoneProven)
            #expect(try await server.column("failed_attempts", sent.registrationId) == 0)
            #expect(try await server.submitPuk(puk, sent.registrationId, device, client).status == .ok)
        }
    }

    @Test(arguments: stores)
    func fiveWrongPuksLockTheRegistration(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let device = WalletDevice()
            let sent = try await server.start(device, client)
            let (puk, link) = try await server.pukAndLink()
            let wrong = puk == "00000000" ? "00000001" : "00000000"
            for left in (1...4).reversed() {
                try expectError(
                    try await server.submitPuk(wrong, sent.registrationId, device, client), .badRequest,
                    "registration_code_invalid", "\(left) more wrong")
            }
            try expectError(
                try await server.submitPuk(wrong, sent.registrationId, device, client), .forbidden,
                "registration_locked", "too many wrong codes")
            try expectError(
                try await server.submitPuk(puk, sent.registrationId, device, client), .forbidden,
                "registration_locked", "too many wrong codes")
            try expectError(
                try await server.statusResponse(sent.registrationId, device, client), .forbidden,
                "registration_locked", "too many wrong codes")
            // The link of a locked registration activates nothing, and both messages are blanked.
            let page = try await server.confirm(link, client)
            #expect(page.status == .forbidden && page.text.contains("Registration locked"))
            #expect(try await server.ledger.wallet(forKey: device.publicKeyBytes) == nil)
            for recipient in ["+4915112345678", "alice@example.com"] {
                #expect(try await server.ledger.outbox(recipient: recipient).first?.body == OutboxMessage.redactedBody)
            }
        }
    }

    @Test(arguments: stores)
    func wrongLinkTokensAreBoundedAndAUsedLinkIsRefused(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let device = WalletDevice()
            let sent = try await server.start(device, client)
            let (puk, link) = try await server.pukAndLink()
            let token = try #require(link.split(separator: "token=").last.map(String.init))
            let wrongToken = String(repeating: "A", count: 43)
            let wrongLink = link.replacingOccurrences(of: token, with: wrongToken)
            // The address is held back after three wrong links (the sign-in back-off)…
            for _ in 0..<3 {
                let page = try await server.confirm(wrongLink, client)
                #expect(page.status == .notFound && page.text.contains("Unknown link"), "\(page.text)")
            }
            let held = try await server.confirm(link, client)
            #expect(held.status == .tooManyRequests && held.text.contains("Too many wrong activation links"))
            // …and the registration's own counter locks it at five, whatever the addresses.
            server.advance(3600)
            for _ in 0..<2 {
                server.advance(3600)
                _ = try await server.confirm(wrongLink, client)
            }
            #expect(try await server.column("link_failed_attempts", sent.registrationId) == 5)
            server.advance(3600)
            let locked = try await server.confirm(link, client)
            #expect(locked.status == .forbidden && locked.text.contains("Registration locked"), "\(locked.text)")
            #expect(try await server.submitPuk(puk, sent.registrationId, device, client).status == .forbidden)

            // Replay: a used link is refused, and the wallet is registered once.
            let second = WalletDevice()
            let other = try await server.start(second, client, email: "bob@example.com", phone: "+49 151 2345 6789")
            let (otherPuk, otherLink) = try await server.pukAndLink(email: "bob@example.com", phone: "+4915123456789")
            #expect(try await server.submitPuk(otherPuk, other.registrationId, second, client).status == .ok)
            #expect(try await server.confirm(otherLink, client).status == .ok)
            let replay = try await server.confirm(otherLink, client)
            #expect(replay.status == .conflict && replay.text.contains("Link already used"))
            #expect(try await server.ledger.walletsWithContacts().count == 1)
        }
    }

    @Test(arguments: stores)
    func thePukAndTheLinkExpire(_ kind: StoreKind) async throws {
        var configuration = LinkServer.configuration
        configuration.activationLinkLifetime = 3600
        try await LinkServer.with(kind, configuration: configuration) { server, client in
            let device = WalletDevice()
            let sent = try await server.start(device, client)
            #expect(sent.activationExpiresAt == server.now + 3600)
            let (puk, link) = try await server.pukAndLink()
            server.advance(601)
            try expectError(
                try await server.submitPuk(puk, sent.registrationId, device, client), .gone, "registration_expired",
                "has expired")
            try expectError(
                try await server.statusResponse(sent.registrationId, device, client), .gone, "registration_expired",
                "has expired")

            // A PUK given in time keeps the registration until the link's own expiry.
            let late = WalletDevice()
            let next = try await server.start(late, client, email: "bob@example.com", phone: "+49 151 2345 6789")
            let (nextPuk, nextLink) = try await server.pukAndLink(email: "bob@example.com", phone: "+4915123456789")
            #expect(try await server.submitPuk(nextPuk, next.registrationId, late, client).status == .ok)
            server.advance(3000)
            #expect(try await server.status(next.registrationId, late, client).phoneProven)
            server.advance(600)
            let expired = try await server.confirm(nextLink, client)
            #expect(expired.status == .gone && expired.text.contains("Link expired"), "\(expired.text)")
            let stale = try await server.confirm(link, client)
            #expect(stale.status == .gone)
            try expectError(
                try await server.statusResponse(next.registrationId, late, client), .gone, "registration_expired",
                "has expired")
            #expect(try await server.ledger.walletsWithContacts().isEmpty)
        }
    }

    @Test(arguments: stores)
    func badBytesAreRefusedWithTheirReason(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            let device = WalletDevice()
            let sent = try await server.start(device, client)
            let id = sent.registrationId
            for body in [#"{"puk": "1234"}"#, #"{"puk": "abcdefgh"}"#, #"{"puk": "١٢٣٤٥٦٧٨"}"#] {
                let response = try await server.signedSend(
                    .post, "/v1/wallets/registrations/\(id)/puk", body, device, client)
                #expect(response.status == .badRequest, "\(body): \(response.text)")
            }
            try expectError(
                try await server.signedSend(
                    .post, "/v1/wallets/registrations/\(id)/puk", #"{"puk": 12345678}"#, device, client),
                .badRequest, "malformed_json", "the field \"puk\" has the wrong type")
            for path in [
                "/v1/wallets/registrations/r_zz", "/v1/wallets/registrations/" + String(repeating: "r", count: 64),
            ] {
                try expectError(
                    try await server.signedSend(.get, path, nil, device, client), .notFound, "registration_not_found",
                    "there is no such registration")
            }
            // The page: a link cut short, or tokens of the wrong shape, are refused as incomplete.
            for query in [
                "", "?registration=\(id)", "?token=\(String(repeating: "A", count: 43))",
                "?registration=\(id)&token=short", "?registration=r_1&token=\(String(repeating: "A", count: 43))",
            ] {
                let page = try await client.send(.get, ActivationPath.path + query)
                #expect(page.status == .badRequest && page.text.contains("Incomplete link"), "\(query)")
            }
            let junk = try await client.executeRequest(
                uri: ActivationPath.path, method: .post,
                headers: [.contentType: "application/x-www-form-urlencoded"],
                body: ByteBuffer(bytes: [0x72, 0x3D, 0xFF, 0xFE, 0x26, 0x74, 0x3D]))
            #expect(junk.status == .badRequest)
            let json = try await client.send(.post, ActivationPath.path, json: #"{"registration": "x"}"#)
            #expect(json.status == .badRequest)
            // A registration proven by link cannot be completed by the code verify.
            let (puk, _) = try await server.pukAndLink()
            try expectError(
                try await client.send(
                    .post, "/v1/wallets/registrations/\(id)/verify",
                    json: #"{"smsCode": "\#(puk)", "emailCode": "\#(puk)"}"#),
                .notFound, "registration_not_found", "there is no such registration")
            #expect(try await server.ledger.wallet(forKey: device.publicKeyBytes) == nil)
        }
    }

    @Test func theLinkStartsWithThePublicURLAndTheSettingsAreChecked() async throws {
        var configuration = LinkServer.configuration
        configuration.publicURL = "https://pay.example.com/"
        try await LinkServer.with(.sqlite, configuration: configuration) { server, client in
            _ = try await server.start(WalletDevice(), client)
            let (_, link) = try await server.pukAndLink()
            #expect(link.hasPrefix("https://pay.example.com/v1/wallets/activation?registration=r_"), "\(link)")
        }
        for (change, sentence) in [
            ({ (c: inout ServerConfiguration) in c.activationLinkLifetime = 599 }, "activationLinkLifetime must be"),
            (
                { (c: inout ServerConfiguration) in c.activationLinkLifetime = 7 * 86_400 + 1 },
                "activationLinkLifetime must be"
            ),
            ({ (c: inout ServerConfiguration) in c.publicURL = "pay.example.com" }, "publicURL must be"),
            ({ (c: inout ServerConfiguration) in c.publicURL = "ftp://pay.example.com" }, "publicURL must be"),
        ] {
            var bad = LinkServer.configuration
            change(&bad)
            #expect { try bad.validate() } throws: { "\($0)".contains(sentence) }
        }
        var good = LinkServer.configuration
        good.activationLinkLifetime = 600
        good.publicURL = "http://10.0.0.2:8080"
        try good.validate()
    }

    // MARK: Invitation codes

    @Test(arguments: stores)
    func invitationCodesAreRequiredWhenTheServerSaysAndRefusedClearly(_ kind: StoreKind) async throws {
        var configuration = LinkServer.configuration
        configuration.invitationsRequired = true
        try await LinkServer.with(kind, configuration: configuration) { server, client in
            let bonus = try Money(minorUnits: 5_00, currency: .eur)
            let single = try await server.invite("WELCOME-2026", uses: 1, bonus: bonus)
            let device = WalletDevice()
            try expectError(
                try await server.startResponse(device, client, invitation: nil), .forbidden, "invitation_required",
                "registers wallets with an invitation code only")
            try expectError(
                try await server.startResponse(device, client, invitation: "NOPE-NOPE"), .unprocessableContent,
                "invitation_unknown", "this invitation code is not known")
            try expectError(
                try await server.startResponse(device, client, invitation: "no!"), .badRequest, "invalid_request",
                "invitationCode must be 4 to 32 letters and digits")
            // Typed in lower case with spaces: the same code.
            let sent = try await server.start(device, client, invitation: "welcome 2026")
            let (puk, link) = try await server.pukAndLink()
            #expect(try await server.submitPuk(puk, sent.registrationId, device, client).status == .ok)
            #expect(try await server.confirm(link, client).status == .ok)
            let wallet = try #require(try await server.ledger.wallet(forKey: device.publicKeyBytes)).id
            #expect(try await server.ledger.invitations().first?.uses == 1)
            #expect(try await server.ledger.invitations().first?.status == .spent)

            try expectError(
                try await server.startResponse(
                    WalletDevice(), client, email: "bob@example.com", phone: "+49 151 2345 6789",
                    invitation: "WELCOME-2026"),
                .gone, "invitation_spent", "has been used as often as it may be")
            let revoked = try await server.invite("SPRING", uses: 10, bonus: nil)
            _ = try await server.ledger.revokeInvitation(revoked.id)
            try expectError(
                try await server.startResponse(
                    WalletDevice(), client, email: "bob@example.com", phone: "+49 151 2345 6789", invitation: "spring"),
                .gone, "invitation_revoked", "was withdrawn by the operator")
            #expect(single.maximumUses == 1)

            // The bonus comes with the first top-up only.
            try await server.ledger.deposit(try Money(minorUnits: 20_00, currency: .eur), to: wallet)
            #expect(try await server.ledger.balance(of: wallet, in: .eur).minorUnits == 25_00)
            try await server.ledger.deposit(try Money(minorUnits: 20_00, currency: .eur), to: wallet)
            #expect(try await server.ledger.balance(of: wallet, in: .eur).minorUnits == 45_00)
            #expect(try await LedgerAudit.violations(in: server.ledger.store).isEmpty)
        }
    }

    @Test(arguments: stores)
    func aMultiUseCodeRegistersUpToItsLimitAndARevokedOneCompletesNothing(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            _ = try await server.invite("TEAM", uses: 2, bonus: nil)
            // Optional: a registration without a code goes through.
            let plain = WalletDevice()
            let plainSent = try await server.start(plain, client, email: "zoe@example.com", phone: "+49 151 0000 0001")
            #expect(plainSent.activationExpiresAt != nil)
            var pending: [(WalletDevice, String, String, String)] = []
            for (index, email) in ["a@example.com", "b@example.com", "c@example.com"].enumerated() {
                let device = WalletDevice()
                let phone = "+49 151 1111 000\(index)"
                let sent = try await server.start(device, client, email: email, phone: phone, invitation: "team")
                let (puk, link) = try await server.pukAndLink(email: email, phone: "+491511111000\(index)")
                pending.append((device, sent.registrationId, puk, link))
            }
            // Three started while the code had uses left; only two complete.
            var outcomes: [HTTPResponse.Status] = []
            for (device, id, puk, link) in pending {
                _ = try await server.confirm(link, client)
                outcomes.append(try await server.submitPuk(puk, id, device, client).status)
            }
            #expect(outcomes == [.ok, .ok, .gone])
            #expect(try await server.ledger.invitations().first?.uses == 2)

            let revoked = try await server.invite("LATER", uses: 5, bonus: nil)
            let device = WalletDevice()
            let sent = try await server.start(
                device, client, email: "d@example.com", phone: "+49 151 2222 0000", invitation: "LATER")
            let (puk, link) = try await server.pukAndLink(email: "d@example.com", phone: "+4915122220000")
            _ = try await server.ledger.revokeInvitation(revoked.id)
            #expect(try await server.submitPuk(puk, sent.registrationId, device, client).status == .ok)
            let page = try await server.confirm(link, client)
            #expect(page.status == .gone && page.text.contains("withdrawn by the operator"), "\(page.text)")
            #expect(try await server.ledger.wallet(forKey: device.publicKeyBytes) == nil)
        }
    }

    @Test(arguments: stores)
    func unknownInvitationCodesFromOneAddressAreHeldBack(_ kind: StoreKind) async throws {
        try await LinkServer.with(kind) { server, client in
            _ = try await server.invite("REAL-CODE", uses: 1, bonus: nil)
            for guess in ["GUESS-1", "GUESS-2", "GUESS-3"] {
                try expectError(
                    try await server.startResponse(WalletDevice(), client, invitation: guess), .unprocessableContent,
                    "invitation_unknown", "not known")
            }
            // Held back now, even for the right code, until the back-off ends.
            try expectError(
                try await server.startResponse(WalletDevice(), client, invitation: "REAL-CODE"), .tooManyRequests,
                "rate_limited", "too many unknown invitation codes from here")
            server.advance(3600)
            #expect(try await server.startResponse(WalletDevice(), client, invitation: "REAL-CODE").status == .accepted)
        }
    }
}

enum ActivationPath {
    static let path = "/v1/wallets/activation"
}

/// A server over a store of either kind, with a clock the test moves.
final class LinkServer: Sendable {
    static let configuration = ServerConfiguration.testing()

    let ledger: Ledger
    let issuer = Issuer.generate(name: "Link Test Issuer")
    private let clock = Mutex<Int64>(1_750_000_000)

    init(ledger: Ledger) { self.ledger = ledger }

    var now: Int64 { clock.withLock { $0 } }
    func advance(_ seconds: Int64) { clock.withLock { $0 += seconds } }

    static func with(
        _ kind: StoreKind, configuration: ServerConfiguration = configuration,
        _ body: @Sendable (LinkServer, any TestClientProtocol) async throws -> Void
    ) async throws {
        try await TestStores.withStore(kind) { store in
            let server = LinkServer(ledger: try await Ledger.open(store))
            let parts = HorizonServer.Parts(
                configuration: configuration, ledger: server.ledger, issuer: server.issuer, now: { server.now })
            let application = Application(router: try HorizonServer.router(parts), logger: .quiet)
            try await application.test(.router) { client in try await body(server, client) }
        }
    }

    /// The path and query of a mailed link (the test client sends paths).
    static func localPath(_ link: String) -> String {
        guard let range = link.range(of: ActivationPath.path) else { return link }
        return String(link[range.lowerBound...])
    }

    func registration(
        _ device: WalletDevice, email: String, phone: String, invitation: String?
    ) throws -> String {
        var fields: [String: String] = [
            "name": "Alice", "email": email, "phone": phone, "publicKey": device.publicBase64, "emailProof": "link",
            "proof": try device.proof(
                WalletProof.registration(email: email, phone: phone, publicKey: device.publicBase64)),
        ]
        if let invitation { fields["invitationCode"] = invitation }
        return String(decoding: try JSONEncoder().encode(fields), as: UTF8.self)
    }

    func startResponse(
        _ device: WalletDevice, _ client: any TestClientProtocol, email: String = "alice@example.com",
        phone: String = "+49 151 1234 5678", invitation: String? = nil
    ) async throws -> TestResponse {
        try await client.send(
            .post, "/v1/wallets/registrations",
            json: try registration(device, email: email, phone: phone, invitation: invitation))
    }

    func start(
        _ device: WalletDevice, _ client: any TestClientProtocol, email: String = "alice@example.com",
        phone: String = "+49 151 1234 5678", invitation: String? = nil
    ) async throws -> Components.Schemas.OneTimeCodeSent {
        let response = try await startResponse(device, client, email: email, phone: phone, invitation: invitation)
        #expect(response.status == .accepted, "\(response.text)")
        return try JSONDecoder().decode(Components.Schemas.OneTimeCodeSent.self, from: response.data)
    }

    /// The PUK texted and the link mailed, from the sandbox outbox.
    func pukAndLink(email: String = "alice@example.com", phone: String = "+4915112345678") async throws
        -> (puk: String, link: String)
    {
        let sms = try #require(try await ledger.outbox(recipient: phone).first, "nothing sent to \(phone)")
        let puk = try #require(sms.body.split(whereSeparator: { !$0.isNumber }).first { $0.count == 8 })
        let mail = try #require(try await ledger.outbox(recipient: email).first, "nothing sent to \(email)")
        let link = try #require(
            mail.body.split(whereSeparator: \.isWhitespace).first { $0.contains(ActivationPath.path) })
        return (String(puk), String(link))
    }

    /// The page's button: the link's registration and token posted as its form does.
    func confirm(_ link: String, _ client: any TestClientProtocol) async throws -> TestResponse {
        let query = try #require(URLComponents(string: link)?.percentEncodedQuery)
        return try await client.executeRequest(
            uri: ActivationPath.path, method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
            body: ByteBuffer(string: query))
    }

    func signedSend(
        _ method: HTTPRequest.Method, _ path: String, _ body: String?, _ device: WalletDevice,
        _ client: any TestClientProtocol
    ) async throws -> TestResponse {
        var headers: HTTPFields = [
            .authorization: try signedAuthorization(
                device.key, method: method, path: path, bodyBytes: body.map { Array($0.utf8) }, time: now)
        ]
        if body != nil { headers[.contentType] = "application/json" }
        return try await client.executeRequest(
            uri: path, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
    }

    func submitPuk(_ puk: String, _ id: String, _ device: WalletDevice, _ client: any TestClientProtocol)
        async throws -> TestResponse
    {
        try await signedSend(.post, "/v1/wallets/registrations/\(id)/puk", #"{"puk": "\#(puk)"}"#, device, client)
    }

    func statusResponse(_ id: String, _ device: WalletDevice, _ client: any TestClientProtocol) async throws
        -> TestResponse
    {
        try await signedSend(.get, "/v1/wallets/registrations/\(id)", nil, device, client)
    }

    func status(_ id: String, _ device: WalletDevice, _ client: any TestClientProtocol) async throws
        -> Components.Schemas.RegistrationActivation
    {
        let response = try await statusResponse(id, device, client)
        #expect(response.status == .ok, "\(response.text)")
        return try JSONDecoder().decode(Components.Schemas.RegistrationActivation.self, from: response.data)
    }

    func invite(_ code: String, uses: Int, bonus: Money?) async throws -> Invitation {
        let normalized = try #require(InvitationCodes.normalized(code))
        return try await ledger.createInvitation(
            codeHash: InvitationCodes.hash(normalized), hint: InvitationCodes.hint(normalized), maximumUses: uses,
            bonus: bonus, note: "test", at: now)
    }

    /// An integer column of a registration's row.
    func column(_ name: String, _ id: String) async throws -> Int64 {
        try await ledger.store.transaction { db in
            let row = try await db.query("SELECT \(name) FROM wallet_registrations WHERE id = ?", [.text(id)]).first
            return try row?.integer(name) ?? -1
        }
    }
}
