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
    /// Held while values are yielded, so every stream hears the changes in order. `storage` is
    /// not held then: yielding takes the Swift runtime's lock of the task that iterates, and
    /// cancelling that task holds its lock while `onTermination` takes `storage`, so yielding
    /// under `storage` could deadlock (it did: a terminal stuck as its linger wait was cancelled
    /// while a connection ended).
    private let yieldOrder = Mutex(())

    public init(_ value: Value) { storage = Mutex(Storage(value: value)) }

    public var value: Value { storage.withLock { $0.value } }

    /// The current value, then every change, until the subscriber stops iterating.
    public func stream() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        let id = yieldOrder.withLock { _ in
            let (id, current) = storage.withLock { storage in
                let id = storage.nextID
                storage.nextID += 1
                storage.continuations[id] = continuation
                return (id, storage.value)
            }
            continuation.yield(current)
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
        let observers = yieldOrder.withLock { _ -> [@Sendable (Value) -> Void]? in
            let changed = storage.withLock {
                storage -> ([AsyncStream<Value>.Continuation], [@Sendable (Value) -> Void])? in
                guard storage.value != newValue else { return nil }
                storage.value = newValue
                return (Array(storage.continuations.values), storage.observers)
            }
            guard let (continuations, observers) = changed else { return nil }
            for continuation in continuations { continuation.yield(newValue) }
            return observers
        }
        guard let observers else { return }
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
