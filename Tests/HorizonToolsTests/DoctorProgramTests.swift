import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import Testing

/// `horizon-terminal doctor` and `horizon-wallet doctor` as an operator runs them: one line per
/// check, ok, warn or fail with a sentence, exit 1 when one fails.
@Suite("doctor", .offTheCooperativePool)
struct DoctorProgramTests {
    static func lines(_ result: ProgramResult) -> [String] {
        result.standardOutput.split(separator: "\n").map(String.init)
    }

    static func line(_ result: ProgramResult, _ subject: String) -> String? {
        lines(result).first { $0.dropFirst(6).hasPrefix(subject + " ") }
    }

    @Test func aSandboxTerminalAndWalletAreHealthyOnTheSimulatedRadio() throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let terminal = try Programs.run(
            "horizon-terminal", ["doctor", "--data-dir", terminalDir, "--radio-socket", socket])
        #expect(terminal.status == 0, "\(terminal.standardOutput) \(terminal.standardError)")
        #expect(
            Self.lines(terminal).map { String($0.prefix(19)) } == [
                "ok    adapter      ", "ok    bluetoothd   ", "ok    credential   ", "ok    server       ",
                "ok    clock        ", "ok    disk         ",
            ], "\(terminal.standardOutput)")
        #expect(
            Self.line(terminal, "adapter")
                == "ok    adapter      none needed: the simulated radio is used (socket \(socket)); pass --radio bluez to check Bluetooth."
        )
        #expect(Self.line(terminal, "bluetoothd") == "ok    bluetoothd   not used by the simulated radio.")
        #expect(
            Self.line(terminal, "credential")?.hasPrefix("ok    credential   the sandbox's own, valid until 20") == true
        )
        #expect(
            Self.line(terminal, "server") == "ok    server       none: a sandbox terminal settles in its own ledger.")
        #expect(
            Self.line(terminal, "disk")?.firstMatch(of: /^ok    disk         \d+ MB free for .*terminal\.$/) != nil,
            "\(terminal.standardOutput)")

        let wallet = try Programs.run("horizon-wallet", ["doctor", "--data-dir", walletDir, "--radio-socket", socket])
        #expect(wallet.status == 0, "\(wallet.standardOutput) \(wallet.standardError)")
        #expect(
            Self.line(wallet, "keys")
                == "ok    keys         the wallet's key is present (no PIN: `horizon-wallet pin set`); 1 trusted issuer."
        )
        #expect(
            Self.line(wallet, "registration")
                == "ok    registration none: a sandbox wallet, paying terminals that enrol it.")
        #expect(Self.line(wallet, "server") == "ok    server       none: a sandbox wallet has no server to ask.")

        let nothing = try Programs.run("horizon-terminal", ["doctor", "--data-dir", sandbox.path("nothing")])
        #expect(nothing.status == 1)
        #expect(
            Self.line(nothing, "terminal")?.hasPrefix(
                "fail  terminal     none in \(sandbox.path("nothing")): run `horizon-terminal init`")
                == true, "\(nothing.standardOutput)")
        #expect(nothing.standardError == "error: 1 of 4 checks failed\n")
    }

    @Test func anActivatedTerminalAndARegisteredWalletCheckTheServerAndFailWhenItIsDown() throws {
        let rig = try RemoteLedgerRig()
        let server = "http://127.0.0.1:\(rig.port)"
        func terminalDoctor() throws -> ProgramResult {
            try Programs.run(
                "horizon-terminal", ["doctor", "--data-dir", rig.terminalDir, "--radio-socket", rig.socket])
        }
        func walletDoctor() throws -> ProgramResult {
            try Programs.run("horizon-wallet", ["doctor", "--data-dir", rig.walletDir, "--radio-socket", rig.socket])
        }
        let terminal = try terminalDoctor()
        #expect(terminal.status == 0, "\(terminal.standardOutput) \(terminal.standardError)")
        #expect(
            Self.line(terminal, "server")?.firstMatch(
                of: /^ok    server       http:\/\/127\.0\.0\.1:\d+\/? answers \(\d+ ms\)\.$/)
                != nil, "\(terminal.standardOutput)")
        // Activation's credential: valid, its renewal date half-way through.
        #expect(
            Self.line(terminal, "credential")?.firstMatch(
                of:
                    /^ok    credential   valid until \d{4}-\d\d-\d\dT[0-9:]+Z; renewed from \d{4}-\d\d-\d\dT[0-9:]+Z on, while the terminal reaches http/
            ) != nil, "\(terminal.standardOutput)")
        #expect(
            Self.line(terminal, "clock")?.hasPrefix("ok    clock        agrees with the server's (within ") == true,
            "\(terminal.standardOutput)")

        let wallet = try walletDoctor()
        #expect(wallet.status == 0, "\(wallet.standardOutput) \(wallet.standardError)")
        #expect(Self.line(wallet, "registration")?.hasPrefix("ok    registration account ") == true)
        #expect(
            Self.line(wallet, "server")?.hasPrefix("ok    server       \(server)") == true, "\(wallet.standardOutput)")
        #expect(Self.line(wallet, "clock")?.hasPrefix("ok    clock        agrees with the server's") == true)
        #expect(
            Self.line(wallet, "token")
                == "warn  token        no valid daily token kept: offline payments need one; `horizon-wallet token` fetches it.",
            "\(wallet.standardOutput)")
        let token = try Programs.run("horizon-wallet", ["token", "--data-dir", rig.walletDir])
        #expect(token.status == 0, "\(token.standardError)")
        #expect(
            Self.line(try walletDoctor(), "token")?.firstMatch(
                of:
                    /^ok    token        daily token valid until \d{4}-\d\d-\d\dT[0-9:]+Z, 50\.00 EUR left for offline payments\.$/
            )
                != nil)

        #expect(rig.stopServer().status == 0)
        let down = try terminalDoctor()
        #expect(down.status == 1)
        #expect(
            Self.line(down, "server")
                == "fail  server       the server at \(server) does not answer (connection refused; is it running?).",
            "\(down.standardOutput)")
        #expect(Self.line(down, "clock") == "warn  clock        not compared: the server does not answer.")
        #expect(down.standardError == "error: 1 of 6 checks failed\n", "\(down.standardError)")
        let walletDown = try walletDoctor()
        #expect(walletDown.status == 1)
        #expect(Self.line(walletDown, "server")?.hasPrefix("fail  server       the server at \(server)") == true)
    }

    @Test func bluetoothdsVersionSaysHowATerminalsNotificationsTravel() {
        let old = BluetoothDaemon.check(version: "5.66", servesAsTerminal: true)
        #expect(
            old.outcome == .warn && old.sentence.hasPrefix("BlueZ 5.66: notifications go to every connected wallet"))
        for version in ["5.69", "5.72", "6.0"] {
            let new = BluetoothDaemon.check(version: version, servesAsTerminal: true)
            #expect(new.outcome == .ok && new.sentence.contains("each notification goes to its own wallet only"))
        }
        #expect(BluetoothDaemon.check(version: "5.66", servesAsTerminal: false).outcome == .ok)
        let missing = BluetoothDaemon.check(version: nil, servesAsTerminal: true)
        #expect(missing.outcome == .fail && missing.sentence.contains("install BlueZ"))
        #expect(BluetoothDaemon.parse("bluetoothctl: 5.66")! == (5, 66))
    }

    @Test func theClockIsJudgedAgainstTheServersSignatureWindow() {
        #expect(Doctor.clock(skew: 0.4).outcome == .ok)
        #expect(Doctor.clock(skew: -5).outcome == .ok)
        #expect(
            Doctor.clock(skew: 30).line
                == "warn  clock        30 s ahead of the server's: set up time synchronisation (systemd-timesyncd or chrony)."
        )
        let far = Doctor.clock(skew: -400)
        #expect(far.outcome == .fail && far.sentence.hasPrefix("400 s behind the server's: the server refuses"))
    }
}
