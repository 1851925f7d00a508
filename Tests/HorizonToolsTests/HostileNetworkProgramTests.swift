import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// The network is hostile: the programs speak plain HTTP only to this machine unless a lab flag
/// says otherwise (loudly), and a wallet pins the server's anchor only when its fingerprint is
/// confirmed by the person or given as the operator published it.
@Suite("Hostile network, with the programs", .serialized, .offTheCooperativePool)
struct HostileNetworkProgramTests {
    @Test func plainHTTPToAnotherMachineIsRefusedUnlessTheLabFlagSaysSoLoudly() throws {
        let sandbox = try Sandbox()
        let walletDir = sandbox.path("wallet")
        let register = [
            "register", "--server", "http://horizon.invalid:8080", "--name", "Alex", "--email", "alex@example.com",
            "--phone", "+4915112345678", "--data-dir", walletDir,
        ]
        let refused = try Programs.run("horizon-wallet", register)
        #expect(refused.status != 0)
        #expect(refused.standardError.contains("use https://"), "\(refused.standardError)")
        #expect(!refused.standardError.contains("WARNING"))

        let passwordFile = sandbox.path("password")
        try Data("correct horse battery staple\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
        let activate = try Programs.run(
            "horizon-terminal",
            [
                "activate", "--server", "http://192.0.2.10:8080", "--email", "owner@example.com", "--password-file",
                passwordFile, "--label", "Till", "--data-dir", sandbox.path("terminal"),
            ])
        #expect(activate.status != 0)
        #expect(activate.standardError.contains("use https://"), "\(activate.standardError)")

        // With the lab flag the URL is used (nothing answers there), and standard error says so.
        let lab = try Programs.run("horizon-wallet", register + ["--insecure-lab-http"])
        #expect(lab.status != 0)
        #expect(!lab.standardError.contains("use https://"), "\(lab.standardError)")
        #expect(lab.standardError.contains("WARNING: --insecure-lab-http"), "\(lab.standardError)")
        #expect(lab.standardError.contains("is not known (DNS; check the address)"), "\(lab.standardError)")
    }

    @Test func aWalletPinsNoAnchorWhoseFingerprintIsNotConfirmed() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let walletDir = sandbox.path("wallet")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        let (puk, link) = try Programs.startWalletRegistration(
            walletDir: walletDir, serverDir: serverDir, url: server.url, name: "Alex", email: "alex@example.com")
        #expect(try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", walletDir]).status == 0)
        let fingerprint = try Programs.anchorFingerprint(serverDir: serverDir)
        func pinned() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "\(walletDir)/trust")) ?? []).filter {
                $0.hasSuffix(".pub")
            }
        }

        // The anchor of another server (what a man in the middle would return) is not the one given.
        let other = String(fingerprint.map { $0 == "0" ? "1" : $0 == " " ? " " : "0" })
        let mismatch = try Programs.run(
            "horizon-wallet",
            ["activation-status", "--confirm-link", link, "--anchor-fingerprint", other, "--data-dir", walletDir])
        #expect(mismatch.status == 1)
        #expect(mismatch.standardError.contains("nothing was pinned"), "\(mismatch.standardError)")
        #expect(pinned().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: "\(walletDir)/account.json"))

        // Asked, and standard input ends: no.
        let unanswered = try Programs.run("horizon-wallet", ["activation-status", "--data-dir", walletDir])
        #expect(unanswered.status == 1)
        #expect(unanswered.standardOutput.contains(fingerprint), "\(unanswered.standardOutput)")
        #expect(unanswered.standardError.contains("not confirmed"), "\(unanswered.standardError)")
        #expect(pinned().isEmpty)

        // Asked, and answered no.
        let declined = try Programs.run(
            "horizon-wallet", ["activation-status", "--data-dir", walletDir], input: "n\n")
        #expect(declined.status == 1)
        #expect(pinned().isEmpty)

        // The refusals lost nothing: confirmed, the anchor is pinned.
        let confirmed = try Programs.run(
            "horizon-wallet", ["activation-status", "--data-dir", walletDir], input: "y\n")
        #expect(confirmed.status == 0, "\(confirmed.standardError)")
        #expect(pinned().count == 1)
    }
}
