import Foundation
import HorizonDBus
import HorizonTestSupport
import Synchronization
import Testing

extension TestBus {
    func connect() throws(DBusError) -> DBusConnection {
        try DBusConnection(.address(address))
    }
}

/// Runs `body` with a fresh bus, stopping it afterwards whatever happens.
func withBus<T>(_ body: (TestBus) async throws -> T) async throws -> T {
    let bus = try TestBus()
    defer { bus.stop() }
    return try await body(bus)
}

/// Collects a signal stream in the background so a test can wait for what it expects.
final class SignalRecorder: Sendable {
    private final class Storage: Sendable {
        let signals = Mutex<[DBusSignal]>([])
        let finished = Atomic<Bool>(false)
    }

    private let storage = Storage()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<DBusSignal>) {
        let storage = storage
        task = Task {
            for await signal in stream { storage.signals.withLock { $0.append(signal) } }
            storage.finished.store(true, ordering: .releasing)
        }
    }

    deinit { task.cancel() }

    var signals: [DBusSignal] { storage.signals.withLock { $0 } }

    /// Whether the stream has ended.
    var isFinished: Bool { storage.finished.load(ordering: .acquiring) }

    /// The signals once there are at least `count` (or whatever came within `timeout`).
    func wait(for count: Int, timeout: Duration = .seconds(20)) async -> [DBusSignal] {
        let deadline = ContinuousClock.now + timeout
        while signals.count < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return signals
    }

    /// Waits until the stream has ended (or `timeout`).
    func waitUntilFinished(timeout: Duration = .seconds(20)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !isFinished, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
        return isFinished
    }
}

/// Catches the `DBusError` an expression throws (or records an issue if it does not throw).
func dbusError<T>(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws(DBusError) -> T
) async -> DBusError? {
    do {
        let value = try await body()
        Issue.record("expected a DBusError, got \(value)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

/// The interface the tests export.
enum TestService {
    static let interface = "org.horizon.Test"
    static let path = "/org/horizon/test"
}
