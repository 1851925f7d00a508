import Foundation
import Synchronization

/// The readiness probe's deadline: a load balancer or systemd watchdog asks `/ready` to learn
/// quickly whether to send traffic here, so a database that does not answer is "not ready"
/// within this time, not after the database driver's own connect timeout.
enum Readiness {
    static let deadline: Duration = .milliseconds(1500)

    struct TimedOut: Error, CustomStringConvertible {
        let after: Duration
        var description: String { "the database did not answer within \(after)" }
    }

    /// `body`'s result, or `TimedOut` once `timeout` has passed; `body` is then cancelled and
    /// left to end on its own (a driver waiting for a connection may not stop at once).
    static func within<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        let pending = Pending<T>()
        return try await withCheckedThrowingContinuation { continuation in
            pending.set(continuation)
            let work = Task {
                do { pending.resume(with: .success(try await body())) } catch { pending.resume(with: .failure(error)) }
            }
            Task {
                try? await Task.sleep(for: timeout)
                if pending.resume(with: .failure(TimedOut(after: timeout))) { work.cancel() }
            }
        }
    }

    /// A continuation resumed once, by whichever comes first.
    final class Pending<T: Sendable>: Sendable {
        private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)

        func set(_ value: CheckedContinuation<T, any Error>) { continuation.withLock { $0 = value } }

        @discardableResult
        func resume(with result: Result<T, any Error>) -> Bool {
            guard let waiting = continuation.withLock({ $0.take() }) else { return false }
            waiting.resume(with: result)
            return true
        }
    }
}
