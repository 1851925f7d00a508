import Foundation
import HorizonTestSupport
import Testing

/// The benchmarks' smoke runs, on the debug programs the test run built, so
/// that the scripts and `horizon-bench` cannot rot between publishing runs. The numbers mean
/// nothing here; the shape of the results and the paths taken do.
// Off the cooperative pool: the test waits for the script's process, blocking its thread.
@Suite(.offTheCooperativePool) struct BenchmarkSmokeTests {
    @Test func theQuickBenchmarkRunsEveryMeasurementOnTheSimulatedRadio() throws {
        let directory = try Self.temporaryDirectory("bench-quick")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("latest.json").path
        let run = try ScriptRun(
            [
                "--bin", try ScriptRun.binDirectory(), "--quick", "--output", output, "--data-dir", directory.path,
                // Light on a parallel test run: the 100-pair scaling point and a second start-up add nothing here.
                "--pairs", "1,10", "--terminal-runs", "1",
            ],
            script: "Benchmarks/run.sh")
        #expect(run.status == 0, "Benchmarks/run.sh --quick failed:\n\(run.output)")
        let result = try Self.json(output)
        for section in ["paymentCPU", "latency", "scaling", "terminalAtRest", "budget"] {
            #expect(result[section] != nil, "no \(section) in the result")
        }
        let cpu = try #require(result["paymentCPU"] as? [String: Any])
        #expect(cpu["settlement"] as? String == "in-process ledger (SQLite)")
    }

