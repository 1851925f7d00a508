import Foundation
import HorizonCore

#if canImport(Glibc)
    import Glibc
#endif

/// Mail handed to the machine's MTA the Unix way: a sendmail-style command (`sendmail -t -i`
/// of Postfix or Exim, Debian's `msmtp`, …) reads the whole message on standard input and takes
/// the recipient from its `To:` header. Its exit status says whether the MTA took the mail;
/// queueing and retrying towards the recipient's server are then the MTA's work.
public struct SendmailTransport: MessageTransport {
    public static let defaultCommand = ["/usr/sbin/sendmail", "-t", "-i"]

    public let command: [String]
    public let from: MailAddress
    public let timeout: Duration

    public init(command: [String] = Self.defaultCommand, from: MailAddress, timeout: Duration = .seconds(30)) {
        self.command = command.isEmpty ? Self.defaultCommand : command
        self.from = from
        self.timeout = timeout
    }

    public func deliver(to recipient: String, subject: String, body: String, at time: UnixTime)
        async throws(MessageDeliveryError)
    {
        let message = try MailMessage(
            from: from, to: try MailAddress(address: recipient), subject: subject, body: body, date: time)
        try await deliver(message)
    }

    public func deliver(_ message: MailMessage) async throws(MessageDeliveryError) {
        let shown = command.joined(separator: " ")
        let outcome = try await CommandRunner.run(command, input: message.rendered(), timeout: timeout)
        switch outcome {
        case .exited(0, _): return
        case .exited(let status, let stderr):
            throw .commandFailed(command: shown, status: status, stderr: MessageDeliveryError.oneLine(stderr))
        case .timedOut:
            throw .commandTimedOut(command: shown, seconds: timeout.components.seconds)
        }
    }
}

/// Runs a program with bytes on its standard input, within a timeout, keeping what it says on
/// standard error.
enum CommandRunner {
    enum Outcome: Equatable {
        case exited(Int32, stderr: String)
        case timedOut
    }

    /// A write to a command that exited without reading its input must fail with EPIPE, not
    /// kill the server with SIGPIPE.
    private static let ignoreBrokenPipes: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    static func run(_ command: [String], input: [UInt8], timeout: Duration) async throws(MessageDeliveryError)
        -> Outcome
    {
        _ = ignoreBrokenPipes
        let shown = command.joined(separator: " ")
        guard let executable = command.first else {
            throw .commandNotRunnable(command: shown, reason: "no command is set")
        }
        var inputPipe: [Int32] = [-1, -1]
        var errorPipe: [Int32] = [-1, -1]
        guard pipe(&inputPipe) == 0 else { throw .commandNotRunnable(command: shown, reason: errnoText()) }
        guard pipe(&errorPipe) == 0 else {
            for descriptor in inputPipe { close(descriptor) }
            throw .commandNotRunnable(command: shown, reason: errnoText())
        }
        // Not inherited by the command (which gets them as 0 and 2) nor by other programs.
        for descriptor in inputPipe + errorPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inputPipe[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        // The command starts with no signal blocked and every signal at its default: a server's
        // threads block signals (and ignore SIGPIPE), which a child would otherwise inherit, and
        // a command that cannot be sent SIGTERM cannot be stopped kindly.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let arguments: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, arguments, environ)
        close(inputPipe[0])
        close(errorPipe[1])
        let (writeEnd, readEnd, child) = (inputPipe[1], errorPipe[0], pid)
        guard spawned == 0 else {
            close(writeEnd)
            close(readEnd)
            throw .commandNotRunnable(command: shown, reason: String(cString: strerror(spawned)))
        }
        // Blocking waits, reads and writes on threads of their own: the child reads its input
        // while it writes its errors, and a child that reads nothing cannot hold this task.
        let exited = Latch<Int32>()
        DispatchQueue.global().async {
            var status: Int32 = 0
            while waitpid(child, &status, 0) == -1, errno == EINTR {}
            // The exit status, or 128 + the signal that ended it, as a shell reports it.
            exited.fulfil(status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F))
        }
        let errorText = Latch<String>()
        DispatchQueue.global().async {
            var kept: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(readEnd, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                if kept.count < 4096 { kept += buffer[0..<min(count, 4096 - kept.count)] }
            }
            close(readEnd)
            errorText.fulfil(String(decoding: kept, as: UTF8.self))
        }
        DispatchQueue.global().async {
            var offset = 0
            while offset < input.count {
                let count = input[offset...].withUnsafeBytes { write(writeEnd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }  // EPIPE: it exited without reading everything
                offset += count
            }
            close(writeEnd)
        }
        guard let status = await exited.wait(within: timeout) else {
            kill(child, SIGTERM)
            if await exited.wait(within: .seconds(2)) == nil {
                kill(child, SIGKILL)
                _ = await exited.wait(within: .seconds(2))
            }
            return .timedOut
        }
        // A child of the command may still hold standard error open: wait a moment, not forever.
        return .exited(status, stderr: await errorText.wait(within: .seconds(2)) ?? "")
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}

/// A value that arrives once, from a thread or handler, awaited with a timeout by any number of tasks.
final class Latch<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value?
    private var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
    private var nextWaiter = 0

    func fulfil(_ value: Value) {
        let waiting = lock.withLock {
            self.value = value
            defer { waiters = [:] }
            return waiters.values
        }
        for waiter in waiting { waiter.resume(returning: value) }
    }

    /// The value, or nil when it has not come within `timeout`.
    func wait(within timeout: Duration) async -> Value? {
        let id = lock.withLock {
            nextWaiter += 1
            return nextWaiter
        }
        return await withCheckedContinuation { continuation in
            let ready: Value? = lock.withLock {
                if let value { return value }
                waiters[id] = continuation
                return nil
            }
            if let ready { return continuation.resume(returning: ready) }
            Task {
                try? await Task.sleep(for: timeout)
                self.lock.withLock { self.waiters.removeValue(forKey: id) }?.resume(returning: nil)
            }
        }
    }
}
