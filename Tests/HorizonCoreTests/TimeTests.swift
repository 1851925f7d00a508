import Dispatch
import HorizonCore
import HorizonTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Instants, durations and the real-time scheduler")
struct TimeTests {
    @Test func instantArithmetic() {
        let start = Instant(nanoseconds: 1_000)
        let later = start + .milliseconds(30)
        #expect(later.nanoseconds == 30_001_000)
        #expect(later - start == .milliseconds(30))
        #expect(start - later == .milliseconds(-30))
        #expect(start < later)
        #expect(!(later < start))
        #expect(Instant.zero.nanoseconds == 0)
        #expect(Instant.zero + .seconds(2) == Instant(nanoseconds: 2_000_000_000))
        #expect([later, .zero, start].sorted() == [.zero, start, later])
    }

    @Test func instantDescriptionIsInMilliseconds() {
        #expect(Instant(nanoseconds: 1_500_000).description == "t+1.5ms")
        #expect(Instant.zero.description == "t+0.0ms")
        #expect(Instant(nanoseconds: 2_000_000_000).description == "t+2000.0ms")
    }

    @Test func durationNanosecondsAndMilliseconds() {
        #expect(Duration.seconds(2).nanoseconds == 2_000_000_000)
        #expect(Duration.milliseconds(30).nanoseconds == 30_000_000)
        #expect(Duration.microseconds(7500).nanoseconds == 7_500_000)
        #expect(Duration.nanoseconds(1).nanoseconds == 1)
        #expect(Duration.zero.nanoseconds == 0)
        #expect(Duration.milliseconds(-5).nanoseconds == -5_000_000)
        #expect(Duration.seconds(1.25).nanoseconds == 1_250_000_000)
        #expect(Duration.microseconds(7500).milliseconds == 7.5)
        #expect(Duration.seconds(3).milliseconds == 3000)
    }

    @Test func scheduledActionCancellation() {
        let action = ScheduledAction()
        #expect(!action.isCancelled)
        action.cancel()
        #expect(action.isCancelled)
        action.cancel()
        #expect(action.isCancelled)
    }

    // MARK: RealTimeScheduler

    @Test func realTimeClockMovesForward() async throws {
        let scheduler = RealTimeScheduler(label: "test.clock")
        let first = scheduler.now
        try await Task.sleep(for: .milliseconds(5))
        let second = scheduler.now
        // Only a lower bound: how long a busy machine takes to wake the task is not this test's business.
        #expect(second - first >= .milliseconds(5))
        #if canImport(Glibc)
            let system = Int64(time(nil))
            #expect(abs(scheduler.wallClock - system) <= 1)
        #endif
        #expect(scheduler.wallClock > 1_700_000_000)
    }

    @Test func runsAScheduledActionAfterItsDelay() async {
        let scheduler = RealTimeScheduler(label: "test.delay")
        let scheduledAt = scheduler.now
        let firedAt: Instant = await withCheckedContinuation { continuation in
            scheduler.schedule(after: .milliseconds(20)) {
                continuation.resume(returning: scheduler.now)
            }
        }
        // Never early; how late a loaded machine runs it is not asserted.
        #expect(firedAt - scheduledAt >= .milliseconds(20))
    }

