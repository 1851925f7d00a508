import Crypto
import Foundation
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real `horizon-server` killed (SIGKILL, `HORIZON_SERVER_CRASH=before-commit`) between the
/// card processor's charge and the ledger's commit of a card payment; restarted, it lets nobody
/// but the charged wallet's own retry have that charge.
@Suite("A server killed between a card's charge and its commit", .serialized)
struct CardCrashProcessTests {
    /// Starts `horizon-server serve` on `data` with `environment`; the process and its port.
    static func serve(_ data: String, environment: [String: String] = [:]) throws -> (ServerProcess, Int) {
        let server = try ServerProcess(
            ["serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "warning"],
            environment: environment)
        let prefix = "listening on http://127.0.0.1:"
        guard let line = server.waitForOutput(prefix: prefix, timeout: 30),
            let port = Int(line.dropFirst(prefix.count))
        else {
            server.kill()
            throw RawHTTP.Failure(description: "horizon-server did not listen: \(server.errors)")
        }
        return (server, port)
    }

    /// The till's signed `POST /v1/payments` of `confirm` to the server process at `port`.
    static func submit(_ confirm: Confirm, till: TerminalKey, port: Int) async throws -> RawHTTP.Response {
        let body = try SubmissionFields(payment: confirm).json()
        let authorization = try till.authorization(
            method: "POST", path: "/v1/payments", body: body, time: Int64(Date().timeIntervalSince1970))
        let request =
            "POST /v1/payments HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Authorization: \(authorization)\r\n\r\n\(body)"
        return try await RawHTTP.exchange(port: port, Array(request.utf8))
    }

    @Test func anotherWalletCannotTakeTheChargeAndTheOwnersRetryIsApprovedOnce() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        let initialised = try ServerProcess.run(["init", "--data-dir", data])
        #expect(initialised.status == 0, "\(initialised.errors)")

        // The shop, two wallets and their cards, written to the server's database directly.
        let ledger = try await Ledger.sqlite(path: data + "/horizon.sqlite")
        let merchant = try await ledger.createMerchant(
            name: "Corner Café", currency: .eur, adminEmail: "o@cafe.example")
        let till = TerminalKey()
        let tillKey = try PublicKeyBytes(bytes: Array(till.key.publicKey.x963Representation))
        _ = try await ledger.activateTerminal(
            merchant: merchant.id, label: "Till 1", publicKey: tillKey,
            keyID: Array(SHA256.hash(data: till.key.publicKey.x963Representation).prefix(8)),
            credentialExpiresAt: Int64(Date().timeIntervalSince1970) + 86_400)
        let sandboxProcessor = SandboxCardProcessor(ledger: ledger)
        func customer(_ name: String, _ number: String) async throws -> CardPaymentTests.Shop {
            let wallet = WalletDevice()
            let walletID = try await ledger.createWallet(name: name, publicKey: wallet.publicKeyBytes).id
            try await ledger.deposit(try Money(minorUnits: 50_00, currency: .eur), to: walletID)
            let token = try await sandboxProcessor.tokenize(
                CardDetails(
                    number: number, expiryMonth: 12, expiryYear: 2040, cvc: "123", cardholder: name,
                    brand: number.hasPrefix("4") ? .visa : .mastercard), at: Ledger.now())
            _ = try await ledger.addPaymentCard(
                NewPaymentCard(
                    token: token.token, brand: number.hasPrefix("4") ? .visa : .mastercard,
                    lastFour: String(number.suffix(4)), expiryMonth: 12, expiryYear: 2040, cardholder: name),
                to: walletID)
            let server = try await TestServer()
            return CardPaymentTests.Shop(
                server: server, merchant: merchant, till: till, wallet: wallet, walletID: walletID)
        }
        let alice = try await customer("Alice", "4242424242424242")
        let bob = try await customer("Bob", "5555555555554444")
        let aliceCard = try #require(try await ledger.paymentCards(of: alice.walletID).first).id
        let bobsCard = try #require(try await ledger.paymentCards(of: bob.walletID).first).id
        func charges(_ id: PaymentID) async throws -> Int64 {
            try await ledger.store.transaction { db in
                try await db.query(
                    "SELECT COUNT(*) AS n FROM sandbox_card_charges WHERE idempotency_key = ? AND outcome = 'charged'",
                    [.text(id.bytes.hexString)]
                ).first?.integer("n") ?? -1
            }
        }

        // Alice pays with her card; the server is killed inside the ledger's transaction, after
        // the processor charged her card.
        let paid = try alice.confirm(.card(id: aliceCard.rawValue))
        let (crashing, crashingPort) = try Self.serve(data, environment: ["HORIZON_SERVER_CRASH": "before-commit"])
        defer { crashing.kill() }
        _ = try? await Self.submit(paid, till: till, port: crashingPort)
        #expect(crashing.wait(timeout: 10) == SIGKILL, "\(crashing.errors)")
        #expect(crashing.errors.contains("crash injection: horizon-server killed before committing"))
        #expect(try await charges(paid.paymentID) == 1)
        #expect(try await ledger.executionCount(of: paid.paymentID) == 0)

        // Restarted: Bob's Confirm with that payment id, his own card, the same amount: 409,
        // nothing charged to him, nothing executed.
        let (server, port) = try Self.serve(data)
        defer { server.kill() }
        let stolen = try bob.confirm(.card(id: bobsCard.rawValue), paymentID: paid.paymentID)
        let refused = try await Self.submit(stolen, till: till, port: port)
        #expect(refused.status == 409 && refused.body.contains("payment_conflict"), "\(refused.body)")
        #expect(try await ledger.executionCount(of: paid.paymentID) == 0)
        #expect(try await charges(paid.paymentID) == 1)
        #expect(try await ledger.balance(of: merchant.id).minorUnits == 0)

        // Alice's retry: approved, with the one charge.
        let retried = try await Self.submit(paid, till: till, port: port)
        #expect(retried.status == 200 && retried.body.contains("\"approved\""), "\(retried.body)")
        #expect(try await charges(paid.paymentID) == 1)
        #expect(try await ledger.executionCount(of: paid.paymentID) == 1)
        #expect(try await ledger.balance(of: merchant.id).minorUnits == 14_00)
        #expect(try await LedgerAudit.violations(in: ledger.store).isEmpty)
        server.signal(SIGTERM)
        _ = server.wait(timeout: 10)
        await ledger.close()
    }
}
