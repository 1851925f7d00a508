import Foundation
import HorizonCLISupport
import HorizonTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `horizon-wallet register`, `verify` and `pin` against a real `horizon-server serve`, all as
/// processes, the code read with `horizon-server outbox`.
@Suite("Wallet registration with the programs", .serialized, .offTheCooperativePool)
struct WalletRegistrationProgramTests {
    @Test func aWalletRegistersPinsTheAnchorAndSetsAPIN() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let walletDir = sandbox.path("wallet")
        let initServer = try Programs.run(
            "horizon-server", ["init", "--data-dir", serverDir, "--issuer-name", "Test Bank"])
        #expect(initServer.status == 0, "\(initServer.standardError)")
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        let url = server.url

        let register = try Programs.run(
            "horizon-wallet",
            [
                "register", "--server", url, "--name", "Alice", "--email", "alice@example.com", "--phone",
                "+49 151 12345678", "--data-dir", walletDir, "--json",
            ])
        #expect(register.status == 0, "\(register.standardError)")
        let started = try json(register.standardOutput)
        #expect(started["kind"] as? String == "registration")
        #expect(started["sentTo"] as? [String] == ["sms +49••••••••678", "email a•••@example.com"])

        let puk = try Programs.outboxCode(serverDir: serverDir, to: "+4915112345678")
        let link = try Programs.outboxLink(serverDir: serverDir, to: "alice@example.com")
        let fingerprint = try Programs.anchorFingerprint(serverDir: serverDir)

        // Nothing proven yet: the status says what is missing.
        let before = try Programs.run("horizon-wallet", ["activation-status", "--data-dir", walletDir])
        #expect(before.status == 0, "\(before.standardError)")
        #expect(before.standardOutput.contains("Not active yet"), "\(before.standardOutput)")
        #expect(before.standardOutput.contains("PUK (phone): not given"))
        #expect(before.standardOutput.contains("e-mail: not confirmed"))