    @Test func executeRunsSoonAndInOrder() async {
        let scheduler = RealTimeScheduler(label: "test.order")
        let order = Mutex<[Int]>([])
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            for index in 0..<50 {
                scheduler.execute { order.withLock { $0.append(index) } }
            }
            scheduler.execute { continuation.resume() }
        }
        #expect(order.withLock { $0 } == Array(0..<50))
    }

    @Test func negativeDelayRunsAtOnce() async {
        let scheduler = RealTimeScheduler(label: "test.negative")
        let ran: Bool = await withCheckedContinuation { continuation in
            scheduler.schedule(after: .milliseconds(-100)) { continuation.resume(returning: true) }
        }
        #expect(ran)
    }

    @Test func cancelledActionNeverRuns() async {
        let scheduler = RealTimeScheduler(label: "test.cancel")
        let ran = Atomic<Int>(0)
        let cancelled = scheduler.schedule(after: .milliseconds(10)) { ran.add(1, ordering: .relaxed) }
        cancelled.cancel()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // On the scheduler's own serial context, an action scheduled for "now" cannot run
            // before the current one ends, so cancelling it right away is race-free.
            scheduler.execute {
                scheduler.schedule(after: .zero) { ran.add(10, ordering: .relaxed) }.cancel()
                // Wait well past the cancelled actions' times, on the same serial queue.
                scheduler.schedule(after: .milliseconds(50)) { continuation.resume() }
            }
        }
        #expect(ran.load(ordering: .relaxed) == 0)
        #expect(cancelled.isCancelled)
    }

    @Test func cancellingAfterFiringChangesNothing() async {
        let scheduler = RealTimeScheduler(label: "test.late-cancel")
        let count = Atomic<Int>(0)
        let handle = Mutex<ScheduledAction?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            handle.withLock { handle in
                handle = scheduler.schedule(after: .milliseconds(1)) {
                    count.add(1, ordering: .relaxed)
                    continuation.resume()
                }
            }
        }
        handle.withLock { $0?.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            scheduler.schedule(after: .milliseconds(5)) { continuation.resume() }
        }
        #expect(count.load(ordering: .relaxed) == 1)
        #expect(handle.withLock { $0?.isCancelled } == true)
    }

    // MARK: Entering the serial context synchronously

    @Test func performSynchronouslyFromAnotherThreadRunsOnTheQueue() {
        let scheduler = RealTimeScheduler(label: "test.sync")
        #expect(!scheduler.isCurrent)
        #expect(scheduler.performSynchronously { scheduler.isCurrent })
    }

    @Test func performSynchronouslyWaitsForWhatTheQueueHadToDoFirst() {
        let scheduler = RealTimeScheduler(label: "test.sync-order")
        let order = Mutex<[Int]>([])
        for index in 0..<20 { scheduler.execute { order.withLock { $0.append(index) } } }
        let seen = scheduler.performSynchronously { order.withLock { $0 } }
        #expect(seen == Array(0..<20))
    }

    @Test func aReentrantCallRunsAtOnceInsteadOfWaitingForItself() async {
        let scheduler = RealTimeScheduler(label: "test.sync-reentrant")
        let steps: [String] = await withCheckedContinuation { continuation in
            scheduler.execute {
                var steps = ["outer"]
                scheduler.performSynchronously {
                    steps.append(scheduler.isCurrent ? "inner on the queue" : "inner elsewhere")
                    scheduler.performSynchronously { steps.append("innermost") }
                }
                steps.append("after")
                continuation.resume(returning: steps)
            }
        }
        #expect(steps == ["outer", "inner on the queue", "innermost", "after"])
    }

    @Test func performSynchronouslyPassesTheBodysTypedErrorOn() {
        struct Refused: Error, Equatable {}
        let scheduler = RealTimeScheduler(label: "test.sync-error")
        #expect(throws: Refused()) {
            try scheduler.performSynchronously { () throws(Refused) in throw Refused() }
        }
        let fromTheQueue: Result<Void, Refused> = scheduler.performSynchronously {
            Result { () throws(Refused) in
                try scheduler.performSynchronously { () throws(Refused) in throw Refused() }
            }
        }
        #expect(throws: Refused()) { try fromTheQueue.get() }
    }

    @Test func callsFromManyThreadsRunOneAtATime() {
        let scheduler = RealTimeScheduler(label: "test.sync-serial")
        // Not a lock: only the scheduler's serial queue keeps these steps from interleaving.
        final class Counter: @unchecked Sendable {
            var value = 0
            var inside = 0
            var overlaps = 0
        }
        let counter = Counter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<500 {
                scheduler.performSynchronously {
                    counter.inside += 1
                    if counter.inside > 1 { counter.overlaps += 1 }
                    // Long enough for another thread to come in, were nothing keeping it out.
                    for _ in 0..<20 { _ = scheduler.now }
                    counter.value += 1
                    counter.inside -= 1
                }
            }
        }
        let (value, overlaps) = scheduler.performSynchronously { (counter.value, counter.overlaps) }
        #expect(value == 8 * 500)
        #expect(overlaps == 0)
    }

    /// A virtual clock's context is whoever drives it: the body runs at once, on the caller's
    /// thread, without waiting for the clock (which never runs here).
    @Test func aVirtualClockRunsTheBodyAtOnce() {
        let clock = StoppedClock()
        let ran = Mutex(false)
        let result = clock.performSynchronously {
            ran.withLock { $0 = true }
            return 42
        }
        #expect(result == 42)
        #expect(ran.withLock { $0 })
        #expect(clock.scheduled.withLock { $0 } == 0)
    }

    @Test func waitedForWorkRunsOnTheWaitingThreadAndResumesFromElsewhere() {
        // The waiting thread runs the work's jobs itself: no second thread to wake per call. An
        // await resumed from another thread (I/O) hands its continuation back to it.
        let caller = pthread_self()
        let value = ExternalWork.wait { () async -> Int in
            let before = pthread_self()
            let resumed: Int = await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) {
                    continuation.resume(returning: 40)
                }
            }
            let after = pthread_self()
            return before == caller && after == caller ? resumed + 2 : -1
        }
        #expect(value == 42)
    }

    @Test func waitedForWorkFinishesFromTheCooperativePool() async {
        // An async caller blocked in `wait` holds one of the pool's few threads; the work needs
        // none of them.
        let values = await withTaskGroup(of: Int.self) { group in
            for index in 0..<4 {
                group.addTask {
                    ExternalWork.wait {
                        await withCheckedContinuation { continuation in
                            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                                continuation.resume(returning: index)
                            }
                        }
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values.sorted() == [0, 1, 2, 3])
    }
}

/// A clock that never moves (the default `performSynchronously` of a virtual clock).
final class StoppedClock: Scheduler {
    let scheduled = Mutex(0)
    var now: Instant { .zero }
    var wallClock: UnixTime { 0 }

    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        scheduled.withLock { $0 += 1 }
        return ScheduledAction()
    }
}
