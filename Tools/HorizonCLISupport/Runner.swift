import ArgumentParser
import Foundation
import HorizonRadio
import Synchronization

/// Runs a command with the exit codes the programs promise: 0 on success, 1 when the work
/// failed (one clear line on standard error), 2 for bad arguments (with the usage). Subcommands
/// may be `AsyncParsableCommand`s (awaited) or plain ones. A radio error is told with
/// `radioErrorMessage` (a program with the BlueZ radio adds the advice for bluetoothd's errors).
public enum CommandRunner {
    public static func main<Command: ParsableCommand>(
        _ type: Command.Type, radioErrorMessage: (RadioError) -> String = { $0.cliMessage }
    ) async -> Never {
        /// Exits once what the program still has to send is sent (`BeforeExit`).
        func finish(_ code: Int32) async -> Never {
            await BeforeExit.run()
            exit(code)
        }
        var parsed: (any ParsableCommand.Type)?
        do {
            var command = try type.parseAsRoot()
            parsed = Swift.type(of: command)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            await finish(0)
        } catch let error as CLIError {
            if CommandLine.wantsJSON { printJSONError(JSONErrorEnvelope(code: error.code, message: error.description)) }
            FileHandle.standardError.write(Data("error: \(error.description)\n".utf8))
            await finish(1)
        } catch let error as RadioError {
            if CommandLine.wantsJSON {
                printJSONError(
                    JSONErrorEnvelope(code: JSONErrorCode.radioUnavailable, message: radioErrorMessage(error)))
            }
            FileHandle.standardError.write(Data("error: \(radioErrorMessage(error))\n".utf8))
            await finish(1)
        } catch let error as CommandFailure {
            if CommandLine.wantsJSON {
                printJSONError(JSONErrorEnvelope(code: error.errorCode, message: error.description))
            }
            FileHandle.standardError.write(Data("error: \(error.description)\n".utf8))
            await finish(error.code)
        } catch {
            let code = type.exitCode(for: error)
            if code == .validationFailure {
                if CommandLine.wantsJSON {
                    printJSONError(
                        JSONErrorEnvelope(code: JSONErrorCode.invalidRequest, message: type.message(for: error)))
                }
                FileHandle.standardError.write(Data((usageError(error, root: type, command: parsed) + "\n").utf8))
                await finish(2)
            }
            if code == .success || code.rawValue == 0 { type.exit(withError: error) }
            if CommandLine.wantsJSON {
                printJSONError(JSONErrorEnvelope(code: JSONErrorCode.commandFailed, message: "\(error)"))
            }
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            await finish(1)
        }
    }
}

/// The work ran but did not succeed (a declined payment, a timeout), with its exit code.
public struct CommandFailure: Error, CustomStringConvertible {
    public let description: String
    public let code: Int32
    /// The code `--json` prints.
    public let errorCode: String
    public init(_ description: String, code: Int32 = 1, errorCode: String = JSONErrorCode.commandFailed) {
        self.description = description
        self.code = code
        self.errorCode = errorCode
    }
}

/// Runs `body` as a task that the first SIGINT or SIGTERM cancels (the roles' async calls then
/// end as they promise: a sale is cancelled at the register, a wallet declines if nothing was
/// signed yet). A second signal exits at once with status 130.
public func withInterruptCancellation<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let task = Task { try await body() }
    let signals = Mutex(0)
    let handler = InterruptHandler(queue: DispatchQueue(label: "horizon.signals")) { _ in
        let count = signals.withLock { count in
            count += 1
            return count
        }
        if count > 1 { exit(130) }
        task.cancel()
    }
    defer { withExtendedLifetime(handler) {} }
    return try await withTaskCancellationHandler {
        try await task.value
    } onCancel: {
        task.cancel()
    }
}

/// Runs `body`, cancelling it once `timeout` has passed: a task-group timeout. `body` decides
/// what cancellation means (the roles' async calls end as they promise), so its own result or
/// error is what comes back, early or late.
public func cancelling<T: Sendable>(
    after timeout: Duration, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        while let next = try await group.next() {
            group.cancelAll()
            if let value = next { return value }
        }
        throw CancellationError()
    }
}
