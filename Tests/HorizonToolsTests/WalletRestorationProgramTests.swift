import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

/// `horizon-wallet register --invitation-code`, `restore --email`, `verify PUK` and
/// `reactivate TOKEN` against a real `horizon-server serve`, all as processes, what was sent read
/// with `horizon-server outbox`.
@Suite("Wallet restoration and invitations with the programs", .serialized, .offTheCooperativePool)
struct WalletRestorationProgramTests {
    @Test func aRegistrationWithAnInvitationCodeNeedsOneTheOperatorIssued() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let walletDir = sandbox.path("wallet")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        func register(_ code: String) throws -> ProgramResult {
            try Programs.run(
                "horizon-wallet",
                [
                    "register", "--server", server.url, "--name", "Alice", "--email", "alice@example.com", "--phone",
                    "+4915112345678", "--invitation-code", code, "--data-dir", walletDir,
                ])
        }
        let unknown = try register("NOBODY-GAVE-THIS")
        #expect(unknown.status == 1)
        #expect(unknown.standardError.hasPrefix("error: invitation refused: "), "\(unknown.standardError)")
        #expect(unknown.standardError.contains("invitation_unknown"), "\(unknown.standardError)")
        #expect(!FileManager.default.fileExists(atPath: "\(walletDir)/registration.json"))
        let malformed = try register("a!")
        #expect(malformed.status == 1)
        #expect(malformed.standardError.contains("invitationCode"), "\(malformed.standardError)")

