import Foundation
import HTTPTypes
import HorizonAPI
import HorizonLedger
import HorizonServer
import HummingbirdTesting
import Testing

@Suite("Rate limit")
struct RateLimitTests {
    @Test func theRequestAfterTheBurstIsRefusedUntilTheNextWindow() async throws {
        // 3 requests per window of 3 s (burst / rate), counted in the database on the server's clock.
        let server = try await TestServer(configuration: .testing(rateLimitBurst: 3, rateLimitPerSecond: 1))
        try await server.addMerchant()
        try await server.withClient { client in
            let wait = 3 - server.clock.now % 3
            for _ in 1...3 { #expect(try await client.send(.get, "/v1/anchor").status == .ok) }
            let before = try await server.state()
            // Refused before anything else is looked at: an activation does nothing.
            let refused = try await client.send(.post, "/v1/terminals/activate", json: TerminalKey().activation())
            try expectError(
                refused, .tooManyRequests, "rate_limited", "too many requests from local; retry after \(wait) s")
            #expect(refused.headers[.retryAfter] == "\(wait)")
            #expect(try await server.state() == before)
            // Until the window ends there is still no room; then there is.
            server.clock.advance(wait - 1)
            try expectError(
                try await client.send(.get, "/v1/anchor"), .tooManyRequests, "rate_limited", "retry after 1 s")
            server.clock.advance(1)
            let allowed = try await client.send(.post, "/v1/terminals/activate", json: TerminalKey().activation())
            #expect(allowed.status == .created, "\(allowed.text)")
        }
    }

    @Test func theProbesAreNotLimited() async throws {
        let server = try await TestServer(configuration: .testing(rateLimitBurst: 1, rateLimitPerSecond: 0.01))
        try await server.withClient { client in
            #expect(try await client.send(.get, "/v1/anchor").status == .ok)
            for _ in 0..<5 {
                #expect(try await client.send(.get, "/health").status == .ok)
                #expect(try await client.send(.get, "/ready").status == .ok)
            }
            try expectError(try await client.send(.get, "/v1/anchor"), .tooManyRequests, "rate_limited", "retry after")
        }
    }

    @Test func unknownPathsCountToo() async throws {
        let server = try await TestServer(configuration: .testing(rateLimitBurst: 2, rateLimitPerSecond: 0.5))
        try await server.withClient { client in
            let wait = 4 - server.clock.now % 4
            try expectError(try await client.send(.get, "/v1/a"), .notFound, "not_found", "there is no /v1/a")
            try expectError(try await client.send(.get, "/v1/b"), .notFound, "not_found", "there is no /v1/b")
            let refused = try await client.send(.get, "/v1/anchor")
            try expectError(refused, .tooManyRequests, "rate_limited", "retry after \(wait) s")
            #expect(refused.headers[.retryAfter] == "\(wait)")
        }
    }
}

@Suite("Health, readiness and metrics")
struct OperationsTests {
    @Test func healthAndReadiness() async throws {
        let server = try await TestServer()
        try await server.withClient { client in
            let health = try await client.send(.get, "/health")
            #expect(health.status == .ok)
            #expect(try JSONDecoder().decode(Components.Schemas.Health.self, from: health.data).status == .ok)
            let ready = try await client.send(.get, "/ready")
            #expect(ready.status == .ok)
            let readiness = try JSONDecoder().decode(Components.Schemas.Readiness.self, from: ready.data)
            #expect(readiness.status == .ready)
            #expect(readiness.schemaVersion == Int64(LedgerSchema.currentVersion))
        }
    }

