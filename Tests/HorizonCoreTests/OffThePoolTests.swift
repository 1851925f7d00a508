import HorizonTestSupport
import Testing

/// The trait that keeps blocking tests off Swift's cooperative pool really moves them: a
/// synchronous test body and an async one both run on one of its dispatch queues.
@Suite("Blocking tests run off the cooperative pool", .offTheCooperativePool)
struct OffThePoolTests {
    static var queueLabel: String { OffTheCooperativePool.currentQueue ?? "the cooperative pool" }

    @Test func aSynchronousTestRunsOnABlockingQueue() {
        #expect(Self.queueLabel.hasPrefix("horizon.test.blocking."))
    }

    @Test func anAsyncTestRunsOnABlockingQueueAfterAnAwait() async throws {
        try await Task.sleep(for: .milliseconds(1))
        #expect(Self.queueLabel.hasPrefix("horizon.test.blocking."))
    }
}
