import Foundation
import HorizonLedger
import Synchronization

// Compiled into debug builds only (Package.swift defines HORIZON_FAULT_INJECTION for the debug
// configuration): a release horizon-server has no variable that kills it.
#if HORIZON_FAULT_INJECTION

    /// Crash tests' way to make the server fail where a real one can: killed with
    /// SIGKILL, as by a power cut, or slow, at a chosen point of a payment's or redemption's
    /// execution. `horizon-server serve` reads it from its environment; without the variables the
    /// ledger is used as it is.
    ///
    /// - `HORIZON_SERVER_CRASH=before-commit`: the process kills itself inside the ledger's
    ///   transaction, after the transaction row and its postings are written and before the commit:
    ///   nothing was executed, and the terminal is not told so.
    /// - `HORIZON_SERVER_CRASH=after-commit`: it kills itself right after that transaction commits,
    ///   before the answer is written: executed, and nobody is told.
    /// - `HORIZON_SERVER_DELAY_MS=N`: each execution's answer is held N milliseconds after its commit
    ///   (a slow server). Replays of a stored result are not held.
    ///
    /// Both points are met only by an execution (a new payment or redemption id), never by a replay,
    /// a migration or any other request.
    public struct ServerFaultInjection: Sendable, Equatable {
        public enum CrashPoint: String, Sendable, CaseIterable {
            case beforeCommit = "before-commit"
            case afterCommit = "after-commit"
        }

        public static let crashVariable = "HORIZON_SERVER_CRASH"
        public static let delayVariable = "HORIZON_SERVER_DELAY_MS"

        public var crash: CrashPoint?
        public var delay: Duration?

        public init(crash: CrashPoint? = nil, delay: Duration? = nil) {
            self.crash = crash
            self.delay = delay
        }

        public var isEmpty: Bool { crash == nil && delay == nil }

        /// The faults the environment asks for; an unknown point or a bad delay is refused at start
        /// rather than silently never happening.
        public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment)
            throws(ServerSetupError) -> ServerFaultInjection
        {
            var faults = ServerFaultInjection()
            if let text = environment[crashVariable] {
                guard let point = CrashPoint(rawValue: text) else {
                    throw .invalidSetting(
                        "\(crashVariable)=\(text) is not a crash point; use one of \(CrashPoint.allCases.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                faults.crash = point
            }
            if let text = environment[delayVariable] {
                guard let milliseconds = Int(text), (0...600_000).contains(milliseconds) else {
                    throw .invalidSetting("\(delayVariable)=\(text) must be 0 to 600000 milliseconds")
                }
                faults.delay = .milliseconds(milliseconds)
            }
            return faults
        }

        /// `ledger` over a store with these faults; `ledger` itself when there are none.
        public func apply(to ledger: Ledger) async throws(LedgerError) -> Ledger {
            guard !isEmpty else { return ledger }
            return try await Ledger.open(FaultInjectingStore(base: ledger.store, faults: self), options: ledger.options)
        }

        static func die(_ what: String) -> Never {
            FileHandle.standardError.write(Data("crash injection: horizon-server killed \(what)\n".utf8))
            kill(getpid(), SIGKILL)
            // SIGKILL cannot be caught; this only satisfies the compiler.
            exit(137)
        }
    }

    /// The ledger's store with the crash points of `ServerFaultInjection`. An execution is the
    /// transaction that inserts into `transactions` (the ledger's exactly-once row, written after
    /// the postings and before the commit).
    private struct FaultInjectingStore: LedgerStore {
        let base: any LedgerStore
        let faults: ServerFaultInjection

        var dialect: SQLDialect { base.dialect }

        func migrationTransaction<T: Sendable>(_ body: @Sendable (any SQLTransaction) async throws -> T)
            async throws(LedgerError) -> T
        {
            try await base.migrationTransaction(body)
        }

        func transaction<T: Sendable>(
            _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
        ) async throws(LedgerError) -> T {
            let executed = Mutex(false)
            let value = try await base.transaction(isolation) { db in
                // A store may run the body again (a serialization retry): only the last run counts.
                executed.withLock { $0 = false }
                return try await body(
                    FaultInjectingTransaction(base: db, crash: faults.crash) { executed.withLock { $0 = true } })
            }
            guard executed.withLock({ $0 }) else { return value }
            if faults.crash == .afterCommit { ServerFaultInjection.die("after committing an execution") }
            if let delay = faults.delay { try? await Task.sleep(for: delay) }
            return value
        }

        func close() async { await base.close() }
    }

    private struct FaultInjectingTransaction: SQLTransaction {
        let base: any SQLTransaction
        let crash: ServerFaultInjection.CrashPoint?
        let onExecution: @Sendable () -> Void

        var forUpdate: String { base.forUpdate }
        var dialect: SQLDialect { base.dialect }

        func query(_ sql: String, _ parameters: [SQLValue]) async throws(LedgerError) -> [SQLRow] {
            let rows = try await base.query(sql, parameters)
            executed(sql)
            return rows
        }

        func insert(_ sql: String, _ parameters: [SQLValue], returning column: String) async throws(LedgerError)
            -> Int64
        {
            let key = try await base.insert(sql, parameters, returning: column)
            executed(sql)
            return key
        }

        /// A payment's execution is the insert of its transaction row.
        private func executed(_ sql: String) {
            guard sql.contains("INSERT INTO transactions(") else { return }
            if crash == .beforeCommit { ServerFaultInjection.die("before committing an execution") }
            onExecution()
        }
    }
#endif
