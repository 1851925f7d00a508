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
public protocol Scheduler: AnyObject, Sendable {
    var now: Instant { get }
    var wallClock: UnixTime { get }
    /// Runs `action` on the scheduler's serial context after `delay`.
    @discardableResult
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> ScheduledAction
}

extension Scheduler {
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

/// A scheduler on the system's monotonic clock, serialising work on one dispatch queue.
public final class RealTimeScheduler: Scheduler {
    public let queue: DispatchQueue

    public init(label: String = "horizon.scheduler") {
        queue = DispatchQueue(label: label)
    }

    public var now: Instant {
        Instant(nanoseconds: Int64(clamping: DispatchTime.now().uptimeNanoseconds))
    }

    public var wallClock: UnixTime {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UnixTime(spec.tv_sec)
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
