import Foundation
import HorizonTestSupport

/// Runs the built programs (`horizon-terminal`, `horizon-wallet`) as a person would.
struct ProgramResult {
    let status: Int32
    let standardOutput: String
    let standardError: String
}

enum Programs {
    /// The directory holding the built executables (next to the test bundle).
    static var binDirectory: URL {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        // The test binary may sit inside the .xctest bundle directory.
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("horizon-terminal").path),
            directory.path != "/"
        {
            directory.deleteLastPathComponent()
        }
        return directory
    }

    static func url(_ name: String) -> URL { binDirectory.appendingPathComponent(name) }

    /// Starts a program; read its result with `finish`.
    static func start(
        _ name: String, _ arguments: [String], input: String? = nil, keepInputOpen: Bool = false,
        environment: [String: String] = [:], inputFromNullDevice: Bool = false
    ) throws -> RunningProgram {
        try RunningProgram(
            url(name), arguments, input: input, keepInputOpen: keepInputOpen, environment: environment,
            inputFromNullDevice: inputFromNullDevice)
    }

    static func run(_ name: String, _ arguments: [String], input: String? = nil, environment: [String: String] = [:])
        throws -> ProgramResult
    {
        try RunningProgram(url(name), arguments, input: input, environment: environment).finish()
    }
}

final class RunningProgram: @unchecked Sendable {
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private var outputData = Data()
    private var errorData = Data()
    private let group = DispatchGroup()

    private let inputPipe = Pipe()

    init(
        _ executable: URL, _ arguments: [String], input: String?, keepInputOpen: Bool = false,
        environment: [String: String] = [:], inputFromNullDevice: Bool = false
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardOutput = output
        process.standardError = errors
        // /dev/null, as `< /dev/null` or a service gives it: no pipe, and no read event ever comes.
        process.standardInput = inputFromNullDevice ? FileHandle.nullDevice : inputPipe
        try process.runCheckingDescriptors()
        if let input { inputPipe.fileHandleForWriting.write(Data(input.utf8)) }
        if !keepInputOpen { try? inputPipe.fileHandleForWriting.close() }
        group.enter()
        DispatchQueue.global().async { [self] in
            outputData = output.fileHandleForReading.readAllUntilEndOfFile()
            group.leave()
        }
        group.enter()
        DispatchQueue.global().async { [self] in
            errorData = errors.fileHandleForReading.readAllUntilEndOfFile()
            group.leave()
        }
    }

    func finish(timeout: TimeInterval = 120) -> ProgramResult {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning {
            process.terminate()
            // A program that ignores SIGTERM too (hung) is killed, so one hang fails its test
            // instead of stopping the whole run.
            let grace = Date().addingTimeInterval(10)
            while process.isRunning, Date() < grace { Thread.sleep(forTimeInterval: 0.05) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        try? inputPipe.fileHandleForWriting.close()
        group.wait()
        return ProgramResult(
            status: process.terminationStatus, standardOutput: String(decoding: outputData, as: UTF8.self),
            standardError: String(decoding: errorData, as: UTF8.self))
    }

    func interrupt() { kill(process.processIdentifier, SIGINT) }

    /// Types `text` on the program's standard input (started with `keepInputOpen`).
    func type(_ text: String) { inputPipe.fileHandleForWriting.write(Data(text.utf8)) }
}

/// A fresh folder per test, removed afterwards, with short socket paths (sockaddr_un is small).
final class Sandbox {
    let url: URL

    init() throws {
        url = URL(fileURLWithPath: "/tmp/hz-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        // Stop a radio server a test may have auto-started on this sandbox's socket.
        _ = try? Programs.runSystem("/usr/bin/pkill", ["-f", url.path])
        try? FileManager.default.removeItem(at: url)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// `init` for a terminal and a wallet that trusts it; returns their data directories and a
    /// radio socket of this sandbox.
    func initializeTerminalAndWallet() throws -> (terminal: String, wallet: String, socket: String) {
        let terminal = path("terminal")
        let wallet = path("wallet")
        let initTerminal = try Programs.run("horizon-terminal", ["init", "--data-dir", terminal])
        guard initTerminal.status == 0 else { throw SandboxError(initTerminal.standardError) }
        let initWallet = try Programs.run(
            "horizon-wallet", ["init", "--data-dir", wallet, "--trust", terminal + "/anchor.pub"])
        guard initWallet.status == 0 else { throw SandboxError(initWallet.standardError) }
        return (terminal, wallet, path("radio.sock"))
    }
}

struct SandboxError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Programs {
    static func runSystem(_ path: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.runCheckingDescriptors()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
