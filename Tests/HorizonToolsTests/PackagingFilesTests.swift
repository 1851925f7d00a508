import Foundation
import HorizonTestSupport
import Testing

/// The systemd units and the configuration files the Debian packages install belong together:
/// each unit reads the file in /etc/horizon that Tools/package.sh installs, and passes on the
/// variable that file sets (an empty one by default, so a fresh install runs the plain command).
@Suite("The packages' units read their /etc/horizon configuration")
struct PackagingFilesTests {
    @Test(arguments: [
        ("horizon-server.service", "server.env", "HORIZON_SERVER_OPTIONS"),
        ("horizon-terminal.service", "terminal.env", "HORIZON_TERMINAL_OPTIONS"),
    ])
    func theUnitReadsItsConfigurationFile(unit: String, file: String, variable: String) throws {
        let unitText = try RepositoryFile.text("udev/\(unit)")
        let lines = unitText.split(separator: "\n").map(String.init)
        #expect(lines.contains("EnvironmentFile=-/etc/horizon/\(file)"), "\(unit)")
        let execStart = try #require(lines.first { $0.hasPrefix("ExecStart=") })
        // Tools/package.sh installs the unit with the program in /usr/bin instead.
        #expect(execStart.hasPrefix("ExecStart=/usr/local/bin/"), "\(execStart)")
        #expect(execStart.hasSuffix(" $\(variable)"), "\(execStart)")

        let configuration = try RepositoryFile.text("Tools/packaging/\(file)")
        let settings = configuration.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(settings == ["\(variable)=\"\""], "\(file): \(settings)")

        let script = try RepositoryFile.text("Tools/package.sh")
        #expect(script.contains("install_conffile \(file) "), "package.sh does not install \(file)")
    }
}
