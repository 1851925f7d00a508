import Foundation
import HTTPTypes
import HorizonLedger
import HorizonServer
import HorizonTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// What an operator reads in the server's log and scrapes from its metrics: every line a request
/// causes names the request and its client; every refusal is a notice with its code; `/metrics`
/// has the process's own figures.
@Suite("Logs and metrics for the operator")
struct OperatorLogTests {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    /// The lines a request caused (Hummingbird marks them), by its internal id.
    static func byRequest(_ recorder: LogRecorder) -> [String: [LogRecorder.Line]] {
        Dictionary(grouping: recorder.all.filter { $0.metadata["hb.request.id"] != nil }) {
            $0.metadata["hb.request.id"] ?? ""
        }
    }

    @Test func everyLineOfARequestCarriesItsIDAndItsClient() async throws {
        let recorder = LogRecorder()
        let ids = try await RequestLimitTests.live(
            trustedProxies: ["127.0.0.1"], burst: 100, logger: recorder.logger(level: .trace)
        ) { server, client in
            try await server.addMerchant()
            let headers: HTTPFields = [Self.forwardedFor: "198.51.100.7"]
            // An activation logs in the handler and at the boundary; a refused one at the boundary.
            let activated = try await client.send(
                .post, "/v1/terminals/activate", json: TerminalKey().activation(), headers: headers)
            #expect(activated.status == .created)
            let refused = try await client.send(
                .post, "/v1/terminals/activate", json: TerminalKey().activation(password: "wrong password!"),
                headers: headers)
            #expect(refused.status == .unauthorized)
            return [try #require(activated.headers[.requestID]), try #require(refused.headers[.requestID])]
        }
        let requests = Self.byRequest(recorder)
        #expect(requests.count == 2, "\(recorder.all.map(\.message))")
        for (_, lines) in requests {
            let id = try #require(lines.first?.metadata["request"], "\(lines.map(\.message))")
            #expect(ids.contains(id))
            for line in lines {
                #expect(line.metadata["request"] == id, "\(line.message) \(line.metadata)")
                #expect(line.metadata["client"] == "198.51.100.7", "\(line.message) \(line.metadata)")
            }
        }
        let activation = try #require(requests.values.first { $0.contains { $0.message == "terminal activated" } })
        #expect(activation.contains { $0.message == "POST /v1/terminals/activate 201" })
        #expect(activation.first?.metadata["request"] == ids[0])
    }

    /// A wallet's request inside the gateway's logs as the gateway's request: its id (the one in
    /// the terminal's `X-Request-Id`) and the terminal's address, not an id nobody outside sees.
    @Test func aRelayedRequestsLinesCarryTheGatewayRequestsIDAndClient() async throws {
        let scene = try await GatewayTests.Scene.make()
        try await scene.withLiveServer { url in
            let wallet = try await scene.relayedWallet(url)
            _ = try await wallet.setWalletAccount(name: "Ada")
        }
        let lines = scene.recorder.all
        let renamed = try #require(lines.first { $0.message == "wallet renamed" })
        let outer = lines.filter {
            $0.message == "POST /v1/gateway 200" && $0.metadata["hb.request.id"] == renamed.metadata["hb.request.id"]
        }
        #expect(outer.count == 1, "\(lines.map(\.message))")
        #expect(renamed.metadata["request"] != nil)
        #expect(renamed.metadata["request"] == outer.first?.metadata["request"], "\(renamed.metadata)")
        #expect(renamed.metadata["client"] == "127.0.0.1", "\(renamed.metadata)")
    }

    /// Each kind of refusal is one notice line with its code, and no secret in it.
    @Test func refusalsAreNoticesWithTheirCode() async throws {
        let recorder = LogRecorder()
        let server = try await TestServer(configuration: .testing(rateLimitBurst: 12, rateLimitPerSecond: 0.001))
        try await server.addMerchant()
        let till = TerminalKey()
        let revoked = try await server.activate(till)
        try await server.ledger.revokeTerminal(TerminalID(rawValue: revoked.terminalId))
        let application = Application(
            router: try HorizonServer.router(server.parts()), logger: recorder.logger(level: .notice))
        let secret = "not-the-password-\(UUID().uuidString)"
        let codes = try await application.test(.router) { client in
            func notices(_ response: @autoclosure () async throws -> TestResponse) async throws -> [String] {
                let before = recorder.all.count
                _ = try await response()
                return recorder.all.dropFirst(before).filter { $0.level == .notice }.map {
                    "\($0.message) \($0.metadata["code"] ?? "-")"
                }
            }
            let renewal = try signedAuthorization(
                till.key, method: .post, path: "/v1/terminals/credential", body: nil, time: server.clock.now)
            func session(_ password: String) -> String { RequestLimitTests.session(TestServer.email, password) }
            let browser = DashboardBrowser(client)
            return [
                try await notices(try await client.send(.post, "/v1/terminals/credential")),
                try await notices(
                    try await client.send(.post, "/v1/terminals/credential", headers: [.authorization: renewal])),
                try await notices(try await client.send(.post, "/v1/terminals/activate", json: till.activation())),
                try await notices(try await client.send(.post, "/v1/merchant/sessions", json: session(secret))),
                try await notices(try await client.send(.post, "/v1/merchant/sessions", json: session(secret))),
                // The third wrong password starts the back-off.
                try await notices(try await client.send(.post, "/v1/merchant/sessions", json: session(secret))),
                try await notices(try await browser.post("/dashboard/sign-in", ["email": "a@b.example"])),
                try await notices(try await browser.signIn(password: secret).response),
                // Requests until this address is over the request limit: only that one is a notice.
                try await {
                    for _ in 0..<20 {
                        let lines = try await notices(try await client.send(.get, "/v1/anchor"))
                        if !lines.isEmpty { return lines }
                    }
                    return []
                }(),
            ]
        }
        let signIn = "/v1/merchant/sessions"
        #expect(
            codes == [
                ["POST /v1/terminals/credential 401 unauthenticated"],
                ["POST /v1/terminals/credential 403 terminal_revoked"],
                ["POST /v1/terminals/activate 409 already_exists"],
                ["POST \(signIn) 401 invalid_credentials"],
                ["POST \(signIn) 401 invalid_credentials"],
                ["POST \(signIn) 429 account_locked"],
                ["POST /dashboard/sign-in 403 csrf_invalid"],
                ["POST /dashboard/sign-in 429 account_locked"],
                ["GET /v1/anchor 429 rate_limited"],
            ], "\(codes)")
        for line in recorder.all {
            let text = ([line.message] + line.metadata.map { "\($0.key)=\($0.value)" }).joined(separator: " ")
            #expect(!text.contains(secret), "\(text)")
        }
    }

