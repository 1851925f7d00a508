import Dispatch
import Synchronization

/// A point on a monotonic clock, in nanoseconds since the clock's own epoch.
///
/// Simulated radios start it at zero and move it by hand; real radios read the system's
/// monotonic clock. Roles only ever compare instants from the same `Scheduler`.
public struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = Instant(nanoseconds: 0)

    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    public static func + (lhs: Instant, rhs: Duration) -> Instant {
        Instant(nanoseconds: lhs.nanoseconds &+ rhs.nanoseconds)
    }

    public static func - (lhs: Instant, rhs: Instant) -> Duration {
        .nanoseconds(lhs.nanoseconds &- rhs.nanoseconds)
    }

    public var description: String {
        let millis = Double(nanoseconds) / 1_000_000
        return "t+\(millis)ms"
    }
}

extension Duration {
    /// Whole nanoseconds, saturating; durations here are far below the 292-year limit.
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
    }

    public var milliseconds: Double { Double(nanoseconds) / 1_000_000 }
}

/// Seconds since 1970-01-01 UTC: the time that credentials and signed confirmations carry,
/// because it means the same on both devices (up to their clock skew).
public typealias UnixTime = Int64

/// A timer that can be cancelled before it fires. Cancelling after it fired does nothing.
public final class ScheduledAction: Sendable {
    private let cancelled = Atomic<Bool>(false)

    public init() {}

    public func cancel() { cancelled.store(true, ordering: .relaxed) }

    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) }
}

/// Where a layer gets its time and runs its timers.
///
/// Every callback a radio delivers and every timer a scheduler fires runs on one serial context
/// per scheduler, so the state machines above need no locks of their own against each other.
/// The simulated radio implements it with a virtual clock, which makes every timeout testable
/// without waiting.
///
/// A scheduler is also the serial executor of the actors that hold a role's state: an actor
/// whose `unownedExecutor` is its radio's scheduler runs its jobs on that context, and code
/// already there (a radio callback, a timer) enters it with `assumeIsolated`, which the
/// scheduler checks (`checkIsolated`) in every build.
public protocol Scheduler: AnyObject, Sendable, SerialExecutor {
    var now: Instant { get }
    var wallClock: UnixTime { get }
    /// Runs `action` on the scheduler's serial context after `delay`.
    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction
    /// Runs `work` — I/O that may be slow, such as settling with a remote processor — without
    /// holding the serial context, then `completion` with its result on that context.
    ///
    /// A real-time scheduler keeps serving other events while the work is under way. A virtual
    /// clock (the default implementation) treats the work as instantaneous: the caller waits for
    /// it and `completion` runs before anything else fires, so a seeded run replays step for step.
    /// Either way the work never needs Swift's cooperative pool (`ExternalWork`): a real-time
    /// scheduler's runs on a queue of its own, a virtual clock's on the waiting caller's thread,
    /// so a caller blocked on it cannot starve it.
    func runExternal<T: Sendable>(
        _ work: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void)
    /// Runs `call`, a radio call that suspends while its backend answers (bluetoothd registering
    /// an advertisement, starting discovery), without holding the serial context, then
    /// `completion` with its result on that context. A virtual clock (the default) takes no time
    /// for it, whatever its `runExternal` takes: the caller waits, and `completion` runs before
    /// this returns, as if the call were synchronous (a simulated radio answers at once).
    func runRadioCall<T: Sendable>(
        _ call: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void)
    /// Runs `body` on the scheduler's serial context and returns its result, the caller waiting
    /// meanwhile: how the reference API's synchronous commands enter a role, so that every change
    /// of its state happens on that one context. Called from the context itself (a radio
    /// callback, a timer, an observer, the body of `perform`), it runs `body` at once: a
    /// re-entrant call never waits for itself.
    ///
    /// A virtual clock (the default implementation) runs `body` on the caller's thread: its serial
    /// context is whoever drives it, and a synchronous caller is that driver (see the default).
    func performSynchronously<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T
}

