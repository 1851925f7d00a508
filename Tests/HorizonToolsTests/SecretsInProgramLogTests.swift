import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// Secrets never reach a log, with the programs: a server logging at `trace` and a terminal and a
/// wallet run with `--verbose` through activation (right and wrong password), registration and
/// verification; neither the password nor a one-time code appears on any program's standard error.
@Suite("Secrets in the programs' logs", .serialized, .offTheCooperativePool)
struct SecretsInProgramLogTests {
    @Test func noPasswordOrCodeInAVerboseRun() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let password = "Pw-71d0-SECRET-never-logged"
        let passwordFile = sandbox.path("password")
        let wrongFile = sandbox.path("wrong")
        try Data("\(password)\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
        try Data("Pw-0e9b-WRONG-never-logged\n".utf8).write(to: URL(fileURLWithPath: wrongFile))
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        #expect(
            try Programs.run(
                "horizon-server",
                [
                    "merchants", "add", "Corner Bakery", "--email", "owner@bakery.example", "--currency", "EUR",
                    "--password-file", passwordFile, "--data-dir", serverDir,
                ]
            ).status == 0)
        let port = try freeLoopbackPort()
        let url = "http://127.0.0.1:\(port)"
        let server = try Programs.start(
            "horizon-server",
            ["serve", "--data-dir", serverDir, "--listen", "127.0.0.1:\(port)", "--log-level", "trace"])
        #expect(waitUntilListening(port: port), "the server did not start listening")
        var logs: [String] = []
        for file in [wrongFile, passwordFile] {
            let activate = try Programs.run(
                "horizon-terminal",
                [
                    "activate", "--server", url, "--email", "owner@bakery.example", "--password-file", file,
                    "--label", "Till 1", "--data-dir", sandbox.path("terminal"), "--force", "--verbose",
                ])
            logs.append(activate.standardError)
        }
        let walletDir = sandbox.path("wallet")
        let register = try Programs.run(
            "horizon-wallet",
            [
                "register", "--server", url, "--name", "Alex", "--email", "alex@example.com", "--phone",
                "+4915112345678", "--data-dir", walletDir, "--verbose",
            ])
        #expect(register.status == 0, "\(register.standardError)")
        logs.append(register.standardError)
        let smsCode = try Programs.outboxCode(serverDir: serverDir, to: "+4915112345678")
        let link = try Programs.outboxLink(serverDir: serverDir, to: "alex@example.com")
        let token = try #require(URLComponents(string: link)?.queryItems?.first { $0.name == "token" }?.value)
        let fingerprint = try Programs.anchorFingerprint(serverDir: serverDir)
        let wrong = smsCode == "00000000" ? "00000001" : "00000000"
        for puk in [wrong, smsCode] {
            let verify = try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", walletDir, "--verbose"])
            logs.append(verify.standardError)
        }
        let status = try Programs.run(
            "horizon-wallet",
            [
                "activation-status", "--confirm-link", link, "--anchor-fingerprint", fingerprint, "--data-dir",
                walletDir, "--verbose",
            ])
        #expect(status.status == 0, "\(status.standardError)")
        logs.append(status.standardError)
        server.interrupt()
        let served = server.finish(timeout: 10)
        logs.append(served.standardError)
        logs.append(served.standardOutput)
        let text = logs.joined(separator: "\n")
        #expect(text.contains("POST /v1/terminals/activate"), "the server logged at trace: \(served.standardError)")
        for secret in [password, "Pw-0e9b-WRONG-never-logged", smsCode, token] {
            #expect(!text.contains(secret), "a log holds \(secret)")
        }
        #expect(!text.contains("Authorization"))
    }
}
