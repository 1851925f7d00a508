import Foundation
import HorizonCore
import HorizonLedger
import HorizonTestSupport
import Testing

/// The store on a primary and a synchronous standby (one URL naming both): the primary dies while
/// the store's connections sit idle, so no failing query tells the store; the standby is promoted.
/// The next write reaches the promoted standby within seconds (the store asks the host once a
/// transaction has waited a second for a connection, instead of waiting out its 10 s connection
/// timeout), and what was committed before the kill is there.
@Suite("PostgreSQL failover in the store", .serialized, .offTheCooperativePool)
struct PostgresFailoverTests {
    @Test(.enabled(if: ThrowawayPostgres.available, "needs PostgreSQL (Tools/test.sh installs it)"))
    func anIdleStoreFollowsThePromotedStandbyWithinSeconds() async throws {
        let pair = try ReplicatedPostgres.start()
        defer { pair.remove() }
        let ledger = try await Ledger.postgres(url: pair.url)
        _ = try await ledger.createMerchant(name: "Before", currency: .eur, adminEmail: "before@failover.example")

        try pair.killPrimary()
        try pair.promoteStandby()
        let started = ContinuousClock.now
        var written = false
        for _ in 0..<40 where !written {
            do {
                _ = try await ledger.createMerchant(
                    name: "After", currency: .eur, adminEmail: "after@failover.example")
                written = true
            } catch {
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        #expect(written)
        // Well under the 10 s the store would wait for a connection to the dead host.
        #expect(ContinuousClock.now - started < .seconds(7))
        // Committed before the kill: the synchronous standby had it.
        #expect(try await ledger.merchant(adminEmail: "before@failover.example") != nil)
        await ledger.close()
    }
}

/// A throw-away primary and synchronous standby of a test's own (Tools/lib/postgres.sh's
/// `postgres_start_replicated_pair`), which the test can kill and promote.
final class ReplicatedPostgres: Sendable {
    let directory: String
    let owner: String
    let url: String

    private init(directory: String, owner: String, url: String) {
        self.directory = directory
        self.owner = owner
        self.url = url
    }

    static func start() throws -> ReplicatedPostgres {
        // Even numbers: the standby's socket takes the next one. Away from ThrowawayPostgres's range.
        let port = 59_100 + 2 * Int.random(in: 0..<400)
        let output = try ThrowawayPostgres.shell(
            """
            source Tools/lib/setup.sh; source Tools/lib/postgres.sh
            HORIZON_PG_PAIR_PORT=\(port) postgres_start_replicated_pair 2>/dev/null
            trap - EXIT
            printf '%s\\n%s\\n%s\\n' "$HORIZON_PG_PAIR_DIR" "${HORIZON_PG_OWNER:-}" "$HORIZON_FAILOVER_URL"
            """)
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count >= 3, !lines[0].isEmpty, !lines[2].isEmpty else {
            throw ThrowawayPostgres.ShellError(description: "no pair: \(output)")
        }
        return ReplicatedPostgres(directory: lines[0], owner: lines[1], url: lines[2])
    }

    private var environment: String {
        """
        source Tools/lib/setup.sh; source Tools/lib/postgres.sh
        export HORIZON_PG_PAIR_DIR='\(directory)' HORIZON_PG_OWNER='\(owner)'
        export HORIZON_PG_PRIMARY_DATA='\(directory)/primary' HORIZON_PG_STANDBY_DATA='\(directory)/standby'

        """
    }

    func killPrimary() throws { try ThrowawayPostgres.shell(environment + "postgres_kill_primary") }

    func promoteStandby() throws { try ThrowawayPostgres.shell(environment + "postgres_promote_standby") }

    func remove() { _ = try? ThrowawayPostgres.shell(environment + "postgres_stop_replicated_pair") }
}
