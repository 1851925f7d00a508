import Foundation
@testable import HorizonTestSupport
import Synchronization
import Testing

/// The trait that keeps blocking tests off Swift's cooperative pool really moves them: a
/// synchronous test body and an async one both run on the trait's queue of the running test.
@Suite("Blocking tests run off the cooperative pool", .offTheCooperativePool)
struct OffThePoolTests {
    static var queueLabel: String { OffTheCooperativePool.currentQueue ?? "the cooperative pool" }

    @Test func aSynchronousTestRunsOnABlockingQueue() {
        #expect(Self.queueLabel == "horizon.test.blocking")
    }

    @Test func anAsyncTestRunsOnABlockingQueueAfterAnAwait() async throws {
        try await Task.sleep(for: .milliseconds(1))
        #expect(Self.queueLabel == "horizon.test.blocking")
    }
}

/// The bound on blocking tests: never more at once than the limit, and every one runs.
@Suite("Blocking test slots")
struct BlockingSlotsTests {
    @Test func noMoreRunAtOnceThanTheLimitAndAllRun() async throws {
        let slots = BlockingSlots(limit: 2)
        final class Counts: Sendable { let value = Mutex((running: 0, most: 0, done: 0)) }
        let counts = Counts()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    try await slots.withSlot {
                        counts.value.withLock {
                            $0.running += 1
                            $0.most = max($0.most, $0.running)
                        }
                        try await Task.sleep(for: .milliseconds(20))
                        counts.value.withLock {
                            $0.running -= 1
                            $0.done += 1
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let final = counts.value.withLock { $0 }
        #expect(final.most == 2)
        #expect(final.done == 8)
    }

    @Test func aSlotIsGivenBackWhenTheBodyThrows() async throws {
        struct Failure: Error {}
        let slots = BlockingSlots(limit: 1)
        await #expect(throws: Failure.self) { try await slots.withSlot { throw Failure() } }
        // With the slot lost this would wait forever; the test's time limit would end it.
        let answer = try await slots.withSlot { 42 }
        #expect(answer == 42)
    }
}
