import ArgumentParser
import Foundation
import HorizonBlueZ
import HorizonCLISupport
import HorizonRadio
import HorizonSimulatedRadio
import Logging

#if canImport(Glibc)
    import Glibc
#endif

public enum RadioKind: String, ExpressibleByArgument, CaseIterable, Sendable {
    case simulated
    case bluez
}

/// The radio a command uses, shared by both programs.
public struct RadioOptions: ParsableArguments {
    @Option(help: "The radio: 'simulated' (a shared simulated room, no Bluetooth needed) or 'bluez'.")
    public var radio: RadioKind = .simulated

    @Option(
        help:
            "The simulated radio's socket (default: $XDG_RUNTIME_DIR/horizon-radio.sock or /tmp/horizon-radio-UID.sock)."
    )
    public var radioSocket: String?

    @Option(help: "This device's place in the simulated room, in metres, as X,Y (e.g. 0.3,0).")
    public var position: String?

    @Option(help: "The Bluetooth adapter to use with --radio bluez (default: the first powered one), e.g. hci1.")
    public var adapter: String?

    @Option(help: "The ATT MTU this device asks for (23...517).")
    public var mtu: Int = 247

    @Option(
        help:
            "This device's transmit power relative to a typical dongle, in dB (-40...40): raises or lowers the RSSI others measure."
    )
    public var txPower: Double = 0

    public init() {}

    public mutating func validate() throws {
        guard (23...517).contains(mtu) else { throw ValidationError("--mtu must be between 23 and 517") }
        guard txPower.isFinite, (-40...40).contains(txPower) else {
            throw ValidationError("--tx-power must be -40 to 40 dB")
        }
        if let position, Self.parsePosition(position) == nil {
            throw ValidationError("--position must be two numbers in metres, X,Y (e.g. 0.3,0)")
        }
    }

    public var socketPath: String {
        if let radioSocket { return radioSocket }
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return runtime + "/horizon-radio.sock"
        }
        return "/tmp/horizon-radio-\(getuid()).sock"
    }

    static func parsePosition(_ text: String) -> Position? {
        let parts = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let x = parts[0], let y = parts[1], x.isFinite, y.isFinite else { return nil }
        return Position(x: x, y: y)
    }

    /// The radio chosen: the simulated room as `name` (starting its server if none is running),
    /// or bluetoothd's adapter. Call `shutdown()` on it before exiting.
    public func open(name: String, defaultPosition: Position, logger: Logger) async throws -> any DeviceRadio {
        switch radio {
        case .bluez:
            do {
                let radio = try await BlueZRadio.open(adapter: adapter, logger: Logs.bluezLogger(following: logger))
                logger.info("BlueZ radio on \(radio.adapter.name) (\(radio.adapter.address))")
                return radio
            } catch {
                throw CLIError("cannot use Bluetooth: \(BlueZAdvice.sentence(for: error) ?? error.description)")
            }
        case .simulated:
            let place = position.flatMap(Self.parsePosition) ?? defaultPosition
            if let radio = try await join(place: place, name: name) { return radio }
            logger.info("no simulated radio at \(socketPath); starting one")
            try RadioServerLauncher.start(socketPath: socketPath)
            guard let radio = try await join(place: place, name: name) else {
                throw CLIError("cannot join the simulated radio at \(socketPath)")
            }
            return radio
        }
    }

    /// The device in the room, or nil when no server listens at the socket.
    private func join(place: Position, name: String) async throws -> RemoteSimulatedRadio? {
        let result: Result<RemoteSimulatedRadio, RadioError>
        do {
            result = .success(
                try await RemoteSimulatedRadio(socketPath: socketPath, name: name, position: place, attMTU: mtu))
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let radio):
            BeforeExit.add { await radio.untilSent() }
            return radio
        case .failure(.adapterUnavailable(.serviceUnavailable)): return nil
        case .failure(let error): throw CLIError("cannot join the simulated radio at \(socketPath): \(error)")
        }
    }
}

