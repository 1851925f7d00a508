import Foundation
import HorizonCore
import HorizonLedger
import HorizonTestSupport
import Synchronization
import Testing

/// `Benchmarks/payment-statements.sql` is what pgbench runs as "one payment's work" beside the
/// server: its transaction must be the statements the ledger executes for a payment, in order.
/// Recorded on PostgreSQL for a wallet's second payment (the steady state), settled with its
/// request's checks as the server settles it, and compared shape
/// by shape: parameters, literals and pgbench variables all read as `?`, casts are dropped.
@Suite struct PaymentStatementsScriptTests {
    typealias F = Fixture

    @Test(
        .enabled(
            if: TestStores.postgresConfigured,
            "needs PostgreSQL (Tools/test.sh installs it and sets HORIZON_TEST_POSTGRES_URL)"))
    func theBenchmarkScriptIsThePaymentTheLedgerExecutes() async throws {
        let script = try String(
            contentsOf: RepositoryFile.root.appendingPathComponent("Benchmarks/payment-statements.sql"), encoding: .utf8
        )
        let expected = Self.transactionStatements(ofScript: script)
        #expect(!expected.isEmpty)
        try await TestStores.withStore(.postgres) { store in
            let recording = RecordingStore(store)
            let ledger = try await Ledger.open(recording)
            let shop = try await F.shop(ledger)
            // As the server settles a payment: with its signed request's nonce and rate count.
            func admission() -> RequestAdmission {
                RequestAdmission(
                    nonce: UUID().uuidString, key: shop.key, time: Ledger.now(), nonceWindow: 600,
                    rateLimit: RateLimitCount(key: "key:till", windowStart: Ledger.now(), limit: 1000))
            }
            _ = try await ledger.settle(
                F.payment(wallet: shop.key, amount: 1_00), merchant: shop.merchant.id, admitting: admission())
            recording.statements.withLock { $0 = [] }
            let admitted = try await ledger.settle(
                F.payment(wallet: shop.key, amount: 2_24), merchant: shop.merchant.id, admitting: admission())
            guard case .executed(let result) = admitted else {
                Issue.record("the payment was refused: \(admitted)")
                return
            }
            #expect(result.outcome.isApproved)
            let executed = recording.statements.withLock { $0 }.map(Self.shape)
            #expect(
                executed == expected,
                """
                Benchmarks/payment-statements.sql no longer matches what a payment executes; make its \
                transaction these statements:
                \(executed.joined(separator: "\n"))
                """)
        }
    }

    @Test func shapesHideValuesNotStatements() {
        #expect(
            Self.shape("SELECT * FROM t WHERE a = $1 AND b = 'x'")
                == Self.shape("SELECT * FROM t WHERE a = :a AND b = ?"))
        #expect(
            Self.shape("INSERT INTO t(a) VALUES (?) RETURNING id")
                == Self.shape("INSERT INTO t(a)\n  VALUES (:v) RETURNING id \\gset e_"))
        #expect(Self.shape("SELECT a FROM t") != Self.shape("SELECT b FROM t"))
    }

    /// The script's statements between BEGIN and COMMIT, shaped.
    static func transactionStatements(ofScript script: String) -> [String] {
        let lines = script.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("--") && !$0.hasPrefix("\\set") }
        // A statement ends with ";" or with a \gset meta-command.
        var statements: [String] = []
        var current = ""
        for line in lines {
            current += line + "\n"
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasSuffix(";") || trimmed.contains("\\gset") {
                statements.append(current)
                current = ""
            }
        }
        let shaped = statements.map(shape)
        guard let begin = shaped.firstIndex(where: { $0.hasPrefix("BEGIN") }),
            let commit = shaped.lastIndex(of: "COMMIT"), begin < commit
        else { return [] }
        return Array(shaped[(begin + 1)..<commit])
    }

    /// A statement with every value replaced by `?` and its spacing made uniform.
    static func shape(_ statement: String) -> String {
        var text = statement
        if let meta = text.range(of: "\\gset") { text = String(text[..<meta.lowerBound]) }
        // Casts go: pgbench binds every variable as text, the server binds typed values.
        text = text.replacingOccurrences(of: #"::[a-z]+"#, with: "", options: .regularExpression)
        let replacements = [
            #"'[^']*'"#,  // string literals
            #"\$[0-9]+"#,  // bound parameters
            #"(?<![:\w]):[a-z_]+"#,  // pgbench variables (not ::casts)
            #"(?<![\w$])-?[0-9]+\b"#,  // numbers
            #"\bNULL\b(?=\s*(,|\)))"#,  // a NULL written for a NULL parameter
        ]
        for pattern in replacements {
            text = text.replacingOccurrences(of: pattern, with: "?", options: .regularExpression)
        }
        text = text.replacingOccurrences(of: #"\s+"#, with: " ", options: .regularExpression)
        text = text.replacingOccurrences(of: "( ", with: "(").replacingOccurrences(of: " )", with: ")")
        return text.trimmingCharacters(in: CharacterSet(charactersIn: " ;\n"))
    }
}

/// A store that records every statement its transactions run (as the ledger wrote them, `?`
/// placeholders and all), then runs it on `base`.
final class RecordingStore: LedgerStore {
    let base: any LedgerStore
    let statements = Mutex<[String]>([])

    init(_ base: any LedgerStore) { self.base = base }

    var dialect: SQLDialect { base.dialect }

    func transaction<T: Sendable>(
        _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        try await base.transaction(isolation) { db in try await body(RecordingTransaction(base: db, store: self)) }
    }

    func close() async { await base.close() }

    func migrationTransaction<T: Sendable>(_ body: @Sendable (any SQLTransaction) async throws -> T)
        async throws(LedgerError) -> T
    {
        try await base.migrationTransaction(body)
    }
}

struct RecordingTransaction: SQLTransaction {
    let base: any SQLTransaction
    let store: RecordingStore

    var forUpdate: String { base.forUpdate }
    var dialect: SQLDialect { base.dialect }

    func query(_ sql: String, _ parameters: [SQLValue]) async throws(LedgerError) -> [SQLRow] {
        store.statements.withLock { $0.append(sql) }
        return try await base.query(sql, parameters)
    }
}