extension Scheduler {
    /// An actor's job runs on the serial context like any other action, after what is already
    /// due there.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { [self] in job.runSynchronously(on: asUnownedSerialExecutor()) }
    }

    /// A clock driven by hand (the default; `RealTimeScheduler` checks its queue): its context is
    /// whoever drives it, so any caller may be on it (see `performSynchronously`).
    public func checkIsolated() {}

    /// Runs `action` on the scheduler's serial context as soon as possible.
    public func execute(_ action: @escaping @Sendable () -> Void) {
        schedule(after: .zero, action)
    }

    /// Runs `body` on the scheduler's serial context and hands back its result: how async code
    /// enters a role, so every change of its state happens on that one context. A simulated
    /// radio's scheduler only moves while someone runs it (`RadioSimulation.live`).
    public func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            execute { continuation.resume(returning: body()) }
        }
    }
}

extension Scheduler {
    /// Virtual time: nothing runs unless its driver runs it (`RadioSimulation.run` fires events on
    /// the thread that calls it, one at a time), so the serial context is the driving thread, and
    /// between two runs nothing else touches the roles. A synchronous command comes either from
    /// that thread between runs or from a callback inside a run: both are the context already, so
    /// `body` runs at once, and a seeded run replays exactly as if the command were a plain call.
    /// (While a simulation runs live, other threads reach it only through the async `perform`.)
    public func performSynchronously<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        try body()
    }

    /// Virtual time: the work takes none. The caller (the scheduler's serial context) waits for
    /// it, so no later event can fire before `completion`, which runs at once, before `runExternal`
    /// returns: exactly as if the work had been a synchronous call.
    public func runExternal<T: Sendable>(
        _ work: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void
    ) {
        completion(ExternalWork.wait(for: work))
    }

    /// Virtual time: the call takes none (see `runRadioCall`).
    public func runRadioCall<T: Sendable>(
        _ call: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void
    ) {
        completion(ExternalWork.wait(for: call))
    }
}

/// Async work started from synchronous code, never on Swift's cooperative pool.
///
/// Why not the pool: the simulated radios and the reference API are synchronous, so their callers
/// block while the work runs, and those callers are often on the pool itself (tests run there;
/// it has one thread per core). Work that needed a pool thread could then wait forever for one.
/// Work that is started (`start`) gets a serial dispatch queue of its own (an overcommitting
/// worker thread); work that is waited for (`wait(for:)`) runs on the waiting thread itself,
/// which has nothing else to do meanwhile. Either is set as the task's executor preference, so
/// the work's own awaits resume there too.
public enum ExternalWork {
    /// Starts `work` now; `wait()` on the handle blocks until its result is there.
    public static func start<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> Pending<T> {
        let pending = Pending<T>()
        Task(executorPreference: QueueExecutor(label: "horizon.external-work")) {
            pending.fulfil(await work())
        }
        return pending
    }

    /// Runs `work` and blocks the calling thread until it has finished (see `ExternalWork`). The
    /// calling thread runs the work's jobs itself, as they become ready (awaits that resume from
    /// elsewhere, such as I/O, hand their continuation back to it): no second thread to wake and
    /// wait for, which cost a simulated payment's settlement a few percent of its CPU.
    public static func wait<T: Sendable>(for work: @escaping @Sendable () async -> T) -> T {
        let executor = WaitingThreadExecutor()
        let result = Mutex<T?>(nil)
        Task(executorPreference: executor) {
            let value = await work()
            result.withLock { $0 = value }
            executor.finish()
        }
        executor.runUntilFinished()
        guard let value = result.withLock({ $0 }) else {
            preconditionFailure("external work finished without a result")
        }
        return value
    }

    /// The result of work started with `start`, once it is there.
    public final class Pending<T: Sendable>: Sendable {
        private let value = Mutex<T?>(nil)
        private let done = DispatchSemaphore(value: 0)

        fileprivate init() {}

        fileprivate func fulfil(_ result: T) {
            value.withLock { $0 = result }
            done.signal()
        }

        /// Blocks until the work has finished; then (and on every later call) its result.
        public func wait() -> T {
            while true {
                if let result = value.withLock({ $0 }) { return result }
                // Signalled once, after the value is stored; passed on so that a second waiter
                // (or a second call) wakes too.
                done.wait()
                done.signal()
            }
        }
    }
}

