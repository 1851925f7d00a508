import Foundation
import HorizonTestSupport
import Testing

/// One version everywhere: every program's `--version` and the Debian packages' version come from
/// `HorizonVersion.current` (Sources/HorizonCore/Version.swift).
@Suite("Every program and the packages carry one version", .offTheCooperativePool)
struct VersionProgramTests {
    /// The version as written in its one source file.
    static func sourceVersion() throws -> String {
        let source = try RepositoryFile.text("Sources/HorizonCore/Version.swift")
        let match = try #require(source.firstMatch(of: /public static let current = "([^"]+)"/))
        return String(match.1)
    }

    @Test(
        "each program prints the source's version for --version",
        arguments: ["horizon-server", "horizon-terminal", "horizon-wallet", "horizon-demo"])
    func programPrintsTheVersion(program: String) throws {
        let version = try Self.sourceVersion()
        let result = try Programs.run(program, ["--version"])
        #expect(result.status == 0, "\(program) --version: \(result.standardError)")
        #expect(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == version)
    }

    @Test("Tools/package.sh builds the packages with the same version")
    func packageScriptReadsTheSameVersion() throws {
        let version = try Self.sourceVersion()
        let script = RepositoryFile.root.appendingPathComponent("Tools/package.sh")
        let result = try RunningProgram(script, ["--print-version"], input: nil).finish()
        #expect(result.status == 0, "package.sh --print-version: \(result.standardError)")
        #expect(result.standardOutput == version + "\n")
    }
}
