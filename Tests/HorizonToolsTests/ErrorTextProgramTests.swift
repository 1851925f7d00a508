import Foundation
import HorizonCLISupport
import HorizonRadioCLISupport
import HorizonTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The errors a person meets at the command line, as they read them: one sentence with the
/// reason and what to do, no library text or code names, and the exit code (2 for bad
/// arguments, with the subcommand's usage; 1 when the work failed).
@Suite("Error texts of the programs", .serialized, .offTheCooperativePool)
struct ErrorTextProgramTests {
    /// One command line and what it must print on standard error, exactly.
    struct Case: CustomStringConvertible {
        let program: String
        let arguments: [String]
        let standardError: String
        let status: Int32
        var description: String { "\(program) \(arguments.joined(separator: " "))" }
    }

    static func usage(_ message: String, _ usage: String, _ command: String) -> String {
        "Error: \(message)\nUsage: \(usage)\n  See '\(command) --help' for more information.\n"
    }

    @Test func eachCaseReadsAsWrittenWithItsExitCode() throws {
        let sandbox = try Sandbox()
        let (terminal, wallet, socket) = try sandbox.initializeTerminalAndWallet()
        let limited = sandbox.path("limited")
        let initLimited = try Programs.run("horizon-terminal", ["init", "--data-dir", limited, "--max-amount", "500"])
        #expect(initLimited.status == 0, "\(initLimited.standardError)")
        let passwordFile = sandbox.path("password")
        try "secret\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let stoppedServer = "http://127.0.0.1:\(try Self.closedPort())"
        let payUsage = "horizon-terminal pay [<options>] <amount>"

        let cases: [Case] = [
            Case(
                program: "horizon-terminal", arguments: ["pay", "abc", "--data-dir", terminal],
                standardError: Self.usage(
                    "'abc' is not an amount; write digits with an optional '.', e.g. 12.50", payUsage,
                    "horizon-terminal pay"), status: 2),
            Case(
                program: "horizon-terminal", arguments: ["pay", "1.234", "--data-dir", terminal],
                standardError: Self.usage(
                    "'1.234' has more decimals than EUR allows (2); amounts are never rounded", payUsage,
                    "horizon-terminal pay"), status: 2),
            Case(
                program: "horizon-terminal", arguments: ["pay", "1", "--currency", "XYZ", "--data-dir", terminal],
                standardError: Self.usage(
                    "unsupported currency 'XYZ'; use an ISO 4217 code such as EUR, USD, JPY", payUsage,
                    "horizon-terminal pay"), status: 2),
            Case(
                program: "horizon-wallet", arguments: ["pay", "--tip", "abc", "--data-dir", wallet],
                standardError: Self.usage(
                    "--tip: 'abc' is not an amount; write digits with an optional '.', e.g. 12.50",
                    "horizon-wallet pay <options>", "horizon-wallet pay"), status: 2),
            Case(
                program: "horizon-terminal",
                arguments: ["refund", "0123456789abcdef0123456789abcdef", "--amount", "1,50", "--data-dir", terminal],
                standardError:
                    "Error: --amount: '1,50' is not an amount; write digits with an optional '.', e.g. 12.50\n",
                status: 2),
            Case(
                program: "horizon-terminal", arguments: ["pay", "12500", "--data-dir", terminal],
                standardError:
                    "error: 12500.00 EUR is more than this terminal's maximum of 10000.00 EUR per payment; check the amount (the maximum is set with `horizon-terminal init --max-amount` or `activate --max-amount`)\n",
                status: 1),
            Case(
                program: "horizon-terminal", arguments: ["pay", "500.01", "--data-dir", limited],
                standardError:
                    "error: 500.01 EUR is more than this terminal's maximum of 500.00 EUR per payment; check the amount (the maximum is set with `horizon-terminal init --max-amount` or `activate --max-amount`)\n",
                status: 1),
            Case(
                program: "horizon-terminal",
                arguments: [
                    "activate", "--data-dir", sandbox.path("activated"), "--server", stoppedServer, "--email",
                    "owner@example.com", "--password-file", passwordFile,
                ],
                standardError:
                    "error: activation failed: the server at \(stoppedServer) does not answer (connection refused; is it running?)\n",
                status: 1),
            Case(
                program: "horizon-terminal",
                arguments: ["pay", "1", "--wait-for-wallet", "1", "--data-dir", terminal, "--radio-socket", socket],
                standardError: "error: no wallet paid within 1 s\n", status: 1),
        ]
        for testCase in cases {
            let result = try Programs.run(testCase.program, testCase.arguments)
            // The refund's usage line lists every option; its first line and the exit code say enough.
            let text =
                testCase.arguments.first == "refund"
                ? String(result.standardError.prefix(while: { $0 != "\n" })) + "\n" : result.standardError
            #expect(text == testCase.standardError, "\(testCase)")
            #expect(result.status == testCase.status, "\(testCase): \(result.standardError)")
        }
    }

