import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A private `dbus-daemon --session` on a socket in a fresh temporary directory: a real bus,
/// one per test, so tests run in parallel without seeing each other's names and signals.
public final class TestBus: Sendable {
    public struct StartFailure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The bus's address as dbus-daemon printed it (`unix:path=…,guid=…`).
    public let address: String
    /// The temporary directory holding the socket (removed by `stop`).
    public let directory: String
    private let process: Process
    private let stopped = Atomic<Bool>(false)

    public init() throws {
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
        try process.runCheckingDescriptors()
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
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

}
