import Foundation
import Synchronization

/// The reference's `NetworkReachabilityStatus`.
public enum NetworkReachabilityStatus: String, Sendable, Equatable {
    /// Nothing was tried yet.
    case unknown
    /// The last request or probe did not reach the server.
    case unreachable
    /// The server answered, slower than the threshold (an app may prefer the request proxy).
    case slow
    case fast
}

/// The reference's `NetworkReachability`: whether the Horizon server can be reached, derived
/// from the outcome of every service request (`IdentityClient.perform` reports them) and from a
/// periodic probe of `/health`, with the status as an `AsyncStream` and the reference's
/// `NetworkMightWorkAgainNotification` as an event each time the server answers again after
/// it could not be reached.
public final class NetworkReachability: Sendable {
    /// One probe: the time the server took to answer, or nil when it did not.
    public typealias Probe = @Sendable () async -> Duration?
    /// Waits between probes; tests pass one they control.
    public typealias Sleep = @Sendable (Duration) async throws -> Void

    public let interval: Duration
    /// Answers slower than this are `slow`.
    public let slowThreshold: Duration
    private let probe: Probe
    private let sleep: Sleep

    private struct Inner {
        var status: NetworkReachabilityStatus = .unknown
        var statusContinuations: [UUID: AsyncStream<NetworkReachabilityStatus>.Continuation] = [:]
        var againContinuations: [UUID: AsyncStream<Void>.Continuation] = [:]
        var probing: Task<Void, Never>?
    }

    private let inner = Mutex(Inner())

    public init(
        interval: Duration = .seconds(30), slowThreshold: Duration = .seconds(2), probe: @escaping Probe,
        sleep: @escaping Sleep = { try await Task.sleep(for: $0) }
    ) {
        self.interval = interval
        self.slowThreshold = slowThreshold
        self.probe = probe
        self.sleep = sleep
    }

    /// Reachability of the server at `serverURL`, probed with `GET /health`.
    public static func probingHealth(
        of serverURL: URL, interval: Duration = .seconds(30), slowThreshold: Duration = .seconds(2),
        timeout: Duration = .seconds(5)
    ) -> NetworkReachability {
        let client = HorizonServerClient(serverURL: serverURL, timeout: timeout)
        return NetworkReachability(interval: interval, slowThreshold: slowThreshold) {
            let started = ContinuousClock.now
            do {
                try await client.health()
                return ContinuousClock.now - started
            } catch {
                return nil
            }
        }
    }

    deinit { inner.withLock { $0.probing?.cancel() } }

    /// The reference's `reachabilityStatus`.
    public var reachabilityStatus: NetworkReachabilityStatus { inner.withLock { $0.status } }

    /// The current status, then each change.
    public func statusUpdates() -> AsyncStream<NetworkReachabilityStatus> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: NetworkReachabilityStatus.self, bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        // Registered and given the current status under the lock, so no change slips between.
        inner.withLock { inner in
            inner.statusContinuations[id] = continuation
            continuation.yield(inner.status)
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.inner.withLock { $0.statusContinuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// One element each time the server answers after it could not be reached: the moment to
    /// retry what failed (pending payments, a refresh).
    public func networkMightWorkAgain() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        inner.withLock { $0.againContinuations[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.inner.withLock { $0.againContinuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// A request got an answer from the server in `latency`.
    public func recordSuccess(latency: Duration) { update(latency > slowThreshold ? .slow : .fast) }

    /// A request did not reach the server (refused connection, DNS, time-out).
    public func recordFailure() { update(.unreachable) }

    /// Probes once now.
    public func probeNow() async {
        if let latency = await probe() { recordSuccess(latency: latency) } else { recordFailure() }
    }

    /// Probes now and then every `interval` until `stop()`.
    public func start() {
        inner.withLock { inner in
            guard inner.probing == nil else { return }
            inner.probing = Task { [weak self, interval, sleep] in
                while !Task.isCancelled {
                    await self?.probeNow()
                    do { try await sleep(interval) } catch { return }
                }
            }
        }
    }

    public func stop() {
        inner.withLock { inner in
            inner.probing?.cancel()
            inner.probing = nil
        }
    }

    private func update(_ status: NetworkReachabilityStatus) {
        // Yielded under the lock, so every stream sees the changes in the order they happened
        // (yield only enqueues; it runs no code of the consumer).
        inner.withLock { inner in
            let previous = inner.status
            inner.status = status
            if previous != status {
                for continuation in inner.statusContinuations.values { continuation.yield(status) }
            }
            if previous == .unreachable && status != .unreachable {
                for continuation in inner.againContinuations.values { continuation.yield(()) }
            }
        }
    }
}