    @Test func aDatabaseThatIsDownIsUnavailableUntilItIsBack() async throws {
        let store = Store()
        let server = try await TestServer { path in
            let outage = try OutageStore(path: path)
            store.outage = outage
            return outage
        }
        try await server.addMerchant()
        let outage = try #require(store.outage)
        let key = TerminalKey()
        try await server.withClient { client in
            outage.isDown = true
            // Liveness does not depend on the database.
            #expect(try await client.send(.get, "/health").status == .ok)
            try expectError(
                try await client.send(.get, "/ready"), .serviceUnavailable, "database_unavailable",
                "the database cannot be reached; retry shortly")
            for response in [
                try await client.send(.get, "/v1/revocations"),
                try await client.send(.post, "/v1/terminals/activate", json: key.activation()),
                try await client.send(
                    .post, "/v1/terminals/credential",
                    headers: [
                        .authorization: try key.authorization(
                            method: "POST", path: "/v1/terminals/credential", time: server.clock.now)
                    ]),
            ] {
                try expectError(
                    response, .serviceUnavailable, "database_unavailable",
                    "the server's database is unavailable; retry shortly with the same request (one that carries an id, such as a payment or a refund, takes effect once)"
                )
                #expect(response.headers[.retryAfter] == "1")
            }

            // Back up: ready again, and the same activation now works.
            outage.isDown = false
            #expect(try await server.state().terminals.isEmpty)
            #expect(try await client.send(.get, "/ready").status == .ok)
            let activated = try await client.send(.post, "/v1/terminals/activate", json: key.activation())
            #expect(activated.status == .created, "\(activated.text)")
        }
    }

    final class Store: @unchecked Sendable {
        var outage: OutageStore?
    }

    @Test func metricsCountRequestsByRouteAndCollapseUnknownPaths() async throws {
        let server = try await TestServer()
        let text = try await server.withClient { client in
            _ = try await client.send(.get, "/v1/anchor")
            _ = try await client.send(.get, "/v1/anchor")
            _ = try await client.send(.get, "/v1/random-\(UUID().uuidString)")
            _ = try await client.send(.get, "/wp-admin/setup.php")
            _ = try await client.send(.delete, "/v1/anchor")
            _ = try await client.send(.post, "/v1/terminals/credential")
            #expect(try await client.send(.get, "/metrics").status == .notFound, "metrics are not on the API's port")
            return try await server.scrapeMetrics()
        }
        let lines = text.split(separator: "\n").map(String.init)
        func value(_ labels: String) -> String? {
            lines.first { $0.hasPrefix("horizon_http_requests_total{\(labels)}") }?.split(separator: " ").last.map(
                String.init)
        }
        #expect(lines.contains("# TYPE horizon_http_requests_total counter"), "\(text)")
        #expect(value(#"method="GET",route="/v1/anchor",status="200""#) == "2", "\(text)")
        #expect(value(#"method="GET",route="unmatched",status="404""#) == "3", "\(text)")
        #expect(value(#"method="DELETE",route="unmatched",status="405""#) == "1", "\(text)")
        #expect(value(#"method="POST",route="/v1/terminals/credential",status="401""#) == "1", "\(text)")
        #expect(!text.contains("random-") && !text.contains("wp-admin"))
        #expect(text.contains(#"horizon_api_errors_total{code="not_found"} 3"#), "\(text)")
        #expect(text.contains(#"horizon_http_request_duration_seconds_bucket{method="GET",route="/v1/anchor""#))
    }

    /// The dashboard's router runs inside a middleware; its pages are still counted by route, with
    /// ids collapsed, and its unknown paths still share `unmatched`.
    @Test func metricsLabelTheDashboardsPagesByRoute() async throws {
        let server = try await TestServer()
        let text = try await server.withClient { client in
            _ = try await client.send(.get, "/dashboard/sign-in")
            _ = try await client.send(.get, "/dashboard/transactions")
            _ = try await client.send(.post, "/dashboard/transactions/\(UUID().uuidString)/refund")
            _ = try await client.send(.get, "/dashboard/no-such-page-\(UUID().uuidString)")
            return try await server.scrapeMetrics()
        }
        let counted = text.split(separator: "\n").filter { $0.hasPrefix("horizon_http_requests_total{") }
        func count(_ labels: String) -> Int {
            counted.filter { $0.contains(labels) }.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }
                .reduce(0, +)
        }
        #expect(count(#"method="GET",route="/dashboard/sign-in",status="200""#) == 1, "\(text)")
        #expect(count(#"method="GET",route="/dashboard/transactions","#) == 1, "\(text)")
        #expect(count(#"method="POST",route="/dashboard/transactions/{reference}/refund","#) == 1, "\(text)")
        #expect(count(#"method="GET",route="unmatched",status="404""#) == 1, "\(text)")
        #expect(!text.contains("no-such-page"))
    }
}
