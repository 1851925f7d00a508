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

/// The service clients against a `horizon-server` running as its own process (the
/// other client tests run the server inside the test process). Set up as an operator and the
/// apps would: `init`, `merchants add`, `serve`; the terminal activated and the wallet registered
/// over HTTP; then every client asks the process.
@Suite("Service clients against a horizon-server process", .serialized, .offTheCooperativePool)
struct ServiceClientsProcessTests {
    /// The identity procedure against the server: a pinless registration through its states,
    /// with the PUK texted to the phone and the activation code mailed to the address (read from
    /// the server's outbox); then the identity client signs with the stored key.
    @Test func theIdentityProcedureRegistersAgainstAServerProcess() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0", "--data-dir", data])
        defer { server.kill() }
        let line = try #require(server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 30))
        let url = try #require(URL(string: String(line.dropFirst("listening on ".count))), "\(line)")

        let identity = IdentityClient(serverURL: url)
        let vault = MemoryVault()
        let procedure = IdentityProcedure(
            identity: identity, backend: ServerIdentityBackend(serverURL: url, timeout: .seconds(60)), vault: vault)
        try await procedure.start()
        try await procedure.requestStartPinlessRegistrationProcedure()
        let user = RegistrationUserData(name: "Alex", email: "alex@example.com", phone: "+4915112345678")
        try await procedure.prepareWalletUserData(user)
        // This server issues no invitation codes: said, and the code can be skipped.
        await #expect(throws: IdentityProcedureError.self) { try await procedure.registerWithInvitationCode("FRIENDS") }
        #expect(await procedure.state == .awaitingUserRegistration)
        try await procedure.register(with: user, invitationCode: nil)
        #expect(await procedure.state == .awaitingRegistrationPuk)

        func code(to recipient: String) throws -> String {
            let outbox = try ServerProcess.run(["outbox", "--to", recipient, "--json", "--data-dir", data])
            return try #require(
                outbox.output.split(whereSeparator: { !$0.isNumber }).first(where: { $0.count == 8 }).map(String.init),
                "\(outbox.output)")
        }
        try await procedure.requestRegistrationWithPuk(try code(to: user.phone))
        await #expect(throws: IdentityProcedureError.self) { try await procedure.confirmActivation(code: "00000000") }
        #expect(await procedure.state == .awaitingActivation)
        try await procedure.confirmActivation(code: try code(to: user.email))
        #expect(await procedure.state == .unlocked)
        #expect(identity.state == .ready)
        #expect(try vault.stored() == .pinless)
        let account = try await AccountDataClient(identityClient: identity, cache: .temporaryAnonymousCache())
            .accountData()
        #expect(account.value.name == "Alex")
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
