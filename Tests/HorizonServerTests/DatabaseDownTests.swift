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

/// Bad input: a database that is down during a request (a store that fails as an
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
        let funded = try await server.fundedWallet(50_00)
        let (wallet, walletID) = (funded.key, funded.id)
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
                let response = try await client.sendSigned(
                    .post, path, json: json, by: till.key, time: server.clock.now)
                try expectError(
                    response, .serviceUnavailable, "database_unavailable",
                    "the server's database is unavailable; retry shortly with the same request (one that carries an id, such as a payment or a refund, takes effect once)"
                )
                #expect(response.headers[.retryAfter] == "1")
            }
            let lookup = try await client.sendSigned(
                .get, "/v1/payments/\(confirm.paymentID.bytes.hexString)", by: till.key, time: server.clock.now)
            try expectError(lookup, .serviceUnavailable, "database_unavailable", "retry shortly")

            // Back: the till's retry (signed anew, as its client does) executes the payment, once.
            outage.isDown = false
            #expect(try await server.ledger.transaction(for: confirm.paymentID) == nil)
            #expect(try await server.ledger.balance(of: walletID, in: .eur).minorUnits == 50_00)
            let retried = try await client.sendSigned(
                .post, "/v1/payments", json: body, by: till.key, time: server.clock.now)
            #expect(retried.status == .ok, "\(retried.text)")
            #expect(try await server.ledger.executionCount(of: confirm.paymentID) == 1)
            #expect(try await server.ledger.balance(of: walletID, in: .eur).minorUnits == 50_00 - 10_50)
            #expect(try await server.ledger.balance(of: merchant.id).minorUnits == 10_50)
        }
    }
}

/// Bad input: a database that is down when `horizon-server serve` starts: a clear
/// error and exit status 1 (systemd's `Restart=on-failure` starts it again; 2 would stop that),
/// no crash, and it serves once the database is there.
@Suite("Database down at start", .serialized, .offTheCooperativePool)
struct DatabaseDownAtStartTests {
    /// Runs `serve` and expects it to exit 1 by itself with `message` on standard error.
    func expectServeFails(
        _ arguments: [String], _ messages: [String], sourceLocation: SourceLocation = #_sourceLocation
    )
        throws
    {
        let started = Date()
        let server = try ServerProcess(["serve", "--listen", "127.0.0.1:0"] + arguments)
        defer { server.kill() }
        let status = server.wait(timeout: 60)
        #expect(status == 1, "exit: \(String(describing: status)); \(server.errors)", sourceLocation: sourceLocation)
        #expect(
            server.process.terminationReason == .exit, "it crashed: \(server.errors)", sourceLocation: sourceLocation)
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
        let port = try #require(
            Int(line.dropFirst("listening on http://127.0.0.1:".count)), sourceLocation: sourceLocation)
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

/// A real PostgreSQL stopped under a running server and started again.
@Suite("PostgreSQL down and back", .serialized, .offTheCooperativePool)
struct PostgresDownTests {
    @Test(.enabled(if: ThrowawayPostgres.available, "needs PostgreSQL (Tools/test.sh installs it)"))
    func stoppedUnderARunningServerAndStartedAgain() async throws {
        let postgres = try ThrowawayPostgres.start()
        defer { postgres.remove() }
        let server = try await TestServer(store: { _ in try PostgresLedgerStore(url: postgres.url) })
        let merchant = try await server.addMerchant()
        let till = TerminalKey()
        _ = try await server.activate(till)
        let funded = try await server.fundedWallet(50_00)
        let (wallet, walletID) = (funded.key, funded.id)
        let confirm = try WalletSigned.confirm(by: wallet, for: till.key.publicKey, amount: 10_00, tip: 0)
        let body = try SubmissionFields(payment: confirm).json()

        try postgres.stop()
        try await server.withClient { client in
            #expect(try await client.send(.get, "/health").status == .ok)
            let started = ContinuousClock.now
            try expectError(
                try await client.send(.get, "/ready"), .serviceUnavailable, "database_unavailable",
                "the database cannot be reached; retry shortly")
            let refused = try await client.sendSigned(
                .post, "/v1/payments", json: body, by: till.key, time: server.clock.now)
            try expectError(
                refused, .serviceUnavailable, "database_unavailable",
                "the server's database is unavailable; retry shortly with the same request (one that carries an id, such as a payment or a refund, takes effect once)"
            )
            #expect(refused.headers[.retryAfter] == "1")
            // A clear answer, not a hang: within the store's connection timeouts.
            #expect(ContinuousClock.now - started < .seconds(60))
        }

        try postgres.start()
        try await server.withClient { client in
            // The pool connects again by itself: ready, and the till's retry executes, once.
            var ready = try await client.send(.get, "/ready")
            for _ in 0..<50 where ready.status != .ok {
                try await Task.sleep(for: .milliseconds(200))
                ready = try await client.send(.get, "/ready")
            }
            #expect(ready.status == .ok, "\(ready.text)")
            let retried = try await client.sendSigned(
                .post, "/v1/payments", json: body, by: till.key, time: server.clock.now)
            #expect(retried.status == .ok, "\(retried.text)")
        }
        #expect(try await server.ledger.executionCount(of: confirm.paymentID) == 1)
        #expect(try await server.ledger.balance(of: walletID, in: .eur).minorUnits == 40_00)
        #expect(try await server.ledger.balance(of: merchant.id).minorUnits == 10_00)
        await server.ledger.close()
    }
}

