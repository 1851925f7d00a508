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
        let process = ProcessBox(Process())
        process.value.executableURL = URL(fileURLWithPath: executable)
        process.value.arguments = Array(command.dropFirst())
        let stdin = Pipe()
        let stderr = Pipe()
        process.value.standardInput = stdin
        process.value.standardError = stderr
        process.value.standardOutput = FileHandle.nullDevice
        let exited = Latch<Int32>()
        process.value.terminationHandler = { finished in exited.fulfil(finished.terminationStatus) }
        do { try process.value.run() } catch {
            throw .commandNotRunnable(command: shown, reason: MessageDeliveryError.oneLine("\(error)"))
        }
        // Blocking reads and writes on threads of their own: the child reads its input while it
        // writes its errors, and a child that reads nothing cannot hold this task.
        let errorText = Latch<String>()
        let reader = stderr.fileHandleForReading
        DispatchQueue.global().async {
            let data = reader.readDataToEndOfFile()
            errorText.fulfil(String(decoding: data.prefix(4096), as: UTF8.self))
        }
        let writer = stdin.fileHandleForWriting
        DispatchQueue.global().async {
            try? writer.write(contentsOf: input)
            try? writer.close()
        }
        guard let status = await exited.wait(within: timeout) else {
            process.value.terminate()
            if await exited.wait(within: .seconds(2)) == nil {
                kill(process.value.processIdentifier, SIGKILL)
                _ = await exited.wait(within: .seconds(2))
            }
            return .timedOut
        }
        // A child of the command may still hold standard error open: wait a moment, not forever.
        return .exited(status, stderr: await errorText.wait(within: .seconds(2)) ?? "")
    }
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

/// `Process` is used from the task that started it and from its termination handler only.
private final class ProcessBox: @unchecked Sendable {
    let value: Process
    init(_ value: Process) { self.value = value }
}
