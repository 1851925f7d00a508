import Synchronization

/// A value that changes over time: its current value, synchronous observers for the layers
/// inside the package, and an `AsyncStream` of changes per subscriber for apps (Linux has no KVO).
public final class ObservableState<Value: Sendable & Equatable>: Sendable {
    private struct Storage {
        var value: Value
        var continuations: [Int: AsyncStream<Value>.Continuation] = [:]
        var observers: [@Sendable (Value) -> Void] = []
        var nextID = 0
    }

    private let storage: Mutex<Storage>

    public init(_ value: Value) { storage = Mutex(Storage(value: value)) }

    public var value: Value { storage.withLock { $0.value } }

    /// The current value, then every change, until the subscriber stops iterating.
    public func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        let id = storage.withLock { storage in
            let id = storage.nextID
            storage.nextID += 1
            storage.continuations[id] = continuation
            continuation.yield(storage.value)
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.storage.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// The first value (the current one included) that satisfies `predicate`; nil if the calling
    /// task is cancelled first. How the async API waits for a state.
    public func first(where predicate: (Value) -> Bool) async -> Value? {
        for await value in stream() where predicate(value) { return value }
        return nil
    }

    /// Calls `observer` synchronously after every change (not for the current value).
    public func observe(_ observer: @escaping @Sendable (Value) -> Void) {
        storage.withLock { $0.observers.append(observer) }
    }

    /// Sets the value; observers and streams hear of it only if it changed.
    public func set(_ newValue: Value) {
        let (changed, observers) = storage.withLock { storage -> (Bool, [@Sendable (Value) -> Void]) in
            guard storage.value != newValue else { return (false, []) }
            storage.value = newValue
            for continuation in storage.continuations.values { continuation.yield(newValue) }
            return (true, storage.observers)
        }
        guard changed else { return }
        for observer in observers { observer(newValue) }
    }
}

/// A stream of events (finished payments), fanned out to every subscriber.
public final class EventBroadcaster<Event: Sendable>: Sendable {
    private let continuations = Mutex<[Int: AsyncStream<Event>.Continuation]>([:])
    private let nextID = Mutex(0)

    public init() {}

    public func stream() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .unbounded)
        let id = nextID.withLock { id in
            defer { id += 1 }
            return id
        }
        continuations.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    public func send(_ event: Event) {
        for continuation in continuations.withLock({ Array($0.values) }) { continuation.yield(event) }
    }
}
