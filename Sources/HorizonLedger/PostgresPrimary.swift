import Logging
import PostgresNIO
import Synchronization

/// The connection pool a `PostgresLedgerStore` runs its transactions on.
///
/// With one host that is one pool for the store's life. With several (a primary and its
/// standbys, `PostgresLocation.alternateEndpoints`) it is a pool on the host that accepts
/// writes, as libpq's `target_session_attrs=read-write` picks it: each host is asked in the order
/// given whether it is in recovery, and the first that is not is used. When a transaction on it
/// loses its connection or finds the database read-only (the primary died, or came back as a
/// standby), the pool is dropped and the next transaction looks again; so once the standby is
/// promoted the store writes to it without a restart.
final class PostgresPrimary: Sendable {
    struct Pool: Sendable {
        let client: PostgresClient
        let endpoint: PostgresLocation.Endpoint
        /// Counts the pools made, so that many transactions failing on one pool drop it once.
        let generation: Int
        let runner: Task<Void, Never>
    }

    private struct State {
        var pool: Pool?
        var search: Task<Pool?, Never>?
        var lastFailedSearch: ContinuousClock.Instant?
        var lastProblem = ""
        var generation = 0
        var closed = false
        /// Pools dropped but still running, so that leases waiting on them can be cancelled.
        var retired: [Task<Void, Never>] = []
        var verifying = false
        var lastVerified: ContinuousClock.Instant?
    }

    /// How soon after a search that found no primary another may start: while the hosts are
    /// down or none is promoted yet, requests fail at once instead of each probing every host.
    static let searchInterval: Duration = .milliseconds(250)
    /// A host that accepts the connection but does not answer counts as unreachable after this.
    static let probeTimeout: Duration = .seconds(5)
    /// How long a dropped pool keeps running: a request for one of its connections is only
    /// answered (cancelled) while it runs, and the transactions that asked give up on it at once.
    static let retirement: Duration = .seconds(30)

    let location: PostgresLocation
    private let maximumConnections: Int
    private let logger: Logger
    private let state: Mutex<State>

    /// Whether there are several hosts to choose from.
    var failsOver: Bool { !location.alternateEndpoints.isEmpty }

    init(location: PostgresLocation, maximumConnections: Int, logger: Logger) {
        self.location = location
        self.maximumConnections = maximumConnections
        self.logger = logger
        var initial = State()
        if location.alternateEndpoints.isEmpty {
            // One host: no question which; connected lazily by the first transaction.
            initial.generation = 1
            initial.pool = Self.makePool(
                location: location, endpoint: location.endpoint, maximumConnections: maximumConnections,
                generation: 1, logger: logger)
        }
        state = Mutex(initial)
    }

    private static func makePool(
        location: PostgresLocation, endpoint: PostgresLocation.Endpoint, maximumConnections: Int, generation: Int,
        logger: Logger
    ) -> Pool {
        var configuration = location.configuration(for: endpoint)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(5)
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        return Pool(client: client, endpoint: endpoint, generation: generation, runner: Task { await client.run() })
    }

    /// The pool to run a transaction on: the one in use, or the primary a search finds.
    func current() async throws(LedgerError) -> Pool {
        enum Next {
            case pool(Pool)
            case wait(Task<Pool?, Never>)
            case fail(String)
        }
        let next: Next = state.withLock { state in
            if let pool = state.pool { return .pool(pool) }
            if state.closed { return .fail("the ledger's PostgreSQL store is closed") }
            if let search = state.search { return .wait(search) }
            if let last = state.lastFailedSearch, ContinuousClock.now - last < Self.searchInterval {
                return .fail(state.lastProblem)
            }
            let search = Task { await self.findPrimary() }
            state.search = search
            return .wait(search)
        }
        switch next {
        case .pool(let pool): return pool
        case .fail(let problem): throw .unavailable(problem)
        case .wait(let search):
            if let pool = await search.value { return pool }
            throw .unavailable(state.withLock { $0.lastProblem })
        }
    }

    /// A transaction has waited a while for a connection of `pool`: the pool may be trying to
    /// reach a host that died while its connections were idle, which no failing query has told.
    /// Asks that host whether it still accepts writes (one question at a time, at most once a
    /// second) and drops the pool if it does not answer or is a standby now. A host that answers
    /// with an error of its own (too many connections, say) is alive and keeps its pool.
    func verify(_ pool: Pool) async {
        let due = state.withLock { state in
            guard state.pool?.generation == pool.generation, !state.verifying else { return false }
            if let last = state.lastVerified, ContinuousClock.now - last < .seconds(1) { return false }
            state.verifying = true
            state.lastVerified = .now
            return true
        }
        guard due else { return }
        let answer = await probe(pool.endpoint)
        state.withLock { $0.verifying = false }
        switch answer {
        case .primary, .failed(_, serverAnswered: true): break
        case .standby: lost(pool, because: "the host is a standby now")
        case .failed(let reason, serverAnswered: false): lost(pool, because: reason)
        }
    }

