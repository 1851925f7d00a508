import Foundation
import HorizonDBus
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A private `dbus-daemon --session` on a socket in a fresh temporary directory: a real bus,
/// one per test, so tests run in parallel without seeing each other's names and signals.
final class TestBus: Sendable {
    struct StartFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// The bus's address as dbus-daemon printed it (`unix:path=…,guid=…`).
    let address: String
    /// The temporary directory holding the socket (removed by `stop`).
    let directory: String
    private let process: Process
    private let stopped = Atomic<Bool>(false)

    init() throws {
        var template = Array("/tmp/horizon-dbus-XXXXXX".utf8CString)
        guard
            let made = template.withUnsafeMutableBufferPointer({ buffer -> UnsafeMutablePointer<CChar>? in
                guard let base = buffer.baseAddress else { return nil }
                return mkdtemp(base)
            })
        else {
            throw StartFailure(description: "mkdtemp failed")
        }
        directory = String(cString: made)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = [
            "--session", "--nofork", "--nopidfile", "--print-address=1", "--address=unix:path=\(directory)/bus",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        // The daemon prints its address once it listens; wait for that line (bounded).
        let descriptor = output.fileHandleForReading.fileDescriptor
        var line: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(5)
        while !line.contains(UInt8(ascii: "\n")), ContinuousClock.now < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            line += buffer[..<count]
        }
        let printed = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard printed.hasPrefix("unix:") else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: directory)
            throw StartFailure(description: "dbus-daemon did not print its address (got '\(printed)')")
        }
        address = printed
    }

    deinit { stop() }

    /// Kills the daemon (by its PID) and removes its directory. Idempotent.
    ///
    /// SIGKILL rather than `terminate()`: Process spawns from a libdispatch worker thread, whose
    /// blocked signal mask the daemon inherits, so it never sees a SIGTERM.
    func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

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
    func wait(for count: Int, timeout: Duration = .seconds(3)) async -> [DBusSignal] {
        let deadline = ContinuousClock.now + timeout
        while signals.count < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return signals
    }

    /// Waits until the stream has ended (or `timeout`).
    func waitUntilFinished(timeout: Duration = .seconds(3)) async -> Bool {
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
