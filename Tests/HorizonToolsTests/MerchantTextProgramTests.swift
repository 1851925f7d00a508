import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// The merchant commands print the server's text made safe: a register user stored with an
/// escape sequence and a bidi override (by an older server, or a database edited by hand)
/// reaches the terminal's screen as U+FFFD, never as a control sequence.
@Suite("Merchant commands print server text safely", .serialized, .offTheCooperativePool)
struct MerchantTextProgramTests {
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "needs sqlite3"))
    func registerUsersWithControlCharactersArePrintedSanitised() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let passwordFile = sandbox.path("password")
        try Data("correct horse battery staple\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let added = try Programs.run(
            "horizon-server",
            [
                "merchants", "add", "Corner Bakery", "--email", "owner@bakery.example", "--currency", "EUR",
                "--password-file", passwordFile, "--data-dir", serverDir,
            ])
        #expect(added.status == 0, "\(added.standardError)")
        // Stored behind the API's back: an ANSI "clear screen" and a right-to-left override.
        let database = serverDir + "/horizon.sqlite"
        let insert = """
            INSERT INTO register_users(merchant_id, user_id, name, added_at)
            SELECT id, 'evil', 'Eve' || char(27) || '[2J' || char(8238) || 'dlrow', 0 FROM merchants;
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [database, insert]
        try process.runCheckingDescriptors()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)

        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        let port = server.port
        let listed = try Programs.run(
            "horizon-terminal",
            [
                "register-users", "list", "--admin-email", "owner@bakery.example", "--password-file", passwordFile,
                "--server", "http://127.0.0.1:\(port)", "--data-dir", sandbox.path("laptop"),
            ])
        #expect(listed.status == 0, "\(listed.standardError)")
        #expect(listed.standardOutput.contains("evil\tEve\u{FFFD}[2J\u{FFFD}dlrow"), "\(listed.standardOutput)")
        #expect(!listed.standardOutput.unicodeScalars.contains("\u{1B}"))
        #expect(!listed.standardOutput.unicodeScalars.contains("\u{202E}"))
    }
}