extension RadioOptions {
    /// The adapter's availability as bluetoothd reports it (for `status --radio bluez`).
    public static func blueZAvailability(adapter: String?) async -> (
        adapter: String?, availability: AdapterAvailability
    ) {
        let bluez: BlueZ
        do {
            bluez = try BlueZ()
        } catch {
            if case .adapterUnavailable(.serviceUnavailable) = error {
                // No bluetoothd: the kernel tells whether there is an adapter at all.
                return (adapter, HCIDevices.availabilityWithoutBlueZ())
            }
            if case .adapterUnavailable(let availability) = error { return (adapter, availability) }
            return (adapter, .serviceUnavailable)
        }
        do {
            let chosen = try await bluez.adapter(named: adapter)
            return (chosen.name, chosen.availability)
        } catch {
            if case .adapterUnavailable(let availability) = error { return (adapter, availability) }
            return (adapter, .unsupported)
        }
    }
}

/// Starts `<this program> radio` in the background, in its own session so the user's Ctrl-C
/// does not stop it, and waits until it says it is ready.
public enum RadioServerLauncher {
    /// An auto-started server exits after this long without devices.
    public static let idleExitSeconds = 60
    /// What the server writes on its ready pipe once its socket accepts devices.
    static let readyLine = "ready\n"
    /// The ready pipe's number in the server.
    static let readyDescriptor: Int32 = 3

    /// Starts the server (`executable`: this program by default) and returns its process id once
    /// its socket accepts devices. The server says so on a pipe, so this waits for one line (or
    /// the pipe's end, if the server exits first) rather than probing the socket over and over.
    @discardableResult
    public static func start(socketPath: String, executable: String? = nil, timeout: Duration = .seconds(3)) throws
        -> pid_t
    {
        let executable =
            executable ?? (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw CLIError("cannot start the simulated radio server (no pipe: \(String(cString: strerror(errno))))")
        }
        let readEnd = ends[0]
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        defer { close(readEnd) }
        // Above the descriptor it becomes in the server, which `dup2` onto itself would leave
        // close-on-exec.
        let writeEnd = fcntl(ends[1], F_DUPFD_CLOEXEC, readyDescriptor + 1)
        close(ends[1])
        guard writeEnd >= 0 else {
            throw CLIError("cannot start the simulated radio server (\(String(cString: strerror(errno))))")
        }
        let arguments = [
            executable, "radio", "--socket", socketPath, "--idle-exit", String(idleExitSeconds), "--ready-fd",
            String(readyDescriptor),
        ]
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // glibc's POSIX_SPAWN_SETSID (0x80); Swift does not see it because it needs _GNU_SOURCE.
        posix_spawnattr_setflags(&attributes, 0x80)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_RDWR, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, writeEnd, readyDescriptor)
        // The server outlives this program: it must not hold this program's files or pipes open.
        closeOnExecAboveStandardStreams()
        var cArguments = arguments.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, &cArguments, environ)
        // Only the server holds the write end now, so the pipe ends when the server goes.
        close(writeEnd)
        guard status == 0 else {
            throw CLIError("cannot start the simulated radio server (\(String(cString: strerror(status))))")
        }
        switch waitForLine(on: readEnd, timeout: timeout) {
        case .ready:
            return pid
        case .ended:
            // It exited without serving: most likely another program started a server at the
            // same moment and won the socket's lock, which serves as well.
            if (try? RemoteSimulatedRadio.probe(socketPath: socketPath)) == true { return pid }
            throw CLIError("the simulated radio server exited without serving \(socketPath)")
        case .timedOut:
            throw CLIError("the simulated radio server did not come up at \(socketPath) within \(timeout)")
        }
    }

    private enum ReadyWait { case ready, ended, timedOut }

    /// Blocks until the server's ready line, the pipe's end or the deadline (one `poll` per
    /// event on the pipe, not a timer).
    private static func waitForLine(on descriptor: Int32, timeout: Duration) -> ReadyWait {
        let deadline = ContinuousClock.now + timeout
        var received: [UInt8] = []
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return .timedOut }
            var request = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&request, 1, Int32(clamping: max(left.nanoseconds / 1_000_000, 1)))
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { return ready == 0 ? .timedOut : .ended }
            var chunk = [UInt8](repeating: 0, count: 64)
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return .ended }
            received += chunk[..<count]
            if received.contains(10) { return String(decoding: received, as: UTF8.self) == readyLine ? .ready : .ended }
        }
    }
}

/// Marks every descriptor above 2 close-on-exec, so a spawned program inherits none of them.
private func closeOnExecAboveStandardStreams() {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    for name in names {
        guard let descriptor = Int32(name), descriptor > 2 else { continue }
        let flags = fcntl(descriptor, F_GETFD)
        if flags >= 0 { _ = fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
    }
}
