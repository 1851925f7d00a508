import Foundation
import HorizonCore
import Synchronization
import Testing

/// A test trait for tests that block their thread for long: the programs run as processes, the
/// seeded fault simulation computing for a minute, the simulations of the role tests. Each test
/// case runs on a dispatch queue of its own (a task executor preference), not on Swift's
/// cooperative pool, which has one thread per core (two here) and is what the async work of every
/// other test needs: D-Bus replies, the BlueZ radio's event loops, the async API's hops. With it
/// the whole suite runs as one parallel `swift test` without starving. A queue of its own, not a
/// shared one, because a test that awaits (a timer, a reply) must not wait behind another test
/// that blocks the same thread; and at most `BlockingSlots.limit` such tests run at once, so the
/// machine is not oversubscribed and what waits on the cooperative pool still gets a processor
/// within its timeouts.
public struct OffTheCooperativePool: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Suites get a scope too; only a test case's own body needs a thread.
        guard testCase != nil else { return try await function() }
        try await BlockingSlots.shared.withSlot {
            let executor = QueueExecutor(label: OffTheCooperativePool.queueLabel)
            try await OffTheCooperativePool.$current.withValue(executor) {
                try await withTaskExecutorPreference(executor) { try await function() }
            }
        }
    }

    static let queueLabel = "horizon.test.blocking"
    @TaskLocal static var current: QueueExecutor?
}

extension OffTheCooperativePool {
    /// The queue the calling code runs on, if it is the trait's queue of the running test (for
    /// its own tests).
    public static var currentQueue: String? { current.flatMap { $0.isCurrent ? queueLabel : nil } }
}

extension Trait where Self == OffTheCooperativePool {
    /// Runs each test case on a thread of its own instead of Swift's cooperative pool.
    public static var offTheCooperativePool: Self { OffTheCooperativePool() }
}

/// How many blocking tests run at once: twice the cores (a blocking test often waits for a child
/// process, which then uses the processor), waiting their turn in order.
final class BlockingSlots: Sendable {
    static let shared = BlockingSlots(limit: 2 * max(2, ProcessInfo.processInfo.activeProcessorCount))

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(limit: Int) { state = Mutex(State(free: limit)) }

    func withSlot<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state in
                guard state.free > 0 else {
                    state.waiting.append(continuation)
                    return false
                }
                state.free -= 1
                return true
            }
            if granted { continuation.resume() }
        }
    }

    private func release() {
        // A waiting test takes the slot over directly; otherwise it goes back to the pool.
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