        let created = try Programs.run(
            "horizon-server", ["invitations", "create", "--code", "WELCOME-2027", "--data-dir", serverDir])
        #expect(created.status == 0, "\(created.standardError)")
        let accepted = try register("welcome 2027")
        #expect(accepted.status == 0, "\(accepted.standardError)")
        #expect(accepted.standardOutput.contains("horizon-wallet verify PUK"), "\(accepted.standardOutput)")
        #expect(FileManager.default.fileExists(atPath: "\(walletDir)/registration.json"))
    }

    @Test func aWalletIsRestoredOnANewDeviceAndTheOldKeyIsRefusedFromThatMoment() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let oldDir = sandbox.path("old-phone")
        let newDir = sandbox.path("new-phone")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        try Programs.registerWallet(walletDir: oldDir, serverDir: serverDir, url: server.url)
        let topUp = try Programs.run(
            "horizon-server", ["wallets", "top-up", "alice@example.com", "42.00", "--data-dir", serverDir])
        #expect(topUp.status == 0, "\(topUp.standardError)")
        let account = try json(try String(contentsOfFile: "\(oldDir)/account.json", encoding: .utf8))
        let fingerprint = try Programs.anchorFingerprint(serverDir: serverDir)

        let nothing = try Programs.run(
            "horizon-wallet", ["reactivate", String(repeating: "A", count: 43), "--data-dir", newDir])
        #expect(nothing.status == 1)
        #expect(nothing.standardError.contains("no restoration waits for its reactivation"), "\(nothing.standardError)")

        let restore = try Programs.run(
            "horizon-wallet",
            ["restore", "--server", server.url, "--email", "alice@example.com", "--data-dir", newDir, "--json"])
        #expect(restore.status == 0, "\(restore.standardError)")
        #expect(try json(restore.standardOutput)["kind"] as? String == "restoration")
        let doctor = try Programs.run("horizon-wallet", ["doctor", "--data-dir", newDir])
        #expect(
            doctor.standardOutput.contains(
                "not finished: `horizon-wallet verify PUK`, then `horizon-wallet reactivate TOKEN`."),
            "\(doctor.standardOutput)")
        let puk = try Programs.outboxCode(serverDir: serverDir, to: "+4915112345678")
        let wrong = try Programs.run(
            "horizon-wallet", ["verify", puk == "00000000" ? "00000001" : "00000000", "--data-dir", newDir])
        #expect(wrong.status == 1)
        #expect(wrong.standardError.contains("4 more wrong codes lock this restoration"), "\(wrong.standardError)")
        let verify = try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", newDir])
        #expect(verify.status == 0, "\(verify.standardError)")
        #expect(verify.standardOutput.contains("a reactivation token was mailed (email a•••@example.com)"))
        #expect(verify.standardOutput.contains("horizon-wallet reactivate TOKEN"))
        // The PUK again sends no second token, and the restoration waits on.
        let twice = try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", newDir])
        #expect(twice.status == 1)
        #expect(twice.standardError.contains("registration_used"), "\(twice.standardError)")
        let token = try Programs.outboxToken(serverDir: serverDir, to: "alice@example.com")

        // Until the token is used the old phone goes on working.
        #expect(try Programs.run("horizon-wallet", ["balance", "--data-dir", oldDir]).status == 0)
        let malformed = try Programs.run("horizon-wallet", ["reactivate", "not-a-token", "--data-dir", newDir])
        #expect(malformed.status == 2)
        #expect(malformed.standardError.contains("TOKEN must be the 43 letters"), "\(malformed.standardError)")
        let guessed = try Programs.run(
            "horizon-wallet",
            [
                "reactivate", String(repeating: "B", count: 43), "--anchor-fingerprint", fingerprint, "--data-dir",
                newDir,
            ])
        #expect(guessed.status == 1)
        #expect(guessed.standardError.contains("wrong code"), "\(guessed.standardError)")

        // The whole link works as well as the token alone.
        let reactivate = try Programs.run(
            "horizon-wallet",
            [
                "reactivate", "horizon-wallet://reactivate?token=\(token)", "--anchor-fingerprint", fingerprint,
                "--data-dir", newDir, "--json",
            ])
        #expect(reactivate.status == 0, "\(reactivate.standardError)")
        let reactivated = try json(reactivate.standardOutput)
        #expect(reactivated["walletId"] as? String == account["walletId"] as? String)
        #expect(reactivated["revokedKeys"] as? Int == 1)
        #expect(!FileManager.default.fileExists(atPath: "\(newDir)/registration.json"))
        let used = try Programs.run("horizon-wallet", ["reactivate", token, "--data-dir", newDir])
        #expect(used.status == 1)
        #expect(used.standardError.contains("no restoration waits"), "\(used.standardError)")

        // The old phone's key is refused from that moment; the account's balance is the new phone's.
        let old = try Programs.run("horizon-wallet", ["balance", "--data-dir", oldDir])
        #expect(old.status == 1)
        #expect(old.standardError.contains("revoked"), "\(old.standardError)")
        let new = try Programs.run("horizon-wallet", ["balance", "--data-dir", newDir])
        #expect(new.status == 0, "\(new.standardError)")
        #expect(new.standardOutput.contains("42.00"), "\(new.standardOutput)")
    }

    /// `restore --pinless`: once reactivated the server knows the new device's key is pinless
    /// and limits its payments, though the account was registered without `--pinless`.
    @Test func aPinlessRestorationIsPinlessAtTheServer() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let oldDir = sandbox.path("old-phone")
        let newDir = sandbox.path("new-phone")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        try Programs.registerWallet(walletDir: oldDir, serverDir: serverDir, url: server.url)
        let fingerprint = try Programs.anchorFingerprint(serverDir: serverDir)
        let restore = try Programs.run(
            "horizon-wallet",
            ["restore", "--pinless", "--server", server.url, "--email", "alice@example.com", "--data-dir", newDir])
        #expect(restore.status == 0, "\(restore.standardError)")
        let puk = try Programs.outboxCode(serverDir: serverDir, to: "+4915112345678")
        #expect(try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", newDir]).status == 0)
        let token = try Programs.outboxToken(serverDir: serverDir, to: "alice@example.com")
        let reactivate = try Programs.run(
            "horizon-wallet", ["reactivate", token, "--anchor-fingerprint", fingerprint, "--data-dir", newDir])
        #expect(reactivate.status == 0, "\(reactivate.standardError)")
        let status = try Programs.run("horizon-wallet", ["pin", "status", "--json", "--data-dir", newDir])
        #expect(status.status == 0, "\(status.standardError)")
        let state = try json(status.standardOutput)
        #expect(state["pinless"] as? Bool == true && state["pinlessPaymentLimit"] as? Int == 5000, "\(state)")
    }

    private func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
    }
}
