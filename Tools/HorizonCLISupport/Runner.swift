import ArgumentParser
import Foundation

/// Runs a command with the exit codes the programs promise: 0 on success, 1 when the work
/// failed (one clear line on standard error), 2 for bad arguments (with the usage).
public enum CommandRunner {
    public static func main<Command: ParsableCommand>(_ type: Command.Type) -> Never {
        do {
            var command = try type.parseAsRoot()
            try command.run()
            exit(0)
        } catch let error as CLIError {
            FileHandle.standardError.write(Data("error: \(error.description)\n".utf8))
            exit(1)
        } catch let error as CommandFailure {
            FileHandle.standardError.write(Data("error: \(error.description)\n".utf8))
            exit(error.code)
        } catch {
            let code = type.exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((type.fullMessage(for: error) + "\n").utf8))
                exit(2)
            }
            if code == .success || code.rawValue == 0 { type.exit(withError: error) }
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            exit(1)
        }
    }
}

/// The work ran but did not succeed (a declined payment, a timeout), with its exit code.
public struct CommandFailure: Error, CustomStringConvertible {
    public let description: String
    public let code: Int32
    public init(_ description: String, code: Int32 = 1) {
        self.description = description
        self.code = code
    }
}
