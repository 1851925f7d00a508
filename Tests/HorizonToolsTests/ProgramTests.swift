import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import Testing

@Suite("The command-line programs, run as processes", .serialized, .offTheCooperativePool)
struct ProgramTests {
    @Test func aTerminalAndAWalletInTwoProcessesPayEachOther() throws {
        let sandbox = try Sandbox()
        let terminalDir = sandbox.path("terminal")
        let walletDir = sandbox.path("wallet")
        let socket = sandbox.path("radio.sock")
        let initTerminal = try Programs.run(
            "horizon-terminal", ["init", "--data-dir", terminalDir, "--merchant-name", "Test Bakery"])
        #expect(initTerminal.status == 0, "\(initTerminal.standardError)")
        let initWallet = try Programs.run(
            "horizon-wallet", ["init", "--data-dir", walletDir, "--trust", terminalDir + "/anchor.pub"])
        #expect(initWallet.status == 0, "\(initWallet.standardError)")
        for file in ["terminal-key.pem", "anchor-key.pem", "ledger.sqlite", "credential.bin"] {
            let mode =
                try FileManager.default.attributesOfItem(atPath: terminalDir + "/" + file)[.posixPermissions]
                as? NSNumber
            #expect(mode?.intValue == 0o600, "\(file)")
        }

        // The terminal starts the shared radio itself; the wallet joins it.
        let terminal = try Programs.start(
            "horizon-terminal", ["pay", "12.50", "--data-dir", terminalDir, "--radio-socket", socket, "--json"])
        let wallet = try Programs.run(
            "horizon-wallet",
            ["pay", "--tip", "1.50", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
        let terminalResult = terminal.finish()
        #expect(wallet.status == 0, "wallet: \(wallet.standardOutput) \(wallet.standardError)")
        #expect(
            terminalResult.status == 0, "terminal: \(terminalResult.standardOutput) \(terminalResult.standardError)")
        #expect(wallet.standardOutput.contains("Test Bakery asks 12.50 EUR"))
        #expect(wallet.standardOutput.contains("Paid Test Bakery: 12.50 EUR + tip 1.50 EUR = 14.00 EUR"))
        let summary =
            try JSONSerialization.jsonObject(
                with: Data(terminalResult.standardOutput.utf8.drop(while: { $0 != UInt8(ascii: "{") })))
            as? [String: Any]
        #expect(JSONShapes.formatted(summary?["total"]) == "14.00 EUR")
        #expect(JSONShapes.formatted(summary?["tip"]) == "1.50 EUR")

        let transactions = try Programs.run("horizon-terminal", ["transactions", "--json", "--data-dir", terminalDir])
        #expect(transactions.status == 0)
        let rows = JSONShapes.transactions(transactions.standardOutput)
        #expect(rows.count == 1)
        #expect(rows.first?["outcome"] as? String == "approved")
        #expect(JSONShapes.money(rows.first?["amount"])?.minorUnits == 12_50)

        let history = try Programs.run("horizon-wallet", ["history", "--json", "--data-dir", walletDir])
        let report = try JSONSerialization.jsonObject(with: Data(history.standardOutput.utf8)) as? [String: Any]
        #expect((report?["receipts"] as? [Any])?.count == 1)
        #expect((report?["pending"] as? [Any])?.count == 0)

        // The money lives in the terminal's ledger, which the wallet does not open: the
        // sandbox wallet is told where to look, and the terminal shows it.
        let balance = try Programs.run("horizon-wallet", ["balance", "--data-dir", walletDir])
        #expect(balance.status == 1)
        #expect(balance.standardError.contains("error: this wallet is not registered with a Horizon server"))
        #expect(balance.standardError.contains("`horizon-terminal programs show --wallet-dir DIR`"))
        let shown = try Programs.run(
            "horizon-terminal", ["programs", "show", "--data-dir", terminalDir, "--wallet-dir", walletDir])
        #expect(shown.standardOutput.contains("bonus points  12"), "\(shown.standardOutput) \(shown.standardError)")
    }

    @Test func aWalletAnsweringNoDeclinesAndBothSidesSaySo() throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let terminal = try Programs.start(
            "horizon-terminal", ["pay", "3", "--data-dir", terminalDir, "--radio-socket", socket])
        let wallet = try Programs.run(
            "horizon-wallet", ["pay", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"],
            input: "n\n")
        // A decline is one wallet's word (any central could send one): the register shows it with
        // the wallet's code and keeps the session open until the cashier cancels.
        Thread.sleep(forTimeInterval: 1)
        terminal.interrupt()
        let terminalResult = terminal.finish()
        #expect(wallet.status == 1)
        #expect(wallet.standardError.contains("error: declined; nothing was charged"))
        #expect(terminalResult.standardOutput.contains("wallet connected: confirmation code "))
        #expect(terminalResult.standardOutput.contains("declined; the session stays open (Ctrl-C cancels)"))
        #expect(terminalResult.status == 1)
        #expect(terminalResult.standardError.contains("error: The payment was cancelled at the register."))
        let transactions = try Programs.run("horizon-terminal", ["transactions", "--data-dir", terminalDir])
        #expect(transactions.standardOutput.contains("no transactions yet"))
    }

    @Test func theTerminalServiceTakesPaymentsFromTheRegister() throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let control = sandbox.path("control.sock")
        let service = try startService(terminalDir: terminalDir, socket: socket, control: control)
        defer { _ = service.finish(timeout: 0) }
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: control), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }

        // Two payments in a row through the same service.
        for (amount, tip, total) in [("7.25", "0.75", "8.00"), ("2", "0", "2.00")] {
            let register = try Programs.start(
                "horizon-terminal", ["pay", amount, "--control-socket", control, "--json"])
            let wallet = try Programs.run(
                "horizon-wallet",
                ["pay", "--tip", tip, "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"])
            let result = register.finish()
            #expect(wallet.status == 0, "\(wallet.standardError)")
            #expect(result.status == 0, "\(result.standardError)")
            let summary = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
            #expect(JSONShapes.formatted(summary?["total"]) == "\(total) EUR")
        }
        // Refused as a bad argument before the service is asked.
        let refused = try Programs.run("horizon-terminal", ["pay", "abc", "--control-socket", control])
        #expect(refused.status == 2)
        #expect(refused.standardError.contains("'abc' is not an amount"))
        let transactions = try Programs.run("horizon-terminal", ["transactions", "--json", "--data-dir", terminalDir])
        #expect(JSONShapes.transactions(transactions.standardOutput).count == 2)

        let noService = try Programs.run(
            "horizon-terminal", ["pay", "1", "--control-socket", sandbox.path("none.sock")])
        #expect(noService.status == 1)
        #expect(noService.standardError.contains("no terminal service listens at"))
    }

    /// The control socket never replaces a non-socket path, refuses an overlong
    /// line, drops a client that says nothing within the read timeout, serves a bounded number of
    /// clients at once, and logs requests with control characters made harmless.
    @Test func theControlSocketIsBoundedAndRefusesToReplaceAFile() throws {
        let sandbox = try Sandbox()
        let (terminalDir, _, socket) = try sandbox.initializeTerminalAndWallet()
        let file = sandbox.path("not-a-socket")
        try "keep me".write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try Programs.run(
            "horizon-terminal",
            ["serve", "--data-dir", terminalDir, "--radio-socket", socket, "--control-socket", file])
        #expect(refused.status == 1)
        #expect(refused.standardError.contains("exists and is not a socket; refusing to replace it"))
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "keep me")

        let control = sandbox.path("control.sock")
        let service = try Programs.start(
            "horizon-terminal",
            [
                "serve", "--data-dir", terminalDir, "--radio-socket", socket, "--control-socket", control,
                "--control-read-timeout", "1", "--control-connections", "2", "--verbose",
            ])
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: control), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        func client() throws -> LineConnection {
            let connection = try LineConnection.connect(to: control)
            connection.setReadTimeout(seconds: 5)
            return connection
        }
        let long = try client()
        long.send(String(repeating: "x", count: 2000))
        #expect(long.readLine() == "error request longer than 1024 bytes")
        Thread.sleep(forTimeInterval: 0.2)
        // Two clients that say nothing take both slots; a third is refused at once.
        let silent = [try client(), try client()]
        Thread.sleep(forTimeInterval: 0.2)
        #expect(try client().readLine() == "error too many control connections (2); try again")
        // The read timeout frees them.
        #expect(silent[0].readLine() == nil)
        Thread.sleep(forTimeInterval: 0.3)
        let escape = try client()
        escape.send("st\u{1B}[2Jatus\u{202E}")
        #expect(escape.readLine()?.hasPrefix("error unknown command") == true)
        let status = try client()
        status.send("status")
        #expect(status.readLine()?.hasPrefix("adapter ") == true)
        service.interrupt()
        let result = service.finish(timeout: 10)
        #expect(result.standardError.contains("control request: st\u{FFFD}[2Jatus\u{FFFD}"))
        #expect(!result.standardError.contains("\u{1B}[2J"))
    }

    @Test func ctrlCAtTheWalletsPromptDeclines() throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let terminal = try Programs.start(
            "horizon-terminal", ["pay", "4", "--data-dir", terminalDir, "--radio-socket", socket])
        let wallet = try Programs.start(
            "horizon-wallet", ["pay", "--data-dir", walletDir, "--radio-socket", socket], keepInputOpen: true)
        // The offer is on screen well within three seconds; the person presses Ctrl-C at the prompt.
        Thread.sleep(forTimeInterval: 3)
        wallet.interrupt()
        let walletResult = wallet.finish(timeout: 10)
        Thread.sleep(forTimeInterval: 1)
        terminal.interrupt()
        let terminalResult = terminal.finish(timeout: 10)
        #expect(walletResult.standardOutput.contains("Pay 4.00 EUR + tip 0.00 EUR = 4.00 EUR? [y/N]"))
        #expect(walletResult.status == 1)
        #expect(walletResult.standardError == "error: declined; nothing was charged\n")
        #expect(terminalResult.standardOutput.contains("declined; the session stays open"))
        #expect(terminalResult.status == 1)
        #expect(terminalResult.standardError.contains("error: The payment was cancelled at the register."))
    }

    @Test func loyaltyIsSetUpAndRedeemedFromTheCommandLine() throws {
        let sandbox = try Sandbox()
        let (terminalDir, walletDir, socket) = try sandbox.initializeTerminalAndWallet()
        let ledger = terminalDir + "/ledger.sqlite"
        func terminal(_ arguments: [String]) throws -> ProgramResult {
            try Programs.run("horizon-terminal", arguments + ["--data-dir", terminalDir])
        }
        #expect(try terminal(["programs", "points", "150", "--wallet-dir", walletDir]).status == 0)
        #expect(try terminal(["programs", "coupon", "SUMMER", "--value", "5", "--wallet-dir", walletDir]).status == 0)
        let duplicate = try terminal(["programs", "coupon", "SUMMER", "--wallet-dir", walletDir])
        #expect(duplicate.status == 1)
        #expect(duplicate.standardError == "error: a coupon with code SUMMER already exists\n")
        let noWallet = try terminal(["programs", "points", "5"])
        #expect(noWallet.status == 2)
        #expect(noWallet.standardError.contains("name the wallet with --wallet KEYHEX or --wallet-dir DIR"))

        // A bonus redemption, then a coupon redemption, each as two processes.
        for (terminalArguments, walletArguments, expected) in [
            (
                ["redeem", "bonus", "--points", "100", "--reward", "Free coffee"], [String](),
                "Free coffee for 100 points"
            ),
            (["redeem", "coupon"], ["--coupon", "SUMMER"], "SUMMER"),
        ] {
            let register = try Programs.start(
                "horizon-terminal", terminalArguments + ["--data-dir", terminalDir, "--radio-socket", socket])
            let wallet = try Programs.run(
                "horizon-wallet",
                ["redeem", "--yes", "--data-dir", walletDir, "--radio-socket", socket, "--timeout", "30"]
                    + walletArguments)
            let result = register.finish()
            #expect(wallet.status == 0, "\(wallet.standardError)")
            #expect(result.status == 0, "\(result.standardError)")
            #expect(wallet.standardOutput.contains("Redeemed at Horizon Sandbox Café: \(expected)"))
        }
        // The loyalty is the terminal's to show in the sandbox; the wallet opens no file of it.
        let shown = try terminal(["programs", "show", "--json", "--wallet-dir", walletDir])
        let report = try JSONSerialization.jsonObject(with: Data(shown.standardOutput.utf8)) as? [String: Any]
        #expect(report?["points"] as? Int == 50)
        let list = report?["coupons"] as? [[String: Any]]
        #expect(list?.first?["code"] as? String == "SUMMER")
        #expect(list?.first?["redeemedAt"] != nil)
        for command in ["points", "coupons", "memberships"] {
            let refused = try Programs.run("horizon-wallet", [command, "--data-dir", walletDir])
            #expect(refused.status == 1, "\(command)")
            #expect(refused.standardError.hasPrefix("error: this wallet is not registered with a Horizon server"))
            let old = try Programs.run("horizon-wallet", [command, "--data-dir", walletDir, "--ledger", ledger])
            #expect(old.status == 2, "--ledger is gone: \(command)")
        }

        // The same coupon again: refused, one clear line on both sides. A decline ends that
        // wallet's attempt only (anyone in range can get one), so the register stays open until
        // the cashier cancels.
        let register = try Programs.start(
            "horizon-terminal", ["redeem", "coupon", "--data-dir", terminalDir, "--radio-socket", socket])
        let again = try Programs.run(
            "horizon-wallet",
            ["redeem", "--yes", "--coupon", "SUMMER", "--data-dir", walletDir, "--radio-socket", socket])
        Thread.sleep(forTimeInterval: 1)
        register.interrupt()
        let refused = register.finish()
        #expect(again.status == 1)
        #expect(again.standardError.contains("was declined"))
        #expect(refused.status == 1)
        #expect(
            refused.standardOutput.contains(
                "was declined (coupon SUMMER was already redeemed); nothing was charged; the session stays open"),
            "\(refused.standardOutput)")
    }

    @Test func badArgumentsExitWithCode2AndTheUsage() throws {
        let missingAmount = try Programs.run("horizon-terminal", ["pay"])
        #expect(missingAmount.status == 2)
        #expect(missingAmount.standardError.contains("Missing expected argument '<amount>'"))
        #expect(missingAmount.standardError.contains("Usage: horizon-terminal pay"))

        let sandbox = try Sandbox()
        _ = try Programs.run("horizon-terminal", ["init", "--data-dir", sandbox.path("t")])
        let ambiguous = try Programs.run("horizon-terminal", ["pay", "12.505", "--data-dir", sandbox.path("t")])
        #expect(ambiguous.status == 2)
        #expect(
            ambiguous.standardError.contains(
                "'12.505' has more decimals than EUR allows (2); amounts are never rounded"))

        let unknownFlag = try Programs.run("horizon-wallet", ["scan", "--frobnicate"])
        #expect(unknownFlag.status == 2)
        #expect(unknownFlag.standardError.contains("Unknown option '--frobnicate'"))

        let badPosition = try Programs.run("horizon-wallet", ["scan", "--position", "here"])
        #expect(badPosition.status == 2)
        #expect(badPosition.standardError.contains("--position must be two numbers in metres, X,Y (e.g. 0.3,0)"))

        let help = try Programs.run("horizon-wallet", ["pay", "--help"])
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("Ctrl-C before confirming declines the offer."))
    }

    @Test func aMissingDataDirectoryIsOneClearLine() throws {
        let result = try Programs.run("horizon-terminal", ["transactions", "--data-dir", "/nonexistent/horizon"])
        #expect(result.status == 1)
        #expect(
            result.standardError
                == "error: no data directory at /nonexistent/horizon; run `horizon-terminal init` first (or pass --data-dir)\n"
        )
        let wallet = try Programs.run("horizon-wallet", ["history", "--data-dir", "/nonexistent/wallet"])
        #expect(wallet.status == 1)
        #expect(
            wallet.standardError.hasPrefix(
                "error: no data directory at /nonexistent/wallet; run `horizon-wallet init` first"))
    }

    @Test func theBlueZRadioSaysInOneLineWhyBluetoothCannotBeUsed() throws {
        let sandbox = try Sandbox()
        _ = try Programs.run("horizon-terminal", ["init", "--data-dir", sandbox.path("t")])
        // No system bus here: the program must say what is missing and what to do, not crash.
        let noBus = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(sandbox.path("no-bus"))"]
        let result = try Programs.run(
            "horizon-terminal", ["pay", "1", "--radio", "bluez", "--data-dir", sandbox.path("t")], environment: noBus)
        #expect(result.status == 1)
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(
            lines.first
                == "error: cannot use Bluetooth: the system D-Bus is not running; start it (systemctl start dbus) before bluetoothd (org.freedesktop.DBus.Error.NoServer)"
        )
        let wallet = try Programs.run(
            "horizon-wallet", ["scan", "--radio", "bluez", "--data-dir", sandbox.path("w")], environment: noBus)
        #expect(wallet.status == 1)
        #expect(wallet.standardError.contains("cannot use Bluetooth: "))
        // `status` reports the same availability instead of failing.
        let status = try Programs.run(
            "horizon-terminal", ["status", "--radio", "bluez", "--json"], environment: noBus)
        #expect(status.status == 0)
        let report = try JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8)) as? [String: String]
        // Which of the two depends on whether this machine's kernel lists a Bluetooth controller.
        #expect(["no Bluetooth LE adapter", "Bluetooth service not running"].contains(report?["availability"] ?? ""))
        #expect(report?["radio"] == "bluez")
    }

    @Test func registerUsersAreManagedAndCheckedBeforePaying() throws {
        let sandbox = try Sandbox()
        let dir = sandbox.path("t")
        _ = try Programs.run("horizon-terminal", ["init", "--data-dir", dir])
        #expect(try Programs.run("horizon-terminal", ["register-users", "add", "Ana", "--data-dir", dir]).status == 0)
        #expect(try Programs.run("horizon-terminal", ["register-users", "add", "Ben", "--data-dir", dir]).status == 0)
        let list = try Programs.run("horizon-terminal", ["register-users", "list", "--json", "--data-dir", dir])
        #expect(try JSONSerialization.jsonObject(with: Data(list.standardOutput.utf8)) as? [String] == ["Ana", "Ben"])
        #expect(
            try Programs.run("horizon-terminal", ["register-users", "remove", "Ben", "--data-dir", dir]).status == 0)
        let again = try Programs.run("horizon-terminal", ["register-users", "remove", "Ben", "--data-dir", dir])
        #expect(again.status == 1)
        #expect(again.standardError == "error: no register user named 'Ben'\n")
        let unknown = try Programs.run("horizon-terminal", ["pay", "5", "--register", "Zed", "--data-dir", dir])
        #expect(unknown.status == 1)
        #expect(unknown.standardError.contains("unknown register user 'Zed'; known: Ana"))
    }

    @Test func initRefusesToOverwriteWithoutForce() throws {
        let sandbox = try Sandbox()
        let dir = sandbox.path("t")
        #expect(try Programs.run("horizon-terminal", ["init", "--data-dir", dir]).status == 0)
        let again = try Programs.run("horizon-terminal", ["init", "--data-dir", dir])
        #expect(again.status == 1)
        #expect(again.standardError.contains("already holds a terminal; pass --force"))
        #expect(try Programs.run("horizon-terminal", ["init", "--data-dir", dir, "--force"]).status == 0)
        let badCurrency = try Programs.run(
            "horizon-terminal", ["init", "--data-dir", sandbox.path("u"), "--currency", "XYZ"])
        #expect(badCurrency.status == 2)
        #expect(badCurrency.standardError.contains("unsupported currency 'XYZ'"))
    }
}
