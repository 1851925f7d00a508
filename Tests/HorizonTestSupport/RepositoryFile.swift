import Foundation

/// Files of this repository (docs, policies, scripts) that tests hold to what the code does.
public enum RepositoryFile {
    /// The repository's root: three folders above this file.
    public static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// The text of `path`, relative to the repository's root.
    public static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Runs the repository's program or script at `path` (relative to the root) with
    /// `arguments`; returns its exit status and everything it printed, standard error included.
    public static func run(_ path: String, _ arguments: [String] = []) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = root.appendingPathComponent(path)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