    // MARK: Metrics

    /// Prometheus's standard process figures, plausible for this very process.
    @Test func metricsHaveTheProcesssOwnFigures() async throws {
        let server = try await TestServer()
        let text = try await server.scrapeMetrics()
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
        }
        #expect(text.contains("# TYPE process_cpu_seconds_total counter"), "\(text)")
        #expect(text.contains("# TYPE process_resident_memory_bytes gauge"))
        #expect((values["process_resident_memory_bytes"] ?? 0) > 1_000_000, "\(text)")
        #expect((values["process_virtual_memory_bytes"] ?? 0) >= (values["process_resident_memory_bytes"] ?? 0))
        #expect((values["process_open_fds"] ?? 0) > 0)
        #expect((values["process_max_fds"] ?? 0) >= (values["process_open_fds"] ?? 0))
        #expect((values["process_threads"] ?? 0) >= 1)
        #expect((values["process_cpu_seconds_total"] ?? -1) > 0)
        let start = try #require(values["process_start_time_seconds"])
        let now = Date().timeIntervalSince1970
        // Started before now, and not before this test run began (the tests take far less than a day).
        #expect(start <= now + 1 && start > now - 86_400, "\(start) vs \(now)")
    }

    @Test func processFiguresAreReadFromProcsTexts() throws {
        // A command name with spaces and a parenthesis, as the kernel writes it.
        let stat =
            "4242 (horizon (x) srv) S 1 4242 4242 0 -1 4194560 2000 0 0 0 250 150 0 0 20 0 7 0 1000 2147483648 5000 18446744073709551615"
        let status = "Name:\thorizon\nVmRSS:\t   20480 kB\nThreads:\t7\n"
        let sample = try #require(
            ProcessMetrics.parse(
                stat: stat, status: status, systemStat: "cpu 1 2 3\nbtime 1700000000\n", ticksPerSecond: 100))
        #expect(sample.cpuSeconds == 4)
        #expect(sample.threads == 7)
        #expect(sample.residentBytes == 20_971_520)
        #expect(sample.virtualBytes == 2_147_483_648)
        #expect(sample.startTimeSeconds == 1_700_000_010)
        #expect(
            ProcessMetrics.parse(stat: "garbage", status: status, systemStat: "btime 1", ticksPerSecond: 100) == nil)
    }
}
