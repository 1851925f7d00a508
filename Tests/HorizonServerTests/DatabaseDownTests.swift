import Crypto
import Foundation
import HTTPTypes
import HorizonAPI
import HorizonCore
import HorizonLedger
import HorizonProtocol
import HorizonServer
import HorizonTestSupport
import HummingbirdTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 14, "Bad input": a database that is down during a request (a store that fails as an
/// unreachable PostgreSQL does), for the settlement operations.
@Suite("Database down during a request")
struct DatabaseDownDuringRequestTests {
    @Test func aPaymentWhileTheDatabaseIsDownIsUnavailableAndGoesThroughOnceItIsBack() async throws {
        let holder = OperationsTests.Store()
        let server = try await TestServer { path in
            let outage = try OutageStore(path: path)
            holder.outage = outage
            return outage
        }
        let merchant = try await server.addMerchant()
        let outage = try #require(holder.outage)
        let till = TerminalKey()
        _ = try await server.activate(till)
        let wallet = P256.Signing.PrivateKey()
        let walletID = try await server.ledger.createWallet(
            name: "Alex", publicKey: try PublicKeyBytes(bytes: Array(wallet.publicKey.x963Representation))
        ).id
        try await server.ledger.deposit(try Money(minorUnits: 50_00, currency: .eur), to: walletID)
        let confirm = try WalletSigned.confirm(by: wallet, for: till.key.publicKey, amount: 10_00, tip: 50)
        let body = try SubmissionFields(payment: confirm).json()
        try await server.withClient { client in
            outage.isDown = true
            for path in ["/v1/payments", "/v1/redemptions"] {
                let json =
                    path == "/v1/payments"
                    ? body
                    : try SubmissionFields(
                        redemption: try WalletSigned.redeem(by: wallet, for: till.key.publicKey, points: 1)
                    ).json()
                let response = try await client.sendSigned(.post, path, json: json, by: till.key, time: server.clock.now)
                try expectError(
                    response, .serviceUnavailable, "database_unavailable",
                    "the server's database is unavailable; nothing was changed, retry shortly")
                #expect(response.headers[.retryAfter] == "1")
            }
            let lookup = try await client.sendSigned(
                .get, "/v1/payments/\(confirm.paymentID.bytes.hexString)", by: till.key, time: server.clock.now)
            try expectError(lookup, .serviceUnavailable, "database_unavailable", "retry shortly")

            // Back: the till's retry (signed anew, as its client does) executes the payment, once.
            outage.isDown = false
            #expect(try await server.ledger.transaction(for: confirm.paymentID) == nil)
            #expect(try await server.ledger.balance(of: walletID, in: .eur).minorUnits == 50_00)
            let retried = try await client.sendSigned(.post, "/v1/payments", json: body, by: till.key, time: server.clock.now)
            #expect(retried.status == .ok, "\(retried.text)")
            #expect(try await server.ledger.executionCount(of: confirm.paymentID) == 1)
            #expect(try await server.ledger.balance(of: walletID, in: .eur).minorUnits == 50_00 - 10_50)
            #expect(try await server.ledger.balance(of: merchant.id).minorUnits == 10_50)
        }
    }
}

/// Issue 14, "Bad input": a database that is down when `horizon-server serve` starts: a clear
/// error and exit status 1 (systemd's `Restart=on-failure` starts it again; 2 would stop that),
/// no crash, and it serves once the database is there.
@Suite("Database down at start", .serialized, .offTheCooperativePool)
struct DatabaseDownAtStartTests {
    /// Runs `serve` and expects it to exit 1 by itself with `message` on standard error.
    func expectServeFails(_ arguments: [String], _ messages: [String], sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let started = Date()
        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0"] + arguments)
        defer { server.kill() }
        let status = server.wait(timeout: 60)
        #expect(status == 1, "exit: \(String(describing: status)); \(server.errors)", sourceLocation: sourceLocation)
        #expect(server.process.terminationReason == .exit, "it crashed: \(server.errors)", sourceLocation: sourceLocation)
        #expect(Date().timeIntervalSince(started) < 45, sourceLocation: sourceLocation)
        #expect(!server.output.contains("listening on"), sourceLocation: sourceLocation)
        for message in messages {
            #expect(server.errors.contains(message), "\(server.errors)", sourceLocation: sourceLocation)
        }
        #expect(!server.errors.contains("Fatal error"), sourceLocation: sourceLocation)
    }

    /// Runs `serve` until it listens and /ready answers 200, then stops it with SIGTERM.
    func expectServes(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0"] + arguments)
        defer { server.kill() }
        let line = try #require(
            server.waitForOutput(prefix: "listening on http://127.0.0.1:", timeout: 30), "\(server.errors)",
            sourceLocation: sourceLocation)
        let port = try #require(Int(line.dropFirst("listening on http://127.0.0.1:".count)), sourceLocation: sourceLocation)
        let ready = try await RawHTTP.get(port: port, "/ready")
        #expect(ready.status == 200, "\(ready.body)", sourceLocation: sourceLocation)
        server.signal(SIGTERM)
        #expect(server.wait(timeout: 10) == 0, "\(server.errors)", sourceLocation: sourceLocation)
    }

    @Test func anSQLiteFileThatCannotBeOpenedThenCan() async throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        // The database's folder is a file: nothing can open the database there.
        let blocked = sandbox.path("blocked")
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: blocked))
        let database = "sqlite:\(blocked)/ledger.sqlite"
        try expectServeFails(["--data-dir", data, "--database", database], ["error: ", "\(blocked)/ledger.sqlite"])
        // The folder is there now: the same command serves (what systemd's restart does).
        try FileManager.default.removeItem(atPath: blocked)
        try FileManager.default.createDirectory(atPath: blocked, withIntermediateDirectories: false)
        try await expectServes(["--data-dir", data, "--database", database])
    }

    @Test func aPostgreSQLThatDoesNotAnswer() throws {
        let sandbox = try ServerSandbox()
        let data = sandbox.path("server")
        #expect(try ServerProcess.run(["init", "--data-dir", data]).status == 0)
        // Nothing listens on port 1: the connection is refused at once.
        try expectServeFails(
            ["--data-dir", data, "--database", "postgres://horizon@127.0.0.1:1/horizon"],
            ["error: ", "the database cannot be reached", "127.0.0.1", "check that it is running and retry"])
    }
}
