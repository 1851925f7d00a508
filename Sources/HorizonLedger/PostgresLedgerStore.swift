import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Where a PostgreSQL ledger lives, read from a URL:
///
/// - `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` over TCP (TLS is not offered yet:
///   use a Unix socket or a private network);
/// - `postgres://USER@/DATABASE?host=/run/postgresql&port=5432`: the Unix socket
///   `/run/postgresql/.s.PGSQL.5432`, as libpq names it;
/// - `&schema=NAME` (either form): the ledger's tables live in that schema (its `search_path`),
///   so several ledgers, or tests, can share one database;
/// - several hosts, as libpq writes them, for a primary and its standbys:
///   `postgres://USER@HOST1:PORT1,HOST2:PORT2/DATABASE` or
///   `postgres://USER@/DATABASE?host=/DIR1,/DIR2&port=PORT1,PORT2`. The store writes only to the
///   one that is not in recovery (libpq's `target_session_attrs=read-write`, which may be
///   given), and looks again, in the order given, when it stops answering.
public struct PostgresLocation: Sendable, Equatable {
    public enum Endpoint: Sendable, Equatable {
        case tcp(host: String, port: Int)
        case unixSocket(path: String)
    }

    /// The first host named; with `alternateEndpoints`, the first one tried.
    public var endpoint: Endpoint
    /// The further hosts of a primary-and-standbys URL, in the order they are tried.
    public var alternateEndpoints: [Endpoint]
    public var username: String
    public var password: String?
    public var database: String
    public var schema: String?

    public init(
        endpoint: Endpoint, alternateEndpoints: [Endpoint] = [], username: String, password: String?,
        database: String, schema: String? = nil
    ) {
        self.endpoint = endpoint
        self.alternateEndpoints = alternateEndpoints
        self.username = username
        self.password = password
        self.database = database
        self.schema = schema
    }

    /// Every host, in the order they are tried.
    public var endpoints: [Endpoint] { [endpoint] + alternateEndpoints }

