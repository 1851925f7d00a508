import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonProtocol
import HorizonSecureChannel
import HorizonServerClient
import HorizonServiceClients
import HorizonTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The service clients against a `horizon-server` running as its own process (the
/// other client tests run the server inside the test process). Set up as an operator and the
/// apps would: `init`, `merchants add`, `serve`; the terminal activated and the wallet registered
/// over HTTP; then every client asks the process.
@Suite("Service clients against a horizon-server process", .serialized, .offTheCooperativePool)
struct ServiceClientsProcessTests {
    /// The identity procedure against the server: a pinless registration through its states,
    /// with an invitation code the operator issued (`horizon-server invitations create`), the PUK
    /// texted to the phone and the activation link mailed to the address (both read from the
    /// server's outbox). The link's page is opened (GET: nothing happens) and its button pressed
    /// (POST); the wallet is active only after the PUK and the button. Then the identity client
    /// signs with the stored key. A second wallet gives the link to the procedure itself.
    @Test func theIdentityProcedureRegistersAgainstAServerProcess() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let invited = try ServerProcess.run([
            "invitations", "create", "--code", "FRIENDS-2026", "--uses", "1", "--json", "--data-dir", data,
        ])
        #expect(invited.status == 0 && invited.output.contains(#""code" : "FRIENDS-2026""#), "\(invited.errors)")
        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
        defer { server.kill() }
        let line = try #require(server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 30))
        let url = try #require(URL(string: String(line.dropFirst("listening on ".count))), "\(line)")

        let identity = IdentityClient(serverURL: url)
        let vault = MemoryVault()
        let backend = ServerIdentityBackend(serverURL: url, timeout: .seconds(60))
        let procedure = IdentityProcedure(identity: identity, backend: backend, vault: vault)
        try await procedure.start()
        try await procedure.requestStartPinlessRegistrationProcedure()
        let user = RegistrationUserData(name: "Alex", email: "alex@example.com", phone: "+4915112345678")
        try await procedure.prepareWalletUserData(user)
        // A code the operator did not issue: said in one sentence, and the person is asked again.
        await #expect(throws: IdentityProcedureError.self) {
            try await procedure.registerWithInvitationCode("FRIENDS-2025")
        }
        #expect(await procedure.state == .awaitingUserRegistration)
        try await procedure.register(with: user, invitationCode: "friends 2026")
        #expect(await procedure.state == .awaitingRegistrationPuk)

        /// The newest message to `recipient` in the server's outbox.
        func newest(to recipient: String) throws -> String {
            let outbox = try ServerProcess.run(["outbox", "--to", recipient, "--json", "--data-dir", data])
            let messages = try JSONSerialization.jsonObject(with: Data(outbox.output.utf8)) as? [[String: Any]]
            return try #require(messages?.first?["body"] as? String, "\(outbox.output)")
        }
        func puk(to phone: String) throws -> String {
            try #require(
                try newest(to: phone).split(whereSeparator: { !$0.isNumber }).first(where: { $0.count == 8 })
                    .map(String.init))
        }
        /// The mailed link, on the port the server really listens on (`publicURL` is not set).
        func link(to email: String) throws -> String {
            let mailed = try #require(
                try newest(to: email).split(whereSeparator: \.isWhitespace).first {
                    $0.contains("/v1/wallets/activation?")
                })
            let query = try #require(mailed.split(separator: "?", maxSplits: 1).last)
            return url.appendingPathComponent("v1/wallets/activation").absoluteString + "?" + query
        }
        let rightPuk = try puk(to: user.phone)
        await #expect(throws: IdentityProcedureError.self) {
            try await procedure.requestRegistrationWithPuk(rightPuk == "00000000" ? "00000001" : "00000000")
        }
        #expect(await procedure.state == .awaitingRegistrationPuk)
        try await procedure.requestRegistrationWithPuk(rightPuk)
        #expect(await procedure.state == .awaitingActivation)
        let notYet = IdentityProcedureError.failed(
            "the e-mail address is not confirmed yet: open the link in the activation mail and press its button")
        await #expect(throws: notYet) { try await procedure.retryCheckActivationAgain() }

        // Opening the link shows the page and its button; it activates nothing.
        let mailed = try link(to: user.email)
        let (page, pageResponse) = try await URLSession.shared.data(from: try #require(URL(string: mailed)))
        #expect((pageResponse as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: page, as: UTF8.self).contains(#"id="confirm""#))
        await #expect(throws: notYet) { try await procedure.retryCheckActivationAgain() }
        #expect(identity.state == .notReady)
        // The button.
        var press = URLRequest(url: url.appendingPathComponent("v1/wallets/activation"))
        press.httpMethod = "POST"
        press.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        press.httpBody = Data(try #require(mailed.split(separator: "?", maxSplits: 1).last).utf8)
        let (pressed, pressResponse) = try await URLSession.shared.data(for: press)
        #expect((pressResponse as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: pressed, as: UTF8.self).contains("Your wallet is active"))
        try await procedure.retryCheckActivationAgain()
        #expect(await procedure.state == .unlocked)
        #expect(identity.state == .ready)
        #expect(try vault.stored() == .pinless)
        let account = try await AccountDataClient(identityClient: identity, cache: .temporaryAnonymousCache())
            .accountData()
        #expect(account.value.name == "Alex")
        let listed = try ServerProcess.run(["invitations", "list", "--data-dir", data])
        #expect(listed.output.contains("spent  1/1 used"), "\(listed.output)")

        // The code is spent; a second wallet registers without one and gives the mailed link to
        // the procedure (what a tap on it is on a phone).
        let second = IdentityProcedure(identity: IdentityClient(serverURL: url), backend: backend, vault: MemoryVault())
        try await second.start()
        try await second.requestStartPinlessRegistrationProcedure()
        let bea = RegistrationUserData(name: "Bea", email: "bea@example.com", phone: "+4915187654321")
        try await second.prepareWalletUserData(bea)
        await #expect(throws: IdentityProcedureError.self) {
            try await second.registerWithInvitationCode("FRIENDS-2026")
        }
        try await second.register(with: bea, invitationCode: nil)
        try await second.requestRegistrationWithPuk(try puk(to: bea.phone))
        let beaLink = try link(to: bea.email)
        try await second.confirmActivation(link: beaLink)
        #expect(await second.state == .unlocked)
        // Used once: a second press is refused.
        await #expect(throws: ServerClientError.self) {
            try await HorizonServerClient(serverURL: url).confirmActivationLink(beaLink)
        }
    }

    @Test func merchantAndWalletClientsWorkAgainstAServerProcess() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let passwordFile = sandbox.path("password")
        try "correct horse battery\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let added = try ServerProcess.run([
            "merchants", "add", "Corner Bakery", "--email", "owner@bakery.example", "--currency", "EUR",
            "--password-file", passwordFile, "--data-dir", data,
        ])
        #expect(added.status == 0, "\(added.errors)")
        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
        defer { server.kill() }
        let line = try #require(server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 30))
        let url = try #require(URL(string: String(line.dropFirst("listening on ".count))), "\(line)")

        // The terminal, activated with the admin's password; its merchant service.
        let till = P256.Signing.PrivateKey()
        _ = try await HorizonServerClient(serverURL: url).activateTerminal(
            email: "owner@bakery.example", password: "correct horse battery", label: "Till 1", key: till)
        let merchant = MerchantServiceClient(serverURL: url, terminalKey: till)
        try await merchant.start()
        #expect(await merchant.isIdentityReady)
        #expect(try await merchant.addRegisterUser(id: "007", name: "James").name == "James")
        #expect(try await merchant.fetchRegisterUsers().map(\.id) == ["007"])
        #expect(try await merchant.terminals().map(\.label) == ["Till 1"])

        // The wallet, registered with the code the server "sent" (its outbox), then funded.
        let walletKey = P256.Signing.PrivateKey()
        let registration = HorizonServerClient(serverURL: url)
        let sent = try await registration.registerWallet(
            name: "Alex", email: "alex@example.com", phone: "+4915112345678", key: walletKey)
        let outbox = try ServerProcess.run(["outbox", "--to", "+4915112345678", "--json", "--data-dir", data])
        let code = try #require(
            outbox.output.split(whereSeparator: { !$0.isNumber }).first(where: { $0.count == 8 }), "\(outbox.output)")
        let mail = try ServerProcess.run(["outbox", "--to", "alex@example.com", "--json", "--data-dir", data])
        let emailCode = try #require(
            mail.output.split(whereSeparator: { !$0.isNumber }).first(where: { $0.count == 8 }), "\(mail.output)")
        let verified = try await registration.verifyWalletRegistration(
            id: sent.registrationId, smsCode: String(code), emailCode: String(emailCode))
        let topUp = try ServerProcess.run(["wallets", "top-up", "alex@example.com", "40.00", "--data-dir", data])
        #expect(topUp.status == 0, "\(topUp.errors)")
        let anchorBytes = try #require(Data(base64Encoded: verified.anchor.publicKey))
        let anchor = TrustAnchor(
            publicKey: try P256.Signing.PublicKey(x963Representation: anchorBytes), name: verified.anchor.name)

        let identity = IdentityClient(serverURL: url, signingKey: walletKey)
        let cache = Cache.temporaryAnonymousCache()
        let account = AccountDataClient(identityClient: identity, cache: cache)
        let data0 = try await account.accountData()
        #expect(data0.isFresh && data0.value.name == "Alex" && data0.value.walletID == verified.walletId)
        #expect(try await account.balances().value.map(\.amount) == [40_00])

        // A payment the wallet signed, submitted by the till: the wallet's history and the
        // merchant's transactions both have it.
        let confirm = try WalletSigned.confirm(by: walletKey, for: till.publicKey, amount: 12_50, tip: 0)
        let result = try await HorizonServerClient(serverURL: url, signingKey: till).submitPayment(
            Components.Schemas.PaymentSubmission(
                confirmation: Data(SessionMessage.confirm(confirm).encoded()).base64EncodedString(),
                paymentId: confirm.paymentID.bytes.hexString, sessionId: Int64(bitPattern: confirm.sessionID.rawValue),
                walletKey: Data(confirm.walletKey.bytes).base64EncodedString(), amount: 12_50, tip: 0,
                currency: "EUR", registerUser: "007"))
        #expect(result.outcome == .approved, "\(result)")
        let history = try await WalletTransactionsClient(identityClient: identity, cache: cache).transactions()
        #expect(history.value.transactions.map(\.paymentId) == [confirm.paymentID.bytes.hexString])
        let sales = try await merchant.transactions(.init(registerUserID: "007"))
        #expect(sales.transactions.map(\.paymentId) == [confirm.paymentID.bytes.hexString])
        #expect(try await account.balances().value.map(\.amount) == [40_00 - 12_50])

        // Programs, memberships, coupons, messages, the daily token and the cards.
        let programs = try await BonusProgramClient(identityClient: identity, cache: cache).allBonusPrograms()
        #expect(programs.value.map(\.merchantName) == ["Corner Bakery"])
        #expect(
            try await GoldProgramMembershipsClient(identityClient: identity, cache: cache).memberships().value.isEmpty)
        #expect(try await CouponProgramClient(identityClient: identity, cache: cache).coupons().value.isEmpty)
        let posted = try ServerProcess.run([
            "messages", "add", "Maintenance tonight", "--body", "From 22:00", "--severity", "warning", "--data-dir",
            data,
        ])
        #expect(posted.status == 0, "\(posted.errors)")
        let messages = try await CustomStatusMessageManager(identityClient: identity, cache: cache).currentMessages()
        #expect(messages.value.map(\.title) == ["Maintenance tonight"])
        let tokens = DailyTokenClient(identityClient: identity, cache: cache, trustAnchors: [anchor])
        let token = try await tokens.fetchDailyToken()
        #expect(token.token.token.allowance.minorUnits == 40_00 - 12_50)
        let wallet = WalletClient(server: try identity.signedClient())
        guard
            case .added(let card) = try await wallet.addPaymentCard(
                cardholder: "Alex Doe", cardNumber: "4242 4242 4242 4242", cvc: "123", expDate: "12/30")
        else {
            Issue.record("the approving test card needed a challenge")
            return
        }
        #expect(try await wallet.getWallet().map(\.id) == [card.id])

        server.signal(SIGTERM)
        #expect(server.wait(timeout: 10) == 0, "\(server.errors)")
    }
}
