import Foundation
import HorizonTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `horizon-server merchants add | passwd` as an operator types them: at a terminal the new
/// password is asked twice without echo, from a pipe or `--password-file` it is read once.
@Suite("horizon-server merchants passwd", .serialized, .offTheCooperativePool)
struct MerchantPasswordProgramTests {
    static let email = "owner@bakery.example"

    @Test func passwdSetsTheAdminsPasswordTypedTwiceAtATerminal() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        // From a pipe (a script): one line, not asked again.
        let added = try Programs.run(
            "horizon-server",
            ["merchants", "add", "Corner Bakery", "--email", Self.email, "--currency", "EUR", "--data-dir", serverDir],
            input: "first password\n")
        #expect(added.status == 0, "\(added.standardError)")
        let merchantID = try #require(
            added.standardOutput.firstMatch(of: /\((m_[0-9a-f]+)\)/).map { String($0.1) }, "\(added.standardOutput)")

        // At a terminal `add` asks twice too, and two different passwords add nothing.
        let mistyped = try TerminalSession.run(
            "horizon-server",
            [
                "merchants", "add", "Other Shop", "--email", "other@shop.example", "--currency", "EUR", "--data-dir",
                serverDir,
            ],
            answers: [
                ("New password for other@shop.example: ", "one password"), ("Repeat the new password: ", "another one"),
            ])
        #expect(mistyped.status == 1)
        #expect(mistyped.standardError.contains("error: the two passwords typed differ; nothing was changed"))
        let listed = try Programs.run("horizon-server", ["merchants", "list", "--data-dir", serverDir])
        #expect(!listed.standardOutput.contains("Other Shop"), "\(listed.standardOutput)")

        // passwd at a terminal: asked twice, never echoed, by id or by the admin's e-mail.
        let changed = try TerminalSession.run(
            "horizon-server", ["merchants", "passwd", merchantID, "--data-dir", serverDir],
            answers: [
                ("New password for \(Self.email): ", "second password"),
                ("Repeat the new password: ", "second password"),
            ])
        #expect(changed.status == 0, "\(changed.standardError)")
        #expect(
            changed.standardOutput
                == "Set the password of \(Self.email) (Corner Bakery, \(merchantID)); its dashboard sessions were ended.\n"
        )
        #expect(!changed.terminalOutput.contains("second password"), "echoed: \(changed.terminalOutput)")
        let differ = try TerminalSession.run(
            "horizon-server", ["merchants", "passwd", Self.email, "--data-dir", serverDir],
            answers: [
                ("New password for \(Self.email): ", "third password"), ("Repeat the new password: ", "third passwort"),
            ])
        #expect(differ.status == 1)
        #expect(differ.standardError.contains("the two passwords typed differ; nothing was changed"))
        let unknown = try Programs.run(
            "horizon-server", ["merchants", "passwd", "nobody@example.com", "--data-dir", serverDir], input: "x\n")
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("no merchant nobody@example.com here"), "\(unknown.standardError)")
        let tooShort = try Programs.run(
            "horizon-server", ["merchants", "passwd", Self.email, "--data-dir", serverDir], input: "short\n")
        #expect(tooShort.status == 1 && tooShort.standardError.contains("at least"), "\(tooShort.standardError)")

        // The server takes the new password and no longer the old one.
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        func signIn(_ password: String) throws -> ProgramResult {
            let file = sandbox.path("password-\(UUID().uuidString.prefix(6))")
            try (password + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            return try Programs.run(
                "horizon-terminal",
                [
                    "register-users", "list", "--admin-email", Self.email, "--password-file", file, "--server",
                    server.url, "--data-dir", sandbox.path("laptop"),
                ])
        }
        #expect(try signIn("second password").status == 0)
        let old = try signIn("first password")
        #expect(old.status != 0 && old.standardError.contains("invalid_credentials"), "\(old.standardError)")

        // From a file, as scripts set it.
        let file = sandbox.path("new-password")
        try "fourth password\n".write(toFile: file, atomically: true, encoding: .utf8)
        let fromFile = try Programs.run(
            "horizon-server", ["merchants", "passwd", Self.email, "--password-file", file, "--data-dir", serverDir])
        #expect(fromFile.status == 0, "\(fromFile.standardError)")
        #expect(try signIn("fourth password").status == 0)
        #expect(try signIn("second password").status != 0)
    }
}

/// A program whose standard input is a pseudo-terminal, as when a person types at a shell: each
/// answer is typed once its prompt is on standard error and the program has turned echo off.
struct TerminalSession {
    let status: Int32
    let standardOutput: String
    let standardError: String
    /// What the terminal showed back (echo) while the answers were typed.
    let terminalOutput: String

    static func run(_ name: String, _ arguments: [String], answers: [(prompt: String, line: String)]) throws
        -> TerminalSession
    {
        // posix_openpt and its kin are not visible to Swift; these are the ioctls they wrap
        // (TIOCSPTLCK and TIOCGPTN, the same on x86-64 and arm64).
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            throw SandboxError("no pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw SandboxError("cannot open the pseudo-terminal's other end") }
        defer {
            close(master)
            close(slave)
        }
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
        let process = Process()
        process.executableURL = Programs.url(name)
        process.arguments = arguments
        process.standardInput = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.runCheckingDescriptors()
        let errorDescriptor = errors.fileHandleForReading.fileDescriptor
        _ = fcntl(errorDescriptor, F_SETFL, fcntl(errorDescriptor, F_GETFL) | O_NONBLOCK)
        var errorText = ""
        var shown = ""
        func drain() {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while case let count = read(errorDescriptor, &buffer, buffer.count), count > 0 {
                errorText += String(decoding: buffer[..<count], as: UTF8.self)
            }
            while case let count = read(master, &buffer, buffer.count), count > 0 {
                shown += String(decoding: buffer[..<count], as: UTF8.self)
            }
        }
        func echoIsOff() -> Bool {
            var settings = termios()
            return tcgetattr(slave, &settings) == 0 && settings.c_lflag & tcflag_t(ECHO) == 0
        }
        let deadline = Date().addingTimeInterval(30)
        for (index, answer) in answers.enumerated() {
            let seenPrompts = answers[..<index].filter { $0.prompt == answer.prompt }.count
            // Typed only once the program asked and cannot echo it.
            while process.isRunning, Date() < deadline {
                drain()
                if errorText.components(separatedBy: answer.prompt).count - 1 > seenPrompts, echoIsOff() { break }
                Thread.sleep(forTimeInterval: 0.01)
            }
            guard process.isRunning else { break }
            let line = Array((answer.line + "\n").utf8)
            _ = line.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
        }
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        drain()
        _ = fcntl(errorDescriptor, F_SETFL, fcntl(errorDescriptor, F_GETFL) & ~O_NONBLOCK)
        errorText += String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return TerminalSession(
            status: process.terminationStatus,
            standardOutput: String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
            standardError: errorText, terminalOutput: shown)
    }
}