    public init(url text: String) throws(LedgerError) {
        func refuse(_ reason: String) -> LedgerError {
            .invalidConfiguration(
                "cannot use the PostgreSQL URL: \(reason) (expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE or postgres://USER@/DATABASE?host=/SOCKET/DIR)"
            )
        }
        // URLComponents reads one host: a list of them (HOST1:PORT1,HOST2:PORT2) is read here and
        // the first one left in the URL for it.
        var text = text
        var authorityHosts: [(host: String, port: Int?)] = []
        if let schemeEnd = text.range(of: "://") {
            let rest = text[schemeEnd.upperBound...]
            let authority = rest.prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
            let hostStart = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
            let hostList = authority[hostStart...]
            if hostList.contains(",") {
                for item in hostList.split(separator: ",", omittingEmptySubsequences: false) {
                    guard let parsed = Self.hostAndPort(item) else { throw refuse("cannot read the host \(item)") }
                    authorityHosts.append(parsed)
                }
                text.replaceSubrange(
                    hostList.startIndex..<hostList.endIndex, with: hostList.prefix(while: { $0 != "," }))
            }
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme,
            scheme == "postgres" || scheme == "postgresql"
        else { throw refuse("it does not start with postgres://") }
        guard let user = components.user, !user.isEmpty else { throw refuse("no user name") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { throw refuse("no database name after the host") }
        if authorityHosts.isEmpty, let host = components.host, !host.isEmpty {
            authorityHosts = [(host, components.port)]
        }
        var queryHosts: [String] = []
        var queryPorts: [Int] = []
        var schema: String?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "host":
                queryHosts = (item.value ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                guard !queryHosts.contains(where: \.isEmpty) else { throw refuse("host names an empty host") }
            case "port":
                for port in (item.value ?? "").split(separator: ",", omittingEmptySubsequences: false) {
                    guard let value = Int(port), (1...65535).contains(value) else {
                        throw refuse("port must be 1 to 65535")
                    }
                    queryPorts.append(value)
                }
            case "schema":
                guard let value = item.value, Self.isPlainIdentifier(value) else {
                    throw refuse("schema must be letters, digits and _ (starting with a letter or _)")
                }
                schema = value
            case "sslmode":
                guard item.value == "disable" else {
                    throw refuse("sslmode=\(item.value ?? "") is not supported; TLS to PostgreSQL is not offered yet")
                }
            case "target_session_attrs":
                // The ledger writes: with several hosts it always uses the one that accepts writes.
                guard item.value == "read-write" || item.value == "primary" else {
                    throw refuse(
                        "target_session_attrs=\(item.value ?? "") is not supported; the ledger writes, so it uses the host that accepts writes (read-write)"
                    )
                }
            default: throw refuse("unknown parameter \(item.name)")
            }
        }
        // As libpq: `port` names one port for every host or one per host.
        func ports(for count: Int, default fallback: Int?) throws(LedgerError) -> [Int?] {
            switch queryPorts.count {
            case 0: return Array(repeating: fallback, count: count)
            case 1: return Array(repeating: queryPorts[0], count: count)
            case count: return queryPorts
            default: throw refuse("port names \(queryPorts.count) ports for \(count) hosts")
            }
        }
        var endpoints: [Endpoint] = []
        if !queryHosts.isEmpty, queryHosts.allSatisfy({ $0.hasPrefix("/") }) {
            // Unix socket directories, libpq's `?host=/run/postgresql`.
            let authorityPort = authorityHosts.count > 1 ? nil : components.port
            for (directory, port) in zip(queryHosts, try ports(for: queryHosts.count, default: authorityPort)) {
                endpoints.append(.unixSocket(path: directory + "/.s.PGSQL.\(port ?? 5432)"))
            }
        } else if !authorityHosts.isEmpty {
            let given = try ports(for: authorityHosts.count, default: nil)
            for (host, port) in zip(authorityHosts, given) {
                endpoints.append(.tcp(host: host.host, port: host.port ?? port ?? 5432))
            }
        } else if !queryHosts.isEmpty {
            for (host, port) in zip(queryHosts, try ports(for: queryHosts.count, default: nil)) {
                endpoints.append(.tcp(host: host, port: port ?? 5432))
            }
        }
        guard let first = endpoints.first else { throw refuse("no host and no ?host=/socket/directory") }
        for endpoint in endpoints {
            if case .tcp(_, let port) = endpoint, !(1...65535).contains(port) {
                throw refuse("port must be 1 to 65535")
            }
        }
        self.init(
            endpoint: first, alternateEndpoints: Array(endpoints.dropFirst()), username: user,
            password: components.password, database: database, schema: schema)
    }

    /// `HOST`, `HOST:PORT`, `[IPV6]` or `[IPV6]:PORT` of a host list; nil when unreadable.
    static func hostAndPort(_ text: Substring) -> (host: String, port: Int?)? {
        var host = text
        var port: Int?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let value = Int(after.dropFirst()) else { return nil }
                port = value
            }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            guard let value = Int(host[host.index(after: colon)...]) else { return nil }
            port = value
            host = host[..<colon]
        }
        guard !host.isEmpty else { return nil }
        return (host.removingPercentEncoding ?? String(host), port)
    }

    static func isPlainIdentifier(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, text.utf8.count <= 63 else { return false }
        let letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
        return letters.unicodeScalars.contains(first)
            && text.unicodeScalars.allSatisfy { letters.unicodeScalars.contains($0) || ("0"..."9").contains($0) }
    }

    /// The client configuration for `endpoint` (the first host unless another is named): no TLS
    /// (see above), the schema as the session's `search_path`.
    var configuration: PostgresClient.Configuration { configuration(for: endpoint) }

    func configuration(for endpoint: Endpoint) -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            configuration = PostgresClient.Configuration(
                host: host, port: port, username: username, password: password, database: database, tls: .disable)
        case .unixSocket(let path):
            configuration = PostgresClient.Configuration(
                unixSocketPath: path, username: username, password: password, database: database)
        }
        if let schema { configuration.options.additionalStartupParameters = [("search_path", schema)] }
        return configuration
    }
}