/// A PostgreSQL cluster of a test's own (Tools/lib/postgres.sh's throw-away cluster on a private
/// socket), so the test can stop and start it without touching the one other tests share.
final class ThrowawayPostgres: Sendable {
    /// The test script provides its shared cluster only where PostgreSQL is installed.
    static var available: Bool { ProcessInfo.processInfo.environment["HORIZON_TEST_POSTGRES_URL"]?.isEmpty == false }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    let directory: String
    let owner: String
    let port: String
    let url: String

    private init(directory: String, owner: String, port: String, url: String) {
        self.directory = directory
        self.owner = owner
        self.port = port
        self.url = url
    }

    static func start() throws -> ThrowawayPostgres {
        let port = String(Int.random(in: 56_000...59_000))
        let output = try shell(
            """
            source Tools/lib/setup.sh; source Tools/lib/postgres.sh
            HORIZON_PG_PORT=\(port) postgres_start_throwaway 2>/dev/null
            trap - EXIT
            printf '%s\\n%s\\n%s\\n' "$HORIZON_PG_DIR" "${HORIZON_PG_OWNER:-}" "$HORIZON_TEST_POSTGRES_URL"
            """)
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count >= 3, !lines[0].isEmpty, !lines[2].isEmpty else {
            throw ShellError(description: "no cluster: \(output)")
        }
        return ThrowawayPostgres(directory: lines[0], owner: lines[1], port: port, url: lines[2])
    }

    private var environment: String {
        "source Tools/lib/setup.sh; source Tools/lib/postgres.sh; export HORIZON_PG_DIR='\(directory)' HORIZON_PG_OWNER='\(owner)'; bin=$(postgres_bin_dir);"
    }

    /// Stops the server at once, as a crash or a lost host would.
    func stop() throws {
        try Self.shell(
            environment + #" postgres_as_owner "$bin/pg_ctl" -D "$HORIZON_PG_DIR/data" -m immediate -w stop"#)
    }

    func start() throws {
        try Self.shell(
            environment
                + #" postgres_as_owner "$bin/pg_ctl" -D "$HORIZON_PG_DIR/data" -l "$HORIZON_PG_DIR/server.log" -w -t 60 -o "-c listen_addresses='' -c unix_socket_directories='$HORIZON_PG_DIR/socket' -c port=\#(port)" start"#
        )
    }

    func remove() { _ = try? Self.shell(environment + " postgres_stop_throwaway") }

    struct ShellError: Error, CustomStringConvertible {
        let description: String
    }

    @discardableResult
    static func shell(_ script: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        // Closes every inherited descriptor above 2 first: Foundation's Process learns of the
        // exit through one, and the postmaster pg_ctl leaves running would otherwise keep it
        // open, so the script would never count as finished.
        let closeInherited =
            #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done; "#
        process.arguments = ["-c", closeInherited + "set -e; " + script]
        process.currentDirectoryURL = repository
        // Into a file, not a pipe, for the same reason.
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("pg-shell-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let output = try FileHandle(forWritingTo: log)
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.runCheckingDescriptors()
        while process.isRunning { Thread.sleep(forTimeInterval: 0.02) }
        try output.close()
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else { throw ShellError(description: "\(script) failed: \(text)") }
        return text
    }
}
