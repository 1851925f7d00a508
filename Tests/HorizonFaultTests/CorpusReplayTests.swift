import Foundation
import HorizonTestSupport
import Testing

/// Replays the committed fuzz corpus (Tools/horizon-fuzz/corpus) through the built `horizon-fuzz`
/// program, the same entry functions libFuzzer drives: every input that ever found new coverage,
/// and every crash turned regression, must still pass in a normal build.
@Suite("Fuzz corpus replay", .offTheCooperativePool)
struct CorpusReplayTests {
    static let targets = ["frame", "message", "advertisement", "handshake"]

    /// The package's root, from this file's place in it.
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// `horizon-fuzz` in the build's products directory, next to (or above) the test bundle.
    static var program: URL? {
        var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("horizon-fuzz")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        return nil
    }

    @Test(arguments: targets)
    func theCommittedCorpusReplaysWithoutAFinding(target: String) throws {
        let corpus = Self.packageRoot.appendingPathComponent("Tools/horizon-fuzz/corpus/\(target)")
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        #expect(files.count >= 5, "the \(target) corpus is missing or nearly empty")
        let program = try #require(Self.program, "horizon-fuzz is not built (swift build --build-tests builds it)")
        let process = Process()
        process.executableURL = program
        process.arguments = ["replay", target, corpus.path]
        // A finding traps; Swift's crash reporter would only make that slower to report.
        process.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.runCheckingDescriptors()
        let text = String(decoding: output.fileHandleForReading.readAllUntilEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "horizon-fuzz replay \(target) failed:\n\(text)")
        #expect(text.contains("replayed \(files.count) input(s)"), "\(text)")
    }
}