/// Set once a transaction's connection is leased (see `attemptTransaction`).
final class LeaseFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// The shared store: PostgreSQL through postgres-nio's connection pool, for several server
/// processes over one ledger.
///
/// A transaction runs at SERIALIZABLE isolation unless it asks otherwise, so the rules need no
/// row locks: when two transactions would have seen each other's writes (two payments of one
/// wallet, two requests with one payment id, on any number of processes), PostgreSQL aborts one
/// with a serialization failure and this store runs it again from the start, up to
/// `maximumAttempts`. A `.rowLocking` transaction (the payment's hot path) runs at READ
/// COMMITTED with the row locks its body takes; a deadlock, or a duplicate key it raced another
/// transaction for, is retried the same way.
///
/// With several hosts (a primary and its standbys) the store writes to the one that is not in
/// recovery and, when that one goes away, to whichever is promoted: see `PostgresPrimary`. A
/// transaction that loses its connection mid-way fails as `.unavailable` (its COMMIT may or may
/// not have happened: the caller's retry by payment id finds out); one that had not reached the
/// database yet runs on the new primary.
public final class PostgresLedgerStore: LedgerStore {
    public let location: PostgresLocation
    public let maximumAttempts: Int
    /// How long a transaction waits for a connection before the database counts as unavailable.
    public let connectionTimeout: Duration
    private let primary: PostgresPrimary
    private let logger: Logger

    public var dialect: SQLDialect { .postgres }