        let wrong = try Programs.run(
            "horizon-wallet", ["verify", puk == "00000000" ? "00000001" : "00000000", "--data-dir", walletDir])
        #expect(wrong.status == 1)
        #expect(
            wrong.standardError.hasPrefix(
                "error: wrong code: the code is wrong; 4 more wrong codes lock this registration (registration_code_invalid, request "
            ), "\(wrong.standardError)")
        let malformed = try Programs.run("horizon-wallet", ["verify", "12ab", "--data-dir", walletDir])
        #expect(malformed.status == 2)
        #expect(malformed.standardError.contains("CODE must be the 8 digits you received"))
        // The e-mail is proven by its link: a second code is refused before anything is sent.
        let twoCodes = try Programs.run("horizon-wallet", ["verify", puk, "12345678", "--data-dir", walletDir])
        #expect(twoCodes.status == 2)
        #expect(twoCodes.standardError.contains("give the PUK alone"), "\(twoCodes.standardError)")

        let verify = try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", walletDir, "--json"])
        #expect(verify.status == 0, "\(verify.standardError)")
        let afterPuk = try json(verify.standardOutput)
        #expect(afterPuk["phoneProven"] as? Bool == true && afterPuk["active"] as? Bool == false)
        let waiting = try Programs.run(
            "horizon-wallet",
            ["activation-status", "--json", "--anchor-fingerprint", fingerprint, "--data-dir", walletDir])
        #expect(waiting.status == 0, "\(waiting.standardError)")
        #expect(try json(waiting.standardOutput)["emailProven"] as? Bool == false)
        #expect(FileManager.default.fileExists(atPath: "\(walletDir)/registration.json"))
        let badLink = try Programs.run(
            "horizon-wallet",
            ["activation-status", "--confirm-link", "https://example.com/nothing", "--data-dir", walletDir])
        #expect(badLink.status == 1)
        #expect(badLink.standardError.contains("not an activation link"), "\(badLink.standardError)")

        let active = try Programs.run(
            "horizon-wallet",
            [
                "activation-status", "--confirm-link", link, "--anchor-fingerprint", fingerprint, "--data-dir",
                walletDir, "--json",
            ])
        #expect(active.status == 0, "\(active.standardError)")
        // Used, the PUK and the link are no longer shown by the outbox.
        let afterUse = try Programs.run("horizon-server", ["outbox", "--data-dir", serverDir, "--json"])
        #expect(afterUse.status == 0 && afterUse.standardOutput.contains("a one-time code was here"))
        #expect(!afterUse.standardOutput.contains(puk) && !afterUse.standardOutput.contains(link))
        let verified = try json(active.standardOutput)
        #expect(verified["active"] as? Bool == true)
        let anchor = try json(
            try Programs.run("horizon-server", ["anchor", "--data-dir", serverDir, "--json"]).standardOutput)
        let pinned = try #require(verified["anchor"] as? [String: Any])
        #expect(pinned["fingerprint"] as? String == anchor["fingerprint"] as? String)
        #expect(pinned["name"] as? String == "Test Bank")
        #expect((verified["walletId"] as? String)?.hasPrefix("w_") == true)
        let keyID = try #require(pinned["keyId"] as? String)
        #expect(FileManager.default.fileExists(atPath: "\(walletDir)/trust/\(keyID).pub"), "the anchor is not pinned")
        #expect(!FileManager.default.fileExists(atPath: "\(walletDir)/registration.json"))

        // Registered once: nothing is pending any more, and the wallet says so.
        let again = try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", walletDir])
        #expect(again.status == 1)
        #expect(again.standardError.contains("error: nothing to verify: start with `horizon-wallet register`"))
        let statusAgain = try Programs.run("horizon-wallet", ["activation-status", "--data-dir", walletDir])
        #expect(statusAgain.status == 1)
        #expect(statusAgain.standardError.contains("no registration waits for its activation"))

        // Registered, the wallet is pinless until a PIN is set: the device protects it (systemd-creds
        // where it can encrypt for this user, else the file's permissions).
        let pinless = try Programs.run("horizon-wallet", ["pin", "status", "--data-dir", walletDir])
        #expect(pinless.status == 0, "\(pinless.standardError)")
        #expect(pinless.standardOutput.contains("pinless: the key is protected by this device only: "))
        #expect(
            pinless.standardOutput.contains("0600 in a 0700 directory")
                || pinless.standardOutput.contains("key protection: systemd-creds"), "\(pinless.standardOutput)")
        #expect(pinless.standardOutput.contains("the server was not told this wallet is pinless"))

        // A PIN from a file; the key file is then sealed under the PIN and the server's share,
        // and signing needs both.
        let pinFile = sandbox.path("pin")
        try "246810\n".write(toFile: pinFile, atomically: true, encoding: .utf8)
        let setPIN = try Programs.run("horizon-wallet", ["pin", "set", "--pin-file", pinFile, "--data-dir", walletDir])
        #expect(setPIN.status == 0, "\(setPIN.standardError)")
        #expect(setPIN.standardOutput.contains("the server counts wrong PINs"), "\(setPIN.standardOutput)")
        let keyText = try String(contentsOfFile: "\(walletDir)/wallet-key.pem", encoding: .utf8)
        #expect(keyText.hasPrefix("-----BEGIN HORIZON SERVER-COUNTED WALLET KEY-----"))
        for file in ["wallet-key.pem", "account.json"] {
            let mode =
                try FileManager.default.attributesOfItem(atPath: "\(walletDir)/\(file)")[.posixPermissions] as? NSNumber
            #expect(mode?.intValue == 0o600, "\(file)")
        }
        // No attempt record on the device: the server counts.
        #expect(!FileManager.default.fileExists(atPath: "\(walletDir)/pin-lock.json"))
        let setAgain = try Programs.run(
            "horizon-wallet", ["pin", "set", "--pin-file", pinFile, "--data-dir", walletDir])
        #expect(setAgain.status == 1)
        #expect(setAgain.standardError.contains("has a PIN already"), "\(setAgain.standardError)")
        let wrongPIN = try Programs.run(
            "horizon-wallet",
            ["pay", "--data-dir", walletDir, "--radio-socket", sandbox.path("radio.sock"), "--timeout", "1"],
            environment: ["HORIZON_WALLET_PIN": "135790"])
        #expect(wrongPIN.status == 1)
        #expect(wrongPIN.standardError == "error: wrong PIN; 9 more wrong PINs block the wallet\n")
        let status = try json(
            try Programs.run("horizon-wallet", ["pin", "status", "--json", "--data-dir", walletDir]).standardOutput)
        #expect(status["pinSet"] as? Bool == true && status["pinless"] as? Bool == false)
        #expect(status["protection"] as? String == "pin-counted-by-server")
        let wrongUnlock = try Programs.run(
            "horizon-wallet", ["pin", "unlock", "--data-dir", walletDir], environment: ["HORIZON_WALLET_PIN": "135790"])
        #expect(wrongUnlock.status == 1)
        #expect(wrongUnlock.standardError == "error: wrong PIN; 8 more wrong PINs block the wallet\n")
        let unlock = try Programs.run(
            "horizon-wallet", ["pin", "unlock", "--pin-file", pinFile, "--data-dir", walletDir])
        #expect(unlock.status == 0, "\(unlock.standardError)")
        #expect(unlock.standardOutput.contains("The PIN is right"))
        let change = try Programs.run(
            "horizon-wallet", ["pin", "change", "--data-dir", walletDir],
            environment: ["HORIZON_WALLET_PIN": "246810", "HORIZON_WALLET_NEW_PIN": "97531975"])
        #expect(change.status == 0, "\(change.standardError)")
        // Asking the server signs with the key: the PIN unlocks it.
        let balance = try Programs.run(
            "horizon-wallet", ["balance", "--data-dir", walletDir, "--json"],
            environment: ["HORIZON_WALLET_PIN": "97531975"])
        #expect(balance.status == 0, "\(balance.standardError)")
        #expect(try json(balance.standardOutput)["balances"] as? [Any] != nil)
        let oldPIN = try Programs.run(
            "horizon-wallet", ["balance", "--data-dir", walletDir], environment: ["HORIZON_WALLET_PIN": "246810"])
        #expect(oldPIN.status == 1)
        #expect(oldPIN.standardError.contains("wrong PIN"), "\(oldPIN.standardError)")

        // Deactivated, the wallet is pinless again: its key a plain file, the server told.
        let deactivate = try Programs.run(
            "horizon-wallet", ["pin", "deactivate", "--data-dir", walletDir],
            environment: ["HORIZON_WALLET_PIN": "97531975"])
        #expect(deactivate.status == 0, "\(deactivate.standardError)")
        #expect(deactivate.standardOutput.contains("The PIN is removed: the wallet is pinless."))
        let after = try json(
            try Programs.run("horizon-wallet", ["pin", "status", "--json", "--data-dir", walletDir]).standardOutput)
        #expect(after["pinless"] as? Bool == true && after["protection"] as? String == "pinless")
        let noPIN = try Programs.run("horizon-wallet", ["pin", "unlock", "--data-dir", walletDir])
        #expect(noPIN.status == 1)
        #expect(noPIN.standardError.contains("this wallet has no PIN yet"), "\(noPIN.standardError)")
        let free = try Programs.run("horizon-wallet", ["balance", "--data-dir", walletDir, "--json"])
        #expect(free.status == 0, "\(free.standardError)")
    }

    @Test func aPinlessRegistrationIsLimitedByTheServer() throws {
        let sandbox = try Sandbox()
        let serverDir = sandbox.path("server")
        let walletDir = sandbox.path("wallet")
        #expect(try Programs.run("horizon-server", ["init", "--data-dir", serverDir]).status == 0)
        let server = try ServedServer(dataDir: serverDir)
        defer { server.stop() }
        let register = try Programs.run(
            "horizon-wallet",
            [
                "register", "--pinless", "--server", server.url, "--name", "Bo", "--email", "bo@example.com",
                "--phone", "+49 151 7654321", "--data-dir", walletDir,
            ])
        #expect(register.status == 0, "\(register.standardError)")
        let puk = try Programs.outboxCode(serverDir: serverDir, to: "+491517654321")
        let link = try Programs.outboxLink(serverDir: serverDir, to: "bo@example.com")
        let fingerprint = try Programs.anchorFingerprint(serverDir: serverDir)
        #expect(try Programs.run("horizon-wallet", ["verify", puk, "--data-dir", walletDir]).status == 0)
        let active = try Programs.run(
            "horizon-wallet",
            ["activation-status", "--confirm-link", link, "--anchor-fingerprint", fingerprint, "--data-dir", walletDir])
        #expect(active.status == 0, "\(active.standardError)")
        let status = try Programs.run("horizon-wallet", ["pin", "status", "--json", "--data-dir", walletDir])
        #expect(status.status == 0, "\(status.standardError)")
        let state = try json(status.standardOutput)
        #expect(state["pinless"] as? Bool == true && state["protection"] as? String == "pinless")
        #expect(state["pinlessPaymentLimit"] as? Int == 5000, "\(status.standardOutput)")
        let text = try Programs.run("horizon-wallet", ["pin", "status", "--data-dir", walletDir])
        #expect(text.standardOutput.contains("the server limits each payment to 5000 minor units (pinless)"))
    }

    @Test func anUnreachableServerIsSaidSo() throws {
        let sandbox = try Sandbox()
        let port = try freeLoopbackPort()
        let register = try Programs.run(
            "horizon-wallet",
            [
                "register", "--server", "http://127.0.0.1:\(port)", "--name", "Alice", "--email", "alice@example.com",
                "--phone", "+4915112345678", "--data-dir", sandbox.path("wallet"),
            ])
        #expect(register.status == 1)
        #expect(
            register.standardError
                == "error: the server at http://127.0.0.1:\(port) does not answer (connection refused; is it running?)\n"
        )
        let badURL = try Programs.run(
            "horizon-wallet",
            [
                "register", "--server", "ftp://x", "--name", "A", "--email", "a@b.example", "--phone", "+4915112345678",
                "--data-dir", sandbox.path("wallet"),
            ])
        #expect(badURL.status == 2)
        #expect(badURL.standardError.contains("--server: ftp://x is not a server URL"))
    }

    private func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
    }
}

/// A loopback TCP port nothing listens on (bound and released; a race is possible but harmless here).
func freeLoopbackPort() throws -> Int {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { throw SandboxError("socket() failed") }
    defer { close(socket) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(socket, pointer, length) == 0 && getsockname(socket, pointer, &length) == 0
        }
    }
    guard bound else { throw SandboxError("bind() failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on the loopback `port` within `seconds`.
func waitUntilListening(port: Int, seconds: Double = 60) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(socket)
        if connected { return true }
        Thread.sleep(forTimeInterval: 0.1)
    }
    return false
}