    /// Whether `pool` is still the one transactions use (a dropped one is not).
    func isCurrent(_ pool: Pool) -> Bool {
        state.withLock { $0.pool?.generation == pool.generation }
    }

    /// A transaction on `pool` lost its connection or found the host read-only: with several
    /// hosts the pool is dropped (transactions waiting for one of its connections give up,
    /// having sent nothing, see `isCurrent`) and the next transaction looks for the primary again.
    func lost(_ pool: Pool, because reason: String) {
        guard failsOver else { return }
        let dropped = state.withLock { state in
            guard state.pool?.generation == pool.generation else { return false }
            state.pool = nil
            state.retired.append(pool.runner)
            return true
        }
        guard dropped else { return }
        logger.warning(
            "lost the PostgreSQL primary; looking for the host that accepts writes",
            metadata: ["endpoint": "\(pool.endpoint)", "reason": "\(reason)"])
        Task {
            try? await Task.sleep(for: Self.retirement)
            pool.runner.cancel()
            state.withLock { state in state.retired.removeAll { $0 == pool.runner } }
        }
    }

    func close() async {
        let (pool, search, retired) = state.withLock { state in
            state.closed = true
            return (state.pool, state.search, state.retired)
        }
        for runner in retired {
            runner.cancel()
            await runner.value
        }
        if let found = await search?.value, found.generation != pool?.generation {
            found.runner.cancel()
            await found.runner.value
        }
        pool?.runner.cancel()
        await pool?.runner.value
    }

    /// Asks every host in turn; installs a pool on the first that accepts writes.
    private func findPrimary() async -> Pool? {
        var problems: [String] = []
        for endpoint in location.endpoints {
            let problem: String
            switch await probe(endpoint) {
            case .primary: problem = ""
            case .standby: problem = "in recovery (a standby)"
            case .failed(let reason, _): problem = reason
            }
            guard !problem.isEmpty else {
                let generation = state.withLock { state in
                    state.generation += 1
                    return state.generation
                }
                let pool = Self.makePool(
                    location: location, endpoint: endpoint, maximumConnections: maximumConnections,
                    generation: generation, logger: logger)
                let installed = state.withLock { state in
                    state.search = nil
                    guard !state.closed else { return false }
                    state.pool = pool
                    state.lastFailedSearch = nil
                    return true
                }
                guard installed else {
                    pool.runner.cancel()
                    return nil
                }
                logger.notice("writing to the PostgreSQL primary", metadata: ["endpoint": "\(endpoint)"])
                return pool
            }
            problems.append("\(endpoint): \(problem)")
        }
        let problem = "no PostgreSQL host accepts writes (\(problems.joined(separator: "; ")))"
        state.withLock { state in
            state.search = nil
            state.lastFailedSearch = .now
            state.lastProblem = problem
        }
        logger.warning("\(problem)")
        return nil
    }

    enum Probe: Sendable {
        case primary
        case standby
        /// `serverAnswered`: the host answered with an error of its own (it is up).
        case failed(String, serverAnswered: Bool)
    }

    /// Whether the host at `endpoint` accepts writes.
    private func probe(_ endpoint: PostgresLocation.Endpoint) async -> Probe {
        var configuration: PostgresConnection.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            configuration = PostgresConnection.Configuration(
                host: host, port: port, username: location.username, password: location.password,
                database: location.database, tls: .disable)
        case .unixSocket(let path):
            configuration = PostgresConnection.Configuration(
                unixSocketPath: path, username: location.username, password: location.password,
                database: location.database)
        }
        configuration.options.connectTimeout = .seconds(Int64(Self.probeTimeout.components.seconds))
        let settings = configuration
        let logger = logger
        do {
            return try await withThrowingTaskGroup(of: Probe.self) { group in
                group.addTask {
                    let connection = try await PostgresConnection.connect(
                        configuration: settings, id: 0, logger: logger)
                    do {
                        var inRecovery = true
                        let rows = try await connection.query("SELECT pg_is_in_recovery()", logger: logger)
                        for try await value in rows.decode(Bool.self) { inRecovery = value }
                        try? await connection.close()
                        return inRecovery ? .standby : .primary
                    } catch {
                        try? await connection.close()
                        throw error
                    }
                }
                group.addTask {
                    try await Task.sleep(for: Self.probeTimeout)
                    return .failed("no answer within \(Self.probeTimeout)", serverAnswered: false)
                }
                let first = try await group.next() ?? .failed("no answer", serverAnswered: false)
                group.cancelAll()
                return first
            }
        } catch {
            let answered = (error as? PSQLError)?.serverInfo?[.sqlState] != nil
            if case .unavailable(let reason) = PostgresLedgerStore.map(error) {
                return .failed(reason, serverAnswered: answered)
            }
            return .failed("\(PostgresLedgerStore.map(error))", serverAnswered: answered)
        }
    }
}