    /// payment-cpu counts the synced commits of every payment on each side's files, and they are
    /// the durability rules' minimum: one in the terminal's journal (the confirmed request), one
    /// in the wallet's store (its pending request) and one in the in-process ledger (the
    /// execution). Without the ledger (`--processor instant`) there is no ledger count.
    @Test func paymentCPUCountsOneSyncedCommitPerPaymentOnEachSide() throws {
        let directory = try Self.temporaryDirectory("bench-synced")
        defer { try? FileManager.default.removeItem(at: directory) }
        for processor in ["ledger", "instant"] {
            let output = directory.appendingPathComponent("\(processor).json").path
            let run = try Self.bench([
                "--only", "payment-cpu", "--iterations", "5", "--quick", "--processor", processor, "--data-dir",
                directory.path, "--output", output,
            ])
            #expect(run.status == 0, "horizon-bench --processor \(processor) failed:\n\(run.output)")
            let cpu = try #require(try Self.json(output)["paymentCPU"] as? [String: Any])
            let synced = try #require(cpu["syncedCommitsPerPayment"] as? [String: Any])
            for side in ["terminalJournal", "wallet"] + (processor == "ledger" ? ["ledger"] : []) {
                let counts = try #require(synced[side] as? [String: Any], "\(processor): no \(side) count")
                #expect(counts["count"] as? Int == 5, "\(processor), \(side): \(counts)")
                let least = (counts["min"] as? NSNumber)?.doubleValue
                let most = (counts["max"] as? NSNumber)?.doubleValue
                #expect(least == 1 && most == 1, "\(processor), \(side): \(counts)")
            }
            if processor == "instant" { #expect(synced["ledger"] == nil) }
            #expect(run.output.contains("synced commits per payment (median): terminal journal 1, wallet 1"))
        }
    }

    /// `terminal-share.sh`: the in-process payment and the same payment settled through a
    /// `horizon-server` the script starts (a terminal activated and a wallet registered through
    /// the endpoints), with the server process's CPU beside it.
    @Test func theTerminalShareRunSettlesThroughARealServer() throws {
        let directory = try Self.temporaryDirectory("bench-share")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("share.json").path
        let run = try ScriptRun(
            [
                "--bin", try ScriptRun.binDirectory(), "--iterations", "10", "--disk", directory.path, "--output",
                output,
            ],
            script: "Benchmarks/terminal-share.sh")
        #expect(run.status == 0, "Benchmarks/terminal-share.sh failed:\n\(run.output)")
        let result = try Self.json(output)
        let local = try #require(result["inProcess"] as? [String: Any])
        let remote = try #require(result["throughServer"] as? [String: Any])
        #expect(local["iterations"] as? Int == 10 && remote["iterations"] as? Int == 10)
        #expect((remote["settlement"] as? String)?.hasPrefix("horizon-server at http://127.0.0.1:") == true)
        // The baseline counts the request's signature: one ECDSA signature and one SHA-256 more.
        let operations = try #require(remote["cryptoOperations"] as? [String: Int])
        #expect(operations["ecdsaSign"] == 6 && operations["sha256"] == 8)
        #expect((result["serverProcessCPUMicrosecondsPerPayment"] as? Double ?? 0) > 0)
        // Through the server the terminal still syncs its confirmed request and the wallet its
        // pending one; the ledger's commit is the server's.
        let synced = try #require(remote["syncedCommitsPerPayment"] as? [String: Any])
        for side in ["terminalJournal", "wallet"] {
            #expect(((synced[side] as? [String: Any])?["max"] as? NSNumber)?.doubleValue == 1, "\(side): \(synced)")
        }
        #expect(synced["ledger"] == nil)
    }

    /// `bluez-vm.sh --help` explains the script and horizon-bench's options; it boots no VM and
    /// writes no result (it used to pass `--help` to horizon-bench inside the VM, whose table
    /// then replaced the published one).
    @Test func theBlueZScriptsHelpBootsNoVirtualMachine() throws {
        let run = try ScriptRun(["--help"], script: "Benchmarks/bluez-vm.sh", timeout: 60)
        #expect(run.status == 0, "Benchmarks/bluez-vm.sh --help failed:\n\(run.output)")
        #expect(run.output.contains("The BlueZ part of the benchmarks"))
        #expect(run.output.contains("horizon-bench's options"))
        #expect(!run.output.contains("run-in-vm.sh]"), "a VM was started:\n\(run.output)")
        #expect(!run.output.contains("[bluez-vm.sh] result:"))
    }

    /// `--processor instant`: payment-cpu without any ledger (the ledger's share told apart), and
    /// the combinations it refuses, each with its message.
    @Test func paymentCPUWithoutALedgerAndWhatProcessorRefuses() throws {
        let directory = try Self.temporaryDirectory("bench-instant")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("instant.json").path
        let run = try Self.bench([
            "--only", "payment-cpu", "--iterations", "10", "--processor", "instant", "--data-dir", directory.path,
            "--output", output,
        ])
        #expect(run.status == 0, "horizon-bench --processor instant failed:\n\(run.output)")
        let cpu = try #require(try Self.json(output)["paymentCPU"] as? [String: Any])
        #expect(cpu["settlement"] as? String == "instant approval, no ledger (--processor instant)")
        #expect(cpu["iterations"] as? Int == 10)

        let throughServer = try Self.bench([
            "--only", "payment-cpu", "--processor", "instant", "--through-server", "http://127.0.0.1:9",
            "--through-server-database", "sqlite:\(directory.path)/none.sqlite", "--through-server-email",
            "a@b.example", "--through-server-password-file", "\(directory.path)/none",
        ])
        #expect(throughServer.status == 64)
        #expect(throughServer.output.contains("Error: --processor instant settles in-process, not through a server"))

        let unknown = try Self.bench(["--only", "payment-cpu", "--processor", "sandbox"])
        #expect(unknown.status == 64)
        #expect(unknown.output.contains("The value 'sandbox' is invalid for '--processor <processor>'"))
        #expect(unknown.output.contains("Please provide one of 'ledger' and 'instant'."))
    }

    /// Runs the built `horizon-bench` with `arguments`; its exit status and everything it wrote.
    static func bench(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try ScriptRun.binDirectory()).appendingPathComponent(
            "horizon-bench")
        process.arguments = arguments
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString).log")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.runCheckingDescriptors()
        process.waitUntilExit()
        try handle.close()
        return (process.terminationStatus, String(decoding: try Data(contentsOf: output), as: UTF8.self))
    }

    static func temporaryDirectory(_ prefix: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    static func json(_ path: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}
