import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import Synchronization
import Testing

/// The terminal as an admin runs it: `serve` stops cleanly on a signal, one data directory is
/// used by one program at a time, `init` then `activate` works as documented, `status` says
/// whether the server answers now, and a failed `init` leaves nothing half-made.
@Suite("The terminal as a well-behaved daemon", .serialized, .offTheCooperativePool)
struct TerminalDaemonProgramTests {
    /// systemd stops a service with SIGTERM (Ctrl-C is SIGINT): an activated terminal, with its
    /// credential renewal and offline forwarding running, ends with exit 0, not as a failure.
    @Test(arguments: [SIGTERM, SIGINT])
    func anActivatedTerminalServiceExitsZeroOnASignal(signal: Int32) async throws {
        let rig = try RemoteLedgerRig()
        let control = rig.sandbox.path("control.sock")
        let service = try Programs.start(
            "horizon-terminal",
            ["serve", "--data-dir", rig.terminalDir, "--radio-socket", rig.socket, "--control-socket", control])
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers on its control socket")

        kill(service.process.processIdentifier, signal)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning }, "still running after the signal")
        let result = service.finish(timeout: 1)
        #expect(result.status == 0, "\(result.standardOutput) \(result.standardError)")
        #expect(service.process.terminationReason == .exit)
        #expect(result.standardOutput.contains("settling through the Horizon server"))
        #expect(result.standardOutput.hasSuffix("terminal service stopped\n"), "\(result.standardOutput)")
        #expect(!result.standardError.contains("error"), "\(result.standardError)")
        #expect(!FileManager.default.fileExists(atPath: control))
    }

    /// A second program on a served data directory refuses in one sentence, and the first keeps
    /// its control socket (a second `serve` used to unlink it and listen in its place).
    @Test func aSecondProgramOnTheSameDataDirectoryRefusesAndLeavesTheFirstAlone() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, _, socket) = try sandbox.initializeTerminalAndWallet()
        // The default control socket, <data dir>/control.sock: the one a second serve would take.
        let control = terminalDir + "/control.sock"
        let service = try Programs.start(
            "horizon-terminal", ["serve", "--data-dir", terminalDir, "--radio-socket", socket])
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the first service answers")
        let refusal =
            "error: another horizon-terminal (pid \(service.process.processIdentifier)) is using \(terminalDir); stop it first\n"

        let radio = ["--radio-socket", socket]
        for arguments in [
            ["serve"] + radio, ["pay", "1.00"] + radio, ["redeem", "coupon"] + radio, ["init", "--force"],
            ["offline", "forward"], ["register-users", "add", "Ana"],
        ] {
            let second = try Programs.run("horizon-terminal", arguments + ["--data-dir", terminalDir])
            #expect(second.status == 1, "\(arguments): \(second.standardOutput) \(second.standardError)")
            #expect(second.standardError == refusal, "\(arguments)")
            #expect(second.standardOutput.isEmpty, "\(arguments): \(second.standardOutput)")
        }
        // Reading is not writing: the transactions and the journal can be looked at meanwhile.
        let transactions = try Programs.run("horizon-terminal", ["transactions", "--data-dir", terminalDir])
        #expect(transactions.status == 0, "\(transactions.standardError)")

        #expect(paymentState(at: control) == "idle", "the first service no longer answers on its control socket")
        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning })
        #expect(service.finish(timeout: 1).status == 0)
        // Its lock ended with it: the next program on the directory runs.
        let after = try Programs.run("horizon-terminal", ["register-users", "add", "Ana", "--data-dir", terminalDir])
        #expect(after.status == 0, "\(after.standardError)")
    }

    /// Another terminal given the same control socket refuses too: a socket that answers is a
    /// running service's, never replaced (only a stale one is).
    @Test func aControlSocketThatAnswersIsNeverTakenOver() async throws {
        let sandbox = try Sandbox()
        let (terminalDir, _, socket) = try sandbox.initializeTerminalAndWallet()
        let otherDir = sandbox.path("other")
        #expect(try Programs.run("horizon-terminal", ["init", "--data-dir", otherDir]).status == 0)
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the first service answers")

        let second = try Programs.run(
            "horizon-terminal",
            ["serve", "--data-dir", otherDir, "--radio-socket", socket, "--control-socket", control])
        #expect(second.status == 1)
        #expect(
            second.standardError
                == "error: a terminal service already listens at \(control); stop it first or choose another --control-socket\n"
        )
        #expect(paymentState(at: control) == "idle", "the first service no longer answers on its control socket")
        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning })
        #expect(service.finish(timeout: 1).status == 0)
    }

    /// The shop's maximum per payment holds for the register's socket as for `pay`: an amount
    /// over it is refused with the sentence `pay` gives, and nothing is advertised.
    @Test func theControlSocketRefusesAnAmountOverTheMaximum() async throws {
        let sandbox = try Sandbox()
        let terminalDir = sandbox.path("terminal")
        let initialized = try Programs.run(
            "horizon-terminal", ["init", "--data-dir", terminalDir, "--max-amount", "5"])
        #expect(initialized.status == 0, "\(initialized.standardError)")
        let control = sandbox.path("control.sock")
        let service = try Programs.start(
            "horizon-terminal",
            [
                "serve", "--data-dir", terminalDir, "--radio-socket", sandbox.path("radio.sock"), "--control-socket",
                control,
            ])
        defer { stop(service) }
        #expect(await eventually { paymentState(at: control) == "idle" }, "the service answers")

        let connection = try LineConnection.connect(to: control)
        connection.setReadTimeout(seconds: 10)
        connection.send("pay 10.00")
        let answer = connection.readLine()
        #expect(
            answer
                == "failed 10.00 EUR is more than this terminal's maximum of 5.00 EUR per payment; check the amount (the maximum is set with `horizon-terminal init --max-amount` or `activate --max-amount`)"
        )
        #expect(paymentState(at: control) == "idle")
        kill(service.process.processIdentifier, SIGTERM)
        #expect(await eventually(within: .seconds(30)) { !service.process.isRunning })
    }

    /// The wallet too: a second payment from one wallet while the first waits refuses.
    @Test func aSecondPaymentFromTheSameWalletRefuses() async throws {
        let sandbox = try Sandbox()
        let (_, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let arguments = ["pay", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"]
        let first = try Programs.start("horizon-wallet", arguments)
        defer { stop(first) }
        let pid = first.process.processIdentifier
        #expect(
            await eventually { (try? String(contentsOfFile: walletDir + "/lock", encoding: .utf8)) == "\(pid)\n" },
            "the first payment holds the wallet's lock")
        let second = try Programs.run("horizon-wallet", arguments)
        #expect(second.status == 1)
        #expect(
            second.standardError == "error: another horizon-wallet (pid \(pid)) is using \(walletDir); stop it first\n")
        first.interrupt()
        _ = first.finish(timeout: 30)
    }

    /// The documented order: `init`, then `activate` with no --force, as long as the sandbox took
    /// nothing; an activated terminal is replaced only with --force, and the refusal says so.
    @Test func initThenActivateWorksAsDocumented() throws {
        let rig = try RemoteLedgerRig()
        let terminalDir = rig.sandbox.path("till2")
        // A sandbox in dollars, a merchant in euros: the activated terminal charges in euros.
        let initialized = try Programs.run(
            "horizon-terminal", ["init", "--currency", "USD", "--data-dir", terminalDir])
        #expect(initialized.status == 0, "\(initialized.standardError)")
        let activate = activateArguments(rig, terminalDir)
        let activated = try Programs.run("horizon-terminal", activate)
        #expect(activated.status == 0, "\(activated.standardOutput) \(activated.standardError)")
        #expect(activated.standardOutput.contains("activated in \(terminalDir)"))
        #expect(!FileManager.default.fileExists(atPath: terminalDir + "/anchor-key.pem"), "the sandbox anchor's key")
        let status = try Programs.run(
            "horizon-terminal", ["status", "--seconds", "1", "--data-dir", terminalDir, "--radio-socket", rig.socket])
        #expect(status.status == 0, "\(status.standardError)")
        #expect(status.standardOutput.contains("server    online: \(rig.url) answers"), "\(status.standardOutput)")
        let sale = try Programs.run(
            "horizon-terminal",
            ["pay", "1.00", "--wait-for-wallet", "1", "--data-dir", terminalDir, "--radio-socket", rig.socket])
        #expect(sale.standardOutput.contains("1.00 EUR — waiting for a wallet"), "\(sale.standardError)")

        let again = try Programs.run("horizon-terminal", activate)
        #expect(again.status == 1)
        #expect(
            again.standardError
                == "error: \(terminalDir) already holds a terminal activated with \(rig.url); pass --force to replace it with a new activation (a new key; its journal is kept)\n"
        )
        let forced = try Programs.run("horizon-terminal", activate + ["--force"])
        #expect(forced.status == 0, "\(forced.standardError)")

        let help = try Programs.run("horizon-terminal", ["activate", "--help"])
        #expect(help.standardOutput.contains("--force"))
        #expect(help.standardOutput.contains("Not needed right after"), "\(help.standardOutput)")
    }

    /// A sandbox terminal that has taken a payment is activated only when asked: the refusal
    /// says what --force does.
    @Test func aSandboxThatTookAPaymentIsActivatedOnlyWithForce() throws {
        let rig = try RemoteLedgerRig()
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let terminal = try Programs.start(
            "horizon-terminal", ["pay", "2.00", "--data-dir", terminalDir, "--radio-socket", socket])
        let wallet = try Programs.run(
            "horizon-wallet", ["pay", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
        let paid = terminal.finish()
        #expect(paid.status == 0, "terminal: \(paid.standardError) wallet: \(wallet.standardError)")

        let activate = activateArguments(rig, terminalDir)
        let refused = try Programs.run("horizon-terminal", activate)
        #expect(refused.status == 1)
        #expect(
            refused.standardError
                == "error: \(terminalDir) holds a sandbox terminal that has taken payments; pass --force to activate it anyway (a new key from the server; its sandbox ledger and journal are kept)\n"
        )
        #expect(
            FileManager.default.fileExists(atPath: terminalDir + "/anchor-key.pem"), "the refusal changed nothing")
        let forced = try Programs.run("horizon-terminal", activate + ["--force"])
        #expect(forced.status == 0, "\(forced.standardError)")
        // The sandbox's payments are kept beside the activated terminal's own ledger.
        #expect(FileManager.default.fileExists(atPath: terminalDir + "/ledger.sqlite.sandbox"))
    }

    /// `status` asks the server now: a terminal whose last payment went through while the server
    /// was up says the server is offline once it is stopped.
    @Test func statusSaysTheServerIsOfflineWhenItIs() throws {
        let rig = try RemoteLedgerRig()
        try rig.pay("1.00", walletTimeout: 30).expectPaid()
        #expect(rig.stopServer().status == 0)

        let status = try Programs.run(
            "horizon-terminal",
            ["status", "--seconds", "1", "--data-dir", rig.terminalDir, "--radio-socket", rig.socket])
        #expect(status.status == 0, "\(status.standardError)")
        #expect(
            status.standardOutput.contains("server    offline: \(rig.url) does not answer (last answer "),
            "\(status.standardOutput)")
        let json = try Programs.run(
            "horizon-terminal",
            ["status", "--json", "--seconds", "1", "--data-dir", rig.terminalDir, "--radio-socket", rig.socket])
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        let offline = try #require(report["offline"] as? [String: Any])
        #expect(offline["server"] as? String == "offline")
    }

    /// A failed `init` leaves the data directory as it found it: absent when it was, unchanged
    /// when it held something (here a ledger path `init` cannot open, found after the keys
    /// were already written).
    @Test func aFailedInitLeavesNothingHalfMade() throws {
        let sandbox = try Sandbox()
        let fresh = sandbox.path("fresh")
        let badCurrency = try Programs.run("horizon-terminal", ["init", "--currency", "XYZ", "--data-dir", fresh])
        #expect(badCurrency.status != 0)
        #expect(!FileManager.default.fileExists(atPath: fresh))

        // A path under a file: refused in words, before anything is made.
        let file = sandbox.path("file")
        try Data("notes".utf8).write(to: URL(fileURLWithPath: file))
        let underFile = try Programs.run("horizon-terminal", ["init", "--data-dir", file + "/terminal"])
        #expect(underFile.status == 1)
        #expect(
            underFile.standardError
                == "error: cannot create the data directory \(file)/terminal: \(file) is a file, not a directory; choose another --data-dir\n"
        )
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "notes")

        let existing = sandbox.path("existing")
        try FileManager.default.createDirectory(
            atPath: existing + "/ledger.sqlite", withIntermediateDirectories: true)
        let failed = try Programs.run("horizon-terminal", ["init", "--data-dir", existing])
        #expect(failed.status == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: existing) == ["ledger.sqlite"])

        // Once the obstacle is gone, init runs without --force: nothing was left to replace.
        try FileManager.default.removeItem(atPath: existing + "/ledger.sqlite")
        let retried = try Programs.run("horizon-terminal", ["init", "--data-dir", existing])
        #expect(retried.status == 0, "\(retried.standardError)")
    }

    private func activateArguments(_ rig: RemoteLedgerRig, _ terminalDir: String) -> [String] {
        [
            "activate", "--server", rig.url, "--email", RemoteLedgerRig.email, "--password-file",
            rig.sandbox.path("password"), "--label", "Till 2", "--data-dir", terminalDir,
        ]
    }
}

extension RemoteLedgerRig {
    var url: String { "http://127.0.0.1:\(port)" }
}