/// Runs a task's jobs on the thread that waits for the task (`ExternalWork.wait(for:)`), one at a
/// time, until `finish()`.
final class WaitingThreadExecutor: TaskExecutor, Sendable {
    private let state = Mutex<(jobs: [UnownedJob], finished: Bool)>(([], false))
    private let ready = DispatchSemaphore(value: 0)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        state.withLock { $0.jobs.append(job) }
        ready.signal()
    }

    /// Called by the task's last job: `runUntilFinished` returns once that job has run.
    func finish() {
        state.withLock { $0.finished = true }
        ready.signal()
    }

    func runUntilFinished() {
        let executor = asUnownedTaskExecutor()
        while true {
            let (job, finished) = state.withLock { state in
                (state.jobs.isEmpty ? nil : state.jobs.removeFirst(), state.finished)
            }
            if let job {
                job.runSynchronously(on: executor)
            } else if finished {
                return
            } else {
                // Every enqueue and finish signals after changing the state: no wake-up is lost,
                // and a surplus one only costs another look.
                ready.wait()
            }
        }
    }
}

/// Runs a task's jobs on one serial dispatch queue: a worker thread outside the cooperative pool.
public final class QueueExecutor: TaskExecutor {
    private let queue: DispatchQueue
    private let marker = DispatchSpecificKey<Bool>()

    public init(label: String) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: marker, value: true)
    }

    /// Whether the calling code runs on this executor's queue.
    public var isCurrent: Bool { DispatchQueue.getSpecific(key: marker) == true }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// A scheduler on the system's monotonic clock, serialising work on one dispatch queue.
public final class RealTimeScheduler: Scheduler {
    public let queue: DispatchQueue

    /// Where `runExternal` work runs.
    private let externalExecutor: QueueExecutor
    /// Set on `queue` (and so seen by everything that runs on it) to tell it from other queues.
    private let marker = DispatchSpecificKey<Bool>()

    public init(label: String = "horizon.scheduler") {
        queue = DispatchQueue(label: label)
        externalExecutor = QueueExecutor(label: label + ".external")
        queue.setSpecific(key: marker, value: true)
    }

    /// Whether the calling code runs on the scheduler's queue (its serial context).
    public var isCurrent: Bool { DispatchQueue.getSpecific(key: marker) == true }

    /// Isolation to an actor on this scheduler is being on its queue, in every build.
    public func checkIsolated() {
        precondition(isCurrent, "not on the scheduler's queue \(queue.label)")
    }

    /// On the queue already, `body` runs at once (`queue.sync` there would wait for itself
    /// forever); from any other thread it waits its turn behind what the queue has to do first.
    public func performSynchronously<T, Failure: Error>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        if isCurrent { return try body() }
        return try queue.sync { Result { () throws(Failure) -> T in try body() } }.get()
    }

    public var now: Instant {
        Instant(nanoseconds: Int64(clamping: DispatchTime.now().uptimeNanoseconds))
    }

    public var wallClock: UnixTime {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UnixTime(spec.tv_sec)
    }

    /// Real time: the queue keeps serving radio events and timers while `work` runs on a queue of
    /// its own (one per scheduler: a processor that blocks its thread, like an in-process ledger's
    /// synced commit, takes its turn; one that awaits I/O frees it meanwhile).
    public func runExternal<T: Sendable>(
        _ work: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void
    ) {
        Task(executorPreference: externalExecutor) { [self] in
            let result = await work()
            execute { completion(result) }
        }
    }

    /// Real time: the queue keeps serving while the radio's backend answers.
    public func runRadioCall<T: Sendable>(
        _ call: @escaping @Sendable () async -> T, then completion: @escaping @Sendable (T) -> Void
    ) {
        runExternal(call, then: completion)
    }

    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction {
        let handle = ScheduledAction()
        let work: @Sendable () -> Void = {
            if !handle.isCancelled { action() }
        }
        if delay <= .zero {
            queue.async(execute: work)
        } else {
            queue.asyncAfter(
                deadline: .now() + .nanoseconds(Int(clamping: delay.nanoseconds)), execute: work)
        }
        return handle
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#else
    import Foundation
#endif