    /// A wallet whose balance does not cover the sale hears why in words, the cashier hears that
    /// no wallet paid once the wait is over, and a refund of that declined payment says nothing
    /// was charged. A wallet holding none of the currency is told so at the register.
    @Test func aDeclineItsWaitAndItsRefundSayWhy() throws {
        let sandbox = try Sandbox()
        let (terminal, wallet, socket) = try sandbox.initializeTerminalAndWallet()
        let sale = try Programs.start(
            "horizon-terminal",
            ["pay", "1000", "--wait-for-wallet", "8", "--data-dir", terminal, "--radio-socket", socket])
        let paying = try Programs.run(
            "horizon-wallet", ["pay", "--yes", "--data-dir", wallet, "--radio-socket", socket, "--timeout", "30"])
        let register = sale.finish()
        #expect(
            paying.standardError
                == "error: The payment was declined (the wallet's balance does not cover 1000.00 EUR); nothing was charged.\n"
        )
        #expect(paying.status == 1)
        #expect(
            register.standardOutput.contains(
                "was declined (insufficient funds: 1000.00 EUR needed, 100.00 EUR available); nothing was charged"),
            "\(register.standardOutput)")
        #expect(register.standardError == "error: no wallet paid within 8 s\n")
        #expect(register.status == 1)

        let listed = try Programs.run("horizon-terminal", ["transactions", "--data-dir", terminal])
        // The decline's words, not its code's name.
        #expect(
            listed.standardOutput.contains("  (insufficient funds: 1000.00 EUR needed, 100.00 EUR available)\n"),
            "\(listed.standardOutput)")
        #expect(!listed.standardOutput.contains("insufficientFunds"))
        let paymentID = try #require(
            listed.standardOutput.split(separator: " ").first(where: { $0.count == 32 }).map(String.init),
            "\(listed.standardOutput)")
        let refund = try Programs.run(
            "horizon-terminal", ["refund", paymentID, "--refund-id", "r-1", "--data-dir", terminal])
        #expect(
            refund.standardError
                == "error: payment \(paymentID) was declined and nothing was charged, so there is nothing to refund\n")
        #expect(refund.status == 1)

        // A terminal whose new wallets start with nothing: the wallet holds no EUR.
        let empty = sandbox.path("empty")
        #expect(
            try Programs.run("horizon-terminal", ["init", "--data-dir", empty, "--starting-balance", "0"]).status == 0)
        let emptyWallet = sandbox.path("empty-wallet")
        #expect(
            try Programs.run("horizon-wallet", ["init", "--data-dir", emptyWallet, "--trust", empty + "/anchor.pub"])
                .status == 0)
        let emptySale = try Programs.start(
            "horizon-terminal", ["pay", "5", "--wait-for-wallet", "6", "--data-dir", empty, "--radio-socket", socket])
        let emptyPaying = try Programs.run(
            "horizon-wallet", ["pay", "--yes", "--data-dir", emptyWallet, "--radio-socket", socket, "--timeout", "30"])
        let emptyRegister = emptySale.finish()
        #expect(
            emptyRegister.standardOutput.contains("was declined (this wallet holds no EUR); nothing was charged"),
            "\(emptyRegister.standardOutput)")
        #expect(emptyPaying.status == 1)
    }

    /// On a terminal the status line is redrawn in place; a log line (--verbose) starts on a
    /// line of its own instead of continuing it. `script` gives the program a pseudo-terminal.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func aLogLineIsNotGluedToTheStatusLine() throws {
        let sandbox = try Sandbox()
        let (terminal, _, socket) = try sandbox.initializeTerminalAndWallet()
        let command = [
            Programs.url("horizon-terminal").path, "pay", "1", "--wait-for-wallet", "2", "--verbose", "--data-dir",
            terminal, "--radio-socket", socket,
        ].joined(separator: " ")
        let run = try RunningProgram(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qc", command, "/dev/null"], input: nil
        )
        .finish()
        let lines = run.standardOutput.split(whereSeparator: \.isNewline)
        let status = lines.filter { $0.contains("1.00 EUR — waiting for a wallet") }
        #expect(!status.isEmpty, "\(run.standardOutput)")
        #expect(status.allSatisfy { !$0.contains("horizon.terminal:") }, "\(status)")
    }

    /// A pending row and a receipt for the same payment (a Ctrl-C after confirming) are one
    /// payment in the history: the settled one.
    @Test func aPaymentWithAReceiptIsNotAlsoPending() {
        struct Row { let id: String }
        let pending = [Row(id: "AA11"), Row(id: "bb22")]
        #expect(HistoryMerge.unsettled(pending, id: \.id, settled: ["aa11"]).map(\.id) == ["bb22"])
        #expect(HistoryMerge.unsettled(pending, id: \.id, settled: []).map(\.id) == ["AA11", "bb22"])
    }

    /// A TCP port on this machine that nothing listens on: a server that is stopped.
    static func closedPort() throws -> UInt16 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw SandboxError("socket failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else { throw SandboxError("bind failed") }
        return UInt16(bigEndian: address.sin_port)
    }
}
