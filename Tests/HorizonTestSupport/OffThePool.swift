import Foundation
import HorizonCore
import Synchronization
import Testing

/// A test trait for tests that block their thread for long: the programs run as processes, the
/// seeded fault simulation computing for a minute, the simulations of the role tests. Each test
/// case runs on one of a few dispatch queues (a task executor preference), not on Swift's
/// cooperative pool, which has one thread per core (two here) and is what the async work of every
/// other test needs: D-Bus replies, the BlueZ radio's event loops, the async API's hops. With it
/// the whole suite runs as one parallel `swift test` without starving. Not for tests that race
/// the real clock (the async API on `RadioSimulation.live`, real-time schedulers): behind a
/// blocking test on the same queue they would lose that race.
public struct OffTheCooperativePool: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Suites get a scope too; only a test case's own body needs a thread.
        guard testCase != nil else { return try await function() }
        try await withTaskExecutorPreference(BlockingQueues.next()) { try await function() }
    }
}

extension OffTheCooperativePool {
    /// The queue the calling code runs on, if it is one of the trait's (for its own tests).
    public static var currentQueue: String? {
        BlockingQueues.executors.firstIndex { $0.isCurrent }.map { "horizon.test.blocking.\($0)" }
    }
}

extension Trait where Self == OffTheCooperativePool {
    /// Runs each test case on a thread of its own instead of Swift's cooperative pool.
    public static var offTheCooperativePool: Self { OffTheCooperativePool() }
}

/// A fixed few queues (`QueueExecutor`, one worker thread each), taken in turn, serve every such
/// test: as many blocking tests run at once as there are cores, so the machine is not
/// oversubscribed and whatever waits on the cooperative pool (a D-Bus reply, a timer) still gets
/// the processor within its timeouts.
enum BlockingQueues {
    static let executors = (0..<max(2, ProcessInfo.processInfo.activeProcessorCount)).map {
        QueueExecutor(label: "horizon.test.blocking.\($0)")
    }
    private static let turn = Mutex(0)

    static func next() -> QueueExecutor {
        let index = turn.withLock { turn in
            defer { turn += 1 }
            return turn % executors.count
        }
        return executors[index]
    }
}
