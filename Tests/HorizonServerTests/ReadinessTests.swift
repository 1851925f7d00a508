import Foundation
import HorizonLedger
import HorizonServer
import Synchronization
import Testing

/// A store whose transactions hang (a database that accepts the connection and never answers,
/// or a pool waiting out its connect timeout) while `isHanging`.
final class HangingStore: LedgerStore {
    let inner: SQLiteLedgerStore
    private let hanging = Mutex(false)

    init(path: String) throws { inner = try SQLiteLedgerStore(path: path) }

    var isHanging: Bool {
        get { hanging.withLock { $0 } }
        set { hanging.withLock { $0 = newValue } }
    }

    var dialect: SQLDialect { inner.dialect }

    func transaction<T: Sendable>(
        _ isolation: TransactionIsolation, _ body: @Sendable (any SQLTransaction) async throws -> T
    ) async throws(LedgerError) -> T {
        if isHanging {
            // Not cancellable, like a driver waiting for its connect timeout; far longer than any
            // bound below, so only the readiness deadline can answer in time.
            try? await Task.detached { try await Task.sleep(for: .seconds(120)) }.value
            throw .unavailable("the database did not answer")
        }
        return try await inner.transaction(isolation, body)
    }

    func close() async { await inner.close() }
}

@Suite("Readiness")
struct ReadinessTests {
    final class Holder: Sendable { let store = Mutex<HangingStore?>(nil) }

    @Test func aDatabaseThatDoesNotAnswerIsNotReadyWithinTwoSeconds() async throws {
        let holder = Holder()
        let server = try await TestServer { path in
            let store = try HangingStore(path: path)
            holder.store.withLock { $0 = store }
            return store
        }
        let store = try #require(holder.store.withLock { $0 })
        try await server.withClient { client in
            let ready = try await client.send(.get, "/ready")
            #expect(ready.status == .ok, "\(ready.text)")
            store.isHanging = true
            let started = ContinuousClock.now
            let notReady = try await client.send(.get, "/ready")
            let took = ContinuousClock.now - started
            try expectError(notReady, .serviceUnavailable, "database_unavailable", "retry shortly")
            // The answer comes at the readiness deadline (1.5 s), not when the hanging database
            // would (two minutes). The bound leaves room for a busy machine, whose scheduler woke
            // the deadline seven seconds late once.
            #expect(took < .seconds(60), "took \(took)")
            store.isHanging = false
            #expect(try await client.send(.get, "/ready").status == .ok)
        }
    }
}