    /// Connects lazily (the first transaction opens the first connection) and runs the pool in
    /// a task of its own until `close()`.
    public init(
        location: PostgresLocation, maximumConnections: Int = 10, maximumAttempts: Int = 30,
        connectionTimeout: Duration = .seconds(10),
        logger: Logger = Logger(label: "horizon.ledger.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(LedgerError) {
        guard maximumConnections >= 1, maximumAttempts >= 1 else {
            throw .invalidConfiguration("the PostgreSQL store needs at least one connection and one attempt")
        }
        self.location = location
        self.maximumAttempts = maximumAttempts
        self.connectionTimeout = connectionTimeout
        self.logger = logger
        primary = PostgresPrimary(location: location, maximumConnections: maximumConnections, logger: logger)
    }

    public convenience init(url: String) throws(LedgerError) {
        try self.init(location: PostgresLocation(url: url))
    }

    public func close() async {
        await primary.close()
    }

    @discardableResult
    public func transaction<T: Sendable>(
        _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        var attempt = 0
        var failovers = 0
        while true {
            attempt += 1
            let pool = try await primary.current()
            let leased = LeaseFlag()
            do {
                return try await withoutActuallyEscaping(body) { body in
                    try await attemptTransaction(on: pool, leased: leased, isolation, body)
                }
            } catch {
                let mapped = Self.map(error)
                if case .unavailable(let reason) = mapped, primary.failsOver {
                    primary.lost(pool, because: reason)
                    // Nothing reached the database: run it where the primary is now, at most
                    // once for each host (a search that finds none throws above).
                    if !leased.isSet, failovers < location.endpoints.count {
                        failovers += 1
                        continue
                    }
                }
                guard case .contention = mapped else { throw mapped }
                guard attempt < maximumAttempts else { throw .contention(attempts: attempt) }
                // Back off a random few milliseconds, growing, so that the losers of one
                // conflict do not collide again in lockstep.
                let ceiling = min(2 << min(attempt, 6), 100)
                try? await Task.sleep(for: .milliseconds(Int.random(in: 1...ceiling)))
            }
        }
    }

    /// One attempt: lease a connection, run `body` between BEGIN and COMMIT (a single statement
    /// without them).
    ///
    /// While the database is down the pool keeps trying to connect and a lease would wait (the
    /// pool's own circuit breaker gives up after a minute), so a watchdog gives up on the lease
    /// after `connectionTimeout` and the caller gets `.unavailable` instead of a hang. Once the
    /// connection is leased the watchdog stands down: a running transaction is never cut.
    private func attemptTransaction<T: Sendable>(
        on pool: PostgresPrimary.Pool, leased: LeaseFlag, _ isolation: TransactionIsolation,
        _ body: @escaping @Sendable (any SQLTransaction) async throws -> T
    ) async throws -> T {
        let client = pool.client
        let logger = logger
        let timeout = connectionTimeout
        let endpoint = pool.endpoint
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await client.withConnection { connection in
                    leased.set()
                    let transaction = Connection(connection: connection, logger: logger, isolation: isolation)
                    let begin: String
                    switch isolation {
                    case .serializable: begin = "BEGIN ISOLATION LEVEL SERIALIZABLE"
                    case .rowLocking: begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
                    case .singleStatement: return try await body(transaction)
                    }
                    try await transaction.run(begin)
                    do {
                        let result = try await body(transaction)
                        try await transaction.run("COMMIT")
                        return result
                    } catch {
                        // A failed COMMIT has ended the transaction already; ROLLBACK then only warns.
                        try? await transaction.run("ROLLBACK")
                        throw error
                    }
                }
            }
            let primary = primary
            group.addTask {
                if primary.failsOver {
                    // Also gives up once the pool is dropped: its host is gone. After a second
                    // without a connection, asks whether its host still accepts writes (see `verify`).
                    let started = ContinuousClock.now
                    while ContinuousClock.now < started + timeout, !leased.isSet, !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(50))
                        if !leased.isSet, ContinuousClock.now - started >= .seconds(1) { await primary.verify(pool) }
                        if !leased.isSet, !primary.isCurrent(pool) {
                            throw LedgerError.unavailable("the primary at \(endpoint) was lost")
                        }
                    }
                } else {
                    try? await Task.sleep(for: timeout)
                }
                if !leased.isSet {
                    throw LedgerError.unavailable("no connection to PostgreSQL at \(endpoint) within \(timeout)")
                }
                return nil
            }
            while let next = try await group.next() {
                if let result = next {
                    group.cancelAll()
                    return result
                }
            }
            throw LedgerError.database("the transaction ended without a result")
        }
    }

    /// The ledger's error for anything postgres-nio threw. Serialization failures and
    /// deadlocks become `.contention` (retried above), and so does a duplicate key in a
    /// `.rowLocking` transaction (another transaction inserted the same key first: the retry
    /// reads its row); a lost connection becomes `.unavailable`.
    static func map(_ error: any Error, isolation: TransactionIsolation = .serializable) -> LedgerError {
        if let error = error as? LedgerError { return error }
        guard let error = error as? PSQLError else {
            // The pool's own errors (its circuit breaker after a minute of failed connects, a
            // closed pool) name no SQL state: the database was not reached.
            if "\(type(of: error))" == "ConnectionPoolError" { return .unavailable("\(error)") }
            return ledgerError(error)
        }
        if let state = error.serverInfo?[.sqlState] {
            // 40001 serialization_failure, 40P01 deadlock_detected: nothing was committed.
            if state == "40001" || state == "40P01" { return .contention(attempts: 1) }
            // 23505 unique_violation: SERIALIZABLE reports such a race as 40001 itself.
            if state == "23505" && isolation == .rowLocking { return .contention(attempts: 1) }
            // 25006 read_only_sql_transaction: the host is a standby (in recovery), nothing was
            // written; with several hosts the store looks for the primary.
            if state == "25006" {
                return .unavailable("the database is a standby and accepts no writes [SQLSTATE 25006]")
            }
            // The server's message and detail can quote the values of the statement ("Key
            // (email)=(...)", "invalid input syntax ...: \"...\""), which may be secrets: the
            // error, which reaches the log, names only the state and the schema objects.
            let message = error.serverInfo?[.message] ?? "no message"
            let objects: [PSQLError.ServerInfo.Field] = [.schemaName, .tableName, .columnName, .constraintName]
            let detail = objects.compactMap { error.serverInfo?[$0] }.joined(separator: ".")
            // Class 08 (connection exception), 53 (insufficient resources), 57P (shutdown).
            if state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57P") {
                return .unavailable("\(message) [SQLSTATE \(state)]")
            }
            return .database("SQLSTATE \(state)\(detail.isEmpty ? "" : " on \(detail)")")
        }
        switch error.code {
        case .connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed,
            .unexpectedBackendMessage, .uncleanShutdown:
            let underlying = error.underlying.map { ": \(String(describing: $0))" } ?? ""
            return .unavailable("\(error.code)\(underlying)")
        default:
            return .database("\(error.code)")
        }
    }

    struct Connection: SQLTransaction {
        let connection: PostgresConnection
        let logger: Logger
        let isolation: TransactionIsolation

        var forUpdate: String { isolation == .rowLocking ? " FOR UPDATE" : "" }
        var dialect: SQLDialect { .postgres }

        func run(_ sql: String) async throws {
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }

        func query(_ sql: String, _ parameters: [SQLValue]) async throws(LedgerError) -> [SQLRow] {
            var bindings = PostgresBindings(capacity: parameters.count)
            for parameter in parameters {
                switch parameter {
                case .integer(let number): bindings.append(number)
                case .text(let text): bindings.append(text)
                case .blob(let bytes): bindings.append(ByteBuffer(bytes: bytes))
                case .null: bindings.appendNull()
                }
            }
            let query = PostgresQuery(unsafeSQL: Self.numberedPlaceholders(sql), binds: bindings)
            let rows: [PostgresRow]
            do {
                rows = try await connection.query(query, logger: logger).collect()
            } catch {
                throw PostgresLedgerStore.map(error, isolation: isolation)
            }
            var result: [SQLRow] = []
            result.reserveCapacity(rows.count)
            for row in rows { result.append(try Self.convert(row)) }
            return result
        }

        /// The row in the ledger's four kinds of value. A column of another type is kept as
        /// unreadable, so that reading it fails and selecting it without reading does not.
        static func convert(_ row: PostgresRow) throws(LedgerError) -> SQLRow {
            var values: [String: SQLValue] = [:]
            var unreadable: [String: String] = [:]
            for cell in row {
                guard cell.bytes != nil else {
                    values[cell.columnName] = .null
                    continue
                }
                do {
                    switch cell.dataType {
                    case .int8, .int4, .int2: values[cell.columnName] = .integer(try cell.decode(Int64.self))
                    case .text, .varchar, .name, .bpchar: values[cell.columnName] = .text(try cell.decode(String.self))
                    case .bytea:
                        let buffer = try cell.decode(ByteBuffer.self)
                        values[cell.columnName] = .blob(Array(buffer.readableBytesView))
                    case .bool: values[cell.columnName] = .integer(try cell.decode(Bool.self) ? 1 : 0)
                    default: unreadable[cell.columnName] = "\(cell.dataType)"
                    }
                } catch {
                    throw .corruptRow(column: cell.columnName, reason: "cannot decode \(cell.dataType)")
                }
            }
            return SQLRow(values: values, unreadable: unreadable)
        }

        /// The statement with `?` placeholders numbered `$1`, `$2`, … as PostgreSQL wants them.
        /// A `?` inside a quoted literal or identifier is left alone. Byte by byte (every
        /// character here is ASCII but quoted text): iterating `Character`s cost the server 2.5 %
        /// of its CPU, once per statement.
        static func numberedPlaceholders(_ sql: String) -> String {
            var output: [UInt8] = []
            output.reserveCapacity(sql.utf8.count + 16)
            var number = 0
            var quote: UInt8?
            for byte in sql.utf8 {
                if let open = quote {
                    if byte == open { quote = nil }
                    output.append(byte)
                } else if byte == UInt8(ascii: "'") || byte == UInt8(ascii: "\"") {
                    quote = byte
                    output.append(byte)
                } else if byte == UInt8(ascii: "?") {
                    number += 1
                    output.append(UInt8(ascii: "$"))
                    output.append(contentsOf: String(number).utf8)
                } else {
                    output.append(byte)
                }
            }
            return String(decoding: output, as: UTF8.self)
        }
    }
}
